"""Incremental insert and delete: the next engine state from the current one and a delta.

:func:`update_state` applies new, changed and deleted documents to an
:class:`~graphstrata.state.EngineState` without re-running the whole pipeline (issue 16):

1. **Chunks.** Only the new documents are chunked and embedded; the deleted documents' chunks
   drop out. Chunk rows are the surviving rows in their old order, then the new chunks.
2. **Knowledge graph.** Statistically extracted graphs keep one
   :class:`~graphstrata.extraction.ChunkRecord` per chunk, and the KG is their merge
   (:func:`~graphstrata.extraction.merge_records`). New chunks are extracted with the TF-IDF
   model frozen at the last full build; every entity a new or deleted chunk mentions is
   re-merged from the records of its chunks (LightRAG's merge, ``seed-lightrag.md`` §3: union
   of chunks, descriptions and weights; a delete shrinks them), so entities and relations that
   only deleted chunks supported disappear. With an LLM extractor the graph is re-extracted
   through the LLM client, whose response cache answers every unchanged chunk without a call,
   and the changed entities are found by comparison.
3. **Entity vectors.** New entities are embedded; an existing entity gets a new vector only
   when its chunk set changed by more than :data:`ENTITY_VECTOR_DRIFT` (Jaccard distance of
   old and new chunk sets) or its name changed, so hubs such as a year do not churn the index.
4. **Communities**, bottom-up, layer by layer (ArchRAG's hierarchy, ``seed-archrag.md`` §1):
   members that disappeared leave their community; a new entity joins the layer-1 community it
   has the most relation weight to (its nearest community vector when it has no linked,
   clustered neighbour); a community whose size exceeds :data:`SPLIT_FACTOR` ×
   ``max_community_size``, or whose cohesion (mean cosine of members to their centroid) fell by
   more than :data:`COHESION_DROP`, is re-clustered locally with the build's procedure
   (k-NN-augmented weighted Leiden with the size cap, graspologic-native) over its own
   members; the parts join the parent of the original. Only touched communities — changed
   members, or a member whose vector, name or description changed — get a new summary and
   vector, and their parents follow, up to the top layer; a community whose members only
   gained or lost chunks keeps its summary and vector and gets its chunk provenance
   recomputed. Empty communities are removed.
5. **Indexes.** The C-HNSW copies of the next state mark the vectors of removed or changed
   rows deleted and ``add`` the new ones (:meth:`~graphstrata.index.LayeredIndex.updated`);
   past :data:`~graphstrata.index.COMPACT_FRACTION` deleted nodes they are rebuilt from the live
   vectors. BM25 keeps every chunk's tokens and re-indexes them (exact idf and lengths; bm25s
   cannot update its score matrix) on the next state's first BM25 query, so a burst of inserts
   pays it once.

Method-specific derived structures (ArchRAG/AGRAG passage graphs, LightRAG relation index,
HiRAG GMM layers, PPR graphs) live in the state's derived cache, which the next state starts
empty: each is rebuilt from the new records on its first query (HiRAG's LLM summary entities
eagerly, through the response cache).

The previous state is never modified, so concurrent queries read the old or the new state.
Cases that do not fit the incremental path fall back to a full build over the new corpus
(reusing chunk vectors): an index without entities or without community layers, or an update
that empties a whole community layer.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from .extraction import ChunkRecord, StatisticalExtractor, merge_records, split_sentences
from .graph import KnowledgeGraph
from .hierarchy import extractive_summary, knn_augment, leiden_clusters, rank_chunks
from .index import ChunkIndex, lexical_texts, stored_vectors
from .indexing import (
    Progress,
    _entity_vectors,
    _extractor,
    build_state,
    chunk_stage,
    fit_summary_tfidf,
    hierarchy_config,
)
from .llm import usage_scope
from .runner import current_runner
from .state import EngineState, new_drift
from .types import Chunk, Community, Document, Entity, Relation

ENTITY_VECTOR_DRIFT = 0.2
"""An existing entity is re-embedded when the Jaccard distance between its old and new chunk
sets exceeds this (or its name changed); otherwise its vector is kept."""

SPLIT_FACTOR = 1.5
"""A community growing past ``SPLIT_FACTOR × max_community_size`` members is re-clustered."""

COMMUNITY_VECTOR_DRIFT = 0.99
"""A touched community keeps its summary and vector while the cosine between its members'
centroid and the centroid its vector was computed from stays at or above this; only its
entity and chunk lists are refreshed. Past it, summary and vector are recomputed."""

COHESION_DROP = 0.1
"""A community whose cohesion (mean member-to-centroid cosine) fell by more than this in an
update is re-clustered."""


def update_state(
    state: EngineState,
    upserts: Sequence[Document] = (),
    deletes: Collection[str] = (),
    show_progress: bool = False,
) -> EngineState:
    """The next state: ``upserts`` added (or replacing the documents with their ids) and the
    ``deletes`` ids removed, incrementally (see the module docstring).

    Args:
        state: the current state (not modified).
        upserts: new documents, or new versions of indexed ones (an updated document moves to
            the end of the document order).
        deletes: ids of indexed documents to remove.
        show_progress: progress bars per stage (stderr).

    Returns:
        A new :class:`~graphstrata.state.EngineState` with ``generation + 1`` and updated
        ``drift`` counters.

    Raises:
        KeyError: an id in ``deletes`` is not indexed (named).
        ValueError: the update would leave no document or no text; embedder output of the
            wrong shape; a document over ``config.max_document_chars``.
        graphstrata.llm.LLMError: an LLM call failed after its retries.
    """
    unknown = [d for d in deletes if d not in state.documents]
    if unknown:
        raise KeyError(f"document id(s) not in the index: {unknown[:5]}")
    gone_docs = set(deletes) | {d.id for d in upserts if d.id in state.documents}
    documents = {i: d for i, d in state.documents.items() if i not in gone_docs}
    for d in upserts:
        documents[d.id] = d
    if not documents:
        raise ValueError("cannot delete every document: an index needs at least one")
    t0 = time.perf_counter()
    if build_llm(state) is None:
        new = _update(state, documents, list(upserts), gone_docs, show_progress)
    else:
        with usage_scope() as ledger:
            new = _update(state, documents, list(upserts), gone_docs, show_progress)
            if new.llm is not None and new.communities:
                from .methods.hirag import hi_index

                Progress(show_progress).stage("HiRAG summary entities (LLM)", lambda: hi_index(new))
        new.drift["last_update_usage"] = ledger.to_dict()  # type: ignore[index]
    new.drift["last_update_seconds"] = round(time.perf_counter() - t0, 4)  # type: ignore[index]
    return new


def rebuild_state(state: EngineState, show_progress: bool = False) -> EngineState:
    """A full build over ``state``'s documents: every statistic refitted (TF-IDF models, the
    whole hierarchy, both C-HNSW), chunk vectors reused; drift counters reset and the frozen
    statistics' version incremented.

    Raises:
        ValueError: as :func:`~graphstrata.indexing.build_state`.
        graphstrata.llm.LLMError: an LLM call failed (LLM-built index).
    """
    new = _full(state, list(state.documents.values()), show_progress)
    new.drift["stats_version"] = int(state.drift.get("stats_version", 1)) + 1  # type: ignore[index]
    return new


def build_llm(state: EngineState) -> Any:
    """The LLM an update of ``state`` may use at index time: the attached one when the index
    was built with an LLM, else ``None`` — an offline index with an LLM attached for answers
    stays offline when it is updated (no surprise bill for re-extraction)."""
    return state.llm if state.llm_id is not None else None


def _full(state: EngineState, docs: list[Document], show_progress: bool) -> EngineState:
    vecs = state.vectors["chunks"]
    cached = {(c.id, c.text): vecs[i] for i, c in enumerate(state.chunks)}
    new = build_state(
        docs,
        state.config,
        state.embedder,
        show_progress=show_progress,
        cached_chunk_vectors=cached,
        generation=state.generation + 1,
        llm=build_llm(state),
    )
    if new.llm is not state.llm:  # keep the query-time LLM of an offline index attached
        new = dataclasses.replace(new, llm=state.llm)
    return new


def _update(
    state: EngineState,
    documents: dict[str, Document],
    upserts: list[Document],
    gone_docs: set[str],
    show_progress: bool,
) -> EngineState:
    if state.layered is None or not state.communities or not len(state.kg):
        return _carry_version(state, _full(state, list(documents.values()), show_progress))
    config, embedder = state.config, state.embedder
    prog = Progress(show_progress)
    # 1. chunks --------------------------------------------------------------------------
    new_chunks = prog.stage("chunking", lambda: chunk_stage(upserts, config, embedder) if upserts else [])
    keep_rows = np.asarray(
        [i for i, c in enumerate(state.chunks) if c.document_id not in gone_docs], dtype=np.int64
    )
    removed_chunks = [c for c in state.chunks if c.document_id in gone_docs]
    chunks: list[Chunk] = [state.chunks[i] for i in keep_rows.tolist()] + new_chunks
    if not chunks:
        raise ValueError("empty corpus: the documents contain no text")
    chunk_row = {c.id: i for i, c in enumerate(chunks)}
    new_vecs = prog.embed(embedder, [c.text for c in new_chunks], "embedding chunks")
    chunk_vecs = np.vstack([state.vectors["chunks"][keep_rows], new_vecs]).astype(np.float32)

    # 2. knowledge graph -----------------------------------------------------------------
    titles = {d.id: d.metadata["title"] for d in documents.values() if d.metadata.get("title")}
    extractor = _extractor(config, build_llm(state), show_progress)
    records: dict[str, ChunkRecord] | None = None
    frozen = dict(state.frozen)
    if isinstance(extractor, StatisticalExtractor):
        old_records = state.records
        if old_records is None or "extraction" not in frozen:  # an index persisted before schema 4
            old_records, frozen = prog.stage(
                "deriving extraction records", lambda: _derive_records(state, extractor, frozen)
            )
        new_recs = prog.stage(
            "extracting entities",
            lambda: current_runner().chunk_records(extractor, new_chunks, titles, frozen.get("extraction")),
        )
        records = {c.id: old_records[c.id] for c in chunks[: len(keep_rows)]}
        records.update({r.chunk_id: r for r in new_recs})
        kg_entities, relations, affected = prog.stage(
            "merging entities",
            lambda: _merge_delta(
                state.kg, [old_records[c.id] for c in removed_chunks], new_recs, records, chunk_row,
                extractor.max_description_sentences,
            ),
        )
        entity_order = sorted(kg_entities)  # merge_records' order, as in a build
    else:
        ents, rels = prog.stage("extracting entities", lambda: extractor.extract(chunks, titles))
        kg_entities, relations, affected = _diff(state.kg, ents, rels)
        entity_order = [e.id for e in ents]
    if not kg_entities:
        return _carry_version(state, _full(state, list(documents.values()), show_progress))

    # 3. entity rows and vectors (row order as a build gives it: the extractor's order) ----
    old_kg = state.kg
    old_ent_vecs = state.vectors["entities"]
    entity_ids = list(entity_order)
    kg = (
        KnowledgeGraph.from_keyed([kg_entities[e] for e in entity_ids], relations)
        if isinstance(relations, dict)
        else KnowledgeGraph([kg_entities[e] for e in entity_ids], relations)
    )
    ent_old_rows = np.full(len(entity_ids), -1, np.int64)
    for i, eid in enumerate(entity_ids):
        row = old_kg.row.get(eid)
        if row is not None and not (eid in affected and _needs_vector(old_kg.entities[eid], kg_entities[eid])):
            ent_old_rows[i] = row
    fresh = np.flatnonzero(ent_old_rows < 0)
    entity_vecs = np.zeros((len(entity_ids), embedder.dim), np.float32)
    entity_vecs[ent_old_rows >= 0] = old_ent_vecs[ent_old_rows[ent_old_rows >= 0]]
    if len(fresh):
        entity_vecs[fresh] = _entity_vectors(
            kg, chunk_row, chunk_vecs, config, embedder, prog, ids=[entity_ids[i] for i in fresh]
        )
    vec_of = {eid: entity_vecs[i] for i, eid in enumerate(entity_ids)}

    # 4. communities ---------------------------------------------------------------------
    delta_pairs = None
    if records is not None:  # every relation of a new entity is named by a new chunk
        delta_pairs = {p for r in new_recs for p in r.relations}
    hier = _Hierarchy(state, kg, vec_of, frozen, prog, delta_pairs)
    brand_new = [e for e in entity_ids if e not in old_kg.entities]
    gone_entities = {e for e in old_kg.entities if e not in kg.entities}
    below_removed = gone_entities
    below_added: dict[str, str | None] = {e: None for e in brand_new}  # new node -> sibling
    # content changes that need a new summary and vector: a new entity vector, name or
    # description; a change of chunks or weight alone only refreshes the communities' provenance
    below_touched = {
        e for e in affected
        if e in kg.entities and (
            ent_old_rows[kg.row[e]] < 0
            or kg.entities[e].description != old_kg.entities[e].description
            or kg.entities[e].name != old_kg.entities[e].name
        )
    }
    below_provenance = {e for e in affected if e in kg.entities and e not in below_touched}
    old_rows: list[np.ndarray] = [ent_old_rows]
    layers: list[list[Community]] = []
    layer_vecs: list[np.ndarray] = []
    for level in range(1, len(state.communities) + 1):
        result = hier.update_layer(level, below_removed, below_added, below_touched, below_provenance)
        if result is None:  # the layer would be empty
            return _carry_version(state, _full(state, list(documents.values()), show_progress))
        comms, vecs, rows, below_removed, below_added, below_touched, below_provenance = result
        layers.append(comms)
        layer_vecs.append(vecs)
        old_rows.append(rows)

    # 5. indexes -------------------------------------------------------------------------
    layered = prog.stage(
        "indexing layers (C-HNSW)",
        lambda: state.layered.updated(
            old_rows, [entity_vecs, *layer_vecs], M=config.hnsw_M, ef_construction=config.hnsw_ef_construction
        ),
    )
    chunk_old_rows = np.concatenate([keep_rows, np.full(len(new_chunks), -1, np.int64)])
    chunk_index: ChunkIndex = prog.stage(
        "indexing chunks (C-HNSW)",
        lambda: state.chunk_index.updated(
            chunk_old_rows, chunk_vecs, M=config.hnsw_M, ef_construction=config.hnsw_ef_construction
        ),
    )
    bm25 = prog.stage(
        "indexing chunks (BM25)",
        lambda: state.bm25.updated(keep_rows, lexical_texts(new_chunks, documents, config.use_titles)),
    )
    # the indexes' own copies, as a load of the persisted state reads them (schema 5)
    vectors = stored_vectors(chunk_index, layered, state.embedder.dim)
    drift = dict(state.drift) or new_drift(
        len(state.documents), len(state.chunks), len(old_kg), sum(len(x) for x in state.communities)
    )
    for key, n in (
        ("documents_added", len(upserts)),
        ("documents_removed", len(gone_docs)),
        ("chunks_added", len(new_chunks)),
        ("chunks_removed", len(removed_chunks)),
        ("entities_added", len(brand_new)),
        ("entities_removed", len(gone_entities)),
        ("communities_reclustered", hier.reclustered),
        ("communities_resummarised", hier.resummarised),
        ("updates", 1),
    ):
        drift[key] = int(drift.get(key, 0)) + int(n)
    # the rest (config, embedder, build seconds and usage, LLM) carries over; the derived
    # cache starts empty
    return dataclasses.replace(
        state,
        documents=documents,
        chunks=chunks,
        chunk_row=chunk_row,
        kg=kg,
        communities=layers,
        layered=layered,
        chunk_index=chunk_index,
        bm25=bm25,
        vectors=vectors,
        generation=state.generation + 1,
        records=records,
        frozen=frozen,
        drift=drift,
    )


def _carry_version(old: EngineState, new: EngineState) -> EngineState:
    """A fallback full build keeps counting the frozen statistics' versions."""
    new.drift["stats_version"] = int(old.drift.get("stats_version", 1)) + 1  # type: ignore[index]
    return new


def _derive_records(
    state: EngineState, extractor: StatisticalExtractor, frozen: dict[str, Any]
) -> tuple[dict[str, ChunkRecord], dict[str, Any]]:
    """Extraction records and frozen TF-IDF models of an index persisted before schema 4: the
    extraction the build ran (fitted on the same chunks, so the same records)."""
    titles = {d.id: d.metadata["title"] for d in state.documents.values() if d.metadata.get("title")}
    tfidf, terms = extractor.fit([c.text for c in state.chunks])
    recs = extractor.chunk_records(state.chunks, titles, None, terms=terms)
    out = dict(frozen)
    if tfidf is not None:
        out["extraction"] = tfidf
    if "summary" not in out:
        summary = fit_summary_tfidf([c.text for c in state.chunks])
        if summary is not None:
            out["summary"] = summary
    return {r.chunk_id: r for r in recs}, out


def _merge_delta(
    old_kg: KnowledgeGraph,
    removed: Sequence[ChunkRecord],
    added: Sequence[ChunkRecord],
    records: Mapping[str, ChunkRecord],
    chunk_row: Mapping[str, int],
    max_sents: int,
) -> tuple[dict[str, Entity], dict[tuple[str, str], Relation], set[str]]:
    """Re-merge every entity the removed or added chunk records mention.

    Returns:
        ``(entities, relations, affected)``: all entities of the next KG by id, all its
        relations, and the affected entity ids (present or gone).
    """
    affected: set[str] = set()
    for rec in (*removed, *added):
        affected.update(rec.entities)
    chunk_ids: set[str] = set()
    for key in affected:
        old = old_kg.entities.get(key)
        if old is not None:
            chunk_ids.update(c for c in old.chunk_ids if c in records)
    for rec in added:
        chunk_ids.add(rec.chunk_id)
    ordered = sorted(chunk_ids, key=chunk_row.__getitem__)
    ents, rels = merge_records([records[c] for c in ordered], only=affected, max_description_sentences=max_sents)
    entities = {e: old_kg.entities[e] for e in old_kg.entity_ids if e not in affected}
    entities.update({e.id: e for e in ents})
    # a relation depends only on the records naming its pair: only those pairs changed
    changed_pairs = {p for rec in (*removed, *added) for p in rec.relations}
    relations = dict(old_kg.relations)
    for p in changed_pairs:
        relations.pop(p, None)
    for r in rels:
        if (r.source, r.target) in changed_pairs:
            relations[(r.source, r.target)] = r
    return entities, relations, affected


def _diff(
    old_kg: KnowledgeGraph, ents: Sequence[Entity], rels: Sequence[Relation]
) -> tuple[dict[str, Entity], list[Relation], set[str]]:
    """The affected entity ids between an old KG and a freshly extracted one (LLM path): new,
    gone, or changed in any field, or with a changed relation."""
    new = {e.id: e for e in ents}
    affected = {e for e in old_kg.entities if e not in new}
    affected.update(e for e, x in new.items() if old_kg.entities.get(e) != x)
    new_rels = {(min(r.source, r.target), max(r.source, r.target)): r for r in rels}
    for key in set(new_rels) | set(old_kg.relations):
        if new_rels.get(key) != old_kg.relations.get(key):
            affected.update(key)
    return new, list(rels), affected


def _needs_vector(old: Entity, new: Entity) -> bool:
    if old.name != new.name:
        return True
    a, b = set(old.chunk_ids), set(new.chunk_ids)
    return len(a ^ b) > ENTITY_VECTOR_DRIFT * len(a | b)


class _Hierarchy:
    """Layer-by-layer repair of the community hierarchy (module docstring, step 4)."""

    def __init__(self, state: EngineState, kg: KnowledgeGraph, vec_of: dict[str, np.ndarray],
                 frozen: Mapping[str, Any], prog: Progress, delta_pairs: set[tuple[str, str]] | None = None) -> None:
        self.state = state
        self.config = state.config
        self.kg = kg
        self.prog = prog
        self.below_vec = vec_of  # id -> vector of every node of the layer below (new state)
        self.below_old_vec = {e: state.vectors["entities"][i] for e, i in state.kg.row.items()}
        self.below_comm: dict[str, Community] = {}  # layer >= 2: the members' records
        summary = frozen.get("summary")
        self.vectorizer = summary.vectorizer() if summary is not None else None
        self.reclustered = 0
        self.resummarised = 0
        self._adj: dict[str, list[str]] | None = None
        self._delta_adj: dict[str, list[str]] | None = None
        if delta_pairs is not None:
            self._delta_adj = {}
            for a, b in delta_pairs:
                self._delta_adj.setdefault(a, []).append(b)
                self._delta_adj.setdefault(b, []).append(a)
        self.use_reports = build_llm(state) is not None and self.config.llm_community_reports
        self.embed_summaries = self.config.community_vectors == "summary" or self.use_reports
        self.hcfg = hierarchy_config(self.config)

    # -- one layer ------------------------------------------------------------------------
    def update_layer(self, level: int, below_removed: set[str], below_added: dict[str, str | None],
                     below_touched: set[str], below_provenance: set[str]):
        old = self.state.communities[level - 1]
        old_vecs = self.state.vectors[f"layer_{level}"]
        comms = {c.id: c for c in old}  # copied on first edit (most communities are untouched)
        parent_of = {m: c.id for c in old for m in c.members}
        touched: set[str] = set()
        old_members: dict[str, list[str]] = {}

        def edit(cid: str) -> Community:
            c = comms[cid]
            if cid not in touched:
                old_members[cid] = c.members
                comms[cid] = c = dataclasses.replace(c, members=list(c.members))
                touched.add(cid)
            return c

        shrunk: set[str] = set()  # lost members: always re-summarised (no stale names)
        for m in below_removed:
            if m in parent_of:
                edit(parent_of[m]).members.remove(m)
                shrunk.add(parent_of[m])
        for m in below_touched:
            if m in parent_of:
                edit(parent_of[m])
        # a member whose chunks alone changed: the community's provenance is recomputed, its
        # summary and vector are kept
        provenance: dict[str, Community] = {}
        for m in below_provenance:
            cid = parent_of.get(m)
            if cid is not None and cid not in touched and cid not in provenance:
                provenance[cid] = comms[cid] = dataclasses.replace(comms[cid])
        # new nodes of the layer below join a community
        centroid_ids = [c.id for c in old]
        orphans = []
        for node, sibling in below_added.items():
            home = parent_of.get(sibling) if sibling is not None else None
            if home is None or home not in comms:
                orphans.append(node)
                continue
            edit(home).members.append(node)
            parent_of[node] = home
        for node, home in self._assign(level, orphans, parent_of, comms, centroid_ids, old_vecs).items():
            edit(home).members.append(node)
            parent_of[node] = home
        # drift: split what grew too large or lost cohesion; drop what is empty
        removed: set[str] = set()
        split: set[str] = set()
        new_nodes: dict[str, str | None] = {}
        next_index = 1 + max((int(c.id.split("C", 1)[1]) for c in old if "C" in c.id), default=-1)
        for cid in sorted(touched):
            c = comms[cid]
            if not c.members:
                removed.add(cid)
                continue
            parts = self._split(level, c, old_members=old_members.get(cid, []))
            if len(parts) > 1:
                split.add(cid)
                self.reclustered += 1
                c.members = parts[0]
                for part in parts[1:]:
                    nid = f"L{level}C{next_index}"
                    next_index += 1
                    comms[nid] = Community(id=nid, layer=level, members=part)
                    new_nodes[nid] = cid
        if len(removed) == len(comms):
            return None
        # a touched community whose centroid barely moved since its vector was computed keeps
        # summary and vector (changes accumulate until they pass the threshold)
        old_row = {c.id: i for i, c in enumerate(old)}
        for cid in sorted(touched - removed - split - shrunk):
            c = comms[cid]
            if self._settled(c, old_vecs[old_row[cid]], old_members.get(cid, [])):
                touched.discard(cid)
                provenance[cid] = c
        fresh = [cid for cid in touched if cid not in removed] + list(new_nodes)
        for cid in list(provenance):
            if cid in touched or cid in removed:
                del provenance[cid]
        self._provenance(level, list(provenance.values()))
        self._describe(level, [comms[cid] for cid in fresh])
        fresh_vec = dict(zip(fresh, self._vectors(level, [comms[cid] for cid in fresh]), strict=True))
        # rows: surviving communities keep their position, new ones are appended; a touched
        # community keeps its row but gets a new vector (old_rows -1: a new native node)
        order = [c.id for c in old if c.id not in removed] + list(new_nodes)
        layer = [comms[cid] for cid in order]
        rows = np.asarray([-1 if cid in fresh_vec else old_row[cid] for cid in order], np.int64)
        vecs = np.vstack(
            [fresh_vec[cid] if cid in fresh_vec else old_vecs[old_row[cid]] for cid in order]
        ).astype(np.float32)
        # what the layer above sees
        self.below_old_vec = {c.id: old_vecs[i] for i, c in enumerate(old)}
        self.below_vec = {c.id: vecs[i] for i, c in enumerate(layer)}
        self.below_comm = {c.id: c for c in layer}
        return (layer, vecs, rows, removed, new_nodes, {cid for cid in touched if cid not in removed},
                set(provenance))

    def _settled(self, c: Community, old_vec: np.ndarray, old_members: list[str]) -> bool:
        """Whether ``c``'s centroid is within :data:`COMMUNITY_VECTOR_DRIFT` (cosine) of what
        its vector was computed from: its stored vector for centroid vectors, else the centroid
        of its previous members."""
        new = _centroid(np.vstack([self.below_vec[m] for m in c.members]))
        if self.embed_summaries:
            olds = [self.below_old_vec[m] for m in old_members if m in self.below_old_vec]
            if not olds:
                return False
            old_vec = _centroid(np.vstack(olds))
        norm = float(np.linalg.norm(old_vec))
        return norm > 0 and float(new @ old_vec) / norm >= COMMUNITY_VECTOR_DRIFT

    def _neighbors(self, node: str) -> list[str]:
        """KG neighbours of an entity (a dict adjacency built once per update: cheaper than the
        graph's weighted CSR, which the next state builds on its first query)."""
        if self._adj is None:
            adj: dict[str, list[str]] = {}
            for a, b in self.kg.relations:
                adj.setdefault(a, []).append(b)
                adj.setdefault(b, []).append(a)
            self._adj = adj
        return self._adj.get(node, [])

    def _provenance(self, level: int, comms: list[Community]) -> None:
        """Recompute the entity ids and ranked chunk provenance of communities from their
        members (alone where only the members' chunks changed; as part of :meth:`_describe`)."""
        kg = self.kg
        for c in comms:
            if level > 1:
                c.entity_ids = sorted(
                    {e for m in c.members for e in self.below_comm[m].entity_ids}, key=lambda e: kg.row[e]
                )
            else:
                c.entity_ids = sorted(c.members, key=lambda e: kg.row[e])
            c.chunk_ids = rank_chunks([kg.entities[e].chunk_ids for e in c.entity_ids])

    def _assign(self, level, nodes, parent_of, comms, centroid_ids, old_vecs) -> dict[str, str]:
        """Home community of each new node: most link weight (layer 1: KG relations), else the
        nearest community vector."""
        out: dict[str, str] = {}
        if not nodes:
            return out
        pending = list(nodes)
        if level == 1:
            for _ in range(3):  # new entities linked only to each other settle in a few passes
                still = []
                for node in pending:
                    weight: Counter = Counter()
                    nbs = self._delta_adj.get(node, []) if self._delta_adj is not None else self._neighbors(node)
                    for nb in nbs:
                        home = parent_of.get(nb) or out.get(nb)
                        if home is not None and home in comms:
                            weight[home] += self.kg.relation(node, nb).weight
                    if weight:
                        out[node] = max(weight, key=lambda h: (weight[h], h))
                    else:
                        still.append(node)
                if len(still) == len(pending):
                    break
                pending = still
        pending = [n for n in pending if n not in out]
        if pending:
            alive = [i for i, cid in enumerate(centroid_ids) if cid in comms]
            if not alive:
                return out
            q = np.vstack([self.below_vec[n] for n in pending])
            best = np.argmax(q @ old_vecs[np.asarray(alive)].T, axis=1)
            for n, b in zip(pending, best.tolist(), strict=True):
                out[n] = centroid_ids[alive[b]]
        return out

    def _split(self, level: int, c: Community, old_members: list[str]) -> list[list[str]]:
        """Local re-clustering of a drifted community, or ``[members]`` unchanged."""
        members = c.members
        if len(members) < 2:
            return [members]
        vecs = np.vstack([self.below_vec[m] for m in members])
        too_big = len(members) > SPLIT_FACTOR * self.config.max_community_size
        drifted = False
        if not too_big and old_members:
            olds = [self.below_old_vec[m] for m in old_members if m in self.below_old_vec]
            if olds:
                drifted = _cohesion(np.vstack(olds)) - _cohesion(vecs) > COHESION_DROP
        if not (too_big or drifted):
            return [members]
        edges = self._edges(level, members)
        aug, weights = knn_augment(vecs, edges, self.hcfg)
        clusters = leiden_clusters(len(members), aug, weights, vecs, self.hcfg)
        return [[members[i] for i in cl] for cl in clusters] if len(clusters) > 1 else [members]

    def _edges(self, level: int, members: list[str]) -> np.ndarray:
        """int64 ``(m, 2)`` local index pairs of linked members (layer ≥ 2: communities
        linked when their entities are, spec A2)."""
        pos = {m: i for i, m in enumerate(members)}
        pairs: set[tuple[int, int]] = set()
        if level == 1:  # a community is small: test its member pairs (no graph-wide adjacency)
            rel = self.kg.relations
            for i, a in enumerate(members):
                for j in range(i + 1, len(members)):
                    b = members[j]
                    if (a, b) in rel or (b, a) in rel:
                        pairs.add((i, j))
        else:
            owner = {e: pos[m] for m in members for e in self.below_comm[m].entity_ids}
            for e, i in owner.items():
                for nb in self._neighbors(e):
                    j = owner.get(nb)
                    if j is not None and j != i:
                        pairs.add((min(i, j), max(i, j)))
        return np.asarray(sorted(pairs), np.int64).reshape(-1, 2)

    def _describe(self, level: int, comms: list[Community]) -> None:
        """Entity ids, chunk provenance, title and summary (extractive, or an LLM report)."""
        if not comms:
            return
        kg = self.kg
        self._provenance(level, comms)
        candidates = []
        for c in comms:
            if level == 1:
                sentences = [
                    kg.entities[e].description[s:t] for e in c.members
                    for s, t in split_sentences(kg.entities[e].description)
                ]
            else:
                sentences = [self.below_comm[m].summary for m in c.members if self.below_comm[m].summary]
            candidates.append(sentences)
        vectorizer = self.vectorizer
        if vectorizer is not None:  # one TF-IDF transform for every touched community
            vectorizer = _RowCache(vectorizer, [s for sents in candidates for s in sents if s])
        texts = []
        for c, sentences in zip(comms, candidates, strict=True):
            if vectorizer is not None:
                title, summary = extractive_summary(
                    [kg.entities[e].name for e in c.entity_ids],
                    [kg.entities[e].weight for e in c.entity_ids],
                    sentences,
                    vectorizer,
                )
            else:
                title, summary = ", ".join(kg.entities[e].name for e in c.entity_ids[:3]), " ".join(sentences[:3])
            texts.append((title, summary))
        if self.use_reports:
            texts = self._reports(level, comms, texts)
        for c, (title, summary) in zip(comms, texts, strict=True):
            c.title, c.summary = title, summary
        self.resummarised += len(comms)

    def _reports(self, level: int, comms: list[Community], fallbacks: list[tuple[str, str]]):
        from .llm.reports import CommunityReport, community_reports, graph_context

        contexts = []
        for c in comms:
            subs = [] if level == 1 else [
                CommunityReport(title=s.title, summary=s.summary, findings=list(s.findings), rating=s.rating)
                for s in (self.below_comm[m] for m in c.members)
            ]
            contexts.append(graph_context(self.kg, c.entity_ids, subs))
        reports = self.prog.stage(
            f"community reports (LLM), layer {level}",
            lambda: community_reports(self.state.llm, contexts, fallbacks, stage=f"community_reports:layer_{level}"),
        )
        for c, r in zip(comms, reports, strict=True):
            c.rating, c.findings = r.rating, list(r.findings)
        return [(r.title, r.text()) for r in reports]

    def _vectors(self, level: int, comms: list[Community]) -> list[np.ndarray]:
        if not comms:
            return []
        if self.embed_summaries:
            v = self.prog.embed(self.state.embedder, [f"{c.title}\n{c.summary}" for c in comms], "embedding communities")
            return list(v)
        return [_centroid(np.vstack([self.below_vec[x] for x in c.members])) for c in comms]


class _RowCache:
    """A fitted vectorizer's ``transform`` over a known set of texts, computed in one call
    (scikit-learn's per-call validation dominated many small transforms)."""

    def __init__(self, vectorizer: Any, texts: Sequence[str]) -> None:
        self._pos = {t: i for i, t in enumerate(dict.fromkeys(texts))}
        self._matrix = vectorizer.transform(list(self._pos)).tocsr() if self._pos else None
        self._vectorizer = vectorizer

    def transform(self, texts: Sequence[str]) -> Any:
        rows = [self._pos.get(t) for t in texts]
        if self._matrix is None or any(r is None for r in rows):
            return self._vectorizer.transform(list(texts))
        return self._matrix[rows]


def _centroid(vecs: np.ndarray) -> np.ndarray:
    """float32 ``(dim,)``: the L2-normalised mean of the rows (a community's offline vector)."""
    m = vecs.mean(axis=0)
    return (m / max(float(np.linalg.norm(m)), 1e-12)).astype(np.float32)


def _cohesion(vecs: np.ndarray) -> float:
    """Mean cosine of rows (L2-normalised) to their normalised centroid."""
    if len(vecs) < 2:
        return 1.0
    return float((vecs @ _centroid(vecs)).mean())


def drift_report(drift: Mapping[str, Any], documents: int, chunks: int) -> dict[str, Any]:
    """How far an index has moved since its last full build, for ``inspect`` / ``stats()``.

    Returns:
        The counters (:func:`graphstrata.state.new_drift`) plus ``changed_documents_share``:
        documents added or removed since the build over the documents at the build (a float;
        ``rebuild()`` refits the frozen statistics when this grows large), and
        ``documents_now`` / ``chunks_now``.
    """
    d = dict(drift)
    base = max(int(d.get("built_documents", documents) or 0), 1)
    d["changed_documents_share"] = round(
        (int(d.get("documents_added", 0)) + int(d.get("documents_removed", 0))) / base, 4
    )
    d["documents_now"] = documents
    d["chunks_now"] = chunks
    return d


__all__ = [
    "COHESION_DROP",
    "COMMUNITY_VECTOR_DRIFT",
    "ENTITY_VECTOR_DRIFT",
    "SPLIT_FACTOR",
    "drift_report",
    "rebuild_state",
    "update_state",
]
