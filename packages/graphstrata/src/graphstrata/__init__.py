"""graphstrata: graph-RAG retrieval engine (framework-free core).

Quickstart::

    from graphstrata import GraphStrata
    gs = GraphStrata.build(paths=["docs/"], persist_dir="my_index")
    for hit in gs.retrieve("Who founded the bank?", method="archrag", k=5):
        print(hit.score, hit.document_ids, hit.text[:80])
"""

from .api import Answer, GraphStrata
from .config import GraphStrataConfig
from .models import EmbedderMismatchError
from .runner import LocalRunner, Runner
from .store import ConcurrentWriteError
from .types import Chunk, Community, Document, Entity, Hit, Relation

__all__ = [
    "Answer",
    "GraphStrata",
    "GraphStrataConfig",
    "Chunk",
    "Community",
    "ConcurrentWriteError",
    "Document",
    "EmbedderMismatchError",
    "Entity",
    "Hit",
    "LocalRunner",
    "RayRunner",
    "Relation",
    "Runner",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    # RayRunner imports ray, an optional extra: only when asked for
    if name == "RayRunner":
        from .ray_runner import RayRunner

        return RayRunner
    raise AttributeError(f"module 'graphstrata' has no attribute {name!r}")
