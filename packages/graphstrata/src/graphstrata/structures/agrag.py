"""AGRAG's graph and fact vectors: what its queries read, built at index time (spec
seed-agrag.md §1.4–§1.7, §6.3).

* :class:`AgragGraph` (:func:`build_graph`, :data:`GRAPH_SPEC`): entity and passage nodes with
  fact edges (the KG's relations), passage ("Contains") edges and synonym edges (cosine ≥
  :data:`SYNONYM_THRESHOLD`), as the typed adjacency a query reads piecewise;
* the push graph of the default PPR walk (:func:`agrag_push`, :data:`DEFAULT_PUSH_SPEC`);
* the facts of a relation (:func:`fact_triples`, :func:`fact_text`) and an LLM build's fact
  vectors (:func:`fact_vectors`, :data:`FACT_VECTORS`, a :class:`~.text_vectors.TextVectors`).

Each is persisted with the index (:mod:`.registry`); the retrieval is
:mod:`graphstrata.methods.agrag`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from ..extraction import canonical, split_sentences
from .push import PushGraph, Transition, transition_matrix
from .registry import DerivedSpec, register_derived
from .text_vectors import TextVectors, described_text_vectors, text_vectors_spec

PREDICATE = "co-occurs with"
SYNONYM_THRESHOLD = 0.8
SYNONYM_K = 10
#: PPR weight multipliers of the edge types by default: fact, synonym, passage, title passage
#: (the options ``fact_edge_weight`` … ``title_edge_weight``); their push graph is persisted
DEFAULT_WEIGHTS = (0.1, 1.0, 1.0, 4.0)


@dataclass
class AgragGraph:
    """The derived AGRAG graph over ``N = n_entities + n_chunks`` nodes (entities first; the
    passage node of chunk row ``r`` is ``n_entities + r``), stored as the typed adjacency a query
    reads piecewise (:func:`build_graph`; persisted by :data:`GRAPH_SPEC`).

    Attributes:
        n_entities, n_chunks: node counts.
        rel_src, rel_dst: int32 ``(n_relations,)`` entity rows of each relation, in
            ``kg.relations`` order (the relation row; :meth:`rel_key` gives its key).
        rel_weight: float64 ``(n_relations,)`` co-occurrence count of each relation (≥ 1).
        chunk_rel: CSR ``(n_chunks, n_relations)``: which relations occur in which chunk.
        entity_facts: CSR ``(n_entities, n_entities)`` symmetric, value = relation row (int32;
            the first relation of a pair when two keys join the same entities; no self-loops).
        entity_synonyms: CSR ``(n_entities, n_entities)`` symmetric, value = cosine (float64).
        entity_chunks: CSR ``(n_entities, n_chunks)``: the chunks mentioning each entity (int8 1).
        chunk_entities: CSR ``(n_chunks, n_entities)``: its transpose.
        titles: int32 sorted entity rows that are document titles.

    Every CSR has sorted indices (:func:`~graphstrata.methods.graph_ops.csr_find` looks edges up
    in them). The
    ``(N, N)`` matrices of the typed graph (:attr:`fact`, :attr:`synonym`, :attr:`contains`,
    :attr:`title_contains`) are materialised on first access only (inspection, exact PageRank).
    """

    n_entities: int
    n_chunks: int
    rel_src: np.ndarray
    rel_dst: np.ndarray
    rel_weight: np.ndarray
    chunk_rel: sp.csr_matrix
    entity_facts: sp.csr_matrix
    entity_synonyms: sp.csr_matrix
    entity_chunks: sp.csr_matrix
    chunk_entities: sp.csr_matrix
    titles: np.ndarray

    @property
    def n(self) -> int:
        """All nodes: entities then passages."""
        return self.n_entities + self.n_chunks

    @property
    def nbytes(self) -> int:
        """Memory of the arrays, in bytes."""
        total = self.rel_src.nbytes + self.rel_dst.nbytes + self.rel_weight.nbytes + self.titles.nbytes
        for m in (self.chunk_rel, self.entity_facts, self.entity_synonyms, self.entity_chunks,
                  self.chunk_entities):
            total += m.indptr.nbytes + m.indices.nbytes + m.data.nbytes
        return int(total)

    def rel_key(self, state, row: int) -> tuple[str, str]:
        """The ``kg.relations`` key ``(source id, target id)`` of relation ``row``."""
        ids = state.kg.entity_ids
        return ids[int(self.rel_src[row])], ids[int(self.rel_dst[row])]

    def _square(self, block: sp.spmatrix, offset: int = 0) -> sp.csr_matrix:
        """``block`` (rows: entities) as an ``(N, N)`` symmetric matrix, its columns shifted by
        ``offset``."""
        c = sp.coo_matrix(block)
        return _sym(c.row.astype(np.int64), c.col.astype(np.int64) + offset,
                    c.data.astype(np.float64), self.n)

    @cached_property
    def fact(self) -> sp.csr_matrix:
        """CSR ``(N, N)`` symmetric, value = relation row + 1 (the entity block only)."""
        m = sp.triu(self.entity_facts, k=1).tocoo()
        return self._square(sp.coo_matrix((m.data.astype(np.float64) + 1.0, (m.row, m.col)), m.shape))

    @cached_property
    def synonym(self) -> sp.csr_matrix:
        """CSR ``(N, N)`` symmetric, value = cosine."""
        return self._square(sp.triu(self.entity_synonyms, k=1))

    @cached_property
    def contains(self) -> sp.csr_matrix:
        """CSR ``(N, N)`` symmetric, 1.0 on chunk–entity pairs."""
        return self._square(self.entity_chunks, self.n_entities)

    @cached_property
    def title_contains(self) -> sp.csr_matrix:
        """The part of :attr:`contains` whose entity is a document title."""
        keep = np.zeros(self.n_entities)
        keep[self.titles] = 1.0
        return self._square(sp.diags(keep) @ self.entity_chunks, self.n_entities)

    def adjacency(
        self, fact_w: float, synonym_w: float, passage_w: float, title_w: float = 0.0
    ) -> sp.csr_matrix:
        """Float64 CSR ``(N, N)``: the symmetric weighted adjacency of the PPR walk (fact
        edges ``fact_w`` × co-occurrence count, synonym ``synonym_w`` × cosine, passage
        ``passage_w``, plus ``title_w`` on passage edges to a document-title entity)."""
        weights = self.fact.copy()
        if weights.nnz:
            weights.data = self.rel_weight[weights.data.astype(np.int64) - 1]
        adj = (fact_w * weights + synonym_w * self.synonym + passage_w * self.contains
               + title_w * self.title_contains)
        return sp.csr_matrix(adj)

    def walk(
        self, fact_w: float, synonym_w: float, passage_w: float, title_w: float = 0.0
    ) -> Transition:
        """PPR operator of the typed graph with per-type weight multipliers
        (:meth:`adjacency`), for exact power iteration."""
        return transition_matrix(self.adjacency(fact_w, synonym_w, passage_w, title_w))

    def push(
        self, fact_w: float, synonym_w: float, passage_w: float, title_w: float = 0.0
    ) -> PushGraph:
        """The same walk as :meth:`walk` as a forward-push graph (:mod:`.push`): each node's
        out-edges with probability ``weight / weighted degree``; a node without edges is
        dangling."""
        a = self.adjacency(fact_w, synonym_w, passage_w, title_w)
        a.eliminate_zeros()
        a.sort_indices()
        deg = np.asarray(a.sum(axis=1)).ravel()
        src = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
        probs = (a.data / deg[src]).astype(np.float32)
        return PushGraph(np.ascontiguousarray(a.indptr, np.int64), np.ascontiguousarray(a.indices, np.int32),
                         probs, None, a.shape[0])


def fact_triples(state, a: str, b: str) -> list[tuple[str, str, str, str]]:
    """The distinct facts of the relation between entities ``a`` and ``b``:
    ``[(subject, predicate, object, sentence), ...]``.

    An LLM-built AGRAG relation keeps each triple ``s p o`` as one description line and its
    predicates as ``keywords`` (:class:`graphstrata.indexing.llm_extract.AgragLLMExtractor`):
    each line whose text is ``<name of a or b> <one of the keywords> <name of the other>``
    becomes its own fact, with the model's predicate and direction (parallel facts between one
    pair stay distinct). Any other relation (the offline co-occurrence relations) is one fact
    ``(name of a, "co-occurs with", name of b)`` with its shortest sentence.
    """
    rel = state.kg.relations[(a, b)]
    ents = state.kg.entities
    out: list[tuple[str, str, str, str]] = []
    keywords = [k.strip() for k in (rel.keywords or "").split(",") if k.strip()]
    if keywords:
        ends = {a, b}
        preds = sorted(dict.fromkeys(keywords), key=len, reverse=True)
        for line in rel.description.split("\n"):
            line = line.strip()
            for p in preds:
                head, sep, tail = line.partition(f" {p} ")
                if sep and canonical(head) in ends and canonical(tail) in ends and canonical(head) != canonical(tail):
                    fact = (ents[canonical(head)].name, p, ents[canonical(tail)].name, line)
                    if fact not in out:
                        out.append(fact)
                    break
    if not out:
        out.append((ents[a].name, PREDICATE, ents[b].name, shortest_sentence(rel.description)))
    return out


def shortest_sentence(description: str) -> str:
    """The fact text (spec §6.3 item 1): the shortest sentence of a relation's description."""
    sents = [description[s:e].strip() for s, e in split_sentences(description)]
    return min(sents, key=len) if sents else description


def _sym(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, n: int) -> sp.csr_matrix:
    m = sp.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()
    m.sum_duplicates()
    return (m + m.T).tocsr()


def _incidence(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """0/1 CSR (int8, sorted indices, duplicates once) of the ``(rows, cols)`` pairs."""
    key = np.unique(np.asarray(rows, np.int64) * max(shape[1], 1) + np.asarray(cols, np.int64))
    r, c = np.divmod(key, max(shape[1], 1))
    indptr = np.zeros(shape[0] + 1, np.int64)
    np.cumsum(np.bincount(r, minlength=shape[0]), out=indptr[1:])
    return sp.csr_matrix((np.ones(len(c), np.int8), c.astype(np.int32), indptr), shape=shape)


def _symmetric_pairs(a: np.ndarray, b: np.ndarray, vals: np.ndarray, n: int) -> sp.csr_matrix:
    """CSR ``(n, n)`` holding ``vals[i]`` at ``(a[i], b[i])`` and ``(b[i], a[i])``; a pair
    given twice keeps its first value, self-pairs are dropped; sorted indices."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keep = lo != hi
    lo, hi, vals = lo[keep], hi[keep], np.asarray(vals)[keep]
    _, first = np.unique(lo * max(n, 1) + hi, return_index=True)
    first.sort()
    lo, hi, vals = lo[first], hi[first], vals[first]
    m = sp.coo_matrix((np.concatenate([vals, vals]), (np.concatenate([lo, hi]), np.concatenate([hi, lo]))),
                      shape=(n, n)).tocsr()
    m.sort_indices()
    return m


def build_graph(state) -> AgragGraph:
    """Build the AGRAG graph from the state's store (spec §1.4–§1.6, §6.3).

    O(store) time: one pass over the relations and the entity mentions, plus one batched
    C-HNSW search (layer 0) for the synonym edges, which dominates (about 15 s for 118k
    entities on one thread). Run at index time (:data:`GRAPH_SPEC`), never per query.
    """
    kg = state.kg
    n_e, n_c = len(kg.entity_ids), len(state.chunks)
    keys = list(kg.relations)
    n_r = len(keys)
    src = np.fromiter((kg.row[a] for a, _ in keys), np.int64, n_r)
    dst = np.fromiter((kg.row[b] for _, b in keys), np.int64, n_r)
    wts = np.fromiter((r.weight for r in kg.relations.values()), np.float64, n_r)
    wts = np.maximum(wts, 1.0) if n_r else wts
    chunk_row = state.chunk_row
    # relation ↔ chunk
    cr_rows, cr_cols = [], []
    for i, r in enumerate(kg.relations.values()):
        for cid in r.chunk_ids:
            row = chunk_row.get(cid)
            if row is not None:
                cr_rows.append(row)
                cr_cols.append(i)
    chunk_rel = _incidence(np.asarray(cr_rows, np.int64), np.asarray(cr_cols, np.int64), (n_c, n_r))
    # entity ↔ chunk (Contains edges)
    ec_rows, ec_cols = [], []
    for i, eid in enumerate(kg.entity_ids):
        for cid in kg.entities[eid].chunk_ids:
            row = chunk_row.get(cid)
            if row is not None:
                ec_rows.append(i)
                ec_cols.append(row)
    ec_rows_a, ec_cols_a = np.asarray(ec_rows, np.int64), np.asarray(ec_cols, np.int64)
    entity_chunks = _incidence(ec_rows_a, ec_cols_a, (n_e, n_c))
    chunk_entities = _incidence(ec_cols_a, ec_rows_a, (n_c, n_e))
    titles = sorted({
        kg.row[key]
        for d in state.documents.values()
        if d.metadata.get("title") and (key := canonical(str(d.metadata["title"]))) in kg.row
    })
    entity_facts = _symmetric_pairs(src, dst, np.arange(n_r, dtype=np.int32), n_e)
    return AgragGraph(
        n_e, n_c, src.astype(np.int32), dst.astype(np.int32), wts, chunk_rel, entity_facts,
        _synonym_edges(state), entity_chunks, chunk_entities, np.asarray(titles, np.int32),
    )


def _synonym_edges(state) -> sp.csr_matrix:
    """Entity pairs with cosine ≥ ``SYNONYM_THRESHOLD`` (≤ ``SYNONYM_K`` per entity, §1.6):
    CSR ``(n_entities, n_entities)`` symmetric, value = cosine (float64 of the float32
    similarity)."""
    n_e = len(state.kg.entity_ids)
    vecs = state.vectors.get("entities")
    layered = state.layered
    if vecs is None or len(vecs) < 2 or layered is None:
        return sp.csr_matrix((n_e, n_e))
    kg = state.kg
    ok = np.fromiter(
        (sum(ch.isalnum() for ch in kg.entities[e].name) > 2 for e in kg.entity_ids),
        bool,
        len(kg.entity_ids),
    )
    k = min(SYNONYM_K + 1, len(vecs))
    # one batch search of layer 0 on the index threads, beam max(32, 2k) (LayeredIndex.knn; the
    # default beam 64 on one thread took 24 s for 118k entities and found 99.7 % of these pairs)
    ids, sims = layered.knn(k, layer=0)
    sims = sims.astype(np.float64)
    rows = np.repeat(np.arange(len(vecs)), ids.shape[1])
    cols, vals = ids.ravel(), sims.ravel()
    keep = (cols >= 0) & (cols != rows) & (vals >= SYNONYM_THRESHOLD)
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    keep = ok[rows] & ok[cols]
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    # a pair found from both sides: once (its first finding in row order, as before)
    return _symmetric_pairs(rows, cols, vals, n_e)


def agrag_graph(state) -> AgragGraph:
    """The state's AGRAG graph (built at index time and persisted, :data:`GRAPH_SPEC`; built
    here on first use when a state has none)."""
    return state.derived(GRAPH_KEY, lambda: build_graph(state))


def push_key(fact_w: float, synonym_w: float, passage_w: float, title_w: float) -> str:
    """The :meth:`~graphstrata.state.EngineState.derived` key of the push graph for these
    edge-type weights."""
    return f"agrag:push:{float(fact_w):g}:{float(synonym_w):g}:{float(passage_w):g}:{float(title_w):g}"


def agrag_push(state, fact_w: float, synonym_w: float, passage_w: float, title_w: float) -> PushGraph:
    """The cached forward-push graph of the state's AGRAG walk for these weights (the default
    weights' is built at index time and persisted: :data:`DEFAULT_PUSH_SPEC`)."""
    return state.derived(push_key(fact_w, synonym_w, passage_w, title_w),
                         lambda: agrag_graph(state).push(fact_w, synonym_w, passage_w, title_w))


_CSR_FIELDS = ("chunk_rel", "entity_facts", "entity_synonyms", "entity_chunks", "chunk_entities")
_CSR_DATA = {"chunk_rel": None, "entity_facts": np.int32, "entity_synonyms": np.float32,
             "entity_chunks": None, "chunk_entities": None}  # None: 0/1, not stored


def _graph_arrays(g: AgragGraph) -> dict[str, np.ndarray]:
    """:data:`GRAPH_SPEC`'s codec: the graph as named numeric arrays (synonym cosines as
    float32, which is what they were computed in)."""
    out = {
        "shape": np.asarray([g.n_entities, g.n_chunks], np.int64),
        "rel_src": g.rel_src, "rel_dst": g.rel_dst, "rel_weight": g.rel_weight, "titles": g.titles,
    }
    for name in _CSR_FIELDS:
        m = getattr(g, name)
        out[f"{name}.indptr"] = np.asarray(m.indptr, np.int64)
        out[f"{name}.indices"] = np.asarray(m.indices, np.int32)
        if _CSR_DATA[name] is not None:
            out[f"{name}.data"] = np.asarray(m.data, _CSR_DATA[name])
    return out


def _graph_from_arrays(arrays) -> AgragGraph:
    """The graph :func:`_graph_arrays` wrote.

    Raises:
        ValueError: a missing array or inconsistent lengths (named).
    """
    try:
        n_e, n_c = (int(x) for x in np.asarray(arrays["shape"]).ravel()[:2])
        src = np.asarray(arrays["rel_src"], np.int32)
        dst = np.asarray(arrays["rel_dst"], np.int32)
        wts = np.asarray(arrays["rel_weight"], np.float64)
        titles = np.asarray(arrays["titles"], np.int32)
        n_r = len(src)
        shapes = {"chunk_rel": (n_c, n_r), "entity_facts": (n_e, n_e), "entity_synonyms": (n_e, n_e),
                  "entity_chunks": (n_e, n_c), "chunk_entities": (n_c, n_e)}
        mats = {}
        for name in _CSR_FIELDS:
            indptr = np.asarray(arrays[f"{name}.indptr"], np.int64)
            indices = np.asarray(arrays[f"{name}.indices"], np.int32)
            kind = _CSR_DATA[name]
            data = (np.ones(len(indices), np.int8) if kind is None
                    else np.asarray(arrays[f"{name}.data"], kind))
            if name == "entity_synonyms":
                data = data.astype(np.float64)
            shape = shapes[name]
            if (len(indptr) != shape[0] + 1 or indptr[-1] != len(indices) or len(data) != len(indices)
                    or (len(indices) and (indices.min() < 0 or indices.max() >= shape[1]))):
                raise ValueError(f"agrag graph: {name} arrays are inconsistent")
            m = sp.csr_matrix((data, indices, indptr), shape=shape)
            m.sort_indices()  # written sorted (build_graph): a check, no copy
            mats[name] = m
    except KeyError as exc:
        raise ValueError(f"agrag graph: missing array {exc}") from None
    if len(dst) != n_r or len(wts) != n_r:
        raise ValueError("agrag graph: relation arrays differ in length")
    return AgragGraph(n_e, n_c, src, dst, wts, mats["chunk_rel"], mats["entity_facts"],
                      mats["entity_synonyms"], mats["entity_chunks"], mats["chunk_entities"], titles)


GRAPH_KEY = "agrag:graph"
#: the AGRAG graph, built at index time and persisted (:mod:`.registry`)
GRAPH_SPEC = register_derived(DerivedSpec(key=GRAPH_KEY, build=build_graph, to_arrays=_graph_arrays,
                                          from_arrays=_graph_from_arrays))


def fact_text(subject: str, predicate: str, obj: str, sentence: str) -> str:
    """The text a fact vector embeds (spec §1.7, decision #14 paper mode): ``"s p o"`` for
    an LLM triple; for a fact without an LLM predicate (``"co-occurs with"``, e.g. a LightRAG
    relation whose description states no triple) its sentence (§6.3 item 1: the fact text),
    ``"s o"`` when it has none."""
    if predicate != PREDICATE:
        return f"{subject} {predicate} {obj}"
    return sentence.strip() or f"{subject} {obj}"


#: the derived-cache key of an LLM build's fact vectors (:func:`fact_vectors`)
FACT_VECTORS_KEY = "agrag:facts"


def build_fact_vectors(state, previous: TextVectors | None = None) -> TextVectors | None:
    """The fact vectors of an LLM build (spec §1.7: the fact store; §2.1: query → facts):
    relation ``i`` (``state.kg.relations`` order, the AGRAG graph's relation rows) owns one
    text per fact of :func:`fact_triples` (parallel facts stay distinct), in that order,
    embedded as :func:`fact_text`: :func:`~.text_vectors.described_text_vectors` (``None`` for an
    index whose relations are not the LLM's; ``previous``: the vectors to reuse).

    Raises:
        ValueError: the embedder returned another shape.
    """
    return described_text_vectors(
        state, lambda: [[fact_text(*f) for f in fact_triples(state, a, b)] for a, b in state.kg.relations],
        previous, "embedding facts",
    )


def fact_vectors(state) -> TextVectors | None:
    """The state's fact vectors (:func:`build_fact_vectors`; built at index time, persisted
    and carried over by updates: :data:`FACT_VECTORS`), or ``None`` for an index without them.

    Raises:
        ValueError: persisted vectors that do not fit the state."""
    fv = state.derived(FACT_VECTORS_KEY, lambda: build_fact_vectors(state))
    if fv is not None and fv.n_owners != len(state.kg.relations):
        raise ValueError("AGRAG's persisted fact vectors do not fit this index (rebuild it)")
    return fv


#: an LLM build's fact vectors, built at index time, persisted (an index without them persists
#: a marker) and updated incrementally
FACT_VECTORS = register_derived(text_vectors_spec(FACT_VECTORS_KEY, build_fact_vectors))


#: the default PPR walk's push graph, built at index time and persisted with the graph
DEFAULT_PUSH_SPEC = register_derived(DerivedSpec(
    key=push_key(*DEFAULT_WEIGHTS),
    build=lambda state: agrag_graph(state).push(*DEFAULT_WEIGHTS),
    to_arrays=PushGraph.arrays,
    from_arrays=PushGraph.from_arrays,
))
