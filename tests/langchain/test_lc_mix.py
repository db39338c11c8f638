"""LightRAG's mix mode through the LangChain retriever: which merged list brought a chunk
(``retrieved_by``) depends on the query, so it is per-query metadata like the scores."""

from __future__ import annotations

from graphstrata import GraphStrata
from graphstrata.testing import HashEmbedder
from graphstrata.testing.contract import contract_documents
from langchain_graphstrata import GraphStrataRetriever
from langchain_graphstrata.conversion import QUERY_METADATA_KEYS


def test_mix_labels_follow_include_scores() -> None:
    gs = GraphStrata.build(contract_documents(), embedder=HashEmbedder())
    query = gs.documents[next(iter(gs.documents))].text.split(".")[0]
    options = {"mode": "mix"}
    core = gs.retrieve(query, method="lightrag", k=4, kinds=["chunk"], mode="mix")
    labels = [h.metadata["retrieved_by"] for h in core]
    assert len(core) == 4 and set(labels) <= {"graph", "vector", "both"}
    scored = GraphStrataRetriever(index=gs, method="lightrag", k=4, method_options=options,
                                  include_scores=True).invoke(query)
    assert [(d.id, d.metadata["retrieved_by"]) for d in scored] == [(h.id, h.metadata["retrieved_by"]) for h in core]
    plain = GraphStrataRetriever(index=gs, method="lightrag", k=4, method_options=options).invoke(query)
    assert [d.id for d in plain] == [h.id for h in core]
    assert "retrieved_by" in QUERY_METADATA_KEYS
    for d in plain:  # the same chunk is the same Document whatever the query
        assert not set(QUERY_METADATA_KEYS) & set(d.metadata)
