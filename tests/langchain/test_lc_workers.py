"""Several LangChain workers writing one persisted index directory (issue 30).

Each worker holds its own retriever over the directory. A write merges what the other workers
wrote since (the core's write lock and reload); ``delete`` first reads the directory's current
version, so an id another worker added is deleted, not ignored as unknown.
"""

from __future__ import annotations

from graphstrata import Document as GSDocument
from graphstrata import GraphStrata
from graphstrata.testing import HashEmbedder
from langchain_core.documents import Document
from langchain_graphstrata import GraphStrataRetriever

TEXTS = {
    "bank": "Bank of America was founded by Amadeo Giannini in San Francisco in 1904.",
    "everest": "Tenzing Norgay and Edmund Hillary climbed Mount Everest in 1953.",
    "auckland": "Auckland is the largest city in New Zealand, on the North Island.",
}


def test_two_workers_add_and_delete_each_others_documents(tmp_path):
    index_dir = tmp_path / "idx"
    GraphStrata.build([GSDocument(i, t) for i, t in TEXTS.items()], embedder=HashEmbedder(), persist_dir=index_dir)
    a = GraphStrataRetriever(index=GraphStrata.load(index_dir, embedder=HashEmbedder()))
    b = GraphStrataRetriever(index=GraphStrata.load(index_dir, embedder=HashEmbedder()))
    a.add_documents([Document(id="kiwi", page_content="The kiwi is a flightless bird of New Zealand.")])
    b.add_documents([Document(id="tui", page_content="The tui is a songbird of New Zealand.")])
    assert {"kiwi", "tui"} <= set(GraphStrata.load(index_dir, embedder=HashEmbedder()).documents)
    assert b.delete(["kiwi"]) == 1  # added by the other worker
    assert a.delete(["tui"]) == 1
    final = set(GraphStrata.load(index_dir, embedder=HashEmbedder()).documents)
    assert final == set(TEXTS)
