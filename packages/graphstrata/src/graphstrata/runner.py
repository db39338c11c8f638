"""Where the per-chunk indexing stages run: in this process, or on a cluster (issue 19).

A build or an update is the same sequence of stages whatever runs it (:mod:`graphstrata.indexing`,
:mod:`graphstrata.indexing.update`). The per-chunk stages are embarrassingly parallel and go through
the *active runner*:

* chunking (:meth:`Runner.chunk`), embedding (:meth:`Runner.embed`) and statistical extraction
  (:meth:`Runner.chunk_records`);
* every LLM call of the index-time stages — LLM extraction and its gleaning and description
  summaries, AGRAG triples, community reports, HiRAG summary entities — because they all go
  through :meth:`graphstrata.llm.LLMClient.map`, which hands the cache misses to a runner that
  has a ``complete`` method (:class:`graphstrata.ray_runner.RayRunner`).

Merging the records, Leiden clustering, the C-HNSW and BM25 indexes stay in the calling process
(the driver). The default :class:`LocalRunner` is what a build always did.

The active runner is a context variable (:func:`use_runner`), set by
:meth:`graphstrata.GraphStrata.build` and by ``insert`` / ``delete`` / ``rebuild``; query-time
LLM calls never see one and stay in the process.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from .extraction import ChunkRecord, FrozenTfidf, StatisticalExtractor
    from .llm import LLMRequest, LLMResponse
    from .types import Chunk, Document


@runtime_checkable
class Runner(Protocol):
    """What runs the per-chunk stages. Every method returns its results in input order, so a
    build gives the same index whatever runs it."""

    name: str

    def chunk(
        self, documents: Sequence[Document], chunk_size: int, chunk_overlap: int, embedder: Any,
        max_document_chars: int | None,
    ) -> list[Chunk]:
        """:func:`graphstrata.chunking.chunk_documents` over ``documents``."""
        ...

    def embed(self, embedder: Any, batches: Sequence[Sequence[str]]) -> Iterator[np.ndarray]:
        """``embedder.embed(batch)`` of each batch, yielded in batch order."""
        ...

    def chunk_records(
        self,
        extractor: StatisticalExtractor,
        chunks: Sequence[Chunk],
        titles: Mapping[str, str] | None,
        tfidf: FrozenTfidf | None,
        terms: Sequence[Sequence[str]] | None = None,
    ) -> list[ChunkRecord]:
        """:meth:`graphstrata.extraction.StatisticalExtractor.chunk_records` of ``chunks``."""
        ...


class DistributedLLM(Protocol):
    """A runner that also completes LLM requests off the driver (see :meth:`LLMClient.map
    <graphstrata.llm.LLMClient.map>`)."""

    def complete(
        self, llm: Any, requests: Sequence[LLMRequest], stage: str, calls_in_flight: int, attempts: int
    ) -> Iterator[tuple[list[int], list[LLMResponse | str]]]:
        """Complete ``requests`` with ``llm``; yields ``(positions, outcomes)`` as batches
        finish (any order): an outcome is the response, or the error message of a call that
        failed after ``attempts`` tries."""
        ...


class LocalRunner:
    """Every stage in this process, as a build always ran (the default)."""

    name = "local"

    def chunk(self, documents, chunk_size, chunk_overlap, embedder, max_document_chars):
        from .chunking import chunk_documents

        return chunk_documents(
            documents, chunk_size, chunk_overlap, embedder=embedder, max_document_chars=max_document_chars
        )

    def embed(self, embedder, batches):
        for batch in batches:
            yield embedder.embed(list(batch))

    def chunk_records(self, extractor, chunks, titles, tfidf, terms=None):
        return extractor.chunk_records(chunks, titles, tfidf, terms=terms)

    def __repr__(self) -> str:
        return "LocalRunner()"


LOCAL = LocalRunner()

_ACTIVE: contextvars.ContextVar[Runner | None] = contextvars.ContextVar("graphstrata_runner", default=None)


def current_runner() -> Runner:
    """The runner of the stages running in this context (:data:`LOCAL` outside :func:`use_runner`)."""
    return _ACTIVE.get() or LOCAL


@contextmanager
def use_runner(runner: Runner | None) -> Iterator[Runner]:
    """Run the indexing stages inside the ``with`` block on ``runner`` (``None``: locally).

    Raises:
        TypeError: ``runner`` lacks the :class:`Runner` methods.
    """
    runner = runner or LOCAL
    if not isinstance(runner, Runner):
        raise TypeError(
            f"runner must be a graphstrata Runner (LocalRunner, RayRunner), got {type(runner).__name__}"
        )
    token = _ACTIVE.set(runner)
    try:
        yield runner
    finally:
        _ACTIVE.reset(token)


def distributed_llm(runner: Runner | None = None) -> DistributedLLM | None:
    """The active runner when it completes LLM calls itself, else ``None`` (calls stay local)."""
    runner = runner or current_runner()
    return runner if callable(getattr(runner, "complete", None)) else None  # type: ignore[return-value]
