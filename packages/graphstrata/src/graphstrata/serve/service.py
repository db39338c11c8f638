"""What the server does, transport aside: each tool as a function of a caller and plain
arguments, returning JSON-serialisable dicts. The MCP tools (:mod:`graphstrata.serve.mcp_server`)
and the plain JSON routes (:mod:`graphstrata.serve.http`) both call these, so the two answer
the same arguments the same way.

Every refusal is a :class:`ServeError` carrying an HTTP status, a short code and one message
naming the argument or limit at fault. A caller is told only about indexes it may read: an
index outside its scope is reported exactly like one that does not exist.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..llm import LLMError
from ..methods import METHODS
from .config import Principal, ServeConfig
from .registry import IndexRegistry

log = logging.getLogger(__name__)

__all__ = ["METHOD_GUIDE", "TOOL_DESCRIPTIONS", "GraphService", "ServeError"]

#: what each retrieval method is good for (shown to agents in the tool descriptions)
METHOD_GUIDE: dict[str, str] = {
    "archrag": "default and best overall on multi-hop questions: hybrid dense+BM25 ranking, "
    "community evidence and PageRank over the chunk-entity graph; context = entities, relations, "
    "community summaries",
    "lightrag": "questions about named things and how they relate: entities and relations matched "
    "by low- and high-level keywords",
    "hirag": "broad questions spanning topics: summary entities across hierarchy layers and bridge paths",
    "agrag": "an explicit reasoning chain linking the question's entities (Steiner tree); "
    "returns 'path' hits",
    "dense": "paraphrased questions, embedding similarity only; fast",
    "bm25": "exact names, codes and rare terms; keyword match only; fastest",
    "hybrid": "dense + BM25 fused; a strong, cheap baseline",
}

_METHODS_TEXT = "; ".join(f"{m}: {METHOD_GUIDE.get(m, '')}".rstrip(": ") for m in METHODS)

TOOL_DESCRIPTIONS: dict[str, str] = {
    "retrieve": (
        "Search an indexed document collection (graph RAG) and return the best source passages "
        "with scores in [0, 1], their document ids and metadata; ask for graph context (entities, "
        "relations, community summaries, reasoning paths) with kinds. Methods — " + _METHODS_TEXT + "."
    ),
    "answer": (
        "Answer a question from an indexed collection with the server's LLM: retrieves with the "
        "method, then generates with that method's own answer step; returns the answer, the "
        "sources it used and the LLM token usage. Slower and costlier than retrieve."
    ),
    "list_indexes": "List the indexes this caller may search, with their document and chunk counts "
    "and the version being served.",
    "stats": "What an index holds: counts, community layers with their largest communities' titles, "
    "top entities by degree, build cost. Use it to see what a collection is about.",
    "insert": "Add or replace documents in an index (id, text, metadata); the index is updated "
    "incrementally and persisted atomically before the next search sees it.",
    "delete": "Remove documents from an index by id; persisted atomically.",
}


class ServeError(Exception):
    """A refused request.

    Attributes:
        status: the HTTP status it maps to (400 bad argument, 401 no or unknown token,
            403 not allowed, 404 unknown index, 413 too large, 429 too many requests in flight,
            502 the LLM failed).
        code: a short machine-readable reason (``bad_argument``, ``unauthorized``,
            ``forbidden``, ``unknown_index``, ``too_large``, ``too_many_requests``, ``llm_error``).
        message: one line naming the argument or limit at fault.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def to_dict(self) -> dict[str, Any]:
        """``{"error": {"code", "message"}}``: the body of an HTTP error response."""
        return {"error": {"code": self.code, "message": self.message}}


class GraphService:
    """The server's operations over an :class:`IndexRegistry`.

    Args:
        registry: the loaded indexes.
        config: the server's settings (limits, ``allow_writes``).
        has_llm: whether ``answer`` is offered (the indexes were loaded with an LLM).

    Every public operation takes the caller (:class:`~graphstrata.serve.config.Principal`)
    first, holds one of its :attr:`ServeConfig.max_concurrent` slots while it runs, and raises
    :class:`ServeError` on a bad request. They block (retrieval is CPU work): call them from a
    worker thread in an event loop.
    """

    def __init__(self, registry: IndexRegistry, config: ServeConfig, has_llm: bool = False) -> None:
        self.registry = registry
        self.config = config
        self.has_llm = has_llm
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}

    # -- bounds and scopes ------------------------------------------------------------------
    @contextmanager
    def slot(self, principal: Principal) -> Iterator[None]:
        """Hold one of ``principal``'s concurrent-request slots.

        Raises:
            ServeError: 429 when it already has ``max_concurrent`` requests in flight.
        """
        limit = self.config.max_concurrent
        with self._lock:
            n = self._in_flight.get(principal.name, 0)
            if n >= limit:
                raise ServeError(
                    429, "too_many_requests",
                    f"too many concurrent requests for this token: at most {limit} at a time "
                    "(--max-concurrent); retry when one has finished",
                )
            self._in_flight[principal.name] = n + 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight[principal.name] -= 1

    def readable(self, principal: Principal) -> list[str]:
        """The index names ``principal`` may read, in server order."""
        return [n for n in self.registry.names() if principal.can_read(n)]

    def _index(self, principal: Principal, index: Any, write: bool = False) -> str:
        readable = self.readable(principal)
        if index is None:
            if len(readable) == 1:
                return readable[0]
            raise ServeError(400, "bad_argument",
                             f"index: name one of this server's indexes ({', '.join(readable) or 'none'})")
        if not isinstance(index, str) or index not in readable:
            raise ServeError(404, "unknown_index",
                             f"index {index!r}: no such index (indexes: {', '.join(readable) or 'none'})")
        if write and not principal.can_write(index):
            raise ServeError(403, "forbidden", f"index {index!r}: this token may not write to it")
        return index

    def _k(self, k: Any, name: str = "k") -> None:
        if isinstance(k, int) and not isinstance(k, bool) and k > self.config.max_k:
            raise ServeError(400, "bad_argument",
                             f"{name} ({k}) is over this server's limit of {self.config.max_k} (--max-k)")

    # -- operations --------------------------------------------------------------------------
    def retrieve(
        self,
        principal: Principal,
        query: str,
        index: str | None = None,
        method: str = "archrag",
        k: int = 5,
        filters: Mapping[str, Any] | None = None,
        kinds: Sequence[str] | None = ("chunk",),
        context_k: int | None = None,
        explain: bool = False,
    ) -> dict[str, Any]:
        """:meth:`GraphStrata.retrieve <graphstrata.GraphStrata.retrieve>` on one index.

        Returns:
            ``{"index", "version", "method", "query", "hits": [Hit.to_dict(), ...]}``: at most
            ``k`` chunk hits best first, then context hits of the asked ``kinds`` (at most
            ``context_k``).

        Raises:
            ServeError: 400 for a bad argument (named; ``k`` / ``context_k`` over ``--max-k``),
                404 for an index the caller may not read, 429 when the caller is at its bound.
        """
        with self.slot(principal):
            name = self._index(principal, index)
            self._k(k)
            self._k(context_k, "context_k")
            gs, version = self.registry.get(name)
            options: dict[str, Any] = {"explain": True} if explain else {}
            kinds_arg = None if kinds is None else tuple(kinds)
            try:
                hits = gs.retrieve(query, method=method, k=k, kinds=kinds_arg, filters=filters,
                                   context_k=context_k, **options)
            except ValueError as exc:
                raise ServeError(400, "bad_argument", str(exc)) from None
            return {"index": name, "version": version, "method": method, "query": query,
                    "hits": [h.to_dict() for h in hits]}

    def answer(
        self,
        principal: Principal,
        query: str,
        index: str | None = None,
        method: str = "archrag",
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """:meth:`GraphStrata.answer <graphstrata.GraphStrata.answer>` on one index.

        Returns:
            ``{"index", "version", "method", "query", "answer", "sources": [Hit.to_dict()],
            "usage": {"stages": ..., "total": {"calls", "cached", "prompt_tokens",
            "completion_tokens", ...}}, "fallbacks": [note, ...], "citations": [{"number",
            "chunk_ids", "document_ids"}]}``: ``fallbacks`` names the LLM steps of this query
            that fell back (:attr:`graphstrata.api.Answer.fallbacks`; empty when every step used
            the model's answer); ``citations`` maps the answer's ``[n]`` markers to the sources
            of its prompt (:attr:`graphstrata.api.Answer.citations`).

        Raises:
            ServeError: as :meth:`retrieve`; 400 when the server has no LLM; 502 when the LLM
                failed after its retries.
        """
        with self.slot(principal):
            if not self.has_llm:
                raise ServeError(400, "bad_argument", "answer needs a server started with --llm MODULE:FACTORY")
            name = self._index(principal, index)
            self._k(k)
            gs, version = self.registry.get(name)
            try:
                ans = gs.answer(query, method=method, k=k, filters=filters)
            except ValueError as exc:
                raise ServeError(400, "bad_argument", str(exc)) from None
            except LLMError as exc:
                raise ServeError(502, "llm_error", str(exc)) from None
            return {"index": name, "version": version, "method": method, "query": query,
                    "answer": ans.text, "sources": [h.to_dict() for h in ans.hits], "usage": ans.usage,
                    "fallbacks": list(ans.fallbacks), "citations": [c.to_dict() for c in ans.citations]}

    def list_indexes(self, principal: Principal) -> dict[str, Any]:
        """The caller's readable indexes: ``{"indexes": [{"name", "version", "documents",
        "chunks", "entities", "communities_per_layer", "writable"}]}``; ``methods`` lists the
        retrieval methods with what each is good for, ``answer`` whether answers are offered."""
        with self.slot(principal):
            out = []
            for name in self.readable(principal):
                gs, version = self.registry.get(name)
                s = gs.state.stats()
                out.append({
                    "name": name, "version": version, "documents": s["documents"], "chunks": s["chunks"],
                    "entities": s["entities"], "communities_per_layer": list(s["communities_per_layer"]),
                    "writable": bool(self.config.allow_writes and principal.can_write(name)),
                })
            return {"indexes": out, "methods": dict(METHOD_GUIDE), "answer": self.has_llm}

    def stats(self, principal: Principal, index: str | None = None, top: int = 10) -> dict[str, Any]:
        """:meth:`GraphStrata.stats <graphstrata.GraphStrata.stats>` with ``index`` and ``version``.

        Raises:
            ServeError: 400 for a bad ``top`` (1..``--max-k``), 404 for an unknown index.
        """
        with self.slot(principal):
            name = self._index(principal, index)
            self._k(top, "top")
            gs, version = self.registry.get(name)
            try:
                stats = gs.stats(top=top)
            except ValueError as exc:
                raise ServeError(400, "bad_argument", str(exc)) from None
            return {"index": name, "version": version, **stats}

    def communities(self, principal: Principal, index: str | None = None, per_layer: int = 100) -> dict[str, Any]:
        """Community titles of an index: ``{"index", "version", "layers": [{"layer",
        "communities", "titles": [{"id", "title", "entities"}]}]}``, at most ``per_layer``
        per layer, largest first.

        Raises:
            ServeError: 404 for an unknown index.
        """
        with self.slot(principal):
            name = self._index(principal, index)
            gs, version = self.registry.get(name)
            layers = []
            for i, comms in enumerate(gs.state.communities, 1):
                biggest = sorted(comms, key=lambda c: (-len(c.entity_ids), c.id))[:per_layer]
                layers.append({"layer": i, "communities": len(comms), "titles": [
                    {"id": c.id, "title": c.title, "entities": len(c.entity_ids)} for c in biggest]})
            return {"index": name, "version": version, "layers": layers}

    def insert(self, principal: Principal, documents: Sequence[Mapping[str, Any]], index: str | None = None) -> dict[str, Any]:
        """Insert (or replace, by id) ``documents`` — ``{"id"?, "text", "metadata"?}`` each —
        through :meth:`GraphStrata.insert <graphstrata.GraphStrata.insert>` (incremental,
        persisted atomically under the store's writer lock).

        Returns:
            ``{"index", "version", "ids"}``: the persisted version and the documents' ids.

        Raises:
            ServeError: 403 without ``--allow-writes`` or write scope, 400 for bad documents
                (named), 404 for an unknown index.
        """
        with self.slot(principal):
            self._writes_allowed()
            name = self._index(principal, index, write=True)
            if not isinstance(documents, Sequence) or isinstance(documents, (str, bytes)) or not documents:
                raise ServeError(400, "bad_argument", "documents: expected a non-empty list of {id, text, metadata}")
            docs = []
            for i, d in enumerate(documents):
                if not isinstance(d, Mapping) or not isinstance(d.get("text"), str):
                    raise ServeError(400, "bad_argument", f"documents[{i}]: expected an object with a string 'text'")
                docs.append({key: d[key] for key in ("id", "text", "metadata") if d.get(key) is not None})
            try:
                ids, version = self.registry.write(name, lambda gs: gs.insert(docs))
            except ValueError as exc:
                raise ServeError(400, "bad_argument", f"documents: {exc}") from None
            except LLMError as exc:
                raise ServeError(502, "llm_error", str(exc)) from None
            return {"index": name, "version": version, "ids": ids}

    def delete(self, principal: Principal, document_ids: Sequence[str], index: str | None = None) -> dict[str, Any]:
        """Remove documents by id through :meth:`GraphStrata.delete <graphstrata.GraphStrata.delete>`.

        Returns:
            ``{"index", "version", "deleted"}``.

        Raises:
            ServeError: as :meth:`insert`; 400 naming ids the index does not hold (nothing is
                deleted then).
        """
        with self.slot(principal):
            self._writes_allowed()
            name = self._index(principal, index, write=True)
            if not isinstance(document_ids, Sequence) or isinstance(document_ids, (str, bytes)) or not document_ids:
                raise ServeError(400, "bad_argument", "document_ids: expected a non-empty list of ids")
            try:
                n, version = self.registry.write(name, lambda gs: gs.delete(list(document_ids)))
            except (KeyError, ValueError) as exc:
                raise ServeError(400, "bad_argument", f"document_ids: {exc.args[0] if exc.args else exc}") from None
            except LLMError as exc:
                raise ServeError(502, "llm_error", str(exc)) from None
            return {"index": name, "version": version, "deleted": n}

    def _writes_allowed(self) -> None:
        if not self.config.allow_writes:
            raise ServeError(403, "forbidden", "this server was started without --allow-writes")
