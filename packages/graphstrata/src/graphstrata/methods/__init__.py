"""Retrieval methods: each a small configuration of the shared operators in :mod:`.base`.

``METHODS`` maps a method name to its class; :func:`register_method` adds one.
"""

from __future__ import annotations

from .agrag import AGRAG
from .archrag import ArchRAG
from .base import Method, Retrieval
from .hirag import HiRAG
from .lightrag import LightRAG
from .naive import BM25, Dense, Hybrid

METHODS: dict[str, type[Method]] = {}


def register_method(cls: type[Method]) -> type[Method]:
    """Register a :class:`Method` subclass under ``cls.name`` (usable as a decorator)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    METHODS[cls.name] = cls
    return cls


# graph methods first (the default, archrag, leads), then the baselines
for _cls in (ArchRAG, LightRAG, HiRAG, AGRAG, Dense, BM25, Hybrid):
    register_method(_cls)

__all__ = [
    "METHODS",
    "Method",
    "Retrieval",
    "register_method",
    "ArchRAG",
    "LightRAG",
    "HiRAG",
    "AGRAG",
    "Dense",
    "BM25",
    "Hybrid",
]
