"""graphstrata chunking as a LlamaIndex node parser.

``GraphStrataExtractor`` moved to ``llama_index.extractors.graphstrata``
(``pip install llama-index-extractors-graphstrata``); importing it from here still works and
emits a ``DeprecationWarning``.
"""

from typing import Any

from llama_index.node_parser.graphstrata.base import GraphStrataNodeParser, deprecated_extractor

__all__ = ["GraphStrataNodeParser"]


def __getattr__(name: str) -> Any:
    """``GraphStrataExtractor`` from its old home, with a ``DeprecationWarning``.

    Raises:
        AttributeError: any other unknown name.
    """
    if name == "GraphStrataExtractor":
        return deprecated_extractor()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
