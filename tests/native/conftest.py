"""Session fixtures for the C-HNSW tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The repository runs pytest with --import-mode=importlib, which does not put test folders on
# sys.path; the helpers module (uniquely named) is imported from here.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from chnsw_testutil import CHNSW, DIM, SIZES, clustered, upper_layer  # noqa: E402


@pytest.fixture(scope="session")
def layered_data():
    """20k / 2k / 200 clustered 384-d layers plus 200 held-out queries."""
    base = clustered(SIZES[0] + 200, DIM, n_clusters=100, seed=1)
    queries, l0 = base[: 200], base[200:]
    l1 = upper_layer(l0, SIZES[1], seed=2)
    l2 = upper_layer(l1, SIZES[2], seed=3)
    return [l0, l1, l2], queries


@pytest.fixture(scope="session")
def big_index(layered_data):
    """The 3-layer index, built on 2 threads, default parameters except ef_construction=100."""
    layers, _ = layered_data
    index = CHNSW(DIM, metric="cosine", M=16, ef_construction=100)
    index.set_num_threads(2)
    for vectors in layers:
        index.add_layer(vectors)
    index.set_num_threads(1)
    return index
