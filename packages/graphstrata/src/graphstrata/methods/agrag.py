"""AGRAG retrieval, offline ("AGRAG-offline", spec seed-agrag.md §6.3; paper arXiv 2511.05549).

The paper's method is not LLM-free (spec §0): triples come from an LLM at index time and an LLM
filters the query's facts. This preset keeps AGRAG's retrieval pipeline (§2) over the core's
statistical graph and replaces both LLM steps with the spec's offline variant (§6.3):

**Graph** (:func:`~graphstrata.structures.agrag.build_graph`, ``state.derived("agrag:graph")``;
registered in :mod:`graphstrata.structures.agrag` so it is built at index time and persisted
with the index, together with the push graph of the default PPR walk,
:data:`~graphstrata.structures.agrag.DEFAULT_PUSH_SPEC`):

* entity nodes: the core's entities (TF-IDF 1–3-gram hints, capitalised spans, titles —
  :mod:`graphstrata.extraction`), passage nodes: the chunks;
* fact edges: the core's relations — entity pairs co-occurring in a sentence, predicate
  ``"co-occurs with"``, PPR weight = co-occurrence count (§1.5), the shortest shared sentence
  as the fact text (§6.3 item 1);
* passage ("Contains") edges chunk–entity, PPR weight 1;
* synonym edges between entities with cosine ≥ 0.8 (§1.6), PPR weight = cosine, found with
  the C-HNSW layer 0 (``SYNONYM_K`` neighbours per entity, entities of ≤ 2 alphanumeric
  characters skipped);
* a pseudo node joined to every passage of the Steiner subgraph (cost 10), only for the
  Steiner step, never in PPR or the output (§1.4, §6.1 #5).

**Query** (§2.11):

1. Hybrid chunk scores ``HS`` = ``alpha``·minmax(cos) + (1 − ``alpha``)·minmax(BM25) over the
   dense ∪ BM25 top-``candidates`` (§2.10, §6.4; :func:`hybrid_candidates`, the values of
   :func:`~.base.hybrid_scores` from the C-HNSW and the query terms' BM25 postings only).
   The paper averages the two (``alpha=0.5``); we default to 0.65, which measured better on
   MuSiQue and no worse on HotpotQA with MiniLM.
2. Fact scores. In an LLM build (:func:`~graphstrata.structures.text_vectors.describes_relations`)
   every fact's text is embedded at index time (:data:`~graphstrata.structures.agrag.FACT_VECTORS`, :func:`~graphstrata.structures.agrag.fact_text`: the
   triple ``"s p o"``, §1.7 paper mode; a fact without an LLM predicate: its sentence, §6.3
   item 1) and ``MS(q, f) = cos(q, f)`` (§2.1, Eq. 7–8; option ``fact_vectors="auto"``). An
   offline index has no fact text worth embedding (its facts are co-occurrences), so its facts
   are scored from the vectors it has (our composition):
   ``MS(q, f) = w·(cos(q, e_s) + cos(q, e_o))/2 + (1 − w)·max_{t ∈ chunks(f)} HS(t)`` with
   ``w = fact_entity_weight``. Top-``top_facts`` facts (k_F = 5) among the candidates: the
   facts of the HS candidate chunks and the facts joining two of the ``entity_candidates``
   entities nearest the query (C-HNSW layer 0) — offline, a fact outside both has MS ≤ w, far
   below the facts of the best chunks (the same facts as scoring every fact on the dev sets).
3. Fact filter (§2.2). With an LLM (the ``llm`` option, else the state's ``llm``):
   one call, stage ``"query:fact_filter"`` (:mod:`graphstrata.llm.prompts.agrag_query`), the
   returned facts snapped to the candidates; output the parser cannot read falls back to the
   offline rule for that query and is counted with ``LLMClient.skip``. Offline (§6.3 item 2):
   keep facts with ``MS ≥ max MS − fact_delta``. A ``fact_filter(query, facts) -> facts``
   callable (see :class:`~.fact_filter.FactFilter`) wins over both. At most ``max_facts`` (4, the
   filter's cap) are kept.
4. Anchors = endpoints of the kept facts (§2.3).
5. Personalised PageRank (§2.4; d = 0.5, weighted, undirected) by forward push
   (:func:`~graphstrata.structures.push.local_pagerank`, tolerance ``ppr_epsilon``; ``ppr_epsilon=None``: the spec's
   exact power iteration to ``ppr_tol`` = 1e-7 over the whole graph) with a reset split
   between the anchors (uniform, mass ``1 − passage_seed_weight``) and the top
   ``seed_passages`` chunks weighted by their HS (mass ``passage_seed_weight``): the HippoRAG 2
   seeding that measured best offline (DESIGN.md, "What measured well offline"). The paper
   seeds the anchors only (``passage_seed_weight=0`` reproduces that). Passage edges to
   document-title entities get ``title_edge_weight`` extra PPR weight.
6. Node influence ``s_v`` = PPR, passage nodes × ``passage_score_factor`` (paper 0.05, §6.2 #6).
7. Edge costs (§2.5, paper scale /2): fact ``(1 − MS)/2`` (with fact vectors the pair's best
   fact, §6.2 #17), passage ``(1 − HS)/2``, synonym
   ``(1 − max(cos(q,e_u), cos(q,e_v)))/2``, pseudo 10, clamped ≥ 1e-6.
8. Steiner tree (Mehlhorn) over the anchors and greedy MCMI expansion (§2.7), both on a
   bounded subgraph: the top-``subgraph_nodes`` nodes by PPR (among the nodes the push
   reached) ∪ anchors ∪ each anchor's best passage, its edges looked up pair by pair
   (:func:`~.graph_ops.csr_find`). Output: the induced subgraph.
9. Reasoning paths: one ``"(s [SEP] p [SEP] o) [SEP_REC] …"`` string per component (§2.9),
   exposed as ``kind="path"`` hits; passages on the subgraph ("Reference Passages", cap
   ``max_path_passages`` by ``s_v``, §6.2 #13).
10. Chunk ranking (our addition — the paper ranks nothing, it hands the LLM path passages plus
    the hybrid top-5): ``HS + ppr_weight·minmax(PPR over the pool) + path_weight·[on path]``,
    pool = HS candidates ∪ top-``ppr_candidates`` passages by PPR ∪ path passages.

Scores: a chunk's is its ranking value over its maximum, ``1 + ppr_weight + path_weight``
(a weighted mean of parts in [0, 1]); an anchor fact's (``kind="relation"``) is ``MS``
clipped to [0, 1]; a path's is its best node's PPR influence relative to the best path's.
The method's own numbers are in ``metadata["raw_score"]``.

Ambiguities (spec §6.2), with ``compat="paper"`` (default) vs ``"agrag_code_2025"``:
passage factor 0.05 vs 1.0 (#6); fact cost ``(1−cos)/2`` vs ``1−cos`` (#7, applied to every
edge type except pseudo); r̄ = mean (s_u+s_v)/(2c) recomputed vs the code's frozen product
(#8); stop on ``≤`` vs ``<`` (#9). Both: iteration cap 20 (#10), induced output (#11),
all parallel facts rendered (#17), deterministic order (#19). No LLM answer step here: the
retriever stops at the context (§6.1 #1).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from ..scores import bounded, relative, unit
from ..structures.agrag import (
    DEFAULT_WEIGHTS,
    PREDICATE,
    AgragGraph,
    agrag_graph,
    agrag_push,
    fact_triples,
    fact_vectors,
    shortest_sentence,
)
from ..structures.push import local_pagerank
from ..structures.text_vectors import TextVectors
from ..types import Hit
from . import explain as ex
from .base import (
    DAMPING,
    UNIT,
    Method,
    OptionSpec,
    Retrieval,
    hit_scores,
    hybrid_arrays,
    query_llm,
    rank,
    scored,
)
from .fact_filter import Fact, llm_fact_filter
from .graph_ops import (
    MCMI_MODES,
    MIN_COST,
    csr_find,
    mcmi_expand,
    personalized_pagerank,
    render_paths,
    steiner_tree,
)

SYNONYM = "synonym"
PSEUDO = -1
#: default forward-push tolerance of the PPR (option ``ppr_epsilon``), chosen on the dev sets:
#: recall@2/5/10 equal to the exact PageRank's on MuSiQue, HotpotQA and LiHua-World (1e-5 lost
#: 0.004 R@5 on MuSiQue); about 2,000 pushes a query at 44k chunks
PPR_EPSILON = 3e-6
#: default number of query-nearest entities whose mutual facts are fact candidates
ENTITY_CANDIDATES = 50


class _EntitySims:
    """Cosine of the query to entity rows, computed on demand (a few thousand rows a query,
    never the whole entity matrix) and kept for the query, so each row has one value."""

    def __init__(self, vecs: np.ndarray | None, qvec: np.ndarray) -> None:
        self.vecs = vecs if vecs is not None and len(vecs) else None
        self.q = np.asarray(qvec, np.float32)
        self.rows = np.zeros(0, np.int64)  # sorted rows computed so far
        self.vals = np.zeros(0)

    def of(self, rows) -> np.ndarray:
        """float64 ``(len(rows),)`` cosines (0 without entity vectors)."""
        rows = np.asarray(rows, np.int64).ravel()
        if self.vecs is None or not len(rows):
            return np.zeros(len(rows))
        uniq, inverse = np.unique(rows, return_inverse=True)
        pos = np.minimum(np.searchsorted(self.rows, uniq), max(len(self.rows) - 1, 0))
        known = (self.rows[pos] == uniq) if len(self.rows) else np.zeros(len(uniq), bool)
        if not known.all():
            miss = uniq[~known]
            rows_all = np.concatenate([self.rows, miss])
            vals_all = np.concatenate([self.vals, (self.vecs[miss] @ self.q).astype(np.float64)])
            order = np.argsort(rows_all, kind="stable")
            self.rows, self.vals = rows_all[order], vals_all[order]
            pos = np.searchsorted(self.rows, uniq)
        return self.vals[pos][inverse]

    def __getitem__(self, row: int) -> float:
        return float(self.of([row])[0])

    def __len__(self) -> int:
        return len(self.rows)


@dataclass
class _Mass:
    """Sparse PageRank output: ``nodes`` (int64, ascending) and their ``mass`` (float64)."""

    nodes: np.ndarray
    mass: np.ndarray

    def of(self, nodes) -> np.ndarray:
        """float64 mass of each of ``nodes`` (0 where none)."""
        nodes = np.asarray(nodes, np.int64).ravel()
        if not len(self.nodes) or not len(nodes):
            return np.zeros(len(nodes))
        pos = np.minimum(np.searchsorted(self.nodes, nodes), len(self.nodes) - 1)
        return np.where(self.nodes[pos] == nodes, self.mass[pos], 0.0)

    def __getitem__(self, node: int) -> float:
        return float(self.of([node])[0])

    def top(self, m: int, lo: int = 0) -> np.ndarray:
        """The ``m`` nodes ``≥ lo`` with the most (positive) mass, best first, ties by id."""
        start = int(np.searchsorted(self.nodes, lo))
        nodes, mass = self.nodes[start:], self.mass[start:]
        keep = mass > 0
        nodes, mass = nodes[keep], mass[keep]
        if m <= 0 or not len(nodes):
            return np.zeros(0, np.int64)
        if len(nodes) > m:  # every node that can make the cut, ties at the m-th included
            kth = np.partition(mass, len(mass) - m)[len(mass) - m]
            cand = mass >= kth
            nodes, mass = nodes[cand], mass[cand]
        return nodes[np.lexsort((nodes, -mass))][:m]


@dataclass
class _FactScores:
    """``MS(q, f)`` of any fact (module doc step 2): ``w`` × mean endpoint cosine +
    ``(1 − w)`` × its best candidate chunk's HS (``chunk_rels`` / ``chunk_part``, sorted by
    relation; 0 for a fact in no candidate chunk)."""

    g: AgragGraph
    sims: _EntitySims
    w: float
    chunk_rels: np.ndarray
    chunk_part: np.ndarray

    def of(self, rels) -> np.ndarray:
        rels = np.asarray(rels, np.int64).ravel()
        if not len(rels):
            return np.zeros(0)
        ent = (self.sims.of(self.g.rel_src[rels]) + self.sims.of(self.g.rel_dst[rels])) / 2.0
        part = np.zeros(len(rels))
        if len(self.chunk_rels):
            pos = np.minimum(np.searchsorted(self.chunk_rels, rels), len(self.chunk_rels) - 1)
            hit = self.chunk_rels[pos] == rels
            part[hit] = self.chunk_part[pos[hit]]
        return self.w * ent + (1.0 - self.w) * part

    def __getitem__(self, rel: int) -> float:
        return float(self.of([rel])[0])


@dataclass
class _FactVectorScores:
    """``MS(q, f) = cos(q, f)`` over an LLM build's fact vectors (module doc step 2; spec §2.1):
    a relation's is its best fact's."""

    vectors: TextVectors
    q: np.ndarray

    def of(self, rels) -> np.ndarray:
        """float64 best fact cosine of each relation row of ``rels``."""
        return self.vectors.best(np.asarray(rels, np.int64).ravel(), self.q)

    def __getitem__(self, rel: int) -> float:
        return float(self.of([rel])[0])

    def facts(self, rel: int, n: int) -> list[float]:
        """The cosine of each of relation ``rel``'s facts (``n`` of them, :func:`fact_triples`' order).

        Raises:
            ValueError: the vectors hold another number of facts for ``rel``."""
        rows = self.vectors.rows(rel)
        if len(rows) != n:
            raise ValueError(f"AGRAG's fact vectors hold {len(rows)} facts of relation {rel}, not {n} (rebuild it)")
        return np.einsum("ij,j->i", self.vectors.vectors[rows], self.q).astype(np.float64).tolist()


def hybrid_candidates(state, query: str, qvec: np.ndarray, n: int, alpha: float) -> dict[int, float]:
    """AGRAG's hybrid chunk scores HS (module doc step 1; spec §2.10, §6.4): the same fusion
    as :func:`~.base.hybrid_scores`, ``alpha · minmax(cosine) + (1 − alpha) · minmax(BM25)``
    over the dense top-``n`` (C-HNSW) ∪ the exact BM25 top-``n`` (:meth:`~graphstrata.bm25.BM25Index.top`,
    ties by row), with exact cosines and BM25 scores of every candidate — but no array over the
    corpus: the work is ``n`` and the query terms' postings (:func:`~.base.hybrid_arrays` with
    ``exact_lexical=True``).

    Returns:
        ``{chunk_row: HS in [0, 1]}`` (empty for an empty index).
    """
    n = max(int(n), 0)
    if n == 0 or not len(state.chunks):
        return {}
    rows, fused = hybrid_arrays(state, query, qvec, n, alpha, exact_lexical=True)
    return dict(zip(rows.tolist(), fused.astype(np.float64).tolist(), strict=True))


class AGRAG(Method):
    """AGRAG-offline: fact anchors → PPR → Steiner tree → MCMI expansion → paths + chunks.

    See the module docstring for the pipeline and spec references. A query's work is bounded
    by its candidates (``candidates`` chunks, ``entity_candidates`` entities, the facts they
    hold), the forward push (``ppr_epsilon``) and the subgraph (``subgraph_nodes``), not by
    the corpus size.

    Options (per query):
        compat: ``"paper"`` or ``"agrag_code_2025"`` (spec §6.2 decisions, see module doc).
        alpha: dense weight of the hybrid score HS (0–1; §2.10 uses 0.5, default 0.65).
        candidates: dense and BM25 candidates each for HS (chunks).
        entity_candidates: entities nearest the query (C-HNSW layer 0) whose mutual facts
            are fact candidates besides the facts of the HS candidate chunks (≥ 0).
        top_facts: k_F, candidate facts by MS (spec: 5).
        max_facts: facts kept after the filter (spec: ≤ 4).
        fact_delta: offline filter margin: keep facts with MS ≥ max − delta (spec §6.3: 0.1).
        fact_vectors: ``"auto"`` (default): MS = cosine to the fact vectors where the index
            has them (an LLM build, :func:`fact_vectors`); ``"off"``: always the offline MS
            (``fact_entity_weight``).
        fact_entity_weight: weight ``w`` of the endpoint-entity cosine in the offline MS
            (0–1); the rest is the fact's best chunk HS.
        fact_filter: ``None`` (the LLM filter when the query has an LLM, else the offline
            rule) or a :class:`~.fact_filter.FactFilter` callable, which wins over both.
        llm: the :class:`~graphstrata.llm.LLMClient` of the fact filter (``None``: the
            state's ``llm``; none there either: the offline rule).
        damping: PPR follow-edge probability d (spec: 0.5).
        ppr_epsilon: forward-push tolerance of the PPR (:func:`~graphstrata.structures.push.local_pagerank`; > 0):
            at most ``1 / ((1 − d) · ppr_epsilon)`` units of out-degree pushed per query.
            ``None``: exact power iteration to ``ppr_tol`` over the whole graph (the spec's
            PPR, O(graph) per query).
        ppr_tol: L1 tolerance of the exact PPR (spec: 1e-7; only with ``ppr_epsilon=None``).
        passage_seed_weight: share of the PPR reset mass on passages, by HS (0–1; 0 = paper).
        seed_passages: passages seeded (top by HS).
        fact_edge_weight, synonym_edge_weight, passage_edge_weight: PPR weight multipliers
            of the edge types (fact weight × co-occurrence count, synonym × cosine,
            passage × 1). Facts default to 0.1: sentence co-occurrence edges are dense and
            noisy, and mass leaking through them lowered recall (they still carry the
            Steiner tree and the rendered paths). Other weights than the defaults build their
            push graph on first use (O(graph) once per state).
        title_edge_weight: extra PPR weight of passage edges to an entity that is a document
            title (DESIGN.md: title links gave most of the offline gain).
        passage_score_factor: passage ``s_v`` multiplier for MCMI (``None``: 0.05 in paper
            mode, 1.0 in code mode).
        subgraph_nodes: nodes (top PPR) of the bounded Steiner/MCMI subgraph.
        max_expansion: MCMI nodes added at most (spec: 20).
        pseudo_cost: cost of the pseudo connector edges (spec: 10).
        max_path_passages: passages on the subgraph kept (spec decision §6.2 #13: 5).
        ppr_weight: weight of the min-max PPR passage score in the chunk ranking.
        ppr_candidates: passages added to the ranking pool from the PPR top.
        path_weight: bonus of passages on the MCMI subgraph in the chunk ranking.
    """

    name = "agrag"
    defaults: dict[str, Any] = {
        "compat": "paper",
        "alpha": 0.65,
        "candidates": 100,
        "entity_candidates": ENTITY_CANDIDATES,
        "top_facts": 5,
        "max_facts": 4,
        "fact_delta": 0.1,
        "fact_vectors": "auto",
        "fact_entity_weight": 0.5,
        "fact_filter": None,
        "damping": 0.5,
        "ppr_epsilon": PPR_EPSILON,
        "ppr_tol": 1e-7,
        "passage_seed_weight": 0.5,
        "seed_passages": 20,
        "fact_edge_weight": DEFAULT_WEIGHTS[0],
        "synonym_edge_weight": DEFAULT_WEIGHTS[1],
        "passage_edge_weight": DEFAULT_WEIGHTS[2],
        "title_edge_weight": DEFAULT_WEIGHTS[3],
        "passage_score_factor": None,
        "subgraph_nodes": 200,
        "max_expansion": 20,
        "pseudo_cost": 10.0,
        "max_path_passages": 5,
        "ppr_weight": 1.0,
        "ppr_candidates": 20,
        "path_weight": 0.05,
    }

    option_specs = {
        "compat": OptionSpec(choices=MCMI_MODES),
        "alpha": UNIT,
        "fact_vectors": OptionSpec(choices=("auto", "off")),
        "fact_entity_weight": UNIT,
        "fact_filter": OptionSpec("callable"),
        "damping": DAMPING,
        "ppr_epsilon": OptionSpec("float", gt=0.0, optional=True),
        "ppr_tol": OptionSpec(gt=0.0),
        "passage_seed_weight": UNIT,
        "passage_score_factor": OptionSpec("float", ge=0.0),
    }

    def resolved(self, given):
        """The options (:meth:`Method.resolved`); ``passage_score_factor=None`` resolves to
        0.05 in ``"paper"`` mode and 1.0 in ``"agrag_code_2025"`` mode."""
        o = super().resolved(given)
        if o["passage_score_factor"] is None:
            o["passage_score_factor"] = 0.05 if o["compat"] == "paper" else 1.0
        return o

    # -- query ---------------------------------------------------------------------------
    def retrieve(self, state, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        o = self.resolved(options)
        g = agrag_graph(state)
        n_e, n_c = g.n_entities, g.n_chunks
        scale = 0.5 if o["compat"] == "paper" else 1.0

        # 1. hybrid chunk scores
        hs_map = hybrid_candidates(state, query, qvec, max(int(o["candidates"]), k), float(o["alpha"]))

        # 2-4. facts, filter, anchors
        sims = _EntitySims(state.vectors.get("entities"), qvec)
        ms, cands = self._fact_candidates(state, g, qvec, hs_map, sims, o)
        facts = self._select_facts(state, g, query, ms, cands, o)
        anchors = sorted({int(r) for f in facts for r in (g.rel_src[f.index], g.rel_dst[f.index])})

        # 5-6. PPR
        reset = self._reset(n_e, anchors, hs_map, o)
        ppr = self._pagerank(state, g, reset, o)

        # 7-9. Steiner tree + MCMI on a bounded subgraph, rendered paths
        paths, path_rows, sub = [], [], None
        if anchors:
            sub = self._subgraph(g, anchors, ppr, ms, hs_map, sims, scale, o)
            tree = steiner_tree(sub, anchors)
            tree.remove_nodes_from([PSEUDO])
            # node influence s_v: PPR, passage nodes × passage_score_factor
            nodes = np.asarray(sorted(v for v in sub.nodes if v != PSEUDO), np.int64)
            s_v = ppr.of(nodes) * np.where(nodes >= n_e, float(o["passage_score_factor"]), 1.0)
            scores = dict(zip(nodes.tolist(), s_v.tolist(), strict=True))
            result = mcmi_expand(
                sub, scores, anchors, mode=o["compat"], max_expansion=int(o["max_expansion"]),
                exclude=(PSEUDO,), tree=tree,
            )
            sub = result.subgraph
            paths, passages = render_paths(
                sub, lambda u, v: self._triples(state, g, sub, u, v),
                is_passage=lambda v: v >= n_e, scores=scores,
            )
            path_rows = [v - n_e for v in passages][: int(o["max_path_passages"])]

        # 10. chunk ranking
        pool = set(hs_map) | set(path_rows)
        if int(o["ppr_candidates"]) > 0 and n_c:
            pool |= {int(v) - n_e for v in ppr.top(int(o["ppr_candidates"]), lo=n_e)}
        rows = np.asarray(sorted(pool), np.int64)
        scores_out: dict[int, float] = {}
        if len(rows):
            pp = ppr.of(n_e + rows)
            lo, hi = pp.min(), pp.max()
            pp = (pp - lo) / (hi - lo) if hi - lo > 1e-15 else np.zeros_like(pp)
            on_path = set(path_rows)
            w_ppr, w_path = float(o["ppr_weight"]), float(o["path_weight"])
            for r, p in zip(rows.tolist(), pp.tolist(), strict=True):
                scores_out[r] = hs_map.get(r, 0.0) + w_ppr * p + (w_path if r in on_path else 0.0)
        ranked = rank(scores_out, k)
        if len(ranked) < k:  # tiny pools: fill in corpus order
            taken = set(scores_out)
            fill = (r for r in range(n_c) if r not in taken)
            ranked.extend((r, 0.0) for _, r in zip(range(k - len(ranked)), fill, strict=False))

        context = [self._fact_hit(state, f) for f in facts]
        context.sort(key=lambda h: (-h.metadata["raw_score"], h.id))
        best_path = max((p.score for p in paths), default=0.0)
        for p in paths:
            hit = self._path_hit(state, g, sub, p, anchors, path_rows)
            context.append(hit_scores(hit, p.score, relative(p.score, best_path)))
        # HS (≤ 1) + ppr_weight · minmax PPR (≤ ppr_weight) + path_weight
        bound = 1.0 + float(o["ppr_weight"]) + float(o["path_weight"])
        out = scored(ranked, lambda v: bounded(v, bound), context)
        if o["explain"]:
            _explain(state, g, query, qvec, out, hs_map, sims, facts, anchors, reset, ppr, paths, path_rows,
                     rows, o)
        return out

    # -- helpers -------------------------------------------------------------------------
    @staticmethod
    def _reset(n_e: int, anchors: list[int], hs_map: dict[int, float], o) -> dict[int, float]:
        """The PPR reset (spec §2.4): the anchors share ``1 − passage_seed_weight``, the best
        ``seed_passages`` hybrid chunks the rest in proportion to their scores (the anchors
        alone when no chunk scores above 0)."""
        reset: dict[int, float] = {}
        psw = float(o["passage_seed_weight"]) if anchors else 1.0
        for a in anchors:
            reset[a] = (1.0 - psw) / len(anchors)
        seeds = rank(hs_map, int(o["seed_passages"]))
        seed_total = sum(s for _, s in seeds)
        if seeds and seed_total > 0:
            for r, s in seeds:
                reset[n_e + r] = reset.get(n_e + r, 0.0) + psw * s / seed_total
        elif anchors:
            reset = {a: 1.0 / len(anchors) for a in anchors}
        return reset

    @staticmethod
    def _pagerank(state, g: AgragGraph, reset: dict[int, float], o) -> _Mass:
        """PPR of the AGRAG walk from ``reset`` (module doc step 5): forward push on the
        state's push graph, or exact power iteration with ``ppr_epsilon=None``."""
        weights = (float(o["fact_edge_weight"]), float(o["synonym_edge_weight"]),
                   float(o["passage_edge_weight"]), float(o["title_edge_weight"]))
        if o["ppr_epsilon"] is None:
            walk = state.derived(f"agrag:walk:{weights}", lambda: g.walk(*weights))
            dense = np.zeros(g.n)
            for v, w in reset.items():
                dense[v] += w
            s = personalized_pagerank(walk, dense, float(o["damping"]), float(o["ppr_tol"]))
            nodes = np.flatnonzero(s > 0)
            return _Mass(nodes.astype(np.int64), s[nodes])
        if not reset:
            return _Mass(np.zeros(0, np.int64), np.zeros(0))
        push = agrag_push(state, *weights)
        lr = local_pagerank(push, np.fromiter(reset, np.int64, len(reset)),
                            np.fromiter(reset.values(), np.float64, len(reset)),
                            damping=float(o["damping"]), epsilon=float(o["ppr_epsilon"]))
        return _Mass(lr.nodes, lr.mass)

    @staticmethod
    def _fact_candidates(state, g: AgragGraph, qvec, hs_map, sims: _EntitySims, o):
        """MS of the candidate facts (module doc step 2): the facts of the HS candidate chunks
        and the facts joining two of the ``entity_candidates`` entities nearest the query.

        A fact outside both sets has no HS candidate chunk, so its MS is at most
        ``w · (1 + cos_K) / 2`` (``cos_K`` the K-th best entity cosine) — below the facts of
        the best chunks in practice (same kept facts as scoring every fact on the dev sets).

        Returns:
            ``(scores, candidate relation rows sorted)``: a :class:`_FactVectorScores` (an
            LLM build's fact vectors) or :class:`_FactScores` (any fact's MS), and the
            candidates.
        """
        fv = fact_vectors(state) if o["fact_vectors"] == "auto" else None
        w = float(o["fact_entity_weight"])
        rows = np.asarray(sorted(r for r, s in hs_map.items() if s > 0), np.int64)
        rels = np.zeros(0, np.int64)
        part = np.zeros(0)
        if len(rows) and g.chunk_rel.shape[1]:
            sub = g.chunk_rel[rows]
            vals = np.repeat(np.fromiter((hs_map[r] for r in rows.tolist()), np.float64, len(rows)),
                             np.diff(sub.indptr))
            rels, inverse = np.unique(sub.indices.astype(np.int64), return_inverse=True)
            part = np.zeros(len(rels))
            np.maximum.at(part, inverse, vals)
        scores = _FactVectorScores(fv, np.asarray(qvec, np.float32)) if fv is not None else \
            _FactScores(g, sims, w, rels, part)
        kk = int(o["entity_candidates"])
        near = np.zeros(0, np.int64)
        if kk > 0 and state.layered is not None and g.entity_facts.nnz and sims.vecs is not None:
            ids, _ = state.layered.search_layer(np.asarray(qvec, np.float32)[None, :], min(kk, g.n_entities),
                                                layer=0)
            near = np.unique(ids[0][(ids[0] >= 0) & (ids[0] < g.n_entities)].astype(np.int64))
        if len(near) >= 2:
            iu, ju = np.triu_indices(len(near), 1)
            pos = csr_find(g.entity_facts, near[iu], near[ju])
            extra = g.entity_facts.data[pos[pos >= 0]].astype(np.int64)
            cands = np.union1d(rels, extra)
        else:
            cands = rels
        return scores, cands

    def _select_facts(self, state, g: AgragGraph, query: str, ms, cands: np.ndarray, o) -> list[Fact]:
        kf = min(int(o["top_facts"]), len(cands))
        if kf <= 0:
            return []
        vals = ms.of(cands)
        top = np.lexsort((cands, -vals))[:kf]
        # the k_F best facts: parallel facts of one entity pair are distinct candidates, each
        # with its own score where it has a vector (a row's score is its best fact's, so the
        # k_F best facts are among the k_F best rows' facts); stable: ties keep row order
        cands_f = [f for i in top for f in self._facts(state, g, int(cands[i]), float(vals[i]), ms)]
        cands_f = sorted(cands_f, key=lambda f: -f.score)[:kf]
        picked = None
        if o["fact_filter"] is not None:
            picked = o["fact_filter"](query, list(cands_f)) or []
        elif (client := query_llm(state, o)) is not None:
            picked = llm_fact_filter(client, query, cands_f, int(o["max_facts"]))
        if picked is None:  # offline rule (also the fallback for unreadable LLM output)
            best = cands_f[0].score
            kept = [f for f in cands_f if f.score >= best - float(o["fact_delta"])]
        else:
            by_key = {(f.index, f.subject, f.predicate, f.object): f for f in cands_f}
            first = {}
            for f in cands_f:
                first.setdefault(f.index, f)
            kept = []
            for f in picked:
                key = (getattr(f, "index", None), getattr(f, "subject", None), getattr(f, "predicate", None),
                       getattr(f, "object", None))
                f = by_key.get(key) or first.get(key[0])  # a filter returning bare indexes keeps the row's first
                if f is not None and f not in kept:
                    kept.append(f)
        return kept[: int(o["max_facts"])]

    @staticmethod
    def _facts(state, g: AgragGraph, i: int, score: float, ms=None) -> list[Fact]:
        """The facts of relation row ``i`` (:func:`fact_triples`: one per distinct LLM triple,
        else the one co-occurrence fact), each scored by its own fact vector when ``ms`` is a
        :class:`_FactVectorScores`, else ``score`` (the row's MS)."""
        a, b = g.rel_key(state, i)
        chunks = tuple(state.kg.relations[(a, b)].chunk_ids)
        triples = fact_triples(state, a, b)
        scores = ms.facts(i, len(triples)) if isinstance(ms, _FactVectorScores) else [score] * len(triples)
        return [Fact(i, a, b, s, p, o, sentence, float(score), chunks)
                for (s, p, o, sentence), score in zip(triples, scores, strict=True)]

    @staticmethod
    def _best_passage(g: AgragGraph, entity: int, ppr: _Mass) -> int | None:
        """The chunk row mentioning ``entity`` with the most PPR mass (ties: lowest row; none
        reached: its lowest row), looked up from the smaller side (its chunks or the reached
        passages); ``None`` for an entity in no chunk."""
        ec = g.entity_chunks
        lo, hi = int(ec.indptr[entity]), int(ec.indptr[entity + 1])
        if lo == hi:
            return None
        start = int(np.searchsorted(ppr.nodes, g.n_entities))
        reached = ppr.nodes[start:] - g.n_entities
        if hi - lo <= len(reached):
            chunks = ec.indices[lo:hi].astype(np.int64)
            mass = ppr.of(g.n_entities + chunks)
        else:
            pos = csr_find(ec, np.full(len(reached), entity), reached)
            chunks = reached[pos >= 0]
            mass = ppr.mass[start:][pos >= 0]
        if not len(chunks) or not (mass > 0).any():
            return int(ec.indices[lo])
        return int(chunks[np.lexsort((chunks, -mass))[0]])

    def _subgraph(self, g, anchors, ppr: _Mass, ms, hs_map, sims: _EntitySims, scale, o) -> nx.Graph:
        """Bounded Steiner/MCMI graph: top PPR nodes ∪ anchors ∪ anchors' best passages,
        with query-dependent costs (module doc step 7) and the pseudo connector. Its edges are
        looked up among its own nodes (:func:`~.graph_ops.csr_find`), never read from a whole
        row of a hub."""
        n_e = g.n_entities
        m = min(int(o["subgraph_nodes"]), g.n)
        nodes = set(anchors)
        if m > 0:
            nodes |= {int(v) for v in ppr.top(m)}
        for a in anchors:
            best = self._best_passage(g, a, ppr)
            if best is not None:
                nodes.add(n_e + best)
        idx = np.asarray(sorted(nodes), np.int64)
        sub = nx.Graph()
        sub.add_nodes_from(idx.tolist())
        costs: dict[tuple[int, int], float] = {}

        def put(u, v, c, **attrs):
            key = (u, v) if u < v else (v, u)
            c = max(float(c), MIN_COST)
            if key in costs:
                costs[key] = min(costs[key], c)
                sub.edges[key].update(attrs)
                sub.edges[key]["cost"] = costs[key]
            else:
                costs[key] = c
                sub.add_edge(*key, cost=c, **attrs)

        ents = idx[idx < n_e]
        passages = idx[idx >= n_e] - n_e
        iu, ju = np.triu_indices(len(ents), 1)
        eu, ev = ents[iu], ents[ju]  # entity pairs u < v, row-major
        # fact edges
        pos = csr_find(g.entity_facts, eu, ev) if len(eu) else np.zeros(0, np.int64)
        found = pos >= 0
        rels = g.entity_facts.data[pos[found]].astype(np.int64)
        for u, v, r, c in zip(eu[found].tolist(), ev[found].tolist(), rels.tolist(), ms.of(rels).tolist(),
                              strict=True):
            put(u, v, scale * (1.0 - c), fact=r)
        # synonym edges
        pos = csr_find(g.entity_synonyms, eu, ev) if len(eu) else np.zeros(0, np.int64)
        found = pos >= 0
        su, sv, sval = eu[found], ev[found], g.entity_synonyms.data[pos[found]]
        best = np.maximum(sims.of(su), sims.of(sv))
        for u, v, val, c in zip(su.tolist(), sv.tolist(), sval.tolist(), best.tolist(), strict=True):
            put(u, v, scale * (1.0 - c), synonym=float(val))
        # contains edges (entity u < passage node v), from the passages' side
        if len(passages) and len(ents):
            ce = g.chunk_entities[passages]
            e_of = ce.indices.astype(np.int64)
            p_of = np.repeat(passages, np.diff(ce.indptr))
            keep = np.isin(e_of, ents)
            e_of, p_of = e_of[keep], p_of[keep]
            order = np.lexsort((p_of, e_of))
            for u, p in zip(e_of[order].tolist(), p_of[order].tolist(), strict=True):
                put(u, n_e + p, scale * (1.0 - hs_map.get(p, 0.0)), contains=True)
        for v in idx.tolist():
            if v >= n_e:
                sub.add_edge(PSEUDO, v, cost=float(o["pseudo_cost"]), pseudo=True)
        return sub

    @staticmethod
    def _triples(state, g, sub, u, v) -> list[tuple[str, str, str]]:
        data = sub.edges[u, v]
        ents = state.kg.entities
        out = []
        if "fact" in data:
            a, b = g.rel_key(state, data["fact"])
            out.extend((s, p, o) for s, p, o, _ in fact_triples(state, a, b))
        if "synonym" in data:
            a, b = state.kg.entity_ids[u], state.kg.entity_ids[v]
            out.append((ents[a].name, SYNONYM, ents[b].name))
        return out

    @staticmethod
    def _fact_hit(state, f: Fact) -> Hit:
        if f.predicate == PREDICATE:
            hid, text = f"{f.source}\u241f{f.target}", f"{f.subject} — {f.object}: {f.sentence}"
        else:  # an LLM triple: one hit per parallel fact
            hid, text = f"{f.source}\u241f{f.target}\u241f{f.predicate}", f.sentence
        return Hit(
            id=hid,
            text=text,
            score=unit(f.score),
            kind="relation",
            layer=0,
            chunk_ids=list(f.chunk_ids),
            document_ids=state.document_ids_of(f.chunk_ids),
            metadata={"source": f.subject, "target": f.object, "predicate": f.predicate,
                      "role": "anchor_fact", "raw_score": float(f.score)},
        )

    @staticmethod
    def _path_hit(state, g, sub, p, anchors, path_rows) -> Hit:
        n_e = g.n_entities
        chunk_ids: dict[str, None] = {}
        facts = []
        for (u, v), t in zip(p.edges, p.triples, strict=True):
            data = sub.edges[u, v]
            if "fact" in data and t[1] != SYNONYM:
                key = g.rel_key(state, data["fact"])
                rel = state.kg.relations[key]
                chunk_ids.update(dict.fromkeys(rel.chunk_ids))
                sentence = next((x[3] for x in fact_triples(state, *key) if x[:3] == tuple(t)),
                                shortest_sentence(rel.description))
                facts.append({"triple": list(t), "sentence": sentence, "chunk_ids": list(rel.chunk_ids)})
            else:
                facts.append({"triple": list(t), "sentence": "", "chunk_ids": []})
        ids = state.kg.entity_ids
        comp = set(p.nodes)
        return Hit(
            id="agrag-path-" + hashlib.sha1(p.text.encode()).hexdigest()[:12],
            text=p.text,
            score=p.score,
            kind="path",
            layer=None,
            chunk_ids=list(chunk_ids),
            document_ids=state.document_ids_of(chunk_ids),
            metadata={
                "triples": [list(t) for t in p.triples],
                "facts": facts,
                "anchors": [ids[a] for a in anchors if a in comp],
                "entities": [ids[v] for v in p.nodes if v < n_e],
                "path_passages": [state.chunks[r].id for r in path_rows if n_e + r in comp],
            },
        )


def _path_entities(g: AgragGraph, state, p) -> list[dict[str, Any]]:
    """The entity nodes of a rendered path in the order its triples visit them."""
    order: dict[int, None] = {}
    for u, v in p.edges:
        order.update(dict.fromkeys(x for x in (u, v) if 0 <= x < g.n_entities))
    ids = state.kg.entity_ids
    return [ex.entity_ref(state, ids[v]) for v in order]


def _rendered_paths(g: AgragGraph, state, paths, path_hits: list[Hit]) -> list[tuple[Any, Hit, dict[str, Any]]]:
    """Each rendered path with its hit and its explanation reasoning path (entities, the first
    :data:`.explain.MAX_TRIPLES` triples, the rest counted)."""
    rendered = []
    for p, h in zip(paths, path_hits, strict=True):
        triples = [list(t) for t in p.triples]
        rp: dict[str, Any] = {"id": h.id, "entities": _path_entities(g, state, p),
                              "triples": triples[: ex.MAX_TRIPLES]}
        if len(triples) > ex.MAX_TRIPLES:
            rp["truncated"] = len(triples) - ex.MAX_TRIPLES
        rendered.append((p, h, rp))
    return rendered


def _chunk_path(rendered, cid: str, node: int) -> dict[str, Any] | None:
    """The reasoning path of chunk ``cid`` (passage node ``node``): the first path one of whose
    facts it states (with those triples), else the last path holding its passage node."""
    path = None
    for p, h, rp in rendered:
        mine = [fact["triple"] for fact in h.metadata.get("facts", []) if cid in fact["chunk_ids"]]
        if mine or node in p.nodes:
            path = {**rp, "chunk_triples": mine[: ex.MAX_TRIPLES]} if mine else rp
            if mine:
                break
            # a passage node of this path: keep looking for a path one of whose facts it states
    return path


def _explain(state, g: AgragGraph, query: str, qvec, out: Retrieval, hs_map, ent_sims: _EntitySims, facts, anchors,
             reset: dict[int, float], ppr: _Mass, paths, path_rows, pool_rows, o) -> None:
    """Fill ``out.explain`` and the context hits' ``explain`` (:mod:`.explain`): a chunk's seed
    signals (HS, its share of the PageRank restart mass, the anchors that mention it and
    theirs), its PageRank mass, the anchor facts it states, the reasoning path whose subgraph
    holds it (or states one of its facts) and its score terms; anchor facts their fact score
    and endpoints; paths their entities, triples and best node's mass."""
    name = AGRAG.name
    n_e = g.n_entities
    ids = state.kg.entity_ids
    total = float(sum(reset.values()))

    def share(v: int) -> float:
        return reset.get(v, 0.0) / total if total > 0 else 0.0

    anchor_ids = {ids[a]: a for a in anchors}
    rendered = _rendered_paths(g, state, paths, [h for h in out.context if h.kind == "path"])
    on_path_entities = {e["id"] for _, _, rp in rendered for e in rp["entities"]}
    sims = {e: ent_sims[state.kg.row[e]] for e in set(anchor_ids) | on_path_entities}
    pp = ppr.of(n_e + np.asarray(pool_rows, np.int64)) if len(pool_rows) else np.zeros(0)
    lo, hi = (float(pp.min()), float(pp.max())) if len(pp) else (0.0, 0.0)
    in_pool = set(np.asarray(pool_rows).tolist())
    on_path = set(path_rows)
    w_ppr, w_path = float(o["ppr_weight"]), float(o["path_weight"])
    rows = [r for r, _ in out.chunks]
    signals = ex.chunk_signals(state, query, qvec, rows)
    for r in rows:
        cid = state.chunks[r].id
        here = ex.chunk_entity_ids(state, r)
        seeds = [ex.entity_ref(state, e, value=share(anchor_ids[e])) for e in here if e in anchor_ids]
        stated = [{"id": f"{f.source}\u241f{f.target}", "triple": [f.subject, f.predicate, f.object],
                   "fact_score": float(f.score)} for f in facts if cid in f.chunk_ids]
        path = _chunk_path(rendered, cid, n_e + r)
        ppr_part = None
        if r in in_pool and hi - lo > 1e-15:
            ppr_part = w_ppr * (ppr[n_e + r] - lo) / (hi - lo)
        node_share = share(n_e + r)
        lead = "reference passage of the reasoning subgraph" if r in on_path else None
        out.explain[r] = ex.explanation(
            name,
            lead,
            **ex.chunk_base(signals[r], hybrid=hs_map.get(r), ppr_reset=node_share if node_share > 0 else None,
                            entities=seeds[: ex.MAX_LISTED]),
            matched_entities=ex.matched_in_chunk(state, r, sims),
            facts=stated,
            reasoning_path=path,
            on_path=r in on_path,
            ppr_mass=ppr[n_e + r],
            score_parts=ex.parts(hybrid=hs_map.get(r), ppr=ppr_part, path=w_path if r in on_path else None),
        )
    for h in out.context:
        if h.kind == "relation":
            ends = [e for e in h.id.split("\u241f") if e in anchor_ids]
            h.explain = ex.explanation(
                name, "anchor fact: among the top facts by MS and kept by the fact filter", layer=0,
                seeds={"fact_score": float(h.metadata["raw_score"]),
                       "entities": [ex.entity_ref(state, e, value=share(anchor_ids[e])) for e in ends]},
                matched_entities=[ex.entity_ref(state, e, similarity=sims[e]) for e in ends],
            )
    for p, h, rp in rendered:
        anchors_in = [e for e in h.metadata.get("anchors", []) if e in sims]
        best = p.nodes[0] if p.nodes else None
        h.explain = ex.explanation(
            name, f"reasoning path of the MCMI subgraph ({len(p.triples)} triple{'s' if len(p.triples) != 1 else ''})",
            reasoning_path=rp,
            matched_entities=[ex.entity_ref(state, e, similarity=sims[e]) for e in anchors_in[: ex.MAX_LISTED]],
            ppr_mass=ppr[best] if best is not None and best >= 0 else None,
        )
