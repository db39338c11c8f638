"""The PNG sunburst of the community hierarchy (matplotlib, Agg; see :mod:`graphstrata.viz`).

:func:`render_png` checks its arguments, builds the wedge tree (caps applied, angles laid out),
then draws in a fixed order — wedges, outlines, community titles, entity names, centre, title
lines, legend — each step a function below. Geometry is in data units (the circle has radius 1),
text sizes and widths in points.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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

_FADE_TO = (0.93, 0.93, 0.93)
"""The grey that wedges fade towards when a query leaves them unmarked (RGB, 0..1)."""
_MORE_GREY = (0.84, 0.84, 0.84)
"""Face of "more" wedges and of the unclustered pseudo-community."""
_PAD = 3.0
"""Points kept free between a radial label and its wedge's inner and outer edge."""
_FONT = "DejaVu Sans"


# --------------------------------------------------------------------------------------------
# the wedge tree: caps applied, angles laid out
# --------------------------------------------------------------------------------------------


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


def _child_wedges(
    model: HierarchyModel, w: _Wedge, max_entities: int, mark: Callable[[str], int]
) -> list[_Wedge]:
    """Candidate wedges one ring further out under a kept community wedge: its
    sub-communities, then its entities (when the entity ring is drawn)."""
    out = [
        _Wedge(k, "community", w.layer - 1, float(model.size[k]), w.root, mark(k), shade=ki)
        for ki, k in enumerate(model.sub_communities(w.key))
    ]
    if max_entities:
        out += [
            _Wedge(e, "entity", 0, 1.0, w.root, mark(e), shade=ki)
            for ki, e in enumerate(model.entity_kids(w.key))
        ]
    return out


def _wedge_tree(
    model: HierarchyModel, hits: QueryMarks | None, max_communities: int, max_entities: int
) -> tuple[list[_Wedge], dict[str, int]]:
    """Wedges per ring with the caps applied: rings hold at most ``max_communities``
    community wedges (``max_entities`` entity wedges); the rest of a parent's children merge
    into one grey "more" wedge that reaches the outer edge. Retrieved items are kept first.

    Returns the top-level wedges and how many communities / entities were not drawn."""
    mark = hits.mark if hits else (lambda _x: 0)

    def prio(w: _Wedge) -> tuple:
        deg = model.degree.get(w.key, 0) if w.kind == "entity" else 0
        return (-w.mark, -w.size, -deg, w.key)

    hidden = {"communities": 0, "entities": 0}
    top: list[_Wedge] = []
    by_layer: dict[int, list[tuple[_Wedge | None, _Wedge]]] = {}
    for i, r in enumerate(model.roots):
        w = _Wedge(r, "community", model.layer_of(r), float(model.size.get(r, 0)), i, mark(r))
        by_layer.setdefault(w.layer, []).append((None, w))
    for layer in range(max(model.n_layers, 1), -1, -1):
        if layer == 0 and max_entities == 0:
            break
        cands = by_layer.get(layer, [])
        cap = max_entities if layer == 0 else max_communities
        order = sorted(cands, key=lambda pw: prio(pw[1]))
        keep = {id(w) for _, w in order[:cap]} | {id(w) for _, w in order if w.mark == RETRIEVED}
        more: dict[int, _Wedge] = {}
        for parent, w in cands:
            siblings = parent.children if parent is not None else top
            if id(w) in keep:
                siblings.append(w)
                if w.kind == "community":
                    for c in _child_wedges(model, w, max_entities, mark):
                        by_layer.setdefault(c.layer, []).append((w, c))
                continue
            hidden["entities" if layer == 0 else "communities"] += 1
            m = more.get(id(parent))
            if m is None:
                key = f"+{parent.key if parent else ''}@{layer}"
                m = _Wedge(key, "more", layer, 0.0, parent.root if parent else -1)
                more[id(parent)] = m
                siblings.append(m)
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


# --------------------------------------------------------------------------------------------
# geometry, canvas, colours
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rings:
    """Radii of the rings in data units: community rings share the radius between the hole
    and the entity ring (``ent_w`` thick, 0 without one), the top layer innermost."""

    n_comm: int  # community rings (at least 1)
    ent_w: float
    hole: float = 0.17
    outer: float = 1.0

    def radii(self, layer: int) -> tuple[float, float]:
        """Inner and outer radius of a layer's ring (layer 0: the entity ring)."""
        if layer == 0:
            return self.outer - self.ent_w, self.outer
        ring_w = (self.outer - self.ent_w - self.hole) / self.n_comm
        i = self.n_comm - layer  # 0 = innermost ring
        return self.hole + i * ring_w, self.hole + (i + 1) * ring_w

    def depth(self, layer: int) -> int:
        """Ring index counted from the centre (the entity ring counts as the last one)."""
        return (self.n_comm - layer) if layer else self.n_comm


class _Sheet:
    """The figure being drawn: a square axes of half-width ``lim`` data units under a title
    band, and text widths in points (measured by the Agg renderer, cached)."""

    def __init__(self, size_inches: float, dpi: int, lim: float) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        w_in = float(size_inches)
        self.fig = Figure(figsize=(w_in, w_in * 1.1), dpi=dpi)
        canvas = FigureCanvasAgg(self.fig)
        self.ax = self.fig.add_axes((0.0, 0.045, 1.0, 1.0 / 1.1))
        self.ax.set_xlim(-lim, lim)
        self.ax.set_ylim(-lim, lim)
        self.ax.set_aspect("equal")
        self.ax.axis("off")
        self.pt_per_unit = (w_in * 72.0) / (2 * lim)  # points per data unit
        self.dpi = dpi
        self._renderer = canvas.get_renderer()
        self._fonts: dict[tuple[float, bool], Any] = {}
        self._widths: dict[tuple[str, float, bool], float] = {}

    def text_w(self, s: str, fs: float, bold: bool = False) -> float:
        """Width in points of ``s`` at font size ``fs`` (points)."""
        from matplotlib.font_manager import FontProperties

        key = (s, fs, bold)
        if key not in self._widths:
            prop = self._fonts.setdefault((fs, bold), FontProperties(family=_FONT, size=fs,
                                                                     weight="bold" if bold else "normal"))
            w, _h, _d = self._renderer.get_text_width_height_descent(s, prop, ismath=False)
            self._widths[key] = w * 72.0 / self.dpi
        return self._widths[key]


@dataclass
class _Drawn:
    """A wedge as drawn: inner / outer radius (data units) and face colour (RGB, 0..1)."""

    w: _Wedge
    r0: float
    r1: float
    face: tuple[float, ...]


def _face(w: _Wedge, rings: _Rings, querying: bool) -> tuple[float, ...]:
    """Face colour: the wedge's palette colour (grey for "more" / unclustered), faded strongly
    when a query leaves it unmarked and slightly when it only contains or mentions a hit."""
    if w.kind == "more" or w.key == UNCLUSTERED:
        face: tuple[float, ...] = _MORE_GREY
    else:
        face = palette(w.root, rings.depth(w.layer), w.shade, rings.n_comm)
    if querying and w.mark == 0:
        face = mix(face, _FADE_TO, 0.78)
    elif querying and w.mark == CONTEXT:
        face = mix(face, _FADE_TO, 0.25)
    return face


def _drawn_wedges(
    top: list[_Wedge], rings: _Rings, max_entities: int, querying: bool
) -> list[_Drawn]:
    """Every wedge with a non-empty angle, parents before children (a wedge without angle
    hides its children). "More" wedges reach the outer edge; retrieved entities stick out."""
    out: list[_Drawn] = []

    def visit(ws: list[_Wedge]) -> None:
        for w in ws:
            if w.a1 - w.a0 <= 0:
                continue
            r0, r1 = rings.radii(w.layer)
            if w.kind == "more":
                r1 = rings.outer if max_entities else rings.radii(1)[1]
            elif w.kind == "entity" and querying and w.mark == RETRIEVED:
                r1 = rings.outer + 0.035
            out.append(_Drawn(w, r0, r1, _face(w, rings, querying)))
            visit(w.children)

    visit(top)
    return out


# --------------------------------------------------------------------------------------------
# drawing steps, in the order render_png calls them
# --------------------------------------------------------------------------------------------


def _wedge_patch(w: _Wedge, r0: float, r1: float) -> Any:
    from matplotlib.patches import Wedge

    return Wedge((0, 0), r1, 90 - math.degrees(w.a1), 90 - math.degrees(w.a0), width=r1 - r0)


def _draw_wedges(ax: Any, drawn: list[_Drawn], querying: bool) -> None:
    """All wedges in one collection (thin white edges), then a dark outline on retrieved ones."""
    from matplotlib.collections import PatchCollection

    patches = [_wedge_patch(d.w, d.r0, d.r1) for d in drawn]
    faces = [d.face for d in drawn]
    edges = [(1, 1, 1) for _ in drawn]
    lws = [0.15 if d.w.kind == "entity" else 0.6 for d in drawn]
    ax.add_collection(PatchCollection(patches, facecolors=faces, edgecolors=edges, linewidths=lws))
    outlined = [d for d in drawn if querying and d.w.mark == RETRIEVED]
    if outlined:
        ol = [_wedge_patch(d.w, d.r0, d.r1) for d in outlined]
        ax.add_collection(PatchCollection(ol, facecolors="none", edgecolors="#1b1b1b",
                                          linewidths=[0.7 if d.w.kind == "entity" else 1.4 for d in outlined]))


def _label_options(
    span: float, r0: float, r1: float, fs: float, pt_per_unit: float
) -> list[tuple[str, float, int]]:
    """Ways a label at font size ``fs`` fits its wedge: ``(orientation, width available in
    points, most lines)``; ``"tan"`` runs along the arc, ``"rad"`` across it."""
    thick = (r1 - r0) * pt_per_unit
    r_mid = (r0 + r1) / 2
    r0_pt, r1_pt = r0 * pt_per_unit, r1 * pt_per_unit
    line_h = fs * 1.22
    options = []
    # along the arc: width = chord at mid radius, height = ring thickness
    n_lines = min(3, int((thick * 0.82) // line_h))
    if n_lines >= 1 and span < 2 * math.pi:
        options.append(("tan", 2 * r_mid * math.sin(min(span, math.pi) / 2) * pt_per_unit * 0.86, n_lines))
    # across the arc (radial): the text may slide outwards, where the wedge is wider, as
    # long as its inner end still has room for its height
    for n_lines in (2, 1):
        inner = n_lines * line_h / (span * 0.85)  # radius (pt) where the lines fit
        avail = min(thick - 2 * _PAD, r1_pt - _PAD - max(inner, r0_pt + _PAD))
        if avail > 0:
            options.append(("rad", avail, n_lines))
    return options


def _fit_label(
    sheet: _Sheet, text: str, d: _Drawn, ring: int, bold: bool
) -> tuple[float, str, list[str]] | None:
    """``(font size, orientation, lines)`` showing most of ``text`` in the wedge, trying the
    ring's font size then one point smaller (a smaller size must show 3 more characters to
    win); ``None`` when nothing fits."""
    span = d.w.a1 - d.w.a0
    base_fs = max(6.5, 9.5 - 1.0 * ring)
    best: tuple[int, float, str, list[str]] | None = None  # (chars, size, orientation, lines)
    for fs in (base_fs, base_fs - 1.0):

        def measure(s: str, f: float = fs, b: bool = bold) -> float:
            return sheet.text_w(s, f, b)

        for orient, avail, n_lines in _label_options(span, d.r0, d.r1, fs, sheet.pt_per_unit):
            lines = label_lines(text, measure, avail, n_lines)
            chars = sum(len(x.rstrip("…")) for x in lines)
            if lines and (best is None or chars > best[0] + 2):
                best = (chars, fs, orient, lines)
    return None if best is None else best[1:]


def _label_anchor(
    sheet: _Sheet, d: _Drawn, fs: float, orient: str, lines: list[str], bold: bool
) -> tuple[float, float, float]:
    """``(x, y, rotation in degrees)`` of a fitted label: centred in the ring along the arc,
    or slid outwards across it as far as its width needs (kept readable, never upside down)."""
    w, r0, r1, pt_per_unit = d.w, d.r0, d.r1, sheet.pt_per_unit
    span = w.a1 - w.a0
    r_mid = (r0 + r1) / 2
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
        r0_pt, r1_pt = r0 * pt_per_unit, r1 * pt_per_unit
        half = max(sheet.text_w(x, fs, bold) for x in lines) / 2
        inner = len(lines) * fs * 1.22 / (span * 0.85)
        r_pt = min(max(r_mid * pt_per_unit, inner + half, r0_pt + _PAD + half), r1_pt - _PAD - half)
        r_text = r_pt / pt_per_unit
    return r_text * math.sin(mid), r_text * math.cos(mid), rot


def _draw_community_labels(sheet: _Sheet, model: HierarchyModel, drawn: list[_Drawn], rings: _Rings,
                           querying: bool) -> None:
    """Titles of community and "more" wedges, along or across the arc, whichever shows more;
    retrieved ones bold, unmarked ones grey."""
    for d in drawn:
        w = d.w
        if w.kind not in ("community", "more"):
            continue
        text = f"+{w.count} more" if w.kind == "more" else model.title(w.key)
        bold = querying and w.mark == RETRIEVED
        fitted = _fit_label(sheet, text, d, rings.depth(w.layer), bold)
        if fitted is None:
            continue
        fs, orient, lines = fitted
        x, y, rot = _label_anchor(sheet, d, fs, orient, lines, bold)
        color = "#9a9a9a" if querying and w.mark == 0 else "#161616"
        sheet.ax.text(x, y, "\n".join(lines), ha="center", va="center", rotation=rot,
                      rotation_mode="anchor", fontsize=fs, color=color,
                      fontweight="bold" if bold else "normal", family=_FONT, linespacing=1.05)


def _draw_entity_labels(sheet: _Sheet, model: HierarchyModel, ent_wedges: list[_Wedge], querying: bool,
                        limit: int, outer: float) -> None:
    """Up to ``limit`` entity names outside the circle, radial: the retrieved entities with a
    query, else the most connected ones; a name too close to one already placed is skipped."""
    if querying:
        chosen = [w for w in ent_wedges if w.mark == RETRIEVED]
        chosen.sort(key=lambda w: (-model.degree.get(w.key, 0), w.key))
    else:
        chosen = sorted(ent_wedges, key=lambda w: (-model.degree.get(w.key, 0), w.key))
    placed: list[float] = []
    fs = 7.5
    min_gap = (fs * 1.35) / (1.03 * sheet.pt_per_unit)  # radians between two labels' baselines
    for w in chosen:
        if len(placed) >= limit:
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
        sheet.ax.text(x, y, name, ha=ha, va="center", rotation=rot, rotation_mode="anchor",
                      fontsize=fs, color="#202020", family=_FONT)


def _draw_centre(ax: Any, model: HierarchyModel) -> None:
    """The number of communities in the hole."""
    n_comm = sum(model.layer_sizes)
    ax.text(0, 0.025, f"{n_comm}", ha="center", va="center", fontsize=15, fontweight="bold",
            color="#333333", family=_FONT)
    ax.text(0, -0.055, "communities" if n_comm != 1 else "community", ha="center", va="center",
            fontsize=8, color="#555555", family=_FONT)


def _subtitle(model: HierarchyModel) -> str:
    """Layers and their sizes, top first, and the entities in no community."""
    per_layer = ", ".join(f"L{i + 1}: {n}" for i, n in reversed(list(enumerate(model.layer_sizes))))
    n_l = model.n_layers
    sub = (f"{n_l} layer{'s' if n_l != 1 else ''} ({per_layer})" if n_l else "no community layers: entities only")
    if model.unclustered and model.n_layers:
        sub += f" · {model.unclustered} entities in no community"
    return sub


def _query_line(hits: QueryMarks, query: str | None, method: str | None) -> str:
    """The query (cut at about 90 characters), its method and what its hits marked."""
    q = " ".join((query or "").split())
    q = (q[:90] + "…") if len(q) > 91 else q
    n_ret = sum(1 for v in hits.marks.values() if v == RETRIEVED)
    qline = (f"query: “{q}”" if q else "query hits") + (f" ({method})" if method else "")
    qline += f" — {len(hits.items)} hits, {n_ret} communities/entities retrieved"
    if hits.outside:
        qline += f", {hits.outside} outside this index"
    return qline


def _footer(
    model: HierarchyModel, hidden: dict[str, int], max_communities: int, max_entities: int
) -> str:
    """What the rings are, and what the caps left out."""
    rings = [f"layer {layer}" for layer in range(max(model.n_layers, 1), 0, -1)]
    if max_entities:
        rings.append("entities")
    foot = "rings, centre → edge: " + " · ".join(rings) + " · wedge angle = entities below"
    if hidden["communities"] or hidden["entities"]:
        foot += (f" · grey “more”: {hidden['communities']} communities, {hidden['entities']} "
                 f"entities not drawn (caps {max_communities}/{max_entities})")
    return foot


def _draw_titles(fig: Any, stats: dict[str, Any], model: HierarchyModel, hits: QueryMarks | None,
                 query: str | None, method: str | None, foot: str) -> None:
    """Title (the index's counts), subtitle (layers), query line (with hits), footer."""
    head = (f"Community hierarchy — {stats['documents']} documents · {stats['chunks']} chunks · "
            f"{stats['entities']} entities · {stats['relations']} relations")
    fig.text(0.5, 0.985, head, ha="center", va="top", fontsize=12, fontweight="bold",
             color="#1b1b1b", family=_FONT)
    fig.text(0.5, 0.962, _subtitle(model), ha="center", va="top", fontsize=9, color="#444444", family=_FONT)
    if hits is not None:
        fig.text(0.5, 0.942, _query_line(hits, query, method), ha="center", va="top", fontsize=9,
                 color="#8a1c1c", family=_FONT, style="italic")
    fig.text(0.5, 0.012, foot, ha="center", va="bottom", fontsize=8, color="#555555", family=_FONT)


def _draw_legend(fig: Any) -> None:
    """The three marks of a query, drawn in the first top-layer community's colour."""
    from matplotlib.patches import Patch

    handles = [
        Patch(facecolor=palette(0, 1, 0, 2), edgecolor="#1b1b1b", linewidth=1.4, label="retrieved"),
        Patch(facecolor=mix(palette(0, 1, 0, 2), _FADE_TO, 0.25), edgecolor="white",
              label="contains / mentions a hit"),
        Patch(facecolor=mix(palette(0, 1, 0, 2), _FADE_TO, 0.78), edgecolor="white", label="other"),
    ]
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.028), ncol=3,
               fontsize=8, frameon=False)


def _require_matplotlib() -> None:
    try:
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.collections  # noqa: F401
        import matplotlib.figure  # noqa: F401
        import matplotlib.font_manager  # noqa: F401
        import matplotlib.patches  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised only without matplotlib
        raise ImportError("render_png needs matplotlib: pip install matplotlib") from exc


# --------------------------------------------------------------------------------------------
# the entry point
# --------------------------------------------------------------------------------------------


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
            contains or mentions them keeps its colour, everything else fades (see
            :mod:`graphstrata.viz` for how each hit kind maps). ``None``: no highlighting.
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
    max_communities, max_entities, entity_labels, dpi = _checked_sizes(
        max_communities, max_entities, entity_labels, dpi, size_inches
    )
    model = HierarchyModel(state)
    hits = query_marks(model, hits_for(engine, query, query_hits, method))
    _require_matplotlib()
    sheet = _draw_sunburst(
        model, hits, query, method, max_communities, max_entities, entity_labels, size_inches, dpi
    )
    sheet.fig.savefig(out, format="png", dpi=dpi, facecolor="white", metadata={"Software": "graphstrata"})
    return out


def _checked_sizes(
    max_communities: Any, max_entities: Any, entity_labels: Any, dpi: Any, size_inches: Any
) -> tuple[int, int, int, int]:
    """:func:`render_png`'s caps and sizes checked: ``(max_communities, max_entities,
    entity_labels, dpi)`` as ints.

    Raises:
        ValueError: a cap below its minimum, ``dpi`` outside 30..600, ``size_inches`` not a
            number in 4..40.
    """
    max_communities = count_arg(max_communities, "max_communities", 1)
    max_entities = count_arg(max_entities, "max_entities", 0)
    entity_labels = count_arg(entity_labels, "entity_labels", 0)
    dpi = count_arg(dpi, "dpi", 30)
    if dpi > 600:
        raise ValueError(f"dpi must be in 30..600, got {dpi}")
    if isinstance(size_inches, bool) or not isinstance(size_inches, (int, float)) or not 4 <= size_inches <= 40:
        raise ValueError(f"size_inches must be a number in 4..40, got {size_inches!r}")
    return max_communities, max_entities, entity_labels, dpi


def _draw_sunburst(
    model: HierarchyModel, hits: QueryMarks | None, query: str | None, method: str | None,
    max_communities: int, max_entities: int, entity_labels: int, size_inches: float, dpi: int,
) -> _Sheet:
    """A sheet with the sunburst, its labels, centre, titles and (with hits) legend drawn."""
    top, hidden = _wedge_tree(model, hits, max_communities, max_entities)
    _layout(top, 0.0, 2 * math.pi)
    rings = _Rings(n_comm=max(model.n_layers, 1), ent_w=0.075 if max_entities else 0.0)
    querying = hits is not None
    drawn = _drawn_wedges(top, rings, max_entities, querying)
    sheet = _Sheet(size_inches, dpi, lim=1.42 if entity_labels and max_entities else 1.04)
    _draw_wedges(sheet.ax, drawn, querying)
    _draw_community_labels(sheet, model, drawn, rings, querying)
    ent_wedges = [d.w for d in drawn if d.w.kind == "entity"]
    if entity_labels and ent_wedges:
        _draw_entity_labels(sheet, model, ent_wedges, querying, entity_labels, rings.outer)
    _draw_centre(sheet.ax, model)
    _draw_titles(sheet.fig, model.state.stats(), model, hits, query, method,
                 _footer(model, hidden, max_communities, max_entities))
    if querying:
        _draw_legend(sheet.fig)
    return sheet
