"""`ChatModelLLM`: any LangChain chat model behind graphstrata's LLM protocol.

graphstrata's core never imports a framework; its LLM steps (extraction, community reports,
query keywords, answer generation) talk to ``graphstrata.llm.LLM``: ``complete(prompt, *,
system=None, json_mode=False) -> LLMResponse(text, usage)`` and the same ``acomplete``. This
module adapts a LangChain ``BaseChatModel`` (or a plain text ``BaseLLM``) to it.
``GraphStrataRetriever.from_documents(..., llm=chat_model)``, ``GraphStrataAnswerer`` and
``GraphStrataTransformer(llm=...)`` wrap a chat model for you.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from graphstrata.llm import (
    LLMResponse,
    Usage,
    estimate_tokens,
    settings_from_attributes,
    stream_in_thread,
)
from langchain_core.language_models import BaseChatModel, BaseLanguageModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

#: Chat model classes whose ``bind(response_format={"type": "json_object"})`` asks the
#: provider's API for JSON (OpenAI-compatible ``response_format``).
JSON_RESPONSE_FORMAT_MODELS: frozenset[str] = frozenset(
    {
        "ChatOpenAI",
        "AzureChatOpenAI",
        "ChatDeepSeek",
        "ChatXAI",
        "ChatGroq",
        "ChatFireworks",
        "ChatTogether",
        "ChatMistralAI",
        "ChatPerplexity",
    }
)
#: Chat model classes that take ``bind(format="json")`` (Ollama).
JSON_FORMAT_MODELS: frozenset[str] = frozenset({"ChatOllama"})


def usage_from_message(message: Any) -> tuple[int, int] | None:
    """``(prompt_tokens, completion_tokens)`` a LangChain message reports: its
    ``usage_metadata`` (``input_tokens`` / ``output_tokens``), else
    ``response_metadata["token_usage"]`` / ``["usage"]`` (``prompt_tokens`` /
    ``completion_tokens`` or ``input_tokens`` / ``output_tokens``); ``None`` when absent."""
    candidates: list[Any] = [getattr(message, "usage_metadata", None)]
    meta = getattr(message, "response_metadata", None) or {}
    if isinstance(meta, Mapping):
        candidates += [meta.get("token_usage"), meta.get("usage"), meta]
    for c in candidates:
        if not isinstance(c, Mapping):
            continue
        for p_name, c_name in (("input_tokens", "output_tokens"), ("prompt_tokens", "completion_tokens")):
            p, n = c.get(p_name), c.get(c_name)
            if _is_count(p) and _is_count(n):
                return int(p), int(n)
    return None


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _text(out: Any) -> str:
    """The text of what a LangChain model returned (a message, or a string for a text LLM)."""
    if isinstance(out, str):
        return out
    text = getattr(out, "text", None)
    if callable(text) and not isinstance(text, str):  # langchain-core < 1.0: a method
        text = text()
    if isinstance(text, str):
        return str(text)
    content = getattr(out, "content", "")
    return content if isinstance(content, str) else str(content)


def model_id(model: Any) -> str:
    """``"langchain:<class>:<model>"``: the model name from a ``model_name`` / ``model`` /
    ``model_id`` string attribute (``"unknown"`` when none)."""
    name = "unknown"
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            name = value
            break
    return f"langchain:{type(model).__name__}:{name}"


class ChatModelLLM:
    """Wrap a LangChain chat model as a ``graphstrata.llm.LLM``.

    * System prompt: ``[SystemMessage(system), HumanMessage(prompt)]`` through
      ``model.invoke``. A text-completion ``BaseLLM`` gets one string, the system prompt
      prepended and a blank line between.
    * JSON mode: only where it is known to be safe: OpenAI-compatible chat models
      (:data:`JSON_RESPONSE_FORMAT_MODELS`) are bound with
      ``response_format={"type": "json_object"}``, ``ChatOllama`` with ``format="json"``;
      any other model gets the prompt alone (graphstrata's prompts ask for JSON in words and
      its parsers never rely on JSON mode). ``json_mode_kwargs`` overrides the choice
      (``{}``: never bind).
    * Usage: ``AIMessage.usage_metadata`` (or the provider's ``token_usage`` in
      ``response_metadata``); when the model reports none, estimated with
      ``graphstrata.llm.estimate_tokens`` and labelled ``estimated=True``.
    * Async: ``acomplete`` awaits ``model.ainvoke``; a model without async support (its
      ``_agenerate`` raises ``NotImplementedError``, e.g. ``ChatHuggingFace`` over a local
      pipeline) runs ``invoke`` in a worker thread instead.
    * Streaming (what ``GraphStrata.answer(..., stream=True)`` uses for its last call):
      ``stream`` gives the text of each chunk of ``model.stream``, then the call's usage (the
      chunks' ``usage_metadata`` added up, else estimated); ``astream`` those of
      ``model.astream``, or of ``model.stream`` in a worker thread when the model has no async
      support. A model without streaming gives one chunk (LangChain's own fallback), so one
      piece.

    Args:
        model: a LangChain ``BaseChatModel`` (or ``BaseLLM``).
        id: model id for graphstrata's response cache; default
            ``"langchain:<class>:<model name>"``.
        json_mode_kwargs: ``model.bind(**json_mode_kwargs)`` on JSON-mode calls; ``None``
            picks as above.
        context_window: the model's context window in tokens; ``None`` reads the chat model's
            profile (``model.profile["max_input_tokens"]``). graphstrata never sends a prompt
            over it and fits its prompt budgets to it.

    Raises:
        TypeError: ``model`` is not a LangChain language model.
    """

    def __init__(
        self,
        model: BaseLanguageModel,
        *,
        id: str | None = None,
        json_mode_kwargs: Mapping[str, Any] | None = None,
        context_window: int | None = None,
    ) -> None:
        if not isinstance(model, BaseLanguageModel):
            raise TypeError(
                f"ChatModelLLM wraps a LangChain chat model (BaseChatModel), got {type(model).__name__}"
            )
        self.model = model
        self.id = id or model_id(model)
        self._is_chat = isinstance(model, BaseChatModel)
        if json_mode_kwargs is None:
            cls = type(model).__name__
            if cls in JSON_RESPONSE_FORMAT_MODELS:
                json_mode_kwargs = {"response_format": {"type": "json_object"}}
            elif cls in JSON_FORMAT_MODELS:
                json_mode_kwargs = {"format": "json"}
            else:
                json_mode_kwargs = {}
        self._json_kwargs = dict(json_mode_kwargs)
        self._json_model: Any = None
        self._context_window = context_window

    def __repr__(self) -> str:
        return f"ChatModelLLM({self.id!r})"

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens: the ``context_window`` given, else the chat
        model's profile ``max_input_tokens``; ``None`` when neither is known."""
        if self._context_window is not None:
            return self._context_window
        profile = getattr(self.model, "profile", None)
        n = profile.get("max_input_tokens") if isinstance(profile, Mapping) else getattr(profile, "max_input_tokens", None)
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None

    def count_tokens(self, text: str) -> int | None:
        """Tokens of ``text`` by the model's own tokenizer when it exposes one
        (``ChatHuggingFace.tokenizer``), else ``None`` (graphstrata then counts
        conservatively)."""
        encode = getattr(getattr(self.model, "tokenizer", None), "encode", None)
        if not callable(encode):
            return None
        return len(encode(text))

    @property
    def generation_settings(self) -> dict[str, Any]:
        """The model's generation settings (``max_tokens`` / ``max_new_tokens`` /
        ``temperature`` / ... from its fields or ``model_kwargs``, and, for a wrapper such as
        ``ChatHuggingFace``, from its ``llm`` and that one's ``pipeline_kwargs``): part of
        graphstrata's response cache key. Read at each call."""
        return settings_from_attributes(self.model, getattr(self.model, "llm", None))

    def _runnable(self, json_mode: bool) -> Any:
        if not json_mode or not self._json_kwargs:
            return self.model
        if self._json_model is None:
            self._json_model = self.model.bind(**self._json_kwargs)
        return self._json_model

    def _input(self, prompt: str, system: str | None) -> list[BaseMessage] | str:
        if not self._is_chat:
            return f"{system}\n\n{prompt}" if system else prompt
        messages: list[BaseMessage] = []
        if system:
            messages.append(SystemMessage(content=system))
        messages.append(HumanMessage(content=prompt))
        return messages

    def complete(self, prompt: str, *, system: str | None = None, json_mode: bool = False) -> LLMResponse:
        """Complete ``prompt`` with ``model.invoke`` (blocking)."""
        out = self._runnable(json_mode).invoke(self._input(prompt, system))
        return self._response(out, prompt, system)

    async def acomplete(
        self, prompt: str, *, system: str | None = None, json_mode: bool = False
    ) -> LLMResponse:
        """Complete ``prompt`` with ``model.ainvoke``."""
        try:
            out = await self._runnable(json_mode).ainvoke(self._input(prompt, system))
        except NotImplementedError:
            return await asyncio.to_thread(self.complete, prompt, system=system, json_mode=json_mode)
        return self._response(out, prompt, system)

    def stream(self, prompt: str, *, system: str | None = None, json_mode: bool = False) -> Iterator[str | Usage]:
        """Stream the completion of ``prompt`` with ``model.stream``: the text of each chunk,
        then the call's ``graphstrata.llm.Usage`` (see the class docstring)."""
        merged, text = None, ""
        for chunk in self._runnable(json_mode).stream(self._input(prompt, system)):
            piece = _text(chunk)
            if piece:
                text += piece
                yield piece
            merged = _merge(merged, chunk)
        yield self._usage(merged, text, prompt, system)

    async def astream(
        self, prompt: str, *, system: str | None = None, json_mode: bool = False
    ) -> AsyncIterator[str | Usage]:
        """:meth:`stream` with ``model.astream``; a model without async support
        (``NotImplementedError`` before the first chunk) has :meth:`stream` read in a worker
        thread."""
        chunks = aiter(self._runnable(json_mode).astream(self._input(prompt, system)))
        try:
            chunk = await anext(chunks, None)
        except NotImplementedError:
            async for item in stream_in_thread(lambda: self.stream(prompt, system=system, json_mode=json_mode)):
                yield item
            return
        merged, text = None, ""
        while chunk is not None:
            piece = _text(chunk)
            if piece:
                text += piece
                yield piece
            merged = _merge(merged, chunk)
            chunk = await anext(chunks, None)
        yield self._usage(merged, text, prompt, system)

    def _usage(self, out: Any, text: str, prompt: str, system: str | None) -> Usage:
        counts = usage_from_message(out)
        if counts is not None:
            return Usage(counts[0], counts[1], estimated=False)
        sent = f"{system}\n\n{prompt}" if system else prompt
        return Usage(estimate_tokens(sent), estimate_tokens(text), estimated=True)

    def _response(self, out: Any, prompt: str, system: str | None) -> LLMResponse:
        text = _text(out)
        return LLMResponse(text, self._usage(out, text, prompt, system))


def _merge(merged: Any, chunk: Any) -> Any:
    """The message chunks streamed so far added up (their ``usage_metadata`` too); text
    chunks (a text LLM's strings) are not kept."""
    if isinstance(chunk, str):
        return merged
    if merged is None:
        return chunk
    try:
        return merged + chunk
    except TypeError:  # not addable chunks: keep the last, which may carry the usage
        return chunk


def to_graphstrata_llm(llm: Any) -> Any:
    """What to pass as the core's ``llm=`` for what a LangChain user gave: ``None`` stays
    ``None``; a LangChain chat model (or text LLM) is wrapped in :class:`ChatModelLLM`;
    anything else (a ``graphstrata.llm.LLM``, an ``LLMClient``, a plain callable) goes to the
    core as is, which checks it."""
    if llm is None:
        return None
    if isinstance(llm, BaseLanguageModel):
        return ChatModelLLM(llm)
    return llm


__all__ = [
    "JSON_FORMAT_MODELS",
    "JSON_RESPONSE_FORMAT_MODELS",
    "ChatModelLLM",
    "model_id",
    "to_graphstrata_llm",
    "usage_from_message",
]
