"""graphstrata's offline embedders (packaged MiniLM, fast static) as a LlamaIndex embedding."""

from llama_index.embeddings.graphstrata.base import GraphStrataEmbedding

__all__ = ["GraphStrataEmbedding"]
