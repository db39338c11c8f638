"""Bad input raises a clear Python exception naming the problem."""

from __future__ import annotations

import numpy as np
import pytest
from chnsw_testutil import CHNSW, small_index


@pytest.fixture()
def index():
    idx, _ = small_index()
    return idx


def vecs(n, dim=16, seed=0):
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(dim=16, metric="hamming"), "unknown metric 'hamming'"),
        (dict(dim=16, M=1), "M must be >= 2"),
        (dict(dim=16, M=0), "M must be >= 2"),
        (dict(dim=16, M=10_000), "M must be in"),
        (dict(dim=0), "dim must be >= 1"),
        (dict(dim=16, ef_construction=0), "ef_construction must be >= 1"),
        (dict(dim=16, ef_search=0), "ef_search must be >= 1"),
        (dict(dim=16, num_threads=0), "num_threads must be >= 1"),
        (dict(dim=16, scan_threshold=-1), "scan_threshold must be >= 0"),
    ],
)
def test_constructor_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CHNSW(**kwargs)


def test_wrong_dim(index):
    with pytest.raises(ValueError, match="dimension 15 but the index has dim 16"):
        index.add(vecs(3, 15), 0)
    with pytest.raises(ValueError, match="dimension 17 but the index has dim 16"):
        index.search(vecs(3, 17), 5)
    with pytest.raises(ValueError, match="dimension 15 but the index has dim 16"):
        index.search(vecs(1, 15)[0], 5)
    with pytest.raises(ValueError, match="dimension 8 but the index has dim 16"):
        index.search_all_layers(vecs(2, 8), 5)
    with pytest.raises(ValueError, match="2-D array"):
        index.add_layer(vecs(1)[0])
    with pytest.raises(ValueError, match="2-D array"):
        index.search(np.zeros((2, 2, 16), np.float32), 5)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_vectors(index, bad):
    v = vecs(4)
    v[2, 5] = bad
    with pytest.raises(ValueError, match="row 2 contains NaN or inf"):
        index.add(v, 0)
    with pytest.raises(ValueError, match="row 2 contains NaN or inf"):
        index.add_layer(v)
    with pytest.raises(ValueError, match="row 2 contains NaN or inf"):
        index.search(v, 3)
    with pytest.raises(ValueError, match="NaN or inf"):
        index.search_all_layers(v[2], 3)
    # float64 values that overflow float32 become inf and are rejected too
    w = vecs(2).astype(np.float64)
    w[0, 0] = 1e300
    with pytest.raises(ValueError, match="row 0 contains NaN or inf"):
        index.add(w, 0)
    assert len(index) == 660  # nothing was inserted


def test_duplicate_ids(index):
    with pytest.raises(ValueError, match=r"duplicate id 5001 in this batch \(positions 1 and 2\)"):
        index.add(vecs(3), 0, ids=[5000, 5001, 5001])
    with pytest.raises(ValueError, match="duplicate id 3: already in the index"):
        index.add(vecs(2), 0, ids=[9000, 3])
    with pytest.raises(ValueError, match="already in the index"):
        index.add_layer(vecs(2), ids=[600, 9001])
    index.mark_deleted(7)
    with pytest.raises(ValueError, match="duplicate id 7"):
        index.add(vecs(1), 0, ids=[7])  # deleted ids stay reserved
    with pytest.raises(ValueError, match="id -1 is reserved"):
        index.add(vecs(1), 0, ids=[-1])
    with pytest.raises(ValueError, match="ids has 2 entries for 3 vectors"):
        index.add(vecs(3), 0, ids=[10_000, 10_001])
    with pytest.raises(TypeError, match="ids must be integers"):
        index.add(vecs(2), 0, ids=[1.5, 2.5])
    assert len(index) == 660


def test_k_and_ef(index):
    q = vecs(2)
    for k in (0, -3):
        with pytest.raises(ValueError, match="k must be >= 1"):
            index.search(q, k)
        with pytest.raises(ValueError, match="k must be >= 1"):
            index.search_all_layers(q, k)
    with pytest.raises(ValueError, match="k must be >= 1"):
        index.search_all_layers(q, [5, 0])
    with pytest.raises(ValueError, match="k has 3 entries but the index has 2 layers"):
        index.search_all_layers(q, [5, 5, 5])
    with pytest.raises(TypeError, match="k must be an int"):
        index.search(q, 2.5)
    with pytest.raises(ValueError, match="ef_search must be >= 1"):
        index.search(q, 5, ef_search=0)
    with pytest.raises(ValueError, match="ef_search has 1 entries but the index has 2 layers"):
        index.search_all_layers(q, 5, ef_search=[10])
    with pytest.raises(ValueError, match="ef_search must be >= 1"):
        index.search_all_layers(q, 5, ef_search=[10, -1])
    with pytest.raises(ValueError, match="ef_search must be >= 1"):
        index.ef_search = 0
    with pytest.raises(ValueError, match="num_threads must be >= 1"):
        index.set_num_threads(0)


def test_layer_out_of_range(index):
    q = vecs(2)
    for layer in (2, 5, -1):
        with pytest.raises(IndexError, match=f"layer {layer} out of range: the index has 2 layer"):
            index.search(q, 3, layer=layer)
        with pytest.raises(IndexError, match="out of range"):
            index.add(q, layer)
    with pytest.raises(IndexError, match="out of range"):
        index.layer_size(2)
    with pytest.raises(IndexError, match="out of range"):
        index.ids_in_layer(9)


def test_empty_index():
    index = CHNSW(16)
    with pytest.raises(IndexError, match="no layers yet: call add_layer first"):
        index.add(vecs(2), 0)
    with pytest.raises(IndexError, match="no layers"):
        index.search(vecs(1), 1)
    with pytest.raises(IndexError, match="no layers"):
        index.search_all_layers(vecs(1), 1)
    assert len(index) == 0 and index.num_layers == 0


def test_empty_vectors(index):
    with pytest.raises(ValueError, match="vectors is empty"):
        index.add_layer(np.zeros((0, 16), np.float32))
    with pytest.raises(ValueError, match="vectors is empty"):
        index.add(np.zeros((0, 16), np.float32), 0)
    with pytest.raises(ValueError, match="vectors is empty"):
        CHNSW(16).add_layer(np.zeros((0, 16), np.float32))


def test_zero_vector_cosine(index):
    v = vecs(3)
    v[1] = 0.0
    with pytest.raises(ValueError, match="row 1 is a zero vector"):
        index.add(v, 0)
    with pytest.raises(ValueError, match="row 1 is a zero vector"):
        index.search(v, 3)
    # allowed under ip and l2
    for metric in ("ip", "l2"):
        other = CHNSW(16, scan_threshold=0, metric=metric)
        other.add_layer(v)
        assert other.search(v[1], 1)[0].shape == (1,)


def test_type_errors(index):
    with pytest.raises(TypeError, match="numeric"):
        index.add(np.array([["a"] * 16]), 0)
    with pytest.raises(TypeError):
        index.search(None, 3)
    with pytest.raises(TypeError, match="numeric"):
        index.search(np.array([[True] * 16]), 3)


def test_unknown_ids(index):
    for fn in (index.mark_deleted, index.is_deleted, index.down_link, index.neighbors, index.layer_of):
        with pytest.raises(KeyError, match="id 12345 is not in the index"):
            fn(12345)
    with pytest.raises(KeyError):
        index.get_vectors([0, 12345])


def test_simd_level_name():
    import graphstrata_chnsw

    with pytest.raises(ValueError, match="unknown SIMD level"):
        graphstrata_chnsw.set_simd_level("sse9")
