"""`abatch` of 50 queries from inside a running event loop."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from langchain_graphstrata import GraphStrataRetriever


async def test_abatch_50_queries_under_a_running_loop(
    musique_index_dir: Any, musique_questions: list[dict[str, Any]]
) -> None:
    loop = asyncio.get_running_loop()
    retriever = GraphStrataRetriever(index_dir=musique_index_dir, method="hybrid", k=5)
    queries = [q["question"] for q in musique_questions[:50]]
    assert len(queries) == 50

    ticks = 0
    done = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.002)

    hb = loop.create_task(heartbeat())
    t0 = time.perf_counter()
    results = await retriever.abatch(queries, config={"max_concurrency": 8})
    elapsed = time.perf_counter() - t0
    done.set()
    await hb

    assert len(results) == 50
    assert all(len(docs) == 5 for docs in results)
    # Same answers as the sync path, in input order.
    for query, docs in zip(queries, results, strict=True):
        assert [d.id for d in docs] == [d.id for d in retriever.invoke(query)]
    # The searches ran off the event loop: it kept ticking during the batch.
    assert ticks >= 5, (ticks, elapsed)


async def test_abatch_per_call_k(
    musique_index_dir: Any, musique_questions: list[dict[str, Any]]
) -> None:
    retriever = GraphStrataRetriever(index_dir=musique_index_dir, method="bm25", k=5)
    results = await retriever.bind(k=2).abatch([q["question"] for q in musique_questions[:6]])
    assert [len(r) for r in results] == [2] * 6
