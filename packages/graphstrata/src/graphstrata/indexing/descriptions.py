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

Relation and fact vectors are :class:`TextVectors`: derived structures (:mod:`graphstrata.derived`)
built at index time, persisted with the index, and carried over by incremental updates, where
only texts that changed are embedded again (:meth:`TextVectors.embedded`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..config import GraphStrataConfig
from ..derived import pack_strings, unpack_strings
from ..graph import KnowledgeGraph
from ..models import Embedder
from ..types import Entity
from .progress import Progress

#: joins the parts of an embedded text (name and description; keywords, names, description)
PART_SEPARATOR = "\n"


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


def describes_relations(config: GraphStrataConfig, llm_id: str | None) -> bool:
    """Whether a build with ``config`` and an LLM of id ``llm_id`` (``None``: offline) has
    embedded relation and fact vectors: LightRAG, HiRAG (described relations, no keywords) or
    AGRAG extraction with ``llm_description_vectors`` (LightRAG §3.1, AGRAG §III-C)."""
    return (
        llm_id is not None
        and bool(getattr(config, "llm_description_vectors", False))
        and config.llm_extraction in ("lightrag", "hirag", "agrag")
    )


def state_describes_relations(state) -> bool:
    """:func:`describes_relations` of an :class:`~graphstrata.state.EngineState`."""
    return describes_relations(state.config, state.llm_id)


def entity_text(entity: Entity) -> str:
    """The text an entity vector embeds in an LLM build (LightRAG §3.1): ``name``, a new
    line, ``description`` (the name alone when it has no description)."""
    return join_parts(entity.name, entity.description)


def relation_text(kg: KnowledgeGraph, key: tuple[str, str]) -> str:
    """The text relation ``key``'s vector embeds in an LLM build (LightRAG §3.1): its
    keywords, the source and target entity names, its description, one per line (empty parts
    left out).

    Raises:
        KeyError: ``key`` or one of its endpoints is not in ``kg``.
    """
    r = kg.relations[key]
    return join_parts(r.keywords or "", kg.entities[key[0]].name, kg.entities[key[1]].name, r.description)


def join_parts(*parts: str) -> str:
    """The non-empty ``parts`` (stripped) joined by :data:`PART_SEPARATOR`."""
    return PART_SEPARATOR.join(p.strip() for p in parts if p and p.strip())


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


@dataclass(eq=False)
class TextVectors:
    """Embedded texts grouped by owner (a relation's one text, a relation's facts).

    Attributes:
        texts: the texts, owner by owner.
        vectors: float32 ``(len(texts), dim)``, rows L2-normalised: ``vectors[i]`` embeds
            ``texts[i]``.
        indptr: int64 ``(n_owners + 1,)``: owner ``j``'s texts are rows
            ``indptr[j]:indptr[j + 1]``.
    """

    texts: list[str]
    vectors: np.ndarray
    indptr: np.ndarray

    @property
    def n_owners(self) -> int:
        """Number of owners."""
        return len(self.indptr) - 1

    @classmethod
    def embedded(
        cls,
        groups: Sequence[Sequence[str]],
        embedder: Embedder,
        previous: TextVectors | None = None,
        stage: str = "embedding descriptions",
    ) -> TextVectors:
        """Embed every text of ``groups`` (one list per owner), reusing the vector of any text
        ``previous`` holds (an incremental update: only new or changed texts are embedded).

        Args:
            groups: per owner, its texts.
            embedder: embeds the texts not in ``previous`` (batches of
                :data:`~.progress.EMBED_BATCH`; the same text always gives the same vector
                with a deterministic embedder, batched or not).
            previous: the structure of the state this one is updated from, or ``None``.
            stage: the progress stage name.

        Returns:
            A :class:`TextVectors` over ``groups``.

        Raises:
            ValueError: the embedder returned another shape, or ``previous`` holds vectors
                of another dimension.
        """
        texts = [t for g in groups for t in g]
        indptr = np.zeros(len(groups) + 1, np.int64)
        if groups:
            np.cumsum([len(g) for g in groups], out=indptr[1:])
        dim = int(embedder.dim)
        out = np.empty((len(texts), dim), np.float32)
        known: dict[str, int] = {}
        if previous is not None and len(previous.texts):
            if previous.vectors.shape[1] != dim:
                raise ValueError(f"previous text vectors have dimension {previous.vectors.shape[1]}, not {dim}")
            known = {t: i for i, t in enumerate(previous.texts)}
        todo: dict[str, list[int]] = {}
        for i, t in enumerate(texts):
            j = known.get(t)
            if j is None:
                todo.setdefault(t, []).append(i)
            else:
                out[i] = previous.vectors[j]  # type: ignore[union-attr]
        if todo:
            vecs = Progress(False).embed(embedder, list(todo), stage)
            for rows, v in zip(todo.values(), vecs, strict=True):
                out[rows] = v
        return cls(texts, out, indptr)

    def rows(self, owner: int) -> np.ndarray:
        """The vector rows of ``owner``'s texts (int64)."""
        return np.arange(int(self.indptr[owner]), int(self.indptr[owner + 1]), dtype=np.int64)

    def best(self, owners: np.ndarray, query: np.ndarray) -> np.ndarray:
        """float64 ``(len(owners),)``: each owner's highest cosine of ``query`` (float32
        ``(dim,)``, L2-normalised) to its texts' vectors; 0 for an owner without texts.

        Raises:
            IndexError: an owner out of range."""
        owners = np.asarray(owners, np.int64).ravel()
        out = np.zeros(len(owners))
        if not len(owners):
            return out
        lo, hi = self.indptr[owners], self.indptr[owners + 1]
        counts = hi - lo
        if not counts.sum():
            return out
        pos = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(counts.sum())
        sims = np.einsum("ij,j->i", self.vectors[pos], np.asarray(query, np.float32)).astype(np.float64)
        owner_of = np.repeat(np.arange(len(owners)), counts)
        best = np.full(len(owners), -np.inf)
        np.maximum.at(best, owner_of, sims)
        return np.where(counts > 0, best, 0.0)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Named numpy arrays (:mod:`graphstrata.derived` codec): ``vectors``, ``indptr``, and
        the texts packed as UTF-8 (``texts``, ``texts_offsets``)."""
        packed = pack_strings(self.texts)
        return {"vectors": self.vectors, "indptr": self.indptr, "texts": packed["utf8"],
                "texts_offsets": packed["offsets"]}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> TextVectors:
        """The inverse of :meth:`to_arrays`.

        Raises:
            KeyError: a missing array; ValueError: arrays that do not fit together."""
        texts = unpack_strings(arrays["texts"], arrays["texts_offsets"])
        vectors = np.asarray(arrays["vectors"], np.float32)
        indptr = np.asarray(arrays["indptr"], np.int64).ravel()
        if vectors.ndim != 2 or len(vectors) != len(texts) or not len(indptr) or int(indptr[0]) != 0 \
                or int(indptr[-1]) != len(texts) or (np.diff(indptr) < 0).any():
            raise ValueError("text vectors: vectors, texts and owners do not fit together")
        return cls(texts, vectors, indptr)


#: the arrays of an index without embedded descriptions (:func:`optional_arrays`): persisted so
#: a load knows there is nothing to build
ABSENT = "absent"


def optional_arrays(tv: TextVectors | None) -> dict[str, np.ndarray]:
    """:meth:`TextVectors.to_arrays`, or a one-array marker for ``None`` (an index without
    embedded descriptions: persisted too, so a load builds nothing)."""
    return {ABSENT: np.zeros(0, np.int8)} if tv is None else tv.to_arrays()


def optional_from_arrays(arrays: Mapping[str, np.ndarray]) -> TextVectors | None:
    """The inverse of :func:`optional_arrays`.

    Raises:
        KeyError, ValueError: as :meth:`TextVectors.from_arrays`."""
    return None if ABSENT in arrays else TextVectors.from_arrays(arrays)


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
