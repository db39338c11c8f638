"""The entity-vector stage: one vector per KG entity, from its name and its chunks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..config import GraphStrataConfig
from ..graph import KnowledgeGraph
from ..hierarchy import mean_operator
from ..models import Embedder, l2_normalise
from .progress import Progress


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
    # mean of each entity's chunk vectors as one sparse (entities × chunks) product
    chunk_rows = [[chunk_row[c] for c in kg.entities[e].chunk_ids] for e in ids]
    mean = mean_operator(chunk_rows, len(chunk_vecs), np.float32)
    ctx = l2_normalise(np.asarray(mean @ chunk_vecs, dtype=np.float32))
    return ctx if names is None else l2_normalise((1 - w) * names + w * ctx)
