"""AGRAG at scale (issue 33): a query's work is bounded by its candidates, not the corpus; the
graph and its default push graph are derived structures built at index time and persisted
through the codec; forward push gives the exact PageRank's ranking."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
import scipy.sparse as sp

import graphstrata.methods.agrag as agrag
import graphstrata.structures.agrag as agrag_structures
from graphstrata import Document, GraphStrata
from graphstrata.structures.registry import decode, encode, prepare
from graphstrata.methods.agrag import AGRAG, hybrid_candidates
from graphstrata.structures.agrag import DEFAULT_PUSH_SPEC, DEFAULT_WEIGHTS, GRAPH_KEY, build_graph
from graphstrata.methods.base import hybrid_scores
from graphstrata.methods.graph_ops import csr_find
from graphstrata.structures.push import push_graph
from graphstrata.state import EngineState
from graphstrata.testing import HashEmbedder

Q = "Where was Edmund Hillary born?"
KEYS = (GRAPH_KEY, DEFAULT_PUSH_SPEC.key)


@pytest.fixture()
def gs(corpus, embedder, small_config):
    return GraphStrata.build(corpus, config=small_config, embedder=embedder)


def _fresh(state: EngineState) -> EngineState:
    return dataclasses.replace(state)  # same records, empty derived cache


def _seeded(state: EngineState, seed) -> EngineState:
    fields = {f: getattr(state, f) for f in state.__dataclass_fields__ if not f.startswith("_") and f != "derived_seed"}
    return EngineState(**fields, derived_seed=seed)


def _hits(g: GraphStrata, **opts):
    return [(h.kind, h.id, h.text, round(h.score, 9), h.explain) for h in g.retrieve(Q, method="agrag", k=4, **opts)]


def _arrays_equal(a, b) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), name


def test_graph_and_push_round_trip_through_the_codec(gs, monkeypatch):
    state = _fresh(gs.state)
    prepare(state, KEYS)
    arrays = encode(state)
    assert {name.split("|")[0] for name in arrays} == set(KEYS)
    assert all(np.asarray(a).dtype != object for a in arrays.values())
    seed = decode(arrays)
    fresh = build_graph(gs.state)
    _arrays_equal(agrag_structures._graph_arrays(seed[GRAPH_KEY]), agrag_structures._graph_arrays(fresh))
    _arrays_equal(seed[DEFAULT_PUSH_SPEC.key].arrays(), fresh.push(*DEFAULT_WEIGHTS).arrays())
    # the decoded graph is the same graph: same typed matrices and walk
    got = seed[GRAPH_KEY]
    for name in ("fact", "synonym", "contains", "title_contains"):
        assert abs(getattr(got, name) - getattr(fresh, name)).nnz == 0, name

    def boom(*a, **k):
        raise AssertionError("rebuilt a persisted structure")

    want = _hits(GraphStrata(state), explain=True)
    monkeypatch.setattr(agrag_structures, "build_graph", boom)
    monkeypatch.setattr(agrag_structures.AgragGraph, "push", boom)
    assert _hits(GraphStrata(_seeded(gs.state, seed)), explain=True) == want


def test_graph_codec_names_bad_arrays(gs):
    state = _fresh(gs.state)
    prepare(state, [GRAPH_KEY])
    arrays = encode(state)
    bad = dict(arrays)
    name = next(k for k in bad if k.endswith("|entity_chunks.indices"))
    bad[name] = bad[name][:-1]
    with pytest.raises(ValueError, match="agrag:graph"):
        decode(bad)
    missing = {k: v for k, v in arrays.items() if not k.endswith("|rel_src")}
    with pytest.raises(ValueError, match="rel_src"):
        decode(missing)


def test_push_ranks_like_exact_pagerank(gs):
    exact = gs.retrieve(Q, method="agrag", k=6, ppr_epsilon=None)
    pushed = gs.retrieve(Q, method="agrag", k=6, ppr_epsilon=1e-9)
    assert [h.id for h in pushed] == [h.id for h in exact]
    default = gs.retrieve(Q, method="agrag", k=6)
    assert [h.id for h in default if h.kind == "chunk"][:3] == [h.id for h in exact if h.kind == "chunk"][:3]


def test_push_graph_is_the_walk(gs):
    g = build_graph(gs.state)
    for weights in (DEFAULT_WEIGHTS, (1.0, 1.0, 1.0, 0.0)):
        mine, ref = g.push(*weights), push_graph(g.walk(*weights))
        assert np.array_equal(mine.indptr, ref.indptr) and np.array_equal(mine.indices, ref.indices)
        np.testing.assert_allclose(mine.probs, ref.probs, rtol=1e-6)


def test_hybrid_candidates_match_hybrid_scores(gs, embedder):
    state = gs.state
    for q in (Q, "largest city California", "zzz unknown words"):
        qvec = embedder.embed_query(q) if hasattr(embedder, "embed_query") else embedder.embed([q])[0]
        mine = hybrid_candidates(state, q, qvec, 4, 0.65)
        ref = hybrid_scores(state, q, qvec, 4, 0.65)
        assert mine.keys() == ref.keys()
        np.testing.assert_allclose([mine[r] for r in ref], list(ref.values()), atol=1e-6)


def test_csr_find_matches_dense_lookup():
    rng = np.random.default_rng(0)
    m = sp.random(40, 30, density=0.2, format="csr", random_state=1)
    m.sort_indices()
    rows, cols = rng.integers(0, 40, 500), rng.integers(0, 30, 500)
    pos = csr_find(m, rows, cols)
    dense = m.toarray()
    assert ((pos >= 0) == (dense[rows, cols] != 0)).all()
    assert np.array_equal(m.data[pos[pos >= 0]], dense[rows, cols][pos >= 0])
    assert len(csr_find(sp.csr_matrix((3, 3)), [0, 2], [1, 1])) == 2
    assert (csr_find(sp.csr_matrix((3, 3)), [0, 2], [1, 1]) == -1).all()
    with pytest.raises(ValueError):
        csr_find(m, [40], [0])
    with pytest.raises(ValueError):
        csr_find(m, [1, 2], [0])


def _unrelated(n: int, seed: int = 0) -> list[Document]:
    """``n`` documents of made-up words about made-up people and places: no word shared with
    the test corpus."""
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(3)).capitalize()

    docs = []
    for i in range(n):
        a, b, c = word(), word(), word()
        text = f"{a} {b}\n{a} {b} {word()} {word()} {c}. {a} {b} {word()} {c} {word()}. {word()} {c} {a}."
        docs.append(Document(f"x{i}", text, {"title": f"{a} {b}"}))
    return docs


def _work(g: GraphStrata, monkeypatch) -> dict[str, int]:
    """What one query touched: HS candidates, candidate facts, entity cosines computed, PPR
    nodes reached and pushes, subgraph nodes."""
    seen: dict[str, int] = {}
    sims: list = []
    orig_init = agrag._EntitySims.__init__

    def init(self, *a, **k):
        orig_init(self, *a, **k)
        sims.append(self)

    orig_hybrid, orig_cands, orig_sub = agrag.hybrid_candidates, AGRAG._fact_candidates, AGRAG._subgraph
    orig_push = agrag.local_pagerank

    def hybrid(*a, **k):
        out = orig_hybrid(*a, **k)
        seen["chunks"] = len(out)
        return out

    def cands(*a, **k):
        scores, c = orig_cands(*a, **k)
        seen["facts"] = len(c)
        return scores, c

    def sub(self, *a, **k):
        out = orig_sub(self, *a, **k)
        seen["subgraph"] = out.number_of_nodes()
        return out

    def push(*a, **k):
        out = orig_push(*a, **k)
        seen["reached"], seen["pushes"] = len(out.nodes), out.pushes
        return out

    with monkeypatch.context() as mp:
        mp.setattr(agrag._EntitySims, "__init__", init)
        mp.setattr(agrag, "hybrid_candidates", hybrid)
        mp.setattr(AGRAG, "_fact_candidates", staticmethod(cands))
        mp.setattr(AGRAG, "_subgraph", sub)
        mp.setattr(agrag, "local_pagerank", push)
        hits = g.retrieve(Q, method="agrag", k=3, candidates=3, entity_candidates=2)
    seen["entities"] = len(sims[0])
    seen["answer"] = [h.id for h in hits if h.kind == "chunk"]
    return seen


def test_query_work_does_not_grow_with_unrelated_documents(corpus, small_config, monkeypatch):
    """The same query on the corpus and on it plus 20× / 40× as many unrelated documents
    touches the same number of candidate chunks, facts, entities, PPR nodes and pushes and
    subgraph nodes, and answers the same (few candidates, so that every one is a real match)."""
    embedder = HashEmbedder(1024)  # wide enough that made-up words do not collide with the query's
    small = GraphStrata.build(corpus, config=small_config, embedder=embedder)
    big = GraphStrata.build(corpus, config=small_config, embedder=embedder)
    big.insert(_unrelated(120))  # an insert keeps the first build's statistics (TF-IDF entities)
    assert len(big.chunks) > 5 * len(small.chunks) and len(big.kg) > 5 * len(small.kg)
    base, grown = _work(small, monkeypatch), _work(big, monkeypatch)
    assert base["facts"] > 0 and base["pushes"] > 0 and base["subgraph"] > 0
    assert grown == base
    big.insert(_unrelated(120, seed=1))
    assert _work(big, monkeypatch) == base


def test_explain_still_produced(gs):
    hits = gs.retrieve(Q, method="agrag", k=3, explain=True)
    chunks = [h for h in hits if h.kind == "chunk"]
    assert len(chunks) == 3 and all(h.explain and h.explain["reason"] for h in chunks)
    assert all("ppr_mass" in h.explain and "hybrid" in h.explain["seeds"] for h in chunks[:2])
    paths = [h for h in hits if h.kind == "path"]
    assert paths and all(h.explain["reasoning_path"]["triples"] for h in paths)
    assert any(h.explain.get("reasoning_path") for h in chunks)
    plain = gs.retrieve(Q, method="agrag", k=3)
    assert [(h.id, h.score) for h in plain] == [(h.id, h.score) for h in hits]
