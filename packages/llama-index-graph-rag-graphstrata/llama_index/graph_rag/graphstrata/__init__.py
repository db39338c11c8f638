"""LlamaIndex index (``BaseIndex``) and query engine over a graphstrata graph-RAG engine."""

from llama_index.graph_rag.graphstrata.base import (
    GRAPHSTRATA_STORE_NAMESPACE,
    GRAPHSTRATA_STRUCT_TYPE,
    GraphStrataIndex,
    GraphStrataIndexStruct,
    GraphStrataStore,
    resolve_embedder,
    to_graphstrata_documents,
)
from llama_index.retrievers.graphstrata import GraphStrataRetriever

__all__ = [
    "GRAPHSTRATA_STORE_NAMESPACE",
    "GRAPHSTRATA_STRUCT_TYPE",
    "GraphStrataIndex",
    "GraphStrataIndexStruct",
    "GraphStrataRetriever",
    "GraphStrataStore",
    "resolve_embedder",
    "to_graphstrata_documents",
]
