import pytest
from graphstrata import Chunk
from graphstrata.extraction import (
    StatisticalExtractor,
    canonical,
    capitalised_spans,
    split_sentences,
)


def _chunk(cid, text, doc="d"):
    return Chunk(id=cid, document_id=doc, index=0, text=text, start=0, end=len(text), n_tokens=0)


def test_capitalised_spans_keep_connectors_and_skip_sentence_initial_words():
    spans = capitalised_spans("The Bank of America hired Amadeo Giannini in San Francisco in 1904.")
    assert "Bank of America" in spans
    assert "Amadeo Giannini" in spans
    assert "San Francisco" in spans
    assert "The" not in spans
    assert capitalised_spans("Yesterday it rained.") == []


def test_canonical_merges_surface_variants():
    assert canonical("The  Beatles") == canonical("beatles") == "beatles"


def test_sentences_split_on_punctuation_and_lines():
    text = "One sentence here. Another one!\nA third line"
    parts = [text[s:e] for s, e in split_sentences(text)]
    assert parts == ["One sentence here.", "Another one!", "A third line"]


def test_relations_come_from_sentence_cooccurrence_with_provenance():
    chunks = [
        _chunk("c1", "Marie Curie worked with Pierre Curie in Paris. Albert Einstein lived in Bern."),
        _chunk("c2", "Marie Curie won the Nobel Prize. Pierre Curie also won the Nobel Prize."),
    ]
    ents, rels = StatisticalExtractor(top_n=0).extract(chunks)
    names = {e.id: e for e in ents}
    assert {"marie curie", "pierre curie", "paris", "albert einstein", "bern", "nobel prize"} <= set(names)
    assert names["marie curie"].chunk_ids == ["c1", "c2"]
    assert "Marie Curie won the Nobel Prize." in names["marie curie"].description
    pairs = {(r.source, r.target): r for r in rels}
    assert ("marie curie", "pierre curie") in pairs
    assert pairs[("marie curie", "nobel prize")].weight == 1.0
    assert pairs[("nobel prize", "pierre curie")].chunk_ids == ["c2"]
    # entities of different sentences are not related
    assert ("albert einstein", "marie curie") not in pairs


def test_tfidf_terms_and_titles_become_entities():
    chunks = [
        _chunk("c1", "the quantum chromodynamics lecture covered gluons.", doc="d1"),
        _chunk("c2", "cooking pasta requires boiling water.", doc="d2"),
    ]
    ents, _ = StatisticalExtractor(top_n=3).extract(chunks, titles={"d1": "Physics Notes"})
    ids = {e.id for e in ents}
    assert "physics notes" in ids  # the title, mentioned in its document's sentences
    assert any("quantum" in i or "gluons" in i for i in ids)
    assert all(e.chunk_ids for e in ents)


def test_file_like_titles_are_not_entities():
    chunks = [_chunk("c1", "LiHua: see you on Friday at the Jazz Club.", doc="d1")]
    ents, _ = StatisticalExtractor(top_n=0).extract(chunks, titles={"d1": "week1/20260105_1100"})
    assert "week1/20260105_1100" not in {e.id for e in ents}
    assert "jazz club" in {e.id for e in ents}


@pytest.mark.parametrize(
    "sentence",
    [
        "The Bank of America was founded by Amadeo Giannini in San-Francisco.",
        "state-of-the-art  machine   learning; Machine-Learning and MACHINE learning",
        "foo_bar baz 1904 1904s x-ray X-Ray xray",
        "İstanbul is big; istanbul, ISTANBUL",  # lower-casing changes a word's length: regex path
        "Straße STRASSE strasse",
        "",
    ],
)
def test_term_finder_matches_what_the_term_pattern_matches(sentence):
    from graphstrata.extraction.text import term_finder as _term_finder
    from graphstrata.extraction.text import term_pattern as _term_pattern

    terms = ["bank of america", "san francisco", "machine learning", "art machine", "foo_bar", "1904",
             "x ray", "xray", "istanbul", "straße", "strasse", "of", "america was", "learning machine"]
    find = _term_finder(sentence)
    for term in terms:
        m = _term_pattern(term).search(sentence)
        assert find(term) == (m.group(0) if m else None), term
