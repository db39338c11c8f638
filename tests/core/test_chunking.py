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
