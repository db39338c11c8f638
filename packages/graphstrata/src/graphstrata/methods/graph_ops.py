"""Reusable graph operators: personalised PageRank, Steiner tree, MCMI expansion, path text.

These are method-independent building blocks (AGRAG uses all of them; HippoRAG-style PPR and
subgraph selection are useful to any method):

* :func:`transition_matrix` / :func:`personalized_pagerank` — weighted, undirected PPR by sparse
  power iteration (scipy), dangling mass returned to the reset vector (the same fixed point as
  ``networkx.pagerank(G, alpha=d, personalization=p, dangling=p)``).
* :func:`steiner_tree` — Mehlhorn's 2-approximation (networkx ``method="mehlhorn"``, weighted
  distances since networkx 3.5 / PR #8052) with the degenerate cases handled: no terminal,
  one terminal, terminals missing from the graph, terminals in different components.
* :func:`mcmi_expand` — AGRAG's greedy score-to-cost expansion of a Steiner tree (spec
  seed-agrag.md §2.7), returning the *induced* subgraph, in the paper rule (``mode="paper"``)
  or the authors' released-code rule (``mode="agrag_code_2025"``).
* :func:`render_paths` — AGRAG's graph string: one ``"(s [SEP] p [SEP] o) [SEP_REC] …"`` string
  per connected component (spec §2.9), in a deterministic order.
* :func:`add_second_hop` — second-hop chunk evidence seeded from the best hybrid chunks (the
  entity one-hop expansion LightRAG and HiRAG add to their chunk scores).

All functions are deterministic: ties are broken by node id (nodes must be mutually orderable,
e.g. all ints or all strs).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp

from ..structures.push import Transition, transition_matrix
from .base import bridge_evidence, rank

SEP = " [SEP] "
SEP_REC = " [SEP_REC] "
MIN_COST = 1e-6

# -- personalised PageRank -------------------------------------------------------------------


def personalized_pagerank(
    walk: Transition | sp.spmatrix,
    reset: np.ndarray,
    damping: float = 0.5,
    tol: float = 1e-7,
    max_iter: int = 200,
) -> np.ndarray:
    """Personalised PageRank by power iteration (spec seed-agrag.md §2.4, decision §6.2 #5).

    ``s ← (1 − d)·p + d·(W s + (Σ_{dangling} s)·p)`` with ``W = A D⁻¹`` (weighted,
    undirected, no "1/|V| for non-edges" smoothing) until the L1 change is below ``tol``.

    Args:
        walk: a :class:`Transition` or a symmetric adjacency (converted on each call).
        reset: non-negative reset (personalisation) weights, one per node; normalised here.
            All zeros → uniform reset (plain PageRank).
        damping: probability ``d`` of following an edge (AGRAG and HippoRAG 2: 0.5).
        tol: L1 convergence tolerance (AGRAG: 1e-7).
        max_iter: iteration cap (d = 0.5 converges in ~25 iterations at 1e-7).

    Returns:
        float64 scores, one per node, summing to 1.

    Raises:
        ValueError: shapes disagree, negative reset weights, damping outside [0, 1).
    """
    if not isinstance(walk, Transition):
        walk = transition_matrix(walk)
    n = walk.matrix.shape[0]
    p = np.asarray(reset, dtype=np.float64).ravel()
    if p.shape != (n,):
        raise ValueError(f"reset has {p.size} entries for a graph of {n} nodes")
    if n == 0:
        return p
    if (p < 0).any() or not np.isfinite(p).all():
        raise ValueError("reset weights must be finite and non-negative")
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping}")
    total = p.sum()
    p = p / total if total > 0 else np.full(n, 1.0 / n)
    s = p.copy()
    has_dangling = bool(walk.dangling.any())
    for _ in range(int(max_iter)):
        nxt = walk.matrix @ s
        if has_dangling:
            nxt += s[walk.dangling].sum() * p
        nxt = (1.0 - damping) * p + damping * nxt
        delta = np.abs(nxt - s).sum()
        s = nxt
        if delta < tol:
            break
    return s


# -- sparse look-ups ---------------------------------------------------------------------------


def csr_find(matrix: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Where entries ``(rows[i], cols[i])`` are stored in a CSR matrix, by binary search within
    each row: the work is ``len(rows) · log(longest row)``, never the matrix's size (a query
    reading the edges among a few hundred nodes of a graph with millions).

    Args:
        matrix: CSR with sorted column indices within each row (``has_sorted_indices``).
        rows, cols: int arrays of the same length, ``0 ≤ rows < n_rows``.

    Returns:
        int64 ``(len(rows),)``: the position of each entry in ``matrix.indices`` /
        ``matrix.data``, ``-1`` where the matrix stores none.

    Raises:
        ValueError: unsorted indices, lengths that differ, or a row out of range.
    """
    rows = np.asarray(rows, np.int64).ravel()
    cols = np.asarray(cols, np.int64).ravel()
    if rows.shape != cols.shape:
        raise ValueError(f"rows and cols differ in length: {rows.size} vs {cols.size}")
    if not matrix.has_sorted_indices:
        raise ValueError("csr_find needs a CSR matrix with sorted indices (call sort_indices())")
    if not len(rows):
        return np.zeros(0, np.int64)
    if rows.min() < 0 or rows.max() >= matrix.shape[0]:
        raise ValueError(f"row out of range [0, {matrix.shape[0]})")
    indptr, indices = matrix.indptr, matrix.indices
    lo = indptr[rows].astype(np.int64)
    end = indptr[rows + 1].astype(np.int64)
    hi = end.copy()
    while True:  # lower bound of cols[i] in indices[lo:hi], all rows at once
        live = lo < hi
        if not live.any():
            break
        mid = (lo + hi) // 2
        go_right = live & (indices[np.minimum(mid, len(indices) - 1)] < cols)
        lo = np.where(go_right, mid + 1, lo)
        hi = np.where(live & ~go_right, mid, hi)
    found = lo < end
    found[found] = indices[lo[found]] == cols[found]
    return np.where(found, lo, -1)


# -- Steiner tree ------------------------------------------------------------------------------


def steiner_tree(
    graph: nx.Graph, terminals: Iterable[Hashable], weight: str = "cost"
) -> nx.Graph:
    """Minimum-cost Steiner tree, Mehlhorn's 2-approximation (spec §2.7 "MCST", §6.1 #7).

    Args:
        graph: undirected graph; ``weight`` is the edge cost attribute (≥ 0).
        terminals: nodes to connect; those not in ``graph`` are dropped.
        weight: edge attribute holding the cost.

    Returns:
        A tree (subgraph view copied into a new ``nx.Graph``, with the edge data). No terminal →
        empty graph; one terminal → that single node. Terminals in different components get one
        tree per component (a forest) rather than an error.
    """
    terms = sorted({t for t in terminals if t in graph})
    out = nx.Graph()
    if not terms:
        return out
    if len(terms) == 1:
        out.add_node(terms[0])
        return out
    from networkx.algorithms.approximation import steiner_tree as _nx_steiner

    # networkx's Mehlhorn raises KeyError on a disconnected graph: solve per component
    groups: list[tuple[list[Hashable], nx.Graph]] = []
    if nx.is_connected(graph):
        groups.append((terms, graph))
    else:
        done: set[Hashable] = set()
        for t in terms:
            if t in done:
                continue
            comp = nx.node_connected_component(graph, t)
            members = [x for x in terms if x in comp]
            done.update(members)
            groups.append((members, graph.subgraph(comp)))
    for members, part in groups:
        if len(members) == 1:
            out.add_node(members[0])
            continue
        tree = _nx_steiner(part, members, weight=weight, method="mehlhorn")
        out.add_nodes_from(tree.nodes)
        out.add_edges_from((u, v, graph.edges[u, v]) for u, v in tree.edges)
    return out


# -- MCMI greedy expansion ---------------------------------------------------------------------

MCMI_MODES = ("paper", "agrag_code_2025")


def _rbar(edges: Iterable[tuple], scores: Mapping, cost: Callable, mode: str) -> float:
    vals = []
    for u, v in edges:
        c = max(cost(u, v), MIN_COST)
        pair = (scores.get(u, 0.0) + scores.get(v, 0.0)) / 2.0
        vals.append(pair / c if mode == "paper" else pair * c)
    return float(np.mean(vals)) if vals else 0.0


@dataclass
class MCMIResult:
    """Output of :func:`mcmi_expand`.

    Attributes:
        subgraph: the induced subgraph on the selected nodes (edge data copied).
        tree: the Steiner tree it started from.
        added: nodes added by the expansion, in order.
        rbar: the final r̄ threshold.
    """

    subgraph: nx.Graph
    tree: nx.Graph
    added: list[Hashable]
    rbar: float


def mcmi_expand(
    graph: nx.Graph,
    scores: Mapping[Hashable, float],
    terminals: Iterable[Hashable],
    weight: str = "cost",
    mode: str = "paper",
    max_expansion: int | None = 20,
    exclude: Iterable[Hashable] = (),
    tree: nx.Graph | None = None,
) -> MCMIResult:
    """AGRAG's MCMI subgraph: Steiner tree + greedy score-to-cost expansion (spec §2.7).

    Starting from the Steiner tree over ``terminals`` (or ``tree`` when given), repeatedly take
    the frontier node ``v*`` maximising ``s_v / min_{u ∈ V_M} c(u, v)`` (ties: higher ``s_v``,
    lower cost, lower node id) while its ratio beats ``r̄``; the result is the **induced**
    subgraph on the selected nodes (which is where the paper's cycles come from, §2.7).

    Rules by ``mode`` (spec §6.2 #8–#11):

    * ``"paper"``: ``r̄ = mean over current edges of (s_u + s_v) / (2 c_uv)``, recomputed after
      every addition over the induced edges; stop when the best ratio ``≤ r̄`` (Eq. 15).
    * ``"agrag_code_2025"``: ``r̄ = mean over Steiner-tree edges of (s_u + s_v)/2 · c_uv`` (the
      released code's product), frozen; stop when the best ratio ``< r̄``.

    This is a heuristic: only the Steiner step has a guarantee (2 − 2/ℓ); the expansion has
    none (spec §2.6).

    Args:
        graph: undirected graph with edge costs in ``weight`` (clamped at 1e-6).
        scores: node influence ``s_v`` (e.g. PPR); missing nodes score 0.
        terminals: the anchor nodes; those absent from ``graph`` are dropped.
        weight: edge cost attribute.
        mode: ``"paper"`` or ``"agrag_code_2025"``.
        max_expansion: most nodes added (``None``: unbounded; AGRAG code: 20).
        exclude: nodes never added by the expansion (e.g. a pseudo connector node).
        tree: a precomputed Steiner tree (its nodes must be in ``graph``).

    Returns:
        An :class:`MCMIResult`.

    Raises:
        ValueError: unknown ``mode`` or negative ``max_expansion``.
    """
    if mode not in MCMI_MODES:
        raise ValueError(f"mode must be one of {MCMI_MODES}, got {mode!r}")
    if max_expansion is not None and max_expansion < 0:
        raise ValueError(f"max_expansion must be >= 0 or None, got {max_expansion}")
    if tree is None:
        tree = steiner_tree(graph, terminals, weight=weight)
    banned = set(exclude)

    def cost(u, v) -> float:
        return float(graph.edges[u, v].get(weight, 0.0))

    selected = set(tree.nodes)
    edges = {tuple(sorted(e)) for e in tree.edges}
    rbar = _rbar(edges, scores, cost, mode)
    added: list[Hashable] = []
    while selected and (max_expansion is None or len(added) < max_expansion):
        best = _best_frontier(graph, selected, banned, scores, cost)
        if best is None:
            break
        ratio = -best[0][0]
        if (mode == "paper" and ratio <= rbar) or (mode != "paper" and ratio < rbar):
            break
        v = best[1]
        selected.add(v)
        added.append(v)
        if mode == "paper":
            edges |= {tuple(sorted((u, v))) for u in best[2]}
            rbar = _rbar(edges, scores, cost, mode)
    sub = nx.Graph()
    sub.add_nodes_from(sorted(selected))
    sub.add_edges_from(
        (u, v, graph.edges[u, v]) for u, v in graph.subgraph(selected).edges
    )
    return MCMIResult(sub, tree, added, rbar)


def _best_frontier(graph: nx.Graph, selected: set, banned: set, scores: Mapping, cost: Callable):
    """The frontier node of :func:`mcmi_expand`'s next step: ``(key, v, its neighbours in the
    subgraph)`` with ``key = (−s_v / c, −s_v, c, v)`` smallest (``c`` its cheapest edge into the
    subgraph, at least :data:`MIN_COST`), or ``None`` when the frontier is empty."""
    best = None  # (key, v, edges to the subgraph)
    for v in {w for u in selected for w in graph.adj[u]} - selected - banned:
        links = [u for u in graph.adj[v] if u in selected]
        c = max(min(cost(u, v) for u in links), MIN_COST)
        s = float(scores.get(v, 0.0))
        key = (-(s / c), -s, c, v)
        if best is None or key < best[0]:
            best = (key, v, links)
    return best


# -- path rendering ----------------------------------------------------------------------------


@dataclass
class PathText:
    """One connected component of a subgraph, rendered.

    Attributes:
        text: ``"(s [SEP] p [SEP] o) [SEP_REC] …"``.
        triples: the ``(s, p, o)`` triples in rendering order.
        edges: the graph edges rendered, as ``(u, v)``, in the same order (one edge may
            render several parallel triples).
        nodes: the component's nodes (passage nodes included), best score first.
        score: the component's best node score.
    """

    text: str
    triples: list[tuple[str, str, str]]
    edges: list[tuple[Hashable, Hashable]]
    nodes: list[Hashable]
    score: float


def render_paths(
    subgraph: nx.Graph,
    triples_of: Callable[[Hashable, Hashable], Sequence[tuple[str, str, str]]],
    is_passage: Callable[[Hashable], bool] = lambda node: False,
    scores: Mapping[Hashable, float] | None = None,
    weight: str = "cost",
) -> tuple[list[PathText], list[Hashable]]:
    """AGRAG graph string S_G (spec §2.9): one string per component with ≥ 2 nodes.

    Edges touching a passage node are not rendered; the passage goes to the returned passage
    list instead. Every other edge renders the triples ``triples_of(u, v)`` gives (all parallel
    facts of a pair, spec §6.2 #17). Order (decision §2.9 [D]): components by best node score,
    edges within a component by ``(−max(s_u, s_v), cost, ids)``; passages by score.

    Args:
        subgraph: the (induced MCMI) subgraph.
        triples_of: ``(u, v) → [(s, p, o), ...]`` for a non-passage edge (may be empty).
        is_passage: whether a node is a passage (chunk) node.
        scores: node scores for ordering (default: all 0, so ids decide).
        weight: the edge cost attribute used as the secondary order key.

    Returns:
        ``(paths, passages)``: components that rendered at least one triple, and the distinct
        passage nodes of the subgraph's edges, best score first (ties: id).
    """
    sc = scores or {}
    paths: list[PathText] = []
    passages: set[Hashable] = set()
    for comp in nx.connected_components(subgraph):
        if len(comp) < 2:
            continue
        nodes = sorted(comp, key=lambda n: (-float(sc.get(n, 0.0)), n))
        ordered = []
        for u, v, data in subgraph.subgraph(comp).edges(data=True):
            pu, pv = is_passage(u), is_passage(v)
            if pu or pv:
                passages.update(x for x, p in ((u, pu), (v, pv)) if p)
                continue
            a, b = (u, v) if u <= v else (v, u)
            best = max(float(sc.get(a, 0.0)), float(sc.get(b, 0.0)))
            key = (-best, float(data.get(weight, 0.0)), a, b)
            ordered.append((key, a, b))
        ordered.sort()
        triples, edges = [], []
        for _, a, b in ordered:
            for t in triples_of(a, b):
                triples.append(tuple(t))
                edges.append((a, b))
        if triples:
            text = SEP_REC.join(f"({s}{SEP}{p}{SEP}{o})" for s, p, o in triples)
            paths.append(PathText(text, triples, edges, nodes, float(sc.get(nodes[0], 0.0))))
    paths.sort(key=lambda p: (-p.score, p.nodes[0]))
    return paths, sorted(passages, key=lambda n: (-float(sc.get(n, 0.0)), n))


# -- second-hop chunk evidence ----------------------------------------------------------------
def add_second_hop(state, scores: dict[int, float], base: dict[int, float], o: Mapping[str, Any]) -> dict[int, float]:
    """Add ``second_hop_weight`` × normalised :func:`~.base.bridge_evidence` seeded from the
    top ``second_hop_seeds`` chunks of ``base`` (in place): the entity one-hop expansion run
    from the best source chunk, as ArchRAG's chunk ranking does (LightRAG and HiRAG share it).

    Args:
        state: the index state.
        scores: ``{chunk_row: score}``, added to in place.
        base: ``{chunk_row: hybrid score}`` the seeds are taken from.
        o: the method's options: ``second_hop_weight`` (0 adds nothing),
            ``second_hop_seeds``, ``second_hop_max_df``.

    Returns:
        ``{chunk_row: the amount added}`` (empty when nothing was)."""
    w = float(o["second_hop_weight"])
    if w <= 0 or not base:
        return {}
    seeds = rank(base, int(o["second_hop_seeds"]))
    ev = bridge_evidence(state, seeds, int(o["second_hop_max_df"]))
    added = {}
    if ev:
        top = max(ev.values())
        for r, v in ev.items():
            added[r] = w * v / top
            scores[r] = scores.get(r, 0.0) + added[r]
    return added
