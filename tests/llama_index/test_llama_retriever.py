"""GraphStrataRetriever: validation, hit → node translation, async, LlamaIndex plumbing."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeRelationship, QueryBundle
from llama_index.retrievers.graphstrata import GraphStrataRetriever


def test_is_a_llama_index_retriever():
    assert BaseRetriever in GraphStrataRetriever.__mro__


@pytest.mark.parametrize("top_k", [0, -3, 2.5, True, "5", None])
def test_bad_similarity_top_k_raises_at_construction(fake_engine, top_k):
    with pytest.raises(ValueError, match="similarity_top_k"):
        GraphStrataRetriever(fake_engine, similarity_top_k=top_k)


def test_unknown_method_names_known_ones(fake_engine):
    with pytest.raises(ValueError) as err:
        GraphStrataRetriever(fake_engine, method="pagerankz")
    assert "pagerankz" in str(err.value) and "archrag" in str(err.value)


@pytest.mark.parametrize("kinds", [("chunk", "summary"), (), 3])
def test_bad_kinds_raise(fake_engine, kinds):
    with pytest.raises(ValueError, match="kind"):
        GraphStrataRetriever(fake_engine, kinds=kinds)


def test_bad_method_options_raise(fake_engine):
    with pytest.raises(ValueError, match="method_options"):
        GraphStrataRetriever(fake_engine, method_options=["k_per_layer", 3])


def test_not_an_engine_is_a_type_error():
    with pytest.raises(TypeError, match="GraphStrata"):
        GraphStrataRetriever(object())


def test_passes_method_k_kinds_and_options_to_the_core(fake_engine):
    r = GraphStrataRetriever(
        fake_engine, method="hybrid", similarity_top_k=7, kinds=["chunk", "entity"],
        method_options={"alpha": 0.3},
    )
    r.retrieve("who founded acme")
    assert fake_engine.calls[-1] == (
        "retrieve", "who founded acme", "hybrid", 7, ("chunk", "entity"), None, {"alpha": 0.3}
    )


def test_default_asks_the_core_for_chunks_only(fake_engine):
    nodes = GraphStrataRetriever(fake_engine).retrieve("who founded acme")
    assert fake_engine.calls[-1][4] == ("chunk",)
    assert [n.node.metadata["kind"] for n in nodes] == ["chunk", "chunk"]


def test_hits_become_nodes_with_provenance(fake_engine):
    nodes = GraphStrataRetriever(fake_engine, similarity_top_k=2, kinds=None).retrieve(
        "who founded acme"
    )
    assert [n.node.node_id for n in nodes] == [
        "doc-a#0", "doc-b#3", "entity:acme", "relation:acme\u241falice", "community:L2C0"
    ]
    assert [n.score for n in nodes] == [0.9, 0.7, 0.8, 0.6, 0.5]
    first = nodes[0].node
    assert first.get_content(MetadataMode.NONE) == "Alice founded Acme in Paris."
    meta = first.metadata
    assert meta["kind"] == "chunk" and meta["layer"] is None and "method" not in meta
    assert nodes[2].node.metadata["method"] == "archrag"  # context nodes name their method
    assert meta["chunk_ids"] == ["doc-a#0"] and meta["document_ids"] == ["doc-a"]
    assert meta["document_id"] == "doc-a" and meta["chunk_index"] == 0
    # the source document's metadata is flattened onto chunk nodes, like LlamaIndex nodes
    assert meta["title"] == "Acme history" and meta["year"] == 1999
    assert "document_metadata" not in meta
    # chunk hits link to their document
    source = first.relationships[NodeRelationship.SOURCE]
    assert source.node_id == "doc-a" and first.ref_doc_id == "doc-a"
    assert (first.start_char_idx, first.end_char_idx) == (0, 28)
    community = nodes[4].node
    assert community.metadata["layer"] == 2 and community.metadata["title"] == "Founders"
    assert NodeRelationship.SOURCE not in community.relationships
    assert nodes[2].node.metadata["document_ids"] == ["doc-a", "doc-b"]


def test_provenance_is_hidden_from_the_llm_but_document_metadata_is_not(fake_engine):
    node = GraphStrataRetriever(fake_engine).retrieve("acme")[0].node
    llm_view = node.get_content(MetadataMode.LLM)
    assert "Acme history" in llm_view
    assert "chunk_ids" not in llm_view and "document_ids" not in llm_view
    assert "doc-a#0" not in llm_view


def test_kinds_filter_reaches_the_core(fake_engine):
    nodes = GraphStrataRetriever(fake_engine, kinds=("community",)).retrieve("acme")
    assert [n.node.metadata["kind"] for n in nodes] == ["community"]


@pytest.mark.asyncio
async def test_aretrieve_uses_the_core_async_path_under_a_running_loop(fake_engine):
    asyncio.get_running_loop()  # we are inside pytest-asyncio's loop
    r = GraphStrataRetriever(fake_engine, similarity_top_k=1)
    nodes = await r.aretrieve(QueryBundle("acme"))
    assert fake_engine.calls[0][0] == "aretrieve"
    assert [n.node.node_id for n in nodes][0] == "doc-a#0"


def test_empty_query_error_comes_from_the_core(fake_engine):
    with pytest.raises(ValueError, match="non-empty"):
        GraphStrataRetriever(fake_engine).retrieve("   ")


def test_works_with_node_postprocessors(fake_engine):
    engine = RetrieverQueryEngine.from_args(
        GraphStrataRetriever(fake_engine, kinds=None),
        llm=MockLLM(),
        node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=0.65)],
    )
    response = engine.query("who founded acme")
    assert sorted(n.score for n in response.source_nodes) == [0.7, 0.8, 0.9]


# -- with a real (small) graphstrata index -------------------------------------------------
def test_retriever_query_engine_over_a_real_index(small_index):
    retriever = GraphStrataRetriever(small_index.engine, method="hybrid", similarity_top_k=2,
                                     kinds=("chunk",))
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query("Who designed the Falcon arm?")
    ids = [n.node.ref_doc_id for n in response.source_nodes]
    assert len(ids) == 2 and set(ids) <= set(small_index.engine.documents)
    assert "falcon" in ids or "acme" in ids
    # the MockLLM echoes its prompt: the retrieved chunk text reached the LLM
    assert response.source_nodes[0].node.get_content(MetadataMode.NONE)[:30] in str(response)


def test_chunk_offsets_point_into_the_document(small_index, small_docs):
    texts = {d.doc_id: d.text for d in small_docs}
    nodes = GraphStrataRetriever(small_index.engine, method="hybrid", similarity_top_k=4,
                                 kinds=("chunk",)).retrieve("Falcon arm in Lyon")
    assert len(nodes) == 4
    for n in nodes:
        doc = texts[n.node.ref_doc_id]
        assert doc[n.node.start_char_idx : n.node.end_char_idx] == n.node.text


def test_similarity_top_k_larger_than_the_corpus(small_index):
    n_chunks = len(small_index.engine.chunks)
    nodes = GraphStrataRetriever(
        small_index.engine, method="dense", similarity_top_k=n_chunks + 50, kinds=("chunk",)
    ).retrieve("robots")
    assert len(nodes) == n_chunks
    assert len({n.node.node_id for n in nodes}) == n_chunks


@pytest.mark.parametrize("method", ["archrag", "dense", "bm25", "hybrid"])
def test_same_chunk_ranking_as_the_core(small_index, method):
    if method not in small_index.engine.methods:
        pytest.skip(f"core has no {method}")
    query = "Who managed the trial in Rotterdam?"
    core = small_index.engine.retrieve(query, method=method, k=3, kinds=("chunk",))
    ours = GraphStrataRetriever(small_index.engine, method=method, similarity_top_k=3).retrieve(query)
    assert [h.id for h in core] == [n.node.metadata["hit_id"] for n in ours]
    assert [n.node.metadata["kind"] for n in ours] == ["chunk"] * len(core)
    assert [n.score for n in ours] == [h.score for h in core]
