"""Build time and peak memory against input size: one large document, and a whole corpus.

Each case builds one index (``GraphStrata.build``, no persistence) in a fresh subprocess and
reports wall seconds, the seconds of each indexing stage, the peak resident set size
(``getrusage`` ``ru_maxrss`` of that process) and the graph's size. Cases:

* ``sentences:N`` — one document of N MB (10^6 characters) made of the sentences of
  ../shared/data/musique/corpus.jsonl, shuffled (seeded) and repeated as often as needed,
  with a paragraph break every 8 sentences;
* ``nobreak:N`` — the same text with every sentence break removed (``.!?`` and newlines
  dropped): one N MB "sentence", the worst case for sentence co-occurrence;
* ``musique`` — the whole MuSiQue corpus (5,021 passages, 2.4 MB).

``--fresh-names`` renames the capitalised words of every repetition of the source text
(``Paris`` → ``Parisb``), so entities keep growing with the size instead of saturating at the
source's vocabulary (a pessimistic stand-in for a large corpus of distinct text).

Embedding dominates a real build here (the packaged MiniLM embeds about 30 chunks/s on this
2-core VM: a 20 MB document is ~100k chunks, about an hour), so ``--embedder hash`` (default) uses
a 384-dimensional hashing embedder (signed bag of CRC32-hashed words; as wide as MiniLM, so the
vector memory and the k-NN work of the hierarchy are the same) and measures everything *but*
the model; ``--embedder minilm`` uses the real one.

    .venv/bin/python bench/bench_limits.py [--cases sentences:1,nobreak:1,musique]
        [--embedder hash|minilm] [--fresh-names] [--timeout S] [--max-memory-gb G]
        [--config KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import subprocess
import sys
import time
import zlib
from pathlib import Path

from machine import cpu_name

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GRAPHSTRATA_DATA", ROOT.parent / "shared" / "data"))
# nobreak:20 is left out: with the default caps it needs about 21 GB (README, "Limits")
DEFAULT_CASES = "musique,sentences:1,sentences:5,sentences:20,nobreak:1,nobreak:5"
_WORD_RE = re.compile(r"\w+")
_CAPITALISED_RE = re.compile(r"\b([A-Z][a-z]+)\b")


class HashEmbedder:
    """384-d signed bag of CRC32-hashed lower-cased words, L2-normalised (no model)."""

    id = "bench-hash-384"
    dim = 384

    def embed(self, texts):
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            words = _WORD_RE.findall(text.lower())
            if words:
                h = np.fromiter((zlib.crc32(w.encode()) for w in words), np.uint32, len(words))
                np.add.at(out[i], h % self.dim, np.where(h & 0x10000, 1.0, -1.0))
            out[i, 0] += 1e-3  # never a zero vector
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def token_spans(self, text):
        from graphstrata.models import regex_token_spans

        return regex_token_spans(text)


def _rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _cpu_seconds() -> float:
    import resource

    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def _musique_rows() -> list[dict]:
    path = DATA / "musique" / "corpus.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def synthetic_text(n_chars: int, breaks: bool, fresh_names: bool, seed: int = 0) -> str:
    """``n_chars`` characters of shuffled MuSiQue sentences (see the module notes)."""
    from graphstrata.extraction import split_sentences

    sentences = [
        row["text"][s:e].strip()
        for row in _musique_rows()
        for s, e in split_sentences(row["text"])
    ]
    rnd = random.Random(seed)
    parts: list[str] = []
    size, repetition = 0, 0
    while size < n_chars:
        order = sentences[:]
        rnd.shuffle(order)
        suffix = _suffix(repetition) if fresh_names else ""
        for i, sent in enumerate(order):
            if suffix:
                sent = _CAPITALISED_RE.sub(lambda m, s=suffix: m.group(1) + s, sent)
            if not breaks:
                sent = re.sub(r"[.!?\n]+", " ", sent).strip()
            parts.append(sent)
            parts.append(("\n\n" if i % 8 == 7 else " ") if breaks else " ")
            size += len(sent) + 1
            if size >= n_chars:
                break
        repetition += 1
    return "".join(parts)[:n_chars]


def _suffix(n: int) -> str:
    out = ""
    while n:
        n, r = divmod(n, 26)
        out = chr(97 + r) + out
    return out


def child(case: str, embedder_name: str, fresh_names: bool, config: dict) -> dict:
    """Build one case in this process; return its measurements."""
    from graphstrata import Document, GraphStrata
    from graphstrata.models import default_embedder

    if case == "musique":
        docs = [Document(r["id"], r["text"], {"title": r["title"]}) for r in _musique_rows()]
    else:
        kind, mb = case.split(":")
        if kind not in ("sentences", "nobreak"):
            raise SystemExit(f"unknown case {case!r}")
        text = synthetic_text(int(float(mb) * 1e6), kind == "sentences", fresh_names)
        docs = [Document(f"{kind}-{mb}MB", text)]
    embedder = HashEmbedder() if embedder_name == "hash" else default_embedder()
    chars = sum(len(d.text) for d in docs)
    base = _rss_mb()
    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    gs = GraphStrata.build(docs, config=config or None, embedder=embedder)
    seconds = time.perf_counter() - t0
    return {
        "case": case,
        "mb": chars / 1e6,
        "seconds": seconds,
        "cpu_seconds": _cpu_seconds() - cpu0,
        "rss_before_mb": base,
        "peak_rss_mb": _rss_mb(),
        "stats": gs.stats(),
        "stages": {k: round(v, 1) for k, v in gs.build_seconds.items()},
    }


def _option(text: str) -> tuple[str, object]:
    key, _, raw = text.partition("=")
    try:
        return key.strip(), json.loads(raw)
    except json.JSONDecodeError:
        return key.strip(), raw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=DEFAULT_CASES, help="comma-separated case names")
    ap.add_argument("--embedder", choices=("hash", "minilm"), default="hash")
    ap.add_argument("--fresh-names", action="store_true",
                    help="rename capitalised words per repetition")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per case")
    ap.add_argument("--config", type=_option, action="append", default=[], metavar="KEY=VALUE",
                    help="GraphStrataConfig field, repeatable")
    ap.add_argument("--max-memory-gb", type=float, default=None,
                    help="address-space limit of each case (RLIMIT_AS): a case that would need "
                    "more fails with MemoryError instead of waking the OOM killer")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    config = dict(args.config)

    if args.child:
        if args.max_memory_gb:
            import resource

            limit = int(args.max_memory_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        result = child(args.child, args.embedder, args.fresh_names, config)
        print("RESULT " + json.dumps(result), flush=True)
        return

    if not (DATA / "musique" / "corpus.jsonl").is_file():
        raise SystemExit(f"needs {DATA / 'musique' / 'corpus.jsonl'} (set GRAPHSTRATA_DATA)")
    label = ("hash embedder (384-d, no model: model time excluded)" if args.embedder == "hash"
             else "MiniLM (packaged model)")
    print(f"# graphstrata build limits — {time.strftime('%Y-%m-%d %H:%M')} — {platform.node()}: "
          f"{cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"# embedder: {label}; fresh names: {args.fresh_names}; config overrides: {config}")
    print(f"{'case':<14} {'MB':>6} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12} "
          f"{'chunks':>8} {'entities':>9} {'relations':>10}  communities / stages (wall s)")
    done: dict[str, list[dict]] = {}
    for case in args.cases.split(","):
        cmd = [sys.executable, __file__, "--child", case, "--embedder", args.embedder]
        cmd += ["--fresh-names"] if args.fresh_names else []
        cmd += ["--max-memory-gb", str(args.max_memory_gb)] if args.max_memory_gb else []
        for key, value in config.items():
            cmd += ["--config", f"{key}={json.dumps(value)}"]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"{case:<14} {'':>6} {'> ' + str(int(args.timeout)):>8}  did not finish "
                  f"(killed after {time.perf_counter() - t0:.0f} s)", flush=True)
            continue
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            print(f"{case:<14} failed (exit {proc.returncode}): {' | '.join(tail)}", flush=True)
            continue
        r = json.loads(lines[-1][len("RESULT "):])
        s = r["stats"]
        print(f"{case:<14} {r['mb']:>6.2f} {r['seconds']:>8.1f} {r['cpu_seconds']:>8.1f} "
              f"{r['peak_rss_mb']:>12.0f} {s['chunks']:>8} {s['entities']:>9} "
              f"{s['relations']:>10}  {s['communities_per_layer']} {r['stages']}", flush=True)
        done.setdefault(case.split(":")[0], []).append(r)
    # rule of thumb: the slope between the sizes of one kind (fixed costs cancel out)
    for kind, runs in done.items():
        runs.sort(key=lambda r: r["mb"])
        for a, b in zip(runs, runs[1:], strict=False):
            d_mb = b["mb"] - a["mb"]
            print(f"# {kind} {a['mb']:.0f} → {b['mb']:.0f} MB: "
                  f"{(b['seconds'] - a['seconds']) / d_mb:.1f} wall s, "
                  f"{(b['cpu_seconds'] - a['cpu_seconds']) / d_mb:.1f} CPU s and "
                  f"{(b['peak_rss_mb'] - a['peak_rss_mb']) / d_mb:.0f} MB of peak RSS per "
                  f"extra MB of input", flush=True)


if __name__ == "__main__":
    main()
