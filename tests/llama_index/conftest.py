"""Fixtures for the LlamaIndex integration unit tests.

Everything here is offline: ``Settings.llm`` is a ``MockLLM`` and ``Settings.embed_model`` a
small deterministic hashing embedding, so no test reaches LlamaIndex's hosted defaults.
``FakeEngine`` is a scripted stand-in for ``graphstrata.GraphStrata`` whose hits are fixed in
advance, for tests of the hit → node translation; everything else runs the real core.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest
from llama_index.core import Settings
from llama_index.core.llms import MockLLM

from graphstrata.retrieval import select_hits

# the hashing embedding of the LlamaIndex integration tests, loaded by file path (their
# helper module is also run by subprocess scripts, so it lives there)
_SUPPORT = (
    Path(__file__).resolve().parents[2] / "integration_tests" / "llama_index" / "llama_gs_support.py"
)


def _load_support():
    name = "llama_gs_support"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _SUPPORT)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


class HashEmbedding(_load_support().HashEmbedding):
    """A local, deterministic LlamaIndex embedding for tests (no model, no network), 128-d."""

    model_name: str = "unknown"  # LlamaIndex's default name
    dim: int = 128


@pytest.fixture(scope="session")
def hash_embedding():
    """The ``HashEmbedding`` class (a local LlamaIndex embedding)."""
    return HashEmbedding


@pytest.fixture(autouse=True)
def _offline_llama_settings():
    """Local LLM / embedding for every test; restore whatever was there afterwards."""
    old_llm, old_embed = Settings._llm, Settings._embed_model
    Settings.llm = MockLLM()
    Settings.embed_model = HashEmbedding(model_name="hash-128")
    yield
    Settings._llm, Settings._embed_model = old_llm, old_embed


class FakeHit:
    """Same fields as ``graphstrata.Hit``."""

    def __init__(self, id, text, score, kind, layer=None, chunk_ids=(), document_ids=(), metadata=None):
        self.id, self.text, self.score, self.kind, self.layer = id, text, score, kind, layer
        self.chunk_ids, self.document_ids = list(chunk_ids), list(document_ids)
        self.metadata = dict(metadata or {})


class FakeEngine:
    """Scripted ``GraphStrata`` stand-in: returns ``hits`` and records every call."""

    methods = ("archrag", "dense", "bm25", "hybrid")

    def __init__(self, hits: list[FakeHit]):
        self.hits = hits
        self.calls: list[tuple] = []

    def retrieve(self, query, method="archrag", k=5, kinds=None, filters=None, context_k=None, min_score=None,
                 **options):
        if not query.strip():
            raise ValueError("query must be a non-empty string")
        self.calls.append(("retrieve", query, method, k, kinds, filters, options))
        # the core's selection (graphstrata.retrieval.select_hits) over the scripted hits
        chunks = [h for h in self.hits if h.kind == "chunk"][:k]
        return select_hits(chunks, [h for h in self.hits if h.kind != "chunk"], kinds, context_k, min_score)

    async def aretrieve(self, query, method="archrag", k=5, kinds=None, filters=None, context_k=None,
                        min_score=None, **options):
        self.calls.append(("aretrieve", query, method, k, kinds, filters, options))
        await asyncio.sleep(0)
        return self.retrieve(query, method, k, kinds, filters, context_k, min_score, **options)


@pytest.fixture
def fake_engine() -> FakeEngine:
    """Two chunk hits (two documents), an entity, a relation and a level-2 community."""
    return FakeEngine(
        [
            FakeHit(
                "doc-a#0", "Alice founded Acme in Paris.", 0.9, "chunk",
                chunk_ids=["doc-a#0"], document_ids=["doc-a"],
                metadata={"document_id": "doc-a", "chunk_index": 0, "start": 0, "end": 28,
                          "document_metadata": {"title": "Acme history", "year": 1999},
                          "method": "archrag"},
            ),
            FakeHit(
                "doc-b#3", "Bob joined Acme later.", 0.7, "chunk",
                chunk_ids=["doc-b#3"], document_ids=["doc-b"],
                metadata={"document_id": "doc-b", "chunk_index": 3, "start": 90, "end": 112,
                          "document_metadata": {"title": "Bob"}, "method": "archrag"},
            ),
            FakeHit("acme", "Acme: a company founded by Alice.", 0.8, "entity", layer=0,
                    chunk_ids=["doc-a#0", "doc-b#3"], document_ids=["doc-a", "doc-b"]),
            FakeHit("acme\u241falice", "Alice founded Acme.", 0.6, "relation", layer=0,
                    chunk_ids=["doc-a#0"], document_ids=["doc-a"]),
            FakeHit("L2C0", "Founders and companies.", 0.5, "community", layer=2,
                    chunk_ids=["doc-a#0"], document_ids=["doc-a"], metadata={"title": "Founders"}),
        ]
    )


CORPUS = [
    ("acme", "Acme history",
     "Alice Martin founded Acme Robotics in Lyon in 1999. Acme Robotics builds warehouse robots. "
     "Alice Martin hired Bruno Keller as chief engineer. Bruno Keller designed the Falcon arm."),
    ("falcon", "Falcon arm",
     "The Falcon arm lifts forty kilograms. Bruno Keller tested the Falcon arm in Lyon. "
     "Warehouse operators in Rotterdam bought the Falcon arm in 2004."),
    ("rotterdam", "Rotterdam port",
     "The port of Rotterdam automated its warehouses in 2004. Operators chose Acme Robotics "
     "after a trial. Clara Vos managed the Rotterdam trial."),
    ("clara", "Clara Vos",
     "Clara Vos studied logistics in Delft. Clara Vos later joined Acme Robotics in Lyon "
     "and led the sales team for northern Europe."),
    ("lyon", "Lyon",
     "Lyon is a city in France known for food and silk. Acme Robotics has its head office "
     "in Lyon near the Rhone river."),
    ("cooking", "Cooking",
     "A good omelette needs fresh eggs, butter and a hot pan. Chefs in Lyon cook quenelles "
     "with pike and cream."),
]


@pytest.fixture(scope="session")
def small_docs():
    """Six short LlamaIndex Documents with ids and titles."""
    from llama_index.core import Document

    return [Document(text=t, id_=i, metadata={"title": title}) for i, title, t in CORPUS]


@pytest.fixture(scope="session")
def small_index(small_docs):
    """One real GraphStrataIndex over ``small_docs`` with the hashing embedding (per session)."""
    from llama_index.graph_rag.graphstrata import GraphStrataIndex

    return GraphStrataIndex.from_documents(
        small_docs, embed_model=HashEmbedding(model_name="hash-128")
    )
