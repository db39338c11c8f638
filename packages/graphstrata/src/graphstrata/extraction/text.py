"""Sentence and name handling of the statistical extractor: sentence splitting
(:func:`split_sentences`, :func:`bounded_sentences`), capitalised spans
(:func:`capitalised_spans`), canonical merge keys (:func:`canonical`) and term finding in a
sentence (:func:`term_finder`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from ..cjk import cut_long_cjk_runs
from ..sentences import sentence_spans

DEFAULT_MAX_SENTENCE_CHARS = 2_000
"""Longest span treated as one sentence by :class:`StatisticalExtractor` (characters)."""

_SENT_RE = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_CAP_WORD = r"(?:[A-Z][\w\-.&]*[\w]|[A-Z])"
_CONNECT = r"(?:of|the|de|del|la|le|von|van|der|du|da|di|&)"
_CAP_SPAN_RE = re.compile(
    rf"\b{_CAP_WORD}(?:\s+(?:{_CONNECT}\s+)*{_CAP_WORD})*"
)
_CONNECT_RE = re.compile(_CONNECT)
_POSSESSIVE_RE = re.compile(r"['’]s$")
_ARTICLE_RE = re.compile(r"^(the|a|an)\s+", re.I)
_SPACE_RE = re.compile(r"\s+")
# Capitalised words that are almost never entities on their own.
CAP_STOP = frozenset(
    """a an the this that these those it its he she they we you i his her their our my your
    in on at by for from to of and or but if when while after before during since until as
    there here what which who whom whose where why how all any some each every no not
    also however although though because so then thus hence yes yeah ok okay hi hey hello
    thanks thank please sure great good well oh wow let just what's it's i'm i've i'll
    i'd don't can't won't that's there's let's mr mrs ms dr st jan feb mar apr jun jul aug
    sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday time""".split()
)




@lru_cache(maxsize=8192)
def term_pattern(term: str) -> re.Pattern[str]:
    """Case-insensitive pattern of a TF-IDF term, its words joined by spaces or hyphens.

    Cached: the same terms recur across chunks, and ``re``'s own cache (512 patterns) thrashes
    on a large corpus (compiling was a sixth of extraction time on 1 MB of text).
    """
    return re.compile(r"\b" + r"[\s\-]+".join(map(re.escape, term.split())) + r"\b", re.I)


WORD_RE = re.compile(r"\w+")
"""A word (``\\w+``)."""
_TERM_GAP_RE = re.compile(r"[\s\-]+")


def term_head(term: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """What an ASCII sentence must hold for :func:`term_finder` to find the ASCII TF-IDF
    ``term`` in it: ``(plain, other)``, the term's lower-cased parts that are plain words (each
    a word of the sentence) and the others (each in its lower-cased text); ``None`` for a term
    that is not ASCII or has no part (no quick test)."""
    if not term.isascii():
        return None
    parts = [p.lower() for p in term.split()]
    if not parts:
        return None
    plain = tuple(p for p in parts if WORD_RE.fullmatch(p))
    return plain, tuple(p for p in parts if not WORD_RE.fullmatch(p))


def term_finder(sentence: str) -> Callable[[str], str | None]:
    """``find(term)``: the leftmost occurrence in ``sentence`` of a TF-IDF term (lower-case
    words joined by single spaces), its words as whole words joined by spaces or hyphens,
    case-insensitive — what ``term_pattern(term).search(sentence)`` matches, from one
    tokenisation of the sentence instead of one compiled pattern per term (compiling was half
    of extraction on MuSiQue's 22k distinct terms). Falls back to the pattern for a term that
    is not plain words or where lower-casing changes a word's length."""
    spans = [(m.start(), m.end()) for m in WORD_RE.finditer(sentence)]
    words = [sentence[a:b].lower() for a, b in spans]
    first: dict[str, list[int]] = {}
    for i, w in enumerate(words):
        first.setdefault(w, []).append(i)
    exact = all(b - a == len(w) for (a, b), w in zip(spans, words, strict=True))

    def find(term: str) -> str | None:
        parts = term.split()
        if not exact or not parts or any(WORD_RE.fullmatch(p) is None for p in parts):
            m = term_pattern(term).search(sentence)
            return m.group(0) if m else None
        n = len(parts)
        for i in first.get(parts[0].lower(), ()):
            if i + n > len(words):
                break
            if all(
                words[i + j] == parts[j].lower()
                and _TERM_GAP_RE.fullmatch(sentence, spans[i + j - 1][1], spans[i + j][0])
                for j in range(1, n)
            ):
                return sentence[spans[i][0] : spans[i + n - 1][1]]
        return None

    return find



@lru_cache(maxsize=1 << 16)
def canonical(name: str) -> str:
    """Canonical merge key of an entity surface form: lower-case, folded spaces, no article.
    (Cached: names recur across chunks.)"""
    key = _SPACE_RE.sub(" ", name.strip().lower())
    key = _ARTICLE_RE.sub("", key)
    return key.strip(" .,'’\"-")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences (and lines) of ``text``, empty spans dropped."""
    spans = []
    start = 0
    for m in _SENT_RE.finditer(text):
        if m.start() > start:
            spans.append((start, m.start()))
        start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return [(s, e) for s, e in spans if text[s:e].strip()]


def bounded_sentences(text: str, max_chars: int, split: str = "regex") -> list[tuple[int, int]]:
    """:func:`split_sentences` (``split="splitter"``: :func:`graphstrata.sentences.sentence_spans`),
    with every span longer than ``max_chars`` cut into pieces.

    A long span is cut at the last whitespace at most ``max_chars`` characters after the
    piece's start (at exactly ``max_chars`` where there is none), so each piece holds at most
    ``max_chars`` characters. Spans that fit are returned unchanged.

    Args:
        text: the text to split.
        max_chars: longest piece, in characters (> 0).

    Returns:
        Character spans ``[(start, end), ...]`` in text order, blank pieces dropped.

    Raises:
        ValueError: ``max_chars`` ≤ 0.
    """
    if int(max_chars) <= 0:
        raise ValueError(f"max_chars must be > 0 characters, got {max_chars}")
    out: list[tuple[int, int]] = []
    for s, e in sentence_spans(text) if split == "splitter" else split_sentences(text):
        while e - s > max_chars:
            cut = s + max_chars
            space = max(text.rfind(" ", s + 1, cut + 1), text.rfind("\t", s + 1, cut + 1))
            if space > s:
                cut = space
            if text[s:cut].strip():
                out.append((s, cut))
            s = cut
            while s < e and text[s].isspace():
                s += 1
        if s < e and text[s:e].strip():
            out.append((s, e))
    return out


def capitalised_spans(sentence: str) -> list[str]:
    """Capitalised word runs of ``sentence`` that look like names.

    A run may contain lower-case connectors (``of``, ``de``, ``von`` …) between capitalised
    words. A single capitalised word is kept only when it is not the sentence's first word and
    not a common function word.
    """
    out = []
    for m in _CAP_SPAN_RE.finditer(sentence):
        span = _POSSESSIVE_RE.sub("", cut_long_cjk_runs(m.group(0)).strip(" .-"))  # cjk.py
        words = span.split()
        # strip trailing connectors picked up by the pattern
        while words and _CONNECT_RE.fullmatch(words[-1]):
            words.pop()
        while words and words[0].lower() in CAP_STOP:
            words.pop(0)
        if not words:
            continue
        span = " ".join(words)
        if len(words) == 1:
            w = words[0]
            if w.lower() in CAP_STOP or len(w) < 2:
                continue
            if m.start() == 0 and not w.isupper():
                continue  # sentence-initial capital: ambiguous
        out.append(span)
    return out

