"""LlamaIndex's own conventions: one chunk is one node (id and hash) for every query and in
the docstore, so ``QueryFusionRetriever`` keeps a passage once and
``PrevNextNodePostprocessor`` finds neighbours; an index can start empty; the index type loads
with ``load_index_from_storage`` (or names the package to import); ``similarity_cutoff``;
picklable retrievers; a hint for ``doc_ids=``. Real documents: LiHua-World chat logs."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.postprocessor import PrevNextNodePostprocessor
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import NodeRelationship
from llama_index.graph_rag.graphstrata import GraphStrataIndex

CONFIG = {"chunk_size": 48, "chunk_overlap": 0}  # several chunks per chat log
QUERY = "lunch on the 8th with Wolfgang"


@pytest.fixture(scope="module")
def docs(shared_data, jsonl) -> list[Document]:
    return [Document(text=r["text"], id_=r["id"], metadata={"title": r["title"]}) for r in jsonl(shared_data / "lihua_world" / "corpus.jsonl", 12)]


@pytest.fixture(scope="module")
def embed(hash_embedding):
    return hash_embedding(model_name="hash-128")


@pytest.fixture(scope="module")
def index(docs, embed) -> GraphStrataIndex:
    return GraphStrataIndex.from_documents(docs, embed_model=embed, config=CONFIG)


def test_docstore_holds_the_chunk_nodes_the_retriever_returns(index):
    engine = index.engine
    assert len(engine.chunks) > len(engine.documents)  # multi-chunk documents
    for node in index.as_retriever(method="hybrid", similarity_top_k=5).retrieve(QUERY):
        stored = index.docstore.get_node(node.node_id)  # raised KeyError before
        assert stored.hash == node.node.hash and stored.text == node.node.text
        assert stored.ref_doc_id == node.node.ref_doc_id == node.node.metadata["document_id"]


def test_prev_next_postprocessor_adds_the_neighbours(index):
    nodes = index.as_retriever(method="bm25", similarity_top_k=1).retrieve(QUERY)
    (hit,) = nodes
    doc_id, n = hit.node.node_id.rsplit("#", 1)
    wanted = {f"{doc_id}#{i}" for i in (int(n) - 1, int(n) + 1)} & set(index.engine.chunk_row)
    assert wanted, "the hit has a neighbour in its document"
    rels = hit.node.relationships
    assert {rels[r].node_id for r in (NodeRelationship.PREVIOUS, NodeRelationship.NEXT) if r in rels} == wanted
    post = PrevNextNodePostprocessor(docstore=index.docstore, num_nodes=1, mode="both")
    out = post.postprocess_nodes(nodes)
    assert {x.node.node_id for x in out} == {hit.node.node_id} | wanted


def test_query_fusion_with_a_vector_index_returns_each_passage_once(index, embed):
    vector = VectorStoreIndex(list(index.docstore.docs.values()), embed_model=embed)
    graph_r = index.as_retriever(method="hybrid", similarity_top_k=4)
    vector_r = vector.as_retriever(similarity_top_k=4)
    graph_ids = {n.node.node_id for n in graph_r.retrieve(QUERY)}
    vector_ids = {n.node.node_id for n in vector_r.retrieve(QUERY)}
    assert graph_ids & vector_ids, "both retrievers find some of the same passages"
    for mode in ("reciprocal_rerank", "simple"):
        fusion = QueryFusionRetriever([graph_r, vector_r], num_queries=1, mode=mode,
                                      similarity_top_k=20, use_async=False)
        ids = [n.node.node_id for n in fusion.retrieve(QUERY)]
        assert len(ids) == len(set(ids)) == len(graph_ids | vector_ids), mode


def test_index_starts_empty_then_insert_then_retrieve(docs, embed, tmp_path):
    index = GraphStrataIndex.from_documents([], embed_model=embed, config=CONFIG)
    retriever = index.as_retriever(method="bm25", similarity_top_k=2)
    assert retriever.retrieve(QUERY) == []
    index.insert(docs[0])
    hits = retriever.retrieve(QUERY)
    assert hits and {n.node.ref_doc_id for n in hits} == {docs[0].doc_id}
    index.insert_documents(docs[1:3])
    assert {n.node.ref_doc_id for n in index.as_retriever(method="bm25", similarity_top_k=20)
            .retrieve(QUERY)} <= {d.doc_id for d in docs[:3]}
    assert index.docstore.document_exists(f"{docs[2].doc_id}#0")
    index.delete_ref_doc(docs[2].doc_id)
    assert not index.docstore.document_exists(f"{docs[2].doc_id}#0")
    index.storage_context.persist(str(tmp_path / "p"))
    loaded = GraphStrataIndex.load(tmp_path / "p", embed_model=embed)
    assert sorted(loaded.engine.documents) == sorted(d.doc_id for d in docs[:2])


def test_similarity_cutoff_is_honoured(index):
    ranked = index.as_retriever(method="hybrid", similarity_top_k=6).retrieve(QUERY)
    cut = ranked[len(ranked) // 2].score
    kept = index.as_retriever(method="hybrid", similarity_top_k=6, similarity_cutoff=cut).retrieve(QUERY)
    assert [n.node.node_id for n in kept] == [n.node.node_id for n in ranked if n.score >= cut]
    assert len(kept) < len(ranked)
    engine = index.as_query_engine(method="hybrid", similarity_top_k=6, similarity_cutoff=cut)
    assert all(n.score >= cut for n in engine.query(QUERY).source_nodes)
    with pytest.raises(ValueError, match="similarity_cutoff"):
        index.as_retriever(similarity_cutoff=1.5)


def test_retriever_pickles(index, tmp_path, embed):
    from graphstrata import GraphStrata
    from llama_index.retrievers.graphstrata import GraphStrataRetriever, embedder_from_llama_index

    index.engine.persist(tmp_path / "engine")
    retriever = GraphStrataRetriever(
        GraphStrata.load(tmp_path / "engine", embedder=embedder_from_llama_index(embed)),
        method="bm25", similarity_top_k=3,
    )
    copy = pickle.loads(pickle.dumps(retriever))
    assert [n.node.node_id for n in copy.retrieve(QUERY)] == [n.node.node_id for n in retriever.retrieve(QUERY)]


def test_doc_ids_gets_a_hint(index):
    with pytest.raises(ValueError, match=r"doc_ids.*document_id"):
        index.as_retriever(doc_ids=["x"])


def test_load_index_from_storage_in_a_fresh_interpreter(tmp_path, shared_data, jsonl):
    """A process that imports only llama_index.core: the KeyError names the package to
    import; with that import the index loads and retrieves."""
    from graphstrata import GraphStrata

    rows = jsonl(shared_data / "lihua_world" / "corpus.jsonl", 4)
    engine = GraphStrata.build([{"id": r["id"], "text": r["text"]} for r in rows])  # offline MiniLM
    index = GraphStrataIndex.from_engine(engine)
    index.storage_context.persist(str(tmp_path / "p"))
    code = textwrap.dedent(f"""
        import sys
        from llama_index.core import StorageContext, load_index_from_storage
        ctx = StorageContext.from_defaults(persist_dir={str(tmp_path / "p")!r})
        try:
            load_index_from_storage(ctx)
        except KeyError as exc:
            print("ERROR", exc)
        assert not any(m.startswith("llama_index.graph_rag") for m in sys.modules)
        import llama_index.graph_rag.graphstrata
        index = load_index_from_storage(ctx)
        print("LOADED", type(index).__name__, len(index.as_retriever(method="bm25").retrieve("lunch")))
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    error, loaded = out.stdout.strip().splitlines()[-2:]
    assert "import llama_index.graph_rag.graphstrata" in error
    assert "pip install llama-index-graph-rag-graphstrata" in error
    assert loaded.startswith("LOADED GraphStrataIndex ") and int(loaded.split()[-1]) > 0


def test_store_delete_updates_the_docstore(docs, embed):
    """``storage_context.vector_stores["graphstrata"].delete`` (the store LlamaIndex code calls)
    removes the document's chunk nodes from the index's docstore, and every PREVIOUS / NEXT
    link left there still names a stored node."""
    index = GraphStrataIndex.from_documents(docs[:5], embed_model=embed, config=CONFIG)
    chunks_of: dict[str, list[str]] = {}
    for c in index.engine.chunks:
        chunks_of.setdefault(c.document_id, []).append(c.id)
    gone = next(d for d, ids in chunks_of.items() if len(ids) > 2)
    index.storage_context.vector_stores["graphstrata"].delete(gone)
    assert gone not in index.engine.documents
    for chunk_id in chunks_of[gone]:
        with pytest.raises(ValueError):
            index.docstore.get_node(chunk_id)  # was still there (a deleted passage)
    assert not index.docstore.document_exists(gone)
    stored = index.docstore.docs
    assert {n.ref_doc_id for n in stored.values()} == set(chunks_of) - {gone}
    for node in stored.values():
        for rel in (NodeRelationship.PREVIOUS, NodeRelationship.NEXT):
            if rel in node.relationships:
                assert node.relationships[rel].node_id in stored, (node.node_id, rel)
    nodes = index.as_retriever(method="bm25", similarity_top_k=3).retrieve(QUERY)
    post = PrevNextNodePostprocessor(docstore=index.docstore, num_nodes=2, mode="both")
    out = {x.node.node_id for x in post.postprocess_nodes(nodes)}
    assert out > {n.node.node_id for n in nodes}  # neighbours added, none of them deleted
    assert not out & set(chunks_of[gone])
