"""``GraphStrataRetriever``: a graphstrata engine behind LlamaIndex's ``BaseRetriever``.

The retriever only translates: a LlamaIndex query goes to ``GraphStrata.retrieve`` /
``GraphStrata.aretrieve`` and every returned ``graphstrata.Hit`` comes back as a
``NodeWithScore``. All graph work (entity search, community layers, PageRank, ...) stays in
the core engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import IndexNode, NodeWithScore, QueryBundle
from llama_index.retrievers.graphstrata.conversion import embedder_from_llama_index, hit_to_node
from llama_index.retrievers.graphstrata.filters import to_core_filters

from graphstrata.retrieval import retrieval_arguments
from graphstrata.retrieval import check_retrieve_args

if TYPE_CHECKING:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

    from graphstrata import GraphStrata
    from graphstrata.models import Embedder

#: Arguments a caller may mean when they pass a name this package does not take.
_DID_YOU_MEAN = {
    "top_k": "similarity_top_k",
    "k": "similarity_top_k",
    "n": "similarity_top_k",
    "filter": "filters",
    "metadata_filters": "filters",
    "search_kwargs": "similarity_top_k / filters",
    "options": "method_options",
    "kind": "kinds",
    "context_top_k": "context_k",
    "doc_ids": "filters=MetadataFilters(filters=[MetadataFilter(key='document_id', "
    "operator=FilterOperator.IN, value=[...])])",
    "node_ids": "filters on 'document_id' (graphstrata retrieves chunks of whole documents)",
}


def unknown_arguments_error(unknown: Sequence[str], known: Sequence[str], where: str) -> ValueError:
    """A ``ValueError`` naming ``unknown`` arguments of ``where``, with a hint per name."""
    import difflib

    parts = []
    for name in unknown:
        hint = _DID_YOU_MEAN.get(name) or next(
            iter(difflib.get_close_matches(name, list(known), n=1)), None
        )
        parts.append(f"{name!r}" + (f" (did you mean {hint}?)" if hint else ""))
    return ValueError(
        f"{where} got unknown argument(s) {', '.join(parts)}; it takes: {', '.join(known)}"
    )


#: Keyword arguments of :class:`GraphStrataRetriever` (besides ``engine``).
RETRIEVER_ARGUMENTS: tuple[str, ...] = (
    "method",
    "similarity_top_k",
    "kinds",
    "context_k",
    "filters",
    "method_options",
    "similarity_cutoff",
    "callback_manager",
    "verbose",
    "objects",
    "object_map",
)

DEFAULT_SIMILARITY_TOP_K = 5
DEFAULT_CONTEXT_K = 5
DEFAULT_KINDS: tuple[str, ...] = ("chunk",)


class GraphStrataRetriever(BaseRetriever):
    """Retrieve from a graphstrata index with any of its methods.

    By default a query returns at most ``similarity_top_k`` chunk nodes, best first, like
    any LlamaIndex vector retriever. Graph context (entity and relation descriptions,
    community summaries, reasoning paths) is opt-in: ask for it with ``kinds`` and it
    follows the chunks, best first, at most ``context_k`` nodes, never counted against
    ``similarity_top_k``.

    Args:
        engine: a ``graphstrata.GraphStrata`` engine (built, loaded, or owned by a
            ``GraphStrataIndex``).
        method: one of ``engine.methods`` (``"archrag"``, ``"dense"``, ``"bm25"``,
            ``"hybrid"``, ...).
        similarity_top_k: at most this many chunk nodes (``k`` of the core), > 0.
        kinds: hit kinds to return: ``("chunk",)`` (default); a subset of
            ``("chunk", "entity", "relation", "community", "path")``; or ``None`` for chunks
            plus every kind of graph context.
        context_k: at most this many graph-context nodes (> 0, default 5), when ``kinds``
            asks for any.
        filters: metadata filters on documents, applied inside retrieval before
            ``similarity_top_k`` is cut: a LlamaIndex ``MetadataFilters`` (operators EQ,
            NE, GT, GTE, LT, LTE, IN, NIN; conditions AND, OR; nested groups) or a mapping in
            the core's form (``{"year": {"$gte": 2020}}``). Context nodes are kept only when
            they come from a matching document.
        method_options: extra keyword options of the method (e.g. ``{"alpha": 0.3}`` for
            ``hybrid``), checked against the method's options at construction.
        similarity_cutoff: drop nodes whose score (the core's, in [0, 1]) is below it, as
            ``SimilarityPostprocessor(similarity_cutoff=...)`` would (``None``: no cutoff).
        callback_manager, verbose, objects, object_map: as for ``BaseRetriever``.

    Raises:
        ValueError: at construction, for an unknown ``method`` (the message names the known
            ones), ``similarity_top_k`` / ``context_k`` not a positive int, unknown or empty
            ``kinds``, an unsupported or invalid filter, an unknown method option, or any
            unknown keyword argument (named, with a hint such as ``similarity_top_k`` for
            ``top_k``, or a ``document_id`` filter for ``doc_ids``), ``similarity_cutoff``
            outside [0, 1].
        TypeError: ``engine`` does not look like a ``GraphStrata`` engine.

    Retrieval errors of the core (empty query → ``ValueError``) propagate unchanged.
    ``aretrieve`` awaits the core's ``aretrieve`` (a worker thread), never ``asyncio.run``,
    so it works under a running loop (Jupyter, FastAPI).
    """

    def __init__(
        self,
        engine: GraphStrata,
        method: str = "archrag",
        similarity_top_k: int = DEFAULT_SIMILARITY_TOP_K,
        kinds: Sequence[str] | None = DEFAULT_KINDS,
        context_k: int = DEFAULT_CONTEXT_K,
        filters: MetadataFilters | MetadataFilter | Mapping[str, Any] | None = None,
        method_options: Mapping[str, Any] | None = None,
        similarity_cutoff: float | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        objects: list[IndexNode] | None = None,
        object_map: dict | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs:
            raise unknown_arguments_error(list(kwargs), RETRIEVER_ARGUMENTS, "GraphStrataRetriever")
        for attr in ("retrieve", "aretrieve", "methods"):
            if not hasattr(engine, attr):
                raise TypeError(
                    "engine must be a graphstrata.GraphStrata engine "
                    f"(missing {attr!r} on {type(engine).__name__})"
                )
        if method_options is not None and not isinstance(method_options, Mapping):
            raise ValueError(
                f"method_options must be a mapping of keyword options, got {method_options!r}"
            )
        if context_k is None:  # the core reads None as "every context hit"; here it is a cap
            raise ValueError("context_k must be a positive integer, got None")
        self._engine = engine
        # the core checks every argument and, per query, selects the hits (graphstrata.retrieval)
        self._request = check_retrieve_args(
            method, similarity_top_k, kinds, context_k, similarity_cutoff, to_core_filters(filters),
            method_options or {}, names={"k": "similarity_top_k", "min_score": "similarity_cutoff"},
        )
        super().__init__(
            callback_manager=callback_manager,
            verbose=verbose,
            objects=objects,
            object_map=object_map,
        )

    # -- construction helpers ---------------------------------------------------------------
    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | Path,
        embed_model: BaseEmbedding | Embedder | str | None = None,
        **kwargs: Any,
    ) -> GraphStrataRetriever:
        """Load a persisted graphstrata index directory and wrap it.

        Args:
            persist_dir: a directory written by ``GraphStrata.persist``, or the persist
                directory of a ``GraphStrataIndex`` (its ``graphstrata/`` sub-directory is
                used).
            embed_model: the LlamaIndex embedding the index was built with; ``None`` for
                the core's offline default.
            **kwargs: retriever options (``method``, ``similarity_top_k``, ``filters``, ...).

        Raises:
            ValueError: the embedder does not match the persisted one (from the core), or
                bad retriever options.
        """
        from graphstrata import GraphStrata

        path = Path(persist_dir)
        if (path / "index_store.json").exists() and (path / "graphstrata").is_dir():
            path = path / "graphstrata"  # a GraphStrataIndex persist dir
        embedder = embedder_from_llama_index(embed_model) if embed_model is not None else None
        return cls(GraphStrata.load(path, embedder=embedder), **kwargs)

    # -- properties -------------------------------------------------------------------------
    @property
    def engine(self) -> GraphStrata:
        """The wrapped ``graphstrata.GraphStrata`` engine."""
        return self._engine

    @property
    def method(self) -> str:
        """The retrieval method name."""
        return self._request.method

    @property
    def similarity_top_k(self) -> int:
        """At most this many chunk nodes per query."""
        return self._request.k

    @property
    def context_k(self) -> int:
        """At most this many graph-context nodes per query (when ``kinds`` asks for them)."""
        return self._request.context_k

    @property
    def kinds(self) -> tuple[str, ...] | None:
        """Hit kinds asked of the core (``None``: chunks and every kind of context)."""
        return self._request.kinds

    @property
    def similarity_cutoff(self) -> float | None:
        """Nodes scoring below this are dropped (``None``: no cutoff)."""
        return self._request.min_score

    @property
    def filters(self) -> dict[str, Any] | None:
        """The metadata filter in the core's form (``None``: no filter)."""
        return None if self._request.filters is None else dict(self._request.filters)

    # -- retrieval --------------------------------------------------------------------------
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self._engine.retrieve(query_bundle.query_str, **retrieval_arguments(self._engine, self._request))
        return [hit_to_node(hit, self._request.method, self._engine) for hit in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = await self._engine.aretrieve(query_bundle.query_str, **retrieval_arguments(self._engine, self._request))
        return [hit_to_node(hit, self._request.method, self._engine) for hit in hits]
