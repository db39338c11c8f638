"""An index can start empty (``GraphStrata.empty``), and a persisted index pickles as a
reference to its directory (retrievers of both frameworks pickle through it)."""

from __future__ import annotations

import pickle

import pytest
from graphstrata import GraphStrata
from graphstrata.testing import HashEmbedder

DOCS = [
    {"id": "a", "text": "Ada Lovelace wrote the first program for the Analytical Engine."},
    {"id": "b", "text": "Charles Babbage designed the Analytical Engine in London."},
    {"id": "c", "text": "The river Thames flows through London to the North Sea."},
]


def test_empty_index_retrieves_nothing_then_builds_on_first_insert(tmp_path):
    gs = GraphStrata.empty(embedder=HashEmbedder(), persist_dir=tmp_path / "ix")
    assert gs.is_empty and gs.documents == {} and gs.embedder.id == "test-hash-64"
    assert gs.retrieve("Analytical Engine") == []
    with pytest.raises(ValueError, match="non-empty"):
        gs.retrieve("  ")
    with pytest.raises(ValueError, match="unknown"):  # arguments are still checked
        gs.retrieve("x", method="nope")
    with pytest.raises(ValueError, match="insert documents first"):
        gs.persist(tmp_path / "other")
    assert not (tmp_path / "ix").exists() or not any((tmp_path / "ix").iterdir())
    assert gs.insert(DOCS[:2]) == ["a", "b"]
    assert not gs.is_empty
    hits = gs.retrieve("Babbage designed", method="bm25", k=1, kinds=("chunk",))
    assert hits[0].document_ids == ["b"]
    gs.insert(DOCS[2:])  # later inserts are incremental updates
    loaded = GraphStrata.load(tmp_path / "ix", embedder=HashEmbedder())
    assert sorted(loaded.documents) == ["a", "b", "c"]


def test_build_of_nothing_still_refuses():
    with pytest.raises(ValueError):
        GraphStrata.build([], embedder=HashEmbedder())


def test_pickle_refers_to_the_persisted_directory(tmp_path):
    gs = GraphStrata.build(DOCS, embedder=HashEmbedder())
    with pytest.raises(TypeError, match="persist it first"):
        pickle.dumps(gs)
    gs.persist(tmp_path / "ix")
    copy = pickle.loads(pickle.dumps(gs))
    assert copy is not gs and copy.persist_dir == gs.persist_dir
    assert sorted(copy.documents) == ["a", "b", "c"]
    q = "Thames London"
    assert [h.id for h in copy.retrieve(q, method="hybrid")] == [h.id for h in gs.retrieve(q, method="hybrid")]
