"""GraphStrataIndex end to end on LiHua-World: build, persist, load in a new process, query."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from graphstrata import GraphStrata
from llama_index.core.llms import MockLLM
from llama_index.retrievers.graphstrata import embedder_from_llama_index


def ranked_documents(nodes):
    """Distinct document ids of the chunk nodes, in rank order."""
    out = []
    for n in nodes:
        if n.node.metadata["kind"] == "chunk" and n.node.ref_doc_id not in out:
            out.append(n.node.ref_doc_id)
    return out


def test_index_keeps_the_corpus_ids(lihua_persisted, lihua_docs):
    index, persist_dir = lihua_persisted
    assert list(index.engine.documents) == [d.doc_id for d in lihua_docs]
    assert index.engine.embedder.id == "llama_index:hash-256"
    engine_dir = persist_dir / "graphstrata"  # a versioned core index: CURRENT names the version
    assert (engine_dir / (engine_dir / "CURRENT").read_text().strip() / "manifest.json").exists()


_LOAD_SCRIPT = textwrap.dedent(
    """
    import importlib.util, json, sys
    support_path, persist_dir, question = sys.argv[1:4]
    spec = importlib.util.spec_from_file_location("llama_gs_support", support_path)
    support = importlib.util.module_from_spec(spec); spec.loader.exec_module(support)
    from llama_index.core import Settings, StorageContext, load_index_from_storage
    from llama_index.core.llms import MockLLM
    Settings.llm = MockLLM()
    Settings.embed_model = support.HashEmbedding()
    from llama_index.graph_rag.graphstrata import GraphStrataIndex
    out = {}
    for how in ("load", "load_index_from_storage", "storage_context_only"):
        if how == "load":
            index = GraphStrataIndex.load(persist_dir)
        elif how == "load_index_from_storage":
            ctx = StorageContext.from_defaults(persist_dir=persist_dir)
            index = load_index_from_storage(ctx, persist_dir=persist_dir)
        else:
            index = load_index_from_storage(StorageContext.from_defaults(persist_dir=persist_dir))
        engine = index.as_query_engine(llm=MockLLM(), method="archrag", similarity_top_k=5)
        response = engine.query(question)
        out[how] = {
            "type": type(index).__name__,
            "n_documents": len(index.engine.documents),
            "response": str(response),
            "sources": [
                {"id": n.node.node_id, "kind": n.node.metadata["kind"], "ref": n.node.ref_doc_id,
                 "document_ids": n.node.metadata["document_ids"], "score": n.score}
                for n in response.source_nodes
            ],
        }
    print(json.dumps(out))
    """
)


def test_persist_then_query_in_a_new_process(lihua_persisted, lihua_questions, gs_support):
    index, persist_dir = lihua_persisted
    question = lihua_questions[0]["question"]
    proc = subprocess.run(
        [sys.executable, "-c", _LOAD_SCRIPT, gs_support.__file__, str(persist_dir), question],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(results) == {"load", "load_index_from_storage", "storage_context_only"}
    here = index.as_query_engine(llm=MockLLM(), method="archrag", similarity_top_k=5).query(question)
    corpus_ids = set(index.engine.documents)
    for how, out in results.items():
        assert out["type"] == "GraphStrataIndex", how
        assert out["n_documents"] == len(index.engine.documents)
        chunk_sources = [s for s in out["sources"] if s["kind"] == "chunk"]
        assert len(chunk_sources) == len(out["sources"]) == 5  # similarity_top_k chunks only
        for s in out["sources"]:
            assert s["document_ids"] and set(s["document_ids"]) <= corpus_ids
        assert all(s["ref"] == s["document_ids"][0] for s in chunk_sources)
        # the reloaded index answers exactly like the one that was persisted
        assert [s["id"] for s in out["sources"]] == [n.node.node_id for n in here.source_nodes]
        assert [s["score"] for s in out["sources"]] == pytest.approx(
            [n.score for n in here.source_nodes], abs=1e-5
        )
        # MockLLM echoes its prompt: the retrieved text reached the LLM in the new process
        assert here.source_nodes[0].node.text[:40] in out["response"]


def test_every_method_ranks_documents_like_the_core(lihua_persisted, lihua_questions, gs_support):
    index, persist_dir = lihua_persisted
    # an independent core engine, loaded from what the index persisted
    core = GraphStrata.load(
        persist_dir / "graphstrata",
        embedder=embedder_from_llama_index(gs_support.HashEmbedding()),
    )
    assert set(core.methods) >= {"archrag", "dense", "bm25", "hybrid"}
    questions = [q["question"] for q in lihua_questions[:4]]
    for method in core.methods:
        retriever = index.as_retriever(method=method, similarity_top_k=8)
        for question in questions:
            hits = core.retrieve(question, method=method, k=8, kinds=("chunk",))
            nodes = retriever.retrieve(question)
            assert len(nodes) == len(hits) == 8
            core_docs = list(dict.fromkeys(d for h in hits if h.kind == "chunk" for d in h.document_ids))
            assert ranked_documents(nodes) == core_docs, (method, question)
            assert [n.node.metadata["hit_id"] for n in nodes] == [h.id for h in hits]
            assert [n.score for n in nodes] == pytest.approx([h.score for h in hits], abs=1e-5)
            assert all(0.0 <= n.score <= 1.0 for n in nodes)
            # the nodes are the docstore's chunk nodes: same id and hash whatever the query
            assert [index.docstore.get_node(n.node.node_id).hash for n in nodes] == [n.node.hash for n in nodes]
        # graph context, when asked for, follows the chunks: at most context_k, best first
        context = index.as_retriever(method=method, similarity_top_k=3, kinds=None, context_k=4)
        nodes = context.retrieve(questions[0])
        kinds = [n.node.metadata["kind"] for n in nodes]
        assert kinds[:3] == ["chunk"] * 3 and "chunk" not in kinds[3:] and len(kinds) <= 7


def test_offline_default_embedder_when_none_is_set(lihua_docs):
    from llama_index.core import Settings
    from llama_index.graph_rag.graphstrata import GraphStrataIndex

    Settings._embed_model = None
    index = GraphStrataIndex.from_documents(lihua_docs[:5])
    assert index.engine.embedder.id == "minilm-l6-v2"
    assert Settings._embed_model is None  # never resolved LlamaIndex's hosted default
    nodes = index.as_retriever(method="dense", similarity_top_k=2, kinds=("chunk",)).retrieve(
        "lunch together on the 8th"
    )
    assert nodes[0].node.ref_doc_id == lihua_docs[0].doc_id
