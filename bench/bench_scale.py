"""Scale: build and query the kernel-docs scale corpus at 50k, 200k and 1M chunks (issue 33).

For each size (in chunks) this

1. generates the corpus with ``bench/scale_corpus.py`` under ``.bench_out/scale/corpus-N-sS``
   (or reuses it: same size, seed, source and generator version);
2. builds it with the fast preset in a fresh subprocess
   (``GraphStrata.build(paths=[dir], embedder="fast")`` then ``persist``), recording every build
   stage's seconds (``gs.build_seconds``; a stage that overlaps others, such as the chunk
   C-HNSW built in a background thread, shows only the wait it adds) plus ``persist``, the
   process's peak RSS (its own
   ``VmHWM``; ``wait4``'s ``ru_maxrss`` is kept in the JSON too, but after a vfork+exec it can
   hold the parent's peak), the wall time of the whole process and the index's bytes on disk;
3. loads the index in another fresh subprocess on one thread (``GRAPHSTRATA_NUM_THREADS=1``,
   ``OMP_NUM_THREADS=1``) and reports load seconds, RSS after load, each method's first query
   after the load (the first question, asked of every method in ``gs.methods`` order as soon
   as the load returns, before any pass: the first one also pays for whatever the first query
   of all builds lazily; the load itself runs one warm-up query per method,
   ``GraphStrata.load(warm_up=True)``), then per method the same question asked again
   ("again": first ÷ again is what being first cost, first ÷ p50 also holds what that one
   question costs), p50 / p95 over the query set (``--queries``, default 60), the "warm p50"
   of the same set asked again at once (on a VM whose host makes memory left idle for tens of
   seconds ~10× slower on its next touch, see the README's Scale section, the first pass over a
   multi-GB index pays for that; the warm pass shows the code's own cost), and RSS after
   querying;
4. runs the same query pass again while ``os.cpu_count()`` numpy busy loops keep every core
   busy, with torch's default thread settings (no ``OMP_NUM_THREADS`` /
   ``GRAPHSTRATA_NUM_THREADS``), and sets the loaded p50 beside the idle one.

Queries go through ``GraphStrata.retrieve(q, method=m, k=10)`` (chunk hits and the method's
context hits, as ``graphstrata query`` returns them). They are 60 deterministic questions made
from titles and section headings of the real documents that every size contains
(``ScaleCorpus.queries``): the same questions at every size. ``dense`` (the same run) is the
baseline each method's p50 is set beside.

5. loads the smallest and the largest index side by side (each in its own process, one thread)
   and times them in alternating rounds (``--paired-rounds``, default 5; ABBA order), so that the
   large-against-small p50 ratio is measured under the same conditions for both sizes.

At the end a summary across sizes fits t ∝ n^b (least squares on log-log) for every build stage,
build total, memory, disk, load and each method's p50, and projects each to 10M chunks from the
fit. The figures are what this machine measured (the header names it); with two or three sizes
an exponent is a rough guide, not a law.

    .venv/bin/python bench/bench_scale.py [--sizes 50000,200000,1000000] [--seed 0]
        [--corpus DIR] [--methods a,b] [--queries 60] [--max-build-seconds 3600]
        [--max-query-seconds 3600] [--skip-build] [--no-loaded] [--paired-rounds 5] [--json .bench_out/scale.json]

Robust by design: a size whose build fails or runs past ``--max-build-seconds`` is reported as
such (its log is ``.bench_out/scale/index-N-sS.log``) and the other sizes still run;
``--skip-build`` reuses an index built earlier (with the build figures recorded next to it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import scale_corpus
from machine import cpu_name

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".bench_out" / "scale"
DEFAULT_SIZES = "50000,200000,1000000"
K = 10
PROJECT_TO = 10_000_000
FIT_FLOOR = {"s": 0.05, "ms": 0.05, "MiB": 1.0}  # smaller values are not fitted
MIB = 1024 * 1024
THREAD_VARS = ("OMP_NUM_THREADS", "GRAPHSTRATA_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")

# Each child prints one line "RESULT <json>" at the end; everything else goes to its log.
CHILD_COMMON = r"""
import json, sys, time
from pathlib import Path

def proc_status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return None

def torch_threads():
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None
"""

BUILD_SNIPPET = CHILD_COMMON + r"""
corpus, index = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
from graphstrata import GraphStrata
t1 = time.perf_counter()
gs = GraphStrata.build(paths=[corpus], embedder="fast")
t2 = time.perf_counter()
gs.persist(index)
t3 = time.perf_counter()
s = gs.stats()
print("RESULT " + json.dumps({
    "import_s": t1 - t0, "build_s": t2 - t1, "persist_s": t3 - t2,
    "stages_s": {k: float(v) for k, v in gs.build_seconds.items()},
    "documents": s["documents"], "chunks": s["chunks"], "entities": s["entities"],
    "relations": s["relations"], "communities_per_layer": list(s["communities_per_layer"]),
    "peak_rss_bytes": proc_status("VmHWM"), "torch_threads": torch_threads(),
}), flush=True)
"""

QUERY_SNIPPET = CHILD_COMMON + r"""
index, queries_file, methods_json, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
queries = json.loads(Path(queries_file).read_text())
t0 = time.perf_counter()
from graphstrata import GraphStrata
t1 = time.perf_counter()
gs = GraphStrata.load(index)
t2 = time.perf_counter()
rss_load = proc_status("VmRSS")
methods = json.loads(methods_json) or list(gs.methods)
out, first = {}, {}
for m in methods:  # every method's first query, right after the load (nothing else ran between)
    try:
        t = time.perf_counter()
        gs.retrieve(queries[0], method=m, k=k)
        first[m] = (time.perf_counter() - t) * 1000.0
    except Exception as exc:  # one broken method must not hide the others
        out[m] = {"error": f"{type(exc).__name__}: {exc}"}
for m in methods:
    if m in out:
        continue
    try:
        times, warm = [], []
        for timed in (times, warm):  # the set, then the same set again at once (memory warm)
            for q in queries:
                t = time.perf_counter()
                gs.retrieve(q, method=m, k=k)
                timed.append((time.perf_counter() - t) * 1000.0)
        out[m] = {"first_ms": first[m], "times_ms": times, "warm_times_ms": warm}
    except Exception as exc:  # one broken method must not hide the others
        out[m] = {"error": f"{type(exc).__name__}: {exc}"}
    print(m, "done", flush=True)
print("RESULT " + json.dumps({
    "import_s": t1 - t0, "load_s": t2 - t1, "rss_after_load_bytes": rss_load,
    "rss_after_queries_bytes": proc_status("VmRSS"), "peak_rss_bytes": proc_status("VmHWM"),
    "methods": out, "torch_threads": torch_threads(),
}), flush=True)
"""

PAIRED_SNIPPET = CHILD_COMMON + r"""
index, queries_file, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
queries = json.loads(Path(queries_file).read_text())
from graphstrata import GraphStrata
gs = GraphStrata.load(index)
for q in queries[:5]:  # each method once more than the load's warm-up
    for m in gs.methods:
        gs.retrieve(q, method=m, k=k)
print("READY " + json.dumps(list(gs.methods)), flush=True)
for line in sys.stdin:
    m = line.strip()
    if not m:
        break
    times = []
    for q in queries:
        t = time.perf_counter()
        gs.retrieve(q, method=m, k=k)
        times.append((time.perf_counter() - t) * 1000.0)
    print("TIMES " + json.dumps(times), flush=True)
"""

BUSY_SNIPPET = r"""
import numpy as np
a = np.random.default_rng(0).random((256, 256))
while True:
    a = a @ a
    a /= np.abs(a).max()
"""


# ---------------------------------------------------------------- helpers


def machine() -> dict:
    """Date, host, CPU, cores, memory (bytes), Python and the tree's git revision."""
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, check=False).stdout.strip() or None
    except OSError:
        rev = None
    return {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "memory_bytes": mem,
        "python": platform.python_version(),
        "git": rev,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def dir_bytes(path: Path) -> int:
    """Bytes of every file under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linear interpolation (numpy's default)."""
    v = sorted(values)
    if not v:
        return float("nan")
    pos = (len(v) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def run_child(script: str, args: list[str], env: dict, timeout_s: float, log: Path) -> dict:
    """Run ``python -c script args`` in its own process group with ``env``, stdout and stderr to
    ``log``; kill the group after ``timeout_s`` seconds.

    Returns:
        ``{"rc", "wall_s", "timed_out", "ru_maxrss_bytes", "result"}``: ``result`` is the
        child's ``RESULT`` JSON (``None`` when it printed none).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    timed_out = threading.Event()
    with open(log, "w") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=fh, stderr=subprocess.STDOUT,
                                env=env, cwd=ROOT, start_new_session=True)

        def kill() -> None:
            timed_out.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
    result = None
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
    return {"rc": proc.returncode, "wall_s": wall, "timed_out": timed_out.is_set(),
            "ru_maxrss_bytes": usage.ru_maxrss * 1024, "result": result}


def tail(log: Path, n: int = 6) -> str:
    """The last ``n`` lines of a log, indented."""
    try:
        lines = log.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return ""
    return "\n".join("      " + ln for ln in lines)


def base_env(single_thread: bool) -> dict:
    """The children's environment: offline, and one thread or torch's defaults."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if single_thread:
        env.update(GRAPHSTRATA_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1")
    return env


class Busy:
    """``n`` numpy busy loops (one thread each) while the ``with`` block runs."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Busy:
        env = base_env(single_thread=True)
        for _ in range(self.n):
            self.procs.append(subprocess.Popen([sys.executable, "-c", BUSY_SNIPPET], env=env,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)  # let them reach the loop
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


# ---------------------------------------------------------------- one size


def build(size: int, corpus_dir: Path, index_dir: Path, args, corpus_info: dict) -> dict:
    """Build ``corpus_dir`` into ``index_dir`` in a fresh process (fast preset).

    Returns:
        ``{"status": "ok" | "failed" | "timeout", ...}`` with the child's figures: stage
        seconds, ``wall_s`` (whole process), ``peak_rss_bytes``, ``disk_bytes``, counts.
    """
    log = index_dir.with_suffix(".log")
    shutil.rmtree(index_dir, ignore_errors=True)
    print(f"  building {corpus_dir.name} -> {index_dir.name} (fresh process, fast preset; log {log.name}) ...",
          flush=True)
    r = run_child(BUILD_SNIPPET, [str(corpus_dir), str(index_dir)], base_env(single_thread=False),
                  args.max_build_seconds, log)
    rec = {"status": "ok", "wall_s": r["wall_s"], "rc": r["rc"], "ru_maxrss_bytes": r["ru_maxrss_bytes"],
           "log": str(log), "corpus_fingerprint": corpus_info["source"]["fingerprint"],
           "corpus_documents": corpus_info["documents"], "size": size, "seed": args.seed}
    if r["timed_out"]:
        rec["status"] = "timeout"
        rec["error"] = f"exceeded --max-build-seconds {args.max_build_seconds:g}"
    elif r["rc"] != 0 or r["result"] is None:
        rec["status"] = "failed"
        rec["error"] = f"exit status {r['rc']}"
    else:
        rec.update(r["result"])
        rec["disk_bytes"] = dir_bytes(index_dir)
        (index_dir.parent / (index_dir.name + ".build.json")).write_text(json.dumps(rec, indent=2))
    return rec


def query_pass(index_dir: Path, queries_file: Path, args, loaded: bool) -> dict:
    """Load the index in a fresh process and time every method (see the module docstring).

    Returns:
        ``{"status", "load_s", "rss_after_load_bytes", "rss_after_queries_bytes",
        "methods": {m: {"first_ms", "p50_ms", "p95_ms", "mean_ms"} | {"error"}}}``.
    """
    log = index_dir.parent / (index_dir.name + (".query-loaded.log" if loaded else ".query.log"))
    what = f"under load ({os.cpu_count()} busy loops, default threads)" if loaded else "idle, 1 thread"
    print(f"  query pass {what} ...", flush=True)
    argv = [str(index_dir), str(queries_file), json.dumps(args.methods or []), str(K)]
    if loaded:
        with Busy(os.cpu_count() or 2):
            r = run_child(QUERY_SNIPPET, argv, base_env(single_thread=False), args.max_query_seconds, log)
    else:
        r = run_child(QUERY_SNIPPET, argv, base_env(single_thread=True), args.max_query_seconds, log)
    load_avg = [round(x, 2) for x in os.getloadavg()]  # 1-min load average when the pass ended
    if r["timed_out"]:
        return {"status": "timeout", "error": f"exceeded --max-query-seconds {args.max_query_seconds:g}",
                "log": str(log)}
    if r["rc"] != 0 or r["result"] is None:
        return {"status": "failed", "error": f"exit status {r['rc']}", "log": str(log)}
    res = r["result"]
    methods = {}
    for m, v in res.pop("methods").items():
        if "error" in v:
            methods[m] = v
            continue
        t = v["times_ms"]
        # times_ms[0] is the first query asked again: first_ms / again_ms is what being first
        # cost, apart from what that question costs (first_ms / p50_ms mixes both)
        methods[m] = {"first_ms": v["first_ms"], "again_ms": t[0], "p50_ms": percentile(t, 50),
                      "p95_ms": percentile(t, 95), "mean_ms": sum(t) / len(t), "n": len(t)}
        if v.get("warm_times_ms"):
            methods[m]["warm_p50_ms"] = percentile(v["warm_times_ms"], 50)
    return {"status": "ok", "wall_s": r["wall_s"], **res, "methods": methods, "log": str(log),
            "load_average_after": load_avg}


class PairedChild:
    """One loaded index in its own process (:data:`PAIRED_SNIPPET`), answering "time method m
    over the query set" requests on stdin; its stderr goes to ``log``."""

    def __init__(self, index_dir: Path, queries_file: Path, log: Path) -> None:
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PAIRED_SNIPPET, str(index_dir), str(queries_file), str(K)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            env=base_env(single_thread=True), cwd=ROOT, start_new_session=True)
        self.methods: list[str] = []

    def _expect(self, tag: str):
        for line in self.proc.stdout:
            if line.startswith(tag + " "):
                return json.loads(line[len(tag) + 1:])
        raise RuntimeError(f"paired child exited (status {self.proc.wait()}) before {tag}; see {self.log.name}")

    def ready(self) -> None:
        self.methods = self._expect("READY")

    def time(self, method: str) -> list[float]:
        self.proc.stdin.write(method + "\n")
        self.proc.stdin.flush()
        return self._expect("TIMES")

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


def paired_pass(small: Path, large: Path, queries_file: Path, args) -> dict:
    """The smallest and the largest index, each loaded in its own idle process on one thread,
    both kept loaded, timed in alternating rounds: per round and method the whole query set on
    one, then on the other (ABBA order across rounds), one process running at a time. Slow
    drift of a shared machine (a neighbour's load, frequency) then reaches both sizes alike,
    which separate passes minutes apart do not guarantee: on this VM the p50 of one size moved
    ±25 % between passes of unchanged code.

    Returns:
        ``{"status", "rounds", "sizes": [small, large] index names, "methods": {m: {"p50_small_ms",
        "p50_large_ms", "ratio", "round_ratios"}}}``: p50s over every round's times pooled;
        ``ratio`` = large ÷ small; ``round_ratios`` each round's own p50 ratio.
    """
    print(f"\n[paired rounds: {small.name} against {large.name}, {args.paired_rounds} rounds]", flush=True)
    kids = [PairedChild(d, queries_file, d.parent / (d.name + ".paired.log")) for d in (small, large)]
    try:
        for kid in kids:
            kid.ready()
        methods = args.methods or [m for m in kids[0].methods if m in kids[1].methods]
        times = {m: ([], []) for m in methods}
        rounds: dict[str, list[float]] = {m: [] for m in methods}
        for r in range(args.paired_rounds):
            for m in methods:
                got = [None, None]
                for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                    got[i] = kids[i].time(m)
                    times[m][i].extend(got[i])
                rounds[m].append(percentile(got[1], 50) / max(percentile(got[0], 50), 1e-9))
    except (RuntimeError, OSError) as exc:
        return {"status": "failed", "error": str(exc)}
    finally:
        for kid in kids:
            kid.close()
    out = {}
    for m in methods:
        a, b = percentile(times[m][0], 50), percentile(times[m][1], 50)
        out[m] = {"p50_small_ms": a, "p50_large_ms": b, "ratio": b / a if a else None,
                  "round_ratios": rounds[m]}
    return {"status": "ok", "rounds": args.paired_rounds, "sizes": [small.name, large.name], "methods": out}


def print_paired(p: dict) -> None:
    """The paired rounds' table."""
    if p.get("status") != "ok":
        print(f"  paired rounds {p.get('status')}: {p.get('error', '')}")
        return
    small, large = p["sizes"]
    print(f"  {'method':<9} {small + ' p50':>22} {large + ' p50':>24} {'ratio':>7} {'per round':>22}")
    for m, v in p["methods"].items():
        rr = sorted(v["round_ratios"])
        span = f"{rr[0]:.2f}–{rr[-1]:.2f}" if rr else "-"
        ratio = f"{v['ratio']:.2f}x" if v["ratio"] else "-"
        print(f"  {m:<9} {ms(v['p50_small_ms']):>19} ms {ms(v['p50_large_ms']):>21} ms {ratio:>7} {span:>22}")


def ms(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def print_size(rec: dict) -> None:
    """One size's tables: build stages, memory and disk, then the query latencies."""
    c, b = rec["corpus"], rec["build"]
    print(f"\n== {rec['size']:,} chunks: corpus {c['documents']:,} documents, {c['characters'] / 1e6:.1f} M "
          f"characters, ~{c['chunks_estimated']:,} chunks estimated ({c['copies']} copies) ==")
    if b["status"] != "ok":
        print(f"  build {b['status'].upper()}: {b.get('error', '')} (log {b.get('log')})")
        if b.get("log_tail"):
            print(b["log_tail"])
        return
    reused = " (reused, --skip-build)" if b.get("reused") else ""
    print(f"  built{reused}: {b['chunks']:,} chunks, {b['entities']:,} entities, {b['relations']:,} relations, "
          f"communities per layer {b['communities_per_layer']}")
    print(f"  build process: {b['wall_s']:.1f} s wall (import {b['import_s']:.1f} s, build {b['build_s']:.1f} s, "
          f"persist {b['persist_s']:.1f} s), peak RSS {b['peak_rss_bytes'] / MIB:,.0f} MiB, "
          f"index {b['disk_bytes'] / MIB:,.1f} MiB on disk ({b['disk_bytes'] / max(1, b['chunks']):,.0f} B/chunk)")
    stages = {**b["stages_s"], "persist": b["persist_s"]}
    total = sum(stages.values()) or 1.0
    print(f"  {'stage':<32} {'seconds':>9} {'share':>7}")
    for name, sec in stages.items():
        print(f"  {name:<32} {sec:>9.2f} {100 * sec / total:>6.1f}%")
    idle, load = rec.get("idle") or {}, rec.get("loaded") or {}
    if idle.get("status") != "ok":
        print(f"  query pass {idle.get('status', 'skipped')}: {idle.get('error', '')}")
        return
    print(f"  load {idle['load_s']:.2f} s (import {idle['import_s']:.1f} s); RSS {idle['rss_after_load_bytes'] / MIB:,.0f} "
          f"MiB after load, {idle['rss_after_queries_bytes'] / MIB:,.0f} MiB after querying "
          f"(peak {idle['peak_rss_bytes'] / MIB:,.0f} MiB); {rec['queries']} queries per method, k={K}; "
          f"load average after the idle pass {idle['load_average_after'][0]}")
    if load.get("status") == "ok":
        threads = load.get("torch_threads")
        print(f"  under load: load {load['load_s']:.2f} s, "
              f"{'torch not imported' if threads is None else f'torch threads {threads}'}")
    elif load:
        print(f"  query pass under load {load.get('status')}: {load.get('error', '')}")
    head = (f"  {'method':<9} {'first ms':>9} {'again':>7} {'p50 ms':>8} {'p95 ms':>8} {'warm p50':>8} {'p50/dense':>9} |"
            f" {'loaded: first':>13} {'p50':>7} {'p95':>7} {'p50 x idle':>10}")
    print(head)
    print("  " + "-" * (len(head) - 2))
    dense = idle["methods"].get("dense", {}).get("p50_ms")
    for m, v in idle["methods"].items():
        if "error" in v:
            print(f"  {m:<9} ERROR {v['error']}")
            continue
        lv = (load.get("methods") or {}).get(m, {}) if load.get("status") == "ok" else {}
        ratio = f"{v['p50_ms'] / dense:.2f}x" if dense else "-"
        slow = f"{lv['p50_ms'] / v['p50_ms']:.2f}x" if lv.get("p50_ms") and v["p50_ms"] else "-"
        print(f"  {m:<9} {ms(v['first_ms']):>9} {ms(v.get('again_ms')):>7} {ms(v['p50_ms']):>8} {ms(v['p95_ms']):>8}"
              f" {ms(v.get('warm_p50_ms')):>8} {ratio:>9} |"
              f" {ms(lv.get('first_ms')):>13} {ms(lv.get('p50_ms')):>7} {ms(lv.get('p95_ms')):>7} {slow:>10}")


# ---------------------------------------------------------------- summary


def fit_exponent(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares fit of ``log v = a + b log n``; ``(a, b)``, or ``None`` with fewer than two
    sizes or a value <= 0."""
    pts = [(n, v) for n, v in points if v is not None and v > 0]
    if len(pts) < 2 or len(pts) < len(points) or len({n for n, _ in pts}) < 2:
        return None
    xs = [math.log(n) for n, _ in pts]
    ys = [math.log(v) for _, v in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def summary(records: list[dict]) -> dict:
    """Every metric across the sizes that built and loaded, its fitted exponent ``b`` and its
    projection to 10M chunks: ``{metric: {"unit", "values": {size: v}, "b", "projected"}}``.
    ``n`` is the built chunk count; metrics with a value under ``FIT_FLOOR`` are not fitted."""
    ok = [r for r in records if r["build"]["status"] == "ok"]
    metrics: dict[str, dict] = {}

    def put(name: str, unit: str, rec: dict, value) -> None:
        m = metrics.setdefault(name, {"unit": unit, "values": {}})
        if value is not None:
            m["values"][rec["build"]["chunks"]] = value

    for r in ok:
        b = r["build"]
        for stage, sec in {**b["stages_s"], "persist": b["persist_s"]}.items():
            put(f"build: {stage}", "s", r, sec)
        put("build: total (process wall)", "s", r, b["wall_s"])
        put("build: peak RSS", "MiB", r, b["peak_rss_bytes"] / MIB)
        put("index on disk", "MiB", r, b["disk_bytes"] / MIB)
        idle = r.get("idle") or {}
        if idle.get("status") == "ok":
            put("load", "s", r, idle["load_s"])
            put("RSS after load", "MiB", r, idle["rss_after_load_bytes"] / MIB)
            put("RSS after querying", "MiB", r, idle["rss_after_queries_bytes"] / MIB)
            for m, v in idle["methods"].items():
                if "p50_ms" in v:
                    put(f"p50 {m}", "ms", r, v["p50_ms"])
                    put(f"first query {m}", "ms", r, v["first_ms"])
                    if v.get("again_ms") is not None:
                        put(f"same query again {m}", "ms", r, v["again_ms"])
                    if v.get("warm_p50_ms") is not None:
                        put(f"warm p50 {m}", "ms", r, v["warm_p50_ms"])
        load = r.get("loaded") or {}
        if load.get("status") == "ok":
            for m, v in load["methods"].items():
                if "p50_ms" in v:
                    put(f"p50 {m} under load", "ms", r, v["p50_ms"])
    sizes = sorted({r["build"]["chunks"] for r in ok})
    for m in metrics.values():
        points = [(n, m["values"].get(n)) for n in sizes]
        # a value at timer / rounding noise (a stage that takes 20 µs) has no meaningful exponent
        small = any(v is not None and v < FIT_FLOOR[m["unit"]] for _, v in points)
        fit = None if small else fit_exponent(points)
        m["b"] = None if fit is None else fit[1]
        m["projected"] = None if fit is None else math.exp(fit[0] + fit[1] * math.log(PROJECT_TO))
    return metrics


def print_summary(metrics: dict, sizes: list[int]) -> None:
    """The cross-size table with exponents and the 10M projection."""
    print(f"\n== summary: t ∝ n^b fitted over {len(sizes)} built size(s) (n = built chunks); "
          f"projection to {PROJECT_TO:,} chunks from the fit ==")
    if len(sizes) < 2:
        print("  (fewer than two sizes built: no exponents)")
    head = f"  {'metric':<34} {'unit':>4} " + " ".join(f"{n:>11,}" for n in sizes) + f" {'b':>6} {'10M proj.':>11}"
    print(head)
    print("  " + "-" * (len(head) - 2))
    for name, m in metrics.items():
        vals = " ".join(f"{m['values'][n]:>11,.2f}" if n in m["values"] else f"{'-':>11}" for n in sizes)
        b = f"{m['b']:>6.2f}" if m["b"] is not None else f"{'-':>6}"
        proj = f"{m['projected']:>11,.1f}" if m["projected"] is not None else f"{'-':>11}"
        print(f"  {name:<34} {m['unit']:>4} {vals} {b} {proj}")


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated corpus sizes in chunks")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corpus", default=None, help="source folder (default: the linux-doc-6.1 kernel docs)")
    ap.add_argument("--methods", default=None, help="comma-separated subset of gs.methods")
    ap.add_argument("--queries", type=int, default=60, help="questions per method")
    ap.add_argument("--max-build-seconds", type=float, default=3600.0)
    ap.add_argument("--max-query-seconds", type=float, default=3600.0)
    ap.add_argument("--skip-build", action="store_true", help="reuse the index built earlier")
    ap.add_argument("--no-loaded", action="store_true", help="skip the query pass under load")
    ap.add_argument("--paired-rounds", type=int, default=5,
                    help="alternating rounds of the smallest against the largest index (0: none)")
    ap.add_argument("--out-dir", default=str(OUT), help="where corpora and indexes live")
    ap.add_argument("--json", default=str(ROOT / ".bench_out" / "scale.json"))
    args = ap.parse_args(argv)
    try:
        sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--sizes {args.sizes!r}: expected comma-separated integers")
    if not sizes or min(sizes) <= 0:
        ap.error("--sizes: every size must be > 0 chunks")
    if args.queries <= 0:
        ap.error("--queries must be > 0")
    if args.paired_rounds < 0:
        ap.error("--paired-rounds must be >= 0")
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    head = machine()
    print(f"# graphstrata scale benchmark — {head['date']} — {head['host']}: {head['cpu']}, "
          f"{head['cores']} cores, {(head['memory_bytes'] or 0) / 2**30:.1f} GiB, Python {head['python']}, "
          f"git {head['git']}, load average {head['load_average']}")
    print("# figures are what this machine measured; sizes in chunks, times in seconds / milliseconds")

    # 1. the corpora (and the queries), then the generator's memory goes back before any build
    t0 = time.perf_counter()
    source = scale_corpus.load_source(args.corpus)
    print(f"source: {source.description}: {len(source.documents):,} documents, {source.characters:,} characters")
    gen = scale_corpus.ScaleCorpus(source, args.seed)
    queries = gen.queries(args.queries)
    queries_file = out_dir / f"queries-s{args.seed}-{args.queries}.json"
    queries_file.write_text(json.dumps(queries, indent=1) + "\n")
    print(f"{len(queries)} queries, e.g. {queries[0]!r}, {queries[1]!r}")
    measure = None
    corpora = {}
    for size in sizes:
        cdir = out_dir / f"corpus-{size}-s{args.seed}"
        if scale_corpus.is_current(cdir, size, args.seed, source):
            info = json.loads((cdir / "corpus.json").read_text())
            print(f"corpus {cdir.name}: reused")
        else:
            if measure is None:
                measure = scale_corpus.measure_tokens_per_char(gen)
            t = time.perf_counter()
            info = scale_corpus.write_corpus(gen, cdir, size, measure)
            print(f"corpus {cdir.name}: generated in {time.perf_counter() - t:.1f} s")
        print(f"  {scale_corpus.describe(info)}")
        corpora[size] = (cdir, info)
    del gen, source
    gc.collect()
    print(f"corpora ready in {time.perf_counter() - t0:.1f} s", flush=True)

    # 2. build and query each size
    records = []
    for size in sizes:
        cdir, info = corpora[size]
        index_dir = out_dir / f"index-{size}-s{args.seed}"
        print(f"\n[{size:,} chunks]", flush=True)
        rec = {"size": size, "queries": len(queries), "corpus": {k: v for k, v in info.items() if k != "shards"}}
        build_file = index_dir.parent / (index_dir.name + ".build.json")
        if args.skip_build:
            prior = json.loads(build_file.read_text()) if build_file.is_file() else None
            if not (index_dir / "CURRENT").exists() or prior is None:
                b = {"status": "missing", "error": f"no index at {index_dir} (--skip-build)"}
            elif prior.get("corpus_fingerprint") != info["source"]["fingerprint"] or \
                    prior.get("corpus_documents") != info["documents"]:
                b = {"status": "stale", "error": f"{index_dir} was built from another corpus"}
            else:
                b = {**prior, "reused": True}
        else:
            b = build(size, cdir, index_dir, args, info)
        if b["status"] in ("failed", "timeout"):
            b["log_tail"] = tail(Path(b["log"]))
        rec["build"] = b
        if b["status"] == "ok":
            rec["idle"] = query_pass(index_dir, queries_file, args, loaded=False)
            if not args.no_loaded and rec["idle"]["status"] == "ok":
                rec["loaded"] = query_pass(index_dir, queries_file, args, loaded=True)
        records.append(rec)
        print_size(rec)
        write_json(args.json, head, args, queries, records, None)  # after every size: partial results survive

    metrics = summary(records)
    built = sorted({r["build"]["chunks"] for r in records if r["build"]["status"] == "ok"})
    print_summary(metrics, built)
    loaded = [r for r in records if (r.get("idle") or {}).get("status") == "ok"]
    paired = None
    if args.paired_rounds > 0 and len(loaded) >= 2:
        lo, hi = loaded[0]["size"], loaded[-1]["size"]
        paired = paired_pass(out_dir / f"index-{lo}-s{args.seed}", out_dir / f"index-{hi}-s{args.seed}",
                             queries_file, args)
        print_paired(paired)
    failed = [f"{r['size']:,} ({r['build']['status']})" for r in records if r["build"]["status"] != "ok"]
    if failed:
        print(f"\nsizes not built: {', '.join(failed)}")
    write_json(args.json, head, args, queries, records, metrics, paired)
    print(f"\nwrote {args.json}")
    return 0


def write_json(path: str, head: dict, args, queries: list[str], records: list[dict], metrics: dict | None,
               paired: dict | None = None) -> None:
    """Everything measured so far, to ``path``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {"machine": head, "args": {k: v for k, v in vars(args).items()}, "k": K, "queries": queries,
           "sizes": records, "summary": metrics, "paired": paired}
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    tmp.replace(p)


if __name__ == "__main__":
    sys.exit(main())
