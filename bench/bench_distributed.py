"""Distributed indexing on Ray (issue 19): throughput against the local build, stage growth.

Part 1 — overlap. A slice of lihua_world is built with a scripted LLM that sleeps 50 ms per call
(every prompt family answered, :func:`graphstrata.testing.answer_every_prompt`), locally
(``config.llm_concurrency`` calls in flight) and with :class:`graphstrata.ray_runner.RayRunner`
on 1, 2 and 4 workers (each with the same calls in flight). Chunks per second of the whole build
and the ratio to the local build are printed; each Ray index is checked equal to the local one.
The LLM's latency, not these cores, is what the workers overlap.

Part 2 — growth. Local statistical builds (HashEmbedder: the embedder is a per-chunk stage that
scales out) of the first 1k / 5k / 20k chunks of MuSiQue + HotpotQA + lihua_world (64-token
chunks), per-stage seconds, the fitted growth exponent ``b`` of each stage (``t ∝ n^b``,
least squares on log-log), and the projection of each single-node stage to 10M chunks. Driver
memory per chunk (vectors, native indexes, records and graph as pickled bytes, peak RSS).

    python bench/bench_distributed.py [--docs 60] [--workers 1,2,4] [--sizes 1000,5000,20000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from graphstrata import GraphStrata  # noqa: E402
from graphstrata.testing import HashEmbedder, ScriptedLLM, answer_every_prompt, index_fingerprint  # noqa: E402
from machine import cpu_name  # noqa: E402

DATA = Path(os.environ.get("GRAPHSTRATA_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
LLM_CONFIG = {"min_communities": 2, "max_community_size": 8, "chunk_size": 120, "chunk_overlap": 16}
GROWTH_CONFIG = {"chunk_size": 64, "chunk_overlap": 8}
#: stages that stay on the driver in a distributed build
SINGLE_NODE = ("extracting entities", "clustering communities", "indexing layers (C-HNSW)",
               "indexing chunks (C-HNSW)", "indexing chunks (BM25)")
TARGET = 10_000_000


def _read(name: str) -> list[dict]:
    with open(DATA / name / "corpus.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def overlap(n_docs: int, workers: list[int], latency: float) -> list[dict]:
    from graphstrata.ray_runner import RayRunner

    docs = _read("lihua_world")[:n_docs]

    def llm() -> ScriptedLLM:
        return ScriptedLLM(answer_every_prompt, usage=True, latency=latency)

    GraphStrata.build(docs[:2], config=LLM_CONFIG, embedder=HashEmbedder(), llm=llm())  # warm-up, as Ray's
    t0 = time.perf_counter()
    local = GraphStrata.build(docs, config=LLM_CONFIG, embedder=HashEmbedder(), llm=llm())
    local_s = time.perf_counter() - t0
    n = len(local.chunks)
    calls = local.build_usage["total"]["calls"]
    rows = [{"runner": "local", "workers": 1, "seconds": local_s, "chunks_per_s": n / local_s, "ratio": 1.0}]
    print(f"\n## overlap: {n_docs} lihua_world documents, {n} chunks, {calls} LLM calls of {latency * 1e3:.0f} ms")
    print(f"{'runner':<10}{'workers':>8}{'seconds':>10}{'chunks/s':>10}{'× local':>9}")
    print(f"{'local':<10}{1:>8}{local_s:>10.1f}{n / local_s:>10.1f}{1.0:>9.2f}")
    import ray

    ray.init(num_cpus=max(workers), include_dashboard=False, log_to_driver=False,
             object_store_memory=300 * 1024 * 1024)
    try:
        for w in workers:
            runner = RayRunner(num_workers=w)
            # start the actors outside the timing (a cluster's workers are up before a build);
            # each build has its own in-memory response cache, so nothing is reused
            the_llm = llm()
            GraphStrata.build(docs[:2], config=LLM_CONFIG, embedder=HashEmbedder(), llm=the_llm, runner=runner)
            t0 = time.perf_counter()
            gs = GraphStrata.build(docs, config=LLM_CONFIG, embedder=HashEmbedder(), llm=the_llm, runner=runner)
            sec = time.perf_counter() - t0
            runner.close()
            same = index_fingerprint(gs) == index_fingerprint(local)
            rows.append({"runner": "ray", "workers": w, "seconds": sec, "chunks_per_s": n / sec,
                         "ratio": local_s / sec, "identical_index": same})
            print(f"{'ray':<10}{w:>8}{sec:>10.1f}{n / sec:>10.1f}{local_s / sec:>9.2f}"
                  f"{'' if same else '   INDEX DIFFERS FROM LOCAL'}")
    finally:
        ray.shutdown()
    return rows


def _docs_for(target: int, docs: list[dict]) -> list[dict]:
    """The shortest prefix of ``docs`` with at least ``target`` chunks."""
    from graphstrata.chunking import chunk_documents
    from graphstrata.loaders import load_documents

    loaded = load_documents(docs)
    chunks = chunk_documents(loaded, GROWTH_CONFIG["chunk_size"], GROWTH_CONFIG["chunk_overlap"])
    seen: set[str] = set()
    for i, c in enumerate(chunks):
        seen.add(c.document_id)
        if i + 1 >= target:
            break
    return [d for d in loaded if d.id in seen]


def _fit(ns: list[int], ts: list[float]) -> float:
    x, y = np.log(ns), np.log(np.maximum(ts, 1e-4))
    return float(np.polyfit(x, y, 1)[0])


def growth(sizes: list[int]) -> dict:
    corpus = _read("musique") + _read("hotpotqa") + _read("lihua_world")
    per: list[dict] = []
    mem: dict = {}
    for target in sizes:
        docs = _docs_for(target, corpus)
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        gs = GraphStrata.build(docs, config=GROWTH_CONFIG, embedder=HashEmbedder(dim=384))
        total = time.perf_counter() - t0
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        st = gs.state
        n = len(st.chunks)
        per.append({"chunks": n, "entities": len(st.kg), "total": total, **st.build_seconds})
        vec = sum(v.nbytes for v in st.vectors.values())
        native = len(st.chunk_index.index.to_bytes()) + (len(st.layered.index.to_bytes()) if st.layered else 0)
        records = len(pickle.dumps((st.records, st.kg.entities, st.kg.relations, st.chunks), protocol=5))
        mem = {"chunks": n, "entities": len(st.kg), "vectors_bytes": vec, "native_bytes": native,
               "records_graph_pickled_bytes": records, "peak_rss_growth_bytes": max(0, rss1 - rss0) * 1024}
        del gs, st
    stages = [s for s in per[-1] if s not in ("chunks", "entities", "total")]
    ns = [p["chunks"] for p in per]
    print(f"\n## growth: local statistical builds, HashEmbedder(384), {GROWTH_CONFIG}")
    print(f"{'stage':<30}" + "".join(f"{n:>10,}" for n in ns) + f"{'b':>7}{'10M (h)':>10}")
    fits: dict[str, dict] = {}
    for s in [*stages, "total"]:
        ts = [p.get(s, 0.0) for p in per]
        b = _fit(ns, ts) if len(ns) > 1 else float("nan")
        proj = ts[-1] * (TARGET / ns[-1]) ** b if not math.isnan(b) else float("nan")
        fits[s] = {"seconds": ts, "exponent": b, "projected_10M_s": proj, "single_node": s in SINGLE_NODE}
        mark = "*" if s in SINGLE_NODE else " "
        print(f"{mark}{s:<29}" + "".join(f"{t:>10.2f}" for t in ts) + f"{b:>7.2f}{proj / 3600:>10.1f}")
    print("(* stays on the driver in a distributed build; the others scale out with the workers)")
    single = {s: f for s, f in fits.items() if f["single_node"]}
    if single:
        first = max(single, key=lambda s: single[s]["projected_10M_s"])
        print(f"first single-node bottleneck at 10M chunks: {first} "
              f"(~{single[first]['projected_10M_s'] / 3600:.1f} h projected)")
    n = mem["chunks"]
    print(f"\n## driver memory at {n:,} chunks ({mem['entities']:,} entities), bytes per chunk:")
    for k in ("vectors_bytes", "native_bytes", "records_graph_pickled_bytes", "peak_rss_growth_bytes"):
        print(f"  {k:<30}{mem[k] / n:>10.0f}   (→ {mem[k] / n * 1e6 / 2**30:6.2f} GiB per million chunks)")
    return {"per_size": per, "fits": fits, "memory": mem}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=60, help="lihua_world documents in the overlap run")
    ap.add_argument("--workers", default="1,2,4", help="Ray worker counts of the overlap run")
    ap.add_argument("--latency", type=float, default=0.05, help="seconds per scripted LLM call")
    ap.add_argument("--sizes", default="1000,5000,20000", help="chunk counts of the growth run")
    ap.add_argument("--skip", choices=("overlap", "growth"), default=None)
    ap.add_argument("--json", default=None, help="write the figures to this file")
    args = ap.parse_args()
    print(f"# bench_distributed  {time.strftime('%Y-%m-%d')}  {cpu_name()}  {os.cpu_count()} cores")
    out: dict = {}
    if args.skip != "overlap":
        out["overlap"] = overlap(args.docs, [int(w) for w in args.workers.split(",")], args.latency)
    if args.skip != "growth":
        out["growth"] = growth([int(s) for s in args.sizes.split(",")])
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1, default=float), encoding="utf-8")


if __name__ == "__main__":
    main()
