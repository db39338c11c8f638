"""Query latency of every retrieval method on the MuSiQue questions (offline).

Prints the query embedding's own p50, then p50 / p95 / mean wall time per query in milliseconds
for each method of ``gs.methods``, dense first and every p50 beside dense's:
``GraphStrata.retrieve`` end to end (query embedding included, chunk hits only, k = 10), one
thread, after one warm-up query per method (which also builds the method's lazily derived
structures — their one-off build time is printed separately).

    .venv/bin/python bench/bench_query.py [--index DIR] [--limit N] [--k K] [--methods a,b]

The index defaults to .bench_out/musique (built by bench/bench_quality.py); when it is missing
it is built here from ../shared/data/musique/corpus.jsonl (several minutes) and the script says
so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from machine import cpu_name

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("GRAPHSTRATA_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GRAPHSTRATA_DATA", ROOT.parent / "shared" / "data"))


def main() -> None:
    import numpy as np
    from graphstrata import GraphStrata
    from graphstrata.eval import load_questions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", default=str(ROOT / ".bench_out" / "musique"))
    ap.add_argument("--questions", default=str(DATA / "musique" / "questions.jsonl"))
    ap.add_argument("--limit", type=int, default=None, help="first N questions")
    ap.add_argument("--k", type=int, default=10, help="chunks per query")
    ap.add_argument("--methods", default=None, help="comma-separated; default: every method")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()

    print(f"# graphstrata query latency — {time.strftime('%Y-%m-%d %H:%M')} — "
          f"{platform.node()}: {cpu_name()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, "
          f"GRAPHSTRATA_NUM_THREADS={os.environ.get('GRAPHSTRATA_NUM_THREADS')}")
    index = Path(args.index)
    if (index / "CURRENT").exists() or (index / "manifest.json").exists():
        t0 = time.perf_counter()
        gs = GraphStrata.load(index)
        print(f"loaded {index} in {time.perf_counter() - t0:.1f} s")
    else:
        corpus = DATA / "musique" / "corpus.jsonl"
        print(f"no index at {index}: building it from {corpus} (this takes minutes)")
        t0 = time.perf_counter()
        gs = GraphStrata.build([corpus], persist_dir=index, show_progress=True)
        print(f"built {index} in {time.perf_counter() - t0:.1f} s")
    s = gs.stats()
    print(f"index: {s['documents']} documents, {s['chunks']} chunks, {s['entities']} entities, "
          f"{s['relations']} relations, layers {s['communities_per_layer']}")
    questions = [q["question"] for q in load_questions(args.questions)]
    if args.limit:
        questions = questions[: args.limit]
    methods = args.methods.split(",") if args.methods else list(gs.methods)
    print(f"{len(questions)} questions, k={args.k}\n")
    from graphstrata.models import embed_query

    embed_query(gs.embedder, questions[0])
    emb = []
    for q in questions:
        t0 = time.perf_counter()
        embed_query(gs.embedder, q)
        emb.append((time.perf_counter() - t0) * 1000.0)
    emb_p50 = float(np.percentile(emb, 50))
    print(f"query embedding alone ({gs.embedder.id}): p50 {emb_p50:.1f} ms, p95 {np.percentile(emb, 95):.1f} ms\n")
    if "dense" in methods:  # the baseline first, so every row can be set beside it
        methods = ["dense"] + [m for m in methods if m != "dense"]
    head = (f"{'method':<10} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'p50/dense':>10} "
            f"{'p50 - embed':>12} {'warm-up s':>10}")
    print(head)
    print("-" * len(head))
    results: dict = {"embed_p50_ms": emb_p50, "methods": {}}
    dense_p50 = None
    for method in methods:
        t0 = time.perf_counter()
        gs.retrieve(questions[0], method=method, k=args.k, kinds=("chunk",))
        warm = time.perf_counter() - t0
        times = []
        for q in questions:
            t0 = time.perf_counter()
            gs.retrieve(q, method=method, k=args.k, kinds=("chunk",))
            times.append((time.perf_counter() - t0) * 1000.0)
        t = np.asarray(times)
        p50, p95 = float(np.percentile(t, 50)), float(np.percentile(t, 95))
        dense_p50 = p50 if method == "dense" else dense_p50
        ratio = f"{p50 / dense_p50:.2f}x" if dense_p50 else "-"
        print(f"{method:<10} {p50:>8.1f} {p95:>8.1f} {t.mean():>8.1f} {ratio:>10} {p50 - emb_p50:>12.1f} "
              f"{warm:>10.2f}", flush=True)
        results["methods"][method] = {"p50_ms": p50, "p95_ms": p95, "mean_ms": float(t.mean()), "warm_up_s": warm}
    if "archrag" in results["methods"]:
        a = results["methods"]["archrag"]
        verdict = "met" if a["p50_ms"] <= 20 and a["p95_ms"] <= 40 else "not met"
        print(f"\ntarget archrag p50 <= 20 ms, p95 <= 40 ms (issue 17): {verdict} "
              f"(p50 {a['p50_ms']:.1f} ms, of which query embedding {emb_p50:.1f} ms)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
