"""The passage graph and what a question links to: document titles and dates.

* :class:`PassageGraph` (:func:`build_passage_graph`, :data:`DEFAULT_PASSAGE_GRAPH`): the
  bipartite chunk × node incidence of HippoRAG-2-style passage propagation, as a forward-push
  graph (:class:`~.push.PushGraph`): entities mentioned by 2 … ``max_df`` chunks, document
  titles named in other documents' chunks, and multi-chunk documents; the walk over it is
  :mod:`graphstrata.methods.propagation`'s.
* :class:`NamedTitles` (:func:`title_index`, :data:`TITLES`): the document titles a question
  may name.
* :class:`DatedDocuments` (:func:`date_index`, :data:`DATES`): the documents' calendar days
  (:func:`document_date`) and their :class:`DateIndex` — which documents are dated on the days
  a text names (:func:`mentioned_dates`).

Chat logs, meeting notes, diaries and news carry their date in a header ("Time:
20260708_14:00", a title like ``2026-07-08 standup``, a ``date`` metadata field); a question
then asks about "the discussion on 20260708" or "what Li Hua reported on January 6th". Dense and
BM25 scores barely see that: the date is one token of a long chunk, or is written differently
("January 6th" vs ``20260106``). :class:`DateIndex` links such a question to the documents of
that day, the temporal counterpart of :class:`~graphstrata.extraction.TitleIndex` (query-to-node
linking in HippoRAG's sense, with day nodes). Only *day* dates are linked: a month alone ("in
May") names dozens of sessions (measured +0.002 recall@5 on LiHua-World, whose three month
questions it touches; not worth the false links). A date without a year ("January 6th") matches
that day in any year.

Each is built at index time and persisted with the index (:mod:`.registry`).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..extraction import TitleIndex, document_title
from .provenance import document_rows, entity_chunk_matrix
from .push import PushGraph, Transition, bipartite_push_graph
from .registry import DerivedSpec, pack_strings, register_derived, unpack_strings

if TYPE_CHECKING:  # pragma: no cover
    from ..state import EngineState

# -- dates -------------------------------------------------------------------------------------

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


# -- the passage graph, titles and the documents' days ---------------------------------


@dataclass
class PassageGraph:
    """The chunk-to-chunk walk of :mod:`~graphstrata.methods.propagation`.

    Attributes:
        push: the two-hop walk chunk → entity, title or document node → chunk as a bipartite
            :class:`~.push.PushGraph` (chunks ``[0, n_chunks)``, then the
            nodes as relays): what a query pushes on, in O(edges) memory.
        nodes: number of entity + document + title nodes kept (for ``inspect`` / tests).
        title_nodes: how many of them are title nodes.
    """

    push: PushGraph
    nodes: int
    title_nodes: int

    @cached_property
    def walk(self) -> Transition:
        """The same walk as a column-stochastic ``(n_chunks, n_chunks)`` transition with the
        dangling mask of chunks that have no node (for inspection and exact PageRank; queries
        push on :attr:`push` instead — this matrix grows with the square of a node's chunks)."""
        g = self.push
        n = g.n_items
        full = sp.csr_matrix((g.probs.astype(np.float64), g.indices, g.indptr), shape=(g.n_nodes, g.n_nodes))
        to_node = full[:n, n:]
        to_chunk = full[n:, :n]
        matrix = (to_node @ to_chunk).T.tocsr()
        dangling = np.diff(to_node.indptr) == 0
        return Transition(matrix, dangling)


def build_passage_graph(
    state: EngineState, max_df: int = 50, title_weight: float = 2.0, document_weight: float = 0.0
) -> PassageGraph:
    """Build the chunk–node incidence and its two-hop walk.

    Args:
        state: the index.
        max_df: entities / titles in more chunks than this are dropped (hubs); a document node
            joins all its chunks.
        title_weight: multiplier of title-node edges relative to entity edges (≥ 0; 0 turns
            title links off).
        document_weight: multiplier of document-node edges (≥ 0; 0 turns them off).

    Returns:
        A :class:`PassageGraph` over ``len(state.chunks)`` chunks.
    """
    n = len(state.chunks)
    by_doc = document_rows(state)
    mentions = entity_chunk_matrix(state)
    df = np.diff(mentions.indptr)
    blocks = [
        _weighted(mentions[(df >= 2) & (df <= max_df)].T.tocsr(), 1.0),
        _weighted(_membership(n, [m for m in by_doc.values() if len(m) >= 2]), document_weight),
    ]
    title_nodes = []
    if title_weight > 0:
        texts = [c.text for c in state.chunks]
        for doc_id, naming in title_mentions(title_index(state), texts).items():
            own = set(by_doc.get(doc_id, ()))
            members = own | set(naming)
            if members != own and 2 <= len(members) <= max_df:  # named outside its document
                title_nodes.append(sorted(members))
    blocks.append(_weighted(_membership(n, title_nodes), title_weight))
    incidence = sp.hstack(blocks, format="csr")
    return PassageGraph(bipartite_push_graph(incidence), incidence.shape[1], len(title_nodes))


def title_mentions(index: TitleIndex, texts: Sequence[str]) -> dict[str, list[int]]:
    """:meth:`TitleIndex.mentions <graphstrata.extraction.TitleIndex.mentions>` (which texts
    name which titles: ``{document_id: [text row, ...]}``, rows ascending), looking up at each
    token only the title lengths that start with that token instead of every n-gram up to
    the longest title: the same result, ~10× fewer hash lookups (it is the passage graph's
    costliest step: 23 s of CPU at 120k chunks with titles, one pass over every chunk's text).
    """
    by_tokens = getattr(index, "_by_tokens", None)
    if not isinstance(by_tokens, Mapping):  # another TitleIndex: its own scan
        return index.mentions(texts)
    found: dict[str, list[int]] = {}
    if not by_tokens:
        return found
    lengths: dict[str, list[int]] = {}
    for key in by_tokens:
        lengths.setdefault(key[0], []).append(len(key))
    starts = {first: sorted(set(ns)) for first, ns in lengths.items()}
    get = by_tokens.get
    for row, text in enumerate(texts):
        tokens = _TITLE_TOKEN_RE.findall(text)
        named: set[str] = set()
        for i, tok in enumerate(tokens):
            ns = starts.get(tok)
            if ns is None:
                continue
            for n in ns:
                if i + n > len(tokens):
                    break
                hit = get(tuple(tokens[i:i + n]))
                if hit:
                    named.update(hit)
        for doc_id in sorted(named):  # a deterministic node order (a set's is per process)
            found.setdefault(doc_id, []).append(row)
    return found


def _membership(n: int, groups: list[list[int]]) -> sp.csr_matrix:
    """0/1 CSR ``(n, len(groups))``: column ``j`` holds the rows of ``groups[j]``."""
    rows = [r for g in groups for r in g]
    cols = [j for j, g in enumerate(groups) for _ in g]
    return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, len(groups)))


def _weighted(incidence: sp.csr_matrix, weight: float) -> sp.csr_matrix:
    """Scale each 0/1 node column by ``weight / log2(1 + size)``; ``weight`` 0 drops them all."""
    if weight <= 0:
        return incidence[:, :0]
    size = np.asarray(incidence.sum(axis=0)).ravel()
    return (incidence @ sp.diags(float(weight) / np.log2(1.0 + np.maximum(size, 1.0)))).tocsr()


def passage_graph_key(max_df: int = 50, title_weight: float = 2.0, document_weight: float = 0.0) -> str:
    """The :meth:`~graphstrata.state.EngineState.derived` key of the passage graph for these
    settings."""
    return f"propagation:graph:{int(max_df)}:{float(title_weight):g}:{float(document_weight):g}"


def passage_graph(
    state: EngineState, max_df: int = 50, title_weight: float = 2.0, document_weight: float = 0.0
) -> PassageGraph:
    """The cached :func:`build_passage_graph` of ``state`` for these settings (ArchRAG's default
    settings are built at index time and persisted: :data:`DEFAULT_PASSAGE_GRAPH`)."""
    return state.derived(
        passage_graph_key(max_df, title_weight, document_weight),
        lambda: build_passage_graph(state, int(max_df), float(title_weight), float(document_weight)),
    )


def _passage_graph_arrays(graph: PassageGraph) -> dict[str, np.ndarray]:
    return {**graph.push.arrays(), "counts": np.asarray([graph.nodes, graph.title_nodes], np.int64)}


def _passage_graph_from_arrays(arrays: Mapping[str, np.ndarray]) -> PassageGraph:
    counts = np.asarray(arrays["counts"]).ravel()
    return PassageGraph(PushGraph.from_arrays(dict(arrays)), int(counts[0]), int(counts[1]))


#: ArchRAG's passage graph with its default settings (max_df 50, title weight 2, document weight
#: 2), built at index time and persisted with the index (:mod:`.registry`).
DEFAULT_PASSAGE_GRAPH = register_derived(
    DerivedSpec(
        key=passage_graph_key(50, 2.0, 2.0),
        build=lambda state: build_passage_graph(state, 50, 2.0, 2.0),
        to_arrays=_passage_graph_arrays,
        from_arrays=_passage_graph_from_arrays,
    )
)


def _build_title_index(state: EngineState) -> TitleIndex:
    if not state.config.use_titles:
        return TitleIndex({})
    return TitleIndex({d.id: d.metadata.get("title") for d in state.documents.values()})


def _titles_of(state: EngineState) -> dict[str, str]:
    """``{document_id: title}`` of the documents with a subject title
    (:func:`~graphstrata.extraction.document_title`); empty when ``config.use_titles`` is off."""
    if not state.config.use_titles:
        return {}
    out = {}
    for d in state.documents.values():
        title = document_title(d.metadata.get("title"))
        if title is not None:
            out[d.id] = title
    return out


_DISAMBIGUATOR_RE = re.compile(r"\s*\([^()]*\)\s*$")
#: the tokens :class:`~graphstrata.extraction.TitleIndex` matches titles on (words and marks)
_TITLE_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


@dataclass
class NamedTitles:
    """A :class:`~graphstrata.extraction.TitleIndex` with the titles it was built from (what is
    persisted: the index itself is rebuilt from them on load, linear in the titles)."""

    titles: dict[str, str]

    def __post_init__(self) -> None:
        # built with the structure (at index time or while loading: linear in the titles),
        # not on the first query that reads them (~0.6 s at 67k documents)
        self.index  # noqa: B018
        self.crowded  # noqa: B018

    @cached_property
    def index(self) -> TitleIndex:
        """The title index of :attr:`titles`."""
        return TitleIndex(self.titles)

    @cached_property
    def crowded(self) -> frozenset[str]:
        """Ids of the documents whose title (less a trailing parenthesised disambiguator, as
        the index matches it) more than :data:`MAX_DOCUMENTS_PER_TITLE` documents share."""
        groups: dict[str, list[str]] = {}
        for doc_id, title in self.titles.items():
            groups.setdefault(_DISAMBIGUATOR_RE.sub("", title).strip(), []).append(doc_id)
        return frozenset(d for docs in groups.values() if len(docs) > MAX_DOCUMENTS_PER_TITLE for d in docs)

    def arrays(self) -> dict[str, np.ndarray]:
        """Document ids and titles as packed UTF-8 (:func:`~.registry.pack_strings`)."""
        ids = pack_strings(self.titles)
        titles = pack_strings(self.titles.values())
        return {"ids_utf8": ids["utf8"], "ids_offsets": ids["offsets"],
                "titles_utf8": titles["utf8"], "titles_offsets": titles["offsets"]}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> NamedTitles:
        """What :meth:`arrays` wrote. Raises ``ValueError`` on mismatched arrays."""
        ids = unpack_strings(arrays["ids_utf8"], arrays["ids_offsets"])
        titles = unpack_strings(arrays["titles_utf8"], arrays["titles_offsets"])
        if len(ids) != len(titles):
            raise ValueError("titles: ids and titles differ in number")
        return cls(dict(zip(ids, titles, strict=True)))


#: The document titles a question may name (:func:`title_index`), built at index time and
#: persisted (building reads every document's metadata).
TITLES = register_derived(
    DerivedSpec(
        key="propagation:titles",
        build=lambda state: NamedTitles(_titles_of(state)),
        to_arrays=NamedTitles.arrays,
        from_arrays=NamedTitles.from_arrays,
        version=2,
    )
)


def document_titles(state: EngineState) -> NamedTitles:
    """The cached :class:`NamedTitles` of the state's documents (empty when
    ``config.use_titles`` is off); persisted (:data:`TITLES`)."""
    return state.derived(TITLES.key, lambda: NamedTitles(_titles_of(state)))


def title_index(state: EngineState) -> TitleIndex:
    """The cached :class:`~graphstrata.extraction.TitleIndex` of the state's document titles
    (empty when ``config.use_titles`` is off); persisted (:data:`TITLES`)."""
    return document_titles(state).index


def _dates_arrays(index: DatedDocuments) -> dict[str, np.ndarray]:
    days = np.fromiter((d.year * 10000 + d.month * 100 + d.day for d in index.dates.values()), np.int64,
                       len(index.dates))
    return {**pack_strings(index.dates), "days": days}


def _dates_from_arrays(arrays: Mapping[str, np.ndarray]) -> DatedDocuments:
    ids = unpack_strings(arrays["utf8"], arrays["offsets"])
    days = np.asarray(arrays["days"], np.int64).ravel()
    if len(days) != len(ids):
        raise ValueError("dates: ids and days differ in number")
    try:
        dates = {i: _dt.date(int(v) // 10000, int(v) // 100 % 100, int(v) % 100)
                 for i, v in zip(ids, days.tolist(), strict=True)}
    except ValueError as exc:
        raise ValueError(f"dates: not a calendar day ({exc})") from None
    return DatedDocuments(dates)


@dataclass
class DatedDocuments:
    """The documents' days (:func:`document_date`) and their
    :class:`DateIndex`."""

    dates: dict[str, _dt.date]

    @cached_property
    def index(self) -> DateIndex:
        """The date index of :attr:`dates`."""
        return DateIndex(self.dates)


def _build_dates(state: EngineState) -> DatedDocuments:
    dates = {}
    for d in state.documents.values():
        day = document_date(d.text, d.metadata)
        if day is not None:
            dates[d.id] = day
    return DatedDocuments(dates)


#: The documents' days a question may name (:func:`date_index`), built at index time and
#: persisted (building parses every document's header: 0.1 s at 44k chunks).
DATES = register_derived(
    DerivedSpec(key="propagation:dates", build=_build_dates, to_arrays=_dates_arrays,
                from_arrays=_dates_from_arrays, version=2)
)


def date_index(state: EngineState) -> DateIndex:
    """The cached :class:`DateIndex` of the state's dated documents
    (:func:`document_date`); persisted (:data:`DATES`)."""
    return state.derived(DATES.key, lambda: _build_dates(state)).index


#: a title shared by more documents than this is not a link: the question does not say which
#: of them it means (the counterpart of ``DateIndex.find``'s ``max_per_day``)
MAX_DOCUMENTS_PER_TITLE = 20
