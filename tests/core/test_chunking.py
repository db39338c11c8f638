import pytest
from graphstrata import Document
from graphstrata.chunking import chunk_documents, chunk_text
from graphstrata.models import regex_token_spans


def test_windows_are_exact_substrings_with_requested_overlap():
    text = " ".join(f"w{i}" for i in range(100))
    windows = chunk_text(text, chunk_size=30, chunk_overlap=10)
    assert [n for _, _, n in windows] == [30, 30, 30, 30, 20]
    # consecutive windows share exactly `overlap` tokens
    first = text[windows[0][0] : windows[0][1]].split()
    second = text[windows[1][0] : windows[1][1]].split()
    assert first[-10:] == second[:10]
    # every token is covered, the last window ends at the text's end
    assert windows[0][0] == 0 and windows[-1][1] == len(text)


def test_chunk_documents_keeps_ids_offsets_and_token_counts():
    docs = [Document("a", "alpha beta gamma delta epsilon"), Document("b", ""), Document("c", "x y")]
    chunks = chunk_documents(docs, chunk_size=3, chunk_overlap=1)
    assert [c.id for c in chunks] == ["a#0", "a#1", "c#0"]
    for c in chunks:
        src = {d.id: d.text for d in docs}[c.document_id]
        assert src[c.start : c.end] == c.text
        assert c.n_tokens == len(regex_token_spans(c.text))
    assert chunks[1].text == "gamma delta epsilon"


@pytest.mark.parametrize("size,overlap", [(0, 0), (-5, 0), (10, 10), (10, -1)])
def test_bad_chunk_sizes_raise(size, overlap):
    with pytest.raises(ValueError, match="chunk_"):
        chunk_text("some text here", size, overlap)


# -- sentence-boundary chunking (issue 44) -------------------------------------------------
SENTENCES = (
    "Dr. Smith moved to Washington, D.C. in 1990. He founded a bakery on Main St. with his "
    "brother.\nThe bakery sold bread, e.g. rye and spelt, at $3.50 a loaf. It closed in 2004!\n\n"
    "A new owner reopened it. Was it the same? Nobody could tell. The recipes were kept in a "
    "tin box that the family had brought over from the old country many years before."
)


def _sentence_starts(text):
    from graphstrata.sentences import sentence_boundaries

    return set(sentence_boundaries(text)[0])


def test_sentence_chunks_start_and_end_on_sentence_boundaries_within_the_budget():
    from graphstrata.chunking import sentence_chunk_text

    starts = _sentence_starts(SENTENCES)
    assert SENTENCES.index("He founded") in starts and SENTENCES.index("Smith") not in starts
    windows = sentence_chunk_text(SENTENCES, chunk_size=24, chunk_overlap=8)
    assert len(windows) > 2
    for start, end, n in windows:
        assert n <= 24 and n == len(regex_token_spans(SENTENCES[start:end]))
        assert start in starts  # no sentence here is longer than the budget
        assert end == len(SENTENCES) or SENTENCES[end - 1] in ".!?"
    # every token is in some window, windows advance
    assert windows[0][0] == 0 and windows[-1][1] == len(SENTENCES)
    assert all(b[0] > a[0] for a, b in zip(windows, windows[1:]))
    for ts, te in regex_token_spans(SENTENCES):
        assert any(s <= ts and te <= e for s, e, _ in windows)


def test_sentence_chunks_overlap_by_whole_sentences_and_prefer_paragraphs():
    from graphstrata.chunking import sentence_chunk_text

    windows = sentence_chunk_text(SENTENCES, chunk_size=64, chunk_overlap=8)  # paragraph 1: 52 tokens
    texts = [SENTENCES[s:e] for s, e, _ in windows]
    # the first window stops at the paragraph break rather than mid-way into the next paragraph
    assert texts[0].endswith("It closed in 2004!")
    # the next one repeats the whole last sentence that fits in the overlap
    assert texts[1].startswith("It closed in 2004!")
    no_overlap = sentence_chunk_text(SENTENCES, chunk_size=30, chunk_overlap=0)
    assert all(a[1] < b[0] for a, b in zip(no_overlap, no_overlap[1:]))


def test_a_sentence_longer_than_the_budget_is_cut_at_the_budget():
    from graphstrata.chunking import sentence_chunk_text

    long = "word " * 50 + "end. Short one."
    windows = sentence_chunk_text(long, chunk_size=20, chunk_overlap=5)
    assert [n for _, _, n in windows][:2] == [20, 20]
    assert all(n <= 20 for _, _, n in windows)
    assert long[windows[-1][0] : windows[-1][1]].endswith("Short one.")


def test_chunk_documents_sentence_option_keeps_ids_and_offsets():
    docs = [Document("a", SENTENCES), Document("b", "")]
    chunks = chunk_documents(docs, chunk_size=24, chunk_overlap=8, chunking="sentence")
    assert [c.id for c in chunks] == [f"a#{i}" for i in range(len(chunks))]
    starts = _sentence_starts(SENTENCES)
    for c in chunks:
        assert SENTENCES[c.start : c.end] == c.text and c.start in starts
    with pytest.raises(ValueError, match="chunking"):
        chunk_documents(docs, chunking="words")


def test_the_default_chunking_is_unchanged_token_windows():
    from graphstrata import GraphStrataConfig

    assert GraphStrataConfig().chunking == "tokens"
    docs = [Document("a", SENTENCES)]
    assert [(c.start, c.end) for c in chunk_documents(docs, 24, 8)] == [
        (s, e) for s, e, _ in chunk_text(SENTENCES, 24, 8)
    ]


def test_process_runner_cuts_sentence_chunks_as_the_local_runner():
    from graphstrata.runner import LocalRunner, ProcessRunner
    from graphstrata.testing import HashEmbedder

    emb = HashEmbedder()
    docs = [Document(f"d{i}", SENTENCES * (i + 1)) for i in range(4)]
    pool = ProcessRunner(2)
    try:
        got = pool.chunk(docs, 24, 8, emb, None, chunking="sentence")
    finally:
        pool.close()
    assert got == LocalRunner().chunk(docs, 24, 8, emb, None, chunking="sentence")
    assert got != LocalRunner().chunk(docs, 24, 8, emb, None)


def test_sentence_chunking_build_and_its_extraction_split(embedder):
    from graphstrata import GraphStrata, GraphStrataConfig
    from graphstrata.extraction import StatisticalExtractor

    cfg = GraphStrataConfig(chunk_size=24, chunk_overlap=8, chunking="sentence")
    gs = GraphStrata.build([Document("a", SENTENCES)], embedder=embedder, config=cfg)
    starts = _sentence_starts(SENTENCES)
    assert gs.chunks and all(c.start in starts for c in gs.chunks)
    assert StatisticalExtractor.from_config(cfg).sentence_split == "splitter"
    assert StatisticalExtractor.from_config(GraphStrataConfig()).sentence_split == "regex"


def test_cli_index_chunking_sentence(tmp_path, monkeypatch, embedder, capsys):
    import graphstrata.api
    import graphstrata.models
    from graphstrata import GraphStrata, cli

    monkeypatch.setattr(graphstrata.api, "default_embedder", lambda: embedder)
    monkeypatch.setattr(graphstrata.models.MiniLMEmbedder, "id", embedder.id)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "bakery.md").write_text("# The bakery\n\n" + SENTENCES, encoding="utf-8")
    args = ["index", str(folder), "--quiet", "--chunk-size", "24", "--chunk-overlap", "8"]
    assert cli.main([*args, "--out", str(tmp_path / "s"), "--chunking", "sentence"]) == 0
    assert cli.main([*args, "--out", str(tmp_path / "t")]) == 0
    sentence = GraphStrata.load(tmp_path / "s", embedder=embedder)
    tokens = GraphStrata.load(tmp_path / "t", embedder=embedder)
    assert sentence.config.chunking == "sentence" and tokens.config.chunking == "tokens"
    text = sentence.documents["bakery.md"].text
    assert text.startswith("The bakery\n\nDr. Smith")
    starts = _sentence_starts(text)
    assert all(c.start in starts and c.n_tokens <= 24 for c in sentence.chunks)
    assert all(text[c.start : c.end] == c.text for c in sentence.chunks)
    assert not all(c.start in starts for c in tokens.chunks)  # the default cuts anywhere
    with pytest.raises(SystemExit):  # argparse: invalid choice
        cli.main([*args, "--out", str(tmp_path / "x"), "--chunking", "words"])
