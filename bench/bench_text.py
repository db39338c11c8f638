"""Chunks as a reader sees them, on real text: the kernel documentation (issue 44).

Takes an evenly spaced sample of ``--files`` (default 300) of the ``*.rst.txt`` files of Debian's
``linux-doc-6.1`` (:func:`scale_corpus.linux_doc_files`, the scale benchmark's source; installed
with apt-get when missing and root) and chunks them three ways, ``--chunk-size`` / ``--chunk-overlap``
tokens of the ``--tokenizer`` (default: the fast preset's, as the scale benchmark):

* ``raw+tokens``: the file text as main fceef8b read it (``.rst.txt`` was plain text), token windows;
* ``visible+tokens``: the visible text (:mod:`graphstrata.markup`), token windows (today's default);
* ``visible+sentence``: the visible text, ``chunking="sentence"``;
* ``html+sentence``: as many of the package's ``.html`` pages (evenly spaced), read as visible
  text (:func:`graphstrata.markup.html_text`), ``chunking="sentence"``.

For each it reports the share of chunks after a document's first that start at a sentence or
paragraph boundary, judged without the splitter: the text before the chunk ends (ignoring
whitespace) with ``. ! ? 。 ！ ？`` (closing quotes and brackets allowed after it), or a blank line
separates it; and the chunks holding markup no reader sees: a reST directive, target, comment or
substitution line (``.. name::``, ``.. _x:``, ``.. SPDX-...``, ``.. |x| replace::``), an HTML tag,
or a heading underline (a line of 4+ repeated ``= - ~ ^ + * # " ' ` : . _`` right under a text line
no longer than it). It also times the markup reader and the sentence splitter (characters / s).

    python bench/bench_text.py [--files 300] [--tokenizer fast|minilm|words] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

END_RE = re.compile(r"[.!?\u3002\uff01\uff1f][\"'\u201d\u2019)\]]*\s*\Z")
BLANK_RE = re.compile(r"\n[ \t]*\n\s*\Z")
DIRECTIVE_RE = re.compile(r"^[ \t]*\.\.[ \t]+(?:[\w:.-]+::|_[^\n:]*:|\|[^|\n]+\|[ \t]+[\w-]+::|SPDX-)", re.M)
HTML_ELEMENTS = (
    "a abbr address article aside b blockquote body br button caption center code col colgroup dd "
    "del details div dl dt em figcaption figure font footer form h1 h2 h3 h4 h5 h6 head header hr "
    "html i iframe img ins kbd label li link main meta nav ol p pre s script section small span "
    "strong style sub summary sup table tbody td tfoot th thead title tr tt u ul"
).split()
TAG_RE = re.compile(
    r"</?(?:" + "|".join(sorted(HTML_ELEMENTS, key=len, reverse=True)) + r")\b"
    r"(?:\s+[a-zA-Z-]+(?:=(?:\"[^\"]*\"|'[^']*'|[^\s>]+))?)*\s*/?>", re.I
)
"""An HTML tag: an element of HTML's own (a ``<device>`` placeholder in a command line is text)."""
RULE_RE = re.compile(r"^([=\-~^+*#\"'`:._])\1{3,}[ \t]*$")


def at_boundary(text: str, start: int) -> bool:
    """Whether a chunk starting at ``start`` of ``text`` starts a sentence or a paragraph."""
    before = text[max(0, start - 200) : start]
    if not before.strip():
        return True
    return bool(BLANK_RE.search(before) or END_RE.search(before))


def underline(chunk: str) -> bool:
    """A heading underline: a rule line right under a text line no longer than it."""
    lines = chunk.split("\n")
    for k in range(1, len(lines)):
        rule, above = lines[k].rstrip(), lines[k - 1].rstrip()  # a reST title is never indented
        if RULE_RE.match(rule) and above and not above[0].isspace() and not RULE_RE.match(above) \
                and len(above) <= len(rule):
            return True
    return False


def measure(docs: list, chunks: list) -> dict:
    texts = {d.id: d.text for d in docs}
    later = [c for c in chunks if c.index > 0]
    ok = sum(at_boundary(texts[c.document_id], c.start) for c in later)
    bad = {"directive": [], "tag": [], "underline": []}
    for c in chunks:
        if DIRECTIVE_RE.search(c.text):
            bad["directive"].append(c.id)
        if TAG_RE.search(c.text):
            bad["tag"].append(c.id)
        if underline(c.text):
            bad["underline"].append(c.id)
    return {
        "chunks": len(chunks), "chunks_after_first": len(later), "at_boundary": ok,
        "share_at_boundary": round(ok / max(1, len(later)), 4),
        **{f"with_{k}": len(v) for k, v in bad.items()},
        "examples": {k: v[:3] for k, v in bad.items()},
    }


def _sources_root(path: Path) -> Path:
    """The ``html/_sources`` folder a kernel-doc source file lies under."""
    for parent in Path(path).parents:
        if parent.name == "_sources":
            return parent
    raise ValueError(f"{path} is not under an html/_sources folder")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--chunk-size", type=int, default=200)
    ap.add_argument("--chunk-overlap", type=int, default=32)
    ap.add_argument("--tokenizer", choices=["fast", "minilm", "words"], default="fast")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from scale_corpus import linux_doc_files

    from graphstrata.chunking import chunk_documents
    from graphstrata.sentences import sentence_boundaries
    from graphstrata.sources import load_sources
    from graphstrata.types import Document

    files = linux_doc_files()
    step = max(1, len(files) // args.files)
    sample = files[::step][: args.files]
    embedder = None
    if args.tokenizer != "words":
        from graphstrata.models import resolve_embedder

        embedder = resolve_embedder("fast" if args.tokenizer == "fast" else "default")
    raw = [Document(str(p), p.read_text(encoding="utf-8", errors="replace")) for p in sample]
    t0 = time.perf_counter()
    load = load_sources(sample)
    read_s = time.perf_counter() - t0
    # files named one by one get their name as id: key them by path (names repeat across folders)
    visible = [Document(d.metadata["source"], d.text, d.metadata) for d in load.documents]
    raw_chars = sum(len(d.text) for d in raw)
    vis_chars = sum(len(d.text) for d in visible)
    t0 = time.perf_counter()
    for d in visible:
        sentence_boundaries(d.text)
    split_s = time.perf_counter() - t0
    out: dict = {
        "files": len(sample), "of_files": len(files), "skipped": [s.__dict__ for s in load.skipped],
        "tokenizer": args.tokenizer, "chunk_size": args.chunk_size, "chunk_overlap": args.chunk_overlap,
        "raw_characters": raw_chars, "visible_characters": vis_chars,
        "read_markup_chars_per_s": round(raw_chars / read_s), "splitter_chars_per_s": round(vis_chars / split_s),
    }
    for name, docs, chunking in (
        ("raw+tokens", raw, "tokens"), ("visible+tokens", visible, "tokens"),
        ("visible+sentence", visible, "sentence"),
    ):
        t0 = time.perf_counter()
        chunks = chunk_documents(docs, args.chunk_size, args.chunk_overlap, embedder=embedder,
                                 max_document_chars=None, chunking=chunking)
        out[name] = {**measure(docs, chunks), "chunking_s": round(time.perf_counter() - t0, 2)}
        r = out[name]
        print(f"{name:18s} {r['chunks']:6d} chunks  at a boundary {r['at_boundary']:5d}/{r['chunks_after_first']:5d}"
              f" = {100 * r['share_at_boundary']:.1f}%  directive {r['with_directive']}  tag {r['with_tag']}"
              f"  underline {r['with_underline']}  ({r['chunking_s']} s)", flush=True)
    html = sorted(p for p in _sources_root(files[0]).parent.rglob("*.html") if "_sources" not in p.parts)
    if html:
        hsample = html[:: max(1, len(html) // args.files)][: args.files]
        t0 = time.perf_counter()
        hload = load_sources(hsample)
        hdocs = [Document(d.metadata["source"], d.text, d.metadata) for d in hload.documents]
        hread = time.perf_counter() - t0
        hraw = sum(p.stat().st_size for p in hsample)
        chunks = chunk_documents(hdocs, args.chunk_size, args.chunk_overlap, embedder=embedder,
                                 max_document_chars=None, chunking="sentence")
        out["html+sentence"] = {**measure(hdocs, chunks), "files": len(hsample), "of_files": len(html),
                                "skipped": len(hload.skipped), "read_bytes_per_s": round(hraw / hread)}
        r = out["html+sentence"]
        print(f"{'html+sentence':18s} {r['chunks']:6d} chunks  at a boundary {r['at_boundary']:5d}/{r['chunks_after_first']:5d}"
              f" = {100 * r['share_at_boundary']:.1f}%  directive {r['with_directive']}  tag {r['with_tag']}"
              f"  underline {r['with_underline']}  ({len(hsample)} of {len(html)} .html files, "
              f"{r['read_bytes_per_s']:,} B/s read)", flush=True)
    print(f"read as visible text: {out['read_markup_chars_per_s']:,} chars/s; sentence splitter "
          f"{out['splitter_chars_per_s']:,} chars/s; {len(load.skipped)} skipped")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
