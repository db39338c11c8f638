"""The LlamaIndex retriever passes the core's retrieval contract suite
(graphstrata.testing.contract): same arguments, same selection as the core, nothing re-cut.
Thresholds are LlamaIndex node postprocessors' business, so that check is skipped."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.retrievers.graphstrata import GraphStrataRetriever

from graphstrata import GraphStrata
from graphstrata.testing import HashEmbedder
from graphstrata.testing.contract import RetrievalContract, Result, contract_documents


@pytest.fixture(scope="module")
def contract_gs() -> GraphStrata:
    return GraphStrata.build(contract_documents(), embedder=HashEmbedder())


class TestLlamaIndexContract(RetrievalContract):
    supports_min_score = False

    @pytest.fixture
    def contract_index(self, contract_gs: GraphStrata) -> GraphStrata:
        return contract_gs

    def run(self, index: Any, query: str, **args: Any) -> list[Result]:
        kwargs: dict[str, Any] = {"method": args.pop("method"), "similarity_top_k": args.pop("k")}
        for name in ("kinds", "context_k", "filters"):
            if name in args:
                kwargs[name] = args.pop(name)
        assert not args, args
        nodes = GraphStrataRetriever(index, **kwargs).retrieve(query)
        return [
            Result(n.node.metadata["kind"], n.node.metadata["hit_id"], float(n.score),
                   n.node.metadata["document_ids"], n.node.metadata)
            for n in nodes
        ]
