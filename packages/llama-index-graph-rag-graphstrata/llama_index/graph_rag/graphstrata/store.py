"""``GraphStrataStore``: the graphstrata engine as a member of a LlamaIndex ``StorageContext``.

It is how ``storage_context.persist(persist_dir)`` writes the engine too (into
``<persist_dir>/graphstrata/``); see :mod:`llama_index.graph_rag.graphstrata.base`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fsspec
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    VectorStoreQuery,
    VectorStoreQueryResult,
)
from llama_index.graph_rag.graphstrata.conversion import delete_documents, documents_of_ref_doc
from llama_index.retrievers.graphstrata import hit_to_node, to_core_filters

if TYPE_CHECKING:
    from graphstrata import GraphStrata

#: Namespace of the :class:`GraphStrataStore` in ``storage_context.vector_stores``.
GRAPHSTRATA_STORE_NAMESPACE = "graphstrata"
#: Sub-directory of a persist dir holding the engine.
DEFAULT_ENGINE_DIRNAME = "graphstrata"


class GraphStrataStore(BasePydanticVectorStore):
    """The engine as a (read-only) member of a ``StorageContext``.

    It exists so that ``storage_context.persist(persist_dir)`` also persists the engine: its
    ``persist`` writes the engine directory ``<persist_dir>/<engine_dir>`` through
    ``GraphStrata.persist`` (atomic directory swap) and writes no JSON file, so
    ``StorageContext.from_defaults(persist_dir=...)`` never mistakes it for a
    ``SimpleVectorStore``. Queried directly, it answers with chunk hits of ``method``.

    Raises:
        NotImplementedError: ``add`` (insert documents through ``GraphStrataIndex``).
        ValueError: ``persist`` with a non-local fsspec filesystem.
    """

    stores_text: bool = True
    is_embedding_query: bool = False
    engine_dir: str = DEFAULT_ENGINE_DIRNAME
    method: str = "hybrid"

    _engine: Any = PrivateAttr()
    _on_persist: Any = PrivateAttr(default=None)
    _on_delete: Any = PrivateAttr(default=None)

    def __init__(
        self,
        engine: GraphStrata,
        on_persist: Callable[[Path], None] | None = None,
        on_delete: Callable[[list[str]], None] | None = None,
        **kwargs: Any,
    ) -> None:
        """Args:
            engine: the ``graphstrata.GraphStrata`` engine.
            on_persist: called with the persist dir once the engine is written there.
            on_delete: called with the ids of the core documents :meth:`delete` removed (the
                owning index drops their chunk nodes from its docstore).
        """
        super().__init__(**kwargs)
        self._engine = engine
        self._on_persist = on_persist
        self._on_delete = on_delete

    @classmethod
    def class_name(cls) -> str:
        """Serialisation name of the component."""
        return "GraphStrataStore"

    @property
    def client(self) -> GraphStrata:
        """The ``graphstrata.GraphStrata`` engine."""
        return self._engine

    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        """Always raises ``NotImplementedError``: the engine embeds and indexes by itself."""
        raise NotImplementedError(
            "GraphStrataStore is written through GraphStrataIndex.insert / insert_nodes"
        )

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete a document (and its chunks) from the engine, in one core update.

        Like ``GraphStrataIndex.delete_ref_doc``, nodes inserted with ``ref_doc_id`` as their
        source document go too. An unknown id deletes nothing (as ``SimpleVectorStore``). In a
        ``GraphStrataIndex``'s storage context, the index's docstore loses the deleted
        documents' chunk nodes and document entries too, so ``docstore.get_node`` and
        ``PrevNextNodePostprocessor`` never return a deleted chunk.

        Raises:
            ValueError: it would delete every document (an index needs at least one).
        """
        ids = delete_documents(self._engine, documents_of_ref_doc(self._engine, ref_doc_id))
        if ids and self._on_delete is not None:
            self._on_delete(ids)

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Top ``query.similarity_top_k`` chunks of ``query.query_str`` by ``self.method``.

        ``query.filters`` (``MetadataFilters``) and ``query.doc_ids`` restrict the documents,
        inside retrieval.
        """
        if not query.query_str:
            raise ValueError("GraphStrataStore needs query.query_str (it embeds queries itself)")
        method = self.method if self.method in self._engine.methods else "dense"
        parts = [f for f in (to_core_filters(query.filters),) if f is not None]
        if query.doc_ids:
            parts.append({"document_id": {"$in": list(query.doc_ids)}})
        filters = None if not parts else parts[0] if len(parts) == 1 else {"$and": parts}
        hits = self._engine.retrieve(
            query.query_str, method=method, k=query.similarity_top_k, kinds=("chunk",),
            filters=filters,
        )
        nws = [hit_to_node(h, method, self._engine) for h in hits]
        return VectorStoreQueryResult(
            nodes=[n.node for n in nws],
            similarities=[float(n.score or 0.0) for n in nws],
            ids=[n.node.node_id for n in nws],
        )

    def persist(self, persist_path: str, fs: fsspec.AbstractFileSystem | None = None) -> None:
        """Persist the engine to ``<dirname(persist_path)>/<engine_dir>`` (atomic), then let
        the owning index record where (see :class:`GraphStrataIndexStruct`)."""
        if fs is not None:
            protocol = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
            if not {"file", "local"} & set(protocol):
                raise ValueError(
                    "GraphStrataIndex persists to the local filesystem only, "
                    f"got an fsspec filesystem with protocol {fs.protocol!r}"
                )
        persist_dir = Path(persist_path).parent
        self._engine.persist(persist_dir / self.engine_dir)
        if self._on_persist is not None:
            self._on_persist(persist_dir)

