"""HiRAG's two-stage LLM extraction (seed-hirag.md §2.2–2.4, issue 29): entities first, then the
relations among them, with the grounding, echo and failure-share guards on both stages.

Scripted models answer by prompt family (the system prompt); the chunks are short invented
passages, so every expected record can be written out.
"""

from __future__ import annotations

import json
import warnings

import pytest
from graphstrata import GraphStrata
from graphstrata.config import as_config
from graphstrata.indexing.extract import extractor
from graphstrata.indexing.hirag_extract import STAGE_RELATIONS, HiragLLMExtractor
from graphstrata.indexing.llm_extract import LLMExtractor
from graphstrata.llm import LLMClient, LLMOutputError
from graphstrata.llm.prompts import hirag_extract as hx
from graphstrata.testing import HashEmbedder, ScriptedLLM, answer_every_prompt
from graphstrata.types import Chunk


def _chunk(cid: str, doc: str, text: str) -> Chunk:
    return Chunk(cid, doc, 0, text, 0, len(text), len(text.split()))


C1 = _chunk("c1", "d1", "Ada Lovelace worked with Charles Babbage on the Analytical Engine in London.")
C2 = _chunk("c2", "d2", "Charles Babbage was born in London. Mary Somerville introduced him to Ada.")

ENTITIES = {
    "c1": [("Ada Lovelace", "person"), ("Charles Babbage", "person"), ("Analytical Engine", "technology")],
    "c2": [("Charles Babbage", "person"), ("London", "location")],
}
RELATIONS = {
    "c1": [
        ("Ada Lovelace", "Charles Babbage", "Ada Lovelace worked with Charles Babbage.", 8),
        ("Charles Babbage", "Analytical Engine", "Charles Babbage designed the Analytical Engine.", 9),
    ],
    # "London" was listed; "Mary Somerville" was not (in the text, missed by stage 1); "Isaac
    # Newton" is nowhere in the chunk
    "c2": [
        ("Charles Babbage", "London", "Charles Babbage was born in London.", 6),
        ("Mary Somerville", "Charles Babbage", "Mary Somerville introduced Ada to Charles Babbage.", 4),
        ("Isaac Newton", "Charles Babbage", "Isaac Newton inspired Charles Babbage.", 3),
    ],
}


def _chunk_of(prompt: str) -> str:
    text = prompt.rsplit("Text: ", 1)[1].rsplit("Output:", 1)[0].strip()
    return next(c.id for c in (C1, C2) if c.text == text)


def _records(kind: str, rows) -> str:
    return "".join(f'("{kind}"<|>' + "<|>".join(map(str, r)) + ")##\n" for r in rows) + "<|COMPLETE|>"


def two_stage(prompt: str, system: str | None) -> str:
    tail = prompt.rstrip()
    if tail.endswith((hx.ENTITY_GLEANING_INSTRUCTION, hx.RELATION_GLEANING_INSTRUCTION)):
        return "<|COMPLETE|>"
    cid = _chunk_of(prompt)
    if system == hx.ENTITY_SYSTEM:
        return _records("entity", [(n, t, f"{n} is named in the passage.") for n, t in ENTITIES[cid]])
    assert system == hx.RELATION_SYSTEM, system
    return _records("relationship", RELATIONS[cid])


def _relation_prompts(llm: ScriptedLLM) -> dict[str, str]:
    return {
        _chunk_of(p): p
        for p, system, _ in llm.calls
        if system == hx.RELATION_SYSTEM and not p.rstrip().endswith(hx.RELATION_GLEANING_INSTRUCTION)
    }


def _run(script, **kw):
    llm = ScriptedLLM(script)
    client = LLMClient(llm, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rejected records are reported by a warning
        out = HiragLLMExtractor(client).extract([C1, C2], {"d1": "Ada Lovelace"})
    return llm, client, out


def test_relation_prompt_lists_the_entities_of_stage_one():
    llm, client, _ = _run(two_stage)
    prompts = _relation_prompts(llm)
    assert set(prompts) == {"c1", "c2"}
    for cid, prompt in prompts.items():
        listed = json.loads(prompt.rsplit("Entities: ", 1)[1].split("\n", 1)[0])
        assert listed == [n for n, _ in ENTITIES[cid]]
    # spec §2.3: 4 calls per chunk with gleaning 1 (2 entity, 2 relation)
    stages = client.ledger.stages
    assert [stages[s].calls for s in ("extract", "extract:gleaning", STAGE_RELATIONS, "extract:relations:gleaning")] == [
        2, 2, 2, 2,
    ]
    assert len(llm.calls) == 8


def test_scripted_two_stage_run_gives_the_expected_graph():
    _, client, (entities, relations) = _run(two_stage)
    got = {e.id: (e.name, e.type, e.chunk_ids) for e in entities}
    assert got == {
        "ada lovelace": ("Ada Lovelace", "person", ["c1"]),
        "charles babbage": ("Charles Babbage", "person", ["c1", "c2"]),
        "analytical engine": ("Analytical Engine", "technology", ["c1"]),
        "london": ("London", "location", ["c2"]),
        # a relation endpoint stage 1 missed but the chunk names: kept untyped (spec §2.4)
        "mary somerville": ("Mary Somerville", "", ["c2"]),
    }
    assert {(r.source, r.target): (r.weight, r.keywords, r.chunk_ids) for r in relations} == {
        ("ada lovelace", "charles babbage"): (8.0, "", ["c1"]),
        ("analytical engine", "charles babbage"): (9.0, "", ["c1"]),
        ("charles babbage", "london"): (6.0, "", ["c2"]),
        ("charles babbage", "mary somerville"): (4.0, "", ["c2"]),
    }
    mary = next(e for e in entities if e.id == "mary somerville")
    assert mary.description == "Mary Somerville introduced Ada to Charles Babbage."
    # the relation naming someone absent from the chunk was rejected; its answer kept others,
    # so it is no failure of the stage
    assert not any("isaac newton" in (r.source, r.target) for r in relations)
    assert client.ledger.stages[STAGE_RELATIONS].to_dict()["failures"] == {}


def test_relation_with_an_endpoint_neither_listed_nor_in_the_chunk_is_rejected():
    def only_strangers(prompt, system):
        if system == hx.RELATION_SYSTEM and not prompt.rstrip().endswith(hx.RELATION_GLEANING_INSTRUCTION):
            return _records("relationship", [("Isaac Newton", "Charles Babbage", "Newton inspired him.", 3)])
        return two_stage(prompt, system)

    with pytest.warns(UserWarning, match="rejected 2 record"):
        entities, relations = HiragLLMExtractor(LLMClient(ScriptedLLM(only_strangers), max_failure_share=1.0)).extract(
            [C1, C2]
        )
    assert relations == [] and "isaac newton" not in {e.id for e in entities}


def test_an_echoing_model_stops_the_build_before_any_relation_prompt():
    echo = _records("entity", [(n, "person", f"{n} appears in the example.") for n in hx.EXAMPLE_ENTITY_NAMES])

    def script(prompt, system):
        return echo if system == hx.ENTITY_SYSTEM else two_stage(prompt, system)

    llm = ScriptedLLM(script)
    with pytest.raises(LLMOutputError, match="'extract'") as err:
        HiragLLMExtractor(LLMClient(llm)).extract([C1, C2])
    assert err.value.reasons == {"echo": 2}
    assert not any(system == hx.RELATION_SYSTEM for _, system, _ in llm.calls)


def test_unreadable_relation_answers_stop_the_relation_stage():
    def script(prompt, system):
        return "I don't know." if system == hx.RELATION_SYSTEM else two_stage(prompt, system)

    with pytest.raises(LLMOutputError, match="'extract:relations'") as err:
        HiragLLMExtractor(LLMClient(ScriptedLLM(script))).extract([C1, C2])
    assert err.value.reasons == {"parse": 2}


def test_no_related_pair_is_a_valid_relation_answer():
    def script(prompt, system):
        return "<|COMPLETE|>" if system == hx.RELATION_SYSTEM else two_stage(prompt, system)

    _, client, (entities, relations) = _run(script)
    assert relations == [] and len(entities) == 4
    assert client.ledger.stages[STAGE_RELATIONS].to_dict()["failures"] == {}


def test_a_chunk_with_one_entity_gets_no_relation_prompt():
    def script(prompt, system):
        if system == hx.ENTITY_SYSTEM and _chunk_of(prompt) == "c2":
            return _records("entity", [("London", "location", "A city.")])
        return two_stage(prompt, system)

    llm, _, _ = _run(script)
    assert set(_relation_prompts(llm)) == {"c1"}


def test_the_config_switch_picks_the_two_stage_extractor():
    client = LLMClient(ScriptedLLM(answer_every_prompt))
    ex = extractor(as_config({"llm_extraction": "hirag", "llm_gleaning": 0}), client)
    assert isinstance(ex, HiragLLMExtractor) and isinstance(ex, LLMExtractor) and ex.gleaning == 0
    assert type(extractor(as_config({}), client)) is LLMExtractor  # the default stays LightRAG's joint prompt


def test_llm_build_with_two_stage_extraction(tmp_path):
    llm = ScriptedLLM(answer_every_prompt)
    docs = [
        {"id": "d1", "title": "Ada Lovelace", "text": C1.text + " " + C2.text},
        {"id": "d2", "title": "Analytical Engine", "text": "The Analytical Engine was designed by Charles Babbage."},
    ]
    config = {"llm_extraction": "hirag", "min_communities": 2, "max_community_size": 4}
    gs = GraphStrata.build(docs, config=config, embedder=HashEmbedder(), llm=llm, persist_dir=tmp_path / "ix")
    stages = gs.build_usage["stages"]
    n = len(gs.chunks)
    assert stages["extract"]["calls"] == n and stages[STAGE_RELATIONS]["calls"] >= 1
    assert all(r.keywords == "" for r in gs.kg.relations.values()) and gs.kg.relations
    assert gs.retrieve("Who designed the Analytical Engine?", method="hirag", k=3)
    again = GraphStrata.load(tmp_path / "ix", embedder=HashEmbedder())
    assert again.state.config.llm_extraction == "hirag"


def test_known_records_answer_both_stages_without_a_call_and_give_the_same_graph():
    """Per-chunk records (issue 29) hold both stages' answers: extracting again with them asks
    nothing and gives the same entities and relations; a chunk whose text changed is asked
    again, in both stages."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the script's ungrounded relation is reported
        first = HiragLLMExtractor(LLMClient(ScriptedLLM(two_stage))).extract_with_answers([C1, C2], {"d1": "Ada Lovelace"})
    assert set(first.answers.records) == {"c1", "c2"} and first.asked == 2
    llm = ScriptedLLM(two_stage)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = HiragLLMExtractor(LLMClient(llm)).extract_with_answers([C1, C2], {"d1": "Ada Lovelace"}, first.answers)
    assert llm.calls == [] and again.asked == 0
    assert (again.entities, again.relations) == (first.entities, first.relations)
    assert again.answers == first.answers
    changed = _chunk("c2", "d2", C2.text.replace("Mary Somerville", "Mary Fairfax"))
    llm = ScriptedLLM(lambda p, s: two_stage(p.replace("Mary Fairfax", "Mary Somerville"), s))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = HiragLLMExtractor(LLMClient(llm)).extract_with_answers([C1, changed], {"d1": "Ada Lovelace"}, first.answers)
    assert out.asked == 1
    systems = [s for _, s, _ in llm.calls if s in (hx.ENTITY_SYSTEM, hx.RELATION_SYSTEM)]
    assert hx.ENTITY_SYSTEM in systems and hx.RELATION_SYSTEM in systems
    assert all("Mary Fairfax" in p for p, s, _ in llm.calls if s == hx.ENTITY_SYSTEM)


def test_two_stage_insert_without_a_cache_asks_only_for_the_new_chunks(tmp_path):
    from graphstrata.llm import CACHE_FILE

    docs = [
        {"id": "d1", "title": "Ada Lovelace", "text": C1.text},
        {"id": "d2", "title": "Charles Babbage", "text": C2.text},
    ]
    config = {"llm_extraction": "hirag", "min_communities": 2, "max_community_size": 4}
    GraphStrata.build(docs, config=config, embedder=HashEmbedder(), llm=ScriptedLLM(answer_every_prompt),
                      persist_dir=tmp_path / "ix")
    for p in (tmp_path / "ix").glob(CACHE_FILE + "*"):
        p.unlink()
    llm = ScriptedLLM(answer_every_prompt)
    gs = GraphStrata.load(tmp_path / "ix", embedder=HashEmbedder(), llm=llm)
    new = {"id": "d3", "title": "Analytical Engine", "text": "The Analytical Engine was designed by Charles Babbage in London."}
    gs.insert([new])
    stages = gs.state.drift["last_update_usage"]["stages"]
    new_chunks = [c for c in gs.chunks if c.document_id == "d3"]
    assert stages["extract"]["calls"] == len(new_chunks)
    assert stages.get(STAGE_RELATIONS, {"calls": 0})["calls"] <= len(new_chunks)
    entity_prompts = [p for p, s, _ in llm.calls if s == hx.ENTITY_SYSTEM and "Text: " in p]
    assert entity_prompts and all(new["text"] in p for p in entity_prompts if not p.rstrip().endswith(
        (hx.ENTITY_GLEANING_INSTRUCTION, hx.ENTITY_CONTINUE_QUESTION)))
    scratch = GraphStrata.build(docs + [new], config=config, embedder=HashEmbedder(), llm=ScriptedLLM(answer_every_prompt))
    assert {e.id: (e.name, e.description, tuple(e.chunk_ids)) for e in gs.kg.entities.values()} == {
        e.id: (e.name, e.description, tuple(e.chunk_ids)) for e in scratch.kg.entities.values()
    }
