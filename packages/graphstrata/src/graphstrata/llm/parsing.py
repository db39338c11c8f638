"""Forgiving parsing of LLM output: take what is valid, skip the rest, never raise.

Small local models wrap JSON in chatter or code fences, leave trailing commas, use single
quotes, or stop mid-object. :func:`extract_json` finds the first JSON value that parses
(repairing the common faults); the record parsers of each prompt family build on it and count
what they skip (``LLMClient.skip``).
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE_RE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",\s*([}\]])")


def _candidates(text: str) -> list[str]:
    out = [m.group(1) for m in _FENCE_RE.finditer(text)]
    out.append(text)
    return out


def _balanced(text: str, start: int) -> str | None:
    """The substring from ``text[start]`` (``{`` or ``[``) to its matching bracket, honouring
    strings; ``None`` when it never closes."""
    stack = []
    in_str = False
    quote = ""
    esc = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                in_str = False
            continue
        if ch in "\"'":
            in_str, quote = True, ch
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return text[start : i + 1]
    return None


def _loads(s: str) -> Any:
    for attempt in (s, _TRAILING_COMMA_RE.sub(r"\1", s)):
        try:
            return json.loads(attempt)
        except (json.JSONDecodeError, RecursionError):
            pass
    # single-quoted pseudo-JSON (Python literals) from small models
    try:
        import ast

        value = ast.literal_eval(_TRAILING_COMMA_RE.sub(r"\1", s))
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return _FAIL
    return value if isinstance(value, (dict, list)) else _FAIL


_FAIL = object()


def extract_json(text: str, want: type | tuple[type, ...] = (dict, list)) -> Any | None:
    """The first JSON object or array in ``text`` that parses, or ``None``.

    Looks inside code fences first, then the whole text; repairs trailing commas and accepts
    Python-literal quoting. ``want`` restricts the accepted top-level type (``dict`` or
    ``list``).
    """
    if not isinstance(text, str) or not text:
        return None
    for cand in _candidates(text):
        for m in re.finditer(r"[\[{]", cand):
            block = _balanced(cand, m.start())
            if block is None:
                continue
            value = _loads(block)
            if value is not _FAIL and isinstance(value, want):
                return value
    return None


def as_text(value: Any) -> str:
    """A field value as stripped text: strings stripped, numbers formatted, lists joined with
    ``", "``, ``None`` → ``""``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (list, tuple)):
        return ", ".join(as_text(v) for v in value if as_text(v))
    return str(value).strip()


def as_float(value: Any, default: float | None = None) -> float | None:
    """A number from ``value`` (``7``, ``"7.5"``, ``"8/10"``, ``"score: 6"``), else ``default``."""
    if isinstance(value, bool):
        return default
    if isinstance(value, (int, float)):
        return float(value) if value == value else default
    if isinstance(value, str):
        m = re.search(r"-?\d+(?:\.\d+)?", value)
        if m:
            return float(m.group(0))
    return default


class StrippedText:
    """An answer read as it streams: the model's output with leading and trailing whitespace
    removed (``str.strip``), given piece by piece.

    :meth:`feed` returns the part of the text that can be shown now (leading whitespace is
    dropped, whitespace at the end of a piece is held back until more text follows it);
    :meth:`end` returns what is left when the output is complete. However the output is cut
    into pieces, the concatenation of every return value equals ``output.strip()``.
    """

    def __init__(self) -> None:
        self.started = False
        self._held = ""

    def feed(self, delta: str) -> str:
        """The text of ``delta`` that can be shown now (``""`` when none)."""
        if not self.started:
            delta = delta.lstrip()
            if not delta:
                return ""
            self.started = True
        text = self._held + delta
        shown = text.rstrip()
        self._held = text[len(shown):]
        return shown

    def end(self) -> str:
        """What is left to show once the output is complete: nothing (trailing whitespace is
        dropped)."""
        self._held = ""
        return ""

