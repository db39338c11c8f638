"""graphstrata_chnsw.shortest_path: networkx's bidirectional BFS path, node for node, with a
visit budget, bad input as clear errors, and no shared state between threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import networkx as nx
import numpy as np
import pytest
from graphstrata_chnsw import shortest_path


def _random_graph(rng: np.random.Generator, n: int, m: int, hubs: int = 0) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(n))
    for _ in range(m):
        u, v = rng.integers(0, n, 2)
        g.add_edge(int(u), int(v))
    for h in range(hubs):  # a few high-degree nodes, as the HiRAG graph has
        for v in rng.choice(n, size=n // 3, replace=False).tolist():
            g.add_edge(h, int(v))
    return g


def _csr(g: nx.Graph, dtype=np.int32) -> tuple[np.ndarray, np.ndarray]:
    nbrs = [list(g[v]) for v in range(g.number_of_nodes())]  # networkx's iteration order
    indptr = np.zeros(len(nbrs) + 1, np.int64)
    indptr[1:] = np.cumsum([len(x) for x in nbrs])
    return indptr, np.asarray([w for x in nbrs for w in x], dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_paths_are_networkx_paths_node_for_node(dtype) -> None:
    rng = np.random.default_rng(7)
    for trial in range(200):
        n = int(rng.integers(2, 80))
        g = _random_graph(rng, n, int(rng.integers(0, 3 * n)), hubs=int(trial % 3 == 0))
        indptr, indices = _csr(g, dtype)
        for _ in range(6):
            a, b = (int(x) for x in rng.integers(0, n, 2))
            try:
                want = nx.bidirectional_shortest_path(g, a, b)
            except nx.NetworkXNoPath:
                want = None
            path, visits, exhausted = shortest_path(indptr, indices, a, b)
            assert (None if path is None else path.tolist()) == want, (trial, a, b)
            assert not exhausted and 0 <= visits <= len(indices)


def test_the_scan_stops_at_the_meeting_neighbour() -> None:
    """0 - hub - 1: expanding the hub meets node 1 at its second neighbour entry, and the
    search does not read the hub's other 2,000 (a whole-level scan would)."""
    g = nx.Graph()
    g.add_edges_from([(0, 2), (2, 1)])
    g.add_edges_from((2, v) for v in range(3, 2003))
    indptr, indices = _csr(g)
    path, visits, _ = shortest_path(indptr, indices, 0, 1)
    assert path.tolist() == nx.bidirectional_shortest_path(g, 0, 1) == [0, 2, 1]
    assert visits == 3  # 0's one entry, then the hub's 0 and 1


def test_a_budget_stops_the_search_and_says_so() -> None:
    g = nx.path_graph(50)
    indptr, indices = _csr(g)
    path, visits, exhausted = shortest_path(indptr, indices, 0, 49, max_visits=10)
    assert path is None and exhausted and visits == 10
    path, _, exhausted = shortest_path(indptr, indices, 0, 49, max_visits=1000)
    assert path.tolist() == list(range(50)) and not exhausted
    g.add_node(50)  # disconnected: not found, budget not the reason
    indptr, indices = _csr(g)
    path, _, exhausted = shortest_path(indptr, indices, 0, 50)
    assert path is None and not exhausted
    assert shortest_path(indptr, indices, 7, 7)[0].tolist() == [7]


def test_bad_input_raises_a_clear_error() -> None:
    indptr, indices = _csr(nx.path_graph(4))
    with pytest.raises(ValueError, match="endpoints"):
        shortest_path(indptr, indices, 0, 4)
    with pytest.raises(ValueError, match="endpoints"):
        shortest_path(indptr, indices, -1, 2)
    with pytest.raises(ValueError, match="neighbour index outside"):
        shortest_path(indptr, np.asarray([1, 0, 9, 1, 3, 2], np.int32), 0, 3)
    with pytest.raises(ValueError, match="indptr"):
        shortest_path(np.asarray([0, 2, 1, 5, 6], np.int64), indices, 0, 3)
    with pytest.raises(ValueError, match="indptr does not match"):
        shortest_path(np.asarray([0, 1, 2, 3, 99], np.int64), indices, 0, 3)
    with pytest.raises(TypeError, match="indptr must be"):
        shortest_path(indptr.astype(np.int32), indices, 0, 3)
    with pytest.raises(TypeError, match="indices must be"):
        shortest_path(indptr, indices.astype(np.float64), 0, 3)
    # a search stopped by a malformed graph leaves no marks behind for the next one
    assert shortest_path(indptr, indices, 0, 3)[0].tolist() == [0, 1, 2, 3]
    assert shortest_path(indptr, indices, 3, 0)[0].tolist() == [3, 2, 1, 0]


def test_threads_search_at_once_and_get_their_own_paths() -> None:
    rng = np.random.default_rng(3)
    g = _random_graph(rng, 3000, 6000, hubs=2)
    indptr, indices = _csr(g)
    pairs = [tuple(int(x) for x in rng.integers(0, 3000, 2)) for _ in range(400)]
    want = [shortest_path(indptr, indices, a, b)[0] for a, b in pairs]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda p: shortest_path(indptr, indices, *p)[0], pairs))
    for x, y in zip(want, got, strict=True):
        assert (x is None and y is None) or x.tolist() == y.tolist()
