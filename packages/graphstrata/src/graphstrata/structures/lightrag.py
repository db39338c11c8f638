"""LightRAG's graph and relation vectors: what its queries read, built at index time.

* :class:`LightGraph` (:func:`build_light_graph`, :data:`LIGHT_GRAPH`): the graph as arrays —
  endpoints, ranks, incident lists, chunk ↔ relation and chunk ↔ entity maps, chunk →
  document — so a query's work follows the entities, relations and chunks it touches;
* :class:`RelationVectors` (:data:`RELATION_VECTORS`): offline relation vectors, implicit
  ``(1 − w)·mean(endpoint entity vectors) + w·mean(source chunk vectors)``, of which only the
  norms (and a few heavy relations' chunk means) are stored;
* :data:`RELATION_TEXT_VECTORS` (:func:`relation_text_vectors`): an LLM build's embedded
  relation texts (spec §1.8, LightRAG §3.1), a :class:`~.text_vectors.TextVectors`.

Each is persisted with the index (:mod:`.registry`), so a loaded index's first query builds
nothing; the retrieval is :mod:`graphstrata.methods.lightrag`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .registry import DerivedSpec, lossless_float32, pack_strings, register_derived, unpack_strings
from .text_vectors import TextVectors, described_text_vectors, relation_text, text_vectors_spec


# -- derived structures ------------------------------------------------------------------------

#: relations with more source chunks than this keep their mean chunk vector
#: (:class:`RelationVectors`); the others' chunk term is computed from their chunks' vectors
HEAVY_RELATION_CHUNKS = 32


def rows_dot(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each row of ``matrix`` (float32 ``(m, dim)``) times ``query`` (float32 ``(dim,)``):
    float32 ``(m,)``, computed on the calling thread by numpy's own loop (``einsum``), not by
    BLAS. OpenBLAS splits a long matrix-vector product over every core; with those cores busy
    a query then waits on its own helper threads (LightRAG's relation similarities at 10⁶
    chunks: p50 2.8× idle with both cores loaded). Same speed on one core; the sums differ
    from BLAS's in the last bits."""
    return np.einsum("ij,j->i", matrix, np.asarray(query, matrix.dtype))


def _csr_from_lists(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Ragged int lists as CSR: int64 ``(len + 1,)`` indptr and int32 values."""
    indptr = np.zeros(len(lists) + 1, np.int64)
    np.cumsum(np.fromiter((len(x) for x in lists), np.int64, len(lists)), out=indptr[1:])
    values = np.fromiter((v for x in lists for v in x), np.int32, int(indptr[-1]))
    return indptr, values


def csr_ranges(indptr: np.ndarray, rows: np.ndarray, cap: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the CSR slices of ``rows`` concatenated in order (each cut to its first
    ``cap`` entries), and the owner index (into ``rows``) of every position."""
    rows = np.asarray(rows, np.int64)
    starts = indptr[rows]
    lens = indptr[rows + 1] - starts
    if cap is not None:
        lens = np.minimum(lens, cap)
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    owner = np.repeat(np.arange(len(rows), dtype=np.int64), lens)
    pos = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens) + starts[owner]
    return pos, owner


@dataclass(eq=False)
class LightGraph:
    """LightRAG's graph as arrays, built at index time and persisted (:data:`LIGHT_GRAPH`):
    what a query reads instead of scanning the KG, so its work follows the entities, relations
    and chunks it touches.

    Relation ``i`` is the KG relation ``(entity_ids[src[i]], entity_ids[dst[i]])``.

    Attributes:
        src, dst: int32 ``(n_relations,)`` entity rows of the endpoints (key order).
        weight: float64 ``(n_relations,)`` relation weights.
        degree: int32 ``(n_entities,)`` neighbours per entity.
        rank: int32 ``(n_relations,)`` position of each relation in LightRAG's relation order
            (edge degree ``deg(u) + deg(v)`` descending, then weight (at float32 precision, as
            the adjacency matrix holds it) descending, then the endpoint rows).
        inc_indptr, inc_rel: CSR entity → incident relations, each list in ``rank`` order.
        rel_chunk_indptr, rel_chunk_rows: CSR relation → source chunk rows (in ``chunk_ids``
            order, repeats kept, unknown ids dropped).
        chunk_rel_indptr, chunk_rel: CSR chunk row → relations sourced from it (ascending).
        ent_chunk_indptr, ent_chunk_rows: CSR entity → its chunk rows (``chunk_ids`` order).
        chunk_ent_indptr, chunk_ent: CSR chunk row → the entities listing it (ascending rows).
        chunk_doc: int32 ``(n_chunks,)`` index into ``doc_ids`` of each chunk's document.
        doc_ids: document ids by index.
    """

    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    degree: np.ndarray
    rank: np.ndarray
    inc_indptr: np.ndarray
    inc_rel: np.ndarray
    rel_chunk_indptr: np.ndarray
    rel_chunk_rows: np.ndarray
    chunk_rel_indptr: np.ndarray
    chunk_rel: np.ndarray
    ent_chunk_indptr: np.ndarray
    ent_chunk_rows: np.ndarray
    chunk_ent_indptr: np.ndarray
    chunk_ent: np.ndarray
    chunk_doc: np.ndarray
    doc_ids: list[str]

    def __post_init__(self) -> None:
        n_rel, n_ent, n_chunks = len(self.src), len(self.degree), len(self.chunk_doc)
        ok = (
            len(self.dst) == len(self.weight) == len(self.rank) == n_rel
            and len(self.inc_indptr) == n_ent + 1 and self.inc_indptr[-1] == len(self.inc_rel)
            and len(self.rel_chunk_indptr) == n_rel + 1 and self.rel_chunk_indptr[-1] == len(self.rel_chunk_rows)
            and len(self.chunk_rel_indptr) == n_chunks + 1 and self.chunk_rel_indptr[-1] == len(self.chunk_rel)
            and len(self.ent_chunk_indptr) == n_ent + 1 and self.ent_chunk_indptr[-1] == len(self.ent_chunk_rows)
            and len(self.chunk_ent_indptr) == n_chunks + 1 and self.chunk_ent_indptr[-1] == len(self.chunk_ent)
        )
        if not ok:
            raise ValueError("LightGraph arrays do not fit together")

    @property
    def n_relations(self) -> int:
        """Relations."""
        return len(self.src)

    def key(self, kg, i: int) -> tuple[str, str]:
        """The KG key of relation ``i``."""
        ids = kg.entity_ids
        return ids[int(self.src[i])], ids[int(self.dst[i])]

    def documents(self, chunk_rows: np.ndarray) -> list[str]:
        """Distinct document ids of ``chunk_rows``, in order (as ``state.document_ids_of``)."""
        if len(chunk_rows) <= 64:  # the common case: plain Python beats numpy's set routines
            return [self.doc_ids[d] for d in dict.fromkeys(self.chunk_doc[chunk_rows].tolist())]
        docs = self.chunk_doc[chunk_rows]
        _, first = np.unique(docs, return_index=True)
        return [self.doc_ids[d] for d in docs[np.sort(first)].tolist()]

    def check(self, state) -> LightGraph:
        """``self`` when it fits ``state`` (entity, relation and chunk counts).

        Raises:
            ValueError: it was built from other records."""
        if (len(self.degree), self.n_relations, len(self.chunk_doc)) != (
            len(state.kg.entity_ids), len(state.kg.relations), len(state.chunks)
        ):
            raise ValueError("LightRAG's persisted graph does not fit this index (rebuild it)")
        return self


def build_light_graph(state) -> LightGraph:
    """Build :class:`LightGraph` from ``state``'s KG and chunks (O(entities + relations +
    mentions), vectorised where it can be)."""
    kg = state.kg
    n_ent, n_chunks = len(kg.entity_ids), len(state.chunks)
    row, chunk_row = kg.row, state.chunk_row
    keys = list(kg.relations)
    n_rel = len(keys)
    src = np.fromiter((row[a] for a, _ in keys), np.int64, n_rel)
    dst = np.fromiter((row[b] for _, b in keys), np.int64, n_rel)
    rels = kg.relations
    weight = np.fromiter((float(rels[k].weight) for k in keys), np.float64, n_rel)
    degree = (np.bincount(src, minlength=n_ent) + np.bincount(dst, minlength=n_ent)).astype(np.int32)
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    edeg = degree[lo].astype(np.int64) + degree[hi]
    w32 = weight.astype(np.float32).astype(np.float64)
    order = np.lexsort((hi, lo, -w32, -edeg))
    rank = np.empty(n_rel, np.int32)
    rank[order] = np.arange(n_rel, dtype=np.int32)
    ends = np.concatenate([src, dst])
    rel2 = np.concatenate([np.arange(n_rel), np.arange(n_rel)])
    inc_order = np.lexsort((rank[rel2], ends))
    inc_indptr = np.zeros(n_ent + 1, np.int64)
    np.cumsum(np.bincount(ends, minlength=n_ent), out=inc_indptr[1:])
    inc_rel = rel2[inc_order].astype(np.int32)
    rel_chunk_indptr, rel_chunk_rows = _csr_from_lists(
        [[chunk_row[c] for c in rels[k].chunk_ids if c in chunk_row] for k in keys]
    )
    owner = np.repeat(np.arange(n_rel, dtype=np.int64), np.diff(rel_chunk_indptr))
    pairs = np.unique(rel_chunk_rows.astype(np.int64) * max(n_rel, 1) + owner)
    by_chunk, by_rel = np.divmod(pairs, max(n_rel, 1))
    chunk_rel_indptr = np.zeros(n_chunks + 1, np.int64)
    np.cumsum(np.bincount(by_chunk, minlength=n_chunks), out=chunk_rel_indptr[1:])
    ent_chunk_indptr, ent_chunk_rows = _csr_from_lists(
        [[chunk_row[c] for c in kg.entities[e].chunk_ids if c in chunk_row] for e in kg.entity_ids]
    )
    ent_owner = np.repeat(np.arange(n_ent, dtype=np.int64), np.diff(ent_chunk_indptr))
    by_chunk_order = np.lexsort((ent_owner, ent_chunk_rows))
    chunk_ent_indptr = np.zeros(n_chunks + 1, np.int64)
    np.cumsum(np.bincount(ent_chunk_rows, minlength=n_chunks), out=chunk_ent_indptr[1:])
    doc_index: dict[str, int] = {}
    chunk_doc = np.fromiter(
        (doc_index.setdefault(c.document_id, len(doc_index)) for c in state.chunks), np.int32, n_chunks
    )
    return LightGraph(
        src=src.astype(np.int32), dst=dst.astype(np.int32), weight=weight, degree=degree, rank=rank,
        inc_indptr=inc_indptr, inc_rel=inc_rel,
        rel_chunk_indptr=rel_chunk_indptr, rel_chunk_rows=rel_chunk_rows,
        chunk_rel_indptr=chunk_rel_indptr, chunk_rel=by_rel.astype(np.int32),
        ent_chunk_indptr=ent_chunk_indptr, ent_chunk_rows=ent_chunk_rows,
        chunk_ent_indptr=chunk_ent_indptr, chunk_ent=ent_owner[by_chunk_order].astype(np.int32),
        chunk_doc=chunk_doc, doc_ids=list(doc_index),
    )


_GRAPH_ARRAYS = (
    "src", "dst", "weight", "degree", "rank", "inc_indptr", "inc_rel", "rel_chunk_indptr",
    "rel_chunk_rows", "chunk_rel_indptr", "chunk_rel", "ent_chunk_indptr", "ent_chunk_rows",
    "chunk_ent_indptr", "chunk_ent", "chunk_doc",
)


def light_graph_arrays(g: LightGraph) -> dict[str, np.ndarray]:
    """:class:`LightGraph` as named numpy arrays (document ids packed as UTF-8)."""
    out = {name: getattr(g, name) for name in _GRAPH_ARRAYS}
    out["weight"] = lossless_float32(g.weight)
    packed = pack_strings(g.doc_ids)
    out["doc_ids"], out["doc_ids_offsets"] = packed["utf8"], packed["offsets"]
    return out


def light_graph_from_arrays(arrays: Mapping[str, np.ndarray]) -> LightGraph:
    """The inverse of :func:`light_graph_arrays`.

    Raises:
        KeyError: a missing array; ValueError: arrays that do not fit together.
    """
    return LightGraph(
        **{name: np.asarray(arrays[name]) for name in _GRAPH_ARRAYS if name != "weight"},
        weight=np.asarray(arrays["weight"], np.float64),
        doc_ids=unpack_strings(arrays["doc_ids"], arrays["doc_ids_offsets"]),
    )


#: the derived-cache key of :class:`LightGraph`
LIGHT_GRAPH_KEY = "lightrag:graph"


def light_graph(state) -> LightGraph:
    """The cached :class:`LightGraph` of ``state`` (persisted with the index: :data:`LIGHT_GRAPH`).

    Raises:
        ValueError: a persisted graph that does not fit the state."""
    return state.derived(LIGHT_GRAPH_KEY, lambda: build_light_graph(state)).check(state)


#: LightRAG's graph arrays, built at index time and persisted (:mod:`graphstrata.structures`).
LIGHT_GRAPH = register_derived(
    DerivedSpec(key=LIGHT_GRAPH_KEY, build=build_light_graph, to_arrays=light_graph_arrays,
                from_arrays=light_graph_from_arrays)
)


@dataclass(eq=False)
class RelationVectors:
    """Implicit relation vectors for chunk weight ``w`` (see the module docstring): relation
    ``i``'s vector is ``(1 − w)·mean(endpoint entity vectors) + w·mean(source chunk vectors)``;
    only its norm is stored, plus the mean chunk vector of the few relations with more than
    :data:`HEAVY_RELATION_CHUNKS` source chunks, so a query scores a relation from the entity
    and chunk vectors it touches.

    Attributes:
        weight: ``w``.
        norms: float32 ``(n_relations,)`` norms of the unnormalised vectors (≥ 1e-6).
        heavy: int32 sorted relation indices with a stored chunk mean.
        heavy_mean: float32 ``(len(heavy), dim)`` their mean source-chunk vectors.
    """

    weight: float
    norms: np.ndarray
    heavy: np.ndarray
    heavy_mean: np.ndarray

    def similarity(self, g: LightGraph, state, rels: np.ndarray, query: np.ndarray) -> np.ndarray:
        """float32 cosine of ``query`` to the vectors of relations ``rels`` (int array)."""
        rels = np.asarray(rels, np.int64)
        if len(rels) == 0:
            return np.zeros(0, np.float32)
        q = np.asarray(query, np.float32)
        w = self.weight
        ents = np.concatenate([g.src[rels], g.dst[rels]]).astype(np.int64)
        uniq, inv = np.unique(ents, return_inverse=True)
        es = rows_dot(state.vectors["entities"][uniq], q)[inv]
        v = (1.0 - w) * 0.5 * (es[: len(rels)] + es[len(rels):]).astype(np.float64)
        if w > 0:
            v = v + w * self._chunk_term(g, state, rels, q)
        return (v / self.norms[rels]).astype(np.float32)

    def _chunk_term(self, g: LightGraph, state, rels: np.ndarray, q: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rels), np.float64)
        if len(self.heavy):
            hpos = np.minimum(np.searchsorted(self.heavy, rels), len(self.heavy) - 1)
            is_heavy = self.heavy[hpos] == rels
        else:
            hpos, is_heavy = np.zeros(len(rels), np.int64), np.zeros(len(rels), bool)
        if is_heavy.any():
            out[is_heavy] = rows_dot(self.heavy_mean[hpos[is_heavy]], q)
        light = np.flatnonzero(~is_heavy)
        if len(light):
            pos, owner = csr_ranges(g.rel_chunk_indptr, rels[light])
            if len(pos):
                rows = g.rel_chunk_rows[pos]
                uniq, inv = np.unique(rows, return_inverse=True)
                cs = rows_dot(state.vectors["chunks"][uniq], q)[inv].astype(np.float64)
                sums = np.bincount(owner, weights=cs, minlength=len(light))
                counts = np.bincount(owner, minlength=len(light))
                out[light] = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
        return out


def build_relation_vectors(state, weight: float, g: LightGraph | None = None) -> RelationVectors:
    """Build :class:`RelationVectors` for chunk weight ``weight`` (blocks of 8192 relations)."""
    g = g or light_graph(state)
    ents, chunks = state.vectors["entities"], state.vectors["chunks"]
    n_rel = g.n_relations
    counts = np.diff(g.rel_chunk_indptr)
    mean = sp.csr_matrix(
        (np.repeat(1.0 / np.maximum(counts, 1), counts).astype(np.float32), g.rel_chunk_rows, g.rel_chunk_indptr),
        shape=(n_rel, len(chunks)),
    )
    norms = np.empty(n_rel, np.float32)
    step = 8192
    for s in range(0, n_rel, step):
        e = slice(s, s + step)
        v = (1.0 - weight) * 0.5 * (ents[g.src[e]] + ents[g.dst[e]])
        if weight > 0:
            v = v + weight * np.asarray(mean[e] @ chunks)
        norms[e] = np.linalg.norm(v, axis=1)
    heavy = np.flatnonzero(counts > HEAVY_RELATION_CHUNKS).astype(np.int32)
    dim = chunks.shape[1] if chunks.ndim == 2 else 1
    heavy_mean = np.asarray(mean[heavy] @ chunks, np.float32) if len(heavy) else np.zeros((0, dim), np.float32)
    return RelationVectors(float(weight), np.maximum(norms, 1e-6), heavy, heavy_mean)


def relation_vectors_key(weight: float) -> str:
    """The derived-cache key of :class:`RelationVectors` for chunk weight ``weight``."""
    return f"lightrag:relations:{float(weight):g}"


def relation_vectors(state, weight: float) -> RelationVectors:
    """The cached :class:`RelationVectors` of ``state`` for ``weight`` (the default weight's
    are persisted with the index: :data:`RELATION_VECTORS`).

    Raises:
        ValueError: persisted vectors that do not fit the state."""
    rv = state.derived(relation_vectors_key(weight), lambda: build_relation_vectors(state, weight))
    if len(rv.norms) != len(state.kg.relations):
        raise ValueError("LightRAG's persisted relation vectors do not fit this index (rebuild it)")
    return rv


def _relation_vectors_arrays(rv: RelationVectors) -> dict[str, np.ndarray]:
    return {"weight": np.asarray([rv.weight], np.float64), "norms": rv.norms, "heavy": rv.heavy,
            "heavy_mean": rv.heavy_mean}


def _relation_vectors_from_arrays(arrays: Mapping[str, np.ndarray]) -> RelationVectors:
    heavy, mean = np.asarray(arrays["heavy"], np.int32), np.asarray(arrays["heavy_mean"], np.float32)
    if mean.ndim != 2 or len(mean) != len(heavy):
        raise ValueError("relation vectors: heavy means do not match their relations")
    return RelationVectors(float(np.asarray(arrays["weight"]).ravel()[0]), np.asarray(arrays["norms"], np.float32),
                           heavy, mean)


#: default chunk weight of a relation vector (the ``relation_chunk_weight`` option)
DEFAULT_RELATION_CHUNK_WEIGHT = 0.5

#: the derived-cache key of an LLM build's embedded relation texts (:func:`relation_text_vectors`)
RELATION_TEXT_KEY = "lightrag:relation_text"


def build_relation_text_vectors(state, previous: TextVectors | None = None) -> TextVectors | None:
    """The embedded relation texts of an LLM build (spec §1.8, LightRAG §3.1: one vector per
    relation over its keywords, source and target names and description,
    :func:`~.text_vectors.relation_text`), relation ``i`` (in ``state.kg.relations`` order,
    :class:`LightGraph`'s) at row ``i``: :func:`~.text_vectors.described_text_vectors` (``None``
    for an index whose descriptions are not the LLM's; ``previous``: the vectors to reuse).

    Raises:
        ValueError: the embedder returned another shape.
    """
    kg = state.kg
    return described_text_vectors(state, lambda: [[relation_text(kg, key)] for key in kg.relations], previous,
                                  "embedding relations")


def relation_text_vectors(state) -> TextVectors | None:
    """The state's embedded relation texts (:func:`build_relation_text_vectors`; built at
    index time, persisted with the index and carried over by updates:
    :data:`RELATION_TEXT_VECTORS`), or ``None`` for an index without them.

    Raises:
        ValueError: persisted vectors that do not fit the state."""
    tv = state.derived(RELATION_TEXT_KEY, lambda: build_relation_text_vectors(state))
    if tv is not None and (tv.n_owners != len(state.kg.relations) or len(tv.texts) != tv.n_owners):
        raise ValueError("LightRAG's persisted relation text vectors do not fit this index (rebuild it)")
    return tv


#: an LLM build's embedded relation texts, built at index time, persisted (an index without
#: them persists a marker) and updated incrementally (an unchanged relation keeps its vector)
RELATION_TEXT_VECTORS = register_derived(text_vectors_spec(RELATION_TEXT_KEY, build_relation_text_vectors))

#: the relation vectors of the default chunk weight, built at index time and persisted
RELATION_VECTORS = register_derived(
    DerivedSpec(
        key=relation_vectors_key(DEFAULT_RELATION_CHUNK_WEIGHT),
        build=lambda state: build_relation_vectors(state, DEFAULT_RELATION_CHUNK_WEIGHT),
        to_arrays=_relation_vectors_arrays,
        from_arrays=_relation_vectors_from_arrays,
    )
)
