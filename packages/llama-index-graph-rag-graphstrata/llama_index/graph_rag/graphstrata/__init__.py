"""LlamaIndex index (``BaseIndex``) and query engine over a graphstrata graph-RAG engine."""

from llama_index.graph_rag.graphstrata.base import (
    GRAPHSTRATA_STRUCT_TYPE,
    GraphStrataIndex,
    GraphStrataIndexStruct,
)
from llama_index.graph_rag.graphstrata.conversion import (
    resolve_build_llm,
    resolve_embedder,
    to_graphstrata_documents,
)
from llama_index.graph_rag.graphstrata.query_engine import (
    METHOD_RESPONSE_MODE,
    GraphStrataQueryEngine,
)
from llama_index.graph_rag.graphstrata.store import GRAPHSTRATA_STORE_NAMESPACE, GraphStrataStore
from llama_index.retrievers.graphstrata import GraphStrataRetriever, LlamaIndexLLM

__all__ = [
    "GRAPHSTRATA_STORE_NAMESPACE",
    "GRAPHSTRATA_STRUCT_TYPE",
    "METHOD_RESPONSE_MODE",
    "GraphStrataIndex",
    "GraphStrataIndexStruct",
    "GraphStrataQueryEngine",
    "GraphStrataRetriever",
    "GraphStrataStore",
    "LlamaIndexLLM",
    "resolve_build_llm",
    "resolve_embedder",
    "to_graphstrata_documents",
]
