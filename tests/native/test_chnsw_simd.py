"""Run-time SIMD dispatch: level reporting, forcing scalar, and SIMD == scalar within tolerance."""

from __future__ import annotations

import os
import subprocess
import sys

import graphstrata_chnsw
import numpy as np
import pytest
from chnsw_testutil import CHNSW, clustered, exact_knn, recall

LEVELS = {"avx512", "avx2", "neon", "scalar"}


@pytest.fixture()
def restore_level():
    old = graphstrata_chnsw.simd_level()
    yield
    graphstrata_chnsw.set_simd_level(old)


def test_level_is_reported():
    assert graphstrata_chnsw.simd_level() in LEVELS
    assert graphstrata_chnsw.best_simd_level() in LEVELS


def test_env_var_forces_scalar():
    code = "import graphstrata_chnsw as g; print(g.simd_level())"
    env = dict(os.environ, GRAPHSTRATA_CHNSW_SIMD="scalar")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "scalar"
    env["GRAPHSTRATA_CHNSW_SIMD"] = "bogus"
    out = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == graphstrata_chnsw.best_simd_level()
    assert "GRAPHSTRATA_CHNSW_SIMD ignored" in out.stderr


def test_unsupported_level_falls_back(restore_level):
    got = graphstrata_chnsw.set_simd_level("avx512")
    assert got in LEVELS
    assert graphstrata_chnsw.simd_level() == got
    assert graphstrata_chnsw.set_simd_level("scalar") == "scalar"


@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
@pytest.mark.parametrize("dim", [16, 37, 384])
def test_simd_matches_scalar(restore_level, metric, dim):
    data = clustered(1500, dim, n_clusters=10, seed=dim)
    queries = clustered(40, dim, n_clusters=10, seed=dim + 1)
    index = CHNSW(dim, scan_threshold=0, metric=metric, M=8, ef_construction=64)
    index.add_layer(data)
    index.add_layer(data[::15])
    graphstrata_chnsw.set_simd_level(graphstrata_chnsw.best_simd_level())
    fast = index.search(queries, 10, ef_search=100)
    fast_all = index.search_all_layers(queries, 5, ef_search=100)
    assert graphstrata_chnsw.set_simd_level("scalar") == "scalar"
    slow = index.search(queries, 10, ef_search=100)
    slow_all = index.search_all_layers(queries, 5, ef_search=100)
    # Same neighbours (ties broken by float rounding may differ rarely) and distances within tolerance.
    assert (fast[0] == slow[0]).mean() >= 0.98
    np.testing.assert_allclose(fast[1], slow[1], rtol=1e-4, atol=1e-5)
    for (fi, fd), (si, sd) in zip(fast_all, slow_all, strict=True):
        assert (fi == si).mean() >= 0.98
        np.testing.assert_allclose(fd, sd, rtol=1e-4, atol=1e-5)
    # A scalar-built index answers like a SIMD-built one.
    scalar_index = CHNSW(dim, scan_threshold=0, metric=metric, M=8, ef_construction=64)
    scalar_index.add_layer(data)
    graphstrata_chnsw.set_simd_level(graphstrata_chnsw.best_simd_level())
    ids, _ = scalar_index.search(queries, 10, ef_search=100)
    truth, _ = exact_knn(queries, data, 10, metric)
    assert recall(ids, truth) >= recall(fast[0], truth) - 0.03
