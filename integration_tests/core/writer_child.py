"""Child process of test_core_writers.py: one of several writers inserting into one index.

    python writer_child.py INDEX_DIR NAME COUNT reload|once

Inserts COUNT small documents ``NAME-<i>`` into INDEX_DIR, printing ``ack <id>`` after each
insert returned (acknowledged) and ``err <id> <exception>`` after each that raised. ``reload``
loads the index again before every insert (the probe of issue 30), ``once`` loads it once (a
long-lived framework worker).
"""

from __future__ import annotations

import sys

from graphstrata import GraphStrata
from graphstrata.testing import HashEmbedder


def main(index_dir: str, name: str, count: int, mode: str) -> None:
    embedder = HashEmbedder()
    gs = GraphStrata.load(index_dir, embedder=embedder)
    for i in range(count):
        if mode == "reload":
            gs = GraphStrata.load(index_dir, embedder=embedder)
        doc_id = f"{name}-{i}"
        text = f"Writer {name} filed note {i}. LiHua read note {i} from {name} in the evening."
        try:
            gs.insert([{"id": doc_id, "text": text}])
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which judges it
            print(f"err {doc_id} {type(exc).__name__}: {exc}", flush=True)
        else:
            print(f"ack {doc_id}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
