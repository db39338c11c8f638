"""Test doubles for code that builds indexes without the real embedder.

:class:`HashEmbedder` embeds a text as signed counts of its hashed words: deterministic, no
model, thousands of texts a second. It tests control flow, persistence, concurrency and crash
safety; it has no semantic quality and never backs a retrieval-quality claim.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from .models import regex_token_spans

_WORD = re.compile(r"\w+")


class HashEmbedder:
    """Bag of hashed lower-cased words → ``dim`` signed counts, L2-normalised.

    Args:
        dim: output dimension (default 64).

    ``embed(texts)`` returns float32 ``(len(texts), dim)``; ``id`` is ``"test-hash-<dim>"``.
    """

    def __init__(self, dim: int = 64) -> None:
        self.dim = int(dim)
        self.id = f"test-hash-{self.dim}"

    def embed(self, texts):
        """float32 ``(len(texts), dim)``, rows L2-normalised (never a zero row)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in _WORD.findall(t.lower()):
                h = int.from_bytes(hashlib.md5(w.encode()).digest()[:4], "little")
                out[i, h % self.dim] += 1.0 if (h >> 16) & 1 else -1.0
            out[i, 0] += 1e-3  # never a zero vector
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def token_spans(self, text):
        """``[(start, end), ...]`` character offsets of the regex word tokens (chunking)."""
        return regex_token_spans(text)


class ScriptedLLM:
    """An :class:`~graphstrata.llm.LLM` that replays scripted outputs: tests parsing and
    control flow of the LLM path, never quality.

    Args:
        script: ``fn(prompt, system) -> str`` (full control), or a list of ``(marker, output)``
            pairs: the output of the first pair whose marker occurs in the prompt or system
            prompt (case-sensitive); a marker ``""`` matches everything.
        default: output when no pair matches (``""``).
        usage: report real-looking usage (``estimated=False``: prompt/completion lengths in
            words) instead of none.
        fail_first: raise :class:`~graphstrata.llm.TransientLLMError` on the first
            ``fail_first`` calls (tests retries).

    Attributes:
        calls: every ``(prompt, system, json_mode)`` seen, in order (thread-safe append).
    """

    def __init__(self, script=(), default: str = "", usage: bool = False, fail_first: int = 0, id: str = "scripted"):
        import threading

        self.script = script
        self.default = default
        self.usage = usage
        self.fail_first = int(fail_first)
        self.id = id
        self.calls: list[tuple[str, str | None, bool]] = []
        self._lock = threading.Lock()

    def _output(self, prompt, system):
        if callable(self.script):
            return self.script(prompt, system)
        for marker, out in self.script:
            if marker in prompt or (system and marker in system):
                return out
        return self.default

    def complete(self, prompt, *, system=None, json_mode=False):
        from .llm import LLMResponse, TransientLLMError, Usage, estimate_tokens

        with self._lock:
            self.calls.append((prompt, system, json_mode))
            n = len(self.calls)
        if n <= self.fail_first:
            raise TransientLLMError(f"scripted transient failure {n}")
        text = self._output(prompt, system)
        if self.usage:
            return LLMResponse(text, Usage(len(((system or "") + prompt).split()), len(text.split()), False))
        return LLMResponse(text, Usage(estimate_tokens((system or "") + prompt), estimate_tokens(text), True))

    async def acomplete(self, prompt, *, system=None, json_mode=False):
        return self.complete(prompt, system=system, json_mode=json_mode)


class UpdateCalls:
    """Records the top-level ``insert`` / ``upsert`` / ``delete`` calls made on an index, for
    tests that an adapter makes exactly one core update per framework call.

    Args:
        engine: a :class:`~graphstrata.GraphStrata` (its three methods are wrapped in place).
        setattr_fn: how to replace them (pytest's ``monkeypatch.setattr``, so the test undoes
            it; plain :func:`setattr` otherwise).

    Attributes:
        calls: ``[(method_name, [document id, ...]), ...]`` in call order; calls the core makes
            to itself inside one of them (``upsert`` → ``insert``) are not counted.
    """

    def __init__(self, engine: Any, setattr_fn: Callable[[Any, str, Any], Any] = setattr) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self._depth = 0
        for name in ("insert", "upsert", "delete"):
            setattr_fn(engine, name, self._wrap(name, getattr(engine, name)))

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(docs: Any = (), *args: Any, **kwargs: Any) -> Any:
            docs = [docs] if isinstance(docs, str) else list(docs)
            if self._depth == 0:
                self.calls.append((name, [d if isinstance(d, str) else getattr(d, "id", d) for d in docs]))
            self._depth += 1
            try:
                return fn(docs, *args, **kwargs)
            finally:
                self._depth -= 1

        return call
