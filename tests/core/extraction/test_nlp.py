"""The NLP extractor's records: typed entities and labelled relations that merge, persist and
update like the statistical extractor's."""

from __future__ import annotations

import zlib

import pytest

pytest.importorskip("spacy")

from graphstrata.extraction import ChunkRecord, CompactRecord, StatisticalExtractor, merge_records  # noqa: E402
from graphstrata.extraction.nlp import NLPExtractor  # noqa: E402
from graphstrata.nlp import NLPModelError  # noqa: E402
from graphstrata.types import Chunk  # noqa: E402

TEXTS = [
    "Steven Spielberg directed Jaws. Jaws was released by Universal Pictures in 1975.",
    "Universal Pictures is based in Universal City, California. Steven Spielberg was born in Cincinnati.",
]


def _chunks(texts=TEXTS):
    return [Chunk(f"d{i}#0", f"d{i}", 0, t, 0, len(t), 0) for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def extractor():
    try:
        ex = NLPExtractor()
        ex.analyser.nlp  # noqa: B018 - load once for the module
    except NLPModelError as exc:  # pragma: no cover
        pytest.skip(str(exc))
    return ex


def test_records_merge_into_typed_entities_and_labelled_relations(extractor):
    recs = extractor.chunk_records(_chunks(), None, None)
    entities, relations = merge_records(recs)
    by_id = {e.id: e for e in entities}
    assert by_id["steven spielberg"].type == "person"
    assert by_id["universal pictures"].type == "organization"
    assert by_id["steven spielberg"].chunk_ids == ["d0#0", "d1#0"]
    labels = {(r.source, r.target): r.keywords for r in relations}
    assert labels[("jaws", "steven spielberg")] == "directed"
    assert labels[("cincinnati", "steven spielberg")] == "born in"
    # descriptions are whole sentences of the text
    assert by_id["jaws"].description.startswith("Steven Spielberg directed Jaws.")


def test_records_round_trip_through_json_and_compression(extractor):
    [rec] = extractor.chunk_records(_chunks(TEXTS[:1]), None, None)
    assert rec.types and rec.labels
    back = ChunkRecord.from_json(rec.chunk_id, rec.to_json())
    assert back == rec
    packed = CompactRecord(rec.chunk_id, zlib.compress(rec.to_json().encode()))
    assert packed == rec and packed.types == rec.types and packed.labels == rec.labels


def test_statistical_records_keep_their_json():
    [rec] = StatisticalExtractor(top_n=0).chunk_records(_chunks(TEXTS[:1]), None, None)
    assert not rec.types and not rec.labels
    assert rec.to_json().count("],[") >= 1 and len(__import__("json").loads(rec.to_json())) == 2
    with pytest.raises(ValueError, match="corrupt"):
        ChunkRecord.from_json("x", "[[],[],[]]")


def test_title_is_typed_by_its_disambiguator(extractor):
    chunk = Chunk("t#0", "t", 0, "It was a hit in the summer of 1975.", 0, 35, 0)
    [rec] = extractor.chunk_records([chunk], {"t": "Jaws (film)"}, None)
    entities, _ = merge_records([rec])
    assert {e.id: e.type for e in entities}["jaws (film)"] == "work"


def test_a_relation_keeps_co_occurrence_only_when_nothing_better():
    a = ChunkRecord("a#0", {"x": ({"X": 1}, [1], ["s"]), "y": ({"Y": 1}, [1], ["s"])},
                    {("x", "y"): ([1], ["s"])}, {}, {("x", "y"): {"co-occurs with": 3}})
    b = ChunkRecord("b#0", {"x": ({"X": 1}, [1], ["t"]), "y": ({"Y": 1}, [1], ["t"])},
                    {("x", "y"): ([1], ["t"])}, {}, {("x", "y"): {"member of": 1}})
    _, [rel] = merge_records([a, b])
    assert rel.keywords == "member of"
    _, [rel] = merge_records([a])
    assert rel.keywords == "co-occurs with"


def test_auto_choices_are_made_at_build_time_and_stored():
    from graphstrata.config import GraphStrataConfig, resolved_config, stored_config
    from graphstrata.static_embedder import FAST_ID

    auto = GraphStrataConfig(extractor="auto", entity_resolution="auto")
    minilm = resolved_config(auto, "sentence-transformers/all-MiniLM-L6-v2")
    assert (minilm.extractor, minilm.entity_resolution) == ("nlp", True)
    fast = resolved_config(auto, FAST_ID)
    assert (fast.extractor, fast.entity_resolution) == ("statistical", False)
    plain = GraphStrataConfig()
    assert resolved_config(plain, FAST_ID) is plain
    # an index stored before the fields existed reads back as the statistical extractor it used
    old = stored_config({"chunk_size": 100})
    assert (old.extractor, old.entity_resolution) == ("statistical", False)


def test_configured_entity_types_reach_the_nlp_table_and_the_llm_prompt():
    from graphstrata.config import GraphStrataConfig
    from graphstrata.indexing.extract import llm_entity_types

    config = GraphStrataConfig(extractor="nlp", entity_types={"PERSON": "person", "ORG": "company", "GPE": None})
    assert llm_entity_types(config) == ["person", "company"]
    assert llm_entity_types(GraphStrataConfig()) == []
    ex = NLPExtractor.from_config(config)
    [rec] = ex.chunk_records(_chunks(["Barack Obama visited Paris with Google engineers."]), None, None)
    assert {k: next(iter(v)) for k, v in rec.types.items()} == {"barack obama": "person", "google": "company"}


def test_a_build_with_the_nlp_extractor_persists_and_updates_typed(tmp_path):
    from graphstrata import GraphStrata
    from graphstrata.testing import HashEmbedder

    docs = [{"id": f"d{i}", "text": t} for i, t in enumerate(TEXTS)]
    gs = GraphStrata.build(docs, config={"extractor": "nlp", "entity_resolution": True, "min_communities": 1},
                           embedder=HashEmbedder(), persist_dir=tmp_path / "idx")
    assert gs.kg.entities["steven spielberg"].type == "person"
    gs.insert([{"id": "d9", "text": "Steven Spielberg founded DreamWorks with David Geffen in 1994."}])
    loaded = GraphStrata.load(tmp_path / "idx", embedder=HashEmbedder())
    assert loaded.kg.entities["dreamworks"].type == "organization"
    assert "d9#0" in loaded.kg.entities["steven spielberg"].chunk_ids
    labels = {(r.source, r.target): r.keywords for r in loaded.kg.relations.values()}
    assert labels[("jaws", "steven spielberg")] == "directed"
