"""The records every module shares: documents, chunks, entities, relations, communities, hits,
citations.

All records are plain dataclasses with string ids so they persist to SQLite unchanged and
cross framework boundaries without conversion. The records a state holds one of per chunk,
entity, relation and community use ``__slots__`` (no per-object ``__dict__``: ~100 bytes
less each, a 1M-chunk index holds millions of them). Vectors never live on the records: they
are owned by :mod:`graphstrata.index`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

HitKind = Literal["chunk", "entity", "relation", "community", "path"]
HIT_KINDS: tuple[str, ...] = ("chunk", "entity", "relation", "community", "path")


def check_k(k: Any, name: str = "k") -> int:
    """Validate a result count (``k``, ``similarity_top_k``): a positive int, not a bool.

    Raises:
        ValueError: ``k`` is not an integer (numpy integers are accepted) or is ≤ 0; the
            message names ``name``.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
        raise ValueError(f"{name} must be a positive integer, got {k!r}")
    return int(k)


def check_kinds(kinds: Any) -> tuple[str, ...] | None:
    """Validate a hit-kind filter: ``None`` (every kind), one kind, or a non-empty sequence.

    Returns:
        ``None`` or a tuple of kinds from :data:`HIT_KINDS`.

    Raises:
        ValueError: not a sequence of strings, empty, or an unknown kind (named).
    """
    if kinds is None:
        return None
    if isinstance(kinds, str):
        kinds = (kinds,)
    if not isinstance(kinds, Iterable):
        raise ValueError(f"kinds must be None or a non-empty sequence of hit kinds, got {kinds!r}")
    out = tuple(kinds)
    if not out:
        raise ValueError("kinds must be None or a non-empty subset of " + ", ".join(HIT_KINDS))
    unknown = [x for x in out if x not in HIT_KINDS]
    if unknown:
        raise ValueError(f"unknown hit kind(s) {unknown}; known: {', '.join(HIT_KINDS)}")
    return out


@dataclass(slots=True)
class Document:
    """One input document.

    Attributes:
        id: caller-chosen id, kept verbatim end to end (evaluation scores by it).
        text: the full text (str, UTF-8).
        metadata: free-form JSON-serialisable mapping (title, source path, ...).
    """

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Chunk:
    """A token window of one document.

    Attributes:
        id: ``"<document_id>#<index>"``.
        document_id: id of the source :class:`Document`.
        index: position of the chunk within its document (0-based).
        text: the chunk text (a substring of the document text).
        start, end: character offsets of ``text`` in the document (``text == doc[start:end]``).
        n_tokens: length in tokens of the embedder's tokenizer.
    """

    id: str
    document_id: str
    index: int
    text: str
    start: int
    end: int
    n_tokens: int


_CHUNK_TEXT = Chunk.__dict__["text"]  # the slot Chunk keeps its text in


class DocumentChunk(Chunk):
    """A :class:`Chunk` whose text is read from its document (``document.text[start:end]``)
    instead of held a second time: a loaded index keeps one copy of every text (~600 bytes a
    chunk less). Everything else is a :class:`Chunk`; a text set explicitly is held as usual.

    Args:
        id, document_id, index, text, start, end, n_tokens: as :class:`Chunk`; ``text`` may be
            ``None`` when ``document`` is given.
        document: the :class:`Document` the chunk was cut from (its text must contain the
            chunk's text at ``start:end``).
    """

    __slots__ = ("_document",)

    def __init__(
        self, id: str, document_id: str, index: int, text: str | None, start: int, end: int,
        n_tokens: int, document: Document | None = None,
    ) -> None:
        self._document = document
        Chunk.__init__(self, id, document_id, index, text, start, end, n_tokens)  # type: ignore[arg-type]

    @classmethod
    def of(cls, chunk: Chunk, document: Document) -> Chunk:
        """``chunk`` reading its text from ``document`` when ``document.text[start:end]`` is its
        text; ``chunk`` itself otherwise."""
        if isinstance(chunk, DocumentChunk) or document.text[chunk.start : chunk.end] != chunk.text:
            return chunk
        return cls(chunk.id, chunk.document_id, chunk.index, None, chunk.start, chunk.end, chunk.n_tokens, document)

    @classmethod
    def of_documents(cls, chunks: Sequence[Chunk], documents: Mapping[str, Document]) -> list[Chunk]:
        """Every chunk of ``chunks`` as :meth:`of` its document in ``documents`` (``{id:
        Document}``; a chunk whose document is not there is kept as it is), in order."""
        return [c if isinstance(c, cls) or c.document_id not in documents else cls.of(c, documents[c.document_id])
                for c in chunks]

    @property  # type: ignore[override]
    def text(self) -> str:
        own = _CHUNK_TEXT.__get__(self)
        return own if own is not None else self._document.text[self.start : self.end]

    @text.setter
    def text(self, value: str | None) -> None:
        _CHUNK_TEXT.__set__(self, value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Chunk):
            return NotImplemented
        return (self.id, self.document_id, self.index, self.text, self.start, self.end, self.n_tokens) == (
            other.id, other.document_id, other.index, other.text, other.start, other.end, other.n_tokens
        )

    __hash__ = None  # type: ignore[assignment]  (mutable, as Chunk)


@dataclass(slots=True)
class Entity:
    """A knowledge-graph node.

    Attributes:
        id: canonical key (lower-cased, whitespace-folded surface form).
        name: the most frequent surface form seen in the corpus.
        description: text attribute (offline: the sentences that mention it, joined).
        chunk_ids: source chunks, in corpus order, without duplicates.
        weight: occurrence count over the corpus.
        type: entity type from LLM extraction (``"person"``, ``"organization"``, ...;
            ``seed-lightrag.md`` §1.4); ``""`` for statistical entities.
        aliases: ids of the entities entity resolution merged into this one
            (:mod:`graphstrata.resolution`), sorted; ``()`` when none (or resolution off).
    """

    id: str
    name: str
    description: str = ""
    chunk_ids: list[str] = field(default_factory=list)
    weight: float = 0.0
    type: str = ""
    aliases: tuple[str, ...] = ()


@dataclass(slots=True)
class Relation:
    """An undirected knowledge-graph edge between two entities (``source < target``).

    Attributes:
        source, target: entity ids.
        description: text attribute (offline: the sentences where both occur).
        weight: co-occurrence count (or PMI-scaled count, see ``extraction``).
        chunk_ids: source chunks.
        keywords: high-level keywords of the relation from LLM extraction (comma-separated,
            ``seed-lightrag.md`` §1.4), or the relation phrase of an AGRAG triple; ``""``
            for statistical relations.
    """

    source: str
    target: str
    description: str = ""
    weight: float = 0.0
    chunk_ids: list[str] = field(default_factory=list)
    keywords: str = ""

    @property
    def id(self) -> str:
        """``"<source>\u241f<target>"`` (U+241F separates the two entity ids)."""
        return f"{self.source}\u241f{self.target}"


@dataclass(slots=True)
class Community:
    """An attributed community of one hierarchy layer (ArchRAG §3.1.2).

    Attributes:
        id: ``"L<layer>C<index>"``.
        layer: 1 for communities of entities, i+1 for communities of layer-i communities.
        members: ids of the members one layer below (entity ids when ``layer == 1``).
        entity_ids: all entities under this community, flattened.
        title: short title (offline: top TF-IDF terms of the members).
        summary: text attribute (offline: representative member sentences).
        chunk_ids: source chunks of the member entities, most shared first.
        rating: LLM community report's impact rating in [0, 10] (``seed-archrag.md`` §1.4);
            ``None`` without an LLM report.
        findings: the LLM report's findings, ``[{"summary": str, "explanation": str}, ...]``;
            empty without one. With a report, ``summary`` holds the report's summary followed
            by its findings (the text that is embedded as the community vector).
    """

    id: str
    layer: int
    members: list[str] = field(default_factory=list)
    entity_ids: list[str] = field(default_factory=list)
    title: str = ""
    summary: str = ""
    chunk_ids: list[str] = field(default_factory=list)
    rating: float | None = None
    findings: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Hit:
    """One retrieved item.

    Attributes:
        id: id of the record hit (chunk id, entity id, relation id, community id, or a path id).
        text: the text a reader/LLM should see.
        score: relevance in [0, 1], higher is better, non-increasing along one method's
            ranking (docs/python-api.md, "Scores"); the method's own number is in
            ``metadata["raw_score"]``.
        kind: ``"chunk" | "entity" | "relation" | "community" | "path"``.
        layer: hierarchy layer (0 entities/relations, i ≥ 1 communities); ``None`` for chunks/paths.
        chunk_ids: provenance: the chunks the text comes from.
        document_ids: provenance: the documents those chunks belong to (distinct, in order).
        metadata: method-specific extras (e.g. ``{"title": ...}`` for communities).
        explain: why the hit came back, or ``None`` (the default: set only when the method ran
            with ``explain=True``). A small JSON-serialisable dict whose ``reason`` is a
            one-line human summary; the other keys (``layer``, ``similarity``, ``seeds``,
            ``matched_terms``, ``matched_entities``, ``community_path``, ``ppr_mass``,
            ``reasoning_path``, ...) and their units are described in
            :mod:`graphstrata.methods.explain`.
    """

    id: str
    text: str
    score: float
    kind: str
    layer: int | None = None
    chunk_ids: list[str] = field(default_factory=list)
    document_ids: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    explain: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict (used by the CLI's ``--json``); ``"explain"`` is
        included only when the hit has an explanation (so output without ``explain=True`` is
        unchanged)."""
        out = {
            "id": self.id,
            "text": self.text,
            "score": float(self.score),
            "kind": self.kind,
            "layer": self.layer,
            "chunk_ids": list(self.chunk_ids),
            "document_ids": list(self.document_ids),
            "metadata": dict(self.metadata),
        }
        if self.explain is not None:
            out["explain"] = dict(self.explain)
        return out


@dataclass
class Citation:
    """One source an answer cites: its ``[number]`` marker and where that source comes from.

    The numbers are those of the answer prompt: the chunk passages for LightRAG, HiRAG, AGRAG
    and the dense / BM25 / hybrid baselines (``[2]`` is the second passage of the ``Sources``
    / ``Source Documents`` / ``Documents`` list, AGRAG's passages numbered after its paths);
    the analyst reports of the merge call for ArchRAG.

    Attributes:
        number: the ``n`` of the ``[n]`` marker in the answer text (1-based).
        chunk_ids: the chunks behind source ``n``: the passage's own chunk (one id), or for an
            ArchRAG report the chunks of the hits its point rests on; distinct, in order.
        document_ids: the documents of those chunks, distinct, in order.
    """

    number: int
    chunk_ids: list[str] = field(default_factory=list)
    document_ids: list[str] = field(default_factory=list)

    @property
    def chunk_id(self) -> str | None:
        """The first of :attr:`chunk_ids` (the cited passage's chunk, for every method but
        ArchRAG), or ``None`` when the source has no chunk."""
        return self.chunk_ids[0] if self.chunk_ids else None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict: ``{"number", "chunk_ids", "document_ids"}``."""
        return {"number": self.number, "chunk_ids": list(self.chunk_ids), "document_ids": list(self.document_ids)}
