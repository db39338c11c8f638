"""C-HNSW: ArchRAG's community-based HNSW as one multi-layer ANN index.

Layer 0 is the finest layer (entities), layer L the coarsest (top communities); every node lives
in exactly one layer, links to its nearest neighbours inside its layer (HNSW heuristic, at most
2*M links on layer 0 and M above), and every node of a layer i >= 1 keeps one down-link to its
(approximate) nearest node of layer i-1. A query walks top-down and each layer's best hit seeds
the search of the layer below (specs/seed-archrag.md §2, TR Alg. 2).

Example::

    import numpy as np
    from graphstrata_chnsw import CHNSW

    index = CHNSW(384, metric="cosine", M=16, ef_construction=200)
    index.add_layer(entity_vectors)            # layer 0
    index.add_layer(community_vectors)         # layer 1
    ids, dist = index.search(query, k=10, layer=0)
    per_layer = index.search_all_layers(query, k=[10, 5])

The distance kernels (AVX-512 / AVX2+FMA / NEON / scalar) are chosen at import from the CPU. Set
the environment variable ``GRAPHSTRATA_CHNSW_SIMD`` to ``scalar`` (or ``avx2`` ...) before the
import, or call :func:`set_simd_level`, to force a lower level. See native/README.md for the
parameters, the file format and the choices taken for the spec's ambiguities.
"""

from __future__ import annotations

import os as _os
import warnings as _warnings
from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _dist_version

from ._chnsw import CHNSW, best_simd_level, max_threads, ppr_push, set_simd_level, shortest_path, simd_level

__all__ = ["CHNSW", "max_threads", "ppr_push", "shortest_path", "simd_level", "best_simd_level", "set_simd_level", "__version__"]
# The installed distribution's version, built from the repository's one VERSION file.
try:
    __version__ = _dist_version("graphstrata-chnsw")
except _PackageNotFoundError:  # pragma: no cover - imported from a build tree, not installed
    __version__ = "0+unknown"

_requested = _os.environ.get("GRAPHSTRATA_CHNSW_SIMD", "").strip().lower()
if _requested:
    try:
        set_simd_level(_requested)
    except ValueError as _exc:  # unknown name: keep the automatic choice, but say so
        _warnings.warn(f"GRAPHSTRATA_CHNSW_SIMD ignored: {_exc}", RuntimeWarning, stacklevel=2)
