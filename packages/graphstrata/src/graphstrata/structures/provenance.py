"""Provenance: which chunks make up each document, which chunks each entity and community
cites, as arrays built at index time and persisted, so a hit's chunk and document lists cost a
few array reads at query time.

* :func:`document_rows` (:data:`DOCUMENT_ROWS`): ``{document_id: [chunk rows]}``;
* :func:`entity_chunk_matrix`: which chunks mention which entities (not persisted: built from
  the records when a builder needs it);
* :class:`EntityChunks` (:data:`ENTITY_CHUNKS`): each entity's chunk rows, bounded to its
  :data:`ENTITY_CHUNK_LIMIT` most representative ones;
* :class:`Provenance` (:data:`PROVENANCE`): chunk → document and community → chunk rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from .registry import DerivedSpec, pack_strings, register_derived, unpack_strings

if TYPE_CHECKING:  # pragma: no cover
    from ..state import EngineState


def entity_chunk_matrix(state: EngineState) -> sp.csr_matrix:
    """Which chunks mention which entities, cached per index state.

    Returns:
        float64 CSR ``(n_entities, n_chunks)`` (rows in ``kg.entity_ids`` order, columns in
        chunk row order), 1.0 where the entity lists the chunk; a row's nnz is the entity's
        chunk frequency.
    """

    def build() -> sp.csr_matrix:
        rows, cols = [], []
        for i, eid in enumerate(state.kg.entity_ids):
            for cid in state.kg.entities[eid].chunk_ids:
                row = state.chunk_row.get(cid)
                if row is not None:
                    rows.append(i)
                    cols.append(row)
        shape = (len(state.kg.entity_ids), len(state.chunks))
        m = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
        m.data[:] = 1.0  # a chunk listed twice is still one mention
        return m

    return state.derived("base:entity_chunks", build)


def document_rows(state: EngineState) -> dict[str, list[int]]:
    """``{document_id: [chunk row, ...]}`` (rows ascending), cached per index state; built at
    index time and persisted (:data:`DOCUMENT_ROWS`)."""
    return state.derived(DOCUMENT_ROWS.key, lambda: _build_document_rows(state))


def _build_document_rows(state: EngineState) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r, c in enumerate(state.chunks):
        out.setdefault(c.document_id, []).append(r)
    return out


def _document_rows_arrays(by_doc: Mapping[str, list[int]]) -> dict[str, np.ndarray]:
    ids = list(by_doc)
    sizes = np.fromiter((len(by_doc[d]) for d in ids), np.int64, len(ids))
    indptr = np.zeros(len(ids) + 1, np.int64)
    indptr[1:] = np.cumsum(sizes)
    rows = np.fromiter((r for d in ids for r in by_doc[d]), np.int64, int(indptr[-1]))
    return {**pack_strings(ids), "indptr": indptr, "rows": rows}


def _document_rows_from_arrays(arrays: Mapping[str, np.ndarray]) -> dict[str, list[int]]:
    ids = unpack_strings(arrays["utf8"], arrays["offsets"])
    indptr = np.asarray(arrays["indptr"], np.int64).ravel()
    rows = np.asarray(arrays["rows"], np.int64).ravel()
    if len(indptr) != len(ids) + 1 or indptr[0] != 0 or indptr[-1] != len(rows) or (np.diff(indptr) < 0).any():
        raise ValueError("document rows: indptr does not match the ids and rows")
    flat = rows.tolist()
    bounds = indptr.tolist()
    return {d: flat[bounds[i]:bounds[i + 1]] for i, d in enumerate(ids)}


#: ``{document_id: [chunk rows]}`` of a state (:func:`document_rows`), built at index time and
#: persisted: rebuilding it walks every chunk (0.1 s at 44k chunks, seconds at 1M).
DOCUMENT_ROWS = register_derived(
    DerivedSpec(
        key="base:document_rows",
        build=_build_document_rows,
        to_arrays=_document_rows_arrays,
        from_arrays=_document_rows_from_arrays,
    )
)


#: most chunk rows kept per entity by :func:`entity_chunks` (its most representative ones);
#: a query reads at most this many chunks of any retrieved entity, however many mention it.
ENTITY_CHUNK_LIMIT = 50


@dataclass(frozen=True)
class EntityChunks:
    """Each entity's chunk rows, bounded: what a query reads of an entity's mentions.

    An entity mentioned by at most :attr:`limit` chunks keeps all of them (rows ascending); a
    hub mentioned by more keeps its :attr:`limit` most representative ones — highest cosine
    between the chunk's vector and the entity's, ties by lower row — so a hub entity (in 2 %
    of a million chunks) costs a query what any other entity costs. Built at index time and
    persisted (:data:`ENTITY_CHUNKS`).

    Attributes:
        indptr: int64 ``(n_entities + 1,)`` offsets into :attr:`rows` (``kg.entity_ids``
            order).
        rows: int32 kept chunk rows, per entity most representative first.
        counts: int64 ``(n_entities,)`` number of chunks mentioning each entity (all of them).
        limit: most rows kept per entity.
    """

    indptr: np.ndarray
    rows: np.ndarray
    counts: np.ndarray
    limit: int

    def top(self, entity: int, m: int | None = None) -> np.ndarray:
        """int64 kept rows of entity row ``entity``, at most ``m`` (``None``: all kept)."""
        a, b = int(self.indptr[entity]), int(self.indptr[entity + 1])
        if m is not None:
            b = min(b, a + max(int(m), 0))
        return self.rows[a:b].astype(np.int64)

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays by name (:func:`_entity_chunks_from_arrays` reads them back)."""
        return {"indptr": self.indptr, "rows": self.rows, "counts": self.counts,
                "limit": np.asarray([self.limit], np.int64)}


def build_entity_chunks(state: EngineState, limit: int = ENTITY_CHUNK_LIMIT) -> EntityChunks:
    """:class:`EntityChunks` of ``state`` from :func:`entity_chunk_matrix`.

    Ranking a hub's chunks costs one dot product per mention of a hub (entities of more than
    ``limit`` chunks), at index time.

    Raises:
        ValueError: ``limit < 1``.
    """
    limit = int(limit)
    if limit < 1:
        raise ValueError(f"limit must be >= 1 chunk, got {limit}")
    m = entity_chunk_matrix(state)
    if not m.has_sorted_indices:
        m = m.copy()
        m.sort_indices()
    counts = np.diff(m.indptr).astype(np.int64)
    kept = np.minimum(counts, limit)
    indptr = np.zeros(len(counts) + 1, np.int64)
    indptr[1:] = np.cumsum(kept)
    rows = np.empty(int(indptr[-1]), np.int32)
    small = counts <= limit
    # entities within the limit keep every row: copy their CSR slices in one pass
    src = np.repeat(small, counts)
    dst = np.repeat(small, kept)
    rows[dst] = m.indices[src]
    hubs = np.flatnonzero(~small)
    if len(hubs):
        chunk_vecs = state.vectors.get("chunks")
        ent_vecs = state.vectors.get("entities")
        for e in hubs.tolist():
            cand = m.indices[m.indptr[e]:m.indptr[e + 1]].astype(np.int64)
            if chunk_vecs is not None and ent_vecs is not None and len(ent_vecs) > e:
                sims = chunk_vecs[cand] @ ent_vecs[e]
                order = np.lexsort((cand, -sims.astype(np.float64)))[:limit]
            else:  # no vectors: the first rows
                order = np.arange(limit)
            rows[indptr[e]:indptr[e + 1]] = cand[order]
    return EntityChunks(indptr, rows, counts, limit)


def _entity_chunks_from_arrays(arrays: Mapping[str, np.ndarray]) -> EntityChunks:
    indptr = np.ascontiguousarray(arrays["indptr"], np.int64).ravel()
    rows = np.ascontiguousarray(arrays["rows"], np.int32).ravel()
    counts = np.ascontiguousarray(arrays["counts"], np.int64).ravel()
    limit = int(np.asarray(arrays["limit"]).ravel()[0])
    if len(indptr) != len(counts) + 1 or indptr[0] != 0 or indptr[-1] != len(rows) or (np.diff(indptr) < 0).any():
        raise ValueError("entity chunks: indptr does not match the rows and counts")
    return EntityChunks(indptr, rows, counts, limit)


#: The bounded entity → chunk rows of a state (:class:`EntityChunks`), built at index time and
#: persisted.
ENTITY_CHUNKS = register_derived(
    DerivedSpec(
        key=f"base:entity_chunk_rows:{ENTITY_CHUNK_LIMIT}",
        build=lambda state: build_entity_chunks(state, ENTITY_CHUNK_LIMIT),
        to_arrays=EntityChunks.arrays,
        from_arrays=_entity_chunks_from_arrays,
    )
)


def entity_chunks(state: EngineState) -> EntityChunks:
    """The cached :class:`EntityChunks` of ``state`` (:data:`ENTITY_CHUNKS`)."""
    return state.derived(ENTITY_CHUNKS.key, lambda: build_entity_chunks(state, ENTITY_CHUNK_LIMIT))


@dataclass(frozen=True)
class Provenance:
    """Chunk rows → documents and community → chunk rows as arrays, so a hit's provenance costs
    a few array reads instead of a dictionary lookup per chunk id. Built at index time and
    persisted (:data:`PROVENANCE`).

    Attributes:
        doc_of: int32 ``(n_chunks,)`` index into :attr:`documents` of each chunk's document
            (``-1``: a document the state does not hold).
        documents: document ids, in ``state.documents`` order.
        indptr: per community layer ``i ≥ 1`` (``indptr[i - 1]``), int64
            ``(n_communities + 1,)`` offsets into :attr:`rows`.
        rows: per layer, int32 chunk rows of each community's ``chunk_ids`` (unknown ids
            dropped), in their order.
    """

    doc_of: np.ndarray
    documents: list[str]
    indptr: list[np.ndarray]
    rows: list[np.ndarray]

    def document_ids(self, rows: np.ndarray) -> list[str]:
        """Distinct document ids of chunk ``rows``, in order (as
        :meth:`~graphstrata.state.EngineState.document_ids_of`)."""
        docs = self.documents
        return [docs[d] for d in dict.fromkeys(self.doc_of[np.asarray(rows, np.int64)].tolist()) if d >= 0]

    def community_rows(self, layer: int, row: int) -> np.ndarray:
        """int64 chunk rows of community ``row`` of ``layer`` (≥ 1)."""
        indptr = self.indptr[layer - 1]
        return self.rows[layer - 1][int(indptr[row]):int(indptr[row + 1])].astype(np.int64)

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays by name (:func:`_provenance_from_arrays` reads them back)."""
        out = {"doc_of": self.doc_of, **pack_strings(self.documents),
               "layers": np.asarray([len(self.indptr)], np.int64)}
        for i, (indptr, rows) in enumerate(zip(self.indptr, self.rows, strict=True), 1):
            out[f"indptr_{i}"] = indptr
            out[f"rows_{i}"] = rows
        return out


def build_provenance(state: EngineState) -> Provenance:
    """:class:`Provenance` of ``state`` (one pass over the chunks and the communities' chunk
    lists)."""
    documents = list(state.documents)
    index = {d: i for i, d in enumerate(documents)}
    doc_of = np.fromiter((index.get(c.document_id, -1) for c in state.chunks), np.int32, len(state.chunks))
    get = state.chunk_row.get
    indptrs, rows = [], []
    for layer in state.communities:
        lists = [[r for r in map(get, c.chunk_ids) if r is not None] for c in layer]
        indptr = np.zeros(len(lists) + 1, np.int64)
        indptr[1:] = np.cumsum([len(x) for x in lists])
        indptrs.append(indptr)
        rows.append(np.fromiter((r for x in lists for r in x), np.int32, int(indptr[-1])))
    return Provenance(doc_of, documents, indptrs, rows)


def _provenance_from_arrays(arrays: Mapping[str, np.ndarray]) -> Provenance:
    doc_of = np.ascontiguousarray(arrays["doc_of"], np.int32).ravel()
    documents = unpack_strings(arrays["utf8"], arrays["offsets"])
    if len(doc_of) and (doc_of.max() >= len(documents) or doc_of.min() < -1):
        raise ValueError("provenance: a chunk names a document out of range")
    indptrs, rows = [], []
    for i in range(1, int(np.asarray(arrays["layers"]).ravel()[0]) + 1):
        indptr = np.ascontiguousarray(arrays[f"indptr_{i}"], np.int64).ravel()
        layer_rows = np.ascontiguousarray(arrays[f"rows_{i}"], np.int32).ravel()
        if len(indptr) < 1 or indptr[0] != 0 or indptr[-1] != len(layer_rows) or (np.diff(indptr) < 0).any():
            raise ValueError(f"provenance: layer {i} offsets do not match its rows")
        if len(layer_rows) and (layer_rows.min() < 0 or layer_rows.max() >= len(doc_of)):
            raise ValueError(f"provenance: layer {i} names a chunk row out of range")
        indptrs.append(indptr)
        rows.append(layer_rows)
    return Provenance(doc_of, documents, indptrs, rows)


#: Chunk → document and community → chunk rows of a state (:class:`Provenance`), built at
#: index time and persisted.
PROVENANCE = register_derived(
    DerivedSpec(key="base:provenance", build=build_provenance, to_arrays=Provenance.arrays,
                from_arrays=_provenance_from_arrays)
)


def provenance(state: EngineState) -> Provenance:
    """The cached :class:`Provenance` of ``state`` (:data:`PROVENANCE`)."""
    return state.derived(PROVENANCE.key, lambda: build_provenance(state))
