"""LightRAG's query keywords (spec seed-lightrag.md §2.2 step 1, §2.3): high-level (themes) and
low-level (specific entities) keywords of a query, from an LLM (:func:`llm_keywords`, stage
``"query:keywords"``), a ``keywords_fn`` or, offline, the corpus vocabulary
(:func:`offline_keywords`); :func:`query_keywords` picks among them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..extraction import canonical, capitalised_spans
from ..bm25 import english_stop_words
from ..llm.client import LLMClient
from ..llm.prompts.lightrag_query import keywords_request, parse_keywords

#: ledger stage of the keyword-extraction call
KEYWORDS_STAGE = "query:keywords"

KeywordsFn = Callable[[str], tuple[Sequence[str], Sequence[str]]]
"""``keywords_fn(query) -> (high_level_keywords, low_level_keywords)``: the LLM seam."""

_WORD_RE = re.compile(r"[\w][\w'’\-.&]*[\w]|\w", re.UNICODE)


@dataclass
class Keywords:
    """The two keyword lists of a query (spec §2.3 JSON: high_level / low_level keywords).

    Attributes:
        high_level: themes / concepts (search relations).
        low_level: specific entities and details (search entities).
        matched: entity ids named exactly by a low-level keyword (vocabulary match).
        source: where they came from: ``"offline"`` (:func:`offline_keywords`, also the
            fallback for unreadable LLM output), ``"llm"`` (the keyword prompt) or
            ``"function"`` (a ``keywords_fn``).
    """

    high_level: list[str]
    low_level: list[str]
    matched: list[str] = field(default_factory=list)
    source: str = "offline"


def offline_keywords(query: str, vocabulary: Iterable[str] | Any, max_ngram: int = 5) -> Keywords:
    """Statistical stand-in for the keyword LLM call.

    Args:
        query: the question.
        vocabulary: entity ids (canonical names) — anything supporting ``in``.
        max_ngram: longest word n-gram tried against the vocabulary.

    Returns:
        :class:`Keywords`: low-level = longest-first, non-overlapping query n-grams whose
        canonical form is an entity id (n-grams never start or end with a stop word, and
        single stop words never match), then capitalised spans
        of the query not already covered; high-level = the remaining non-stop words, in query
        order. ``matched`` lists the matched entity ids in query order.
    """
    stop = english_stop_words()
    words = [(m.start(), m.end()) for m in _WORD_RE.finditer(query)]
    used = [False] * len(words)
    found: list[tuple[int, str, str]] = []  # (first word index, surface, entity id)
    for n in range(min(max_ngram, len(words)), 0, -1):
        for i in range(len(words) - n + 1):
            if any(used[i : i + n]):
                continue
            surface = query[words[i][0] : words[i + n - 1][1]]
            key = canonical(surface)
            if not key or (n == 1 and (key in stop or len(key) < 2)):
                continue
            edge_words = (query[slice(*words[i])], query[slice(*words[i + n - 1])])
            if n > 1 and any(canonical(w) in stop for w in edge_words):
                continue  # "the founder", "Paris in": let the shorter n-gram match
            if key in vocabulary:
                found.append((i, surface, key))
                for j in range(i, i + n):
                    used[j] = True
    found.sort()
    low = [s for _, s, _ in found]
    matched = list(dict.fromkeys(k for _, _, k in found))
    covered = {canonical(s) for s in low}
    for span in capitalised_spans(query):
        key = canonical(span)
        if key and key not in covered and key not in stop:
            low.append(span)
            covered.add(key)
    high = [
        query[s:e]
        for (s, e), u in zip(words, used, strict=True)
        if not u and canonical(query[s:e]) not in stop and canonical(query[s:e]) not in covered
    ]
    return Keywords(high_level=high, low_level=low, matched=matched)


def llm_keywords(client: LLMClient, query: str) -> tuple[list[str], list[str]] | None:
    """Ask ``client`` for the query's ``(high_level, low_level)`` keywords (spec §2.3; one
    call, stage ``"query:keywords"``, JSON mode, cached by the client).

    Returns:
        The two lists, or ``None`` when the output is unreadable
        (:func:`~graphstrata.llm.prompts.lightrag_query.parse_keywords`); that is counted as
        one skipped record of the stage and reported as the fallback
        ``"keywords: offline fallback, unreadable answer"`` (``Answer.fallbacks``).

    Raises:
        LLMError: the call failed after the client's retries.
    """
    out = parse_keywords(client.request(keywords_request(query), KEYWORDS_STAGE).text)
    if out is None:
        client.skip(KEYWORDS_STAGE)
        client.fallback(KEYWORDS_STAGE, "offline fallback, unreadable answer")
    return out


def query_keywords(state, query: str, fn: KeywordsFn | None, client: LLMClient | None = None) -> Keywords:
    """The query's keywords: ``fn`` when given, else the LLM when there is one (offline
    fallback on unreadable output), else :func:`offline_keywords`."""
    if fn is not None:
        out, source = fn(query), "function"
    elif client is not None:
        out, source = llm_keywords(client, query), "llm"
    else:
        out = None
    if out is None:
        return offline_keywords(query, state.kg.entities)
    if isinstance(out, dict):  # the spec's JSON shape
        high, low = out.get("high_level_keywords", []), out.get("low_level_keywords", [])
    else:
        high, low = out
    high = [str(x) for x in high if str(x).strip()]
    low = [str(x) for x in low if str(x).strip()]
    matched = list(dict.fromkeys(canonical(x) for x in low if canonical(x) in state.kg.entities))
    return Keywords(high_level=high, low_level=low, matched=matched, source=source)
