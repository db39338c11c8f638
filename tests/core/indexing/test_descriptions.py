"""An LLM build embeds the model's descriptions (issue 29, "Keep what the LLM says").

Entity vectors embed name + description (LightRAG §3.1), relation vectors keywords + endpoint
names + description (LightRAG §3.1), AGRAG's facts their triple text (AGRAG §III-C); they
persist with the index and an insert re-embeds only what changed. Offline builds keep their
vectors bit for bit. The scripted LLM tests parsing and control flow (which text is embedded,
where it is read); the hash embedder makes "the same text, the same vector" exact — neither
says anything about retrieval quality.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from graphstrata import GraphStrata
from graphstrata.config import GraphStrataConfig, stored_config
from graphstrata.index import LayeredIndex, layer_vectors
from graphstrata.indexing import build as build_mod
from graphstrata.indexing import update as update_mod
from graphstrata.indexing.chunks import chunk_vectors
from graphstrata.indexing.descriptions import entity_text
from graphstrata.structures.text_vectors import relation_text
from graphstrata.indexing.entities import entity_vectors
from graphstrata.indexing.progress import Progress
from graphstrata.llm.prompts import agrag as agrag_triples
from graphstrata.llm.prompts import lightrag_extract as lx
from graphstrata.structures.agrag import PREDICATE, fact_triples, fact_vectors
from graphstrata.structures.lightrag import relation_text_vectors
from graphstrata.models import l2_normalise
from graphstrata.testing import HashEmbedder, ScriptedLLM
from graphstrata.testing import answer_every_prompt as toy

CONFIG = {"min_communities": 2, "max_community_size": 4, "chunk_size": 120, "chunk_overlap": 16,
          "llm_gleaning": 0, "llm_community_reports": False}
DOCS = [
    {"id": "twins", "text": "Castor and Pollux shine together in the winter sky."},
    {"id": "engine", "text": "Lovelace wrote notes on the engine that Babbage designed in London."},
    {"id": "navy", "text": "Hopper wrote compilers for the Navy while Aiken ran the Harvard machine."},
    {"id": "radio", "text": "Marconi sent radio signals from Cornwall across the ocean to Newfoundland."},
    {"id": "flight", "text": "Wilbur and Orville flew their glider over the dunes of Kitty Hawk."},
    {"id": "atoms", "text": "Curie measured radium with Pierre in their Paris laboratory."},
    {"id": "cells", "text": "Hooke looked at cork through the lens and Leeuwenhoek saw tiny animals."},
    {"id": "tides", "text": "Newton explained the tides while Halley paid for the printing in Cambridge."},
]
#: descriptions the scripted model writes (the rest: "<name> is named in the passage.")
DESCRIPTIONS = {
    "Castor": "A multiple star system of six stars.",
    "Pollux": "An orange giant, the brightest star of its constellation.",
}
#: relationship keywords the scripted model writes (the rest: "co-mention")
KEYWORDS = {("Castor", "Pollux"): "celestial twins, binary pairing"}
_NAME = re.compile(r"\b[A-Z][a-z]{3,}\b")


def extraction_answer(text: str) -> str:
    """LightRAG records for one chunk: its capitalised words as entities (descriptions from
    :data:`DESCRIPTIONS`; a chunk saying "catalogued" describes Castor anew), relations between
    neighbours (keywords from :data:`KEYWORDS`)."""
    names = list(dict.fromkeys(_NAME.findall(text)))[:6]
    d = lx.TUPLE_DELIMITER

    def describe(n: str) -> str:
        if n == "Castor" and "catalogued" in text:
            return "Castor was catalogued by Ptolemy in antiquity."
        return DESCRIPTIONS.get(n, f"{n} is named in the passage.")

    recs = [f'("entity"{d}{n}{d}{"person" if i % 2 == 0 else "geo"}{d}{describe(n)})' for i, n in enumerate(names)]
    recs += [
        f'("relationship"{d}{a}{d}{b}{d}{a} and {b} appear together.{d}{KEYWORDS.get((a, b), "co-mention")}{d}5)'
        for a, b in zip(names, names[1:], strict=False)
    ]
    return lx.RECORD_DELIMITER.join(recs) + lx.RECORD_DELIMITER + lx.COMPLETION_DELIMITER


def script(prompt: str, system: str | None) -> str:
    if system == lx.EXTRACT_SYSTEM and not prompt.rstrip().endswith((lx.CONTINUE_QUESTION, lx.GLEANING_INSTRUCTION)):
        return extraction_answer(prompt.rsplit("Text: ", 1)[1].rsplit("Output:", 1)[0])
    return toy(prompt, system)


class RecordingEmbedder(HashEmbedder):
    """A :class:`HashEmbedder` that records every text it embeds."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        return super().embed(texts)


def embedded(emb: HashEmbedder, text: str) -> np.ndarray:
    """The embedder's vector of ``text`` as a build stores it (L2-normalised float32)."""
    return l2_normalise(np.asarray(emb.embed([text]), np.float32))[0]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("described") / "idx"
    gs = GraphStrata.build(DOCS, config=CONFIG, embedder=HashEmbedder(), persist_dir=path, llm=ScriptedLLM(script))
    return gs, path


def _vec(gs: GraphStrata, entity_id: str) -> np.ndarray:
    return gs.state.vectors["entities"][gs.kg.row[entity_id]]


# -- entity vectors -----------------------------------------------------------------------------


def test_an_llm_entity_vector_embeds_its_name_and_description(built):
    gs, _ = built
    emb = HashEmbedder()
    castor = gs.kg.entities["castor"]
    assert castor.description == DESCRIPTIONS["Castor"]
    assert entity_text(castor) == "Castor\nA multiple star system of six stars."
    # the C-HNSW stores each vector normalised once more: equal to the last float32 bits or so
    for e in gs.kg.entities.values():
        assert np.allclose(_vec(gs, e.id), emb.embed([entity_text(e)])[0], rtol=0, atol=1e-6), e.id


def test_entities_of_one_context_differ_by_what_the_llm_said_of_them(built):
    """Castor and Pollux occur in the same one chunk: vectors made from their chunks alone
    (the offline stage with entity_context_weight=1) are the same; their descriptions differ,
    and so do their vectors."""
    gs, _ = built
    kg, state = gs.kg, gs.state
    assert kg.entities["castor"].chunk_ids == kg.entities["pollux"].chunk_ids
    context_only = entity_vectors(kg, state.chunk_row, state.vectors["chunks"],
                                  GraphStrataConfig(entity_context_weight=1.0), HashEmbedder(), Progress(False),
                                  ids=["castor", "pollux"])
    assert np.array_equal(context_only[0], context_only[1])
    a, b = _vec(gs, "castor"), _vec(gs, "pollux")
    assert not np.allclose(a, b)
    assert float(a @ b) < 0.9


# -- relation vectors ---------------------------------------------------------------------------


def test_relation_vectors_embed_keywords_names_and_description(built):
    gs, _ = built
    emb = HashEmbedder()
    tv = relation_text_vectors(gs.state)
    assert tv is not None and tv.vectors.shape == (len(gs.kg.relations), emb.dim)
    keys = list(gs.kg.relations)
    i = keys.index(("castor", "pollux"))
    assert tv.texts[i] == "celestial twins, binary pairing\nCastor\nPollux\nCastor and Pollux appear together."
    for j, key in enumerate(keys):
        assert tv.texts[j] == relation_text(gs.kg, key)
        assert np.array_equal(tv.vectors[j], embedded(emb, tv.texts[j])), key


def test_lightrag_searches_the_relations_by_their_embedded_text(built):
    """The LLM's keywords ("celestial twins") are in no chunk: the embedded relation text finds
    the relation, with the cosine of that text as its similarity."""
    gs, _ = built
    emb = HashEmbedder()
    assert "celestial" not in " ".join(c.text for c in gs.chunks)

    def keywords(query):
        return ["celestial twins"], []

    def sims(**options):
        hits = gs.retrieve("celestial twins", method="lightrag", k=2, context_k=50, mode="global",
                           keywords_fn=keywords, **options)
        return {h.id: h.metadata["similarity"] for h in hits if h.kind == "relation"}

    got = sims()
    best = max(got, key=got.get)
    assert "castor" in best and "pollux" in best
    want = float(embedded(emb, "celestial twins") @ embedded(emb, relation_text(gs.kg, ("castor", "pollux"))))
    assert got[best] == pytest.approx(want, abs=1e-5)
    composed = sims(relation_vectors="composed")
    assert composed.get(best) != pytest.approx(want, abs=1e-5)


# -- AGRAG facts --------------------------------------------------------------------------------

AGRAG_DOCS = [
    {"id": "fm", "title": "Fjord Motors",
     "text": "Fjord Motors buys batteries from Brightwater Labs. Brightwater Labs supplies Fjord Motors with cells "
             "for its buses. Erik Dahl runs Fjord Motors in Bergen."},
    {"id": "bl", "title": "Brightwater Labs",
     "text": "Brightwater Labs was founded by Lena Park in Oslo. Lena Park leads its battery research."},
]
TRIPLES = {
    "fm": [["Fjord Motors", "buys batteries from", "Brightwater Labs"], ["Brightwater Labs", "supplies", "Fjord Motors"],
           ["Erik Dahl", "runs", "Fjord Motors"], ["Fjord Motors", "is based in", "Bergen"]],
    "bl": [["Lena Park", "founded", "Brightwater Labs"], ["Brightwater Labs", "is based in", "Oslo"]],
}
AGRAG_CONFIG = {"llm_extraction": "agrag", "llm_community_reports": False, "chunk_size": 200, "chunk_overlap": 16}


def agrag_script(prompt: str, system: str | None) -> str:
    if system == agrag_triples.TRIPLES_SYSTEM:
        return json.dumps({"triples": TRIPLES["fm" if "Fjord Motors buys" in prompt else "bl"]})
    return toy(prompt, system)


@pytest.fixture(scope="module")
def agrag_built(tmp_path_factory):
    path = tmp_path_factory.mktemp("facts") / "idx"
    gs = GraphStrata.build(AGRAG_DOCS, config=AGRAG_CONFIG, embedder=HashEmbedder(), persist_dir=path,
                           llm=ScriptedLLM(agrag_script))
    return gs, path


def _anchor_facts(gs: GraphStrata, query: str) -> list:
    hits = gs.retrieve(query, method="agrag", k=2, context_k=20, fact_filter=lambda q, facts: list(facts))
    return [h for h in hits if h.kind == "relation"]


def test_fact_vectors_embed_each_triple_as_s_p_o(agrag_built):
    gs, _ = agrag_built
    emb = HashEmbedder()
    fv = fact_vectors(gs.state)
    assert fv is not None and fv.n_owners == len(gs.kg.relations)
    pair = ("brightwater labs", "fjord motors")
    i = list(gs.kg.relations).index(pair)
    texts = fv.texts[fv.indptr[i]:fv.indptr[i + 1]]
    assert sorted(texts) == ["Brightwater Labs supplies Fjord Motors", "Fjord Motors buys batteries from Brightwater Labs"]
    assert texts == [f"{s} {p} {o}" for s, p, o, _ in fact_triples(gs.state, *pair)]
    for t, row in zip(fv.texts, range(len(fv.texts)), strict=True):
        assert np.array_equal(fv.vectors[row], embedded(emb, t)), t


def test_agrag_ranks_the_fact_whose_text_matches_the_query_first(agrag_built):
    gs, _ = agrag_built
    emb = HashEmbedder()
    facts = _anchor_facts(gs, "Who founded Brightwater Labs?")
    assert facts[0].metadata["predicate"] == "founded"
    assert (facts[0].metadata["source"], facts[0].metadata["target"]) == ("Lena Park", "Brightwater Labs")
    q = embedded(emb, "Who founded Brightwater Labs?")
    assert facts[0].metadata["raw_score"] == pytest.approx(float(q @ embedded(emb, "Lena Park founded Brightwater Labs")),
                                                           abs=1e-5)
    # parallel facts of one pair are scored apart: the one the query states comes first
    facts = _anchor_facts(gs, "Who supplies Fjord Motors?")
    preds = [h.metadata["predicate"] for h in facts]
    assert preds[0] == "supplies" and "buys batteries from" in preds
    assert facts[0].metadata["raw_score"] > facts[preds.index("buys batteries from")].metadata["raw_score"]
    # fact_vectors="off": the offline score, the same for both facts of the pair
    off = {h.metadata["predicate"]: h.metadata["raw_score"] for h in gs.retrieve(
        "Who supplies Fjord Motors?", method="agrag", k=2, context_k=20, fact_vectors="off",
        fact_filter=lambda q, f: list(f)) if h.kind == "relation"}
    assert off["supplies"] == off["buys batteries from"]


# -- persistence and updates --------------------------------------------------------------------


def _arrays(tv) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in tv.to_arrays().items()}


def test_the_vectors_survive_persist_and_load_byte_equal(built, agrag_built):
    for gs, path in (built, agrag_built):
        loaded = GraphStrata.load(path, embedder=HashEmbedder())
        assert loaded.state.vectors["entities"].tobytes() == gs.state.vectors["entities"].tobytes()
        assert loaded.kg.entity_ids == gs.kg.entity_ids
        for get in (relation_text_vectors, fact_vectors):
            mine, theirs = get(gs.state), get(loaded.state)
            assert mine is not None and theirs is not None
            assert mine.texts == theirs.texts
            for name, arr in _arrays(mine).items():
                assert _arrays(theirs)[name].tobytes() == arr.tobytes(), name


def test_an_insert_reembeds_only_the_entity_whose_description_changed(built, tmp_path):
    gs, path = built
    import shutil

    copy = tmp_path / "idx"
    shutil.copytree(path, copy)
    emb = RecordingEmbedder()
    live = GraphStrata.load(copy, embedder=emb, llm=ScriptedLLM(script))
    before = live.state
    emb.texts.clear()
    live.insert([{"id": "catalogue", "text": "Castor was catalogued by Ptolemy long ago."}])
    after = live.state
    assert after.drift["updates"] == 1  # the incremental path, not a rebuild
    old_kg, new_kg = before.kg, after.kg
    assert new_kg.entities["castor"].description != old_kg.entities["castor"].description
    changed = {e for e in old_kg.entity_ids if e in new_kg.entities
               and before.vectors["entities"][old_kg.row[e]].tobytes() != after.vectors["entities"][new_kg.row[e]].tobytes()}
    assert changed == {"castor"}
    assert np.allclose(after.vectors["entities"][new_kg.row["castor"]],
                       HashEmbedder().embed([entity_text(new_kg.entities["castor"])])[0], rtol=0, atol=1e-6)
    # only the changed and the new texts were embedded: no unchanged entity, relation or fact
    texts = set(emb.texts)
    assert entity_text(new_kg.entities["castor"]) in texts and entity_text(new_kg.entities["ptolemy"]) in texts
    assert not {entity_text(old_kg.entities[e]) for e in old_kg.entity_ids} & texts
    old_rel, new_rel = relation_text_vectors(before), relation_text_vectors(after)
    assert not set(old_rel.texts) & texts
    assert set(new_rel.texts) - set(old_rel.texts) <= texts
    for t, v in zip(old_rel.texts, old_rel.vectors, strict=True):
        if t in new_rel.texts:
            assert new_rel.vectors[new_rel.texts.index(t)].tobytes() == v.tobytes()
    old_facts = fact_vectors(before)
    assert not set(old_facts.texts) & texts
    # what was persisted is what the live index holds
    again = GraphStrata.load(copy, embedder=HashEmbedder())
    assert again.state.vectors["entities"].tobytes() == after.vectors["entities"].tobytes()
    for get in (relation_text_vectors, fact_vectors):
        for name, arr in _arrays(get(after)).items():
            assert _arrays(get(again.state))[name].tobytes() == arr.tobytes(), name


# -- offline builds stay as they were -----------------------------------------------------------


def test_offline_builds_keep_the_offline_entity_vectors(monkeypatch):
    calls: list[str] = []
    real = build_mod.entity_vectors

    def spy(*args, **kwargs):
        calls.append("offline")
        return real(*args, **kwargs)

    def refuse(*args, **kwargs):
        raise AssertionError("an offline build embedded descriptions")

    monkeypatch.setattr(build_mod, "entity_vectors", spy)
    monkeypatch.setattr(build_mod, "described_entity_vectors", refuse)
    monkeypatch.setattr(update_mod, "described_entity_vectors", refuse)
    emb = HashEmbedder()
    builds = {
        "offline": GraphStrata.build(DOCS, config=CONFIG, embedder=emb),
        "llm, statistical extraction": GraphStrata.build(
            DOCS, config={**CONFIG, "llm_extraction": "statistical"}, embedder=emb, llm=ScriptedLLM(script)),
        "llm, llm_description_vectors=False": GraphStrata.build(
            DOCS, config={**CONFIG, "llm_description_vectors": False}, embedder=emb, llm=ScriptedLLM(script)),
    }
    assert calls == ["offline"] * 3
    for what, gs in builds.items():
        state = gs.state
        # the stage the build has always run: (1 - w)·name + w·mean(chunks), bit for bit
        # (stored as the entity C-HNSW stores them, as a build does)
        chunk_vecs = chunk_vectors(state.chunks, emb, Progress(False), {})
        old_way = entity_vectors(state.kg, state.chunk_row, chunk_vecs, state.config, emb, Progress(False))
        index = LayeredIndex.build([old_way], M=state.config.hnsw_M, ef_construction=state.config.hnsw_ef_construction)
        assert layer_vectors(index, emb.dim)["entities"].tobytes() == state.vectors["entities"].tobytes(), what
        assert relation_text_vectors(state) is None and fact_vectors(state) is None, what
        # LightRAG and AGRAG read what they read before
        q = "Who wrote notes on the engine?"
        for method, option in (("lightrag", {"relation_vectors": "composed"}), ("agrag", {"fact_vectors": "off"})):
            auto = [(h.id, h.score) for h in gs.retrieve(q, method=method, k=3, context_k=10)]
            assert auto == [(h.id, h.score) for h in gs.retrieve(q, method=method, k=3, context_k=10, **option)], what
    offline = builds["offline"]
    offline.insert([{"id": "catalogue", "text": "Castor was catalogued by Ptolemy long ago."}])
    assert relation_text_vectors(offline.state) is None and fact_vectors(offline.state) is None
    hits = offline.retrieve("Who supplies?", method="agrag", k=2, context_k=10)
    assert {h.metadata.get("predicate") for h in hits if h.kind == "relation"} <= {PREDICATE}


def test_indexes_persisted_before_the_option_keep_their_vectors():
    """A stored config without ``llm_description_vectors`` (an index persisted before it) reads
    as False: its update keeps making the vectors it holds; a new config defaults to True."""
    dumped = GraphStrataConfig().model_dump()
    assert dumped["llm_description_vectors"] is True
    assert stored_config(dumped).llm_description_vectors is True
    legacy = {k: v for k, v in dumped.items() if k != "llm_description_vectors"}
    assert stored_config(legacy).llm_description_vectors is False
    assert stored_config(None).llm_description_vectors is False
    with pytest.raises(ValueError, match="invalid config"):
        stored_config({**legacy, "no_such_field": 1})
