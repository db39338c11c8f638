"""Token-window chunking with overlap, counted with the embedder's tokenizer.

Each chunk is an exact substring of its document (``doc.text[chunk.start:chunk.end]``), so
provenance can always be shown in context. Windows never cross documents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .config import DEFAULT_MAX_DOCUMENT_CHARS, check_document_size
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
    max_document_chars: int | None = DEFAULT_MAX_DOCUMENT_CHARS,
) -> list[Chunk]:
    """Chunk every document into token windows.

    Args:
        documents: the documents, in order.
        chunk_size: tokens per chunk (of the embedder's tokenizer).
        chunk_overlap: tokens shared by consecutive chunks of one document.
        embedder: an :class:`~graphstrata.models.Embedder` whose ``token_spans`` counts tokens;
            a regex word tokenizer when ``None``.
        max_document_chars: largest document accepted, in characters
            (``config.max_document_chars``, default 50,000,000); ``None`` = no limit. Every
            document is checked before any is chunked.

    Returns:
        Chunks in document order; ids ``"<document_id>#<index>"``. Documents with no tokens
        yield no chunk.

    Raises:
        ValueError: bad ``chunk_size`` / ``chunk_overlap``; a document longer than
            ``max_document_chars`` (the message names its id, its size and the limit).
    """
    spans_fn = getattr(embedder, "token_spans", None) or regex_token_spans
    for doc in documents:
        check_document_size(doc.id, len(doc.text), max_document_chars)
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
