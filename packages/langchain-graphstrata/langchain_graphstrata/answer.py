"""`GraphStrataAnswerer`: a ready Runnable that answers with the method's own generation.

A plain LCEL RAG chain (``retriever | format_docs | prompt | model``) answers with your prompt
over the retrieved chunks. Each graph-RAG paper also specifies its own answer step, which this
Runnable runs through ``GraphStrata.answer``: ArchRAG's adaptive filtering-based generation
(one filter call per community layer, then a merge call), LightRAG's and HiRAG's answer prompts
over their entity / relation / community contexts, AGRAG's answer over its reasoning path, and
a plain RAG prompt for the dense / BM25 / hybrid baselines.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, Field

from graphstrata.retrieval import RetrieveRequest

from langchain_graphstrata.conversion import hits_to_documents
from langchain_graphstrata.llms import to_graphstrata_llm

#: Keys of a dict input that hold the question, in the order they are looked up.
QUESTION_KEYS: tuple[str, ...] = ("question", "input", "query")


@runtime_checkable
class AnswerRetriever(Protocol):
    """What :class:`GraphStrataAnswerer` needs of its retriever: the settings and checks of a
    :class:`~langchain_graphstrata.GraphStrataRetriever` (which has all of them) and its index.
    """

    method: str
    llm: Any

    @property
    def graphstrata(self) -> Any:
        """The ``graphstrata.GraphStrata`` to answer from."""
        ...

    def check_method(self, method: str) -> None:
        """Raise ``ValueError`` unless ``method`` is one of the index's methods."""
        ...

    def call_arguments(self, kwargs: dict[str, Any]) -> RetrieveRequest:
        """One call's resolved retrieval arguments (raises ``ValueError`` for a bad one)."""
        ...


def _question(value: Any) -> str:
    if isinstance(value, str):
        question = value
    elif isinstance(value, Mapping):
        key = next((k for k in QUESTION_KEYS if k in value), None)
        if key is None:
            raise ValueError(
                f"GraphStrataAnswerer input dict needs a 'question' key (or 'input' / 'query'), got keys "
                f"{sorted(map(str, value))}"
            )
        question = value[key]
    else:
        raise TypeError(
            f"GraphStrataAnswerer takes a question string or {{'question': ...}}, got {type(value).__name__}"
        )
    if not isinstance(question, str) or not question.strip():
        raise ValueError("the question must be a non-empty string")
    return question


class GraphStrataAnswerer(RunnableSerializable[Any, dict[str, Any]]):
    """Answer questions with a graphstrata method's own generation step.

    Input: a question string, or a dict with ``"question"`` (``"input"`` and ``"query"`` are
    accepted too, as other LangChain chains name it). Output: a dict

    * ``"answer"``: the generated answer (``str``);
    * ``"context"``: the hits the answer was generated from, as LangChain ``Document``s
      (chunks first, then the method's graph context; metadata as
      :func:`~langchain_graphstrata.conversion.hit_to_document` writes it) — the key
      ``create_retrieval_chain`` uses for its documents;
    * ``"usage"``: the LLM calls and tokens this question spent, per stage and in total
      (``{"stages": {...}, "total": {"calls", "cached", "prompt_tokens",
      "completion_tokens", "estimated", "skipped"}}``; ``estimated`` is true when the model
      reported no token counts);
    * ``"fallbacks"``: the LLM steps of this question that fell back, one note each
      (``"keywords: offline fallback, unreadable answer"``; ``[]`` when every step used the
      model's answer: graphstrata's ``Answer.fallbacks``);
    * ``"question"`` and ``"method"``.

    Take the text alone with ``answerer.pick("answer")`` (or ``| itemgetter("answer")``).

    The method, ``k`` (chunks retrieved for the method's context), ``filter`` and method
    options are the retriever's; ``invoke(question, method=..., k=..., filter=...,
    **options)`` overrides them for one call, as for the retriever. Generation options
    (``response_type``, ``max_context_tokens``) go in ``answer_options`` or per call.

    Args (fields):
        retriever: the :class:`GraphStrataRetriever` whose index and settings to use.
        llm: the LangChain chat model (or ``graphstrata.llm.LLM``) to answer with; ``None``:
            the retriever's ``llm``, else the LLM the index was built or loaded with.
        answer_options: generation options for every call (``{"response_type": "one
            sentence"}``, ...).

    Raises (at ``invoke``):
        ValueError: an empty question, a dict without a question key, no LLM anywhere, a bad
            per-call argument, an unknown ``answer_options`` key.
        TypeError: an input that is neither a string nor a dict.
        graphstrata.llm.LLMError: an LLM call failed after its retries.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: AnswerRetriever
    """The retriever whose index and settings answer (a :class:`GraphStrataRetriever`)."""
    llm: Any = Field(default=None, exclude=True, repr=False)
    """Chat model to answer with (None: the retriever's, else the index's attached LLM)."""
    answer_options: dict[str, Any] = Field(default_factory=dict)
    """Answer options of every call (``response_type``, ``max_context_tokens``, ...)."""

    @classmethod
    def is_lc_serializable(cls) -> bool:
        return False

    def _core_llm(self) -> Any:
        llm = self.llm if self.llm is not None else self.retriever.llm
        return to_graphstrata_llm(llm)

    def _arguments(self, value: Any, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        question = _question(value)
        for name in ("kinds", "context_k", "score_threshold"):
            if name in kwargs:
                raise ValueError(f"{name}= applies to retrieval, not to GraphStrataAnswerer")
        method = kwargs.get("method", self.retriever.method)
        self.retriever.check_method(method)
        gen_names = set(_generation_options(method))
        bad = sorted(set(self.answer_options) - gen_names)
        if bad:
            raise ValueError(
                f"unknown answer option(s) {bad} for method {method!r}; its answer options: "
                f"{', '.join(sorted(gen_names)) or 'none'} (retrieval options belong to the "
                "retriever's method_options)"
            )
        gen = {**self.answer_options, **{k: kwargs.pop(k) for k in list(kwargs) if k in gen_names}}
        call = self.retriever.call_arguments(kwargs)  # method, k, filter, method options (checked)
        core = {"method": call.method, "k": call.k, "llm": self._core_llm(), **call.options, **gen}
        if call.filters is not None:
            core["filters"] = dict(call.filters)
        return question, core

    def _output(self, question: str, answer: Any, method: str) -> dict[str, Any]:
        method = getattr(answer, "method", None) or method
        context = hits_to_documents(answer.hits, method=method, engine=self.retriever.graphstrata)
        return {
            "question": question,
            "answer": answer.text,
            "context": context,
            "usage": dict(answer.usage or {}),
            "method": method,
            "fallbacks": list(getattr(answer, "fallbacks", []) or []),
        }

    def _answer(self, value: Any, **kwargs: Any) -> dict[str, Any]:
        question, core = self._arguments(value, dict(kwargs))
        answer = self.retriever.graphstrata.answer(question, **core)
        return self._output(question, answer, core["method"])

    async def _aanswer(self, value: Any, **kwargs: Any) -> dict[str, Any]:
        question, core = self._arguments(value, dict(kwargs))
        answer = await self.retriever.graphstrata.aanswer(question, **core)
        return self._output(question, answer, core["method"])

    def invoke(self, input: str | Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        """Answer one question (see the class docstring)."""
        return self._call_with_config(
            lambda value: self._answer(value, **kwargs), input, config, run_type="chain"
        )

    async def ainvoke(self, input: str | Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        """:meth:`invoke`, awaiting the core's ``aanswer`` (its LLM calls on this event loop when
        the model has an async API; no ``asyncio.run``)."""
        return await self._acall_with_config(
            lambda value: self._aanswer(value, **kwargs), input, config, run_type="chain"
        )


def _generation_options(method: str) -> tuple[str, ...]:
    """Names of ``method``'s answer options (``graphstrata.generation.generation_options``)."""
    from graphstrata.generation import generation_options

    try:
        return tuple(generation_options(method))
    except ValueError:  # a method without an answer step: answer() says so
        return ()


__all__ = ["QUESTION_KEYS", "GraphStrataAnswerer"]
