"""graphstrata: graph-RAG retrieval engine (framework-free core).

Quickstart::

    from graphstrata import GraphStrata
    gs = GraphStrata.build(paths=["docs/"], persist_dir="my_index")
    for hit in gs.retrieve("Who founded the bank?", method="archrag", k=5):
        print(hit.score, hit.document_ids, hit.text[:80])
"""

from .api import Answer, GraphStrata
from .config import GraphStrataConfig
from .types import Chunk, Community, Document, Entity, Hit, Relation

__all__ = [
    "Answer",
    "GraphStrata",
    "GraphStrataConfig",
    "Chunk",
    "Community",
    "Document",
    "Entity",
    "Hit",
    "Relation",
]
__version__ = "0.1.0"
