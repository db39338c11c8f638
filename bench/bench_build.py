"""Build time of an offline index as a table of stages, and the embedder against its roofline.

Builds one corpus (default: MuSiQue, 5,021 passages) with the offline pipeline and prints

* every stage's wall seconds and share of the build (``EngineState.build_seconds``), with the
  embedder's own forward passes (``embedding …`` stages) and everything else summed apart —
  issue 17's target is everything else <= 30 s on MuSiQue;
* the chunk embedder's chunks/s and GFLOP/s against the machine's measured FP32 matmul
  GFLOP/s (its practical roofline: the embedder is matmuls), with the CPU model and the SIMD
  flags ``lscpu`` reports;
* index size on disk, peak RSS of the build, and (``--load``) the peak RSS of a fresh process
  that loads the index and answers one query.

    .venv/bin/python bench/bench_build.py [--corpus musique] [--limit N] [--preset default|fast]
                                          [--persist DIR] [--load] [--json FILE]

FLOPs of one transformer forward pass over ``n`` tokens (``L`` layers, width ``d``, FFN
``4d``): ``L · (24·n·d² + 4·n²·d)`` (projections + FFN, attention scores and mixing).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from machine import cpu_name

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GRAPHSTRATA_DATA", ROOT.parent / "shared" / "data"))
SIMD_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "neon", "asimd")


def simd_flags() -> list[str]:
    """The SIMD flags of ``lscpu`` (or /proc/cpuinfo) this benchmark cares about."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        text = ""
    if "Flags" not in text:
        try:
            text = Path("/proc/cpuinfo").read_text()
        except OSError:
            return []
    flags = set(re.findall(r"[a-z0-9_]+", " ".join(line for line in text.splitlines() if "lags" in line)))
    return [f for f in SIMD_FLAGS if f in flags]


def matmul_gflops(threads: int | None = None, n: int = 1536, repeat: int = 5) -> float:
    """Measured FP32 GFLOP/s of a square torch matmul (best of ``repeat``): the practical
    peak a transformer's dense layers can reach on this machine."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


def forward_gflop(n_tokens: float, layers: int = 6, d: int = 384) -> float:
    """GFLOP of one MiniLM-L6 forward pass over ``n_tokens`` tokens (see module docstring)."""
    return layers * (24 * n_tokens * d * d + 4 * n_tokens * n_tokens * d) / 1e9


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, MiB: ``VmHWM`` of /proc/self/status
    (``ru_maxrss`` survives fork + exec on Linux, so a child would report its parent's peak),
    else ``ru_maxrss`` (KiB on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


LOAD_SNIPPET = """
import sys, time
from pathlib import Path
from graphstrata import GraphStrata
t = time.perf_counter()
gs = GraphStrata.load(sys.argv[1])
load_s = time.perf_counter() - t
gs.retrieve("Who founded the company?", k=5)
hwm = [line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM:")]
print(load_s, int(hwm[0].split()[1]) / 1024)
"""


def storage_table(rows: list[dict]) -> None:
    """Disk and memory per corpus, and a least-squares rule of thumb
    ``bytes ≈ a · chunks + b · entities`` over the corpora."""
    import numpy as np

    print(f"\n{'corpus':<12} {'chunks':>7} {'entities':>9} {'disk MiB':>9} {'B/chunk':>8} "
          f"{'build RSS MiB':>14} {'loaded RSS MiB':>15}")
    for r in rows:
        s = r["stats"]
        print(f"{r['corpus']:<12} {s['chunks']:>7} {s['entities']:>9} {r['disk_bytes'] / 2**20:>9.1f} "
              f"{r['disk_bytes'] / s['chunks']:>8.0f} {r['build_peak_rss_mib']:>14.0f} "
              f"{r.get('load_peak_rss_mib', float('nan')):>15.0f}")
    if len(rows) >= 2:
        a = np.array([[r["stats"]["chunks"], r["stats"]["entities"]] for r in rows], float)
        y = np.array([r["disk_bytes"] for r in rows], float)
        (per_chunk, per_entity), *_ = np.linalg.lstsq(a, y, rcond=None)
        print(f"rule of thumb (disk): {per_chunk / 1024:.1f} KiB per chunk + {per_entity / 1024:.1f} KiB "
              f"per entity (least squares over {len(rows)} corpora)")
    if len(rows) >= 3:  # memory has a base (Python, torch, the embedder): fit it too
        a1 = np.hstack([np.ones((len(rows), 1)), a])
        for key, what in (("load_peak_rss_mib", "loaded"), ("build_peak_rss_mib", "build peak")):
            if all(key in r for r in rows):
                (base, per_chunk, per_entity), *_ = np.linalg.lstsq(a1, [r[key] for r in rows], rcond=None)
                print(f"rule of thumb (RSS {what}): {base:.0f} MiB + {per_chunk * 1024:.0f} KiB per chunk + "
                      f"{per_entity * 1024:.0f} KiB per entity")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="musique",
                    help="a folder of ../shared/data or a .jsonl path; several comma-separated run one "
                         "process each (peak RSS is per process) and end with a storage table")
    ap.add_argument("--json", default=None)
    ap.add_argument("--include", action="append", default=[],
                    help="a --json file of an earlier single-corpus run to add to the storage table")
    args, rest = ap.parse_known_args(argv)
    corpora = args.corpus.split(",")
    if len(corpora) == 1 and not args.include:
        return build_one(argv)
    import tempfile

    rows = [json.loads(Path(f).read_text()) for f in args.include]
    with tempfile.TemporaryDirectory() as tmp:
        for c in corpora:
            out = Path(tmp) / f"{Path(c).stem}.json"
            cmd = [sys.executable, __file__, "--corpus", c, "--json", str(out)]
            cmd += rest
            subprocess.run(cmd, check=True)
            rows.append(json.loads(out.read_text()))
            print()
    storage_table(rows)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=2, default=str))
    return 0


def build_one(argv=None) -> int:
    from graphstrata import GraphStrata
    from graphstrata.loaders import load_documents

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="musique", help="a folder of ../shared/data or a .jsonl path")
    ap.add_argument("--limit", type=int, default=None, help="first N documents")
    ap.add_argument("--preset", default="default", help="embedder preset: default (MiniLM) or fast")
    ap.add_argument("--persist", default=None, help="persist the index here (default: .bench_out/build_<corpus>)")
    ap.add_argument("--load", action="store_true", help="also measure a fresh process loading the index")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)

    path = Path(args.corpus)
    if not path.suffix:
        path = DATA / args.corpus / "corpus.jsonl"
    docs = load_documents([path])
    if args.limit:
        docs = docs[: args.limit]
    threads = os.environ.get("GRAPHSTRATA_NUM_THREADS")
    print(f"# graphstrata build — {time.strftime('%Y-%m-%d %H:%M')} — {platform.node()}: {cpu_name()}, "
          f"{os.cpu_count()} cores, SIMD {' '.join(simd_flags()) or '?'}, Python {platform.python_version()}, "
          f"GRAPHSTRATA_NUM_THREADS={threads}")
    persist = Path(args.persist) if args.persist else ROOT / ".bench_out" / f"build_{path.parent.name}"
    if persist.exists():
        shutil.rmtree(persist)

    from graphstrata.models import resolve_embedder

    t0 = time.perf_counter()
    embedder = resolve_embedder(args.preset)  # loading the model is not part of a build
    print(f"embedder {embedder.id} ready in {time.perf_counter() - t0:.1f} s (not counted below)")
    t0 = time.perf_counter()
    gs = GraphStrata.build(docs, persist_dir=persist, embedder=embedder)
    total = time.perf_counter() - t0
    build_rss = peak_rss_mib()
    s = gs.stats()
    secs = dict(gs.state.build_seconds)
    secs["persisting (and unstaged work)"] = max(0.0, total - sum(secs.values()))
    embed = {k: v for k, v in secs.items() if k.startswith("embedding")}
    rest = {k: v for k, v in secs.items() if k not in embed}
    print(f"{path.parent.name}: {len(docs)} documents → {s['chunks']} chunks, {s['entities']} entities, "
          f"{s['relations']} relations, layers {s['communities_per_layer']}; embedder {gs.embedder.id}\n")
    head = f"{'stage':<34} {'seconds':>8} {'share':>7}"
    print(head)
    print("-" * len(head))
    for name, v in sorted(secs.items(), key=lambda kv: -kv[1]):
        print(f"{name:<34} {v:>8.1f} {v / total:>7.1%}")
    print("-" * len(head))
    e_s, r_s = sum(embed.values()), sum(rest.values())
    print(f"{'embedder forward passes':<34} {e_s:>8.1f} {e_s / total:>7.1%}")
    verdict = ("met" if r_s <= 30 else "not met") if path.parent.name == "musique" and not args.limit else "n/a"
    print(f"{'everything else':<34} {r_s:>8.1f} {r_s / total:>7.1%}   (target <= 30 s on MuSiQue: {verdict})")
    print(f"{'total':<34} {total:>8.1f}")

    # embedder vs roofline: chunk tokens from the chunker's own counts
    n_tok = [c.n_tokens for c in gs.state.chunks]
    chunk_s = secs.get("embedding chunks", 0.0)
    out: dict = {"corpus": path.parent.name, "documents": len(docs), "stats": s, "stages_s": secs,
                 "total_s": total, "embedder_s": e_s, "other_s": r_s, "embedder": gs.embedder.id,
                 "cpu": cpu_name(), "cores": os.cpu_count(), "simd": simd_flags()}
    # the roofline is the transformer's: not the static table distilled from it ("...-static256")
    if chunk_s > 0 and gs.embedder.id == "minilm-l6-v2":
        peak = matmul_gflops(int(threads) if threads else None)
        gflop = sum(forward_gflop(n + 2) for n in n_tok)  # + [CLS] and [SEP]
        achieved = gflop / chunk_s
        print(f"\nchunk embedder: {len(n_tok) / chunk_s:.1f} chunks/s of {sum(n_tok) / len(n_tok):.0f} tokens "
              f"({gflop / len(n_tok):.2f} GFLOP a chunk) = {achieved:.1f} GFLOP/s; measured FP32 matmul "
              f"{peak:.1f} GFLOP/s → {achieved / peak:.0%} of the roofline")
        out.update({"chunks_per_s": len(n_tok) / chunk_s, "embed_gflops": achieved, "matmul_gflops": peak})
    size = dir_bytes(persist)
    print(f"\nindex on disk {size / 2**20:.1f} MiB ({size / s['chunks']:.0f} B per chunk, "
          f"{size / max(s['entities'], 1):.0f} B per entity); peak RSS of the build {build_rss:.0f} MiB")
    out.update({"disk_bytes": size, "build_peak_rss_mib": build_rss})
    if args.load:
        r = subprocess.run([sys.executable, "-c", LOAD_SNIPPET, str(persist)], capture_output=True, text=True,
                           check=True)
        load_s, load_rss = map(float, r.stdout.split()[-2:])
        print(f"fresh process: load {load_s:.1f} s, peak RSS after load + one query {load_rss:.0f} MiB")
        out.update({"load_s": load_s, "load_peak_rss_mib": load_rss})
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
