import json
from pathlib import Path

import pytest
from graphstrata import Document
from graphstrata.loaders import load_documents, text_id


def test_mixed_inputs_keep_ids_and_titles(tmp_path: Path):
    (tmp_path / "notes.md").write_text("# Notes\nSome text.", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("Alpha text.", encoding="utf-8")
    jl = tmp_path / "c.jsonl"
    jl.write_text(
        json.dumps({"id": "x1", "title": "Title One", "text": "Body one."}) + "\n", encoding="utf-8"
    )
    docs = load_documents([Document("mine", "given"), "plain text", tmp_path / "sub"], paths=[str(jl)])
    assert [d.id for d in docs] == ["mine", text_id("plain text"), "a.txt", "x1"]
    assert docs[1].id.startswith("doc-") and docs[1].text == "plain text"
    assert docs[3].text == "Title One\nBody one." and docs[3].metadata["title"] == "Title One"


def test_empty_and_binary_files_raise(tmp_path: Path):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(ValueError, match="empty file"):
        load_documents([empty])
    with pytest.raises(ValueError, match="binary"):
        load_documents([binary])


def test_missing_path_duplicate_ids_and_bad_jsonl(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        load_documents([tmp_path / "nope.txt"])
    with pytest.raises(FileNotFoundError):
        load_documents(paths=["missing/folder/file.md"])
    with pytest.raises(ValueError, match="duplicate document id"):
        load_documents([Document("a", "x"), Document("a", "y")])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "text": "ok"}\n{not json}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        load_documents([bad])
    with pytest.raises(ValueError, match="unsupported document type"):
        load_documents([42])
