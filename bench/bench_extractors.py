"""Evidence recall@5 of every method with the statistical and the NLP extractor, one build each.

For a corpus of ../shared/data, builds the index once per configuration (default: the
statistical extractor as today's default, then ``extractor="nlp"`` with entity resolution) and
prints each build's time and every method's recall@5 on the corpus' dev questions, one line
per configuration.

    .venv/bin/python bench/bench_extractors.py musique fast
    .venv/bin/python bench/bench_extractors.py hotpotqa default base base+extractor=nlp+entity_resolution=true

Arguments: corpus, embedder (``default`` = MiniLM, ``fast``), then configurations: ``base``
optionally followed by ``+field=value`` overrides of GraphStrataConfig. ``GRAPHSTRATA_NUM_THREADS``
defaults to 1 here, so every build is reproducible (C-HNSW and the k-NN edges on one thread).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("GRAPHSTRATA_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DATA = Path(os.environ.get("GRAPHSTRATA_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def config_of(spec: str) -> dict:
    """``base+field=value+...`` as a dict of GraphStrataConfig overrides."""
    out: dict = {}
    for part in spec.split("+")[1:]:
        key, value = part.split("=", 1)
        out[key] = {"true": True, "false": False}.get(value, value)
    return out


def main(argv: list[str]) -> None:
    from graphstrata import GraphStrata, GraphStrataConfig
    from graphstrata.eval import evaluate, load_questions

    corpus, embedder = argv[0], argv[1]
    specs = argv[2:] or ["base", "base+extractor=nlp+entity_resolution=true"]
    questions = load_questions(DATA / corpus / "questions.jsonl")
    for spec in specs:
        t0 = time.perf_counter()
        gs = GraphStrata.build([DATA / corpus / "corpus.jsonl"], embedder=embedder,
                               config=GraphStrataConfig(**config_of(spec)))
        secs = time.perf_counter() - t0
        res = evaluate(gs, questions, methods=list(gs.methods), ks=(5,))
        print(corpus, embedder, spec, f"build {secs:.0f}s",
              json.dumps({m: round(v["recall@5"], 4) for m, v in res.items()}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
