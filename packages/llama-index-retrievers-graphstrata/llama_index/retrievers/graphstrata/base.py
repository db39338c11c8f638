"""``GraphStrataRetriever``: a graphstrata engine behind LlamaIndex's ``BaseRetriever``.

The retriever only translates: a LlamaIndex query goes to ``GraphStrata.retrieve`` /
``GraphStrata.aretrieve`` and every returned ``graphstrata.Hit`` comes back as a
``NodeWithScore``. All graph work (entity search, community layers, PageRank, ...) stays in
the core engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import (
    IndexNode,
    NodeRelationship,
    NodeWithScore,
    ObjectType,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.retrievers.graphstrata.filters import to_core_filters

from graphstrata.types import check_k, check_kinds

#: Metadata keys this retriever writes on every node. They are provenance, not content, so
#: they are hidden from the LLM prompt and from embedding text.
PROVENANCE_KEYS: tuple[str, ...] = (
    "kind",
    "layer",
    "method",
    "hit_id",
    "chunk_ids",
    "document_ids",
    "document_id",
    "chunk_index",
    "start",
    "end",
    "raw_score",
)

#: Reserved key of a core document's metadata under which the LlamaIndex packages keep what
#: a graphstrata ``Document`` has no field for: the LlamaIndex document's
#: ``excluded_llm_metadata_keys`` / ``excluded_embed_metadata_keys``, non-default
#: ``metadata_template`` / ``metadata_separator`` / ``text_template``, and the ``ref_doc_id``
#: of a node inserted with ``insert_nodes``. It is written by :func:`pack_document_metadata`
#: and removed again by :func:`unpack_document_metadata` before a node is built, so it never
#: appears in node metadata; it persists with the core index like any other metadata.
LLAMA_INDEX_METADATA_KEY = "__llama_index__"

_TEMPLATE_FIELDS = ("metadata_template", "metadata_separator", "text_template")
_TEMPLATE_DEFAULTS = {name: TextNode.model_fields[name].default for name in _TEMPLATE_FIELDS}


def pack_document_metadata(node: Any, ref_doc_id: str | None = None) -> dict[str, Any]:
    """The core metadata of a LlamaIndex document / node: its ``metadata`` plus, under
    :data:`LLAMA_INDEX_METADATA_KEY`, what only LlamaIndex knows about it.

    Args:
        node: a LlamaIndex ``Document`` or node.
        ref_doc_id: the LlamaIndex document this node belongs to, when it is not the node
            itself (kept so retrieved chunks link to it with ``NodeRelationship.SOURCE``).

    Raises:
        ValueError: ``node.metadata`` already uses the reserved key.
    """
    metadata = dict(node.metadata or {})
    if LLAMA_INDEX_METADATA_KEY in metadata:
        raise ValueError(
            f"metadata key {LLAMA_INDEX_METADATA_KEY!r} is reserved by the graphstrata "
            "LlamaIndex packages"
        )
    extra: dict[str, Any] = {}
    for name in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
        keys = list(getattr(node, name, None) or [])
        if keys:
            extra[name] = keys
    for name in _TEMPLATE_FIELDS:
        value = getattr(node, name, None)
        if isinstance(value, str) and value != _TEMPLATE_DEFAULTS[name]:
            extra[name] = value
    if ref_doc_id is not None:
        extra["ref_doc_id"] = ref_doc_id
    if extra:
        metadata[LLAMA_INDEX_METADATA_KEY] = extra
    return metadata


def unpack_document_metadata(metadata: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a core document's metadata into ``(user metadata, LlamaIndex extras)``.

    The inverse of :func:`pack_document_metadata`. Indexes written before the reserved key
    existed kept an inserted node's ``ref_doc_id`` as a plain metadata key; it is moved to
    the extras too.
    """
    user = dict(metadata or {})
    raw = user.pop(LLAMA_INDEX_METADATA_KEY, None)
    extra = dict(raw) if isinstance(raw, Mapping) else {}
    if "ref_doc_id" in user and "ref_doc_id" not in extra:
        extra["ref_doc_id"] = user.pop("ref_doc_id")
    return user, extra


def embedder_from_llama_index(embed_model: Any, batch_size: int | None = None) -> Any:
    """Wrap a LlamaIndex embedding as a graphstrata ``Embedder``.

    Documents are embedded with ``embed_model.get_text_embedding_batch`` and queries with
    ``embed_model.get_query_embedding`` (LlamaIndex models may embed the two differently).
    The embedder id persisted with an index is ``"llama_index:<model_name>"``, so an index
    built with one LlamaIndex model refuses to load with another (``ValueError`` from the core).

    Args:
        embed_model: any ``llama_index.core.base.embeddings.base.BaseEmbedding``.
        batch_size: texts per call; defaults to the model's ``embed_batch_size``.

    Returns:
        a ``graphstrata.models.CallableEmbedder`` (vectors are L2-normalised by it).

    Raises:
        TypeError: ``embed_model`` lacks ``get_text_embedding_batch``.
    """
    from graphstrata.models import CallableEmbedder

    if not callable(getattr(embed_model, "get_text_embedding_batch", None)):
        raise TypeError(
            "embed_model must be a LlamaIndex embedding (with get_text_embedding_batch), "
            f"got {type(embed_model).__name__}"
        )
    name = getattr(embed_model, "model_name", None) or type(embed_model).__name__
    size = batch_size or int(getattr(embed_model, "embed_batch_size", 0) or 64)
    return CallableEmbedder(
        fn=embed_model.get_text_embedding_batch,
        id=f"llama_index:{name}",
        batch_size=size,
        query_fn=getattr(embed_model, "get_query_embedding", None),
    )


def hit_to_node(hit: Any, method: str) -> NodeWithScore:
    """Convert one ``graphstrata.Hit`` into a ``NodeWithScore``.

    * ``node.text`` is ``hit.text``; ``score`` is ``hit.score`` (the core's score in [0, 1],
      higher is better); the method's own score is ``metadata["raw_score"]`` when the core
      reports it.
    * ``node.metadata`` holds ``kind``, ``layer``, ``method``, ``hit_id``, ``chunk_ids``,
      ``document_ids``, the hit's own metadata (e.g. a community ``title``) and, for chunk
      hits, ``document_id``, ``chunk_index`` and the source document's metadata flattened
      (as LlamaIndex nodes inherit their document's metadata). Provenance keys
      (:data:`PROVENANCE_KEYS`) are excluded from the LLM and embedding views of the node.
    * Chunk nodes also inherit their document's ``excluded_llm_metadata_keys`` /
      ``excluded_embed_metadata_keys`` (and non-default metadata templates) when the
      document came from LlamaIndex (see :data:`LLAMA_INDEX_METADATA_KEY`), and get
      ``start_char_idx`` / ``end_char_idx`` (offsets in the document text).
    * Chunk hits keep the core chunk id (``"<document_id>#<n>"``) as ``node_id`` and link to
      their LlamaIndex document with ``NodeRelationship.SOURCE`` (so ``node.ref_doc_id`` is
      the document id); other kinds get ``"<kind>:<id>"`` and no SOURCE (a graph element
      may come from several documents: see ``metadata["document_ids"]``).
    """
    hit_meta: dict[str, Any] = dict(getattr(hit, "metadata", None) or {})
    doc_meta, extra = unpack_document_metadata(hit_meta.pop("document_metadata", None))
    document_ids = list(hit.document_ids)
    metadata: dict[str, Any] = {}
    if hit.kind == "chunk":
        metadata.update(doc_meta)
    metadata.update(hit_meta)
    metadata.update(
        {
            "kind": hit.kind,
            "layer": hit.layer,
            "method": method,
            "hit_id": hit.id,
            "chunk_ids": list(hit.chunk_ids),
            "document_ids": document_ids,
        }
    )
    relationships: dict[NodeRelationship, Any] = {}
    node_fields: dict[str, Any] = {}
    excluded_llm = [k for k in PROVENANCE_KEYS if k in metadata]
    excluded_embed = list(excluded_llm)
    if hit.kind == "chunk":
        node_id = hit.id
        document_id = hit_meta.get("document_id") or (document_ids[0] if document_ids else None)
        metadata["document_id"] = document_id
        source_id = extra.get("ref_doc_id") or document_id
        if source_id is not None:
            relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(
                node_id=source_id, node_type=ObjectType.DOCUMENT, metadata=dict(doc_meta)
            )
        excluded_llm += [k for k in extra.get("excluded_llm_metadata_keys", ()) if k not in excluded_llm]
        excluded_embed += [
            k for k in extra.get("excluded_embed_metadata_keys", ()) if k not in excluded_embed
        ]
        node_fields.update({k: extra[k] for k in _TEMPLATE_FIELDS if isinstance(extra.get(k), str)})
        if isinstance(hit_meta.get("start"), int):
            node_fields["start_char_idx"] = hit_meta["start"]
            node_fields["end_char_idx"] = hit_meta.get("end")
    else:
        node_id = f"{hit.kind}:{hit.id}"
    node = TextNode(
        id_=node_id,
        text=hit.text,
        metadata=metadata,
        relationships=relationships,
        excluded_llm_metadata_keys=excluded_llm,
        excluded_embed_metadata_keys=excluded_embed,
        **node_fields,
    )
    return NodeWithScore(node=node, score=float(hit.score))


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
        callback_manager, verbose, objects, object_map: as for ``BaseRetriever``.

    Raises:
        ValueError: at construction, for an unknown ``method`` (the message names the known
            ones), ``similarity_top_k`` / ``context_k`` not a positive int, unknown or empty
            ``kinds``, an unsupported or invalid filter, an unknown method option, or any
            unknown keyword argument (named, with a hint such as ``similarity_top_k`` for
            ``top_k``).
        TypeError: ``engine`` does not look like a ``GraphStrata`` engine.

    Retrieval errors of the core (empty query → ``ValueError``) propagate unchanged.
    ``aretrieve`` awaits the core's ``aretrieve`` (a worker thread), never ``asyncio.run``,
    so it works under a running loop (Jupyter, FastAPI).
    """

    def __init__(
        self,
        engine: Any,
        method: str = "archrag",
        similarity_top_k: int = DEFAULT_SIMILARITY_TOP_K,
        kinds: Sequence[str] | None = DEFAULT_KINDS,
        context_k: int = DEFAULT_CONTEXT_K,
        filters: Any = None,
        method_options: Mapping[str, Any] | None = None,
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
        known = tuple(engine.methods)
        if method not in known:
            raise ValueError(f"unknown method {method!r}; known methods: {list(known)}")
        if method_options is not None and not isinstance(method_options, Mapping):
            raise ValueError(
                f"method_options must be a mapping of keyword options, got {method_options!r}"
            )
        self._engine = engine
        self._method = method
        self._similarity_top_k = check_k(similarity_top_k, "similarity_top_k")
        self._context_k = check_k(context_k, "context_k")
        self._kinds = check_kinds(kinds)
        self._filters = to_core_filters(filters)
        self._method_options: dict[str, Any] = dict(method_options or {})
        _check_method_options(method, self._method_options)
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
        embed_model: Any = None,
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
    def engine(self) -> Any:
        """The wrapped ``graphstrata.GraphStrata`` engine."""
        return self._engine

    @property
    def method(self) -> str:
        """The retrieval method name."""
        return self._method

    @property
    def similarity_top_k(self) -> int:
        """At most this many chunk nodes per query."""
        return self._similarity_top_k

    @property
    def context_k(self) -> int:
        """At most this many graph-context nodes per query (when ``kinds`` asks for them)."""
        return self._context_k

    @property
    def kinds(self) -> tuple[str, ...] | None:
        """Hit kinds asked of the core (``None``: chunks and every kind of context)."""
        return self._kinds

    @property
    def filters(self) -> dict[str, Any] | None:
        """The metadata filter in the core's form (``None``: no filter)."""
        return self._filters

    # -- retrieval --------------------------------------------------------------------------
    def _hits_to_nodes(self, hits: Sequence[Any]) -> list[NodeWithScore]:
        chunks = [h for h in hits if h.kind == "chunk"][: self._similarity_top_k]
        context = [h for h in hits if h.kind != "chunk"]
        # best first across kinds (stable: the core's kind order breaks ties)
        context = sorted(context, key=lambda h: -float(h.score))[: self._context_k]
        return [hit_to_node(hit, self._method) for hit in chunks + context]

    def _core_kwargs(self) -> dict[str, Any]:
        return {
            "method": self._method,
            "k": self._similarity_top_k,
            "kinds": self._kinds,
            "filters": self._filters,
            **self._method_options,
        }

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self._engine.retrieve(query_bundle.query_str, **self._core_kwargs())
        return self._hits_to_nodes(hits)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = await self._engine.aretrieve(
            query_bundle.query_str, **self._core_kwargs()
        )
        return self._hits_to_nodes(hits)


def _check_method_options(method: str, options: Mapping[str, Any]) -> None:
    """Check ``options`` against the core method's declared options (when it declares them)."""
    if not options:
        return
    try:
        from graphstrata.methods import METHODS
    except ImportError:  # pragma: no cover - a core without the registry checks at query time
        return
    cls = METHODS.get(method)
    if cls is not None and callable(getattr(cls, "options", None)):
        cls().options(options)
