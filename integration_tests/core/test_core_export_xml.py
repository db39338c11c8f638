"""GraphML export of a corpus full of control characters is valid XML (issue 30, finding 5).

Before the fix ``nx.write_graphml`` wrote the control characters as they were: 3 of 3 exports
failed to parse and networkx could not read them back.
"""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET

import networkx as nx
from graphstrata import Document, GraphStrata
from graphstrata.inspection import export_graph, to_networkx, xml_safe
from graphstrata.testing import HashEmbedder

CONTROL = [chr(c) for c in (*range(0x01, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20))] + ["\ufffe", "\uffff"]


def _dirty(text: str, rng: random.Random) -> str:
    """A control character after about every fifth character, inside words too."""
    return "".join(ch + (rng.choice(CONTROL) if rng.random() < 0.2 else "") for ch in text)


def test_graphml_of_a_corpus_full_of_control_characters_round_trips(tmp_path, shared_data, jsonl):
    rng = random.Random(30)
    docs = [
        Document(r["id"], _dirty(f"{r['title']}\n{r['text']}", rng), {"title": _dirty(r["title"], rng)})
        for r in jsonl(shared_data / "hotpotqa" / "corpus.jsonl")[:40]
    ]
    gs = GraphStrata.build(docs, embedder=HashEmbedder())
    g = to_networkx(gs.state)
    dirty_nodes = [n for n, d in g.nodes(data=True) if any(c in str(v) for v in (n, *d.values()) for c in CONTROL)]
    assert len(dirty_nodes) > 50  # the graph really carries them into ids and texts
    out = export_graph(gs.state, tmp_path / "g.graphml")
    ET.parse(out)  # well-formed XML
    back = nx.read_graphml(out)
    assert back.number_of_nodes() == g.number_of_nodes()
    assert back.number_of_edges() == g.number_of_edges()
    want = {xml_safe(n): {k: xml_safe(v) if isinstance(v, str) else v for k, v in d.items()}
            for n, d in g.nodes(data=True)}
    assert {n: dict(d) for n, d in back.nodes(data=True)} == want
    for a, b, d in g.edges(data=True):
        assert back.edges[xml_safe(a), xml_safe(b)]["kind"] == d["kind"]
    # nothing but the XML-invalid characters changed, and the JSON export keeps them as they are
    assert all(c not in x for x in want for c in CONTROL)
    json_out = export_graph(gs.state, tmp_path / "g.json", format="json")
    assert any(c in json_out.read_text(encoding="utf-8") for c in CONTROL)


def test_xml_safe_keeps_what_xml_allows():
    text = "tab\tnl\ncr\r é 漢 \U0001f600 \x7f"
    assert xml_safe(text) == text
    assert xml_safe("a\x00b\x1fc\ufffed") == "a\ufffdb\ufffdc\ufffdd"
