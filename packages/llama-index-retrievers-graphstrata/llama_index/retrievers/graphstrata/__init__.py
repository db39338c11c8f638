"""LlamaIndex retriever over a graphstrata graph-RAG index."""

from llama_index.retrievers.graphstrata.base import (
    DEFAULT_CONTEXT_K,
    DEFAULT_KINDS,
    RETRIEVER_ARGUMENTS,
    GraphStrataRetriever,
    unknown_arguments_error,
)
from llama_index.retrievers.graphstrata.conversion import (
    LLAMA_INDEX_METADATA_KEY,
    PROVENANCE_KEYS,
    chunk_node,
    chunk_nodes,
    embedder_from_llama_index,
    hit_to_node,
    pack_document_metadata,
    unpack_document_metadata,
)
from llama_index.retrievers.graphstrata.filters import to_core_filters
from llama_index.retrievers.graphstrata.llm import LlamaIndexLLM, to_graphstrata_llm

__all__ = [
    "DEFAULT_CONTEXT_K",
    "DEFAULT_KINDS",
    "GraphStrataRetriever",
    "LLAMA_INDEX_METADATA_KEY",
    "LlamaIndexLLM",
    "PROVENANCE_KEYS",
    "RETRIEVER_ARGUMENTS",
    "chunk_node",
    "chunk_nodes",
    "embedder_from_llama_index",
    "hit_to_node",
    "pack_document_metadata",
    "to_core_filters",
    "to_graphstrata_llm",
    "unknown_arguments_error",
    "unpack_document_metadata",
]
