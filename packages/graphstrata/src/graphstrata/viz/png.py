"""The PNG sunburst of the community hierarchy (matplotlib, Agg; see :mod:`graphstrata.viz`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .model import (
    CONTEXT,
    RETRIEVED,
    UNCLUSTERED,
    HierarchyModel,
    QueryMarks,
    count_arg,
    hits_for,
    label_lines,
    mix,
    out_path,
    palette,
    query_marks,
    state_of,
)


@dataclass
class _Wedge:
    key: str  # community id, entity id, or "+<parent>@<layer>" for a "more" wedge
    kind: str  # community | entity | more
    layer: int
    size: float
    root: int
    mark: int = 0
    count: int = 0  # hidden items of a "more" wedge
    children: list[_Wedge] = field(default_factory=list)
    a0: float = 0.0
    a1: float = 0.0
    shade: int = 0  # sibling index parity, for alternating lightness


def _wedge_tree(model: HierarchyModel, hits: QueryMarks | None, max_communities: int, max_entities: int):
    """Wedges per ring with the caps applied: rings hold at most ``max_communities``
    community wedges (``max_entities`` entity wedges); the rest of a parent's children merge
    into one grey "more" wedge that reaches the outer edge. Retrieved items are kept first."""
    mark = hits.mark if hits else (lambda _x: 0)
    n_rings_layers = max(model.n_layers, 1)

    def prio(w: _Wedge) -> tuple:
        deg = model.degree.get(w.key, 0) if w.kind == "entity" else 0
        return (-w.mark, -w.size, -deg, w.key)

    roots = [
        _Wedge(r, "community", model.layer_of(r), float(model.size.get(r, 0)), i, mark(r))
        for i, r in enumerate(model.roots)
    ]
    hidden = {"communities": 0, "entities": 0}
    top: list[_Wedge] = []
    by_layer: dict[int, list[tuple[_Wedge | None, _Wedge]]] = {}
    for w in roots:
        by_layer.setdefault(w.layer, []).append((None, w))
    for layer in range(n_rings_layers, -1, -1):
        if layer == 0 and max_entities == 0:
            break
        cands = by_layer.get(layer, [])
        cap = max_entities if layer == 0 else max_communities
        order = sorted(cands, key=lambda pw: prio(pw[1]))
        keep = {id(w) for _, w in order[:cap]} | {id(w) for _, w in order if w.mark == RETRIEVED}
        more: dict[int, _Wedge] = {}
        for parent, w in cands:
            if id(w) in keep:
                (parent.children if parent is not None else top).append(w)
                if w.kind == "community":
                    for ki, k in enumerate(model.sub_communities(w.key)):
                        c = _Wedge(k, "community", layer - 1, float(model.size[k]), w.root, mark(k), shade=ki)
                        by_layer.setdefault(layer - 1, []).append((w, c))
                    if max_entities:
                        ents = model.entity_kids(w.key)
                        for ki, e in enumerate(ents):
                            c = _Wedge(e, "entity", 0, 1.0, w.root, mark(e), shade=ki)
                            by_layer.setdefault(0, []).append((w, c))
                continue
            hidden["entities" if layer == 0 else "communities"] += 1
            m = more.get(id(parent))
            if m is None:
                key = f"+{parent.key if parent else ''}@{layer}"
                m = _Wedge(key, "more", layer, 0.0, parent.root if parent else -1)
                more[id(parent)] = m
                (parent.children if parent is not None else top).append(m)
            m.size += w.size
            m.count += 1
    return top, hidden


def _layout(wedges: list[_Wedge], a0: float, a1: float) -> None:
    """Angles (radians, clockwise from 12 o'clock) proportional to size, recursively."""
    total = sum(max(w.size, 0.0) for w in wedges)
    if total <= 0:
        return
    a = a0
    for w in wedges:
        span = (a1 - a0) * max(w.size, 0.0) / total
        w.a0, w.a1 = a, a + span
        a += span
        if w.children:
            parent_units = max(w.size, 1e-9)
            child_units = sum(c.size for c in w.children)
            # children fill the parent's span in proportion to their share of its entities
            _layout(w.children, w.a0, w.a0 + span * min(1.0, child_units / parent_units))



def render_png(
    state_or_gs: Any,
    path: str | Path,
    *,
    query_hits: Sequence[Any] | None = None,
    query: str | None = None,
    method: str | None = None,
    max_communities: int = 400,
    max_entities: int = 2000,
    entity_labels: int = 16,
    dpi: int = 150,
    size_inches: float = 10.0,
) -> Path:
    """Draw the community hierarchy as a sunburst PNG.

    Rings from the centre outwards: the top layer, every layer below it, layer 1, then a thin
    ring of entities. A wedge's angle is proportional to the number of entities under it;
    colours follow the top-layer community a wedge belongs to. Community titles are printed
    along or across their wedge where they fit (truncated at a comma or with an ellipsis,
    never overlapping a neighbour); a title line gives the index's counts and a footer names
    the rings. The output is deterministic: the same state and arguments give the same bytes.

    Args:
        state_or_gs: a :class:`~graphstrata.GraphStrata` or an :class:`EngineState`.
        path: the ``.png`` file to write (its directory must exist; an existing file is
            replaced).
        query_hits: hits of one query (``Hit`` objects or ``Hit.to_dict()`` dicts); retrieved
            communities and entities are outlined at full colour on their own ring, what
            contains or mentions them keeps its colour, everything else fades (see the module
            docstring for how each hit kind maps). ``None``: no highlighting.
        query: the query text, printed under the title; with a ``GraphStrata`` and no
            ``query_hits`` the hits are retrieved here with ``method``.
        method: the retrieval method (printed; used to retrieve, default ``"archrag"``).
        max_communities: most community wedges drawn per ring (≥ 1); the smallest of a ring
            beyond it merge, per parent, into one grey "more" wedge (retrieved ones are kept).
        max_entities: most entity wedges in the outer ring (0: no entity ring).
        entity_labels: how many entity names to print outside the circle (the most connected
            ones; with hits, the retrieved ones), 0 for none.
        dpi: pixels per inch of the PNG (30..600).
        size_inches: width of the square drawing in inches (4..40); the picture is
            ``size_inches * dpi`` pixels wide and about 10% taller.

    Returns:
        The path written.

    Raises:
        ValueError: not a GraphStrata/EngineState; a path that is not ``.png``, is a directory
            or lies in a missing directory; an index without entities; a bad cap, dpi or
            size; malformed ``query_hits``; ``query`` without hits on an ``EngineState``.
        ImportError: matplotlib is not installed (``pip install matplotlib``).
    """
    state, engine = state_of(state_or_gs)
    out = out_path(path, (".png",), "PNG")
    max_communities = count_arg(max_communities, "max_communities", 1)
    max_entities = count_arg(max_entities, "max_entities", 0)
    entity_labels = count_arg(entity_labels, "entity_labels", 0)
    dpi = count_arg(dpi, "dpi", 30)
    if dpi > 600:
        raise ValueError(f"dpi must be in 30..600, got {dpi}")
    if isinstance(size_inches, bool) or not isinstance(size_inches, (int, float)) or not 4 <= size_inches <= 40:
        raise ValueError(f"size_inches must be a number in 4..40, got {size_inches!r}")
    model = HierarchyModel(state)
    hits = query_marks(model, hits_for(engine, query, query_hits, method))
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.collections import PatchCollection
        from matplotlib.figure import Figure
        from matplotlib.font_manager import FontProperties
        from matplotlib.patches import Patch, Wedge
    except ImportError as exc:  # pragma: no cover - exercised only without matplotlib
        raise ImportError("render_png needs matplotlib: pip install matplotlib") from exc

    top, hidden = _wedge_tree(model, hits, max_communities, max_entities)
    _layout(top, 0.0, 2 * math.pi)

    # ---- geometry: community rings share the radius between the hole and the entity ring
    n_comm_rings = max(model.n_layers, 1)
    hole, outer = 0.17, 1.0
    ent_w = 0.075 if max_entities else 0.0
    ring_w = (outer - ent_w - hole) / n_comm_rings

    def radii(layer: int) -> tuple[float, float]:
        if layer == 0:
            return outer - ent_w, outer
        i = n_comm_rings - layer  # 0 = innermost ring
        return hole + i * ring_w, hole + (i + 1) * ring_w

    lim = 1.42 if entity_labels and max_entities else 1.04
    w_in = float(size_inches)
    fig = Figure(figsize=(w_in, w_in * 1.1), dpi=dpi)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes((0.0, 0.045, 1.0, 1.0 / 1.1))
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.axis("off")
    pt_per_unit = (w_in * 72.0) / (2 * lim)  # points per data unit
    renderer = canvas.get_renderer()
    fonts: dict[tuple[float, bool], Any] = {}
    widths: dict[tuple[str, float, bool], float] = {}

    def text_w(s: str, fs: float, bold: bool = False) -> float:
        key = (s, fs, bold)
        if key not in widths:
            prop = fonts.setdefault((fs, bold), FontProperties(family="DejaVu Sans", size=fs,
                                                               weight="bold" if bold else "normal"))
            w, _h, _d = renderer.get_text_width_height_descent(s, prop, ismath=False)
            widths[key] = w * 72.0 / dpi
        return widths[key]

    querying = hits is not None
    grey = (0.93, 0.93, 0.93)
    patches, faces, edges, lws = [], [], [], []
    outlined: list[tuple[_Wedge, float, float]] = []
    labels: list[tuple[_Wedge, float, float]] = []
    ent_wedges: list[_Wedge] = []

    def visit(ws: list[_Wedge]) -> None:
        for w in ws:
            if w.a1 - w.a0 <= 0:
                continue
            r0, r1 = radii(w.layer)
            if w.kind == "more":
                r1 = outer if max_entities else radii(1)[1]
            elif w.kind == "entity" and querying and w.mark == RETRIEVED:
                r1 = outer + 0.035  # retrieved entities stick out of the ring
            depth = (n_comm_rings - w.layer) if w.layer else n_comm_rings
            if w.kind == "more" or w.key == UNCLUSTERED:
                face = (0.84, 0.84, 0.84)
            else:
                face = palette(w.root, depth, w.shade, n_comm_rings)
            if querying and w.mark == 0:
                face = mix(face, grey, 0.78)
            elif querying and w.mark == CONTEXT:
                face = mix(face, grey, 0.25)
            t1, t2 = 90 - math.degrees(w.a1), 90 - math.degrees(w.a0)
            patches.append(Wedge((0, 0), r1, t1, t2, width=r1 - r0))
            faces.append(face)
            thin = w.kind == "entity"
            edges.append((1, 1, 1))
            lws.append(0.15 if thin else 0.6)
            if querying and w.mark == RETRIEVED:
                outlined.append((w, r0, r1))
            if w.kind in ("community", "more"):
                labels.append((w, r0, r1))
            elif w.kind == "entity":
                ent_wedges.append(w)
            visit(w.children)

    visit(top)
    ax.add_collection(PatchCollection(patches, facecolors=faces, edgecolors=edges, linewidths=lws))
    if outlined:
        ol = [Wedge((0, 0), r1, 90 - math.degrees(w.a1), 90 - math.degrees(w.a0), width=r1 - r0)
              for w, r0, r1 in outlined]
        ax.add_collection(PatchCollection(ol, facecolors="none", edgecolors="#1b1b1b",
                                          linewidths=[0.7 if w.kind == "entity" else 1.4 for w, _, _ in outlined]))

    # ---- community labels: tangential (along the arc) or radial, whichever shows more
    for w, r0, r1 in labels:
        ring = n_comm_rings - w.layer if w.layer else n_comm_rings
        text_full = f"+{w.count} more" if w.kind == "more" else model.title(w.key)
        span = w.a1 - w.a0
        thick = (r1 - r0) * pt_per_unit
        r_mid = (r0 + r1) / 2
        base_fs = max(6.5, 9.5 - 1.0 * ring)
        best: tuple[int, float, str, list[str]] | None = None  # (chars, size, orientation, lines)
        bold = querying and w.mark == RETRIEVED
        r0_pt, r1_pt, pad = r0 * pt_per_unit, r1 * pt_per_unit, 3.0
        for fs in (base_fs, base_fs - 1.0):
            line_h = fs * 1.22

            def measure(s: str, f: float = fs, b: bool = bold) -> float:
                return text_w(s, f, b)

            options = []  # (orientation, width available, lines)
            # along the arc: width = chord at mid radius, height = ring thickness
            n_lines = min(3, int((thick * 0.82) // line_h))
            if n_lines >= 1 and span < 2 * math.pi:
                options.append(("tan", 2 * r_mid * math.sin(min(span, math.pi) / 2) * pt_per_unit * 0.86, n_lines))
            # across the arc (radial): the text may slide outwards, where the wedge is wider, as
            # long as its inner end still has room for its height
            for n_lines in (2, 1):
                inner = n_lines * line_h / (span * 0.85)  # radius (pt) where the lines fit
                avail = min(thick - 2 * pad, r1_pt - pad - max(inner, r0_pt + pad))
                if avail > 0:
                    options.append(("rad", avail, n_lines))
            for orient, avail, n_lines in options:
                lines = label_lines(text_full, measure, avail, n_lines)
                chars = sum(len(x.rstrip("…")) for x in lines)
                if lines and (best is None or chars > best[0] + 2):
                    best = (chars, fs, orient, lines)
        if best is None:
            continue
        _chars, fs, orient, lines = best
        mid = (w.a0 + w.a1) / 2
        deg = math.degrees(mid)
        r_text = r_mid
        if orient == "tan":
            rot = -deg
            if 90 < deg < 270:
                rot += 180
        else:
            rot = 90 - deg
            if deg > 180:
                rot += 180
            half = max(text_w(x, fs, bold) for x in lines) / 2
            inner = len(lines) * fs * 1.22 / (span * 0.85)
            r_pt = min(max(r_mid * pt_per_unit, inner + half, r0_pt + pad + half), r1_pt - pad - half)
            r_text = r_pt / pt_per_unit
        x, y = r_text * math.sin(mid), r_text * math.cos(mid)
        faded = querying and w.mark == 0
        color = "#9a9a9a" if faded else "#161616"
        weight = "bold" if querying and w.mark == RETRIEVED else "normal"
        ax.text(x, y, "\n".join(lines), ha="center", va="center", rotation=rot,
                rotation_mode="anchor", fontsize=fs, color=color, fontweight=weight,
                family="DejaVu Sans", linespacing=1.05)

    # ---- entity names outside the circle: retrieved ones (query) or the hubs
    if entity_labels and ent_wedges:
        if querying:
            chosen = [w for w in ent_wedges if w.mark == RETRIEVED]
            chosen.sort(key=lambda w: (-model.degree.get(w.key, 0), w.key))
        else:
            chosen = sorted(ent_wedges, key=lambda w: (-model.degree.get(w.key, 0), w.key))
        placed: list[float] = []
        fs = 7.5
        min_gap = (fs * 1.35) / (1.03 * pt_per_unit)  # radians between two labels' baselines
        for w in chosen:
            if len(placed) >= entity_labels:
                break
            mid = (w.a0 + w.a1) / 2
            if any(min(abs(mid - p), 2 * math.pi - abs(mid - p)) < min_gap for p in placed):
                continue
            placed.append(mid)
            name = " ".join(model.entities[w.key].name.split())
            if len(name) > 28:
                name = name[:27].rstrip() + "…"
            deg = math.degrees(mid)
            r = outer + (0.05 if querying else 0.025)
            x, y = r * math.sin(mid), r * math.cos(mid)
            rot, ha = 90 - deg, "left"
            if deg > 180:
                rot, ha = rot + 180, "right"
            ax.text(x, y, name, ha=ha, va="center", rotation=rot, rotation_mode="anchor",
                    fontsize=fs, color="#202020", family="DejaVu Sans")

    # ---- centre, title, footer
    st = state.stats()
    n_comm = sum(model.layer_sizes)
    ax.text(0, 0.025, f"{n_comm}", ha="center", va="center", fontsize=15, fontweight="bold",
            color="#333333", family="DejaVu Sans")
    ax.text(0, -0.055, "communities" if n_comm != 1 else "community", ha="center", va="center",
            fontsize=8, color="#555555", family="DejaVu Sans")
    per_layer = ", ".join(f"L{i + 1}: {n}" for i, n in reversed(list(enumerate(model.layer_sizes))))
    head = (f"Community hierarchy — {st['documents']} documents · {st['chunks']} chunks · "
            f"{st['entities']} entities · {st['relations']} relations")
    fig.text(0.5, 0.985, head, ha="center", va="top", fontsize=12, fontweight="bold",
             color="#1b1b1b", family="DejaVu Sans")
    n_l = model.n_layers
    sub = (f"{n_l} layer{'s' if n_l != 1 else ''} ({per_layer})" if n_l else "no community layers: entities only")
    if model.unclustered and model.n_layers:
        sub += f" · {model.unclustered} entities in no community"
    fig.text(0.5, 0.962, sub, ha="center", va="top", fontsize=9, color="#444444", family="DejaVu Sans")
    if querying:
        q = " ".join((query or "").split())
        q = (q[:90] + "…") if len(q) > 91 else q
        n_ret = sum(1 for v in hits.marks.values() if v == RETRIEVED)
        qline = (f"query: “{q}”" if q else "query hits") + (f" ({method})" if method else "")
        qline += f" — {len(hits.items)} hits, {n_ret} communities/entities retrieved"
        if hits.outside:
            qline += f", {hits.outside} outside this index"
        fig.text(0.5, 0.942, qline, ha="center", va="top", fontsize=9, color="#8a1c1c",
                 family="DejaVu Sans", style="italic")
    rings = [f"layer {layer}" for layer in range(max(model.n_layers, 1), 0, -1)]
    if max_entities:
        rings.append("entities")
    foot = "rings, centre → edge: " + " · ".join(rings) + " · wedge angle = entities below"
    if hidden["communities"] or hidden["entities"]:
        foot += (f" · grey “more”: {hidden['communities']} communities, {hidden['entities']} "
                 f"entities not drawn (caps {max_communities}/{max_entities})")
    fig.text(0.5, 0.012, foot, ha="center", va="bottom", fontsize=8, color="#555555", family="DejaVu Sans")
    if querying:
        handles = [
            Patch(facecolor=palette(0, 1, 0, 2), edgecolor="#1b1b1b", linewidth=1.4, label="retrieved"),
            Patch(facecolor=mix(palette(0, 1, 0, 2), grey, 0.25), edgecolor="white",
                  label="contains / mentions a hit"),
            Patch(facecolor=mix(palette(0, 1, 0, 2), grey, 0.78), edgecolor="white", label="other"),
        ]
        fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.028), ncol=3,
                   fontsize=8, frameon=False)
    fig.savefig(out, format="png", dpi=dpi, facecolor="white", metadata={"Software": "graphstrata"})
    return out
