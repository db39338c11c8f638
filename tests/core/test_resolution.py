"""Entity resolution (issue 28): variant pairs merged, distinct pairs kept apart, every merge
kept as aliases (persisted, exported), incremental inserts resolved onto existing entities."""

from __future__ import annotations

import json

import numpy as np
import pytest
from graphstrata import Document, GraphStrata
from graphstrata.inspection import export_graph, read_records
from graphstrata.quality import records_quality
from graphstrata.resolution import normal_key, resolve_entities, resolve_onto
from graphstrata.testing import HashEmbedder
from graphstrata.types import Entity


def ent(eid: str, weight: float = 1.0, type: str = "", chunks: tuple[str, ...] = ()) -> Entity:
    return Entity(id=eid.casefold(), name=eid, weight=weight, type=type, chunk_ids=list(chunks))


def same_vectors(names: list[str]) -> np.ndarray:
    """Every name embeds to the same unit vector: only the string and type checks decide."""
    return np.ones((len(names), 4), np.float32) / 2


def orthogonal_vectors(names: list[str]) -> np.ndarray:
    return np.eye(len(names), dtype=np.float32)


VARIANTS = [
    ("mount", "mounts"),
    ("structure", "structures"),
    ("CD-ROM device", "cdrom devices"),
    ("Charles Carroll", "Charles Carroll's"),
    ("Academy Award", "Academy Awards"),
    ("entry", "entries"),
    ("New-York", "New York"),
    ("Città di Avezzano", "Citta di Avezzano"),
]
DISTINCT = [("Paris", "Paris Hilton"), ("mount", "amount"), ("box", "boxer"), ("class", "clas"),
            ("H.O.R.S.E", "horse"), ("P&O", "PO"), ("AAAS", "AAA")]


@pytest.mark.parametrize(("a", "b"), VARIANTS)
def test_case_plural_punctuation_and_possessive_variants_merge(a, b):
    assert normal_key(a) == normal_key(b)
    mapping = resolve_entities([ent(a, 3), ent(b, 1)])
    assert mapping == {b.casefold(): a.casefold()}  # onto the heavier


@pytest.mark.parametrize(("a", "b"), DISTINCT)
def test_distinct_names_stay_apart_even_with_identical_name_vectors(a, b):
    assert resolve_entities([ent(a), ent(b)], embed=same_vectors) == {}


def test_similar_strings_merge_only_when_embeddings_and_types_agree():
    pair = [ent("Amadeo Giannini", 5, "person"), ent("Amadeo Gianini", 1, "person")]
    assert resolve_entities(pair, embed=same_vectors) == {"amadeo gianini": "amadeo giannini"}
    assert resolve_entities(pair, embed=orthogonal_vectors) == {}
    typed = [ent("Amadeo Giannini", 5, "person"), ent("Amadeo Gianini", 1, "organization")]
    assert resolve_entities(typed, embed=same_vectors) == {}
    # a type check on normal forms too: the country and the person stay two entities
    country, person = Entity("jordan", "Jordan", weight=2, type="location"), Entity("jordans", "Jordans", type="person")
    assert resolve_entities([country, person]) == {}
    person.type = ""
    assert resolve_entities([country, person]) == {"jordans": "jordan"}


def test_acronyms_resolve_to_the_expansion_the_corpus_names():
    ents = [ent("National Aeronautics and Space Administration", 4), ent("NASA", 2), ent("nasal", 1)]
    assert resolve_entities(ents) == {"nasa": "national aeronautics and space administration"}
    # two expansions: only the one sharing a chunk with the acronym is taken
    two = [ent("World Health Organization", 2, chunks=("c1",)), ent("World Heritage Organisation", 2, chunks=("c2",)),
           ent("WHO", 1, chunks=("c2",))]
    assert resolve_entities(two) == {"who": "world heritage organisation"}
    two[2].chunk_ids = ["c3"]
    assert resolve_entities(two) == {}
    # two letters: only with a chunk naming both
    short = [ent("Bomb Wing", 2, chunks=("c1",)), ent("BW", 1, chunks=("c2",))]
    assert resolve_entities(short) == {}
    short[1].chunk_ids = ["c1"]
    assert resolve_entities(short) == {"bw": "bomb wing"}


def test_bad_thresholds_and_duplicate_ids_are_refused():
    with pytest.raises(ValueError, match="fuzzy_min"):
        resolve_entities([ent("a")], fuzzy_min=120)
    with pytest.raises(ValueError, match="duplicate entity ids"):
        resolve_entities([ent("a"), ent("A")])


def test_resolve_onto_uses_aliases_and_normal_forms():
    existing = {"academy award": Entity("academy award", "Academy Award", aliases=("oscars",))}
    got = resolve_onto(existing, ["academy awards", "oscars", "academy award", "emmy"])
    assert got == {"academy awards": "academy award", "oscars": "academy award"}


@pytest.fixture(scope="module")
def hotpot_docs(shared_data, jsonl):
    rows = jsonl(shared_data / "hotpotqa" / "corpus.jsonl")[:150]
    return [Document(r["id"], r["text"], {"title": r["title"]}) for r in rows]


@pytest.fixture(scope="module")
def resolved_index(hotpot_docs, tmp_path_factory):
    out = tmp_path_factory.mktemp("resolution") / "index"
    gs = GraphStrata.build(hotpot_docs, config={"entity_resolution": True}, embedder=HashEmbedder(), persist_dir=out)
    return gs, out


def test_a_build_with_resolution_leaves_no_variants_and_keeps_aliases(hotpot_docs, resolved_index, tmp_path):
    default = GraphStrata.build(hotpot_docs, config={"extractor": "statistical"}, embedder=HashEmbedder())
    before = records_quality(default.state)
    assert before["variants"] > 0.005  # the statistical extractor splits plurals and cases
    gs, out = resolved_index
    after = records_quality(gs.state)
    assert after["variants"] == 0.0
    merged = {e.id: e.aliases for e in gs.kg.entities.values() if e.aliases}
    assert len(merged) >= 5
    for aliases in merged.values():
        assert all(a not in gs.kg.entities for a in aliases)
        assert all(normal_key(a) for a in aliases)
    # every chunk an alias was named in is a chunk of its entity now
    old = default.kg.entities
    for canonical, aliases in merged.items():
        for a in aliases:
            if a in old:
                assert set(old[a].chunk_ids) <= set(gs.kg.entities[canonical].chunk_ids)
    # nothing dangles: relations join surviving entities
    assert all(s in gs.kg.entities and t in gs.kg.entities for s, t in gs.kg.relations)
    # persisted, read back, exported
    disk = read_records(out).kg.entities
    assert {e: disk[e].aliases for e in merged} == merged
    path = export_graph(gs.state, tmp_path / "g.json", format="json")
    nodes = {n["id"]: n for n in json.loads(path.read_text(encoding="utf-8"))["nodes"]}
    some = next(iter(merged))
    assert nodes[some]["aliases"] == " | ".join(merged[some])


def test_default_build_has_no_aliases(hotpot_docs):
    gs = GraphStrata.build(hotpot_docs[:20], embedder=HashEmbedder())
    assert gs.config.entity_resolution is False
    assert not any(e.aliases for e in gs.kg.entities.values())


def test_an_insert_resolves_new_mentions_onto_existing_entities(resolved_index, tmp_path):
    gs0, out = resolved_index
    gs = GraphStrata.load(out, embedder=HashEmbedder())
    assert "academy award" in gs.kg.entities and "academy awards" not in gs.kg.entities
    before = gs.kg.entities["academy award"]
    doc = Document("new-doc", "The Film\nThe film won three Academy Awards in 1999. The Academy Awards "
                   "were presented in Los Angeles.", {"title": "The Film"})
    gs.insert([doc])
    assert "academy awards" not in gs.kg.entities
    after = gs.kg.entities["academy award"]
    new_chunks = {c.id for c in gs.chunks if c.document_id == "new-doc"}
    assert new_chunks & set(after.chunk_ids)
    assert set(before.chunk_ids) <= set(after.chunk_ids)
    assert "academy awards" in after.aliases and set(before.aliases) <= set(after.aliases)


def test_an_llm_graph_is_merged_directly_keeping_types_chunks_and_labels():
    from graphstrata.resolution import merge_graph, resolution_stage
    from graphstrata.types import Relation

    ents = [
        Entity("nasa", "NASA", "The agency.", ["c2"], 2.0, "organization"),
        Entity("national aeronautics and space administration", "National Aeronautics and Space Administration",
               "US space agency.", ["c1"], 3.0, ""),
        Entity("apollo 11", "Apollo 11", "A mission.", ["c1", "c2"], 2.0, "event"),
    ]
    rels = [
        Relation("apollo 11", "nasa", "NASA flew Apollo 11.", 1.0, ["c2"], "flew"),
        Relation("apollo 11", "national aeronautics and space administration", "Run by it.", 2.0, ["c1"], "run by"),
        Relation("nasa", "national aeronautics and space administration", "Same.", 1.0, ["c1"], "is"),
    ]
    out_e, out_r, records = resolution_stage(ents, rels, None, None, 4)
    assert records is None
    long_id = "national aeronautics and space administration"
    assert [e.id for e in out_e] == [long_id, "apollo 11"]
    agency = out_e[0]
    assert agency.aliases == ("nasa",) and agency.type == "organization" and agency.weight == 5.0
    assert agency.chunk_ids == ["c1", "c2"] and agency.description == "US space agency.\nThe agency."
    (r,) = out_r  # the self-loop is gone, the two relations to Apollo 11 are one
    assert (r.source, r.target) == ("apollo 11", long_id)
    assert r.weight == 3.0 and r.keywords == "flew, run by" and set(r.chunk_ids) == {"c1", "c2"}
    assert merge_graph(ents, rels, {}) == (ents, rels)


@pytest.mark.parametrize(
    ("a", "b"),
    [("2005 FIFA World Player of the Year", "2009 FIFA World Player of the Year"),
     ("Cherry Hill High School West", "Cherry Hill High School East"), ("Austrian", "Austria"),
     ("Alien (soundtrack)", "Aliens (soundtrack)"), ("Aston Villa Under-23", "Aston Villa Under-21"),
     ("Brewer", "Brewery"), ("Argentine-born American", "Argentine-born Mexican"),
     ("Minister of Education", "Ministry of Education")],
)
def test_look_alike_names_of_different_things_stay_apart(a, b):
    """Pairs the similarity step merged on the HotpotQA graph before the spelling check."""
    assert resolve_entities([ent(a, 2), ent(b, 1)], embed=same_vectors) == {}


def test_a_misspelt_word_merges():
    pair = [ent("Basaveshwara Engineering College", 2), ent("Basaveshvara Engineering College", 1)]
    assert resolve_entities(pair, embed=same_vectors) == {
        "basaveshvara engineering college": "basaveshwara engineering college"
    }


def test_retrieved_entities_and_explanations_name_their_aliases(resolved_index):
    """An entity that absorbed variants shows them in its hit's metadata and wherever an
    explanation names it (issue 28: aliases in inspect, export and explain)."""
    gs, _ = resolved_index
    merged = {e.id: e for e in gs.kg.entities.values() if e.aliases}
    target = max(merged.values(), key=lambda e: (len(e.chunk_ids), e.id))
    hits = gs.retrieve(target.name, method="archrag", k=5, kinds=["entity"], explain=True)
    hit = next(h for h in hits if h.id == target.id)
    assert hit.metadata["aliases"] == list(target.aliases)
    for h in hits:  # an entity without aliases gets no key
        assert ("aliases" in h.metadata) == bool(gs.kg.entities[h.id].aliases)

    def refs(value):  # every entity reference {"id", "name", ...} in an explanation
        if isinstance(value, dict):
            if value.get("id") in gs.kg.entities and "name" in value:
                yield value
            for v in value.values():
                yield from refs(v)
        elif isinstance(value, list):
            for v in value:
                yield from refs(v)

    chunk_hits = gs.retrieve(target.name, method="archrag", k=5, kinds=["chunk"], explain=True)
    found = [r for h in chunk_hits for r in refs(h.explain)]
    assert any(r["id"] in merged for r in found)
    for r in found:
        assert r.get("aliases") == (list(merged[r["id"]].aliases) if r["id"] in merged else None)
