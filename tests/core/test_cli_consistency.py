"""The CLI's shared conventions (issue 14 part 8): ``--version``; ``--json [FILE]`` meaning the
same in query, eval and inspect; errors that name the argument at fault; and method names and
options checked before any index or model is loaded.

The index is built with the hashing test embedder under the default embedder's id, so loading
it goes through ``default_embedder()``: the "before any model loads" tests make that raise.
"""

from __future__ import annotations

import json
from importlib.metadata import version

import graphstrata
import graphstrata.api
import graphstrata.models
import pytest
from graphstrata import GraphStrata, cli


class ModelLoaded(AssertionError):
    pass


@pytest.fixture()
def index_dir(tmp_path, monkeypatch, corpus, embedder, small_config):
    """A persisted tiny index whose embedder id is the default's; loads get the test double."""
    monkeypatch.setattr(graphstrata.models.MiniLMEmbedder, "id", embedder.id)
    monkeypatch.setattr(graphstrata.api, "default_embedder", lambda: embedder)
    out = tmp_path / "idx"
    GraphStrata.build(corpus, config=small_config, embedder=embedder).persist(out)
    return out


@pytest.fixture()
def no_model(monkeypatch):
    """Any attempt to load the default embedder fails the test."""

    def boom(*args, **kwargs):
        raise ModelLoaded("the default embedder was loaded")

    monkeypatch.setattr(graphstrata.models, "default_embedder", boom)
    monkeypatch.setattr(graphstrata.api, "default_embedder", boom)
    monkeypatch.setattr(graphstrata.models.MiniLMEmbedder, "__init__", boom)


@pytest.fixture()
def questions(tmp_path):
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"question": "Edmund Hillary Auckland", "evidence_ids": ["hillary"]})
                 + "\n")
    return q


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == f"graphstrata {version('graphstrata')}"
    assert out.endswith(graphstrata.__version__)


def test_json_without_file_prints_json_in_every_command(index_dir, questions, capsys):
    assert cli.main(["query", str(index_dir), "Where was Edmund Hillary born?", "--method",
                     "bm25", "-k", "2", "--chunks-only", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert len(hits) == 2 and hits[0]["document_ids"] == ["hillary"]

    assert cli.main(["eval", str(index_dir), "--questions", str(questions), "--method", "bm25",
                     "-k", "1", "--quiet", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)  # the JSON alone: no table around it
    assert report["bm25"]["recall@1"] == 1.0

    assert cli.main(["inspect", str(index_dir), "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["counts"]["documents"] == 6 and manifest["version"].startswith("v")

    # "-" is stdout too
    assert cli.main(["inspect", str(index_dir), "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out) == manifest


def test_json_with_file_writes_it_and_keeps_the_text(index_dir, questions, tmp_path, capsys):
    hits_file = tmp_path / "hits.json"
    assert cli.main(["query", str(index_dir), "Where was Edmund Hillary born?", "--method",
                     "bm25", "-k", "2", "--chunks-only", "--json", str(hits_file)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("chunk") and "hillary" in text
    hits = json.loads(hits_file.read_text(encoding="utf-8"))
    assert len(hits) == 2 and hits[0]["document_ids"] == ["hillary"]

    report_file = tmp_path / "report.json"
    assert cli.main(["eval", str(index_dir), "--questions", str(questions), "--method", "bm25",
                     "-k", "1", "--quiet", "--json", str(report_file)]) == 0
    assert "recall@1" in capsys.readouterr().out  # the table
    assert json.loads(report_file.read_text())["bm25"]["recall@1"] == 1.0

    manifest_file = tmp_path / "manifest.json"
    assert cli.main(["inspect", str(index_dir), "--json", str(manifest_file)]) == 0
    text = capsys.readouterr().out
    assert "documents 6" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    assert json.loads(manifest_file.read_text())["counts"]["chunks"] >= 6

    # the earlier forms keep working. query's --json was a flag, so it may stand before the
    # positional arguments:
    assert cli.main(["query", "--json", str(index_dir), "Edmund Hillary", "--method", "bm25",
                     "-k", "1", "--chunks-only"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["document_ids"] == ["hillary"]
    # eval's --json took a file, and still does (also as --json=FILE)
    out = tmp_path / "r.json"
    assert cli.main(["eval", str(index_dir), "--questions", str(questions), "--json", str(out),
                     "--method", "dense", "--quiet"]) == 0
    assert list(json.loads(out.read_text())) == ["dense"]
    assert cli.main(["eval", str(index_dir), "--questions", str(questions), f"--json={out}",
                     "--method", "bm25", "--quiet"]) == 0
    assert list(json.loads(out.read_text())) == ["bm25"]


def test_unwritable_json_file_fails_before_the_work(index_dir, tmp_path, no_model, capsys):
    missing = tmp_path / "no" / "such" / "dir" / "hits.json"
    assert cli.main(["query", str(index_dir), "q", "--json", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --json ") and "does not exist" in err


def test_option_errors_name_the_option(index_dir, questions, capsys):
    q = ["query", str(index_dir), "Edmund Hillary"]
    assert cli.main([*q, "--option", "damping=abc"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --option damping=abc: ") and err.count("\n") == 1
    assert "'damping'" in err and "'archrag'" in err and "'abc'" in err and "must be" in err

    assert cli.main([*q, "--method", "hybrid", "--option", "alpha=2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --option alpha=2: ") and "'hybrid'" in err

    # an engine keyword is not a method option (this used to crash with a TypeError)
    assert cli.main([*q, "--option", "kinds=1"]) == 2
    assert capsys.readouterr().err.startswith("error: --option kinds=1: unknown option")

    ev = ["eval", str(index_dir), "--questions", str(questions), "--quiet",
          "--method", "bm25", "--method", "archrag"]
    assert cli.main([*ev, "--option", "propagate=maybe"]) == 2
    err = capsys.readouterr().err
    # checked against every method given: bm25 has no such option
    assert err.startswith("error: --option propagate=maybe: unknown option")


def test_index_flag_errors_name_the_flags(tmp_path, corpus, capsys):
    src = tmp_path / "a.txt"
    src.write_text(corpus[0].text, encoding="utf-8")
    out = tmp_path / "idx"
    assert cli.main(["index", str(src), "--out", str(out), "--quiet",
                     "--chunk-size", "10", "--chunk-overlap", "20"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--chunk-overlap" in err and "--chunk-size" in err
    assert not out.exists()
    with pytest.raises(SystemExit):
        cli.main(["index", str(src), "--out", str(out), "--chunk-size", "0"])
    assert "argument --chunk-size" in capsys.readouterr().err


def test_unknown_method_fails_before_any_model_loads(index_dir, questions, no_model, capsys):
    assert cli.main(["query", str(index_dir), "q", "--method", "foo"]) == 2
    err = capsys.readouterr().err
    assert "unknown method 'foo'" in err and "archrag" in err

    assert cli.main(["eval", str(index_dir), "--questions", str(questions), "--method", "bm25",
                     "--method", "foo", "--quiet"]) == 2
    assert "unknown method 'foo'" in capsys.readouterr().err

    # the guard is real: a query that passes the checks reaches the (failing) model load
    with pytest.raises(ModelLoaded):
        cli.main(["query", str(index_dir), "q", "--method", "bm25"])


def test_bad_option_fails_before_any_model_loads(index_dir, questions, no_model, capsys):
    assert cli.main(["query", str(index_dir), "q", "--option", "damping=abc"]) == 2
    assert "--option damping=abc" in capsys.readouterr().err
    assert cli.main(["eval", str(index_dir), "--questions", str(questions), "--quiet",
                     "--option", "nope=1"]) == 2
    assert "--option nope=1" in capsys.readouterr().err
