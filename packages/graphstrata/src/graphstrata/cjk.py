"""Chinese, Japanese and Korean text for BM25 and the statistical extractor (issue 44).

CJK scripts do not separate words with spaces, so a regex word tokenizer (``\\w+``) keeps a
whole clause of Han characters as one "word": a query word then matches only where it happens
to stand alone, and the extractor's capitalised spans run on into the clause
(``Andrew Morton通常是最后的补丁接收者``). This module follows Lucene's ``CJKAnalyzer``
convention instead (``StandardTokenizer`` + ``CJKBigramFilter``): a run of CJK characters
becomes its overlapping character bigrams (``北京大学`` → ``北京``, ``京大``, ``大学``), a lone CJK
character is a unigram, and text of every other script is left as it is. No segmenter model
is needed, and recall does not depend on one.

The CJK characters are those of Lucene's bigram filter: Han ideographs (the URO, extensions
A-F and the compatibility block), Hiragana, Katakana (with the half-width forms) and Hangul
syllables and jamo.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

_CJK_CLASS = (
    "\u1100-\u11ff"  # Hangul jamo
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3130-\u318f"  # Hangul compatibility jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # Han extension A
    "\u4e00-\u9fff"  # Han unified ideographs
    "\ua960-\ua97f"  # Hangul jamo extended-A
    "\uac00-\ud7af"  # Hangul syllables
    "\ud7b0-\ud7ff"  # Hangul jamo extended-B
    "\uf900-\ufaff"  # Han compatibility ideographs
    "\uff66-\uff9f"  # half-width Katakana
    "\uffa0-\uffdc"  # half-width Hangul
    "\U00020000-\U0003134f"  # Han extensions B-G
)
CJK_RUN_RE = re.compile(f"[{_CJK_CLASS}]+")
"""A maximal run of CJK characters."""

MAX_ENTITY_CJK_RUN = 4
"""Longest run of CJK characters an extracted entity name may hold (characters): a Chinese
or Japanese name is two to four characters; a longer unsegmented run is a clause."""


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK character (ASCII text is answered without a regex)."""
    return not text.isascii() and CJK_RUN_RE.search(text) is not None


def cjk_bigrams(run: str) -> list[str]:
    """The overlapping character bigrams of a CJK run (Lucene ``CJKBigramFilter``).

    Args:
        run: CJK characters only (a match of :data:`CJK_RUN_RE`).

    Returns:
        ``[run[0:2], run[1:3], ...]``; ``[run]`` for a single character; ``[]`` for ``""``.
    """
    if len(run) < 2:
        return [run] if run else []
    return [run[i : i + 2] for i in range(len(run) - 1)]


def cjk_words(words: Iterable[str]) -> Iterator[str]:
    """Word tokens with every CJK run replaced by its bigrams, other text unchanged.

    A word that mixes scripts (``Morton通常是``: ``\\w+`` joins them) is split at the script
    change: ``Morton``, then the bigrams of ``通常是``. A word with no CJK character is yielded
    as it is (an ASCII word without a regex test), so English tokens are exactly those of the
    input.

    Args:
        words: tokens, e.g. the matches of ``\\w+`` over a text.

    Yields:
        Tokens, in text order.
    """
    for word in words:
        if word.isascii():
            yield word
            continue
        pos = 0
        for m in CJK_RUN_RE.finditer(word):
            if m.start() > pos:
                yield word[pos : m.start()]
            yield from cjk_bigrams(m.group(0))
            pos = m.end()
        if pos == 0:
            yield word
        elif pos < len(word):
            yield word[pos:]


def cut_long_cjk_runs(name: str, max_run: int = MAX_ENTITY_CJK_RUN) -> str:
    """An entity name cut before its first CJK run longer than ``max_run`` characters.

    The statistical extractor's patterns (capitalised words, TF-IDF terms) see an unsegmented
    Han clause as one word; what precedes the clause is kept (``Andrew Morton通常是最后的补丁接收者``
    → ``Andrew Morton``) and a name that is all clause becomes ``""`` (no entity).

    Args:
        name: a candidate entity name.
        max_run: longest CJK run kept, in characters.

    Returns:
        ``name`` itself when it has no such run (always for ASCII), else the part before the
        run with trailing spaces and punctuation stripped (possibly ``""``).
    """
    if name.isascii():
        return name
    for m in CJK_RUN_RE.finditer(name):
        if m.end() - m.start() > max_run:
            return name[: m.start()].rstrip(" \t\n-.,;:'’\"")
    return name
