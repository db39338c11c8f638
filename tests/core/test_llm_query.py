"""Query-time LLM steps inside retrieval (issue 13): LightRAG's keyword extraction
(seed-lightrag.md §2.3) and AGRAG's fact filter (seed-agrag.md §2.2), through a built index,
with the universal ``llm`` method option; forgiving parsing with offline fallback."""

from __future__ import annotations

import json

import pytest
from graphstrata import GraphStrata
from graphstrata.llm import LLMClient, LLMError
from graphstrata.llm.prompts.agrag_query import parse_fact_filter
from graphstrata.llm.prompts.lightrag_query import parse_keywords
from graphstrata.methods import METHODS
from graphstrata.methods.agrag import AGRAG
from graphstrata.methods.keywords import offline_keywords
from graphstrata.methods.lightrag import LightRAG
from graphstrata.models import embed_query
from graphstrata.testing import ScriptedLLM

Q = "Where was Edmund Hillary born?"
KEYWORDS = {"high_level_keywords": ["Birthplaces"], "low_level_keywords": ["Auckland"]}


@pytest.fixture()
def gs(corpus, embedder, small_config):
    return GraphStrata.build(corpus, config=small_config, embedder=embedder)


def client_of(script=(), default="", attempts=5):
    llm = ScriptedLLM(script, default=default)
    return LLMClient(llm, attempts=attempts), llm


class WithLLM:
    """An engine state with an ``llm`` attribute (the state's own field, stand-in)."""

    def __init__(self, state, llm):
        self._state = state
        self.llm = llm

    def __getattr__(self, name):
        return getattr(self._state, name)


def context(gs, **options):
    qvec = embed_query(gs.state.embedder, Q)
    return LightRAG().context(gs.state, Q, qvec, mode="local", **options)


def stage(client, name):
    return client.ledger.to_dict()["stages"].get(name, {})


def facts_of(hits):
    return [(h.metadata["source"], h.metadata["target"]) for h in hits if h.kind == "relation"]


# -- LightRAG keywords ---------------------------------------------------------------------------


def test_llm_keywords_are_used_for_the_search(gs):
    client, llm = client_of([("high_level_keywords", json.dumps(KEYWORDS))])
    ctx = context(gs, llm=client)
    assert (ctx.keywords.high_level, ctx.keywords.low_level) == (["Birthplaces"], ["Auckland"])
    assert ctx.keywords.source == "llm" and ctx.keywords.matched == ["auckland"]
    assert "auckland" in [e for e, _, _ in ctx.entities]
    assert len(llm.calls) == 1
    prompt, system, json_mode = llm.calls[0]
    assert Q in prompt and json_mode and system
    assert stage(client, "query:keywords")["calls"] == 1


def test_retrieve_forwards_the_llm_option(gs):
    client, llm = client_of([("high_level_keywords", json.dumps({"low_level_keywords": ["Mount Everest"]}))])
    hits = gs.retrieve(Q, method="lightrag", k=2, mode="local", llm=client)
    assert len(llm.calls) == 1
    assert "mount everest" in [h.id for h in hits if h.kind == "entity"]
    # the same query again: answered from the client's cache, no second call
    gs.retrieve(Q, method="lightrag", k=2, mode="local", llm=client)
    assert len(llm.calls) == 1 and stage(client, "query:keywords")["cached"] == 1


@pytest.mark.parametrize("garbage", ["I cannot help with that.", '{"keywords": "none"}', "[1, 2]", ""])
def test_unreadable_keywords_fall_back_to_offline_and_count_a_skip(gs, garbage):
    client, llm = client_of(default=garbage)
    ctx = context(gs, llm=client)
    offline = offline_keywords(Q, gs.state.kg.entities)
    assert ctx.keywords.source == "offline"
    assert (ctx.keywords.high_level, ctx.keywords.low_level) == (offline.high_level, offline.low_level)
    assert len(llm.calls) == 1 and stage(client, "query:keywords")["skipped"] == 1
    # the fallback is exactly the offline path: same hits as with no LLM at all
    with_llm = gs.retrieve(Q, method="lightrag", k=3, llm=client)
    without = gs.retrieve(Q, method="lightrag", k=3)
    assert [(h.id, h.score) for h in with_llm] == [(h.id, h.score) for h in without]


def test_keywords_fn_wins_over_the_llm(gs):
    client, llm = client_of(default=json.dumps(KEYWORDS))
    ctx = context(gs, llm=client, keywords_fn=lambda q: ([], ["Mount Everest"]))
    assert ctx.keywords.low_level == ["Mount Everest"] and ctx.keywords.source == "function"
    assert llm.calls == []


def test_engine_llm_is_the_default_and_the_option_wins(gs):
    engine_client, engine_llm = client_of(default=json.dumps(KEYWORDS))
    qvec = embed_query(gs.state.embedder, Q)
    ctx = LightRAG().context(WithLLM(gs.state, engine_client), Q, qvec, mode="local")
    assert ctx.keywords.low_level == ["Auckland"] and len(engine_llm.calls) == 1
    option_client, option_llm = client_of(default=json.dumps({"low_level_keywords": ["Mount Everest"]}))
    ctx = LightRAG().context(WithLLM(gs.state, engine_client), Q, qvec, mode="local", llm=option_client)
    assert ctx.keywords.low_level == ["Mount Everest"]
    assert len(option_llm.calls) == 1 and len(engine_llm.calls) == 1


def test_parse_keywords_is_forgiving():
    assert parse_keywords('Sure!\n```json\n{"High_Level_Keywords": ["a", "a", " b "], '
                          '"low_level_keywords": "x, y",}\n```') == (["a", "b"], ["x", "y"])
    assert parse_keywords('{"low_level_keywords": []}') == ([], [])
    assert parse_keywords('{"answer": 1}') is None
    assert parse_keywords("no json") is None


# -- AGRAG fact filter ---------------------------------------------------------------------------


def candidates(gs):
    seen = []

    def spy(query, facts):
        seen.extend(facts)
        return facts

    gs.retrieve(Q, method="agrag", k=2, fact_filter=spy)
    assert len(seen) >= 2, "the corpus must give the filter a choice"
    return seen


def test_llm_fact_filter_keeps_what_the_model_picks(gs):
    cands = candidates(gs)
    pick = cands[-1]
    # a paraphrased triple (case, spacing) still snaps to its candidate
    answer = json.dumps({"fact": [[pick.subject.upper(), "co-occurs  with", pick.object]]})
    client, llm = client_of([("Candidate facts", answer)])
    hits = gs.retrieve(Q, method="agrag", k=2, llm=client)
    assert facts_of(hits) == [(pick.subject, pick.object)]
    assert len(llm.calls) == 1
    prompt, _, json_mode = llm.calls[0]
    assert json_mode and Q in prompt
    assert all(f.subject in prompt and f.object in prompt and f.sentence in prompt for f in cands)
    assert stage(client, "query:fact_filter")["calls"] == 1


def test_llm_fact_filter_may_keep_none(gs):
    client, _ = client_of(default='{"fact": []}')
    hits = gs.retrieve(Q, method="agrag", k=2, llm=client)
    assert facts_of(hits) == [] and not [h for h in hits if h.kind == "path"]
    assert stage(client, "query:fact_filter")["skipped"] == 0


def test_unreadable_fact_filter_falls_back_to_the_offline_rule(gs):
    client, llm = client_of(default="The relevant facts are the first two.")
    with_llm = gs.retrieve(Q, method="agrag", k=3, llm=client)
    without = gs.retrieve(Q, method="agrag", k=3)
    assert len(llm.calls) == 1 and stage(client, "query:fact_filter")["skipped"] == 1
    assert [(h.id, h.score) for h in with_llm] == [(h.id, h.score) for h in without]
    assert facts_of(with_llm)


def test_explicit_fact_filter_wins_over_the_llm(gs):
    client, llm = client_of(default='{"fact": []}')
    hits = gs.retrieve(Q, method="agrag", k=2, llm=client, fact_filter=lambda q, facts: facts[:1])
    assert len(facts_of(hits)) == 1 and llm.calls == []


def test_engine_llm_drives_the_fact_filter(gs):
    client, llm = client_of(default='{"fact": []}')
    qvec = embed_query(gs.state.embedder, Q)
    result = AGRAG().retrieve(WithLLM(gs.state, client), Q, qvec, 2)
    assert len(llm.calls) == 1 and not [h for h in result.context if h.kind == "relation"]


def test_parse_fact_filter_snaps_numbers_and_drops_repeats():
    triples = [("Edmund Hillary", "co-occurs with", "Auckland"), ("Mount Everest", "co-occurs with", "Tenzing Norgay")]
    assert parse_fact_filter('{"fact": [["tenzing norgay", "climbed", "everest"], 1, 2, 7]}', triples) == [1, 0]
    assert parse_fact_filter('```json\n{"facts": ["Edmund Hillary co-occurs with Auckland"]}\n```', triples) == [0]
    assert parse_fact_filter('{"fact": []}', triples) == []
    assert parse_fact_filter('{"answer": "none"}', triples) is None
    assert parse_fact_filter("none of them", triples) is None


# -- the universal option ------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["archrag", "hirag", "dense", "bm25", "hybrid"])
def test_methods_without_an_llm_step_accept_and_ignore_llm(gs, method):
    client, llm = client_of(default=json.dumps(KEYWORDS))
    with_llm = gs.retrieve(Q, method=method, k=3, llm=client)
    without = gs.retrieve(Q, method=method, k=3)
    assert llm.calls == []
    assert [(h.id, h.score) for h in with_llm] == [(h.id, h.score) for h in without]


def test_every_method_has_the_llm_option():
    for cls in METHODS.values():
        assert "llm" in cls.defaults and cls.defaults["llm"] is None


@pytest.mark.parametrize("method", sorted(METHODS))
def test_llm_option_must_be_a_client(method):
    with pytest.raises(ValueError, match=rf"option 'llm' of method '{method}' must be a LLMClient or None"):
        METHODS[method]().options({"llm": "gpt-4o"})
    client, _ = client_of()
    assert METHODS[method]().options({"llm": client})["llm"] is client


def test_llm_failure_is_raised_not_hidden(gs):
    def broken(prompt, system):
        raise RuntimeError("model offline")

    client = LLMClient(ScriptedLLM(broken), attempts=1)
    with pytest.raises(LLMError, match="query:keywords"):
        gs.retrieve(Q, method="lightrag", k=2, llm=client)
