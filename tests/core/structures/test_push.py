"""Forward-push personalised PageRank (issue 33) against exact power iteration on random
graphs: the error never exceeds the residual it reports, the work is bounded by the tolerance,
the bipartite relay walk is the two-hop walk, and bad input is one clear error."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from graphstrata.methods.graph_ops import personalized_pagerank
from graphstrata.structures.push import Transition, transition_matrix
from graphstrata.structures.push import PushGraph, bipartite_push_graph, local_pagerank, push_graph


def _random_graph(n: int, density: float, seed: int, isolated: float = 0.05) -> sp.csr_matrix:
    """Symmetric random weights with a share of isolated (dangling) nodes."""
    a = sp.random(n, n, density=density, random_state=seed, format="csr")
    a = (a + a.T).tolil()
    a.setdiag(0)
    for u in np.random.default_rng(seed).choice(n, size=int(n * isolated), replace=False):
        a[u, :] = 0
        a[:, u] = 0
    a = a.tocsr()
    a.eliminate_zeros()
    return a


def _exact(walk: Transition, seeds: np.ndarray, weights: np.ndarray, damping: float) -> np.ndarray:
    reset = np.zeros(walk.matrix.shape[0])
    np.add.at(reset, seeds, weights)
    return personalized_pagerank(walk, reset, damping, tol=1e-14, max_iter=5000)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_push_error_is_bounded_by_its_residual(seed: int, damping: float) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 600))
    walk = transition_matrix(_random_graph(n, float(rng.uniform(0.002, 0.05)), seed))
    assert walk.dangling.any()
    seeds = rng.choice(n, size=int(rng.integers(1, 8)), replace=False)
    weights = rng.random(len(seeds)) + 0.01
    exact = _exact(walk, seeds, weights, damping)
    graph = push_graph(walk)
    previous = np.inf
    for eps in (1e-3, 1e-5, 1e-7):
        got = local_pagerank(graph, seeds, weights, damping, eps)
        x = got.dense(n)
        err = float(np.abs(x - exact).sum())
        assert err <= got.residual + 1e-6, (eps, err, got.residual)  # float32 step probabilities
        assert got.residual <= previous + 1e-12
        previous = got.residual
        # each push moves at least (1 - d)·eps of mass into the estimate
        assert got.pushes <= 1.0 / ((1.0 - damping) * eps) + 1
        assert (x >= 0).all() and x.sum() <= 1.0 + 1e-9
    assert previous < 1e-3


def test_push_ranks_like_exact_pagerank_at_the_default_tolerance() -> None:
    walk = transition_matrix(_random_graph(3000, 0.002, 11))
    rng = np.random.default_rng(3)
    for _ in range(5):
        seeds = rng.choice(3000, size=10, replace=False)
        weights = rng.random(10) ** 6
        exact = _exact(walk, seeds, weights, 0.5)
        got = local_pagerank(push_graph(walk), seeds, weights, 0.5).dense(3000)
        top = np.argsort(-exact, kind="stable")[:5]
        assert set(np.argsort(-got, kind="stable")[:5]) == set(top)


def test_relay_graph_is_the_two_hop_walk() -> None:
    rng = np.random.default_rng(5)
    n_items, n_nodes = 400, 150
    incidence = sp.random(n_items, n_nodes, density=0.02, random_state=7, format="csr")
    incidence.data = rng.random(incidence.nnz) + 0.1
    graph = bipartite_push_graph(incidence)
    assert graph.n_items == n_items and graph.n_nodes == n_items + n_nodes
    # the same walk, materialised item × item (what propagation built before)
    out_w = np.asarray(incidence.sum(axis=1)).ravel()
    in_w = np.asarray(incidence.sum(axis=0)).ravel()
    to_node = sp.diags(np.where(out_w > 0, 1.0 / np.maximum(out_w, 1e-300), 0.0)) @ incidence
    to_item = sp.diags(1.0 / np.maximum(in_w, 1e-300)) @ incidence.T
    walk = Transition((to_node @ to_item).T.tocsr(), out_w <= 0)
    seeds = rng.choice(n_items, size=5, replace=False)
    weights = rng.random(5)
    exact = _exact(walk, seeds, weights, 0.5)
    got = local_pagerank(graph, seeds, weights, 0.5, 1e-8)
    assert (got.nodes < n_items).all()
    assert np.abs(got.dense(n_items) - exact).sum() <= got.residual + 1e-6
    assert got.residual < 1e-4


def test_work_does_not_grow_with_the_graph() -> None:
    """The same local neighbourhood inside a graph 20× larger costs the same pushes."""
    small = _random_graph(1000, 0.004, 1)
    other = _random_graph(1000, 0.004, 2)
    big = sp.block_diag([small] + [other] * 19, format="csr")
    seeds, weights = np.array([3, 17, 99]), np.array([1.0, 0.5, 0.25])
    a = local_pagerank(push_graph(transition_matrix(small)), seeds, weights)
    b = local_pagerank(push_graph(transition_matrix(big)), seeds, weights)
    assert a.pushes == b.pushes and np.allclose(a.mass, b.mass)


def test_no_seed_weight_ranks_nothing_and_bad_input_is_one_clear_error() -> None:
    graph = push_graph(transition_matrix(_random_graph(50, 0.1, 2)))
    assert len(local_pagerank(graph, [1], [0.0]).nodes) == 0
    with pytest.raises(ValueError, match="seed 50 is not a node"):
        local_pagerank(graph, [50], [1.0])
    with pytest.raises(ValueError, match="weights must be finite"):
        local_pagerank(graph, [1], [float("nan")])
    with pytest.raises(ValueError, match="damping"):
        local_pagerank(graph, [1], [1.0], damping=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        local_pagerank(graph, [1], [1.0], epsilon=0.0)
    broken = PushGraph(graph.indptr, np.full_like(graph.indices, 10_000), graph.probs, None, graph.n_items)
    with pytest.raises(ValueError, match="malformed graph"):
        local_pagerank(broken, [1], [1.0])
    with pytest.raises(ValueError, match="inconsistent"):
        PushGraph.from_arrays({**graph.arrays(), "indices": graph.indices[:-1], "probs": graph.probs[:-1]})
    again = PushGraph.from_arrays(graph.arrays())
    assert np.array_equal(again.indices, graph.indices) and again.n_items == graph.n_items
