"""``graphstrata serve`` under load: concurrent HTTP clients on loopback against in-process retrieval.

Starts ``graphstrata serve INDEX --transport http`` in a child process, warms it up, then runs
``--clients`` threads (16) that each send ``--calls`` (500) ``POST /v1/retrieve`` requests over
one keep-alive connection, cycling through the HotpotQA dev questions. Prints errors (any
status other than 200, or a result without ``k`` hits), the server-side p50 / p99 latency seen
by the clients, throughput, and the server's resident memory (RSS) after warm-up and after the
run (and after its first half: growth that stops is warm-up, growth that goes on is a leak); and,
on the same ``--in-process`` (300) questions, the in-process ``GraphStrata.retrieve`` p50 (one
caller, the same arguments, in this process) beside the p50 of one HTTP client alone (the
server's own overhead: HTTP, JSON, worker thread, no queueing), measured in pairs (each question
in process, then over HTTP) so that both see the same load on a shared machine.

    .venv/bin/python bench/bench_serve.py [--index DIR] [--clients 16] [--calls 500] [--method archrag] [-k 5]

The index defaults to .bench_out/serve-hotpotqa, built here with the fast embedder preset from
../shared/data/hotpotqa/corpus.jsonl when missing (about half a minute). ``--json FILE`` also
writes the figures.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from machine import cpu_name

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GRAPHSTRATA_DATA", ROOT.parent / "shared" / "data"))


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def _rss_mb(pid: int) -> float:
    import psutil

    return psutil.Process(pid).memory_info().rss / 2**20


def _build(index: Path) -> None:
    from graphstrata import GraphStrata

    corpus = DATA / "hotpotqa" / "corpus.jsonl"
    print(f"no index at {index}: building it from {corpus} with the fast preset")
    docs = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs.append({"id": d["id"], "text": f"{d['title']}\n{d['text']}", "metadata": {"title": d["title"]}})
    t0 = time.perf_counter()
    GraphStrata.build(docs, embedder="fast", persist_dir=index)
    print(f"built in {time.perf_counter() - t0:.1f} s")


def _wait(port: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/v1/indexes")
            c.getresponse().read()
            c.close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("server did not start")


def _client(port: int, bodies: list[bytes], k: int, out: list[float], errors: list[str],
            conn: http.client.HTTPConnection | None = None) -> None:
    """Send ``bodies`` in turn over one keep-alive connection (``conn``, left open, or a new one)."""
    keep = conn is not None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for body in bodies:
        t0 = time.perf_counter()
        try:
            conn.request("POST", "/v1/retrieve", body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            continue
        out.append(time.perf_counter() - t0)
        if resp.status != 200:
            errors.append(f"HTTP {resp.status}: {data[:200]!r}")
        elif len(json.loads(data)["hits"]) != k:
            errors.append("fewer than k hits")
    if not keep:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", default=str(ROOT / ".bench_out" / "serve-hotpotqa"))
    ap.add_argument("--questions", default=str(DATA / "hotpotqa" / "questions.jsonl"))
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--calls", type=int, default=500, help="requests per client")
    ap.add_argument("--method", default="archrag")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--in-process", type=int, default=300,
                    help="questions for the in-process p50 and the one-client HTTP p50")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()

    print(f"# graphstrata serve load — {time.strftime('%Y-%m-%d %H:%M')} — {platform.node()}: {cpu_name()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    index = Path(args.index)
    if not ((index / "CURRENT").exists() or (index / "manifest.json").exists()):
        _build(index)
    with open(args.questions, encoding="utf-8") as f:
        questions = [json.loads(line)["question"] for line in f if line.strip()]

    sys.path.insert(0, str(ROOT / "packages" / "graphstrata" / "src"))
    from graphstrata import GraphStrata
    from graphstrata.testing.serve import free_port, serve_command

    single = [questions[i % len(questions)] for i in range(args.in_process)]
    gs = GraphStrata.load(index)
    for q in questions[:20]:
        gs.retrieve(q, method=args.method, k=args.k, kinds=("chunk",))

    port = free_port()
    # every client shares the tokenless "local" caller: let all of them in at once
    proc = subprocess.Popen(serve_command(str(index), "--transport", "http", "--port", str(port),
                                          "--max-concurrent", str(args.clients)))
    try:
        t0 = time.perf_counter()
        _wait(port, proc)
        print(f"server up in {time.perf_counter() - t0:.1f} s (pid {proc.pid}); RSS at start {_rss_mb(proc.pid):.0f} MB")
        body = lambda q: json.dumps({"query": q, "method": args.method, "k": args.k}).encode()  # noqa: E731
        warm_lat: list[float] = []
        warm_err: list[str] = []
        local: list[float] = []
        _client(port, [body(q) for q in questions[:20]], args.k, [], warm_err)
        # paired, one caller at a time: each question in this process, then over HTTP, so both
        # p50s see the same load on a shared machine
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for q in single:
            t = time.perf_counter()
            gs.retrieve(q, method=args.method, k=args.k, kinds=("chunk",))
            local.append(time.perf_counter() - t)
            _client(port, [body(q)], args.k, warm_lat, warm_err, conn)
        conn.close()
        rss_before = _rss_mb(proc.pid)
        latencies: list[list[float]] = [[] for _ in range(args.clients)]
        errors: list[str] = []
        rss_half: list[float] = []
        wall = 0.0
        half = args.calls // 2
        for start, stop in ((0, half), (half, args.calls)):  # two rounds: RSS after each
            threads = []
            for c in range(args.clients):
                bodies = [body(questions[(c * args.calls + i) % len(questions)]) for i in range(start, stop)]
                threads.append(threading.Thread(target=_client, args=(port, bodies, args.k, latencies[c], errors)))
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall += time.perf_counter() - t0
            rss_half.append(_rss_mb(proc.pid))
        rss_after = rss_half[-1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    flat = [x for lat in latencies for x in lat]
    total = args.clients * args.calls
    figures = {
        "clients": args.clients, "calls_per_client": args.calls, "requests": total, "method": args.method,
        "k": args.k, "errors": len(errors) + len(warm_err), "wall_s": round(wall, 1),
        "requests_per_s": round(total / wall, 1),
        "server_p50_ms": round(1000 * statistics.median(flat), 1), "server_p99_ms": round(1000 * _pct(flat, 0.99), 1),
        "in_process_p50_ms": round(1000 * statistics.median(local), 1),
        "http_one_client_p50_ms": round(1000 * statistics.median(warm_lat), 1),
        "rss_after_warmup_mb": round(rss_before), "rss_after_half_mb": round(rss_half[0]),
        "rss_after_run_mb": round(rss_after),
        "index": str(index), "documents": len(gs.documents), "chunks": len(gs.chunks),
        "embedder": gs.embedder.id,
    }
    print(f"index {index}: {figures['documents']} documents, {figures['chunks']} chunks, embedder {figures['embedder']}")
    print(f"{total} requests ({args.clients} clients x {args.calls}), method {args.method}, k={args.k}: "
          f"{figures['errors']} errors, {wall:.1f} s, {figures['requests_per_s']} req/s")
    print(f"HTTP p50 {figures['server_p50_ms']} ms, p99 {figures['server_p99_ms']} ms under load; "
          f"one client alone p50 {figures['http_one_client_p50_ms']} ms; "
          f"in-process retrieve p50 {figures['in_process_p50_ms']} ms (one caller)")
    print(f"server RSS {figures['rss_after_warmup_mb']} MB after warm-up, {figures['rss_after_half_mb']} MB after "
          f"half the requests, {figures['rss_after_run_mb']} MB after all")
    for e in errors[:5]:
        print("error:", e)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
