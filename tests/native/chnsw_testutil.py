"""Helpers shared by the C-HNSW tests (numpy RNG with fixed seeds)."""

from __future__ import annotations

import numpy as np
from graphstrata_chnsw import CHNSW

DIM = 384
SIZES = (20_000, 2_000, 200)


def clustered(n: int, dim: int, n_clusters: int, seed: int, noise: float = 1.5) -> np.ndarray:
    """Mixture of Gaussians: unit-variance centres, isotropic noise, rows L2-normalised."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, dim)).astype(np.float32)
    labels = rng.integers(0, n_clusters, n)
    x = centres[labels] + noise * rng.normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def upper_layer(lower: np.ndarray, n: int, seed: int, jitter: float = 0.1) -> np.ndarray:
    """A coarser layer: a random subset of the layer below, jittered (distinct vectors)."""
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(lower), n, replace=False)
    noise = rng.normal(size=(n, lower.shape[1])).astype(np.float32)
    x = lower[pick] + jitter * noise / np.sqrt(lower.shape[1])
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def exact_knn(queries: np.ndarray, base: np.ndarray, k: int, metric: str = "cosine") -> tuple[np.ndarray, np.ndarray]:
    """Brute-force k nearest rows of `base` (positions, distances) under the index's metric."""
    q = queries.astype(np.float64)
    b = base.astype(np.float64)
    if metric == "cosine":
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        b = b / np.linalg.norm(b, axis=1, keepdims=True)
        d = 1.0 - q @ b.T
    elif metric == "ip":
        d = 1.0 - q @ b.T
    else:
        d = (q * q).sum(1)[:, None] - 2.0 * q @ b.T + (b * b).sum(1)[None, :]
    pos = np.argsort(d, axis=1, kind="stable")[:, :k]
    return pos, np.take_along_axis(d, pos, axis=1)


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    k = truth.shape[1]
    return float(np.mean([len(set(f.tolist()) & set(t.tolist())) / k for f, t in zip(found, truth, strict=True)]))


def layer_offsets(layers) -> list[int]:
    offs, total = [], 0
    for x in layers:
        offs.append(total)
        total += len(x)
    return offs


def small_index(n0: int = 600, n1: int = 60, dim: int = 16, metric: str = "cosine", seed: int = 7, **kw):
    """A small two-layer index for fast tests; returns (index, [layer0, layer1])."""
    l0 = clustered(n0, dim, n_clusters=8, seed=seed)
    l1 = upper_layer(l0, n1, seed=seed + 1)
    if metric == "l2":
        l0 = l0 * 3.0
        l1 = l1 * 3.0
    # scan_threshold=0: small layers go through the graph too, so the tests exercise it
    kw.setdefault("scan_threshold", 0)
    index = CHNSW(dim, metric=metric, M=kw.pop("M", 8), ef_construction=kw.pop("ef_construction", 64), **kw)
    index.add_layer(l0)
    index.add_layer(l1)
    return index, [l0, l1]
