"""Brute-force check: recall@10 against exact numpy search (20k / 2k / 200 clustered 384-d)."""

from __future__ import annotations

import numpy as np
import pytest
from chnsw_testutil import exact_knn, layer_offsets, recall, small_index

K = 10
TARGET = 0.95


@pytest.fixture(scope="module")
def truth(layered_data):
    layers, queries = layered_data
    offs = layer_offsets(layers)
    out = []
    for layer, off in zip(layers, offs, strict=True):
        pos, dist = exact_knn(queries, layer, K)
        out.append((pos + off, dist))
    return out


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_search_recall_every_layer(big_index, layered_data, truth, layer):
    _, queries = layered_data
    ids, dist = big_index.search(queries, K, layer=layer)  # default ef_search
    assert ids.shape == (len(queries), K) and ids.dtype == np.int64
    assert dist.dtype == np.float32
    r = recall(ids, truth[layer][0])
    assert r >= TARGET, f"layer {layer}: recall@10 {r:.3f} < {TARGET}"
    # Distances are the true 1 - cos of the returned ids, sorted ascending.
    assert np.all(np.diff(dist, axis=1) >= -1e-6)


@pytest.mark.parametrize("reuse_entry", [True, False])
def test_search_all_layers_recall(big_index, layered_data, truth, reuse_entry):
    _, queries = layered_data
    per_layer = big_index.search_all_layers(queries, K, reuse_entry=reuse_entry)
    assert len(per_layer) == 3
    for layer, (ids, _dist) in enumerate(per_layer):
        r = recall(ids, truth[layer][0])
        assert r >= TARGET, f"layer {layer}: recall@10 {r:.3f} < {TARGET} (reuse_entry={reuse_entry})"


def test_search_all_layers_matches_search_on_exact_hits(big_index, layered_data, truth):
    _, queries = layered_data
    per_layer = big_index.search_all_layers(queries, [10, 5, 3])
    assert [p[0].shape[1] for p in per_layer] == [10, 5, 3]
    for layer, (ids, dist) in enumerate(per_layer):
        exact_d = truth[layer][1][:, : ids.shape[1]]
        # Wherever the id matches the exact answer, the distance matches numpy (float32 tolerance).
        hit = ids == truth[layer][0][:, : ids.shape[1]]
        assert hit.mean() > 0.9
        np.testing.assert_allclose(dist[hit], exact_d[hit], atol=2e-5)


def test_graph_search_without_scans(big_index, layered_data, truth):
    """With scan_threshold=0 every layer is searched through the graph (the top layer entered at
    its fixed seeded node, spec A11): the same recall targets hold at the default ef_search."""
    _, queries = layered_data
    old = big_index.scan_threshold
    assert old == 1024  # by default the 200-node top layer is scanned exactly
    try:
        big_index.scan_threshold = 0
        for layer in range(3):
            ids, _ = big_index.search(queries, K, layer=layer)
            r = recall(ids, truth[layer][0])
            assert r >= TARGET, f"graph-only layer {layer}: recall@10 {r:.3f}"
        for layer, (ids, _) in enumerate(big_index.search_all_layers(queries, K)):
            r = recall(ids, truth[layer][0])
            assert r >= TARGET, f"graph-only all layers, layer {layer}: recall@10 {r:.3f}"
    finally:
        big_index.scan_threshold = old


def test_scanned_layers_are_exact(big_index, layered_data, truth):
    _, queries = layered_data
    layer = 2  # 200 nodes <= default scan_threshold (1024); layer 1 (2000) uses the graph
    for ids, dist in (big_index.search(queries, K, layer=layer, ef_search=1),
                      big_index.search_all_layers(queries, K, ef_search=1)[layer]):
        assert recall(ids, truth[layer][0]) >= 0.999
        np.testing.assert_allclose(dist, truth[layer][1], atol=2e-5)


@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
def test_metrics_against_numpy(metric):
    index, layers = small_index(n0=1500, n1=150, dim=32, metric=metric, ef_construction=100)
    rng = np.random.default_rng(11)
    queries = rng.normal(size=(50, 32)).astype(np.float32)
    offs = layer_offsets(layers)
    for layer in range(2):
        pos, exact_d = exact_knn(queries, layers[layer], K, metric)
        ids, dist = index.search(queries, K, layer=layer, ef_search=200)
        assert recall(ids, pos + offs[layer]) >= 0.98
        hit = ids == pos + offs[layer]
        np.testing.assert_allclose(dist[hit], exact_d[hit], rtol=1e-4, atol=1e-4)
