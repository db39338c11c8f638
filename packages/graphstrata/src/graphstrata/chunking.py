"""Token-window chunking with overlap, counted with the embedder's tokenizer.

Each chunk is an exact substring of its document (``doc.text[chunk.start:chunk.end]``), so
provenance can always be shown in context. Windows never cross documents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .models import regex_token_spans
from .types import Chunk, Document

TokenSpans = Callable[[str], list[tuple[int, int]]]


def validate_chunking(chunk_size: int, chunk_overlap: int) -> None:
    """Raise ``ValueError`` unless ``chunk_size > 0`` and ``0 <= chunk_overlap < chunk_size``."""
    if int(chunk_size) <= 0:
        raise ValueError(f"chunk_size must be > 0 tokens, got {chunk_size}")
    if not 0 <= int(chunk_overlap) < int(chunk_size):
        raise ValueError(
            f"chunk_overlap must be in [0, chunk_size), got {chunk_overlap} with "
            f"chunk_size {chunk_size}"
        )


def chunk_text(
    text: str, chunk_size: int, chunk_overlap: int, token_spans: TokenSpans = regex_token_spans
) -> list[tuple[int, int, int]]:
    """Cut ``text`` into windows of at most ``chunk_size`` tokens overlapping by ``chunk_overlap``.

    Args:
        text: the text to cut.
        chunk_size: window length in tokens (> 0).
        chunk_overlap: tokens shared by consecutive windows (0 ≤ overlap < size).
        token_spans: tokenizer giving character spans of tokens.

    Returns:
        ``[(start_char, end_char, n_tokens), ...]``; empty when ``text`` has no tokens.

    Raises:
        ValueError: bad ``chunk_size`` / ``chunk_overlap``.
    """
    validate_chunking(chunk_size, chunk_overlap)
    spans = token_spans(text)
    if not spans:
        return []
    out = []
    step = chunk_size - chunk_overlap
    i = 0
    n = len(spans)
    while True:
        j = min(i + chunk_size, n)
        out.append((spans[i][0], spans[j - 1][1], j - i))
        if j >= n:
            break
        i += step
    return out


def chunk_documents(
    documents: Sequence[Document],
    chunk_size: int = 200,
    chunk_overlap: int = 32,
    embedder=None,
) -> list[Chunk]:
    """Chunk every document into token windows.

    Args:
        documents: the documents, in order.
        chunk_size: tokens per chunk (of the embedder's tokenizer).
        chunk_overlap: tokens shared by consecutive chunks of one document.
        embedder: an :class:`~graphstrata.models.Embedder` whose ``token_spans`` counts tokens;
            a regex word tokenizer when ``None``.

    Returns:
        Chunks in document order; ids ``"<document_id>#<index>"``. Documents with no tokens
        yield no chunk.

    Raises:
        ValueError: bad ``chunk_size`` / ``chunk_overlap``.
    """
    spans_fn = getattr(embedder, "token_spans", None) or regex_token_spans
    chunks: list[Chunk] = []
    for doc in documents:
        for index, (start, end, n_tokens) in enumerate(
            chunk_text(doc.text, chunk_size, chunk_overlap, spans_fn)
        ):
            chunks.append(
                Chunk(
                    id=f"{doc.id}#{index}",
                    document_id=doc.id,
                    index=index,
                    text=doc.text[start:end],
                    start=start,
                    end=end,
                    n_tokens=n_tokens,
                )
            )
    return chunks
