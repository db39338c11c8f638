"""Async that is async (issue 27): ``aretrieve`` / ``aanswer`` run their LLM calls on the
caller's event loop when the LLM has an async API, with bounded concurrency, and sync code
paths never call ``asyncio.run`` (scripted async LLMs: control flow only)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from graphstrata import GraphStrata
from graphstrata.llm import CallableLLM, LLMClient, LLMRequest, has_async_api, run_blocking
from graphstrata.testing import HashEmbedder, ScriptedLLM
from graphstrata.testing.contract import contract_documents

KEYWORDS = json.dumps({"high_level_keywords": ["computing"], "low_level_keywords": ["Analytical Engine"]})


class OverlapLLM:
    """An async LLM that records which loop ran each call and how many were in flight."""

    def __init__(self, delay: float = 0.2) -> None:
        self.delay = delay
        self.loops: set[int] = set()
        self.threads: set[str] = set()
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls = 0

    async def __call__(self, prompt: str, system: str | None = None) -> str:
        self.loops.add(id(asyncio.get_running_loop()))
        self.threads.add(threading.current_thread().name)
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return KEYWORDS


@pytest.fixture(scope="module")
def base_gs() -> GraphStrata:
    return GraphStrata.build(contract_documents(), embedder=HashEmbedder())


QUERIES = [f"Who built machine number {i} for computing?" for i in range(4)]


async def test_aretrieve_of_n_queries_overlaps_their_llm_calls_on_one_loop(base_gs: GraphStrata) -> None:
    llm = OverlapLLM()
    gs = GraphStrata(base_gs.state)
    gs.attach_llm(llm)
    sync_hits = [GraphStrata(base_gs.state).retrieve(q, method="lightrag", k=3, kinds=("chunk",)) for q in QUERIES]
    results = await asyncio.gather(*(gs.aretrieve(q, method="lightrag", k=3, kinds=("chunk",)) for q in QUERIES))
    assert llm.calls == len(QUERIES)
    assert llm.loops == {id(asyncio.get_running_loop())}, "every LLM call ran on the caller's loop"
    assert llm.max_in_flight == len(QUERIES), "the N queries' LLM calls overlapped"
    assert all(len(r) == 3 for r in results)
    # the LLM's keywords changed the ranking input, not the contract: k chunk hits each
    assert [len(r) for r in results] == [len(h) for h in sync_hits]


async def test_concurrency_bound_holds_on_the_loop(base_gs: GraphStrata) -> None:
    llm = OverlapLLM(delay=0.1)
    gs = GraphStrata(base_gs.state)
    gs.attach_llm(LLMClient(llm, concurrency=2))
    await asyncio.gather(*(gs.aretrieve(q + " (bounded)", method="lightrag", k=2) for q in QUERIES))
    assert llm.calls == len(QUERIES) and llm.max_in_flight == 2


async def test_sync_retrieve_with_an_async_llm_works_inside_a_running_loop(base_gs: GraphStrata) -> None:
    llm = OverlapLLM(delay=0.01)
    gs = GraphStrata(base_gs.state)
    gs.attach_llm(llm)
    hits = gs.retrieve("Who designed the Analytical Engine?", method="lightrag", k=2, kinds=("chunk",))
    assert len(hits) == 2 and llm.calls == 1
    assert llm.threads == {"graphstrata-async"}, "ran on graphstrata's background loop, not asyncio.run"


def test_async_callable_from_plain_sync_code() -> None:
    async def fn(prompt: str) -> str:
        await asyncio.sleep(0)
        return prompt.upper()

    llm = CallableLLM(fn)
    assert has_async_api(llm) and llm.complete("abc").text == "ABC"
    assert not has_async_api(CallableLLM(lambda p: p)) and not has_async_api(ScriptedLLM())
    client = LLMClient(fn)
    assert client.request(LLMRequest("xyz")).text == "XYZ"
    assert run_blocking(fn("q")) == "Q"


async def test_aanswer_counts_usage_of_calls_made_on_the_loop(base_gs: GraphStrata) -> None:
    llm = OverlapLLM(delay=0.01)
    gs = GraphStrata(base_gs.state)
    gs.attach_llm(llm)
    answers = await asyncio.gather(*(gs.aanswer(q, method="dense", k=2) for q in QUERIES[:2]))
    for a in answers:
        assert a.usage["total"]["calls"] >= 1, a.usage
    assert llm.loops == {id(asyncio.get_running_loop())}


def test_llm_errors_on_the_loop_keep_their_type(base_gs: GraphStrata) -> None:
    from graphstrata.llm import LLMError

    async def broken(prompt: str) -> str:
        raise ValueError("model exploded")

    gs = GraphStrata(base_gs.state)
    gs.attach_llm(LLMClient(broken, attempts=1))

    async def main() -> Any:
        return await gs.aretrieve("Who designed the engine?", method="lightrag", k=2)

    with pytest.raises(LLMError, match="model exploded"):
        asyncio.run(main())
