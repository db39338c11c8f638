"""graphstrata's knowledge-graph extraction (offline, or with your LLM) as a LlamaIndex extractor."""

from llama_index.extractors.graphstrata.base import GraphStrataExtractor

__all__ = ["GraphStrataExtractor"]
