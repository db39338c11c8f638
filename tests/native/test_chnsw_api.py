"""Public API: shapes, padding, ids, extras, deletion, incremental add, determinism."""

from __future__ import annotations

import pickle

import graphstrata_chnsw
import numpy as np
import pytest
from chnsw_testutil import CHNSW, clustered, exact_knn, layer_offsets, recall, small_index


def test_package_exports():
    assert graphstrata_chnsw.CHNSW is CHNSW
    assert graphstrata_chnsw.__version__ == "0.1.0"
    assert CHNSW.__doc__ and "A11" in CHNSW.__doc__
    for name in ["add_layer", "add", "search", "search_all_layers", "save", "load", "mark_deleted",
                 "is_deleted", "set_num_threads", "down_link", "neighbors", "layer_of", "ids_in_layer",
                 "get_vectors", "to_bytes", "from_bytes"]:
        assert getattr(CHNSW, name).__doc__, name


def test_properties_and_sizes():
    index, layers = small_index()
    assert len(index) == 660
    assert index.num_layers == 2
    assert index.layer_size(0) == 600 and index.layer_size(1) == 60
    assert index.dim == 16 and index.metric == "cosine" and index.M == 8
    assert index.ef_construction == 64
    assert index.ef_search == 64
    index.ef_search = 80
    assert index.ef_search == 80
    index.set_ef_search(90)
    assert index.ef_search == 90
    assert "layers=[600, 60]" in repr(index)
    assert index.scan_threshold == 0  # the helper turns exact scans off
    assert CHNSW(4).scan_threshold == 1024
    index.scan_threshold = 100
    assert index.scan_threshold == 100
    assert 0 in index and 659 in index and 660 not in index


def test_default_and_custom_ids():
    index = CHNSW(8, scan_threshold=0, metric="l2")
    rng = np.random.default_rng(0)
    assert index.add_layer(rng.normal(size=(5, 8))) == 0  # float64 is converted
    assert list(index.ids_in_layer(0)) == [0, 1, 2, 3, 4]
    assert index.add_layer(rng.normal(size=(3, 8)).astype(np.float32), ids=[100, 7, 50]) == 1
    assert list(index.ids_in_layer(1)) == [100, 7, 50]
    index.add(rng.normal(size=(2, 8)).astype(np.float32), 0)  # default ids continue at len(index)
    assert list(index.ids_in_layer(0)) == [0, 1, 2, 3, 4, 8, 9]
    assert index.layer_of(100) == 1 and index.layer_of(9) == 0


def test_shapes_1d_query_and_padding():
    index, layers = small_index()
    q = layers[0][:3]
    ids, dist = index.search(q, 5)
    assert ids.shape == (3, 5) and dist.shape == (3, 5)
    assert ids[0, 0] == 0 and dist[0, 0] == pytest.approx(0.0, abs=1e-5)
    ids1, dist1 = index.search(q[0], 5)  # 1-D query -> 1-D results
    assert ids1.shape == (5,) and dist1.shape == (5,)
    np.testing.assert_array_equal(ids1, ids[0])
    # k larger than the layer: padded with -1 / +inf
    ids, dist = index.search(q, 100, layer=1)
    assert (ids[:, :60] >= 600).all()
    assert (ids[:, 60:] == -1).all() and np.isinf(dist[:, 60:]).all()
    per = index.search_all_layers(q[0], [3, 70])
    assert per[0][0].shape == (3,) and per[1][0].shape == (70,)
    assert (per[1][0][60:] == -1).all()
    # per-layer ef_search list; a larger beam never lowers the result quality here
    a = index.search_all_layers(q, 5, ef_search=[5, 5])
    b = index.search_all_layers(q, 5, ef_search=[200, 200])
    assert a[0][0].shape == b[0][0].shape == (3, 5)
    np.testing.assert_array_equal(b[1][0], index.search(q, 5, layer=1, ef_search=200)[0])
    # empty query batch
    ids, dist = index.search(np.zeros((0, 16), np.float32), 4)
    assert ids.shape == (0, 4)


def test_extras_links_and_vectors():
    index, layers = small_index()
    offs = layer_offsets(layers)
    for node in [0, 17, 599]:
        nb = index.neighbors(node)
        assert 0 < len(nb) <= 2 * index.M
        assert all(index.layer_of(int(x)) == 0 for x in nb)
        assert index.down_link(node) == -1
    for node in index.ids_in_layer(1):
        nb = index.neighbors(int(node))
        assert 0 < len(nb) <= index.M
        assert all(index.layer_of(int(x)) == 1 for x in nb)
    # every upper node's down-link is its exact nearest node of layer 0 here
    exact = exact_knn(layers[1], layers[0], 1)[0][:, 0]
    down = np.array([index.down_link(int(i)) for i in index.ids_in_layer(1)])
    assert (down == exact + offs[0]).mean() >= 0.95
    v = index.get_vectors([0, 600])
    assert v.shape == (2, 16)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(v[0], layers[0][0] / np.linalg.norm(layers[0][0]), rtol=1e-5, atol=1e-6)
    assert index.layer_of(int(index.entry_point(1))) == 1


def test_deleted_ids_never_returned():
    index, layers = small_index()
    deleted = list(range(0, 600, 2)) + [600, 601, 602]
    for i in deleted:
        index.mark_deleted(i)
    index.mark_deleted(0)  # idempotent
    assert index.is_deleted(0) and not index.is_deleted(1)
    assert index.num_deleted == len(deleted)
    dset = set(deleted)
    ids, _ = index.search(layers[0][:50], 10)
    assert not dset & set(ids.ravel().tolist())
    assert (ids != -1).all()
    for ids, _ in index.search_all_layers(layers[1][:20], 10):
        assert not dset & set(ids.ravel().tolist())
    # a deleted node's own vector finds its live neighbours, not itself
    ids, _ = index.search(layers[0][0], 5)
    assert 0 not in ids.tolist()
    index.unmark_deleted(0)
    assert index.search(layers[0][0], 1)[0][0] == 0
    # delete a whole layer: rows are all padding
    for i in index.ids_in_layer(1):
        index.mark_deleted(int(i))
    ids, dist = index.search(layers[0][:4], 5, layer=1)
    assert (ids == -1).all() and np.isinf(dist).all()
    per = index.search_all_layers(layers[0][:4], 5)
    assert (per[1][0] == -1).all() and (per[0][0] != -1).all()


@pytest.mark.parametrize("scan_threshold", [0, 1024])  # graph-only, and exact scans of layer 1
def test_incremental_add_repairs_links(scan_threshold):
    dim = 32
    l0 = clustered(3000, dim, n_clusters=10, seed=21)
    l1 = clustered(300, dim, n_clusters=10, seed=21)  # same centres, fresh points
    index = CHNSW(dim, scan_threshold=scan_threshold, M=12, ef_construction=100)
    index.add_layer(l0[:1500])
    index.add_layer(l1[:150])
    index.add(l0[1500:], 0)          # layer 0 grows: layer-1 down-links must be repaired
    index.add(l1[150:], 1)           # layer 1 grows: new nodes need down-links
    assert index.layer_size(0) == 3000 and index.layer_size(1) == 300
    ids0 = index.ids_in_layer(0)
    ids1 = index.ids_in_layer(1)
    exact = exact_knn(l1, l0, 1)[0][:, 0]
    down = np.array([index.down_link(int(i)) for i in ids1])
    acc = (down == ids0[exact]).mean()
    assert acc >= 0.95, f"only {acc:.3f} of down-links point to the exact nearest lower node"
    # every node is reachable: searching its own vector finds it
    for layer, x, ids in [(0, l0, ids0), (1, l1, ids1)]:
        found, _ = index.search(x, 1, layer=layer)
        assert (found[:, 0] == ids).mean() >= 0.99
    rng = np.random.default_rng(5)
    queries = clustered(100, dim, n_clusters=10, seed=21)[rng.permutation(100)]
    pos, _ = exact_knn(queries, l0, 10)
    assert recall(index.search(queries, 10)[0], ids0[pos]) >= 0.95
    per = index.search_all_layers(queries, 10)
    assert recall(per[0][0], ids0[pos]) >= 0.95


def test_threads_give_identical_search_results():
    index, layers = small_index(n0=2000, n1=200)
    q = layers[0][::7]
    a = index.search(q, 10)
    b = index.search_all_layers(q, [10, 4])
    index.set_num_threads(2)
    assert index.num_threads == 2
    c = index.search(q, 10)
    d = index.search_all_layers(q, [10, 4])
    np.testing.assert_array_equal(a[0], c[0])
    np.testing.assert_array_equal(a[1], c[1])
    for x, y in zip(b, d, strict=True):
        np.testing.assert_array_equal(x[0], y[0])


def test_parallel_build_quality():
    """A 2-thread build is as good as the 1-thread build of the same data. The parallel build is
    not deterministic and this data sits right at recall 0.95 (1 thread: 0.951; 2 threads: 0.949
    to 0.952 measured), so the bound is relative to the sequential build, not a fixed 0.95."""
    l0 = clustered(4000, 32, n_clusters=20, seed=3)
    q = clustered(100, 32, n_clusters=20, seed=4)
    pos, _ = exact_knn(q, l0, 10)
    got = {}
    for threads in (1, 2):
        index = CHNSW(32, scan_threshold=0, M=12, ef_construction=80, num_threads=threads)
        index.add_layer(l0)
        got[threads] = recall(index.search(q, 10)[0], pos)
    assert got[1] >= 0.94
    assert got[2] >= got[1] - 0.01, got


def test_deterministic_single_thread():
    def build():
        index, _ = small_index(n0=1500, n1=150, seed=9)
        index.add(clustered(200, 16, n_clusters=8, seed=99), 0)
        return index

    a, b = build(), build()
    assert a.to_bytes() == b.to_bytes()
    q = clustered(30, 16, n_clusters=8, seed=5)
    np.testing.assert_array_equal(a.search(q, 10)[0], b.search(q, 10)[0])
    assert a.entry_point(0) == b.entry_point(0)
    # the seed picks the fixed entry nodes
    entries = set()
    for seed in range(8):
        other = CHNSW(16, M=8, ef_construction=64, seed=seed, scan_threshold=0)
        other.add_layer(clustered(300, 16, n_clusters=8, seed=9))
        entries.add(int(other.entry_point(0)))
    assert len(entries) > 1


def test_pickle_roundtrip():
    index, layers = small_index()
    clone = pickle.loads(pickle.dumps(index))
    np.testing.assert_array_equal(index.search(layers[0][:9], 5)[0], clone.search(layers[0][:9], 5)[0])


def test_vectors_view_shares_the_index_memory_and_pins_it():
    index, layers = small_index()
    ids1 = np.asarray(index.ids_in_layer(1), np.int64)
    view = index.vectors_view(ids1)
    assert view.shape == (60, 16) and view.dtype == np.float32 and not view.flags.writeable
    assert np.array_equal(view, index.get_vectors(ids1))  # the stored (normalised) rows, bit for bit
    assert not view.flags.owndata and index.vector_views == 1
    with pytest.raises(ValueError):
        view[0, 0] = 1.0
    # not one run of consecutive nodes: no view (callers copy with get_vectors)
    assert index.vectors_view(ids1[::-1]) is None and index.vectors_view(np.array([0, 2])) is None
    assert index.vector_views == 1
    with pytest.raises(KeyError):
        index.vectors_view(np.array([10**9]))
    # a full buffer cannot grow under a live view: the insert raises and changes nothing
    free = np.arange(10_000, 10_000 + 4096, dtype=np.int64)
    rows = clustered(4096, 16, n_clusters=4, seed=3)
    with pytest.raises(RuntimeError, match="zero-copy vector view"):
        index.add(rows, 0, ids=free)
    assert len(index) == 660 and 10_000 not in index
    part = view[5:9]  # a slice keeps the pin
    del view
    assert index.vector_views == 1
    del part
    assert index.vector_views == 0
    index.add(rows, 0, ids=free)
    assert len(index) == 660 + 4096


def test_a_view_keeps_its_index_alive():
    index, _ = small_index()
    ids0 = np.asarray(index.ids_in_layer(0), np.int64)
    expected = index.get_vectors(ids0)
    view = index.vectors_view(ids0)
    del index
    import gc

    gc.collect()
    assert np.array_equal(view, expected)


def test_vectors_view_needs_unpadded_rows():
    index = CHNSW(10)  # rows padded to 16 floats: a view would be strided, so none is made
    index.add_layer(clustered(50, 10, n_clusters=2, seed=1))
    assert index.vectors_view(np.arange(50)) is None and index.vector_views == 0
