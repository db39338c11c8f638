"""HiRAG retrieval, offline (spec seed-hirag.md §3 HiRetrieval, over the HiIndex of §2.5–2.7).

The index — summary-entity layers over the KG and Leiden communities over the multi-layer
graph G_k — is the structure :mod:`graphstrata.structures.hirag` (built at index time); retrieval
reads it through :func:`~graphstrata.structures.hirag.hi_index` (cached once per state).

**HiRetrieval** (:class:`HiRAG`, spec §3.1 Eqs. 12–16):

* local: ``top_n`` entities of all layers by cosine (entity layer: its C-HNSW, beam
  ``ef_search``, cosines recomputed exactly; summary entities, a few hundred at most: exact);
* global: the communities containing them, ranked by (local hits, best member similarity),
  at most ``max_communities`` and ``max_report_tokens``;
* bridge: the ``top_m`` most similar members of each community (Eq. 14 over *all* members),
  in community order then similarity order, de-duplicated stably (spec §9 #3, #4); the
  shortest paths in G_k between consecutive key entities (unweighted hops by default,
  spec §9 #14; disconnected pairs, and pairs whose search scans more than
  ``max_path_visits`` neighbour entries, are skipped) form the path; the bridge triples are
  all edges among the path's nodes, ranked by (edge degree, weight), cut at
  ``max_bridge_tokens``.

Issue 33: a query reads only the nodes it touches. The HiIndex is arrays (CSR G_k, community
CSR, summary entities; the entity layer is the state's), built at index time and persisted
(:data:`~graphstrata.structures.hirag.DEFAULT_HI_INDEX`); similarities are computed for the
local candidates, the retrieved communities' members and the path only; the shortest paths
are a level-synchronous bidirectional BFS over the CSR arrays (:func:`shortest_path`, the
path networkx finds) with per-thread scratch marks, so a search costs what it visits.

Chunks: candidates are the hybrid (dense + BM25) top-N plus the chunks of every retrieved
entity, community and bridge triple; score = hybrid score + weighted, hub-damped graph
evidence (as in ArchRAG), so every mode returns ``k`` ranked chunks. Retrieval needs no LLM;
the LLM step of HiIndex (summary entities) plugs in through ``HiIndexConfig.summarise_fn``, or
is taken from the state's LLM (:func:`~graphstrata.structures.hirag.hi_index`). Community reports
stay extractive.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import combinations, count
from typing import Any

import networkx as nx
import numpy as np
from graphstrata_chnsw import shortest_path as native_shortest_path

from ..hierarchy import rank_chunks
from ..scores import bounded, cosine
from ..structures.hirag import HiIndex, HiIndexConfig, extractive_community_report, hi_index
from ..structures.provenance import ENTITY_CHUNK_LIMIT
from ..types import Hit
from . import explain as ex
from .base import COSINE, TOKEN_BUDGET, UNIT, Method, OptionSpec, Retrieval
from .base import (
    entity_hit,
    hybrid_scores,
    rank,
    relation_hit,
    representative_chunks,
    scored,
    spread_to_chunks,
)
from .lightrag import add_second_hop, count_tokens

MODES = ("local", "global", "bridge", "hi")

COMMUNITY_MEMBER_CHUNKS = 10
"""Chunks of each member entity a community report's chunk ranking reads (its most
representative ones): communities average ~100 members at 10⁶ chunks, and reading 50 chunks of
each was a fifth of a query."""

COMMUNITY_REPORT_MEMBERS = 64
"""Members of a community whose chunks its report ranks (the highest-degree ones, ties by node
index) when ``entity_chunks`` is set: community size grows with the corpus (median 9, mean
26 members per report at 50k chunks; mean ~105 at 10⁶), and the report's 50 chunks are those
most shared among its members — the hubs decide them. ``metadata["size"]`` and ``["members"]``
still give the whole community."""


def _chunk_count(hit: Hit) -> int:
    """The full number of chunks behind ``hit`` (``metadata["chunk_count"]`` when its chunk list
    was bounded), which damps its evidence (:func:`~.base.spread_to_chunks`)."""
    return int(hit.metadata.get("chunk_count", len(hit.chunk_ids)))


def _entity_chunk_ids(state, row: int, per_entity: int | None) -> Sequence[str]:
    """Chunk ids of entity ``row``: all of them, or with ``per_entity`` set and more mentions
    than that, its ``per_entity`` most representative ones (:func:`~.base.entity_chunks`)."""
    ids = state.kg.entities[state.kg.entity_ids[row]].chunk_ids
    if per_entity is None or len(ids) <= int(per_entity):
        return ids
    return representative_chunks(state, row, int(per_entity))[0]


def _inverse_weight(u: str, v: str, data: dict) -> float:
    return 1.0 / max(float(data.get("weight", 1.0)), 1e-6)


def bridge_path(
    graph: nx.Graph, keys: Sequence[str], weighted: bool = False
) -> list[str]:
    """Concatenate shortest paths between consecutive key nodes (spec §3.1 Eq. 15, §3.2 step 4).

    Args:
        graph: the graph (G_k).
        keys: ordered key nodes; unknown nodes are skipped, repeats are kept in order.
        weighted: edge length ``1 / weight`` (Dijkstra) instead of hop count (BFS).

    Returns:
        The path's node list: each join node appears once between consecutive segments; when
        two consecutive keys are disconnected, the next key simply follows (spec: "skip").
    """
    keys = [k for k in keys if k in graph]
    if not keys:
        return []
    path = [keys[0]]
    for a, b in zip(keys, keys[1:], strict=False):
        if a == b:
            continue
        try:
            if weighted:
                seg = nx.dijkstra_path(graph, a, b, weight=_inverse_weight)
            else:
                seg = nx.bidirectional_shortest_path(graph, a, b)
        except nx.NetworkXNoPath:
            seg = [a, b]
        if path[-1] == seg[0]:
            seg = seg[1:]
        path.extend(seg)
    return path


def bridge_triples(graph: nx.Graph, path: Sequence[str]) -> list[tuple[str, str]]:
    """All edges among the path's nodes (Eq. 16), ranked by (edge degree, weight) descending,
    ties by the node ids; each edge as a sorted ``(u, v)`` pair."""
    nodes = set(path)
    edges = {tuple(sorted((u, v))) for u, v in graph.subgraph(nodes).edges()}
    deg = graph.degree
    return sorted(
        edges,
        key=lambda e: (-(deg[e[0]] + deg[e[1]]), -graph.edges[e].get("weight", 1.0), e),
    )


# -- bridge paths over the HiIndex arrays (what retrieval uses) -----------------------------

#: neighbour lists longer than this are not scanned for the induced bridge edges; an edge
#: between two such nodes is looked up directly
_HUB_DEGREE = 4096


def shortest_path(hi: HiIndex, a: int, b: int, max_visits: int | None = None) -> list[int] | None:
    """An unweighted shortest path between nodes ``a`` and ``b`` of G_k: bidirectional BFS in
    the native module (:func:`graphstrata_chnsw.shortest_path`, GIL released), the same path
    ``networkx``'s ``bidirectional_shortest_path`` returns for a graph built from the same
    edges (the smaller fringe is expanded, neighbours in edge order, the first neighbour seen
    from the other side is the meeting node, and the scan stops there as networkx's does).

    Args:
        hi: the index (its CSR graph).
        a, b: node indices.
        max_visits: stop after scanning this many neighbour entries (``None``: no bound).

    Returns:
        The node indices from ``a`` to ``b``, or ``None`` when they are disconnected or the
        budget ran out first.

    Raises:
        ValueError: ``a`` or ``b`` outside ``[0, n_nodes)``.
    """
    budget = -1 if max_visits is None else int(max_visits)
    path, _, _ = native_shortest_path(hi.indptr, hi.indices, int(a), int(b), budget)
    return None if path is None else path.tolist()


def weighted_path(hi: HiIndex, a: int, b: int, max_visits: int | None = None) -> list[int] | None:
    """A shortest path between nodes ``a`` and ``b`` with edge length ``1 / weight``
    (Dijkstra from ``a``, stopped at ``b``; ties as networkx's ``dijkstra_path``).

    Returns:
        The node indices from ``a`` to ``b``, or ``None`` when they are disconnected or more
        than ``max_visits`` neighbour entries were scanned first.
    """
    dist: dict[int, float] = {}
    seen: dict[int, float] = {a: 0.0}
    pred: dict[int, int] = {}
    tick = count()
    fringe: list[tuple[float, int, int]] = [(0.0, next(tick), a)]
    visits = 0
    while fringe:
        d, _, v = heapq.heappop(fringe)
        if v in dist:
            continue
        dist[v] = d
        if v == b:
            break
        s, e = int(hi.indptr[v]), int(hi.indptr[v + 1])
        visits += e - s
        if max_visits is not None and visits > max_visits:
            return None
        for u, w in zip(hi.indices[s:e].tolist(), hi.weights[s:e].tolist(), strict=True):
            vu = d + 1.0 / max(w, 1e-6)
            if u in dist:
                continue
            if u not in seen or vu < seen[u]:
                seen[u] = vu
                heapq.heappush(fringe, (vu, next(tick), u))
                pred[u] = v
    if b not in dist:
        return None
    path = [b]
    while path[-1] in pred:
        path.append(pred[path[-1]])
    path.reverse()
    return path


def bridge_path_rows(
    hi: HiIndex, keys: Sequence[int], weighted: bool = False, max_visits: int | None = None
) -> list[int]:
    """:func:`bridge_path` over the HiIndex arrays (spec §3.1 Eq. 15): node indices in, node
    indices out. A pair whose search exceeds ``max_visits`` scanned neighbour entries is
    treated as disconnected (the next key simply follows)."""
    keys = [int(k) for k in keys if 0 <= int(k) < hi.n_nodes]
    if not keys:
        return []
    search = weighted_path if weighted else shortest_path
    path = [keys[0]]
    for a, b in zip(keys, keys[1:], strict=False):
        if a == b:
            continue
        seg = search(hi, a, b, max_visits) or [a, b]
        if path[-1] == seg[0]:
            seg = seg[1:]
        path.extend(seg)
    return path


def bridge_triples_rows(hi: HiIndex, path: Sequence[int]) -> list[tuple[int, int]]:
    """:func:`bridge_triples` over the HiIndex arrays (Eq. 16): every edge among the path's
    nodes as a node-index pair ordered by node id, ranked by (edge degree, weight) descending,
    ties by the node ids. Work: the neighbour lists of the path's nodes of degree at most
    4096, plus one vectorised scan per pair of larger nodes."""
    nodes = sorted(set(int(i) for i in path))
    if len(nodes) < 2:
        return []
    arr = np.asarray(nodes, np.int64)
    found: dict[tuple[int, int], float] = {}
    deg = hi.degree[arr]
    hubs = arr[deg > _HUB_DEGREE].tolist()
    small = arr[deg <= _HUB_DEGREE]
    if len(small):
        starts = hi.indptr[small]
        lens = hi.indptr[small + 1] - starts
        owner = np.repeat(small, lens)
        pos = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(starts, lens)
        nb = hi.indices[pos].astype(np.int64)
        hit = np.isin(nb, arr)
        for i, j, w in zip(owner[hit].tolist(), nb[hit].tolist(), hi.weights[pos[hit]].tolist(), strict=True):
            found[(min(i, j), max(i, j))] = w
    for x, y in combinations(hubs, 2):
        w = hi.edge_weight(x, y)
        if w is not None:
            found[(x, y)] = w
    ids = {i: hi.node_id(i) for i in nodes}
    deg = hi.degree
    pairs = [(i, j) if ids[i] <= ids[j] else (j, i) for i, j in found]
    return sorted(
        pairs,
        key=lambda e: (-(int(deg[e[0]]) + int(deg[e[1]])), -found[(min(e), max(e))], ids[e[0]], ids[e[1]]),
    )


class HiRAG(Method):
    """HiRAG hierarchical retrieval, offline (spec seed-hirag.md §3; HiIndex §2.5–2.7).

    Options:
        mode: ``"local"`` (top-n entities), ``"global"`` (their communities' reports),
            ``"bridge"`` (shortest-path reasoning paths between the communities' key
            entities) or ``"hi"`` (all three, the default).
        top_n: local entities (spec n = 20; the paper's eval runs used 10).
        top_m: key entities per community (spec §9 #1: 10).
        max_communities: communities kept (code: reports of levels ≤ 2 within 12,500
            tokens; we also cap the count to bound the bridge search).
        min_similarity: cosine floor of the entity search (spec 0.2).
        weighted_paths: ``False`` = unweighted hops (spec §9 #14), ``True`` = edge length
            1/weight.
        max_report_tokens, max_bridge_tokens: budgets in tokens (words and punctuation
            marks) for the community reports and the bridge triples (spec 12,500 each;
            ``None`` = no limit).
        alpha: dense weight of the hybrid base score of the chunk ranking.
        entity_weight, community_weight, bridge_weight: weights of the graph evidence from
            local entities, communities and bridge triples in the chunk score.
        candidates: dense and BM25 candidates each.
        second_hop_weight, second_hop_seeds, second_hop_max_df: second-hop chunk evidence
            from the top hybrid chunks (as in :class:`~.lightrag.LightRAG`, same 0.3
            default and trade-off); 0 disables.
        index_config: a :class:`HiIndexConfig` (``None`` = defaults) — build parameters of
            the HiIndex (the default one is built at index time and persisted; others are
            built on first use and cached).
        ef_search: beam of the entity C-HNSW search of the local step (512: the dev sets'
            recall needs the exact top 20; 128 lost 0.011 recall@5 on musique).
        max_path_visits: neighbour entries one shortest-path search may scan before its pair
            is skipped like a disconnected one (200,000; ``None`` = no bound). Measured
            maxima per pair over 60 questions, when the search still scanned whole levels:
            7,300 (musique), 4,500 (hotpotqa), 2,000 (lihua_world), 28,600 (44k-chunk kernel
            docs); it now stops at the meeting neighbour (about a quarter of those entries on
            the kernel docs). The layer-1 summary entities' degree grows with the entity count
            (at most ``max_clusters`` of them), so the budget is what bounds a search at 10⁶
            chunks.
        entity_chunks: chunks read per entity (1 … 50), as ArchRAG's option: an entity of more
            mentions contributes its most representative ones to its hit, to the community
            reports' chunk ranking and (its first ones, for a relation) to the bridge triples,
            its evidence still damped by its full count (``metadata["chunk_count"]``).
            ``None``: every chunk (the work then grows with hub entities: at 10⁶ chunks a
            hub's lists were a third of a query's time).

    Ambiguities (spec §9) taken: #1 m = 10; #2 n = 20; #3 exact Eq. 14 over all community
    members; #4 stable order (community order, then similarity); #5 communities ranked by
    (local hits, best similarity), capped by count and report tokens; #6 soft clusters; #7
    PCA + diagonal GMM with BIC over {√n/2, √n, 2√n} (no UMAP dependency), ≤ 200 clusters;
    #8 the stored entity vectors (name + context) for clustering and search; #9 singletons
    carried; #10 code stop rules with ``max_layers`` 3; #12 no intra-layer summary edges;
    #14 unweighted hops; #15 chunks included (fused ranking); #16 Leiden leaf communities
    of size ≤ 10 over all of G_k (own run, not ArchRAG's communities).
    Hit scores (``max(0, ·)`` of a cosine; the cosine itself in ``metadata["raw_score"]``):
    entities and key entities = cosine; communities = the best member cosine; bridge triples
    and the path = mean cosine of their endpoints / key entities. Chunk scores:
    ``(hybrid + Σ weight · normalised evidence) / (1 + entity_weight + community_weight +
    bridge_weight + second_hop_weight)``, a weighted mean of parts in [0, 1]; raw score: the
    weighted sum.
    """

    name = "hirag"
    defaults = {
        "mode": "hi",
        "top_n": 20,
        "top_m": 10,
        "max_communities": 5,
        "min_similarity": 0.2,
        "weighted_paths": False,
        "max_report_tokens": 12500,
        "max_bridge_tokens": 12500,
        "alpha": 0.5,
        "entity_weight": 0.3,
        "community_weight": 0.1,
        "bridge_weight": 0.2,
        "candidates": 100,
        "second_hop_weight": 0.3,
        "second_hop_seeds": 1,
        "second_hop_max_df": 50,
        "index_config": None,
        "ef_search": 512,
        "max_path_visits": 200_000,
        "entity_chunks": ENTITY_CHUNK_LIMIT,
    }
    option_specs = {
        "ef_search": OptionSpec("int", ge=1),
        "max_path_visits": OptionSpec("int", ge=1, optional=True),
        "mode": OptionSpec(choices=MODES),
        "min_similarity": COSINE,
        "max_report_tokens": TOKEN_BUDGET,
        "max_bridge_tokens": TOKEN_BUDGET,
        "alpha": UNIT,
        "index_config": OptionSpec(HiIndexConfig),
        "entity_chunks": OptionSpec("int", ge=1, le=ENTITY_CHUNK_LIMIT, optional=True),
    }

    def retrieve(self, state, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        o = self.resolved(options)
        context: list[Hit] = []
        sources: dict[str, list[tuple[float, list[str], int]]] = {
            "entity": [], "community": [], "bridge": []
        }
        hi = None
        if len(state.kg):
            hi = hi_index(state, o["index_config"])
            context = self._hi_retrieve(state, hi, qvec, o, sources)
        weights = {
            "entity": o["entity_weight"],
            "community": o["community_weight"],
            "bridge": o["bridge_weight"],
        }
        evidence = {name: spread_to_chunks(src, state) for name, src in sources.items()}
        extra = set().union(*evidence.values())
        n = max(int(o["candidates"]), k)
        base = hybrid_scores(state, query, qvec, n, float(o["alpha"]), extra_rows=extra)
        scores = dict(base)
        added = {"second_hop": add_second_hop(state, scores, base, o)}  # weighted terms, for explain
        for name, ev in evidence.items():
            if not ev:
                continue
            top = max(ev.values())
            added[name] = {r: float(weights[name]) * v / top for r, v in ev.items()}
            for r, v in added[name].items():
                scores[r] = scores.get(r, 0.0) + v
        # hybrid (≤ 1) + each evidence part and the second hop (≤ its weight)
        bound = 1.0 + sum(float(w) for w in weights.values()) + float(o["second_hop_weight"])
        out = scored(rank(scores, k), lambda v: bounded(v, bound), context)
        if o["explain"]:
            _explain(state, hi, query, qvec, out, base, added, o)
        return out

    # -- HiRetrieval -----------------------------------------------------------------------
    def _hi_retrieve(self, state, hi: HiIndex, qvec, o, sources) -> list[Hit]:
        mode = o["mode"]
        per_entity = o["entity_chunks"]
        q = np.asarray(qvec, np.float32)
        sims = _Similarity(hi, q)
        local = _local_nodes(state, hi, sims, int(o["top_n"]), int(o["ef_search"]))
        local = [i for i in local if sims[i] >= float(o["min_similarity"])]
        hits: list[Hit] = []
        if mode in ("local", "hi"):
            for i in local:
                h = self._node_hit(state, hi, i, sims[i], per_entity)
                sources["entity"].append((h.metadata["raw_score"], h.chunk_ids, _chunk_count(h)))
                hits.append(h)
        if mode == "local":
            return _by_kind(hits)
        reports = self._reports(state, hi, local, sims, o)
        if mode in ("global", "hi"):
            for _, h in reports:
                sources["community"].append((h.metadata["raw_score"], h.chunk_ids, _chunk_count(h)))
                hits.append(h)
        if mode == "global":
            return _by_kind(hits)
        # bridge: key entities per community (Eq. 14), shortest paths (Eq. 15), triples (Eq. 16)
        keys = _key_entities(hi, reports, sims, local, int(o["top_m"]))
        key_ids = hi.node_ids_of(keys)
        path_rows = bridge_path_rows(
            hi, list(keys), weighted=bool(o["weighted_paths"]), max_visits=o["max_path_visits"]
        )
        path = hi.node_ids_of(path_rows)
        triples = bridge_triples_rows(hi, path_rows)
        sims.fill(path_rows)
        limit = o["max_bridge_tokens"]
        used = 0
        bridge_hits = []
        for iu, iv in triples:
            h = self._triple_hit(state, hi, iu, iv, sims, per_entity)
            t = count_tokens(h.text)
            if limit is not None and used + t > limit:
                break
            used += t
            bridge_hits.append(h)
            sources["bridge"].append((h.metadata["raw_score"], h.chunk_ids, _chunk_count(h)))
        if path:
            chunk_ids = list(dict.fromkeys(c for h in bridge_hits for c in h.chunk_ids))
            names = [self._name(state, hi, i) for i in path_rows]
            score = float(np.mean([sims[i] for i in keys])) if keys else 0.0
            hits.append(
                Hit(
                    id="path:" + "\u2192".join(path),
                    text=" → ".join(names),
                    score=cosine(score),
                    kind="path",
                    layer=None,
                    chunk_ids=chunk_ids,
                    document_ids=state.document_ids_of(chunk_ids),
                    metadata={"nodes": list(path), "key_entities": key_ids, "raw_score": score},
                )
            )
        bridge_hits.sort(key=lambda h: (-h.metadata["raw_score"], h.id))
        hits.extend(bridge_hits)
        return _by_kind(hits)

    def _reports(self, state, hi: HiIndex, local: list[int], sims: _Similarity, o) -> list[tuple[int, Hit]]:
        """Global: the communities containing the local entities (Eq. 13), most local members
        first, then best similarity; ``(community, hit)`` within ``max_report_tokens``."""
        count: dict[int, int] = {}
        best: dict[int, float] = {}
        for i in local:
            c = int(hi.node_community[i])
            if c >= 0:
                count[c] = count.get(c, 0) + 1
                best[c] = max(best.get(c, -1.0), sims[i])
        order = sorted(count, key=lambda c: (-count[c], -best[c], c))[: int(o["max_communities"])]
        reports = []
        used = 0
        limit = o["max_report_tokens"]
        for c in order:
            h = self._community_hit(state, hi, c, best[c], o["entity_chunks"])
            t = count_tokens(h.text)
            if limit is not None and used + t > limit:
                break
            used += t
            reports.append((c, h))
        return reports

    @staticmethod
    def _name(state, hi: HiIndex, i: int) -> str:
        if i < hi.n_entities:
            return state.kg.entities[hi.node_id(i)].name
        return hi.names[i - hi.n_entities]

    def _node_hit(self, state, hi: HiIndex, i: int, score: float, per_entity: int | None) -> Hit:
        if i < hi.n_entities:  # node i is entity row i
            return entity_hit(state, i, score, max_chunks=per_entity)
        j = i - hi.n_entities
        return Hit(
            id=hi.summary_ids[j],
            text=f"{hi.names[j]}: {hi.descriptions[j]}",
            score=cosine(score),
            kind="entity",
            layer=hi.layer_of(i),
            chunk_ids=list(hi.chunk_ids[j]),
            document_ids=state.document_ids_of(hi.chunk_ids[j]),
            metadata={"name": hi.names[j], "summary": True, "raw_score": score},
        )

    def _community_hit(self, state, hi: HiIndex, c: int, score: float, per_entity: int | None) -> Hit:
        kg = state.kg
        member_arr = hi.members(c)  # ascending node indices
        members = member_arr.tolist()
        # by degree, highest first, ties by node index (a stable sort of the ascending members)
        top = member_arr[np.argsort(-hi.degree[member_arr], kind="stable")].tolist()
        # the LLM's report where the index has one (spec §2.7), else the extractive text
        title, body = hi.llm_report(c) or extractive_community_report(kg, hi, c, top)
        # each member's most representative chunks (at most COMMUNITY_MEMBER_CHUNKS; every one
        # with entity_chunks=None, as documented): the report keeps the 50 most shared of them
        per_member = None if per_entity is None else min(int(per_entity), COMMUNITY_MEMBER_CHUNKS)
        voters = members if per_entity is None else sorted(top[:COMMUNITY_REPORT_MEMBERS])
        chunk_ids = rank_chunks([_entity_chunk_ids(state, i, per_member) for i in voters if i < hi.n_entities])
        return Hit(
            id=f"hirag:C{c}",
            text=f"{title}\n{body}".strip(),
            score=cosine(score),
            kind="community",
            layer=1,
            chunk_ids=chunk_ids,
            document_ids=state.document_ids_of(chunk_ids),
            metadata={"title": title, "size": len(members),
                      "members": hi.node_ids_of(members), "raw_score": float(score)},
        )

    def _triple_hit(
        self, state, hi: HiIndex, iu: int, iv: int, sims: _Similarity, per_entity: int | None
    ) -> Hit:
        kg = state.kg
        u, v = hi.node_id(iu), hi.node_id(iv)
        score = float(sims[iu] + sims[iv]) / 2.0
        r = kg.relation(u, v) if iu < hi.n_entities and iv < hi.n_entities else None
        nu, nv = self._name(state, hi, iu), self._name(state, hi, iv)
        deg = int(hi.degree[iu] + hi.degree[iv])
        if r is not None:
            chunk_ids = list(r.chunk_ids if per_entity is None else r.chunk_ids[: int(per_entity)])
            metadata = {"source": nu, "target": nv, "weight": r.weight, "rank": deg,
                        "bridge": True, "raw_score": score, "chunk_count": len(r.chunk_ids)}
            return relation_hit(state, r, nu, nv, score, chunk_ids, metadata)
        lo, hi_node = (iu, iv) if hi.layer_of(iu) <= hi.layer_of(iv) else (iv, iu)
        member, summary = self._name(state, hi, lo), self._name(state, hi, hi_node)
        chunk_ids = []
        if lo < hi.n_entities:
            chunk_ids = list(state.kg.entities[hi.node_id(lo)].chunk_ids[:10])
        return Hit(
            id=f"{hi.node_id(lo)}\u241f{hi.node_id(hi_node)}",
            text=f"{member} — {summary}: {member} belongs to the summary entity '{summary}'.",
            score=cosine(score),
            kind="relation",
            layer=hi.layer_of(hi_node),
            chunk_ids=chunk_ids[:10],
            document_ids=state.document_ids_of(chunk_ids[:10]),
            metadata={"source": member, "target": summary, "weight": 1.0, "rank": deg,
                      "bridge": True, "inter_layer": True, "raw_score": score},
        )


class _Similarity:
    """Cosine of one query to HiIndex nodes, computed for the nodes a query touches only
    (``sims[i]``; :meth:`fill` computes many at once)."""

    def __init__(self, hi: HiIndex, query: np.ndarray) -> None:
        self.hi, self.query, self.known = hi, query, {}

    def fill(self, rows: Sequence[int]) -> None:
        todo = [int(i) for i in rows if int(i) not in self.known]
        if todo:
            values = self.hi.similarity(np.asarray(todo, np.int64), self.query)
            self.known.update(zip(todo, values.tolist(), strict=True))

    def of(self, rows: np.ndarray) -> np.ndarray:
        """float64 cosines of nodes ``rows`` (int array), remembered as :meth:`fill` does."""
        self.fill(rows.tolist())
        known = self.known
        return np.fromiter((known[i] for i in rows.tolist()), np.float64, len(rows))

    def __getitem__(self, i: int) -> float:
        i = int(i)
        if i not in self.known:
            self.fill([i])
        return self.known[i]


def _key_entities(hi: HiIndex, reports, sims: _Similarity, local: list[int], m: int) -> dict[int, None]:
    """The bridge's key entities (Eq. 14): each reported community's ``m`` members most similar
    to the query (ties by node index), else the ``m`` best local entities; in order."""
    keys: dict[int, None] = {}
    for c, _ in reports:
        members = hi.members(c)  # ascending node indices
        sim = sims.of(members)
        # the m most similar, ties by node index (a stable sort of the ascending members)
        for i in members[np.argsort(-sim, kind="stable")[:m]].tolist():
            keys.setdefault(i, None)
    return keys if keys else dict.fromkeys(local[:m])


def _local_nodes(state, hi: HiIndex, sims: _Similarity, n: int, ef: int) -> list[int]:
    """The top-``n`` nodes of every layer by cosine (spec Eq. 12), best first (ties: lower
    node index): entity candidates from the entity layer's C-HNSW (``ef`` beam; an exact scan
    when the state has none), every summary entity exactly; candidates rescored exactly."""
    n = min(n, hi.n_nodes)
    if n <= 0:
        return []
    cand: list[int] = list(range(hi.n_entities, hi.n_nodes))
    if hi.n_entities:
        layered = getattr(state, "layered", None)
        if layered is not None:
            rows, _ = layered.search_layer(sims.query[None, :], min(n, hi.n_entities), 0, ef_search=max(ef, n))
            cand.extend(int(r) for r in rows[0] if r >= 0)
        else:
            s = hi.similarity(np.arange(hi.n_entities), sims.query)
            k = min(n, len(s))
            cand.extend(np.argpartition(-s, k - 1)[:k].tolist())
    sims.fill(cand)
    return sorted(cand, key=lambda i: (-sims[i], i))[:n]


def _node_ref(state, hi: HiIndex | None, node: str, **extra: Any) -> dict[str, Any]:
    """A HiIndex node as an explanation entity ref: a KG entity's :func:`.explain.entity_ref`,
    a summary entity's ``{"id", "name", "summary": True, "layer"}``."""
    i = hi.summary_row.get(node) if hi is not None else None
    if i is None:
        return ex.entity_ref(state, node, **extra)
    return {"id": node, "name": hi.names[i - hi.n_entities], "summary": True, "layer": hi.layer_of(i),
            **{k: float(v) for k, v in extra.items()}}


def _explain(state, hi: HiIndex | None, query: str, qvec, out: Retrieval, base, added, o) -> None:
    """Fill ``out.explain`` and the context hits' ``explain`` (:mod:`.explain`), from the
    context hits themselves: a chunk's seed signals, the local entities (KG and summary) whose
    chunks include it, the best retrieved community holding it, the bridge path when a bridge
    triple comes from it, its second hop and its score terms."""
    name = HiRAG.name
    ctx = out.context
    local = {h.id: float(h.metadata["raw_score"]) for h in ctx if h.kind == "entity"}
    local_hits = [h for h in ctx if h.kind == "entity"]
    communities = sorted((h for h in ctx if h.kind == "community"),
                         key=lambda h: (-h.metadata["raw_score"], h.id))
    bridges = [h for h in ctx if h.kind == "relation" and h.metadata.get("bridge")]
    path = next((h for h in ctx if h.kind == "path"), None)
    path_entities = [_node_ref(state, hi, n) for n in path.metadata["nodes"]] if path is not None else []

    def reasoning(triples: list[list[str]]) -> dict[str, Any] | None:
        return _reasoning_path(path, path_entities, triples)

    rows = [r for r, _ in out.chunks]
    signals = ex.chunk_signals(state, query, qvec, rows)
    hop_seeds = [r for r, _ in rank(base, int(o["second_hop_seeds"]))] if added.get("second_hop") else []
    for r in rows:
        cid = state.chunks[r].id
        matched = ex.matched_in_chunk(state, r, {e: s for e, s in local.items() if e in state.kg.entities})
        summaries = [_node_ref(state, hi, h.id, similarity=local[h.id]) for h in local_hits
                     if h.metadata.get("summary") and cid in h.chunk_ids]
        matched = sorted(matched + summaries, key=lambda m: (-m["similarity"], m["id"]))[: ex.MAX_LISTED]
        com = next((h for h in communities if cid in h.chunk_ids), None)
        triples = [_bridge_triple(h) for h in bridges if cid in h.chunk_ids]
        out.explain[r] = ex.explanation(
            name,
            None,
            **ex.chunk_base(signals[r], hybrid=base.get(r)),
            matched_entities=matched,
            community_path=[_community_ref(com)] if com is not None else [],
            reasoning_path=reasoning(triples) if triples else None,
            second_hop=ex.second_hop(state, r, hop_seeds, int(o["second_hop_max_df"]))
            if r in added.get("second_hop", {}) else None,
            score_parts=ex.parts(hybrid=base.get(r), **{part: v.get(r) for part, v in added.items()}),
        )
    retrieved = {h.id for h in communities}
    for h in ctx:
        if h.kind == "entity":
            node = hi.row_of(h.id) if hi is not None else None
            coms = [c for c in ([int(hi.node_community[node])] if node is not None else [])
                    if c >= 0 and f"hirag:C{c}" in retrieved]
            paths = [_community_ref(next(x for x in communities if x.id == f"hirag:C{c}")) for c in coms[:1]]
            lead = ("summary entity" if h.metadata.get("summary") else "entity") + " among the top-n by cosine"
            h.explain = ex.explanation(name, lead, layer=h.layer, similarity=local[h.id], community_path=paths)
        elif h.kind == "community":
            members = [m for m in h.metadata.get("members", []) if m in local]
            members.sort(key=lambda m: (-local[m], m))
            h.explain = ex.explanation(
                name, f"community of {len(members)} query-matched entit{'y' if len(members) == 1 else 'ies'}",
                layer=h.layer, similarity=h.metadata["raw_score"], community_path=[_community_ref(h)],
                matched_entities=[_node_ref(state, hi, m, similarity=local[m]) for m in members[: ex.MAX_LISTED]],
            )
        elif h.kind == "relation":
            ends = h.id.split("\u241f")
            h.explain = ex.explanation(
                name, "bridge triple on the shortest path between key entities", layer=h.layer,
                similarity=h.metadata["raw_score"],
                matched_entities=[_node_ref(state, hi, e) for e in ends],
                reasoning_path=reasoning([_bridge_triple(h)]),
            )
        elif h.kind == "path":
            keys = h.metadata.get("key_entities", [])
            h.explain = ex.explanation(
                name, f"shortest path through {len(keys)} key entities of the retrieved communities",
                similarity=h.metadata["raw_score"],
                matched_entities=[_node_ref(state, hi, e) for e in keys[: ex.MAX_LISTED]],
                reasoning_path=reasoning([_bridge_triple(b) for b in bridges]),
            )


def _bridge_triple(h: Hit) -> list[str]:
    """A bridge relation hit as an explanation triple (an inter-layer edge "belongs to")."""
    verb = "belongs to" if h.metadata.get("inter_layer") else "relates to"
    return [str(h.metadata["source"]), verb, str(h.metadata["target"])]


def _reasoning_path(path: Hit | None, path_entities: list, triples: list[list[str]]) -> dict[str, Any] | None:
    """The explanation's reasoning path: the bridge path hit with its first entities and
    ``triples`` (at most :data:`.explain.MAX_TRIPLES`, the rest counted); ``None`` without a path."""
    if path is None:
        return None
    rp: dict[str, Any] = {"id": path.id, "entities": path_entities[: 2 * ex.MAX_TRIPLES],
                          "triples": triples[: ex.MAX_TRIPLES]}
    if len(triples) > ex.MAX_TRIPLES:
        rp["truncated"] = len(triples) - ex.MAX_TRIPLES
    return rp


def _community_ref(h: Hit) -> dict[str, Any]:
    return {"id": h.id, "layer": int(h.layer or 1), "title": h.metadata.get("title", ""),
            "similarity": float(h.metadata["raw_score"])}


_KIND_ORDER = {"entity": 0, "relation": 1, "community": 2, "path": 3}


def _by_kind(hits: list[Hit]) -> list[Hit]:
    """Stable order by kind (entity, relation, community, path), then raw score, then id."""
    return sorted(
        hits,
        key=lambda h: (_KIND_ORDER.get(h.kind, 9), -h.metadata.get("raw_score", h.score), h.id),
    )
