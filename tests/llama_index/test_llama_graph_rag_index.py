"""GraphStrataIndex over the real core (small corpus, hashing embedding)."""

from __future__ import annotations

import logging

import pytest
from llama_index.core import Document, Settings, StorageContext, load_index_from_storage
from llama_index.core.indices.base import BaseIndex
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import TextNode
from llama_index.graph_rag.graphstrata import (
    GraphStrataIndex,
    GraphStrataRetriever,
    GraphStrataStore,
    resolve_embedder,
)


@pytest.fixture
def fresh_index(small_docs):
    """A mutable index over the first four documents (function scope: tests mutate it)."""
    return GraphStrataIndex.from_documents(small_docs[:4])


def chunk_doc_ids(index, query, method="bm25", k=3):
    return [
        n.node.ref_doc_id
        for n in index.as_retriever(method=method, similarity_top_k=k, kinds=("chunk",)).retrieve(query)
    ]


def test_is_a_base_index():
    assert BaseIndex in GraphStrataIndex.__mro__


def test_from_documents_keeps_document_ids_and_chunk_ids(small_index, small_docs):
    assert list(small_index.engine.documents) == [d.doc_id for d in small_docs]
    info = small_index.ref_doc_info
    assert set(info) == {d.doc_id for d in small_docs}
    assert info["acme"].node_ids and all(c.startswith("acme#") for c in info["acme"].node_ids)
    assert info["acme"].metadata == {"title": "Acme history"}


def test_uses_the_embedding_the_user_set_in_settings(small_docs, hash_embedding):
    embed = hash_embedding(model_name="hash-settings")
    Settings.embed_model = embed
    index = GraphStrataIndex.from_documents(small_docs[:3])
    assert index.engine.embedder.id == "llama_index:hash-settings"
    before = len(embed._calls)
    index.as_retriever(method="dense", similarity_top_k=1).retrieve("robots in Lyon")
    assert len(embed._calls) > before  # queries go through the LlamaIndex embedding


def test_offline_default_when_no_embedding_was_set():
    Settings._embed_model = None
    assert resolve_embedder(None) is None  # -> the core's offline default, never OpenAI
    assert Settings._embed_model is None  # and Settings.embed_model was not resolved


def test_non_empty_transformations_are_refused(small_docs):
    with pytest.raises(ValueError, match="IngestionPipeline"):
        GraphStrataIndex.from_documents(small_docs[:2], transformations=[SentenceSplitter()])


def test_duplicate_document_ids_are_refused():
    docs = [Document(text="one text here", id_="x"), Document(text="another text", id_="x")]
    with pytest.raises(ValueError, match="duplicate"):
        GraphStrataIndex.from_documents(docs)


def test_bad_retriever_options_fail_at_as_retriever(small_index):
    with pytest.raises(ValueError, match="known methods"):
        small_index.as_retriever(method="nope")
    with pytest.raises(ValueError, match="similarity_top_k"):
        small_index.as_retriever(similarity_top_k=0)
    with pytest.raises(ValueError, match="similarity_top_k"):
        small_index.as_query_engine(llm=MockLLM(), similarity_top_k=-1)


def test_as_query_engine_sources_carry_document_ids(small_index):
    engine = small_index.as_query_engine(llm=MockLLM(), method="hybrid", similarity_top_k=2)
    response = engine.query("Where does Clara Vos work?")
    assert response.source_nodes
    doc_ids = set(small_index.engine.documents)
    for n in response.source_nodes:
        assert n.node.metadata["document_ids"] and set(n.node.metadata["document_ids"]) <= doc_ids
    chunk_nodes = [n for n in response.source_nodes if n.node.metadata["kind"] == "chunk"]
    assert len(chunk_nodes) == 2 and all(n.node.ref_doc_id in doc_ids for n in chunk_nodes)


def test_insert_makes_a_document_retrievable(fresh_index):
    fresh_index.insert(Document(text="Zorblax the quokka eats kiwano melons daily.", id_="zorb"))
    assert "zorb" in fresh_index.engine.documents
    assert chunk_doc_ids(fresh_index, "zorblax quokka kiwano")[0] == "zorb"
    assert fresh_index.docstore.get_document_hash("zorb") is not None


def test_insert_same_id_replaces(fresh_index):
    fresh_index.insert(Document(text="Quetzal feathers were traded in Lyon markets.", id_="falcon"))
    assert fresh_index.engine.documents["falcon"].text.startswith("Quetzal")
    assert chunk_doc_ids(fresh_index, "quetzal feathers")[0] == "falcon"
    texts = [c.text for c in fresh_index.engine.chunks if c.document_id == "falcon"]
    assert not any("forty kilograms" in t for t in texts)


def test_insert_nodes_are_indexed_and_deleted_by_ref_doc_id(fresh_index):
    node = TextNode(text="Narwhal tusks sense water salinity.", id_="n1")
    node.relationships = {}
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo

    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="sea-doc")
    fresh_index.insert_nodes([node])
    top = fresh_index.as_retriever(method="bm25", similarity_top_k=1).retrieve("narwhal tusks salinity")[0]
    # the node is one core document ("n1"); its chunks link to the LlamaIndex document
    assert top.node.metadata["document_id"] == "n1" and top.node.ref_doc_id == "sea-doc"
    assert "ref_doc_id" not in top.node.metadata and "__llama_index__" not in top.node.metadata
    fresh_index.delete_ref_doc("sea-doc")
    assert "n1" not in fresh_index.engine.documents


def test_delete_ref_doc(fresh_index, caplog):
    fresh_index.delete_ref_doc("falcon")
    assert "falcon" not in fresh_index.engine.documents
    assert "falcon" not in chunk_doc_ids(fresh_index, "Falcon arm forty kilograms", k=10)
    assert fresh_index.docstore.get_document_hash("falcon") is None
    with caplog.at_level(logging.WARNING):
        fresh_index.delete_ref_doc("never-indexed")
    assert "never-indexed" in caplog.text
    assert len(fresh_index.engine.documents) == 3


def test_delete_nodes_with_a_chunk_id_is_a_clear_error(fresh_index):
    with pytest.raises(ValueError, match="delete_ref_doc"):
        fresh_index.delete_nodes(["acme#0"])


def test_refresh_ref_docs(fresh_index, small_docs):
    unchanged = small_docs[0]
    changed = Document(text="The Falcon arm now lifts ninety kilograms of xylophones.", id_="falcon",
                       metadata={"title": "Falcon arm"})
    new = Document(text="Tapirs swim in the Amazon basin.", id_="tapir")
    assert fresh_index.refresh_ref_docs([unchanged, changed, new]) == [False, True, True]
    assert chunk_doc_ids(fresh_index, "xylophones ninety")[0] == "falcon"
    assert chunk_doc_ids(fresh_index, "tapirs amazon")[0] == "tapir"
    assert fresh_index.refresh_ref_docs([unchanged, changed, new]) == [False, False, False]


def test_updating_the_only_document(small_docs):
    index = GraphStrataIndex.from_documents(small_docs[:1])
    index.update_ref_doc(Document(text="Okapis live in Congo forests.", id_="acme"))
    assert list(index.engine.documents) == ["acme"]
    assert "Okapis" in index.engine.documents["acme"].text
    assert index.storage_context.vector_stores["graphstrata"].client is index.engine


def test_persist_and_load(fresh_index, tmp_path):
    query = "Who managed the Rotterdam trial?"
    expected = [(n.node.node_id, round(n.score, 5)) for n in
                fresh_index.as_retriever(method="hybrid").retrieve(query)]
    fresh_index.storage_context.persist(persist_dir=str(tmp_path))
    assert (tmp_path / "graphstrata").is_dir() and (tmp_path / "index_store.json").exists()
    assert not (tmp_path / "graphstrata__vector_store.json").exists()

    for loaded in (
        GraphStrataIndex.load(tmp_path),
        load_index_from_storage(StorageContext.from_defaults(persist_dir=str(tmp_path)),
                                persist_dir=tmp_path),
    ):
        assert isinstance(loaded, GraphStrataIndex)
        assert loaded.engine is not fresh_index.engine
        assert list(loaded.engine.documents) == list(fresh_index.engine.documents)
        got = [(n.node.node_id, round(n.score, 5)) for n in
               loaded.as_retriever(method="hybrid").retrieve(query)]
        assert got == expected


def test_load_index_from_storage_with_the_storage_context_alone(fresh_index, tmp_path):
    query = "Who managed the Rotterdam trial?"
    expected = [n.node.node_id for n in fresh_index.as_retriever(method="hybrid").retrieve(query)]
    fresh_index.storage_context.persist(persist_dir=str(tmp_path))
    loaded = load_index_from_storage(StorageContext.from_defaults(persist_dir=str(tmp_path)))
    assert isinstance(loaded, GraphStrataIndex) and loaded.engine is not fresh_index.engine
    assert loaded.engine.persist_dir.resolve() == (tmp_path / "graphstrata").resolve()
    assert [n.node.node_id for n in loaded.as_retriever(method="hybrid").retrieve(query)] == expected


def test_a_moved_persist_dir_needs_its_new_path(fresh_index, tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    fresh_index.storage_context.persist(persist_dir=str(old))
    old.rename(new)
    with pytest.raises(ValueError, match="persist_dir") as err:
        load_index_from_storage(StorageContext.from_defaults(persist_dir=str(new)))
    assert str(old / "graphstrata") in str(err.value)
    for loaded in (
        GraphStrataIndex.load(new),
        load_index_from_storage(StorageContext.from_defaults(persist_dir=str(new)), persist_dir=new),
    ):
        assert list(loaded.engine.documents) == list(fresh_index.engine.documents)


def test_an_index_struct_without_a_recorded_path_explains_why(fresh_index, tmp_path):
    fresh_index.storage_context.persist(persist_dir=str(tmp_path))
    ctx = StorageContext.from_defaults(persist_dir=str(tmp_path))
    (struct,) = ctx.index_store.index_structs()
    struct.engine_path = None  # as written before the path was recorded
    ctx.index_store.add_index_struct(struct)
    with pytest.raises(ValueError, match="persist_dir"):
        load_index_from_storage(ctx)


def test_load_needs_the_same_llama_index_embedding(fresh_index, tmp_path, hash_embedding):
    fresh_index.storage_context.persist(persist_dir=str(tmp_path))
    with pytest.raises(ValueError, match="embedder"):
        GraphStrataIndex.load(tmp_path, embed_model=hash_embedding(model_name="other-model"))
    Settings._embed_model = None
    with pytest.raises(ValueError, match="embed_model"):
        GraphStrataIndex.load(tmp_path)


def test_load_missing_dir(tmp_path):
    with pytest.raises(FileNotFoundError):
        GraphStrataIndex.load(tmp_path / "nope")


def test_the_store_answers_vector_queries(small_index):
    from llama_index.core.vector_stores.types import VectorStoreQuery

    store = small_index.storage_context.vector_stores["graphstrata"]
    assert isinstance(store, GraphStrataStore)
    result = store.query(VectorStoreQuery(query_str="Falcon arm kilograms", similarity_top_k=2))
    assert len(result.nodes) == 2 and result.ids[0].startswith("falcon#")
    with pytest.raises(NotImplementedError):
        store.add([TextNode(text="x")])


def test_retriever_class_is_reexported():
    from llama_index.retrievers.graphstrata import GraphStrataRetriever as R

    assert GraphStrataRetriever is R


def test_show_progress_reaches_the_core(small_docs, capsys):
    GraphStrataIndex.from_documents(small_docs[:2], show_progress=True)
    quiet = capsys.readouterr().err
    assert quiet.strip(), "show_progress=True printed nothing"
    GraphStrataIndex.from_documents(small_docs[:2], show_progress=False)
    assert capsys.readouterr().err.strip() == ""


@pytest.mark.asyncio
async def test_async_updates_run_off_the_event_loop(fresh_index):
    await fresh_index.ainsert(Document(text="Axolotls regrow their limbs.", id_="axo"))
    assert await fresh_index.arefresh_ref_docs(
        [Document(text="Axolotls regrow their limbs.", id_="axo")]
    ) == [False]
    await fresh_index.adelete_ref_doc("axo")
    assert "axo" not in fresh_index.engine.documents
    nodes = await fresh_index.as_retriever(method="bm25", kinds=("chunk",)).aretrieve("Delft studies")
    assert nodes[0].node.ref_doc_id == "clara"


def test_retriever_from_persist_dir(fresh_index, tmp_path, hash_embedding):
    fresh_index.storage_context.persist(persist_dir=str(tmp_path))
    retriever = GraphStrataRetriever.from_persist_dir(
        tmp_path / "graphstrata", embed_model=hash_embedding(model_name="hash-128"),
        method="bm25", similarity_top_k=1, kinds=("chunk",),
    )
    assert [n.node.ref_doc_id for n in retriever.retrieve("Clara Vos Delft logistics")] == ["clara"]
