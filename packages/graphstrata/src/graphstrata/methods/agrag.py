"""AGRAG retrieval, offline ("AGRAG-offline", spec seed-agrag.md §6.3; paper arXiv 2511.05549).

The paper's method is not LLM-free (spec §0): triples come from an LLM at index time and an LLM
filters the query's facts. This preset keeps AGRAG's retrieval pipeline (§2) over the core's
statistical graph and replaces both LLM steps with the spec's offline variant (§6.3):

**Graph** (built lazily per index state, ``state.derived("agrag:graph")``, not persisted):

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
   dense ∪ BM25 top-``candidates`` (§2.10, §6.4; :func:`~.base.hybrid_scores`). The paper
   averages the two (``alpha=0.5``); we default to 0.65, which measured better on MuSiQue
   and no worse on HotpotQA with MiniLM.
2. Fact scores without embedding any relation text (§2.1, our composition):
   ``MS(q, f) = w·(cos(q, e_s) + cos(q, e_o))/2 + (1 − w)·max_{t ∈ chunks(f)} HS(t)`` with
   ``w = fact_entity_weight``. Top-``top_facts`` facts (k_F = 5).
3. Fact filter (§2.2). With an LLM (the ``llm`` option, else the state's ``llm``):
   one call, stage ``"query:fact_filter"`` (:mod:`graphstrata.llm.prompts.agrag_query`), the
   returned facts snapped to the candidates; output the parser cannot read falls back to the
   offline rule for that query and is counted with ``LLMClient.skip``. Offline (§6.3 item 2):
   keep facts with ``MS ≥ max MS − fact_delta``. A ``fact_filter(query, facts) -> facts``
   callable (see :class:`FactFilter`) wins over both. At most ``max_facts`` (4, the
   filter's cap) are kept.
4. Anchors = endpoints of the kept facts (§2.3).
5. Personalised PageRank (§2.4; d = 0.5, tol 1e-7, weighted, undirected) with a reset split
   between the anchors (uniform, mass ``1 − passage_seed_weight``) and the top
   ``seed_passages`` chunks weighted by their HS (mass ``passage_seed_weight``): the HippoRAG 2
   seeding that measured best offline (DESIGN.md, "What measured well offline"). The paper
   seeds the anchors only (``passage_seed_weight=0`` reproduces that). Passage edges to
   document-title entities get ``title_edge_weight`` extra PPR weight.
6. Node influence ``s_v`` = PPR, passage nodes × ``passage_score_factor`` (paper 0.05, §6.2 #6).
7. Edge costs (§2.5, paper scale /2): fact ``(1 − MS)/2``, passage ``(1 − HS)/2``, synonym
   ``(1 − max(cos(q,e_u), cos(q,e_v)))/2``, pseudo 10, clamped ≥ 1e-6.
8. Steiner tree (Mehlhorn) over the anchors and greedy MCMI expansion (§2.7), both on a
   bounded subgraph: the top-``subgraph_nodes`` nodes by PPR ∪ anchors ∪ each anchor's best
   passage. Output: the induced subgraph.
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import networkx as nx
import numpy as np
import scipy.sparse as sp

from ..extraction import canonical, split_sentences
from ..llm.client import LLMClient
from ..llm.prompts.agrag_query import filter_request, parse_fact_filter
from ..scores import bounded, relative, unit
from ..types import Hit
from . import explain as ex
from .base import (
    DAMPING,
    UNIT,
    Method,
    OptionSpec,
    Retrieval,
    entity_chunk_matrix,
    hit_scores,
    hybrid_scores,
    query_llm,
    rank,
    scored,
)
from .graph_ops import (
    MCMI_MODES,
    MIN_COST,
    Transition,
    mcmi_expand,
    personalized_pagerank,
    render_paths,
    steiner_tree,
    transition_matrix,
)

PREDICATE = "co-occurs with"
SYNONYM = "synonym"
SYNONYM_THRESHOLD = 0.8
SYNONYM_K = 10
PSEUDO = -1
#: ledger stage of the fact-filter call
FACT_FILTER_STAGE = "query:fact_filter"


@dataclass(frozen=True)
class Fact:
    """A candidate fact (a fact edge of the graph) shown to the fact filter.

    Attributes:
        index: relation row in the AGRAG graph (stable per index state).
        source, target: entity ids (``source < target``).
        subject, predicate, object: the display triple (entity names, ``"co-occurs with"``).
        sentence: the shortest sentence where both entities occur.
        score: ``MS(q, f)`` (higher is better).
        chunk_ids: the chunks where the fact occurs.
    """

    index: int
    source: str
    target: str
    subject: str
    predicate: str
    object: str
    sentence: str
    score: float
    chunk_ids: tuple[str, ...] = field(default=())


class FactFilter(Protocol):
    """The LLM seam of AGRAG's query step (spec §2.2): pick the relevant facts.

    Called with the query and the top-``top_facts`` candidate :class:`Fact` s (best first);
    returns the facts to keep, most relevant first. Returned facts are snapped back to the
    candidates by ``index`` (unknown ones are dropped) and truncated to ``max_facts``. Return
    ``[]`` for "none relevant": retrieval then runs without anchors (passage-seeded PPR and
    hybrid chunks). An LLM implementation formats the candidates as ``[[s, p, o], ...]`` with
    the HippoRAG 2 "recognition memory" prompt and parses ``{"fact": [...]}``.
    """

    def __call__(self, query: str, facts: Sequence[Fact]) -> Sequence[Fact]: ...


def llm_fact_filter(client: LLMClient, query: str, facts: Sequence[Fact], max_facts: int) -> list[Fact] | None:
    """Ask ``client`` which candidate ``facts`` help answer ``query`` (spec §2.2; one call,
    stage ``"query:fact_filter"``, JSON mode, cached by the client).

    Args:
        max_facts: most facts the prompt lets the model keep.

    Returns:
        The kept candidates in the model's order (each returned fact snapped to the closest
        candidate; ``[]`` when the model kept none), or ``None`` when the output is unreadable
        (:func:`~graphstrata.llm.prompts.agrag_query.parse_fact_filter`), counted as one
        skipped record of the stage. No call when ``facts`` is empty (returns ``[]``).

    Raises:
        LLMError: the call failed after the client's retries.
    """
    if not facts:
        return []
    triples = [(f.subject, f.predicate, f.object) for f in facts]
    req = filter_request(query, triples, [f.sentence for f in facts], max_facts)
    picked = parse_fact_filter(client.request(req, FACT_FILTER_STAGE).text, triples)
    if picked is None:
        client.skip(FACT_FILTER_STAGE)
        return None
    return [facts[i] for i in picked]


@dataclass
class AgragGraph:
    """The derived AGRAG graph over ``N = n_entities + n_chunks`` nodes (entities first).

    Attributes:
        n_entities, n_chunks: node counts; passage node of chunk row ``r`` is ``n_entities + r``.
        rel_keys: relation keys ``(source, target)`` in relation-row order.
        rel_src, rel_dst: entity rows of each relation.
        rel_weight: co-occurrence count of each relation.
        chunk_rel: CSR ``(n_chunks, n_relations)``: which relations occur in which chunk.
        fact: CSR ``(N, N)`` symmetric, value = relation row + 1.
        synonym: CSR ``(N, N)`` symmetric, value = cosine.
        contains: CSR ``(N, N)`` symmetric, value 1 on chunk–entity pairs.
        title_contains: the subset of ``contains`` whose entity is a document title.
        entity_chunks: CSR ``(n_entities, n_chunks)`` entity mentions (for anchor passages).
    """

    n_entities: int
    n_chunks: int
    rel_keys: list[tuple[str, str]]
    rel_src: np.ndarray
    rel_dst: np.ndarray
    rel_weight: np.ndarray
    chunk_rel: sp.csr_matrix
    fact: sp.csr_matrix
    synonym: sp.csr_matrix
    contains: sp.csr_matrix
    title_contains: sp.csr_matrix
    entity_chunks: sp.csr_matrix

    @property
    def n(self) -> int:
        return self.n_entities + self.n_chunks

    def walk(
        self, fact_w: float, synonym_w: float, passage_w: float, title_w: float = 0.0
    ) -> Transition:
        """PPR operator of the typed graph with per-type weight multipliers (``title_w`` is
        added to passage edges whose entity is a document title)."""
        weights = self.fact.copy()
        if weights.nnz:
            weights.data = self.rel_weight[weights.data.astype(np.int64) - 1]
        adj = (fact_w * weights + synonym_w * self.synonym + passage_w * self.contains
               + title_w * self.title_contains)
        return transition_matrix(adj)


def _shortest_sentence(description: str) -> str:
    """The fact text (spec §6.3 item 1): the shortest sentence of a relation's description."""
    sents = [description[s:e].strip() for s, e in split_sentences(description)]
    return min(sents, key=len) if sents else description


def _sym(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, n: int) -> sp.csr_matrix:
    m = sp.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()
    m.sum_duplicates()
    return (m + m.T).tocsr()


def build_graph(state) -> AgragGraph:
    """Build the AGRAG graph from the state's store (spec §1.4–§1.6, §6.3); O(store) time."""
    kg = state.kg
    n_e, n_c = len(kg.entity_ids), len(state.chunks)
    n = n_e + n_c
    keys = list(kg.relations)
    src = np.fromiter((kg.row[a] for a, _ in keys), np.int64, len(keys))
    dst = np.fromiter((kg.row[b] for _, b in keys), np.int64, len(keys))
    wts = np.fromiter((r.weight for r in kg.relations.values()), np.float64, len(keys))
    wts = np.maximum(wts, 1.0) if len(wts) else wts
    fact = _sym(src, dst, np.arange(1, len(keys) + 1, dtype=np.float64), n)
    # relation ↔ chunk
    cr_rows, cr_cols = [], []
    for i, r in enumerate(kg.relations.values()):
        for cid in r.chunk_ids:
            row = state.chunk_row.get(cid)
            if row is not None:
                cr_rows.append(row)
                cr_cols.append(i)
    chunk_rel = sp.csr_matrix(
        (np.ones(len(cr_rows)), (cr_rows, cr_cols)), shape=(n_c, len(keys))
    )
    # entity ↔ chunk (Contains edges)
    entity_chunks = entity_chunk_matrix(state)
    ec = entity_chunks.tocoo()
    contains = _sym(ec.row.astype(np.int64), ec.col.astype(np.int64) + n_e, ec.data, n)
    contains.data[:] = 1.0
    titles = {
        kg.row[key]
        for d in state.documents.values()
        if d.metadata.get("title") and (key := canonical(str(d.metadata["title"]))) in kg.row
    }
    is_title = np.zeros(n, bool)
    is_title[list(titles)] = True
    tc = contains.tocoo()
    keep = is_title[tc.row] | is_title[tc.col]
    title_contains = sp.csr_matrix(
        (tc.data[keep], (tc.row[keep], tc.col[keep])), shape=(n, n)
    )
    synonym = _synonym_edges(state, n)
    return AgragGraph(
        n_e, n_c, keys, src, dst, wts, chunk_rel.tocsr(), fact, synonym, contains,
        title_contains, entity_chunks.tocsr(),
    )


def _synonym_edges(state, n: int) -> sp.csr_matrix:
    """Entity pairs with cosine ≥ ``SYNONYM_THRESHOLD`` (≤ ``SYNONYM_K`` per entity, §1.6)."""
    vecs = state.vectors.get("entities")
    layered = state.layered
    if vecs is None or len(vecs) < 2 or layered is None:
        return sp.csr_matrix((n, n))
    kg = state.kg
    ok = np.fromiter(
        (sum(ch.isalnum() for ch in kg.entities[e].name) > 2 for e in kg.entity_ids),
        bool,
        len(kg.entity_ids),
    )
    k = min(SYNONYM_K + 1, len(vecs))
    ids, sims = layered.search_layer(vecs, k, layer=0)
    sims = sims.astype(np.float64)
    rows = np.repeat(np.arange(len(vecs)), ids.shape[1])
    cols, vals = ids.ravel(), sims.ravel()
    keep = (cols >= 0) & (cols != rows) & (vals >= SYNONYM_THRESHOLD)
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    keep = ok[rows] & ok[cols]
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    a, b = np.minimum(rows, cols), np.maximum(rows, cols)
    _, first = np.unique(a * n + b, return_index=True)  # a pair found from both sides: once
    m = sp.coo_matrix((vals[first], (a[first], b[first])), shape=(n, n)).tocsr()
    return (m + m.T).tocsr()


class AGRAG(Method):
    """AGRAG-offline: fact anchors → PPR → Steiner tree → MCMI expansion → paths + chunks.

    See the module docstring for the pipeline and spec references.

    Options (per query):
        compat: ``"paper"`` or ``"agrag_code_2025"`` (spec §6.2 decisions, see module doc).
        alpha: dense weight of the hybrid score HS (0–1; §2.10 uses 0.5, default 0.65).
        candidates: dense and BM25 candidates each for HS (chunks).
        top_facts: k_F, candidate facts by MS (spec: 5).
        max_facts: facts kept after the filter (spec: ≤ 4).
        fact_delta: offline filter margin: keep facts with MS ≥ max − delta (spec §6.3: 0.1).
        fact_entity_weight: weight ``w`` of the endpoint-entity cosine in MS (0–1); the rest
            is the fact's best chunk HS.
        fact_filter: ``None`` (the LLM filter when the query has an LLM, else the offline
            rule) or a :class:`FactFilter` callable, which wins over both.
        llm: the :class:`~graphstrata.llm.LLMClient` of the fact filter (``None``: the
            state's ``llm``; none there either: the offline rule).
        damping: PPR follow-edge probability d (spec: 0.5).
        ppr_tol: PPR L1 tolerance (spec: 1e-7).
        passage_seed_weight: share of the PPR reset mass on passages, by HS (0–1; 0 = paper).
        seed_passages: passages seeded (top by HS).
        fact_edge_weight, synonym_edge_weight, passage_edge_weight: PPR weight multipliers
            of the edge types (fact weight × co-occurrence count, synonym × cosine,
            passage × 1). Facts default to 0.1: sentence co-occurrence edges are dense and
            noisy, and mass leaking through them lowered recall (they still carry the
            Steiner tree and the rendered paths).
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
        "top_facts": 5,
        "max_facts": 4,
        "fact_delta": 0.1,
        "fact_entity_weight": 0.5,
        "fact_filter": None,
        "damping": 0.5,
        "ppr_tol": 1e-7,
        "passage_seed_weight": 0.5,
        "seed_passages": 20,
        "fact_edge_weight": 0.1,
        "synonym_edge_weight": 1.0,
        "passage_edge_weight": 1.0,
        "title_edge_weight": 4.0,
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
        "fact_entity_weight": UNIT,
        "fact_filter": OptionSpec("callable"),
        "damping": DAMPING,
        "ppr_tol": OptionSpec(gt=0.0),
        "passage_seed_weight": UNIT,
        "passage_score_factor": OptionSpec("float", ge=0.0),
    }

    def options(self, given, hint: str = ""):
        """Checked options (:meth:`Method.options`); ``passage_score_factor=None`` resolves to
        0.05 in ``"paper"`` mode and 1.0 in ``"agrag_code_2025"`` mode."""
        o = super().options(given, hint)
        if o["passage_score_factor"] is None:
            o["passage_score_factor"] = 0.05 if o["compat"] == "paper" else 1.0
        return o

    # -- query ---------------------------------------------------------------------------
    def retrieve(self, state, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        o = self.options(options)
        g: AgragGraph = state.derived("agrag:graph", lambda: build_graph(state))
        wkey = (float(o["fact_edge_weight"]), float(o["synonym_edge_weight"]),
                float(o["passage_edge_weight"]), float(o["title_edge_weight"]))
        walk = state.derived(f"agrag:walk:{wkey}", lambda: g.walk(*wkey))
        n_e, n_c = g.n_entities, g.n_chunks
        scale = 0.5 if o["compat"] == "paper" else 1.0

        # 1. hybrid chunk scores
        hs_map = hybrid_scores(state, query, qvec, max(int(o["candidates"]), k), float(o["alpha"]))
        hs = np.zeros(n_c)
        if hs_map:
            hs[np.fromiter(hs_map, np.int64)] = np.fromiter(hs_map.values(), np.float64)

        # 2-4. facts, filter, anchors
        ent_vecs = state.vectors.get("entities")
        ent_sim = (
            ent_vecs @ np.asarray(qvec, np.float32) if ent_vecs is not None and len(ent_vecs)
            else np.zeros(0, np.float32)
        ).astype(np.float64)
        ms = self._fact_scores(g, ent_sim, hs, float(o["fact_entity_weight"]))
        facts = self._select_facts(state, g, query, ms, o)
        anchors = sorted({int(r) for f in facts for r in (g.rel_src[f.index], g.rel_dst[f.index])})

        # 5-6. PPR
        reset = np.zeros(g.n)
        psw = float(o["passage_seed_weight"]) if anchors else 1.0
        if anchors:
            reset[anchors] = (1.0 - psw) / len(anchors)
        seeds = rank(hs_map, int(o["seed_passages"]))
        seed_total = sum(s for _, s in seeds)
        if seeds and seed_total > 0:
            for r, s in seeds:
                reset[n_e + r] += psw * s / seed_total
        elif anchors:
            reset[anchors] = 1.0 / len(anchors)
        ppr = personalized_pagerank(walk, reset, float(o["damping"]), float(o["ppr_tol"]))
        node_s = ppr.copy()
        node_s[n_e:] *= float(o["passage_score_factor"])

        # 7-9. Steiner tree + MCMI on a bounded subgraph, rendered paths
        paths, path_rows, sub = [], [], None
        if anchors:
            sub = self._subgraph(g, anchors, ppr, ms, hs, ent_sim, scale, o)
            tree = steiner_tree(sub, anchors)
            tree.remove_nodes_from([PSEUDO])
            scores = {v: float(node_s[v]) for v in sub.nodes if v != PSEUDO}
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
            top = np.argsort(-ppr[n_e:], kind="stable")[: int(o["ppr_candidates"])]
            pool |= {int(r) for r in top}
        rows = np.asarray(sorted(pool), np.int64)
        scores_out: dict[int, float] = {}
        if len(rows):
            pp = ppr[n_e + rows]
            lo, hi = pp.min(), pp.max()
            pp = (pp - lo) / (hi - lo) if hi - lo > 1e-15 else np.zeros_like(pp)
            on_path = set(path_rows)
            w_ppr, w_path = float(o["ppr_weight"]), float(o["path_weight"])
            for r, p in zip(rows.tolist(), pp.tolist(), strict=True):
                scores_out[r] = hs[r] + w_ppr * p + (w_path if r in on_path else 0.0)
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
            _explain(state, g, query, qvec, out, hs_map, ent_sim, facts, anchors, reset, ppr, paths, path_rows,
                     rows, o)
        return out

    # -- helpers -------------------------------------------------------------------------
    @staticmethod
    def _fact_scores(g: AgragGraph, ent_sim: np.ndarray, hs: np.ndarray, w: float) -> np.ndarray:
        """MS(q, f) for every fact (module doc step 2)."""
        if not len(g.rel_keys):
            return np.zeros(0)
        ent_part = (ent_sim[g.rel_src] + ent_sim[g.rel_dst]) / 2.0
        chunk_part = np.zeros(len(g.rel_keys))
        rows = np.flatnonzero(hs > 0)
        if len(rows):
            sub = g.chunk_rel[rows]
            vals = np.repeat(hs[rows], np.diff(sub.indptr))
            np.maximum.at(chunk_part, sub.indices, vals)
        return w * ent_part + (1.0 - w) * chunk_part

    def _select_facts(self, state, g: AgragGraph, query: str, ms: np.ndarray, o) -> list[Fact]:
        kf = min(int(o["top_facts"]), len(ms))
        if kf <= 0:
            return []
        top = np.argpartition(-ms, kf - 1)[:kf]
        top = sorted(top.tolist(), key=lambda i: (-ms[i], i))
        cands = [self._fact(state, g, i, float(ms[i])) for i in top]
        picked = None
        if o["fact_filter"] is not None:
            picked = o["fact_filter"](query, list(cands)) or []
        elif (client := query_llm(state, o)) is not None:
            picked = llm_fact_filter(client, query, cands, int(o["max_facts"]))
        if picked is None:  # offline rule (also the fallback for unreadable LLM output)
            best = cands[0].score
            kept = [f for f in cands if f.score >= best - float(o["fact_delta"])]
        else:
            by_index = {f.index: f for f in cands}
            kept = []
            for f in picked:
                f = by_index.get(getattr(f, "index", None))
                if f is not None and f not in kept:
                    kept.append(f)
        return kept[: int(o["max_facts"])]

    @staticmethod
    def _fact(state, g: AgragGraph, i: int, score: float) -> Fact:
        a, b = g.rel_keys[i]
        rel = state.kg.relations[(a, b)]
        ea, eb = state.kg.entities[a], state.kg.entities[b]
        sentence = _shortest_sentence(rel.description)
        return Fact(i, a, b, ea.name, PREDICATE, eb.name, sentence, score, tuple(rel.chunk_ids))

    def _subgraph(self, g, anchors, ppr, ms, hs, ent_sim, scale, o) -> nx.Graph:
        """Bounded Steiner/MCMI graph: top PPR nodes ∪ anchors ∪ anchors' best passages,
        with query-dependent costs (module doc step 7) and the pseudo connector."""
        n_e = g.n_entities
        m = min(int(o["subgraph_nodes"]), g.n)
        nodes = set(anchors)
        if m > 0:
            top = np.argpartition(-ppr, m - 1)[:m]
            nodes |= {int(v) for v in top if ppr[v] > 0}
        for a in anchors:
            lo, hi = g.entity_chunks.indptr[a], g.entity_chunks.indptr[a + 1]
            chunks = g.entity_chunks.indices[lo:hi]
            if len(chunks):
                best = chunks[np.lexsort((chunks, -ppr[n_e + chunks]))[0]]
                nodes.add(int(n_e + best))
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

        for mat, kind in ((g.fact, "fact"), (g.synonym, "synonym"), (g.contains, "contains")):
            blk = mat[idx][:, idx].tocoo()
            for i, j, val in zip(blk.row.tolist(), blk.col.tolist(), blk.data.tolist(), strict=True):
                if i >= j:
                    continue
                u, v = int(idx[i]), int(idx[j])
                if kind == "fact":
                    r = int(val) - 1
                    put(u, v, scale * (1.0 - ms[r]), fact=r)
                elif kind == "synonym":
                    put(u, v, scale * (1.0 - max(ent_sim[u], ent_sim[v])), synonym=float(val))
                else:
                    p = max(u, v) - n_e
                    put(u, v, scale * (1.0 - hs[p]), contains=True)
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
            a, b = g.rel_keys[data["fact"]]
            out.append((ents[a].name, PREDICATE, ents[b].name))
        if "synonym" in data:
            a, b = state.kg.entity_ids[u], state.kg.entity_ids[v]
            out.append((ents[a].name, SYNONYM, ents[b].name))
        return out

    @staticmethod
    def _fact_hit(state, f: Fact) -> Hit:
        return Hit(
            id=f"{f.source}\u241f{f.target}",
            text=f"{f.subject} — {f.object}: {f.sentence}",
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
            if "fact" in data and t[1] == PREDICATE:
                rel = state.kg.relations[g.rel_keys[data["fact"]]]
                chunk_ids.update(dict.fromkeys(rel.chunk_ids))
                facts.append({"triple": list(t), "sentence": _shortest_sentence(rel.description),
                              "chunk_ids": list(rel.chunk_ids)})
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


def _explain(state, g: AgragGraph, query: str, qvec, out: Retrieval, hs_map, ent_sim, facts, anchors, reset, ppr,
             paths, path_rows, pool_rows, o) -> None:
    """Fill ``out.explain`` and the context hits' ``explain`` (:mod:`.explain`): a chunk's seed
    signals (HS, its share of the PageRank restart mass, the anchors that mention it and
    theirs), its PageRank mass, the anchor facts it states, the reasoning path whose subgraph
    holds it (or states one of its facts) and its score terms; anchor facts their fact score
    and endpoints; paths their entities, triples and best node's mass."""
    name = AGRAG.name
    n_e = g.n_entities
    ids = state.kg.entity_ids
    total = float(reset.sum())
    share = reset / total if total > 0 else reset
    anchor_ids = {ids[a]: a for a in anchors}
    path_hits = [h for h in out.context if h.kind == "path"]
    rendered = []
    for p, h in zip(paths, path_hits, strict=True):
        triples = [list(t) for t in p.triples]
        rp: dict[str, Any] = {"id": h.id, "entities": _path_entities(g, state, p),
                              "triples": triples[: ex.MAX_TRIPLES]}
        if len(triples) > ex.MAX_TRIPLES:
            rp["truncated"] = len(triples) - ex.MAX_TRIPLES
        rendered.append((p, h, rp))
    on_path_entities = {e["id"] for _, _, rp in rendered for e in rp["entities"]}
    sims = {e: float(ent_sim[state.kg.row[e]]) for e in set(anchor_ids) | on_path_entities}
    pp = ppr[n_e + np.asarray(pool_rows, np.int64)] if len(pool_rows) else np.zeros(0)
    lo, hi = (float(pp.min()), float(pp.max())) if len(pp) else (0.0, 0.0)
    in_pool = set(np.asarray(pool_rows).tolist())
    on_path = set(path_rows)
    w_ppr, w_path = float(o["ppr_weight"]), float(o["path_weight"])
    rows = [r for r, _ in out.chunks]
    signals = ex.chunk_signals(state, query, qvec, rows)
    for r in rows:
        cid = state.chunks[r].id
        here = ex.chunk_entity_ids(state, r)
        seeds = [ex.entity_ref(state, e, value=float(share[anchor_ids[e]])) for e in here if e in anchor_ids]
        stated = [{"id": f"{f.source}\u241f{f.target}", "triple": [f.subject, f.predicate, f.object],
                   "fact_score": float(f.score)} for f in facts if cid in f.chunk_ids]
        path = None
        for p, h, rp in rendered:
            mine = [fact["triple"] for fact in h.metadata.get("facts", []) if cid in fact["chunk_ids"]]
            if mine or n_e + r in p.nodes:
                path = {**rp, "chunk_triples": mine[: ex.MAX_TRIPLES]} if mine else rp
                if mine:
                    break
                # a passage node of this path: keep looking for a path one of whose facts it states
        ppr_part = None
        if r in in_pool and hi - lo > 1e-15:
            ppr_part = w_ppr * (float(ppr[n_e + r]) - lo) / (hi - lo)
        node_share = float(share[n_e + r])
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
            ppr_mass=float(ppr[n_e + r]),
            score_parts=ex.parts(hybrid=hs_map.get(r), ppr=ppr_part, path=w_path if r in on_path else None),
        )
    for h in out.context:
        if h.kind == "relation":
            ends = [e for e in h.id.split("\u241f") if e in anchor_ids]
            h.explain = ex.explanation(
                name, "anchor fact: among the top facts by MS and kept by the fact filter", layer=0,
                seeds={"fact_score": float(h.metadata["raw_score"]),
                       "entities": [ex.entity_ref(state, e, value=float(share[anchor_ids[e]])) for e in ends]},
                matched_entities=[ex.entity_ref(state, e, similarity=sims[e]) for e in ends],
            )
    for p, h, rp in rendered:
        anchors_in = [e for e in h.metadata.get("anchors", []) if e in sims]
        best = p.nodes[0] if p.nodes else None
        h.explain = ex.explanation(
            name, f"reasoning path of the MCMI subgraph ({len(p.triples)} triple{'s' if len(p.triples) != 1 else ''})",
            reasoning_path=rp,
            matched_entities=[ex.entity_ref(state, e, similarity=sims[e]) for e in anchors_in[: ex.MAX_LISTED]],
            ppr_mass=float(ppr[best]) if best is not None and best >= 0 else None,
        )
