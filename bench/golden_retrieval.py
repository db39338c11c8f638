"""Retrieval output of every method, serialised byte for byte: the check that a refactoring
changed no behaviour.

Builds an index over the first ``--docs`` HotpotQA documents (default 400, offline MiniLM),
persists and reloads it, and runs ``--questions`` dev questions (default 40) through every
method three ways: chunks only, every kind with ``explain=True``, and with a metadata filter.
Every hit (id, text, score, kind, layer, provenance, metadata, explanation) is written as
canonical JSON; the SHA-256 of that text is printed.

    .venv/bin/python bench/golden_retrieval.py --out .bench_out/golden.json   # before
    .venv/bin/python bench/golden_retrieval.py --check .bench_out/golden.json # after: exit 1 on a diff

A difference names the first (question, method, variant) whose output changed.

``--exact-ppr`` computes ArchRAG's passage walk by exact power iteration on the float64
chunk × chunk matrix, as before forward push (issue 33): with it, the output of today's code is
byte-identical to what the code before issue 27's refactoring produced (sha256 09494cb5… for
the defaults), which shows that the refactoring changed no behaviour.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GRAPHSTRATA_DATA", ROOT.parent / "shared" / "data"))


def _hit(h) -> dict:
    return {
        "id": h.id, "text": h.text, "score": repr(float(h.score)), "kind": h.kind, "layer": h.layer,
        "chunk_ids": list(h.chunk_ids), "document_ids": list(h.document_ids),
        "metadata": h.metadata, "explain": h.explain,
    }


def use_exact_ppr() -> None:
    """Swap forward push for the pre-issue-33 exact PageRank in ArchRAG's passage walk."""
    import numpy as np
    import scipy.sparse as sp

    import graphstrata.methods.propagation as propagation
    import graphstrata.structures.passages as passages
    from graphstrata.methods.graph_ops import personalized_pagerank
    from graphstrata.structures.push import LocalRank, Transition

    factorised = passages.bipartite_push_graph

    def with_matrix(incidence):
        graph = factorised(incidence)
        out_w = np.asarray(incidence.sum(axis=1)).ravel()
        in_w = np.asarray(incidence.sum(axis=0)).ravel()
        dangling = out_w <= 0
        to_node = sp.diags(np.where(dangling, 0.0, 1.0 / np.maximum(out_w, 1e-300))) @ incidence
        to_chunk = sp.diags(1.0 / np.maximum(in_w, 1e-300)) @ incidence.T
        object.__setattr__(graph, "exact", Transition((to_node @ to_chunk).T.tocsr(), dangling))
        return graph

    def exact(graph, seeds, weights, damping=0.5, epsilon=None, max_pushes=None):
        reset = np.zeros(graph.n_items)
        for s, w in zip(seeds, weights, strict=True):
            reset[int(s)] = float(w)
        mass = personalized_pagerank(graph.exact, reset, damping=float(damping), tol=1e-8, max_iter=100)
        nodes = np.flatnonzero(mass > 0)
        return LocalRank(nodes, mass[nodes], 0.0, 0)

    passages.bipartite_push_graph = with_matrix
    propagation.local_pagerank = exact


def run(docs: int, questions: int, embedder: str) -> dict:
    from graphstrata import GraphStrata

    corpus = [json.loads(line) for line in (DATA / "hotpotqa" / "corpus.jsonl").open()][:docs]
    for i, d in enumerate(corpus):
        d["metadata"] = {"part": i % 3}
    qs = [json.loads(line) for line in (DATA / "hotpotqa" / "questions.jsonl").open()][:questions]
    with tempfile.TemporaryDirectory() as tmp:
        GraphStrata.build(corpus, persist_dir=tmp, embedder=None if embedder == "default" else embedder)
        gs = GraphStrata.load(tmp)
        out: dict[str, list] = {}
        for q in qs:
            for method in gs.methods:
                variants = {
                    "chunks": dict(k=5, kinds=("chunk",)),
                    "all+explain": dict(k=5, kinds=None, explain=True),
                    "filter": dict(k=3, kinds=None, filters={"part": {"$in": [0, 2]}}),
                }
                for name, kw in variants.items():
                    hits = gs.retrieve(q["question"], method=method, **kw)
                    out[f"{q['id']}|{method}|{name}"] = [_hit(h) for h in hits]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=400)
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--embedder", default="default", help="default (MiniLM) or fast")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--check", type=Path)
    ap.add_argument("--exact-ppr", action="store_true", help="exact PageRank in ArchRAG's walk (see above)")
    args = ap.parse_args()
    if args.exact_ppr:
        use_exact_ppr()
    result = run(args.docs, args.questions, args.embedder)
    text = json.dumps(result, sort_keys=True, ensure_ascii=False, indent=0)
    print(f"{len(result)} retrievals, sha256 {hashlib.sha256(text.encode()).hexdigest()}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    if args.check:
        before = json.loads(args.check.read_text())
        for key in before:
            if before[key] != result.get(key):
                print(f"DIFFERENT: {key}")
                print(" before:", json.dumps(before[key], ensure_ascii=False)[:800])
                print(" after: ", json.dumps(result.get(key), ensure_ascii=False)[:800])
                return 1
        if set(result) != set(before):
            print(f"DIFFERENT keys: {sorted(set(result) ^ set(before))[:5]}")
            return 1
        print("identical to", args.check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
