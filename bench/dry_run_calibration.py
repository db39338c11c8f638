"""Measure the dry run (``graphstrata index --dry-run``) against a scripted build.

Builds a HotpotQA slice with :func:`graphstrata.testing.answer_at_realistic_length` (answers
of realistic length, a stand-in tokenizer both sides count with), prints per prompt family
the actual calls and tokens (``build_usage``), the dry-run estimate, and the measured
completion-to-prompt ratios that ``graphstrata.indexing.cost`` stores as constants.

    PYTHONPATH=packages/graphstrata/src python bench/dry_run_calibration.py [n_docs]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from graphstrata import GraphStrata
from graphstrata.config import as_config
from graphstrata.indexing import estimate_llm_cost
from graphstrata.indexing.cost import usage_by_family
from graphstrata.testing import HashEmbedder, TokenizedLLM, answer_at_realistic_length, count_tokens

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "hotpotqa" / "corpus.jsonl"
CONFIG = {"min_communities": 2, "max_community_size": 6}


def docs(n: int, path: Path = DATA) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f, strict=False)]


def measure(n: int, path: Path = DATA, config: dict | None = None) -> tuple[dict, dict]:
    """``(actual, estimate)`` per family on the first ``n`` documents of ``path``."""
    config = dict(CONFIG if config is None else config)
    corpus = docs(n, path)
    llm = TokenizedLLM(answer_at_realistic_length)
    gs = GraphStrata.build(corpus, config=config, embedder=HashEmbedder(), llm=llm, show_progress=False)
    from graphstrata.types import Document

    est = estimate_llm_cost([Document(d["id"], d["text"], {"title": d["title"]}) for d in corpus],
                            as_config(config), HashEmbedder(), llm=llm)
    print("entities: LLM graph", len(gs.kg.entities), " layers", [len(x) for x in gs.communities],
          " chunk tokens", sum(count_tokens(c.text) for c in gs.chunks))
    return usage_by_family(gs.build_usage["stages"]), usage_by_family(est["stages"])


if __name__ == "__main__":
    actual, est = measure(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
    print("| stage | calls (dry / actual) | prompt tokens (dry / actual) | completion tokens (dry / actual) |")
    print("|---|---|---|---|")
    for fam, a in actual.items():
        e = est.get(fam, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        print(f"| {fam} | {e['calls']} / {a['calls']} | {e['prompt_tokens']:,} / {a['prompt_tokens']:,} | "
              f"{e['completion_tokens']:,} / {a['completion_tokens']:,} |")
    print("completion : prompt per family:",
          {f: round(a["completion_tokens"] / max(a["prompt_tokens"], 1), 4) for f, a in actual.items()})
