"""The scale corpus generator (bench/scale_corpus.py) on a tiny synthetic source.

It grows real text to a million chunks for bench/bench_scale.py; these checks hold it to what the
benchmark's figures rely on: the same seed and source give byte-identical output, every copy
renames entity-like tokens consistently (and differently from other copies), every generated
sentence is a source sentence once names are mapped back, ids are unique, and the stream stops at
the requested size. No linux-doc, no model: a fixed tokens-per-character stands in for the
tokenizer.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale_corpus.py"
_spec = importlib.util.spec_from_file_location("scale_corpus", BENCH)
sc = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("scale_corpus", sc)
_spec.loader.exec_module(sc)

MEASURE = {"tokens_per_char": 0.25, "embedder": "fixed"}

TOPICS = ["memory", "interrupt", "storage", "network", "power", "timer"]


def _doc(i: int, topic: str) -> str:
    ident = f"CONFIG_{topic.upper()}_DEBUG"
    func = f"{topic}_alloc_pages"
    return f""".. SPDX-License-Identifier: GPL-2.0

=====================
The {topic} subsystem
=====================

The {topic} subsystem was written by Ada Zephyrine and reviewed by Linus. It depends on
``{ident}`` and calls ``{func}()`` whenever a DeviceTree node asks for it. Most ACPI
tables describe the {topic} layout before the kernel boots. The driver number {i} keeps a
list of pending requests in a ring buffer.

Configuring the {topic} part
============================

Use ``kmalloc()`` with GFP flags for small objects, or kmalloc_array when counting. The
value of {ident} decides whether Zephyrine checks are compiled in. Nothing else in the
{topic} code needs ACPI at run time. Each request is retried three times before failing.

::

    {func}(nr, GFP_KERNEL);
    kmalloc(size, GFP_KERNEL);

Short line here.

Every {topic} request goes through the common queue. When the queue is full the caller
sleeps until a slot frees up. Linus suggested the queue in document {i} of this set.
"""


@pytest.fixture(scope="module")
def source_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("src")
    for i, topic in enumerate(TOPICS):
        sub = root / ("core" if i % 2 else "drivers")
        sub.mkdir(exist_ok=True)
        (sub / f"{topic}.rst.txt").write_text(_doc(i, topic))
    (root / "empty.txt").write_text("   \n")
    (root / "ignored.py").write_text("print('not a document')\n")
    return root


@pytest.fixture(scope="module")
def corpus(source_dir):
    return sc.ScaleCorpus(sc.load_source(source_dir), seed=3)


def _unrename(text: str, corpus, copy: int) -> str:
    """``text`` with copy ``copy``'s names mapped back to the source's words."""
    inverse = {v: k for k, v in corpus.names(copy).items()}

    def back(m):
        out = []
        for piece, renamed in sc.token_pieces(m.group(0)):
            key = piece.lower()
            out.append(sc.recase(inverse[key], piece) if renamed and key in inverse else piece)
        return "".join(out)

    return sc.TOKEN_RE.sub(back, text)


def _sentences(text: str) -> list[str]:
    return [s for p in sc.split_paragraphs(text) for s in sc.split_sentences(p)]


def test_source_reads_text_files_only(corpus):
    names = [d.name for d in corpus.source.documents]
    assert names == sorted(names) and len(names) == len(TOPICS)  # empty and .py files skipped
    assert sorted(d.title for d in corpus.source.documents) == sorted(f"The {t} subsystem" for t in TOPICS)


def test_entity_like_tokens_are_renamed_and_words_are_not(corpus):
    renamed = set(corpus.renamed_tokens)
    for tok in ("CONFIG_MEMORY_DEBUG", "memory_alloc_pages", "kmalloc", "kmalloc_array",
                "DeviceTree", "ACPI", "GFP_KERNEL", "Zephyrine", "Linus"):
        assert tok in renamed, tok
    for tok in ("The", "memory", "subsystem", "queue", "Use", "SPDX", "GPL", "int"):
        assert tok not in renamed, tok


def test_same_seed_and_source_give_identical_bytes(corpus, source_dir, tmp_path):
    a = sc.write_corpus(corpus, tmp_path / "a", 300, MEASURE, shard_documents=4)
    again = sc.ScaleCorpus(sc.load_source(source_dir), seed=3)  # analysed from scratch
    sc.write_corpus(again, tmp_path / "b", 300, MEASURE, shard_documents=4)
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "b").iterdir())
    assert len(a["shards"]) > 1 and "corpus.json" in files
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    other = sc.ScaleCorpus(sc.load_source(source_dir), seed=4)
    sc.write_corpus(other, tmp_path / "c", 300, MEASURE, shard_documents=4)
    assert (tmp_path / "c" / "docs-00001.jsonl").read_bytes() != (tmp_path / "a" / "docs-00001.jsonl").read_bytes()
    assert sc.is_current(tmp_path / "a", 300, 3, corpus.source)
    assert not sc.is_current(tmp_path / "a", 301, 3, corpus.source)
    assert not (tmp_path / "a.tmp").exists()


def test_renaming_is_consistent_within_a_copy_and_differs_across_copies(corpus):
    source_sentences = {s for d in corpus.source.documents for s in _sentences(d.text)}
    forms = {}
    for copy in (1, 2):
        mapping: dict[str, set[str]] = {}
        for doc in corpus.copy_documents(copy):
            for sent in _sentences(doc["text"]):
                original = _unrename(sent, corpus, copy)
                assert original in source_sentences
                gen_tokens, src_tokens = sc.TOKEN_RE.findall(sent), sc.TOKEN_RE.findall(original)
                assert len(gen_tokens) == len(src_tokens)
                for s, g in zip(src_tokens, gen_tokens, strict=True):
                    mapping.setdefault(s, set()).add(g)
            text = doc["text"]
            assert not re.search(r"\b(kmalloc|ACPI|Zephyrine|CONFIG_\w+)\b", text), doc["id"]
        assert all(len(g) == 1 for g in mapping.values())  # one name per word in the copy
        renamed = {s: next(iter(g)) for s, g in mapping.items() if {s} != g}
        names = list(renamed.values())
        assert len(set(names)) == len(names)  # and no two words share one
        assert set(renamed) <= set(corpus.renamed_tokens)
        # related identifiers stay related: kmalloc_array is kmalloc's name + array's name
        assert renamed["kmalloc_array"].startswith(renamed["kmalloc"] + "_")
        assert renamed["ACPI"].isupper() and renamed["Linus"][0].isupper() and renamed["Linus"][1:].islower()
        forms[copy] = renamed
    for tok in ("kmalloc", "ACPI", "Zephyrine", "CONFIG_MEMORY_DEBUG", "DeviceTree"):
        assert forms[1][tok] != forms[2][tok], tok


def test_every_generated_sentence_and_title_is_real(corpus):
    source_sentences = {s for d in corpus.source.documents for s in _sentences(d.text)}
    titles = {d.title for d in corpus.source.documents}
    swapped = 0
    for copy in range(4):
        for doc in corpus.copy_documents(copy):
            assert _unrename(doc["title"], corpus, copy) in titles
            n = int(doc["id"].split("-")[1])
            own = set(_sentences(corpus.source.documents[n].text))
            for sent in _sentences(doc["text"]):
                original = _unrename(sent, corpus, copy)
                assert original in source_sentences, (doc["id"], sent)
                swapped += original not in own
    assert swapped > 0  # copies do recombine sentences across documents


def test_ids_unique_and_stream_stops_at_requested_size(corpus, tmp_path):
    seen = []
    total = 0
    for copy, doc, est in corpus.documents(max_chunks=250, tokens_per_char=0.25):
        assert doc["id"].startswith(f"k{copy}-")
        seen.append(doc["id"])
        last = est
        total += est
    assert len(seen) == len(set(seen))
    assert total >= 250 and total - last < 250
    assert len({s.split("-")[0] for s in seen}) > 3  # several copies were needed
    info = sc.write_corpus(corpus, tmp_path / "out", 250, MEASURE)
    assert info["documents"] == len(seen) and info["chunks_estimated"] == total
    lines = [json.loads(x) for x in (tmp_path / "out" / "docs-00000.jsonl").read_text().splitlines()]
    assert [r["id"] for r in lines] == seen and set(lines[0]) == {"id", "title", "text"}
    # copy 0 is the source as is
    by_name = {d.title: d.text for d in corpus.source.documents}
    assert all(r["text"] == by_name[r["title"]] for r in lines if r["id"].startswith("k0-"))


def test_estimate_matches_the_core_chunker():
    from graphstrata.chunking import chunk_text

    def spans(text):
        return [m.span() for m in re.finditer(r"\S+", text)]

    for n_tokens in (1, 150, 200, 201, 368, 369, 1000, 5003):
        text = " ".join(["abc"] * n_tokens)  # 4 characters per token
        real = len(chunk_text(text, sc.CHUNK_SIZE, sc.CHUNK_OVERLAP, spans))
        assert sc.estimate_chunks(len(text) + 1, 0.25) == real, n_tokens


def test_queries_are_deterministic_questions_about_titles_and_headings(corpus):
    q = corpus.queries(60)
    assert q == sc.ScaleCorpus(corpus.source, seed=3).queries(60)
    assert q and len(q) == len(set(q))
    assert any(x.startswith("What does The ") and x.endswith(" subsystem describe?") for x in q)
    assert any(x.startswith("How is Configuring the ") for x in q)
