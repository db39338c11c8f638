"""Embedded texts grouped by owner (:class:`TextVectors`): what an LLM build's relation and
fact vectors are (issue 29, "Keep what the LLM says").

An LLM build's descriptions are the model's own words, so its vectors embed them as the papers
do: relation vectors embed keywords, both endpoint names and the description (LightRAG §3.1,
``seed-lightrag.md`` §1.8: ``VDB_relations``; :mod:`.lightrag`), fact vectors each fact's text
(AGRAG §III-C, ``seed-agrag.md`` §1.7, §2.1; :mod:`.agrag`). The parts are joined with a new
line (:data:`PART_SEPARATOR`), so the last word of one part and the first of the next stay two
words for the embedder's tokenizer.

Both are derived structures (:mod:`.registry`) built at index time, persisted with the index
(an index without them persists a marker, :func:`optional_arrays`), and carried over by
incremental updates, where only texts that changed are embedded again
(:meth:`TextVectors.embedded`, :func:`text_vectors_spec`). Offline builds, and LLM builds with
``llm_extraction="statistical"`` or ``llm_description_vectors=False``
(:func:`describes_relations` false), have none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..models import Embedder, l2_normalise
from ..runner import current_runner
from .registry import DerivedSpec, pack_strings, unpack_strings

if TYPE_CHECKING:  # pragma: no cover
    from ..config import GraphStrataConfig
    from ..graph import KnowledgeGraph

#: joins the parts of an embedded text (name and description; keywords, names, description)
PART_SEPARATOR = "\n"
#: texts per embedding batch (the indexing stages' too, :mod:`graphstrata.indexing.progress`)
EMBED_BATCH = 256


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


def embed_texts(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``texts`` embedded in batches of :data:`EMBED_BATCH` on the active runner
    (:func:`graphstrata.runner.current_runner`), as an indexing stage embeds them.

    Returns:
        float32 ``(len(texts), embedder.dim)``, rows L2-normalised.

    Raises:
        ValueError: the embedder returned another shape.
    """
    texts = list(texts)
    batches = [texts[i : i + EMBED_BATCH] for i in range(0, len(texts), EMBED_BATCH)]
    return embed_batches(embedder, batches, np.empty((len(texts), embedder.dim), dtype=np.float32))


def embed_batches(
    embedder: Embedder, batches: Sequence[Sequence[str]], out: np.ndarray, done: Callable[[int], Any] | None = None
) -> np.ndarray:
    """Embed ``batches`` of texts on the active runner into ``out`` (float32
    ``(total texts, embedder.dim)``), each batch L2-normalised into its rows as it arrives (no
    stacked copies; row-wise, so the same bits as normalising the whole); ``done(n)`` after
    each batch of ``n`` texts (a progress bar).

    Returns:
        ``out``.

    Raises:
        ValueError: the embedder returned another shape.
    """
    start = 0
    for batch, got in zip(batches, current_runner().embed(embedder, batches), strict=True):
        vecs = np.asarray(got, dtype=np.float32)
        if vecs.shape != (len(batch), embedder.dim):
            raise ValueError(
                f"embedder {embedder.id!r} returned shape {vecs.shape} for {len(batch)} "
                f"texts; expected ({len(batch)}, {embedder.dim})"
            )
        out[start : start + len(batch)] = l2_normalise(vecs)
        start += len(batch)
        if done is not None:
            done(len(batch))
    return out


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
            embedder: embeds the texts not in ``previous`` (:func:`embed_texts`; the same
                text always gives the same vector with a deterministic embedder, batched or
                not).
            previous: the structure of the state this one is updated from, or ``None``.
            stage: the progress stage name (kept for callers; nothing is displayed).

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
            vecs = embed_texts(embedder, list(todo))
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
        """Named numpy arrays (:mod:`.registry` codec): ``vectors``, ``indptr``, and
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


def described_text_vectors(
    state: Any, groups: Callable[[], Sequence[Sequence[str]]], previous: TextVectors | None, stage: str
) -> TextVectors | None:
    """An LLM build's embedded texts of ``state``: one list of texts per owner (``groups()``,
    called only for such a state) embedded by the state's embedder, reusing the vectors of
    the texts ``previous`` holds (the structure of the state ``state`` was updated from: only
    new or changed texts are embedded).

    Returns:
        A :class:`TextVectors` (float32 vectors, L2-normalised), or ``None`` when the state's
        descriptions are not the LLM's (:func:`describes_relations` is false: offline,
        statistical extraction, ``llm_description_vectors=False``).

    Raises:
        ValueError: the embedder returned another shape.
    """
    if not state_describes_relations(state):
        return None
    return TextVectors.embedded(groups(), state.embedder, previous, stage)


def text_vectors_spec(key: str, build: Callable[..., TextVectors | None]) -> DerivedSpec:
    """The :class:`~.registry.DerivedSpec` of optional text vectors built by
    ``build(state, previous=None)``: persisted with :func:`optional_arrays` (a marker for an
    index without them), and updated incrementally: the new state's texts, embedding only those
    the old structure lacks (``None`` when the old state had none: ``build`` decides)."""

    def update(old: TextVectors | None, old_state: Any, new_state: Any) -> TextVectors | None:
        return None if old is None else build(new_state, old)

    return DerivedSpec(key=key, build=build, to_arrays=optional_arrays, from_arrays=optional_from_arrays,
                       update=update)
