"""``GraphStrataIndex``: a graphstrata graph-RAG index behind LlamaIndex's ``BaseIndex``.

The graphstrata engine owns chunking, the knowledge graph, the community hierarchy and the
C-HNSW index; this module translates LlamaIndex documents, storage contexts and retrievers to
and from it.

Persistence. The engine is a directory (SQLite + native index + manifest), not JSON. The index
registers a :class:`GraphStrataStore` in ``storage_context.vector_stores["graphstrata"]``, so
``index.storage_context.persist(persist_dir)`` writes LlamaIndex's usual JSON stores *and* the
engine, atomically, into ``<persist_dir>/graphstrata/``, and records the engine directory's
absolute path in the index struct (``index_store.json``). A ``StorageContext`` does not
remember the directory it was read from, so that recorded path is how
``load_index_from_storage(storage_context)`` finds the engine::

    index = load_index_from_storage(StorageContext.from_defaults(persist_dir=d))
    index = GraphStrataIndex.load(d)        # the same, in one call; d may have been moved

After moving or copying a persisted directory, name it (``GraphStrataIndex.load(new_dir)`` or
``load_index_from_storage(ctx, persist_dir=new_dir)``): the recorded path is only a fallback
for when no directory is given.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.chat_engine.types import ChatMode
from llama_index.core.data_structs.data_structs import IndexStruct
from llama_index.core.data_structs.registry import INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS
from llama_index.core.indices.base import BaseIndex
from llama_index.core.indices.registry import INDEX_STRUCT_TYPE_TO_INDEX_CLASS
from llama_index.core.llms.utils import resolve_llm
from llama_index.core.query_engine.retriever_query_engine import RetrieverQueryEngine
from llama_index.core.schema import BaseNode, Document, MetadataMode, TransformComponent
from llama_index.core.settings import Settings
from llama_index.core.storage.docstore.types import RefDocInfo
from llama_index.core.storage.index_store.simple_index_store import SimpleIndexStore
from llama_index.core.storage.index_store.types import (
    DEFAULT_PERSIST_FNAME as INDEX_STORE_FNAME,
)
from llama_index.core.storage.storage_context import StorageContext
from llama_index.graph_rag.graphstrata.conversion import (
    chunk_ids_by_document,
    delete_documents,
    documents_of_ref_doc,
    resolve_build_llm,
    resolve_embedder,
    to_graphstrata_documents,
)
from llama_index.graph_rag.graphstrata.query_engine import (
    METHOD_RESPONSE_MODE,
    GraphStrataQueryEngine,
)
from llama_index.graph_rag.graphstrata.routing import (
    method_engine_arguments,
    route_chat_engine_arguments,
    route_query_engine_arguments,
)
from llama_index.graph_rag.graphstrata.store import (
    DEFAULT_ENGINE_DIRNAME,
    GRAPHSTRATA_STORE_NAMESPACE,
    GraphStrataStore,
)
from llama_index.retrievers.graphstrata import (
    DEFAULT_CONTEXT_K,
    DEFAULT_KINDS,
    GraphStrataRetriever,
    chunk_nodes,
    pack_document_metadata,
    to_graphstrata_llm,
    unknown_arguments_error,
    unpack_document_metadata,
)
from llama_index.retrievers.graphstrata.llm import is_llama_index_llm

if TYPE_CHECKING:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.chat_engine.types import BaseChatEngine
    from llama_index.core.llms import LLM
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

    from graphstrata import GraphStrata, GraphStrataConfig
    from graphstrata.llm.base import LLMInput
    from graphstrata.models import Embedder

logger = logging.getLogger(__name__)

#: ``IndexStruct`` type tag of a GraphStrataIndex in an index store. llama-index-core looks a
#: persisted tag up in a plain dict (``INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS``) and has no
#: plugin hook, so a process that has not imported this package gets ``KeyError: <tag>``: the
#: tag itself says what to import.
GRAPHSTRATA_STRUCT_TYPE = (
    "graphstrata (import llama_index.graph_rag.graphstrata before load_index_from_storage; "
    "pip install llama-index-graph-rag-graphstrata)"
)
#: The tag indexes persisted before it named the package (still loaded).
LEGACY_STRUCT_TYPES: tuple[str, ...] = ("graphstrata",)

_LLAMA_INDEX_EMBEDDER_PREFIX = "llama_index:"


@dataclass
class GraphStrataIndexStruct(IndexStruct):
    """What a LlamaIndex index store keeps of a GraphStrataIndex (a few bytes of JSON).

    Attributes:
        engine_dir: sub-directory of the persist dir that holds the engine.
        embedder_id: id of the embedder the engine was built with (``"llama_index:<name>"``
            for a LlamaIndex embedding), used at load time to pick the right one.
        engine_path: absolute path of the engine directory when the storage context was last
            persisted (``None`` before that): how ``load_index_from_storage`` finds the
            engine when given only the storage context.
    """

    engine_dir: str = DEFAULT_ENGINE_DIRNAME
    embedder_id: str | None = None
    engine_path: str | None = None

    @classmethod
    def get_type(cls) -> str:  # type: ignore[override]  # a tag outside IndexStructType
        """Index struct type tag (:data:`GRAPHSTRATA_STRUCT_TYPE`: it names the package to
        import, which is what a process that has not imported it reads in the ``KeyError``)."""
        return GRAPHSTRATA_STRUCT_TYPE



#: Keyword arguments ``BaseIndex.__init__`` itself takes beyond ours.
_BASE_INDEX_ARGUMENTS: tuple[str, ...] = ("objects",)
#: Every keyword argument of ``GraphStrataIndex(...)`` / ``from_documents`` / ``load``.
_INDEX_ARGUMENTS: tuple[str, ...] = (
    "nodes", "engine", "index_struct", "storage_context", "embed_model", "config",
    "persist_dir", "show_progress", "callback_manager", "transformations", "llm", "use_llm",
    *_BASE_INDEX_ARGUMENTS,
)


class GraphStrataIndex(BaseIndex[GraphStrataIndexStruct]):
    """A graphstrata graph-RAG index (knowledge graph + community hierarchy + C-HNSW).

    Build it with :meth:`from_documents` (LlamaIndex ``Document`` ids are kept as the core's
    document ids), wrap an existing engine with :meth:`from_engine`, or load it with
    :meth:`load` / ``load_index_from_storage(storage_context)``.

    Args:
        nodes: LlamaIndex nodes to index (each becomes one graphstrata document; prefer
            :meth:`from_documents`).
        engine: an existing ``graphstrata.GraphStrata`` to wrap.
        index_struct: a :class:`GraphStrataIndexStruct` (set by the loaders).
        storage_context: LlamaIndex storage context (a default one when ``None``).
        embed_model: embedding used when the index is built here; ``None`` means
            ``Settings.embed_model`` if the user set one, else the core's offline default.
            When loading, ``None`` picks the persisted embedder (a LlamaIndex-built index
            then needs ``embed_model`` or ``Settings.embed_model``).
        config: ``graphstrata.GraphStrataConfig`` for a new build (``None``: core defaults).
        persist_dir: where a persisted index lives (loading only; ``None``: the engine
            path recorded when it was persisted).
        show_progress: show the core's progress bars while building.
        callback_manager, transformations: as for ``BaseIndex``; the core chunks documents
            itself, so ``transformations`` are not applied.
        llm: an LLM for the papers' LLM steps: when building, LLM extraction (typed
            entities, described relations), LLM community reports and HiRAG summary
            entities; when loading, the LLM attached for query-time steps and
            :meth:`as_query_engine` ``(response_mode="method")``. A LlamaIndex ``LLM``
            (wrapped in ``LlamaIndexLLM``), a graphstrata ``LLM`` / ``LLMClient``, or a
            plain ``str -> str`` callable. ``None``: offline (see ``use_llm``).
        use_llm: build with ``Settings.llm`` when ``llm`` is ``None``. ``False`` (default):
            ``Settings.llm`` is never read and, without ``llm``, the build runs offline.

    Raises:
        ValueError: loading when the engine directory cannot be found (never persisted,
            or moved: pass ``persist_dir``), loading with the wrong embedder (from the
            core), none of ``nodes`` / ``engine`` / ``index_struct`` given, or an unknown
            keyword argument (named; e.g. retrieval options belong to :meth:`as_retriever`).
    """

    index_struct_cls = GraphStrataIndexStruct

    def __init__(
        self,
        nodes: Sequence[BaseNode] | None = None,
        engine: GraphStrata | None = None,
        index_struct: GraphStrataIndexStruct | None = None,
        storage_context: StorageContext | None = None,
        embed_model: BaseEmbedding | Embedder | str | None = None,
        config: GraphStrataConfig | Mapping[str, Any] | None = None,
        persist_dir: str | Path | None = None,
        show_progress: bool = False,
        callback_manager: CallbackManager | None = None,
        transformations: list[TransformComponent] | None = None,
        llm: LLM | LLMInput | str | None = None,
        use_llm: bool = False,
        **kwargs: Any,
    ) -> None:
        unknown = [name for name in kwargs if name not in _BASE_INDEX_ARGUMENTS]
        if unknown:  # BaseIndex would swallow them silently
            raise unknown_arguments_error(unknown, _INDEX_ARGUMENTS, "GraphStrataIndex")
        storage_context = storage_context or StorageContext.from_defaults()
        self._config = config
        self._embed_model_arg = embed_model
        self._llm_arg = llm
        self._use_llm = use_llm
        self._engine: Any = None
        if engine is not None:
            if nodes:
                raise ValueError("pass either nodes or engine, not both")
            self._engine = engine
            index_struct = index_struct or GraphStrataIndexStruct(
                embedder_id=_embedder_id(engine)
            )
        elif index_struct is not None:
            self._engine = self._open_engine(index_struct, storage_context, persist_dir)
        elif nodes is None:
            raise ValueError("GraphStrataIndex needs nodes, an engine, or an index_struct")
        self._show_progress = show_progress
        super().__init__(
            nodes=nodes,
            index_struct=index_struct,
            storage_context=storage_context,
            callback_manager=callback_manager,
            transformations=transformations,
            show_progress=show_progress,
            **kwargs,
        )
        self._attach_store()
        if not self._docstore_in_sync():
            self._sync_docstore()

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        storage_context: StorageContext | None = None,
        show_progress: bool = False,
        callback_manager: CallbackManager | None = None,
        transformations: list[TransformComponent] | None = None,
        embed_model: BaseEmbedding | Embedder | str | None = None,
        config: GraphStrataConfig | Mapping[str, Any] | None = None,
        llm: LLM | LLMInput | str | None = None,
        use_llm: bool = False,
        **kwargs: Any,
    ) -> GraphStrataIndex:
        """Build an index from LlamaIndex ``Document``s.

        Args:
            documents: the documents; each ``doc_id`` becomes the core document id and every
                retrieved chunk's ``ref_doc_id``. ``metadata`` is kept (JSON-serialisable).
            storage_context: where LlamaIndex's stores live (default: in memory).
            show_progress: show the core's progress bars.
            embed_model: see the class docstring.
            config: a ``graphstrata.GraphStrataConfig`` (chunk size, extraction, layers, ...;
                ``llm_gleaning``, ``llm_concurrency``, ``llm_community_reports`` for the LLM
                path).
            transformations: must be ``None`` or empty: graphstrata chunks and extracts by
                itself (``config``); clean documents beforehand with an ``IngestionPipeline``.
            llm: an LLM to build with (LLM extraction, community reports, HiRAG summaries),
                kept attached for :meth:`as_query_engine` ``(response_mode="method")``. Any
                LlamaIndex ``LLM``, a graphstrata ``LLM`` / ``LLMClient`` or a plain
                callable. The build's calls and tokens: ``index.engine.build_usage``.
            use_llm: ``True`` builds with ``Settings.llm`` when ``llm`` is ``None``. The
                default ``False`` never reads ``Settings.llm``: without ``llm`` the build is
                the offline one (statistical extraction, extractive summaries).

        Raises:
            ValueError: duplicate document ids, non-empty ``transformations``, or invalid input
                rejected by the core. No documents give an empty index: ``retrieve`` returns
                nothing until the first ``insert`` builds it.
            TypeError: ``llm`` is neither a LlamaIndex LLM nor a graphstrata LLM / callable.
            graphstrata.llm.LLMError: an LLM call failed after its retries.
        """
        if transformations:
            raise ValueError(
                "GraphStrataIndex chunks and extracts documents itself (see config); "
                "run your transformations in an IngestionPipeline before from_documents"
            )
        storage_context = storage_context or StorageContext.from_defaults()
        callback_manager = callback_manager or Settings.callback_manager
        gs_docs = to_graphstrata_documents(documents)
        build_llm = resolve_build_llm(llm, use_llm)
        with callback_manager.as_trace("index_construction"):
            engine = _build_engine(gs_docs, config, resolve_embedder(embed_model), show_progress, build_llm)
            for doc in documents:
                storage_context.docstore.set_document_hash(doc.doc_id, doc.hash)
            return cls(
                engine=engine,
                storage_context=storage_context,
                callback_manager=callback_manager,
                show_progress=show_progress,
                embed_model=embed_model,
                config=config,
                **kwargs,
            )

    @classmethod
    def from_engine(
        cls,
        engine: GraphStrata,
        storage_context: StorageContext | None = None,
        **kwargs: Any,
    ) -> GraphStrataIndex:
        """Wrap an existing ``graphstrata.GraphStrata`` engine (no rebuild)."""
        return cls(engine=engine, storage_context=storage_context, **kwargs)

    @classmethod
    def load(
        cls,
        persist_dir: str | Path,
        embed_model: BaseEmbedding | Embedder | str | None = None,
        llm: LLM | LLMInput | str | None = None,
        **kwargs: Any,
    ) -> GraphStrataIndex:
        """Load an index persisted with ``index.storage_context.persist(persist_dir)``.

        A bare engine directory written by ``GraphStrata.persist`` (no LlamaIndex JSON
        stores in it) is accepted too.

        Args:
            persist_dir: the directory.
            embed_model: the LlamaIndex embedding the index was built with, when it was built
                with one (``Settings.embed_model`` is used when set and this is ``None``).
            llm: an LLM to attach for query-time steps and :meth:`as_query_engine`
                ``(response_mode="method")``, with the index's response cache (a LlamaIndex
                ``LLM`` or a graphstrata ``LLM``); ``None``: none attached.
            **kwargs: passed to the constructor (``callback_manager``, ...).

        Raises:
            FileNotFoundError: ``persist_dir`` does not exist.
            ValueError: wrong embedder (from the core) or not a graphstrata index.
        """
        from llama_index.core.indices.loading import load_index_from_storage

        path = Path(persist_dir)
        if not path.is_dir():
            raise FileNotFoundError(f"no persisted index at {str(path)!r}")
        if not (path / "index_store.json").exists():

            embedder = resolve_embedder(embed_model) if embed_model is not None else None
            return cls(engine=_load_engine(path, embedder, to_graphstrata_llm(llm)), **kwargs)
        storage_context = StorageContext.from_defaults(persist_dir=str(path))
        if llm is not None:
            kwargs["llm"] = llm
        index = load_index_from_storage(
            storage_context, persist_dir=path, embed_model=embed_model, **kwargs
        )
        if not isinstance(index, cls):
            raise ValueError(f"{str(path)!r} holds a {type(index).__name__}, not a {cls.__name__}")
        return index

    def _open_engine(
        self,
        index_struct: GraphStrataIndexStruct,
        storage_context: StorageContext,
        persist_dir: str | Path | None,
    ) -> Any:
        store = storage_context.vector_stores.get(GRAPHSTRATA_STORE_NAMESPACE)
        if persist_dir is None and isinstance(store, GraphStrataStore):
            return store.client  # same process, same storage context
        if persist_dir is not None:
            engine_root = Path(persist_dir) / index_struct.engine_dir
        elif index_struct.engine_path:
            engine_root = Path(index_struct.engine_path)
            if not engine_root.is_dir():
                raise ValueError(
                    f"this GraphStrataIndex was persisted with its graph in {str(engine_root)!r}, "
                    "which no longer exists (was the directory moved?): call "
                    "load_index_from_storage(storage_context, persist_dir=...) or "
                    "GraphStrataIndex.load(persist_dir)"
                )
        else:
            raise ValueError(
                "GraphStrataIndex keeps its graph in <persist_dir>/"
                f"{index_struct.engine_dir}/ and this index struct records no persisted "
                "location: call load_index_from_storage(storage_context, persist_dir=...) or "
                "GraphStrataIndex.load(persist_dir)"
            )

        embedder = None
        persisted = index_struct.embedder_id or ""
        if self._embed_model_arg is not None or persisted.startswith(_LLAMA_INDEX_EMBEDDER_PREFIX):
            embedder = resolve_embedder(self._embed_model_arg)
            if embedder is None:
                raise ValueError(
                    f"this index was built with the LlamaIndex embedding {persisted!r}; pass "
                    "embed_model=... or set Settings.embed_model before loading it"
                )
        return _load_engine(engine_root, embedder, to_graphstrata_llm(self._llm_arg))

    def _attach_store(self) -> None:
        self._storage_context.vector_stores[GRAPHSTRATA_STORE_NAMESPACE] = GraphStrataStore(
            self._engine, on_persist=self._record_persist, on_delete=self._forget_documents,
            engine_dir=self._index_struct.engine_dir,
        )

    def _forget_documents(self, ids: Sequence[str]) -> None:
        """Drop the chunk nodes and document entries of core documents deleted from the
        engine (by ``GraphStrataStore.delete``) from the docstore."""
        self._sync_docstore(removed=ids)
        for doc_id in ids:
            self.docstore.delete_document(doc_id, raise_error=False)
        self._storage_context.index_store.add_index_struct(self._index_struct)

    def _record_persist(self, persist_dir: Path) -> None:
        """Record the engine's absolute path in the index struct, once the engine is written.

        ``StorageContext.persist`` writes the index store *before* the vector stores (the
        engine among them), so a file-backed index store is written again here with the
        updated struct; a remote index store is updated by ``add_index_struct`` itself.
        """
        self._index_struct.engine_path = str(
            (persist_dir / self._index_struct.engine_dir).absolute()
        )
        index_store = self._storage_context.index_store
        index_store.add_index_struct(self._index_struct)
        index_file = persist_dir / INDEX_STORE_FNAME
        if isinstance(index_store, SimpleIndexStore) and index_file.exists():
            index_store.persist(persist_path=str(index_file))

    # -- docstore -----------------------------------------------------------------------------
    def _docstore_in_sync(self) -> bool:
        """Whether the docstore holds this engine's chunk nodes (checked on the first and last
        chunk: an index persisted before the docstore held them has neither)."""
        if getattr(self._engine, "is_empty", False):
            return True
        chunks = self._engine.chunks
        if not chunks:
            return True
        docstore = self._storage_context.docstore
        return docstore.document_exists(chunks[0].id) and docstore.document_exists(chunks[-1].id)

    def _sync_docstore(
        self, document_ids: Sequence[str] | None = None, removed: Sequence[str] = ()
    ) -> None:
        """Make the docstore hold the chunk nodes of the engine (with ``PREVIOUS`` / ``NEXT``
        relationships): every chunk when ``document_ids`` is ``None``, else those of
        ``document_ids`` (their previous chunk nodes replaced); chunk nodes of ``removed``
        documents are deleted. The nodes are the retriever's (same id, metadata and hash)."""
        docstore = self._storage_context.docstore
        for doc_id in [*removed, *(document_ids or ())]:
            i = 0  # chunk ids are "<document_id>#<n>", n = 0, 1, ... without gaps
            while docstore.document_exists(f"{doc_id}#{i}"):
                docstore.delete_document(f"{doc_id}#{i}", raise_error=False)
                i += 1
        if document_ids is None or document_ids:
            nodes = chunk_nodes(self._engine, document_ids)
            if nodes:
                docstore.add_documents(nodes, allow_update=True)

    # -- BaseIndex hooks --------------------------------------------------------------------
    def _build_index_from_nodes(
        self, nodes: Sequence[BaseNode], **build_kwargs: Any
    ) -> GraphStrataIndexStruct:
        build_llm = resolve_build_llm(self._llm_arg, self._use_llm)
        self._engine = _build_engine(
            to_graphstrata_documents(nodes), self._config,
            resolve_embedder(self._embed_model_arg), self._show_progress, build_llm,
        )
        return GraphStrataIndexStruct(embedder_id=_embedder_id(self._engine))

    def _insert(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        self._upsert(to_graphstrata_documents(nodes))

    def _delete_node(self, node_id: str, **delete_kwargs: Any) -> None:
        self.delete_nodes([node_id], **delete_kwargs)

    def delete_nodes(
        self, node_ids: list[str], delete_from_docstore: bool = False, **delete_kwargs: Any
    ) -> None:
        """Delete core documents by id (nodes inserted with ``insert_nodes``, or documents),
        in one core update.

        Raises:
            ValueError: an id is not a document of the index (e.g. a chunk id; nothing is
                deleted), or it would delete every document.
        """
        ids = list(dict.fromkeys(node_ids))
        missing = [i for i in ids if i not in self._engine.documents]
        if missing:
            raise ValueError(
                f"{missing[0]!r} is not a document of this index: GraphStrataIndex deletes whole "
                "documents (use delete_ref_doc(document_id))"
            )
        with self._callback_manager.as_trace("delete_nodes"):
            self._sync_docstore(removed=delete_documents(self._engine, ids))
            if delete_from_docstore:
                for node_id in ids:
                    self.docstore.delete_document(node_id, raise_error=False)
            self._storage_context.index_store.add_index_struct(self._index_struct)

    def _upsert(self, gs_docs: Sequence[Any]) -> None:
        """Insert ``gs_docs`` in one core ``insert``: new ids are added, indexed ids with
        other text or metadata replaced, unchanged ones left as they are.

        Replacing every indexed document is an ordinary insert too (the core never has to
        delete them all first), so no fresh build is needed for it.
        """
        if gs_docs:
            self._engine.insert(list(gs_docs))
            self._sync_docstore([d.id for d in gs_docs])

    # -- documents --------------------------------------------------------------------------
    def insert(self, document: Document, **insert_kwargs: Any) -> None:
        """Add one document (replacing a changed document with the same id), updating the
        graph in one core ``insert``.

        The core chunks it; ``transformations`` are not applied.
        """
        self.insert_documents([document])

    def insert_documents(self, documents: Sequence[Document]) -> None:
        """Add several documents in one core ``insert`` (one graph / hierarchy update).

        A document whose id is already indexed replaces it when its text or metadata
        differ, and is left as it is otherwise.

        Raises:
            ValueError: duplicate ids in ``documents``.
        """
        with self._callback_manager.as_trace("insert"):
            self._upsert(to_graphstrata_documents(documents))
            for doc in documents:
                self.docstore.set_document_hash(doc.doc_id, doc.hash)
            self._storage_context.index_store.add_index_struct(self._index_struct)

    async def ainsert(self, document: Document, **insert_kwargs: Any) -> None:
        """Like :meth:`insert`, in a worker thread (the event loop keeps running)."""
        await asyncio.to_thread(self.insert, document)

    def delete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = False, **delete_kwargs: Any
    ) -> None:
        """Delete a document, its chunks, and what the graph learnt only from it.

        Also removes nodes inserted with ``insert_nodes`` whose ``ref_doc_id`` is
        ``ref_doc_id``. Everything goes in one core ``delete``. An unknown id logs a warning
        and changes nothing (LlamaIndex's contract; the core's ``KeyError`` never escapes).
        The deleted documents' stored hashes are dropped, so a later ``refresh_ref_docs``
        re-inserts them.

        Raises:
            ValueError: it would delete every document (an index needs at least one).
        """
        with self._callback_manager.as_trace("delete_ref_doc"):
            self._engine.refresh()  # documents another worker inserted are known once read
            ids = delete_documents(self._engine, documents_of_ref_doc(self._engine, ref_doc_id))
            if not ids:
                logger.warning("ref_doc_id %s not found, nothing deleted.", ref_doc_id)
                return
            self._forget_documents(ids)
            if delete_from_docstore:
                self.docstore.delete_ref_doc(ref_doc_id, raise_error=False)

    async def adelete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = False, **delete_kwargs: Any
    ) -> None:
        """Like :meth:`delete_ref_doc`, in a worker thread."""
        await asyncio.to_thread(
            self.delete_ref_doc, ref_doc_id, delete_from_docstore=delete_from_docstore
        )

    def update_ref_doc(self, document: Document, **update_kwargs: Any) -> None:
        """Replace a document (one core ``insert``: same id, new content)."""
        self.insert_documents([document])

    async def aupdate_ref_doc(self, document: Document, **update_kwargs: Any) -> None:
        """Like :meth:`update_ref_doc`, in a worker thread."""
        await asyncio.to_thread(self.update_ref_doc, document)

    def refresh_ref_docs(
        self, documents: Sequence[Document], **update_kwargs: Any
    ) -> list[bool]:
        """Insert new documents and replace changed ones, in one core update.

        A document counts as changed when its text, metadata or metadata exclusions differ
        from the indexed copy.

        Returns:
            one bool per input document: ``True`` when it was inserted or replaced.

        Raises:
            ValueError: duplicate ids in ``documents``.
        """
        seen: set[str] = set()
        for doc in documents:
            if doc.doc_id in seen:
                raise ValueError(f"duplicate document id {doc.doc_id!r} in one call")
            seen.add(doc.doc_id)
        flags: list[bool] = []
        changed: list[Document] = []
        indexed = self._engine.documents
        for doc in documents:
            old = indexed.get(doc.doc_id)
            is_changed = (
                old is None
                or old.text != doc.get_content(metadata_mode=MetadataMode.NONE)
                or dict(old.metadata or {}) != pack_document_metadata(doc)
            )
            flags.append(is_changed)
            if is_changed:
                changed.append(doc)
        if changed:
            with self._callback_manager.as_trace("refresh_ref_docs"):
                self.insert_documents(changed)
        return flags

    async def arefresh_ref_docs(
        self, documents: Sequence[Document], **update_kwargs: Any
    ) -> list[bool]:
        """Like :meth:`refresh_ref_docs`, in a worker thread."""
        return await asyncio.to_thread(self.refresh_ref_docs, documents)

    @property
    def ref_doc_info(self) -> dict[str, RefDocInfo]:
        """``{document_id: RefDocInfo(node_ids=<its chunk ids>, metadata=<its metadata>)}``."""
        chunks_of = chunk_ids_by_document(self._engine)
        return {
            doc_id: RefDocInfo(
                node_ids=list(chunks_of.get(doc_id, [])),
                metadata=unpack_document_metadata(doc.metadata)[0],
            )
            for doc_id, doc in self._engine.documents.items()
        }

    # -- engine access ----------------------------------------------------------------------
    @property
    def engine(self) -> GraphStrata:
        """The ``graphstrata.GraphStrata`` engine (retrieve with the core API directly)."""
        return self._engine

    @property
    def methods(self) -> tuple[str, ...]:
        """Retrieval method names the engine offers."""
        return tuple(self._engine.methods)

    # -- retrieval --------------------------------------------------------------------------
    def as_retriever(
        self,
        method: str = "archrag",
        similarity_top_k: int = 5,
        kinds: Sequence[str] | None = DEFAULT_KINDS,
        context_k: int = DEFAULT_CONTEXT_K,
        filters: MetadataFilters | MetadataFilter | Mapping[str, Any] | None = None,
        method_options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> GraphStrataRetriever:
        """A :class:`GraphStrataRetriever` over this index.

        Args:
            method: one of :attr:`methods`.
            similarity_top_k: at most this many chunk nodes per query (> 0).
            kinds: ``("chunk",)`` (default), a subset of the hit kinds, or ``None`` for
                chunks plus every kind of graph context.
            context_k: at most this many graph-context nodes (> 0), after the chunks.
            filters: a LlamaIndex ``MetadataFilters`` (or the core's filter mapping) on
                document metadata, applied before ``similarity_top_k`` is cut.
            method_options: the method's own options, passed to the core.
            **kwargs: ``BaseRetriever`` options (``callback_manager``, ``verbose``,
                ``objects``, ``object_map``); anything else raises.

        Raises:
            ValueError: unknown method, ``similarity_top_k`` / ``context_k`` not > 0,
                unknown kinds, an unsupported filter, or an unknown argument (named).
        """
        kwargs.setdefault("callback_manager", self._callback_manager)
        return GraphStrataRetriever(
            self._engine,
            method=method,
            similarity_top_k=similarity_top_k,
            kinds=kinds,
            context_k=context_k,
            filters=filters,
            method_options=method_options,
            **kwargs,
        )

    def as_query_engine(
        self,
        llm: LLM | str | None = None,
        **kwargs: Any,
    ) -> BaseQueryEngine:
        """A query engine over this index.

        ``response_mode="method"`` (:data:`METHOD_RESPONSE_MODE`): a
        :class:`~llama_index.graph_rag.graphstrata.GraphStrataQueryEngine` that answers with
        the method's own generation step (``GraphStrata.answer``: ArchRAG adaptive filtering,
        LightRAG / HiRAG answer prompts, AGRAG over its reasoning path); ``source_nodes`` are
        the hits the answer used and ``response.metadata["usage"]`` the LLM calls and tokens
        it spent, ``response.metadata["citations"]`` the sources its ``[n]`` markers cite. It
        takes ``method``, ``similarity_top_k`` (default 10), ``filters``, ``method_options``
        (method and generation options, e.g. ``response_type``), ``streaming`` (a
        ``StreamingResponse`` whose ``response_gen`` yields the answer as it is written) and
        ``callback_manager``.

        Any other ``response_mode`` (or none): a ``RetrieverQueryEngine`` over
        :meth:`as_retriever`, LlamaIndex's response synthesizer writing the answer.

        Args:
            llm: the answering LLM. ``None``: for ``response_mode="method"`` the LLM the index
                was built or loaded with, else ``Settings.llm``; for the others
                ``Settings.llm``.
            **kwargs: :meth:`as_retriever` arguments (``method``, ``similarity_top_k``,
                ``kinds``, ``context_k``, ``filters``, ``method_options``) and
                ``RetrieverQueryEngine.from_args`` options (``response_mode``,
                ``node_postprocessors``, ``text_qa_template``, ``streaming``, ...).

        Raises:
            ValueError: an argument neither of them takes (named), an argument
                ``response_mode="method"`` does not take, or a bad retriever argument.
        """
        if kwargs.get("response_mode") == METHOD_RESPONSE_MODE:
            return self._method_query_engine(llm, kwargs)

        retriever_kwargs, engine_kwargs = route_query_engine_arguments(kwargs)
        retriever_kwargs.setdefault("callback_manager", self._callback_manager)
        retriever = self.as_retriever(**retriever_kwargs)
        resolved = (
            resolve_llm(llm, callback_manager=self._callback_manager) if llm else Settings.llm
        )
        return RetrieverQueryEngine.from_args(retriever, llm=resolved, **engine_kwargs)

    def _method_query_engine(self, llm: Any, kwargs: dict[str, Any]) -> GraphStrataQueryEngine:
        kwargs = method_engine_arguments(kwargs)
        kwargs.setdefault("callback_manager", self._callback_manager)
        if llm is not None:
            if isinstance(llm, str) or is_llama_index_llm(llm):
                llm = resolve_llm(llm, callback_manager=self._callback_manager)
            core_llm = to_graphstrata_llm(llm)
        elif getattr(self._engine, "llm", None) is not None:
            core_llm = None  # the engine's attached LLM (and its response cache)
        else:
            core_llm = to_graphstrata_llm(Settings.llm)
        return GraphStrataQueryEngine(self._engine, llm=core_llm, **kwargs)

    def as_chat_engine(
        self,
        chat_mode: ChatMode | str = "best",
        llm: LLM | str | None = None,
        **kwargs: Any,
    ) -> BaseChatEngine:
        """A chat engine over this index, like ``BaseIndex.as_chat_engine``.

        ``BaseIndex.as_chat_engine`` hands the same keyword arguments to the retriever, the
        query engine and the chat engine (whose ``from_defaults`` swallows what it does not
        know). Here each argument goes where it belongs: :meth:`as_retriever` arguments to the
        retriever, the chat engine's own parameters (``system_prompt``, ``memory``,
        ``node_postprocessors``, ...) to the chat engine, and for ``"condense_question"``
        ``RetrieverQueryEngine`` options to its query engine; anything else raises.

        Args:
            chat_mode: a ``ChatMode`` (``"best"`` / ``"condense_plus_context"``,
                ``"context"``, ``"condense_question"``, ``"simple"``).
            llm: the chat LLM (``Settings.llm`` when ``None``).
            **kwargs: as above.

        Raises:
            ValueError: an unknown chat mode or argument (named).
        """
        route = route_chat_engine_arguments(chat_mode, kwargs)
        resolved = (
            resolve_llm(llm, callback_manager=self._callback_manager) if llm else Settings.llm
        )
        chat_cls = route.chat_cls
        if route.mode == ChatMode.CONDENSE_QUESTION:
            query_engine = self.as_query_engine(llm=resolved, **route.retriever, **route.query_engine)
            return chat_cls.from_defaults(query_engine=query_engine, llm=resolved, **route.chat)
        if route.mode == ChatMode.SIMPLE:
            return chat_cls.from_defaults(llm=resolved, **route.chat)
        retriever = self.as_retriever(**route.retriever)
        return chat_cls.from_defaults(retriever=retriever, llm=resolved, **route.chat)


def _build_engine(
    gs_docs: Sequence[Any], config: Any, embedder: Any, show_progress: bool, llm: Any
) -> Any:
    """``GraphStrata.build`` of ``gs_docs``; with none, an empty engine (``GraphStrata.empty``)
    that the first insert builds with the same settings."""
    from graphstrata import GraphStrata

    extra = {"llm": llm} if llm is not None else {}
    if not gs_docs:
        return GraphStrata.empty(config=config, embedder=embedder, **extra)
    return GraphStrata.build(
        gs_docs, config=config, embedder=embedder, show_progress=show_progress, **extra
    )


def _load_engine(path: Path, embedder: Any, llm: Any) -> Any:
    """``GraphStrata.load``, attaching ``llm`` when one is given."""
    from graphstrata import GraphStrata

    if llm is None:
        return GraphStrata.load(path, embedder=embedder)
    return GraphStrata.load(path, embedder=embedder, llm=llm)


def _embedder_id(engine: Any) -> str | None:
    embedder = getattr(engine, "embedder", None)
    return getattr(embedder, "id", None)


# Let ``load_index_from_storage`` recognise the struct type (additive registration: these two
# module-level registries are how llama-index-core dispatches on an index struct's type tag).
for _tag in (GRAPHSTRATA_STRUCT_TYPE, *LEGACY_STRUCT_TYPES):
    INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS.setdefault(_tag, GraphStrataIndexStruct)  # type: ignore[index]
    INDEX_STRUCT_TYPE_TO_INDEX_CLASS.setdefault(_tag, GraphStrataIndex)  # type: ignore[index]
