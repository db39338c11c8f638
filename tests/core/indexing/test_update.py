"""Incremental insert and delete (issue 16) on a slice of the real HotpotQA corpus.

The hashing embedder keeps these fast; they check bookkeeping (the KG, the hierarchy, the
native indexes, persistence), not retrieval quality (bench/bench_incremental.py measures that
with the real embedder).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from graphstrata import GraphStrata
from graphstrata.indexing.update_communities import SPLIT_FACTOR
from graphstrata.state import check_integrity

CONFIG = {"min_communities": 3, "max_community_size": 8}


@pytest.fixture(scope="module")
def halves(shared_data, jsonl):
    rows = jsonl(shared_data / "hotpotqa" / "corpus.jsonl")[:80]
    return rows[0::2], rows[1::2]


@pytest.fixture(scope="module")
def half_build(halves, embedder):
    return GraphStrata.build(halves[0], config=CONFIG, embedder=embedder)


def _entities(gs):
    return {e: dataclasses.asdict(x) for e, x in gs.kg.entities.items()}


def _relations(gs):
    return {k: dataclasses.asdict(r) for k, r in gs.kg.relations.items()}


def walk_store(gs) -> None:
    """Nothing in the index refers to a chunk that is gone; every live native vector is a
    record of the state and vice versa."""
    state = gs.state
    check_integrity(state)
    live_chunks = set(state.chunk_row)
    for e in state.kg.entities.values():
        assert e.chunk_ids and set(e.chunk_ids) <= live_chunks, e.id
    for r in state.kg.relations.values():
        assert r.chunk_ids and set(r.chunk_ids) <= live_chunks, r.id
    below = set(state.kg.entities)
    for comms in state.communities:
        for c in comms:
            assert c.members and set(c.members) <= below, c.id
            assert set(c.entity_ids) <= set(state.kg.entities)
        below = {c.id for c in comms}
    index = state.layered.index
    sizes = [len(state.kg)] + [len(x) for x in state.communities]
    for layer, n in enumerate(sizes):
        live = [i for i in index.ids_in_layer(layer) if not index.is_deleted(int(i))]
        assert len(live) == n == len(state.layered.labels[layer])
        assert sorted(state.layered.labels[layer]) == sorted(live)
        # row r's native node holds row r's vector
        got = index.get_vectors(state.layered.labels[layer])
        assert np.allclose(got, state.vectors["entities" if layer == 0 else f"layer_{layer}"], atol=1e-5)
    chunk_native = state.chunk_index.index
    live = [i for i in chunk_native.ids_in_layer(0) if not chunk_native.is_deleted(int(i))]
    assert sorted(live) == sorted(state.chunk_index.labels)
    assert np.allclose(chunk_native.get_vectors(state.chunk_index.labels), state.vectors["chunks"], atol=1e-5)


def test_insert_then_delete_the_half_gives_back_the_half_build(halves, half_build, embedder, tmp_path):
    a, b = halves
    gs = GraphStrata.build(a, config=CONFIG, embedder=embedder, persist_dir=tmp_path / "idx")
    gs.insert(b[:1])
    gs.insert(b[1:11])
    gs.insert(b[11:])
    assert len(gs.documents) == len(a) + len(b)
    walk_store(gs)
    b_ids = {d["id"] for d in b}
    assert any(set(gs.state.document_ids_of(e.chunk_ids)) <= b_ids for e in gs.kg.entities.values())
    assert gs.delete([d["id"] for d in b]) == len(b)
    walk_store(gs)
    # no record that only the deleted documents supported, and exactly the half-build's graph
    assert not any(c.document_id in b_ids for c in gs.chunks)
    assert _entities(gs) == _entities(half_build)
    assert _relations(gs) == _relations(half_build)
    # dense and BM25: same ids in the same order as the half-build
    for row in a[:15]:
        q = row["text"][:120]
        for method in ("dense", "bm25"):
            got = [h.id for h in gs.retrieve(q, method=method, k=10, kinds=["chunk"])]
            want = [h.id for h in half_build.retrieve(q, method=method, k=10, kinds=["chunk"])]
            assert got == want, (method, q)
    # the persisted version is the same index
    again = GraphStrata.load(tmp_path / "idx", embedder=embedder)
    walk_store(again)
    for method in gs.methods:
        q = a[3]["text"][:100]
        assert [h.id for h in again.retrieve(q, method=method, k=5)] == [
            h.id for h in gs.retrieve(q, method=method, k=5)
        ], method


def test_without_tfidf_terms_an_insert_builds_exactly_the_full_graph(halves, embedder):
    """Capitalised names and titles need no corpus statistics: the merged graph of the
    incremental path must then equal the full build's, record for record."""
    a, b = halves
    cfg = {**CONFIG, "tfidf_top_n": 0}
    gs = GraphStrata.build(a, config=cfg, embedder=embedder)
    gs.insert(b[:7])
    gs.insert(b[7:])
    full = GraphStrata.build([*a, *b], config=cfg, embedder=embedder)
    assert _entities(gs) == _entities(full)
    assert _relations(gs) == _relations(full)
    walk_store(gs)


def test_new_entities_join_communities_and_drift_is_repaired_locally(halves, embedder):
    a, b = halves
    gs = GraphStrata.build(a[:10], config=CONFIG, embedder=embedder)
    layers_before = len(gs.communities)
    gs.insert([*a[10:], *b])  # the index grows six-fold in one update
    walk_store(gs)
    assert len(gs.communities) == layers_before
    drift = gs.stats()["drift"]
    assert drift["communities_reclustered"] > 0
    assert drift["documents_added"] == len(a) - 10 + len(b)
    assert drift["changed_documents_share"] == pytest.approx((len(a) - 10 + len(b)) / 10)
    cap = SPLIT_FACTOR * CONFIG["max_community_size"]
    assert max(len(c.members) for c in gs.communities[0]) <= cap
    # every entity is in exactly one layer-1 community
    members = [m for c in gs.communities[0] for m in c.members]
    assert sorted(members) == sorted(gs.kg.entities)
    gs.rebuild()
    assert gs.stats()["drift"]["updates"] == 0
    assert gs.stats()["drift"]["stats_version"] == 2
    full = GraphStrata.build([*a, *b], config=CONFIG, embedder=embedder)
    assert _entities(gs) == _entities(full)
    assert gs.state.layered.deleted_fraction == 0.0


def test_noop_update_and_unknown_delete(halves, embedder):
    a, _ = halves
    gs = GraphStrata.build(a[:12], config=CONFIG, embedder=embedder)
    g = gs.state.generation
    assert gs.insert([a[0]]) == [a[0]["id"]]
    assert gs.state.generation == g
    changed = {**a[0], "text": "Zanzibar Quokka Federation was founded on Mars in 2999."}
    gs.insert([changed])
    assert gs.state.generation == g + 1
    assert "zanzibar quokka federation" in gs.kg.entities
    hits = gs.retrieve("Zanzibar Quokka Federation", method="bm25", k=1, kinds=["chunk"])
    assert hits[0].document_ids == [a[0]["id"]]
    with pytest.raises(KeyError, match="no-such-doc"):
        gs.delete(["no-such-doc"])
    with pytest.raises(ValueError, match="duplicate document id"):
        gs.insert([a[1], a[1]])
    walk_store(gs)


def test_an_index_without_extraction_records_derives_them_on_the_first_update(halves, half_build, embedder):
    """Indexes persisted before schema 4 carry no per-chunk records."""
    a, b = halves
    gs = GraphStrata(dataclasses.replace(half_build.state, records=None, frozen={}))
    gs.insert(b[:5])
    assert gs.state.records is not None and set(gs.state.records) == set(gs.state.chunk_row)
    gs.delete([d["id"] for d in b[:5]])
    assert _entities(gs) == _entities(half_build)


def test_queries_read_the_previous_state_untouched(half_build, halves, embedder):
    """The next state owns copies of the native indexes: the current state is not mutated."""
    a, b = halves
    gs = GraphStrata(half_build.state)
    before = gs.state
    q = a[2]["text"][:100]
    want = {m: [h.id for h in gs.retrieve(q, method=m, k=5)] for m in gs.methods}
    gs.insert(b[:3])
    gs.delete([a[2]["id"]])
    assert before.layered.index.num_deleted == 0 and before.chunk_index.index.num_deleted == 0
    old = GraphStrata(before)
    assert {m: [h.id for h in old.retrieve(q, method=m, k=5)] for m in gs.methods} == want


def test_an_offline_index_with_an_llm_attached_stays_offline_when_updated(halves, embedder):
    """An LLM attached for answers must not start paid index-time calls on insert/rebuild."""
    from graphstrata.testing import ScriptedLLM

    def refuse(prompt, system):
        raise AssertionError("index-time LLM call on an offline index")

    a, b = halves
    gs = GraphStrata.build(a[:12], config=CONFIG, embedder=embedder)
    llm = ScriptedLLM(refuse)
    gs.attach_llm(llm)
    gs.insert(b[:2])
    gs.rebuild()
    assert llm.calls == [] and gs.llm is not None and gs.state.llm_id is None
