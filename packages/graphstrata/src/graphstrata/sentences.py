"""Sentence and paragraph boundaries of a text, for sentence-boundary chunking (issue 44).

The splitter is Bling Fire's (Microsoft, package ``blingfire``): a finite-state sentence
breaker trained on many languages (it ends sentences at ``。！？`` as at ``.!?``, and keeps
``Dr.``, ``e.g.``, ``U.S.``, ``$3.50`` and ``Jan. 5`` inside a sentence). It was chosen over
pysbd and spaCy's ``senter`` by speed, measured on 2,000 HotpotQA passages (2.0 M characters) on
the 2-core build machine with another process keeping a core busy (2026-12-05):

==============================================  ================  ===============
splitter                                        characters / s    sentences / s
==============================================  ================  ===============
:func:`sentence_boundaries` (blingfire 0.1.8)   3.4 M             25,600
blingfire's own Python wrapper                  1.6 M             12,400
spaCy 3.8 ``senter`` (en_core_web_sm)           0.14 M            1,100
pysbd 0.3.4                                     0.07 M            530
==============================================  ================  ===============

A 1M-chunk corpus is ~0.85e9 characters; split twice (chunking, then the extractor's
sentences) that is ~4 min on two cores here, against ~100 min with spaCy and ~200 with pysbd
(the 1M fast-preset build takes 41 min and must stay within 60). On the kernel docs' visible
text the splitter ran at 9.4 M characters / s on a quieter machine (``bench/bench_text.py``).
spaCy's small model also kept ``See Fig. 2`` apart and ran three Chinese sentences together;
pysbd split the test sentences as well as blingfire, ~50x slower. Bling Fire's last release is
0.1.8 (2021); it is Microsoft's, MIT-licensed, and its wheel ships x86-64 native libraries only
(Linux, macOS, Windows): elsewhere ``chunking="sentence"`` raises ImportError naming the
problem, and the default token chunking needs nothing of it.

Paragraphs (a blank line: ``\\n`` + optional spaces + ``\\n``) are boundaries too; a text read
from Markdown, reST or HTML (:mod:`graphstrata.markup`) has one between every block (heading,
paragraph, list item, table row), so a heading is never glued to the sentence after it.

Offsets are Python string offsets (code points) into the text given. The native library is
called directly (``ctypes``), on pieces of at most :data:`PIECE_CHARS` characters cut at
paragraph breaks, so memory stays bounded on a long document (Bling Fire's buffers take ~16
bytes per input byte); its UTF-8 byte offsets are mapped back to string offsets with numpy.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from ctypes import byref, c_char_p, c_int, c_int32, create_string_buffer
from functools import lru_cache
from typing import Any

import numpy as np

PIECE_CHARS = 1 << 20
"""Longest piece of text handed to the splitter at once (characters)."""
_PARAGRAPH_RE = re.compile(r"\n[ \t\r\f\v]*\n\s*")

SPLITTER = "blingfire"
"""The name of the sentence splitter this module uses (recorded in docs and benches)."""


@lru_cache(maxsize=1)
def _library() -> Any:
    """Bling Fire's native library (``blingfire.blingfire``, a ``ctypes.CDLL``).

    Raises:
        ImportError: ``blingfire`` is not installed, or its native library does not load on
            this platform (the wheel ships x86-64 Linux, macOS and Windows builds); the message
            says so.
    """
    try:
        import blingfire
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise ImportError(
            "sentence-boundary chunking needs the blingfire package: pip install blingfire"
        ) from exc
    except OSError as exc:  # pragma: no cover - platform without a build
        raise ImportError(
            f"blingfire's native library does not load on this platform ({exc}); use "
            'chunking="tokens"'
        ) from exc
    return blingfire.blingfire


def _blingfire_starts(piece: str) -> list[int]:
    """Start offsets (string offsets into ``piece``) of Bling Fire's sentences of ``piece``."""
    if not piece.strip():
        return []
    lib = _library()
    data = piece.encode("utf-8", "surrogatepass")
    n_bytes = len(data)
    out = create_string_buffer(n_bytes * 2 + 16)
    size = len(out)
    starts = (c_int32 * size)()
    ends = (c_int32 * size)()
    n_out = lib.TextToSentencesWithOffsets(
        c_char_p(data), c_int(n_bytes), byref(out), byref(starts), byref(ends), c_int(size)
    )
    if n_out <= 0 or n_out > size:  # pragma: no cover - the library's error value
        return [len(piece) - len(piece.lstrip())]
    n_sent = out.value.count(b"\n") + 1
    first = np.frombuffer(starts, dtype=np.int32, count=n_sent)
    if len(data) == len(piece):  # ASCII (or Latin text without multi-byte characters)
        return first.tolist()
    lead = (np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80
    char_of_byte = np.cumsum(lead) - 1
    return char_of_byte[np.clip(first, 0, n_bytes - 1)].tolist()


def _pieces(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` pieces of at most :data:`PIECE_CHARS` characters, cut after a
    paragraph break (else a newline, else a space, else anywhere) near the limit."""
    out, pos, n = [], 0, len(text)
    while n - pos > PIECE_CHARS:
        limit = pos + PIECE_CHARS
        cut = -1
        for sep in ("\n\n", "\n", " "):
            cut = text.rfind(sep, pos + PIECE_CHARS // 2, limit)
            if cut > pos:
                cut += len(sep)
                break
        if cut <= pos:
            cut = limit
        out.append((pos, cut))
        pos = cut
    out.append((pos, n))
    return out


def paragraph_starts(text: str) -> list[int]:
    """Offsets where a paragraph starts: the first non-space character after each blank line
    (and the text's first non-space character).

    Returns:
        Sorted string offsets into ``text``; ``[]`` for a blank text.
    """
    first = len(text) - len(text.lstrip())
    if first >= len(text):
        return []
    out = [first]
    out.extend(m.end() for m in _PARAGRAPH_RE.finditer(text) if m.end() < len(text))
    return sorted(set(out))


def sentence_boundaries(text: str) -> tuple[list[int], list[int]]:
    """Where sentences and paragraphs start in ``text``.

    Args:
        text: any text.

    Returns:
        ``(starts, paragraphs)``: sorted string offsets of every sentence start (paragraph
        starts included) and of the paragraph starts alone. Both ``[]`` for a blank text.

    Raises:
        ImportError: the splitter cannot be loaded (see :func:`_library`).
    """
    paragraphs = paragraph_starts(text)
    if not paragraphs:
        return [], []
    starts = set(paragraphs)
    for lo, hi in _pieces(text):
        starts.update(lo + s for s in _blingfire_starts(text[lo:hi]))
    # a start on whitespace (the splitter's piece boundaries) moves to the next character
    out = sorted({_skip_space(text, s) for s in starts if s < len(text)} - {len(text)})
    return out, paragraphs


def _skip_space(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i].isspace():
        i += 1
    return i


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (:func:`sentence_boundaries`), trailing
    whitespace left out and blank spans dropped.

    Returns:
        ``[(start, end), ...]`` in text order, ``text[start:end]`` one sentence.
    """
    starts, _ = sentence_boundaries(text)
    out = []
    for k, s in enumerate(starts):
        e = starts[k + 1] if k + 1 < len(starts) else len(text)
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
    return out


def token_boundaries(
    token_starts: list[int], char_starts: list[int]
) -> list[int]:
    """Token indices at which the character offsets ``char_starts`` fall: for each offset,
    the first token starting at or after it (sorted, unique; may include ``len(token_starts)``).
    """
    return sorted({bisect_left(token_starts, c) for c in char_starts})
