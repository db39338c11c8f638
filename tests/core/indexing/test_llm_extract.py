"""LLM extraction (issue 13): LightRAG/HiRAG records with gleaning and summaries, AGRAG triples,
and the forgiving parsers, replayed with :class:`graphstrata.testing.ScriptedLLM` outputs
written to look like what real (small) models emit, broken ones included."""

from __future__ import annotations

import warnings

import pytest
from graphstrata import indexing
from graphstrata.extraction import StatisticalExtractor
from graphstrata.indexing import llm_extract
from graphstrata.indexing.llm_extract import AgragLLMExtractor, LLMExtractor
from graphstrata.llm import LLMClient, LLMOutputError, estimate_tokens
from graphstrata.llm.extraction_parsing import (
    EntityRecord,
    LLMOutputWarning,
    RelationRecord,
    parse_extraction,
    parse_triples,
)
from graphstrata.llm.prompts import agrag as agrag_prompts
from graphstrata.llm.prompts import lightrag_extract as lr
from graphstrata.testing import ScriptedLLM
from graphstrata.types import Chunk, Entity


def chunk(cid: str, text: str) -> Chunk:
    doc, _, index = cid.partition("#")
    return Chunk(cid, doc, int(index), text, 0, len(text), len(text.split()))


C1 = chunk("d1#0", "Lena Park is a Norwegian chemist. In 2004 she founded Brightwater Labs in Oslo, where she "
                   "leads its battery research.")
C2 = chunk("d1#1", "Brightwater Labs signed a supply agreement with Fjord Motors in 2015. Fjord Motors builds "
                   "electric buses in Bergen.")
C3 = chunk("d2#0", "Fjord Motors was founded by Erik Dahl. Its buses, which use Brightwater Labs batteries, run "
                   "in Oslo and Trondheim.")

# a capable model, the spec's format (quoted fields, as the reference prompt's examples do)
OUT1 = """("entity"<|>"Lena Park"<|>"person"<|>"Lena Park is a Norwegian chemist who founded Brightwater Labs in 2004.")##
("entity"<|>"Brightwater Labs"<|>"organization"<|>"Brightwater Labs is a battery research company in Oslo.")##
("entity"<|>"Oslo"<|>"geo"<|>"Oslo is the city where Brightwater Labs is based.")##
("relationship"<|>"Lena Park"<|>"Brightwater Labs"<|>"Lena Park founded Brightwater Labs and leads its research."<|>"founding, leadership"<|>9)##
("relationship"<|>"Brightwater Labs"<|>"Oslo"<|>"Brightwater Labs is located in Oslo."<|>"location"<|>7)##
<|COMPLETE|>"""  # noqa: E501

# a small model: chatter, numbered list, "|" separators, upper case, a type outside the list,
# the strength before the keywords, a word as strength
OUT2 = """Here are the extracted entities and relationships:

1. (entity | BRIGHTWATER LABS | Organization | Brightwater Labs signed a supply agreement with Fjord Motors.)
2. ("entity"<|>"Fjord Motors"<|>"organization"<|>"Fjord Motors builds electric buses in Bergen.")
3. ("entity"<|>Bergen<|>location<|>Bergen is where Fjord Motors builds its buses.)
4. ("relationship"<|>Brightwater Labs<|>Fjord Motors<|>Brightwater Labs supplies Fjord Motors since 2015.<|>8<|>supply agreement, partnership)
5. ("relationship" <|> Fjord Motors <|> Bergen <|> Fjord Motors builds electric buses in Bergen. <|> manufacturing, location <|> high)

<|COMPLETE|>"""  # noqa: E501

# a model that answers in JSON whatever it is asked
OUT3 = """```json
{
  "entities": [
    {"entity_name": "Fjord Motors", "entity_type": "organization", "entity_description": "Fjord Motors is a bus maker founded by Erik Dahl."},
    {"entity_name": "Erik Dahl", "entity_type": "person", "entity_description": "Erik Dahl founded Fjord Motors."},
    {"entity_name": "Oslo", "entity_type": "geo", "entity_description": "Oslo is the city where Brightwater Labs is based."}
  ],
  "relationships": [
    {"source_entity": "Erik Dahl", "target_entity": "Fjord Motors", "relationship_description": "Erik Dahl founded Fjord Motors.", "relationship_keywords": "founding", "relationship_strength": 9},
    {"source_entity": "Fjord Motors", "target_entity": "Brightwater Labs", "relationship_description": "Fjord Motors buses use Brightwater Labs batteries.", "relationship_keywords": "Partnership, batteries", "relationship_strength": 7},
    {"source_entity": "Fjord Motors", "target_entity": "Trondheim", "relationship_description": "Fjord Motors buses run in Trondheim.", "relationship_keywords": ["operations", "location"], "relationship_strength": "6/10"}
  ]
}
```"""  # noqa: E501


def script(first: dict[str, str], glean: dict[str, str] | None = None, check: dict[str, str] | None = None,
           summary=None):
    """A ScriptedLLM function: the answer for the chunk whose text is in the prompt, by call kind."""

    def answer(table: dict[str, str] | None, prompt: str) -> str:
        for text, out in (table or {}).items():
            if f"Text: {text}" in prompt:
                return out
        return ""

    def fn(prompt: str, system: str | None) -> str:
        if system == lr.SUMMARY_SYSTEM:
            return summary(prompt) if summary else ""
        if prompt.rstrip().endswith(lr.CONTINUE_QUESTION):
            return answer(check, prompt)
        if prompt.rstrip().endswith(lr.GLEANING_INSTRUCTION):
            return answer(glean, prompt)
        return answer(first, prompt)

    return fn


def by_id(records):
    return {r.id if isinstance(r, Entity) else (r.source, r.target): r for r in records}


def extraction_warnings(record):
    return [w for w in record if issubclass(w.category, LLMOutputWarning)]


# ---------------------------------------------------------------------------------------------
# LLMExtractor: merge
# ---------------------------------------------------------------------------------------------
def test_records_from_three_formats_merge_across_chunks():
    llm = ScriptedLLM(script({C1.text: OUT1, C2.text: OUT2, C3.text: OUT3}))
    client = LLMClient(llm)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        entities, relations = LLMExtractor(client, gleaning=0).extract([C1, C2, C3])
    assert not extraction_warnings(rec)
    assert [e.id for e in entities] == sorted(e.id for e in entities)
    ents = by_id(entities)
    assert set(ents) == {"lena park", "brightwater labs", "oslo", "fjord motors", "bergen", "erik dahl", "trondheim"}

    bw = ents["brightwater labs"]
    assert (bw.name, bw.type, bw.weight) == ("Brightwater Labs", "organization", 2.0)  # tie: first surface form
    assert bw.chunk_ids == ["d1#0", "d1#1"]
    assert bw.description == (
        "Brightwater Labs is a battery research company in Oslo.\n"
        "Brightwater Labs signed a supply agreement with Fjord Motors."
    )
    oslo = ents["oslo"]  # the same description in two chunks is kept once
    assert (oslo.type, oslo.chunk_ids, oslo.weight) == ("geo", ["d1#0", "d2#0"], 2.0)
    assert oslo.description == "Oslo is the city where Brightwater Labs is based."
    assert ents["bergen"].type == "location"  # a type outside the list is kept
    assert ents["fjord motors"].chunk_ids == ["d1#1", "d2#0"]
    assert (ents["erik dahl"].name, ents["erik dahl"].type) == ("Erik Dahl", "person")
    # an endpoint no entity record names becomes an untyped entity (spec §1.7)
    tr = ents["trondheim"]
    assert (tr.name, tr.type, tr.chunk_ids, tr.weight) == ("Trondheim", "", ["d2#0"], 1.0)
    assert tr.description == "Fjord Motors buses run in Trondheim."

    assert [(r.source, r.target) for r in relations] == sorted((r.source, r.target) for r in relations)
    rels = by_id(relations)
    assert set(rels) == {
        ("brightwater labs", "lena park"),
        ("brightwater labs", "oslo"),
        ("brightwater labs", "fjord motors"),
        ("bergen", "fjord motors"),
        ("erik dahl", "fjord motors"),
        ("fjord motors", "trondheim"),
    }
    supply = rels[("brightwater labs", "fjord motors")]
    assert supply.weight == 15.0  # 8 + 7 over two chunks
    assert supply.keywords == "supply agreement, partnership, batteries"  # "Partnership" merged
    assert supply.chunk_ids == ["d1#1", "d2#0"]
    assert supply.description == (
        "Brightwater Labs supplies Fjord Motors since 2015.\nFjord Motors buses use Brightwater Labs batteries."
    )
    assert rels[("bergen", "fjord motors")].weight == 1.0  # "high" is no number: default strength
    assert rels[("bergen", "fjord motors")].keywords == "manufacturing, location"
    assert (rels[("fjord motors", "trondheim")].weight, rels[("fjord motors", "trondheim")].keywords) == (
        6.0, "operations, location")
    assert rels[("brightwater labs", "lena park")].keywords == "founding, leadership"
    assert client.ledger.stages["extract"].calls == 3
    assert client.ledger.stages["extract"].skipped == 0


def test_type_by_majority_vote_and_name_by_most_frequent_surface():
    texts = ["Bergen is rainy.", "Bergen has a port.", "BERGEN lies on the coast."]
    outs = [
        '("entity"<|>Bergen<|>location<|>Bergen is a rainy city.)##',
        '("entity"<|>BERGEN<|>geo<|>Bergen has a port.)##',
        '("entity"<|>BERGEN<|>geo<|>Bergen lies on the coast.)##',
    ]
    chunks = [chunk(f"d{i}#0", t) for i, t in enumerate(texts)]
    llm = ScriptedLLM(script(dict(zip(texts, outs, strict=True))))
    entities, relations = LLMExtractor(llm, gleaning=0).extract(chunks)
    assert relations == []
    [bergen] = entities
    assert (bergen.id, bergen.name, bergen.type, bergen.weight) == ("bergen", "BERGEN", "geo", 3.0)
    assert bergen.chunk_ids == ["d0#0", "d1#0", "d2#0"]


def test_titles_are_shown_to_the_model():
    llm = ScriptedLLM(script({C3.text: OUT3}))
    LLMExtractor(llm, gleaning=0).extract([C3], titles={"d2": "Fjord Motors", "d1": "ignored"})
    assert "Document title: Fjord Motors\nText: " in llm.calls[0][0]
    llm = ScriptedLLM(script({C3.text: OUT3}))
    LLMExtractor(llm, gleaning=0).extract([C3], titles={"d2": "week1/notes_2024"})  # file-like: no title
    assert "Document title" not in llm.calls[0][0]


# ---------------------------------------------------------------------------------------------
# malformed output, skipped counts, the empty graph
# ---------------------------------------------------------------------------------------------
BROKEN = """("entity"<|>"Ada Lovelace"<|>"person"<|>"Ada Lovelace wrote the first published algorithm.")##
("entity"<|><|>"person"<|>"A record without a name.")##
("relationship"<|>"Ada Lovelace")##
("relationship"<|>"Ada Lovelace"<|>"ada  lovelace"<|>"She is herself."<|>"identity"<|>3)##
("entitty"<|>"Charles Babbage"<|>"person"<|>"A misspelt record kind.")##
("entity"<|>"Analytical Engine"<|>"technology"<|>"A mechanical computer designed by Charles Babbage.")##
("relationship"<|>"Ada Lovelace"<|>"Analytical Engine"<|>"Ada Lovelace wrote notes on the Analytical Engine."<|>"documentation"<|>"11")##
I hope this helps! Let me know if you need anything else.
<|COMPLETE|>"""  # noqa: E501


def test_malformed_records_are_skipped_counted_and_warned_once():
    c = chunk("d#0", "Ada Lovelace wrote notes on the Analytical Engine of Charles Babbage.")
    client = LLMClient(ScriptedLLM(script({c.text: BROKEN})))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        entities, relations = LLMExtractor(client, gleaning=0).extract([c])
    assert [e.id for e in entities] == ["ada lovelace", "analytical engine"]
    assert by_id(entities)["analytical engine"].type == "technology"
    [rel] = relations
    assert (rel.source, rel.target, rel.weight, rel.keywords) == (
        "ada lovelace", "analytical engine", 10.0, "documentation")  # strength 11 clipped to 10
    # no name, one endpoint, a self-relation, an unknown kind; the closing chatter is not counted
    assert client.ledger.stages["extract"].skipped == 4
    [w] = extraction_warnings(rec)
    assert "skipped 4 unreadable record(s)" in str(w.message) and "'extract'" in str(w.message)


def test_no_entities_from_any_chunk_raises_with_counts():
    a, b = chunk("d#0", "Nothing here."), chunk("d#1", "Nor here.")
    outs = {a.text: "I'm sorry, but I cannot find any entities in this text.",
            b.text: '("relationship"<|>"A")##\n("entity"<|><|>x)##'}
    client = LLMClient(ScriptedLLM(script(outs)), max_failure_share=1.0)
    with pytest.raises(ValueError, match=r"no entities from 2 chunk\(s\) \(2 record\(s\) skipped"):
        LLMExtractor(client, gleaning=0).extract([a, b])
    assert client.ledger.stages["extract"].skipped == 2
    # at the default threshold the failure share stops the stage first, with the model named
    client = LLMClient(ScriptedLLM(script(outs)))
    with pytest.raises(LLMOutputError, match=r"'scripted' failed stage 'extract': 2 of 2 answers \(100%\)"):
        LLMExtractor(client, gleaning=0).extract([a, b])
    assert client.ledger.stages["extract"].failures == {"parse": 2}


def test_no_chunks_no_calls():
    llm = ScriptedLLM()
    assert LLMExtractor(llm).extract([]) == ([], [])
    assert AgragLLMExtractor(llm).extract([]) == ([], [])
    assert llm.calls == []


# ---------------------------------------------------------------------------------------------
# gleaning
# ---------------------------------------------------------------------------------------------
HOPPER = chunk("h#0", "Grace Hopper programmed the Harvard Mark I and later led the design of COBOL.")
HOPPER_1 = """("entity"<|>"Grace Hopper"<|>"person"<|>"Grace Hopper was a computer scientist who programmed the Harvard Mark I.")##
("entity"<|>"Harvard Mark I"<|>"technology"<|>"The Harvard Mark I was an early electromechanical computer.")##
("relationship"<|>"Grace Hopper"<|>"Harvard Mark I"<|>"Grace Hopper programmed the Harvard Mark I."<|>"programming"<|>8)##
<|COMPLETE|>"""  # noqa: E501
# small models repeat earlier records when asked for the missing ones
HOPPER_2 = """("entity"<|>"Grace Hopper"<|>"person"<|>"Grace Hopper was a computer scientist who programmed the Harvard Mark I.")##
("relationship"<|>"Grace Hopper"<|>"Harvard Mark I"<|>"Grace Hopper was one of the first programmers of the Harvard Mark I."<|>"programming, early computing"<|>6)##
("entity"<|>"COBOL"<|>"technology"<|>"COBOL is a programming language whose design Grace Hopper led.")##
("relationship"<|>"Grace Hopper"<|>"COBOL"<|>"Grace Hopper led the design of COBOL."<|>"language design"<|>9)##
<|COMPLETE|>"""  # noqa: E501


def test_gleaning_continues_the_conversation_and_merges_its_records():
    llm = ScriptedLLM(script({HOPPER.text: HOPPER_1}, glean={HOPPER.text: HOPPER_2}))
    client = LLMClient(llm)
    entities, relations = LLMExtractor(client).extract([HOPPER])  # gleaning=1 by default
    assert len(llm.calls) == 2
    glean_prompt, system, _ = llm.calls[1]
    assert system == lr.EXTRACT_SYSTEM
    assert glean_prompt.startswith(llm.calls[0][0].rstrip("\n"))  # the first prompt ...
    assert HOPPER_1.strip() in glean_prompt  # ... its answer ...
    assert glean_prompt.rstrip().endswith(lr.GLEANING_INSTRUCTION)  # ... and "some were missed"
    assert client.ledger.stages["extract"].calls == 1
    assert client.ledger.stages["extract:gleaning"].calls == 1

    ents = by_id(entities)
    assert set(ents) == {"grace hopper", "harvard mark i", "cobol"}
    hopper = ents["grace hopper"]  # repeated by the gleaning pass: still one mention, one description
    assert (hopper.weight, hopper.chunk_ids) == (1.0, ["h#0"])
    assert hopper.description == "Grace Hopper was a computer scientist who programmed the Harvard Mark I."
    rels = by_id(relations)
    mark = rels[("grace hopper", "harvard mark i")]
    assert mark.weight == 8.0  # the repeat in the same chunk is not a new mention: max, not 14
    assert mark.keywords == "programming, early computing"
    assert mark.description == (
        "Grace Hopper programmed the Harvard Mark I.\n"
        "Grace Hopper was one of the first programmers of the Harvard Mark I."
    )
    assert rels[("cobol", "grace hopper")].weight == 9.0


def test_gleaning_beyond_one_asks_whether_to_go_on():
    other = chunk("o#0", "Alan Turing worked at Bletchley Park.")
    first = {HOPPER.text: HOPPER_1, other.text: '("entity"<|>"Alan Turing"<|>"person"<|>"A mathematician.")##'}
    glean = {HOPPER.text: HOPPER_2, other.text: '("entity"<|>"Bletchley Park"<|>"geo"<|>"A codebreaking site.")##'}
    check = {HOPPER.text: '"Yes."', other.text: "NO"}
    llm = ScriptedLLM(script(first, glean, check))
    client = LLMClient(llm)
    entities, _ = LLMExtractor(client, gleaning=3).extract([HOPPER, other])
    kinds = [(p.rstrip().endswith(lr.CONTINUE_QUESTION), HOPPER.text in p) for p, _, _ in llm.calls]
    # Hopper: extract, glean, check(yes), glean, check(yes), glean; other: extract, glean, check(no)
    assert sum(1 for is_check, hopper in kinds if hopper and not is_check) == 4
    assert sum(1 for is_check, hopper in kinds if hopper and is_check) == 2
    assert sum(1 for is_check, hopper in kinds if not hopper and not is_check) == 2
    assert sum(1 for is_check, hopper in kinds if not hopper and is_check) == 1
    assert client.ledger.stages["extract:gleaning"].calls == 7  # Hopper 3 passes + 2 checks, the other 1 + 1
    third = [p for p, _, _ in llm.calls if HOPPER.text in p and p.count(lr.GLEANING_INSTRUCTION) == 3]
    assert len(third) == 1  # the third pass sees both earlier gleaning answers
    assert {"bletchley park", "cobol"} <= {e.id for e in entities}


# ---------------------------------------------------------------------------------------------
# summaries and the cache
# ---------------------------------------------------------------------------------------------
LONG_A = chunk("l#0", "Oslo is the capital of Norway.")
LONG_B = chunk("l#1", "Oslo hosts the Nobel Peace Prize ceremony of Norway.")
OSLO_A = '("entity"<|>Oslo<|>geo<|>Oslo is the capital and most populous city of Norway.)##\n("entity"<|>Norway<|>geo<|>A country.)##'  # noqa: E501
OSLO_B = '("entity"<|>Oslo<|>geo<|>Oslo hosts the Nobel Peace Prize ceremony every December.)##\n("entity"<|>Nobel Peace Prize<|>event<|>A prize.)##'  # noqa: E501
OSLO_JOINED = (
    "Oslo is the capital and most populous city of Norway.\nOslo hosts the Nobel Peace Prize ceremony every December."
)


@pytest.mark.parametrize("margin, summarised", [(0, True), (1, False)])
def test_summary_only_from_the_trigger_up(margin, summarised):
    trigger = estimate_tokens(OSLO_JOINED) + margin
    outs = {LONG_A.text: OSLO_A, LONG_B.text: OSLO_B}
    llm = ScriptedLLM(script(outs, summary=lambda p: " Oslo is Norway's capital. "))
    client = LLMClient(llm)
    entities, _ = LLMExtractor(client, gleaning=0, summary_trigger_tokens=trigger).extract([LONG_A, LONG_B])
    summaries = [(p, s) for p, s, _ in llm.calls if s == lr.SUMMARY_SYSTEM]
    oslo = by_id(entities)["oslo"]
    if summarised:
        [(prompt, _)] = summaries  # Norway and the prize stay under the trigger
        assert '"Oslo"' in prompt
        assert "- Oslo is the capital and most populous city of Norway.\n- Oslo hosts the Nobel" in prompt
        assert oslo.description == "Oslo is Norway's capital."
        assert client.ledger.stages["extract:summaries"].calls == 1
    else:
        assert summaries == []
        assert oslo.description == OSLO_JOINED
        assert "extract:summaries" not in client.ledger.stages


def test_empty_summary_keeps_the_joined_descriptions():
    llm = ScriptedLLM(script({LONG_A.text: OSLO_A, LONG_B.text: OSLO_B}, summary=lambda p: "   "))
    client = LLMClient(llm)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        entities, _ = LLMExtractor(client, gleaning=0, summary_trigger_tokens=10).extract([LONG_A, LONG_B])
    assert by_id(entities)["oslo"].description == OSLO_JOINED
    assert client.ledger.stages["extract:summaries"].skipped == 1
    assert len(extraction_warnings(rec)) == 1


def test_relation_descriptions_are_summarised_too():
    outs = {LONG_A.text: '("relationship"<|>Oslo<|>Norway<|>Oslo is the capital and most populous city of Norway.<|>capital<|>9)##',  # noqa: E501
            LONG_B.text: '("relationship"<|>Norway<|>Oslo<|>Norway has governed from Oslo since the fourteenth century.<|>government<|>8)##'}  # noqa: E501
    llm = ScriptedLLM(script(outs, summary=lambda p: "Oslo is the capital of Norway."))
    entities, relations = LLMExtractor(llm, gleaning=0, summary_trigger_tokens=20).extract([LONG_A, LONG_B])
    [rel] = relations
    assert (rel.source, rel.target, rel.weight) == ("norway", "oslo", 17.0)
    assert rel.description == "Oslo is the capital of Norway."
    prompts = [p for p, s, _ in llm.calls if s == lr.SUMMARY_SYSTEM]
    assert any('"Norway and Oslo"' in p for p in prompts)
    # the endpoints (no entity records) carry the relation's descriptions, summarised as well
    assert by_id(entities)["oslo"].type == ""


def test_second_extract_is_answered_from_the_cache():
    llm = ScriptedLLM(script({C1.text: OUT1, C2.text: OUT2, C3.text: OUT3}, glean={C1.text: HOPPER_2},
                             summary=lambda p: "A summary."))
    client = LLMClient(llm)
    extractor = LLMExtractor(client, summary_trigger_tokens=15)
    first = extractor.extract([C1, C2, C3])
    n = len(llm.calls)
    assert any(s == lr.SUMMARY_SYSTEM for _, s, _ in llm.calls)
    second = extractor.extract([C1, C2, C3])
    assert len(llm.calls) == n  # zero new calls
    assert second == first
    stages = client.ledger.stages
    assert stages["extract"].cached == 3 and stages["extract:gleaning"].cached == 3
    assert stages["extract:summaries"].cached == stages["extract:summaries"].calls > 0


def test_plain_callable_llm_and_argument_checks():
    entities, _ = LLMExtractor(lambda prompt: OUT1, gleaning=0).extract([C1])
    assert "lena park" in {e.id for e in entities}
    for kwargs in ({"gleaning": -1}, {"entity_types": []}, {"summary_trigger_tokens": 0},
                   {"summary_max_tokens": 0}, {"language": " "}, {"gleaning": True}):
        with pytest.raises(ValueError):
            LLMExtractor(ScriptedLLM(), **kwargs)
    with pytest.raises(TypeError):
        LLMExtractor(42)


def test_indexing_package_exports_the_llm_extractors():
    assert indexing.LLMExtractor is LLMExtractor
    assert indexing.AgragLLMExtractor is AgragLLMExtractor
    assert llm_extract.STAGE_EXTRACT == "extract"


# ---------------------------------------------------------------------------------------------
# the forgiving parser
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, entities, relations, skipped",
    [
        pytest.param(  # the paper's delimiters
            '("entity"<|>Ada<|>person<|>A mathematician.)*****("entity"<|>Byron<|>person<|>A poet.)*****'
            '("relationship"<|>Ada<|>Byron<|>Byron was Ada\'s father.<|>family<|>9)<|>[COMPLETE]<|>',
            [EntityRecord("Ada", "person", "A mathematician."), EntityRecord("Byron", "person", "A poet.")],
            [RelationRecord("Ada", "Byron", "Byron was Ada's father.", "family", 9.0)], 0, id="paper-delimiters"),
        pytest.param(  # HiRAG: relationships without keywords
            '("relationship"<|>"Ada"<|>"Byron"<|>"Byron was her father."<|>7)',
            [], [RelationRecord("Ada", "Byron", "Byron was her father.", "", 7.0)], 0, id="hirag-5-fields"),
        pytest.param(  # missing parentheses, spaced and half delimiters, odd case, bold, bullets
            '- **Entity** < | > Ada < | > PERSON < | > A mathematician (born 1815)\n'
            '* ENTITY<|Byron|>person<|>A poet.\n'
            'entity: Menabrea<|>person<|>An engineer.\n'
            '2) "Relationship" | Ada | Menabrea | Ada translated his paper. | translation | 8',
            [EntityRecord("Ada", "person", "A mathematician (born 1815)"), EntityRecord("Byron", "person", "A poet."),
             EntityRecord("Menabrea", "person", "An engineer.")],
            [RelationRecord("Ada", "Menabrea", "Ada translated his paper.", "translation", 8.0)], 0,
            id="near-miss-delimiters"),
        pytest.param(  # Python tuples, several records on one line, HTML entities
            '("entity", "AT&amp;T", "organization", "A telephone company.")'
            '("entity", "Bell", "person", "An inventor.")\n'
            "('relationship', 'Bell', 'AT&T', 'Bell founded the company.', 'founding', 9)",
            [EntityRecord("AT&T", "organization", "A telephone company."),
             EntityRecord("Bell", "person", "An inventor.")],
            [RelationRecord("Bell", "AT&T", "Bell founded the company.", "founding", 9.0)], 0, id="python-tuples"),
        pytest.param(  # missing fields: no description, no type, no strength; content keywords ignored
            '("entity"<|>"Ada")##("entity"<|>"Byron"<|>"person")##("relationship"<|>"Ada"<|>"Byron")##'
            '("content_keywords"<|>"poetry, mathematics")##',
            [EntityRecord("Ada"), EntityRecord("Byron", "person")], [RelationRecord("Ada", "Byron")], 0,
            id="missing-fields"),
        pytest.param(  # strengths: fraction, labelled, out of range both ways
            '("relationship"<|>A<|>B<|>d<|>k<|>8/10)\n("relationship"<|>A<|>C<|>d<|>k<|>strength: 6)\n'
            '("relationship"<|>A<|>D<|>d<|>k<|>0)\n("relationship"<|>A<|>E<|>d<|>k<|>42.5)',
            [], [RelationRecord("A", "B", "d", "k", 8.0), RelationRecord("A", "C", "d", "k", 6.0),
                 RelationRecord("A", "D", "d", "k", 1.0), RelationRecord("A", "E", "d", "k", 10.0)], 0,
            id="strengths"),
        pytest.param(  # a JSON list of records with their kind in "type"
            'Sure, here is the JSON:\n[{"type": "entity", "name": "Ada", "entity_type": "Person",'
            ' "description": "A mathematician."},'
            ' {"type": "relationship", "source": "Ada", "target": "Byron", "weight": 4}, {"type": "entity"}, "oops"]',
            [EntityRecord("Ada", "person", "A mathematician.")], [RelationRecord("Ada", "Byron", "", "", 4.0)], 2,
            id="json-list"),
        pytest.param(  # JSON cut off mid-record: the complete records are kept
            '{"entities": [{"name": "Ada", "type": "person", "description": "x"}, {"name": "Byron", "type": "person"}],'
            ' "relationships": [{"source": "Ada", "target": "Byron", "strength": 9}, {"source": "Ada", "tar',
            [EntityRecord("Ada", "person", "x"), EntityRecord("Byron", "person")],
            [RelationRecord("Ada", "Byron", "", "", 9.0)],
            0, id="json-truncated"),
        pytest.param(  # pseudo-JSON with single quotes and a trailing comma
            "{'entities': [{'name': 'Ada', 'type': 'person'},], 'relationships': []}",
            [EntityRecord("Ada", "person")], [], 0, id="json-single-quotes"),
        pytest.param("", [], [], 0, id="empty"),
        pytest.param("I could not find any entities in this text.", [], [], 0, id="chatter-only"),
        pytest.param('("entity"<|><|>x)\n(foo<|>bar)\n("relationship"<|>A)', [], [], 3, id="all-broken"),
    ],
)
def test_parse_extraction(text, entities, relations, skipped):
    parsed = parse_extraction(text)
    assert parsed.entities == entities
    assert parsed.relations == relations
    assert parsed.skipped == skipped


@pytest.mark.parametrize(
    "text, triples, skipped",
    [
        pytest.param('{"triples": [["Ada", "was born in", "London"], ["Ada", "wrote", "Notes", "extra"],'
                     ' ["Ada", "", "x"]]}',
                     [("Ada", "was born in", "London")], 2, id="json"),
        pytest.param('```json\n{"named_entities": ["Ada"]}\n'
                     '{"triples": [["Ada", "met", "Babbage"], ["Babbage", "built", "the Di',
                     [("Ada", "met", "Babbage")], 0, id="echo-and-truncated"),
        pytest.param("{'triples': [('Ada', 'met', 'Babbage'),]}", [("Ada", "met", "Babbage")], 0, id="python-literal"),
        pytest.param('[{"subject": "Ada", "predicate": "met", "object": "Babbage"}, ["Ada", 1815, "born"]]',
                     [("Ada", "met", "Babbage"), ("Ada", "1815", "born")], 0, id="objects-and-bare-list"),
        pytest.param("Here are the triples:\n(Ada, met, Babbage)\n"
                     "- Ada | translated | Menabrea's paper\nAda <|> wrote\n",
                     [("Ada", "met", "Babbage"), ("Ada", "translated", "Menabrea's paper")], 1, id="lines"),
        pytest.param("No facts.", [], 0, id="none"),
    ],
)
def test_parse_triples(text, triples, skipped):
    parsed = parse_triples(text)
    assert parsed.triples == triples
    assert parsed.skipped == skipped


# ---------------------------------------------------------------------------------------------
# AGRAG
# ---------------------------------------------------------------------------------------------
A1 = chunk("a#0", "Lena Park founded Brightwater Labs in Oslo. Brightwater Labs makes batteries.")
A2 = chunk("a#1", "Fjord Motors buys batteries from Brightwater Labs. Erik Dahl runs Fjord Motors and often meets "
                  "the founder of Brightwater Labs.")
T1 = """```json
{"triples": [["Lena Park", "founded", "Brightwater Labs"], ["Brightwater Labs", "is located in", "Oslo"],
             ["Brightwater Labs", "makes", "batteries"], ["Lena Park", "founded", "Brightwater Labs"]]}
```"""
T2 = """{"triples": [["Fjord Motors", "buys batteries from", "Brightwater Labs"], ["Erik Dahl", "runs", "Fjord Motors"],
 ["Fjord Motors", "buys", "batteries"], ["Brightwater Labs", "supplies", "Fjord Motors"],
 ["Erik Dahl", "meets", "Lena Park"], ["Erik Dahl"], ["it", "runs", "it"]]}"""


def triple_script(outs: dict[str, str]):
    def fn(prompt: str, system: str | None) -> str:
        for text, out in outs.items():
            if f"```\n{text}\n```" in prompt:
                return out
        return ""

    return fn


def test_agrag_keeps_statistical_entities_and_takes_relations_from_triples():
    stat = StatisticalExtractor(top_n=0, use_titles=False)
    stat_entities, stat_relations = stat.extract([A1, A2])
    assert ("lena park", "oslo") in by_id(stat_relations)  # a co-occurrence the triples do not state
    llm = ScriptedLLM(triple_script({A1.text: T1, A2.text: T2}))
    client = LLMClient(llm)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        entities, relations = AgragLLMExtractor(client, stat).extract([A1, A2])

    for _, system, json_mode in llm.calls:
        assert system == agrag_prompts.TRIPLES_SYSTEM and json_mode
    first_prompt = next(p for p, _, _ in llm.calls if A1.text in p)
    hints = sorted(e.name for e in stat_entities if "a#0" in e.chunk_ids)
    assert '{"named_entities": ' + str(hints).replace("'", '"') in first_prompt

    ents = by_id(entities)
    stat_ents = by_id(stat_entities)
    assert set(ents) == set(stat_ents) | {"batteries"}
    for key, e in stat_ents.items():
        if key != "lena park":
            assert ents[key] == e  # kept as they are
    lena = ents["lena park"]  # named by a triple of a#1: that chunk joins its chunk ids
    assert lena.chunk_ids == ["a#0", "a#1"]
    assert (lena.description, lena.weight) == (stat_ents["lena park"].description, stat_ents["lena park"].weight)
    batteries = ents["batteries"]  # a triple endpoint that is no statistical entity
    assert (batteries.type, batteries.chunk_ids, batteries.weight) == ("", ["a#0", "a#1"], 2.0)
    assert batteries.description == "Brightwater Labs makes batteries\nFjord Motors buys batteries"

    rels = by_id(relations)
    assert set(rels) == {
        ("brightwater labs", "lena park"),
        ("brightwater labs", "oslo"),
        ("batteries", "brightwater labs"),
        ("brightwater labs", "fjord motors"),
        ("erik dahl", "fjord motors"),
        ("batteries", "fjord motors"),
        ("erik dahl", "lena park"),
    }
    founded = rels[("brightwater labs", "lena park")]
    assert (founded.weight, founded.keywords) == (1.0, "founded")
    assert founded.description == "Lena Park founded Brightwater Labs"  # the sentence keeps the direction
    supply = rels[("brightwater labs", "fjord motors")]  # parallel facts are kept
    assert (supply.weight, supply.keywords) == (2.0, "buys batteries from, supplies")
    assert supply.description == (
        "Fjord Motors buys batteries from Brightwater Labs\nBrightwater Labs supplies Fjord Motors"
    )
    assert supply.chunk_ids == ["a#1"]
    assert client.ledger.stages["extract:triples"].skipped == 2  # a one-element triple and a self-relation
    [w] = extraction_warnings(rec)
    assert "skipped 2" in str(w.message)


def test_agrag_without_any_triple_warns_and_keeps_the_statistical_entities():
    stat = StatisticalExtractor(top_n=0, use_titles=False)
    client = LLMClient(ScriptedLLM(default="I am sorry, I cannot help with that."))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        entities, relations = AgragLLMExtractor(client, stat).extract([A1, A2])
    assert relations == []
    assert entities == stat.extract([A1, A2])[0]
    [w] = extraction_warnings(rec)
    assert "no usable triple for 2 chunk(s)" in str(w.message)
    # cached: a second run makes no new call
    calls = len(client.llm.calls)
    with pytest.warns(LLMOutputWarning, match="no usable triple"):
        AgragLLMExtractor(client, stat).extract([A1, A2])
    assert len(client.llm.calls) == calls == 2


def test_agrag_empty_graph_raises():
    blank = chunk("b#0", "and or but if then")
    with pytest.raises(ValueError, match=r"no entities from 1 chunk\(s\)"):
        AgragLLMExtractor(ScriptedLLM(default='{"triples": []}'), StatisticalExtractor(top_n=0)).extract([blank])


# --- small-model mode: the short prompt and plain-language list answers ------------------------
@pytest.mark.parametrize(
    "output, expected",
    [
        ("The people in this text are LiHua, WolfgangSchulz, and WolfgangSchulz.",
         [("LiHua", "person"), ("WolfgangSchulz", "person"), ("WolfgangSchulz", "person")]),
        ("The person is: LiHua", [("LiHua", "person")]),
        ("The people and places in this conversation are: LiHua, WolfgangSchulz, and the person who loves the city.",
         [("LiHua", "person"), ("WolfgangSchulz", "person")]),
        ("The people and places in this text are:\n\n* LiHua: a traveller.\n* Adam: the landlord",
         [("LiHua", "person"), ("Adam", "person")]),
        ("People:\n- LiHua: new in town\nPlaces:\n- Paris - a city\nOrganizations:\n1. Acme Corp: a company",
         [("LiHua", "person"), ("Paris", "geo"), ("Acme Corp", "organization")]),
        ("The organizations, people, places, and events named in this text are:\n1. LiHua: The person who "
         "wrote the text.\n2. Acme: a company in town.\n3. Oslo: Oslo is where they meet.",
         [("LiHua", "person"), ("Acme", "organization"), ("Oslo", "organization")]),
        ("LiHua: Hey! Just wanted to let you know that I arrived.", []),  # chatter copied from the text
        ("- LiHua: a bullet without a kind line", []),
    ],
)
def test_list_answers_of_small_models_become_typed_entities(output, expected):
    parsed = parse_extraction(output)
    assert [(e.name, e.type) for e in parsed.entities] == expected
    assert not parsed.relations and parsed.skipped == 0


def test_list_answer_descriptions_and_custom_types():
    parsed = parse_extraction("The people are:\n- Ana: a chemist", ("person",))
    assert parsed.entities == [EntityRecord("Ana", "person", "a chemist")]
    assert parse_extraction("The people are Ana.", ("organization",)).entities == []  # kind not offered
    parsed = parse_extraction("The vessels in this text are Argo and Nautilus.", ("vessel",))
    assert [(e.name, e.type) for e in parsed.entities] == [("Argo", "vessel"), ("Nautilus", "vessel")]


def test_records_win_over_a_list_answer():
    text = 'The people are Bob.\n("entity"<|>Ana<|>person<|>A chemist.)##'
    assert [e.name for e in parse_extraction(text).entities] == ["Ana"]


def test_short_prompt_has_no_example_and_names_the_kinds():
    prompt = lr.extract_prompt("Ana met Bob in Oslo.", lr.DEFAULT_ENTITY_TYPES, title="Doc", examples=False)
    assert "Mara Ilves" not in prompt and "<|>" not in prompt
    assert "Document title: Doc\nText: Ana met Bob in Oslo." in prompt
    assert "people, organizations, places and events" in prompt
    assert "Mara Ilves" in lr.extract_prompt("Ana met Bob.", lr.DEFAULT_ENTITY_TYPES)  # default unchanged


def test_extractor_without_examples_sends_the_short_prompt_and_reads_lists():
    llm = ScriptedLLM([("Who are the", "The people in this text are Ana and Bob.")])
    entities, relations = LLMExtractor(llm, gleaning=0, examples=False).extract([chunk("d#0", "Ana met Bob.")])
    assert [(e.name, e.type) for e in entities] == [("Ana", "person"), ("Bob", "person")]
    assert relations == []
    ((prompt, system, _),) = llm.calls
    assert system == lr.EXTRACT_SYSTEM_SHORT and "Mara Ilves" not in prompt


def test_config_prompt_examples_reaches_the_extractor():
    from graphstrata import GraphStrataConfig
    from graphstrata.indexing import extractor

    assert GraphStrataConfig().llm_prompt_examples is True
    config = GraphStrataConfig(llm_prompt_examples=False)
    assert extractor(config, LLMClient.of(ScriptedLLM()), False).examples is False
