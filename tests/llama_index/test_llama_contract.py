"""The adapter contract (docs/python-api.md, "What the framework adapters promise"), LlamaIndex side.

Issue 14: k means at most k chunk nodes, graph context is opt-in with its own cap, scores are
the core's [0, 1] scores, MetadataFilters are applied inside retrieval, a Document's metadata
exclusions and SOURCE reach every chunk node (also after persist / load), unknown arguments
raise.
"""

from __future__ import annotations

import pytest
from llama_index.core import (
    Document,
    SimpleDirectoryReader,
    StorageContext,
    load_index_from_storage,
)
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.schema import MetadataMode, NodeRelationship
from llama_index.core.tools import RetrieverTool
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.graph_rag.graphstrata import GraphStrataIndex
from llama_index.retrievers.graphstrata import (
    LLAMA_INDEX_METADATA_KEY,
    GraphStrataRetriever,
    to_core_filters,
)

QUERY = "Who managed the Rotterdam trial?"


def kinds_of(nodes):
    return [n.node.metadata["kind"] for n in nodes]


# -- 1. k means at most k chunk nodes; context is opt-in, capped by context_k ---------------
def test_every_method_returns_at_most_k_chunk_nodes_by_default(small_index):
    for method in small_index.methods:
        nodes = small_index.as_retriever(method=method, similarity_top_k=3).retrieve(QUERY)
        assert len(nodes) == 3 and kinds_of(nodes) == ["chunk"] * 3, method
        response = small_index.as_query_engine(
            llm=MockLLM(), method=method, similarity_top_k=2
        ).query(QUERY)
        assert kinds_of(response.source_nodes) == ["chunk", "chunk"], method


def test_graph_context_is_opt_in_with_its_own_cap(small_index):
    for method in small_index.methods:
        nodes = small_index.as_retriever(
            method=method, similarity_top_k=2, kinds=None, context_k=3
        ).retrieve(QUERY)
        kinds = kinds_of(nodes)
        assert kinds[:2] == ["chunk", "chunk"], method  # context never counts against k
        context = nodes[2:]
        assert len(context) <= 3 and all(k != "chunk" for k in kinds[2:]), method
        scores = [n.score for n in context]
        assert scores == sorted(scores, reverse=True), method  # best first
    graphy = small_index.as_retriever(method="archrag", kinds=None).retrieve(QUERY)
    assert len(graphy) == 5 + 5  # default similarity_top_k and context_k


def test_context_only_kinds(small_index):
    nodes = small_index.as_retriever(
        method="archrag", kinds=("entity", "relation"), context_k=2
    ).retrieve(QUERY)
    assert len(nodes) == 2 and set(kinds_of(nodes)) <= {"entity", "relation"}


@pytest.mark.parametrize("context_k", [0, -1, 1.5, "3", None, True])
def test_bad_context_k_raises(fake_engine, context_k):
    with pytest.raises(ValueError, match="context_k"):
        GraphStrataRetriever(fake_engine, context_k=context_k)


def test_context_cap_on_scripted_hits(fake_engine):
    nodes = GraphStrataRetriever(fake_engine, similarity_top_k=1, kinds=None, context_k=2).retrieve(
        "acme"
    )
    assert [n.node.node_id for n in nodes] == ["doc-a#0", "entity:acme", "relation:acme\u241falice"]


def test_retriever_tool_output_is_small_by_default(small_index):
    for method in small_index.methods:
        tool = RetrieverTool.from_defaults(
            small_index.as_retriever(method=method, similarity_top_k=2), name="search"
        )
        out = tool.call(input=QUERY)
        assert len(out.raw_output) <= 2 and len(out.content) < 2000, method


# -- 2. scores: the core's [0, 1] in NodeWithScore.score, nothing per-query in the node -----
def test_scores_are_the_cores_and_nodes_do_not_change_with_the_query(small_index):
    engine = small_index.engine
    for method in small_index.methods:
        hits = engine.retrieve(QUERY, method=method, k=4, kinds=("chunk",))
        nodes = small_index.as_retriever(method=method, similarity_top_k=4).retrieve(QUERY)
        assert [n.score for n in nodes] == [h.score for h in hits], method
        assert all(0.0 <= n.score <= 1.0 for n in nodes), method
        assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
        other = {n.node.node_id: n.node for n in
                 small_index.as_retriever(method=method, similarity_top_k=20).retrieve("pan")}
        for n, h in zip(nodes, hits, strict=True):
            assert n.node.node_id == h.id and "raw_score" not in n.node.metadata
            assert "method" not in n.node.metadata
            if n.node.node_id in other:  # the same chunk from another query: the same node
                assert other[n.node.node_id].hash == n.node.hash
            for mode in (MetadataMode.LLM, MetadataMode.EMBED):
                assert "chunk_ids" not in n.node.get_content(mode)


def test_similarity_cutoff_means_the_same_for_every_method(small_index):
    query = "omelette eggs butter pan"
    for method in small_index.methods:
        ranked = small_index.as_retriever(method=method, similarity_top_k=6).retrieve(query)
        for cutoff in (0.0, 0.25, 0.5, 0.75, 1.0):
            kept = small_index.as_query_engine(
                llm=MockLLM(), method=method, similarity_top_k=6,
                node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=cutoff)],
            ).query(query).source_nodes
            # a cutoff keeps a prefix of the method's own ranking
            assert [n.node.node_id for n in kept] == [
                n.node.node_id for n in ranked[: len(kept)]
            ], (method, cutoff)
            assert all(n.score >= cutoff for n in kept)
        kept = SimilarityPostprocessor(similarity_cutoff=0.3).postprocess_nodes(ranked)
        ids = [n.node.ref_doc_id for n in kept]
        # the one matching document passes a moderate cutoff, unrelated ones do not
        assert ids[:1] == ["cooking"] and "acme" not in ids and "rotterdam" not in ids, (method, ids)


# -- 3. metadata filters -----------------------------------------------------------------
LIBRARY = [
    ("acme-1999", {"title": "Acme history", "year": 1999, "team": "robots"},
     "Alice Martin founded Acme Robotics in Lyon. The Falcon arm was designed by Bruno Keller."),
    ("falcon-2004", {"title": "Falcon arm", "year": 2004, "team": "robots"},
     "The Falcon arm lifts forty kilograms. Rotterdam bought the Falcon arm."),
    ("port-2010", {"title": "Rotterdam port", "year": 2010, "team": "ports"},
     "The port of Rotterdam tested a robot arm. Clara Vos managed the trial."),
    ("cook-2015", {"title": "Cooking", "year": 2015, "team": "food"},
     "Chefs in Lyon cook quenelles. An omelette needs a hot pan."),
]


@pytest.fixture(scope="module")
def library(hash_embedding):
    docs = [Document(text=t, id_=i, metadata=m) for i, m, t in LIBRARY]
    return GraphStrataIndex.from_documents(docs, embed_model=hash_embedding(model_name="hash-128"))


def test_metadata_filters_translate_to_the_core_form():
    f = MetadataFilters(
        filters=[
            MetadataFilter(key="year", value=2000, operator=FilterOperator.GTE),
            MetadataFilters(
                filters=[
                    MetadataFilter(key="team", value="ports"),
                    MetadataFilter(key="team", value=["food", "x"], operator=FilterOperator.IN),
                ],
                condition=FilterCondition.OR,
            ),
            MetadataFilter(key="title", value="Cooking", operator=FilterOperator.NE),
            MetadataFilter(key="year", value=[2004], operator=FilterOperator.NIN),
            MetadataFilter(key="year", value=2020, operator=FilterOperator.LT),
            MetadataFilter(key="year", value=2019, operator=FilterOperator.LTE),
            MetadataFilter(key="year", value=1, operator=FilterOperator.GT),
        ]
    )
    assert to_core_filters(f) == {
        "$and": [
            {"year": {"$gte": 2000}},
            {"$or": [{"team": {"$eq": "ports"}}, {"team": {"$in": ["food", "x"]}}]},
            {"title": {"$ne": "Cooking"}},
            {"year": {"$nin": [2004]}},
            {"year": {"$lt": 2020}},
            {"year": {"$lte": 2019}},
            {"year": {"$gt": 1}},
        ]
    }
    assert to_core_filters(MetadataFilters(filters=[MetadataFilter(key="a", value=1)])) == {
        "a": {"$eq": 1}
    }
    assert to_core_filters(MetadataFilters(filters=[])) is None
    assert to_core_filters({"year": {"$gte": 3}}) == {"year": {"$gte": 3}}


@pytest.mark.parametrize(
    "op", [FilterOperator.TEXT_MATCH, FilterOperator.IS_EMPTY, FilterOperator.TEXT_MATCH_INSENSITIVE]
)
def test_unsupported_operators_are_named(fake_engine, op):
    f = MetadataFilters(filters=[MetadataFilter(key="tags", value="x", operator=op)])
    with pytest.raises(ValueError, match=op.name):
        GraphStrataRetriever(fake_engine, filters=f)


def test_list_operators_translate(fake_engine):
    f = MetadataFilters(filters=[
        MetadataFilter(key="tags", value="rust", operator=FilterOperator.CONTAINS),
        MetadataFilter(key="tags", value=["db", "x"], operator=FilterOperator.ANY),
        MetadataFilter(key="tags", value=["db", "rust"], operator=FilterOperator.ALL),
    ])
    assert to_core_filters(f) == {"$and": [
        {"tags": {"$contains": "rust"}}, {"tags": {"$any": ["db", "x"]}},
        {"tags": {"$all": ["db", "rust"]}},
    ]}
    GraphStrataRetriever(fake_engine, filters=f).retrieve("acme")
    assert fake_engine.calls[-1][5] == to_core_filters(f)


def test_not_condition_and_bad_values_raise(fake_engine):
    with pytest.raises(ValueError, match="NOT"):
        GraphStrataRetriever(fake_engine, filters=MetadataFilters(
            filters=[MetadataFilter(key="a", value=1)], condition=FilterCondition.NOT))
    with pytest.raises(ValueError, match="year"):  # the core refuses $gt on a string
        GraphStrataRetriever(fake_engine, filters=MetadataFilters(
            filters=[MetadataFilter(key="year", value="2000", operator=FilterOperator.GT)]))
    with pytest.raises(ValueError, match="filters"):
        GraphStrataRetriever(fake_engine, filters=[("year", 2000)])


def test_filters_reach_the_core(fake_engine):
    f = MetadataFilters(filters=[MetadataFilter(key="year", value=1999)])
    GraphStrataRetriever(fake_engine, filters=f).retrieve("acme")
    assert fake_engine.calls[-1][5] == {"year": {"$eq": 1999}}


def test_filters_apply_before_k_is_cut(library):
    query = "Falcon arm Rotterdam"
    unfiltered = [n.node.ref_doc_id for n in library.as_retriever(method="dense", similarity_top_k=2).retrieve(query)]
    assert "cook-2015" not in unfiltered
    recent = MetadataFilters(filters=[MetadataFilter(key="year", value=2010, operator=FilterOperator.GTE)])
    for method in library.methods:
        nodes = library.as_retriever(method=method, similarity_top_k=2, filters=recent).retrieve(query)
        # both allowed documents come back although the best matches were filtered out
        assert sorted(n.node.ref_doc_id for n in nodes) == ["cook-2015", "port-2010"], method
        context = library.as_retriever(method=method, kinds=None, filters=recent).retrieve(query)
        for n in context:
            assert set(n.node.metadata["document_ids"]) & {"cook-2015", "port-2010"}, method


def test_filters_or_and_nested(library):
    f = MetadataFilters(
        filters=[
            MetadataFilter(key="team", value="robots"),
            MetadataFilters(filters=[MetadataFilter(key="year", value=2015)]),
        ],
        condition=FilterCondition.OR,
    )
    retriever = GraphStrataRetriever(library.engine, method="bm25", similarity_top_k=10, filters=f)
    assert sorted(n.node.ref_doc_id for n in retriever.retrieve("Lyon")) == [
        "acme-1999", "cook-2015", "falcon-2004"
    ]
    f = MetadataFilters(filters=[MetadataFilter(key="document_id", value=["port-2010"], operator="in")])
    nodes = library.as_retriever(method="hybrid", filters=f).retrieve("Falcon")
    assert {n.node.ref_doc_id for n in nodes} == {"port-2010"}


def test_query_engine_and_vector_store_query_take_filters(library):
    from llama_index.core.vector_stores.types import VectorStoreQuery

    f = MetadataFilters(filters=[MetadataFilter(key="team", value="food")])
    response = library.as_query_engine(llm=MockLLM(), method="dense", filters=f).query("Falcon")
    assert {n.node.ref_doc_id for n in response.source_nodes} == {"cook-2015"}
    store = library.storage_context.vector_stores["graphstrata"]
    result = store.query(VectorStoreQuery(query_str="Falcon", similarity_top_k=3, filters=f))
    assert {n.ref_doc_id for n in result.nodes} == {"cook-2015"}
    result = store.query(VectorStoreQuery(query_str="Falcon", similarity_top_k=3, doc_ids=["acme-1999"]))
    assert {n.ref_doc_id for n in result.nodes} == {"acme-1999"}


# -- 4. metadata exclusions and SOURCE on every chunk node -------------------------------
def excluded_docs():
    return [
        Document(
            id_="memo", text="Clara Vos managed the Rotterdam trial of the Falcon arm.",
            metadata={"title": "Memo", "secret_code": "XJ-42", "embed_only": "LOOKHERE", "year": 2004},
            excluded_llm_metadata_keys=["secret_code"],
            excluded_embed_metadata_keys=["secret_code", "embed_only"],
        ),
        Document(id_="plain", text="Bruno Keller designed the Falcon arm in Lyon.",
                 metadata={"title": "Plain", "year": 1999}),
    ]


def check_exclusions(nodes):
    by_doc = {n.node.ref_doc_id: n.node for n in nodes}
    memo = by_doc["memo"]
    assert memo.metadata["secret_code"] == "XJ-42"  # still in the metadata
    llm, embed = memo.get_content(MetadataMode.LLM), memo.get_content(MetadataMode.EMBED)
    assert "XJ-42" not in llm and "secret_code" not in llm
    assert "LOOKHERE" in llm and "LOOKHERE" not in embed and "XJ-42" not in embed
    assert llm.startswith("title: Memo")
    assert LLAMA_INDEX_METADATA_KEY not in memo.metadata
    assert "Plain" in by_doc["plain"].get_content(MetadataMode.LLM)
    for n in nodes:  # SOURCE: the LlamaIndex document, on every chunk node
        source = n.node.relationships[NodeRelationship.SOURCE]
        assert source.node_id == n.node.ref_doc_id == n.node.metadata["document_id"]
        assert LLAMA_INDEX_METADATA_KEY not in (source.metadata or {})


def test_document_exclusions_reach_retrieved_nodes_across_persist_and_load(tmp_path, hash_embedding):
    index = GraphStrataIndex.from_documents(excluded_docs())
    for method in index.methods:
        check_exclusions(index.as_retriever(method=method, similarity_top_k=2).retrieve("Falcon arm"))
    index.storage_context.persist(persist_dir=str(tmp_path))
    for loaded in (
        GraphStrataIndex.load(tmp_path),
        load_index_from_storage(StorageContext.from_defaults(persist_dir=str(tmp_path))),
    ):
        check_exclusions(loaded.as_retriever(method="hybrid", similarity_top_k=2).retrieve("Falcon arm"))
    retriever = GraphStrataRetriever.from_persist_dir(
        tmp_path, embed_model=hash_embedding(model_name="hash-128"), method="dense", similarity_top_k=2
    )
    check_exclusions(retriever.retrieve("Falcon arm"))
    # the reserved key is not user metadata anywhere, and filters still see user keys
    assert index.ref_doc_info["memo"].metadata == excluded_docs()[0].metadata
    f = MetadataFilters(filters=[MetadataFilter(key="year", value=2004)])
    assert [n.node.ref_doc_id for n in index.as_retriever(filters=f).retrieve("Falcon")] == ["memo"]
    f = MetadataFilters(filters=[MetadataFilter(key="secret_code", value="XJ-42", operator="!=")])
    assert [n.node.ref_doc_id for n in index.as_retriever(filters=f).retrieve("Falcon")] == ["plain"]
    # unchanged documents stay unchanged; a changed exclusion list is a change
    assert index.refresh_ref_docs(excluded_docs()) == [False, False]
    changed = excluded_docs()
    changed[0].excluded_llm_metadata_keys = ["secret_code", "year"]
    assert index.refresh_ref_docs(changed) == [True, False]
    node = next(n.node for n in index.as_retriever().retrieve("Falcon") if n.node.ref_doc_id == "memo")
    assert "year" not in node.get_content(MetadataMode.LLM)


def test_simple_directory_reader_file_stats_stay_out_of_the_prompt(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "falcon.txt").write_text("Bruno Keller designed the Falcon arm in Lyon.")
    (folder / "port.txt").write_text("Clara Vos managed the Rotterdam trial.")
    docs = SimpleDirectoryReader(str(folder)).load_data()
    index = GraphStrataIndex.from_documents(docs)
    response = index.as_query_engine(llm=MockLLM(), method="hybrid", similarity_top_k=2).query(
        "Who designed the Falcon arm?"
    )
    prompt = str(response)  # MockLLM echoes its prompt
    assert "Bruno Keller" in prompt and "file_path" in prompt
    for key in ("file_size", "creation_date", "last_modified_date", "file_type"):
        assert key not in prompt
        assert all(key not in n.node.get_content(MetadataMode.EMBED) for n in response.source_nodes)
    assert {n.node.ref_doc_id for n in response.source_nodes} == {d.doc_id for d in docs}


def test_reserved_metadata_key_is_refused():
    doc = Document(text="x y z", id_="d", metadata={LLAMA_INDEX_METADATA_KEY: 1})
    with pytest.raises(ValueError, match="reserved"):
        GraphStrataIndex.from_documents([doc])


# -- 6. unknown arguments raise ------------------------------------------------------------
def test_unknown_retriever_arguments_raise(small_index, fake_engine):
    with pytest.raises(ValueError, match="'foo'"):
        small_index.as_retriever(foo=1)
    with pytest.raises(ValueError, match="top_k.*similarity_top_k"):
        small_index.as_retriever(top_k=3)
    with pytest.raises(ValueError, match="top_k.*similarity_top_k"):
        GraphStrataRetriever(fake_engine, top_k=3)
    with pytest.raises(ValueError, match="'filter'.*filters"):
        GraphStrataRetriever(fake_engine, filter={"a": 1})
    with pytest.raises(ValueError, match="search_kwargs"):
        GraphStrataRetriever(fake_engine, search_kwargs={"k": 2})


def test_unknown_query_engine_arguments_raise(small_index):
    with pytest.raises(ValueError, match="top_k.*similarity_top_k"):
        small_index.as_query_engine(llm=MockLLM(), top_k=3)
    with pytest.raises(ValueError, match="'foo'"):
        small_index.as_query_engine(llm=MockLLM(), foo=1)
    engine = small_index.as_query_engine(llm=MockLLM(), response_mode="compact", similarity_top_k=1)
    assert len(engine.query(QUERY).source_nodes) == 1


def test_unknown_index_arguments_raise(small_docs, tmp_path):
    with pytest.raises(ValueError, match="similarity_top_k"):
        GraphStrataIndex.from_documents(small_docs[:2], similarity_top_k=3)
    GraphStrataIndex.from_documents(small_docs[:2]).storage_context.persist(persist_dir=str(tmp_path))
    with pytest.raises(ValueError, match="'foo'"):
        GraphStrataIndex.load(tmp_path, foo=1)


def test_unknown_method_options_raise_at_construction(small_index):
    with pytest.raises(ValueError, match="k_per_lair"):
        small_index.as_retriever(method="archrag", method_options={"k_per_lair": 3})
    small_index.as_retriever(method="hybrid", method_options={"alpha": 0.3})


def test_chat_engine_splits_its_arguments(small_index):
    # BaseIndex.as_chat_engine would hand system_prompt to as_retriever too, which now raises
    for mode in ("best", "context", "condense_plus_context"):
        chat = small_index.as_chat_engine(
            chat_mode=mode, llm=MockLLM(), similarity_top_k=1, method="hybrid",
            system_prompt="You answer from the logs.",
        )
        assert QUERY in str(chat.chat(QUERY))  # MockLLM echoes
    chat = small_index.as_chat_engine(
        chat_mode="condense_question", llm=MockLLM(), similarity_top_k=1, response_mode="compact",
        verbose=False,
    )
    assert chat.chat(QUERY).source_nodes and len(chat.chat(QUERY).source_nodes) == 1
    with pytest.raises(ValueError, match="top_k"):
        small_index.as_chat_engine(chat_mode="context", llm=MockLLM(), top_k=1)
