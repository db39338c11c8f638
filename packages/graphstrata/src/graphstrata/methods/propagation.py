"""Passage propagation: personalised PageRank over the chunk–entity graph (HippoRAG 2 style).

Multi-hop questions name the first passage; the second is linked to it, not to the question.
Seeding a random walk with the chunks' own query scores (dense + BM25, sharpened) and letting it
flow through shared entities reaches those linked passages (HippoRAG 2, Gutiérrez et al. 2025,
§3: passage nodes seeded by their dense scores; spec seed-agrag.md §2.4 for the PPR itself).

The graph (:class:`~graphstrata.structures.passages.PassageGraph`, built once per index state,
``state.derived("propagation:graph:…")``; the default settings' at index time and persisted)
is bipartite, chunks × nodes:

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

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..structures.passages import date_index, document_titles, passage_graph
from ..structures.provenance import document_rows
from ..structures.push import DEFAULT_EPSILON, local_pagerank
from .base import rank_arrays

if TYPE_CHECKING:  # pragma: no cover
    from ..state import EngineState


def named_titles(state: EngineState, text: str) -> set[str]:
    """Ids of the documents whose title ``text`` names
    (:meth:`TitleIndex.find <graphstrata.extraction.TitleIndex.find>`), without the titles
    that more than :data:`~graphstrata.structures.passages.MAX_DOCUMENTS_PER_TITLE` documents share (:attr:`~graphstrata.structures.passages.NamedTitles.crowded`:
    their number grows with the corpus — a page per version, per copy — and the question does
    not say which one it means), so what a question links to stays bounded."""
    titles = document_titles(state)
    found = titles.index.find(text)
    crowded = titles.crowded
    return {d for d in found if d not in crowded} if crowded else found


def named_chunks(state: EngineState, query: str, titles: bool = True, dates: bool = True) -> list[int]:
    """Rows of the chunks of every document the query names.

    Query-to-node linking (HippoRAG's step, restricted to precise links):

    * ``titles``: documents whose title the question names (on HotpotQA 79 % of such links are
      gold passages), except titles that more than :data:`~graphstrata.structures.passages.MAX_DOCUMENTS_PER_TITLE` documents
      share (:func:`named_titles`);
    * ``dates``: documents dated on a day the question names
      (:class:`~graphstrata.structures.passages.DateIndex`; "the discussion on 20260410", "on January
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


def propagate(state: EngineState, scores: Mapping[int, float], **walk: Any) -> dict[int, float]:
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
        **walk: the walk's settings, keyword arguments of :func:`propagate_arrays` (its
            defaults).

    Returns:
        ``{chunk_row: score in [0, 1]}`` over the reached chunks and every row of ``scores``.

    Raises:
        ValueError: ``seed_top_n < 1``, ``seed_power ≤ 0``, ``damping`` outside [0, 1) or
            ``epsilon ≤ 0``.
    """
    rows = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
    values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
    kept, out = propagate_arrays(state, rows, values, **walk)
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

    Args:
        state: the index.
        rows, scores: the candidate chunk rows and their scores (≥ 0).
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
        epsilon: forward-push tolerance (:func:`~graphstrata.structures.push.local_pagerank`):
            the walk's work is bounded by ``1 / ((1 − damping) · epsilon)`` pushes whatever the
            number of chunks, and its L1 error by the residual left.

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
