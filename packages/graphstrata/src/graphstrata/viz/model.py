"""The data model both pictures draw: the hierarchy of one state as a tree, a query's hits as
marks on it, and the colours and label texts computed from them (no drawing here).

Also the argument checks both renderers share (source object, output path, counts).
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

UNCLUSTERED = "~unclustered"
"""Id of the pseudo-community holding entities that no layer-1 community claims."""

RETRIEVED, CONTEXT = 2, 1
"""Marks a query puts on a node: retrieved itself, or context (contains / mentions a hit); an
unmarked node is 0."""


# --------------------------------------------------------------------------------------------
# the arguments both renderers check
# --------------------------------------------------------------------------------------------


def state_of(obj: Any) -> tuple[Any, Any]:
    """``(state, engine)`` of an ``EngineState`` or a ``GraphStrata`` (engine ``None`` for a state).

    Raises:
        ValueError: ``obj`` is neither.
    """
    from ..api import GraphStrata
    from ..state import EngineState

    if isinstance(obj, GraphStrata):
        return obj.state, obj
    if isinstance(obj, EngineState):
        return obj, None
    raise ValueError(
        f"expected a GraphStrata or an EngineState, got {type(obj).__name__} "
        "(load an index first: GraphStrata.load(DIR))"
    )


def out_path(path: Any, suffixes: tuple[str, ...], what: str) -> Path:
    """The output path, checked: a writable-looking file path with one of ``suffixes``.

    ``what`` names the format in the messages ("PNG", "HTML").

    Raises:
        ValueError: not a non-empty str/Path, a wrong suffix, a directory, or a missing parent
            directory.
    """
    if not isinstance(path, (str, Path)) or not str(path).strip():
        raise ValueError(f"{what} output path must be a non-empty str or Path, got {path!r}")
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        raise ValueError(f"{what} output path {str(p)!r} must end with {' or '.join(suffixes)}")
    if p.is_dir():
        raise ValueError(f"{what} output path {str(p)!r} is a directory")
    if not p.parent.is_dir():
        raise ValueError(f"{what} output directory {str(p.parent)!r} does not exist")
    return p


def count_arg(value: Any, name: str, minimum: int = 0) -> int:
    """``value`` as an ``int``, checked to be an integer (not a bool) ``>= minimum``.

    Raises:
        ValueError: naming the argument ``name``, otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


# --------------------------------------------------------------------------------------------
# the hierarchy of one state as a tree
# --------------------------------------------------------------------------------------------


class HierarchyModel:
    """The hierarchy of one state as a tree: roots (top layer, orphans, unclustered), each
    community's child communities or entities, entity counts, entity degrees.

    Attributes (read by both renderers): ``entities`` and ``comm`` (id → record), ``n_layers``,
    ``layer_sizes``, ``parent`` (node id → community id), ``kids`` (community id → child ids),
    ``size`` (community id → entities under it), ``degree`` (entity id → graph degree),
    ``roots`` (ordered), ``unclustered`` (how many entities no community claims).

    Raises:
        ValueError: the state has no entities (nothing to draw).
    """

    def __init__(self, state: Any) -> None:
        self.state = state
        kg = state.kg
        self.entities = kg.entities
        if not self.entities:
            raise ValueError(
                "the index has no entities and no communities: nothing to draw "
                "(was it built from documents with text?)"
            )
        layers = [list(layer) for layer in state.communities]
        self.n_layers = len(layers)
        self.comm = {c.id: c for layer in layers for c in layer}
        self.layer_sizes = [len(layer) for layer in layers]
        unclustered = self._link(layers, kg.entity_ids)
        self.unclustered = len(unclustered)
        adj = kg.adjacency()
        deg = np.diff(adj.indptr)
        self.degree = {eid: int(deg[i]) for i, eid in enumerate(kg.entity_ids)}
        self._count_entities(layers)
        self._find_roots(layers)

    def _link(self, layers: list[list[Any]], entity_ids: list[str]) -> list[str]:
        """Fill ``parent`` and ``kids``: each community under the first community one layer up
        that lists it, each entity under the first layer-1 community that lists it, the rest
        under the unclustered node. Returns the unclustered entities."""
        self.parent: dict[str, str] = {}
        kids: dict[str, list[str]] = {}
        for li in range(self.n_layers, 1, -1):
            for c in layers[li - 1]:
                own = kids.setdefault(c.id, [])
                for m in c.members:
                    sub = self.comm.get(m)
                    if sub is not None and sub.layer == li - 1 and m not in self.parent:
                        self.parent[m] = c.id
                        own.append(m)
        for c in layers[0] if layers else ():
            own = kids.setdefault(c.id, [])
            for e in c.members:
                if e in self.entities and e not in self.parent:
                    self.parent[e] = c.id
                    own.append(e)
        unclustered = [e for e in entity_ids if e not in self.parent]
        if unclustered:
            kids[UNCLUSTERED] = unclustered
            for e in unclustered:
                self.parent[e] = UNCLUSTERED
        self.kids = kids
        return unclustered

    def _count_entities(self, layers: list[list[Any]]) -> None:
        """Fill ``size``: entities under each community, bottom-up."""
        self.size: dict[str, int] = {}
        for li in range(1, self.n_layers + 1):
            for c in layers[li - 1]:
                if li == 1:
                    self.size[c.id] = len(self.kids.get(c.id, ()))
                else:
                    self.size[c.id] = sum(self.size[k] for k in self.kids.get(c.id, ()))
        if self.unclustered:
            self.size[UNCLUSTERED] = self.unclustered

    def _find_roots(self, layers: list[list[Any]]) -> None:
        """Fill ``roots`` (the top layer and every community without a parent, highest layer
        then biggest first, the unclustered node last) and ``root_of`` (node id → root index)."""
        roots = [c.id for c in layers[-1]] if layers else []
        for li in range(self.n_layers - 1, 0, -1):
            roots += [c.id for c in layers[li - 1] if c.id not in self.parent]
        roots.sort(key=lambda cid: (-self.layer_of(cid), -self.size[cid], cid))
        if self.unclustered:
            roots.append(UNCLUSTERED)
        self.roots = roots
        self.root_of: dict[str, int] = {}
        for i, r in enumerate(roots):
            stack = [r]
            while stack:
                x = stack.pop()
                self.root_of[x] = i
                if x == UNCLUSTERED or x in self.comm:
                    stack.extend(self.kids.get(x, ()))

    def layer_of(self, cid: str) -> int:
        """Layer of a community id (1 for the unclustered pseudo-community, 0 for an entity)."""
        if cid == UNCLUSTERED:
            return 1
        c = self.comm.get(cid)
        return c.layer if c is not None else 0

    def title(self, cid: str) -> str:
        """Title of a community id with whitespace folded (its id when it has none)."""
        if cid == UNCLUSTERED:
            return "not in a community"
        c = self.comm[cid]
        return " ".join((c.title or cid).split())

    def ancestors(self, node_id: str) -> list[str]:
        """Community ids above a node, nearest first."""
        out = []
        x = self.parent.get(node_id)
        while x is not None:
            out.append(x)
            x = self.parent.get(x)
        return out

    def sub_communities(self, cid: str) -> list[str]:
        """Child communities of a community id, in member order."""
        return [k for k in self.kids.get(cid, ()) if k in self.comm]

    def entity_kids(self, cid: str) -> list[str]:
        """Entities directly under a community id (layer 1 or the unclustered node)."""
        return [k for k in self.kids.get(cid, ()) if k in self.entities and k not in self.comm]


# --------------------------------------------------------------------------------------------
# a query's hits as marks on the tree
# --------------------------------------------------------------------------------------------


@dataclass
class QueryMarks:
    """Normalised query hits and the marks they put on the hierarchy."""

    items: list[dict[str, Any]] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=dict)
    outside: int = 0  # hits that name nothing of this index

    def mark(self, node_id: str) -> int:
        """``RETRIEVED``, ``CONTEXT`` or 0 for a community or entity id."""
        return self.marks.get(node_id, 0)


def hit_dict(h: Any, i: int) -> dict[str, Any]:
    """Hit number ``i`` (a ``Hit`` or its ``to_dict()`` form) as a dict whose ``metadata``,
    ``chunk_ids``, ``score`` (finite float), ``layer`` (int or ``None``) and ``text`` are safe
    to read.

    Raises:
        ValueError: not a Hit nor a mapping with str ``kind`` and ``id``.
    """
    if hasattr(h, "to_dict") and hasattr(h, "kind"):
        h = h.to_dict()
    if not isinstance(h, Mapping) or not isinstance(h.get("kind"), str) or not isinstance(h.get("id"), str):
        raise ValueError(
            f"query_hits[{i}] must be a Hit or a dict with str 'kind' and 'id', got {type(h).__name__}"
        )
    out = dict(h)  # the optional fields, made safe to read (a dict from JSON may hold anything)
    meta = out.get("metadata")
    out["metadata"] = dict(meta) if isinstance(meta, Mapping) else {}
    chunks = out.get("chunk_ids")
    out["chunk_ids"] = [c for c in chunks if isinstance(c, str)] if isinstance(chunks, (list, tuple)) else []
    try:
        score = float(out.get("score") or 0.0)
    except (TypeError, ValueError):
        score = 0.0
    out["score"] = score if math.isfinite(score) else 0.0  # NaN is not JSON
    layer = out.get("layer")
    out["layer"] = int(layer) if isinstance(layer, (int, np.integer)) and not isinstance(layer, bool) else None
    out["text"] = str(out.get("text") or "")
    return out


def known_ids(values: Any, known: Mapping[str, Any]) -> list[str]:
    """The str items of ``values`` (any type) that are keys of ``known``."""
    if not isinstance(values, (list, tuple)):
        return []
    return [v for v in values if isinstance(v, str) and v in known]


def query_marks(model: HierarchyModel, hits: Iterable[Any] | None) -> QueryMarks | None:
    """Retrieved / context marks of ``hits`` (``None`` without hits); how each hit kind maps
    is described in :mod:`graphstrata.viz`.

    Raises:
        ValueError: ``hits`` is not a sequence of hits, or one is malformed (:func:`hit_dict`).
    """
    if hits is None:
        return None
    if isinstance(hits, (str, bytes, Mapping)) or not isinstance(hits, Iterable):
        raise ValueError(f"query_hits must be a sequence of hits, got {type(hits).__name__}")
    out = QueryMarks()
    ents, comm = model.entities, model.comm
    chunk_entities = model.state.kg.chunk_entities()
    retrieved: set[str] = set()
    context: set[str] = set()
    for i, raw in enumerate(hits):
        h = hit_dict(raw, i)
        out.items.append(h)
        kind, hid, meta = h["kind"], h["id"], h["metadata"]
        found: list[str] = []
        ctx: list[str] = []
        if kind == "community":
            if hid in comm:
                found.append(hid)
            else:
                ctx += known_ids(meta.get("members"), ents)
        elif kind == "entity":
            if hid in ents:
                found.append(hid)
        elif kind == "relation":
            found += [e for e in hid.split("\u241f") if e in ents]
        elif kind == "path":
            for key in ("entities", "nodes", "key_entities", "anchors"):
                found += known_ids(meta.get(key), ents)
        elif kind == "chunk":
            ctx += chunk_entities.get(hid, [])
        if not found and not ctx and not (kind == "chunk" and hid in model.state.chunk_row):
            out.outside += 1
        retrieved.update(found)
        context.update(ctx)
    for x in retrieved:
        context.update(model.ancestors(x))
    out.marks = {x: CONTEXT for x in context}
    out.marks.update({x: RETRIEVED for x in retrieved})
    return out


def hits_for(engine: Any, query: str | None, query_hits: Any, method: str | None) -> Any:
    """``query_hits``, or the engine's hits for ``query`` when only the query is given.

    Raises:
        ValueError: ``query`` is not a non-empty str, or needs retrieving without an engine.
    """
    if query is not None and (not isinstance(query, str) or not query.strip()):
        raise ValueError(f"query must be a non-empty str, got {query!r}")
    if query_hits is not None or query is None:
        return query_hits
    if engine is None:
        raise ValueError(
            "query without query_hits needs a GraphStrata (an EngineState cannot retrieve): "
            "pass query_hits=gs.retrieve(query)"
        )
    return engine.retrieve(query, method=method or "archrag")


# --------------------------------------------------------------------------------------------
# colours and label texts (computed here, drawn by the renderers)
# --------------------------------------------------------------------------------------------


def palette(root: int, depth: int, shade: int, n_depths: int) -> tuple[float, float, float]:
    """Colour of a wedge as RGB in 0..1: a hue per top-layer community ``root`` (golden-ratio
    spacing; light grey for ``root < 0``), lighter outwards with ``depth`` of ``n_depths``,
    siblings (``shade`` parity) alternating slightly."""
    if root < 0:
        return (0.80, 0.80, 0.80)
    hue = (0.58 + root * 0.618034) % 1.0
    light = 0.55 + 0.25 * depth / max(n_depths, 1) + (0.035 if shade % 2 else 0.0)
    return colorsys.hls_to_rgb(hue, min(light, 0.9), 0.62)


def mix(rgb: tuple[float, float, float], towards: tuple[float, float, float], t: float):
    """``rgb`` moved the fraction ``t`` (0..1) of the way to ``towards``."""
    return tuple(a + (b - a) * t for a, b in zip(rgb, towards, strict=True))


def label_lines(title: str, width_of, max_w: float, max_lines: int) -> list[str]:
    """Greedy wrap of a comma-separated title into ``max_lines`` lines of width ≤ ``max_w``
    (points, as measured by ``width_of(text)``); a term too long for a line is cut with an
    ellipsis and ends the label."""
    terms = [t.strip() for t in title.split(",") if t.strip()] or [title.strip()]
    lines: list[str] = []
    cur = ""
    for term in terms:
        trial = f"{cur}, {term}" if cur else term
        if width_of(trial) <= max_w:
            cur = trial
            continue
        if cur:
            lines.append(cur)
            cur = ""
            if len(lines) == max_lines:
                break
        if width_of(term) <= max_w:
            cur = term
            continue
        lo, hi = 0, len(term)
        while lo < hi:  # longest prefix that fits with an ellipsis
            mid = (lo + hi + 1) // 2
            if width_of(term[:mid].rstrip() + "…") <= max_w:
                lo = mid
            else:
                hi = mid - 1
        if lo >= 3:
            lines.append(term[:lo].rstrip() + "…")
        break
    else:
        if cur:
            lines.append(cur)
    return lines[:max_lines]


def hit_label(model: HierarchyModel, h: Mapping[str, Any]) -> str:
    """A readable name for a normalised hit (:func:`hit_dict`): a community's title, an
    entity's name, a relation's two names, a chunk's document title, else its text."""
    kind, hid, meta = h["kind"], h["id"], h["metadata"]
    ents = model.entities
    if kind == "community":
        if hid in model.comm:
            return model.title(hid)
        return str(meta.get("title") or hid)
    if kind == "entity":
        return ents[hid].name if hid in ents else str(meta.get("name") or hid)
    if kind == "relation":
        parts = hid.split("\u241f")
        return " — ".join(ents[p].name if p in ents else p for p in parts)
    if kind == "chunk":
        row = model.state.chunk_row.get(hid)
        if row is not None:
            doc = model.state.documents.get(model.state.chunks[row].document_id)
            title = (doc.metadata.get("title") if doc else None) or (doc.id if doc else hid)
            return f"{title} ({hid})"
        return hid
    return " ".join((h["text"] or hid).split())

