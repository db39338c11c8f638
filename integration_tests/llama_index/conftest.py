"""Fixtures of the LlamaIndex integration tests: LiHua-World slice, one index per session."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from llama_index.core import Settings
from llama_index.core.llms import MockLLM

_HERE = Path(__file__).resolve().parent


def _load_support():
    name = "llama_gs_support"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _HERE / "llama_gs_support.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


support = _load_support()


@pytest.fixture(scope="session")
def gs_support():
    """The ``llama_gs_support`` helper module (and its file path, ``gs_support.__file__``)."""
    return support


@pytest.fixture(autouse=True)
def _offline_llama_settings():
    """MockLLM and a local embedding for every test (LlamaIndex's defaults are hosted)."""
    old_llm, old_embed = Settings._llm, Settings._embed_model
    Settings.llm = MockLLM()
    Settings.embed_model = support.HashEmbedding()
    yield
    Settings._llm, Settings._embed_model = old_llm, old_embed


@pytest.fixture(scope="session")
def lihua_docs():
    if not support.LIHUA.is_dir():
        pytest.skip(f"LiHua-World data not found at {support.LIHUA}")
    return support.lihua_documents()


@pytest.fixture(scope="session")
def lihua_questions(lihua_docs):
    qs = support.lihua_questions({d.doc_id for d in lihua_docs})
    assert len(qs) >= 10
    return qs


@pytest.fixture(scope="session")
def lihua_persisted(tmp_path_factory, lihua_docs):
    """``(index, persist_dir)``: GraphStrataIndex.from_documents on the slice, persisted once.

    Built with ``Settings.embed_model`` = the local hashing LlamaIndex embedding (the index
    must pick it up from Settings).
    """
    from llama_index.graph_rag.graphstrata import GraphStrataIndex

    old = Settings._embed_model
    Settings.embed_model = support.HashEmbedding()
    try:
        index = GraphStrataIndex.from_documents(lihua_docs)
    finally:
        Settings._embed_model = old
    persist_dir = tmp_path_factory.mktemp("lihua_llama_index")
    index.storage_context.persist(persist_dir=str(persist_dir))
    return index, persist_dir
