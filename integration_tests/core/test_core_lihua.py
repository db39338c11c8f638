"""Temporal linking on real LiHua-World chat logs (one dated session per document).

The day links need no model, so they are checked against every dev question that names a day.
The retrieval gain is checked on the whole corpus (442 sessions, ~1 min to build with the
packaged MiniLM): on the dev questions that name a day or ask "did A before/after B", ArchRAG
with day links and clause decomposition must beat ArchRAG without them and the best of our
dense / BM25 / hybrid; on all answerable dev questions it must stay ahead of that best
baseline.
"""

from __future__ import annotations

import pytest
from graphstrata import GraphStrata
from graphstrata.eval import evaluate
from graphstrata.methods.temporal import order_clauses
from graphstrata.structures.passages import DateIndex, document_date, mentioned_dates


@pytest.fixture(scope="module")
def lihua(shared_data, jsonl):
    corpus = {r["id"]: r for r in jsonl(shared_data / "lihua_world" / "corpus.jsonl")}
    questions = [q for q in jsonl(shared_data / "lihua_world" / "questions.jsonl")
                 if q["evidence_ids"]]
    return corpus, questions


def test_every_day_a_question_names_links_to_a_gold_session(lihua):
    corpus, questions = lihua
    dates = {i: document_date(r["text"], {"title": r["title"]}) for i, r in corpus.items()}
    assert all(dates.values())  # every session is dated by its header
    index = DateIndex(dates)
    naming = [q for q in questions if mentioned_dates(q["question"])]
    assert len(naming) >= 30
    for q in naming:
        linked = index.find(q["question"])
        assert linked & set(q["evidence_ids"]), q["question"]
        assert len(linked) <= 4  # a day holds a handful of sessions, not the corpus


@pytest.fixture(scope="module")
def index(lihua):
    corpus, _ = lihua
    return GraphStrata.build(list(corpus.values()))


def test_temporal_linking_adds_its_own_gain(lihua, index):
    _, questions = lihua
    temporal = [q for q in questions
                if mentioned_dates(q["question"]) or order_clauses(q["question"])]
    assert len(temporal) >= 50
    methods = ["archrag", "dense", "bm25", "hybrid"]
    report = evaluate(index, temporal, methods=methods, ks=[5])
    recall = {m: report[m]["recall@5"] for m in methods}
    plain = evaluate(index, temporal, methods=["archrag"], ks=[5],
                     options={"date_links": False, "decompose": False})["archrag"]["recall@5"]
    # measured when written: 0.90 with, 0.82 without; hybrid 0.85, BM25 0.84, dense 0.48
    assert recall["archrag"] >= plain + 0.05, (recall, plain)
    assert recall["archrag"] >= max(recall["dense"], recall["bm25"], recall["hybrid"]) + 0.03


def test_default_is_not_below_any_baseline_on_every_question(lihua, index):
    _, questions = lihua
    report = evaluate(index, questions, methods=["archrag", "dense", "bm25", "hybrid"], ks=[5])
    best = max(report[m]["recall@5"] for m in ("dense", "bm25", "hybrid"))
    # measured: 0.918 vs hybrid 0.898 with rank-bm25; with bm25s (issue 14) hybrid rose to
    # 0.910 and archrag stayed at 0.918 (the +0.05 of issue 5 is not met on this corpus)
    assert report["archrag"]["recall@5"] >= best, report
