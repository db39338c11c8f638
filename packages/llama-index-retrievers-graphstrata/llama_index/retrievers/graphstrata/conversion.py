"""Conversion between graphstrata records and LlamaIndex objects.

``graphstrata.Hit`` → ``NodeWithScore`` (:func:`hit_to_node`), the metadata a LlamaIndex
document keeps in the core (:func:`pack_document_metadata` / :func:`unpack_document_metadata`),
and LlamaIndex embeddings as a graphstrata ``Embedder`` (:func:`embedder_from_llama_index`).
Shared by the retriever and the ``llama-index-graph-rag-graphstrata`` index.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    ObjectType,
    RelatedNodeInfo,
    TextNode,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.schema import BaseNode

    from graphstrata import GraphStrata, Hit
    from graphstrata.models import Embedder

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

#: Hit metadata that depends on the query: never written into a node (a node's hash must not
#: change with the query; the score is ``NodeWithScore.score``).
QUERY_METADATA_KEYS: tuple[str, ...] = ("raw_score",)

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


def pack_document_metadata(node: BaseNode, ref_doc_id: str | None = None) -> dict[str, Any]:
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


def embedder_from_llama_index(embed_model: BaseEmbedding, batch_size: int | None = None) -> Embedder:
    """Wrap a LlamaIndex embedding as a graphstrata ``Embedder``.

    Documents are embedded with ``embed_model.get_text_embedding_batch`` and queries with
    ``embed_model.get_query_embedding`` (LlamaIndex models may embed the two differently).
    The embedder id persisted with an index is ``"llama_index:<model_name>"``, so an index
    built with one LlamaIndex model refuses to load with another (``ValueError`` from the core).
    An embedding that wraps a graphstrata embedder (``graphstrata_embedder``: the
    ``GraphStrataEmbedding`` of ``llama-index-embeddings-graphstrata``) is unwrapped to it, so
    the index persists the core embedder's own id and loads with no embedder.

    Args:
        embed_model: any ``llama_index.core.base.embeddings.base.BaseEmbedding``.
        batch_size: texts per call; defaults to the model's ``embed_batch_size``.

    Returns:
        a ``graphstrata.models.CallableEmbedder`` (vectors are L2-normalised by it), or the
        wrapped graphstrata embedder itself.

    Raises:
        TypeError: ``embed_model`` lacks ``get_text_embedding_batch``.
    """
    from graphstrata.models import CallableEmbedder
    from graphstrata.models import Embedder as CoreEmbedder

    inner = getattr(embed_model, "graphstrata_embedder", None)
    if isinstance(inner, CoreEmbedder):
        return inner

    if not callable(getattr(embed_model, "get_text_embedding_batch", None)):
        raise TypeError(
            "embed_model must be a LlamaIndex embedding (with get_text_embedding_batch), "
            f"got {type(embed_model).__name__}"
        )
    name = getattr(embed_model, "model_name", None) or type(embed_model).__name__
    size = batch_size or int(getattr(embed_model, "embed_batch_size", 0) or 64)

    class LlamaIndexEmbedder(CallableEmbedder):
        """Pickles as the LlamaIndex embedding it wraps (its bound methods are instrumented
        proxies that do not pickle), so an engine and its retrievers pickle."""

        def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
            return (embedder_from_llama_index, (embed_model, batch_size))

    LlamaIndexEmbedder.__qualname__ = "embedder_from_llama_index.LlamaIndexEmbedder"
    return LlamaIndexEmbedder(
        fn=embed_model.get_text_embedding_batch,
        id=f"llama_index:{name}",
        batch_size=size,
        query_fn=getattr(embed_model, "get_query_embedding", None),
    )


def chunk_node(
    chunk_id: str,
    text: str,
    document_id: str,
    chunk_index: int,
    start: int | None,
    end: int | None,
    document_metadata: Mapping[str, Any] | None,
    prev_id: str | None = None,
    next_id: str | None = None,
) -> TextNode:
    """The LlamaIndex node of one core chunk — the same node (id, text, metadata, hash)
    whether it comes from a query (:func:`hit_to_node`) or from the index's docstore
    (:func:`chunk_nodes`).

    * ``node_id`` is the core chunk id (``"<document_id>#<n>"``); ``text`` the chunk text;
      ``start_char_idx`` / ``end_char_idx`` its character offsets in the document.
    * ``metadata``: the document's own metadata (flattened, as LlamaIndex nodes inherit their
      document's), then ``document_id``, ``chunk_index``, ``start``, ``end``, ``kind``
      (``"chunk"``), ``layer`` (``None``), ``hit_id``, ``chunk_ids``, ``document_ids``. Nothing
      in it depends on the query, so ``node.hash`` does not either (``QueryFusionRetriever``
      deduplicates on it). Provenance keys are excluded from the LLM and embedding views.
    * relationships: ``SOURCE`` (the LlamaIndex document, so ``node.ref_doc_id`` is its id)
      and ``PREVIOUS`` / ``NEXT`` (the neighbouring chunks of the same document, when given),
      which ``PrevNextNodePostprocessor`` follows through the docstore.
    """
    doc_meta, extra = unpack_document_metadata(document_metadata)
    metadata: dict[str, Any] = dict(doc_meta)
    metadata.update(
        {
            "document_id": document_id,
            "chunk_index": chunk_index,
            "start": start,
            "end": end,
            "kind": "chunk",
            "layer": None,
            "hit_id": chunk_id,
            "chunk_ids": [chunk_id],
            "document_ids": [document_id],
        }
    )
    excluded_llm = [k for k in PROVENANCE_KEYS if k in metadata]
    excluded_embed = list(excluded_llm)
    excluded_llm += [k for k in extra.get("excluded_llm_metadata_keys", ()) if k not in excluded_llm]
    excluded_embed += [
        k for k in extra.get("excluded_embed_metadata_keys", ()) if k not in excluded_embed
    ]
    relationships: dict[NodeRelationship, Any] = {
        NodeRelationship.SOURCE: RelatedNodeInfo(
            node_id=extra.get("ref_doc_id") or document_id,
            node_type=ObjectType.DOCUMENT,
            metadata=dict(doc_meta),
        )
    }
    if prev_id is not None:
        relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(
            node_id=prev_id, node_type=ObjectType.TEXT
        )
    if next_id is not None:
        relationships[NodeRelationship.NEXT] = RelatedNodeInfo(
            node_id=next_id, node_type=ObjectType.TEXT
        )
    node_fields: dict[str, Any] = {
        k: extra[k] for k in _TEMPLATE_FIELDS if isinstance(extra.get(k), str)
    }
    if isinstance(start, int):
        node_fields["start_char_idx"] = start
        node_fields["end_char_idx"] = end
    return TextNode(
        id_=chunk_id,
        text=text,
        metadata=metadata,
        relationships=relationships,
        excluded_llm_metadata_keys=excluded_llm,
        excluded_embed_metadata_keys=excluded_embed,
        **node_fields,
    )


def _neighbours(engine: Any, document_id: str, index: int) -> tuple[str | None, str | None]:
    """Ids of the chunks before and after chunk ``index`` of ``document_id`` in ``engine``."""
    rows = getattr(engine, "chunk_row", None) if engine is not None else None
    if not isinstance(rows, Mapping):
        return None, None
    prev_id, next_id = f"{document_id}#{index - 1}", f"{document_id}#{index + 1}"
    return (prev_id if index > 0 and prev_id in rows else None,
            next_id if next_id in rows else None)


def chunk_nodes(engine: GraphStrata, document_ids: Iterable[str] | None = None) -> list[TextNode]:
    """Every chunk of ``engine`` (a ``graphstrata.GraphStrata``) as its :func:`chunk_node`,
    with ``PREVIOUS`` / ``NEXT`` links, in chunk order; only those of ``document_ids`` when
    given. An empty index has none."""
    if getattr(engine, "is_empty", False):
        return []
    documents = engine.documents
    wanted = None if document_ids is None else set(document_ids)
    by_doc: dict[str, list[Any]] = {}
    for chunk in engine.chunks:
        if wanted is None or chunk.document_id in wanted:
            by_doc.setdefault(chunk.document_id, []).append(chunk)
    out: list[TextNode] = []
    for doc_id, chunks in by_doc.items():
        chunks.sort(key=lambda c: c.index)
        doc = documents.get(doc_id)
        meta = doc.metadata if doc is not None else {}
        for i, c in enumerate(chunks):
            out.append(chunk_node(
                c.id, c.text, doc_id, c.index, c.start, c.end, meta,
                prev_id=chunks[i - 1].id if i > 0 else None,
                next_id=chunks[i + 1].id if i + 1 < len(chunks) else None,
            ))
    return out


def hit_to_node(hit: Hit, method: str, engine: GraphStrata | None = None) -> NodeWithScore:
    """Convert one ``graphstrata.Hit`` into a ``NodeWithScore``.

    * ``score`` is ``hit.score`` (the core's score in [0, 1], higher is better). Nothing that
      depends on the query is written into the node (the method's own score is
      ``hit.metadata["raw_score"]`` of ``engine.retrieve``), so one chunk is one node — same
      id, metadata and hash — for every query and in the index's docstore.
    * Chunk hits become :func:`chunk_node` (``node_id`` the chunk id, ``ref_doc_id`` the
      document; with ``engine`` given, ``PREVIOUS`` / ``NEXT`` links to the neighbouring
      chunks).
    * Other kinds get ``node_id`` ``"<kind>:<id>"``, ``metadata`` ``kind``, ``layer``,
      ``method`` (the method that produced the context), ``hit_id``, ``chunk_ids``,
      ``document_ids`` and the hit's own metadata (e.g. a community ``title``), and no
      ``SOURCE`` (a graph element may come from several documents).
    Provenance keys (:data:`PROVENANCE_KEYS`) are excluded from the LLM and embedding views.
    """
    hit_meta: dict[str, Any] = dict(getattr(hit, "metadata", None) or {})
    document_ids = list(hit.document_ids)
    score = float(hit.score)
    if hit.kind == "chunk":
        document_id = hit_meta.get("document_id") or (document_ids[0] if document_ids else "")
        index = hit_meta.get("chunk_index")
        if not isinstance(index, int):
            index = int(str(hit.id).rpartition("#")[2] or 0) if "#" in str(hit.id) else 0
        prev_id, next_id = _neighbours(engine, document_id, index)
        node = chunk_node(
            hit.id, hit.text, document_id, index, hit_meta.get("start"), hit_meta.get("end"),
            hit_meta.get("document_metadata"), prev_id=prev_id, next_id=next_id,
        )
        return NodeWithScore(node=node, score=score)
    hit_meta.pop("document_metadata", None)
    for key in QUERY_METADATA_KEYS:
        hit_meta.pop(key, None)
    metadata: dict[str, Any] = dict(hit_meta)
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
    excluded = [k for k in PROVENANCE_KEYS if k in metadata]
    node = TextNode(
        id_=f"{hit.kind}:{hit.id}",
        text=hit.text,
        metadata=metadata,
        excluded_llm_metadata_keys=excluded,
        excluded_embed_metadata_keys=list(excluded),
    )
    return NodeWithScore(node=node, score=score)
