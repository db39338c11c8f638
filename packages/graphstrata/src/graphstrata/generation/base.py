"""What every answer step shares: the result type, the prepared last call (sent at once or
streamed), the option checking, the stage names and the "no context" answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from ..llm.base import LLMRequest
from ..llm.client import LLMClient
from ..llm.parsing import StrippedText
from ..methods.base import OptionSpec, check_options
from ..types import Citation, Hit
from .citations import citations
from .context import Table, fit, numbered, render, rows_of, used_hits

#: ledger stage of a one-call answer (LightRAG, HiRAG, AGRAG, the baselines)
ANSWER_STAGE = "answer"

NO_ANSWER = "I don't know: the retrieved context does not answer this question."
"""The answer when there is nothing to answer from (no usable hits; for ArchRAG, no point
scored above 0), returned without an LLM call (``seed-lightrag.md`` §2.4 "fail response",
``seed-archrag.md`` §3.2)."""


@dataclass
class GeneratedAnswer:
    """The answer of one query.

    Attributes:
        text: the answer (for AGRAG the text after ``Answer:``; :data:`NO_ANSWER` when
            there was no context).
        used_hits: the hits the prompt that wrote the answer showed, in the order shown,
            de-duplicated (for ArchRAG: the hits behind the points that reached the merge
            prompt); ``[]`` with :data:`NO_ANSWER`.
        raw: the model's full output for the final call (``""`` when no call was made).
        citations: the sources the text cites by ``[n]`` (:mod:`.citations`), in order of
            first citation; ``[]`` when it cites none.
    """

    text: str
    used_hits: list[Hit] = field(default_factory=list)
    raw: str = ""
    citations: list[Citation] = field(default_factory=list)


class TextReader(Protocol):
    """Reads the answer out of a model's output as it streams (:class:`StrippedText`,
    AGRAG's :class:`~graphstrata.llm.prompts.agrag_query.AnswerText`): ``feed`` each piece,
    then ``end``; what they return joins to the answer text, however the output is cut."""

    def feed(self, delta: str) -> str: ...

    def end(self) -> str: ...


@dataclass(frozen=True)
class FinalCall:
    """The last LLM call of an answer step, prepared and not yet sent: what
    :meth:`Generator.prepare` returns when there is something to answer from.

    Attributes:
        request: the prompt.
        stage: its ledger stage (``"answer"``, ArchRAG ``"answer:merge"``).
        used_hits: the hits the prompt shows (:attr:`GeneratedAnswer.used_hits`).
        sources: ``{n: hits}``: what the prompt numbers as citable source ``n`` (the chunk
            passages; ArchRAG's analyst reports); :mod:`.citations` reads the ``[n]``
            markers of the answer against it.
        reader: makes the :class:`TextReader` that takes the answer out of the output
            (default :class:`~graphstrata.llm.parsing.StrippedText`: the output stripped).
    """

    request: LLMRequest
    stage: str
    used_hits: list[Hit]
    sources: Mapping[int, tuple[Hit, ...]] = field(default_factory=dict)
    reader: Callable[[], TextReader] = StrippedText

    def finish(self, output: str) -> GeneratedAnswer:
        """The answer from the model's complete ``output``: its text (read by :attr:`reader`),
        the hits shown, the output, and the citations of the text."""
        reader = self.reader()
        text = reader.feed(output) + reader.end()
        return GeneratedAnswer(text, list(self.used_hits), output, citations(text, self.sources))

    def send(self, client: LLMClient) -> GeneratedAnswer:
        """Make the call (:meth:`LLMClient.request`) and :meth:`finish` with its output.

        Raises:
            LLMError: the call failed after the client's retries.
        """
        return self.finish(client.request(self.request, self.stage).text)


class AnswerStream:
    """The last call of an answer step streamed: iterate it (``for`` or ``async for``, once)
    for the answer's text pieces; when the iteration has ended, :attr:`result` holds the same
    :class:`GeneratedAnswer` that :meth:`FinalCall.send` would have returned for that output.

    The pieces are what the step's :attr:`FinalCall.reader` shows of the output as it arrives
    (text after AGRAG's ``Answer:`` only; leading and trailing whitespace held back), so they
    join to ``result.text``. A step with nothing to answer from (a :class:`GeneratedAnswer`
    given instead of a :class:`FinalCall`) gives its text as one piece, without a call.

    Args:
        step: what :meth:`Generator.prepare` returned.
        client: the client to stream the call through (:meth:`LLMClient.stream_request` /
            :meth:`LLMClient.astream_request`: an LLM that cannot stream gives one piece).

    Raises (while iterating):
        LLMError: the call failed (see :meth:`LLMClient.stream_request` for retries).
    """

    def __init__(self, step: GeneratedAnswer | FinalCall, client: LLMClient) -> None:
        self.step = step
        self.client = client
        self.result: GeneratedAnswer | None = step if isinstance(step, GeneratedAnswer) else None

    def __iter__(self) -> Iterator[str]:
        relay = _Relay(self.step)
        if relay.done:
            yield from relay.pieces()
            return
        for delta in self.client.stream_request(self.step.request, self.step.stage):
            yield from relay.feed(delta)
        yield from relay.pieces()
        self.result = relay.finish()

    async def __aiter__(self) -> AsyncIterator[str]:
        relay = _Relay(self.step)
        if not relay.done:
            async for delta in self.client.astream_request(self.step.request, self.step.stage):
                for shown in relay.feed(delta):
                    yield shown
        for piece in relay.pieces():
            yield piece
        if not relay.done:
            self.result = relay.finish()


class _Relay:
    """A step's output on its way to the reader of an answer stream: a
    :class:`GeneratedAnswer`'s text as it is (``done``), or the last call's deltas, each kept
    and the part the step's reader shows given on, then the reader's rest."""

    def __init__(self, step: GeneratedAnswer | FinalCall) -> None:
        self.step = step
        self.done = isinstance(step, GeneratedAnswer)
        self.reader = None if self.done else step.reader()
        self.output: list[str] = []

    def feed(self, delta: str) -> list[str]:
        """The text to show for ``delta`` (none or one piece)."""
        self.output.append(delta)
        shown = self.reader.feed(delta)
        return [shown] if shown else []

    def pieces(self) -> list[str]:
        """What is left to show (none or one piece): a made answer's text, or the reader's
        rest once the call's output ended."""
        rest = self.step.text if self.done else self.reader.end()
        return [rest] if rest else []

    def finish(self) -> GeneratedAnswer:
        """The answer of the last call's whole output."""
        return self.step.finish("".join(self.output))


class Generator:
    """One method family's answer step.

    Subclasses set ``name``, ``defaults`` (every option, with its default) and optionally
    ``option_specs`` (checked like method options, :func:`~graphstrata.methods.base.check_options`),
    and implement :meth:`prepare`: every call but the last made, the last one prepared, so
    the same step answers at once (:meth:`run`) or streamed (:class:`AnswerStream`).
    """

    name: ClassVar[str] = ""
    defaults: ClassVar[Mapping[str, Any]] = {}
    option_specs: ClassVar[Mapping[str, OptionSpec]] = {}

    def options(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """``given`` over :attr:`defaults`, checked.

        Raises:
            ValueError: an unknown option (naming it and listing the known ones) or a value
                of the wrong type or range.
        """
        return check_options(f"answer generation {self.name!r}", self.defaults, self.option_specs, given)

    def prepare(
        self, query: str, hits: Sequence[Hit], client: LLMClient, o: Mapping[str, Any]
    ) -> GeneratedAnswer | FinalCall:
        """Make every LLM call of the step but the last (ArchRAG's filter calls) and return
        the last one prepared; or the answer itself when no call is left to make
        (:data:`NO_ANSWER`)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def run(self, query: str, hits: Sequence[Hit], client: LLMClient, o: Mapping[str, Any]) -> GeneratedAnswer:
        """Answer ``query`` from ``hits`` with checked options ``o``: :meth:`prepare`, then
        :meth:`FinalCall.send`."""
        step = self.prepare(query, hits, client, o)
        return step if isinstance(step, GeneratedAnswer) else step.send(client)


def answer_from_tables(
    query: str,
    tables: Sequence[Table],
    o: Mapping[str, Any],
    request: Callable[[str, str, str], LLMRequest],
    reader: Callable[[], TextReader] = StrippedText,
    keep_empty: bool = True,
    continuous: bool = False,
) -> GeneratedAnswer | FinalCall:
    """The one-call answer step, prepared: cut ``tables`` to ``o["max_context_tokens"]``
    (:func:`~.context.fit`), render them, and make the request (stage ``"answer"``).

    Args:
        request: ``request(query, context, response_type) -> LLMRequest`` (the method's
            prompt module).
        reader: makes the reader of the answer in the model's output (default: the output,
            stripped).
        keep_empty: render tables left without rows (their headers), as LightRAG and HiRAG
            show every section; ``False`` drops them.
        continuous: number rows across tables rather than from 1 in each
            (:func:`~.context.render`).

    Returns:
        The call, with the hits of the rows shown and, as its citable sources, the rows that
        show a chunk (by their id in the prompt); :data:`NO_ANSWER` when no row is left.
    """
    kept = fit(tables, o["max_context_tokens"], continuous)
    rows = rows_of(kept)
    if not rows:
        return GeneratedAnswer(NO_ANSWER)
    if not keep_empty:
        kept = [t for t in kept if t.rows]
    sources: dict[int, tuple[Hit, ...]] = {}
    for rid, _, row in numbered(kept, continuous):
        if row.hits and all(h.kind == "chunk" for h in row.hits):
            sources.setdefault(rid, row.hits)
    req = request(query, render(kept, continuous), o["response_type"])
    return FinalCall(req, ANSWER_STAGE, used_hits(rows), sources, reader)


#: ``max_context_tokens``: a budget in tokens (``estimate_tokens``), ``None`` = no limit
BUDGET = OptionSpec("int", ge=1, optional=True)
#: ``response_type``: the target length and format, in words
RESPONSE_TYPE = OptionSpec("str")

__all__ = [
    "ANSWER_STAGE",
    "answer_from_tables",
    "AnswerStream",
    "BUDGET",
    "FinalCall",
    "NO_ANSWER",
    "RESPONSE_TYPE",
    "GeneratedAnswer",
    "Generator",
    "TextReader",
]
