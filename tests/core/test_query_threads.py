"""Query embedding on a bounded number of threads (issue 33): ``config.query_threads`` is
handed to the embedder, a method that does not read the query vector never embeds the query,
and torch's process-wide setting is restored however queries overlap."""

from __future__ import annotations

import threading
import types

import pytest

from graphstrata import GraphStrata
from graphstrata.models import embed_query, intra_op_threads
from graphstrata.testing import HashEmbedder
from graphstrata.testing.contract import contract_documents


class CountingEmbedder(HashEmbedder):
    """HashEmbedder that records every query embedding and the threads it was asked for."""

    def __init__(self) -> None:
        super().__init__(64)
        self.queries: list[tuple[str, int | None]] = []

    def embed_query(self, text: str, threads: int | None = None):
        self.queries.append((text, threads))
        return self.embed([text])[0]


@pytest.fixture(scope="module")
def counted() -> tuple[GraphStrata, CountingEmbedder]:
    emb = CountingEmbedder()
    return GraphStrata.build(contract_documents(), embedder=emb, config={"query_threads": 3}), emb


def test_bm25_never_embeds_the_query(counted) -> None:
    gs, emb = counted
    emb.queries.clear()
    assert gs.retrieve("Analytical Engine", method="bm25", k=2)
    assert emb.queries == []
    gs.retrieve("Analytical Engine", method="bm25", k=2, explain=True)  # explain reads it
    assert len(emb.queries) == 1


def test_query_threads_reach_the_embedder(counted) -> None:
    gs, emb = counted
    emb.queries.clear()
    for method in ("dense", "hybrid", "archrag"):
        gs.retrieve("Who built the Analytical Engine?", method=method, k=2)
    assert emb.queries and all(t == 3 for _, t in emb.queries)


def test_threads_go_only_to_embedders_that_take_them_however_often_asked() -> None:
    # whether embed_query takes ``threads`` is remembered per function: two embedder classes,
    # asked in turn, each keep their own answer (a cache keyed wrongly would pass threads=
    # to the one without the argument, TypeError, or drop them for the other)
    class NoThreads(HashEmbedder):
        def __init__(self) -> None:
            super().__init__(64)
            self.calls = 0

        def embed_query(self, text: str):
            self.calls += 1
            return self.embed([text])[0]

    with_threads, without = CountingEmbedder(), NoThreads()
    for i in range(3):
        for emb in (with_threads, without, CountingEmbedder(), NoThreads()):
            v = embed_query(emb, f"query {i}", threads=2)
            assert v.shape == (64,) and str(v.dtype) == "float32"
    assert with_threads.queries == [(f"query {i}", 2) for i in range(3)]
    assert without.calls == 3
    # a plain function and a callable object as embed_query, unhashable or not weakly referenceable
    fn = types.SimpleNamespace(embed_query=lambda text, threads=None: [float(threads or 0)] * 4)
    assert embed_query(fn, "q", threads=5).tolist() == [5.0] * 4
    assert embed_query(fn, "q").tolist() == [0.0] * 4


def test_intra_op_threads_is_restored_after_overlapping_users() -> None:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    barrier = threading.Barrier(4)
    seen: list[int] = []

    def user() -> None:
        with intra_op_threads(1):
            barrier.wait()
            seen.append(torch.get_num_threads())
            barrier.wait()

    threads = [threading.Thread(target=user) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [1, 1, 1, 1]
    assert torch.get_num_threads() == before
    with intra_op_threads(0):
        assert torch.get_num_threads() == before
