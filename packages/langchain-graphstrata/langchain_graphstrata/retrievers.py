"""`GraphStrataRetriever`: a LangChain retriever over a graphstrata index.

The retriever only translates: a query goes to :meth:`graphstrata.GraphStrata.retrieve` /
:meth:`~graphstrata.GraphStrata.aretrieve`, and each returned ``Hit`` comes back as a LangChain
:class:`~langchain_core.documents.Document`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphstrata.types import check_k, check_kinds
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr

if TYPE_CHECKING:
    from graphstrata import GraphStrata, Hit
    from graphstrata.models import Embedder

#: Metadata keys the retriever writes on every returned Document (they win over a source
#: document's own metadata keys of the same name).
RESERVED_METADATA_KEYS: tuple[str, ...] = (
    "kind",
    "layer",
    "method",
    "score",
    "rank",
    "chunk_ids",
    "document_ids",
)

# Keyword arguments LangChain itself may pass through ``invoke(**kwargs)``; never method options.
_LANGCHAIN_KWARGS = frozenset({"verbose", "run_id", "run_name", "callbacks", "tags", "metadata"})


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

    Returns:
        A ``graphstrata.models.CallableEmbedder``; its dimension is probed with one
        ``embed_documents`` call of one short text.
    """
    from graphstrata.models import CallableEmbedder

    if not isinstance(embeddings, Embeddings):
        raise TypeError(
            f"embeddings must be a langchain_core.embeddings.Embeddings, "
            f"got {type(embeddings).__name__}"
        )
    if id is None:
        id = f"langchain:{type(embeddings).__name__}"
        model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
        if isinstance(model, str) and model:
            id = f"{id}:{model}"
    return CallableEmbedder(fn=embeddings.embed_documents, id=id, query_fn=embeddings.embed_query)


def _method_registry() -> Mapping[str, Any] | None:
    """The core's ``{name: Method class}`` registry, or ``None`` if this core has none."""
    try:
        from graphstrata.methods import METHODS
    except ImportError:  # pragma: no cover - older/other core layouts
        return None
    return METHODS if isinstance(METHODS, Mapping) else None


def _check_options(method: str, options: Mapping[str, Any]) -> None:
    """Reject option names the method does not declare (when the core declares them)."""
    registry = _method_registry()
    cls = registry.get(method) if registry is not None else None
    defaults = getattr(cls, "defaults", None)
    if not isinstance(defaults, Mapping):
        return  # the core will validate at query time
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        known = ", ".join(sorted(defaults)) or "none"
        raise ValueError(
            f"unknown option(s) {unknown} for method {method!r}; its options: {known}"
        )


def hit_to_document(hit: Hit, *, method: str, rank: int) -> Document:
    """Translate one graphstrata ``Hit`` into a LangChain ``Document``.

    ``page_content`` is ``hit.text`` and ``id`` is ``hit.id`` (a chunk id
    ``"<document_id>#<n>"`` for chunks). Metadata, from lowest to highest precedence:

    * for chunk hits, the source document's own metadata (``hit.metadata["document_metadata"]``)
      flattened to the top level, so e.g. a ``"title"`` you indexed comes back as ``"title"``;
    * the hit's method-specific extras (``document_id`` and ``chunk_index`` for chunks,
      ``title`` for communities, ...);
    * the reserved keys: ``kind`` (str), ``layer`` (int or None), ``method`` (str), ``score``
      (float, higher is better, comparable only within one kind of one query), ``rank`` (int,
      0-based position in the result list), ``chunk_ids`` (list[str]), ``document_ids``
      (list[str]);
    * ``source``: the source document's own ``"source"`` if it had one, else the
      ``document_ids`` joined by ``", "`` (what LangChain prompts conventionally cite).
    """
    extras = dict(hit.metadata or {})
    source_meta = extras.pop("document_metadata", None)
    metadata: dict[str, Any] = {}
    if isinstance(source_meta, Mapping):
        metadata.update(source_meta)
    metadata.update(extras)
    metadata.update(
        kind=hit.kind,
        layer=hit.layer,
        method=method,
        score=float(hit.score),
        rank=rank,
        chunk_ids=list(hit.chunk_ids),
        document_ids=list(hit.document_ids),
    )
    metadata.setdefault("source", ", ".join(hit.document_ids))
    return Document(page_content=hit.text, metadata=metadata, id=hit.id)


def _to_graphstrata_documents(
    documents: Iterable[Document], id_key: str | None
) -> list[Any]:
    """LangChain Documents → graphstrata Documents, with ids resolved and checked."""
    from graphstrata import Document as GSDocument

    out: list[Any] = []
    seen: set[str] = set()
    for i, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise TypeError(f"documents[{i}] is a {type(doc).__name__}, not a LangChain Document")
        if id_key is not None:
            if id_key not in doc.metadata:
                raise ValueError(f"documents[{i}] has no metadata key {id_key!r} (id_key)")
            doc_id = str(doc.metadata[id_key])
        elif doc.id is not None:
            doc_id = str(doc.id)
        else:
            # Deterministic fallback so rebuilding the same corpus gives the same ids.
            base = hashlib.sha256(doc.page_content.encode("utf-8")).hexdigest()[:16]
            doc_id, n = base, 1
            while doc_id in seen:
                doc_id, n = f"{base}-{n}", n + 1
        if doc_id in seen:
            raise ValueError(f"duplicate document id {doc_id!r} (documents[{i}])")
        seen.add(doc_id)
        out.append(GSDocument(id=doc_id, text=doc.page_content, metadata=dict(doc.metadata)))
    if not out:
        raise ValueError("from_documents needs at least one Document")
    return out


class GraphStrataRetriever(BaseRetriever):
    """Graph-RAG retriever over a graphstrata index (ArchRAG, HiRAG, LightRAG, AGRAG, ...).

    Give exactly one of ``index_dir`` (a directory written by ``GraphStrata.persist`` or
    ``graphstrata index``) or ``index`` (a ``graphstrata.GraphStrata`` object), or build one
    from LangChain Documents with :meth:`from_documents`.

    Example:
        .. code-block:: python

            from langchain_graphstrata import GraphStrataRetriever

            retriever = GraphStrataRetriever(index_dir="my_index", method="archrag", k=5)
            docs = retriever.invoke("Who founded the company?")          # 5 chunk Documents
            docs = retriever.invoke("Who founded the company?", k=2)     # 2 chunk Documents
            ctx = GraphStrataRetriever(index_dir="my_index", kinds=None)  # chunks + graph context

    What comes back: by default ``kinds=("chunk",)``, so ``invoke`` returns exactly
    ``min(k, number of chunks in the index)`` chunk Documents, best first. With ``kinds=None``
    you get the method's top-k chunks followed by its graph context (entities, relations,
    communities, paths), so the list can be longer than ``k``. Any subset of kinds may be asked.
    Each Document's ``id`` is the hit id and its metadata carries the keys described in
    :func:`hit_to_document` (``kind``, ``layer``, ``method``, ``score``, ``rank``,
    ``chunk_ids``, ``document_ids``, and for chunks ``document_id``, ``chunk_index`` plus the
    source document's own metadata).

    Per-call overrides: ``invoke(query, k=..., method=..., kinds=..., **method_options)``;
    any other keyword is passed to the method as an option (merged over ``method_options``
    for the constructor's method; a per-call ``method`` gets only the per-call options).

    Args (fields):
        index_dir: path of a persisted index directory.
        index: a ``GraphStrata`` object (kept by reference, not copied).
        method: retrieval method name; one of ``index.methods`` (``"archrag"``, ``"dense"``,
            ``"bm25"``, ``"hybrid"``, ...).
        k: number of chunk hits, > 0 (how many context hits ``kinds=None`` adds is up to the
            method, e.g. ArchRAG's ``k_per_layer``).
        kinds: hit kinds to return; ``("chunk",)`` by default, ``None`` for chunks + context.
        method_options: keyword options for the method (see the graphstrata method docs).
        embeddings: a LangChain ``Embeddings`` to embed queries with when loading
            ``index_dir``; the index must have been built with the same embeddings (same id and
            dimension). ``None`` uses the embedder the index was built with (the offline
            default unless you chose another).

    Raises:
        ValueError: neither or both of ``index`` / ``index_dir`` given; ``k`` not a positive
            int; unknown ``method`` (the message lists the known ones); an option name the
            method does not declare (the message lists its options); unknown ``kinds``;
            ``embeddings`` given together with ``index``; the index's embedder id or dimension
            does not match ``embeddings`` (from ``GraphStrata.load``).
        FileNotFoundError: ``index_dir`` does not exist or is not a directory.
        TypeError: ``index`` is not a GraphStrata-like object.
        All are raised at construction; ``invoke`` raises ``ValueError`` for a bad per-call
        ``k`` / ``method`` / ``kinds`` / option and for an empty query.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index_dir: str | Path | None = None
    """Path of a persisted graphstrata index directory."""
    index: Any = Field(default=None, exclude=True, repr=False)
    """A ``graphstrata.GraphStrata`` object; alternative to ``index_dir``."""
    method: str = "archrag"
    """Retrieval method; one of ``index.methods``."""
    k: int = 5
    """Number of chunk hits (exactly min(k, n_chunks) Documents when kinds=("chunk",))."""
    kinds: tuple[str, ...] | None = ("chunk",)
    """Hit kinds to return; None returns chunks followed by the method's graph context."""
    method_options: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword options passed to the method on every call."""
    embeddings: Embeddings | None = Field(default=None, exclude=True, repr=False)
    """LangChain embeddings used when loading ``index_dir``; None keeps the index's own."""

    _gs: Any = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        # Validation happens after pydantic's so our errors surface as plain ValueError /
        # FileNotFoundError with one clear message instead of a wrapped ValidationError.
        # k and kinds are checked before pydantic so "3" or True are not silently coerced.
        if "k" in data:
            check_k(data["k"])
        if "kinds" in data:
            data["kinds"] = check_kinds(data["kinds"])
        super().__init__(**data)
        if (self.index is None) == (self.index_dir is None):
            raise ValueError(
                "give exactly one of index_dir= (a persisted index directory) or index= "
                "(a graphstrata.GraphStrata); or use GraphStrataRetriever.from_documents(...)"
            )
        if self.index is not None:
            if self.embeddings is not None:
                raise ValueError(
                    "embeddings= is only used when loading index_dir=; a GraphStrata object "
                    "already carries its embedder"
                )
            if not callable(getattr(self.index, "retrieve", None)) or not hasattr(
                self.index, "methods"
            ):
                raise TypeError(
                    f"index must be a graphstrata.GraphStrata, got {type(self.index).__name__}"
                )
            self._gs = self.index
        else:
            path = Path(self.index_dir).expanduser()  # type: ignore[arg-type]
            if not path.exists():
                raise FileNotFoundError(f"graphstrata index directory not found: {str(path)!r}")
            if not path.is_dir():
                raise FileNotFoundError(
                    f"graphstrata index_dir must be a directory, got a file: {str(path)!r}"
                )
            from graphstrata import GraphStrata

            embedder = (
                embedder_from_langchain(self.embeddings) if self.embeddings is not None else None
            )
            self._gs = GraphStrata.load(path, embedder=embedder)
        self._check_method(self.method)
        _check_options(self.method, self.method_options)

    # ------------------------------------------------------------------ construction helpers

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        *,
        id_key: str | None = None,
        embeddings: Embeddings | None = None,
        config: Any = None,
        persist_dir: str | Path | None = None,
        show_progress: bool = False,
        **kwargs: Any,
    ) -> GraphStrataRetriever:
        """Build a graphstrata index from LangChain Documents and return a retriever over it.

        Args:
            documents: LangChain ``Document`` objects; one graphstrata document each (the core
                chunks them). ``page_content`` is the text; ``metadata`` is kept (must be
                JSON-serialisable) and comes back on every chunk Document of that source.
            id_key: metadata key holding each document's id. When ``None``, ``Document.id`` is
                used, and a document without an id gets a deterministic one (the first 16 hex
                digits of the SHA-256 of its text).
            embeddings: a LangChain ``Embeddings`` to embed chunks, graph records and queries
                with (wrapped by :func:`embedder_from_langchain`); ``None`` uses graphstrata's
                offline default embedder.
            config: a ``graphstrata.GraphStrataConfig`` (``None`` for the defaults).
            persist_dir: if given, the index is also persisted there (atomically).
            show_progress: show the core's build progress bars.
            **kwargs: retriever fields: ``method``, ``k``, ``kinds``, ``method_options``.

        Returns:
            A ``GraphStrataRetriever`` whose ``index`` is the freshly built ``GraphStrata``.

        Raises:
            ValueError: no documents; a document lacks ``id_key``; duplicate ids; bad ``k`` /
                ``method`` / ``kinds``.
            TypeError: an item is not a LangChain ``Document``.
        """
        from graphstrata import GraphStrata

        for bad in ("index", "index_dir"):
            if bad in kwargs:
                raise ValueError(f"from_documents builds its own index; do not pass {bad}=")
        if "k" in kwargs:
            check_k(kwargs["k"])
        if "kinds" in kwargs:
            kwargs["kinds"] = check_kinds(kwargs["kinds"])
        # Fail before the (slow) build when the method or its options are wrong.
        registry = _method_registry()
        method = kwargs.get("method", cls.model_fields["method"].default)
        if registry is not None:
            if method not in registry:
                raise ValueError(
                    f"unknown method {method!r}; known methods: {', '.join(registry)}"
                )
            _check_options(method, kwargs.get("method_options") or {})
        gs_docs = _to_graphstrata_documents(documents, id_key)
        embedder = embedder_from_langchain(embeddings) if embeddings is not None else None
        gs = GraphStrata.build(
            gs_docs,
            config=config,
            persist_dir=persist_dir,
            embedder=embedder,
            show_progress=show_progress,
        )
        return cls(index=gs, **kwargs)

    @property
    def graphstrata(self) -> GraphStrata:
        """The underlying ``graphstrata.GraphStrata`` (loaded or given)."""
        return self._gs

    # ------------------------------------------------------------------ retrieval

    def _check_method(self, method: str) -> None:
        known = tuple(self._gs.methods)
        if method not in known:
            raise ValueError(f"unknown method {method!r}; known methods: {', '.join(known)}")

    def _call_args(self, kwargs: dict[str, Any]) -> tuple[str, int, Any, dict[str, Any]]:
        kwargs = {k: v for k, v in kwargs.items() if k not in _LANGCHAIN_KWARGS}
        k = check_k(kwargs.pop("k", self.k))
        method = kwargs.pop("method", self.method)
        if method != self.method:
            self._check_method(method)
        kinds = check_kinds(kwargs.pop("kinds", self.kinds))
        options = {**self.method_options, **kwargs}
        if method != self.method:
            options = kwargs  # constructor options belong to the constructor's method
        _check_options(method, options)
        return method, k, kinds, options

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        method, k, kinds, options = self._call_args(kwargs)
        hits = self._gs.retrieve(query, method=method, k=k, kinds=kinds, **options)
        return [hit_to_document(h, method=method, rank=i) for i, h in enumerate(hits)]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        method, k, kinds, options = self._call_args(kwargs)
        hits = await self._gs.aretrieve(query, method=method, k=k, kinds=kinds, **options)
        return [hit_to_document(h, method=method, rank=i) for i, h in enumerate(hits)]

    def _get_ls_params(self, **kwargs: Any) -> Any:
        params = super()._get_ls_params(**kwargs)
        params["ls_retriever_name"] = f"graphstrata-{kwargs.get('method', self.method)}"
        return params


__all__: Sequence[str] = [
    "GraphStrataRetriever",
    "embedder_from_langchain",
    "hit_to_document",
    "RESERVED_METADATA_KEYS",
]
