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
)


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

    * ``node.text`` is ``hit.text``; ``score`` is ``hit.score`` (higher is better, comparable
      only within one kind of one query).
    * ``node.metadata`` holds ``kind``, ``layer``, ``method``, ``hit_id``, ``chunk_ids``,
      ``document_ids``, the hit's own metadata (e.g. a community ``title``) and, for chunk
      hits, ``document_id``, ``chunk_index`` and the source document's metadata flattened
      (as LlamaIndex nodes inherit their document's metadata). Provenance keys are excluded
      from the LLM and embedding views of the node. Chunk nodes also get
      ``start_char_idx`` / ``end_char_idx`` (offsets in the document text) when the core
      reports them.
    * Chunk hits keep the core chunk id (``"<document_id>#<n>"``) as ``node_id`` and link to
      their document with ``NodeRelationship.SOURCE``; other kinds get ``"<kind>:<id>"``.
    """
    hit_meta: dict[str, Any] = dict(getattr(hit, "metadata", None) or {})
    doc_meta = hit_meta.pop("document_metadata", None) or {}
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
    if hit.kind == "chunk":
        node_id = hit.id
        document_id = hit_meta.get("document_id") or (document_ids[0] if document_ids else None)
        metadata["document_id"] = document_id
        if document_id is not None:
            relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(
                node_id=document_id, node_type=ObjectType.DOCUMENT, metadata=dict(doc_meta)
            )
    else:
        node_id = f"{hit.kind}:{hit.id}"
    excluded = [k for k in PROVENANCE_KEYS if k in metadata]
    offsets: dict[str, Any] = {}
    if hit.kind == "chunk" and isinstance(hit_meta.get("start"), int):
        offsets = {"start_char_idx": hit_meta["start"], "end_char_idx": hit_meta.get("end")}
    node = TextNode(
        id_=node_id,
        text=hit.text,
        metadata=metadata,
        relationships=relationships,
        excluded_llm_metadata_keys=list(excluded),
        excluded_embed_metadata_keys=list(excluded),
        **offsets,
    )
    return NodeWithScore(node=node, score=float(hit.score))


class GraphStrataRetriever(BaseRetriever):
    """Retrieve from a graphstrata index with any of its methods.

    Args:
        engine: a ``graphstrata.GraphStrata`` engine (built, loaded, or owned by a
            ``GraphStrataIndex``).
        method: one of ``engine.methods`` (``"archrag"``, ``"dense"``, ``"bm25"``,
            ``"hybrid"``, ...).
        similarity_top_k: number of chunk hits (``k`` of the core), > 0. With
            ``kinds=None`` the method's context hits (entities, relations, communities,
            paths) follow the top-k chunks, so more than ``k`` nodes may come back.
        kinds: ``None`` (the method's default: ranked chunks, then context hits) or a subset
            of ``("chunk", "entity", "relation", "community", "path")``.
        method_options: extra keyword options of the method, passed verbatim to
            ``GraphStrata.retrieve`` (the core validates them at query time).
        callback_manager, verbose, objects, object_map: as for ``BaseRetriever``.

    Raises:
        ValueError: at construction, for an unknown ``method`` (the message names the known
            ones), ``similarity_top_k <= 0`` or not an int, an unknown or empty ``kinds``.
        TypeError: ``engine`` does not look like a ``GraphStrata`` engine.

    Retrieval errors of the core (empty query → ``ValueError``, bad method option) propagate
    unchanged. ``aretrieve`` awaits the core's ``aretrieve`` (a worker thread), never
    ``asyncio.run``, so it works under a running loop (Jupyter, FastAPI).
    """

    def __init__(
        self,
        engine: Any,
        method: str = "archrag",
        similarity_top_k: int = 5,
        kinds: Sequence[str] | None = None,
        method_options: Mapping[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        objects: list[IndexNode] | None = None,
        object_map: dict | None = None,
    ) -> None:
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
        self._kinds = check_kinds(kinds)
        self._method_options: dict[str, Any] = dict(method_options or {})
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
            persist_dir: a directory written by ``GraphStrata.persist`` (or the
                ``graphstrata/`` sub-directory of a persisted ``GraphStrataIndex``).
            embed_model: the LlamaIndex embedding the index was built with; ``None`` for
                the core's offline default.
            **kwargs: retriever options (``method``, ``similarity_top_k``, ...).

        Raises:
            ValueError: the embedder does not match the persisted one (from the core), or
                bad retriever options.
        """
        from graphstrata import GraphStrata

        embedder = embedder_from_llama_index(embed_model) if embed_model is not None else None
        return cls(GraphStrata.load(persist_dir, embedder=embedder), **kwargs)

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
        """Number of chunk hits asked of the core."""
        return self._similarity_top_k

    @property
    def kinds(self) -> tuple[str, ...] | None:
        """Hit kinds asked of the core (``None``: the method's default)."""
        return self._kinds

    # -- retrieval --------------------------------------------------------------------------
    def _hits_to_nodes(self, hits: Sequence[Any]) -> list[NodeWithScore]:
        return [hit_to_node(hit, self._method) for hit in hits]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self._engine.retrieve(
            query_bundle.query_str,
            method=self._method,
            k=self._similarity_top_k,
            kinds=self._kinds,
            **self._method_options,
        )
        return self._hits_to_nodes(hits)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = await self._engine.aretrieve(
            query_bundle.query_str,
            method=self._method,
            k=self._similarity_top_k,
            kinds=self._kinds,
            **self._method_options,
        )
        return self._hits_to_nodes(hits)
