"""Chunking with overlap, counted with the embedder's tokenizer.

Two ways to cut (``GraphStrataConfig.chunking``):

* ``"tokens"`` (the default): windows of ``chunk_size`` tokens every ``chunk_size -
  chunk_overlap`` tokens (:func:`chunk_text`), cut anywhere;
* ``"sentence"``: windows that start and end on sentence (and, where one falls in the second
  half of the window, paragraph) boundaries within the same budget, overlapping by the whole
  sentences that fit in ``chunk_overlap`` tokens; a sentence longer than ``chunk_size`` is cut
  at the budget (:func:`sentence_chunk_text`, splitter :mod:`graphstrata.sentences`).

Each chunk is an exact substring of its document (``doc.text[chunk.start:chunk.end]``), so
provenance can always be shown in context. Windows never cross documents.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence

from .config import DEFAULT_MAX_DOCUMENT_CHARS, check_document_size
from .models import regex_token_spans
from .types import Chunk, Document

TokenSpans = Callable[[str], list[tuple[int, int]]]
CHUNKING = ("tokens", "sentence")
"""The values of ``GraphStrataConfig.chunking``."""


def check_chunking(chunking: str) -> None:
    """Raise ``ValueError`` unless ``chunking`` is one of :data:`CHUNKING`."""
    if chunking not in CHUNKING:
        raise ValueError(f"chunking must be one of {', '.join(CHUNKING)}, got {chunking!r}")


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


def sentence_chunk_text(
    text: str, chunk_size: int, chunk_overlap: int, token_spans: TokenSpans = regex_token_spans
) -> list[tuple[int, int, int]]:
    """Cut ``text`` into windows of at most ``chunk_size`` tokens on sentence boundaries.

    Each window starts where a sentence starts and takes whole sentences while they fit in
    ``chunk_size`` tokens; when a paragraph starts in the second half of the window and the
    window would not end on one, it ends there instead. The next window starts at the earliest
    sentence of the window's last ``chunk_overlap`` tokens (no overlap when the last sentence
    is longer than that). A sentence longer than ``chunk_size`` tokens is cut at the budget,
    its pieces overlapping by ``chunk_overlap`` tokens as :func:`chunk_text` does. Boundaries
    come from :func:`graphstrata.sentences.sentence_boundaries`; a token belongs to the
    sentence its first character is in.

    Args:
        text: the text to cut.
        chunk_size: most tokens per window (> 0).
        chunk_overlap: most tokens shared by consecutive windows (0 ≤ overlap < size).
        token_spans: tokenizer giving character spans of tokens.

    Returns:
        ``[(start_char, end_char, n_tokens), ...]`` (``start_char`` the first character of the
        window's first token, ``end_char`` one past its last token's); empty when ``text`` has
        no tokens.

    Raises:
        ValueError: bad ``chunk_size`` / ``chunk_overlap``.
        ImportError: the sentence splitter cannot be loaded.
    """
    from .sentences import sentence_boundaries, token_boundaries

    validate_chunking(chunk_size, chunk_overlap)
    spans = token_spans(text)
    if not spans:
        return []
    n = len(spans)
    tok_starts = [s for s, _ in spans]
    starts, paragraphs = sentence_boundaries(text)
    bounds = [b for b in token_boundaries(tok_starts, starts) if 0 < b < n] + [n]
    para = [b for b in token_boundaries(tok_starts, paragraphs) if 0 < b < n]
    para_set = set(para)
    out = []
    i = 0
    while True:
        limit = i + chunk_size
        if limit >= n:
            j = n
        else:
            k = bisect_right(bounds, limit) - 1
            j = bounds[k] if k >= 0 and bounds[k] > i else limit  # no boundary: cut at the budget
            if j not in para_set:  # end at a paragraph start in the window's second half
                p = bisect_left(para, j) - 1
                if p >= 0 and para[p] >= i + (chunk_size + 1) // 2:
                    j = para[p]
        out.append((spans[i][0], spans[j - 1][1], j - i))
        if j >= n:
            break
        nxt = j
        if chunk_overlap:
            k = bisect_left(bounds, max(j - chunk_overlap, i + 1))
            if k < len(bounds) and bounds[k] < j:
                nxt = bounds[k]
            elif bounds[bisect_left(bounds, j)] != j:  # cut inside a long sentence
                nxt = max(i + 1, j - chunk_overlap)
        i = nxt
    return out


def chunk_documents(
    documents: Sequence[Document],
    chunk_size: int = 200,
    chunk_overlap: int = 32,
    embedder=None,
    max_document_chars: int | None = DEFAULT_MAX_DOCUMENT_CHARS,
    chunking: str = "tokens",
) -> list[Chunk]:
    """Chunk every document into token windows (``chunking="tokens"``) or windows of whole
    sentences (``"sentence"``; see the module docstring).

    Args:
        documents: the documents, in order.
        chunk_size: tokens per chunk (of the embedder's tokenizer).
        chunk_overlap: tokens shared by consecutive chunks of one document.
        embedder: an :class:`~graphstrata.models.Embedder` whose ``token_spans`` counts tokens;
            a regex word tokenizer when ``None``.
        max_document_chars: largest document accepted, in characters
            (``config.max_document_chars``, default 50,000,000); ``None`` = no limit. Every
            document is checked before any is chunked.
        chunking: ``"tokens"`` (:func:`chunk_text`) or ``"sentence"``
            (:func:`sentence_chunk_text`).

    Returns:
        Chunks in document order; ids ``"<document_id>#<index>"``. Documents with no tokens
        yield no chunk.

    Raises:
        ValueError: bad ``chunk_size`` / ``chunk_overlap`` / ``chunking``; a document longer
            than ``max_document_chars`` (the message names its id, its size and the limit).
    """
    check_chunking(chunking)
    cut = sentence_chunk_text if chunking == "sentence" else chunk_text
    spans_fn = getattr(embedder, "token_spans", None) or regex_token_spans
    for doc in documents:
        check_document_size(doc.id, len(doc.text), max_document_chars)
    chunks: list[Chunk] = []
    for doc in documents:
        for index, (start, end, n_tokens) in enumerate(
            cut(doc.text, chunk_size, chunk_overlap, spans_fn)
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
