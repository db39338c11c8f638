"""The CLI's folder reading (graphstrata.sources) goes through the loaders' safety checks:
a symlink out of the folder, a FIFO and a device are refused by ``stat`` without being opened,
a file over ``max_document_chars`` bytes is refused before it is read, reads are bounded even
when a file grows after its check, and a refused file keeps its indexed documents on update.
Texts: HotpotQA passages."""

from __future__ import annotations

import json
import os
from pathlib import Path

import graphstrata.sources as sources
import pytest
from graphstrata.sources import load_sources

posix_only = pytest.mark.skipif(os.name != "posix", reason="FIFOs, devices and symlinks are POSIX here")


@pytest.fixture()
def folder(tmp_path, shared_data, jsonl) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    for i, r in enumerate(jsonl(shared_data / "hotpotqa" / "corpus.jsonl", 2)):
        (d / f"p{i}.md").write_text(f"# {r['title']}\n\n{r['text']}", encoding="utf-8")
    return d


def skipped(load) -> dict[str, str]:
    return {Path(s.path).name: s.reason for s in load.skipped}


@posix_only
def test_symlink_out_of_the_folder_is_listed_as_skipped_unless_followed(folder, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("The vault code is 4711.", encoding="utf-8")
    (folder / "leak.txt").symlink_to(outside)
    (folder / "alias.md").symlink_to(folder / "p0.md")  # inside the folder: read
    load = load_sources([folder])
    assert sorted(d.id for d in load.documents) == ["alias.md", "p0.md", "p1.md"]
    assert "outside the folder" in skipped(load)["leak.txt"]
    assert not any("4711" in d.text for d in load.documents)
    followed = load_sources([folder], follow_symlinks=True)
    assert "4711" in {d.id: d.text for d in followed.documents}["leak.txt"]
    with pytest.raises(ValueError, match="outside the folder"):
        load_sources([folder], on_error="fail")


@posix_only
def test_fifo_and_devices_are_refused_without_being_opened(folder):
    os.mkfifo(folder / "pipe.txt")  # opening it for reading would wait for a writer
    (folder / "zero.txt").symlink_to("/dev/zero")  # reading it would never end
    load = load_sources([folder], follow_symlinks=True)
    reasons = skipped(load)
    assert "FIFO" in reasons["pipe.txt"] and "not a regular file" in reasons["pipe.txt"]
    assert "character device" in reasons["zero.txt"]
    assert sorted(d.id for d in load.documents) == ["p0.md", "p1.md"]
    assert "outside the folder" in skipped(load_sources([folder]))["zero.txt"]


def test_oversized_files_are_refused_by_size_before_any_read(folder, monkeypatch, shared_data, jsonl):
    big = jsonl(shared_data / "hotpotqa" / "corpus.jsonl", 40)
    (folder / "big.txt").write_text("\n\n".join(r["text"] for r in big), encoding="utf-8")
    (folder / "big.pdf").write_bytes(b"%PDF-1.4\n" + b"0" * 5000)
    # a JSONL file is bounded per line: many short lines are read, one long line is refused
    (folder / "many.jsonl").write_text(
        "".join(json.dumps({"id": f"h{i}", "text": r["text"][:900]}) + "\n" for i, r in enumerate(big)),
        encoding="utf-8")
    (folder / "long.jsonl").write_text(json.dumps({"text": " ".join(r["text"] for r in big)}) + "\n",
                                       encoding="utf-8")
    limit = 4000
    assert all(len((folder / f"p{i}.md").read_bytes()) < limit for i in range(2))
    real = sources.read_file_bounded
    read: list[str] = []

    def spy(path, max_bytes):
        read.append(Path(path).name)
        return real(path, max_bytes)

    monkeypatch.setattr(sources, "read_file_bounded", spy)
    load = load_sources([folder], max_document_chars=limit)
    reasons = skipped(load)
    assert "more than max_document_chars=4,000" in reasons["big.txt"]
    assert "more than max_document_chars=4,000" in reasons["big.pdf"]
    assert "line longer than max_document_chars=4,000" in reasons["long.jsonl"]
    assert "big.txt" not in read and "big.pdf" not in read  # refused by stat, never read
    assert sum(d.metadata["file"] == "many.jsonl" for d in load.documents) == 40
    assert len(load.files["many.jsonl"]) == 64
    again = load_sources([folder], max_document_chars=limit, known=load.files)
    assert "many.jsonl" in again.unchanged and again.files["many.jsonl"] == load.files["many.jsonl"]
    assert {"p0.md", "p1.md"} <= {d.id for d in load.documents}


def test_reads_stay_bounded_when_a_file_grows_after_its_check(folder, monkeypatch):
    """The size check is a stat; the read itself stops at the limit (a file can grow between)."""
    (folder / "grown.txt").write_text("x" * 10_000, encoding="utf-8")
    monkeypatch.setattr(sources, "check_source_file", lambda *a, **k: None)  # the stat saw it small
    load = load_sources([folder], max_document_chars=4000)
    assert "more than max_document_chars=4,000" in skipped(load)["grown.txt"]
    assert "grown.txt" not in {d.id for d in load.documents}


@posix_only
def test_a_refused_file_still_counts_as_present_for_update(folder):
    first = load_sources([folder])
    known = dict(first.files)
    (folder / "p1.md").unlink()
    os.mkfifo(folder / "p1.md")  # swapped for a FIFO: refused, but it exists
    again = load_sources([folder], known=known)
    assert again.unchanged == ["p0.md"] and again.documents == []
    assert again.files["p1.md"] == ""  # present: `graphstrata update` keeps its documents
    assert "FIFO" in skipped(again)["p1.md"]
