"""Shared fixtures for the langchain-graphstrata unit tests.

Test modules never import each other or this file (so any pytest import mode works); they get
the corpus and indexes through fixtures.

One small real index (graphstrata core, offline default embedder) is built once per test
session from the inline corpus below; tests that need another index build it once per module.
"""

from __future__ import annotations

import os

import pytest
from langchain_core.documents import Document

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# 16 short passages on four topics; ids are the LangChain Document ids.
CORPUS: list[tuple[str, str, str]] = [
    ("babbage", "Charles Babbage",
     "Charles Babbage was an English mathematician who designed the Analytical Engine, a "
     "mechanical general-purpose computer. He worked in London for most of his life."),
    ("lovelace", "Ada Lovelace",
     "Ada Lovelace wrote the first published algorithm intended for the Analytical Engine. "
     "She was the daughter of the poet Lord Byron and collaborated with Charles Babbage."),
    ("turing", "Alan Turing",
     "Alan Turing formalised computation with the Turing machine. During the Second World War "
     "he worked at Bletchley Park breaking the Enigma cipher."),
    ("bletchley", "Bletchley Park",
     "Bletchley Park in Buckinghamshire was the centre of Allied code-breaking. Alan Turing and "
     "Gordon Welchman designed the Bombe machine there to attack Enigma."),
    ("enigma", "Enigma machine",
     "The Enigma machine was a cipher device used by Germany. Polish mathematicians including "
     "Marian Rejewski first broke Enigma before the war."),
    ("rejewski", "Marian Rejewski",
     "Marian Rejewski was a Polish mathematician and cryptologist who reconstructed the Enigma "
     "machine in 1932 working for the Polish Cipher Bureau in Warsaw."),
    ("curie", "Marie Curie",
     "Marie Curie was a Polish and naturalised French physicist who discovered polonium and "
     "radium. She won the Nobel Prize in Physics and the Nobel Prize in Chemistry."),
    ("pierre", "Pierre Curie",
     "Pierre Curie was a French physicist, husband of Marie Curie, who shared the 1903 Nobel "
     "Prize in Physics with her and Henri Becquerel for work on radioactivity."),
    ("becquerel", "Henri Becquerel",
     "Henri Becquerel discovered radioactivity in uranium salts in Paris in 1896, work that "
     "Marie Curie and Pierre Curie extended."),
    ("radium", "Radium",
     "Radium is a radioactive element discovered by Marie Curie and Pierre Curie in 1898 in "
     "Paris. It glows faintly blue and was once used in luminous paint."),
    ("everest", "Mount Everest",
     "Mount Everest in the Himalayas is the highest mountain above sea level. Tenzing Norgay and "
     "Edmund Hillary first reached its summit in 1953."),
    ("hillary", "Edmund Hillary",
     "Edmund Hillary was a New Zealand mountaineer who, with Tenzing Norgay, made the first "
     "confirmed ascent of Mount Everest during the British expedition of 1953."),
    ("tenzing", "Tenzing Norgay",
     "Tenzing Norgay was a Nepali-Indian Sherpa mountaineer who reached the summit of Mount "
     "Everest with Edmund Hillary. He was born in the Khumbu region of Nepal."),
    ("k2", "K2",
     "K2 in the Karakoram range is the second-highest mountain on Earth. Italian climbers Lino "
     "Lacedelli and Achille Compagnoni first climbed K2 in 1954."),
    ("himalaya", "Himalayas",
     "The Himalayas separate the Indian subcontinent from the Tibetan Plateau and include Mount "
     "Everest, Kangchenjunga and many other peaks higher than 8000 metres."),
    ("london", "London",
     "London is the capital of England. The Science Museum in London displays a difference "
     "engine built to the designs of Charles Babbage."),
]



@pytest.fixture(scope="session")
def lc_corpus() -> list[tuple[str, str, str]]:
    """The inline corpus as ``(id, title, text)`` triples."""
    return list(CORPUS)


@pytest.fixture
def lc_documents() -> list[Document]:
    """The inline corpus as fresh LangChain Documents (id = first field, title in metadata)."""
    return [
        Document(id=i, page_content=text, metadata={"title": title, "topic_id": f"T-{i}"})
        for i, title, text in CORPUS
    ]


@pytest.fixture(scope="session")
def lc_gs():
    """A real graphstrata index over ``CORPUS`` (offline default embedder), built once."""
    from graphstrata import Document as GSDocument
    from graphstrata import GraphStrata

    docs = [GSDocument(id=i, text=text, metadata={"title": title}) for i, title, text in CORPUS]
    return GraphStrata.build(docs)


@pytest.fixture(scope="session")
def lc_index_dir(lc_gs, tmp_path_factory):
    """``lc_gs`` persisted to a directory (for the ``index_dir=`` constructor)."""
    path = tmp_path_factory.mktemp("lc_index") / "index"
    lc_gs.persist(path)
    return path
