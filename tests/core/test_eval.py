import pytest
from graphstrata import GraphStrata, Hit
from graphstrata.eval import evaluate, format_table, load_questions, ranked_documents, recall_at


def _chunk(doc, score):
    return Hit(id=f"{doc}#0", text="", score=score, kind="chunk", document_ids=[doc])


def test_ranked_documents_dedupes_in_order_and_ignores_context_hits():
    hits = [_chunk("a", 3), _chunk("b", 2), _chunk("a", 1),
            Hit(id="e", text="", score=9, kind="entity", document_ids=["z"])]
    assert ranked_documents(hits) == ["a", "b"]


def test_recall_at_k():
    assert recall_at(["a", "b", "c"], ["c", "x"], 2) == 0.0
    assert recall_at(["a", "b", "c"], ["c", "x"], 3) == 0.5
    assert recall_at(["x", "c"], ["c", "x"], 2) == 1.0


def test_evaluate_scores_questions_with_evidence_only(corpus, embedder, small_config):
    gs = GraphStrata.build(corpus, config=small_config, embedder=embedder)
    qs = [
        {"question": "Edmund Hillary", "evidence_ids": ["hillary", "everest"]},
        {"question": "unanswerable", "evidence_ids": []},
    ]
    report = evaluate(gs, qs, methods=["bm25", "dense"], ks=[1, 2])
    assert list(report) == ["bm25", "dense"]
    assert report["bm25"]["questions"] == 1
    assert report["bm25"]["recall@2"] == 1.0
    assert report["bm25"]["recall@1"] == 0.5
    assert "bm25" in format_table(report)
    with pytest.raises(ValueError, match="unknown method"):
        evaluate(gs, qs, methods=["nope"])
    with pytest.raises(ValueError, match="no question has evidence"):
        evaluate(gs, qs[1:], methods=["bm25"])
    with pytest.raises(ValueError, match="k must be"):
        evaluate(gs, qs, methods=["bm25"], ks=[0])


def test_evaluate_passes_method_options_through(corpus, embedder, small_config):
    gs = GraphStrata.build(corpus, config=small_config, embedder=embedder)
    qs = [{"question": "Edmund Hillary", "evidence_ids": ["hillary", "everest"]}]
    # hybrid with alpha 0 is BM25's ranking over the hybrid's candidates
    assert (evaluate(gs, qs, methods=["hybrid"], options={"alpha": 0.0})["hybrid"]["recall@2"]
            == evaluate(gs, qs, methods=["bm25"])["bm25"]["recall@2"])
    # a question where dense and BM25 disagree at rank 1: the option decides which one wins

    def top1(method, **options):
        one = [{"question": "largest city", "evidence_ids": ["auckland"]}]
        return evaluate(gs, one, methods=[method], ks=[1], options=options)[method]["recall@1"]

    assert top1("hybrid", alpha=0.0) == top1("bm25") == 0.0
    assert top1("hybrid", alpha=1.0) == top1("dense") == 1.0
    with pytest.raises(ValueError, match="nope"):
        evaluate(gs, qs, methods=["hybrid"], options={"nope": 1})


def test_load_questions_reports_bad_lines(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text('{"question": "a?", "evidence_ids": ["x"]}\n{"nope": 1}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"q.jsonl:2"):
        load_questions(p)
