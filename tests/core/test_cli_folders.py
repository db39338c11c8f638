"""The CLI on a real folder: files it cannot read are skipped and listed (or stop it with
--on-error fail), PDFs are read through pypdf, --encoding reads Latin-1, `update --from`
re-embeds only the changed files, and `query -k` prints k hits. Texts: HotpotQA passages."""

from __future__ import annotations

from pathlib import Path

import graphstrata.api
import graphstrata.models
import pytest
from graphstrata import GraphStrata, cli
from graphstrata.testing import HashEmbedder


class CountingEmbedder(HashEmbedder):
    """The hashing test embedder, recording every text it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        return super().embed(texts)


@pytest.fixture()
def embedder(monkeypatch):
    emb = CountingEmbedder()
    monkeypatch.setattr(graphstrata.api, "default_embedder", lambda: emb)
    monkeypatch.setattr(graphstrata.models.MiniLMEmbedder, "id", emb.id)
    return emb


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` in Helvetica (no PDF library needed to write it)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


@pytest.fixture()
def folder(tmp_path, shared_data, jsonl) -> Path:
    rows = jsonl(shared_data / "hotpotqa" / "corpus.jsonl", 6)
    d = tmp_path / "docs"
    (d / "notes").mkdir(parents=True)
    for i, r in enumerate(rows[:3]):
        (d / f"p{i}.md").write_text(f"# {r['title']}\n\n{r['text']}", encoding="utf-8")
    (d / "notes" / "p3.txt").write_text(rows[3]["text"], encoding="utf-8")
    (d / "report.pdf").write_bytes(minimal_pdf("The lighthouse keeper logged the storm in 1887."))
    (d / "latin.txt").write_bytes("Caf\u00e9 M\u00fcller in Z\u00fcrich serves R\u00f6sti since 1921.".encode("latin-1"))
    (d / "blob.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (d / "archive.gz").write_bytes(b"\x1f\x8b\x08\x00")
    (d / ".git").mkdir()
    (d / ".git" / "HEAD").write_text("ref: refs/heads/main")  # hidden: not looked at
    return d


def _index(folder: Path, out: Path, *extra: str) -> int:
    return cli.main(["index", str(folder), "--out", str(out), "--quiet", "--chunk-size", "40",
                     "--chunk-overlap", "0", *extra])


def test_index_reads_what_it_can_and_lists_what_it_skipped(folder, tmp_path, embedder, capsys):
    assert _index(folder, tmp_path / "idx") == 0
    out = capsys.readouterr().out
    gs = GraphStrata.load(tmp_path / "idx")
    assert sorted(gs.documents) == ["notes/p3.txt", "p0.md", "p1.md", "p2.md", "report.pdf"]
    assert "lighthouse keeper" in gs.documents["report.pdf"].text  # PDF text through pypdf
    assert "skipped 3 file(s)" in out
    lines = {line.split(": ", 1)[0].strip(): line for line in out.splitlines() if ": " in line}
    assert "binary file" in lines[str(folder / "blob.txt")]
    assert "not UTF-8" in lines[str(folder / "latin.txt")] and "--encoding latin-1" in lines[str(folder / "latin.txt")]
    assert "unsupported file type '.gz'" in lines[str(folder / "archive.gz")]
    assert ".git" not in out
    meta = gs.documents["p0.md"].metadata
    assert meta["file"] == "p0.md" and len(meta["file_sha256"]) == 64


def test_encoding_reads_latin1_and_on_error_fail_stops(folder, tmp_path, embedder, capsys):
    assert _index(folder, tmp_path / "idx", "--encoding", "latin-1") == 0
    assert "Z\u00fcrich" in GraphStrata.load(tmp_path / "idx").documents["latin.txt"].text
    capsys.readouterr()
    assert _index(folder, tmp_path / "strict", "--on-error", "fail") == 2
    err = capsys.readouterr().err
    assert "archive.gz" in err and "--on-error skip" in err
    assert not (tmp_path / "strict").exists()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.txt").write_bytes(b"\x00\x01")
    assert _index(tmp_path / "bad", tmp_path / "none") == 2
    assert "nothing to index" in capsys.readouterr().err


def test_update_re_embeds_only_changed_files(folder, tmp_path, embedder, capsys):
    idx = tmp_path / "idx"
    assert _index(folder, idx) == 0
    before = GraphStrata.load(idx)
    unchanged_chunks = {c.text for c in before.chunks if c.document_id in ("p1.md", "p2.md", "report.pdf")}
    (folder / "p0.md").write_text("# Edited\n\nThe harbour master rebuilt the pier after the flood.",
                                  encoding="utf-8")
    (folder / "notes" / "p3.txt").unlink()
    (folder / "new.md").write_text("The glassblower of Murano trained three apprentices.", encoding="utf-8")
    capsys.readouterr()
    embedder.texts.clear()
    assert cli.main(["update", str(idx), "--from", str(folder), "--quiet"]) == 0
    out = capsys.readouterr().out
    gs = GraphStrata.load(idx)
    assert sorted(gs.documents) == ["new.md", "p0.md", "p1.md", "p2.md", "report.pdf"]
    changed_chunks = [c.text for c in gs.chunks if c.document_id in ("p0.md", "new.md")]
    assert "added 1  replaced 1  deleted 1 documents" in out
    assert f"re-embedded {len(changed_chunks)} chunks" in out and "3 file(s) unchanged" in out
    embedded = set(embedder.texts)
    assert set(changed_chunks) <= embedded  # the changed files' chunks were embedded ...
    assert not unchanged_chunks & embedded  # ... and no chunk of an unchanged file
    hit = gs.retrieve("harbour master pier", method="bm25", k=1, kinds=("chunk",))[0]
    assert hit.document_ids == ["p0.md"]
    # nothing changed: nothing embedded, nothing written
    embedder.texts.clear()
    assert cli.main(["update", str(idx), "--from", str(folder), "--quiet"]) == 0
    assert "added 0  replaced 0  deleted 0" in capsys.readouterr().out and not embedder.texts


def test_query_prints_k_hits_unless_context_is_asked_for(folder, tmp_path, embedder, capsys):
    idx = tmp_path / "idx"
    assert _index(folder, idx) == 0
    capsys.readouterr()
    assert cli.main(["query", str(idx), "lighthouse storm", "-k", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("chunk") for line in lines)
    assert cli.main(["query", str(idx), "lighthouse storm", "-k", "3", "--context", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert 3 < len(lines) <= 5 and not lines[3].startswith("chunk")


def test_help_names_the_long_running_mode(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "graphstrata serve" in capsys.readouterr().out
