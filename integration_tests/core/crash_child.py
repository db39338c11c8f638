"""Child process of test_core_reliability.py: runs index operations and gets killed.

    python crash_child.py ops INDEX_DIR LOG            the scripted operations of OPERATIONS,
                                                       one "done <i>" line in LOG after each
    python crash_child.py persist-step INDEX_DIR N     load INDEX_DIR, insert EXTRA, SIGKILL
                                                       itself at the N-th store checkpoint
    python crash_child.py count-steps INDEX_DIR        print how many checkpoints that insert has
    python crash_child.py flip INDEX_DIR SECONDS       persist two states alternately until time
                                                       is up (the other process loads meanwhile)

Documents are LiHua-World sessions (``GRAPHSTRATA_DATA`` or ../shared/data); the embedder is
the hashing test double, so a build takes a fraction of a second.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from graphstrata import GraphStrata, store
from graphstrata.testing import HashEmbedder

DATA = Path(os.environ.get("GRAPHSTRATA_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")
EMBEDDER = HashEmbedder()


def sessions() -> list[dict]:
    with open(DATA / "lihua_world" / "corpus.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def operations(records: list[dict]) -> list[tuple[str, list]]:
    """The scripted operations: (kind, argument) — build, insert, delete, upsert, persist."""
    ids = [r["id"] for r in records]
    edited = [{**r, "text": r["text"] + "\nLiHua: (edited)"} for r in records[3:5]]
    return [
        ("build", records[:12]),
        ("insert", records[12:16]),
        ("delete", ids[0:3]),
        ("upsert", edited),
        ("insert", records[16:20]),
        ("delete", ids[12:14]),
        ("persist", []),
        ("insert", records[20:24]),
        ("delete", ids[5:8]),
        ("upsert", records[8:10] + records[24:26]),
    ]


def expected_documents(records: list[dict]) -> list[set[str]]:
    """Document ids after each operation of :func:`operations` (what a load must show)."""
    out, docs = [], set()
    for kind, arg in operations(records):
        if kind in ("build", "insert", "upsert"):
            docs = (set() if kind == "build" else docs) | {r["id"] for r in arg}
        elif kind == "delete":
            docs = docs - set(arg)
        out.append(set(docs))
    return out


def run_ops(index_dir: str, log: str) -> None:
    records = sessions()
    gs = None
    with open(log, "a", encoding="utf-8") as out:
        for i, (kind, arg) in enumerate(operations(records)):
            if kind == "build":
                gs = GraphStrata.build(arg, embedder=EMBEDDER, persist_dir=index_dir)
            elif kind == "persist":
                gs.persist(index_dir)
            else:
                getattr(gs, kind)(arg)
            out.write(f"done {i}\n")
            out.flush()
            os.fsync(out.fileno())


EXTRA = {"id": "extra-session", "text": "Time: 20260301_10:00\nLiHua: The kiwi is a flightless bird."}


def persist_step(index_dir: str, n: int | None) -> int:
    gs = GraphStrata.load(index_dir, embedder=EMBEDDER)
    count = 0

    def checkpoint(label: str) -> None:
        nonlocal count
        count += 1
        if n is not None and count == n:
            os.kill(os.getpid(), signal.SIGKILL)

    store.versions._checkpoint = checkpoint
    gs.insert([EXTRA])
    return count


def flip(index_dir: str, seconds: float) -> None:
    records = sessions()
    a = GraphStrata.build(records[:6], embedder=EMBEDDER)
    b = GraphStrata.build(records[6:14], embedder=EMBEDDER)
    a.persist(index_dir)
    print("ready", flush=True)
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        # a state not read from the directory replaces its content (a persist of an instance
        # into its own directory after another writer's version writes nothing: issue 30)
        GraphStrata((a if n % 2 else b).state).persist(index_dir)
        n += 1
    print(f"persisted {n}", flush=True)


if __name__ == "__main__":
    mode, index_dir = sys.argv[1], sys.argv[2]
    if mode == "ops":
        run_ops(index_dir, sys.argv[3])
    elif mode == "persist-step":
        persist_step(index_dir, int(sys.argv[3]))
    elif mode == "count-steps":
        print(persist_step(index_dir, None))
    elif mode == "flip":
        flip(index_dir, float(sys.argv[3]))
    else:
        raise SystemExit(f"unknown mode {mode}")
