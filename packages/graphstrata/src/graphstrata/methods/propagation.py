"""Passage propagation: personalised PageRank over the chunk–entity graph (HippoRAG 2 style).

Multi-hop questions name the first passage; the second is linked to it, not to the question.
Seeding a random walk with the chunks' own query scores (dense + BM25, sharpened) and letting it
flow through shared entities reaches those linked passages (HippoRAG 2, Gutiérrez et al. 2025,
§3: passage nodes seeded by their dense scores; spec seed-agrag.md §2.4 for the PPR itself).

The graph (built once per index state, ``state.derived("propagation:graph:…")``, not
persisted) is bipartite, chunks × nodes:

* every entity mentioned by 2 … ``max_df`` chunks, edge weight ``1 / log2(1 + df)`` (IDF-like:
  an entity in 40 chunks says less about any one of them than one in 2);
* every document title named in other documents' chunks
  (:meth:`~graphstrata.extraction.TitleIndex.mentions`): one node joining the title's own chunks
  and the chunks that name it, weight ``title_weight / log2(1 + size)`` — the hyperlinks of a
  Wikipedia-like corpus (they link 55 % of HotpotQA's gold passage pairs; shared entities
  alone link 65 %, both together 73 %);
* every document split into several chunks: one node joining its chunks, weight
  ``document_weight / log2(1 + size)``, so evidence found in two chunks of one long document
  (a chat log) adds up.

One walk step goes chunk → node → chunk, each hop proportional to edge weight.

Seeds: the best chunks' query scores, sharpened, plus the chunks of every document whose title
the question names or that is dated on a day the question names (:func:`named_chunks` —
HippoRAG's query-to-node linking, restricted to titles and days for precision), weighted by
their own query score. Without them the walk from the first named page floods its neighbours
and buries the second page of a comparison question.

Measured on the dev questions (MiniLM indexes, recall@5 of ArchRAG's ranking with and without
propagation): MuSiQue 0.53 → 0.63, HotpotQA 0.83 → 0.88; LiHua-World (chat logs, no titles,
one speaker in every document) 0.90 → 0.90, neutral where the graph says little (its day links
add +0.01 there, the only corpus with dated documents). Title links
gave +0.02–0.04 of that on HotpotQA/MuSiQue; seed sharpening matters most: with
``seed_power`` 1 the walk drowns the seeds' own order (MuSiQue 0.54), 4 gives 0.57, 6–8 0.60.
Title-named seeds (``named_weight`` 1) then add HotpotQA 0.88 → 0.92 (recall@2 0.65 → 0.75),
MuSiQue 0.63 → 0.64.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from ..derived import DerivedSpec, register_derived
from ..extraction import TitleIndex, document_title
from .temporal import DateIndex, document_date
from ..derived import pack_strings, unpack_strings
from .base import document_rows, entity_chunk_matrix, rank_arrays
from .graph_ops import Transition
from .ppr import DEFAULT_EPSILON, PushGraph, bipartite_push_graph, local_pagerank

if TYPE_CHECKING:  # pragma: no cover
    from ..state import EngineState


@dataclass
class PassageGraph:
    """The chunk-to-chunk walk of :mod:`~graphstrata.methods.propagation`.

    Attributes:
        push: the two-hop walk chunk → entity, title or document node → chunk as a bipartite
            :class:`~graphstrata.methods.ppr.PushGraph` (chunks ``[0, n_chunks)``, then the
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
#: 2), built at index time and persisted with the index (:mod:`graphstrata.derived`).
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
        """Document ids and titles as packed UTF-8 (:func:`~graphstrata.derived.pack_strings`)."""
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


def title_index(state: EngineState) -> TitleIndex:
    """The cached :class:`~graphstrata.extraction.TitleIndex` of the state's document titles
    (empty when ``config.use_titles`` is off); persisted (:data:`TITLES`)."""
    return state.derived(TITLES.key, lambda: NamedTitles(_titles_of(state))).index


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
    """The documents' days (:func:`~graphstrata.methods.temporal.document_date`) and their
    :class:`~graphstrata.methods.temporal.DateIndex`."""

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
    """The cached :class:`~graphstrata.methods.temporal.DateIndex` of the state's dated documents
    (:func:`~graphstrata.methods.temporal.document_date`); persisted (:data:`DATES`)."""
    return state.derived(DATES.key, lambda: _build_dates(state)).index


#: a title shared by more documents than this is not a link: the question does not say which
#: of them it means (the counterpart of ``DateIndex.find``'s ``max_per_day``)
MAX_DOCUMENTS_PER_TITLE = 20


def named_titles(state: EngineState, text: str) -> set[str]:
    """Ids of the documents whose title ``text`` names
    (:meth:`TitleIndex.find <graphstrata.extraction.TitleIndex.find>`), without the titles
    that more than :data:`MAX_DOCUMENTS_PER_TITLE` documents share (:attr:`NamedTitles.crowded`:
    their number grows with the corpus — a page per version, per copy — and the question does
    not say which one it means), so what a question links to stays bounded."""
    titles: NamedTitles = state.derived(TITLES.key, lambda: NamedTitles(_titles_of(state)))
    found = titles.index.find(text)
    crowded = titles.crowded
    return {d for d in found if d not in crowded} if crowded else found


def named_chunks(state: EngineState, query: str, titles: bool = True, dates: bool = True) -> list[int]:
    """Rows of the chunks of every document the query names.

    Query-to-node linking (HippoRAG's step, restricted to precise links):

    * ``titles``: documents whose title the question names (on HotpotQA 79 % of such links are
      gold passages), except titles that more than :data:`MAX_DOCUMENTS_PER_TITLE` documents
      share (:func:`named_titles`);
    * ``dates``: documents dated on a day the question names
      (:class:`~graphstrata.methods.temporal.DateIndex`; "the discussion on 20260410", "on January
      6th"), except days of more than 20 documents.

    The work is the query's length and the named documents' chunks: nothing per document of
    the corpus (the title and date indexes are built at index time).
    """
    docs: set[str] = set()
    if titles:
        docs |= named_titles(state, query)
    if dates:
        docs |= date_index(state).find(query)
    if not docs:
        return []
    rows = document_rows(state)
    return sorted(r for d in docs for r in rows.get(d, ()))


def propagate(
    state: EngineState,
    scores: Mapping[int, float],
    seed_top_n: int = 10,
    seed_power: float = 6.0,
    damping: float = 0.5,
    max_df: int = 50,
    title_weight: float = 2.0,
    document_weight: float = 0.0,
    named_rows: Iterable[int] = (),
    named_weight: float = 0.0,
    trace: dict | None = None,
    epsilon: float = DEFAULT_EPSILON,
) -> dict[int, float]:
    """Rank chunks by personalised PageRank seeded with their own query scores.

    Reset weights: the ``seed_top_n`` best ``scores`` (clipped at 0) raised to ``seed_power``;
    each of ``named_rows`` (chunks of documents the query names, :func:`named_chunks`) adds
    ``named_weight × max reset × scores[row]``, so a page named by the question seeds the walk
    even when another page outscores it (the second entity of a comparison question).
    Each returned score is the chunk's PPR mass relative to the best chunk's, plus
    ``1e-3 × scores[row]`` so that chunks the walk never reaches keep their seed order behind
    every reached one — all divided by ``1 + 1e-3 × max(scores)``, so the best chunk is at most
    1 (without it the best scored up to 1.001) and the order is unchanged.

    Args:
        state: the index.
        scores: ``{chunk_row: score ≥ 0}``, e.g. :func:`~graphstrata.methods.base.hybrid_scores`.
        seed_top_n: number of seed chunks (≥ 1).
        seed_power: sharpening exponent (> 0).
        damping: probability of taking a two-hop step rather than restarting (HippoRAG 2: 0.5).
        max_df, title_weight, document_weight: passed to :func:`passage_graph`.
        named_rows: chunk rows named by the query (ignored unless in ``scores``).
        named_weight: their extra reset weight (≥ 0; 0 turns it off).
        trace: when a dict, receives ``"reset"`` (``{chunk_row: share > 0}``, the restart
            distribution, summing to 1, or empty when nothing seeded the walk) and ``"mass"``
            (``{chunk_row: PageRank probability > 0}`` over the reached chunks, or ``None``
            when no walk ran) — what :mod:`~graphstrata.methods.explain` reports; sparse, so
            explaining costs no work per chunk of the corpus. The scores do not depend on it.
        epsilon: forward-push tolerance (:func:`~graphstrata.methods.ppr.local_pagerank`):
            the walk's work is bounded by ``1 / ((1 − damping) · epsilon)`` pushes whatever the
            number of chunks, and its L1 error by the residual left.

    Returns:
        ``{chunk_row: score in [0, 1]}`` over the reached chunks and every row of ``scores``.

    Raises:
        ValueError: ``seed_top_n < 1``, ``seed_power ≤ 0``, ``damping`` outside [0, 1) or
            ``epsilon ≤ 0``.
    """
    if not scores:
        _check_walk(seed_top_n, seed_power, damping)
        return {}
    rows = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
    values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
    kept, out = propagate_arrays(
        state, rows, values, seed_top_n=seed_top_n, seed_power=seed_power, damping=damping, max_df=max_df,
        title_weight=title_weight, document_weight=document_weight, named_rows=named_rows,
        named_weight=named_weight, trace=trace, epsilon=epsilon,
    )
    return dict(zip(kept.tolist(), out.tolist(), strict=True))


def _check_walk(seed_top_n: int, seed_power: float, damping: float) -> None:
    if int(seed_top_n) < 1:
        raise ValueError(f"seed_top_n must be ≥ 1, got {seed_top_n}")
    if not float(seed_power) > 0:
        raise ValueError(f"seed_power must be > 0, got {seed_power}")
    if not 0.0 <= float(damping) < 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping}")


def propagate_arrays(
    state: EngineState,
    rows: np.ndarray,
    scores: np.ndarray,
    seed_top_n: int = 10,
    seed_power: float = 6.0,
    damping: float = 0.5,
    max_df: int = 50,
    title_weight: float = 2.0,
    document_weight: float = 0.0,
    named_rows: Iterable[int] = (),
    named_weight: float = 0.0,
    trace: dict | None = None,
    epsilon: float = DEFAULT_EPSILON,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`propagate` over arrays: ``rows`` (int64, distinct) scored ``scores`` (float64).

    Returns:
        ``(rows, scores)``: int64 rows ascending (the reached ones and every given row) and
        their float64 scores in [0, 1]. The work is the candidates and the walk's pushes,
        nothing per chunk of the corpus.

    Raises:
        ValueError: as :func:`propagate`, or ``rows`` and ``scores`` of different lengths.
    """
    _check_walk(seed_top_n, seed_power, damping)
    rows = np.asarray(rows, np.int64)
    raw = np.asarray(scores, np.float64)
    if rows.shape != raw.shape:
        raise ValueError(f"rows and scores differ in length: {len(rows)} vs {len(raw)}")
    if not len(rows):
        return rows, raw
    graph = passage_graph(state, max_df, title_weight, document_weight)
    seed_scores = np.maximum(raw, 0.0)
    # reset weights in a fixed order: the best seeds (ties: lower row), then the named rows
    seeds = [int(r) for r, _ in rank_arrays(rows, raw, int(seed_top_n))]
    order = np.argsort(rows, kind="stable")
    position = {r: i for i, r in enumerate(seeds)}
    weights = [float(max(raw[_find(rows, order, r)], 0.0)) ** float(seed_power) for r in seeds]
    top_reset = max(weights, default=0.0)
    if named_weight > 0 and top_reset > 0:
        boost = float(named_weight) * top_reset
        for row in named_rows:
            row = int(row)
            at = _find(rows, order, row)
            add = boost * (float(seed_scores[at]) if at >= 0 else 0.0)
            if row in position:
                weights[position[row]] += add
            else:
                position[row] = len(seeds)
                seeds.append(row)
                weights.append(add)
    tie = 1e-3  # weight of the seed score behind the walk's mass
    keys, vals = [rows], [tie * seed_scores]
    total = float(sum(weights))
    if trace is not None:
        trace["reset"] = {r: w / total for r, w in zip(seeds, weights, strict=True) if w > 0} if total > 0 else {}
        trace["mass"] = None
    if total > 0:
        walk = local_pagerank(graph.push, seeds, weights, damping=float(damping), epsilon=float(epsilon))
        if trace is not None:
            positive = walk.mass > 0
            trace["mass"] = dict(zip(walk.nodes[positive].tolist(), walk.mass[positive].tolist(), strict=True))
        if len(walk.mass):
            best = float(walk.mass.max())
            reached = walk.mass > 1e-12 * best
            keys.append(walk.nodes[reached])
            vals.append(walk.mass[reached] / best)
    # mass / best ≤ 1 and each seed part ≤ tie × max(scores): divide by the sum of both
    top = 1.0 + tie * max(0.0, float(seed_scores.max()))
    kept, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    summed = np.bincount(inverse, weights=np.concatenate(vals), minlength=len(kept))
    return kept, np.minimum(summed / top, 1.0)


def _find(rows: np.ndarray, order: np.ndarray, row: int) -> int:
    """Index of ``row`` in ``rows`` (``order`` sorts them), ``-1`` when absent."""
    i = int(np.searchsorted(rows, row, sorter=order))
    if i < len(rows) and rows[order[i]] == row:
        return int(order[i])
    return -1
