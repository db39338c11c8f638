"""Why a hit came back (issue 18): ``explain=True`` on every method, over the sample corpus.

The explanations must name records that exist in the index (entities, communities, chunks),
keep PageRank numbers in [0, 1], agree with the scores they explain, and cost nothing when
off: the ranking is the same with the option on or off.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from graphstrata import Document, GraphStrata
from graphstrata.structures.hirag import hi_index
from graphstrata.methods import METHODS
from graphstrata.methods import explain as ex
from graphstrata.models import embed_query
from graphstrata.testing import HashEmbedder

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "cookbook" / "sample_corpus"
K = 5


@pytest.fixture(scope="module")
def gs():
    docs = [json.loads(line) for line in (SAMPLE / "wiki_sample.jsonl").open(encoding="utf-8")]
    docs = [Document(d["id"], d["text"], {"title": d["title"]}) for d in docs]
    return GraphStrata.build(docs, embedder=HashEmbedder())


@pytest.fixture(scope="module")
def questions():
    rows = [json.loads(line) for line in (SAMPLE / "questions.jsonl").open(encoding="utf-8")]
    return [r["question"] for r in rows[:3]]


def run(gs, name, query, explain, **options):
    qvec = embed_query(gs.state.embedder, query)
    return METHODS[name]().retrieve(gs.state, query, qvec, K, explain=explain, **options)


def entity_refs(e):
    """Every entity ref an explanation names."""
    seeds = e.get("seeds", {})
    refs = list(e.get("matched_entities", [])) + list(seeds.get("entities", []))
    refs += e.get("reasoning_path", {}).get("entities", [])
    refs += e.get("second_hop", {}).get("via", [])
    for link in e.get("linked_from", []):
        refs += link.get("via", [])
    return refs


def test_the_sample_index_has_a_hierarchy(gs):
    assert len(gs.state.communities) >= 2  # so community paths have more than one step


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_hit_of_every_method_has_a_reason(gs, questions, name):
    for q in questions:
        r = run(gs, name, q, True)
        assert len(r.chunks) == K
        assert set(r.explain) == {row for row, _ in r.chunks}
        for e in [r.explain[row] for row, _ in r.chunks] + [h.explain for h in r.context]:
            assert isinstance(e, dict) and e["method"] == name
            assert isinstance(e["reason"], str) and e["reason"].strip() and "\n" not in e["reason"]
            assert json.loads(json.dumps(e)) == e  # plain JSON: str keys, no numpy, no tuples


@pytest.mark.parametrize("name", sorted(METHODS))
def test_explanations_name_records_that_exist(gs, questions, name):
    state = gs.state
    kg = state.kg
    communities = {c.id for layer in state.communities for c in layer}
    hi = hi_index(state) if name == "hirag" else None
    seen_entities = 0
    for q in questions:
        r = run(gs, name, q, True)
        explained = [(state.chunks[row].id, r.explain[row]) for row, _ in r.chunks]
        explained += [(None, h.explain) for h in r.context]
        for chunk_id, e in explained:
            for ref in entity_refs(e):
                seen_entities += 1
                if ref.get("summary"):  # a HiRAG summary entity: a HiIndex node
                    assert name == "hirag" and ref["id"] in hi.node_row, ref
                    assert hi.names[hi.node_row[ref["id"]] - hi.n_entities] == ref["name"]
                else:
                    assert ref["id"] in kg.entities, ref
                    assert kg.entities[ref["id"]].name == ref["name"]
            for c in e.get("community_path", []):
                if name == "hirag":
                    assert c["id"].startswith("hirag:C") and int(c["id"][7:]) < len(hi.communities)
                else:
                    assert c["id"] in communities, c
            layers = [c["layer"] for c in e.get("community_path", [])]
            assert layers == sorted(layers, reverse=True)  # top layer first
            for rel in e.get("matched_relations", []):
                assert (rel["source"], rel["target"]) in kg.relations
            for link in e.get("linked_from", []):
                assert link["chunk_id"] in state.chunk_row and 0 < link["ppr_reset"] <= 1
            if "second_hop" in e:
                assert e["second_hop"]["from"] in state.chunk_row
            if "ppr_mass" in e:
                assert 0.0 <= e["ppr_mass"] <= 1.0
            if "ppr_reset" in e.get("seeds", {}):
                assert 0.0 < e["seeds"]["ppr_reset"] <= 1.0
            if chunk_id is not None:
                # an entity said to touch a chunk mentions it (HiRAG summaries: via their chunks)
                for ref in e.get("matched_entities", []) + e.get("seeds", {}).get("entities", []):
                    if not ref.get("summary"):
                        assert chunk_id in kg.entities[ref["id"]].chunk_ids, (ref, chunk_id)
                for m in e.get("matched_entities", [])[:1]:
                    assert m["name"] in e["reason"]  # the reason names what it stands on
    if name not in ("dense", "bm25", "hybrid"):
        assert seen_entities > 0


@pytest.mark.parametrize("name", sorted(METHODS))
def test_explain_off_changes_nothing_and_costs_nothing(gs, questions, name):
    for q in questions:
        off, on = run(gs, name, q, False), run(gs, name, q, True)
        assert off.chunks == on.chunks  # rows and scores
        assert off.raw_scores == on.raw_scores
        assert [(h.id, h.kind, h.score) for h in off.context] == [(h.id, h.kind, h.score) for h in on.context]
        assert off.explain == {}
        assert all(h.explain is None for h in off.context)
        assert all("explain" not in h.to_dict() for h in off.context)
        assert all(h.to_dict()["explain"] == h.explain for h in on.context)


def test_the_seed_signals_are_the_scores_they_explain(gs, questions):
    for q in questions:
        dense, bm25, hybrid = (run(gs, m, q, True) for m in ("dense", "bm25", "hybrid"))
        for row, _ in dense.chunks:
            assert dense.explain[row]["seeds"]["dense"] == pytest.approx(dense.raw_scores[row], abs=1e-5)
        for row, _ in bm25.chunks:
            assert bm25.explain[row]["seeds"]["bm25"] == pytest.approx(bm25.raw_scores[row], rel=1e-5)
            assert set(bm25.explain[row]) >= {"seeds", "reason"}
        for row, _ in hybrid.chunks:
            seeds = hybrid.explain[row]["seeds"]
            assert seeds["hybrid"] == pytest.approx(hybrid.raw_scores[row], abs=1e-6)
            assert {"dense", "bm25"} <= set(seeds)


@pytest.mark.parametrize(
    "name, options",
    [("archrag", {"propagate": False}), ("lightrag", {}), ("hirag", {}), ("agrag", {})],
)
def test_score_parts_add_up_to_the_raw_score(gs, questions, name, options):
    for q in questions:
        r = run(gs, name, q, True, **options)
        for row, _ in r.chunks:
            parts = r.explain[row].get("score_parts", {})
            assert sum(parts.values()) == pytest.approx(r.raw_scores[row], abs=1e-5), (row, parts)


def test_archrag_explains_the_passage_walk(gs, questions):
    state = gs.state
    for q in questions:
        r = run(gs, "archrag", q, True)
        masses = [r.explain[row]["ppr_mass"] for row, _ in r.chunks]
        assert masses == sorted(masses, reverse=True)  # the walk's mass is what ranks them
        assert any(r.explain[row]["seeds"].get("ppr_reset") for row, _ in r.chunks)
        for row, _ in r.chunks:
            for link in r.explain[row].get("linked_from", []):
                seed = state.chunk_row[link["chunk_id"]]
                shared = set(state.kg.chunk_entities().get(link["chunk_id"], []))
                assert seed != row
                assert {v["id"] for v in link.get("via", [])} <= shared
        kinds = {h.kind for h in r.context}
        assert {"entity", "community"} <= kinds
        for h in r.context:
            if h.kind == "community":
                assert h.explain["community_path"][-1]["id"] == h.id
                assert h.explain["layer"] == h.layer
    # without propagation there is no walk to explain
    r = run(gs, "archrag", questions[0], True, propagate=False)
    assert all("ppr_mass" not in e and "linked_from" not in e for e in r.explain.values())


def test_agrag_names_its_reasoning_paths(gs, questions):
    found = 0
    for q in questions:
        r = run(gs, "agrag", q, True)
        paths = {h.id: h for h in r.context if h.kind == "path"}
        for h in paths.values():
            rp = h.explain["reasoning_path"]
            assert rp["id"] == h.id and rp["triples"] == h.metadata["triples"][: ex.MAX_TRIPLES]
            assert {e["id"] for e in rp["entities"]} <= set(h.metadata["entities"])
        for row, _ in r.chunks:
            e = r.explain[row]
            if "reasoning_path" in e:
                found += 1
                assert e["reasoning_path"]["id"] in paths
            assert 0.0 <= e["ppr_mass"] <= 1.0
    assert found > 0


def test_explain_is_a_checked_universal_option():
    for name, cls in METHODS.items():
        assert cls.defaults["explain"] is False, name
        with pytest.raises(ValueError, match="option 'explain'"):
            cls().options({"explain": "yes"})


def test_reason_is_built_from_the_fields():
    e = ex.explanation(
        "toy",
        "lead",
        seeds={"dense": 0.5, "bm25": 3.0},
        matched_terms=["paris"],
        matched_entities=[{"id": "paris", "name": "Paris", "similarity": 0.9}],
        community_path=[{"id": "L2C0", "layer": 2, "title": "France"}],
        ppr_mass=0.25,
        facts=[],
        second_hop=None,
    )
    assert "facts" not in e and "second_hop" not in e  # empty fields are dropped
    assert e["reason"] == (
        "lead; dense cosine 0.500, BM25 3.00 on paris; matched entities Paris; "
        "community 'France' (L2C0); PageRank mass 0.2500"
    )
    assert ex.explanation("toy")["reason"]  # never empty


def test_retrieve_passes_explain_through(gs, questions):
    hits = gs.retrieve(questions[0], method="archrag", k=K)
    assert all(h.explain is None for h in hits)
    hits = gs.retrieve(questions[0], method="archrag", k=K, explain=True)
    context = [h for h in hits if h.kind != "chunk"]
    assert context and all(h.explain and h.explain["reason"] for h in context)
    chunks = [h for h in hits if h.kind == "chunk"]
    assert len(chunks) == K and all(h.explain and h.explain["reason"] for h in chunks)
    assert all(h.to_dict()["explain"] == h.explain for h in chunks)


def _cli_has_explain() -> bool:
    from graphstrata import cli

    try:
        return bool(cli._parse_args(["query", "DIR", "Q", "--explain"]).explain)
    except SystemExit:
        return False


def test_cli_query_explain_prints_a_reason_under_every_hit(tmp_path, questions, capsys, monkeypatch):
    import graphstrata.api
    import graphstrata.models
    from graphstrata import cli

    if not _cli_has_explain():
        pytest.skip("graphstrata query has no --explain yet")
    embedder = HashEmbedder()
    monkeypatch.setattr(graphstrata.api, "default_embedder", lambda: embedder)
    monkeypatch.setattr(graphstrata.models.MiniLMEmbedder, "id", embedder.id)
    out = tmp_path / "idx"
    assert cli.main(["index", str(SAMPLE / "wiki_sample.jsonl"), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    for q in questions:
        for name in ("archrag", "agrag", "bm25"):
            assert cli.main(["query", str(out), q, "--method", name, "-k", "3", "--explain"]) == 0
            lines = capsys.readouterr().out.splitlines()
            hits = [i for i, line in enumerate(lines) if line[:1].strip()]
            assert len(hits) >= 3
            for i in hits:  # the line under each hit is its reason
                assert lines[i + 1].strip().startswith("why: ") and len(lines[i + 1].strip()) > 5
    assert cli.main(["query", str(out), questions[0], "-k", "2", "--explain", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits and all(h["explain"]["reason"] for h in hits)
