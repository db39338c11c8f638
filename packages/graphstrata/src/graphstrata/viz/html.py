"""The offline HTML explorer of the community hierarchy: one self-contained page with its data,
CSS and JavaScript inline (see :mod:`graphstrata.viz`)."""

from __future__ import annotations

import html as _html
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .model import (
    RETRIEVED,
    UNCLUSTERED,
    HierarchyModel,
    QueryMarks,
    count_arg,
    hit_label,
    hits_for,
    known_ids,
    out_path,
    query_marks,
    state_of,
)


def _clip(text: str, limit: int) -> tuple[str, int]:
    """``(text[:limit] with whitespace folded, characters cut)``."""
    t = " ".join(str(text or "").split())
    if len(t) <= limit:
        return t, 0
    return t[:limit].rstrip(), len(t) - limit


def _json_for_script(obj: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: ``<``, ``>``, ``&`` and the two
    JavaScript line separators are escaped, so no text can close the element or open a
    comment; the result is still plain JSON."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return (
        s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )


def _included_communities(
    model: HierarchyModel, hits: QueryMarks | None, max_communities: int
) -> list[str]:
    """Communities in the file, top-down and biggest first within ``max_communities`` (the
    unclustered node free); retrieved ones and their ancestors always, beyond the cap."""
    mark = hits.mark if hits else (lambda _x: 0)
    forced = {x for x, v in (hits.marks.items() if hits else ()) if v == RETRIEVED and x in model.comm}
    for x in list(forced):
        forced.update(model.ancestors(x))
    included: list[str] = []
    budget = max_communities
    frontier = list(model.roots)
    while frontier:
        frontier.sort(key=lambda c: (-mark(c), -model.size.get(c, 0), c))
        nxt = []
        for c in frontier:
            if c in forced or budget > 0 or c == UNCLUSTERED:
                included.append(c)
                budget -= 0 if c == UNCLUSTERED else 1
                nxt += model.sub_communities(c)
        frontier = nxt
    return included


def _community_node(
    model: HierarchyModel,
    cid: str,
    inc: set[str],
    mark: Callable[[str], int],
    entity_cap: int,
    max_text_chars: int,
) -> dict[str, Any]:
    """One community's record: title, layer, size, parent, the sub-communities in the file
    and its entities (at most ``entity_cap`` plus the retrieved ones), with "N more" counts,
    then its summary, rating, findings and chunk count."""
    kg = model.state.kg
    node: dict[str, Any] = {"t": model.title(cid), "l": model.layer_of(cid), "n": model.size.get(cid, 0)}
    par = model.parent.get(cid)
    if par is not None:
        node["p"] = par
    subs = model.sub_communities(cid)
    if subs:
        shown = sorted((s for s in subs if s in inc), key=lambda c: (-mark(c), -model.size[c], c))
        node["k"] = shown
        if len(shown) < len(subs):
            node["mc"] = len(subs) - len(shown)
            node["mce"] = sum(model.size[s] for s in subs if s not in inc)
    ents = model.entity_kids(cid)
    if ents:
        ents = sorted(ents, key=lambda e: (-mark(e), -model.degree.get(e, 0), -kg.entities[e].weight, e))
        shown = ents[:entity_cap] + [e for e in ents[entity_cap:] if mark(e) == RETRIEVED]
        node["e"] = shown
        if len(shown) < len(ents):
            node["me"] = len(ents) - len(shown)
    if cid in model.comm:
        c = model.comm[cid]
        node["s"], _ = _clip(c.summary, max_text_chars)
        if c.rating is not None and math.isfinite(c.rating):
            node["r"] = c.rating
        if c.findings:
            node["f"] = [_clip(f.get("summary", ""), max_text_chars)[0] for f in c.findings[:5]]
        node["nc"] = len(c.chunk_ids)
    return node


def _entity_record(
    model: HierarchyModel, eid: str, adj: Any, max_text_chars: int, max_chunks_per_entity: int
) -> dict[str, Any]:
    """One entity's record: name, weight, degree, description (cut), parent, source chunk ids
    and its 8 strongest neighbours (``adj``: the graph's CSR adjacency)."""
    kg = model.state.kg
    e = kg.entities[eid]
    d, cut = _clip(e.description, max_text_chars)
    i = kg.row[eid]
    lo, hi = adj.indptr[i], adj.indptr[i + 1]
    nb_idx = adj.indices[lo:hi]
    nb_w = adj.data[lo:hi]
    order = sorted(range(len(nb_idx)), key=lambda j: (-float(nb_w[j]), kg.entity_ids[nb_idx[j]]))[:8]
    rec: dict[str, Any] = {
        "n": e.name, "w": e.weight, "g": model.degree.get(eid, 0), "d": d, "p": model.parent.get(eid),
        "c": list(e.chunk_ids[:max_chunks_per_entity]),
        "nb": [[kg.entity_ids[nb_idx[j]], kg.entities[kg.entity_ids[nb_idx[j]]].name] for j in order],
    }
    if e.type:
        rec["ty"] = e.type
    if cut:
        rec["dm"] = cut
    if len(e.chunk_ids) > max_chunks_per_entity:
        rec["cm"] = len(e.chunk_ids) - max_chunks_per_entity
    return rec


def _hit_item(model: HierarchyModel, rank: int, h: dict[str, Any], max_text_chars: int) -> dict[str, Any]:
    """One hit of the query panel (a :func:`~graphstrata.viz.model.hit_dict`): rank, kind, id,
    layer, score, label, text (cut), the entities it names and up to 5 chunk ids."""
    t, _ = _clip(h["text"], max_text_chars)
    item: dict[str, Any] = {"r": rank, "k": h["kind"], "id": h["id"], "l": h["layer"],
                            "s": round(h["score"], 4), "lab": hit_label(model, h), "t": t}
    meta = h["metadata"]
    if h["kind"] == "relation":
        item["ents"] = [x for x in h["id"].split("\u241f") if x in model.entities]
    elif h["kind"] == "path":
        found = []
        for key in ("entities", "nodes", "key_entities", "anchors"):
            found += known_ids(meta.get(key), model.entities)
        item["ents"] = list(dict.fromkeys(found))[:20]
    elif h["kind"] == "community" and h["id"] not in model.comm:
        item["ents"] = known_ids(meta.get("members"), model.entities)[:20]
    item["ch"] = h["chunk_ids"][:5]
    return item


def _chunk_texts(
    state: Any, hit_chunks: list[str], want_chunks: list[str], max_chunks: int, max_chunk_chars: int
) -> tuple[dict[str, Any], dict[str, str]]:
    """Texts (cut) of the chunk hits, then of the entities' chunks up to ``max_chunks`` in
    all, and the titles of their documents."""
    chunks_out: dict[str, Any] = {}
    docs_out: dict[str, str] = {}
    for cid in list(dict.fromkeys(hit_chunks + want_chunks)):
        if len(chunks_out) >= max_chunks and cid not in hit_chunks:
            continue
        r = state.chunk_row.get(cid)
        if r is None:
            continue
        ch = state.chunks[r]
        t, cut = _clip(ch.text, max_chunk_chars)
        chunks_out[cid] = {"d": ch.document_id, "t": t, **({"m": cut} if cut else {})}
        if ch.document_id not in docs_out:
            doc = state.documents.get(ch.document_id)
            title = doc.metadata.get("title") if doc is not None else None
            docs_out[ch.document_id] = _clip(title or ch.document_id, 200)[0]
    return chunks_out, docs_out


TYPE_COLOURS: dict[str, str] = {
    "person": "#d62728", "organization": "#1f77b4", "place": "#2ca02c", "date": "#8c564b",
    "work": "#9467bd", "event": "#ff7f0e", "product": "#e377c2", "law": "#7f7f7f",
    "group": "#bcbd22", "facility": "#17becf", "language": "#aec7e8", "concept": "#c5b0d5",
}
"""Entity type → colour of its dot and legend swatch in the explorer (the types of
:data:`graphstrata.nlp.ENTITY_TYPES` and ``concept``; matplotlib's tab10/tab20 colours)."""


def type_colours(types: Any) -> dict[str, str]:
    """``{type: "#rrggbb"}`` for the distinct non-empty entity types in ``types`` (an iterable
    of str), sorted by type: :data:`TYPE_COLOURS`' colour, or for another type (an LLM's) one
    picked from its name's hash, the same in every file."""
    import hashlib

    out = {}
    for t in sorted({str(t) for t in types if t}):
        colour = TYPE_COLOURS.get(t.lower())
        if colour is None:
            h = int(hashlib.sha256(t.encode("utf-8")).hexdigest()[:6], 16)
            colour = "#%02x%02x%02x" % (64 + (h >> 16) % 160, 64 + (h >> 8 & 255) % 160, 64 + (h & 255) % 160)
        out[t] = colour
    return out


def _html_data(
    model: HierarchyModel,
    hits: QueryMarks | None,
    query: str | None,
    method: str | None,
    *,
    max_communities: int,
    max_entities_per_community: int,
    max_entities: int,
    max_chunks_per_entity: int,
    max_chunks: int,
    max_chunk_chars: int,
    max_text_chars: int,
) -> dict[str, Any]:
    """The JSON the page reads (keys kept short: it is most of the file)."""
    state = model.state
    mark = hits.mark if hits else (lambda _x: 0)
    included = _included_communities(model, hits, max_communities)
    inc = set(included)
    n_l1 = sum(1 for c in included if model.layer_of(c) == 1) or 1
    per_comm = min(max_entities_per_community, max(1, max_entities // n_l1))
    nodes: dict[str, Any] = {}
    ent_order: list[str] = []
    for cid in included:
        cap = per_comm if not (cid == UNCLUSTERED and model.n_layers == 0) else max_entities
        nodes[cid] = _community_node(model, cid, inc, mark, cap, max_text_chars)
        ent_order += nodes[cid].get("e", [])
    adj = state.kg.adjacency()
    ents_out: dict[str, Any] = {}
    want_chunks: list[str] = []
    for eid in ent_order:
        ents_out[eid] = rec = _entity_record(model, eid, adj, max_text_chars, max_chunks_per_entity)
        want_chunks += rec["c"]
    hit_items = [_hit_item(model, rank, h, max_text_chars)
                 for rank, h in enumerate(hits.items if hits else (), start=1)]
    hit_chunks = [h["id"] for h in (hits.items if hits else ()) if h["kind"] == "chunk"]
    chunks_out, docs_out = _chunk_texts(state, hit_chunks, want_chunks, max_chunks, max_chunk_chars)
    st = state.stats()
    data: dict[str, Any] = {
        "v": 1,
        "meta": {
            **{k: st[k] for k in ("documents", "chunks", "entities", "relations")},
            "layers": model.layer_sizes,
            "unclustered": model.unclustered,
            "caps": {
                "max_communities": max_communities,
                "max_entities_per_community": per_comm,
                "max_entities": max_entities,
                "max_chunks_per_entity": max_chunks_per_entity,
                "max_chunks": max_chunks,
                "max_chunk_chars": max_chunk_chars,
                "max_text_chars": max_text_chars,
            },
            "omitted": {
                "communities": len(model.comm) + (1 if model.unclustered else 0) - len(included),
                "roots": sum(1 for r in model.roots if r not in inc),
                "entities": len(model.entities) - len(ents_out),
                "chunk_texts": len(set(want_chunks + hit_chunks)) - len(chunks_out),
            },
        },
        "roots": [r for r in model.roots if r in inc],
        "types": type_colours(rec.get("ty", "") for rec in ents_out.values()),
        "nodes": nodes,
        "ents": ents_out,
        "chunks": chunks_out,
        "docs": docs_out,
        "query": None,
    }
    if hits is not None:
        data["query"] = {
            "q": query or "",
            "method": method or "",
            "hits": hit_items,
            "mark": {k: v for k, v in sorted(hits.marks.items()) if k in nodes or k in ents_out},
            "outside": hits.outside,
        }
    return data


def render_html(
    state_or_gs: Any,
    path: str | Path,
    *,
    query: str | None = None,
    query_hits: Sequence[Any] | None = None,
    method: str | None = None,
    max_communities: int = 2000,
    max_entities_per_community: int = 40,
    max_entities: int = 5000,
    max_chunks_per_entity: int = 3,
    max_chunks: int = 2000,
    max_chunk_chars: int = 600,
    max_text_chars: int = 400,
    title: str | None = None,
) -> Path:
    """Write one self-contained, interactive HTML page of the community hierarchy.

    The page needs no network: its data is one ``<script type="application/json">`` block
    (escaped so no text from the corpus can end it) and its CSS and JavaScript are inline. It
    shows the index's counts, a clickable sunburst overview of the community layers, a tree
    that expands from the top layer down to sub-communities and to the entities of layer-1
    communities, and a detail panel: a community's title, summary and findings, or an
    entity's description, neighbours and source chunks (truncated). With a query, retrieved
    items carry a "#rank" badge on their own layer, the communities above them a "contains"
    mark, and a panel lists every hit; clicking a hit opens its place in the tree.

    Size caps keep the file bounded for big indexes (what is left out is counted in "N more"
    notes in the page; retrieved items are always included). Worst case roughly
    ``max_communities * (max_text_chars + 200) + max_entities * (max_text_chars + 400) +
    max_chunks * (max_chunk_chars + 100)`` bytes, a few MB with the defaults.

    Args:
        state_or_gs: a :class:`~graphstrata.GraphStrata` or an :class:`EngineState`.
        path: the ``.html`` / ``.htm`` file to write (UTF-8; its directory must exist).
        query: the query text shown in the page; with a ``GraphStrata`` and no
            ``query_hits`` the hits are retrieved here with ``method``.
        query_hits: hits of the query (``Hit`` objects or ``Hit.to_dict()`` dicts).
        method: retrieval method, shown (and used to retrieve; default ``"archrag"``).
        max_communities: communities in the file (≥ 1), chosen top layer first, biggest
            first; the rest become "N more sub-communities" notes.
        max_entities_per_community: entities listed under one layer-1 community (≥ 1), most
            connected first; lowered to ``max_entities // layer-1 communities`` when that is
            smaller (at least 1).
        max_entities: entities in the file overall (≥ 1).
        max_chunks_per_entity: source chunks listed per entity (≥ 0).
        max_chunks: chunks whose text is in the file (≥ 0); chunk hits always are.
        max_chunk_chars: characters kept of each chunk's text (≥ 20).
        max_text_chars: characters kept of each description, summary, finding and hit
            text (≥ 20).
        title: the page title (default "graphstrata — community hierarchy").

    Returns:
        The path written.

    Raises:
        ValueError: not a GraphStrata/EngineState; a path that is not ``.html``/``.htm``, is a
            directory or lies in a missing directory; an index without entities; a cap out of
            range; malformed ``query_hits``; ``query`` without hits on an ``EngineState``.
    """
    state, engine = state_of(state_or_gs)
    out = out_path(path, (".html", ".htm"), "HTML")
    caps = _checked_caps(
        max_communities=max_communities, max_entities_per_community=max_entities_per_community,
        max_entities=max_entities, max_chunks_per_entity=max_chunks_per_entity, max_chunks=max_chunks,
        max_chunk_chars=max_chunk_chars, max_text_chars=max_text_chars,
    )
    if title is not None and not isinstance(title, str):
        raise ValueError(f"title must be a str, got {type(title).__name__}")
    model = HierarchyModel(state)
    hits = query_marks(model, hits_for(engine, query, query_hits, method))
    data = _html_data(model, hits, query, method, **caps)
    out.write_text(_page(title or "graphstrata — community hierarchy", data), encoding="utf-8", errors="replace")
    return out


#: the least value of each :func:`render_html` cap
_CAP_MINIMA = {
    "max_communities": 1,
    "max_entities_per_community": 1,
    "max_entities": 1,
    "max_chunks_per_entity": 0,
    "max_chunks": 0,
    "max_chunk_chars": 20,
    "max_text_chars": 20,
}


def _checked_caps(**caps: Any) -> dict[str, int]:
    """The caps of :func:`render_html` checked against :data:`_CAP_MINIMA`.

    Raises:
        ValueError: a cap that is not an int or is below its minimum (named).
    """
    return {name: count_arg(value, name, _CAP_MINIMA[name]) for name, value in caps.items()}


def _page(title: str, data: dict[str, Any]) -> str:
    """The page: :data:`_PAGE` with its title, CSS, JavaScript and data filled in."""
    return (
        _PAGE.replace("__TITLE__", _html.escape(title))
        .replace("__CSS__", _CSS)
        .replace("__JS__", _JS)
        .replace("__DATA__", _json_for_script(data))
    )


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>__TITLE__</title>
<style>__CSS__</style>
</head>
<body>
<header>
  <h1>__TITLE__</h1>
  <div id="counts"></div>
  <input id="search" type="search" placeholder="Find a community or entity…" autocomplete="off">
  <ul id="found" hidden></ul>
</header>
<main>
  <section id="left">
    <svg id="sun" viewBox="0 0 360 360" role="img" aria-label="sunburst of the community layers"></svg>
    <div id="ringnote" class="note"></div>
    <div id="query" hidden></div>
  </section>
  <section id="treebox">
    <div class="bar"><b>Hierarchy</b>
      <button id="expand-hits" type="button" hidden>Show retrieved</button>
      <button id="collapse" type="button">Collapse all</button></div>
    <div id="legend" class="legend" hidden></div>
    <ul id="tree" class="tree"></ul>
  </section>
  <section id="detail"><p class="note">Click a community to expand it, an entity to read its
  description and source chunks.</p></section>
</main>
<script type="application/json" id="gs-data">__DATA__</script>
<script>__JS__</script>
</body>
</html>
"""

_CSS = r"""
:root { --fg:#1d1f23; --mut:#666b73; --line:#e3e5e8; --bg:#f7f8fa; --hit:#b3261e; --ctx:#f1c8c4; }
* { box-sizing: border-box; }
body { margin:0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color:var(--fg); background:var(--bg); }
header { display:flex; align-items:center; gap:18px; padding:10px 18px; background:#fff;
  border-bottom:1px solid var(--line); position:relative; }
header h1 { font-size:17px; margin:0; white-space:nowrap; }
#counts { color:var(--mut); font-size:13px; flex:1; }
#search { width:280px; padding:6px 10px; border:1px solid #cfd3d8; border-radius:6px; font:inherit; }
#found { position:absolute; right:18px; top:44px; z-index:5; width:360px; max-height:420px; overflow:auto;
  margin:0; padding:4px 0; list-style:none; background:#fff; border:1px solid #cfd3d8; border-radius:6px;
  box-shadow:0 6px 18px rgba(0,0,0,.12); }
#found li { padding:4px 12px; cursor:pointer; }
#found li:hover { background:#eef3fb; }
main { display:grid; grid-template-columns: 380px minmax(340px,1fr) minmax(340px,1fr); gap:14px;
  padding:14px 18px; height: calc(100vh - 58px); }
section { background:#fff; border:1px solid var(--line); border-radius:8px; overflow:auto; min-height:0; }
#left { padding:10px; }
#sun { width:100%; height:auto; display:block; }
#sun path { stroke:#fff; stroke-width:.6; cursor:pointer; }
#sun path:hover { opacity:.8; }
#sun path.hit { stroke:#1b1b1b; stroke-width:1.6; }
#sun text { font-size:9px; fill:#555; pointer-events:none; }
#sun text.big { font-size:17px; font-weight:700; fill:#333; }
.note { color:var(--mut); font-size:12.5px; margin:6px 4px; }
#treebox { padding:0 0 10px; }
.bar { position:sticky; top:0; background:#fff; padding:9px 12px; border-bottom:1px solid var(--line);
  display:flex; gap:8px; align-items:center; z-index:2; }
.bar b { flex:1; }
button { font:inherit; font-size:12.5px; padding:3px 10px; border:1px solid #cfd3d8; border-radius:5px;
  background:#fff; cursor:pointer; }
button:hover { background:#eef3fb; }
ul.tree, ul.tree ul { list-style:none; margin:0; padding:0; }
ul.tree ul { padding-left:18px; border-left:1px dotted #cfd3d8; margin-left:14px; }
.row { display:flex; align-items:baseline; gap:7px; padding:3px 10px; cursor:pointer; border-radius:5px;
  scroll-margin-top:46px; }
.row:hover { background:#f0f4fa; }
.tog { width:14px; color:var(--mut); flex:none; font-size:11px; }
.badge { font-size:11px; padding:0 5px; border-radius:4px; color:#fff; flex:none; }
.ttl { flex:1; min-width:0; overflow:hidden; text-overflow:ellipsis; white-space:nowrap; }
.cnt { color:var(--mut); font-size:12px; flex:none; }
.ent .ttl { color:#23395d; }
.dot { width:8px; height:8px; border-radius:50%; flex:none; align-self:center; }
.legend { display:flex; flex-wrap:wrap; gap:4px 12px; font-size:12px; margin:4px 0 6px; }
.legend .lg { display:inline-flex; gap:4px; align-items:center; }
.legend[hidden] { display:none; }
.rank { background:var(--hit); color:#fff; font-size:11px; padding:0 5px; border-radius:8px; flex:none; }
.ctx { border:1px solid var(--hit); color:var(--hit); font-size:11px; padding:0 5px; border-radius:8px; flex:none; }
.row.hit .ttl { font-weight:600; }
.row.ctxrow { background: #fdf3f2; }
.row.sel, .row.sel.ctxrow { background:#dfe9f8; box-shadow: inset 3px 0 0 #1d5bbf; }
li.more { color:var(--mut); font-style:italic; font-size:12.5px; padding:2px 10px 2px 31px; }
#detail { padding:14px 18px; }
#detail h2 { font-size:17px; margin:0 0 4px; }
#detail h3 { font-size:13px; margin:16px 0 6px; color:var(--mut); text-transform:uppercase; letter-spacing:.04em; }
.meta { color:var(--mut); font-size:12.5px; }
.crumbs { font-size:12.5px; margin:6px 0; }
.crumbs a, a.lnk { color:#1d5bbf; cursor:pointer; text-decoration:none; }
.crumbs a:hover, a.lnk:hover { text-decoration:underline; }
.chunk { border:1px solid var(--line); border-radius:6px; padding:8px 10px; margin:8px 0; background:#fbfbfc; }
.chunk .src { font-size:12px; color:var(--mut); margin-bottom:4px; }
.chips a { display:inline-block; margin:2px 4px 2px 0; padding:1px 8px; border-radius:10px;
  background:#eef3fb; font-size:12.5px; }
.chips span { display:inline-block; margin:2px 4px 2px 0; padding:1px 8px; border-radius:10px;
  background:#f1f1f1; font-size:12.5px; color:var(--mut); }
#query { margin-top:10px; border-top:1px solid var(--line); padding-top:8px; }
#query .q { font-weight:600; margin:2px 4px 6px; }
#query h4 { margin:10px 4px 3px; font-size:12px; color:var(--mut); text-transform:uppercase; letter-spacing:.04em; }
#query ol { margin:0; padding:0; list-style:none; }
#query li { padding:3px 6px; border-radius:5px; cursor:pointer; display:flex; gap:6px; align-items:baseline; }
#query li:hover { background:#f0f4fa; }
#query li .ttl { white-space:normal; }
.sc { color:var(--mut); font-size:11.5px; flex:none; }
"""

_JS = r"""
(function () {
'use strict';
// every map is keyed by ids and names from the corpus: objects without a prototype, so that
// "constructor", "toString" or "__proto__" are keys like any other (issue 30)
function dict() { return Object.create(null); }
var D = JSON.parse(document.getElementById('gs-data').textContent, function (k, v) {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
  var o = dict();
  Object.keys(v).forEach(function (x) { o[x] = v[x]; });
  return o;
});
var N = D.nodes, E = D.ents, C = D.chunks, DOCS = D.docs, Q = D.query, M = D.meta;
var MARK = Q ? Q.mark : dict();
var RANK = dict();
if (Q) Q.hits.forEach(function (h) {
  var ids = [h.id].concat(h.ents || []);
  ids.forEach(function (x) { if (!(x in RANK) && (x in N || x in E)) RANK[x] = h.r; });
});
var LI = dict(), selected = null;
var SVGNS = document.getElementById('sun').namespaceURI;

function el(tag, cls, text) {
  var e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function plural(n, one, many) { return n + ' ' + (n === 1 ? one : (many || one + 's')); }
function fmt(n) { return Number(n).toLocaleString('en-US'); }

// ---- colours: one hue per root, lighter by depth (as in the PNG)
var ROOT = dict();
D.roots.forEach(function (r, i) {
  var stack = [r];
  while (stack.length) {
    var x = stack.pop(); ROOT[x] = i;
    var n = N[x]; if (n) { (n.k || []).forEach(function (k) { stack.push(k); }); (n.e || []).forEach(function (k) { ROOT[k] = i; }); }
  }
});
var TOP = M.layers.length || 1;
function colour(id, layer) {
  if (id === '~unclustered' || !(id in ROOT)) return 'hsl(0,0%,72%)';
  var h = ((0.58 + ROOT[id] * 0.618034) % 1) * 360;
  var depth = layer ? TOP - layer : TOP;
  return 'hsl(' + h.toFixed(1) + ',62%,' + (48 + 30 * depth / Math.max(TOP, 1)).toFixed(1) + '%)';
}

// ---- entity types: the dots' colours, and a legend under the hierarchy
var TYPES = Object.keys(D.types || dict());
if (TYPES.length) {
  var legend = document.getElementById('legend');
  TYPES.forEach(function (t) {
    var item = el('span', 'lg'), sw = el('span', 'dot');
    sw.style.background = D.types[t];
    item.append(sw, el('span', '', t));
    legend.appendChild(item);
  });
  legend.hidden = false;
}

// ---- header
var counts = [fmt(M.documents) + ' documents', fmt(M.chunks) + ' chunks', fmt(M.entities) + ' entities',
  fmt(M.relations) + ' relations'];
var layers = M.layers.map(function (n, i) { return 'L' + (i + 1) + ' ' + fmt(n); }).reverse();
counts.push(layers.length ? plural(layers.length, 'layer') + ' (' + layers.join(', ') + ')' : 'no community layers');
if (M.unclustered) counts.push(fmt(M.unclustered) + ' entities in no community');
document.getElementById('counts').textContent = counts.join(' · ');

// ---- tree
function countText(n) {
  var parts = [];
  if (n.k && n.k.length) parts.push(plural(n.k.length + (n.mc || 0), 'sub-community', 'sub-communities'));
  parts.push(plural(n.n, 'entity', 'entities'));
  return parts.join(' · ');
}
function markBadges(row, id) {
  if (RANK[id] !== undefined && MARK[id] === 2) { row.classList.add('hit'); row.appendChild(el('span', 'rank', '#' + RANK[id])); }
  else if (MARK[id] === 2) { row.classList.add('hit'); row.appendChild(el('span', 'rank', 'hit')); }
  else if (MARK[id] === 1) {
    row.classList.add('ctxrow');
    row.appendChild(el('span', 'ctx', id in N ? 'contains hit' : 'in a hit'));
  }
}
function commLi(id) {
  var n = N[id], li = el('li', 'node'), row = el('div', 'row com');
  li.dataset.id = id; row.dataset.id = id;
  var tog = el('span', 'tog', '▸');
  var badge = el('span', 'badge', id === '~unclustered' ? '—' : 'L' + n.l);
  badge.style.background = colour(id, n.l);
  row.append(tog, badge, el('span', 'ttl', n.t), el('span', 'cnt', countText(n)));
  row.title = n.t;
  markBadges(row, id);
  row.addEventListener('click', function () { toggle(id); showCommunity(id); });
  li.appendChild(row);
  LI[id] = li;
  return li;
}
function entLi(id) {
  var e = E[id], li = el('li', 'leaf'), row = el('div', 'row ent');
  li.dataset.id = id; row.dataset.id = id;
  var dot = el('span', 'dot'); dot.style.background = (e.ty && D.types[e.ty]) || colour(id, 0);
  if (e.ty) dot.title = e.ty;
  row.append(el('span', 'tog', ''), dot, el('span', 'ttl', e.n), el('span', 'cnt', (e.ty ? e.ty + ' · ' : '') + plural(e.g, 'link')));
  markBadges(row, id);
  row.addEventListener('click', function () { showEntity(id); });
  li.appendChild(row);
  LI[id] = li;
  return li;
}
function toggle(id, open) {
  var li = LI[id]; if (!li) return;
  var n = N[id], ul = li.querySelector(':scope > ul');
  var want = open === undefined ? !ul || ul.hidden : open;
  if (want && !ul) {
    ul = el('ul');
    (n.k || []).forEach(function (k) { ul.appendChild(commLi(k)); });
    if (n.mc) ul.appendChild(el('li', 'more', fmt(n.mc) + ' more sub-communities (' + fmt(n.mce) + ' entities) not in this file (cap: ' + M.caps.max_communities + ' communities)'));
    (n.e || []).forEach(function (k) { ul.appendChild(entLi(k)); });
    if (n.me) ul.appendChild(el('li', 'more', fmt(n.me) + ' more entities not listed (cap: ' + M.caps.max_entities_per_community + ' per community)'));
    li.appendChild(ul);
  }
  if (ul) ul.hidden = !want;
  li.querySelector(':scope > .row > .tog').textContent = want ? '▾' : '▸';
}
var tree = document.getElementById('tree');
D.roots.forEach(function (r) { tree.appendChild(commLi(r)); });
if (M.omitted.roots > 0) {
  tree.appendChild(el('li', 'more', fmt(M.omitted.roots) + ' more top-layer communities not in this file (cap: ' +
    M.caps.max_communities + ' communities)'));
}

function ancestors(id) {
  var out = [], x = (N[id] || E[id] || {}).p;
  while (x) { out.unshift(x); x = (N[x] || {}).p; }
  return out;
}
function select(id) {
  if (selected && LI[selected]) LI[selected].querySelector(':scope > .row').classList.remove('sel');
  selected = id;
  if (LI[id]) LI[id].querySelector(':scope > .row').classList.add('sel');
}
function reveal(id, show) {
  ancestors(id).forEach(function (a) { toggle(a, true); });
  if (!LI[id]) return;
  select(id);
  LI[id].querySelector(':scope > .row').scrollIntoView({block: 'nearest'});
  if (show !== false) { if (id in N) showCommunity(id); else showEntity(id); }
}
document.getElementById('collapse').addEventListener('click', function () {
  Object.keys(LI).forEach(function (id) { if (id in N) toggle(id, false); });
});

// ---- detail panel
var detail = document.getElementById('detail');
function link(text, id) {
  var a = el('a', 'lnk', text);
  a.addEventListener('click', function (ev) { ev.stopPropagation(); reveal(id); });
  return a;
}
function crumbs(id) {
  var div = el('div', 'crumbs');
  var path = ancestors(id);
  if (!path.length) return div;
  path.forEach(function (a, i) {
    if (i) div.appendChild(document.createTextNode(' › '));
    div.appendChild(link((N[a].l ? 'L' + N[a].l + ' ' : '') + short(N[a].t, 48), a));
  });
  return div;
}
function short(t, n) { t = String(t); return t.length > n ? t.slice(0, n - 1) + '…' : t; }
function para(text, more, unit) {
  var p = el('p', null, text || '(none)');
  if (more) p.appendChild(el('span', 'meta', ' … (' + fmt(more) + ' more ' + unit + ')'));
  return p;
}
function hitLine(id) {
  if (MARK[id] === 2) return el('p', 'meta', 'Retrieved by the query' + (RANK[id] ? ' (hit #' + RANK[id] + ')' : '') + '.');
  if (MARK[id] === 1) return el('p', 'meta', id in N ? 'Contains something the query retrieved.' :
    'Mentioned in a chunk the query retrieved.');
  return null;
}
function openDetail(id, title, meta) {
  select(id);
  detail.replaceChildren();
  detail.appendChild(el('h2', null, title));
  detail.appendChild(el('div', 'meta', meta));
  detail.appendChild(crumbs(id));
  var h = hitLine(id); if (h) detail.appendChild(h);
}
function showCommunity(id) {
  var n = N[id];
  var meta = id === '~unclustered' ? 'entities that no layer-1 community claims' :
    'layer ' + n.l + ' community ' + id + ' · ' + countText(n) + (n.nc ? ' · ' + plural(n.nc, 'source chunk') : '');
  if (n.r !== undefined) meta += ' · rating ' + n.r;
  openDetail(id, n.t, meta);
  if (n.s) { detail.appendChild(el('h3', null, 'Summary')); detail.appendChild(para(n.s)); }
  if (n.f && n.f.length) {
    detail.appendChild(el('h3', null, 'Findings'));
    var ul = el('ul'); n.f.forEach(function (f) { ul.appendChild(el('li', null, f)); }); detail.appendChild(ul);
  }
  if (n.k && n.k.length) {
    detail.appendChild(el('h3', null, 'Sub-communities'));
    var chips = el('div', 'chips');
    n.k.forEach(function (k) { chips.appendChild(link(short(N[k].t, 40) + ' (' + N[k].n + ')', k)); });
    detail.appendChild(chips);
  }
  if (n.e && n.e.length) {
    detail.appendChild(el('h3', null, 'Entities'));
    var chips2 = el('div', 'chips');
    n.e.forEach(function (k) { chips2.appendChild(link(E[k].n, k)); });
    if (n.me) chips2.appendChild(el('span', null, '+' + fmt(n.me) + ' more'));
    detail.appendChild(chips2);
  }
}
function chunkCard(cid) {
  var div = el('div', 'chunk'), c = C[cid];
  if (!c) { div.appendChild(el('div', 'src', cid + ' (text not in this file: cap of ' + M.caps.max_chunks + ' chunks)')); return div; }
  div.appendChild(el('div', 'src', (DOCS[c.d] || c.d) + ' — ' + cid + (MARK[cid] ? '' : '')));
  div.appendChild(para(c.t, c.m, 'characters'));
  return div;
}
function showEntity(id) {
  var e = E[id];
  openDetail(id, e.n, 'entity' + (e.ty ? ' · ' + e.ty : '') + ' · seen ' + e.w + '× · ' + plural(e.g, 'relation'));
  detail.appendChild(el('h3', null, 'Description'));
  detail.appendChild(para(e.d, e.dm, 'characters'));
  if (e.nb && e.nb.length) {
    detail.appendChild(el('h3', null, 'Strongest relations'));
    var chips = el('div', 'chips');
    e.nb.forEach(function (p) { chips.appendChild(p[0] in E ? link(p[1], p[0]) : el('span', null, p[1])); });
    detail.appendChild(chips);
  }
  detail.appendChild(el('h3', null, 'Source chunks'));
  e.c.forEach(function (cid) { detail.appendChild(chunkCard(cid)); });
  if (e.cm) detail.appendChild(el('p', 'meta', fmt(e.cm) + ' more chunks not listed (cap: ' + M.caps.max_chunks_per_entity + ' per entity)'));
}
function showHit(h) {
  if ((h.k === 'community' || h.k === 'entity') && (h.id in N || h.id in E)) { reveal(h.id); return; }
  detail.replaceChildren();
  detail.appendChild(el('h2', null, h.lab));
  detail.appendChild(el('div', 'meta', h.k + ' hit #' + h.r + (h.l !== null && h.l !== undefined ? ' · layer ' + h.l : '') + ' · score ' + h.s));
  if (h.ents && h.ents.length) {
    detail.appendChild(el('h3', null, 'Entities'));
    var chips = el('div', 'chips');
    h.ents.forEach(function (x) { chips.appendChild(x in E ? link(E[x].n, x) : el('span', null, x)); });
    detail.appendChild(chips);
  }
  if (h.k === 'chunk') { detail.appendChild(el('h3', null, 'Text')); detail.appendChild(chunkCard(h.id)); }
  else {
    detail.appendChild(el('h3', null, 'Text')); detail.appendChild(para(h.t));
    if (h.ch && h.ch.length) { detail.appendChild(el('h3', null, 'Source chunks')); h.ch.forEach(function (c) { detail.appendChild(chunkCard(c)); }); }
  }
}

// ---- sunburst overview (communities only; angle = entities below)
var sun = document.getElementById('sun'), R0 = 34, R1 = 176, CX = 180, CY = 180;
var ringW = (R1 - R0) / TOP;
function svg(tag, attrs) {
  var e = document.createElementNS(SVGNS, tag);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}
function arc(r0, r1, a0, a1) {
  if (a1 - a0 > 2 * Math.PI - 1e-6) a1 = a0 + 2 * Math.PI - 1e-4;
  var large = a1 - a0 > Math.PI ? 1 : 0;
  function p(r, a) { return (CX + r * Math.sin(a)).toFixed(2) + ',' + (CY - r * Math.cos(a)).toFixed(2); }
  return 'M' + p(r1, a0) + 'A' + r1 + ',' + r1 + ' 0 ' + large + ' 1 ' + p(r1, a1) + 'L' + p(r0, a1) +
    'A' + r0 + ',' + r0 + ' 0 ' + large + ' 0 ' + p(r0, a0) + 'Z';
}
function drawSun(ids, a0, a1, units) {
  var total = 0;
  ids.forEach(function (id) { total += Math.max(N[id].n, 0); });
  if (total <= 0) return;
  var a = a0, span = (a1 - a0) * Math.min(1, total / Math.max(units, 1e-9));
  ids.forEach(function (id) {
    var n = N[id], s = span * Math.max(n.n, 0) / total;
    var ring = TOP - n.l, r0 = R0 + ring * ringW, r1 = R0 + (ring + 1) * ringW;
    if (s > 0) {
      var path = svg('path', {d: arc(r0, r1, a, a + s), fill: colour(id, n.l)});
      path.dataset.id = id;
      if (Q && !MARK[id]) path.setAttribute('fill-opacity', '0.22');
      if (MARK[id] === 2) path.classList.add('hit');
      var t = svg('title', {}); t.textContent = 'L' + n.l + ' · ' + n.t + ' · ' + plural(n.n, 'entity', 'entities');
      path.appendChild(t);
      path.addEventListener('click', function () { reveal(id); });
      sun.appendChild(path);
      if (n.k && n.k.length) drawSun(n.k, a, a + s, n.n);
    }
    a += s;
  });
}
drawSun(D.roots, 0, 2 * Math.PI, 0);
var nComm = M.layers.reduce(function (a, b) { return a + b; }, 0);
var centre = svg('text', {x: CX, y: CY + 2, 'text-anchor': 'middle', 'class': 'big'});
centre.textContent = fmt(nComm);
var centre2 = svg('text', {x: CX, y: CY + 15, 'text-anchor': 'middle'});
centre2.textContent = nComm === 1 ? 'community' : 'communities';
sun.append(centre, centre2);
var rings = [];
for (var l = TOP; l >= 1; l--) rings.push('layer ' + l);
document.getElementById('ringnote').textContent = 'Rings from the centre: ' + rings.join(', ') +
  '. Angle = entities below. Click a wedge to open it.';

// ---- query panel
if (Q) {
  var qp = document.getElementById('query');
  qp.hidden = false;
  qp.appendChild(el('div', 'meta', 'Query' + (Q.method ? ' (' + Q.method + ')' : '')));
  qp.appendChild(el('div', 'q', Q.q || '(hits given without a query)'));
  if (Q.outside) qp.appendChild(el('div', 'note', Q.outside + ' hits name nothing in this index.'));
  var groups = [], byKey = dict();
  Q.hits.forEach(function (h) {
    var key = h.k === 'community' ? 'Layer ' + h.l + ' communities' : h.k === 'entity' ? 'Entities' :
      h.k === 'relation' ? 'Relations' : h.k === 'chunk' ? 'Chunks' : h.k === 'path' ? 'Paths' : 'Other';
    if (!(key in byKey)) { byKey[key] = []; groups.push(key); }
    byKey[key].push(h);
  });
  groups.sort(function (a, b) {
    function w(k) { var m = /^Layer (\d+)/.exec(k); return m ? -Number(m[1]) : { Entities: 1, Relations: 2, Paths: 3, Chunks: 4, Other: 5 }[k]; }
    return w(a) - w(b);
  });
  groups.forEach(function (g) {
    qp.appendChild(el('h4', null, g + ' (' + byKey[g].length + ')'));
    var ol = el('ol');
    byKey[g].forEach(function (h) {
      var li = el('li');
      li.dataset.hit = h.r;
      li.append(el('span', 'rank', '#' + h.r), el('span', 'ttl', short(h.lab, 90)), el('span', 'sc', h.s.toFixed(3)));
      li.addEventListener('click', function () { showHit(h); });
      ol.appendChild(li);
    });
    qp.appendChild(ol);
  });
  var eh = document.getElementById('expand-hits');
  eh.hidden = false;
  eh.addEventListener('click', function () {
    Object.keys(MARK).forEach(function (id) { if (MARK[id] === 2) ancestors(id).forEach(function (a) { toggle(a, true); }); });
  });
  // open the retrieved communities' ancestors, so each layer's hits are in view
  Object.keys(MARK).forEach(function (id) { if (MARK[id] === 2 && id in N) ancestors(id).forEach(function (a) { toggle(a, true); }); });
}

// ---- search
var search = document.getElementById('search'), found = document.getElementById('found');
var timer = null;
search.addEventListener('input', function () {
  clearTimeout(timer);
  timer = setTimeout(function () {
    var q = search.value.trim().toLowerCase();
    found.replaceChildren();
    if (q.length < 2) { found.hidden = true; return; }
    var out = [];
    Object.keys(N).forEach(function (id) { if (out.length < 40 && N[id].t.toLowerCase().indexOf(q) >= 0) out.push([id, 'L' + N[id].l + ' ' + N[id].t]); });
    Object.keys(E).forEach(function (id) { if (out.length < 60 && E[id].n.toLowerCase().indexOf(q) >= 0) out.push([id, E[id].n]); });
    out.forEach(function (p) {
      var li = el('li', null, short(p[1], 70));
      li.addEventListener('click', function () { found.hidden = true; reveal(p[0]); });
      found.appendChild(li);
    });
    if (!out.length) found.appendChild(el('li', 'meta', 'no match'));
    found.hidden = false;
  }, 120);
});
document.addEventListener('click', function (ev) { if (ev.target !== search && !found.contains(ev.target)) found.hidden = true; });
window.graphstrataViz = { reveal: reveal, toggle: toggle, data: D };
})();
"""
