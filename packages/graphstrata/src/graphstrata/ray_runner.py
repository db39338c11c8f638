"""Indexing past one machine: the per-chunk stages on a Ray cluster (issue 19).

``GraphStrata.build(docs, runner=RayRunner())`` (or ``graphstrata index ... --ray [ADDRESS]``)
runs the same stages as a local build (:mod:`graphstrata.indexing`); what changes is where the
per-chunk ones run:

==============================  ============================================================
on the cluster                  chunking, chunk / entity / community embedding, statistical
                                extraction records — one pool of CPU (or GPU) actors, each
                                holding the embedder; every LLM call of the build (extraction,
                                gleaning, description summaries, AGRAG triples, community
                                reports, HiRAG summary entities) — one pool of LLM actors,
                                each holding the user's LLM with ``calls_in_flight`` calls at
                                once and the client's retries
on the driver (this process)    document loading, the extraction TF-IDF fit, merging records
                                into the knowledge graph, Leiden clustering, C-HNSW and BM25
                                construction, persisting; the LLM response cache and the
                                token ledger (cache hits never leave the driver; each response
                                is cached and counted as it arrives)
==============================  ============================================================

Results come back in input order and the driver runs the order-dependent steps, so the index
is the one a local build makes from the same input (chunk ids, entities, relations, community
membership; fixed seeds) — with an embedder that gives the same vector for a text whatever
batch and process it runs in (the test's ``HashEmbedder`` does; a torch model may differ in the
last bits between thread counts or devices).

Faults: actors are restarted and their unfinished calls retried by Ray (``max_retries`` times),
so a worker process killed mid-build costs its in-flight calls again and nothing else: each
result is taken once, by position. LLM answers already received are in the driver's response
cache, so a build interrupted on the driver and run again resumes without paying twice.

Ray is an optional extra (``pip install graphstrata[ray]``); this module is the only one that
imports it. Ray Core actor pools (:class:`ray.util.ActorPool`) run every stage: the per-chunk
stages are ordered maps over Python records (chunks, extraction records) that Ray Data would
convert to Arrow and back; tasks on the same actors keep the embedder loaded once per worker.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

try:
    import ray
    from ray.util import ActorPool
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("RayRunner needs Ray: pip install 'graphstrata[ray]'") from exc

from .llm import LLMClient, LLMError, LLMRequest, LLMResponse

#: chunks per statistical-extraction task, texts per embedding call come from the build
#: (:data:`graphstrata.indexing.EMBED_BATCH`); slices per worker for chunking / extraction
SLICES_PER_WORKER = 4
#: most chunks in one statistical-extraction task
MAX_SLICE = 2_000
#: LLM requests in one actor call, as a multiple of the calls in flight per actor
LLM_BATCH_FACTOR = 4


def _unsendable(obj: Any, what: str, exc: Exception) -> TypeError:
    """The one clear error for an ``obj`` that cannot travel to a Ray worker."""
    return TypeError(
        f"RayRunner cannot send the {what} {type(obj).__name__} to Ray workers (it must be "
        f"picklable by cloudpickle): {type(exc).__name__}: {exc}"
    )


def _check_picklable(obj: Any, what: str) -> None:
    """Raise :func:`_unsendable` when ``obj`` cannot be pickled (for arguments Ray pickles
    later, inside ``.remote()``)."""
    try:
        ray.cloudpickle.dumps(obj)
    except Exception as exc:  # noqa: BLE001 - pickling errors come in many types
        raise _unsendable(obj, what, exc) from exc


def _kill(actor: Any) -> None:
    try:
        ray.kill(actor)
    except Exception:  # noqa: BLE001, S110 - already gone
        pass


def _resolve(ref_box: list[Any]) -> Any:
    """A value sent as ``[ObjectRef]`` (a boxed ref is not fetched before the call starts)."""
    return ray.get(ref_box[0])


@ray.remote
class _StageWorker:
    """One CPU (or GPU) worker of the per-chunk stages; holds the embedders it was sent."""

    def __init__(self) -> None:
        self._embedders: dict[int, Any] = {}

    def pid(self) -> int:
        return os.getpid()

    def _embedder(self, token: int, ref_box: list[Any]) -> Any:
        emb = self._embedders.get(token)
        if emb is None:
            emb = self._embedders[token] = _resolve(ref_box)
        return emb

    def chunk(self, token: int, ref_box: list[Any], documents: list[Any], chunk_size: int,
              chunk_overlap: int, max_document_chars: int | None, chunking: str = "tokens") -> list[Any]:
        from .chunking import chunk_documents

        return chunk_documents(
            documents, chunk_size, chunk_overlap, embedder=self._embedder(token, ref_box),
            max_document_chars=max_document_chars, chunking=chunking,
        )

    def embed(self, token: int, ref_box: list[Any], texts: list[str]) -> np.ndarray:
        return np.asarray(self._embedder(token, ref_box).embed(texts), dtype=np.float32)

    def chunk_records(self, extractor: Any, chunks: list[Any], titles: dict[str, str],
                      tfidf: Any, terms: list[list[str]] | None) -> list[Any]:
        return extractor.chunk_records(chunks, titles, tfidf, terms=terms)


@ray.remote
class _LLMWorker:
    """One LLM worker: the user's LLM behind an :class:`LLMClient` (retries, at most
    ``calls_in_flight`` calls at once; no cache of its own beyond this process)."""

    def __init__(self, llm: Any, calls_in_flight: int, attempts: int) -> None:
        self.client = LLMClient(llm, concurrency=calls_in_flight, attempts=attempts)
        self.pool = ThreadPoolExecutor(calls_in_flight, thread_name_prefix="graphstrata-ray-llm")

    def pid(self) -> int:
        return os.getpid()

    def complete(
        self, positions: list[int], requests: list[LLMRequest], stage: str
    ) -> tuple[list[int], list[LLMResponse | str]]:
        """``(positions, outcomes)``: each request's response, or its error message."""

        def one(req: LLMRequest) -> LLMResponse | str:
            try:
                return self.client.request(req, stage)
            except LLMError as exc:
                return str(exc)

        return positions, list(self.pool.map(one, requests))


class RayRunner:
    """Run the per-chunk indexing stages and the build's LLM calls on a Ray cluster.

    Pass it to :meth:`graphstrata.GraphStrata.build` (``runner=``); the index keeps it for
    ``insert`` / ``delete`` / ``rebuild``. See the module docstring for what runs where.

    Args:
        address: the cluster to join (``"ray://head:10001"``, ``"10.0.0.5:6379"``, ``"auto"``);
            ``None`` starts a local Ray on this machine. When Ray is already initialised in
            this process, that cluster is used as it is.
        num_workers: stage actors (one CPU each) and LLM actors; ``None``: the cluster's free
            CPUs when the stage pool is created.
        calls_in_flight: LLM calls at once per LLM actor; ``None``: the client's
            ``concurrency`` (``config.llm_concurrency``). LLM actors reserve no CPU (they wait
            on the network) and are spread over the nodes.
        max_retries: restarts of a dead actor, and retries of the calls it had in flight.
        start_timeout: seconds to wait for the actors of a pool to start (a cluster whose
            CPUs other actors hold would otherwise wait forever).
        init_kwargs: extra keyword arguments of ``ray.init`` (``num_cpus``,
            ``object_store_memory``, ``runtime_env``, ...).

    The stage actors take one GPU each (a share when there are fewer GPUs than workers) when
    the cluster has GPUs; the embedder then runs on it (:class:`~graphstrata.models.
    MiniLMEmbedder` picks CUDA when torch sees one).

    Raises:
        ValueError: ``num_workers`` or ``calls_in_flight`` < 1, ``max_retries`` < 0,
            ``start_timeout`` ≤ 0.
        RuntimeError (on first use): the actors did not start within ``start_timeout``.
        TypeError (on first use): the embedder or LLM cannot be serialised for the workers.
        ConnectionError (on first use): Ray could not start or reach ``address``.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        num_workers: int | None = None,
        calls_in_flight: int | None = None,
        max_retries: int = 3,
        start_timeout: float = 120.0,
        init_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        for label, value, low in (("num_workers", num_workers, 1), ("calls_in_flight", calls_in_flight, 1)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise ValueError(f"{label} must be an integer >= {low} or None, got {value!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        self.address = address
        self.num_workers = num_workers
        self.calls_in_flight = calls_in_flight
        self.max_retries = max_retries
        if isinstance(start_timeout, bool) or not isinstance(start_timeout, (int, float)) or not start_timeout > 0:
            raise ValueError(f"start_timeout must be a positive number of seconds, got {start_timeout!r}")
        self.start_timeout = float(start_timeout)
        self.init_kwargs = dict(init_kwargs or {})
        self._lock = threading.RLock()
        self._owns_ray = False
        self._stage_actors: list[Any] = []
        self._llm_actors: tuple[Any, tuple[int, int], list[Any]] | None = None  # (llm, settings, actors)
        self._refs: dict[int, tuple[Any, Any]] = {}  # id(obj) -> (obj, ObjectRef): keeps obj alive

    # -- cluster -------------------------------------------------------------------------------
    def _connect(self) -> None:
        if ray.is_initialized():
            return
        kwargs = {"include_dashboard": False, "log_to_driver": False, **self.init_kwargs}
        try:
            ray.init(address=self.address, **kwargs)
        except Exception as exc:  # noqa: BLE001 - Ray raises several types for one cause
            where = self.address or "a local Ray"
            raise ConnectionError(f"RayRunner could not start or join {where}: {type(exc).__name__}: {exc}") from exc
        self._owns_ray = True

    def _workers(self) -> int:
        if self.num_workers is not None:
            return self.num_workers
        if self._stage_actors:
            return len(self._stage_actors)
        return max(1, int(ray.available_resources().get("CPU", 0)))

    def _put(self, obj: Any, what: str) -> Any:
        """``ray.put(obj)`` once per object (kept alive while this runner is)."""
        held = self._refs.get(id(obj))
        if held is not None and held[0] is obj:
            return held[1]
        try:
            ref = ray.put(obj)
        except Exception as exc:  # noqa: BLE001 - pickling errors come in many types
            raise _unsendable(obj, what, exc) from exc
        self._refs[id(obj)] = (obj, ref)
        return ref

    def _embedder_box(self, embedder: Any) -> tuple[int, list[Any]]:
        """``(token, [ref])``: the token is ``id(embedder)``, unique while ``_refs`` holds it
        (actors cache embedders by token; ``close`` drops both together)."""
        return id(embedder), [self._put(embedder, "embedder")]

    def _stage_pool(self) -> ActorPool:
        with self._lock:
            self._connect()
            if not self._stage_actors:
                n = self._workers()
                gpus = float(ray.cluster_resources().get("GPU", 0))
                options: dict[str, Any] = {
                    "num_cpus": 1, "max_restarts": self.max_retries, "max_task_retries": self.max_retries,
                }
                if gpus > 0:
                    options["num_gpus"] = min(1.0, gpus / n)
                actors = [_StageWorker.options(**options).remote() for _ in range(n)]
                self._await_start(actors, "stage")
                self._stage_actors = actors
            return ActorPool(list(self._stage_actors))

    def _llm_pool(self, llm: Any, calls_in_flight: int, attempts: int) -> ActorPool:
        """The LLM actors of ``llm`` (one pool at a time: another LLM or settings replace it)."""
        with self._lock:
            self._connect()
            held = self._llm_actors
            if held is None or held[0] is not llm or held[1] != (calls_in_flight, attempts):
                self._kill_llm_actors()
                _check_picklable(llm, "LLM")  # sent inline: Ray restarts an actor from its creation task
                options = {
                    "num_cpus": 0, "max_restarts": self.max_retries, "max_task_retries": self.max_retries,
                    "scheduling_strategy": "SPREAD",
                }
                actors = [
                    _LLMWorker.options(**options).remote(llm, calls_in_flight, attempts)
                    for _ in range(self._workers())
                ]
                self._await_start(actors, "LLM")
                held = self._llm_actors = (llm, (calls_in_flight, attempts), actors)
            return ActorPool(list(held[2]))

    def _await_start(self, actors: list[Any], kind: str) -> None:
        """Wait until every actor answers, at most ``start_timeout`` seconds; else stop them
        and raise (a cluster without free resources would otherwise hang the build)."""
        ready, _ = ray.wait([a.pid.remote() for a in actors], num_returns=len(actors), timeout=self.start_timeout)
        if len(ready) == len(actors):
            return
        for actor in actors:
            _kill(actor)
        raise RuntimeError(
            f"RayRunner: only {len(ready)} of {len(actors)} {kind} workers started within {self.start_timeout:g} s; "
            f"free CPUs: {ray.available_resources().get('CPU', 0):g} (other actors may hold the cluster's "
            "resources: pass num_workers=, or close the other runner)"
        )

    def _kill_llm_actors(self) -> None:
        if self._llm_actors is not None:
            for actor in self._llm_actors[2]:
                _kill(actor)
        self._llm_actors = None

    def worker_pids(self) -> dict[str, list[int]]:
        """``{"stage": [...], "llm": [...]}``: process ids of the live actors (tests, monitoring)."""
        with self._lock:
            stage = list(self._stage_actors)
            llm = list(self._llm_actors[2]) if self._llm_actors else []
        return {
            "stage": ray.get([a.pid.remote() for a in stage]),
            "llm": ray.get([a.pid.remote() for a in llm]),
        }

    def close(self, shutdown: bool = True) -> None:
        """Stop this runner's actors (it starts new ones if used again); with ``shutdown``,
        also shut Ray down when this runner started it."""
        with self._lock:
            for actor in self._stage_actors:
                _kill(actor)
            self._stage_actors = []
            self._kill_llm_actors()
            self._refs = {}
            if shutdown and self._owns_ray:
                if ray.is_initialized():
                    ray.shutdown()
                self._owns_ray = False

    def __enter__(self) -> RayRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RayRunner(address={self.address!r}, num_workers={self.num_workers!r})"

    # -- stages --------------------------------------------------------------------------------
    def _slices(self, n: int) -> list[range]:
        size = max(1, min(MAX_SLICE, -(-n // (self._workers() * SLICES_PER_WORKER))))
        return [range(i, min(n, i + size)) for i in range(0, n, size)]

    def chunk(self, documents, chunk_size, chunk_overlap, embedder, max_document_chars, chunking="tokens"):
        """Chunk document slices on the stage actors; chunks in document order."""
        documents = list(documents)
        if not documents:
            return []
        pool = self._stage_pool()
        token, box = self._embedder_box(embedder)
        parts = pool.map(
            lambda a, r: a.chunk.remote(token, box, documents[r.start : r.stop], chunk_size, chunk_overlap,
                                        max_document_chars, chunking),
            self._slices(len(documents)),
        )
        return [c for part in parts for c in part]

    def embed(self, embedder, batches):
        """Embed each batch on a stage actor; yields the vectors in batch order."""
        batches = [list(b) for b in batches]
        if not batches:
            return
        pool = self._stage_pool()
        token, box = self._embedder_box(embedder)
        yield from pool.map(lambda a, b: a.embed.remote(token, box, b), batches)

    def chunk_records(self, extractor, chunks, titles, tfidf, terms=None):
        """Statistical extraction records of chunk slices on the stage actors, in chunk order."""
        chunks = list(chunks)
        if not chunks:
            return []
        pool = self._stage_pool()
        tfidf_ref = ray.put(tfidf) if terms is None and tfidf is not None else None
        titles = dict(titles or {})

        def submit(actor: Any, r: range) -> Any:
            part = chunks[r.start : r.stop]
            part_titles = {c.document_id: titles[c.document_id] for c in part if c.document_id in titles}
            part_terms = None if terms is None else [list(t) for t in terms[r.start : r.stop]]
            return actor.chunk_records.remote(extractor, part, part_titles, tfidf_ref, part_terms)

        return [rec for part in pool.map(submit, self._slices(len(chunks))) for rec in part]

    def complete(
        self, llm: Any, requests: Sequence[LLMRequest], stage: str, calls_in_flight: int, attempts: int
    ) -> Iterator[tuple[list[int], list[LLMResponse | str]]]:
        """Complete ``requests`` on the LLM actors (see :meth:`graphstrata.llm.LLMClient.map`);
        yields ``(positions, outcomes)`` per finished batch, in completion order."""
        per_actor = self.calls_in_flight or calls_in_flight
        pool = self._llm_pool(llm, per_actor, attempts)
        size = per_actor * LLM_BATCH_FACTOR
        batches = [list(range(i, min(len(requests), i + size))) for i in range(0, len(requests), size)]

        def submit(actor: Any, idx: list[int]) -> Any:
            return actor.complete.remote(idx, [requests[i] for i in idx], stage)

        yield from pool.map_unordered(submit, batches)
