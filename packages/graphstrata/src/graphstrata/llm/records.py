"""What an LLM-extracted index keeps of its extraction: the answers, per chunk (issue 29).

An index whose graph the LLM extracted (:class:`~graphstrata.indexing.LLMExtractor`,
:class:`~graphstrata.indexing.AgragLLMExtractor`) keeps, for every chunk, the raw answers its
extraction prompts got (:class:`LLMRecord`), and the LLM summaries of merged descriptions keyed
by their prompt (:class:`LLMAnswers`). Parsing, grounding and merging those answers again costs
no call and gives the same entities and relations as the build, so an incremental update asks
the LLM only for chunks without a valid record (new chunks, or chunks whose prompt changed),
whether or not a response cache (:mod:`graphstrata.llm.cache`) exists. They are persisted
with the index (:mod:`graphstrata.store`, tables ``llm_records`` and ``llm_summaries``).

The other build-time LLM stages keep their answers the same way (:attr:`LLMAnswers.stages`,
tables ``llm_answers`` and ``llm_answer_owners``): ArchRAG community reports
(``"community_reports:layer_<k>"``), HiRAG summary entities (``"hirag_summaries"``) and HiRAG
community reports (``"hirag_reports"``). While a build or an update runs, an
:class:`AnswerBook` is open (:func:`keeping_answers`); those stages complete their prompts
through :func:`kept_map`, which answers a prompt from the previous state's kept answers when
it has one under the same :func:`answer_key` (stage family, system prompt, prompt, JSON mode)
and sends the others through the client (response cache first), and records every answer
used. The new state keeps exactly the answers its communities and its HiRAG index were made
from, so the store does not grow with every update.

A record is valid only for the prompt it was asked with: its :attr:`LLMRecord.key` hashes the
extractor kind and everything that makes the chunk's first prompt (system prompt, template,
chunk text, entity types, language, examples flag, title) and the gleaning setting
(:func:`record_key`); a chunk whose text changed under the same id gets another key and is
asked again. The model id is not part of the key: the records belong to the index, as its
entities do (``state.llm_id`` names the model that built it), and an update through a client
with other settings does not re-extract the corpus.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import json
import threading
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .base import LLMRequest, LLMResponse

#: zlib level of a record's answers (the answers repeat the chunk's names: ~4× smaller)
ANSWERS_ZLIB_LEVEL = 1

__all__ = [
    "ANSWERS_ZLIB_LEVEL",
    "AnswerBook",
    "LLMAnswers",
    "LLMRecord",
    "answer_key",
    "current_book",
    "keeping_answers",
    "kept_map",
    "record_key",
]


def record_key(*parts: str) -> str:
    """A 32-hex-digit hash of ``parts`` (sha256 of each part's UTF-8 bytes, each followed by a
    NUL): the key of an :class:`LLMRecord` or of a stored summary.

    Args:
        parts: what determines the prompt(s) (kind, system prompt, prompt, settings).
    """
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class LLMRecord:
    """The LLM's answers for one chunk, as its extraction asked for them.

    Attributes:
        key: :func:`record_key` of what determined the prompts; the record answers a chunk
            only while asking again would send the same prompts.
        packed: the answers as zlib-compressed JSON (a list of strings; what the store
            persists). LightRAG / HiRAG: the first extraction answer, then one per gleaning
            pass the chunk took; AGRAG: the triple answer.
    """

    key: str
    packed: bytes

    @classmethod
    def of(cls, key: str, answers: Sequence[str]) -> LLMRecord:
        """The record of ``answers`` (a sequence of strings) under ``key``."""
        text = json.dumps(list(answers), ensure_ascii=False)
        return cls(key, zlib.compress(text.encode("utf-8", "surrogatepass"), ANSWERS_ZLIB_LEVEL))

    def answers(self) -> list[str] | None:
        """The answers, or ``None`` when the stored bytes are not a list of strings (a damaged
        record: the extractor then asks again rather than lose the chunk's entities)."""
        try:
            value = json.loads(zlib.decompress(self.packed).decode("utf-8", "surrogatepass"))
        except (zlib.error, UnicodeDecodeError, ValueError, TypeError):
            return None
        if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
            return None
        return value


@dataclass(frozen=True)
class LLMAnswers:
    """The LLM answers an extracted graph was made from: what an update re-reads instead of
    asking again.

    Attributes:
        records: ``{chunk_id: LLMRecord}``, one per chunk of the index (a chunk without one,
            e.g. in an index persisted before issue 29, is asked again through the client and
            its response cache).
        summaries: ``{key: summary}`` of the merged descriptions the LLM summarised
            (``"extract:summaries"``), keyed by :func:`record_key` of the summary prompt: an
            entity or relation whose description inputs did not change finds its summary
            here. Only the summaries the current graph uses are kept.
        stages: ``{key: LLMRecord}`` of the other build-time stages' answers (ArchRAG and
            HiRAG community reports, HiRAG summary entities), keyed by :func:`answer_key`;
            each record holds one answer (the model's raw text, unparsed). Only the answers
            the state's communities and HiRAG index were made from are kept.
        owners: ``{community_id: key}``: the :attr:`stages` key of the answer each ArchRAG
            community's report was read from (an update carries the answers of the
            communities it does not re-describe through this map, and drops those of the
            communities it removes or re-describes).
    """

    records: Mapping[str, LLMRecord] = field(default_factory=dict)
    summaries: Mapping[str, str] = field(default_factory=dict)
    stages: Mapping[str, LLMRecord] = field(default_factory=dict)
    owners: Mapping[str, str] = field(default_factory=dict)


def answer_key(stage: str, request: LLMRequest) -> str:
    """The :attr:`LLMAnswers.stages` key of ``request`` asked in ``stage``: :func:`record_key`
    of the stage family (``stage`` up to its first ``:``, so every layer of
    ``"community_reports:layer_<k>"`` shares one family), the system prompt, the prompt and the
    JSON mode. The model id and its settings are not part of it, as for the extraction
    records: the answers belong to the index."""
    family = stage.split(":", 1)[0]
    return record_key(
        "answer", family, request.system or "", request.prompt, "json" if request.json_mode else "text"
    )


class AnswerBook:
    """The stage answers one build or update may reuse and those it used.

    Args:
        known: the previous state's answers (``state.llm_answers``; ``None``: none).

    Attributes:
        known: as given.
        used: ``{key: LLMRecord}`` of every answer a stage read through :func:`kept_map` while
            this book was open (kept or asked), and those :meth:`carry` took over.
        owners: ``{community_id: key}`` of the ArchRAG communities whose report was read
            from an answer (:meth:`own`, :meth:`carry`).
    """

    def __init__(self, known: LLMAnswers | None = None) -> None:
        self.known = known
        self.used: dict[str, LLMRecord] = {}
        self.owners: dict[str, str] = {}
        self._lock = threading.Lock()

    def lookup(self, key: str) -> str | None:
        """The answer kept (or already used in this run) under ``key``; ``None`` when there is
        none or its record is damaged (the prompt is then asked again)."""
        with self._lock:
            rec = self.used.get(key)
        if rec is None and self.known is not None:
            rec = self.known.stages.get(key)
        if rec is None:
            return None
        answers = rec.answers()
        if answers is None or len(answers) != 1:
            return None
        with self._lock:
            self.used.setdefault(key, rec)
        return answers[0]

    def record(self, key: str, answer: str) -> None:
        """Keep ``answer`` (a new one) under ``key``."""
        rec = LLMRecord.of(key, [answer])
        with self._lock:
            self.used[key] = rec

    def own(self, owner: str, key: str | None) -> None:
        """Note that community ``owner``'s report was read from the answer under ``key``
        (``None``: no answer, e.g. an empty context; any earlier owner entry is dropped)."""
        with self._lock:
            if key is None:
                self.owners.pop(owner, None)
            else:
                self.owners[owner] = key

    def carry(self, owner: str) -> None:
        """Keep the answer community ``owner``'s report was read from in the previous state
        (an update that leaves its report as it was); nothing when it had none."""
        known = self.known
        key = known.owners.get(owner) if known is not None else None
        rec = known.stages.get(key) if known is not None and key is not None else None
        if rec is None:
            return
        with self._lock:
            self.used.setdefault(key, rec)
            self.owners[owner] = key

    def answers(self, base: LLMAnswers | None) -> LLMAnswers | None:
        """``base`` (the extraction's answers, or ``None``) with this book's stage answers and
        owners; ``None`` when both are empty. Owners whose answer was not used are left out."""
        with self._lock:
            used = dict(self.used)
            owners = {o: k for o, k in self.owners.items() if k in used}
        if base is None and not used:
            return None
        return dataclasses.replace(base if base is not None else LLMAnswers(), stages=used, owners=owners)


_BOOK: contextvars.ContextVar[AnswerBook | None] = contextvars.ContextVar("graphstrata_answer_book", default=None)


@contextmanager
def keeping_answers(known: LLMAnswers | None) -> Iterator[AnswerBook]:
    """Open an :class:`AnswerBook` over ``known`` for this context (a build or an update): the
    stages' :func:`kept_map` calls read and record in it. Nested blocks have their own book
    (a fallback build inside an update keeps what the build used)."""
    book = AnswerBook(known)
    token = _BOOK.set(book)
    try:
        yield book
    finally:
        _BOOK.reset(token)


def current_book() -> AnswerBook | None:
    """The :class:`AnswerBook` of the enclosing :func:`keeping_answers` block, or ``None``."""
    return _BOOK.get()


def kept_map(client: Any, requests: Sequence[LLMRequest], stage: str) -> list[tuple[LLMResponse, str | None]]:
    """:meth:`~graphstrata.llm.LLMClient.map` that first reads the open book's kept answers.

    Outside a :func:`keeping_answers` block this is ``client.map(requests, stage)``. Inside
    one, a request whose :func:`answer_key` the book knows (kept by the previous state, or
    already answered in this build or update, the same prompt earlier in this batch included)
    is answered with that text (no call; counted as ``kept`` in the ledger,
    :meth:`~graphstrata.llm.LLMClient.count_kept`, with no tokens); each other distinct prompt
    goes once through ``client.map`` (response cache, then the model: counted there as a call
    or as ``cached``) and its answer is recorded. The caller parses and checks every answer the same way,
    whichever way it came.

    Args:
        client: an :class:`~graphstrata.llm.LLMClient`.
        requests: the prompts, in order.
        stage: the ledger stage (its family names the answers, :func:`answer_key`).

    Returns:
        ``(response, key)`` per request, in input order; ``key`` is the answer's
        :func:`answer_key` inside a book, ``None`` outside one.

    Raises:
        LLMError: a call failed after its retries.
    """
    from .base import LLMResponse, Usage

    book = current_book()
    if book is None:
        return [(r, None) for r in client.map(requests, stage)]
    keys = [answer_key(stage, r) for r in requests]
    out: list[tuple[LLMResponse, str | None] | None] = [None] * len(requests)
    todo: dict[str, int] = {}  # key -> first request asking it
    for i, key in enumerate(keys):
        if key in todo:
            continue
        text = book.lookup(key)
        if text is None:
            todo[key] = i
        else:
            out[i] = (LLMResponse(text, Usage(0, 0)), key)
    asked = list(todo.values())
    if asked:
        for i, resp in zip(asked, client.map([requests[i] for i in asked], stage), strict=True):
            book.record(keys[i], resp.text)
            out[i] = (resp, keys[i])
    kept = 0
    was_asked = set(asked)
    for i, key in enumerate(keys):
        if out[i] is None:  # the same prompt as an earlier request of this batch
            out[i] = (out[todo[key]][0], key)  # type: ignore[index]
            kept += 1
        elif i not in was_asked:
            kept += 1
    if kept:
        client.count_kept(stage, kept)
    return out  # type: ignore[return-value]
