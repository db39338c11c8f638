"""The HTML explorer in a real browser: headless Chromium, network off, real clicks.

An index of 40 HotpotQA paragraphs (HashEmbedder: fast, the picture does not need semantic
vectors) is written as one HTML file with a query's hits, opened from a ``file://`` URL in
Debian's ``chromium`` driven over the DevTools pipe (``cdp.py``: no chromedriver, no PyPI
package), with every host name unresolvable and a dead proxy. The test clicks down from a
top-layer community to its entities, opens an entity's chunks, follows a hit from the query
panel, checks that the page asked for nothing but its own file and threw nothing, and saves
a screenshot (``$GRAPHSTRATA_VIZ_SCREENSHOTS``: a folder to keep it in, else tmp).

Skips only where no Chromium binary is installed (``apt-get install chromium``); under CI
(``CI`` set) a missing browser fails instead, as CI installs it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
from graphstrata import GraphStrata
from graphstrata.testing import HashEmbedder
from graphstrata.viz import render_html

_HERE = Path(__file__).resolve().parent


def _load_cdp():
    if "gs_viz_cdp" in sys.modules:
        return sys.modules["gs_viz_cdp"]
    spec = importlib.util.spec_from_file_location("gs_viz_cdp", _HERE / "cdp.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gs_viz_cdp"] = module
    spec.loader.exec_module(module)
    return module


cdp = _load_cdp()


@pytest.fixture(scope="module")
def chromium() -> str:
    found = cdp.find_chromium()
    if found is None:
        msg = "no Chromium binary on PATH (Debian: apt-get install chromium; or set $CHROMIUM)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return found


@pytest.fixture(scope="module")
def page(shared_data, jsonl, tmp_path_factory):
    """(GraphStrata, query, hits, html path, page data) for 40 HotpotQA paragraphs."""
    questions = jsonl(shared_data / "hotpotqa" / "questions.jsonl")[:8]
    corpus = {r["id"]: r for r in jsonl(shared_data / "hotpotqa" / "corpus.jsonl")}
    gold = list(dict.fromkeys(e for q in questions for e in q["evidence_ids"]))
    others = [i for i in corpus if i not in set(gold)][: 40 - len(gold)]
    docs = [corpus[i] for i in gold + others]
    gs = GraphStrata.build(docs, embedder=HashEmbedder())
    query = questions[0]["question"]
    hits = gs.retrieve(query, method="archrag", k=5)
    out = render_html(gs, tmp_path_factory.mktemp("viz") / "hierarchy.html", query=query,
                      query_hits=hits, method="archrag")
    text = out.read_text(encoding="utf-8")
    start = text.index('<script type="application/json" id="gs-data">') + len('<script type="application/json" id="gs-data">')
    data = json.loads(text[start: text.index("</script>", start)])
    return gs, query, hits, out, data


def _row(node_id: str) -> str:
    """CSS selector of the tree row of a community or entity id (quotes escaped)."""
    quoted = node_id.replace("\\", "\\\\").replace('"', '\\"')
    return f'#tree li[data-id="{quoted}"] > .row'


def _screens(tmp_path: Path) -> Path:
    keep = os.environ.get("GRAPHSTRATA_VIZ_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        return Path(keep)
    return tmp_path


def test_html_explorer_expands_communities_and_opens_entities_offline(chromium, page, tmp_path):
    gs, query, hits, html_path, data = page
    with cdp.Browser(chromium, width=1440, height=900) as b:
        b.open(html_path.as_uri())
        assert b.js("document.title") == "graphstrata — community hierarchy"
        roots = data["roots"]
        assert b.js("document.querySelectorAll('#tree > li').length") >= len(roots)
        assert b.js("document.querySelectorAll('#sun path').length") >= len(roots)

        # click down from the biggest top-layer community until a community lists entities
        node_id = roots[0]
        b.click("#collapse")  # the query's retrieved communities start expanded
        b.click(_row(node_id))
        while not data["nodes"][node_id].get("e"):
            node_id = data["nodes"][node_id]["k"][0]
            b.click(_row(node_id))
        names = [data["ents"][e]["n"] for e in data["nodes"][node_id]["e"]]
        visible = b.js(
            "Array.from(document.querySelectorAll('#tree li.leaf > .row .ttl'))"
            ".filter(function(e){return e.offsetParent !== null;}).map(function(e){return e.textContent;})"
        )
        assert names and set(names) <= set(visible), (names, visible)
        # the detail panel shows the community that was clicked last
        assert b.js("document.querySelector('#detail h2').textContent") == data["nodes"][node_id]["t"]

        # open one entity: its description and the text of its first chunk appear
        eid = data["nodes"][node_id]["e"][0]
        ent = data["ents"][eid]
        b.click(_row(eid))
        detail = b.js("document.getElementById('detail').innerText")
        assert ent["n"] in detail
        assert gs.state.kg.entities[eid].name == ent["n"]
        chunk = data["chunks"][ent["c"][0]]
        assert " ".join(chunk["t"].split())[:60] in " ".join(detail.split())
        shot = b.screenshot(_screens(tmp_path) / "hierarchy_html.png")

        # the query panel lists every hit; clicking a community hit reveals and selects it
        assert b.js("document.querySelectorAll('#query li').length") == len(hits)
        assert query in b.js("document.getElementById('query').innerText")
        comm_hits = [h for h in hits if h.kind == "community" and h.id in data["nodes"]]
        assert comm_hits, "archrag returns community hits"
        rank = next(i for i, h in enumerate(hits, 1) if h is comm_hits[-1])
        b.click(f'#query li[data-hit="{rank}"]')
        assert b.js("document.querySelector('#tree .row.sel').dataset.id") == comm_hits[-1].id
        assert b.js("document.querySelector('#tree .row.sel .rank').textContent") == f"#{rank}"
        assert b.js("document.querySelector('#detail h2').textContent") == data["nodes"][comm_hits[-1].id]["t"]

        # offline and clean: only the page itself was requested, and nothing threw
        assert all(u.startswith(("file:", "data:", "about:")) for u in b.requests), b.requests
        assert b.exceptions == [] and b.console_errors == []

    from PIL import Image

    im = Image.open(shot)
    assert im.size == (1440, 900)
    assert len(im.convert("RGB").getcolors(maxcolors=1 << 16) or []) > 50


def test_the_browser_really_has_no_network(chromium, tmp_path):
    """The harness's guarantee: a page that asks for a remote resource gets nothing."""
    probe = tmp_path / "probe.html"
    probe.write_text("<!DOCTYPE html><title>probe</title><script>window.done = fetch('http://example.com/')"
                     ".then(function(){return 'loaded'}, function(){return 'blocked'});</script>")
    with cdp.Browser(chromium) as b:
        b.open(probe.as_uri())
        assert b.js("window.done") == "blocked"


def test_entity_and_document_names_that_are_javascript_object_keys(chromium, tmp_path):
    """Entities named ``constructor``, ``__proto__``, ``toString``... render without a JavaScript
    error (issue 30: the page's maps were plain objects, whose prototype answers them)."""
    keys = ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"]
    docs = [{"id": k, "title": k, "text": f"{k} is discussed with {keys[(i + 1) % 5]} and {keys[(i + 2) % 5]}. "
             f"The {k} object calls toString and constructor."} for i, k in enumerate(keys)]
    docs += [{"id": f"plain-{i}", "title": f"Plain {i}", "text": f"Plain document {i} mentions constructor and valueOf."}
             for i in range(6)]
    gs = GraphStrata.build(docs, embedder=HashEmbedder(), config={"min_communities": 2, "max_community_size": 4})
    query = "constructor"
    hits = gs.retrieve(query, method="archrag", k=3, kinds=None, context_k=6)
    html_path = render_html(gs, tmp_path / "keys.html", query=query, query_hits=hits, method="archrag")
    text = html_path.read_text(encoding="utf-8")
    start = text.index('id="gs-data">') + len('id="gs-data">')
    data = json.loads(text[start: text.index("</script>", start)])
    assert "constructor" in data["ents"] and {"__proto__", "toString", "constructor"} <= set(data["docs"])
    rank = next((i for i, h in enumerate(hits, 1) if h.kind == "entity" and h.id == "constructor"), None)
    assert rank is not None, [(h.kind, h.id) for h in hits]
    with cdp.Browser(chromium) as b:
        b.open(html_path.as_uri())
        b.click("#collapse")
        # the entity named like Object.prototype.constructor: found, revealed, ranked
        b.click(f'#query li[data-hit="{rank}"]')
        assert b.js("document.querySelector('#detail h2').textContent") == "constructor"
        assert b.js("document.querySelector('#tree .row.sel').dataset.id") == "constructor"
        assert b.js("document.querySelector('#tree .row.sel .rank').textContent") == f"#{rank}"
        # names that are no node of the page are no node, whatever Object.prototype holds
        for k in [*keys, "isPrototypeOf", "__defineGetter__"]:
            b.js(f"window.graphstrataViz.reveal({json.dumps(k)}); true")
        for r in range(1, len(hits) + 1):
            b.click(f'#query li[data-hit="{r}"]')
        # chunk cards name their documents, also "__proto__" and "toString"
        for doc_id in ("__proto__", "toString", "constructor"):
            chunk_id = next(c for c, v in data["chunks"].items() if v["d"] == doc_id) if any(
                v["d"] == doc_id for v in data["chunks"].values()) else None
            if chunk_id is not None:
                assert b.js(f"window.graphstrataViz.data.docs[{json.dumps(doc_id)}]") == data["docs"][doc_id]
        assert b.exceptions == [] and b.console_errors == [], (b.exceptions, b.console_errors)
