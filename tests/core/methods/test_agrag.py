"""AGRAG-offline method (spec seed-agrag.md §2, §6.3, tests list §6.4) on the tiny corpus."""

import re

import numpy as np
import pytest
from graphstrata import GraphStrata
from graphstrata.methods import METHODS
from graphstrata.methods.agrag import AGRAG
from graphstrata.methods.fact_filter import Fact
from graphstrata.structures.agrag import PREDICATE, build_graph

PATH_RE = re.compile(r"^\([^()]+ \[SEP\] [^()]+ \[SEP\] [^()]+\)( \[SEP_REC\] \([^()]+\))*$")
Q = "Where was Edmund Hillary born?"


@pytest.fixture()
def gs(corpus, embedder, small_config):
    return GraphStrata.build(corpus, config=small_config, embedder=embedder)


def test_registered_with_documented_defaults():
    assert METHODS["agrag"] is AGRAG
    d = AGRAG.defaults
    assert d["compat"] == "paper" and d["top_facts"] == 5 and d["max_facts"] == 4
    assert d["damping"] == 0.5 and d["ppr_tol"] == 1e-7 and d["max_expansion"] == 20
    assert d["pseudo_cost"] == 10.0 and d["max_path_passages"] == 5 and d["fact_filter"] is None


def test_returns_k_ranked_chunks_with_provenance(gs):
    hits = gs.retrieve(Q, method="agrag", k=3, kinds=["chunk"])
    assert len(hits) == 3 and all(h.kind == "chunk" for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert hits[0].document_ids == ["hillary"]
    # k above the corpus size: every chunk once
    everything = gs.retrieve(Q, method="agrag", k=100, kinds=["chunk"])
    assert sorted(h.id for h in everything) == sorted(c.id for c in gs.chunks)


def test_path_and_fact_hits_have_format_and_provenance(gs):
    hits = gs.retrieve(Q, method="agrag", k=2)
    kinds = [h.kind for h in hits]
    assert kinds[:2] == ["chunk", "chunk"]
    facts = [h for h in hits if h.kind == "relation"]
    paths = [h for h in hits if h.kind == "path"]
    assert facts and paths
    assert kinds.index("path") > kinds.index("relation")  # context ordered by kind
    for h in paths:
        assert h.layer is None and PATH_RE.match(h.text), h.text
        assert f"[SEP] {PREDICATE} [SEP]" in h.text or "[SEP] synonym [SEP]" in h.text
        assert h.chunk_ids and set(h.chunk_ids) <= set(gs.chunk_row)
        assert h.document_ids == gs.document_ids_of(h.chunk_ids)
        assert h.metadata["anchors"] and h.metadata["method"] == "agrag"
        assert len(h.metadata["triples"]) == len(h.metadata["facts"])
    for h in facts:
        assert h.layer == 0 and h.metadata["role"] == "anchor_fact"
        assert set(h.document_ids) <= set(gs.documents)
    assert any("hillary" in h.document_ids for h in paths)


def test_deterministic_across_calls_and_builds(corpus, embedder, small_config, gs):
    first = [(h.kind, h.id, h.text, round(h.score, 9)) for h in gs.retrieve(Q, method="agrag", k=4)]
    again = [(h.kind, h.id, h.text, round(h.score, 9)) for h in gs.retrieve(Q, method="agrag", k=4)]
    other = GraphStrata.build(corpus, config=small_config, embedder=embedder)
    rebuilt = [
        (h.kind, h.id, h.text, round(h.score, 9)) for h in other.retrieve(Q, method="agrag", k=4)
    ]
    assert first == again == rebuilt


@pytest.mark.parametrize(
    "bad",
    [
        {"nope": 1},
        {"compat": "v2"},
        {"top_facts": -1},
        {"max_expansion": 1.5},
        {"alpha": 1.5},
        {"passage_seed_weight": -0.1},
        {"damping": 1.0},
        {"ppr_tol": 0},
        {"ppr_weight": -1},
        {"title_edge_weight": -1},
        {"passage_score_factor": -1},
        {"fact_filter": "llm"},
    ],
)
def test_options_validation(gs, bad):
    with pytest.raises(ValueError):
        gs.retrieve(Q, method="agrag", k=2, **bad)


def test_compat_modes_and_paper_seeding_run(gs):
    for opts in ({"compat": "agrag_code_2025"}, {"passage_seed_weight": 0.0},
                 {"passage_score_factor": 1.0, "max_expansion": 0}):
        hits = gs.retrieve(Q, method="agrag", k=2, **opts)
        assert [h.kind for h in hits[:2]] == ["chunk", "chunk"]


def test_fact_filter_seam(gs):
    seen = {}

    def keep_none(query, facts):
        seen["n"] = len(facts)
        assert all(isinstance(f, Fact) for f in facts)
        return []

    hits = gs.retrieve(Q, method="agrag", k=3, fact_filter=keep_none)
    assert 0 < seen["n"] <= AGRAG.defaults["top_facts"]
    assert [h.kind for h in hits] == ["chunk"] * 3  # no anchors: no facts, no paths

    def keep_last(query, facts):
        seen["pick"] = facts[-1]
        return [facts[-1], Fact(-99, "x", "y", "x", "p", "y", "", 0.0)]  # unknown one dropped

    hits = gs.retrieve(Q, method="agrag", k=3, fact_filter=keep_last)
    pick = seen["pick"]
    rel = [h for h in hits if h.kind == "relation"]
    assert [h.id for h in rel] == [f"{pick.source}\u241f{pick.target}"]
    for h in hits:
        if h.kind == "path":
            assert set(h.metadata["anchors"]) <= {pick.source, pick.target}


def test_offline_filter_keeps_facts_within_delta(gs):
    hits = gs.retrieve(Q, method="agrag", k=1, kinds=["relation"], fact_delta=0.0, max_facts=4)
    assert len(hits) == 1  # only facts tied with the best
    many = gs.retrieve(Q, method="agrag", k=1, kinds=["relation"], fact_delta=10.0, max_facts=3)
    assert len(many) == 3


def test_graph_structure(gs):
    g = gs.derived("agrag:graph", lambda: build_graph(gs))
    n_e, n_c = len(gs.kg), len(gs.chunks)
    assert (g.n_entities, g.n_chunks) == (n_e, n_c)
    assert g.fact.nnz == 2 * len(gs.kg.relations)
    mentions = sum(len(e.chunk_ids) for e in gs.kg.entities.values())
    assert g.contains.nnz == 2 * mentions
    assert (abs(g.contains - g.contains.T)).nnz == 0 and (abs(g.synonym - g.synonym.T)).nnz == 0
    if g.synonym.nnz:
        assert g.synonym.data.min() >= 0.8 - 1e-6
    # passage nodes only touch entities, entity block of contains is empty
    assert g.contains[:n_e, :n_e].nnz == 0 and g.contains[n_e:, n_e:].nnz == 0
    # the walk operator is column-stochastic on non-dangling nodes
    walk = g.walk(1.0, 1.0, 1.0)
    col = np.asarray(walk.matrix.sum(axis=0)).ravel()
    np.testing.assert_allclose(col[~walk.dangling], 1.0, atol=1e-9)


def test_derived_graph_cached_and_cleared_on_insert(gs):
    gs.retrieve(Q, method="agrag", k=1)
    g1 = gs.derived("agrag:graph", lambda: None)
    assert g1 is not None
    gs.retrieve("Auckland", method="agrag", k=1)
    assert gs.derived("agrag:graph", lambda: None) is g1
    gs.insert(["Queenstown is a town in New Zealand near Auckland."])
    # built again for the new state by its first query (an insert does not pay for it)
    assert gs.derived("agrag:graph", lambda: "fresh") == "fresh"
