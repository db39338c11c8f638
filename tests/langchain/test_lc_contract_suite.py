"""The LangChain retriever passes the core's retrieval contract suite
(graphstrata.testing.contract): same arguments, same selection as the core, nothing re-cut."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_graphstrata import GraphStrataRetriever

from graphstrata import GraphStrata
from graphstrata.testing import HashEmbedder
from graphstrata.testing.contract import RetrievalContract, Result, contract_documents


@pytest.fixture(scope="module")
def contract_gs() -> GraphStrata:
    return GraphStrata.build(contract_documents(), embedder=HashEmbedder())


class TestLangChainContract(RetrievalContract):
    @pytest.fixture
    def contract_index(self, contract_gs: GraphStrata) -> GraphStrata:
        return contract_gs

    def run(self, index: Any, query: str, **args: Any) -> list[Result]:
        search_kwargs: dict[str, Any] = {}
        fields: dict[str, Any] = {"method": args.pop("method"), "k": args.pop("k")}
        if "kinds" in args:
            fields["kinds"] = args.pop("kinds")
        if "context_k" in args:
            fields["context_k"] = args.pop("context_k")
        if args.get("filters") is not None:
            search_kwargs["filter"] = args.pop("filters")
        if args.get("min_score") is not None:
            fields["search_type"] = "similarity_score_threshold"
            search_kwargs["score_threshold"] = args.pop("min_score")
        assert not args, args
        docs = GraphStrataRetriever(index=index, search_kwargs=search_kwargs, include_scores=True, **fields).invoke(query)
        return [
            Result(d.metadata["kind"], d.id, d.metadata["score"], d.metadata["document_ids"], d.metadata)
            for d in docs
        ]
