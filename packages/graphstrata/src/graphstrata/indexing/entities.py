"""The entity-vector stage: one vector per KG entity, from its name and its chunks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..config import GraphStrataConfig
from ..graph import KnowledgeGraph
from ..hierarchy import mean_operator
from ..models import Embedder, l2_normalise
from .progress import Progress

ENTITY_BLOCK = 65_536
"""Entities per block of :func:`entity_vectors`' chunk means and blend (~64 MB of float32
temporaries at dim 256)."""


def entity_vectors(
    kg: KnowledgeGraph,
    chunk_row: Mapping[str, int],
    chunk_vecs: np.ndarray,
    config: GraphStrataConfig,
    embedder: Embedder,
    prog: Progress,
    ids: Sequence[str] | None = None,
) -> np.ndarray:
    """The entity-vector stage: ``(1 - w)·name + w·mean(its chunks)``,
    ``w = config.entity_context_weight``; ``w = 1`` embeds no names at all (the chunk vectors
    are reused: no second embedding pass), ``w <= 0`` gives the name vectors alone.

    Args:
        kg: the knowledge graph (each entity's ``name`` and ``chunk_ids`` are read).
        chunk_row: ``{chunk_id: row}`` of ``chunk_vecs``.
        chunk_vecs: float32 ``(n_chunks, dim)``, rows L2-normalised.
        config: the build configuration.
        embedder: embeds the names (stage ``"embedding entities"``).
        prog: the build's :class:`~.progress.Progress`.
        ids: the entities to embed (``None``: every entity, in row order; incremental
            updates pass the entities that need a new vector).

    Returns:
        float32 ``(len(ids), dim)``, rows L2-normalised.

    Raises:
        KeyError: an entity names a chunk not in ``chunk_row``.
        ValueError: the embedder returned another shape.
    """
    ids = kg.entity_ids if ids is None else list(ids)
    if not ids:
        return np.zeros((0, embedder.dim), np.float32)
    w = config.entity_context_weight
    names = None
    if w < 1:
        names = prog.embed(embedder, [kg.entities[e].name for e in ids], "embedding entities")
        if w <= 0:
            return names
    # the mean of each entity's chunk vectors as a sparse (entities × chunks) product, and the
    # blend, a block of entities at a time into one output array (the names' own where there
    # are names): row-wise operations, so the same bits as the whole at once, without the four
    # whole-size temporaries (7 GB at 1M chunks; issue 33)
    out = np.empty((len(ids), embedder.dim), np.float32) if names is None else np.require(names, requirements="W")
    for start in range(0, len(ids), ENTITY_BLOCK):
        block = ids[start : start + ENTITY_BLOCK]
        chunk_rows = [[chunk_row[c] for c in kg.entities[e].chunk_ids] for e in block]
        mean = mean_operator(chunk_rows, len(chunk_vecs), np.float32)
        ctx = l2_normalise(np.asarray(mean @ chunk_vecs, dtype=np.float32))
        stop = start + len(block)
        out[start:stop] = ctx if names is None else l2_normalise((1 - w) * out[start:stop] + w * ctx)
    return out
