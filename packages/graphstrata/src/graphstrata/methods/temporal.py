"""Calendar dates of documents and the dates a question names (temporal linking, no LLM).

Chat logs, meeting notes, diaries and news carry their date in a header ("Time:
20260708_14:00", a title like ``2026-07-08 standup``, a ``date`` metadata field); a question
then asks about "the discussion on 20260708" or "what Li Hua reported on January 6th". Dense and
BM25 scores barely see that: the date is one token of a long chunk, or is written differently
("January 6th" vs ``20260106``). :class:`DateIndex` links such a question to the documents of
that day, the temporal counterpart of :class:`~graphstrata.extraction.TitleIndex` (query-to-node
linking in HippoRAG's sense, with day nodes).

Only *day* dates are linked: a month alone ("in May") names dozens of sessions (measured +0.002
recall@5 on LiHua-World, whose three month questions it touches; not worth the false links). A
date without a year ("January 6th") matches that day in any year.

:func:`order_clauses` splits "did A before/after B" questions into their event clauses, so each
can be retrieved on its own (used by ArchRAG's ``decompose`` option), at most
``config.max_query_clauses`` of them.

Measured on LiHua-World dev (recall@5 of ArchRAG): day links 0.907 → 0.918 with clauses on,
clauses 0.911 → 0.918 with day links on, both off 0.900; no change on MuSiQue / HotpotQA.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping
from typing import Any

from ..bm25 import bm25_tokenize
from ..config import DEFAULT_MAX_QUERY_CLAUSES

__all__ = ["DateIndex", "document_date", "mentioned_dates", "order_clauses"]

_MONTHS = (
    "january february march april may june july august september october november december"
).split()
_MONTH_NUMBER = {name: i + 1 for i, name in enumerate(_MONTHS)}
_MONTH_NUMBER.update({name[:3]: i + 1 for i, name in enumerate(_MONTHS)})
_MONTH_NUMBER["sept"] = 9
_MONTH_NAME = (
    r"(January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\b\.?"
)
_YEAR = r"((?:19|20)\d\d)"
# 20260708, also inside 20260708_1400 (a time-stamp suffix after "_" or "T")
_COMPACT_RE = re.compile(r"(?<![\d])((?:19|20)\d\d)(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?!\d)")
# 2026-07-08, 2026/7/8, 2026.07.08
_ISO_RE = re.compile(r"(?<![\d])((?:19|20)\d\d)([-/.])(0?[1-9]|1[0-2])\2(0?[1-9]|[12]\d|3[01])(?!\d)")
# January 6th, Jan. 6, January 6, 2026
_MONTH_DAY_RE = re.compile(
    rf"\b{_MONTH_NAME}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+{_YEAR}\b)?"
)
# 6th January, 6 Jan 2026, the 6th of January
_DAY_MONTH_RE = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_NAME}(?:,?\s+{_YEAR}\b)?"
)
# each written form: (pattern, year group, month group, day group); a month group holds a
# number or a month name, a year group may be empty (no year written)
_DATE_FORMS = (
    (_COMPACT_RE, 1, 2, 3),
    (_ISO_RE, 1, 3, 4),
    (_MONTH_DAY_RE, 3, 1, 2),
    (_DAY_MONTH_RE, 3, 2, 1),
)
_HEADER_CHARS = 120  # a document's date sits in its title or in a header line this short

# (year or None, month, day)
DayKey = tuple[int | None, int, int]


def _valid(year: int | None, month: int, day: int) -> DayKey | None:
    try:
        _dt.date(year if year is not None else 2000, month, day)  # 2000: a leap year
    except ValueError:
        return None
    return (year, month, day)


def mentioned_dates(text: str) -> set[DayKey]:
    """Day dates written in ``text``.

    Recognised forms: ``20260708`` (also inside ``20260708_1400``), ``2026-07-08`` /
    ``2026/7/8`` / ``2026.07.08``, ``January 6th`` / ``Jan. 6, 2026``, ``6th January`` /
    ``the 6th of January 2026``. Month names must be capitalised (``may`` is a verb).
    Impossible dates (``February 30``) are dropped.

    Returns:
        ``{(year or None, month, day)}``; ``None`` where the text gives no year.
    """
    out: set[DayKey] = set()
    for pattern, year_group, month_group, day_group in _DATE_FORMS:
        for m in pattern.finditer(text):
            year, month = m.group(year_group), m.group(month_group)
            key = _valid(
                int(year) if year else None,
                int(month) if month.isdigit() else _MONTH_NUMBER[month.lower()],
                int(m.group(day_group)),
            )
            if key:
                out.add(key)
    return out


def _single_date(value: Any) -> _dt.date | None:
    """A date, a datetime, or an int / string holding exactly one full date → that day."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # 20260708
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    if isinstance(value, str):
        dated = [k for k in mentioned_dates(value) if k[0] is not None]
        if len(dated) == 1:
            year, month, day = dated[0]
            return _dt.date(year, month, day)
    return None


def document_date(text: str, metadata: Mapping[str, Any] | None = None) -> _dt.date | None:
    """The day a document is dated, or ``None``.

    Looked up in order: ``metadata["date"]`` (a :class:`datetime.date`, a ``datetime``, a
    string holding one full date or an int such as ``20260708``); ``metadata["title"]``; the
    first line of ``text`` when it is a header of at most 120 characters (``Time:
    20260708_14:00``). The first place holding exactly one full date (with a year) wins; a
    place naming two different dates is ambiguous and skipped. A date further into the text is
    *mentioned*, not the document's own, and is not used.
    """
    metadata = metadata or {}
    found = _single_date(metadata.get("date"))
    if found is not None:
        return found
    first_line = text.lstrip().split("\n", 1)[0]
    header = first_line if len(first_line) <= _HEADER_CHARS else None
    for place in (metadata.get("title"), header):
        found = _single_date(place) if isinstance(place, str) else None
        if found is not None:
            return found
    return None


class DateIndex:
    """Which documents are dated on the days a text names.

    Args:
        dates: ``{document_id: datetime.date}`` (e.g. from :func:`document_date`; documents
            without a date are simply absent).
    """

    def __init__(self, dates: Mapping[str, _dt.date]) -> None:
        self._by_day: dict[DayKey, list[str]] = {}
        for doc_id, day in dates.items():
            self._by_day.setdefault((day.year, day.month, day.day), []).append(doc_id)
            self._by_day.setdefault((None, day.month, day.day), []).append(doc_id)

    def __len__(self) -> int:
        """Number of distinct dated days."""
        return sum(1 for key in self._by_day if key[0] is not None)

    def find(self, text: str, max_per_day: int = 20) -> set[str]:
        """Ids of the documents dated on a day ``text`` names (a year-less date matches any
        year); empty when the index or the text has no dates.

        A day shared by more than ``max_per_day`` documents (a news archive's busy day) is
        skipped: the link no longer says which of them the question means.
        """
        if not self._by_day:
            return set()
        found: set[str] = set()
        for key in mentioned_dates(text):
            docs = self._by_day.get(key, ())
            if len(docs) <= int(max_per_day):
                found.update(docs)
        return found


_ORDER_RE = re.compile(r"\b(?:before|after)\b", re.IGNORECASE)


def order_clauses(
    question: str, min_terms: int = 3, max_clauses: int | None = DEFAULT_MAX_QUERY_CLAUSES
) -> list[str]:
    """Split a temporal-order question at ``before`` / ``after`` into its event clauses.

    "Did Li Hua ask Yuriko to play music before Wolfgang proposed a break?" asks about two
    sessions, each described by one clause; a single query vector averages them and finds
    neither well. Retrieving each clause on its own is query decomposition without an LLM
    (issue "offline retrieval", way in 4).

    Each clause costs its caller one embedding and one search, so the count is capped
    (``config.max_query_clauses``, default 4; no shared QA question yields more than 3): a query
    chaining more clauses keeps its first ``max_clauses`` (documented degradation; the later
    events still count through the whole question's own score).

    Args:
        question: the query text.
        min_terms: a clause needs at least this many BM25 terms (stop words dropped) to count,
            so "tips for staying hydrated after a match" stays whole ("a match" is no event).
        max_clauses: most clauses returned (≥ 0), the first ones in question order; ``None``
            = no cap.

    Returns:
        The clauses that count (stripped of ``,`` / ``?``), at most ``max_clauses``, when at
        least two count, else ``[]`` (no decomposition).

    Raises:
        ValueError: ``max_clauses`` < 0.
    """
    if max_clauses is not None and int(max_clauses) < 0:
        raise ValueError(f"max_clauses must be >= 0 clauses, got {max_clauses}")
    parts = [p.strip(" ,;?") for p in _ORDER_RE.split(question)]
    parts = [p for p in parts if len(bm25_tokenize(p)) >= int(min_terms)]
    if len(parts) < 2:
        return []
    return parts if max_clauses is None else parts[: int(max_clauses)]
