"""The load's warm-up queries (issue 33): the first query a user sends after a load should cost
what the others cost; the load runs one query per method (ArchRAG only with an LLM) and changes
nothing."""

from __future__ import annotations

import pytest
from graphstrata import Document, GraphStrata
from graphstrata.methods import METHODS
from graphstrata.testing import HashEmbedder
from graphstrata.testing.contract import contract_documents

QUESTION = "Who designed the Analytical Engine?"


@pytest.fixture(scope="module")
def persisted(tmp_path_factory):
    path = tmp_path_factory.mktemp("warm") / "idx"
    gs = GraphStrata.build(contract_documents(), embedder=HashEmbedder(), persist_dir=path)
    return gs, path


def _count_queries(monkeypatch) -> list[str]:
    """Record the query of every method run (any method's ``retrieve``)."""
    seen: list[str] = []
    for cls in METHODS.values():
        real = cls.retrieve

        def wrapped(self, state, query, *a, _real=real, **k):
            seen.append(f"{self.name}:{query}")
            return _real(self, state, query, *a, **k)

        monkeypatch.setattr(cls, "retrieve", wrapped)
    return seen


def test_load_runs_one_query_per_method_and_warm_up_false_none(persisted, monkeypatch):
    _, path = persisted
    seen = _count_queries(monkeypatch)
    GraphStrata.load(path, embedder=HashEmbedder())
    assert sorted(s.split(":")[0] for s in seen) == sorted(METHODS)
    assert len({s.split(":", 1)[1] for s in seen}) == 1  # one query, the first chunk's words
    seen.clear()
    GraphStrata.load(path, embedder=HashEmbedder(), warm_up=False)
    assert seen == []


def test_warm_and_cold_loads_answer_alike(persisted):
    gs, path = persisted
    warm = GraphStrata.load(path, embedder=HashEmbedder())
    cold = GraphStrata.load(path, embedder=HashEmbedder(), warm_up=False)
    for method in warm.methods:
        got = [(h.id, h.score, h.kind) for h in warm.retrieve(QUESTION, method=method, k=4)]
        assert got == [(h.id, h.score, h.kind) for h in cold.retrieve(QUESTION, method=method, k=4)], method
        assert got == [(h.id, h.score, h.kind) for h in gs.retrieve(QUESTION, method=method, k=4)], method


def test_a_refresh_warms_the_new_version(persisted, tmp_path, monkeypatch):
    _, path = persisted
    import shutil

    copy = tmp_path / "idx"
    shutil.copytree(path, copy)
    reader = GraphStrata.load(copy, embedder=HashEmbedder())
    writer = GraphStrata.load(copy, embedder=HashEmbedder())
    writer.insert([Document("new-doc", "Ada Lovelace wrote notes on the Analytical Engine in 1843.")])
    seen = _count_queries(monkeypatch)
    assert reader.refresh()
    assert sorted(s.split(":")[0] for s in seen) == sorted(METHODS)


def test_with_an_llm_only_archrag_is_warmed_and_no_model_is_called(persisted, monkeypatch):
    from graphstrata.testing import ScriptedLLM

    _, path = persisted
    llm = ScriptedLLM()
    seen = _count_queries(monkeypatch)
    GraphStrata.load(path, embedder=HashEmbedder(), llm=llm)
    assert len(seen) == 1 and seen[0].startswith("archrag:")
    assert llm.calls == []


def test_an_embedder_not_known_to_be_local_is_never_called_at_load(persisted, monkeypatch):
    """A framework's embedding (maybe a paid remote API) is not called by the warm-up: only the
    methods that never embed the query run."""
    _, path = persisted

    class RemoteLike(HashEmbedder):
        local = False

        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def embed(self, texts):
            self.calls += 1
            return super().embed(texts)

    remote = RemoteLike()
    seen = _count_queries(monkeypatch)
    GraphStrata.load(path, embedder=remote)
    assert remote.calls == 0
    assert [s.split(":")[0] for s in seen] == ["bm25"]
