"""GraphStrataRetriever against the real graphstrata core (small inline corpus)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_graphstrata import GraphStrataRetriever
from langchain_graphstrata.retrievers import RESERVED_METADATA_KEYS

QUERY = "Who designed the Analytical Engine?"
CONTEXT_KINDS = {"entity", "relation", "community", "path"}


class _RecordingIndex:
    """Delegates to a real GraphStrata and records the keyword arguments of each call."""

    def __init__(self, gs: Any, delegate: bool = True) -> None:
        self._gs = gs
        self.delegate = delegate
        self.calls: list[tuple[str, dict[str, Any]]] = []

    @property
    def methods(self) -> tuple[str, ...]:
        return self._gs.methods

    def retrieve(self, query: str, **kwargs: Any) -> Any:
        self.calls.append(("retrieve", kwargs))
        return self._gs.retrieve(query, **kwargs) if self.delegate else []

    async def aretrieve(self, query: str, **kwargs: Any) -> Any:
        self.calls.append(("aretrieve", kwargs))
        return await self._gs.aretrieve(query, **kwargs) if self.delegate else []


class _CountingEmbeddings(Embeddings):
    """Real (hash-based, deterministic) embeddings that count how they are called."""

    def __init__(self, size: int = 64) -> None:
        self.inner = DeterministicFakeEmbedding(size=size)
        self.documents_calls = 0
        self.query_calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents_calls += 1
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        return self.inner.embed_query(text)


# --------------------------------------------------------------------------- k and results


def test_is_a_langchain_retriever(lc_gs: Any) -> None:
    r = GraphStrataRetriever(index=lc_gs, method="dense")
    assert isinstance(r, BaseRetriever)
    assert type(r)._aget_relevant_documents is not BaseRetriever._aget_relevant_documents
    assert r.graphstrata is lc_gs


@pytest.mark.parametrize("k", [1, 3, 7])
def test_exactly_k_chunk_documents(lc_gs: Any, k: int) -> None:
    for method in lc_gs.methods:
        docs = GraphStrataRetriever(index=lc_gs, method=method, k=k).invoke(QUERY)
        assert len(docs) == k, method
        assert all(d.metadata["kind"] == "chunk" for d in docs), method
        assert len({d.id for d in docs}) == k, f"{method}: duplicate Documents"


def test_invoke_k_overrides_constructor_k(lc_gs: Any) -> None:
    r = GraphStrataRetriever(index=lc_gs, method="hybrid", k=2)
    assert len(r.invoke(QUERY)) == 2
    assert len(r.invoke(QUERY, k=4)) == 4
    assert r.k == 2  # the per-call value does not stick
    assert [d.id for d in r.invoke(QUERY, k=2)] == [d.id for d in r.invoke(QUERY, k=4)][:2]


def test_k_larger_than_corpus_returns_every_chunk(lc_gs: Any) -> None:
    n_chunks = lc_gs.stats()["chunks"]
    docs = GraphStrataRetriever(index=lc_gs, method="dense", k=n_chunks + 10).invoke(QUERY)
    assert len(docs) == n_chunks
    assert len({d.id for d in docs}) == n_chunks


def test_relevant_passage_ranks_first(lc_gs: Any) -> None:
    for method in ("dense", "bm25", "hybrid", "archrag"):
        if method not in lc_gs.methods:
            continue
        docs = GraphStrataRetriever(index=lc_gs, method=method, k=3).invoke(QUERY)
        assert docs[0].metadata["document_ids"][0] in {"babbage", "lovelace"}, method


# --------------------------------------------------------------------------- metadata


def test_chunk_metadata(lc_gs: Any) -> None:
    docs = GraphStrataRetriever(index=lc_gs, method="hybrid", k=4, include_scores=True).invoke(QUERY)
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    for rank, d in enumerate(docs):
        m = d.metadata
        assert set(RESERVED_METADATA_KEYS) <= set(m)
        assert m["kind"] == "chunk" and m["layer"] is None and m["method"] == "hybrid"
        assert m["rank"] == rank and isinstance(m["score"], float)
        (doc_id,) = m["document_ids"]
        assert d.id == m["chunk_ids"][0] and d.id.startswith(f"{doc_id}#")
        assert m["document_id"] == doc_id and m["chunk_index"] == int(d.id.split("#")[1])
        assert m["source"] == doc_id
        # the source document's own metadata is flattened to the top level
        assert m["title"] == lc_gs.documents[doc_id].metadata["title"]
        assert "document_metadata" not in m
        assert d.page_content and d.page_content in lc_gs.documents[doc_id].text


def test_kinds_none_adds_graph_context_after_the_chunks(lc_gs: Any) -> None:
    docs = GraphStrataRetriever(index=lc_gs, method="archrag", k=3, kinds=None).invoke(QUERY)
    kinds = [d.metadata["kind"] for d in docs]
    assert kinds[:3] == ["chunk"] * 3
    assert len(docs) > 3 and set(kinds[3:]) <= CONTEXT_KINDS
    for d in docs[3:]:
        assert d.metadata["method"] == "archrag"
        assert d.metadata["chunk_ids"], "context hits carry provenance"
        assert set(d.metadata["document_ids"]) <= set(lc_gs.documents)


def test_kinds_subset_and_per_call_kinds(lc_gs: Any) -> None:
    r = GraphStrataRetriever(index=lc_gs, method="archrag", k=2, kinds=["entity"])
    assert r.kinds == ("entity",)
    ents = r.invoke(QUERY)
    assert ents and all(d.metadata["kind"] == "entity" for d in ents)
    assert all(d.metadata["layer"] == 0 for d in ents)
    comms = r.invoke(QUERY, kinds=("community",))
    assert all(d.metadata["kind"] == "community" and d.metadata["layer"] >= 1 for d in comms)


def test_per_call_method(lc_gs: Any) -> None:
    r = GraphStrataRetriever(index=lc_gs, method="dense", k=3)
    docs = r.invoke(QUERY, method="bm25")
    assert {d.metadata["method"] for d in docs} == {"bm25"}
    assert [d.id for d in docs] == [
        d.id for d in GraphStrataRetriever(index=lc_gs, method="bm25", k=3).invoke(QUERY)
    ]


def test_method_options_reach_the_core(lc_gs: Any) -> None:
    # Constructor options, overridden per call, reach GraphStrata.retrieve unchanged (the
    # index here records instead of searching).
    rec = _RecordingIndex(lc_gs, delegate=False)
    r = GraphStrataRetriever(index=rec, method="archrag", k=2, method_options={"alpha": 0.2})
    assert r.invoke(QUERY) == []
    assert rec.calls[-1] == (
        "retrieve",
        {"method": "archrag", "k": 2, "kinds": ("chunk",), "alpha": 0.2},
    )
    r.invoke(QUERY, k=1, alpha=0.9, k_per_layer=2, kinds=None)
    # graph context asked for: its cap travels to the core, which selects (issue 27)
    assert rec.calls[-1][1] == {
        "method": "archrag", "k": 1, "kinds": None, "context_k": 5, "alpha": 0.9, "k_per_layer": 2,
    }
    assert r.method_options == {"alpha": 0.2}
    # A per-call method does not inherit the constructor method's options.
    r.invoke(QUERY, method="dense")
    assert rec.calls[-1][1] == {"method": "dense", "k": 2, "kinds": ("chunk",)}


def test_method_options_change_the_ranking(lc_gs: Any) -> None:
    # hybrid's alpha weighs dense against BM25: the extremes must equal the pure methods.
    q = "mechanical computer London"
    ids = lambda docs: [d.id for d in docs]  # noqa: E731
    r = GraphStrataRetriever(index=lc_gs, method="hybrid", k=16)
    dense = ids(GraphStrataRetriever(index=lc_gs, method="dense", k=16).invoke(q))
    assert ids(r.invoke(q, alpha=1.0))[:3] == dense[:3]
    assert ids(r.invoke(q, alpha=1.0)) != ids(r.invoke(q, alpha=0.0))


def test_unknown_option_is_rejected_at_construction(lc_gs: Any) -> None:
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['nope'\].*alpha"):
        GraphStrataRetriever(index=lc_gs, method="hybrid", method_options={"nope": 1})
    r = GraphStrataRetriever(index=lc_gs, method="dense")
    with pytest.raises(ValueError, match="unknown option"):
        r.invoke(QUERY, nope=1)
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        GraphStrataRetriever.from_documents([Document(page_content="x")], method="nope")


# --------------------------------------------------------------------------- async


async def test_ainvoke_uses_aretrieve_and_matches_invoke(lc_gs: Any) -> None:
    rec = _RecordingIndex(lc_gs)
    r = GraphStrataRetriever(index=rec, method="hybrid", k=3)
    adocs = await r.ainvoke(QUERY, k=2)
    assert rec.calls[-1] == ("aretrieve", {"method": "hybrid", "k": 2, "kinds": ("chunk",)})
    docs = r.invoke(QUERY, k=2)
    assert [(d.id, d.metadata) for d in adocs] == [(d.id, d.metadata) for d in docs]


async def test_concurrent_ainvoke(lc_gs: Any) -> None:
    r = GraphStrataRetriever(index=lc_gs, method="dense", k=2)
    queries = ["Enigma cipher", "Mount Everest first ascent", "radium discovery", QUERY]
    results = await asyncio.gather(*(r.ainvoke(q) for q in queries))
    assert [[d.id for d in res] for res in results] == [
        [d.id for d in r.invoke(q)] for q in queries
    ]


# --------------------------------------------------------------------------- index_dir


def test_index_dir_matches_in_memory_index(lc_gs: Any, lc_index_dir: Any) -> None:
    on_disk = GraphStrataRetriever(index_dir=str(lc_index_dir), method="archrag", k=4)
    in_mem = GraphStrataRetriever(index=lc_gs, method="archrag", k=4)
    assert [d.id for d in on_disk.invoke(QUERY)] == [d.id for d in in_mem.invoke(QUERY)]
    assert on_disk.graphstrata.persist_dir is not None


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("k", [0, -1, 2.5, "3", True, None])
def test_bad_k_raises_value_error_at_construction(lc_gs: Any, k: Any) -> None:
    with pytest.raises(ValueError, match="k must be a positive int"):
        GraphStrataRetriever(index=lc_gs, k=k)


def test_bad_k_per_call(lc_gs: Any) -> None:
    r = GraphStrataRetriever(index=lc_gs, method="dense")
    with pytest.raises(ValueError, match="k must be a positive int"):
        r.invoke(QUERY, k=0)


def test_unknown_method_lists_the_known_ones(lc_gs: Any) -> None:
    with pytest.raises(ValueError, match="unknown method 'nope'.*dense"):
        GraphStrataRetriever(index=lc_gs, method="nope")
    r = GraphStrataRetriever(index=lc_gs, method="dense")
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        r.invoke(QUERY, method="nope")


def test_unknown_kinds(lc_gs: Any) -> None:
    with pytest.raises(ValueError, match="unknown hit kind"):
        GraphStrataRetriever(index=lc_gs, kinds=("chunk", "bogus"))
    with pytest.raises(ValueError, match="kinds must be None or a non-empty"):
        GraphStrataRetriever(index=lc_gs, kinds=())


def test_missing_index_dir(tmp_path: Any) -> None:
    with pytest.raises(FileNotFoundError, match="index directory not found"):
        GraphStrataRetriever(index_dir=tmp_path / "does-not-exist")
    f = tmp_path / "a-file"
    f.write_text("x")
    with pytest.raises(FileNotFoundError, match="must be a directory"):
        GraphStrataRetriever(index_dir=f)


def test_index_and_index_dir_are_exclusive(lc_gs: Any, lc_index_dir: Any) -> None:
    with pytest.raises(ValueError, match="exactly one of index_dir"):
        GraphStrataRetriever()
    with pytest.raises(ValueError, match="exactly one of index_dir"):
        GraphStrataRetriever(index=lc_gs, index_dir=lc_index_dir)
    with pytest.raises(ValueError, match="embeddings= is only used"):
        GraphStrataRetriever(index=lc_gs, embeddings=DeterministicFakeEmbedding(size=8))
    with pytest.raises(TypeError, match="index must be a graphstrata.GraphStrata"):
        GraphStrataRetriever(index=object())


def test_empty_query_raises(lc_gs: Any) -> None:
    with pytest.raises(ValueError):
        GraphStrataRetriever(index=lc_gs, method="dense").invoke("")


# --------------------------------------------------------------------------- from_documents


@pytest.mark.slow  # from_documents without embeddings: the default MiniLM
def test_from_documents_uses_document_ids(lc_documents: list[Document]) -> None:
    docs = lc_documents[:6]
    r = GraphStrataRetriever.from_documents(docs, method="bm25", k=2)
    assert list(r.graphstrata.documents) == [d.id for d in docs]
    hits = r.invoke("Enigma cipher device used by Germany")
    assert hits[0].metadata["document_ids"] == ["enigma"]
    assert hits[0].metadata["topic_id"] == "T-enigma"  # user metadata survives the round trip


@pytest.mark.slow  # from_documents without embeddings: the default MiniLM
def test_from_documents_id_key_and_generated_ids(lc_documents: list[Document]) -> None:
    docs = lc_documents[:4]
    r = GraphStrataRetriever.from_documents(docs, id_key="topic_id", method="dense", k=1)
    assert list(r.graphstrata.documents) == [f"T-{d.id}" for d in docs]
    no_ids = [Document(page_content=d.page_content) for d in docs]
    r1 = GraphStrataRetriever.from_documents(no_ids, method="dense", k=1)
    r2 = GraphStrataRetriever.from_documents(no_ids, method="dense", k=1)
    ids = list(r1.graphstrata.documents)
    assert ids == list(r2.graphstrata.documents)  # deterministic
    assert len(set(ids)) == 4 and all(len(i) == 16 for i in ids)


def test_from_documents_bad_input(lc_documents: list[Document]) -> None:
    with pytest.raises(ValueError, match="no metadata key 'missing'"):
        GraphStrataRetriever.from_documents(lc_documents[:2], id_key="missing")
    dup = [lc_documents[0], Document(id=lc_documents[0].id, page_content="other text")]
    with pytest.raises(ValueError, match="duplicate document id 'babbage'"):
        GraphStrataRetriever.from_documents(dup)
    with pytest.raises(TypeError, match="not a LangChain Document"):
        GraphStrataRetriever.from_documents(["plain string"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="k must be a positive int"):
        GraphStrataRetriever.from_documents(lc_documents[:2], k=0)


def test_from_documents_with_langchain_embeddings(
    lc_documents: list[Document], tmp_path: Any
) -> None:
    emb = _CountingEmbeddings(size=64)
    docs = lc_documents[:5]
    r = GraphStrataRetriever.from_documents(
        docs, embeddings=emb, method="dense", k=1, persist_dir=tmp_path / "idx"
    )
    gs = r.graphstrata
    assert gs.embedder.id == "langchain:_CountingEmbeddings" and gs.embedder.dim == 64
    assert emb.documents_calls > 0
    # The hash embedding maps identical text to the identical vector: an exact passage as the
    # query must come back first, which only happens if our embeddings embedded the index.
    target = docs[3]
    before = emb.query_calls
    hit = r.invoke(target.page_content)[0]
    assert emb.query_calls > before  # queries go through embed_query
    assert hit.metadata["document_ids"] == [target.id]
    # Reload with the same embeddings: same answer. Other dimension: clear ValueError.
    again = GraphStrataRetriever(index_dir=tmp_path / "idx", embeddings=emb, method="dense", k=1)
    assert again.invoke(target.page_content)[0].id == hit.id
    with pytest.raises(ValueError):
        GraphStrataRetriever(
            index_dir=tmp_path / "idx", embeddings=DeterministicFakeEmbedding(size=32)
        )
