"""Hit scores (issue 14 part 2): in [0, 1] for every method and kind, non-increasing along the
method's ranking, the method's own number in ``metadata["raw_score"]``."""

from itertools import groupby

import numpy as np
import pytest
from graphstrata import GraphStrata
from graphstrata.methods import METHODS
from graphstrata.methods.propagation import propagate
from graphstrata.models import embed_query
from graphstrata.scores import bounded, cosine, relative, unit, unit_ranking
from graphstrata.types import HIT_KINDS

QUERIES = [
    "Where was Edmund Hillary born?",
    "Who founded Bank of America and where was he born?",
    "largest city in California",
    "zzzunmatched qqqword",
]


@pytest.fixture()
def gs(corpus, embedder, small_config):
    return GraphStrata.build(corpus, config=small_config, embedder=embedder)


def _check(hits, where):
    for h in hits:
        assert 0.0 <= h.score <= 1.0, (where, h.kind, h.id, h.score)
        assert isinstance(h.metadata.get("raw_score"), float), (where, h.kind, h.id)
        assert np.isfinite(h.metadata["raw_score"])
    chunks = [h.score for h in hits if h.kind == "chunk"]
    assert chunks == sorted(chunks, reverse=True), (where, chunks)
    # context: non-increasing within each kind and layer, in the order returned
    context = [h for h in hits if h.kind != "chunk"]
    for key, group in groupby(context, key=lambda h: (h.kind, h.layer)):
        scores = [h.score for h in group]
        assert scores == sorted(scores, reverse=True), (where, key, scores)


def test_every_method_and_kind_scores_in_unit_interval_and_monotone(gs):
    seen = set()
    for method in gs.methods:
        for q in QUERIES:
            for k in (1, 3, len(gs.chunks)):
                hits = gs.retrieve(q, method=method, k=k)
                _check(hits, (method, q, k))
                seen |= {h.kind for h in hits}
    assert seen == set(HIT_KINDS)  # every kind was checked


@pytest.mark.parametrize("method", sorted(METHODS))
def test_methods_return_unit_scores_and_raw_scores(gs, method):
    state = gs.state
    for q in QUERIES:
        qvec = embed_query(state.embedder, q)
        result = METHODS[method]().retrieve(state, q, qvec, 4)
        scores = [s for _, s in result.chunks]
        assert all(0.0 <= s <= 1.0 for s in scores), (method, q, scores)
        assert scores == sorted(scores, reverse=True)
        assert set(result.raw_scores) == {r for r, _ in result.chunks}
        for h in result.context:
            assert 0.0 <= h.score <= 1.0 and "raw_score" in h.metadata, (method, h.kind, h.score)


def test_archrag_best_chunk_never_scores_above_one(gs):
    # the best chunk's PageRank mass is 1 × the best; the seed tie-breaker once added 1e-3 × its
    # query score on top (1.001)
    for q in QUERIES[:3]:
        hits = gs.retrieve(q, method="archrag", k=3, kinds=["chunk"])
        assert 0.99 < hits[0].score <= 1.0
        assert hits[0].metadata["raw_score"] <= 1.0


def test_propagate_returns_scores_at_most_one(gs):
    scores = {r: 1.0 - 0.1 * r for r in range(min(4, len(gs.chunks)))}
    out = propagate(gs.state, scores, seed_top_n=2)
    assert out and max(out.values()) <= 1.0 and min(out.values()) >= 0.0
    ranked = sorted(out, key=lambda r: -out[r])
    # the order is the walk's: reached chunks first, seed order among the rest
    assert ranked[0] in (0, 1)


def test_dense_score_is_the_cosine_clipped_at_zero(gs):
    q = "Where was Edmund Hillary born?"
    qvec = embed_query(gs.embedder, q)
    for h in gs.retrieve(q, method="dense", k=len(gs.chunks), kinds=["chunk"]):
        cos = float(gs.vectors["chunks"][gs.chunk_row[h.id]] @ qvec)
        assert h.metadata["raw_score"] == pytest.approx(cos, abs=1e-5)
        assert h.score == pytest.approx(max(0.0, cos), abs=1e-5)


def test_bm25_score_is_the_share_of_the_query_maximum(gs):
    q = "Where was Edmund Hillary born?"
    bound = gs.bm25.max_score(q)
    hits = gs.retrieve(q, method="bm25", k=len(gs.chunks), kinds=["chunk"])
    assert hits[0].metadata["raw_score"] > 1.0  # the raw BM25 scale is not [0, 1]
    for h in hits:
        assert h.score == pytest.approx(h.metadata["raw_score"] / bound, rel=1e-5)
    assert 0.0 < hits[0].score < 1.0 and hits[-1].score == 0.0


def test_graph_method_chunk_scores_are_weighted_means(gs):
    # every part lies in [0, 1]: the sum over the sum of weights is at most 1, and full weight
    # on the hybrid part gives the hybrid score itself
    q = "Where was Edmund Hillary born?"
    for method, opts in (
        ("archrag", {"propagate": False}),
        ("lightrag", {}),
        ("hirag", {}),
        ("agrag", {}),
    ):
        hits = gs.retrieve(q, method=method, k=4, kinds=["chunk"], **opts)
        assert all(0.0 <= h.score <= 1.0 for h in hits), method
    plain = gs.retrieve(q, method="archrag", k=4, kinds=["chunk"], propagate=False,
                        community_weight=0.0)
    hybrid = gs.retrieve(q, method="hybrid", k=4, kinds=["chunk"])
    assert [(h.id, round(h.score, 6)) for h in plain] == [(h.id, round(h.score, 6)) for h in hybrid]


def test_lightrag_context_scores_are_degree_relative_to_the_first(gs):
    hits = gs.retrieve("Edmund Hillary Auckland", method="lightrag", k=2)
    for kind in ("entity", "relation"):
        ctx = [h for h in hits if h.kind == kind]
        assert ctx, kind
        top = max(h.metadata["raw_score"] for h in ctx)
        assert ctx[0].score == 1.0
        for h in ctx:
            assert h.metadata["raw_score"] == h.metadata["rank"]
            assert h.score == pytest.approx(h.metadata["raw_score"] / top)


def test_transforms():
    assert unit(1.0000001) == 1.0 and unit(-0.2) == 0.0 and unit(float("nan")) == 0.0
    assert cosine(-0.3) == 0.0 and cosine(0.54) == 0.54 and cosine(1.001) == 1.0
    assert bounded(10.9, 21.8) == 0.5 and bounded(3.0, 0.0) == 0.0
    assert relative(2.0, 4.0) == 0.5 and relative(5.0, 4.0) == 1.0
    ranked, raw = unit_ranking([(3, 1.001), (1, 0.5), (2, -1.0)], lambda s: s)
    assert ranked == [(3, 1.0), (1, 0.5), (2, 0.0)] and raw == {3: 1.001, 1: 0.5, 2: -1.0}
    # a transform that is not monotone under rounding still gives a non-increasing list
    ranked, _ = unit_ranking([(0, 0.5), (1, 0.4)], lambda s: 0.3 if s == 0.5 else 0.31)
    assert ranked == [(0, 0.3), (1, 0.3)]
