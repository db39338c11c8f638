"""Core unit-test fixtures: a tiny deterministic embedder and a small hand-written corpus.

The hashing embedder (:class:`graphstrata.testing.HashEmbedder`) is a test double for control
flow and persistence only; retrieval quality is measured with the real offline embedder in
integration_tests/ and bench/.
"""

from __future__ import annotations

import pytest
from graphstrata import Document
from graphstrata.testing import HashEmbedder


@pytest.fixture(scope="session")
def embedder():
    return HashEmbedder()


CORPUS = [
    Document("bank", "Bank of America\nBank of America was founded by Amadeo Giannini in San "
             "Francisco in 1904. Amadeo Giannini was born in San Jose.", {"title": "Bank of America"}),
    Document("giannini", "Amadeo Giannini\nAmadeo Giannini was an Italian-American banker. "
             "Giannini grew up in San Jose, California.", {"title": "Amadeo Giannini"}),
    Document("sanjose", "San Jose\nSan Jose is a city in Santa Clara County, California. "
             "San Jose is the largest city in Northern California.", {"title": "San Jose"}),
    Document("everest", "Mount Everest\nMount Everest is the highest mountain above sea level. "
             "Tenzing Norgay and Edmund Hillary climbed Mount Everest in 1953.",
             {"title": "Mount Everest"}),
    Document("hillary", "Edmund Hillary\nEdmund Hillary was a mountaineer from New Zealand. "
             "Edmund Hillary was born in Auckland.", {"title": "Edmund Hillary"}),
    Document("auckland", "Auckland\nAuckland is the largest city in New Zealand. Auckland "
             "lies on the North Island.", {"title": "Auckland"}),
]


@pytest.fixture()
def corpus():
    return [Document(d.id, d.text, dict(d.metadata)) for d in CORPUS]


@pytest.fixture()
def small_config():
    # tiny corpus: allow small community layers so the hierarchy is exercised
    return {"min_communities": 2, "max_community_size": 4, "chunk_size": 40, "chunk_overlap": 8}
