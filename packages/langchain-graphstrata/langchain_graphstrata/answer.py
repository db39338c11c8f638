"""`GraphStrataAnswerer`: a ready Runnable that answers with the method's own generation.

A plain LCEL RAG chain (``retriever | format_docs | prompt | model``) answers with your prompt
over the retrieved chunks. Each graph-RAG paper also specifies its own answer step, which this
Runnable runs through ``GraphStrata.answer``: ArchRAG's adaptive filtering-based generation
(one filter call per community layer, then a merge call), LightRAG's and HiRAG's answer prompts
over their entity / relation / community contexts, AGRAG's answer over its reasoning path, and
a plain RAG prompt for the dense / BM25 / hybrid baselines.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from graphstrata.retrieval import RetrieveRequest
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from langchain_core.runnables.utils import AddableDict
from pydantic import ConfigDict, Field

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
    * ``"citations"``: the sources the answer cites as ``[n]``, each ``{"number",
      "chunk_ids", "document_ids"}`` (``[n]`` is the n-th passage of the answer prompt:
      graphstrata's ``Answer.citations``; ``[]`` when it cites none);
    * ``"question"`` and ``"method"``.

    Take the text alone with ``answerer.pick("answer")`` (or ``| itemgetter("answer")``).

    ``stream`` / ``astream`` yield the answer as the model writes it (only the last LLM call
    streams; a model that cannot stream gives one piece), as ``AddableDict`` chunks that add
    up to the :meth:`invoke` output: first ``{"question", "method", "context"}`` (the hits are
    known before the answer), then one ``{"answer": piece}`` per piece, then ``{"usage",
    "fallbacks", "citations"}``. ``answerer.pick("answer").stream(q)`` yields the text pieces
    alone.

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
        return {
            "question": question,
            "answer": answer.text,
            **self._head(question, answer.hits, method),
            **self._tail(answer),
        }

    def _head(self, question: str, hits: Any, method: str) -> dict[str, Any]:
        """What is known before the answer is written: the question, method and context."""
        context = hits_to_documents(hits, method=method, engine=self.retriever.graphstrata)
        return {"question": question, "context": context, "method": method}

    @staticmethod
    def _tail(answer: Any) -> dict[str, Any]:
        """What is known once the answer is written: its usage, fallbacks and citations."""
        return {
            "usage": dict(answer.usage or {}),
            "fallbacks": list(getattr(answer, "fallbacks", []) or []),
            "citations": [c.to_dict() for c in getattr(answer, "citations", []) or []],
        }

    def _stream_answer(self, value: Any, kwargs: dict[str, Any]) -> Iterator[AddableDict]:
        question, core = self._arguments(value, dict(kwargs))
        stream = self.retriever.graphstrata.answer(question, stream=True, **core)
        yield AddableDict(self._head(question, stream.hits, stream.method))
        given = False
        for piece in stream:
            given = True
            yield AddableDict(answer=piece)
        if not given:  # an empty answer: the key still comes
            yield AddableDict(answer="")
        yield AddableDict(self._tail(stream.answer))

    async def _astream_answer(self, value: Any, kwargs: dict[str, Any]) -> AsyncIterator[AddableDict]:
        question, core = self._arguments(value, dict(kwargs))
        stream = await self.retriever.graphstrata.aanswer(question, stream=True, **core)
        yield AddableDict(self._head(question, stream.hits, stream.method))
        given = False
        async for piece in stream:
            given = True
            yield AddableDict(answer=piece)
        if not given:
            yield AddableDict(answer="")
        yield AddableDict(self._tail(stream.answer))

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

    def stream(
        self, input: str | Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[dict[str, Any]]:
        """Answer one question as the model writes it: ``AddableDict`` chunks that add up to
        the :meth:`invoke` output, the answer one ``{"answer": piece}`` chunk per piece (see
        the class docstring). Raises as :meth:`invoke`, while iterating."""

        def answer(inputs: Iterator[Any]) -> Iterator[AddableDict]:
            yield from self._stream_answer(next(iter(inputs)), kwargs)

        yield from self._transform_stream_with_config(iter([input]), answer, config, run_type="chain")

    async def astream(
        self, input: str | Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        """:meth:`stream` on this event loop (the core's ``aanswer(..., stream=True)``; no
        ``asyncio.run``)."""

        async def one() -> AsyncIterator[Any]:
            yield input

        async def answer(inputs: AsyncIterator[Any]) -> AsyncIterator[AddableDict]:
            value = await anext(aiter(inputs))
            async for chunk in self._astream_answer(value, kwargs):
                yield chunk

        async for chunk in self._atransform_stream_with_config(one(), answer, config, run_type="chain"):
            yield chunk


def _generation_options(method: str) -> tuple[str, ...]:
    """Names of ``method``'s answer options (``graphstrata.generation.generation_options``)."""
    from graphstrata.generation import generation_options

    try:
        return tuple(generation_options(method))
    except ValueError:  # a method without an answer step: answer() says so
        return ()


__all__ = ["QUESTION_KEYS", "GraphStrataAnswerer"]
