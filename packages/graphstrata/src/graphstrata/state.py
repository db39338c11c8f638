"""The immutable engine state: one consistent version of everything a query reads.

An :class:`EngineState` holds the documents, chunks, knowledge graph, community layers, the
vector and lexical indexes, and the derived structures the methods compute from them, frozen
together. :class:`~graphstrata.GraphStrata` keeps one reference to the current state;
``retrieve`` takes that reference once and reads only from it, while ``insert`` / ``delete``
build the next state off to the side, persist it, and swap it in with one assignment. A query
therefore always sees one whole state, the old or the new one, never a mixture (DESIGN.md,
"Where the core goes next").

Nothing in a state is mutated after construction: the record lists and dicts are only read,
and the vector arrays are made read-only. The one exception is the per-state cache of derived
structures (:meth:`EngineState.derived`), which is filled lazily under a lock and belongs to
this state alone, so a swap can never mix one state's derived structures with another's. A
stage that derived a structure from the same records before the state existed (HiRAG's LLM
summary entities, built from a provisional state) hands it to the constructor
(``derived_seed``) instead of writing into a published state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .config import GraphStrataConfig
from .graph import KnowledgeGraph
from .types import Chunk, Community, Document

if TYPE_CHECKING:  # pragma: no cover
    from .index import BM25Index, ChunkIndex, LayeredIndex
    from .models import Embedder


@dataclass(frozen=True, eq=False)
class EngineState:
    """One immutable version of an index (see the module docstring).

    Attributes:
        config: the build configuration.
        embedder: the :class:`~graphstrata.models.Embedder` that embedded the vectors and
            embeds queries.
        documents: ``{document_id: Document}`` in insertion order.
        chunks: chunks in row order (row ``i`` is vector row ``i`` of ``vectors["chunks"]``).
        chunk_row: ``{chunk_id: row}``.
        kg: the merged :class:`~graphstrata.graph.KnowledgeGraph`.
        communities: community layers, ``communities[i - 1]`` is layer ``i``.
        layered: C-HNSW over entities (layer 0) and community layers, ``None`` without entities.
        chunk_index: C-HNSW over chunk vectors.
        bm25: BM25 over the chunks' lexical texts.
        vectors: float32 read-only arrays, rows L2-normalised: ``"chunks"`` ``(n_chunks, dim)``,
            ``"entities"`` ``(n_entities, dim)`` in ``kg.entity_ids`` order, ``"layer_<i>"``
            ``(n_i, dim)`` in ``communities[i - 1]`` order.
        build_seconds: seconds per indexing stage of the build that made this state (empty
            for a loaded state).
        generation: 0 for a freshly built or loaded state, +1 for every insert / delete since.
        build_usage: LLM calls and tokens of the build that made this state, per stage
            (:meth:`graphstrata.llm.Ledger.to_dict`; empty for an offline build); persisted.
        llm_id: id of the LLM the records were built with (``None``: offline build).
        llm: the :class:`~graphstrata.llm.LLMClient` query-time LLM steps use (LightRAG
            keywords, AGRAG fact filter, HiRAG summary entities through the response cache)
            and ``answer`` defaults to; ``None`` offline. Not persisted: given to ``build`` /
            ``load``.
        records: ``{chunk_id: ChunkRecord}``, what the statistical extractor found in each
            chunk (:meth:`~graphstrata.extraction.StatisticalExtractor.chunk_records`); the KG
            is their merge, so an insert extracts only new chunks and a delete re-merges what
            the deleted chunks touched. ``None`` for LLM-extracted graphs and indexes persisted
            before schema 4 (the first update derives them).
        frozen: the statistics fitted at the last full build and reused by incremental updates
            (issue 16): ``"extraction"`` and ``"summary"``
            :class:`~graphstrata.extraction.FrozenTfidf` models; persisted, refitted by
            ``rebuild``.
        drift: how far the state has moved since its last full build (:func:`new_drift`,
            :func:`~graphstrata.indexing.update.drift_report`); persisted.
        derived_seed: constructor-only (not a field): ``{key: structure}`` entered into the
            derived cache before first use, under the keys :meth:`derived` would compute them
            under (e.g. :func:`~graphstrata.indexing.hirag.hi_index_key`). Only for structures
            derived from exactly this state's records — a build hands over what a stage
            computed on a provisional state with the same records (the stage's result, or
            that state's :meth:`derived_snapshot`); a later issue will hand over structures
            loaded from disk. ``dataclasses.replace`` does not carry it: a
            replaced state starts with an empty cache unless it is passed again.
    """

    config: GraphStrataConfig
    embedder: Embedder
    documents: Mapping[str, Document]
    chunks: Sequence[Chunk]
    chunk_row: Mapping[str, int]
    kg: KnowledgeGraph
    communities: Sequence[Sequence[Community]]
    layered: LayeredIndex | None
    chunk_index: ChunkIndex
    bm25: BM25Index
    vectors: Mapping[str, np.ndarray]
    build_seconds: Mapping[str, float] = field(default_factory=dict)
    generation: int = 0
    build_usage: Mapping[str, Any] = field(default_factory=dict)
    llm_id: str | None = None
    llm: Any = None
    records: Mapping[str, Any] | None = None
    frozen: Mapping[str, Any] = field(default_factory=dict)
    drift: Mapping[str, Any] = field(default_factory=dict)
    derived_seed: InitVar[Mapping[str, Any] | None] = None
    _derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _derived_lock: Any = field(default_factory=threading.RLock, init=False, repr=False)

    def __post_init__(self, derived_seed: Mapping[str, Any] | None) -> None:
        for v in self.vectors.values():
            v.setflags(write=False)
        if derived_seed:
            self._derived.update(derived_seed)

    def derived(self, key: str, build: Callable[[], Any]) -> Any:
        """Method-specific structures computed once per state, on first use.

        A method that needs more than the shared store (a relation-vector matrix, a passage
        graph, GMM summary layers, ...) builds it here. The cache belongs to this state: the
        next state (insert / delete) starts with an empty one, and nothing is persisted (it is
        derived from what is). A builder may itself call :meth:`derived` for a structure it
        shares (the lock is reentrant); other threads wait until the build is done. A key
        given in the constructor's ``derived_seed`` is found without building.

        Args:
            key: cache key, conventionally ``"<method>:<what>"``.
            build: zero-argument function computing the value.

        Returns:
            The cached value.
        """
        with self._derived_lock:
            if key not in self._derived:
                self._derived[key] = build()
            return self._derived[key]

    def derived_snapshot(self) -> dict[str, Any]:
        """A copy of the derived cache as it is now (``{key: structure}``): what a state with
        the same records may be constructed with as its ``derived_seed``."""
        with self._derived_lock:
            return dict(self._derived)

    def document_ids_of(self, chunk_ids: Iterable[str]) -> list[str]:
        """Distinct document ids of ``chunk_ids`` (unknown ids skipped), in order."""
        out: dict[str, None] = {}
        for cid in chunk_ids:
            row = self.chunk_row.get(cid)
            if row is not None:
                out[self.chunks[row].document_id] = None
        return list(out)

    def stats(self) -> dict[str, Any]:
        """Counts: documents, chunks, entities, relations, communities per layer."""
        return {
            "documents": len(self.documents),
            "chunks": len(self.chunks),
            "entities": len(self.kg.entities),
            "relations": len(self.kg.relations),
            "communities_per_layer": [len(layer) for layer in self.communities],
        }


def new_drift(
    documents: int, chunks: int, entities: int, communities: int, stats_version: int = 1
) -> dict[str, Any]:
    """The drift counters of a freshly (re)built state: the sizes at that build, no change since.

    Keys: ``built_documents``, ``built_chunks``, ``built_entities``, ``built_communities``
    (counts at the last full build), ``documents_added``, ``documents_removed``,
    ``chunks_added``, ``chunks_removed``, ``entities_added``, ``entities_removed``,
    ``communities_reclustered`` (local re-clusterings, :mod:`graphstrata.indexing.update`),
    ``communities_resummarised``, ``updates`` (incremental updates applied), ``stats_version``
    (the version of the frozen statistics: +1 per full build of this index; ``stats_version``,
    1 for a new index).
    """
    return {
        "built_documents": documents, "built_chunks": chunks, "built_entities": entities,
        "built_communities": communities, "documents_added": 0, "documents_removed": 0,
        "chunks_added": 0, "chunks_removed": 0, "entities_added": 0, "entities_removed": 0,
        "communities_reclustered": 0, "communities_resummarised": 0, "updates": 0,
        "stats_version": stats_version,
    }


def check_integrity(state: EngineState, where: str = "index") -> None:
    """Referential integrity and vector sanity of a state, checked once after loading.

    Every chunk names a known document; every entity, relation and community names known
    chunks; relation endpoints are entities; community members are nodes of the layer below
    and their entities are entities; vector arrays have one finite row per record and the
    embedder's dimension.

    Args:
        state: the state to check.
        where: what to call it in messages (the index path).

    Raises:
        ValueError: the first broken reference or bad array, named.
    """
    dim = int(state.embedder.dim)
    docs, rows = state.documents, state.chunk_row
    if len(rows) != len(state.chunks):
        raise ValueError(f"corrupt {where}: duplicate chunk ids")
    for c in state.chunks:
        if c.document_id not in docs:
            raise ValueError(f"corrupt {where}: chunk {c.id!r} names unknown document {c.document_id!r}")

    def known_chunks(kind: str, rid: str, chunk_ids: Iterable[str]) -> None:
        for cid in chunk_ids:
            if cid not in rows:
                raise ValueError(f"corrupt {where}: {kind} {rid!r} names unknown chunk {cid!r}")

    ents = state.kg.entities
    for e in ents.values():
        known_chunks("entity", e.id, e.chunk_ids)
    for (a, b), r in state.kg.relations.items():
        known_chunks("relation", f"{a}->{b}", r.chunk_ids)
    below: set[str] = set(ents)
    for layer, comms in enumerate(state.communities, 1):
        for c in comms:
            if c.layer != layer:
                raise ValueError(f"corrupt {where}: community {c.id!r} is stored in layer {layer}, says {c.layer}")
            bad = [m for m in c.members if m not in below]
            bad += [e for e in c.entity_ids if e not in ents]
            if bad:
                raise ValueError(f"corrupt {where}: community {c.id!r} names unknown node {bad[0]!r}")
            known_chunks("community", c.id, c.chunk_ids)
        below = {c.id for c in comms}
    expected = {"chunks": len(state.chunks), "entities": len(ents)}
    for i, comms in enumerate(state.communities, 1):
        expected[f"layer_{i}"] = len(comms)
    extra = set(state.vectors) - set(expected)
    if extra:
        raise ValueError(f"corrupt {where}: unexpected vector arrays {sorted(extra)}")
    for name, n in expected.items():
        v = state.vectors.get(name)
        if v is None:
            if n == 0:
                continue
            raise ValueError(f"corrupt {where}: vector array {name!r} is missing")
        if v.ndim != 2 or v.shape[0] != n or (n and v.shape[1] != dim):
            raise ValueError(
                f"corrupt {where}: vector array {name!r} has shape {v.shape}, expected ({n}, {dim})"
            )
        if not np.isfinite(v).all():
            raise ValueError(f"corrupt {where}: vector array {name!r} holds NaN or infinite values")
