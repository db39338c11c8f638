"""The fast preset against MiniLM: recall@5 of every method and embedding speed (offline).

For each corpus of ../shared/data (lihua_world, hotpotqa, musique): build the index with the
default embedder (MiniLM) and with the ``fast`` preset (the static embedder distilled from it,
:mod:`graphstrata.static_embedder`), print evidence recall@5 of every method side by side, each
graph method's margin over that embedder's own dense baseline, then the embedding speed of both
on the corpus's chunks (texts/s) and their ratio.

    .venv/bin/python bench/bench_embedders.py [--corpora lihua_world,hotpotqa] [--limit N]
        [--rebuild] [--speed-sample 256]

On a shared or busy machine set GRAPHSTRATA_NUM_THREADS=1 (torch's spinning intra-op threads
make every MiniLM call about ten times slower when the cores are oversubscribed) and, for a
one-thread against one-thread speed ratio, TOKENIZERS_PARALLELISM=false.

Indexes are kept in .bench_out/embedders/<corpus>-<preset>/ and reused unless --rebuild (the
build time printed is then the one recorded when it was built). Results also go to
.bench_out/embedders.json. The static table is distilled on first use (once per machine, about
a minute on two cores) and cached (graphstrata.static_embedder.cache_dir()).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GRAPHSTRATA_DATA", ROOT.parent / "shared" / "data"))
OUT = ROOT / ".bench_out"
PRESETS = ("default", "fast")
BASELINES = ("dense", "bm25", "hybrid")


def _rate(embedder, texts: list[str], min_seconds: float = 1.0, repeats: int = 2) -> float:
    """Best of ``repeats`` texts/s, each pass embedding ``texts`` (again) until ``min_seconds``."""
    embedder.embed(texts[:8])  # warm-up: first-call allocations, lazy imports
    best = 0.0
    for _ in range(repeats):
        n, t0 = 0, time.perf_counter()
        while True:
            embedder.embed(texts)
            n += len(texts)
            dt = time.perf_counter() - t0
            if dt >= min_seconds:
                break
        best = max(best, n / dt)
    return best


def _index(name: str, preset: str, rebuild: bool):
    from graphstrata import GraphStrata

    index_dir = OUT / "embedders" / f"{name}-{preset}"
    meta_path = OUT / "embedders" / f"{name}-{preset}.build.json"
    if rebuild or not meta_path.exists():
        t0 = time.perf_counter()
        gs = GraphStrata.build([DATA / name / "corpus.jsonl"], persist_dir=index_dir,
                               embedder=preset, show_progress=True)
        build = {"seconds": round(time.perf_counter() - t0, 1), "stages": gs.build_seconds}
        meta_path.write_text(json.dumps(build, indent=2))
    else:
        gs = GraphStrata.load(index_dir)  # the manifest's embedder id picks the preset
        build = json.loads(meta_path.read_text()) if meta_path.exists() else {"seconds": None}
    return gs, build


def main() -> None:
    import graphstrata.indexing.update  # noqa: F401  (stats() imports it lazily: load it now, with the rest)
    import graphstrata.inspection  # noqa: F401
    from graphstrata.eval import evaluate, load_questions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", default="lihua_world,hotpotqa,musique")
    ap.add_argument("--methods", default=None, help="comma-separated; default: every method")
    ap.add_argument("--limit", type=int, default=None, help="first N questions per corpus")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--speed-sample", type=int, default=256,
                    help="chunks embedded by each embedder for the speed figures")
    args = ap.parse_args()
    (OUT / "embedders").mkdir(parents=True, exist_ok=True)

    print(f"# graphstrata embedder benchmark — {time.strftime('%Y-%m-%d')} — "
          f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"GRAPHSTRATA_NUM_THREADS={os.environ.get('GRAPHSTRATA_NUM_THREADS', '(unset)')}, "
          f"TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM', '(unset)')}")
    results = {}
    for name in args.corpora.split(","):
        questions = load_questions(DATA / name / "questions.jsonl")
        if args.limit:
            questions = questions[: args.limit]
        reports, builds, indexes = {}, {}, {}
        for preset in PRESETS:
            gs, build = _index(name, preset, args.rebuild)
            methods = args.methods.split(",") if args.methods else list(gs.methods)
            reports[preset] = evaluate(gs, questions, methods, (5,))
            builds[preset], indexes[preset] = build, gs
        ids = {p: indexes[p].embedder.id for p in PRESETS}
        s = indexes["default"].stats()
        n_q = next(iter(reports["default"].values()))["questions"]
        print(f"\n## {name}: {s['documents']} documents, {s['chunks']} chunks, {n_q} questions")
        print(f"{'method':<10} {'recall@5 ' + ids['default']:>24} {'recall@5 ' + ids['fast']:>32} "
              f"{'delta':>7}")
        for m in reports["default"]:
            a, b = reports["default"][m]["recall@5"], reports["fast"][m]["recall@5"]
            print(f"{m:<10} {a:>24.3f} {b:>32.3f} {b - a:>+7.3f}")
        for preset in PRESETS:
            rep = reports[preset]
            if "dense" not in rep:
                continue
            graph = [m for m in rep if m not in BASELINES]
            margins = ", ".join(f"{m} {rep[m]['recall@5'] - rep['dense']['recall@5']:+.3f}"
                                for m in graph)
            print(f"  {ids[preset]}: graph methods minus own dense baseline: {margins}")
        texts = [c.text for c in indexes["default"].state.chunks]
        sample = texts[: args.speed_sample]
        speed = {p: _rate(indexes[p].embedder, sample if p == "default" else texts)
                 for p in PRESETS}
        tokens = sum(c.n_tokens for c in indexes["default"].state.chunks) / max(len(texts), 1)
        print(f"embedding speed on chunks (~{tokens:.0f} tokens each): "
              f"{ids['default']} {speed['default']:.1f} texts/s, {ids['fast']} "
              f"{speed['fast']:.0f} texts/s, ratio {speed['fast'] / speed['default']:.0f}x")
        for preset in PRESETS:
            b = builds[preset]
            emb = {k: v for k, v in (b.get("stages") or {}).items() if "embed" in k}
            print(f"  build with {ids[preset]}: {b['seconds']} s"
                  + "".join(f"; {k} {v:.1f} s" for k, v in emb.items()))
        results[name] = {"embedders": ids, "reports": reports, "builds": builds,
                         "texts_per_s": speed}
    (OUT / "embedders.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
