"""LlamaIndex documents and nodes ↔ graphstrata documents, and what a build is given.

* :func:`to_graphstrata_documents`: LlamaIndex documents / nodes → ``graphstrata.Document``.
* :func:`documents_of_ref_doc`, :func:`delete_documents`, :func:`chunk_ids_by_document`: the
  core documents (and chunks) behind a LlamaIndex ``ref_doc_id``, and deleting them.
* :func:`resolve_embedder`, :func:`resolve_build_llm`: the embedder and LLM a new index is
  built with, from the caller's arguments and LlamaIndex ``Settings``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms import LLM

    from graphstrata import GraphStrata
    from graphstrata.llm.base import LLMInput
    from graphstrata.models import Embedder

from llama_index.core.embeddings.utils import resolve_embed_model
from llama_index.core.schema import BaseNode, Document, MetadataMode
from llama_index.core.settings import Settings
from llama_index.retrievers.graphstrata import (
    embedder_from_llama_index,
    pack_document_metadata,
    to_graphstrata_llm,
    unpack_document_metadata,
)


def to_graphstrata_documents(nodes: Sequence[BaseNode]) -> list[Any]:
    """Map LlamaIndex documents / nodes to ``graphstrata.Document`` records.

    A ``Document`` keeps its ``doc_id``; any other node is indexed as one document whose id
    is its ``node_id`` and which remembers its ``ref_doc_id`` (so retrieved chunks link to
    that document and ``delete_ref_doc(ref_doc_id)`` still removes it). Text is
    ``get_content(MetadataMode.NONE)``. Metadata is the node's own, plus what a graphstrata
    document has no field for (``excluded_llm_metadata_keys``,
    ``excluded_embed_metadata_keys``, non-default templates, ``ref_doc_id``) under the
    reserved key ``"__llama_index__"``, which retrieval strips again (see
    ``llama_index.retrievers.graphstrata.pack_document_metadata``).

    Raises:
        ValueError: two inputs share an id, or metadata uses the reserved key.
    """
    from graphstrata import Document as GSDocument

    out = []
    seen: set = set()
    for node in nodes:
        ref_doc_id = None
        if isinstance(node, Document):
            doc_id = node.doc_id
        else:
            doc_id = node.node_id
            if node.ref_doc_id is not None and node.ref_doc_id != doc_id:
                ref_doc_id = node.ref_doc_id
        metadata = pack_document_metadata(node, ref_doc_id=ref_doc_id)
        if doc_id in seen:
            raise ValueError(f"duplicate document id {doc_id!r} in one call")
        seen.add(doc_id)
        out.append(
            GSDocument(
                id=doc_id,
                text=node.get_content(metadata_mode=MetadataMode.NONE),
                metadata=metadata,
            )
        )
    return out


def documents_of_ref_doc(engine: GraphStrata, ref_doc_id: str) -> list[str]:
    """Ids of the engine's documents that belong to the LlamaIndex document ``ref_doc_id``:
    the document itself, and nodes inserted with ``ref_doc_id`` as their source."""
    return [
        doc_id
        for doc_id, doc in engine.documents.items()
        if doc_id == ref_doc_id
        or unpack_document_metadata(doc.metadata)[1].get("ref_doc_id") == ref_doc_id
    ]


def delete_documents(engine: GraphStrata, ids: Sequence[str]) -> list[str]:
    """Delete those of ``ids`` that are indexed, in one core ``delete``; return them.

    The core's ``delete`` raises ``KeyError`` (deleting nothing) when any id is not indexed.
    The ids are checked against the engine first; if a concurrent writer deleted some of
    them in between, the ``KeyError`` is answered by deleting the ones still there (a
    failed core delete changes nothing, so the index still sees one update). Unknown ids are
    never an error here: callers decide whether to warn.

    Raises:
        ValueError: it would delete every document (from the core).
    """
    for _ in range(3):
        known = [d for d in dict.fromkeys(ids) if d in engine.documents]
        if not known:
            return []
        try:
            engine.delete(known)
        except KeyError:
            continue  # some went away meanwhile: retry with the ones still indexed
        return known
    raise RuntimeError(f"documents {list(ids)!r} kept changing during delete")


def resolve_embedder(embed_model: BaseEmbedding | Embedder | str | None = None) -> Embedder | None:
    """Pick the embedder for a new index.

    Order: ``embed_model`` when given (any LlamaIndex embedding, or a string that
    ``resolve_embed_model`` understands, or a graphstrata ``Embedder``); else
    ``Settings.embed_model`` when the user set one; else ``None`` (the core's offline
    default). ``Settings.embed_model`` is never *read* when unset, because reading it
    resolves LlamaIndex's hosted default.
    """
    if embed_model is None:
        embed_model = getattr(Settings, "_embed_model", None)
        if embed_model is None:
            return None
    if hasattr(embed_model, "embed") and hasattr(embed_model, "dim"):
        return embed_model  # already a graphstrata Embedder
    if isinstance(embed_model, str):
        embed_model = resolve_embed_model(embed_model)
    return embedder_from_llama_index(embed_model)


def resolve_build_llm(llm: LLM | LLMInput | str | None = None, use_llm: bool = False) -> LLMInput | None:
    """Pick the LLM a new index is built with (the core's ``llm=``).

    ``llm`` when given (a LlamaIndex ``LLM`` is wrapped in ``LlamaIndexLLM``; a graphstrata
    ``LLM``, ``LLMClient`` or plain callable goes to the core as is); else ``Settings.llm``
    when ``use_llm`` is true; else ``None``: the offline build. ``Settings.llm`` is never
    read unless ``use_llm`` asks for it (its default resolves a hosted API).

    Raises:
        TypeError: ``use_llm`` is not a bool.
    """
    if not isinstance(use_llm, bool):
        raise TypeError(f"use_llm must be True or False, got {use_llm!r}")
    if llm is None and use_llm:
        llm = Settings.llm
    return to_graphstrata_llm(llm)



def chunk_ids_by_document(engine: GraphStrata) -> dict[str, list[str]]:
    """Chunk ids per document id, if the engine exposes its chunks (else an empty dict)."""
    chunks = getattr(engine, "chunks", None)
    if chunks is None:
        return {}
    values = chunks.values() if isinstance(chunks, Mapping) else chunks
    out: dict[str, list[str]] = {}
    for chunk in values:
        out.setdefault(chunk.document_id, []).append(chunk.id)
    return out

