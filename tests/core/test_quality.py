"""The graph-quality report (issue 28): its four shares, from records, from the JSON export and
in ``inspect --json``."""

from __future__ import annotations

import json

import pytest
from graphstrata import Document, GraphStrata
from graphstrata.cli import main
from graphstrata.inspection import export_graph
from graphstrata.quality import export_quality, graph_quality, records_quality, stray_kind
from graphstrata.testing import HashEmbedder


@pytest.mark.parametrize(
    ("name", "kind"),
    [("named", "verb"), ("achieved", "verb"), ("distinguish", "verb"), ("currently", "adverb"),
     ("far", "adverb"), ("early", "adverb"), ("later", "adverb"), ("September", "calendar"),
     ("monday", "calendar"), ("the", "function"), ("whereas", "function")],
)
def test_the_issues_stray_words_are_found(name, kind):
    assert stray_kind(name) == kind


@pytest.mark.parametrize("name", ["Paris", "family", "assembly", "mountain", "Charles Carroll", "bed", "seed",
                                  "May Day", "building", "speed"])
def test_names_and_nouns_are_not_stray(name):
    assert stray_kind(name) == ""


def test_shares_count_what_they_say():
    ents = [
        ("mount", "mount", ""), ("mounts", "mounts", ""), ("Mount", "Mount", "entity"),  # 2 variants
        ("currently", "currently", ""),  # stray
        ("charles carroll", "Charles Carroll", "person"), ("maryland", "Maryland", "location"),
        ("war", "war", "concept"), ("paris", "Paris", "location"),
    ]
    q = graph_quality(ents, ["CO_OCCURS_WITH", "", "born in", "member of"], examples=5)
    assert (q["entities"], q["relations"]) == (8, 4)
    assert q["stray_words"] == 0.125 and q["stray_by_kind"] == {"adverb": 1}
    assert q["variants"] == 0.25 and q["examples"]["variants"] == [["Mount", "mount", "mounts"]]
    assert q["typed"] == 0.375  # person, location, location
    assert q["labelled_relations"] == 0.5
    empty = graph_quality([], [])
    assert (empty["stray_words"], empty["variants"], empty["typed"], empty["labelled_relations"]) == (0, 0, 0, 0)
    with pytest.raises(ValueError, match="examples"):
        graph_quality([], [], examples=-1)


def test_export_and_inspect_report_the_same_figures(shared_data, jsonl, tmp_path):
    rows = jsonl(shared_data / "hotpotqa" / "corpus.jsonl")[:60]
    out = tmp_path / "index"
    gs = GraphStrata.build([Document(r["id"], r["text"], {"title": r["title"]}) for r in rows],
                           embedder=HashEmbedder(), persist_dir=out)
    live = records_quality(gs.state)
    assert live["entities"] == len(gs.kg.entities) and live["relations"] == len(gs.kg.relations)
    path = export_graph(gs.state, tmp_path / "graph.json", format="json")
    assert export_quality(path) == live
    report = tmp_path / "inspect.json"
    assert main(["inspect", str(out), "--json", str(report)]) == 0
    shown = json.loads(report.read_text(encoding="utf-8"))["stats"]["quality"]
    assert shown == live
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": 3}', encoding="utf-8")
    with pytest.raises(ValueError, match="not a graph export"):
        export_quality(bad)
