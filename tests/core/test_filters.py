"""Metadata filters (graphstrata.filters) inside retrieval: applied before k is cut."""

from __future__ import annotations

import pytest
from graphstrata import Document, GraphStrata
from graphstrata.filters import allowed_documents, compile_filter

DOCS = [
    Document(f"d{i}", f"Report {i}: the river flooded the valley town in spring {2000 + i}.",
             {"author": "Ada" if i % 2 else "Bob", "year": 2000 + i, "tags": "flood"})
    for i in range(12)
] + [Document("other", "A recipe for apple pie with cinnamon.", {"author": "Cy", "year": 1990})]


@pytest.fixture(scope="module")
def gs():
    from graphstrata.testing import HashEmbedder

    return GraphStrata.build(DOCS, embedder=HashEmbedder(), config={"min_communities": 2})


@pytest.mark.parametrize(
    "spec,expected",
    [
        ({"author": "Ada"}, {f"d{i}" for i in range(1, 12, 2)}),
        ({"author": {"$ne": "Ada"}}, {f"d{i}" for i in range(0, 12, 2)} | {"other"}),
        ({"year": {"$gte": 2009}}, {"d9", "d10", "d11"}),
        ({"year": {"$gt": 2001, "$lt": 2004}}, {"d2", "d3"}),
        ({"year": {"$lte": 1990}}, {"other"}),
        ({"author": {"$in": ["Cy", "Zed"]}}, {"other"}),
        ({"author": {"$nin": ["Ada", "Bob"]}}, {"other"}),
        ({"$or": [{"year": 2000}, {"author": "Cy"}]}, {"d0", "other"}),
        ({"$and": [{"author": "Bob"}, {"year": {"$gt": 2007}}]}, {"d8", "d10"}),
        ({"tags": {"$ne": "flood"}}, {"other"}),  # a missing key passes $ne
        ({"document_id": {"$in": ["d3", "d4"]}}, {"d3", "d4"}),
        ({"year": "2003"}, set()),  # no coercion: a string is not the number 2003
    ],
)
def test_operators(spec, expected):
    assert allowed_documents({d.id: d for d in DOCS}, spec) == expected


LISTED = {
    "a": Document("a", "x", {"tags": ["rust", "db"], "title": "Rust storage engines"}),
    "b": Document("b", "x", {"tags": ["python"], "title": "Python"}),
    "c": Document("c", "x", {"tags": [], "title": "Nothing"}),
    "d": Document("d", "x", {"tags": "rust"}),  # a plain string field
    "e": Document("e", "x", {}),
}


@pytest.mark.parametrize(
    "spec,expected",
    [
        ({"tags": {"$contains": "rust"}}, {"a", "d"}),  # list element, or substring of a str
        ({"title": {"$contains": "storage"}}, {"a"}),
        ({"tags": {"$any": ["db", "python"]}}, {"a", "b"}),
        ({"tags": {"$all": ["db", "rust"]}}, {"a"}),
        ({"tags": {"$all": ["db", "python"]}}, set()),
        ({"tags": {"$in": ["db", "go"]}}, {"a"}),  # $in on a list field: any element
        ({"tags": {"$in": ["rust"]}}, {"a", "d"}),
        ({"tags": {"$nin": ["rust"]}}, {"b", "c", "e"}),
    ],
)
def test_list_valued_fields(spec, expected):
    assert allowed_documents(LISTED, spec) == expected


@pytest.mark.parametrize(
    "spec,match",
    [
        ([("author", "Ada")], "must be a mapping"),
        ({}, "must not be empty"),
        ({"year": {"$gt": "2001"}}, "compares numbers"),
        ({"year": {"$gt": True}}, "compares numbers"),
        ({"author": {"$in": "Ada"}}, "needs a list"),
        ({"author": {"$like": "A%"}}, "unknown operator '\\$like'"),
        ({"$not": {"author": "Ada"}}, "unknown filter operator"),
        ({"$or": []}, "non-empty list"),
        ({"year": {"$gt": 1, "x": 2}}, "mixes operators"),
        ({"tags": {"$any": "rust"}}, "needs a list"),
        ({"tags": {"$all": []}}, "at least one value"),
        ({"tags": {"$contains": ["a", "b"]}}, "takes one value"),
    ],
)
def test_invalid_filters_raise_one_clear_error(spec, match):
    with pytest.raises(ValueError, match=match):
        compile_filter(spec)


@pytest.mark.parametrize("method", ["archrag", "lightrag", "hirag", "agrag", "dense", "bm25", "hybrid"])
def test_filters_apply_before_k_is_cut(gs, method):
    # the apple-pie document would never be in an unfiltered top 3 for this query
    unfiltered = gs.retrieve("river flooded valley town", method=method, k=3, kinds=["chunk"])
    assert all(h.document_ids != ["other"] for h in unfiltered)
    hits = gs.retrieve("river flooded valley town", method=method, k=3, filters={"author": "Cy"})
    chunks = [h for h in hits if h.kind == "chunk"]
    assert [h.document_ids for h in chunks] == [["other"]]  # found although it ranks last
    assert all("other" in h.document_ids for h in hits)  # context hits from it only
    ada = gs.retrieve("river flooded valley town", method=method, k=4, kinds=["chunk"],
                      filters={"author": "Ada", "year": {"$lt": 2010}})
    assert len(ada) == 4
    assert {h.document_ids[0] for h in ada} <= {"d1", "d3", "d5", "d7", "d9"}


def test_a_filter_matching_nothing_returns_nothing_and_a_bad_one_raises(gs):
    assert gs.retrieve("river", method="dense", k=3, filters={"author": "Nobody"}) == []
    with pytest.raises(ValueError, match="unknown operator"):
        gs.retrieve("river", method="dense", k=3, filters={"author": {"$regex": "A"}})


async def test_aretrieve_takes_filters(gs):
    hits = await gs.aretrieve("river", method="hybrid", k=2, kinds=["chunk"], filters={"year": 2005})
    assert [h.document_ids for h in hits] == [["d5"]]
