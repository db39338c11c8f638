"""graphstrata chunking and offline KG extraction as LlamaIndex transformations."""

from llama_index.node_parser.graphstrata.base import GraphStrataExtractor, GraphStrataNodeParser

__all__ = ["GraphStrataExtractor", "GraphStrataNodeParser"]
