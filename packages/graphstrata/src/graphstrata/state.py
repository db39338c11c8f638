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

import json
import threading
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .config import GraphStrataConfig
from .extraction import RECORD_ZLIB_LEVEL, ChunkRecord, CompactRecord
from .graph import KnowledgeGraph
from .types import Chunk, Community, Document

if TYPE_CHECKING:  # pragma: no cover
    from .bm25 import BM25Index
    from .index import ChunkIndex, LayeredIndex
    from .llm.records import LLMAnswers
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
            the deleted chunks touched. A published state holds them compressed
            (:class:`ChunkRecords`, decoded when read). ``None`` for LLM-extracted graphs and
            indexes persisted before schema 4 (the first update derives them).
        llm_answers: what an LLM extraction (LightRAG / HiRAG or AGRAG) was made from
            (:class:`~graphstrata.llm.records.LLMAnswers`): each chunk's raw LLM answers and
            the summaries of merged descriptions, so an update asks the LLM only for chunks
            (and summaries) they do not answer, with or without a response cache (issue 29);
            persisted. Also the answers of the other build-time LLM stages (community reports,
            HiRAG summary entities and reports: ``stages``, ``owners``), so an update asks
            those stages only the prompts that changed. ``None`` for an offline build, and for
            LLM indexes persisted before issue 29 (their next update asks through the response
            cache, as before, and keeps the answers from then on); an LLM build with
            statistical extraction keeps no ``records`` but its stage answers.
        frozen: the statistics fitted at the last full build and reused by incremental updates
            (issue 16): ``"extraction"`` and ``"summary"``
            :class:`~graphstrata.extraction.FrozenTfidf` models (a published state holds them
            compressed, :class:`FrozenStats`); persisted, refitted by ``rebuild``.
        drift: how far the state has moved since its last full build (:func:`new_drift`,
            :func:`~graphstrata.indexing.update.drift_report`); persisted.
        derived_seed: constructor-only (not a field): ``{key: structure}`` entered into the
            derived cache before first use, under the keys :meth:`derived` would compute them
            under (e.g. :func:`~graphstrata.structures.hirag.hi_index_key`). Only for structures
            derived from exactly this state's records — a build hands over what a stage
            computed on a provisional state with the same records (the stage's result, or
            that state's :meth:`derived_snapshot`), and the store hands over the structures it
            read (:func:`graphstrata.structures.registry.decode`). ``dataclasses.replace`` does not
            carry it: a replaced state starts with an empty cache unless it is passed again.
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
    llm_answers: LLMAnswers | None = None
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
        next state (insert / delete) starts with its own. Structures registered with
        :func:`graphstrata.structures.registry.register_derived` are built (or updated) by the
        facade before a state is published and persisted with it; others live in memory only. A
        builder may itself call :meth:`derived` for a structure it shares (the lock is
        reentrant); other threads wait until the build is done. A key given in the
        constructor's ``derived_seed`` is found without building.

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


class ChunkRecords(Mapping[str, Any]):
    """The extraction records of a state, ``{chunk_id: ChunkRecord}``, kept compressed.

    Only incremental updates read the records (an insert merges the new chunks' records, a
    delete re-merges what the deleted chunks touched), so a state keeps each one as its
    zlib-compressed JSON (:meth:`~graphstrata.extraction.ChunkRecord.to_json`, the bytes the
    store persists) in one buffer, and decodes a record when it is read: ~400 bytes per chunk
    instead of ~8 kB of Python objects (kernel docs, 44k chunks). A read returns a
    :class:`~graphstrata.extraction.CompactRecord`, which decodes itself on first use (an
    update names every kept chunk's record but reads only those of the chunks it touches);
    reading is thread-safe.

    Args:
        ids: the chunk ids, in the order of ``blobs``.
        blobs: one zlib-compressed JSON record per id (``bytes``).
        level_check: check that every blob starts a zlib stream (a cheap check of its first
            bytes; a damaged stream further in is reported when the record is read).

    Raises:
        ValueError: ``ids`` and ``blobs`` of different lengths, a duplicate id, or (with
            ``level_check``) a blob that is not zlib data, naming its chunk.
    """

    __slots__ = ("_ids", "_row", "_buf", "_off")

    def __init__(self, ids: Sequence[str], blobs: Sequence[bytes], level_check: bool = True) -> None:
        if len(ids) != len(blobs):
            raise ValueError(f"{len(ids)} chunk ids but {len(blobs)} extraction records")
        self._ids = list(ids)
        self._row = {cid: i for i, cid in enumerate(self._ids)}
        if len(self._row) != len(self._ids):
            raise ValueError("duplicate chunk ids among the extraction records")
        if level_check:
            for cid, blob in zip(self._ids, blobs, strict=True):
                try:
                    zlib.decompressobj().decompress(blob, 16)
                except (zlib.error, TypeError) as exc:
                    raise ValueError(f"extraction record of {cid!r} unreadable ({exc})") from None
        sizes = np.fromiter((len(b) for b in blobs), np.int64, len(blobs))
        self._off = np.zeros(len(blobs) + 1, np.int64)
        np.cumsum(sizes, out=self._off[1:])
        self._buf = b"".join(blobs)

    @classmethod
    def from_records(cls, records: Mapping[str, Any]) -> ChunkRecords:
        """Compress records (``{chunk_id: ChunkRecord}``): a :class:`~graphstrata.extraction.CompactRecord` never
        decoded keeps its bytes, others are encoded; a :class:`ChunkRecords` is returned as it
        is."""
        if isinstance(records, ChunkRecords):
            return records
        ids = list(records)
        blobs = []
        for cid in ids:
            rec = records[cid]
            packed = rec.packed if isinstance(rec, CompactRecord) else None
            blobs.append(packed if packed is not None else zlib.compress(rec.to_json().encode("utf-8"), RECORD_ZLIB_LEVEL))
        return cls(ids, blobs, level_check=False)

    def raw(self, chunk_id: str) -> bytes:
        """The compressed JSON of one record (what the store persists).

        Raises:
            KeyError: an unknown chunk id.
        """
        i = self._row[chunk_id]
        return self._buf[int(self._off[i]) : int(self._off[i + 1])]

    def __getitem__(self, chunk_id: str) -> CompactRecord:
        """The record of ``chunk_id`` (a :class:`~graphstrata.extraction.CompactRecord`: decoded on first use; a damaged
        one raises ``ValueError`` naming the chunk then).

        Raises:
            KeyError: an unknown chunk id.
        """
        return CompactRecord(chunk_id, self.raw(chunk_id))

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self._row

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def nbytes(self) -> int:
        """Bytes held: the compressed records and their offsets (not the id index)."""
        return len(self._buf) + self._off.nbytes


_FROZEN_BLOBS: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()
"""The compressed JSON each model decoded by a :class:`FrozenStats` came from, so the next
state's :class:`FrozenStats` takes it over instead of encoding the model again (the models are
not changed after a build)."""


class FrozenStats(Mapping[str, Any]):
    """The frozen TF-IDF models of a state (``{name: FrozenTfidf}``), kept as compressed JSON.

    Only incremental updates read them, so a state keeps each model as zlib-compressed JSON
    (:meth:`~graphstrata.extraction.FrozenTfidf.to_dict`) and decodes it when it is read; a
    model decoded once is reused while anybody still holds it (a weak cache).

    Raises:
        ValueError: (on read) a damaged model, named.
    """

    __slots__ = ("_blobs", "_cache", "__weakref__")

    def __init__(self, blobs: Mapping[str, bytes]) -> None:
        self._blobs = dict(blobs)
        self._cache: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()

    @classmethod
    def from_models(cls, models: Mapping[str, Any]) -> FrozenStats:
        """Compress decoded models (``{name: FrozenTfidf}``, or JSON texts / dicts of
        :meth:`~graphstrata.extraction.FrozenTfidf.to_dict`); a :class:`FrozenStats` is
        returned as it is."""
        if isinstance(models, FrozenStats):
            return models
        blobs = {}
        for name, model in models.items():
            known = None if isinstance(model, (str, dict)) else _FROZEN_BLOBS.get(model)
            if known is not None:
                blobs[name] = known
                continue
            if isinstance(model, str):
                text = model
            else:
                text = json.dumps(model if isinstance(model, dict) else model.to_dict())
            blobs[name] = zlib.compress(text.encode("utf-8"), RECORD_ZLIB_LEVEL)
        out = cls(blobs)
        for name, model in models.items():
            if not isinstance(model, (str, dict)):
                out._cache[name] = model
        return out

    def text(self, name: str) -> str:
        """The JSON text of one model (what the store persists).

        Raises:
            KeyError: an unknown name. ValueError: damaged data (named).
        """
        try:
            return zlib.decompress(self._blobs[name]).decode("utf-8")
        except (zlib.error, UnicodeDecodeError) as exc:
            raise ValueError(f"frozen statistics {name!r} unreadable ({exc})") from None

    def __getitem__(self, name: str) -> Any:
        from .extraction import FrozenTfidf

        model = self._cache.get(name)
        if model is None:
            try:
                model = FrozenTfidf.from_dict(json.loads(self.text(name)))
            except json.JSONDecodeError as exc:
                raise ValueError(f"frozen statistics {name!r} unreadable ({exc})") from None
            self._cache[name] = model
            _FROZEN_BLOBS[model] = self._blobs[name]
        return model

    def __contains__(self, name: object) -> bool:
        return name in self._blobs

    def __iter__(self) -> Iterator[str]:
        return iter(self._blobs)

    def __len__(self) -> int:
        return len(self._blobs)

    @property
    def nbytes(self) -> int:
        """Bytes of compressed JSON held."""
        return sum(len(b) for b in self._blobs.values())


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


def check_integrity(state: EngineState, where: str = "index", finite_checked: bool = False) -> None:
    """Referential integrity and vector sanity of a state, checked once after loading.

    Every chunk names a known document; every entity, relation and community names known
    chunks; relation endpoints are entities; community members are nodes of the layer below
    and their entities are entities; vector arrays have one finite row per record and the
    embedder's dimension.

    Args:
        state: the state to check.
        where: what to call it in messages (the index path).
        finite_checked: the vectors were read from C-HNSW files, whose loader already refused
            NaN / infinite values: skip that scan (it would read every memory-mapped page).

    Raises:
        ValueError: the first broken reference or bad array, named.
    """
    dim = int(state.embedder.dim)
    docs, rows = state.documents, state.chunk_row
    if len(rows) != len(state.chunks):
        raise ValueError(f"corrupt {where}: duplicate chunk ids")
    if not docs.keys() >= {c.document_id for c in state.chunks}:
        for c in state.chunks:
            if c.document_id not in docs:
                raise ValueError(f"corrupt {where}: chunk {c.id!r} names unknown document {c.document_id!r}")

    def known_chunks(kind: str, records: Iterable[Any], name: Callable[[Any], str]) -> None:
        # one set union in C over every list; the per-record scan only finds what to name
        records = list(records)
        if rows.keys() >= set().union(*(r.chunk_ids for r in records)):
            return
        for r in records:
            for cid in r.chunk_ids:
                if cid not in rows:
                    raise ValueError(f"corrupt {where}: {kind} {name(r)!r} names unknown chunk {cid!r}")

    ents = state.kg.entities
    known_chunks("entity", ents.values(), lambda e: e.id)
    known_chunks("relation", state.kg.relations.values(), lambda r: f"{r.source}->{r.target}")
    below: set[str] | Mapping[str, Any] = ents
    for layer, comms in enumerate(state.communities, 1):
        for c in comms:
            if c.layer != layer:
                raise ValueError(f"corrupt {where}: community {c.id!r} is stored in layer {layer}, says {c.layer}")
        members = set().union(*(c.members for c in comms))
        entity_ids = set().union(*(c.entity_ids for c in comms))
        if not (below.keys() >= members if isinstance(below, Mapping) else below >= members) or not ents.keys() >= entity_ids:
            for c in comms:
                bad = [m for m in c.members if m not in below]
                bad += [e for e in c.entity_ids if e not in ents]
                if bad:
                    raise ValueError(f"corrupt {where}: community {c.id!r} names unknown node {bad[0]!r}")
        known_chunks("community", comms, lambda c: c.id)
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
        if not finite_checked and not np.isfinite(v).all():
            raise ValueError(f"corrupt {where}: vector array {name!r} holds NaN or infinite values")
