"""The core passes the retrieval contract suite (graphstrata.testing.contract) that both
framework adapters run too, and the contract's own pieces behave as documented."""

from __future__ import annotations

from typing import Any

import pytest

from graphstrata import GraphStrata
from graphstrata.retrieval import check_retrieve_args, select_hits
from graphstrata.testing import HashEmbedder
from graphstrata.testing.contract import RetrievalContract, Result, contract_documents
from graphstrata.types import Hit


@pytest.fixture(scope="module")
def contract_gs() -> GraphStrata:
    return GraphStrata.build(contract_documents(), embedder=HashEmbedder())


class TestCoreContract(RetrievalContract):
    @pytest.fixture
    def contract_index(self, contract_gs: GraphStrata) -> GraphStrata:
        return contract_gs

    def run(self, index: Any, query: str, **args: Any) -> list[Result]:
        return [
            Result(h.kind, h.id, float(h.score), list(h.document_ids), h.metadata.get("document_metadata", {}))
            for h in index.retrieve(query, **args)
        ]


def _hit(kind: str, id_: str, score: float) -> Hit:
    return Hit(id=id_, text=id_, score=score, kind=kind, layer=None, chunk_ids=[], document_ids=[])


def test_select_hits_cuts_context_by_score_stably_then_thresholds() -> None:
    chunks = [_hit("chunk", "c1", 0.9), _hit("chunk", "c2", 0.2)]
    context = [_hit("entity", "e1", 0.5), _hit("relation", "r1", 0.7), _hit("community", "m1", 0.5)]
    assert [h.id for h in select_hits(chunks, context)] == ["c1", "c2", "e1", "r1", "m1"]
    assert [h.id for h in select_hits(chunks, context, context_k=2)] == ["c1", "c2", "r1", "e1"]
    assert [h.id for h in select_hits(chunks, context, kinds=("entity", "community"))] == ["e1", "m1"]
    assert [h.id for h in select_hits(chunks, context, context_k=2, min_score=0.5)] == ["c1", "r1", "e1"]


def test_check_retrieve_args_names_the_callers_arguments() -> None:
    with pytest.raises(ValueError, match="similarity_top_k must be a positive int"):
        check_retrieve_args("dense", 0, names={"k": "similarity_top_k"})
    with pytest.raises(ValueError, match=r"score_threshold must be a number in \[0, 1\]"):
        check_retrieve_args("dense", 3, min_score=1.5, names={"min_score": "score_threshold"})
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['top_k'\].*per-call arguments: k, filter"):
        check_retrieve_args("dense", 3, options={"top_k": 2}, names={"arguments": "per-call arguments"},
                            arguments=("k", "filter"))
    with pytest.raises(ValueError, match="option 'alpha' of method 'hybrid'"):
        check_retrieve_args("hybrid", 3, options={"alpha": 2.0})
    req = check_retrieve_args("hybrid", 3, kinds="chunk", context_k=2, min_score=0, options={"alpha": 0.3})
    assert req.kinds == ("chunk",) and req.min_score == 0.0 and req.options == {"alpha": 0.3}
    # context_k only travels when context is asked for; unset filter / threshold not at all
    assert req.as_kwargs() == {"method": "hybrid", "k": 3, "kinds": ("chunk",), "min_score": 0.0, "alpha": 0.3}
    req = check_retrieve_args("dense", 2, kinds=None, context_k=4, filters={"year": 1})
    assert req.as_kwargs() == {"method": "dense", "k": 2, "kinds": None, "filters": {"year": 1}, "context_k": 4}
