"""Per-query work bounded by the seeds, not by the corpus (issue 33): BM25 by postings, at most
``ENTITY_CHUNK_LIMIT`` chunks per retrieved entity, filters asked only about ranked documents,
crowded titles skipped, and the structures this needs persisted through the derived codecs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

import graphstrata.retrieval as retrieval
from graphstrata import Document, GraphStrata
from graphstrata.structures.registry import decode, encode, prepare
from graphstrata.bm25 import BM25Index
from graphstrata.methods.base import bm25_scores_of, hybrid_scores, minmax, spread_rows, spread_to_chunks
from graphstrata.structures.provenance import (
    DOCUMENT_ROWS,
    ENTITY_CHUNKS,
    ENTITY_CHUNK_LIMIT,
    PROVENANCE,
    build_entity_chunks,
    entity_chunk_matrix,
)
from graphstrata.structures.registry import pack_strings, unpack_strings
from graphstrata.structures.push import local_pagerank, push_graph
from graphstrata.methods.graph_ops import personalized_pagerank
from graphstrata.structures.push import transition_matrix
from graphstrata.methods.propagation import named_chunks
from graphstrata.structures.passages import DATES, MAX_DOCUMENTS_PER_TITLE, TITLES, date_index, title_index
from graphstrata.testing import HashEmbedder
from graphstrata.testing.contract import contract_documents

HUB = "Quorvex Consortium"
QUERY = f"What does the {HUB} ship to Lisbon?"


def _base_docs() -> list[Document]:
    return contract_documents() + [
        Document(id="quorvex", text=f"The {HUB} ships turbines to Lisbon. Its founder Ada Brenner sold turbines.",
                 metadata={"title": "Quorvex"}),
    ]


def _padding(n: int) -> list[Document]:
    """Documents unrelated to the question except that each mentions the hub entity."""
    return [
        Document(id=f"pad{i}", text=f"Shipment {i}: the {HUB} moved crate {i} of cargo item {i * 7919 % 10007} "
                 f"through warehouse {i % 13}.", metadata={"title": f"Shipment {i}"})
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def small() -> GraphStrata:
    return GraphStrata.build(_base_docs() + _padding(300), embedder=HashEmbedder())


@pytest.fixture(scope="module")
def padded() -> GraphStrata:
    return GraphStrata.build(_base_docs() + _padding(1200), embedder=HashEmbedder())


def _fresh(state):
    return dataclasses.replace(state)  # same records, empty derived cache


# -- BM25 by postings ------------------------------------------------------------------------


def test_bm25_scores_of_rows_equal_the_full_scoring(padded: GraphStrata) -> None:
    state = padded.state
    rng = np.random.default_rng(0)
    rows = np.unique(rng.integers(0, len(state.chunks), 200))
    for q in (QUERY, "turbines turbines Lisbon", "warehouse 7 crate", "no such words zzz", "Babbage engine"):
        want = state.bm25.scores(q)[rows]
        got = bm25_scores_of(state, q, rows)
        assert got.dtype == np.float32 and got.shape == rows.shape
        assert np.allclose(got, want, rtol=1e-5, atol=1e-6), q
    assert len(bm25_scores_of(state, QUERY, np.zeros(0, np.int64))) == 0


def test_bm25_scores_of_an_index_without_tokens_is_zero() -> None:
    class Toy:
        bm25 = BM25Index(texts=["", "the of"], lazy=True)

    assert np.array_equal(bm25_scores_of(Toy(), "anything", np.array([0, 1])), np.zeros(2, np.float32))


def test_hybrid_scores_equal_scoring_every_chunk(padded: GraphStrata) -> None:
    """Same rows and scores as the former implementation, which scored every chunk's BM25."""
    state = padded.state
    qvec = state.embedder.embed([QUERY])[0]
    qvec = qvec / np.linalg.norm(qvec)
    extra = [0, 3, 5, 40]
    got = hybrid_scores(state, QUERY, qvec, 20, 0.5, extra_rows=extra)
    rows_d, _ = state.chunk_index.search(qvec, 20)
    all_bm = state.bm25.scores(QUERY)
    top = np.argsort(-all_bm, kind="stable")[:20]
    lexical = {int(r) for r in top if all_bm[r] > 0}
    rows = np.asarray(sorted(set(rows_d.tolist()) | lexical | set(extra)))
    fused = 0.5 * minmax(state.chunk_index.similarity(qvec, rows)) + 0.5 * minmax(all_bm[rows])
    assert sorted(got) == rows.tolist()
    assert np.allclose([got[r] for r in rows.tolist()], fused, atol=1e-5)


# -- bounded entity chunks ---------------------------------------------------------------------


def test_entity_chunks_keep_every_row_of_small_entities_and_the_best_of_hubs(padded: GraphStrata) -> None:
    state = padded.state
    index = build_entity_chunks(state, 5)
    m = entity_chunk_matrix(state)
    counts = np.diff(m.indptr)
    assert np.array_equal(index.counts, counts)
    chunks, ents = state.vectors["chunks"], state.vectors["entities"]
    hubs = np.flatnonzero(counts > 5)
    assert len(hubs)  # the padding makes the consortium a hub
    for e in range(len(counts)):
        full = np.sort(m.indices[m.indptr[e]:m.indptr[e + 1]])
        kept = index.top(e)
        if counts[e] <= 5:
            assert np.array_equal(np.sort(kept), full)
        else:
            sims = chunks[full] @ ents[e]
            best = full[np.lexsort((full, -sims.astype(np.float64)))[:5]]
            assert kept.tolist() == best.tolist()
        assert index.top(e, 2).tolist() == kept[:2].tolist()
    with pytest.raises(ValueError, match="limit"):
        build_entity_chunks(state, 0)


def test_spread_rows_is_spread_to_chunks_over_rows(small: GraphStrata) -> None:
    state = small.state
    sources = [(0.8, [c.id for c in state.chunks[:7]]), (0.5, [c.id for c in state.chunks[4:9]]), (-1.0, ["x"])]
    want = spread_to_chunks(sources, state)
    rows, vals = spread_rows([(s, np.arange(len(ids)) + (4 if i == 1 else 0), len(ids))
                              for i, (s, ids) in enumerate(sources[:2])])
    assert dict(zip(rows.tolist(), vals.tolist())) == pytest.approx(want)


def _touched(gs: GraphStrata, monkeypatch: pytest.MonkeyPatch, **options) -> tuple[int, int, list]:
    """Rows whose vector the query read, entity-hit provenance size, and the hits."""
    seen: list[int] = []
    index = gs.state.chunk_index
    original = type(index).similarity

    def counting(self, query, rows):
        seen.append(len(rows))
        return original(self, query, rows)

    monkeypatch.setattr(type(index), "similarity", counting)
    hits = gs.retrieve(QUERY, k=5, **options)
    monkeypatch.undo()
    provenance = max((len(h.chunk_ids) for h in hits if h.kind == "entity"), default=0)
    return sum(seen), provenance, hits


def _bound(gs: GraphStrata) -> int:
    """Candidates the query may score: dense + BM25 top-100, at most ENTITY_CHUNK_LIMIT chunks
    of each of 10 entities, 50 of each of 5 communities per layer (the layers grow as log n),
    and the chunks of the documents the question names (one here)."""
    return 2 * 100 + 10 * ENTITY_CHUNK_LIMIT + 5 * len(gs.state.communities) * 50 + 1


def test_rows_a_query_touches_do_not_grow_with_unrelated_documents(
    small: GraphStrata, padded: GraphStrata, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,200 documents mentioning the hub cost the query what 300 did, but for the chunks of
    one more community layer (the hierarchy grows as log n); without the bound every one of
    them would be a scored candidate."""
    rows_small, prov_small, _ = _touched(small, monkeypatch)
    rows_big, prov_big, hits = _touched(padded, monkeypatch)
    unbounded, prov_unbounded, _ = _touched(padded, monkeypatch, entity_chunks=None)
    assert unbounded > 1200 and prov_unbounded > 1200  # the hub's every chunk, before
    assert rows_small <= _bound(small) and rows_big <= _bound(padded)
    # 4x the documents: only a new community layer (5 communities x 50 chunks) adds rows
    extra_layers = len(padded.state.communities) - len(small.state.communities)
    assert rows_big <= rows_small + 5 * 50 * extra_layers + 20 < unbounded
    assert prov_small <= ENTITY_CHUNK_LIMIT and prov_big <= ENTITY_CHUNK_LIMIT
    hub = [h for h in hits if h.kind == "entity" and h.metadata.get("chunk_count", 0) > ENTITY_CHUNK_LIMIT]
    assert hub and len(hub[0].chunk_ids) == ENTITY_CHUNK_LIMIT and len(hub[0].document_ids) <= ENTITY_CHUNK_LIMIT


def test_bounded_entity_chunks_rank_the_question_the_same_here(padded: GraphStrata) -> None:
    bounded = [h.id for h in padded.retrieve(QUERY, k=5, kinds="chunk")]
    unbounded = [h.id for h in padded.retrieve(QUERY, k=5, kinds="chunk", entity_chunks=None)]
    assert bounded[0] == unbounded[0] == "quorvex#0"
    with pytest.raises(ValueError, match="entity_chunks"):
        padded.retrieve(QUERY, entity_chunks=ENTITY_CHUNK_LIMIT + 1)


def test_lightrag_lists_a_hubs_most_representative_chunks_and_ranks_the_same(padded: GraphStrata) -> None:
    """LightRAG's context hits list at most ``entity_chunks`` chunks (the hub's chunk list grew
    with every padding document) and carry the full count; the chunk ranking does not change."""
    bounded = padded.retrieve(QUERY, method="lightrag", k=5)
    unbounded = padded.retrieve(QUERY, method="lightrag", k=5, entity_chunks=None)
    assert [h.id for h in bounded if h.kind == "chunk"] == [h.id for h in unbounded if h.kind == "chunk"]
    full = {h.id: h for h in unbounded if h.kind != "chunk"}
    hub_id = padded.state.kg.entity_ids[int(np.argmax([len(padded.state.kg.entities[e].chunk_ids)
                                                        for e in padded.state.kg.entity_ids]))]
    hub = next(h for h in bounded if h.id == hub_id)
    assert hub.metadata["chunk_count"] == len(full[hub_id].chunk_ids) > 1200
    want = [padded.state.chunks[r].id for r in build_entity_chunks(padded.state).top(padded.state.kg.row[hub_id])]
    assert hub.chunk_ids == want and len(want) == ENTITY_CHUNK_LIMIT
    assert hub.document_ids == padded.state.document_ids_of(want)
    for h in bounded:
        if h.kind in ("entity", "relation"):
            assert len(h.chunk_ids) <= ENTITY_CHUNK_LIMIT
            assert h.metadata["chunk_count"] == len(full[h.id].chunk_ids)
            assert set(h.chunk_ids) <= set(full[h.id].chunk_ids)
            if h.metadata["chunk_count"] <= ENTITY_CHUNK_LIMIT:
                assert h.chunk_ids == full[h.id].chunk_ids and h.document_ids == full[h.id].document_ids
    assert "chunk_count" not in full[hub_id].metadata
    with pytest.raises(ValueError, match="entity_chunks"):
        padded.retrieve(QUERY, method="lightrag", entity_chunks=0)


# -- filters -----------------------------------------------------------------------------------


def test_a_filtered_query_asks_only_about_the_documents_it_ranked(
    padded: GraphStrata, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    original = retrieval.compile_filter

    def counting(spec):
        pred = original(spec)

        def wrapped(meta):
            asked.append(meta["document_id"])
            return pred(meta)

        return wrapped

    monkeypatch.setattr(retrieval, "compile_filter", counting)
    hits = padded.retrieve(QUERY, k=3, kinds="chunk", filters={"title": {"$ne": "Nothing"}})
    assert len(hits) == 3
    assert len(asked) == len(set(asked)) < 100 < len(padded.state.documents)  # each once, few
    # a filter only two chunks pass: the paging stops when it has ranked them all
    asked.clear()
    hits = padded.retrieve(QUERY, k=3, kinds="chunk", filters={"title": {"$in": ["Quorvex", "Shipment 5"]}})
    assert sorted(h.document_ids[0] for h in hits) == ["pad5", "quorvex"]


# -- titles ------------------------------------------------------------------------------------


def test_a_title_many_documents_share_is_not_a_link() -> None:
    docs = [Document(id="solo", text="Solo text about Venice.", metadata={"title": "Grand Canal"})]
    docs += [Document(id=f"dup{i}", text=f"Copy {i} of a page.", metadata={"title": "Release Notes"})
             for i in range(MAX_DOCUMENTS_PER_TITLE + 1)]
    docs += [Document(id=f"few{i}", text=f"Variant {i}.", metadata={"title": f"Harbour Guide ({i})"})
             for i in range(3)]
    gs = GraphStrata.build(docs, embedder=HashEmbedder())
    rows = named_chunks(gs.state, "Do the Release Notes mention the Grand Canal or the Harbour Guide?")
    named = {gs.state.chunks[r].document_id for r in rows}
    assert named == {"solo", "few0", "few1", "few2"}
    assert title_index(gs.state).find("Release Notes")  # still in the index itself


# -- persisted structures ------------------------------------------------------------------------


def test_structures_round_trip_through_the_codecs(padded: GraphStrata) -> None:
    state = _fresh(padded.state)
    keys = [DOCUMENT_ROWS.key, ENTITY_CHUNKS.key, TITLES.key, DATES.key, PROVENANCE.key]
    prepare(state, keys)
    got = decode(encode(state))
    assert set(keys) <= set(got)
    built = _fresh(padded.state)
    assert got[DOCUMENT_ROWS.key] == DOCUMENT_ROWS.build(built)
    want = ENTITY_CHUNKS.build(built)
    for name, arr in want.arrays().items():
        assert np.array_equal(got[ENTITY_CHUNKS.key].arrays()[name], arr), name
    assert got[TITLES.key].titles == TITLES.build(built).titles
    assert got[TITLES.key].index.find("Shipment 12") == title_index(built).find("Shipment 12")
    assert got[DATES.key].dates == DATES.build(built).dates
    prov = got[PROVENANCE.key]
    for name, arr in PROVENANCE.build(built).arrays().items():
        assert np.array_equal(prov.arrays()[name], arr), name
    for layer, comms in enumerate(built.communities, 1):
        for i, c in enumerate(comms):
            assert [built.chunks[r].id for r in prov.community_rows(layer, i)] == list(c.chunk_ids)
            assert prov.document_ids(prov.community_rows(layer, i)) == built.document_ids_of(c.chunk_ids)


def test_dates_round_trip_and_a_seeded_state_links_without_building(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = [Document(id=f"d{i}", text=f"Time: 2026010{i}_1100\nmet on day {i}", metadata={}) for i in range(1, 4)]
    gs = GraphStrata.build(docs, embedder=HashEmbedder())
    state = _fresh(gs.state)
    prepare(state, [DATES.key, TITLES.key, DOCUMENT_ROWS.key])
    seeded = type(state)(**{f: getattr(state, f) for f in state.__dataclass_fields__
                            if not f.startswith("_") and f != "derived_seed"},
                         derived_seed=decode(encode(state)))
    import graphstrata.structures.passages as propagation
    import graphstrata.structures.provenance as base

    def boom(*a, **k):
        raise AssertionError("rebuilt a persisted structure")

    monkeypatch.setattr(propagation, "_build_dates", boom)
    monkeypatch.setattr(propagation, "_titles_of", boom)
    monkeypatch.setattr(base, "_build_document_rows", boom)
    assert date_index(seeded).find("what happened on January 2nd?") == {"d2"}
    assert named_chunks(seeded, "the talk of 20260103") == [gs.state.chunk_row["d3#0"]]


def test_codecs_name_bad_arrays() -> None:
    packed = pack_strings(["a", "bé", ""])
    assert unpack_strings(packed["utf8"], packed["offsets"]) == ["a", "bé", ""]
    with pytest.raises(ValueError, match="offsets"):
        unpack_strings(packed["utf8"][:-1], packed["offsets"])
    with pytest.raises(ValueError, match="entity_chunk_rows"):
        decode({f"{ENTITY_CHUNKS.key}|1|indptr": np.array([0, 5]), f"{ENTITY_CHUNKS.key}|1|rows": np.arange(2),
                f"{ENTITY_CHUNKS.key}|1|counts": np.array([2]), f"{ENTITY_CHUNKS.key}|1|limit": np.array([50])})
    with pytest.raises(ValueError, match="dates"):
        decode({**{f"{DATES.key}|2|{k}": v for k, v in pack_strings(["x"]).items()},
                f"{DATES.key}|2|days": np.array([20261340])})


# -- the native push -----------------------------------------------------------------------------


def test_push_touching_many_nodes_keeps_its_error_bound() -> None:
    """Thousands of touched nodes (the flat table grows several times) and a long FIFO."""
    rng = np.random.default_rng(5)
    n = 20_000
    a = sp.random(n, n, density=3.0 / n, random_state=rng, format="csr")
    a = a + sp.eye(n, k=1, format="csr")  # a chain through every node
    walk = transition_matrix(a + a.T)
    seeds = rng.choice(n, 20, replace=False)
    weights = rng.random(20)
    got = local_pagerank(push_graph(walk), seeds, weights, 0.5, 1e-7)
    assert len(got.nodes) > 5000
    reset = np.zeros(n)
    np.add.at(reset, seeds, weights)
    exact = personalized_pagerank(walk, reset, 0.5, tol=1e-14, max_iter=5000)
    assert np.abs(got.dense(n) - exact).sum() <= got.residual + 1e-5


def test_title_mentions_equal_the_title_index_scan() -> None:
    from graphstrata.extraction import TitleIndex
    from graphstrata.structures.passages import title_mentions

    index = TitleIndex({"a": "Big Eye (film)", "b": "Big Eye", "c": "Eye", "d": "New York City", "e": "York",
                        "f": "C++", "g": "lowercase only", "h": "United"})
    texts = ["The Big Eye was filmed in New York City.", "An eye; the Eye.", "C++ and United States of York",
             "", "Big", "York City Big Eye", "nothing here"]
    want = index.mentions(texts)
    got = title_mentions(index, texts)
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in want.items()}
    assert all(v == sorted(v) for v in got.values())
    assert title_mentions(TitleIndex({}), texts) == {}
