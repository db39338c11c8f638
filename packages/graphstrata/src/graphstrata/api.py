"""The public entry point: :class:`GraphStrata` (build, load, insert, delete, retrieve, persist).

The facade holds one reference to an immutable :class:`~graphstrata.state.EngineState`.
Readers take that reference once per call; writers (``insert`` / ``upsert`` / ``delete``) are
serialised by a lock, build the next state incrementally (:mod:`graphstrata.indexing.update`; a
full build runs the indexing stages of :mod:`graphstrata.indexing`), persist it when the index
has a ``persist_dir``, and only then swap it in with one assignment — so memory and disk never disagree after a failed write, and
a query never sees parts of two states.
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import numpy as np

from . import retrieval, store
from .answers import Answer, AsyncStreamingAnswer, PendingAnswer, StreamingAnswer
from .config import GraphStrataConfig, as_config, stored_config
from .indexing import build_state
from .llm import run_in_worker_thread
from .loaders import load_documents
from .methods import METHODS
from .models import Embedder, default_embedder, preset_for_id, resolve_embedder
from .retrieval import RetrieveRequest, check_retrieve_args
from .runner import Runner, use_runner
from .state import EngineState
from .types import Document, Hit
from .structures import registry as derived

if TYPE_CHECKING:
    import networkx as nx

    from .llm import LLMClient
    from .llm.base import LLMInput

_T = TypeVar("_T")

log = logging.getLogger(__name__)

__all__ = ["Answer", "GraphStrata"]


class GraphStrata:
    """A graph-RAG index over a document collection, and its retrieval methods.

    Build with :meth:`build`, reopen with :meth:`load`, query with :meth:`retrieve`. Indexing
    (no LLM, no network): token-window chunks → statistical entities and sentence
    co-occurrence relations → attributed community layers (ArchRAG Alg. 1) → one C-HNSW over
    entities and community layers, chunk vectors in a second C-HNSW, BM25 over chunks
    (:mod:`graphstrata.indexing`).

    Thread safety: any number of threads may call :meth:`retrieve` while one thread calls
    :meth:`insert` / :meth:`upsert` / :meth:`delete` / :meth:`persist`. Each query reads one
    immutable :class:`~graphstrata.state.EngineState` (:attr:`state`); a write builds the next
    state off to the side, persists it first (when the index has a :attr:`persist_dir`), then
    swaps it in with one assignment. Writes are serialised; a failed write changes nothing,
    in memory or on disk.

    Several processes (or instances) may write one persisted index: a write holds the
    directory's write lock (:class:`graphstrata.store.IndexDirectory`) from reading its base
    version to switching ``CURRENT``, loading first a version another writer persisted since: every
    acknowledged write is in the index. A writer waiting past :attr:`write_timeout` raises
    :class:`~graphstrata.store.ConcurrentWriteError`.

    Attributes:
        persist_dir: the directory it was loaded from or last persisted to (``None`` if never);
            every successful insert / upsert / delete is persisted there before it is visible.
        write_timeout: seconds a write waits for another writer's lock on :attr:`persist_dir`
            (``None``: ``$GRAPHSTRATA_WRITE_TIMEOUT``, else
            :data:`graphstrata.store.WRITE_LOCK_TIMEOUT`, 600).
        runner: where the per-chunk stages of ``insert`` / ``delete`` / ``rebuild`` run: the
            runner given to :meth:`build` / :meth:`load` (``None``: in this process). Settable;
            see :mod:`graphstrata.runner` and :class:`graphstrata.ray_runner.RayRunner`.
        state: the current :class:`~graphstrata.state.EngineState` (read-only); ``config``,
            ``embedder``, ``documents``, ``chunks``, ``chunk_row``, ``kg``, ``communities``,
            ``layered``, ``chunk_index``, ``bm25``, ``vectors`` and ``build_seconds`` read
            the same fields of the current state.
    """

    accepts_retrieve_request = True  # retrieve(request=...) takes a checked RetrieveRequest as is

    def __init__(self, state: EngineState | None = None) -> None:  # use build() / load() / empty()
        self._state = state
        self._pending: _Pending | None = None  # what the first insert builds with (empty())
        self._index: store.IndexDirectory | None = None  # persist_dir, its lock, the version read / written
        self.runner: Runner | None = None
        self.write_timeout: float | None = None
        self._write_lock = threading.RLock()

    @property
    def persist_dir(self) -> Path | None:
        """The directory it was loaded from or last persisted to, resolved (``None`` if never)."""
        return self._index.path if self._index is not None else None

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle as a reference to the persisted directory: unpickling loads its current
        version (:meth:`load`), with the embedder when it is not a preset (it must pickle) and
        the attached LLM (when it pickles; else none is attached).

        Raises:
            TypeError: the index was never persisted (nothing on disk to refer to): persist it
                first, or build it with ``persist_dir=``.
        """
        if self.persist_dir is None or self._state is None:
            raise TypeError(
                "a GraphStrata index pickles as a reference to its persisted directory, and this "
                "one has none: persist it first (gs.persist(dir), build(..., persist_dir=dir), or "
                "the framework's persist) and pickle after that"
            )
        state = self._state
        embedder = None if preset_for_id(state.embedder.id) is not None else state.embedder
        llm = getattr(state.llm, "llm", None)
        try:
            pickle.dumps(llm)
        except Exception:  # an LLM client with a live connection: load without it
            llm = None
        return (_load_pickled, (str(self.persist_dir), embedder, llm))

    # -- the current state ------------------------------------------------------------------
    @property
    def state(self) -> EngineState:
        """The current immutable state; take it once and read only from it.

        Raises:
            ValueError: the object was not made by :meth:`build` or :meth:`load`.
        """
        state = self._state
        if state is None:
            if self._pending is not None:
                raise ValueError("index is empty: insert documents first")
            raise ValueError("index is empty: build() or load() it first")
        return state

    @property
    def is_empty(self) -> bool:
        """``True`` for an index made by :meth:`empty` that no insert has filled yet."""
        return self._state is None

    config = property(
        lambda self: self._pending.config if self._empty_pending() else self.state.config,
        doc="The build configuration.",
    )
    embedder = property(
        lambda self: self._pending.embedder if self._empty_pending() else self.state.embedder,
        doc="The embedder in use.",
    )
    documents = property(
        lambda self: {} if self._empty_pending() else self.state.documents,
        doc="``{document_id: Document}`` (``{}`` for an empty index).",
    )
    chunks = property(lambda self: self.state.chunks, doc="Chunks in row order.")
    chunk_row = property(lambda self: self.state.chunk_row, doc="``{chunk_id: row}``.")
    kg = property(lambda self: self.state.kg, doc="The knowledge graph.")
    communities = property(lambda self: self.state.communities, doc="Community layers 1..L.")
    layered = property(lambda self: self.state.layered, doc="C-HNSW of entities and communities.")
    chunk_index = property(lambda self: self.state.chunk_index, doc="C-HNSW of chunk vectors.")
    bm25 = property(lambda self: self.state.bm25, doc="BM25 over chunks.")
    build_seconds = property(
        lambda self: dict(self.state.build_seconds),
        doc="Seconds per indexing stage of the build or update that made the current state.",
    )

    @property
    def vectors(self) -> Mapping[str, np.ndarray]:
        """Stored float32 vectors (read-only), rows L2-normalised: ``"chunks"``
        ``(n_chunks, dim)`` in chunk row order, ``"entities"`` ``(n_entities, dim)`` in
        ``kg.entity_ids`` order, and ``"layer_<i>"`` ``(n_i, dim)`` for community layer ``i``."""
        return self.state.vectors

    def derived(self, key: str, build: Callable[[], _T]) -> _T:
        """:meth:`EngineState.derived <graphstrata.state.EngineState.derived>` of the current state."""
        return self.state.derived(key, build)

    def _empty_pending(self) -> bool:
        return self._state is None and self._pending is not None

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def empty(
        cls,
        config: GraphStrataConfig | dict[str, Any] | None = None,
        persist_dir: str | Path | None = None,
        embedder: Embedder | str | None = None,
        llm: LLMInput | None = None,
        runner: Runner | None = None,
    ) -> GraphStrata:
        """An index with no documents yet (as ``VectorStoreIndex([])``): :meth:`retrieve`
        returns ``[]`` and the first :meth:`insert` runs a full build with these settings.

        Args:
            config, persist_dir, embedder, llm, runner: as in :meth:`build`. With
                ``persist_dir`` nothing is written until the first insert, which persists
                the built index there.

        Raises:
            ValueError: bad config.
            FileExistsError: ``persist_dir`` is a file or a non-empty non-index directory.
            TypeError: ``llm`` is not an LLM or callable.
        """
        cfg = as_config(config)
        index = store.IndexDirectory.checked(persist_dir) if persist_dir is not None else None
        client = _llm_client(llm, cfg, index)
        emb = default_embedder() if embedder in (None, "default") else resolve_embedder(embedder)
        self = cls()
        self._pending = _Pending(cfg, emb, client)
        self.runner = runner
        self._index = index
        return self

    @classmethod
    def build(
        cls,
        documents: Iterable[Any] = (),
        config: GraphStrataConfig | dict[str, Any] | None = None,
        persist_dir: str | Path | None = None,
        embedder: Embedder | str | None = None,
        show_progress: bool = False,
        paths: Iterable[str | Path] = (),
        llm: LLMInput | None = None,
        runner: Runner | None = None,
    ) -> GraphStrata:
        """Index ``documents`` and the files under ``paths``.

        Args:
            documents: texts (a ``str`` is always the text itself, never a file name),
                :class:`pathlib.Path` s (``.txt``/``.md``/``.jsonl`` files or folders), dicts or
                :class:`Document` s (see :mod:`graphstrata.loaders`); document ids are kept,
                texts without one get ``"doc-<content hash>"``.
            config: a :class:`GraphStrataConfig` or a dict of its fields.
            persist_dir: when given, the index is persisted there (atomically) once built.
            embedder: any :class:`Embedder`; the offline MiniLM when ``None`` or ``"default"``;
                ``"fast"``: a static embedder distilled from it (:mod:`graphstrata.static_embedder`).
            show_progress: print a progress bar per stage (stderr).
            paths: files or folders to read (``str`` or ``Path``), after ``documents``.
            llm: an LLM (:class:`graphstrata.llm.LLM`, a plain ``str -> str`` callable, or an
                :class:`~graphstrata.llm.LLMClient`; a LlamaIndex ``LLM`` / LangChain chat model
                through its package's adapter). With one the build runs the papers' LLM steps
                (:func:`~graphstrata.indexing.build_state`): LLM extraction, community reports,
                HiRAG summary entities; their calls and tokens are :attr:`build_usage`. With a
                ``persist_dir`` every response is cached in ``persist_dir/llm-cache.sqlite`` as
                it arrives, so an interrupted build run again resumes without paying twice and
                a rebuild makes zero calls. The LLM stays attached for query-time steps and
                :meth:`answer`. ``None``: the offline pipeline.
            runner: where chunking, embedding, extraction and the build's LLM calls run
                (:mod:`graphstrata.runner`): ``None`` in this process;
                :class:`graphstrata.ray_runner.RayRunner` on a Ray cluster (the same index).
                Kept as :attr:`runner` for later inserts and deletes.

        Returns:
            The built index.

        Raises:
            ValueError: empty corpus (no document, or no text in any), bad config, bad files
                (see :func:`~graphstrata.loaders.load_documents`), a document over
                ``config.max_document_chars``, embedder output of the wrong shape. Nothing is
                written to ``persist_dir`` on failure.
            FileNotFoundError: a path that does not exist.
            FileExistsError: ``persist_dir`` is a file or a non-empty non-index directory.
            TypeError: ``llm`` is not an LLM or callable (a framework object names its adapter);
                ``runner`` is not a runner; a RayRunner cannot serialise the embedder or LLM.
            graphstrata.llm.LLMError: an LLM call failed after its retries.
        """
        cfg = as_config(config)
        docs = load_documents(documents, paths=paths, max_document_chars=cfg.max_document_chars)
        index = store.IndexDirectory.checked(persist_dir) if persist_dir is not None else None
        client = _llm_client(llm, cfg, index)
        emb = default_embedder() if embedder in (None, "default") else resolve_embedder(embedder)
        with use_runner(runner):
            self = cls(store.as_persisted(build_state(docs, cfg, emb, show_progress=show_progress, llm=client)))
        self.runner = runner
        if persist_dir is not None:
            self.persist(persist_dir)
        return self

    # -- persistence -------------------------------------------------------------------------
    def persist(self, persist_dir: str | Path) -> Path:
        """Write the current state to ``persist_dir`` as its next version, atomically, with
        its derived structures (:func:`graphstrata.structures.registry.prepare` builds any missing).

        A crash at any instruction leaves the previous version current and loadable; readers
        in other processes see the old or the new version, never a mix (:mod:`graphstrata.store`).

        Returns:
            The resolved directory.

        Raises:
            FileExistsError: ``persist_dir`` is a file or a non-empty non-index directory.
            ValueError: a record SQLite cannot store (named); an empty index (:meth:`empty`:
                insert documents first).
            OSError: the disk write failed (the previous version stays current).
            graphstrata.store.ConcurrentWriteError: another writer held the directory's lock
                past :attr:`write_timeout`.

        An LLM client's in-memory response cache (an index built without a ``persist_dir``, as
        the LlamaIndex and LangChain packages build) moves into ``persist_dir/llm-cache.sqlite``,
        where :meth:`load` finds it; a cache already in a file stays where it is.

        A state persists whole: into a directory it was not read from, it replaces what is
        there (like a new build); into its own :attr:`persist_dir`, it writes nothing when
        another writer persisted a newer version since (that version holds this instance's
        writes: writing this state again would drop the other writer's).
        """
        with self._write_lock:
            own = self._index is not None and self._index.path == Path(persist_dir).resolve()
            index = self._index if own else store.IndexDirectory(persist_dir)
            with index.locked(self.write_timeout, check=True):
                if own and index.stale():
                    # this state is an older version of this very directory (each write is persisted as it
                    # happens); a newer one by another writer is current: writing this again would roll it back
                    log.info("persist: %s already holds a newer version (%s) than this instance's (%s); "
                             "nothing written", index.path, index.current(), index.base)
                    return index.path
                derived.prepare(self.state)  # an index loaded from an older schema gains them here
                path = store.save_state(self.state, index)
                self._index = index
                index.keep_cache(self.state.llm)
            return path

    @classmethod
    def load(
        cls,
        persist_dir: str | Path,
        embedder: Embedder | None = None,
        llm: LLMInput | None = None,
        runner: Runner | None = None,
        warm_up: bool = True,
    ) -> GraphStrata:
        """Open the current version of a persisted index (leftovers of interrupted writes are
        cleaned up first when no writer holds it, :func:`graphstrata.store.recover`).

        Args:
            persist_dir: a directory written by :meth:`persist`.
            embedder: the embedder to embed queries with; must have the persisted id and
                dimension. ``None``: the offline default, if that is what built the index.
            llm: an LLM for query-time steps and :meth:`answer` (as in :meth:`build`), with the
                index's response cache; ``None``: retrieval runs offline.
            runner: where later inserts / deletes / rebuilds run their per-chunk stages (:meth:`build`).
            warm_up: run one query through each method first, so a user's first query costs
                what the others cost (:func:`graphstrata.retrieval.warm_up`, ~0.2 s at 10⁶
                chunks: ArchRAG only with an ``llm``; only ``bm25`` when the embedder is neither
                a packaged preset nor ``local = True``, so no embedding API is called).

        Raises:
            FileNotFoundError: the directory does not exist.
            ValueError: not an index, an invalid manifest, a corrupt or truncated file (named
                in the message), an unsupported schema version, broken references between
                records, bad vectors.
            graphstrata.models.EmbedderMismatchError: (a ``ValueError``) an embedder whose
                id/dimension differs from the one the index was built with, or none given for
                an index built with an embedder the core cannot load by itself.
        """
        index = store.IndexDirectory(persist_dir)
        index.recover()
        self = cls(_opened(index, embedder, llm, warm_up))
        self._index = index  # its base: the version read (unknown when a writer switched it meanwhile)
        self.runner = runner
        return self

    def refresh(self) -> bool:
        """Load the persist directory's current version when another writer switched it since
        this instance read or wrote its own (queries in flight finish on the previous state).
        Writes do this by themselves; call it to see the others' writes in queries, or before
        resolving ids that another worker added.

        Returns:
            Whether a newer version was loaded (``False`` without a :attr:`persist_dir`).

        Raises:
            ValueError, OSError: as :meth:`load`, for a directory that became unreadable.
        """
        if self._index is None:
            return False
        with self._write_lock:
            if not self._index.stale():
                return False
            self._reload()
            return True

    @contextmanager
    def _writing(self) -> Iterator[EngineState]:
        """The base state of a write (the caller holds ``_write_lock``): a persist directory's
        lock is held until the write is published, another writer's newer version loaded first."""
        index = self._index
        with index.locked(self.write_timeout) if index is not None else nullcontext():
            if index is not None and index.stale():
                self._reload()
            yield self.state

    def _reload(self) -> None:
        """Replace the state by the persist directory's current version (caller holds the
        directory's write lock), keeping this instance's embedder and LLM."""
        assert self._index is not None
        self._state = _opened(self._index, self.state.embedder, self.state.llm, True, reload=True)

    @property
    def build_usage(self) -> dict[str, Any]:
        """LLM calls and tokens of the build that made the current index, per stage:
        ``{"stages": {stage: {"calls", "cached", "prompt_tokens", "completion_tokens",
        "estimated", "skipped"}}, "total": {...}}``; ``{}`` for an offline build. ``calls``
        reached the model, ``cached`` came from the response cache (free); ``estimated`` is
        true when the LLM reported no usage and tokens were counted as ``chars / 4``."""
        return dict(self.state.build_usage)

    @property
    def llm(self) -> LLMClient | None:
        """The :class:`~graphstrata.llm.LLMClient` attached by ``build`` / ``load`` (or ``None``)."""
        if self._empty_pending():
            return self._pending.llm
        return self.state.llm

    def attach_llm(self, llm: LLMInput | None) -> None:
        """Attach (or, with ``None``, detach) the LLM used by query-time LLM steps, by
        :meth:`answer` by default, and by later inserts / deletes of an LLM-built index.

        The response cache is ``persist_dir/llm-cache.sqlite`` when the index is persisted.
        Swapped in like a write (queries in flight finish on the previous state); the new state
        keeps the registered derived structures (:mod:`graphstrata.structures.registry`: functions of the
        records alone) and drops the rest of the cache (HiRAG's LLM summary entities are
        rebuilt on first use, from the response cache when it has them).

        Raises:
            TypeError: ``llm`` is not an LLM or callable (a framework object names its adapter).
        """
        with self._write_lock:
            state = self.state
            client = _llm_client(llm, state.config, self._index)
            self._state = dataclasses.replace(state, llm=client, derived_seed=store.registered_derived(state))

    # -- answers -----------------------------------------------------------------------------
    @overload
    def answer(
        self, query: str, method: str = ..., llm: LLMInput | None = ..., k: int = ...,
        filters: Mapping[str, Any] | None = ..., *, stream: Literal[False] = ..., **options: Any,
    ) -> Answer: ...

    @overload
    def answer(
        self, query: str, method: str = ..., llm: LLMInput | None = ..., k: int = ...,
        filters: Mapping[str, Any] | None = ..., *, stream: Literal[True], **options: Any,
    ) -> StreamingAnswer: ...

    def answer(
        self,
        query: str,
        method: str = "archrag",
        llm: LLMInput | None = None,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        *,
        stream: bool = False,
        **options: Any,
    ) -> Answer | StreamingAnswer:
        """Retrieve with ``method`` and answer with that method's own generation step.

        ArchRAG: adaptive filtering-based generation (one filter call per layer, scored
        points, merge call; ``seed-archrag.md`` §3.2); LightRAG / HiRAG: their answer prompts
        over their contexts; AGRAG: over the reasoning path; dense / bm25 / hybrid: a plain RAG
        prompt over the chunks (:mod:`graphstrata.generation`). Retrieval steps that need an
        LLM (LightRAG keywords, AGRAG fact filter) use the same LLM. Every answer prompt
        numbers its passages (ArchRAG: its analyst reports) and asks the model to cite them
        as ``[n]``; :attr:`Answer.citations` maps the numbers the text cites to chunk and
        document ids.

        Args:
            query: the question.
            method: one of :attr:`methods`.
            llm: the LLM to answer with (as in :meth:`build`); ``None``: the one attached by
                ``build`` / ``load``.
            k: chunk hits retrieved (the method's context hits come too).
            filters: a metadata filter, as in :meth:`retrieve`.
            stream: return a :class:`~graphstrata.answers.StreamingAnswer` instead: retrieval
                and every LLM step but the last run now; the last call (the answer, ArchRAG's
                merge) streams while you iterate it, and its ``answer`` is then the
                :class:`Answer` this call returns without ``stream``. An LLM that cannot
                stream (no ``stream`` method; plain callables) gives the text in one piece.
            **options: the method's answer options
                (:func:`graphstrata.generation.generation_options`: ``response_type``,
                ``max_context_tokens``; ArchRAG also ``self_answer``, ``general_knowledge``)
                and its retrieval options (as in :meth:`retrieve`).

        Returns:
            An :class:`Answer`: ``text``, the ``hits`` the answer was generated from,
            ``usage`` (calls and tokens of this query alone, per stage, retrieval included),
            ``fallbacks`` and ``citations``; with ``stream=True`` a ``StreamingAnswer``.

        Raises:
            ValueError: no LLM given or attached; everything :meth:`retrieve` raises.
            graphstrata.llm.LLMError: an LLM call failed after its retries (with
                ``stream=True``, the last call's failure is raised while iterating).
        """
        pending = self._pending_answer(query, method, llm, k, filters, options)
        return StreamingAnswer(pending) if stream else pending.send()

    def _pending_answer(
        self, query: str, method: str, llm: Any, k: int, filters: Mapping[str, Any] | None, options: dict[str, Any]
    ) -> PendingAnswer:
        """Retrieval and every answer step but the last LLM call, counted in a new ledger."""
        from .generation import generation_options, prepare
        from .llm import Ledger, usage_scope

        state = self.state
        client = self._client(llm, state)
        if client is None:
            raise ValueError(
                "answer() needs an LLM: pass llm=..., or build()/load() the index with llm=..."
            )
        if not isinstance(method, str) or method not in METHODS:
            raise ValueError(f"unknown method {method!r}; known methods: {', '.join(METHODS)}")
        answer_keys = generation_options(method)
        options = dict(options)
        gen_options = {k_: options.pop(k_) for k_ in list(options) if k_ in answer_keys}
        with usage_scope(Ledger()) as ledger:
            hits = self.retrieve(query, method=method, k=k, filters=filters, llm=client, **options)
            step = prepare(method, query, hits, client, **gen_options)
        return PendingAnswer(query, method, client, ledger, step)

    @overload
    async def aanswer(
        self, query: str, method: str = ..., llm: LLMInput | None = ..., k: int = ...,
        *, stream: Literal[False] = ..., **options: Any,
    ) -> Answer: ...

    @overload
    async def aanswer(
        self, query: str, method: str = ..., llm: LLMInput | None = ..., k: int = ...,
        *, stream: Literal[True], **options: Any,
    ) -> AsyncStreamingAnswer: ...

    async def aanswer(
        self, query: str, method: str = "archrag", llm: LLMInput | None = None, k: int = 10, *,
        stream: bool = False, **options: Any,
    ) -> Answer | AsyncStreamingAnswer:
        """:meth:`answer` awaited: the retrieval and prompt work run in a worker thread, the
        LLM calls on this event loop when the LLM has an async API
        (:func:`graphstrata.llm.run_in_worker_thread`), so concurrent ``aanswer`` calls overlap
        their LLM calls on one loop.

        With ``stream=True``: every step but the last call is awaited here, and an
        :class:`~graphstrata.answers.AsyncStreamingAnswer` returned; ``async for`` it for the
        answer's pieces (through the LLM's ``astream`` on this loop, or its blocking
        ``stream`` in a worker thread; one piece when it cannot stream), then read its
        ``answer``. Raises as :meth:`answer`."""
        if not stream:
            return await run_in_worker_thread(self.answer, query, method, llm, k, **options)
        filters = options.pop("filters", None)
        pending = await run_in_worker_thread(self._pending_answer, query, method, llm, k, filters, options)
        return AsyncStreamingAnswer(pending)

    def _client(self, llm: Any, state: EngineState) -> Any:
        """``llm`` as a client sharing the index's response cache; else the attached one."""
        from .llm import LLMClient

        if llm is None:
            return state.llm
        if isinstance(llm, LLMClient):
            return llm
        attached = state.llm
        if attached is not None:
            return LLMClient(
                llm, cache=attached.cache, concurrency=attached.concurrency,
                max_failure_share=getattr(attached, "max_failure_share", 0.5),
                context_window=state.config.llm_context_window,
            )
        return _llm_client(llm, state.config, self._index)

    # -- updates -----------------------------------------------------------------------------
    def insert(
        self, documents: Iterable[Any] = (), show_progress: bool = False, paths: Iterable[str | Path] = ()
    ) -> list[str]:
        """Add documents incrementally (:mod:`graphstrata.indexing.update`); an id already indexed
        is an update.

        Only the new documents are chunked, embedded and extracted; their entities merge into
        the knowledge graph, the community hierarchy is repaired locally (new entities join
        their best-linked community, drifted communities are re-clustered, touched summaries
        and their parents are refreshed) and vectors are added to the C-HNSW copies of the
        next state. A document with an indexed id and the same text and metadata is a no-op;
        with other content it replaces the indexed one (and moves to the end of the document
        order). When the index has a ``persist_dir`` the new state is persisted there, as one
        atomic version, before it becomes visible; if anything fails, nothing changes.

        Args:
            documents, paths: as in :meth:`build`.
            show_progress: progress bars per stage (stderr).

        Returns:
            The ids of the given documents, in input order (unchanged ones included).

        Raises:
            ValueError: invalid inputs (see :meth:`build`), or two given documents share an id.
            OSError: persisting failed (the index is unchanged, in memory and on disk).
            graphstrata.llm.LLMError: an LLM call failed (LLM-built index).
        """
        with self._write_lock:
            if self._empty_pending():
                return self._first_insert(documents, paths, show_progress)
        with self._write_lock, self._writing() as state:
            new = load_documents(
                documents, paths=paths, taken=state.documents, max_document_chars=state.config.max_document_chars
            )
            ids = [d.id for d in new]
            dup = [i for i, n in Counter(ids).items() if n > 1]
            if dup:
                raise ValueError(f"duplicate document id(s) in one insert: {dup[:5]}")
            changed = [d for d in new if state.documents.get(d.id) != d]  # same id, text and metadata: no change
            if changed:
                self._commit(state, changed, (), show_progress)
            return ids

    def _first_insert(self, documents: Iterable[Any], paths: Iterable[str | Path], show_progress: bool) -> list[str]:
        """The first insert into an :meth:`empty` index: a full build with its settings."""
        pending = self._pending
        docs = load_documents(documents, paths=paths, max_document_chars=pending.config.max_document_chars)
        ids = [d.id for d in docs]
        if not docs:
            return ids
        with use_runner(self.runner):
            new = build_state(docs, pending.config, pending.embedder, show_progress=show_progress, llm=pending.llm)
        new = store.as_persisted(new)
        if self._index is not None:
            with self._index.locked(self.write_timeout, check=True):
                store.save_state(new, self._index)
        self._state = new
        self._pending = None
        return ids

    def upsert(
        self, documents: Iterable[Any] = (), show_progress: bool = False, paths: Iterable[str | Path] = ()
    ) -> list[str]:
        """Same as :meth:`insert` (kept for callers written when insert refused existing ids).

        Returns:
            The upserted document ids, in input order.
        """
        return self.insert(documents, show_progress=show_progress, paths=paths)

    def delete(self, document_ids: str | Iterable[str], show_progress: bool = False) -> int:
        """Remove documents by id, incrementally (:mod:`graphstrata.indexing.update`).

        Their chunks go; entities and relations that only they supported go, the others
        shrink (chunks, weights, descriptions); community members follow, empty communities
        are removed and touched summaries refreshed; vectors are marked deleted in the next
        state's C-HNSW copies (compacted past :data:`graphstrata.index.COMPACT_FRACTION`).
        Persisted like :meth:`insert`.

        Args:
            document_ids: ids to remove. A single ``str`` is one id (``delete("abc")`` removes
                document ``"abc"``, not ``"a"``, ``"b"``, ``"c"``).

        Returns:
            The number of documents removed.

        Raises:
            KeyError: an id is not in the index (named; nothing is deleted).
            ValueError: removing them would leave the index empty; an id that is not a string.
        """
        if isinstance(document_ids, str):
            document_ids = [document_ids]
        ids = list(dict.fromkeys(document_ids))
        bad = [d for d in ids if not isinstance(d, str)]
        if bad:
            raise ValueError(f"document ids must be strings, got {bad[0]!r}")
        with self._write_lock:
            if self._empty_pending():
                if ids:
                    raise KeyError(f"document id(s) not in the index: {ids[:5]} (the index is empty)")
                return 0
        with self._write_lock, self._writing() as state:
            unknown = [d for d in ids if d not in state.documents]
            if unknown:
                raise KeyError(f"document id(s) not in the index: {unknown[:5]}")
            if not ids:
                return 0
            if len(ids) == len(state.documents):
                raise ValueError("cannot delete every document: an index needs at least one")
            self._commit(state, [], ids, show_progress)
            return len(ids)

    def rebuild(self, show_progress: bool = False) -> None:
        """Refit everything over the current documents: extraction TF-IDF statistics, the whole
        community hierarchy, both C-HNSW (compacted), BM25; chunk vectors are reused. Resets
        the drift counters (:meth:`stats` ``["drift"]``) and increments the frozen statistics'
        version. Persisted like :meth:`insert`.

        Raises:
            ValueError: the index was built with an LLM and none is attached (load it with
                ``llm=``).
            OSError: persisting failed (the index is unchanged).
            graphstrata.llm.LLMError: an LLM call failed (LLM-built index).
        """
        from .indexing import rebuild_state

        with self._write_lock, self._writing() as state, use_runner(self.runner):
            self._check_llm(state)
            new = rebuild_state(state, show_progress=show_progress)
            self._publish(new, state)

    def _check_llm(self, state: EngineState) -> None:
        if state.llm_id is not None and state.llm is None:
            raise ValueError(
                f"this index was built with the LLM {state.llm_id!r}: load it with llm=... to insert, "
                "upsert, delete or rebuild (an update without it would extract statistically)"
            )

    def _commit(
        self, state: EngineState, upserts: list[Document], deletes: Sequence[str], show_progress: bool
    ) -> None:
        """Build the next state incrementally, persist it if persisted, then swap it in."""
        from .indexing import update_state

        self._check_llm(state)
        with use_runner(self.runner):
            new = update_state(state, upserts, deletes, show_progress=show_progress)
        self._publish(new, state)

    def _publish(self, new: EngineState, previous: EngineState) -> None:
        """Prepare ``new`` (compact records, derived structures built or updated from
        ``previous``'s), persist it when the index is persisted, then swap it in."""
        new = store.as_persisted(new, previous)
        if self._index is not None:
            store.save_state(new, self._index)  # the caller holds its write lock (_writing)
        self._state = new  # the one assignment readers can observe

    # -- retrieval ---------------------------------------------------------------------------
    @property
    def methods(self) -> tuple[str, ...]:
        """Names of the retrieval methods available."""
        return tuple(METHODS)

    def retrieve(
        self,
        query: str,
        method: str = "archrag",
        k: int = 5,
        kinds: Sequence[str] | None = None,
        filters: Mapping[str, Any] | None = None,
        context_k: int | None = None,
        min_score: float | None = None,
        *,
        request: RetrieveRequest | None = None,
        **options: Any,
    ) -> list[Hit]:
        """Retrieve for ``query`` (:mod:`graphstrata.retrieval` holds the query path and the
        contract every adapter relies on).

        The arguments are checked once, into a :class:`~graphstrata.retrieval.RetrieveRequest`
        (:func:`~graphstrata.retrieval.check_retrieve_args`); a caller that already holds one
        (the framework adapters) passes it as ``request=`` instead of the other arguments.

        Args:
            query: the question (non-empty str).
            method: one of :attr:`methods` (``"archrag"``, ``"dense"``, ``"bm25"``,
                ``"hybrid"``, ...).
            k: at most this many chunk hits (> 0); fewer only when the index (or the filter)
                has fewer chunks, or ``min_score`` drops some.
            kinds: which hit kinds to return; ``None`` = the ``k`` chunk hits followed by the
                method's context hits (entities, relations, communities, paths).
            filters: a metadata filter on documents (:mod:`graphstrata.filters`, e.g.
                ``{"author": "Ada", "year": {"$gte": 2020}}``), applied inside retrieval: the
                ``k`` chunk hits are the best ``k`` of the matching documents' chunks, and
                context hits are kept only when they come from a matching document. ``None``:
                no filter.
            context_k: at most this many context hits, best score first across kinds;
                ``None`` (default): every context hit, in the method's order (kind, then score).
            min_score: drop hits whose score (in [0, 1]) is below it, after the cuts;
                ``None``: no threshold.
            **options: method options (see each method's ``defaults``), e.g.
                ``k_per_layer=3`` for ArchRAG; every method also takes ``explain=True``, which
                sets each hit's :attr:`~graphstrata.types.Hit.explain` (why it came back,
                :mod:`graphstrata.methods.explain`) without changing the ranking.
            request: an already checked request; then no other argument but ``query`` may
                be given.

        Returns:
            Hits; chunk hits best first with ``metadata`` holding ``document_id``,
            ``chunk_index``, ``document_metadata`` and ``method``.

        Raises:
            ValueError: empty query, a query over ``config.max_query_chars``, ``k`` or
                ``context_k`` ≤ 0 or not an int, ``min_score`` outside [0, 1], a method that is
                not one of :attr:`methods` (any non-str too), unknown kind, unknown option or an
                option of the wrong type or range, an invalid filter; ``request`` together
                with other arguments.
        """
        if request is None:
            request = check_retrieve_args(method, k, kinds, context_k, min_score, filters, options)
        elif options or (method, k, kinds, filters, context_k, min_score) != ("archrag", 5, None, None, None, None):
            raise ValueError("retrieve takes either request= or the other arguments, not both")
        if self._empty_pending():
            if not isinstance(query, str) or not query.strip():
                raise ValueError("query must be a non-empty string")
            return []  # an empty index has nothing to return
        state = self.state  # one reference: everything below reads this state only
        if request.options.get("llm") is not None:
            request = dataclasses.replace(
                request, options={**request.options, "llm": self._client(request.options["llm"], state)}
            )
        return retrieval.retrieve(state, query, request)

    async def aretrieve(self, query: str, *args: Any, **kwargs: Any) -> list[Hit]:
        """:meth:`retrieve` awaited, with the same arguments (a ``request=`` or the keyword
        form): the method runs in a worker thread, its query-time LLM steps (LightRAG
        keywords, AGRAG fact filter) on this event loop when the LLM has an async API
        (:func:`graphstrata.llm.run_in_worker_thread`); ``asyncio.gather`` of N queries
        overlaps their LLM calls on one loop."""
        return await run_in_worker_thread(self.retrieve, query, *args, **kwargs)

    def document_ids_of(self, chunk_ids: Iterable[str]) -> list[str]:
        """Distinct document ids of ``chunk_ids``, in order (current state)."""
        return self.state.document_ids_of(chunk_ids)

    def stats(self, top: int = 10) -> dict[str, Any]:
        """What was built: counts, community sizes and titles per layer, the top entities by
        degree, build seconds and LLM cost by stage (:func:`graphstrata.inspection.describe`
        has the keys and units).

        Raises:
            ValueError: ``top`` is not a positive integer.
        """
        from .inspection import describe

        return describe(self.state, top=top)

    def to_networkx(self) -> nx.DiGraph:
        """The knowledge graph and community hierarchy as a networkx ``DiGraph``: entity and
        community nodes, relation and membership edges (:func:`graphstrata.inspection.to_networkx`)."""
        from .inspection import to_networkx

        return to_networkx(self.state)

    def __repr__(self) -> str:
        if self._state is None:
            return "GraphStrata(empty)"
        s = self.state.stats()
        return (f"GraphStrata(documents={s['documents']}, chunks={s['chunks']}, entities={s['entities']}, "
                f"layers={s['communities_per_layer']})")


@dataclass(frozen=True)
class _Pending:
    """The settings an :meth:`GraphStrata.empty` index builds with on its first insert."""

    config: GraphStrataConfig
    embedder: Embedder
    llm: Any


def _load_pickled(persist_dir: str, embedder: Embedder | None, llm: Any) -> GraphStrata:
    """Unpickle a :class:`GraphStrata` (see ``GraphStrata.__reduce__``)."""
    return GraphStrata.load(persist_dir, embedder=embedder, llm=llm)


def _opened(
    index: store.IndexDirectory, embedder: Embedder | None, llm: Any, warm_up: bool, reload: bool = False
) -> EngineState:
    """The current version of ``index`` as a loaded state, ``llm`` attached (as in
    :meth:`GraphStrata.load`; ``reload``: this instance's own client, reloading its directory),
    derived structures prepared, warmed up when ``warm_up``. Raises as :meth:`GraphStrata.load`."""
    where = index.path if reload else index.named
    embedder_for = store.matching_embedder(where, embedder, reload, default=lambda: default_embedder())
    state = store.load_state(index, embedder_for, stored_config)
    if llm is not None:  # only once it is known to be an index: the cache lives in it
        client = llm if reload else _llm_client(llm, state.config, index)
        state = dataclasses.replace(state, llm=client, derived_seed=store.registered_derived(state))
    derived.prepare(state)  # what an update's (or an older schema's) index lacks: built now, not by a query
    if warm_up:
        retrieval.warm_up(state)
    return state


def _llm_client(llm: Any, config: GraphStrataConfig | None, index: store.IndexDirectory | None) -> Any:
    """``llm`` as an :class:`~graphstrata.llm.LLMClient` (``None`` stays ``None``) with the
    response cache at ``index``'s :attr:`~graphstrata.store.IndexDirectory.cache_path` (in
    memory without a directory) and ``config.llm_concurrency`` calls in flight. A client
    given as is keeps its own cache."""
    if llm is None:
        return None
    from .llm import DEFAULT_CONCURRENCY, LLMClient, ResponseCache

    if isinstance(llm, LLMClient):
        return llm
    cache = ResponseCache(index.cache_path) if index is not None else ResponseCache()
    if config is None:
        return LLMClient(llm, cache=cache, concurrency=DEFAULT_CONCURRENCY)
    return LLMClient(
        llm, cache=cache, concurrency=config.llm_concurrency, max_failure_share=config.llm_max_failure_share,
        context_window=config.llm_context_window,
    )
