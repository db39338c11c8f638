"""GraphStrataEmbeddings: the core embedders' vectors as LangChain ``Embeddings``, usable by an
``InMemoryVectorStore`` and by graphstrata itself.

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
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_graphstrata import (
    GraphStrataEmbeddings,
    GraphStrataRetriever,
    embedder_from_langchain,
)

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


def test_vectors_equal_the_core_embedders(preset):
    emb = GraphStrataEmbeddings(preset=preset)
    assert isinstance(emb, Embeddings)
    assert emb.model == core(preset).id and emb.dim == core(preset).dim
    np.testing.assert_allclose(np.asarray(emb.embed_documents(TEXTS), dtype=np.float32),
                               core(preset).embed(TEXTS), atol=1e-6)
    query = np.asarray(emb.embed_query("Who discovered radium?"), dtype=np.float32)
    np.testing.assert_allclose(query, embed_query(core(preset), "Who discovered radium?"), atol=1e-6)


async def test_async_vectors_equal_the_sync_ones():
    emb = GraphStrataEmbeddings()
    assert await emb.aembed_query("Lyon") == emb.embed_query("Lyon")
    assert await emb.aembed_documents(TEXTS) == emb.embed_documents(TEXTS)


def test_unknown_preset_raises_naming_it():
    with pytest.raises(ValueError, match="preset must be one of .*'minilm'"):
        GraphStrataEmbeddings(preset="minilm")


def test_pickles_as_its_preset():
    emb = pickle.loads(pickle.dumps(GraphStrataEmbeddings(preset="fast")))
    assert emb.preset == "fast" and emb.graphstrata_embedder is fast_embedder()


def test_in_memory_vector_store_built_with_it_finds_the_evidence(preset, shared_data):
    """An ``InMemoryVectorStore`` on ~32 HotpotQA passages retrieves the questions' evidence in
    its top 5 (at random: about one question in three)."""
    passages, questions = hotpot_sample(shared_data)
    store = InMemoryVectorStore(GraphStrataEmbeddings(preset=preset))
    store.add_documents([Document(id=pid, page_content=t) for pid, t in passages.items()])
    found = [bool({d.id for d in store.similarity_search(q, k=5)} & ev) for q, ev in questions]
    assert np.mean(found) >= 0.7, found


def test_passed_back_to_graphstrata_it_is_the_core_embedder(tmp_path, shared_data):
    """An index built with the fast preset loads with ``embeddings=GraphStrataEmbeddings("fast")``
    (before, the wrapper was a foreign ``langchain:...`` embedder the index refused)."""
    passages, questions = hotpot_sample(shared_data, n_questions=3, n_distractors=20)
    GraphStrata.build([{"id": k, "text": v} for k, v in passages.items()],
                      persist_dir=tmp_path / "ix", embedder="fast")
    emb = GraphStrataEmbeddings(preset="fast")
    assert embedder_from_langchain(emb) is fast_embedder()
    retriever = GraphStrataRetriever(index_dir=str(tmp_path / "ix"), embeddings=emb,
                                     method="dense", k=3)
    question, evidence = questions[0]
    docs = retriever.invoke(question)
    assert {d.metadata["document_ids"][0] for d in docs} & evidence
