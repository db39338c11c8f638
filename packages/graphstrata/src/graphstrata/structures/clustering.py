"""The clusterings of HiRAG's hierarchical index (spec seed-hirag.md §2.5–2.7): soft Gaussian
mixtures of a layer's vectors (:func:`gmm_clusters`, the summary-entity layers), their cluster
sparsity (:func:`cluster_sparsity`, the stop rule), and the Leiden leaf communities over the
multi-layer graph G_k (:func:`leiden_leaves`, on :func:`csr_edges`' undirected edges).
:func:`~.hirag.build_hi_index` runs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..hierarchy import LEIDEN_SEED, leiden_edges

if TYPE_CHECKING:  # pragma: no cover
    from .hirag import HiIndexConfig


def cluster_sparsity(clusters: Sequence[Sequence[int]], n: int) -> float:
    """``1 − Σ|S|(|S|−1) / (n(n−1))`` (spec §2.6 Eq. 17); 1.0 when ``n < 2``."""
    if n < 2:
        return 1.0
    same = sum(len(c) * (len(c) - 1) for c in clusters)
    return 1.0 - same / (n * (n - 1))


#: rows whose GMM posteriors are computed at once (8,192 x 200 clusters x 8 bytes = 13 MB, and
#: sklearn's predict_proba keeps about six temporaries that size: ~80 MB; 65,536 rows made it
#: 0.75 GB, the build's peak at 50k chunks); the labels do not depend on it
PREDICT_BLOCK = 8_192


def gmm_clusters(vectors: np.ndarray, config: HiIndexConfig) -> list[list[int]]:
    """Soft GMM clusters of ``vectors`` (node indices, each list sorted; empty ones dropped).

    PCA to ``pca_dim``, then diagonal ``GaussianMixture`` fitted on up to ``fit_sample``
    nodes for each cluster count of a grid around ``sqrt(n)`` (capped at ``max_clusters``);
    the lowest BIC wins and labels every node (argmax, plus any cluster whose posterior
    exceeds ``soft_threshold``), :data:`PREDICT_BLOCK` rows at a time (memory bounded by the
    block, not by ``n``).

    Args:
        vectors: float32 ``(n, dim)`` node vectors.
        config: the GMM parameters (:class:`HiIndexConfig`).
    """
    from sklearn.decomposition import PCA
    from sklearn.mixture import GaussianMixture

    n = len(vectors)
    if n < 3:
        return [[i] for i in range(n)]
    rng = np.random.default_rng(config.seed)
    dim = min(config.pca_dim, n - 1, vectors.shape[1])
    fit_rows = np.sort(rng.choice(n, size=min(n, config.fit_sample), replace=False))
    pca = PCA(n_components=dim, random_state=config.seed).fit(vectors[fit_rows])
    x = pca.transform(vectors).astype(np.float64)
    xf = x[fit_rows]
    root = max(2, int(round(np.sqrt(n))))
    cap = min(config.max_clusters, len(xf) - 1)
    grid = sorted({max(2, min(int(g), cap)) for g in (root / 2, root, root * 2)})
    best, best_bic = None, np.inf
    for g in grid:
        gm = GaussianMixture(
            n_components=g, covariance_type="diag", random_state=config.seed, max_iter=100,
            reg_covar=1e-4,
        ).fit(xf)
        bic = gm.bic(xf)
        if bic < best_bic:
            best, best_bic = gm, bic
    soft = config.soft_threshold is not None and config.soft_threshold < 1.0
    label = np.empty(n, np.int64)
    soft_rows, soft_cols = [], []
    # posteriors in row blocks: the whole (n, clusters) float64 matrix, and sklearn's
    # temporaries of the same size, came to ~12 GB at 1.9M entities
    for a in range(0, n, PREDICT_BLOCK):
        proba = best.predict_proba(x[a : a + PREDICT_BLOCK])
        label[a : a + len(proba)] = proba.argmax(axis=1)
        if soft:
            rows, cols = np.nonzero(proba > config.soft_threshold)
            soft_rows.append(rows + a)
            soft_cols.append(cols)
    clusters: dict[int, set[int]] = {}
    for i, c in enumerate(label.tolist()):
        clusters.setdefault(c, set()).add(i)
    for rows, cols in zip(soft_rows, soft_cols, strict=True):
        for i, c in zip(rows.tolist(), cols.tolist(), strict=True):
            clusters.setdefault(c, set()).add(i)
    return sorted((sorted(m) for m in clusters.values() if m), key=lambda m: (m[0], len(m)))


def csr_edges(n: int, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected edges ``(a[e], b[e], w[e])`` as CSR over ``n`` nodes: int64 indptr, int32
    neighbours, float64 weights; each node's neighbours in edge order (as networkx adds them)."""
    u = np.concatenate([a, b])
    v = np.concatenate([b, a])
    e = np.concatenate([np.arange(len(a)), np.arange(len(a))])
    order = np.lexsort((e, u))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=indptr[1:])
    return indptr, v[order].astype(np.int32), np.concatenate([w, w])[order]


def leiden_leaves(a: np.ndarray, b: np.ndarray, w: np.ndarray, config: HiIndexConfig) -> list[list[int]]:
    """Leaf communities of hierarchical Leiden over G_k (spec §2.7), the undirected edges
    ``(a[e], b[e], w[e])`` over node indices; isolated nodes get none. Communities are sorted
    node-index lists, ordered by their first member."""
    if len(a) == 0:
        return []
    import graspologic_native as gn

    edges = leiden_edges(np.minimum(a, b), np.maximum(a, b), np.maximum(np.asarray(w, np.float64), 1e-6))
    edges.sort()
    result = gn.hierarchical_leiden(
        edges,
        max_cluster_size=config.leiden_max_cluster_size,
        seed=LEIDEN_SEED if config.seed == 0 else config.seed,
        resolution=1.0,
    )
    del edges
    final: dict[int, int] = {}
    for hc in result:
        if hc.is_final_cluster:
            final[int(hc.node)] = int(hc.cluster)
    del result
    groups: dict[int, list[int]] = {}
    for node in sorted(final):
        groups.setdefault(final[node], []).append(node)
    return sorted(groups.values(), key=lambda m: m[0])
