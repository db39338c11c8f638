"""The spaCy analyser: typed named entities, noun-phrase concepts, no stray words, relations
labelled from the dependency path, and a provenance check that refuses other weights."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("spacy")
nlp_mod = pytest.importorskip("graphstrata.nlp")

from graphstrata.extraction import canonical  # noqa: E402
from graphstrata.nlp import CO_OCCURS, CONCEPT, NLPAnalyser, NLPModelError, check_provenance  # noqa: E402


@pytest.fixture(scope="module")
def analyser():
    try:
        return NLPAnalyser(canonical, nlp=nlp_mod.load_pipeline())
    except NLPModelError as exc:  # pragma: no cover - the dev requirements install it
        pytest.skip(str(exc))


def _one(analyser, text):
    [out] = analyser.analyse([text])
    return out


def test_named_entities_carry_readable_types(analyser):
    out = _one(analyser, "Barack Obama visited Paris in 2009 with Google engineers.")
    types = {m.surface: m.type for m in out.mentions}
    assert types == {"Barack Obama": "person", "Paris": "place", "2009": "date", "Google": "organization"}


def test_no_stray_words_months_or_numbers(analyser):
    out = _one(analyser, "In March, he was known for making records. They recorded 12 songs on Monday.")
    keys = {m.key for m in out.mentions}
    assert not keys & {"march", "monday", "known", "making", "recorded", "he", "they", "12", "12 songs"}


def test_relations_are_labelled_by_the_verb_and_preposition(analyser):
    out = _one(analyser, "Steven Spielberg directed Jaws, which was released by Universal Pictures.")
    labels = {(link.a, link.b): link.label for link in out.links}
    assert labels[("jaws", "steven spielberg")] == "directed"
    assert labels[("jaws", "universal pictures")] == "released by"
    out = _one(analyser, "Charles Carroll was born in Annapolis. He was a member of the Continental Congress.")
    labels = {(link.a, link.b): link.label for link in out.links}
    assert labels[("annapolis", "charles carroll")] == "born in"


def test_concepts_are_multiword_noun_phrases(analyser):
    out = _one(analyser, "The huge pages feature maps memory with one page table entry.")
    concepts = {m.key for m in out.mentions if m.type == CONCEPT}
    assert {"huge pages", "page table entry"} <= concepts
    assert all(len(k.split()) >= 2 for k in concepts)


def test_links_stay_within_a_sentence_and_are_capped():
    texts = ["Alice Smith met Bob Jones. Carol White met Dan Brown."]
    a = NLPAnalyser(canonical, nlp=nlp_mod.load_pipeline(), max_relations_per_sentence=1)
    [out] = a.analyse(texts)
    by_sentence = {}
    for link in out.links:
        by_sentence.setdefault(link.sentence, []).append(link)
    assert all(len(v) <= 1 for v in by_sentence.values())
    people = {m.key: m.sentence for m in out.mentions}
    for link in out.links:
        assert people[link.a] == people[link.b] == link.sentence
        assert link.a < link.b


def test_a_list_of_names_is_co_occurrence(analyser):
    out = _one(analyser, "The band members were John Lennon, Paul McCartney, George Harrison and Ringo Starr.")
    assert out.links and all(link.label == CO_OCCURS or link.label for link in out.links)
    assert any(link.label == CO_OCCURS for link in out.links)


def test_provenance_refuses_other_weights(tmp_path):
    folder = nlp_mod._model_dir()
    check_provenance(folder)
    fake = tmp_path / "pipeline"
    shutil.copytree(folder, fake)
    (fake / "ner" / "model").write_bytes(b"not the model")
    with pytest.raises(NLPModelError, match="ner/model"):
        check_provenance(fake)
    meta = json.loads((fake / "meta.json").read_text())
    meta["version"] = "9.9.9"
    (fake / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(NLPModelError, match="9.9.9"):
        check_provenance(fake)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="max_entities_per_chunk"):
        NLPAnalyser(canonical, max_entities_per_chunk=0)
    with pytest.raises(ValueError, match="max_relations_per_sentence"):
        NLPAnalyser(canonical, max_relations_per_sentence=-1)
