"""``GraphStrataQueryEngine``: answers with the graph-RAG method's own generation step.

``GraphStrataIndex.as_query_engine(response_mode="method")`` returns it. Where LlamaIndex's
``RetrieverQueryEngine`` retrieves nodes and lets a response synthesizer write the answer, this
engine calls ``GraphStrata.answer``: ArchRAG's adaptive filtering-based generation (per-layer
filter calls, merge call), LightRAG's and HiRAG's answer prompts over their contexts, AGRAG's
answer over its reasoning path, a plain RAG prompt for the dense / BM25 / hybrid baselines.
The response's ``source_nodes`` are the hits the answer was generated from; its ``metadata``
holds the method, the LLM calls and tokens the query spent and the answer's citations. With
``streaming=True`` the engine returns a ``StreamingResponse`` (``aquery``: an
``AsyncStreamingResponse``) whose ``response_gen`` yields the answer as it is written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import QueryBundle
from llama_index.retrievers.graphstrata import hit_to_node, to_core_filters

from graphstrata.retrieval import check_retrieve_args

if TYPE_CHECKING:
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

    from graphstrata import Answer, AsyncStreamingAnswer, GraphStrata, StreamingAnswer
    from graphstrata.llm.base import LLMInput

#: The ``response_mode`` of ``GraphStrataIndex.as_query_engine`` that selects this engine.
METHOD_RESPONSE_MODE = "method"
#: Chunk hits the answer step retrieves by default (``GraphStrata.answer``'s default ``k``).
DEFAULT_ANSWER_TOP_K = 10


def generation_options(method: str) -> tuple[str, ...]:
    """Names of ``method``'s answer options in ``GraphStrata.answer`` (not retrieval options):
    ``graphstrata.generation.generation_options``."""
    from graphstrata.generation import generation_options as core_options

    try:
        return tuple(core_options(method))
    except ValueError:  # a method without an answer step: answer() says so at query time
        return ()


class GraphStrataQueryEngine(BaseQueryEngine):
    """Answer queries with the method's own generation (``GraphStrata.answer``).

    Args:
        engine: a ``graphstrata.GraphStrata`` engine.
        method: one of ``engine.methods``.
        llm: the LLM the method answers with: a ``graphstrata.llm.LLM`` (wrap a LlamaIndex
            ``LLM`` in ``LlamaIndexLLM``; ``GraphStrataIndex.as_query_engine`` does), or
            ``None`` for the LLM attached to the engine (given when it was built or loaded).
        similarity_top_k: chunk hits the method retrieves for its context (> 0).
        filters: a LlamaIndex ``MetadataFilters`` or the core's filter mapping.
        method_options: the method's options and the answer step's generation options
            (``response_type``, ``max_context_tokens``), passed to ``GraphStrata.answer``.
        streaming: return a ``StreamingResponse`` (``aquery``: ``AsyncStreamingResponse``)
            whose ``response_gen`` yields the answer's text pieces as the LLM writes them
            (``GraphStrata.answer(..., stream=True)``: only the last LLM call streams; an LLM
            that cannot stream gives one piece). Its ``source_nodes`` are set at once; its
            ``metadata`` holds the method at once, and usage, fallbacks and citations once
            the generator is exhausted.
        callback_manager: as for any query engine.

    The ``Response``: ``response`` is the answer text; ``source_nodes`` the hits the answer
    was generated from (chunks and the method's graph context, as ``GraphStrataRetriever``
    converts them); ``metadata["method"]`` the method and ``metadata["usage"]`` its LLM calls
    and tokens (``{"stages": {...}, "total": {"calls", "cached", "prompt_tokens",
    "completion_tokens", "estimated", "skipped"}}``), ``metadata["fallbacks"]`` the LLM steps
    that fell back, one note each (``[]`` when none did: graphstrata's ``Answer.fallbacks``),
    ``metadata["citations"]`` the sources the text cites as ``[n]``, each
    ``{"number", "chunk_ids", "document_ids"}`` (``[n]``: the n-th passage of the answer
    prompt, graphstrata's ``Answer.citations``; ``[]`` when it cites none).
    ``aquery`` runs the core's ``aanswer``
    (a worker thread), never ``asyncio.run``.

    Raises:
        ValueError: at construction, an unknown method, a bad ``similarity_top_k``, an
            unsupported filter or an unknown method option; at query time, no LLM given and
            none attached, and whatever ``GraphStrata.answer`` raises.
        TypeError: ``engine`` has no ``answer`` (a core without the LLM path).
    """

    def __init__(
        self,
        engine: GraphStrata,
        method: str = "archrag",
        llm: LLMInput | None = None,
        similarity_top_k: int = DEFAULT_ANSWER_TOP_K,
        filters: MetadataFilters | MetadataFilter | Mapping[str, Any] | None = None,
        method_options: Mapping[str, Any] | None = None,
        streaming: bool = False,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if not callable(getattr(engine, "answer", None)):
            raise TypeError(
                f"engine must be a graphstrata.GraphStrata with answer(), got {type(engine).__name__}"
            )
        check_retrieve_args(method)  # an unknown method, named with the known ones
        if method_options is not None and not isinstance(method_options, Mapping):
            raise ValueError(f"method_options must be a mapping of keyword options, got {method_options!r}")
        options = dict(method_options or {})
        gen = set(generation_options(method))
        # the core checks the retrieval arguments (generation options are answer()'s)
        request = check_retrieve_args(
            method, similarity_top_k, filters=to_core_filters(filters),
            options={k: v for k, v in options.items() if k not in gen}, names={"k": "similarity_top_k"},
        )
        self._engine = engine
        self._method = method
        self._llm = llm
        self._similarity_top_k = request.k
        self._filters = None if request.filters is None else dict(request.filters)
        self._options = options
        if not isinstance(streaming, bool):
            raise ValueError(f"streaming must be a bool, got {streaming!r}")
        self._streaming = streaming
        super().__init__(callback_manager=callback_manager)

    @property
    def engine(self) -> GraphStrata:
        """The ``graphstrata.GraphStrata`` engine."""
        return self._engine

    @property
    def method(self) -> str:
        """The method whose generation answers."""
        return self._method

    @property
    def streaming(self) -> bool:
        """Whether queries return a streaming response."""
        return self._streaming

    @property
    def llm(self) -> LLMInput | None:
        """The graphstrata LLM given (``None``: the engine's attached one)."""
        return self._llm

    def _get_prompt_modules(self) -> dict[str, Any]:
        return {}

    def _kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"method": self._method, "llm": self._llm, "k": self._similarity_top_k}
        if self._filters is not None:
            kwargs["filters"] = self._filters
        return {**kwargs, **self._options}

    def _metadata(self, answer: Answer) -> dict[str, Any]:
        return {
            "usage": dict(answer.usage or {}),
            # the LLM steps that fell back (graphstrata's Answer.fallbacks; [] when none did)
            "fallbacks": list(getattr(answer, "fallbacks", []) or []),
            "citations": [c.to_dict() for c in getattr(answer, "citations", []) or []],
        }

    def _nodes(self, hits: list[Any], method: str) -> list[Any]:
        return [hit_to_node(h, method, self._engine) for h in hits]

    def _response(self, answer: Answer) -> Response:
        method = getattr(answer, "method", None) or self._method
        return Response(
            response=answer.text,
            source_nodes=self._nodes(answer.hits, method),
            metadata={"method": method, **self._metadata(answer)},
        )

    def _streaming_response(self, stream: StreamingAnswer) -> StreamingResponse:
        metadata: dict[str, Any] = {"method": stream.method}

        def pieces() -> Iterator[str]:
            yield from stream
            metadata.update(self._metadata(stream.answer))  # known once the answer is written

        return StreamingResponse(
            response_gen=pieces(), source_nodes=self._nodes(stream.hits, stream.method), metadata=metadata
        )

    def _async_streaming_response(self, stream: AsyncStreamingAnswer) -> AsyncStreamingResponse:
        metadata: dict[str, Any] = {"method": stream.method}

        async def pieces() -> AsyncIterator[str]:
            async for piece in stream:
                yield piece
            metadata.update(self._metadata(stream.answer))

        return AsyncStreamingResponse(
            response_gen=pieces(), source_nodes=self._nodes(stream.hits, stream.method), metadata=metadata
        )

    def _query(self, query_bundle: QueryBundle) -> Response | StreamingResponse:
        if self._streaming:
            return self._streaming_response(self._engine.answer(query_bundle.query_str, stream=True, **self._kwargs()))
        return self._response(self._engine.answer(query_bundle.query_str, **self._kwargs()))

    async def _aquery(self, query_bundle: QueryBundle) -> Response | AsyncStreamingResponse:
        if self._streaming:
            stream = await self._engine.aanswer(query_bundle.query_str, stream=True, **self._kwargs())
            return self._async_streaming_response(stream)
        answer = await self._engine.aanswer(query_bundle.query_str, **self._kwargs())
        return self._response(answer)


__all__ = ["DEFAULT_ANSWER_TOP_K", "METHOD_RESPONSE_MODE", "GraphStrataQueryEngine", "generation_options"]
