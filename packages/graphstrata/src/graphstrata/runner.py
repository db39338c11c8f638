"""Where the per-chunk indexing stages run: in this process, or on a cluster (issue 19).

A build or an update is the same sequence of stages whatever runs it (:mod:`graphstrata.indexing`,
:mod:`graphstrata.indexing.update`). The per-chunk stages are embarrassingly parallel and go through
the *active runner*:

* chunking (:meth:`Runner.chunk`), embedding (:meth:`Runner.embed`) and statistical extraction
  (:meth:`Runner.chunk_records`); a runner that also has ``map`` (:class:`ProcessRunner`) runs
  the shards of the extraction's TF-IDF fit there too
  (:func:`graphstrata.extraction.fit_tfidf`);
* every LLM call of the index-time stages — LLM extraction and its gleaning and description
  summaries, AGRAG triples, community reports, HiRAG summary entities — because they all go
  through :meth:`graphstrata.llm.LLMClient.map`, which hands the cache misses to a runner that
  has a ``complete`` method (:class:`graphstrata.ray_runner.RayRunner`).

Merging the records, Leiden clustering, the C-HNSW and BM25 indexes stay in the calling process
(the driver). The default :class:`LocalRunner` is what a build always did;
:class:`ProcessRunner` runs the per-chunk stages on worker processes of this machine (the
statistical stages are pure Python, so threads would wait on the GIL), and a large build uses
one by default (:func:`build_workers`).

The active runner is a context variable (:func:`use_runner`), set by
:meth:`graphstrata.GraphStrata.build` and by ``insert`` / ``delete`` / ``rebuild``; query-time
LLM calls never see one and stay in the process.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from .extraction import ChunkRecord, FrozenTfidf, StatisticalExtractor
    from .llm import LLMRequest, LLMResponse
    from .models import Embedder
    from .types import Chunk, Document


@runtime_checkable
class Runner(Protocol):
    """What runs the per-chunk stages. Every method returns its results in input order, so a
    build gives the same index whatever runs it."""

    name: str

    def chunk(
        self, documents: Sequence[Document], chunk_size: int, chunk_overlap: int, embedder: Embedder,
        max_document_chars: int | None, chunking: str = "tokens",
    ) -> list[Chunk]:
        """:func:`graphstrata.chunking.chunk_documents` over ``documents``."""
        ...

    def embed(self, embedder: Embedder, batches: Sequence[Sequence[str]]) -> Iterator[np.ndarray]:
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

    def chunk(self, documents, chunk_size, chunk_overlap, embedder, max_document_chars, chunking="tokens"):
        from .chunking import chunk_documents

        return chunk_documents(
            documents, chunk_size, chunk_overlap, embedder=embedder, max_document_chars=max_document_chars,
            chunking=chunking,
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


# -- local worker processes ----------------------------------------------------------------------

PROCESS_MIN_CHARS = 5_000_000
"""A build over at least this many characters of text (about 10,000 chunks of 200 tokens) runs
its per-chunk stages on :class:`ProcessRunner` workers by default (:func:`build_workers`);
below, starting the workers costs more than they save."""

MAX_AUTO_WORKERS = 8
"""Most worker processes :func:`build_workers` picks on its own (each holds the embedder)."""


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise ValueError(f"${name} must be a non-negative integer, got {raw!r}")
    return int(raw)


def build_workers(n_chars: int, configured: int = 0) -> int:
    """Worker processes for the per-chunk stages of a build over ``n_chars`` characters.

    ``$GRAPHSTRATA_NUM_WORKERS`` when set (0 = decide as below), else ``configured``
    (``config.build_workers``) when > 0, else: 1 (in this process) below
    :data:`PROCESS_MIN_CHARS`, otherwise the CPUs this process may use
    (:func:`graphstrata.index.index_threads`, which ``$GRAPHSTRATA_NUM_THREADS`` caps), at most
    :data:`MAX_AUTO_WORKERS`.

    Returns:
        The number of workers (1: no worker processes).

    Raises:
        ValueError: ``$GRAPHSTRATA_NUM_WORKERS`` is not a non-negative integer.
    """
    env = _env_int("GRAPHSTRATA_NUM_WORKERS")
    if env:
        return env
    if configured and configured > 0:
        return int(configured)
    if n_chars < PROCESS_MIN_CHARS:
        return 1
    from .index import index_threads

    return max(1, min(index_threads(), MAX_AUTO_WORKERS))


# worker-process side: embedders sent once per worker, found again by token
_WORKER_EMBEDDERS: dict[int, Any] = {}


def _worker_embedder(token: int, blob: bytes) -> Any:
    emb = _WORKER_EMBEDDERS.get(token)
    if emb is None:
        import pickle

        _WORKER_EMBEDDERS.clear()  # one embedder per build: do not hold old ones
        emb = _WORKER_EMBEDDERS[token] = pickle.loads(blob)
    return emb


def _worker_init() -> None:
    # a worker runs one task at a time on one core: native libraries keep to one thread
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    try:  # pragma: no cover - depends on the install
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except Exception:  # noqa: BLE001, S110 - optional
        pass


def _worker_windows(token: int, blob: bytes, texts: list[str], chunk_size: int, chunk_overlap: int,
                    chunking: str = "tokens") -> list[list[tuple[int, int, int]]]:
    from .chunking import chunk_text, sentence_chunk_text
    from .models import regex_token_spans

    emb = _worker_embedder(token, blob)
    spans = getattr(emb, "token_spans", None) or regex_token_spans
    cut = sentence_chunk_text if chunking == "sentence" else chunk_text
    return [cut(t, chunk_size, chunk_overlap, spans) for t in texts]


def _worker_embed(token: int, blob: bytes, batches: list[list[str]]) -> list[np.ndarray]:
    emb = _worker_embedder(token, blob)
    return [np.asarray(emb.embed(b), dtype=np.float32) for b in batches]


def _worker_records(extractor: Any, rows: list[tuple[str, str, str]], titles: dict[str, str], tfidf: Any,
                    terms: list[list[str]] | None) -> list[Any]:
    from .types import Chunk

    chunks = [Chunk(cid, doc, 0, text, 0, len(text), 0) for cid, doc, text in rows]
    return extractor.chunk_records(chunks, titles, tfidf, terms=terms)


def _call(fn: Any, args: tuple) -> Any:
    return fn(*args)


class ProcessRunner:
    """The per-chunk stages on worker processes of this machine.

    Chunking, statistical extraction (records, their shard merges and the TF-IDF analysis) and,
    for an embedder that allows it, embedding run on ``workers`` processes, because they are
    pure Python bound by the GIL. Results come back in input order and every step that depends
    on order runs in the calling process, so the index is the one :class:`LocalRunner` builds
    (same chunks, records, graph and vectors).

    A build over a large corpus uses one by default (:func:`build_workers`, closed when the
    build ends); pass one to :meth:`graphstrata.GraphStrata.build` (``runner=``) to choose the
    number of workers, and :meth:`close` it (or use it as a context manager) when done.

    The workers are started on first use with ``start_method`` (``"fork"`` where available:
    no module is imported again and a script need not guard its ``__main__``; ``"spawn"`` or
    ``"forkserver"`` otherwise) and each holds the embedder it was sent, once. An embedder is
    embedded on the workers when it says it may be (``embeds_in_processes = True``, as the
    static ``fast`` embedder does: the same vector for a text in any process); others (a torch
    model, which uses every core on its own) embed in this process. ``embed`` forces either.

    Args:
        workers: worker processes (≥ 1); ``None``: :func:`build_workers` of a large corpus.
        start_method: ``multiprocessing`` start method (``None``: ``"fork"`` where available).
        embed: embed on the workers (``True``), in this process (``False``), or as the embedder
            says (``None``).
        tasks_in_flight: tasks queued per worker (bounds the memory of results not yet read).

    Raises:
        ValueError: ``workers`` or ``tasks_in_flight`` < 1, an unknown ``start_method``.
        RuntimeError (from a stage): a worker process died (killed, out of memory); the pool
            is stopped and the next use starts a new one.
        Any exception a stage raised in a worker reaches the caller as it is (with the
        worker's traceback as its ``__cause__``).
    """

    name = "process"

    def __init__(self, workers: int | None = None, *, start_method: str | None = None,
                 embed: bool | None = None, tasks_in_flight: int = 2) -> None:
        import multiprocessing as mp

        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ValueError(f"workers must be an integer >= 1 or None, got {workers!r}")
        if isinstance(tasks_in_flight, bool) or not isinstance(tasks_in_flight, int) or tasks_in_flight < 1:
            raise ValueError(f"tasks_in_flight must be an integer >= 1, got {tasks_in_flight!r}")
        methods = mp.get_all_start_methods()
        if start_method is None:
            start_method = "fork" if "fork" in methods else mp.get_start_method()
        if start_method not in methods:
            raise ValueError(f"start_method must be one of {methods}, got {start_method!r}")
        self.workers = workers if workers is not None else max(2, build_workers(PROCESS_MIN_CHARS))
        self.start_method = start_method
        self.embed_on_workers = embed
        self.tasks_in_flight = tasks_in_flight
        self._pool: Any = None
        self._lock = threading.Lock()
        self._embedders: dict[int, tuple[Any, bytes]] = {}  # id(embedder) -> (embedder, pickle)

    # -- pool ----------------------------------------------------------------------------------
    def _executor(self) -> Any:
        import gc
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with self._lock:
            if self._pool is None:
                pool = ProcessPoolExecutor(
                    self.workers, mp_context=mp.get_context(self.start_method), initializer=_worker_init
                )
                # fork every worker now, with the collector's objects frozen so that the workers
                # do not write (copy) the pages of this process's objects
                gc.freeze()
                try:
                    for f in [pool.submit(os.getpid) for _ in range(self.workers)]:
                        f.result()
                finally:
                    gc.unfreeze()
                self._pool = pool
            return self._pool

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (empty before first use and after :meth:`close`)."""
        with self._lock:
            pool = self._pool
            return sorted(pool._processes) if pool is not None else []  # noqa: SLF001

    def close(self) -> None:
        """Stop the workers and wait for them to exit (a later use starts new ones)."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._embedders = {}
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ProcessRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - interpreter-dependent timing
        try:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
        except Exception:  # noqa: BLE001, S110
            pass

    def __repr__(self) -> str:
        return f"ProcessRunner(workers={self.workers}, start_method={self.start_method!r})"

    def map(self, fn: Any, arguments: Sequence[tuple] | Iterator[tuple]) -> Iterator[Any]:
        """``fn(*args)`` for every tuple of ``arguments`` on the workers; results yielded in
        input order, at most ``workers * tasks_in_flight`` tasks queued at once. ``fn`` and the
        arguments must be picklable (module-level functions).

        Raises:
            RuntimeError: a worker process died; any exception ``fn`` raised, as it is.
        """
        from collections import deque
        from concurrent.futures.process import BrokenProcessPool

        pool = self._executor()
        limit = self.workers * self.tasks_in_flight
        pending: deque = deque()
        try:
            for args in arguments:
                pending.append(pool.submit(_call, fn, tuple(args)))
                if len(pending) >= limit:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        except BrokenProcessPool as exc:
            self.close()
            raise RuntimeError(
                f"a worker process of {self!r} died (killed, or out of memory): {exc}"
            ) from exc
        finally:
            for f in pending:
                f.cancel()

    def _embedder_blob(self, embedder: Any) -> tuple[int, bytes]:
        import pickle

        held = self._embedders.get(id(embedder))
        if held is None or held[0] is not embedder:
            try:
                blob = pickle.dumps(embedder, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # noqa: BLE001 - pickling errors come in many types
                raise TypeError(
                    f"ProcessRunner cannot send the embedder {type(embedder).__name__} to its workers "
                    f"(it must be picklable): {type(exc).__name__}: {exc}"
                ) from exc
            held = self._embedders[id(embedder)] = (embedder, blob)
        return id(embedder), held[1]

    def _slices(self, n: int, most: int) -> list[range]:
        size = max(1, min(most, -(-n // (self.workers * 4))))
        return [range(i, min(n, i + size)) for i in range(0, n, size)]

    # -- stages --------------------------------------------------------------------------------
    def chunk(self, documents, chunk_size, chunk_overlap, embedder, max_document_chars, chunking="tokens"):
        """Token windows of document slices on the workers; chunks (texts cut here, as
        :func:`graphstrata.chunking.chunk_documents` cuts them) in document order."""
        from .chunking import check_chunking, check_document_size, validate_chunking
        from .types import Chunk

        documents = list(documents)
        validate_chunking(chunk_size, chunk_overlap)
        check_chunking(chunking)
        for doc in documents:
            check_document_size(doc.id, len(doc.text), max_document_chars)
        token, blob = self._embedder_blob(embedder)
        slices = self._slices(len(documents), 200)
        parts = self.map(
            _worker_windows,
            ((token, blob, [documents[i].text for i in r], chunk_size, chunk_overlap, chunking) for r in slices),
        )
        chunks: list[Chunk] = []
        for r, windows in zip(slices, parts, strict=True):
            for i, doc_windows in zip(r, windows, strict=True):
                doc = documents[i]
                for index, (start, end, n_tokens) in enumerate(doc_windows):
                    chunks.append(Chunk(f"{doc.id}#{index}", doc.id, index, doc.text[start:end], start, end, n_tokens))
        return chunks

    def embeds_on_workers(self, embedder: Any) -> bool:
        """Whether :meth:`embed` sends ``embedder``'s batches to the workers."""
        if self.embed_on_workers is not None:
            return bool(self.embed_on_workers)
        return bool(getattr(embedder, "embeds_in_processes", False))

    def embed(self, embedder, batches):
        """``embedder.embed(batch)`` of each batch (on the workers when
        :meth:`embeds_on_workers`, several batches a task), yielded in batch order."""
        batches = [list(b) for b in batches]
        if not self.embeds_on_workers(embedder) or len(batches) < 2:
            for b in batches:
                yield embedder.embed(b)
            return
        token, blob = self._embedder_blob(embedder)
        per_task = max(1, min(8, -(-len(batches) // (self.workers * 4))))
        groups = [batches[i : i + per_task] for i in range(0, len(batches), per_task)]
        for out in self.map(_worker_embed, ((token, blob, g) for g in groups)):
            yield from out

    def chunk_records(self, extractor, chunks, titles, tfidf, terms=None):
        """:meth:`~graphstrata.extraction.StatisticalExtractor.chunk_records` of chunk slices
        on the workers, in chunk order."""
        chunks = list(chunks)
        titles = dict(titles or {})
        out: list[Any] = []
        slices = self._slices(len(chunks), 1_000)

        def tasks():
            for r in slices:
                part = chunks[r.start : r.stop]
                part_titles = {c.document_id: titles[c.document_id] for c in part if c.document_id in titles}
                part_terms = None if terms is None else [list(t) for t in terms[r.start : r.stop]]
                yield (extractor, [(c.id, c.document_id, c.text) for c in part], part_titles,
                       tfidf if terms is None else None, part_terms)

        for recs in self.map(_worker_records, tasks()):
            out.extend(recs)
        return out
