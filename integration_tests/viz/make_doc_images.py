"""Regenerate the README's pictures of the community hierarchy (not a test; run by hand).

    .venv/bin/python integration_tests/viz/make_doc_images.py [--hash] [--out docs/images]

Indexes ``cookbook/sample_corpus/wiki_sample.jsonl`` with the offline MiniLM embedder (about
half a minute; ``--hash``: the test HashEmbedder, seconds, less meaningful titles), then writes

- ``hierarchy.png``: :func:`graphstrata.viz.render_png` of the whole hierarchy;
- ``hierarchy_query.png``: the same with the first sample question's hits highlighted;
- ``hierarchy_html.png``: headless Chromium's screenshot of :func:`render_html` with that
  question, expanded from a retrieved top-layer community down to a retrieved entity.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cdp():
    spec = importlib.util.spec_from_file_location("gs_viz_cdp", Path(__file__).with_name("cdp.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["gs_viz_cdp"] = module
    spec.loader.exec_module(module)
    return module


def _row(node_id: str) -> str:
    quoted = node_id.replace("\\", "\\\\").replace('"', '\\"')
    return f'#tree li[data-id="{quoted}"] > .row'


def _shrink(path: Path) -> Path:
    """Re-save a PNG with a 256-colour palette (a third of the bytes; flat colours and text
    survive it unchanged to the eye)."""
    from PIL import Image

    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)
    print("wrote", path, f"({path.stat().st_size // 1024} KiB)")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "images"))
    ap.add_argument("--hash", action="store_true", help="HashEmbedder instead of MiniLM (fast)")
    args = ap.parse_args(argv)
    from graphstrata import GraphStrata
    from graphstrata.viz import render_html, render_png

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sample = ROOT / "cookbook" / "sample_corpus"
    docs = [json.loads(line) for line in (sample / "wiki_sample.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    question = json.loads((sample / "questions.jsonl").read_text(encoding="utf-8").splitlines()[0])["question"]
    embedder = None
    if args.hash:
        from graphstrata.testing import HashEmbedder

        embedder = HashEmbedder()
    gs = GraphStrata.build(docs, embedder=embedder, show_progress=False)
    hits = gs.retrieve(question, method="archrag", k=5)
    _shrink(render_png(gs, out / "hierarchy.png"))
    _shrink(render_png(gs, out / "hierarchy_query.png", query=question, query_hits=hits, method="archrag"))

    cdp = _cdp()
    binary = cdp.find_chromium()
    if binary is None:
        print("no chromium: hierarchy_html.png not written", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        page = render_html(gs, Path(tmp) / "hierarchy.html", query=question, query_hits=hits, method="archrag")
        state = gs.state
        retrieved = [h.id for h in hits if h.kind == "community"]
        top_layer = len(state.communities)
        with cdp.Browser(binary, width=1440, height=900) as b:
            b.open(page.as_uri())
            b.click("#collapse")
            # open a retrieved top-layer community (else the one above the best retrieved one)
            tops = [c for c in retrieved if c.startswith(f"L{top_layer}C")]
            path = b.js(f"(function(){{var D=window.graphstrataViz.data, x={json.dumps((tops or retrieved)[0])}, out=[x];"
                        "while (D.nodes[x] && D.nodes[x].p) { x = D.nodes[x].p; out.unshift(x); } return out;})()")
            node = path[0]
            b.click(_row(node))
            data = b.js("window.graphstrataViz.data")
            marks = data["query"]["mark"]
            while data["nodes"][node].get("k"):
                kids = data["nodes"][node]["k"]
                node = max(kids, key=lambda k: (marks.get(k, 0), data["nodes"][k]["n"]))
                b.click(_row(node))
            ents = data["nodes"][node].get("e", [])
            if ents:
                best = max(ents, key=lambda e: (marks.get(e, 0), data["ents"][e]["g"]))
                b.click(_row(best))
            b.js(f"document.querySelector({json.dumps(_row(path[0]))}).scrollIntoView({{block:'start'}})")
            _shrink(b.screenshot(out / "hierarchy_html.png"))
            bad = [u for u in b.requests if not u.startswith(("file:", "data:", "about:"))]
            if bad or b.exceptions or b.console_errors:
                print("page problems:", bad, b.exceptions, b.console_errors, file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
