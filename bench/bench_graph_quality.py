"""Graph quality of the offline knowledge graph (issue 28): stray words, variants, types, labels.

Builds each corpus (HotpotQA and 2wiki of ../shared/data, and optionally a folder of files such
as 300 kernel-doc files) with the statistical extractor, the statistical extractor with entity
resolution, and the default (the NLP extractor with resolution), exports each graph as JSON and
prints :func:`graphstrata.quality.export_quality` of each, with the issue's targets:

- stray words (function words, adverbs, verb forms, month / weekday names) <= 0.5 % of entities;
- case / plural / punctuation variants of another entity <= 1 %;
- entities with a specific type >= 70 %;
- relations with a label other than co-occurrence >= 50 %.

Usage::

    .venv/bin/python bench/bench_graph_quality.py                      # MiniLM, HotpotQA and 2wiki
    .venv/bin/python bench/bench_graph_quality.py --folder /usr/share/doc/linux-doc-6.1 --docs 300
    .venv/bin/python bench/bench_graph_quality.py --embedder hash --docs 500   # quick smoke run

``--embedder hash`` (:class:`graphstrata.testing.HashEmbedder`) leaves the default build's
graph unchanged (extraction reads no vectors) but makes resolution's name-similarity step
meaningless; use MiniLM for the resolution figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from graphstrata import GraphStrata
from graphstrata.inspection import export_graph
from graphstrata.quality import export_quality
from graphstrata.types import Document

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
TARGETS = {"stray_words": ("<=", 0.005), "variants": ("<=", 0.01), "typed": (">=", 0.70),
           "labelled_relations": (">=", 0.50)}


def documents(corpus: str, limit: int | None) -> list[Document]:
    path = DATA / corpus / "corpus.jsonl"
    if not path.is_file():
        sys.exit(f"no corpus at {path}: this benchmark reads ../shared/data")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = rows[:limit] if limit else rows
    return [Document(id=r["id"], text=r["text"], metadata={"title": r.get("title", "")}) for r in rows]


def measure(docs: list[Document], config: dict[str, Any], embedder: Any) -> tuple[dict[str, Any], float]:
    t0 = time.perf_counter()
    gs = GraphStrata.build(docs, config=config, embedder=embedder)
    secs = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        out = export_graph(gs.state, Path(tmp) / "graph.json", format="json")
        return export_quality(out), secs


CONFIGS = (
    ("statistical", {"extractor": "statistical", "entity_resolution": False}),
    ("statistical+resolution", {"extractor": "statistical", "entity_resolution": True}),
    ("default (nlp+resolution)", {}),
)


def folder_documents(folder: str, limit: int | None) -> list[Any]:
    """The first ``limit`` files under ``folder`` (sorted paths), read as graphstrata's loaders
    read a folder (e.g. the kernel docs' ``/usr/share/doc/linux-doc-6.1/html/_sources``)."""
    from graphstrata.loaders import load_documents

    docs = load_documents(paths=[folder])  # ids relative to the folder, sorted by path
    return docs[: limit or None]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="hotpotqa,2wiki", help="comma-separated corpora of ../shared/data")
    ap.add_argument("--folder", default=None, help="also a folder of files (e.g. the kernel docs)")
    ap.add_argument("--docs", type=int, default=None, help="first N documents (or files) only")
    ap.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()
    if args.embedder == "hash":
        from graphstrata.testing import HashEmbedder

        embedder: Any = HashEmbedder()
    else:
        from graphstrata.models import default_embedder

        embedder = default_embedder()
    sources = [(c, documents(c, args.docs)) for c in args.corpus.split(",") if c]
    if args.folder:
        sources.append((Path(args.folder).name, folder_documents(args.folder, args.docs)))
    results: dict[str, Any] = {}
    for corpus, docs in sources:
        for name, config in CONFIGS:
            q, secs = measure(docs, config, embedder)
            results.setdefault(corpus, {})[name] = {**q, "build_seconds": round(secs, 1)}
            print(f"{corpus} ({len(docs)} documents, {embedder.id}) — {name}: "
                  f"{q['entities']} entities, {q['relations']} relations, build {secs:.1f} s")
            for key, (op, target) in TARGETS.items():
                ok = q[key] <= target if op == "<=" else q[key] >= target
                print(f"  {key:20s} {q[key]:7.2%}   target {op} {target:.1%}  {'met' if ok else 'NOT met'}")
            print(f"  stray examples       {q['examples']['stray_words']}")
            print(f"  variant groups       {q['examples']['variants'][:5]}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
