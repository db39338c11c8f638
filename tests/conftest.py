"""The ``slow`` marker, added from what a test uses (registered in pyproject.toml).

A test is ``slow`` when it needs the real QA corpora of ``../shared/data`` or loads a real
embedding model (the packaged MiniLM or the ``fast`` static embedder distilled from it). Rather
than a decorator on each of a few hundred tests, this hook marks a test when it requests (directly
or through another fixture) one of :data:`SLOW_FIXTURES`, or lives in one of
:data:`SLOW_MODULES`, whose tests load a model without a fixture that says so. A new fixture of
that kind belongs in one of these lists. A single test that loads a model itself (e.g. a
LangChain ``from_documents`` without ``embeddings``) carries ``@pytest.mark.slow`` instead.

``make test`` runs every test, slow ones included; ``make test-quick`` runs ``-m "not slow"``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# fixture name -> what makes a test that uses it slow
SLOW_FIXTURES: dict[str, str] = {
    "shared_data": "the real QA corpora in ../shared/data (root conftest.py)",
    "jsonl": "reads the real corpora's JSONL files (root conftest.py)",
    "serve_indexes": "two real indexes built from ../shared/data (root conftest.py)",
    "minilm": "loads the packaged MiniLM (tests/core/test_models.py)",
    "fast": "loads, or first distils, the fast static embedder (tests/core/test_static_embedder.py)",
    "lc_gs": "a real index built with the default MiniLM embedder (tests/langchain/conftest.py)",
    "topic_gs": "a real index built with the default MiniLM embedder "
    "(tests/langchain/test_lc_contract.py)",
}

# test module (from the repository root) -> why all its tests are slow
SLOW_MODULES: dict[str, str] = {
    "tests/langchain/test_lc_embeddings.py": "compares the adapter with the MiniLM and fast "
    "embedders it wraps",
    "tests/llama_index/test_llama_embeddings.py": "compares the adapter with the MiniLM and fast "
    "embedders it wraps",
    "tests/packaging/test_offline_default.py": "loads the default MiniLM embedder offline in a "
    "fresh interpreter",
    "tests/cookbook/test_cookbook.py": "runs the cookbook scripts with the default MiniLM embedder",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Add the ``slow`` marker to every collected test that uses a slow fixture or module."""
    slow = pytest.mark.slow
    for item in items:
        try:
            module = Path(str(item.path)).resolve().relative_to(ROOT).as_posix()
        except ValueError:
            module = ""
        if module in SLOW_MODULES or SLOW_FIXTURES.keys() & set(getattr(item, "fixturenames", ())):
            item.add_marker(slow)
