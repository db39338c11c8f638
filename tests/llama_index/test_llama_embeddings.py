"""GraphStrataEmbedding (llama-index-embeddings-graphstrata): the core embedders' vectors as a
LlamaIndex ``BaseEmbedding``, usable by a ``VectorStoreIndex`` and by graphstrata itself.

Real data: passages and questions of HotpotQA (``../shared/data/hotpotqa``).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from graphstrata import GraphStrata
from graphstrata.models import default_embedder, embed_query
from graphstrata.static_embedder import fast_embedder
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.embeddings.graphstrata import GraphStrataEmbedding
from llama_index.retrievers.graphstrata import GraphStrataRetriever, embedder_from_llama_index

TEXTS = [
    "Edmund Hillary was a New Zealand mountaineer.",
    "Radium was discovered by Marie and Pierre Curie in 1898.",
    "The Analytical Engine was designed by Charles Babbage.",
]


def hotpot_sample(shared_data: Path, n_questions: int = 6, n_distractors: int = 20):
    """``(passages {id: text}, [(question, evidence ids)])``: the evidence of the first
    ``n_questions`` questions plus the first ``n_distractors`` other passages of
    ``shared_data``'s HotpotQA (the fixture's folder)."""
    data = shared_data / "hotpotqa"
    questions = [json.loads(line) for line in (data / "questions.jsonl").open(encoding="utf-8")]
    questions = questions[:n_questions]
    wanted = {e for q in questions for e in q["evidence_ids"]}
    passages: dict[str, str] = {}
    with (data / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if rec["id"] in wanted or len(passages) < n_distractors + len(wanted):
                passages[rec["id"]] = f"{rec['title']}\n{rec['text']}"
    assert wanted <= set(passages)
    return passages, [(q["question"], set(q["evidence_ids"])) for q in questions]


@pytest.fixture(scope="module", params=["default", "fast"])
def preset(request):
    return request.param


def core(preset):
    return default_embedder() if preset == "default" else fast_embedder()


def test_is_a_llama_index_embedding_named_after_the_core_embedder(preset):
    emb = GraphStrataEmbedding(preset=preset)
    assert isinstance(emb, BaseEmbedding)
    assert emb.model_name == core(preset).id and emb.dim == core(preset).dim
    assert emb.graphstrata_embedder is core(preset)


def test_vectors_equal_the_core_embedders(preset):
    emb = GraphStrataEmbedding(preset=preset, embed_batch_size=2)
    texts = np.asarray(emb.get_text_embedding_batch(TEXTS), dtype=np.float32)
    np.testing.assert_allclose(texts, core(preset).embed(TEXTS), atol=1e-6)
    query = np.asarray(emb.get_query_embedding("Who discovered radium?"), dtype=np.float32)
    np.testing.assert_allclose(query, embed_query(core(preset), "Who discovered radium?"), atol=1e-6)
    assert abs(np.linalg.norm(query) - 1.0) < 1e-5


async def test_async_vectors_equal_the_sync_ones():
    emb = GraphStrataEmbedding()
    assert await emb.aget_query_embedding("Lyon") == emb.get_query_embedding("Lyon")
    assert await emb.aget_text_embedding_batch(TEXTS) == emb.get_text_embedding_batch(TEXTS)


def test_unknown_preset_raises_naming_it():
    with pytest.raises(ValueError, match="preset must be one of .*'minilm'"):
        GraphStrataEmbedding(preset="minilm")


def test_pickles():
    emb = pickle.loads(pickle.dumps(GraphStrataEmbedding(preset="fast")))
    assert emb.preset == "fast"
    np.testing.assert_allclose(emb.get_text_embedding("Lyon"), fast_embedder().embed(["Lyon"])[0],
                               atol=1e-6)


def test_vector_store_index_built_with_it_finds_the_evidence(preset, shared_data):
    """A ``VectorStoreIndex`` on ~32 HotpotQA passages retrieves the questions' evidence in its
    top 5 (at random: about one question in three)."""
    passages, questions = hotpot_sample(shared_data)
    docs = [Document(id_=pid, text=text) for pid, text in passages.items()]
    index = VectorStoreIndex.from_documents(docs, embed_model=GraphStrataEmbedding(preset=preset))
    retriever = index.as_retriever(similarity_top_k=5)
    found = [bool({n.node.ref_doc_id for n in retriever.retrieve(q)} & ev) for q, ev in questions]
    assert np.mean(found) >= 0.7, found


def test_passed_back_to_graphstrata_it_is_the_core_embedder(tmp_path, shared_data):
    """An index built with the fast preset loads with ``embed_model=GraphStrataEmbedding("fast")``
    (before, the wrapper was a foreign ``llama_index:...`` embedder the index refused) and the
    retriever ranks the evidence first."""
    passages, questions = hotpot_sample(shared_data, n_questions=3, n_distractors=20)
    GraphStrata.build([{"id": k, "text": v} for k, v in passages.items()],
                      persist_dir=tmp_path / "ix", embedder="fast")
    emb = GraphStrataEmbedding(preset="fast")
    assert embedder_from_llama_index(emb) is fast_embedder()
    retriever = GraphStrataRetriever.from_persist_dir(tmp_path / "ix", embed_model=emb,
                                                      method="dense", similarity_top_k=3)
    assert retriever.engine.embedder.id == "minilm-l6-v2-static256"
    question, evidence = questions[0]
    assert {n.node.ref_doc_id for n in retriever.retrieve(question)} & evidence
