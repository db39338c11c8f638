"""What :meth:`GraphStrata.answer <graphstrata.GraphStrata.answer>` returns: an
:class:`Answer`, or with ``stream=True`` a :class:`StreamingAnswer` (``aanswer``: an
:class:`AsyncStreamingAnswer`) that gives the answer's text as it is written and then the
same :class:`Answer`.

A streamed answer runs retrieval and every LLM step but the last (LightRAG keywords, AGRAG's
fact filter, ArchRAG's filter calls) before it is returned; only the last call (the answer,
ArchRAG's merge) streams, while the caller reads it. Its cost is counted in the answer's own
``usage``, as for an answer returned at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .generation import AnswerStream, FinalCall, GeneratedAnswer
from .llm import Ledger, LLMClient, usage_scope
from .types import Citation, Hit

__all__ = ["Answer", "AsyncStreamingAnswer", "PendingAnswer", "StreamingAnswer"]


@dataclass
class Answer:
    """What :meth:`GraphStrata.answer <graphstrata.GraphStrata.answer>` returns.

    Attributes:
        text: the generated answer, with the ``[n]`` markers it cites its sources by.
        hits: the hits the answer was generated from (chunks and the method's context).
        usage: LLM calls and tokens of this query, per stage and in total (see
            :attr:`GraphStrata.build_usage <graphstrata.GraphStrata.build_usage>` for the shape).
        method: the method used.
        query: the question.
        fallbacks: the LLM steps of this query that fell back, one note each
            (``"keywords: offline fallback, unreadable answer"``,
            ``"fact_filter: offline fallback, unreadable answer"``,
            ``"filter: unreadable answer, its context dropped"``, ...); empty when every
            step used the model's answer.
        citations: the sources ``text`` cites, in order of first citation: ``[n]`` is the
            n-th passage of the answer prompt (ArchRAG: the n-th analyst report), mapped to its
            chunk and document ids (:class:`~graphstrata.types.Citation`); numbers the prompt
            gave no source are ignored; ``[]`` when the answer cites nothing.
    """

    text: str
    hits: list[Hit] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    query: str = ""
    fallbacks: list[str] = field(default_factory=list)
    citations: list[Citation] = field(default_factory=list)

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict (the CLI's ``--json``)."""
        return {
            "query": self.query,
            "method": self.method,
            "answer": self.text,
            "usage": self.usage,
            "fallbacks": list(self.fallbacks),
            "citations": [c.to_dict() for c in self.citations],
            "hits": [h.to_dict() for h in self.hits],
        }


@dataclass
class PendingAnswer:
    """An answer with every step done but its last LLM call (what ``GraphStrata.answer``
    prepares; :meth:`send` or the streaming classes finish it).

    Attributes:
        query, method: the question and the method.
        client: the LLM client the answer is written with.
        ledger: the usage of this query so far (the last call is counted in it too).
        step: the prepared last call, or the answer itself when no call is left
            (:func:`graphstrata.generation.prepare`).
    """

    query: str
    method: str
    client: LLMClient
    ledger: Ledger
    step: GeneratedAnswer | FinalCall

    @property
    def hits(self) -> list[Hit]:
        """The hits the answer is generated from (known before the last call)."""
        return list(self.step.used_hits)

    def answer(self, out: GeneratedAnswer) -> Answer:
        """The :class:`Answer` of the generated ``out``, with this query's usage and fallbacks."""
        return Answer(
            text=out.text, hits=list(out.used_hits), usage=self.ledger.to_dict(), method=self.method,
            query=self.query, fallbacks=list(self.ledger.fallbacks), citations=list(out.citations),
        )

    def send(self) -> Answer:
        """Make the last call at once and return the answer.

        Raises:
            graphstrata.llm.LLMError: the call failed after its retries.
        """
        with usage_scope(self.ledger):
            out = self.step if isinstance(self.step, GeneratedAnswer) else self.step.send(self.client)
        return self.answer(out)


class _StreamState:
    """What both streamed answers hold: the pending answer, its last call's stream, the pieces
    read so far (an iterator, sync or async), the final :class:`Answer` once the stream ended,
    the error it ended with, and the question, method and hits known before the first piece."""

    def __init__(self, pending: PendingAnswer) -> None:
        self._pending = pending
        self._stream = AnswerStream(pending.step, pending.client)
        self._pieces: Any = None
        self._answer: Answer | None = None
        self._error: Exception | None = None
        self.query, self.method = pending.query, pending.method
        self.hits = pending.hits

    def __repr__(self) -> str:
        state = "done" if self._answer is not None else "streaming"
        return f"{type(self).__name__}({self.query!r}, method={self.method!r}, {state})"

    @property
    def done(self) -> bool:
        """Whether the stream has ended (every piece given)."""
        return self._answer is not None

    def _ended(self) -> bool:
        """Whether the stream has ended (the answer is made).

        Raises:
            Exception: the error an earlier read raised (the answer will not come).
        """
        if self._answer is None and self._error is not None:
            raise self._error
        return self._answer is not None

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """One read of the last call's pieces: counted in this query's usage; an error is
        kept and raised again on every later read."""
        try:
            with usage_scope(self._pending.ledger):
                yield
        except Exception as exc:
            self._error = exc
            raise

    def _finish(self) -> None:
        """The stream gave its last piece: make the final :class:`Answer` from its result."""
        assert self._stream.result is not None
        self._answer = self._pending.answer(self._stream.result)


class StreamingAnswer(_StreamState):
    """An answer given as it is written: iterate it (once) for its text pieces, then read
    :attr:`answer`.

    ``"".join(pieces) == stream.answer.text``, and :attr:`answer` is the :class:`Answer` that
    ``answer(..., stream=False)`` returns for the same model output (text, hits, usage,
    fallbacks, citations). Pieces are what the model streamed, less the whitespace around the
    answer (and, for AGRAG, everything before its ``Answer:``). An LLM that cannot stream, a
    cached response, and an answer with no context (no call) come as one piece.

    Attributes:
        query, method: the question and the method.
        hits: the hits the answer is generated from, known before the first piece (show the
            sources while the text streams).

    Raises (while iterating, and again on every later read of the stream or :attr:`answer`):
        graphstrata.llm.LLMError: the last call failed (transient errors before the first
            piece are retried; after it, the stream ends with the error).
    """


    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        if self._ended():
            raise StopIteration
        if self._pieces is None:
            self._pieces = iter(self._stream)
        with self._reading():  # the last call counts in this query's usage
            piece = next(self._pieces, None)
        if piece is None:
            self._finish()
            raise StopIteration
        return piece

    @property
    def answer(self) -> Answer:
        """The final :class:`Answer`. Read before the stream ended, it reads the remaining
        pieces first (they are then no longer given by iteration)."""
        for _ in self:
            pass
        assert self._answer is not None
        return self._answer


class AsyncStreamingAnswer(_StreamState):
    """:class:`StreamingAnswer` for ``async for`` (what ``await GraphStrata.aanswer(...,
    stream=True)`` returns): the last call streams on the running event loop when the LLM has
    an async stream, else its blocking stream is read in a worker thread.

    :attr:`answer` is available once the iteration has ended; ``await`` :meth:`get_answer`
    to read the rest of the stream and get it.

    Raises (while iterating):
        graphstrata.llm.LLMError: as :class:`StreamingAnswer`.
    """

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        if self._ended():
            raise StopAsyncIteration
        if self._pieces is None:
            self._pieces = aiter(self._stream)
        with self._reading():
            piece = await anext(self._pieces, None)
        if piece is None:
            self._finish()
            raise StopAsyncIteration
        return piece

    @property
    def answer(self) -> Answer:
        """The final :class:`Answer`.

        Raises:
            RuntimeError: the stream has not ended yet (``async for`` it, or ``await``
                :meth:`get_answer`).
            graphstrata.llm.LLMError: the stream ended with that error.
        """
        if self._error is not None:
            raise self._error
        if self._answer is None:
            raise RuntimeError("the answer is still streaming: iterate it to the end, or await get_answer()")
        return self._answer

    async def get_answer(self) -> Answer:
        """Read the remaining pieces (they are then no longer given by iteration) and return
        the final :class:`Answer`."""
        async for _ in self:
            pass
        return self.answer
