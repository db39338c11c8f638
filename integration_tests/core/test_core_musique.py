"""Multi-hop evidence on real MuSiQue paragraphs: the graph must add its own gain.

A slice keeps CI fast (~50 s to build with the packaged MiniLM): the gold paragraphs of the
first 60 dev questions (2–4 hops) plus 600 other paragraphs of the same pool (fixed seed). On
it, ArchRAG's passage propagation (PPR over the chunk–entity graph with title links) must beat
the best of our own dense / BM25 / hybrid rankings over the same chunks, and must beat
ArchRAG's own ranking with propagation turned off. Measured when written: archrag 0.89,
without propagation 0.81, hybrid and dense 0.78, BM25 0.69 (recall@5).
"""

from __future__ import annotations

import random

import pytest
from graphstrata import GraphStrata
from graphstrata.eval import evaluate, ranked_documents, recall_at


@pytest.fixture(scope="module")
def musique(shared_data, jsonl):
    corpus = {r["id"]: r for r in jsonl(shared_data / "musique" / "corpus.jsonl")}
    questions = jsonl(shared_data / "musique" / "questions.jsonl")[:60]
    gold = {e for q in questions for e in q["evidence_ids"]}
    others = random.Random(13).sample(sorted(set(corpus) - gold), 600)
    gs = GraphStrata.build([corpus[i] for i in sorted(gold | set(others))])
    return gs, questions


def test_default_beats_every_baseline_on_multi_hop_evidence(musique):
    gs, questions = musique
    report = evaluate(gs, questions, methods=["archrag", "dense", "bm25", "hybrid"], ks=[5])
    best = max(report[m]["recall@5"] for m in ("dense", "bm25", "hybrid"))
    assert report["archrag"]["recall@5"] >= best + 0.05, report


def test_propagation_is_where_the_gain_comes_from(musique):
    gs, questions = musique

    def recall5(**options):
        per_q = [
            recall_at(
                ranked_documents(gs.retrieve(q["question"], k=15, kinds=["chunk"], **options)),
                q["evidence_ids"],
                5,
            )
            for q in questions
        ]
        return sum(per_q) / len(per_q)

    with_graph, without = recall5(), recall5(propagate=False)
    assert with_graph >= without + 0.04, (with_graph, without)
    # title links are part of it: turning them off must not help
    assert recall5(title_weight=0.0) <= with_graph, with_graph
