"""Look at what was built: statistics of an index and exports of its graph.

Everything here reads only records (documents, chunks, entities, relations, communities and
the build's costs), never vectors or the embedder, so ``graphstrata inspect`` and
``graphstrata export`` open an index of any size in the time it takes to read its SQLite file.
The same functions serve a live index (:meth:`GraphStrata.stats`,
:meth:`GraphStrata.to_networkx`): both an :class:`~graphstrata.state.EngineState` and an
:class:`IndexRecords` have the attributes they read.

The exported graph (:func:`to_networkx`) has one node per entity and per community and one
edge per relation and per community membership (community → member one layer below), so its
node and edge counts are ``entities + communities`` and ``relations + memberships`` — the
``graph`` counts :func:`describe` reports.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from .graph import KnowledgeGraph
from .types import Chunk, Community, Document

#: characters of a description or summary kept in a GraphML / JSON export attribute
EXPORT_TEXT_CHARS = 2000


@dataclass(frozen=True)
class IndexRecords:
    """The records of one persisted index version, without vectors (see the module docstring).

    Attributes mirror :class:`~graphstrata.state.EngineState`'s of the same names; ``manifest``
    is the validated manifest (:func:`graphstrata.store.read_manifest`).
    """

    documents: Mapping[str, Document]
    chunks: Sequence[Chunk]
    kg: KnowledgeGraph
    communities: Sequence[Sequence[Community]]
    build_seconds: Mapping[str, float] = field(default_factory=dict)
    build_usage: Mapping[str, Any] = field(default_factory=dict)
    llm_id: str | None = None
    manifest: Mapping[str, Any] = field(default_factory=dict)
    drift: Mapping[str, Any] = field(default_factory=dict)


def read_records(directory: str | os.PathLike) -> IndexRecords:
    """Read the records of the current version of the index at ``directory``.

    Raises:
        FileNotFoundError: no such directory.
        ValueError: not an index, or a corrupt one (as :func:`graphstrata.store.read_manifest`).
    """
    from . import store

    def read(vdir: Path, manifest: dict[str, Any]) -> IndexRecords:
        data = store.read_sqlite(vdir / store.SQLITE)
        by_layer: dict[int, list[Community]] = {}
        for c in data["communities"]:
            by_layer.setdefault(c.layer, []).append(c)
        meta = data["meta"]
        return IndexRecords(
            documents={d.id: d for d in data["documents"]},
            chunks=data["chunks"],
            kg=KnowledgeGraph(data["entities"], data["relations"]),
            communities=[by_layer[i] for i in sorted(by_layer)],
            build_seconds=dict(meta.get("build_seconds") or manifest.get("build_seconds") or {}),
            build_usage=dict(meta.get("build_usage") or {}),
            llm_id=meta.get("llm_id"),
            drift=dict(meta.get("drift") or {}),
            manifest={k: v for k, v in manifest.items() if k != "version_dir"}
            | {"version": manifest["version_dir"].name},
        )

    return store.open_version(Path(directory), read)


def _sizes(values: Sequence[int]) -> dict[str, float]:
    if not values:
        return {"min": 0, "median": 0, "max": 0}
    return {"min": int(min(values)), "median": float(np.median(values)), "max": int(max(values))}


def describe(records: Any, top: int = 10) -> dict[str, Any]:
    """Statistics of an index (an :class:`~graphstrata.state.EngineState` or :class:`IndexRecords`).

    Args:
        records: what to describe.
        top: how many entities (by degree) and community titles (by size) per layer to list.

    Returns:
        JSON-serialisable ``{"documents", "chunks", "entities", "relations",
        "communities_per_layer", "graph": {"nodes", "edges"}, "tokens_per_chunk": {min, median,
        max}, "layers": [{"layer", "communities", "members": {min, median, max},
        "entities": {min, median, max}, "top": [{"id", "title", "entities"}]}],
        "top_entities": [{"id", "name", "type", "degree", "chunks", "aliases"}], "entity_types":
        {type: count}, "build_seconds": {stage: s}, "build_usage": {...}, "llm": id | None,
        "drift": {...}}``; ``drift`` is how far incremental updates moved the index since its
        last full build (:func:`graphstrata.indexing.update.drift_report`; ``{}`` for an index
        persisted before drift was recorded).
        ``members`` counts the nodes one layer below; ``entities`` all entities under a
        community; seconds are wall time; token costs as :attr:`GraphStrata.build_usage`.

    Raises:
        ValueError: ``top`` is not a positive integer.
    """
    if isinstance(top, bool) or not isinstance(top, int) or top <= 0:
        raise ValueError(f"top must be a positive integer, got {top!r}")
    kg: KnowledgeGraph = records.kg
    layers = []
    memberships = 0
    for i, comms in enumerate(records.communities, 1):
        memberships += sum(len(c.members) for c in comms)
        biggest = sorted(comms, key=lambda c: (-len(c.entity_ids), c.id))[:top]
        layers.append(
            {
                "layer": i,
                "communities": len(comms),
                "members": _sizes([len(c.members) for c in comms]),
                "entities": _sizes([len(c.entity_ids) for c in comms]),
                "top": [{"id": c.id, "title": c.title, "entities": len(c.entity_ids)} for c in biggest],
            }
        )
    degree = dict(kg.nx.degree()) if len(kg) else {}
    top_entities = sorted(kg.entities.values(), key=lambda e: (-degree.get(e.id, 0), -e.weight, e.id))[:top]
    types: dict[str, int] = {}
    for e in kg.entities.values():
        types[e.type or "(untyped)"] = types.get(e.type or "(untyped)", 0) + 1
    n_communities = sum(len(c) for c in records.communities)
    return {
        "documents": len(records.documents),
        "chunks": len(records.chunks),
        "entities": len(kg.entities),
        "relations": len(kg.relations),
        "communities_per_layer": [len(c) for c in records.communities],
        "graph": {"nodes": len(kg.entities) + n_communities, "edges": len(kg.relations) + memberships},
        "tokens_per_chunk": _sizes([c.n_tokens for c in records.chunks]),
        "layers": layers,
        "top_entities": [
            {"id": e.id, "name": e.name, "type": e.type, "degree": int(degree.get(e.id, 0)), "chunks": len(e.chunk_ids),
             "aliases": list(e.aliases)}
            for e in top_entities
        ],
        "entity_types": dict(sorted(types.items(), key=lambda kv: (-kv[1], kv[0]))),
        "build_seconds": {k: round(float(v), 3) for k, v in records.build_seconds.items()},
        "build_usage": dict(records.build_usage),
        "llm": records.llm_id,
        "drift": _drift(records),
    }


def _drift(records: Any) -> dict[str, Any]:
    from .indexing.update import drift_report

    drift = getattr(records, "drift", None)
    return drift_report(drift, len(records.documents), len(records.chunks)) if drift else {}


def _clip(text: str) -> str:
    return text if len(text) <= EXPORT_TEXT_CHARS else text[: EXPORT_TEXT_CHARS - 1] + "…"


def to_networkx(records: Any) -> nx.DiGraph:
    """The knowledge graph and its community hierarchy as one networkx ``DiGraph``.

    Nodes: entity ids (``kind="entity"``, ``name``, ``type``, ``description``, ``weight``,
    ``chunks`` = number of source chunks, ``chunk_ids`` joined by ``" "``, ``aliases``: the ids
    entity resolution merged into it joined by ``" | "``, ``""`` when none) and community ids
    (``kind="community"``, ``layer``, ``title``, ``summary``, ``rating`` (``-1`` when none),
    ``entities`` = entities under it). Edges: relations source → target (``kind="relation"``,
    ``weight``, ``description``, ``keywords``) and memberships community → member
    (``kind="member"``). Every attribute is a str, int or float (GraphML-ready); texts are cut
    at :data:`EXPORT_TEXT_CHARS` characters.
    """
    g = nx.DiGraph()
    kg: KnowledgeGraph = records.kg
    for e in kg.entities.values():
        g.add_node(
            e.id, kind="entity", name=e.name, type=e.type, description=_clip(e.description),
            weight=float(e.weight), chunks=len(e.chunk_ids), chunk_ids=" ".join(e.chunk_ids),
            aliases=" | ".join(e.aliases),
        )
    for (a, b), r in kg.relations.items():
        g.add_edge(a, b, kind="relation", weight=float(r.weight), description=_clip(r.description), keywords=r.keywords)
    for comms in records.communities:
        for c in comms:
            g.add_node(
                c.id, kind="community", layer=int(c.layer), title=c.title, summary=_clip(c.summary),
                rating=float(c.rating) if c.rating is not None else -1.0, entities=len(c.entity_ids),
            )
    for comms in records.communities:
        for c in comms:
            for m in c.members:
                g.add_edge(c.id, m, kind="member")
    return g


_XML_INVALID = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold (control characters other than tab,
    newline and carriage return, lone surrogates, U+FFFE / U+FFFF) replaced by U+FFFD."""
    return _XML_INVALID.sub("\ufffd", text)


def _xml_safe_graph(g: nx.DiGraph) -> nx.DiGraph:
    """A copy of ``g`` whose node ids and string attributes are :func:`xml_safe`; two ids that
    become equal get ``~2``, ``~3``, ... appended, so no node merges into another."""
    ids: dict[Any, str] = {}
    taken: set[str] = set()
    for n in g.nodes:
        base = xml_safe(str(n))
        new, k = base, 1
        while new in taken:
            k += 1
            new = f"{base}~{k}"
        taken.add(new)
        ids[n] = new

    def attrs(d: Mapping[str, Any]) -> dict[str, Any]:
        return {xml_safe(k): xml_safe(v) if isinstance(v, str) else v for k, v in d.items()}

    out = nx.DiGraph()
    out.add_nodes_from((ids[n], attrs(d)) for n, d in g.nodes(data=True))
    out.add_edges_from((ids[a], ids[b], attrs(d)) for a, b, d in g.edges(data=True))
    return out


def export_graph(records: Any, path: str | os.PathLike, format: str = "graphml") -> Path:
    """Write :func:`to_networkx` of ``records`` to ``path``.

    Args:
        records: an engine state or :class:`IndexRecords`.
        path: the output file (its directory must exist).
        format: ``"graphml"`` (Gephi, yEd, Neo4j's APOC import; characters XML cannot hold
            are replaced by U+FFFD in ids and texts, :func:`xml_safe`) or ``"json"`` (node-link
            JSON: ``{"directed": true, "multigraph": false, "nodes": [{"id", ...}], "edges": [{"source", "target",
            ...}]}``, what ``networkx.node_link_graph(data, edges="edges")`` reads back).

    Returns:
        The path written.

    Raises:
        ValueError: an unknown format, or a directory that does not exist.
    """
    if format not in ("graphml", "json"):
        raise ValueError(f"unknown export format {format!r}; use 'graphml' or 'json'")
    out = Path(path)
    if not out.parent.is_dir():
        raise ValueError(f"cannot write {out}: directory {out.parent} does not exist")
    g = to_networkx(records)
    if format == "graphml":  # XML 1.0 cannot hold control characters: replaced (xml_safe)
        nx.write_graphml(_xml_safe_graph(g), out)
    else:
        data = {
            "directed": True,
            "multigraph": False,
            "nodes": [{"id": n, **attrs} for n, attrs in g.nodes(data=True)],
            "edges": [{"source": a, "target": b, **attrs} for a, b, attrs in g.edges(data=True)],
        }
        out.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return out
