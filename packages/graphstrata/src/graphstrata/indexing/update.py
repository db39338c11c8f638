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
   only deleted chunks supported disappear. With an LLM extractor the graph is made again from
   the LLM answers the state keeps per chunk (``state.llm_answers``,
   :mod:`graphstrata.llm.records`): only chunks without a valid record (the new ones, or a
   chunk whose prompt changed) are sent to the LLM, and a merged description is summarised by
   the LLM only when its summary prompt changed, so an insert pays for its new chunks whether
   or not a response cache exists (an index persisted before the records asks for every chunk
   through the response cache once). Re-parsing and merging known answers costs no call and
   gives what a build from the same answers gives; the changed entities are found by
   comparison.
3. **Entity vectors.** New entities are embedded; an existing entity gets a new vector only
   when its chunk set changed by more than :data:`ENTITY_VECTOR_DRIFT` (Jaccard distance of
   old and new chunk sets) or its name changed, so hubs such as a year do not churn the index.
   In an LLM build whose entity vectors embed name + description
   (:func:`~.descriptions.describes_entities`), an entity is embedded again exactly when its
   name or description changed; every other entity keeps its vector.
4. **Communities**, bottom-up, layer by layer (ArchRAG's hierarchy, ``seed-archrag.md`` §1):
   members that disappeared leave their community; a new entity joins the layer-1 community it
   has the most relation weight to (its nearest community vector when it has no linked,
   clustered neighbour); a community whose size exceeds
   :data:`~.update_communities.SPLIT_FACTOR` ×
   ``max_community_size``, or whose cohesion (mean cosine of members to their centroid) fell by
   more than :data:`~.update_communities.COHESION_DROP`, is re-clustered locally with the build's procedure
   (k-NN-augmented weighted Leiden with the size cap, graspologic-native) over its own
   members; the parts join the parent of the original. Only touched communities — changed
   members, or a member whose vector, name or description changed — get a new summary and
   vector, and their parents follow, up to the top layer; a community whose members only
   gained or lost chunks keeps its summary and vector and gets its chunk provenance
   recomputed. Empty communities are removed (:class:`~.update_communities.HierarchyUpdate`).
   With LLM community reports, a touched community whose report prompt did not change is
   answered from the answers the state keeps (``state.llm_answers.stages``,
   :func:`~graphstrata.llm.records.kept_map`), so only changed prompts reach the model, with or
   without a response cache; the answers of communities that keep their report are carried,
   those of re-described or removed ones dropped.
5. **Indexes.** The C-HNSW copies of the next state mark the vectors of removed or changed
   rows deleted and ``add`` the new ones (:meth:`~graphstrata.index.LayeredIndex.updated`);
   past :data:`~graphstrata.index.COMPACT_FRACTION` deleted nodes they are rebuilt from the live
   vectors. BM25 keeps every chunk's tokens and re-indexes them (exact idf and lengths; bm25s
   cannot update its score matrix) on the next state's first BM25 query, so a burst of inserts
   pays it once.

Method-specific derived structures (ArchRAG/AGRAG passage graphs, LightRAG relation index,
HiRAG GMM layers, PPR graphs) live in the state's derived cache, which the next state starts
empty (except those an update hook carries over, such as an LLM build's embedded relation and
fact descriptions, :mod:`.descriptions`, re-embedded only where their text changed): each is
rebuilt from the new records on its first query (HiRAG's LLM summary entities and reports
eagerly: :func:`~.hirag.summary_entity_stage`, handed to the next state's constructor; a
cluster or community whose prompt did not change is answered from the kept answers, and the
next state keeps exactly the answers its HiRAG index was made from).

The previous state is never modified, so concurrent queries read the old or the new state.
Cases that do not fit the incremental path fall back to a full build over the new corpus
(reusing chunk vectors): an index without entities or without community layers, or an update
that empties a whole community layer.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from ..bm25 import lexical_texts
from ..extraction import ChunkRecord, FrozenTfidf, StatisticalExtractor, merge_records
from ..graph import KnowledgeGraph
from ..index import ChunkIndex, stored_vectors
from ..llm import usage_scope
from ..llm.records import keeping_answers
from ..resolution import apply_to_record, resolution_stage, resolve_onto
from ..runner import current_runner
from ..state import EngineState, new_drift
from ..types import Chunk, Community, Document, Entity, Relation
from .build import build_state
from .chunks import chunk_stage
from .communities import fit_summary_tfidf
from .descriptions import described_entity_vectors, describes_entities, entity_text
from .entities import entity_vectors
from .extract import extractor
from .hirag import summary_entity_stage
from .progress import Progress
from .update_communities import HierarchyUpdate

ENTITY_VECTOR_DRIFT = 0.2
"""An existing entity is re-embedded when the Jaccard distance between its old and new chunk
sets exceeds this (or its name changed); otherwise its vector is kept."""


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
    update: dict[str, Any] = {}
    changes: dict[str, Any] = {}
    if build_llm(state) is None:
        new, _ = _update(state, documents, list(upserts), gone_docs, show_progress)
    else:
        with usage_scope() as ledger, keeping_answers(state.llm_answers) as book:
            new, incremental = _update(state, documents, list(upserts), gone_docs, show_progress)
            if new.llm is not None and new.communities:
                Progress(show_progress).stage(
                    "HiRAG summary entities (LLM)", lambda: summary_entity_stage(new)
                )
        if incremental:  # a fallback build kept its own answers (its own book)
            changes["llm_answers"] = book.answers(new.llm_answers)
        update["last_update_usage"] = ledger.to_dict()
    update["last_update_seconds"] = round(time.perf_counter() - t0, 4)
    # the published state, constructed whole: the new records with the update's usage and time
    # in its drift, the stage answers it read, and what was derived from those same records
    # (the HiRAG index of the stage above, or of a fallback build) in its derived cache
    return dataclasses.replace(
        new, drift={**new.drift, **update}, derived_seed=new.derived_snapshot(), **changes
    )


def rebuild_state(state: EngineState, show_progress: bool = False) -> EngineState:
    """A full build over ``state``'s documents: every statistic refitted (TF-IDF models, the
    whole hierarchy, both C-HNSW), chunk vectors and the LLM extraction answers
    (``state.llm_answers``) reused; drift counters reset and the frozen statistics' version
    incremented.

    Raises:
        ValueError: as :func:`~.build.build_state`.
        graphstrata.llm.LLMError: an LLM call failed (LLM-built index).
    """
    return _full(state, list(state.documents.values()), show_progress)


def build_llm(state: EngineState) -> Any:
    """The LLM an update of ``state`` may use at index time: the attached one when the index
    was built with an LLM, else ``None`` — an offline index with an LLM attached for answers
    stays offline when it is updated (no surprise bill for re-extraction)."""
    return state.llm if state.llm_id is not None else None


def _full(state: EngineState, docs: list[Document], show_progress: bool) -> EngineState:
    """A full build over ``docs`` that reuses ``state``'s chunk vectors and LLM extraction
    answers and counts the frozen statistics' version on (a rebuild, or the fallback of an
    update)."""
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
        stats_version=int(state.drift.get("stats_version", 1)) + 1,
        llm_answers=state.llm_answers,
    )
    if new.llm is not state.llm:  # keep the query-time LLM of an offline index attached
        new = dataclasses.replace(new, llm=state.llm)
    return new


@dataclasses.dataclass
class _ChunkDelta:
    """Step 1 of an update: the next chunk rows (survivors in their old order, then the new
    chunks) and their vectors."""

    new_chunks: list[Chunk]
    keep_rows: np.ndarray  # int64 rows of the surviving chunks in the old state
    removed_chunks: list[Chunk]
    chunks: list[Chunk]
    chunk_row: dict[str, int]
    chunk_vecs: np.ndarray  # float32 (len(chunks), dim)
    titles: dict[str, str]


@dataclasses.dataclass
class _GraphDelta:
    """Step 2 of an update: the next graph's entities and relations, the entities whose
    chunks or text changed, and what the next state keeps of the extraction."""

    kg_entities: dict[str, Entity]
    relations: Any  # {(source, target): Relation} (statistical) or [Relation] (LLM)
    affected: set[str]
    entity_order: list[str]
    frozen: dict[str, Any]
    records: dict[str, ChunkRecord] | None = None
    llm_answers: Any = None
    delta_pairs: set[tuple[str, str]] | None = None  # every relation a new chunk names


def _update(
    state: EngineState,
    documents: dict[str, Document],
    upserts: list[Document],
    gone_docs: set[str],
    show_progress: bool,
) -> tuple[EngineState, bool]:
    """The next state and whether it was made incrementally (``False``: a full build)."""
    if state.layered is None or not state.communities or not len(state.kg):
        return _full(state, list(documents.values()), show_progress), False
    prog = Progress(show_progress)
    cd = _chunk_delta(state, documents, upserts, gone_docs, prog)  # 1. chunks
    gd = _graph_delta(state, cd, prog, show_progress)  # 2. knowledge graph
    if not gd.kg_entities:
        return _full(state, list(documents.values()), show_progress), False
    kg, ent_old_rows, entity_vecs = _entity_rows(state, gd, cd, prog)  # 3. entity rows, vectors
    vec_of = {eid: entity_vecs[i] for i, eid in enumerate(gd.entity_order)}
    # 4. communities
    hier = HierarchyUpdate(
        state, kg, vec_of, gd.frozen, prog, gd.delta_pairs, llm=build_llm(state), purge=bool(gone_docs)
    )
    brand_new = [e for e in gd.entity_order if e not in state.kg.entities]
    gone_entities = {e for e in state.kg.entities if e not in kg.entities}
    hierarchy = _update_layers(state, hier, kg, gd.affected, ent_old_rows, brand_new, gone_entities)
    if hierarchy is None:  # a layer would be empty
        return _full(state, list(documents.values()), show_progress), False
    layers, layer_vecs, old_rows = hierarchy
    # 5. indexes
    layered, chunk_index, bm25, vectors = _updated_indexes(
        state, documents, cd, [ent_old_rows, *old_rows], [entity_vecs, *layer_vecs], prog
    )
    drift = _next_drift(state, {
        "documents_added": len(upserts),
        "documents_removed": len(gone_docs),
        "chunks_added": len(cd.new_chunks),
        "chunks_removed": len(cd.removed_chunks),
        "entities_added": len(brand_new),
        "entities_removed": len(gone_entities),
        "communities_reclustered": hier.reclustered,
        "communities_resummarised": hier.resummarised,
        "updates": 1,
    })
    # the rest (config, embedder, build seconds and usage, LLM) carries over; the derived
    # cache starts empty
    return dataclasses.replace(
        state,
        documents=documents,
        chunks=cd.chunks,
        chunk_row=cd.chunk_row,
        kg=kg,
        communities=layers,
        layered=layered,
        chunk_index=chunk_index,
        bm25=bm25,
        vectors=vectors,
        generation=state.generation + 1,
        records=gd.records,
        llm_answers=gd.llm_answers,
        frozen=gd.frozen,
        drift=drift,
    ), True


def _chunk_delta(
    state: EngineState,
    documents: Mapping[str, Document],
    upserts: list[Document],
    gone_docs: set[str],
    prog: Progress,
) -> _ChunkDelta:
    """Step 1: the new documents chunked and embedded; the deleted documents' chunks dropped.

    Raises:
        ValueError: no chunk would remain.
    """
    config, embedder = state.config, state.embedder
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
    titles = {d.id: d.metadata["title"] for d in documents.values() if d.metadata.get("title")}
    return _ChunkDelta(new_chunks, keep_rows, removed_chunks, chunks, chunk_row, chunk_vecs, titles)


def _graph_delta(state: EngineState, cd: _ChunkDelta, prog: Progress, show_progress: bool) -> _GraphDelta:
    """Step 2: the next graph, from the kept records (statistical) or answers (LLM)."""
    ex = extractor(state.config, build_llm(state), show_progress)
    frozen = dict(state.frozen)
    if cd.removed_chunks and frozen:  # delete means gone: no term only removed text held
        frozen = prog.stage(
            "pruning vocabularies",
            lambda: prune_vocabularies(
                frozen, [c.text for c in cd.removed_chunks], _live_texts(cd.chunks, cd.titles)
            ),
        )
    if isinstance(ex, StatisticalExtractor):
        return _statistical_delta(state, ex, cd, frozen, prog)
    out = prog.stage(
        "extracting entities", lambda: ex.extract_with_answers(cd.chunks, cd.titles, state.llm_answers)
    )
    ents, rels = out.entities, out.relations
    if state.config.entity_resolution:  # the whole graph is re-extracted: resolved as a build does
        ents, rels, _ = prog.stage(
            "resolving entities",
            partial(resolution_stage, ents, rels, None, state.embedder.embed, 0),  # no records: no sentences
        )
    kg_entities, relations, affected = _diff(state.kg, ents, rels)
    return _GraphDelta(
        kg_entities, relations, affected, [e.id for e in ents], frozen, llm_answers=out.answers
    )


def _statistical_delta(
    state: EngineState, ex: StatisticalExtractor, cd: _ChunkDelta, frozen: dict[str, Any], prog: Progress
) -> _GraphDelta:
    """Step 2 of a statistically extracted graph: the new chunks' records merged in, the
    removed chunks' records merged out, new mentions resolved onto existing entities."""
    config = state.config
    old_records = state.records
    if old_records is None or (ex.top_n and "extraction" not in frozen):  # persisted before schema 4
        old_records, frozen = prog.stage(
            "deriving extraction records", lambda: _derive_records(state, ex, frozen)
        )
    new_recs = prog.stage(
        "extracting entities",
        lambda: current_runner().chunk_records(ex, cd.new_chunks, cd.titles, frozen.get("extraction")),
    )
    if config.entity_resolution:  # new mentions onto the existing entities (issue 28)
        names = {k: max(v[0], key=v[0].get) for r in new_recs for k, v in r.entities.items() if v[0]}
        resolved = resolve_onto(state.kg.entities, names, names)
        new_recs = [apply_to_record(r, resolved, ex.max_description_sentences) for r in new_recs]
    records = {c.id: old_records[c.id] for c in cd.chunks[: len(cd.keep_rows)]}
    records.update({r.chunk_id: r for r in new_recs})
    kg_entities, relations, affected = prog.stage(
        "merging entities",
        lambda: _merge_delta(
            state.kg, [old_records[c.id] for c in cd.removed_chunks], new_recs, records, cd.chunk_row,
            ex.max_description_sentences,
        ),
    )
    # a re-merged entity's aliases come with it from its records' surface forms
    return _GraphDelta(
        kg_entities, relations, affected,
        sorted(kg_entities),  # merge_records' order, as in a build
        frozen, records=records, delta_pairs={p for r in new_recs for p in r.relations},
    )


def _entity_rows(
    state: EngineState, gd: _GraphDelta, cd: _ChunkDelta, prog: Progress
) -> tuple[KnowledgeGraph, np.ndarray, np.ndarray]:
    """Step 3: the next graph in the extractor's row order, each entity's old row (``-1``:
    embedded again, int64) and the entity vectors (float32 ``(n, dim)``)."""
    config, embedder, old_kg = state.config, state.embedder, state.kg
    entity_ids = list(gd.entity_order)
    kg_entities = gd.kg_entities
    kg = (
        KnowledgeGraph.from_keyed([kg_entities[e] for e in entity_ids], gd.relations)
        if isinstance(gd.relations, dict)
        else KnowledgeGraph([kg_entities[e] for e in entity_ids], gd.relations)
    )
    described = describes_entities(config, state.llm_id)  # name + description vectors (LLM build)
    needs_vector = _needs_described_vector if described else _needs_vector
    ent_old_rows = np.full(len(entity_ids), -1, np.int64)
    for i, eid in enumerate(entity_ids):
        row = old_kg.row.get(eid)
        if row is not None and not (eid in gd.affected and needs_vector(old_kg.entities[eid], kg_entities[eid])):
            ent_old_rows[i] = row
    fresh = np.flatnonzero(ent_old_rows < 0)
    entity_vecs = np.zeros((len(entity_ids), embedder.dim), np.float32)
    entity_vecs[ent_old_rows >= 0] = state.vectors["entities"][ent_old_rows[ent_old_rows >= 0]]
    if len(fresh):
        fresh_ids = [entity_ids[i] for i in fresh]
        entity_vecs[fresh] = (
            described_entity_vectors(kg, embedder, prog, ids=fresh_ids)
            if described
            else entity_vectors(kg, cd.chunk_row, cd.chunk_vecs, config, embedder, prog, ids=fresh_ids)
        )
    return kg, ent_old_rows, entity_vecs


def _update_layers(
    state: EngineState,
    hier: HierarchyUpdate,
    kg: KnowledgeGraph,
    affected: set[str],
    ent_old_rows: np.ndarray,
    brand_new: list[str],
    gone_entities: set[str],
) -> tuple[list[list[Community]], list[np.ndarray], list[np.ndarray]] | None:
    """Step 4: every community layer updated bottom-up: the layers, their vectors and each
    layer's old rows; ``None`` when a layer would be empty."""
    old_kg = state.kg
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
    old_rows: list[np.ndarray] = []
    layers: list[list[Community]] = []
    layer_vecs: list[np.ndarray] = []
    for level in range(1, len(state.communities) + 1):
        result = hier.update_layer(level, below_removed, below_added, below_touched, below_provenance)
        if result is None:  # the layer would be empty
            return None
        comms, vecs, rows, below_removed, below_added, below_touched, below_provenance = result
        layers.append(comms)
        layer_vecs.append(vecs)
        old_rows.append(rows)
    return layers, layer_vecs, old_rows


def _updated_indexes(
    state: EngineState,
    documents: Mapping[str, Document],
    cd: _ChunkDelta,
    old_rows: list[np.ndarray],
    layer_vectors: list[np.ndarray],
    prog: Progress,
) -> tuple[Any, ChunkIndex, Any, dict[str, np.ndarray]]:
    """Step 5: the layered and chunk C-HNSW, BM25 and the stored vectors of the next state."""
    config = state.config
    layered = prog.stage(
        "indexing layers (C-HNSW)",
        lambda: state.layered.updated(
            old_rows, layer_vectors, M=config.hnsw_M, ef_construction=config.hnsw_ef_construction
        ),
    )
    chunk_old_rows = np.concatenate([cd.keep_rows, np.full(len(cd.new_chunks), -1, np.int64)])
    chunk_index: ChunkIndex = prog.stage(
        "indexing chunks (C-HNSW)",
        lambda: state.chunk_index.updated(
            chunk_old_rows, cd.chunk_vecs, M=config.hnsw_M, ef_construction=config.hnsw_ef_construction
        ),
    )
    bm25 = prog.stage(
        "indexing chunks (BM25)",
        lambda: state.bm25.updated(cd.keep_rows, lexical_texts(cd.new_chunks, documents, config.use_titles)),
    )
    # the indexes' own copies, as a load of the persisted state reads them (schema 5)
    return layered, chunk_index, bm25, stored_vectors(chunk_index, layered, state.embedder.dim)


def _next_drift(state: EngineState, counts: Mapping[str, int]) -> dict[str, Any]:
    """``state``'s drift counters (started from its build's sizes) with ``counts`` added."""
    drift = dict(state.drift) or new_drift(
        len(state.documents), len(state.chunks), len(state.kg), sum(len(x) for x in state.communities)
    )
    for key, n in counts.items():
        drift[key] = int(drift.get(key, 0)) + int(n)
    return drift


def _live_texts(chunks: Sequence[Chunk], titles: Mapping[str, str]) -> Iterator[str]:
    yield from titles.values()
    for c in chunks:
        yield c.text


def prune_vocabularies(
    frozen: Mapping[str, Any], removed_texts: Sequence[str], live_texts: Iterable[str]
) -> dict[str, Any]:
    """The frozen TF-IDF models (``{name: FrozenTfidf}``) without the terms that occur in
    ``removed_texts`` and in none of ``live_texts`` (the chunk texts and titles that remain).

    Each model's own analyzer (tokens, n-grams, stop words, lower case) decides what a term
    is; a live text is analysed only while it may still hold a candidate term (it contains one
    of their words), so a delete costs about the removed text, not the corpus, unless the
    removed text shares its vocabulary with everything. The idf of the kept terms is unchanged
    (frozen at the last full build, as before).

    Returns:
        A new dict: models with nothing to drop are returned as they are.
    """
    out = dict(frozen)
    live = None
    for name, model in frozen.items():
        if not isinstance(model, FrozenTfidf) or not len(model):
            continue
        vec = model.vectorizer()
        analyze = vec.build_analyzer()
        vocab = vec.vocabulary_
        cand = {t for text in removed_texts for t in analyze(text) if t in vocab}
        if not cand:
            continue
        if live is None:
            live = list(live_texts)
        words = {w for t in cand for w in t.split(" ")}
        for text in live:
            if not cand:
                break
            low = text.lower()
            if any(w in low for w in words):
                n = len(cand)
                cand.difference_update(analyze(text))
                if len(cand) != n:
                    words = {w for t in cand for w in t.split(" ")}
        if not cand:
            continue
        terms = model.terms
        keep = np.asarray([t not in cand for t in terms], dtype=bool)
        out[name] = FrozenTfidf(
            model.kind, dict(model.params), [t for t, k in zip(terms, keep.tolist(), strict=True) if k], model.idf[keep]
        )
    return out


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
    """An offline (name + chunk centroid) entity vector is made again: the name changed, or
    the chunk set moved by more than :data:`ENTITY_VECTOR_DRIFT` (Jaccard distance)."""
    if old.name != new.name:
        return True
    a, b = set(old.chunk_ids), set(new.chunk_ids)
    return len(a ^ b) > ENTITY_VECTOR_DRIFT * len(a | b)


def _needs_described_vector(old: Entity, new: Entity) -> bool:
    """An LLM build's (name + description) entity vector is made again exactly when the text
    it embeds changed (:func:`~.descriptions.entity_text`)."""
    return entity_text(old) != entity_text(new)


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
    "ENTITY_VECTOR_DRIFT",
    "build_llm",
    "drift_report",
    "prune_vocabularies",
    "rebuild_state",
    "update_state",
]
