"""Walk graphs and local personalised PageRank: forward push, whose work is bounded by the seeds
and the tolerance, not by the size of the graph (issue 33).

The walks a method builds at index time live here (:class:`Transition`, the column-stochastic
operator of exact PageRank; :class:`PushGraph`, the forward-push graph); the query-time exact
iteration is :func:`~graphstrata.methods.graph_ops.personalized_pagerank`, which iterates
over every node until the whole vector converges: a query then costs O(edges × iterations),
60 ms at 44k chunks and more than a second at a million. Forward push (Andersen, Chung and Lang 2006, "Local graph partitioning
using PageRank vectors") keeps an estimate and a residual per touched node and only pushes nodes
whose residual is at least ``epsilon × out-degree``: at most ``1 / ((1 − damping) · epsilon)``
pushes per query, whatever the graph's size, and the residual left is an upper bound on the L1
error of the estimate. The push runs in the native module (``graphstrata_chnsw.ppr_push``, GIL
released); this module builds its graph arrays and wraps the call.

A :class:`PushGraph` is a CSR out-adjacency with step probabilities. It holds either an ordinary
weighted graph (:func:`push_graph`, the same walk as a :class:`Transition`) or a
bipartite one whose second side are *relay* nodes (:func:`bipartite_push_graph`): a walk
through a relay moves on at once, so item → relay → item is one damped step, the two-hop
chunk → entity → chunk walk of :mod:`.passages` without materialising the item × item
matrix (whose size grows with the square of an entity's chunk count).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from graphstrata_chnsw import ppr_push

#: default push tolerance: a node is pushed while its residual ≥ ``epsilon × out-degree``.
#: Chosen on the dev questions (README "Scale"): recall@5 equal to the exact PageRank's.
DEFAULT_EPSILON = 1e-5
#: default cap on pushes per query (never reached with the default epsilon and damping 0.5:
#: the bound is ``1 / ((1 − d) · epsilon)`` units of out-degree)
DEFAULT_MAX_PUSHES = 2_000_000


@dataclass
class Transition:
    """A column-stochastic walk operator for
    :func:`~graphstrata.methods.graph_ops.personalized_pagerank`.

    Attributes:
        matrix: CSR ``A · D⁻¹`` of a symmetric weighted adjacency ``A`` (column ``u`` holds the
            probabilities of stepping from ``u`` to each neighbour).
        dangling: boolean mask of nodes with no (positive-weight) edge.
    """

    matrix: sp.csr_matrix
    dangling: np.ndarray


def transition_matrix(adjacency: sp.spmatrix) -> Transition:
    """Build the walk operator of a symmetric, non-negative weighted adjacency matrix.

    Args:
        adjacency: ``(n, n)`` sparse, symmetric, weights ≥ 0 (``A[u, v]`` = edge weight).

    Returns:
        A :class:`Transition` (compute once per graph, reuse for every query).
    """
    a = sp.csr_matrix(adjacency, dtype=np.float64)
    a.eliminate_zeros()  # zero-weight edge types cost nothing per iteration
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"adjacency must be square, got {a.shape}")
    if a.nnz and a.data.min() < 0:
        raise ValueError("adjacency weights must be non-negative")
    deg = np.asarray(a.sum(axis=0)).ravel()
    dangling = deg <= 0
    inv = np.zeros_like(deg)
    inv[~dangling] = 1.0 / deg[~dangling]
    return Transition((a @ sp.diags(inv)).tocsr(), dangling)


@dataclass(frozen=True)
class PushGraph:
    """A walk as CSR out-adjacency (what :func:`local_pagerank` pushes on).

    Attributes:
        indptr: int64 ``(n_nodes + 1,)`` offsets.
        indices: int32 ``(nnz,)`` target nodes.
        probs: float32 ``(nnz,)`` step probabilities; each node's sum to 1 (or it has none: a
            dangling node's walk restarts at the seeds).
        relay: uint8 ``(n_nodes,)`` flags of relay nodes, or ``None`` (no relay).
        n_items: nodes ``[0, n_items)`` are the items that hold mass; relays come after them.
    """

    indptr: np.ndarray
    indices: np.ndarray
    probs: np.ndarray
    relay: np.ndarray | None
    n_items: int

    @property
    def n_nodes(self) -> int:
        """Items and relays."""
        return len(self.indptr) - 1

    @property
    def nbytes(self) -> int:
        """Memory of the arrays, in bytes."""
        relay = 0 if self.relay is None else self.relay.nbytes
        return int(self.indptr.nbytes + self.indices.nbytes + self.probs.nbytes + relay)

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays by name (for persisting: :meth:`from_arrays` reads them back)."""
        out = {"indptr": self.indptr, "indices": self.indices, "probs": self.probs,
               "n_items": np.asarray([self.n_items], np.int64)}
        if self.relay is not None:
            out["relay"] = self.relay
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> PushGraph:
        """The graph :meth:`arrays` wrote.

        Raises:
            ValueError: missing arrays or inconsistent lengths.
        """
        try:
            indptr = np.ascontiguousarray(arrays["indptr"], np.int64)
            indices = np.ascontiguousarray(arrays["indices"], np.int32)
            probs = np.ascontiguousarray(arrays["probs"], np.float32)
            n_items = int(np.asarray(arrays["n_items"]).ravel()[0])
        except KeyError as exc:
            raise ValueError(f"push graph: missing array {exc}") from None
        relay = arrays.get("relay")
        if relay is not None:
            relay = np.ascontiguousarray(relay, np.uint8)
        n = len(indptr) - 1
        if n < 0 or len(indices) != len(probs) or (n >= 0 and indptr[-1] != len(indices)):
            raise ValueError("push graph: inconsistent arrays")
        if relay is not None and len(relay) != n:
            raise ValueError("push graph: relay flags do not match the nodes")
        return cls(indptr, indices, probs, relay, n_items)


def _csr_arrays(m: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = sp.csr_matrix(m)
    m.sort_indices()
    return (np.ascontiguousarray(m.indptr, np.int64), np.ascontiguousarray(m.indices, np.int32),
            np.ascontiguousarray(m.data, np.float32))


def push_graph(walk: Transition) -> PushGraph:
    """The :class:`PushGraph` of a column-stochastic :class:`Transition` (column
    ``u`` of ``walk.matrix`` holds the step probabilities out of ``u``): the same walk."""
    indptr, indices, probs = _csr_arrays(walk.matrix.T.tocsr())
    return PushGraph(indptr, indices, probs, None, walk.matrix.shape[0])


def bipartite_push_graph(incidence: sp.spmatrix) -> PushGraph:
    """The two-hop walk item → node → item of a weighted incidence, as items + relay nodes.

    From item ``u`` the walk steps to node ``j`` with probability ``B[u, j] / Σ_j B[u, j]``,
    then at once to item ``v`` with probability ``B[v, j] / Σ_v B[v, j]`` — the row-stochastic
    chunk → chunk matrix :func:`~graphstrata.structures.passages.build_passage_graph` used to
    materialise, kept factorised. Items with no node are dangling (their walk restarts).

    Args:
        incidence: ``B``, ``(n_items, n_nodes)``, weights ≥ 0.

    Returns:
        A :class:`PushGraph` over ``n_items + n_nodes`` nodes; relays are ``n_items …``.

    Raises:
        ValueError: a negative weight.
    """
    b = sp.csr_matrix(incidence, dtype=np.float64)
    b.eliminate_zeros()
    if b.nnz and b.data.min() < 0:
        raise ValueError("incidence weights must be non-negative")
    n, m = b.shape
    out_w = np.asarray(b.sum(axis=1)).ravel()
    in_w = np.asarray(b.sum(axis=0)).ravel()
    to_node = sp.diags(1.0 / np.maximum(out_w, 1e-300)) @ b  # item rows, node columns
    to_item = (b @ sp.diags(1.0 / np.maximum(in_w, 1e-300))).T.tocsr()  # node rows, item columns
    upper = sp.hstack([sp.csr_matrix((n, n)), to_node], format="csr")
    lower = sp.hstack([to_item, sp.csr_matrix((m, m))], format="csr")
    indptr, indices, probs = _csr_arrays(sp.vstack([upper, lower], format="csr"))
    relay = np.zeros(n + m, np.uint8)
    relay[n:] = 1
    return PushGraph(indptr, indices, probs, relay, n)


@dataclass
class LocalRank:
    """What :func:`local_pagerank` returns.

    Attributes:
        nodes: int64 item rows with mass, ascending.
        mass: float64 their estimated PageRank mass (≤ 1 in total).
        residual: the residual left: an upper bound on the L1 error of ``mass``.
        pushes: nodes pushed (the work done).
    """

    nodes: np.ndarray
    mass: np.ndarray
    residual: float
    pushes: int

    def dense(self, n: int) -> np.ndarray:
        """float64 ``(n,)`` with the mass at ``nodes`` (zeros elsewhere)."""
        out = np.zeros(n, np.float64)
        out[self.nodes] = self.mass
        return out


def local_pagerank(
    graph: PushGraph,
    seeds: Iterable[int] | np.ndarray,
    weights: Iterable[float] | np.ndarray,
    damping: float = 0.5,
    epsilon: float = DEFAULT_EPSILON,
    max_pushes: int = DEFAULT_MAX_PUSHES,
) -> LocalRank:
    """Personalised PageRank of the seeds by forward push (module docstring).

    The walk is :func:`~graphstrata.methods.graph_ops.personalized_pagerank`'s (``s = (1 − d)·p + d·(W s + dangling
    mass · p)``, ``p`` the normalised seed weights); the estimate differs from its fixed point by
    at most ``residual`` in L1 (plus the float32 rounding of the step probabilities, ~1e-7).

    Args:
        graph: the walk.
        seeds: node ids (items; duplicates add up).
        weights: reset weights ≥ 0, one per seed (normalised here; all zero → nothing ranked).
        damping: probability of taking a step rather than restarting, in [0, 1).
        epsilon: push tolerance (> 0); smaller is more exact and more work.
        max_pushes: hard cap on pushes.

    Returns:
        A :class:`LocalRank` over the items only (relay nodes hold no mass).

    Raises:
        ValueError: damping outside [0, 1), epsilon ≤ 0, a seed that is not a node, a negative
            or non-finite weight.
    """
    seeds = np.ascontiguousarray(np.fromiter(seeds, np.int64) if not isinstance(seeds, np.ndarray) else seeds,
                                 np.int64)
    weights = np.ascontiguousarray(
        np.fromiter(weights, np.float64) if not isinstance(weights, np.ndarray) else weights, np.float64
    )
    nodes, mass, residual, pushes, _ = ppr_push(
        graph.indptr, graph.indices, graph.probs, seeds, weights, float(damping), float(epsilon),
        int(max_pushes), graph.relay,
    )
    keep = nodes < graph.n_items
    return LocalRank(nodes[keep], mass[keep], float(residual), int(pushes))
