"""The CLI end to end on the tiny corpus (the embedder is swapped for the test double)."""

import json

import graphstrata.api
import graphstrata.models
import pytest
from graphstrata import cli


@pytest.fixture(autouse=True)
def _test_embedder(monkeypatch, embedder):
    monkeypatch.setattr(graphstrata.api, "default_embedder", lambda: embedder)
    monkeypatch.setattr(graphstrata.models.MiniLMEmbedder, "id", embedder.id)


@pytest.fixture()
def corpus_file(tmp_path, corpus):
    p = tmp_path / "corpus.jsonl"
    with open(p, "w", encoding="utf-8") as f:
        for d in corpus:
            title, body = d.text.split("\n", 1)
            f.write(json.dumps({"id": d.id, "title": title, "text": body}) + "\n")
    return p


def test_index_query_eval(tmp_path, corpus_file, capsys):
    out = tmp_path / "idx"
    assert cli.main(["index", str(corpus_file), "--out", str(out), "--quiet", "--chunk-size", "40", "--chunk-overlap", "8"]) == 0
    summary = capsys.readouterr().out
    assert "documents 6" in summary and "communities per layer" in summary and "total" in summary

    assert cli.main(["query", str(out), "Where was Edmund Hillary born?", "--method", "bm25", "-k", "2", "--json", "--chunks-only"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert len(hits) == 2 and hits[0]["document_ids"] == ["hillary"]

    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"question": "Edmund Hillary Auckland", "evidence_ids": ["hillary"]}) + "\n")
    report_path = tmp_path / "report.json"
    assert cli.main(["eval", str(out), "--questions", str(q), "--method", "bm25", "--method", "dense",
                     "-k", "1,2", "--json", str(report_path), "--quiet"]) == 0
    report = json.loads(report_path.read_text())
    assert list(report) == ["bm25", "dense"]
    assert report["bm25"]["recall@1"] == 1.0 and report["bm25"]["questions"] == 1
    assert set(report["dense"]) >= {"recall@1", "recall@2", "questions"}

    assert cli.main(["eval", str(out), "--questions", str(q), "--json", str(report_path), "--quiet"]) == 0
    assert list(json.loads(report_path.read_text())) == ["archrag"]  # the default method alone


def test_method_options_on_the_command_line(tmp_path, corpus_file, capsys):
    out = tmp_path / "idx"
    assert cli.main(["index", str(corpus_file), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    q = ["query", str(out), "Where was Edmund Hillary born?", "-k", "3", "--json", "--chunks-only"]
    assert cli.main(q) == 0
    default = json.loads(capsys.readouterr().out)
    assert cli.main([*q, "--option", "propagate=false", "--option", "alpha=1.0"]) == 0
    plain = json.loads(capsys.readouterr().out)
    # propagation scores are relative to the best chunk (top ≈ 1); plain dense cosines are not
    assert default[0]["score"] > 0.99 and plain[0]["score"] < default[0]["score"]
    assert cli.main([*q, "--option", "nope=1"]) == 2
    assert "unknown option" in capsys.readouterr().err
    qs = tmp_path / "q.jsonl"
    qs.write_text(json.dumps({"question": "Edmund Hillary", "evidence_ids": ["hillary"]}) + "\n")
    ev = ["eval", str(out), "--questions", str(qs), "--quiet", "--method", "hybrid"]
    assert cli.main([*ev, "--option", "alpha=0.2"]) == 0
    assert cli.main([*ev, "--option", "propagate=false"]) == 2  # not a hybrid option
    assert "unknown option" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main([*q, "--option", "no-equals-sign"])


def test_errors_exit_2_with_one_line(tmp_path, corpus_file, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert cli.main(["index", str(empty), "--out", str(tmp_path / "x"), "--quiet"]) == 2
    assert "empty file" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert cli.main(["query", str(tmp_path / "missing"), "q"]) == 2
    assert "not found" in capsys.readouterr().err
    out = tmp_path / "idx"
    assert cli.main(["index", str(corpus_file), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert cli.main(["query", str(out), "q", "--method", "nope"]) == 2
    assert "unknown method" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["query", str(out), "q", "-k", "0"])
    assert "k must be > 0" in capsys.readouterr().err
