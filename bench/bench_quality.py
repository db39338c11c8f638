"""Retrieval quality and speed of every method on the shared QA corpora (offline).

For each corpus of ../shared/data (musique, hotpotqa, lihua_world): build the index with the
default configuration (timed), then print evidence recall@2/5/10 of every method and its
p50/p95 query latency (retrieval only, query embedding included), one table per corpus.

    .venv/bin/python bench/bench_quality.py [--corpora musique,hotpotqa] [--limit N] [--rebuild]

Indexes are kept in .bench_out/<corpus>/ and reused unless --rebuild (the build time printed
is then the one recorded when it was built). Results also go to .bench_out/quality.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GRAPHSTRATA_DATA", ROOT.parent / "shared" / "data"))
OUT = ROOT / ".bench_out"


def main() -> None:
    from graphstrata import GraphStrata
    from graphstrata.eval import evaluate, format_table, load_questions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", default="musique,hotpotqa,lihua_world")
    ap.add_argument("--methods", default=None, help="comma-separated; default: every method")
    ap.add_argument("--limit", type=int, default=None, help="first N questions per corpus")
    ap.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()

    results = {}
    print(f"# graphstrata quality benchmark — {time.strftime('%Y-%m-%d')} — "
          f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    for name in args.corpora.split(","):
        corpus = DATA / name / "corpus.jsonl"
        index_dir = OUT / name
        meta_path = OUT / f"{name}.build.json"
        if args.rebuild or not ((index_dir / "CURRENT").exists() or (index_dir / "manifest.json").exists()):
            t0 = time.perf_counter()
            gs = GraphStrata.build([corpus], persist_dir=index_dir, show_progress=True)
            build = {"seconds": round(time.perf_counter() - t0, 1), "stages": gs.build_seconds,
                     "stats": gs.stats()}
            meta_path.write_text(json.dumps(build, indent=2))
        else:
            gs = GraphStrata.load(index_dir)
            build = json.loads(meta_path.read_text()) if meta_path.exists() else {"seconds": None}
        questions = load_questions(DATA / name / "questions.jsonl")
        if args.limit:
            questions = questions[: args.limit]
        methods = args.methods.split(",") if args.methods else list(gs.methods)
        report = evaluate(gs, questions, methods, (2, 5, 10))
        results[name] = {"build": build, "report": report}
        print(f"\n## {name}: {gs.stats()['documents']} documents, {gs.stats()['chunks']} chunks, "
              f"{gs.stats()['entities']} entities, layers {gs.stats()['communities_per_layer']}; "
              f"build {build['seconds']} s")
        print(format_table(report))
        baselines = [m for m in ("dense", "bm25", "hybrid") if m in report]
        default = gs.methods[0]
        if baselines and default in report:
            best = max(baselines, key=lambda m: report[m]["recall@5"])
            margin = report[default]["recall@5"] - report[best]["recall@5"]
            print(f"default ({default}) recall@5 {report[default]['recall@5']:.3f} vs best "
                  f"baseline ({best}) {report[best]['recall@5']:.3f}: {margin:+.3f}")
    OUT.mkdir(exist_ok=True)
    (OUT / "quality.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
