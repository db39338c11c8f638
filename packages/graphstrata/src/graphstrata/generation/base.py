"""What every answer step shares: the result type, the option checking, the stage names and
the "no context" answer."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..llm.base import LLMRequest
from ..llm.client import LLMClient
from ..methods.base import OptionSpec, check_options
from ..types import Hit
from .context import Table, fit, render, rows_of, used_hits

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
    """

    text: str
    used_hits: list[Hit] = field(default_factory=list)
    raw: str = ""


class Generator:
    """One method family's answer step.

    Subclasses set ``name``, ``defaults`` (every option, with its default) and optionally
    ``option_specs`` (checked like method options, :func:`~graphstrata.methods.base.check_options`),
    and implement :meth:`run`.
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

    def run(self, query: str, hits: Sequence[Hit], client: LLMClient, o: Mapping[str, Any]) -> GeneratedAnswer:
        """Answer ``query`` from ``hits`` with checked options ``o``."""
        raise NotImplementedError  # pragma: no cover - abstract


def answer_from_tables(
    query: str,
    tables: Sequence[Table],
    client: LLMClient,
    o: Mapping[str, Any],
    request: Callable[[str, str, str], LLMRequest],
    parse: Callable[[str], str] = str.strip,
    keep_empty: bool = True,
    continuous: bool = False,
) -> GeneratedAnswer:
    """The one-call answer step: cut ``tables`` to ``o["max_context_tokens"]``
    (:func:`~.context.fit`), render them, and ask ``client`` once (stage ``"answer"``).

    Args:
        request: ``request(query, context, response_type) -> LLMRequest`` (the method's
            prompt module).
        parse: the answer in the model's output (default: the output, stripped).
        keep_empty: render tables left without rows (their headers), as LightRAG and HiRAG
            show every section; ``False`` drops them.
        continuous: number rows across tables rather than from 1 in each
            (:func:`~.context.render`).

    Returns:
        The answer, the hits of the rows shown, and the raw output; :data:`NO_ANSWER`
        without a call when no row is left.

    Raises:
        LLMError: the call failed after the client's retries.
    """
    kept = fit(tables, o["max_context_tokens"], continuous)
    rows = rows_of(kept)
    if not rows:
        return GeneratedAnswer(NO_ANSWER)
    if not keep_empty:
        kept = [t for t in kept if t.rows]
    out = client.request(request(query, render(kept, continuous), o["response_type"]), ANSWER_STAGE).text
    return GeneratedAnswer(parse(out), used_hits(rows), out)


#: ``max_context_tokens``: a budget in tokens (``estimate_tokens``), ``None`` = no limit
BUDGET = OptionSpec("int", ge=1, optional=True)
#: ``response_type``: the target length and format, in words
RESPONSE_TYPE = OptionSpec("str")

__all__ = [
    "ANSWER_STAGE",
    "answer_from_tables",
    "BUDGET",
    "NO_ANSWER",
    "RESPONSE_TYPE",
    "GeneratedAnswer",
    "Generator",
]
