"""The query path and the adapter contract: one place that checks a retrieval's arguments,
runs the method, pages through a metadata filter, assembles the hits and selects what is
returned.

Every caller — :meth:`graphstrata.GraphStrata.retrieve`, the LlamaIndex retriever, the
LangChain retriever, the CLI — goes through :func:`check_retrieve_args` and
:func:`retrieve`, so what ``k``, ``kinds``, ``context_k``, ``min_score`` and ``filters`` mean
is written once (``docs/python-api.md``, "What the framework adapters promise"):

* ``k``: at most ``k`` chunk hits, best first (fewer only when the index or the filter has
  fewer chunks, or ``min_score`` drops some);
* ``kinds``: which hit kinds come back (``None``: every kind); chunk hits always come first;
* ``context_k``: at most that many graph-context hits (entities, relations, communities,
  paths), best score first across kinds; ``None``: every context hit the method returned, in
  the method's own order (kind, then score);
* ``min_score``: hits scoring below it are dropped, after the two cuts above (a vector
  store's ``score_threshold``);
* ``filters``: a metadata filter on documents (:mod:`graphstrata.filters`), applied before
  ``k`` is cut: the chunk hits are the best ``k`` chunks of the matching documents, and a
  context hit is kept only when one of its documents matches.

Every returned score lies in [0, 1] (:mod:`graphstrata.scores`); the method's own number is in
``hit.metadata["raw_score"]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .config import check_query
from .filters import compile_filter
from .methods import METHODS
from .methods.base import Method, Retrieval
from .models import embed_query, preset_for_id
from .scores import unit
from .state import EngineState
from .structures.provenance import document_rows
from .types import Hit, check_k, check_kinds

__all__ = ["RetrieveRequest", "check_retrieve_args", "retrieve", "retrieval_arguments", "select_hits", "check_min_score"]


@dataclass(frozen=True)
class RetrieveRequest:
    """A retrieval's checked arguments (what :func:`check_retrieve_args` returns).

    Attributes:
        method: a registered method name (``graphstrata.methods.METHODS``).
        k: at most this many chunk hits (> 0).
        kinds: hit kinds to return, ``None`` for every kind.
        context_k: at most this many context hits, ``None`` for all of them.
        min_score: hits scoring below it are dropped (in [0, 1]), ``None`` for no threshold.
        filters: the metadata filter in the core's form, ``None`` for none.
        options: the method's per-query options (names checked, values checked except
            ``llm``, which the facade turns into a client first).
    """

    method: str = "archrag"
    k: int = 5
    kinds: tuple[str, ...] | None = None
    context_k: int | None = None
    min_score: float | None = None
    filters: Mapping[str, Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def as_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`graphstrata.GraphStrata.retrieve` that ask for this
        request: ``method``, ``k``, ``kinds`` and the method options, plus ``filters``,
        ``context_k`` and ``min_score`` when they apply (a filter or threshold is set; context
        hits are asked for)."""
        out: dict[str, Any] = {"method": self.method, "k": self.k, "kinds": self.kinds}
        if self.filters is not None:
            out["filters"] = dict(self.filters)
        wants_context = self.kinds is None or any(kind != "chunk" for kind in self.kinds)
        if self.context_k is not None and wants_context:
            out["context_k"] = self.context_k
        if self.min_score is not None:
            out["min_score"] = self.min_score
        return {**out, **self.options}


def check_min_score(value: Any, name: str = "min_score") -> float | None:
    """Validate a score threshold: ``None`` or a finite number in [0, 1] (not a bool).

    Raises:
        ValueError: anything else; the message names ``name``.
    """
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) or not (
        math.isfinite(float(value)) and 0.0 <= float(value) <= 1.0
    ):
        raise ValueError(
            f"{name} must be a number in [0, 1] (scores are the core's [0, 1] scores), got {value!r}"
        )
    return float(value)


def check_retrieve_args(
    method: Any = "archrag",
    k: Any = 5,
    kinds: Any = None,
    context_k: Any = None,
    min_score: Any = None,
    filters: Any = None,
    options: Mapping[str, Any] | None = None,
    *,
    names: Mapping[str, str] | None = None,
    arguments: Sequence[str] = (),
) -> RetrieveRequest:
    """Check a retrieval's arguments without an index: what both framework adapters call at
    construction and per query, and what :func:`retrieve` calls.

    Args:
        method: a name in ``graphstrata.methods.METHODS``.
        k: a positive int (numpy integers accepted).
        kinds: ``None``, one kind, or a non-empty sequence of kinds
            (:data:`graphstrata.types.HIT_KINDS`).
        context_k: ``None`` or a positive int.
        min_score: ``None`` or a number in [0, 1].
        filters: ``None`` or a filter mapping (:func:`graphstrata.filters.compile_filter`).
        options: the method's per-query options; unknown names and bad values raise (the
            value of ``llm`` is not checked here).
        names: what the caller calls these arguments, for the messages
            (``{"k": "similarity_top_k"}``, ``{"min_score": "score_threshold"}``).
        arguments: the caller's own argument names, listed in the message of an unknown
            option (so a misspelt argument that fell through to the options is recognised).

    Returns:
        A :class:`RetrieveRequest`.

    Raises:
        ValueError: the first bad argument, named (an unknown method lists the known ones; an
            unknown option lists ``arguments`` and the method's options).
    """
    names = dict(names or {})
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known methods: {', '.join(METHODS)}")
    k = check_k(k, names.get("k", "k"))
    kinds = check_kinds(kinds)
    if context_k is not None:
        context_k = check_k(context_k, names.get("context_k", "context_k"))
    min_score = check_min_score(min_score, names.get("min_score", "min_score"))
    if filters is not None:
        compile_filter(filters)  # ValueError naming the bad key or operator
        filters = dict(filters)
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"method options must be a mapping of option names to values, got {options!r}")
    options = dict(options or {})
    checked = {key: value for key, value in options.items() if key != "llm"}
    hint = f"{names.get('arguments', 'arguments')}: {', '.join(arguments)}; " if arguments else ""
    METHODS[method]().options(checked, hint=hint)
    return RetrieveRequest(method, k, kinds, context_k, min_score, filters, options)


def retrieve(state: EngineState, query: str, request: RetrieveRequest) -> list[Hit]:
    """Run ``request`` for ``query`` against one immutable ``state``.

    Embeds the query (on ``config.query_threads`` intra-op threads; not at all for a method
    that never reads the vector, such as ``bm25``), runs the method — with a filter,
    asking it for 4× more chunks at a time until ``k`` of the matching documents' chunks pass
    or every chunk was ranked —, turns its rows into chunk hits and keeps its context hits
    from matching documents, then applies the contract (:func:`select_hits`).

    Args:
        state: the index state to read (taken once by the caller).
        query: the question (non-empty str of at most ``config.max_query_chars`` characters).
        request: checked arguments (:func:`check_retrieve_args`); an ``llm`` option must
            already be an :class:`~graphstrata.llm.LLMClient`.

    Returns:
        Chunk hits best first (``metadata``: ``document_id``, ``chunk_index``, ``start``,
        ``end``, ``document_metadata``, ``method``, ``raw_score``), then the selected context
        hits.

    Raises:
        ValueError: an empty or over-long query, a query embedding of the wrong shape, and
            whatever the method raises for a bad option value.
    """
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be a non-empty string")
    check_query(query, state.config)
    method = METHODS[request.method]()
    qvec = None
    if method.wants_query_vector(request.options):
        qvec = embed_query(state.embedder, query, state.config.query_threads)
        if qvec.shape != (state.embedder.dim,):
            raise ValueError(
                f"query embedding has shape {qvec.shape}, index dimension is {state.embedder.dim}"
            )
    allowed = None if request.filters is None else AllowedDocuments(state, request.filters)
    result = _run_method(state, method, query, qvec, request.k, request.options, allowed)
    chunk_hits = [
        _chunk_hit(state, row, score, request.method, result.raw_scores.get(row, score), result.explain.get(row),
                   result.chunk_metadata.get(row))
        for row, score in result.chunks[: request.k]
    ]
    context: list[Hit] = []
    for h in result.context:
        if allowed is not None and not any(d in allowed for d in h.document_ids):
            continue
        h.metadata.setdefault("method", request.method)
        h.metadata.setdefault("raw_score", float(h.score))
        h.score = unit(h.score)
        context.append(h)
    return select_hits(chunk_hits, context, request.kinds, request.context_k, request.min_score)


def local_embedder(embedder: Any) -> bool:
    """Whether ``embedder`` computes on this machine: a packaged preset (``"default"``,
    ``"fast"``) or an object with ``local = True``. Others (framework embeddings, remote APIs)
    are not called by :func:`warm_up`."""
    return preset_for_id(str(getattr(embedder, "id", ""))) is not None or getattr(embedder, "local", False) is True


WARM_UP_METHOD = "archrag"
"""The method :func:`warm_up` runs when the state has an LLM (ArchRAG's retrieval reads none)."""


def warm_up(state: EngineState, methods: Sequence[str] | None = None) -> float:
    """Run one query through each of ``methods`` on ``state`` and discard the results, so that
    the first query a user sends after a load costs what the others cost (issue 33): it pays
    the first calls of the embedder, the C-HNSW searches and BM25 postings, each method's code
    paths and first touches of its structures and of memory-mapped vectors. At 10⁶ chunks
    ArchRAG's first query took 2.9× its p50 and HiRAG's 2.4× without it.

    The query is the start of the first chunk's text (a question about the corpus the index
    holds); nothing is cached from it and the state is not changed. The query is embedded only
    by an embedder that computes on this machine — the packaged presets, or one with an
    attribute ``local = True`` (:func:`local_embedder`); with any other (a framework's model,
    maybe a paid remote API) only the methods that never embed the query are warmed, so a
    load makes no embedding call.

    Args:
        state: the loaded state.
        methods: names in ``graphstrata.methods.METHODS``; ``None``: every method when the
            state has no LLM, else ArchRAG only (its retrieval calls no model; the others may,
            and a load makes no model call).

    Returns:
        Seconds spent (0.0 for an index without chunks).

    Raises:
        ValueError, OSError: what the same query raises (a broken index).
    """
    import time

    if not len(state.chunks):
        return 0.0
    if methods is None:
        methods = list(METHODS) if state.llm is None else [WARM_UP_METHOD]
    if not local_embedder(state.embedder):
        methods = [m for m in methods if not METHODS[m]().wants_query_vector({})]
    words = state.chunks[0].text.split()[:16]
    query = " ".join(words)[: state.config.max_query_chars] or "warm up"
    start = time.perf_counter()
    for method in methods:
        retrieve(state, query, check_retrieve_args(method, k=5))
    return time.perf_counter() - start


def select_hits(
    chunks: Sequence[Hit],
    context: Sequence[Hit],
    kinds: Sequence[str] | None = None,
    context_k: int | None = None,
    min_score: float | None = None,
) -> list[Hit]:
    """The contract's selection over a method's hits (the module docstring).

    Args:
        chunks: chunk hits, best first, already cut to ``k``.
        context: context hits in the method's order.
        kinds: kinds to keep (``None``: all).
        context_k: at most this many context hits, best score first across kinds (a stable
            sort: the method's order breaks ties); ``None``: all, in the method's order.
        min_score: drop hits scoring below it (after the cuts); ``None``: keep all.

    Returns:
        The kept chunk hits followed by the kept context hits.
    """
    kept = list(chunks) if kinds is None or "chunk" in kinds else []
    ctx = [h for h in context if h.kind != "chunk" and (kinds is None or h.kind in kinds)]
    if context_k is not None:
        ctx = sorted(ctx, key=lambda h: -float(h.score))[:context_k]
    kept.extend(ctx)
    if min_score is not None:
        kept = [h for h in kept if float(h.score) >= min_score]
    return kept


class AllowedDocuments:
    """The documents of ``state`` that pass a metadata filter, decided per document on first
    ask and remembered (:func:`graphstrata.filters.compile_filter`; a document's metadata plus
    its ``document_id``, as :func:`graphstrata.filters.allowed_documents` sees it).

    A filtered query asks only about the documents of the chunks and context hits it ranked,
    so its cost does not grow with the number of documents; :meth:`passing_chunks` (every
    document) runs only when a first page of chunks was not enough.

    Raises:
        ValueError: an invalid filter (at construction).
    """

    def __init__(self, state: EngineState, spec: Any) -> None:
        self._state = state
        self._pred = compile_filter(spec)
        self._memo: dict[str, bool] = {}

    def __contains__(self, doc_id: object) -> bool:
        found = self._memo.get(doc_id)  # type: ignore[arg-type]
        if found is None:
            doc = self._state.documents.get(doc_id)  # type: ignore[arg-type]
            if doc is None:
                found = False
            else:
                meta = doc.metadata if "document_id" in doc.metadata else {**doc.metadata, "document_id": doc_id}
                found = bool(self._pred(meta))
            self._memo[doc_id] = found  # type: ignore[index]
        return found

    def passing_chunks(self) -> int:
        """Number of chunks of the passing documents (asks about every document)."""
        return sum(len(rows) for d, rows in document_rows(self._state).items() if d in self)


def _run_method(
    state: EngineState,
    method: Method,
    query: str,
    qvec: np.ndarray | None,
    k: int,
    options: Mapping[str, Any],
    allowed: AllowedDocuments | set[str] | None,
) -> Retrieval:
    """Run ``method``; with a filter, keep only chunks of ``allowed`` documents, asking the
    method for 4× more chunks at a time until ``k`` of them pass or every passing chunk was
    ranked. The first page asks the filter only about the ranked chunks' documents; counting
    the passing chunks (every document) happens only when it held fewer than ``k``."""
    result = method.retrieve(state, query, qvec, k, **options)
    if allowed is None:
        return result
    n = len(state.chunks)
    passing: int | None = None
    asked = k
    while True:
        kept = [(r, s) for r, s in result.chunks if state.chunks[r].document_id in allowed]
        if len(kept) >= k or asked >= n:
            break
        if passing is None:
            passing = (allowed.passing_chunks() if isinstance(allowed, AllowedDocuments)
                       else sum(1 for c in state.chunks if c.document_id in allowed))
        if len(kept) >= passing:
            break
        asked = min(n, asked * 4)
        result = method.retrieve(state, query, qvec, asked, **options)
    result.chunks = kept
    return result


def _chunk_hit(
    state: EngineState,
    row: int,
    score: float,
    method: str,
    raw_score: float | None = None,
    explain: dict[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Hit:
    """The hit of chunk ``row``: ``score`` clipped to [0, 1] (methods already return [0, 1],
    :mod:`graphstrata.scores`), the method's own score in ``metadata["raw_score"]``,
    ``explain``, the row's explanation from :attr:`Retrieval.explain` (``None`` unless the
    method ran with ``explain=True``), and the method's ``extra`` metadata of the row
    (:attr:`Retrieval.chunk_metadata`; it never replaces a key set here)."""
    c = state.chunks[row]
    doc = state.documents.get(c.document_id)
    metadata = {
        "document_id": c.document_id,
        "chunk_index": c.index,
        "start": c.start,
        "end": c.end,
        "document_metadata": dict(doc.metadata) if doc else {},
        "method": method,
        "raw_score": float(score if raw_score is None else raw_score),
    }
    if extra:
        metadata = {**extra, **metadata}
    return Hit(
        id=c.id,
        text=c.text,
        score=unit(score),
        kind="chunk",
        layer=None,
        chunk_ids=[c.id],
        document_ids=[c.document_id],
        metadata=metadata,
        explain=explain,
    )


def retrieval_arguments(engine: Any, request: RetrieveRequest) -> dict[str, Any]:
    """The keyword arguments that ask ``engine.retrieve`` / ``engine.aretrieve`` for
    ``request``: ``{"request": request}`` for an engine that takes a checked request as is
    (:class:`~graphstrata.GraphStrata`, whose ``accepts_retrieve_request`` is true: not checked
    again), else :meth:`RetrieveRequest.as_kwargs` (any other object with
    :meth:`GraphStrata.retrieve <graphstrata.GraphStrata.retrieve>`'s keyword signature, such
    as a test double)."""
    return {"request": request} if getattr(engine, "accepts_retrieve_request", False) is True else request.as_kwargs()
