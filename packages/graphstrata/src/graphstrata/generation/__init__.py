"""Answer generation: each method's LLM answer step over the hits its ``retrieve`` returned
(DESIGN.md, "Where the core goes next"; issue 13).

:func:`generate` is the one entry point. Per method:

* ``archrag`` — adaptive filtering (``seed-archrag.md`` §3.2): one filter call per layer
  (stage ``"answer:filter"``, through ``client.map``), scored points sorted and cut to the
  budget, one merge call (``"answer:merge"``); :mod:`.archrag`;
* ``lightrag`` — Entities / Relationships / Sources tables (``seed-lightrag.md`` §2.5–2.6),
  plus Document Chunks (the dense search's chunks) for ``mode="mix"``; :mod:`.lightrag`;
* ``hirag`` — Backgrounds / Reasoning Path / Detail Entity Information / Source Documents
  (``seed-hirag.md`` §3.3); :mod:`.hirag`;
* ``agrag`` — reasoning-path strings and passages, ``Thought:`` / ``Answer:``
  (``seed-agrag.md`` §3); :mod:`.agrag`;
* ``dense``, ``bm25``, ``hybrid`` — a plain RAG prompt over the chunks; :mod:`.naive`.

All but ArchRAG make one call, stage ``"answer"``. The context-table formatting and token
budgets are shared (:mod:`.context`). Each prompt numbers what the model may cite (the chunk
passages; ArchRAG's analyst reports) and asks for ``[n]`` markers, read back as citations
(:mod:`.citations`). :func:`prepare` stops before the last call, so an answer can be
streamed (:class:`AnswerStream`): only that call streams.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..llm.client import LLMClient
from ..types import Hit
from .agrag import AGRAGGenerator
from .archrag import FILTER_STAGE, MERGE_STAGE, SELF_STAGE, ArchRAGGenerator
from .base import ANSWER_STAGE, NO_ANSWER, AnswerStream, FinalCall, GeneratedAnswer, Generator
from .hirag import HiRAGGenerator
from .lightrag import LightRAGGenerator
from .naive import NaiveGenerator

GENERATORS: dict[str, Generator] = {
    g.name: g
    for g in (
        ArchRAGGenerator(),
        LightRAGGenerator(),
        HiRAGGenerator(),
        AGRAGGenerator(),
        NaiveGenerator("dense"),
        NaiveGenerator("bm25"),
        NaiveGenerator("hybrid"),
    )
}
"""The answer step of each method, by method name (the names of ``graphstrata.methods.METHODS``)."""


def generation_options(method: str) -> dict[str, Any]:
    """The answer options of ``method`` with their defaults (a copy).

    Raises:
        ValueError: ``method`` has no answer step.
    """
    return dict(_generator(method).defaults)


def _generator(method: str) -> Generator:
    if not isinstance(method, str) or method not in GENERATORS:
        raise ValueError(f"no answer generation for method {method!r}; known: {', '.join(GENERATORS)}")
    return GENERATORS[method]


def generate(method: str, query: str, hits: Sequence[Hit], client: Any, **options: Any) -> GeneratedAnswer:
    """Answer ``query`` from the ``hits`` that ``method``'s ``retrieve`` returned.

    Args:
        method: a method name (``"archrag"``, ``"lightrag"``, ``"hirag"``, ``"agrag"``,
            ``"dense"``, ``"bm25"``, ``"hybrid"``).
        query: the question (non-empty).
        hits: the retrieved hits, all kinds, in the order ``retrieve`` returned them.
        client: an :class:`~graphstrata.llm.LLMClient` (an LLM or a callable is wrapped in a
            new one, :meth:`LLMClient.of`); its cache and ledger see every call.
        **options: the method's answer options (:func:`generation_options`):
            ``max_context_tokens`` (int ≥ 1 or ``None``; tokens as
            :func:`~graphstrata.llm.estimate_tokens` counts them; lowered to fit the model's
            context window when the client knows it, :meth:`LLMClient.context_budget`),
            ``response_type`` (str); ArchRAG also ``self_answer`` and ``general_knowledge``
            (bool).

    Returns:
        A :class:`GeneratedAnswer`: the answer text, the hits the final prompt used, the raw
        output, the sources the text cites (``[n]`` markers, :mod:`.citations`). With nothing
        to answer from, :data:`NO_ANSWER` and no LLM call.

    Raises:
        ValueError: unknown method, empty query, an unknown option (named) or an option of
            the wrong type or range.
        TypeError: ``hits`` holds something other than :class:`~graphstrata.types.Hit`, or
            ``client`` is no LLM.
        LLMError: an LLM call failed after the client's retries.
        PromptTooLongError: a prompt would still not fit the model's window (never sent).
    """
    gen, o, hits, client = _checked(method, query, hits, client, options)
    return gen.run(query, hits, client, o)


def prepare(method: str, query: str, hits: Sequence[Hit], client: Any, **options: Any) -> GeneratedAnswer | FinalCall:
    """:func:`generate` up to its last LLM call: every call before it is made (ArchRAG's
    filter calls), the last one returned prepared, to send (:meth:`FinalCall.send`, what
    :func:`generate` does) or to stream (:class:`AnswerStream`).

    Args and Raises: as :func:`generate` (the last call's errors come when it is sent).

    Returns:
        A :class:`FinalCall`, or a :class:`GeneratedAnswer` when no call is left to make
        (:data:`NO_ANSWER`, no context).
    """
    gen, o, hits, client = _checked(method, query, hits, client, options)
    return gen.prepare(query, hits, client, o)


def _checked(
    method: str, query: str, hits: Sequence[Hit], client: Any, options: dict[str, Any]
) -> tuple[Generator, dict[str, Any], list[Hit], LLMClient]:
    """The generator, checked options (the budget fitted to the window), hits and client."""
    gen = _generator(method)
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be a non-empty string")
    o = gen.options(options)
    hits = list(hits)
    bad = next((h for h in hits if not isinstance(h, Hit)), None)
    if bad is not None:
        raise TypeError(f"hits must be Hit objects, got {type(bad).__name__}")
    client = LLMClient.of(client)
    if "max_context_tokens" in o:  # fit the model's window (unchanged when it is unknown)
        o = {**o, "max_context_tokens": client.context_budget(o["max_context_tokens"], query + TEMPLATE_ALLOWANCE)}
    return gen, o, hits, client


#: text standing for a generation prompt's fixed parts (system prompt, instructions, table
#: headers and numbering) when a budget is fitted to the model's window: 2,000 characters,
#: above the longest of our answer templates (about 1,000)
TEMPLATE_ALLOWANCE = " " * 2000


__all__ = [
    "ANSWER_STAGE",
    "AnswerStream",
    "FILTER_STAGE",
    "FinalCall",
    "GENERATORS",
    "MERGE_STAGE",
    "NO_ANSWER",
    "SELF_STAGE",
    "GeneratedAnswer",
    "Generator",
    "generate",
    "generation_options",
    "prepare",
]
