"""A state is constructed whole (issue 27): what a stage derived from a provisional state with
the same records reaches the published state through ``EngineState(derived_seed=...)``, never
by writing into a published state."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from graphstrata import GraphStrata
from graphstrata.structures.hirag import hi_index, hi_index_key
from graphstrata.llm.prompts import hirag as hirag_prompts
from graphstrata.testing import HashEmbedder, ScriptedLLM
from graphstrata.testing import answer_every_prompt as toy

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "cookbook" / "sample_corpus" / "wiki_sample.jsonl"
CONFIG = {"min_communities": 2, "max_community_size": 6, "chunk_size": 120, "chunk_overlap": 16}


def _docs(n: int) -> list[dict]:
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f, strict=False)]


def _summary_calls(llm: ScriptedLLM) -> int:
    return sum(1 for _, s, _ in llm.calls if s == hirag_prompts.SUMMARY_ENTITY_SYSTEM)


def test_derived_seed_fills_the_cache_and_replace_starts_empty():
    state = GraphStrata.build(_docs(4), config=CONFIG, embedder=HashEmbedder()).state
    built = state.derived("test:thing", lambda: object())
    seeded = dataclasses.replace(state, derived_seed=state.derived_snapshot())
    assert seeded.derived("test:thing", lambda: "rebuilt") is built
    assert dataclasses.replace(state).derived("test:thing", lambda: "rebuilt") == "rebuilt"
    snapshot = state.derived_snapshot()
    snapshot["test:other"] = 1  # a copy: the state's cache is its own
    assert "test:other" not in state.derived_snapshot()


def test_llm_build_publishes_its_hirag_index_and_usage():
    llm = ScriptedLLM(toy)
    gs = GraphStrata.build(_docs(6), config=CONFIG, embedder=HashEmbedder(), llm=llm)
    state = gs.state
    paid = _summary_calls(llm)
    assert paid >= 1 and state.build_usage["stages"]["hirag_summaries"]["calls"] == paid
    assert hi_index(state) is state.derived_snapshot()[hi_index_key(state)]
    assert _summary_calls(llm) == paid
    gs.retrieve("Who is named?", method="hirag", k=3)
    assert _summary_calls(llm) == paid  # retrieval reads the index the build made


def test_llm_update_publishes_its_hirag_index_usage_and_time():
    llm = ScriptedLLM(toy)
    gs = GraphStrata.build(_docs(5), config=CONFIG, embedder=HashEmbedder(), llm=llm)
    before = gs.state
    gs.insert([{"id": "new", "text": "Grace Hopper wrote the Flowmatic compiler in Philadelphia."}])
    state = gs.state
    assert state is not before and state.generation == before.generation + 1
    assert {"last_update_usage", "last_update_seconds"} <= set(state.drift)
    assert "last_update_usage" not in before.drift  # the previous state is untouched
    paid = len(llm.calls)
    assert hi_index_key(state) in state.derived_snapshot()
    hi_index(state)
    assert len(llm.calls) == paid
