"""Why a hit came back (issue 18): small, JSON-serialisable explanations per hit.

A method computes them only when it runs with the universal ``explain=True`` option
(:data:`~graphstrata.methods.base.COMMON_DEFAULTS`), and only for what it returns: the ``k``
chunk rows (:attr:`~graphstrata.methods.base.Retrieval.explain`, ``{row: explanation}``) and
its context hits (:attr:`~graphstrata.types.Hit.explain`). The ranking is computed first and
never read back, so rows and scores are the same with the option on or off.

An explanation is a plain dict (str keys; str, bool, int, float, list and dict values). Every
key but ``reason`` is optional: a key that does not apply to the method or the hit is absent.

``reason`` (str)
    One line for a human, built from the fields below (:func:`reason`).
``method`` (str)
    The method that returned the hit.
``layer`` (int)
    Context hits: hierarchy layer of the hit (0 entities / relations, ``i ≥ 1`` communities or
    HiRAG summary entities).
``similarity`` (float)
    Context hits: cosine in [-1, 1] between the query (or its keywords') vector and the hit's
    vector (HiRAG communities: their best member's; relations: the mean of their endpoints').
``seeds`` (dict)
    The query signals that seeded the hit, each with its value:
    ``dense`` cosine in [-1, 1] of the query vector to the chunk vector; ``bm25`` the chunk's
    raw Okapi BM25 score for the query (≥ 0, unbounded); ``hybrid`` the fused
    ``alpha·minmax(dense) + (1 − alpha)·minmax(bm25)`` over the query's candidates, in [0, 1]
    (ArchRAG: the best over the question and its before/after clauses); ``ppr_reset`` the
    share in [0, 1] of the personalised-PageRank reset (restart) mass put on this node;
    ``named`` ``True`` when the question names the chunk's document (its title or its day);
    ``entities`` the seed entities touching the hit — ``[{"id", "name", "value"}]`` with
    ``value`` the entity's share of the PageRank reset mass (AGRAG anchors) or 1.0 for an
    exact keyword match (LightRAG); ``keywords`` the query's LightRAG keywords
    ``{"low_level": [...], "high_level": [...], "source": "offline" | "llm" | "function"}``;
    ``fact_score`` an AGRAG fact's ``MS(q, f)`` (a weighted cosine / hybrid mix, ≤ 1).
``matched_terms`` (list of str)
    Query tokens (:func:`~graphstrata.bm25.bm25_tokenize`) that the chunk's BM25 text holds,
    in query order (a word's CamelCase or letter/digit parts only when the word is absent).
``matched_entities`` (list of dict)
    Query-matched entities touching the hit (mentioning the chunk; members of the community;
    endpoints of the relation), best first, at most :data:`MAX_LISTED`:
    ``{"id", "name"}`` plus, where known, ``similarity`` (cosine in [-1, 1]), ``path``
    (LightRAG: ``"local"`` | ``"global"``) or ``summary: True`` with ``layer`` (a HiRAG
    summary entity, whose id is a HiIndex node id, not a KG entity id).
``matched_relations`` (list of dict)
    LightRAG: retrieved relations whose source chunks include the chunk, ``{"id", "source",
    "target", "path"}`` (entity ids), at most :data:`MAX_LISTED`.
``community_path`` (list of dict)
    Communities from the top layer down to the hit's community (or to the one holding the
    hit's best matched entity): ``{"id", "layer", "title"}`` plus ``similarity`` (cosine)
    where the method retrieved that community for this query. HiRAG's Leiden communities are
    flat: one entry, id ``"hirag:C<n>"``, layer 1.
``ppr_mass`` (float)
    Personalised-PageRank probability in [0, 1] at the hit's node when a PageRank ran (ArchRAG
    passage propagation: over chunks; AGRAG: over entities and passages; each walk's
    masses sum to 1). For an AGRAG path: the mass at its best node.
``linked_from`` (list of dict)
    ArchRAG: the PageRank seed chunks (other than the hit) with a link the walk follows to
    it, largest seed first, at most 3: ``{"chunk_id", "ppr_reset", "via": [entity refs],
    "title": document title, "same_document": bool}`` (the links that apply).
``reasoning_path`` (dict)
    AGRAG: the rendered reasoning path whose subgraph holds the passage (or one of whose facts
    the chunk states); HiRAG: the bridge path, when a bridge triple comes from the chunk.
    ``{"id": path hit id, "entities": [entity refs in path order], "triples": [[s, p, o], ...]}``
    (at most :data:`MAX_TRIPLES` triples; ``truncated``: how many more); AGRAG chunks also get
    ``chunk_triples``, the path's triples whose fact the chunk states.
``facts`` (list of dict)
    AGRAG: anchor facts stated in the chunk, ``{"id", "triple", "fact_score"}``.
``second_hop`` (dict)
    LightRAG / HiRAG: the chunk was reached from the best hybrid chunk through rare shared
    entities: ``{"from": chunk id, "via": [entity refs]}``.
``score_parts`` (dict)
    The terms of the method's chunk score before normalisation, each in score points (they
    add up to ``metadata["raw_score"]``, except ArchRAG with propagation, whose raw score is
    the PageRank score and whose parts are the query score that seeded it): ``hybrid`` and
    the weighted graph evidence (``entity``, ``community``, ``relation``, ``bridge``,
    ``graph``, ``second_hop``, ``ppr``, ``path``).
``on_path`` (bool)
    AGRAG: the passage is one of the reference passages of the MCMI subgraph.
``in_sources`` (bool)
    LightRAG: the chunk is in the Sources section of the context (within its token budget).
``mix`` (dict)
    LightRAG ``mode="mix"``: the chunk's 1-based rank in the two lists merged by turns,
    ``{"vector_rank": n, "graph_rank": m}`` (the dense search; the hybrid mode's chunk
    ranking), a key only where that list holds the chunk. Such a chunk has no
    ``score_parts``: its score is its round in the merge, not a sum of terms.
``path`` (str)
    LightRAG context hits: ``"local"`` or ``"global"``, the path that retrieved the hit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..structures.passages import title_index

if TYPE_CHECKING:  # pragma: no cover
    from ..state import EngineState

MAX_LISTED = 5
"""Most entries of a list field (matched entities, relations, via entities)."""
MAX_TRIPLES = 10
"""Most triples of a ``reasoning_path``."""


# -- records ---------------------------------------------------------------------------------


def entity_ref(state: EngineState, eid: str, **extra: Any) -> dict[str, Any]:
    """``{"id", "name", **extra}`` of KG entity ``eid`` (numbers made plain floats), plus
    ``"aliases"`` (the ids entity resolution merged into it) when it has any."""
    e = state.kg.entities.get(eid)
    out = {"id": eid, "name": e.name if e is not None else eid}
    if e is not None and e.aliases:
        out["aliases"] = list(e.aliases)
    return {**out, **_plain(extra)}


def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in values.items():
        if isinstance(v, (bool, np.bool_)):
            out[k] = bool(v)
        elif isinstance(v, (int, np.integer)):
            out[k] = int(v)
        elif isinstance(v, (float, np.floating)):
            out[k] = float(v)
        else:
            out[k] = v
    return out


def communities_by_id(state: EngineState) -> dict[str, Any]:
    """``{community_id: Community}`` over every layer, cached per index state."""
    return state.derived(
        "explain:communities", lambda: {c.id: c for layer in state.communities for c in layer}
    )


def community_parents(state: EngineState) -> dict[str, str]:
    """``{member id: parent community id}``: entity ids → their layer-1 community, community
    ids of layer ``i`` → their layer-``i + 1`` community (first parent when a member has
    several); cached per index state."""

    def build() -> dict[str, str]:
        out: dict[str, str] = {}
        for layer in state.communities:
            for c in layer:
                for m in c.members:
                    out.setdefault(m, c.id)
        return out

    return state.derived("explain:community_parents", build)


def community_path(
    state: EngineState, start: str, similarities: Mapping[str, float] | None = None
) -> list[dict[str, Any]]:
    """The communities above ``start`` (an entity id or a community id, included when a
    community), top layer first: ``[{"id", "layer", "title", "similarity"?}, ...]``;
    ``similarity`` where ``similarities`` (the retrieved communities' cosines) has the id."""
    by_id = communities_by_id(state)
    parents = community_parents(state)
    chain = [start] if start in by_id else []
    node, seen = start, {start}
    while node in parents and parents[node] not in seen:
        node = parents[node]
        seen.add(node)
        chain.append(node)
    sims = similarities or {}
    out = []
    for cid in reversed(chain):
        c = by_id[cid]
        ref: dict[str, Any] = {"id": cid, "layer": int(c.layer), "title": c.title}
        if cid in sims:
            ref["similarity"] = float(sims[cid])
        out.append(ref)
    return out


def chunk_entity_ids(state: EngineState, row: int) -> list[str]:
    """Entity ids mentioning chunk ``row`` (KG order)."""
    return state.kg.chunk_entities().get(state.chunks[row].id, [])


def matched_in_chunk(
    state: EngineState, row: int, similarities: Mapping[str, float], **extra: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The entities of ``similarities`` that mention chunk ``row``, most similar first (ties:
    id), at most :data:`MAX_LISTED`, as :func:`entity_ref` with ``similarity``; ``extra`` maps
    a field name to ``{entity_id: value}`` added where present."""
    found = [e for e in chunk_entity_ids(state, row) if e in similarities]
    found.sort(key=lambda e: (-float(similarities[e]), e))
    out = []
    for e in found[:MAX_LISTED]:
        fields = {name: values[e] for name, values in extra.items() if e in values}
        out.append(entity_ref(state, e, similarity=float(similarities[e]), **fields))
    return out


def chunk_signals(
    state: EngineState, query: str, qvec: np.ndarray, rows: Sequence[int], bm25: bool = True
) -> dict[int, dict[str, Any]]:
    """Per row: ``{"dense": cosine, "bm25": raw BM25, "terms": [query tokens it holds]}``.

    ``len(rows)`` dot products and, with ``bm25`` (else 0 and no terms), one BM25 scoring of
    the query (as the method's own)."""
    from ..bm25 import bm25_tokenize, lexical_texts

    rows = [int(r) for r in rows]
    if not rows:
        return {}
    cos = state.chunk_index.similarity(qvec, np.asarray(rows, np.int64))
    if not bm25:
        return {r: {"dense": float(c), "bm25": 0.0, "terms": []} for r, c in zip(rows, cos.tolist(), strict=True)}
    from .base import bm25_scores_of

    bm = bm25_scores_of(state, query, np.asarray(rows, np.int64))  # these rows only
    q_terms = list(dict.fromkeys(bm25_tokenize(query)))
    texts = lexical_texts([state.chunks[r] for r in rows], state.documents, state.config.use_titles)
    out = {}
    for r, c, b, text in zip(rows, cos.tolist(), bm.tolist(), texts, strict=True):
        have = set(bm25_tokenize(text))
        terms = [t for t in q_terms if t in have]
        out[r] = {
            "dense": float(c),
            "bm25": float(b),
            # a CamelCase / letter-digit part ("hn" of "Jähn") only when its word is not listed
            "terms": [t for t in terms if not any(t != u and t in u for u in terms)],
        }
    return out


def chunk_base(
    signals: Mapping[str, Any], use: Sequence[str] = ("dense", "bm25"), **seeds: Any
) -> dict[str, Any]:
    """The ``seeds`` / ``matched_terms`` fields of a chunk: the ``use`` signals of
    :func:`chunk_signals` (``matched_terms`` with ``"bm25"``) plus the method's own seed
    values (``None`` values dropped)."""
    s = {k: signals[k] for k in use}
    s.update({k: v for k, v in _plain(seeds).items() if v is not None})
    return {"seeds": s, "matched_terms": list(signals["terms"]) if "bm25" in use else []}


def second_hop(state: EngineState, row: int, seed_rows: Iterable[int], max_df: int) -> dict[str, Any] | None:
    """The bridge of :func:`~graphstrata.methods.base.bridge_evidence` to ``row`` from the
    first of ``seed_rows`` that has one: ``{"from": seed chunk id, "via": [entity refs]}``
    (shared entities of 2 … ``max_df`` chunks, rarest first), or ``None``."""
    kg = state.kg
    mine = set(chunk_entity_ids(state, row))
    for seed in seed_rows:
        if seed == row or state.chunks[seed].document_id == state.chunks[row].document_id:
            continue
        via = [e for e in mine.intersection(chunk_entity_ids(state, seed))
               if 2 <= len(kg.entities[e].chunk_ids) <= max_df]
        if via:
            via.sort(key=lambda e: (len(kg.entities[e].chunk_ids), e))
            return {
                "from": state.chunks[seed].id,
                "via": [entity_ref(state, e) for e in via[:MAX_LISTED]],
            }
    return None


def walk_links(
    state: EngineState,
    row: int,
    seeds: Sequence[tuple[int, float]],
    max_df: int,
    title_weight: float,
    document_weight: float,
    limit: int = 3,
) -> list[dict[str, Any]]:
    """The seed chunks (``[(row, restart share), ...]``, largest first) with a link of the
    passage walk (:func:`~graphstrata.structures.passages.build_passage_graph`) to ``row``,
    at most ``limit``: ``{"chunk_id", "ppr_reset", "via"?, "title"?, "same_document"?}`` —
    shared entities of 2 … ``max_df`` chunks (rarest first), a document title one of the two
    chunks names (when ``title_weight > 0``), the same document (when ``document_weight >
    0``)."""
    kg = state.kg
    chunks = state.chunks
    mine = set(chunk_entity_ids(state, row))
    titles = title_index(state) if title_weight > 0 else None
    named_here = titles.find(chunks[row].text) if titles is not None else set()
    out = []
    for s, share in seeds:
        if s == row:
            continue
        link: dict[str, Any] = {"chunk_id": chunks[s].id, "ppr_reset": float(share)}
        via = [e for e in mine.intersection(chunk_entity_ids(state, s))
               if 2 <= len(kg.entities[e].chunk_ids) <= max_df]
        if via:
            via.sort(key=lambda e: (len(kg.entities[e].chunk_ids), e))
            link["via"] = [entity_ref(state, e) for e in via[:MAX_LISTED]]
        doc_r, doc_s = chunks[row].document_id, chunks[s].document_id
        if titles is not None and doc_r != doc_s:
            named = doc_s if doc_s in named_here else (doc_r if doc_r in titles.find(chunks[s].text) else None)
            if named is not None:
                doc = state.documents.get(named)
                link["title"] = str(doc.metadata.get("title", named)) if doc is not None else named
        if document_weight > 0 and doc_r == doc_s:
            link["same_document"] = True
        if len(link) > 2:
            out.append(link)
            if len(out) >= limit:
                break
    return out


def parts(**values: float | None) -> dict[str, float]:
    """``score_parts``: the non-zero terms as plain floats."""
    return {k: float(v) for k, v in values.items() if v is not None and float(v) != 0.0}


# -- the explanation and its reason ----------------------------------------------------------


def explanation(method: str, lead: str | None = None, **fields: Any) -> dict[str, Any]:
    """An explanation dict: ``method``, the non-empty ``fields`` (``None``, empty lists /
    dicts / strings dropped; ``False`` and 0 kept) and its :func:`reason`, led by ``lead``."""
    out: dict[str, Any] = {"method": method}
    for k, v in fields.items():
        if v is None or (isinstance(v, (list, dict, str)) and not v):
            continue
        out[k] = _plain({k: v})[k]
    out["reason"] = reason(out, lead)
    return out


def _num(x: float, digits: int = 3) -> str:
    x = float(x)
    return f"{x:.{digits}f}" if x == 0 or abs(x) >= 10 ** -digits else f"{x:.1e}"


def _names(refs: Iterable[Mapping[str, Any]], limit: int = 3) -> str:
    refs = list(refs)
    names = [str(r.get("name", r.get("id"))) for r in refs[:limit]]
    more = f" (+{len(refs) - limit})" if len(refs) > limit else ""
    return ", ".join(names) + more


def reason(e: Mapping[str, Any], lead: str | None = None) -> str:
    """One line from an explanation's fields: ``lead``, then the seed signals, entities,
    community, reasoning path and PageRank facts that apply, joined by ``"; "``."""
    out = [lead] if lead else []
    s = e.get("seeds", {})
    signals = []
    if "dense" in s:
        signals.append(f"dense cosine {_num(s['dense'])}")
    if "bm25" in s:
        terms = e.get("matched_terms") or []
        on = f" on {', '.join(terms[:4])}" + ("…" if len(terms) > 4 else "") if terms else ""
        signals.append(f"BM25 {_num(s['bm25'], 2)}{on}")
    if "hybrid" in s:
        signals.append(f"hybrid {_num(s['hybrid'])}")
    if signals:
        out.append(", ".join(signals))
    if s.get("named"):
        out.append("the question names its document")
    if s.get("ppr_reset"):
        pct = 100 * float(s["ppr_reset"])
        out.append(f"PageRank seed ({f'{pct:.1f}%' if pct >= 0.1 else '<0.1%'} of the restart mass)")
    if s.get("entities"):
        out.append(f"seed entities {_names(s['entities'])}")
    if e.get("matched_entities"):
        out.append(f"matched entities {_names(e['matched_entities'])}")
    if e.get("matched_relations"):
        n = len(e["matched_relations"])
        out.append(f"source of {'≥' if n >= MAX_LISTED else ''}{n} retrieved relation{'s' if n > 1 else ''}")
    if e.get("community_path"):
        path = e["community_path"]
        hit = [c for c in path if "similarity" in c]
        c = hit[-1] if hit else path[-1]
        where = "retrieved community" if hit else "community"
        chain = " › ".join(x["id"] for x in path)
        out.append(f"{where} '{c['title']}' ({chain})")
    if e.get("facts"):
        out.append(f"states anchor fact {' '.join(e['facts'][0]['triple'])}")
    if e.get("reasoning_path"):
        rp = e["reasoning_path"]
        triples = rp.get("triples", [])
        ents = rp.get("entities", [])
        if triples:
            n = len(triples) + int(rp.get("truncated", 0))
            first = (rp.get("chunk_triples") or triples)[0]
            more = f" +{n - 1} more triple{'s' if n > 2 else ''}" if n > 1 else ""
            out.append(f"on reasoning path ({' '.join(map(str, first))}{more})")
        elif ents:
            names = " → ".join(str(x["name"]) for x in ents[:4])
            out.append(f"on reasoning path {names}" + ("…" if len(ents) > 4 else ""))
    if e.get("second_hop"):
        h = e["second_hop"]
        out.append(f"second hop from {h['from']} via {_names(h['via'])}")
    if e.get("linked_from"):
        links = e["linked_from"]
        first = links[0]
        via = []
        if first.get("via"):
            via.append(_names(first["via"], 2))
        if first.get("title"):
            via.append(f"title '{first['title']}'")
        if first.get("same_document"):
            via.append("same document")
        out.append(f"linked from seed {first['chunk_id']}" + (f" via {'; '.join(via)}" if via else ""))
    if "ppr_mass" in e:
        out.append(f"PageRank mass {_num(e['ppr_mass'], 4)}")
    if not out:
        out.append("ranked by the method's score")
    return "; ".join(out)
