"""What the LLM wrote, embedded (issue 29, "Keep what the LLM says").

An LLM build's descriptions are the model's own words (LightRAG extraction: typed entities and
described relations; AGRAG extraction: triples), so its vectors embed them as the papers do:

* entity vectors embed the entity's name and description (LightRAG §3.1, ``seed-lightrag.md``
  §1.8: ``VDB_entities`` embeds ``entity_name + description``) — only with LightRAG extraction:
  AGRAG extraction keeps the statistical entities, whose descriptions are extractive sentences
  (AGRAG's own entity store embeds the entity text, ``seed-agrag.md`` §1.7), and they keep the
  offline vectors;
* relation vectors embed keywords, both endpoint names and the description (LightRAG §3.1,
  ``seed-lightrag.md`` §1.8: ``VDB_relations``), read by LightRAG's high-level search
  (:mod:`graphstrata.methods.lightrag`);
* fact vectors embed each fact's text (AGRAG §III-C, ``seed-agrag.md`` §1.7, §2.1), read by
  AGRAG's query → fact match (:mod:`graphstrata.methods.agrag`).

The spec's reference code concatenates the parts with no separator; we join them with a new
line, so the last word of one part and the first of the next stay two words for the
embedder's tokenizer (newer LightRAG releases do the same).

Offline builds, and LLM builds with ``llm_extraction="statistical"`` or
``llm_description_vectors=False``, have extractive descriptions: their vectors are made as
before (:func:`~.entities.entity_vectors`, composed relation vectors, facts scored without
vectors), bit for bit.

Relation and fact vectors are :class:`~graphstrata.structures.text_vectors.TextVectors`:
derived structures (:mod:`graphstrata.structures`) built at index time, persisted with the
index, and carried over by incremental updates, where only texts that changed are embedded
again; this module keeps the entity-vector stage and re-exports the text helpers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..config import GraphStrataConfig
from ..graph import KnowledgeGraph
from ..models import Embedder
from ..structures.text_vectors import (
    PART_SEPARATOR,
    TextVectors,
    describes_relations,
    join_parts,
    optional_arrays,
    optional_from_arrays,
    relation_text,
    state_describes_relations,
)
from ..types import Entity
from .progress import Progress


def describes_entities(config: GraphStrataConfig, llm_id: str | None) -> bool:
    """Whether a build with ``config`` and an LLM of id ``llm_id`` (``None``: offline) embeds
    each entity's name and description: LightRAG extraction with ``llm_description_vectors``
    (LightRAG §3.1), or HiRAG's two-stage extraction, whose entities are as described
    (HiRAG §2.8 embeds name + description). Otherwise its entity vectors are
    :func:`~.entities.entity_vectors`'."""
    return (
        llm_id is not None
        and bool(getattr(config, "llm_description_vectors", False))
        and config.llm_extraction in ("lightrag", "hirag")
    )


def entity_text(entity: Entity) -> str:
    """The text an entity vector embeds in an LLM build (LightRAG §3.1): ``name``, a new
    line, ``description`` (the name alone when it has no description)."""
    return join_parts(entity.name, entity.description)


def described_entity_vectors(
    kg: KnowledgeGraph, embedder: Embedder, prog: Progress, ids: Sequence[str] | None = None
) -> np.ndarray:
    """The entity-vector stage of an LLM build (:func:`describes_entities`): each entity's
    :func:`entity_text` embedded (stage ``"embedding entities"``, batches of
    :data:`~.progress.EMBED_BATCH`).

    Args:
        kg: the knowledge graph (``name`` and ``description`` of each entity are read).
        embedder: embeds the texts.
        prog: the build's :class:`~.progress.Progress`.
        ids: the entities to embed (``None``: every entity, in row order; an incremental
            update passes the entities whose name or description changed).

    Returns:
        float32 ``(len(ids), dim)``, rows L2-normalised.

    Raises:
        KeyError: an id not in ``kg``.
        ValueError: the embedder returned another shape.
    """
    ids = kg.entity_ids if ids is None else list(ids)
    if not ids:
        return np.zeros((0, embedder.dim), np.float32)
    return prog.embed(embedder, [entity_text(kg.entities[e]) for e in ids], "embedding entities")


__all__ = [
    "PART_SEPARATOR",
    "TextVectors",
    "described_entity_vectors",
    "describes_entities",
    "describes_relations",
    "entity_text",
    "join_parts",
    "optional_arrays",
    "optional_from_arrays",
    "relation_text",
    "state_describes_relations",
]
