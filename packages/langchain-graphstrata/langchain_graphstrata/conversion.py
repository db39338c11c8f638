"""Conversion between graphstrata records and LangChain objects.

``graphstrata.Hit`` → LangChain ``Document`` (:func:`hit_to_document`,
:func:`hits_to_documents`), LangChain ``Document`` → ``graphstrata.Document``
(:func:`to_graphstrata_documents`), and LangChain ``Embeddings`` as a graphstrata embedder
(:func:`embedder_from_langchain`). Shared by the retriever and the answer chain.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

if TYPE_CHECKING:
    from graphstrata import Hit
    from graphstrata.models import Embedder

#: Metadata keys the retriever writes on every returned Document (they win over a source
#: document's own metadata keys of the same name).
RESERVED_METADATA_KEYS: tuple[str, ...] = (
    "kind",
    "layer",
    "method",
    "score",
    "raw_score",
    "rank",
    "chunk_ids",
    "document_ids",
)

#: The keys that depend on the query, not on the chunk: left out of the retriever's Documents
#: unless ``include_scores=True``. The reserved ``score``, ``raw_score``, ``rank``, and
#: ``retrieved_by``, which LightRAG's ``mode="mix"`` sets on its chunk hits (the merged list
#: that brought the chunk for this query: ``"graph"``, ``"vector"`` or ``"both"``).
QUERY_METADATA_KEYS: tuple[str, ...] = ("score", "raw_score", "rank", "retrieved_by")


def embedder_from_langchain(embeddings: Embeddings, *, id: str | None = None) -> Embedder:
    """Wrap a LangChain :class:`~langchain_core.embeddings.Embeddings` as a graphstrata embedder.

    Documents are embedded with ``embeddings.embed_documents`` and queries with
    ``embeddings.embed_query`` (so asymmetric models keep their query prompt).

    Args:
        embeddings: any LangChain embeddings object.
        id: identifier persisted with the index. Default:
            ``"langchain:<ClassName>"``, plus ``":<model>"`` when the object has a ``model`` or
            ``model_name`` string attribute. An index loaded later must be given embeddings with
            the same id and dimension (graphstrata raises ``ValueError`` otherwise).

    Embeddings that wrap a graphstrata embedder (``graphstrata_embedder``:
    :class:`~langchain_graphstrata.GraphStrataEmbeddings`) are unwrapped to it, so the index
    persists the core embedder's own id and loads with no embedder.

    Returns:
        A ``graphstrata.models.CallableEmbedder``; its dimension is probed with one
        ``embed_documents`` call of one short text. Or the wrapped graphstrata embedder.
    """
    from graphstrata.models import CallableEmbedder
    from graphstrata.models import Embedder as CoreEmbedder

    if not isinstance(embeddings, Embeddings):
        raise TypeError(
            f"embeddings must be a langchain_core.embeddings.Embeddings, "
            f"got {type(embeddings).__name__}"
        )
    inner = getattr(embeddings, "graphstrata_embedder", None)
    if id is None and isinstance(inner, CoreEmbedder):
        return inner
    if id is None:
        id = f"langchain:{type(embeddings).__name__}"
        model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
        if isinstance(model, str) and model:
            id = f"{id}:{model}"
    return CallableEmbedder(fn=embeddings.embed_documents, id=id, query_fn=embeddings.embed_query)


def hit_to_document(
    hit: Hit,
    *,
    method: str,
    rank: int,
    source_metadata: Mapping[str, Any] | None = None,
    include_scores: bool = True,
) -> Document:
    """Translate one graphstrata ``Hit`` into a LangChain ``Document``.

    ``page_content`` is ``hit.text`` and ``id`` is ``hit.id`` (a chunk id
    ``"<document_id>#<n>"`` for chunks). Metadata, from lowest to highest precedence:

    * the source document's own metadata, flattened to the top level (so e.g. a ``"title"``
      you indexed comes back as ``"title"``): for chunk hits always
      (``hit.metadata["document_metadata"]``); for graph-context hits when they come from
      exactly one document (``source_metadata``);
    * the hit's method-specific extras (for chunks ``document_id``, ``chunk_index``,
      ``start``, ``end``; ``title`` for communities, ...);
    * ``document_id`` (the source document's id) and, for chunks, ``chunk_id`` (= ``id``),
      whenever the hit has exactly one source document;
    * the reserved keys (:data:`RESERVED_METADATA_KEYS`): ``kind`` (str), ``layer`` (int or
      None), ``method`` (str), ``score`` (float in [0, 1], higher is better: the core's
      normalised score), ``raw_score`` (the method's own score), ``rank`` (int, 0-based
      position in the result list), ``chunk_ids`` (list[str]), ``document_ids`` (list[str]);
    * ``source``: the source document's own ``"source"`` if it had one, else the
      ``document_ids`` joined by ``", "`` (what LangChain prompts conventionally cite).

    With ``include_scores=False`` the per-query keys (:data:`QUERY_METADATA_KEYS`: ``score``,
    ``raw_score``, ``rank``, LightRAG mix's ``retrieved_by``) are left out, so the same chunk is the same ``Document`` (equal,
    same ``id``, same metadata) whatever the query — what LangChain's combinators
    (``MultiQueryRetriever``, ``EnsembleRetriever``) deduplicate on.
    """
    extras = dict(hit.metadata or {})
    chunk_source = extras.pop("document_metadata", None)
    metadata: dict[str, Any] = {}
    if isinstance(chunk_source, Mapping):
        metadata.update(chunk_source)
    elif isinstance(source_metadata, Mapping):
        metadata.update(source_metadata)
    metadata.update(extras)
    document_ids = list(dict.fromkeys(hit.document_ids))
    if len(document_ids) == 1:
        metadata["document_id"] = document_ids[0]
    if hit.kind == "chunk":
        metadata["chunk_id"] = hit.id
    raw = extras.get("raw_score", hit.score)
    metadata.update(
        kind=hit.kind,
        layer=hit.layer,
        method=method,
        score=float(hit.score),
        raw_score=float(raw),
        rank=rank,
        chunk_ids=list(hit.chunk_ids),
        document_ids=list(hit.document_ids),
    )
    metadata.setdefault("source", ", ".join(document_ids))
    if not include_scores:
        for key in QUERY_METADATA_KEYS:
            metadata.pop(key, None)
    return Document(page_content=hit.text, metadata=metadata, id=hit.id)


def hits_to_documents(
    hits: Sequence[Hit], *, method: str, engine: Any, include_scores: bool = True
) -> list[Document]:
    """Translate hits, in order, with :func:`hit_to_document` (``rank`` = position;
    ``include_scores`` as there).

    A graph-context hit from exactly one document gets that document's metadata, looked up in
    ``engine.documents`` (the ``graphstrata.GraphStrata`` the hits came from).
    """
    hits = list(hits)
    sources: Mapping[str, Any] = {}
    if any(h.kind != "chunk" for h in hits):
        sources = getattr(engine, "documents", None) or {}
    out = []
    for rank, h in enumerate(hits):
        meta = None
        if h.kind != "chunk" and len(set(h.document_ids)) == 1:
            doc = sources.get(h.document_ids[0])
            meta = getattr(doc, "metadata", None)
        out.append(
            hit_to_document(
                h, method=method, rank=rank, source_metadata=meta, include_scores=include_scores
            )
        )
    return out


def _text_id(text: str) -> str:
    """Deterministic id of a text without an id: 16 hex digits of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def to_graphstrata_documents(
    documents: Iterable[Document],
    id_key: str | None = None,
    ids: Sequence[str] | None = None,
) -> list[Any]:
    """LangChain Documents → graphstrata Documents, with ids resolved and checked.

    Id of each document, first found: ``ids[i]``; ``metadata[id_key]`` (when ``id_key``);
    ``Document.id``; the SHA-256 of its text (``"-1"``, ``"-2"``, ... for repeats).
    Text is ``page_content``; metadata is copied.

    Raises:
        ValueError: ``ids`` is one string, of another length, or holds an empty / non-str id;
            a document lacks ``id_key``; two documents share an id.
        TypeError: an item is not a LangChain ``Document``.
    """
    from graphstrata import Document as GSDocument

    docs = list(documents)
    if ids is not None:
        if isinstance(ids, str):
            raise ValueError("ids must be a list of strings, one per document, not one string")
        ids = list(ids)
        if len(ids) != len(docs):
            raise ValueError(f"got {len(ids)} ids for {len(docs)} documents")
    out: list[Any] = []
    seen: set[str] = set()
    for i, doc in enumerate(docs):
        if not isinstance(doc, Document):
            raise TypeError(f"documents[{i}] is a {type(doc).__name__}, not a LangChain Document")
        if ids is not None:
            if not isinstance(ids[i], str) or not ids[i]:
                raise ValueError(f"ids[{i}] must be a non-empty string, got {ids[i]!r}")
            doc_id = ids[i]
        elif id_key is not None:
            if id_key not in doc.metadata:
                raise ValueError(f"documents[{i}] has no metadata key {id_key!r} (id_key)")
            doc_id = str(doc.metadata[id_key])
        elif doc.id is not None:
            doc_id = str(doc.id)
        else:
            # Deterministic fallback so rebuilding the same corpus gives the same ids.
            base = _text_id(doc.page_content)
            doc_id, n = base, 1
            while doc_id in seen:
                doc_id, n = f"{base}-{n}", n + 1
        if doc_id in seen:
            raise ValueError(f"duplicate document id {doc_id!r} (documents[{i}])")
        seen.add(doc_id)
        out.append(GSDocument(id=doc_id, text=doc.page_content, metadata=dict(doc.metadata)))
    return out
