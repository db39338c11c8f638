"""Thread safety: concurrent searches, and add / mark_deleted while other threads search."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from chnsw_testutil import CHNSW, clustered, exact_knn, recall


def test_many_threads_searching_agree():
    data = clustered(4000, 32, n_clusters=20, seed=1)
    index = CHNSW(32, scan_threshold=0, M=12, ef_construction=64)
    index.add_layer(data)
    index.add_layer(data[::20] + 0.01)
    queries = clustered(64, 32, n_clusters=20, seed=2)
    expected = index.search(queries, 10)[0]
    expected_all = [x[0] for x in index.search_all_layers(queries, 5)]
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            for _ in range(30):
                rows = rng.choice(len(queries), 8, replace=False)
                ids, _ = index.search(queries[rows], 10)
                np.testing.assert_array_equal(ids, expected[rows])
                per = index.search_all_layers(queries[rows], 5)
                for layer in range(2):
                    np.testing.assert_array_equal(per[layer][0], expected_all[layer][rows])
        except BaseException as exc:  # noqa: BLE001 (collected and re-raised below)
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_add_while_searching():
    dim = 32
    data = clustered(6000, dim, n_clusters=20, seed=5)
    upper = clustered(300, dim, n_clusters=20, seed=6)
    index = CHNSW(dim, scan_threshold=0, M=12, ef_construction=64)
    index.add_layer(data[:1000])
    index.add_layer(upper[:100], ids=np.arange(6000, 6100))
    index.set_num_threads(2)  # inserts inside each add() also run on 2 threads
    queries = clustered(50, dim, n_clusters=20, seed=7)
    stop = threading.Event()
    errors: list[BaseException] = []
    seen_sizes: list[int] = []
    searches = [0]

    def searcher(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            while not stop.is_set():
                q = queries[rng.integers(len(queries))]
                n_before = len(index)
                ids, dist = index.search(q, 10)
                # results are valid, sorted, and never padded (layer 0 has >= 1000 live nodes)
                assert (ids >= 0).all() and (ids < 6000).all()
                assert np.all(np.diff(dist) >= 0)
                per = index.search_all_layers(q, [10, 5])
                assert (per[1][0] >= 6000).all()
                seen_sizes.append(n_before)
                searches[0] += 1
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def deleter() -> None:
        try:
            for i in range(0, 1000, 50):
                index.mark_deleted(i)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=searcher, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    try:
        for start in range(1000, 6000, 500):
            index.add(data[start : start + 500], 0, ids=np.arange(start, start + 500))
        index.add(upper[100:], 1, ids=np.arange(6000 + 100, 6000 + 300))
        deleter()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, repr(errors[0])
    assert searches[0] > 0
    # the index is complete and consistent after the concurrent phase
    assert len(index) == 6000 + 300
    assert index.layer_size(0) == 6000 and index.layer_size(1) == 300
    deleted = set(range(0, 1000, 50))
    assert index.num_deleted == len(deleted)
    found, _ = index.search(data, 1)
    live = np.array([i not in deleted for i in range(6000)])
    assert (found[live, 0] == np.arange(6000)[live]).mean() >= 0.99
    pos, _ = exact_knn(queries, data[live], 10)
    assert recall(index.search(queries, 10, ef_search=200)[0], np.arange(6000)[live][pos]) >= 0.95


def test_batch_results_identical_across_thread_counts():
    """A multithreaded batch (queries claimed in slices) returns exactly the single-threaded
    results, for every thread count, batch size (fewer queries than threads, not a multiple of
    the slice) and entry point (search, search_all_layers with and without entry reuse)."""
    dim = 24
    data = clustered(3000, dim, n_clusters=15, seed=11)
    index = CHNSW(dim, M=8, ef_construction=48, scan_threshold=0)
    index.add_layer(data)
    index.add_layer(data[::10] + 0.01, ids=np.arange(3000, 3300))
    index.add_layer(data[::100] - 0.01, ids=np.arange(3300, 3330))
    for i in range(0, 3000, 97):
        index.mark_deleted(i)  # the deleted-node filter runs in the workers too
    queries = clustered(517, dim, n_clusters=15, seed=12)
    index.set_num_threads(1)
    ref = index.search(queries, 7, ef_search=40)
    ref_all = index.search_all_layers(queries, [7, 5, 3], ef_search=[40, 20, 10])
    ref_sep = index.search_all_layers(queries, 4, reuse_entry=False)
    for threads in (2, 3, 8, 16):
        index.set_num_threads(threads)
        for rows in (slice(0, 1), slice(0, 5), slice(0, 517), slice(3, 300)):
            ids, dist = index.search(queries[rows], 7, ef_search=40)
            np.testing.assert_array_equal(ids, ref[0][rows])
            np.testing.assert_array_equal(dist, ref[1][rows])
            per = index.search_all_layers(queries[rows], [7, 5, 3], ef_search=[40, 20, 10])
            for layer in range(3):
                np.testing.assert_array_equal(per[layer][0], ref_all[layer][0][rows])
                np.testing.assert_array_equal(per[layer][1], ref_all[layer][1][rows])
            sep = index.search_all_layers(queries[rows], 4, reuse_entry=False)
            for layer in range(3):
                np.testing.assert_array_equal(sep[layer][0], ref_sep[layer][0][rows])


def test_batch_error_in_a_worker_is_raised():
    """A bad query row in a multithreaded batch raises, naming the row, whatever thread meets it."""
    dim = 8
    index = CHNSW(dim, M=8, ef_construction=32)
    index.add_layer(clustered(500, dim, n_clusters=5, seed=3))
    index.set_num_threads(4)
    queries = clustered(300, dim, n_clusters=5, seed=4)
    queries[211] = np.nan
    with pytest.raises(ValueError, match="row 211"):
        index.search(queries, 5)
    with pytest.raises(ValueError, match="row 211"):
        index.search_all_layers(queries, 5)
