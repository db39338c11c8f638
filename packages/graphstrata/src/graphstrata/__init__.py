"""graphstrata: graph-RAG retrieval engine (framework-free core).

Quickstart::

    from graphstrata import GraphStrata
    gs = GraphStrata.build(paths=["docs/"], persist_dir="my_index")
    for hit in gs.retrieve("Who founded the bank?", method="archrag", k=5):
        print(hit.score, hit.document_ids, hit.text[:80])
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _dist_version

from .answers import AsyncStreamingAnswer, StreamingAnswer
from .api import Answer, GraphStrata
from .config import GraphStrataConfig
from .models import EmbedderMismatchError
from .runner import LocalRunner, Runner
from .store import ConcurrentWriteError
from .types import Chunk, Citation, Community, Document, Entity, Hit, Relation

__all__ = [
    "Answer",
    "AsyncStreamingAnswer",
    "GraphStrata",
    "GraphStrataConfig",
    "Chunk",
    "Citation",
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
    "StreamingAnswer",
    "__version__",
]
# The installed distribution's version, built from the repository's one VERSION file.
try:
    __version__ = _dist_version("graphstrata")
except _PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"


def __getattr__(name: str):
    # RayRunner imports ray, an optional extra: only when asked for
    if name == "RayRunner":
        from .ray_runner import RayRunner

        return RayRunner
    raise AttributeError(f"module 'graphstrata' has no attribute {name!r}")
