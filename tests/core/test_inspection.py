"""inspect / stats / export (issue 18 parts 1 and 3) on the shipped sample corpus."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest
from graphstrata import GraphStrata
from graphstrata.cli import main
from graphstrata.inspection import (
    EXPORT_TEXT_CHARS,
    describe,
    export_graph,
    read_records,
    to_networkx,
)
from graphstrata.testing import HashEmbedder

SAMPLE = Path(__file__).resolve().parents[2] / "cookbook" / "sample_corpus" / "wiki_sample.jsonl"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    docs = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    out = tmp_path_factory.mktemp("inspect") / "index"
    gs = GraphStrata.build(docs, embedder=HashEmbedder(), persist_dir=out)
    return gs, out


def test_stats_describe_layers_and_top_entities(index):
    gs, _ = index
    s = gs.stats(top=5)
    assert (s["documents"], s["chunks"]) == (75, len(gs.chunks))
    assert s["communities_per_layer"] == [len(layer) for layer in gs.communities]
    for info, comms in zip(s["layers"], gs.communities, strict=True):
        sizes = sorted(len(c.entity_ids) for c in comms)
        assert (info["entities"]["min"], info["entities"]["max"]) == (sizes[0], sizes[-1])
        assert info["top"][0]["entities"] == sizes[-1] and len(info["top"]) == min(5, len(comms))
        assert all(t["title"] == next(c.title for c in comms if c.id == t["id"]) for t in info["top"])
    degrees = dict(gs.kg.nx.degree())
    top = s["top_entities"]
    assert len(top) == 5 and top[0]["degree"] == max(degrees.values())
    assert [t["degree"] for t in top] == sorted((t["degree"] for t in top), reverse=True)
    assert set(s["build_seconds"]) >= {"chunking", "extracting entities", "clustering communities"}
    assert s["build_usage"] == {} and s["llm"] is None
    with pytest.raises(ValueError, match="top must be a positive integer"):
        gs.stats(top=0)


def test_records_read_without_the_embedder_match_the_live_index(index):
    gs, out = index
    records = read_records(out)
    live, disk = describe(gs.state), describe(records)
    assert disk == live
    assert records.manifest["version"].startswith("v")


@pytest.mark.parametrize("fmt", ["graphml", "json"])
def test_export_loads_back_with_the_counts_inspect_reports(index, tmp_path, fmt, capsys):
    _, out = index
    target = tmp_path / f"graph.{fmt}"
    assert main(["export", str(out), "--format", fmt, "--out", str(target)]) == 0
    assert main(["inspect", str(out), "--json"]) == 0
    reported = json.loads(capsys.readouterr().out.split("\n", 1)[1])["stats"]["graph"]
    if fmt == "graphml":
        g = nx.read_graphml(target)
    else:
        g = nx.node_link_graph(json.loads(target.read_text(encoding="utf-8")), edges="edges")
    assert (g.number_of_nodes(), g.number_of_edges()) == (reported["nodes"], reported["edges"])
    kinds = nx.get_node_attributes(g, "kind")
    records = read_records(out)
    assert sum(k == "entity" for k in kinds.values()) == len(records.kg.entities)
    assert sum(k == "community" for k in kinds.values()) == sum(len(c) for c in records.communities)
    c = records.communities[0][0]
    assert {m for _, m, d in g.out_edges(c.id, data=True) if d["kind"] == "member"} == set(c.members)
    a, b = next(iter(records.kg.relations))
    assert g.edges[a, b]["kind"] == "relation"


def test_export_attributes_are_scalar_and_bounded(index):
    gs, _ = index
    g = to_networkx(gs.state)
    for _, attrs in g.nodes(data=True):
        assert all(isinstance(v, (str, int, float)) for v in attrs.values())
        assert len(attrs.get("description", "")) <= EXPORT_TEXT_CHARS


def test_export_refuses_bad_formats_and_paths(index, tmp_path, capsys):
    gs, out = index
    with pytest.raises(ValueError, match="unknown export format"):
        export_graph(gs.state, tmp_path / "g.x", "dot")
    assert main(["export", str(out), "--out", str(tmp_path / "missing" / "g.graphml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "nope"), "--out", str(tmp_path / "g.graphml")]) == 2
    assert "not found" in capsys.readouterr().err


def test_inspect_text_shows_layers_titles_and_stages(index, capsys):
    gs, out = index
    assert main(["inspect", str(out), "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert f"layer 1: {len(gs.communities[0])} communities" in text
    biggest = max(gs.communities[0], key=lambda c: (len(c.entity_ids), -int(c.id[3:])))
    assert biggest.id in text
    assert "top entities by degree" in text and "clustering communities" in text
    assert "no LLM (offline build)" in text
