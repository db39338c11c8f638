"""LLM community reports (seed-archrag.md §1.4–1.5) and HiRAG summary entities (seed-hirag.md
§2.5) replayed with ScriptedLLM: parsing, fallbacks, budgets, concurrency, cache, HiIndex."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import threading
import time

import numpy as np
import pytest
from graphstrata import GraphStrata
from graphstrata.indexing.hirag import llm_summariser
from graphstrata.structures.hirag import HiIndexConfig, build_hi_index, hi_index
from graphstrata.structures.summaries import extractive_summariser
from graphstrata.indexing.reports import (
    ReportContext,
    community_reports,
    format_report_context,
    graph_context,
    summary_entities,
    summary_request,
)
from graphstrata.llm import LLMClient, LLMOutputError, estimate_tokens
from graphstrata.llm.prompts.archrag import COMMUNITY_REPORT_SYSTEM
from graphstrata.llm.report_parsing import (
    CommunityReport,
    parse_community_report,
    parse_summary_entity,
)
from graphstrata.models import l2_normalise
from graphstrata.testing import HashEmbedder, ScriptedLLM

REPORT = """Sure! Here is the report you asked for:
```json
{
  "title": "Bank of America and Amadeo Giannini",
  "summary": "The community centres on Bank of America, founded by Amadeo Giannini in San Francisco.",
  "rating": 7.5,
  "rating_explanation": "A major bank with a well-known founder.",
  "findings": [
    {"summary": "Giannini founded the bank", "explanation": "Amadeo Giannini founded Bank of America in 1904."},
    {"summary": "Roots in San Jose", "explanation": "Giannini was born and grew up in San Jose."},
  ]
}
```
I hope this helps."""

CTX = ReportContext(
    entities=[
        ("Bank of America", "organization", "A bank founded in 1904."),
        ("Amadeo Giannini", "person", "An Italian-American banker."),
        ("San Jose", "geo", "A city in California."),
    ],
    relations=[
        ("Amadeo Giannini", "Bank of America", "Giannini founded Bank of America."),
        ("Amadeo Giannini", "San Jose", "Giannini was born in San Jose."),
    ],
)
FALLBACK = ("Bank, Giannini", "Bank of America was founded by Amadeo Giannini.")


def client_for(script, **kw) -> tuple[ScriptedLLM, LLMClient]:
    llm = ScriptedLLM(script, **kw)
    return llm, LLMClient(llm)


# -- community reports ------------------------------------------------------------------------
def test_realistic_report_is_parsed_into_fields():
    llm, client = client_for([("", REPORT)])
    (report,) = community_reports(client, [CTX], [FALLBACK])
    assert report.title == "Bank of America and Amadeo Giannini"
    assert report.summary.startswith("The community centres on Bank of America")
    assert report.rating == 7.5
    assert report.rating_explanation == "A major bank with a well-known founder."
    assert report.findings == [
        {"summary": "Giannini founded the bank", "explanation": "Amadeo Giannini founded Bank of America in 1904."},
        {"summary": "Roots in San Jose", "explanation": "Giannini was born and grew up in San Jose."},
    ]
    assert report.text().splitlines() == [
        report.summary,
        "- Giannini founded the bank: Amadeo Giannini founded Bank of America in 1904.",
        "- Roots in San Jose: Giannini was born and grew up in San Jose.",
    ]
    prompt, system, json_mode = llm.calls[0]
    assert json_mode and "JSON" in system
    # the context tables are in the prompt, entities ranked by degree (Giannini has 2 relations)
    assert "-----Entities-----\nid,entity,type,description\n1,Amadeo Giannini,person," in prompt
    assert "-----Relationships-----\nid,source,target,description\n" in prompt
    assert client.ledger.stages["community_reports"].calls == 1
    assert client.ledger.stages["community_reports"].skipped == 0


@pytest.mark.parametrize(
    ("output", "title", "rating", "findings"),
    [
        ('{"title": "T", "summary": "S", "rating": "8/10", "findings": ["one", "two"]}', "T", 8.0,
         [{"summary": "one", "explanation": ""}, {"summary": "two", "explanation": ""}]),
        ("{'Title': 'T', 'Summary': 'S', 'Rating': 42, 'Findings': [{'title': 'a', 'description': 'b'}],}", "T", 10.0,
         [{"summary": "a", "explanation": "b"}]),
        ('{"report": {"summary": "S", "rating": "high", "findings": {"summary": "x"}}}', "", None,
         [{"summary": "x", "explanation": ""}]),
        ('[{"title": "T", "summary": "S", "rating": -3}]', "T", 0.0, []),
    ],
)
def test_forgiving_report_parse(output, title, rating, findings):
    report = parse_community_report(output)
    assert report is not None
    assert (report.title, report.rating, report.findings) == (title, rating, findings)
    assert report.summary == "S"


def test_missing_title_takes_the_fallback_title():
    _, client = client_for([("", '{"summary": "Only a summary."}')])
    (report,) = community_reports(client, [CTX], [FALLBACK])
    assert (report.title, report.summary, report.rating) == (FALLBACK[0], "Only a summary.", None)
    assert client.ledger.stages["community_reports"].skipped == 0


def test_garbage_falls_back_to_extractive_and_counts_skips():
    outputs = iter(["I am sorry, I cannot write that report.", "", '{"title": "no summary"}', '{"summary": '])
    lock = threading.Lock()

    def script(prompt, system):
        with lock:
            return next(outputs)

    llm = ScriptedLLM(script)
    client = LLMClient(llm, max_failure_share=1.0)  # the failure share stops a build: here, see the fallbacks
    fallbacks = [(f"t{i}", f"s{i}") for i in range(4)]
    contexts = [ReportContext([(f"E{i}", "", "d")], [], []) for i in range(4)]  # distinct: no cache hits
    reports = community_reports(client, contexts, fallbacks, stage="community_reports:layer_1")
    assert [(r.title, r.summary, r.rating, r.findings) for r in reports] == [(t, s, None, []) for t, s in fallbacks]
    assert reports[0].text() == "s0"
    assert client.ledger.stages["community_reports:layer_1"].skipped == 4


def test_empty_context_makes_no_call_and_length_mismatch_raises():
    llm, client = client_for([("", REPORT)])
    (report,) = community_reports(client, [ReportContext([], [], [])], [FALLBACK])
    assert (report.title, report.summary) == FALLBACK and not llm.calls
    assert "community_reports" not in client.ledger.stages
    with pytest.raises(ValueError, match="fallbacks"):
        community_reports(client, [CTX, CTX], [FALLBACK])
    with pytest.raises(ValueError, match="max_context_tokens"):
        community_reports(client, [CTX], [FALLBACK], max_context_tokens=0)


def big_context(n_entities=120, n_relations=300, sub_reports=()):
    rng = np.random.default_rng(0)
    ents = [(f"Entity {i}", "person", f"Entity {i} " + "did many notable things. " * 20) for i in range(n_entities)]
    rels = []
    for _ in range(n_relations):
        a, b = rng.choice(n_entities, size=2, replace=False)
        rels.append((f"Entity {a}", f"Entity {b}", f"Entity {a} worked with Entity {b} " + "on projects. " * 10))
    return ReportContext(ents, rels, list(sub_reports))


def test_context_is_cut_to_the_token_budget_highest_degree_first():
    ctx = big_context()
    full = format_report_context(ctx, 10**9)
    assert estimate_tokens(full) > 10_000
    for budget in (300, 1000, 4000):
        text = format_report_context(ctx, budget)
        assert estimate_tokens(text) <= budget
        assert "-----Entities-----" in text and "-----Relationships-----" in text
    degree: dict[str, int] = {}
    for s, t, _ in ctx.relations:
        degree[s] = degree.get(s, 0) + 1
        degree[t] = degree.get(t, 0) + 1
    text = format_report_context(ctx, 1000)
    names = re.findall(r"^\d+,(Entity \d+),person,", text, re.M)
    assert names and [degree[n] for n in names] == sorted((degree[n] for n in names), reverse=True)
    assert degree[names[0]] == max(degree.values())
    rels = re.findall(r"^\d+,(Entity \d+),(Entity \d+),", text, re.M)
    sums = [degree[a] + degree[b] for a, b in rels]
    assert rels and sums == sorted(sums, reverse=True)
    # the prompt sent holds the cut tables
    llm, client = client_for([("", REPORT)])
    community_reports(client, [ctx], [FALLBACK], max_context_tokens=1000)
    prompt = llm.calls[0][0]
    assert text in prompt and estimate_tokens(prompt) < 1000 + 600


def test_sub_reports_substitute_for_a_raw_context_that_does_not_fit():
    subs = [
        CommunityReport(f"Sub {i}", f"Sub-community {i} summary.", [{"summary": "f", "explanation": "e"}], float(i))
        for i in range(3)
    ]
    big = format_report_context(big_context(sub_reports=subs), 1000)
    assert big.startswith("-----Reports-----\nid,title,content,rating\n1,Sub 0,Sub-community 0 summary.,0\n")
    assert "3,Sub 2,Sub-community 2 summary.,2" in big
    assert "-----Entities-----" in big  # the rest of the budget is filled with raw rows
    assert estimate_tokens(big) <= 1000
    # a raw context that fits is used as is; a higher layer without raw rows uses the reports
    assert "Reports" not in format_report_context(dataclasses.replace(CTX, sub_reports=subs), 1000)
    only = format_report_context(ReportContext([], [], subs), 1000)
    assert only.startswith("-----Reports-----") and "Entities" not in only


def test_one_call_per_context_concurrently_then_cached():
    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def script(prompt, system):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        n = re.search(r"1,(Thing \d+),", prompt).group(1)
        return f'{{"title": "{n}", "summary": "About {n}.", "rating": 5}}'

    llm = ScriptedLLM(script)
    client = LLMClient(llm, concurrency=4)
    contexts = [ReportContext([(f"Thing {i}", "", f"thing {i}")], [], []) for i in range(8)]
    fallbacks = [("x", "y")] * 8
    reports = community_reports(client, contexts, fallbacks)
    assert len(llm.calls) == 8
    assert 2 <= state["peak"] <= 4
    assert [r.title for r in reports] == [f"Thing {i}" for i in range(8)]  # input order
    again = community_reports(client, contexts, fallbacks)
    assert len(llm.calls) == 8 and again == reports  # second run free
    stage = client.ledger.stages["community_reports"]
    assert (stage.calls, stage.cached) == (8, 8)


def test_graph_context_uses_members_relations_and_graph_degrees(corpus, embedder, small_config):
    gs = GraphStrata.build(corpus, config=small_config, embedder=embedder)
    kg = gs.kg
    hub = max(kg.entity_ids, key=lambda e: kg.nx.degree[e])
    members = [hub, *kg.neighbors(hub)[:3]]
    ctx = graph_context(kg, members, [CommunityReport("s", "t")])
    assert [e[0] for e in ctx.entities] == [kg.entities[e].name for e in members]
    assert len(ctx.relations) == len(kg.induced_relations(members)) >= 3
    assert ctx.degrees[kg.entities[hub].name] == kg.nx.degree[hub]
    assert ctx.sub_reports[0].title == "s"


# -- HiRAG summary entities ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ('("entity"<|>"Meta"<|>"company"<|>"Meta owns Facebook (since 2004)")##\n'
         '("relationship"<|>"Instagram"<|>"Meta"<|>"owned"<|>8)<|COMPLETE|>',
         ("Meta", "company", "Meta owns Facebook (since 2004)")),
        ('Here it is:\n("entity"<|>MOUNTAINEERING<|>event<|>Climbing high peaks.)##\n("entity"<|>B<|>x<|>y)',
         ("MOUNTAINEERING", "event", "Climbing high peaks.")),
        ("(entity<|>Banking<|>industry<|>The banking industry", ("Banking", "industry", "The banking industry")),
        ('{"entity_name": "New Zealand", "entity_type": "location", "description": "A country."}',
         ("New Zealand", "location", "A country.")),
        ('("relationship"<|>"A"<|>"B"<|>"r"<|>1)', None),
        ('("entity"<|><|>type<|>no name)', None),
        ("no idea", None),
    ],
)
def test_summary_entity_parse(output, expected):
    assert parse_summary_entity(output) == expected


def test_summary_request_keeps_the_first_members_within_budget():
    names = [f"Member {i}" for i in range(200)]
    descs = ["word " * 100 for _ in names]
    req = summary_request(names, descs, meta_types=("person", "event"), max_input_tokens=500)
    lines = re.findall(r'^\("(Member \d+)", ', req.prompt, re.M)
    assert lines == names[: len(lines)] and 1 <= len(lines) < 200
    assert sum(estimate_tokens(m) for m in re.findall(r"^\(\"Member.*$", req.prompt, re.M)) <= 500
    assert "Meta types: person, event" in req.prompt and not req.json_mode


def test_summary_entities_fallback_and_skip():
    _, client = client_for([("Good", '("entity"<|>Theme<|>event<|>A theme.)'), ("", "nonsense")])
    out = summary_entities(
        client, [(["Good"], ["g"]), (["Bad"], ["b"]), (["Good", "x"], ["g", ""])], [("f1", "d1"), ("f2", "d2"), ("f3", "d3")]
    )
    assert out == [("Theme", "A theme."), ("f2", "d2"), ("Theme", "A theme.")]
    assert client.ledger.stages["hirag_summaries"].skipped == 1
    _, client = client_for([("", '("entity"<|>Theme<|>event<|>)')])
    assert summary_entities(client, [(["a"], ["b"])], [("f", "d")]) == [("Theme", "d")]  # empty description


def first_member(prompt: str) -> str:
    """The first member listed under the real data (the prompt's example lists others)."""
    return re.search(r'^\("([^"]+)", ', prompt.rsplit("Entities:\n", 1)[1], re.M).group(1)


def theme_script(prompt, system):
    if system == COMMUNITY_REPORT_SYSTEM:  # HiRAG's community reports (spec §2.7)
        first = report_subject(prompt)
        return json.dumps({"title": f"Report on {first}", "summary": f"{first} leads this community.",
                           "rating": 5, "findings": [{"summary": "Hub", "explanation": f"{first} links the rest."}]})
    first = first_member(prompt)
    return f'("entity"<|>Theme of {first}<|>event<|>What {first} and the others share.)\n<|COMPLETE|>'


def report_subject(prompt: str) -> str:
    """The first entity of a report prompt's data table (the prompt's example has its own)."""
    rows = prompt.rsplit("-----Entities-----\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return next(csv.reader(rows[1:2]))[1]


def summary_calls(llm) -> int:
    return sum(system != COMMUNITY_REPORT_SYSTEM for _, system, _ in llm.calls)


@pytest.fixture()
def gs(corpus, embedder, small_config):
    return GraphStrata.build(corpus, config=small_config, embedder=embedder)


def test_hi_index_carries_the_llm_summary_entities(gs):
    offline = hi_index(gs)
    assert offline.names and all(d.startswith("Summary of") for d in offline.descriptions)
    llm, client = client_for(theme_script)
    hi = build_hi_index(gs, HiIndexConfig(summarise_fn=llm_summariser(client)))
    assert hi.node_ids == offline.node_ids  # same clusters, same nodes
    assert len(llm.calls) == len(hi.names) == client.ledger.stages["hirag_summaries"].calls
    assert all(n.startswith("Theme of ") for n in hi.names)
    assert all(d.startswith("What ") and d.endswith(" and the others share.") for d in hi.descriptions)
    assert sorted(n.removeprefix("Theme of ") for n in hi.names) == sorted(first_member(p) for p, _, _ in llm.calls)
    # summary vectors embed the LLM's name + description (spec §2.8)
    n0 = hi.n_entities
    want = l2_normalise(gs.embedder.embed([f"{n} {d}" for n, d in zip(hi.names, hi.descriptions, strict=True)]))
    assert np.allclose(hi.vectors[n0:], want, atol=1e-6)
    centroid = build_hi_index(gs, HiIndexConfig(summarise_fn=llm_summariser(client), summary_vectors="centroid"))
    assert np.allclose(centroid.vectors, offline.vectors)
    # a rebuild of the same index is free: every call comes from the response cache
    build_hi_index(gs, HiIndexConfig(summarise_fn=llm_summariser(client)))
    assert client.ledger.stages["hirag_summaries"].calls == len(llm.calls) == len(hi.names)
    assert client.ledger.stages["hirag_summaries"].cached == 2 * len(hi.names)


def test_hi_index_uses_the_engines_llm_and_keys_the_variant(gs):
    llm, client = client_for(theme_script)
    state = dataclasses.replace(gs.state, llm=client, llm_id=client.id)
    hi = hi_index(state)
    assert hi is hi_index(state) and all(n.startswith("Theme of ") for n in hi.names)
    assert summary_calls(llm) == len(hi.names)
    assert len(llm.calls) == len(hi.names) + hi.n_communities  # plus one report per community
    extractive = hi_index(state, HiIndexConfig(summarise_fn=extractive_summariser))
    assert extractive is not hi and extractive.names == hi_index(gs).names
    assert not any(n.startswith("Theme of ") for n in extractive.names)
    # a custom summariser keeps the LLM's community reports (reports and summaries are separate seams)
    assert len(extractive.report_texts) == extractive.n_communities and all(extractive.report_texts)
    before = len(llm.calls)
    hits = GraphStrata(state).retrieve("Where was Edmund Hillary born?", method="hirag", k=3, mode="local")
    assert hits and len(llm.calls) == before  # retrieval reuses the cached index


class WithLLM:
    """The same state seen with an LLM: shares the state's derived cache."""

    def __init__(self, state, llm):
        self._state, self.llm, self.llm_id = state, llm, llm.id  # as an LLM-built index

    def __getattr__(self, name):
        return getattr(self._state, name)


def test_an_offline_index_loaded_with_an_llm_keeps_its_extractive_hirag_index(gs):
    """An LLM attached to an offline-built index (to answer) does not rebuild HiRAG's index
    with LLM summaries and reports on the first HiRAG query: that would be a call per GMM
    cluster and per community at query time."""
    llm, client = client_for(theme_script)
    state = dataclasses.replace(gs.state, llm=client)
    assert state.llm_id is None
    hi = hi_index(state)
    assert llm.calls == [] and hi.names == hi_index(gs.state).names and hi.report_texts == []
    assert GraphStrata(state).retrieve("Where was Edmund Hillary born?", method="hirag", k=3)
    assert llm.calls == []


def test_derived_cache_key_separates_extractive_and_llm_indexes(gs):
    offline = hi_index(gs.state)
    _, client = client_for(theme_script)
    with_llm = hi_index(WithLLM(gs.state, client))
    assert with_llm is not offline and all(n.startswith("Theme of ") for n in with_llm.names)
    assert hi_index(gs.state) is offline


def test_hi_index_unreadable_llm_output_keeps_extractive_names(gs):
    llm, client = client_for([("", "I don't know.")])
    hi = build_hi_index(gs, HiIndexConfig(summarise_fn=llm_summariser(client)))
    offline = hi_index(gs)
    assert hi.names == offline.names and hi.descriptions == offline.descriptions
    assert client.ledger.stages["hirag_summaries"].skipped == len(hi.names) == len(llm.calls)


def test_higher_layers_summarise_the_summary_entities_below():
    """Spec §2.5: layer i's summary entities come from the descriptions of layer i−1's nodes."""
    from types import SimpleNamespace

    from graphstrata.graph import KnowledgeGraph
    from graphstrata.types import Entity

    rng = np.random.default_rng(0)  # 3 groups of 4 tight clusters of 12 entities: 2+ summary layers
    dim = 32
    groups = rng.normal(size=(3, dim)) * 6
    clusters = np.repeat(groups, 4, axis=0) + rng.normal(size=(12, dim)) * 1.5
    x = l2_normalise((np.repeat(clusters, 12, axis=0) + rng.normal(size=(144, dim)) * 0.3).astype(np.float32))
    ents = [Entity(f"e{i}", f"E{i}", f"desc {i}", [], float(144 - i)) for i in range(144)]
    engine = SimpleNamespace(kg=KnowledgeGraph(ents), vectors={"entities": x}, embedder=HashEmbedder(dim))
    llm, client = client_for(theme_script)
    config = HiIndexConfig(summarise_fn=llm_summariser(client), summary_vectors="centroid", soft_threshold=None)
    hi = build_hi_index(engine, config)
    layer_of = {n: int(hi.layer[hi.n_entities + j]) for j, n in enumerate(hi.names)}
    assert max(layer_of.values()) >= 2 and len(llm.calls) == len(hi.names)
    for name, layer in layer_of.items():
        below = name.removeprefix("Theme of ")
        if layer == 1:
            assert re.fullmatch(r"E\d+", below)
        else:
            assert layer_of[below] == layer - 1  # the first member listed is a summary entity below
    for prompt, _, _ in llm.calls:
        listed = re.findall(r'^\("([^"]+)", ', prompt.rsplit("Entities:\n", 1)[1], re.M)
        if listed[0].startswith("Theme of "):
            assert len(listed) < 12  # the nodes below, not the (≥ 24) flattened entities


def test_report_cut_short_by_the_token_limit_keeps_its_complete_fields():
    # SmolLM2-135M under a 64-token limit: the JSON object never closes
    text = (
        '```json\n{\n    "title": "LiHua and Adam",\n    "summary": "LiHua rents a room from Adam.",\n'
        '    "rating": 6.5,\n    "rating_explanation": "A small'
    )
    report = parse_community_report(text)
    assert report == CommunityReport(title="LiHua and Adam", summary="LiHua rents a room from Adam.", rating=6.5)
    assert parse_community_report('{"title": "only a title", "summ') is None  # no summary: unreadable


# -- HiRAG community reports (seed-hirag.md §2.7) ----------------------------------------------
def test_hirag_community_hit_text_is_the_llm_report(gs):
    from graphstrata.structures.hirag import extractive_community_report

    llm, client = client_for(theme_script)
    state = dataclasses.replace(gs.state, llm=client, llm_id=client.id)
    hi = hi_index(state)
    reports = [p for p, system, _ in llm.calls if system == COMMUNITY_REPORT_SYSTEM]
    assert len(reports) == hi.n_communities == client.ledger.stages["hirag_reports"].calls
    hits = [h for h in GraphStrata(state).retrieve("Where was Edmund Hillary born?", method="hirag", k=10,
                                                   mode="global") if h.kind == "community"]
    assert hits
    for h in hits:
        c = int(h.id.removeprefix("hirag:C"))
        title, body = hi.llm_report(c)
        assert h.text == f"{title}\n{body}" and h.metadata["title"] == title
        assert title.startswith("Report on ") and body.endswith("links the rest.")
        assert h.text != "\n".join(extractive_community_report(state.kg, hi, c)).strip()


def test_hirag_offline_community_text_and_arrays_are_unchanged(gs):
    from graphstrata.structures.hirag import extractive_community_report, hi_index_arrays

    hi = hi_index(gs)
    assert hi.report_texts == [] and hi.llm_report(0) is None
    assert not any(k.startswith("report_") for k in hi_index_arrays(hi))  # the stored arrays are as before
    hits = [h for h in gs.retrieve("Where was Edmund Hillary born?", method="hirag", k=10, mode="global")
            if h.kind == "community"]
    assert hits
    for h in hits:
        title, body = extractive_community_report(gs.kg, hi, int(h.id.removeprefix("hirag:C")))
        assert h.text == f"{title}\n{body}".strip() and h.metadata["title"] == title


def test_hirag_unreadable_report_falls_back_to_the_extractive_text_and_is_counted(gs):
    from graphstrata.structures.hirag import extractive_community_report

    bad = []

    def script(prompt, system):
        if system == COMMUNITY_REPORT_SYSTEM and not bad:  # the first report is unreadable
            bad.append(report_subject(prompt))
            return "I cannot write that report."
        return theme_script(prompt, system)

    llm = ScriptedLLM(script)
    client = LLMClient(llm, concurrency=1)  # one call at a time: "first" is well defined
    state = dataclasses.replace(gs.state, llm=client, llm_id=client.id)
    hi = hi_index(state)
    assert hi.n_communities >= 2 and bad
    failed = [c for c in range(hi.n_communities) if hi.llm_report(c) is None]
    assert len(failed) == 1 and client.ledger.stages["hirag_reports"].skipped == 1
    (c,) = failed
    from graphstrata.methods.hirag import HiRAG

    title, body = extractive_community_report(state.kg, hi, c)
    assert title and HiRAG()._community_hit(state, hi, c, 0.5, None).text == f"{title}\n{body}".strip()
    assert HiRAG()._community_hit(state, hi, 1 - c if c < 2 else 0, 0.5, None).text.startswith("Report on ")
    assert all(hi.llm_report(o)[0].startswith("Report on ") for o in range(hi.n_communities) if o != c)


def test_hirag_reports_persist_with_the_index_arrays(gs):
    from graphstrata.structures.hirag import hi_index_arrays, hi_index_from_arrays

    _, client = client_for(theme_script)
    hi = hi_index(dataclasses.replace(gs.state, llm=client, llm_id=client.id))
    back = hi_index_from_arrays(hi_index_arrays(hi))
    assert back.report_titles == hi.report_titles and back.report_texts == hi.report_texts
    assert all(hi.report_texts) and len(hi.report_texts) == hi.n_communities


def test_hirag_reports_can_be_turned_off(gs):
    llm, client = client_for(theme_script)
    hi = build_hi_index(dataclasses.replace(gs.state, llm=client, llm_id=client.id), HiIndexConfig(llm_reports=False))
    assert hi.report_texts == [] and summary_calls(llm) == len(llm.calls)


def test_hirag_reports_of_a_stand_in_llm_fall_back_and_are_counted_without_stopping(gs):
    """A stand-in LLM answering everything "I don't know." (the README's and cookbook's): each
    report is unreadable, exactly as ArchRAG's stage sees it (fallback, skipped, a "parse"
    failure), but HiRAG's best-effort stage keeps the extractive text instead of stopping, so an
    LLM-built index whose HiRAG index is rebuilt with such an LLM still answers HiRAG queries."""
    from graphstrata.structures.hirag import hi_index_arrays

    llm, client = client_for(lambda prompt, system: "I don't know.")
    state = dataclasses.replace(gs.state, llm=client, llm_id=client.id)
    hi = hi_index(state)
    n = hi.n_communities
    assert n >= 2 and hi.report_texts == [] and hi.llm_report(0) is None
    assert not any(k.startswith("report_") for k in hi_index_arrays(hi))  # stored as an offline one
    usage = client.ledger.stages["hirag_reports"].to_dict()
    assert usage["calls"] == n and usage["skipped"] == n
    assert usage["checked"] == n and usage["failures"] == {"parse": n}
    hits = GraphStrata(state).retrieve("Where was Edmund Hillary born?", method="hirag", k=5, mode="global")
    assert any(h.kind == "community" for h in hits)
    # ArchRAG's stage, given the same answers, stops with the guard's error (unchanged)
    with pytest.raises(LLMOutputError, match="community_reports"):
        community_reports(client, [CTX, CTX], [FALLBACK, FALLBACK])


def test_llm_build_with_a_stand_in_for_reports_keeps_extractive_hirag_reports(corpus, small_config):
    """A whole LLM build whose model cannot write reports (statistical extraction, ArchRAG
    reports off) succeeds, and build_usage counts HiRAG's fallbacks."""
    llm = ScriptedLLM(lambda prompt, system: "I don't know.")
    config = {**small_config, "llm_extraction": "statistical", "llm_community_reports": False}
    built = GraphStrata.build(corpus, config=config, embedder=HashEmbedder(), llm=llm)
    stage = built.build_usage["stages"]["hirag_reports"]
    assert stage["calls"] >= 1 and stage["skipped"] == stage["calls"] == stage["checked"]
    assert stage["failures"] == {"parse": stage["calls"]}
    assert built.retrieve("Where was Amadeo Giannini born?", method="hirag", k=3)
