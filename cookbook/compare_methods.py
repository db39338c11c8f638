"""Compare every retrieval method on one corpus: evidence recall@2 / @5 table and a bar chart.

What it shows: one index serves every method (archrag, lightrag, hirag, agrag and the dense /
bm25 / hybrid baselines); ``graphstrata.eval.evaluate`` scores each on the sample questions
(evidence recall@k: the share of a question's gold pages among the top-k distinct pages the
method's chunks came from) and times it; matplotlib draws recall@2 and @5 per method as a
grouped bar chart (PNG).

Run from the repository root (about two minutes the first time: a minute to build the index,
then 7 methods × 15 questions)::

    .venv/bin/python cookbook/compare_methods.py [--workdir DIR] [--index-dir DIR] [--out FILE.png]

The index is opened from ``--index-dir`` if it holds one, else built there (default
``WORKDIR/index``); the chart goes to ``--out`` (default ``WORKDIR/compare_methods.png``) and
the numbers to the same path with ``.json``. Nothing is written outside those paths (default
``--workdir``: a new temporary directory). The sample has only 15 questions: the table shows
how to compare, not which method is best (the README's tables measure that on 150–285
questions per corpus).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "sample_corpus" / "wiki_sample.jsonl"
QUESTIONS = HERE / "sample_corpus" / "questions.jsonl"
KS = (2, 5)


def open_or_build(index_dir: Path, corpus: Path):
    """Open the index in ``index_dir``, or build it there from ``corpus`` when there is none."""
    from graphstrata import GraphStrata

    t0 = time.perf_counter()
    if index_dir.is_dir() and any(index_dir.iterdir()):
        gs = GraphStrata.load(index_dir)
        print(f"opened {index_dir} in {time.perf_counter() - t0:.1f} s: {gs}")
    else:
        gs = GraphStrata.build(paths=[corpus], persist_dir=index_dir)
        print(f"built {index_dir} in {time.perf_counter() - t0:.1f} s: {gs}")
    return gs


def bar_chart(report: dict[str, dict[str, float]], out: Path, title: str) -> None:
    """Grouped bars: recall@k per method, one colour per k."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
    import numpy as np

    methods = list(report)
    x = np.arange(len(methods))
    width = 0.8 / len(KS)
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=100)
    for i, k in enumerate(KS):
        values = [report[m][f"recall@{k}"] for m in methods]
        bars = ax.bar(x + (i - (len(KS) - 1) / 2) * width, values, width, label=f"recall@{k}")
        ax.bar_label(bars, fmt="%.2f", fontsize=8, padding=2)
    ax.set_xticks(x, methods)
    ax.set_ylim(0, 1.25)
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_ylabel("evidence recall")
    ax.set_title(title)
    ax.legend(loc="upper center", ncol=len(KS), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--index-dir", type=Path, default=None,
                        help="index directory: opened if it holds an index, else built there (default WORKDIR/index)")
    parser.add_argument("--out", type=Path, default=None, help="bar chart PNG (default WORKDIR/compare_methods.png)")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="JSONL pages {id, title, text}")
    parser.add_argument("--questions", type=Path, default=QUESTIONS,
                        help="JSONL questions {question, evidence_ids}")
    parser.add_argument("--method", action="append", dest="methods", help="method to compare (repeat; default all)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="graphstrata-cookbook-"))
    workdir.mkdir(parents=True, exist_ok=True)
    index_dir = args.index_dir or workdir / "index"
    out = args.out or workdir / "compare_methods.png"

    from graphstrata.eval import evaluate, format_table, load_questions

    gs = open_or_build(index_dir, args.corpus)
    questions = load_questions(args.questions)
    methods = args.methods or list(gs.methods)
    print(f"\nevaluating {len(methods)} methods on {len(questions)} questions from {args.questions.name} ...")
    t0 = time.perf_counter()
    report = evaluate(gs, questions, methods=methods, ks=KS)
    print(f"done in {time.perf_counter() - t0:.1f} s (p50 includes each method's one-off setup on its first query)\n")
    print(format_table(report))

    best = max(report, key=lambda m: (report[m][f"recall@{KS[-1]}"], report[m][f"recall@{KS[0]}"]))
    print(f"\nbest recall@{KS[-1]} here: {best} ({report[best][f'recall@{KS[-1]}']:.3f})")
    bar_chart(report, out, f"Evidence recall on {args.corpus.name} ({len(questions)} questions)")
    json_out = out.with_suffix(".json")
    json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"bar chart: {out}")
    print(f"numbers:   {json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
