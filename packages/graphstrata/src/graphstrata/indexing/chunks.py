"""The chunking stage and the chunk vectors (DESIGN.md: documents → chunks → vectors)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..chunking import check_document_size
from ..config import GraphStrataConfig
from ..models import Embedder
from ..runner import current_runner
from ..types import Chunk, Document
from .progress import Progress


def chunk_stage(docs: Sequence[Document], config: GraphStrataConfig, embedder: Embedder) -> list[Chunk]:
    """:func:`~graphstrata.chunking.chunk_documents` with the build's settings, on the active
    runner. Every document's size is checked here first, so an oversized one fails the stage
    before any work is sent out.

    Returns:
        The chunks of every document, in document order (windows of at most
        ``config.chunk_size`` tokens with ``config.chunk_overlap`` overlap, cut as
        ``config.chunking`` says: anywhere, or on sentence boundaries).

    Raises:
        ValueError: a document over ``config.max_document_chars`` (named).
    """
    for doc in docs:
        check_document_size(doc.id, len(doc.text), config.max_document_chars)
    args = (docs, config.chunk_size, config.chunk_overlap, embedder, config.max_document_chars)
    if config.chunking == "tokens":  # as before: a runner written before `chunking` still works
        return current_runner().chunk(*args)
    return current_runner().chunk(*args, chunking=config.chunking)


def chunk_vectors(
    chunks: list[Chunk],
    embedder: Embedder,
    prog: Progress,
    cached: Mapping[tuple[str, str], np.ndarray],
) -> np.ndarray:
    """The chunk-vector stage: one vector per chunk, the cached ones reused.

    Args:
        chunks: the corpus chunks in row order.
        embedder: embeds the chunks not in ``cached`` (in :data:`~.progress.EMBED_BATCH`
            batches on the active runner, stage ``"embedding chunks"``).
        prog: the build's :class:`~.progress.Progress`.
        cached: ``{(chunk_id, chunk_text): float32 (dim,)}`` of chunks already embedded (an
            insert, delete or rebuild passes the previous state's chunk vectors).

    Returns:
        float32 ``(n_chunks, dim)``, row ``i`` for ``chunks[i]``, rows L2-normalised.

    Raises:
        ValueError: the embedder returned another shape.
    """
    todo = [i for i, c in enumerate(chunks) if (c.id, c.text) not in cached]
    new_vecs = prog.embed(embedder, [chunks[i].text for i in todo], "embedding chunks")
    if len(todo) == len(chunks):
        return new_vecs  # nothing cached (a build): no second (n_chunks, dim) array
    out = np.zeros((len(chunks), embedder.dim), dtype=np.float32)
    for i, c in enumerate(chunks):
        v = cached.get((c.id, c.text))
        if v is not None:
            out[i] = v
    if todo:
        out[np.asarray(todo)] = new_vecs
    return out
