"""The runtime around an :class:`~graphstrata.llm.base.LLM`: cache, retries, bounded
concurrency, and token accounting per stage.

Every LLM step of graphstrata calls :meth:`LLMClient.complete` (one prompt) or
:meth:`LLMClient.map` (many prompts, at most ``concurrency`` in flight). A call first looks in
the :class:`~graphstrata.llm.cache.ResponseCache`; a miss goes to the model, with retries and
exponential backoff (tenacity) on transient errors; the response is cached the moment it
arrives. Each call is counted in a :class:`Ledger` under its stage name (``"extract"``,
``"community_reports"``, ``"query:keywords"``, ...) — in the client's own ledger and in every
ledger opened with :func:`usage_scope` around it (how ``GraphStrata.answer`` reports the cost of
one query while other threads query too).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from .base import LLM, LLMRequest, LLMResponse, Usage, as_llm, context_window, count_prompt_tokens
from .base import estimate_tokens, generation_settings, has_async_api
from .cache import ResponseCache
from .guards import DEFAULT_MAX_FAILURE_SHARE, check_failure_share

#: default number of LLM calls in flight (issue 13: "bounded concurrency (default 4)")
DEFAULT_CONCURRENCY = 4
#: default attempts per call (1 + retries) on transient errors
DEFAULT_ATTEMPTS = 5

_TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}
_TRANSIENT_NAMES = ("ratelimit", "timeout", "connection", "unavailable", "overloaded", "internalserver")


class PromptTooLongError(ValueError):
    """A prompt would not fit the model's context window; it was not sent. The message names
    the stage, the prompt's tokens, the window and the tokens kept for the answer."""


class TransientLLMError(RuntimeError):
    """Raise from an LLM (or a wrapper) to say "try again": the client retries it."""


#: tokens kept free for the answer when the model's settings name no output limit
DEFAULT_ANSWER_RESERVE = 512
_OUTPUT_LIMIT_NAMES = ("max_tokens", "max_new_tokens", "max_completion_tokens", "num_predict", "num_output")


class LLMError(RuntimeError):
    """An LLM call failed after its retries (the message names the stage and the cause).

    Responses received before the failure are cached: running the same build again resumes
    without paying for them twice.
    """


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` looks retryable: :class:`TransientLLMError`, ``TimeoutError``,
    ``ConnectionError``, an HTTP status 408/409/425/429/5xx on ``status_code`` / ``status``,
    or a class name mentioning rate limits, timeouts, connections or overload (the SDKs'
    ``RateLimitError``, ``APITimeoutError``, ``APIConnectionError``, ...)."""
    if isinstance(exc, (TransientLLMError, TimeoutError, ConnectionError)):
        return True
    status = getattr(exc, "status_code", None) or getattr(exc, "status", None)
    if isinstance(status, int) and status in _TRANSIENT_STATUS:
        return True
    name = type(exc).__name__.lower()
    return any(n in name for n in _TRANSIENT_NAMES)


@dataclass
class StageUsage:
    """Cost of one stage.

    Attributes:
        calls: LLM calls made (cache misses that reached the model).
        cached: calls answered from the cache (no cost).
        kept: prompts answered from the answers an index keeps with itself (no call, no
            cost, no cache read: :func:`graphstrata.llm.records.kept_map`); shown only when
            non-zero.
        prompt_tokens, completion_tokens: tokens of the calls made.
        estimated: some counts are estimates (the LLM reported no usage).
        skipped: records the parsers could not read and skipped (counted warnings).
        checked: answers the output checks (:mod:`graphstrata.llm.guards`) looked at.
        failures: ``{reason: answers}`` of those that gave nothing usable (``"parse"``,
            ``"grounding"``, ``"echo"``).
    """

    calls: int = 0
    cached: int = 0
    kept: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False
    skipped: int = 0
    checked: int = 0
    failures: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The counts as a JSON-serialisable dict; ``kept`` only when some prompts were
        answered from kept answers, ``checked`` and ``failures`` only for a stage whose
        answers were checked."""
        out: dict[str, Any] = {
            "calls": self.calls,
            "cached": self.cached,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "estimated": self.estimated,
            "skipped": self.skipped,
        }
        if self.kept:
            out["kept"] = self.kept
        if self.checked:
            out["checked"] = self.checked
            out["failures"] = dict(self.failures)
        return out


class Ledger:
    """Thread-safe calls and tokens per stage (see :class:`StageUsage`), and the fallbacks
    taken (:meth:`fallback`: ``"keywords: offline fallback, unreadable answer"``, ...)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.stages: dict[str, StageUsage] = {}
        self.fallbacks: list[str] = []

    def fallback(self, note: str) -> None:
        """Record that a step fell back (once per distinct ``note``)."""
        with self._lock:
            if note not in self.fallbacks:
                self.fallbacks.append(note)

    def record(self, stage: str, usage: Usage | None, cached: bool = False) -> None:
        with self._lock:
            s = self.stages.setdefault(stage, StageUsage())
            if cached:
                s.cached += 1
                return
            s.calls += 1
            if usage is not None:
                s.prompt_tokens += usage.prompt_tokens
                s.completion_tokens += usage.completion_tokens
                s.estimated = s.estimated or usage.estimated

    def skip(self, stage: str, n: int = 1) -> None:
        """Count ``n`` unreadable records of ``stage`` (the parsers' warnings)."""
        with self._lock:
            self.stages.setdefault(stage, StageUsage()).skipped += n

    def keep(self, stage: str, n: int = 1) -> None:
        """Count ``n`` prompts of ``stage`` answered from kept answers (no call)."""
        with self._lock:
            self.stages.setdefault(stage, StageUsage()).kept += n

    def check(self, stage: str, answers: int, failures: Mapping[str, int]) -> None:
        """Count ``answers`` checked answers of ``stage`` and the failed ones by reason."""
        with self._lock:
            s = self.stages.setdefault(stage, StageUsage())
            s.checked += answers
            for reason, n in failures.items():
                if n:
                    s.failures[reason] = s.failures.get(reason, 0) + n

    def total(self) -> StageUsage:
        """All stages added up."""
        with self._lock:
            t = StageUsage()
            for s in self.stages.values():
                t.calls += s.calls
                t.cached += s.cached
                t.kept += s.kept
                t.prompt_tokens += s.prompt_tokens
                t.completion_tokens += s.completion_tokens
                t.estimated = t.estimated or s.estimated
                t.skipped += s.skipped
                t.checked += s.checked
                for reason, n in s.failures.items():
                    t.failures[reason] = t.failures.get(reason, 0) + n
            return t

    def to_dict(self) -> dict[str, Any]:
        """``{"stages": {stage: {...}}, "total": {...}}`` (JSON-serialisable)."""
        with self._lock:
            stages = {k: v.to_dict() for k, v in self.stages.items()}
        return {"stages": stages, "total": self.total().to_dict()}


_SCOPES: contextvars.ContextVar[tuple[Ledger, ...]] = contextvars.ContextVar("graphstrata_llm_scopes", default=())


@contextmanager
def usage_scope(ledger: Ledger | None = None) -> Iterator[Ledger]:
    """Count every LLM call made in this context (this thread, and the worker threads of
    :meth:`LLMClient.map` it starts) in ``ledger`` (default a fresh :class:`Ledger`), besides
    the client's own. Entering a scope again with the same ledger goes on counting in it (how
    a streamed answer counts its last call, made while the caller reads the stream)."""
    ledger = Ledger() if ledger is None else ledger
    token = _SCOPES.set((*_SCOPES.get(), ledger))
    try:
        yield ledger
    finally:
        _SCOPES.reset(token)


_CALLER_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "graphstrata_caller_loop", default=None
)


async def run_in_worker_thread(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Await the synchronous ``fn(*args, **kwargs)`` run in a worker thread, with its LLM calls
    on the calling event loop.

    How ``aretrieve`` / ``aanswer`` are async without rewriting every method as a coroutine:
    the CPU work (vector search, PageRank, ...) runs in a worker thread, while every LLM call it
    makes through an :class:`LLMClient` whose LLM has an async API (:func:`has_async_api`) is
    awaited on this loop (:meth:`LLMClient.arequest`, at most ``concurrency`` in flight per
    loop). N concurrent callers therefore share one event loop for their LLM calls, and those
    calls overlap. Must be awaited inside a running loop.
    """
    token = _CALLER_LOOP.set(asyncio.get_running_loop())
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)  # copies this context
    finally:
        _CALLER_LOOP.reset(token)


def _caller_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop of the async caller this worker thread serves (``None``: a sync caller,
    or this thread runs that loop itself)."""
    loop = _CALLER_LOOP.get()
    if loop is None or loop.is_closed():
        return None
    try:
        if asyncio.get_running_loop() is loop:
            return None
    except RuntimeError:
        pass
    return loop


class LLMClient:
    """An :class:`LLM` with a response cache, retries, bounded concurrency and a ledger.

    Args:
        llm: an :class:`LLM` or a callable (see :func:`~graphstrata.llm.base.as_llm`).
        cache: a :class:`ResponseCache` (default: a new in-memory one).
        concurrency: most calls in flight at once across all threads using this client (and,
            for calls awaited on an event loop, at most this many per loop).
        attempts: tries per call on transient errors (exponential backoff, 0.5 s doubling
            up to 20 s).
        ledger: where calls are counted (default: a new :class:`Ledger`).
        max_failure_share: the largest share (0–1) of a build stage's answers that may fail
            the output checks (:meth:`check_answers`) before the stage raises
            :class:`~graphstrata.llm.guards.LLMOutputError`.
        context_window: the model's context window in tokens; ``None`` takes the LLM's own
            (:func:`~graphstrata.llm.base.context_window`). When known, no prompt over it
            (less :meth:`answer_reserve`) is ever sent (:class:`PromptTooLongError`), and the
            prompt budgets of the stages shrink to fit (:meth:`context_budget`).

    Raises:
        TypeError: ``llm`` is not an LLM or callable.
        ValueError: ``concurrency`` or ``attempts`` < 1, ``max_failure_share`` outside [0, 1].
    """

    def __init__(
        self,
        llm: Any,
        cache: ResponseCache | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        attempts: int = DEFAULT_ATTEMPTS,
        ledger: Ledger | None = None,
        _semaphore: threading.Semaphore | None = None,
        max_failure_share: float = DEFAULT_MAX_FAILURE_SHARE,
        context_window: int | None = None,
    ) -> None:
        if context_window is not None and (
            isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 1
        ):
            raise ValueError(f"context_window must be a positive integer or None, got {context_window!r}")
        self._window = context_window
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"llm concurrency must be a positive integer, got {concurrency!r}")
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError(f"llm attempts must be a positive integer, got {attempts!r}")
        if isinstance(max_failure_share, bool) or not isinstance(max_failure_share, (int, float)) or not (
            0.0 <= max_failure_share <= 1.0
        ):
            raise ValueError(f"max_failure_share must be a number in [0, 1], got {max_failure_share!r}")
        self.max_failure_share = float(max_failure_share)
        self.llm: LLM = as_llm(llm)
        self.cache = cache if cache is not None else ResponseCache()
        self.concurrency = concurrency
        self.attempts = attempts
        self.ledger = ledger if ledger is not None else Ledger()
        self._sem = _semaphore or threading.BoundedSemaphore(concurrency)
        self._loop_sems: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._loop_sems_lock = threading.Lock()
        self._wait = wait_exponential(multiplier=0.5, max=20)

    @classmethod
    def of(cls, llm: Any) -> LLMClient:
        """``llm`` itself when it is a client, else a new client around it."""
        return llm if isinstance(llm, LLMClient) else cls(llm)

    @property
    def id(self) -> str:
        return self.llm.id

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens (the client's setting, else the LLM's own),
        or ``None`` when unknown."""
        return getattr(self, "_window", None) or context_window(self.llm)

    def answer_reserve(self) -> int:
        """Tokens of the window kept free for the answer: the model's output limit from its
        generation settings (``max_tokens``, ``max_new_tokens``, ...), else
        :data:`DEFAULT_ANSWER_RESERVE`; at most half the window."""
        settings = generation_settings(self.llm)
        limit = next((settings[n] for n in _OUTPUT_LIMIT_NAMES if isinstance(settings.get(n), int)), None)
        reserve = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else DEFAULT_ANSWER_RESERVE
        window = self.context_window
        return min(reserve, window // 2) if window else reserve

    def context_budget(self, budget: int | None, overhead: str = "") -> int | None:
        """``budget`` (in :func:`~graphstrata.llm.base.estimate_tokens` tokens, ``None``:
        unbounded) scaled down so that a prompt of ``overhead`` text plus that much context
        fits the window less :meth:`answer_reserve`; ``budget`` unchanged when the window is
        unknown. At least 1.

        The room is converted from the model's tokens to estimate tokens by
        ``count_prompt_tokens`` / ``estimate_tokens`` of the overhead (3 : 4 without a
        tokenizer), so a budget that fits by estimate fits by the model's count."""
        window = self.context_window
        if window is None:
            return budget
        room = window - self.answer_reserve() - count_prompt_tokens(self.llm, overhead)
        ratio = 3 / 4  # estimate tokens (4 chars) per model token (counted as 3 chars)
        if overhead and callable(getattr(self.llm, "count_tokens", None)):
            ratio = max(estimate_tokens(overhead), 1) / max(count_prompt_tokens(self.llm, overhead), 1)
        fit = max(1, int(room * ratio))
        return fit if budget is None else max(1, min(budget, fit))

    def check_fits(self, req: LLMRequest, stage: str) -> None:
        """Refuse a prompt that would not fit the window (nothing is sent).

        Raises:
            PromptTooLongError: system prompt + prompt take more than the window less
                :meth:`answer_reserve` tokens (:func:`~graphstrata.llm.base.count_prompt_tokens`).
        """
        window = self.context_window
        if window is None:
            return
        reserve = self.answer_reserve()
        n = count_prompt_tokens(self.llm, (req.system or "") + "\n\n" + req.prompt)
        if n > window - reserve:
            raise PromptTooLongError(
                f"the prompt of stage {stage!r} has about {n} tokens, over the context window of "
                f"{self.llm.id} ({window} tokens, {reserve} kept for the answer); it was not sent. "
                "Lower the stage's budget (max_context_tokens, chunk_size) or use a model with a larger window"
            )

    def key(self, req: LLMRequest) -> str:
        """The response cache key of ``req`` for this client's model: model id, its current
        generation settings (:func:`~graphstrata.llm.base.generation_settings`, read at each
        call, so a changed ``max_tokens`` is a new key) and the request."""
        return req.key(self.llm.id, generation_settings(self.llm))

    def with_cache(self, cache: ResponseCache) -> LLMClient:
        """A client sharing this one's model, concurrency bound and ledger, with ``cache``."""
        return LLMClient(
            self.llm, cache, self.concurrency, self.attempts, self.ledger, self._sem, self.max_failure_share,
            self._window,
        )

    def _ledgers(self) -> tuple[Ledger, ...]:
        """This client's ledger and the ledger of every open :func:`usage_scope`: where each
        count goes."""
        return (self.ledger, *_SCOPES.get())

    def _record(self, stage: str, usage: Usage | None, cached: bool) -> None:
        for ledger in self._ledgers():
            ledger.record(stage, usage, cached)

    def fallback(self, stage: str, what: str) -> None:
        """Record that ``stage`` fell back (``what``: ``"offline fallback, unreadable
        answer"``, ...) in this client's ledger and every open :func:`usage_scope`, as the
        note ``"<step>: <what>"`` (the step is the stage without its ``query:`` prefix);
        :meth:`GraphStrata.answer <graphstrata.GraphStrata.answer>` reports them in
        ``Answer.fallbacks``."""
        note = f"{stage.removeprefix('query:')}: {what}"
        for ledger in self._ledgers():
            ledger.fallback(note)

    def skip(self, stage: str, n: int = 1) -> None:
        """Count ``n`` records of ``stage`` the parsers skipped (in every open scope too)."""
        for ledger in self._ledgers():
            ledger.skip(stage, n)

    def count_kept(self, stage: str, n: int = 1) -> None:
        """Count ``n`` prompts of ``stage`` answered from the answers an index keeps
        (:func:`graphstrata.llm.records.kept_map`: no call was made), in every open scope too."""
        for ledger in self._ledgers():
            ledger.keep(stage, n)

    def count_answers(self, stage: str, answers: int, failures: Mapping[str, int]) -> None:
        """Count ``answers`` checked answers of ``stage`` and the failed ones by reason (in
        every open scope too), without stopping the stage: for a best-effort stage whose
        failures fall back to offline text (HiRAG's community reports)."""
        for ledger in self._ledgers():
            ledger.check(stage, answers, failures)

    def check_answers(self, stage: str, answers: int, failures: Mapping[str, int]) -> None:
        """Count ``answers`` checked answers of ``stage`` and the failed ones by reason (in
        every open scope too), then stop the stage when too many failed.

        Raises:
            LLMOutputError: more than :attr:`max_failure_share` of ``answers`` failed (the
                message names the model, the stage and the share).
        """
        self.count_answers(stage, answers, failures)
        check_failure_share(self.llm.id, stage, answers, failures, self.max_failure_share)

    def complete(
        self, prompt: str, *, system: str | None = None, json_mode: bool = False, stage: str = "llm"
    ) -> LLMResponse:
        """Complete one prompt through the cache.

        Raises:
            LLMError: the model failed (after retries on transient errors), or returned
                something other than an :class:`LLMResponse` / ``str``.
        """
        return self.request(LLMRequest(prompt, system, json_mode), stage)

    def request(self, req: LLMRequest, stage: str = "llm") -> LLMResponse:
        """:meth:`complete` for an :class:`LLMRequest`.

        In a worker thread started by :func:`run_in_worker_thread`, a cache miss of an LLM
        with an async API is awaited on the caller's event loop (:meth:`arequest`); otherwise
        the call is synchronous, in this thread."""
        key, hit = self._lookup(req, stage)
        if hit is not None:
            return hit
        loop = _caller_loop()
        if loop is not None and has_async_api(self.llm):
            return asyncio.run_coroutine_threadsafe(self.arequest(req, stage), loop).result()
        retrying = Retrying(**self._retry_policy())
        try:
            with self._sem:
                out = retrying(self.llm.complete, req.prompt, system=req.system, json_mode=req.json_mode)
        except Exception as exc:
            raise self._failed(stage, exc) from exc
        return self._received(out, req, key, stage)

    async def arequest(self, req: LLMRequest, stage: str = "llm") -> LLMResponse:
        """:meth:`request` awaited on the running event loop through the LLM's ``acomplete``
        (retries with tenacity's async retrying; at most ``concurrency`` calls in flight on
        this loop).

        Raises:
            LLMError: as :meth:`complete`.
        """
        key, hit = self._lookup(req, stage)
        if hit is not None:
            return hit
        retrying = AsyncRetrying(**self._retry_policy())
        try:
            async with self._loop_semaphore():
                out = await retrying(self.llm.acomplete, req.prompt, system=req.system, json_mode=req.json_mode)
        except Exception as exc:
            raise self._failed(stage, exc) from exc
        return self._received(out, req, key, stage)

    def _lookup(self, req: LLMRequest, stage: str) -> tuple[str, LLMResponse | None]:
        """``(cache key, cached response)`` of ``req``; on a miss (``None``) the prompt has
        been checked to fit the window.

        Raises:
            PromptTooLongError: a miss whose prompt does not fit (nothing is sent).
        """
        key = self.key(req)
        hit = self._cached(key, stage)
        if hit is None:
            self.check_fits(req, stage)
        return key, hit

    def _retry_policy(self) -> dict[str, Any]:
        """tenacity's retry settings of a call: ``attempts`` tries, this client's wait,
        transient errors only (:func:`is_transient`), the last error re-raised."""
        return {
            "stop": stop_after_attempt(self.attempts),
            "wait": self._wait,
            "retry": retry_if_exception(is_transient),
            "reraise": True,
        }

    def _failed(self, stage: str, exc: BaseException) -> LLMError:
        """The :class:`LLMError` of a call that failed after its retries."""
        return LLMError(f"LLM call failed in stage {stage!r} ({self.llm.id}): {type(exc).__name__}: {exc}")

    def stream_request(self, req: LLMRequest, stage: str = "llm") -> Iterator[str]:
        """:meth:`request` with the output given as it is written: an iterator of its text
        pieces, in order, that join to the text :meth:`request` would return.

        Through the LLM's ``stream`` (see :class:`~graphstrata.llm.base.LLM`) when it has one;
        else through :meth:`request`, the whole text as one piece. A cached response is one
        piece, counted as cached. When the stream ends, the complete output is cached and
        counted (tokens: the :class:`Usage` the stream reported, else estimated); a stream
        closed before its end is counted as one call with its partial output (estimated) and
        is not cached. Holds one of the ``concurrency`` slots while the stream is open.

        Transient errors raised before the first piece are retried as in :meth:`request`; an
        error after a piece was given ends the stream with :class:`LLMError` (a retry would
        give the pieces twice). Errors are raised while iterating, not by this call.

        Raises:
            LLMError: the call failed (after its retries, see above), or the stream gave
                something other than ``str`` / :class:`Usage`.
            PromptTooLongError: the prompt does not fit the window (nothing is sent).
        """
        key, hit = self._lookup(req, stage)
        if hit is not None:
            if hit.text:
                yield hit.text
            return
        stream = getattr(self.llm, "stream", None)
        if not callable(stream):
            text = self.request(req, stage).text
            if text:
                yield text
            return
        out = _StreamedOutput(self, req, key, stage)
        retrying = Retrying(**self._retry_policy())
        with self._sem:
            try:
                for attempt in retrying:
                    with attempt:
                        pieces = iter(stream(req.prompt, system=req.system, json_mode=req.json_mode))
                        item = next(pieces, _END)
                while item is not _END:
                    text = out.take(item)
                    if text:
                        yield text
                    item = next(pieces, _END)
                out.finished = True
            except Exception as exc:
                raise out.error(exc) from exc
            finally:
                out.close()

    async def astream_request(self, req: LLMRequest, stage: str = "llm") -> AsyncIterator[str]:
        """:meth:`stream_request` on the running event loop (at most ``concurrency`` calls in
        flight on it): through the LLM's ``astream`` when it has one and an async API
        (:func:`~graphstrata.llm.base.has_async_api`); else its ``stream`` read in a worker
        thread; else one piece, through :meth:`arequest` (an async API) or :meth:`request` in a
        worker thread. Caching, counting and retries as :meth:`stream_request`.

        Raises:
            LLMError, PromptTooLongError: as :meth:`stream_request`.
        """
        key, hit = self._lookup(req, stage)
        if hit is not None:
            if hit.text:
                yield hit.text
            return
        native = has_async_api(self.llm)
        astream = getattr(self.llm, "astream", None)
        stream = getattr(self.llm, "stream", None)
        if callable(astream) and native:
            def open_stream() -> AsyncIterator[Any]:
                return aiter(astream(req.prompt, system=req.system, json_mode=req.json_mode))
        elif callable(stream):
            def open_stream() -> AsyncIterator[Any]:
                return stream_in_thread(lambda: stream(req.prompt, system=req.system, json_mode=req.json_mode))
        else:
            response = await (self.arequest(req, stage) if native else asyncio.to_thread(self.request, req, stage))
            if response.text:
                yield response.text
            return
        out = _StreamedOutput(self, req, key, stage)
        retrying = AsyncRetrying(**self._retry_policy())
        async with self._loop_semaphore():
            try:
                async for attempt in retrying:
                    with attempt:
                        pieces = open_stream()
                        item = await anext(pieces, _END)
                while item is not _END:
                    text = out.take(item)
                    if text:
                        yield text
                    item = await anext(pieces, _END)
                out.finished = True
            except Exception as exc:
                raise out.error(exc) from exc
            finally:
                out.close()

    def _loop_semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._loop_sems_lock:
            sem = self._loop_sems.get(loop)
            if sem is None:
                sem = self._loop_sems[loop] = asyncio.Semaphore(self.concurrency)
            return sem

    def _cached(self, key: str, stage: str) -> LLMResponse | None:
        hit = self.cache.get(key)
        if hit is not None:
            self._record(stage, None, cached=True)
        return hit

    def _received(self, out: Any, req: LLMRequest, key: str, stage: str) -> LLMResponse:
        """Check, count and cache what the model returned."""
        if isinstance(out, str):
            out = LLMResponse(
                out,
                Usage(estimate_tokens((req.system or "") + req.prompt), estimate_tokens(out), True),
            )
        if not isinstance(out, LLMResponse) or not isinstance(out.text, str):
            raise LLMError(
                f"LLM {self.llm.id!r} returned {type(out).__name__} in stage {stage!r}; expected LLMResponse"
            )
        self._record(stage, out.usage, cached=False)
        self.cache.put(key, out)
        return out

    def map(self, requests: Sequence[LLMRequest], stage: str, show_progress: bool = False) -> list[LLMResponse]:
        """Complete every request, at most ``concurrency`` in flight; results in input order.

        All requests run even when one fails (their responses are cached); then the first
        failure is raised. Inside an indexing stage run by a distributed runner
        (:class:`graphstrata.ray_runner.RayRunner`) the cache misses are completed on its
        workers, ``concurrency`` calls in flight per worker, while this client's cache,
        ledger and open :func:`usage_scope` s record every response as it comes back.

        Raises:
            LLMError: at least one call failed after its retries.
        """
        requests = list(requests)
        if not requests:
            return []
        bar = None
        if show_progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(requests), desc=stage, unit="call")
        from ..runner import distributed_llm

        remote = distributed_llm()
        if remote is not None:
            return self._map_remote(remote, requests, stage, bar)
        results: list[LLMResponse | None] = [None] * len(requests)
        errors: list[BaseException] = []

        def run(i: int) -> None:
            try:
                results[i] = self.request(requests[i], stage)
            except BaseException as exc:  # noqa: BLE001 - collected, re-raised below
                errors.append(exc)
            finally:
                if bar is not None:
                    bar.update(1)

        workers = min(self.concurrency, len(requests))
        if workers == 1:
            for i in range(len(requests)):
                run(i)
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="graphstrata-llm") as pool:
                futures = [pool.submit(contextvars.copy_context().run, run, i) for i in range(len(requests))]
                for f in futures:
                    f.result()
        if bar is not None:
            bar.close()
        if errors:
            raise errors[0]
        return results  # type: ignore[return-value]


    def _map_remote(
        self, remote: Any, requests: list[LLMRequest], stage: str, bar: Any
    ) -> list[LLMResponse]:
        """:meth:`map` on a distributed runner: cache hits answered here, misses sent out;
        each response is cached and counted on arrival (an interrupted build resumes)."""
        results: list[LLMResponse | None] = [None] * len(requests)
        keys = [self.key(r) for r in requests]
        todo: list[int] = []
        for i, key in enumerate(keys):
            hit = self.cache.get(key)
            if hit is None:
                todo.append(i)
                continue
            results[i] = hit
            self._record(stage, None, cached=True)
            if bar is not None:
                bar.update(1)
        errors: list[str] = []
        for i in todo:
            self.check_fits(requests[i], stage)
        if todo:
            outcomes = remote.complete(self.llm, [requests[i] for i in todo], stage, self.concurrency, self.attempts)
            for positions, outs in outcomes:
                for pos, out in zip(positions, outs, strict=True):
                    i = todo[pos]
                    if isinstance(out, LLMResponse):
                        self._record(stage, out.usage, cached=False)
                        self.cache.put(keys[i], out)
                        results[i] = out
                    else:
                        errors.append(str(out))
                if bar is not None:
                    bar.update(len(positions))
        if bar is not None:
            bar.close()
        if errors:
            raise LLMError(f"{errors[0]} ({len(errors)} call(s) of stage {stage!r} failed on the cluster)")
        return results  # type: ignore[return-value]


_END = object()


class _StreamedOutput:
    """The pieces of one streamed call so far, and its accounting when it ends
    (:meth:`LLMClient.stream_request`)."""

    def __init__(self, client: LLMClient, req: LLMRequest, key: str, stage: str) -> None:
        self.client, self.req, self.key, self.stage = client, req, key, stage
        self.pieces: list[str] = []
        self.usage: Usage | None = None
        self.finished = False  # the stream reached its end
        self.ended = False  # counted

    def take(self, item: Any) -> str:
        """The text of one streamed item (``""`` for a :class:`Usage`, which is kept)."""
        if isinstance(item, Usage):
            self.usage = item
            return ""
        if not isinstance(item, str):
            raise TypeError(f"the stream gave {type(item).__name__}, expected str pieces (or one Usage)")
        if item:
            self.pieces.append(item)
        return item

    def error(self, exc: Exception) -> LLMError:
        if isinstance(exc, LLMError):
            return exc
        return self.client._failed(self.stage, exc)

    def close(self) -> None:
        """Count the call (and cache it when the stream reached its end); once."""
        if self.ended:
            return
        self.ended = True
        text = "".join(self.pieces)
        sent = (self.req.system or "") + self.req.prompt
        usage = self.usage or Usage(estimate_tokens(sent), estimate_tokens(text), True)
        if self.finished:
            self.client._received(LLMResponse(text, usage), self.req, self.key, self.stage)
        elif self.pieces:  # closed early or failed after some output: the call was made
            self.client._record(self.stage, Usage(estimate_tokens(sent), estimate_tokens(text), True), False)


async def stream_in_thread(open_stream: Callable[[], Iterable[Any]]) -> AsyncIterator[Any]:
    """The items of the blocking iterable ``open_stream()`` returns, as an async iterator:
    the iterable is opened and each item read in a worker thread, so the event loop never
    blocks on the model (how an async caller reads an LLM that only has a blocking
    ``stream``; the adapters use it when the framework has no async stream). Exceptions are
    raised where the item would have been."""
    pieces = await asyncio.to_thread(lambda: iter(open_stream()))
    while True:
        item = await asyncio.to_thread(next, pieces, _END)
        if item is _END:
            return
        yield item


class DryRunLLM:
    """An :class:`LLM` that spends nothing: every call returns ``""``; its prompt (system
    prompt included) is counted with ``tokenizer``'s ``count_tokens`` when it has one, else
    ``ceil(chars / 3)`` (:func:`~graphstrata.llm.base.count_prompt_tokens`), and its
    completion as ``completion_estimate`` tokens (the per-family estimate is
    :func:`graphstrata.indexing.estimate_llm_cost`'s, from the prompt counts).

    Args:
        completion_estimate: completion tokens recorded per call.
        tokenizer: the LLM the build would use (never called; only ``count_tokens`` is read),
            or ``None``.

    Used by ``graphstrata index --dry-run`` to print the calls and tokens a build would make.
    """

    id = "dry-run"
    native_async = False

    def __init__(self, completion_estimate: int = 0, tokenizer: Any = None) -> None:
        self.completion_estimate = int(completion_estimate)
        self.tokenizer = tokenizer

    def complete(self, prompt: str, *, system: str | None = None, json_mode: bool = False) -> LLMResponse:
        sent = (system or "") + prompt
        return LLMResponse("", Usage(count_prompt_tokens(self.tokenizer, sent), self.completion_estimate, True))

    async def acomplete(
        self, prompt: str, *, system: str | None = None, json_mode: bool = False
    ) -> LLMResponse:
        return self.complete(prompt, system=system, json_mode=json_mode)
