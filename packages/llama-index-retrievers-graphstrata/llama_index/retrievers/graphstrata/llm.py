"""``LlamaIndexLLM``: any LlamaIndex ``LLM`` behind graphstrata's LLM protocol.

graphstrata's core never imports a framework; its LLM steps (extraction, community reports,
query keywords, answer generation) talk to ``graphstrata.llm.LLM``: ``complete(prompt, *,
system=None, json_mode=False) -> LLMResponse(text, usage)`` and the same ``acomplete``. This
module adapts a LlamaIndex ``LLM`` to it. It lives in the retrievers package because every
graphstrata LlamaIndex package that needs it (the index, the KG extractor) can import it from
here without a dependency cycle; ``llama_index.graph_rag.graphstrata`` re-exports it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from graphstrata.llm import (
    LLMResponse,
    Usage,
    estimate_tokens,
    settings_from_attributes,
    stream_in_thread,
)

if TYPE_CHECKING:
    from llama_index.core.llms import LLM

    from graphstrata.llm.base import LLMInput

#: LlamaIndex LLM modules whose ``chat`` / ``complete`` pass extra keyword arguments to an
#: OpenAI-compatible API, where ``response_format={"type": "json_object"}`` asks for JSON.
_OPENAI_COMPATIBLE_MODULES: tuple[str, ...] = (
    "llama_index.llms.openai",
    "llama_index.llms.azure_openai",
    "llama_index.llms.openai_like",
    "llama_index.llms.openrouter",
    "llama_index.llms.deepseek",
    "llama_index.llms.groq",
    "llama_index.llms.fireworks",
    "llama_index.llms.together",
    "llama_index.llms.mistralai",
)

# (prompt, completion) count names, in the spellings providers use
_USAGE_PAIRS: tuple[tuple[str, str], ...] = (
    ("prompt_tokens", "completion_tokens"),  # OpenAI and compatible
    ("input_tokens", "output_tokens"),  # Anthropic, LangChain usage_metadata
    ("prompt_eval_count", "eval_count"),  # Ollama
    ("prompt_token_count", "candidates_token_count"),  # Gemini
    ("inputTokens", "outputTokens"),  # Bedrock converse
)
_USAGE_CONTAINERS: tuple[str, ...] = ("usage", "usage_metadata", "token_usage", "token_counts")


def usage_counts(*sources: Any) -> tuple[int, int] | None:
    """``(prompt_tokens, completion_tokens)`` reported in any of ``sources`` (dicts or objects,
    searched directly and under ``usage`` / ``usage_metadata`` / ``token_usage``), or ``None``
    when none reports both counts."""
    for source in sources:
        for candidate in _candidates(source):
            for prompt_name, completion_name in _USAGE_PAIRS:
                p, c = _get(candidate, prompt_name), _get(candidate, completion_name)
                if _is_count(p) and _is_count(c):
                    return int(p), int(c)
    return None


def _candidates(source: Any) -> list[Any]:
    if source is None:
        return []
    out = [source]
    for name in _USAGE_CONTAINERS:
        inner = _get(source, name)
        if inner is not None:
            out.append(inner)
    return out


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    if isinstance(obj, (str, bytes, int, float, list, tuple)):
        return None
    try:
        return getattr(obj, name, None)
    except Exception:  # a lazy attribute that fails to compute: no usage there
        return None


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


class LlamaIndexLLM:
    """Wrap a LlamaIndex ``LLM`` as a ``graphstrata.llm.LLM``.

    * System prompt: a chat model (``llm.metadata.is_chat_model``) gets a ``SYSTEM`` and a
      ``USER`` ``ChatMessage`` through ``llm.chat``; a completion model gets one prompt,
      the system prompt prepended and a blank line between, through ``llm.complete``.
    * JSON mode: passed on only where the model is known to take it: OpenAI-compatible
      LlamaIndex LLMs get ``response_format={"type": "json_object"}``, LLMs with a
      ``json_mode`` field (``Ollama``) a copy with ``json_mode=True``; others nothing (the
      prompts ask for JSON in words, and graphstrata's parsers never rely on it).
      ``json_mode_kwargs`` overrides this with the keyword arguments to send.
    * Usage: the counts the response reports in ``raw`` or ``additional_kwargs`` (OpenAI,
      Anthropic, Ollama, Gemini, Bedrock spellings), else estimated with
      ``graphstrata.llm.estimate_tokens`` and labelled ``estimated=True``.
    * Async: ``acomplete`` awaits ``llm.achat`` / ``llm.acomplete``; an LLM without async
      support (``NotImplementedError``) runs in a worker thread instead.
    * Streaming (what ``GraphStrata.answer(..., stream=True)`` uses for its last call):
      ``stream`` gives the deltas of ``llm.stream_chat`` (chat models) or
      ``llm.stream_complete``, then the call's usage; ``astream`` those of ``astream_chat`` /
      ``astream_complete``. An LLM that cannot stream (``NotImplementedError``) answers in one
      piece through ``complete``; one without an async stream has its blocking stream read in
      a worker thread.

    Args:
        llm: any ``llama_index.core.llms.LLM``.
        id: model id for graphstrata's response cache; default
            ``"llama-index:<class>:<model name>"``.
        json_mode_kwargs: keyword arguments for ``chat`` / ``complete`` on JSON-mode calls
            (``{}`` sends nothing); ``None`` picks them as above.
        context_window: the model's context window in tokens; ``None`` reads
            ``llm.metadata.context_window``. graphstrata never sends a prompt over it and fits
            its prompt budgets to it.

    Raises:
        TypeError: ``llm`` has no ``complete`` / ``chat`` (not a LlamaIndex LLM).
    """

    def __init__(
        self,
        llm: LLM,
        *,
        id: str | None = None,
        json_mode_kwargs: Mapping[str, Any] | None = None,
        context_window: int | None = None,
    ) -> None:
        if not (callable(getattr(llm, "complete", None)) and callable(getattr(llm, "chat", None))):
            raise TypeError(
                f"LlamaIndexLLM wraps a LlamaIndex LLM (with complete and chat), got {type(llm).__name__}"
            )
        self.llm = llm
        self.id = id or f"llama-index:{type(llm).__name__}:{model_name(llm)}"
        self._json_kwargs = dict(json_mode_kwargs) if json_mode_kwargs is not None else None
        self._json_llm: Any = None
        self._context_window = context_window

    def __repr__(self) -> str:
        return f"LlamaIndexLLM({self.id!r})"

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens: the ``context_window`` given, else
        ``llm.metadata.context_window``; ``None`` when neither is a positive integer."""
        if self._context_window is not None:
            return self._context_window
        try:
            n = self.llm.metadata.context_window
        except Exception:  # metadata that cannot be computed: unknown
            return None
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None

    def count_tokens(self, text: str) -> int | None:
        """Tokens of ``text`` by the model's own tokenizer when the LLM exposes one
        (``HuggingFaceLLM``'s), else ``None`` (graphstrata then counts conservatively)."""
        tok = getattr(self.llm, "_tokenizer", None) or getattr(self.llm, "tokenizer", None)
        encode = getattr(tok, "encode", None)
        if not callable(encode):
            return None
        return len(encode(text))

    @property
    def generation_settings(self) -> dict[str, Any]:
        """The wrapped LLM's generation settings (``max_tokens`` / ``max_new_tokens`` /
        ``temperature`` / ... from its fields or its ``generate_kwargs`` / ``model_kwargs``,
        and ``metadata.num_output``): part of graphstrata's response cache key, so answers
        generated under one token limit are not reused under another. Read at each call."""
        out = settings_from_attributes(self.llm)
        if "num_output" not in out:
            try:
                n = self.llm.metadata.num_output
            except Exception:  # metadata that cannot be computed
                n = None
            if isinstance(n, int) and not isinstance(n, bool):
                out["num_output"] = n
        return out

    @property
    def is_chat_model(self) -> bool:
        """Whether the wrapped LLM is a chat model (system prompt as a chat message)."""
        try:
            return bool(self.llm.metadata.is_chat_model)
        except Exception:  # metadata that cannot be computed: treat as a completion model
            return False

    # -- JSON mode --------------------------------------------------------------------------
    def _target(self, json_mode: bool) -> tuple[Any, dict[str, Any]]:
        """The LLM to call and the keyword arguments to send it."""
        if not json_mode:
            return self.llm, {}
        if self._json_kwargs is not None:
            return self.llm, dict(self._json_kwargs)
        module = type(self.llm).__module__ or ""
        if module.startswith(_OPENAI_COMPATIBLE_MODULES):
            return self.llm, {"response_format": {"type": "json_object"}}
        fields = getattr(type(self.llm), "model_fields", {})
        if "json_mode" in fields and not getattr(self.llm, "json_mode", False):
            if self._json_llm is None:
                try:
                    self._json_llm = self.llm.model_copy(update={"json_mode": True})
                except Exception:  # cannot copy it: no JSON mode, the prompt still asks
                    self._json_llm = self.llm
            return self._json_llm, {}
        return self.llm, {}

    # -- completion -------------------------------------------------------------------------
    def _messages(self, prompt: str, system: str | None) -> list[Any]:
        from llama_index.core.llms import ChatMessage, MessageRole

        messages = []
        if system:
            messages.append(ChatMessage(role=MessageRole.SYSTEM, content=system))
        messages.append(ChatMessage(role=MessageRole.USER, content=prompt))
        return messages

    def complete(self, prompt: str, *, system: str | None = None, json_mode: bool = False) -> LLMResponse:
        """Complete ``prompt`` (blocking); see the class docstring."""
        llm, kwargs = self._target(json_mode)
        if self.is_chat_model:
            response = llm.chat(self._messages(prompt, system), **kwargs)
            text = response.message.content
        else:
            response = llm.complete(_join(prompt, system), **kwargs)
            text = response.text
        return self._response(text, response, prompt, system)

    async def acomplete(
        self, prompt: str, *, system: str | None = None, json_mode: bool = False
    ) -> LLMResponse:
        """Complete ``prompt`` with the LLM's async API; see the class docstring."""
        llm, kwargs = self._target(json_mode)
        try:
            if self.is_chat_model:
                response = await llm.achat(self._messages(prompt, system), **kwargs)
                text = response.message.content
            else:
                response = await llm.acomplete(_join(prompt, system), **kwargs)
                text = response.text
        except NotImplementedError:
            return await asyncio.to_thread(self.complete, prompt, system=system, json_mode=json_mode)
        return self._response(text, response, prompt, system)

    def stream(self, prompt: str, *, system: str | None = None, json_mode: bool = False) -> Iterator[str | Usage]:
        """Stream the completion of ``prompt``: its text deltas in order, then its
        ``graphstrata.llm.Usage`` (the counts the last response reports, else estimated as
        :meth:`complete` does); see the class docstring."""
        llm, kwargs = self._target(json_mode)
        try:
            if self.is_chat_model:
                responses = iter(llm.stream_chat(self._messages(prompt, system), **kwargs))
            else:
                responses = iter(llm.stream_complete(_join(prompt, system), **kwargs))
            response = next(responses, None)
        except NotImplementedError:  # the LLM cannot stream: one piece
            out = self.complete(prompt, system=system, json_mode=json_mode)
            yield out.text
            yield out.usage
            return
        so_far = _Streamed()
        while response is not None:
            delta = so_far.take(response)
            if delta:
                yield delta
            response = next(responses, None)
        yield self._response(so_far.text, so_far.last, prompt, system).usage

    async def astream(
        self, prompt: str, *, system: str | None = None, json_mode: bool = False
    ) -> AsyncIterator[str | Usage]:
        """:meth:`stream` with the LLM's async stream (``astream_chat`` /
        ``astream_complete``); without one (``NotImplementedError``), :meth:`stream` read in a
        worker thread."""
        llm, kwargs = self._target(json_mode)
        try:
            if self.is_chat_model:
                responses = aiter(await llm.astream_chat(self._messages(prompt, system), **kwargs))
            else:
                responses = aiter(await llm.astream_complete(_join(prompt, system), **kwargs))
            response = await anext(responses, None)
        except NotImplementedError:
            async for item in stream_in_thread(lambda: self.stream(prompt, system=system, json_mode=json_mode)):
                yield item
            return
        so_far = _Streamed()
        while response is not None:
            delta = so_far.take(response)
            if delta:
                yield delta
            response = await anext(responses, None)
        yield self._response(so_far.text, so_far.last, prompt, system).usage

    def _response(self, text: Any, response: Any, prompt: str, system: str | None) -> LLMResponse:
        text = "" if text is None else str(text)
        counts = usage_counts(
            getattr(response, "additional_kwargs", None),
            getattr(response, "raw", None),
            getattr(getattr(response, "message", None), "additional_kwargs", None),
        )
        if counts is not None:
            return LLMResponse(text, Usage(counts[0], counts[1], estimated=False))
        return LLMResponse(text, Usage(estimate_tokens(_join(prompt, system)), estimate_tokens(text), estimated=True))


class _Streamed:
    """The text of a LlamaIndex stream so far and its last response."""

    def __init__(self) -> None:
        self.text = ""
        self.last: Any = None

    def take(self, response: Any) -> str:
        """The new text of ``response`` (:func:`_delta`), added to :attr:`text`."""
        delta = _delta(response, self.text)
        self.text += delta
        self.last = response
        return delta


def _delta(response: Any, so_far: str) -> str:
    """The new text of one streamed LlamaIndex response (``ChatResponse`` /
    ``CompletionResponse``): its ``delta``, else what its full text (``message.content`` /
    ``text``) adds to ``so_far``."""
    delta = getattr(response, "delta", None)
    if isinstance(delta, str):
        return delta
    message = getattr(response, "message", None)
    full = getattr(message, "content", None) if message is not None else getattr(response, "text", None)
    if not isinstance(full, str) or not full.startswith(so_far):
        return ""
    return full[len(so_far):]


def model_name(llm: LLM) -> str:
    """The model name of a LlamaIndex LLM: ``metadata.model_name`` unless it is LlamaIndex's
    placeholder ``"unknown"``, else a ``model`` / ``model_name`` string attribute, else
    ``"unknown"``."""
    try:
        name = llm.metadata.model_name
    except Exception:
        name = None
    if isinstance(name, str) and name and name != "unknown":
        return name
    for attr in ("model", "model_name", "model_id"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return value
    return "unknown"


def is_llama_index_llm(obj: Any) -> bool:
    """Whether ``obj`` is a LlamaIndex LLM (an instance of ``llama_index.core``'s ``BaseLLM``)."""
    from llama_index.core.base.llms.base import BaseLLM

    return isinstance(obj, BaseLLM)


def to_graphstrata_llm(llm: LLM | LLMInput | str | None) -> LLMInput | None:
    """What to pass as the core's ``llm=`` for what a LlamaIndex user gave.

    ``None`` stays ``None``; a LlamaIndex ``LLM`` is wrapped in :class:`LlamaIndexLLM`; a
    string is resolved by LlamaIndex's ``resolve_llm`` (``"local:<path>"``, ...) and wrapped;
    anything else (a ``graphstrata.llm.LLM``, an ``LLMClient``, a plain callable) goes to the
    core as is, which checks it.
    """
    if llm is None:
        return None
    if isinstance(llm, str):
        from llama_index.core.llms.utils import resolve_llm

        llm = resolve_llm(llm)
    if is_llama_index_llm(llm):
        return LlamaIndexLLM(llm)
    return llm


def _join(prompt: str, system: str | None) -> str:
    return f"{system}\n\n{prompt}" if system else prompt


__all__ = ["LlamaIndexLLM", "is_llama_index_llm", "model_name", "to_graphstrata_llm", "usage_counts"]
