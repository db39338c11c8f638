"""Delete means gone, on 150 real MuSiQue passages (issue 30, finding 2).

Before the fix a community kept its summary while its centroid stayed within cosine 0.99, so a
deleted document's sentence chosen as a summary stayed in the index (persisted, and returned by
ArchRAG) until ``rebuild()``; the frozen TF-IDF vocabularies kept the deleted document's words,
and the version before the delete kept its whole text on disk until the next write. On this
corpus 34 of the first 40 documents with a unique summary sentence leaked it (hash embedder).
"""

from __future__ import annotations

import io
import json
import re
import sqlite3
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from graphstrata import Document, GraphStrata, store
from graphstrata.extraction import split_sentences
from graphstrata.inspection import export_graph
from graphstrata.testing import HashEmbedder

N_DOCS = 150


def _docs(path: Path) -> list[Document]:
    docs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            docs.append(Document(r["id"], f"{r['title']}\n{r['text']}", {"title": r["title"]}))
            if len(docs) == N_DOCS:
                break
    return docs


@pytest.fixture(scope="module")
def built(shared_data):
    docs = _docs(shared_data / "musique" / "corpus.jsonl")
    gs = GraphStrata.build(docs, embedder=HashEmbedder(64))
    return gs, {d.id: d.text for d in docs}


def _summary_sentences(gs: GraphStrata) -> set[str]:
    out = set()
    for layer in gs.communities:
        for c in layer:
            out.update(c.summary[s:t].strip() for s, t in split_sentences(c.summary))
    return out


def _unique_summary_sentences(gs: GraphStrata, texts: dict[str, str]) -> dict[str, list[str]]:
    """{doc id: its sentences (> 30 chars) that are community summaries and in no other document}."""
    out: dict[str, list[str]] = {}
    for sent in sorted(_summary_sentences(gs)):
        if len(sent) <= 30:
            continue
        owners = [d for d, t in texts.items() if sent in t]
        if len(owners) == 1:
            out.setdefault(owners[0], []).append(sent)
    return out


def _unique_words(doc_id: str, texts: dict[str, str]) -> set[str]:
    others = " ".join(t.lower() for d, t in texts.items() if d != doc_id)
    return {w for w in re.findall(r"[a-z]{5,}", texts[doc_id].lower()) if w not in others}


def _texts_on_disk(directory: Path) -> str:
    """Everything readable in the index directory: raw bytes of every file, npz members (string
    arrays joined, byte arrays decoded), every SQLite value (zlib blobs decompressed)."""
    parts: list[str] = []
    for p in sorted(directory.rglob("*")):
        if not p.is_file():
            continue
        raw = p.read_bytes()
        parts.append(raw.decode("utf-8", "replace"))
        if zipfile.is_zipfile(io.BytesIO(raw)):
            with np.load(p, allow_pickle=False) as npz:
                for k in npz.files:
                    a = npz[k]
                    if a.dtype.kind in "US":
                        parts.append("\n".join(str(x) for x in a.ravel()))
                    elif a.dtype in (np.uint8, np.int8):
                        parts.append(a.tobytes().decode("utf-8", "replace"))
        if raw.startswith(b"SQLite format 3"):
            con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
            try:
                for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'"):
                    for row in con.execute(f"SELECT * FROM {table}"):  # noqa: S608 - our own table names
                        for v in row:
                            if isinstance(v, bytes):
                                try:
                                    v = zlib.decompress(v)
                                except zlib.error:
                                    pass
                                v = v.decode("utf-8", "replace")
                            parts.append(str(v))
            finally:
                con.close()
    return "\n".join(parts)


def test_a_delete_resummarises_every_community_that_held_the_deleted_text(built):
    gs, texts = built
    candidates = _unique_summary_sentences(gs, texts)
    assert len(candidates) >= 20
    for doc_id in sorted(candidates)[:20]:
        after = GraphStrata(gs.state)  # the same immutable state: every delete starts from it
        after.delete(doc_id)
        left = [s for s in candidates[doc_id] if any(s in x for x in _summary_sentences(after))]
        assert not left, (doc_id, left)


def test_nothing_of_a_deleted_document_survives_on_disk(built, tmp_path):
    gs, texts = built
    candidates = _unique_summary_sentences(gs, texts)
    doc_id = sorted(candidates)[0]
    sentence = candidates[doc_id][0]
    words = _unique_words(doc_id, texts)
    assert words
    index = GraphStrata(gs.state)
    idx_dir = index.persist(tmp_path / "idx")
    assert sentence in _texts_on_disk(idx_dir)  # the probe finds it before the delete
    before = store.current_version(idx_dir)
    index.delete(doc_id)
    assert not (idx_dir / before).exists()  # the version holding the text is gone
    on_disk = _texts_on_disk(idx_dir)
    assert sentence not in on_disk
    loaded = GraphStrata.load(idx_dir, embedder=HashEmbedder(64))
    # vocabularies: the frozen TF-IDF models and BM25 hold no word only the document had
    for name, model in loaded.state.frozen.items():
        vocab = {w for t in model.terms for w in t.split(" ")}
        assert not (words & vocab), (name, sorted(words & vocab)[:5])
    # every method, with its graph context
    for method in loaded.methods:
        for hit in loaded.retrieve(sentence, method=method, k=10, kinds=None, context_k=50):
            assert sentence not in hit.text, (method, hit.kind)
    # exports
    for fmt in ("graphml", "json"):
        out = export_graph(loaded.state, tmp_path / f"g.{fmt}", format=fmt)
        assert sentence[:60] not in out.read_text(encoding="utf-8")
