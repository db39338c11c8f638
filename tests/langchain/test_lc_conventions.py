"""LangChain's own conventions: a chunk is one Document whatever the query (so
``MultiQueryRetriever`` keeps it once), an index can start empty, retrievers pickle, and
``doc_ids=`` gets a hint."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM
from langchain_graphstrata import GraphStrataRetriever

VARIANTS = [
    "Who designed the Analytical Engine?",
    "Which mathematician built the Analytical Engine in London?",
    "Analytical Engine designer and the first algorithm",
]


def _multi_query(retriever: GraphStrataRetriever) -> list[Document]:
    from langchain_classic.retrievers.multi_query import MultiQueryRetriever

    llm = FakeListLLM(responses=["\n".join(VARIANTS)])  # the scripted LLM writes three variants
    mq = MultiQueryRetriever.from_llm(retriever=retriever, llm=llm)
    return mq.invoke("Analytical Engine")


def test_multi_query_retriever_returns_each_chunk_once(lc_gs: Any) -> None:
    retriever = GraphStrataRetriever(index=lc_gs, method="hybrid", k=3)
    per_variant = [[d.id for d in retriever.invoke(v)] for v in VARIANTS]
    overlap = set(per_variant[0]) & set(per_variant[1]) & set(per_variant[2])
    assert overlap, per_variant  # the variants share chunks: the case that duplicated
    docs = _multi_query(retriever)
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids)) == len({i for v in per_variant for i in v})
    assert all(d.id == d.metadata["chunk_id"] and "#" in d.id for d in docs)
    assert not {"score", "raw_score", "rank"} & set(docs[0].metadata)
    # with per-query scores in metadata the same chunk is three different Documents
    scored = _multi_query(GraphStrataRetriever(index=lc_gs, method="hybrid", k=3, include_scores=True))
    assert len(scored) > len(docs) and {d.id for d in scored} == set(ids)
    assert all(0.0 <= d.metadata["score"] <= 1.0 for d in scored)


@pytest.mark.slow  # from_documents without embeddings: the default MiniLM
def test_an_index_can_start_empty(tmp_path: Any) -> None:
    retriever = GraphStrataRetriever.from_documents([], method="bm25", k=2, persist_dir=tmp_path / "ix")
    assert retriever.invoke("Analytical Engine") == []
    ids = retriever.add_documents([
        Document(id="ada", page_content="Ada Lovelace wrote the first algorithm for the Analytical Engine."),
        Document(id="everest", page_content="Edmund Hillary climbed Mount Everest in 1953."),
    ])
    assert ids == ["ada", "everest"]
    assert [d.metadata["document_id"] for d in retriever.invoke("Analytical Engine algorithm")][0] == "ada"
    retriever.add_documents([Document(id="k2", page_content="K2 is the second highest mountain.")])
    reopened = GraphStrataRetriever(index_dir=tmp_path / "ix", method="bm25", k=1)
    assert reopened.invoke("second highest mountain")[0].metadata["document_id"] == "k2"


def test_retriever_pickles_and_answers_the_same(lc_index_dir: Any) -> None:
    retriever = GraphStrataRetriever(index_dir=lc_index_dir, method="hybrid", k=3)
    copy = pickle.loads(pickle.dumps(retriever))
    assert copy is not retriever and copy.k == 3 and copy.method == "hybrid"
    assert copy.invoke(VARIANTS[0]) == retriever.invoke(VARIANTS[0])


@pytest.mark.slow  # from_documents without embeddings: the default MiniLM
def test_an_unpersisted_index_refuses_to_pickle_with_the_fix(lc_documents: list[Document]) -> None:
    retriever = GraphStrataRetriever.from_documents(lc_documents[:3])
    with pytest.raises(TypeError, match="persist"):
        pickle.dumps(retriever)


def test_doc_ids_gets_a_hint(lc_gs: Any) -> None:
    with pytest.raises(ValueError, match=r"doc_ids.*document_id.*\$in"):
        GraphStrataRetriever(index=lc_gs, doc_ids=["babbage"])
    with pytest.raises(ValueError, match=r"filter=\{'document_id'"):
        GraphStrataRetriever(index=lc_gs).invoke("Enigma", doc_ids=["enigma"])
