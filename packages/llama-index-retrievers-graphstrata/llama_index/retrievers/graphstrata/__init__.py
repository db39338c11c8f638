"""LlamaIndex retriever over a graphstrata graph-RAG index."""

from llama_index.retrievers.graphstrata.base import (
    PROVENANCE_KEYS,
    GraphStrataRetriever,
    embedder_from_llama_index,
    hit_to_node,
)

__all__ = ["GraphStrataRetriever", "PROVENANCE_KEYS", "embedder_from_llama_index", "hit_to_node"]
