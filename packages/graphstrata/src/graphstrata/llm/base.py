"""The LLM protocol every LLM step of graphstrata talks to, and the plain-callable adapter.

An :class:`LLM` completes one prompt (optionally with a system prompt, optionally asked for
JSON) and reports what it cost (:class:`Usage`). The core never imports a framework: a
LlamaIndex ``LLM`` is wrapped by ``llama_index.graph_rag.graphstrata.LlamaIndexLLM``, a
LangChain chat model by ``langchain_graphstrata.ChatModelLLM``; any ``str -> str`` function
(sync or async) by :class:`CallableLLM`. :func:`as_llm` turns what a user passes into an
:class:`LLM`.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import math
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable


@dataclass(frozen=True)
class Usage:
    """Tokens one or more LLM calls consumed.

    Attributes:
        prompt_tokens: tokens sent (system prompt included).
        completion_tokens: tokens generated.
        estimated: ``True`` when the LLM reported no usage and the counts come from
            :func:`estimate_tokens` (about 4 characters a token); ``False`` when every count
            is the LLM's own report.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = True

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.estimated or other.estimated,
        )


@dataclass(frozen=True)
class LLMResponse:
    """One completion: the generated ``text`` and its :class:`Usage`."""

    text: str
    usage: Usage


@dataclass(frozen=True)
class LLMRequest:
    """One prompt to complete (what :meth:`LLMClient.map` takes).

    Attributes:
        prompt: the user message.
        system: optional system prompt.
        json_mode: ask the model for one JSON value (adapters pass it on where the model
            supports it; our prompts also say so in words, and the parsers never rely on it).
    """

    prompt: str
    system: str | None = None
    json_mode: bool = False

    def key(self, model_id: str, settings: Mapping[str, Any] | None = None) -> str:
        """Content hash (sha256 hex) of model id, generation settings, system prompt, prompt
        and JSON mode: the response cache's key.

        ``settings`` are the model's generation settings (:func:`generation_settings`: max
        tokens, temperature, ...); an answer generated under a 128-token limit is never
        reused for a 64-token model. Empty or ``None`` settings give the same key as before
        settings were keyed, so caches written then stay valid for models that report none.
        """
        h = hashlib.sha256()
        parts = [model_id, self.system or "", self.prompt, "json" if self.json_mode else "text"]
        if settings:
            parts.append("settings:" + json.dumps(dict(settings), sort_keys=True, default=repr))
        for part in parts:
            data = part.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
        return h.hexdigest()


#: attribute names read as generation settings when an LLM does not say its own
GENERATION_SETTING_NAMES = (
    "max_tokens",
    "max_new_tokens",
    "max_completion_tokens",
    "num_predict",
    "num_output",
    "temperature",
    "top_p",
    "top_k",
    "seed",
)


def context_window(llm: Any) -> int | None:
    """The context window of ``llm`` in tokens (prompt and answer together): its
    ``context_window`` attribute when that is a positive integer, else ``None`` (unknown).

    The adapters report it: ``LlamaIndexLLM`` from ``LLM.metadata.context_window``,
    ``ChatModelLLM`` from the chat model's profile (``max_input_tokens``), both overridable by
    their ``context_window=`` argument; :class:`CallableLLM` takes ``context_window=``.
    """
    value = getattr(llm, "context_window", None)
    if callable(value):
        try:
            value = value()
        except Exception:  # noqa: BLE001 - a broken hook means "unknown"
            value = None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def count_prompt_tokens(llm: Any, text: str) -> int:
    """Tokens of ``text`` as ``llm`` counts them: ``llm.count_tokens(text)`` when the LLM
    has one (a tokenizer), else ``ceil(chars / 3)``: above :func:`estimate_tokens`' 4
    characters a token, because a real tokenizer counted about 22% more tokens than that rule
    on this project's corpora, and a window check must not undercount."""
    counter = getattr(llm, "count_tokens", None)
    if callable(counter):
        try:
            n = counter(text)
        except Exception:  # noqa: BLE001 - fall back to the conservative rule
            n = None
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            return n
    return math.ceil(len(text) / 3) if text else 0


def generation_settings(llm: Any) -> dict[str, Any]:
    """The generation settings of ``llm`` that change what it answers, for the response
    cache key: ``llm.generation_settings`` (a mapping, or a method returning one) when it has
    one, else ``{}``. Only ``str`` / ``int`` / ``float`` / ``bool`` / ``None`` values are kept
    (JSON-serialisable, so the key is stable across processes).

    The adapters (``LlamaIndexLLM``, ``ChatModelLLM``) report max tokens, temperature and
    friends from the wrapped model; :class:`CallableLLM` reports what it was given as
    ``settings=``.
    """
    raw = getattr(llm, "generation_settings", None)
    if callable(raw):
        try:
            raw = raw()
        except Exception:  # noqa: BLE001 - a broken settings hook must not break calls
            raw = None
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): v for k, v in raw.items() if v is None or isinstance(v, (str, int, float, bool))}


def settings_from_attributes(*objs: Any, names: tuple[str, ...] = GENERATION_SETTING_NAMES) -> dict[str, Any]:
    """Generation settings read from attributes (and ``*_kwargs`` dicts such as
    ``generate_kwargs`` / ``model_kwargs`` / ``pipeline_kwargs``) of ``objs``: the helper the
    adapters use. The first object that has a setting wins; non-scalar values are skipped."""
    out: dict[str, Any] = {}
    for obj in objs:
        if obj is None:
            continue
        sources: list[Mapping[str, Any]] = []
        for kw in ("generate_kwargs", "model_kwargs", "pipeline_kwargs"):
            value = getattr(obj, kw, None)
            if isinstance(value, Mapping):
                sources.append(value)
        for name in names:
            if name in out:
                continue
            value = getattr(obj, name, None)
            if value is None:
                for src in sources:
                    if src.get(name) is not None:
                        value = src[name]
                        break
            if isinstance(value, (str, int, float, bool)):
                out[name] = value
    return out


def estimate_tokens(text: str) -> int:
    """Estimated token count of ``text``: ``ceil(chars / 4)`` (the usual rule of thumb for
    English under BPE tokenizers); used when an LLM reports no usage, and by ``--dry-run``."""
    return math.ceil(len(text) / 4) if text else 0


@runtime_checkable
class LLM(Protocol):
    """What graphstrata needs from an LLM.

    Attributes:
        id: a stable model identifier (e.g. ``"llama-index:OpenAI:gpt-4o-mini"``); part of the
            response cache key, so two models never share cached answers.

    An LLM may also set ``native_async = False`` to say that its ``acomplete`` only wraps
    ``complete`` (then async callers' LLM calls run in their worker thread instead of on their
    event loop; see :func:`has_async_api`).

    Streaming is optional: an LLM that can stream has ``stream(prompt, *, system=None,
    json_mode=False)`` returning an iterator, and may have ``astream`` (same arguments)
    returning an async iterator, of the output's text pieces (``str``, in order) and at most
    one :class:`Usage` (the call's, usually last). :meth:`LLMClient.stream_request
    <graphstrata.llm.LLMClient.stream_request>` uses them for the last call of an answer
    (``GraphStrata.answer(..., stream=True)``); an LLM without them answers in one piece. The
    framework adapters (``LlamaIndexLLM``, ``ChatModelLLM``) have both.
    """

    id: str

    def complete(self, prompt: str, *, system: str | None = None, json_mode: bool = False) -> LLMResponse:
        """Complete ``prompt``; blocking."""
        ...

    async def acomplete(
        self, prompt: str, *, system: str | None = None, json_mode: bool = False
    ) -> LLMResponse:
        """Complete ``prompt``; awaitable."""
        ...


def _join(prompt: str, system: str | None) -> str:
    return f"{system}\n\n{prompt}" if system else prompt


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


class CallableLLM:
    """Wrap a plain function as an :class:`LLM`.

    ``fn(prompt) -> str`` or ``async fn(prompt) -> str``. When the function accepts a
    ``system`` (or ``json_mode``) keyword it gets it; otherwise the system prompt is prepended
    to the prompt, separated by a blank line. The function may also return an
    :class:`LLMResponse` to report real usage; plain strings get estimated usage.

    Args:
        fn: the completion function.
        id: the model id for the response cache (default ``"callable:<qualified name>"``).
        settings: the function's generation settings (``{"max_tokens": 128, ...}``), part of
            the response cache key (:func:`generation_settings`).
        context_window: the model's context window in tokens (:func:`context_window`), or
            ``None`` (unknown: prompts are not checked against it).

    Raises:
        TypeError: ``fn`` is not callable, or returns something other than ``str`` /
            :class:`LLMResponse` (at call time).
    """

    def __init__(
        self,
        fn: Callable[..., str | LLMResponse | Awaitable[str | LLMResponse]],
        id: str | None = None,
        settings: Mapping[str, Any] | None = None,
        context_window: int | None = None,
    ):
        if not callable(fn):
            raise TypeError(f"llm must be callable, got {type(fn).__name__}")
        self._fn = fn
        self._async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)
        self.native_async = self._async
        self._system_kw = _accepts(fn, "system")
        self._json_kw = _accepts(fn, "json_mode")
        name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        self.id = id or f"callable:{getattr(fn, '__module__', '') or ''}.{name}"
        self.generation_settings = dict(settings or {})
        self.context_window = context_window

    def _args(self, prompt: str, system: str | None, json_mode: bool) -> tuple[tuple, dict]:
        kwargs: dict[str, Any] = {}
        if self._system_kw:
            kwargs["system"] = system
        else:
            prompt = _join(prompt, system)
        if self._json_kw:
            kwargs["json_mode"] = json_mode
        return (prompt,), kwargs

    def _response(self, out: Any, prompt: str, system: str | None) -> LLMResponse:
        if isinstance(out, LLMResponse):
            return out
        if not isinstance(out, str):
            raise TypeError(f"LLM function {self.id!r} returned {type(out).__name__}, expected str")
        return LLMResponse(out, Usage(estimate_tokens(_join(prompt, system)), estimate_tokens(out), True))

    def complete(self, prompt: str, *, system: str | None = None, json_mode: bool = False) -> LLMResponse:
        """Complete ``prompt``, blocking; an async function runs on graphstrata's background
        event loop (:func:`run_blocking`), never through ``asyncio.run``."""
        args, kwargs = self._args(prompt, system, json_mode)
        if self._async:
            out = run_blocking(self._fn(*args, **kwargs))
        else:
            out = self._fn(*args, **kwargs)
            if inspect.isawaitable(out):
                out = run_blocking(_await(out))
        return self._response(out, prompt, system)

    async def acomplete(
        self, prompt: str, *, system: str | None = None, json_mode: bool = False
    ) -> LLMResponse:
        args, kwargs = self._args(prompt, system, json_mode)
        if self._async:
            out = await self._fn(*args, **kwargs)
        else:
            out = await asyncio.to_thread(self._fn, *args, **kwargs)
            if inspect.isawaitable(out):
                out = await out
        return self._response(out, prompt, system)


async def _await(x: Awaitable[Any]) -> Any:
    return await x


_BACKGROUND: dict[str, Any] = {}
_BACKGROUND_LOCK = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    """graphstrata's own event loop, running in a daemon thread (started on first use)."""
    with _BACKGROUND_LOCK:
        loop = _BACKGROUND.get("loop")
        if loop is None or loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="graphstrata-async", daemon=True)
            thread.start()
            _BACKGROUND["loop"] = loop
        return loop


def run_blocking(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to completion from synchronous code and return its result (or raise its
    exception): on graphstrata's background event loop, so it works whether or not the
    calling thread has a running loop (Jupyter, FastAPI) — library code never calls
    ``asyncio.run``. Used when a synchronous code path meets an async-only LLM."""
    return asyncio.run_coroutine_threadsafe(coro, _background_loop()).result()


def has_async_api(llm: Any) -> bool:
    """Whether ``llm.acomplete`` is worth awaiting on the caller's event loop: ``llm``'s own
    ``native_async`` flag when it sets one, else whether ``acomplete`` is a coroutine function
    (a thread-wrapping ``acomplete`` should set ``native_async = False``)."""
    flag = getattr(llm, "native_async", None)
    if flag is not None:
        return bool(flag)
    return inspect.iscoroutinefunction(getattr(llm, "acomplete", None))


def as_llm(obj: Any) -> LLM:
    """Turn what a user passed as ``llm=`` into an :class:`LLM`.

    Accepts an :class:`LLM` (returned as is) or a callable (wrapped in :class:`CallableLLM`).

    Raises:
        TypeError: a LlamaIndex ``LLM`` or LangChain chat model (the core imports no framework:
            the message names the adapter to wrap it with), or anything else.
    """
    if isinstance(obj, LLM) and not isinstance(obj, type):
        return obj
    modules = [c.__module__ or "" for c in type(obj).__mro__]  # a user's subclass counts too
    if any(m.startswith("llama_index") for m in modules):
        raise TypeError(
            "a LlamaIndex LLM needs the adapter: "
            "`from llama_index.graph_rag.graphstrata import LlamaIndexLLM; llm=LlamaIndexLLM(your_llm)` "
            "(GraphStrataIndex.from_documents(..., llm=...) wraps it for you)"
        )
    if any(m.startswith("langchain") for m in modules):
        raise TypeError(
            "a LangChain chat model needs the adapter: "
            "`from langchain_graphstrata import ChatModelLLM; llm=ChatModelLLM(your_model)` "
            "(GraphStrataRetriever.from_documents(..., llm=...) wraps it for you)"
        )
    if callable(obj) and not isinstance(obj, type):
        return CallableLLM(obj)
    raise TypeError(
        f"llm must be a graphstrata LLM (complete/acomplete) or a callable str -> str, "
        f"got {type(obj).__name__}"
    )


LLMInput: TypeAlias = LLM | Callable[..., str]
"""What the core's ``llm=`` parameters accept (see :func:`as_llm`): an :class:`LLM` (an
``LLMClient`` is one) or a plain callable ``(prompt: str) -> str`` (optionally taking
``system=`` / ``json_mode=``)."""
