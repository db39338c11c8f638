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
    from llama_index.core.base.embeddings.base import BaseEmbedding

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
