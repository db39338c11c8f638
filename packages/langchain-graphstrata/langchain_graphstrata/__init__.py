"""LangChain integration for graphstrata.

* :class:`GraphStrataRetriever` – a ``BaseRetriever`` over a graphstrata index (any method).
* :func:`create_graphstrata_tool` – the retriever as an agent tool (text + Document artifact).
* :class:`GraphStrataTransformer` – adds extracted entities/relations to Document metadata.
* :class:`GraphStrataAnswerer` – a Runnable answering with the method's own generation step
  (``retriever.as_answer_chain()``).
* :class:`ChatModelLLM` – a LangChain chat model behind graphstrata's LLM protocol.
* :class:`GraphStrataEmbeddings` – graphstrata's offline embedders (packaged MiniLM, fast
  static) as LangChain ``Embeddings``.
"""

from importlib import metadata as _metadata

from langchain_graphstrata.answer import GraphStrataAnswerer
from langchain_graphstrata.document_transformers import GraphStrataTransformer
from langchain_graphstrata.embeddings import GraphStrataEmbeddings
from langchain_graphstrata.llms import ChatModelLLM
from langchain_graphstrata.retrievers import GraphStrataRetriever, embedder_from_langchain
from langchain_graphstrata.tools import create_graphstrata_tool

try:
    __version__ = _metadata.version("langchain-graphstrata")
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "ChatModelLLM",
    "GraphStrataAnswerer",
    "GraphStrataEmbeddings",
    "GraphStrataRetriever",
    "GraphStrataTransformer",
    "create_graphstrata_tool",
    "embedder_from_langchain",
    "__version__",
]
