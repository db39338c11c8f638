"""ArchRAG retrieval, offline (spec seed-archrag.md §3.1, TR Alg. 2).

1. Embed the query; one C-HNSW ``search_all_layers`` pass returns ``k_per_layer`` communities
   in every layer and ``k_entities`` entities at layer 0, each layer's best hit seeding the
   layer below.
2. Layer-0 context: the retrieved entities and the relations among them (induced subgraph,
   spec A12). Layers ≥ 1: the community summaries.
3. Source chunks (our addition, so the method can be scored and cited): candidates are the
   dense and BM25 top-N plus the chunks of every retrieved entity and community (at most
   ``entity_chunks`` per entity: a hub's most representative ones,
   :class:`~graphstrata.structures.provenance.EntityChunks`; communities keep at most 50); each chunk's
   query score is the hybrid (normalised dense + BM25) score — for a before/after question the
   best of the whole question's and each clause's (:func:`~graphstrata.methods.temporal.order_clauses`)
   — plus graph evidence: the
   similarity-weighted, degree-damped mentions by retrieved entities and communities
   (:func:`~graphstrata.methods.base.spread_rows`). The final ranking propagates those
   scores over the chunk–entity graph with title links, by personalised PageRank seeded from
   the best chunks and from the pages whose title (or day, for dated documents) the question
   names (:func:`~graphstrata.methods.propagation.propagate`): the multi-hop step that reaches
   passages linked to the first hop rather than to the question.

The LLM adaptive-filtering answer step (spec §3.2) belongs to generation and is not part of
retrieval.

Work per query (issue 33) is bounded by the seeds, not by the corpus: one C-HNSW pass, the
query terms' BM25 postings, one dot product and a few binary searches per candidate (at most
``2 · candidates + k_entities · entity_chunks + 50 · k_per_layer · layers`` plus the chunks of
the documents the question names), and a forward push of at most
``1 / ((1 − damping) · ppr_epsilon)`` pushes. What it reads beyond the index (entity chunk
rows, document rows, titles, days, the passage graph) is built at index time and persisted
(:mod:`graphstrata.structures`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..models import embed_query
from ..scores import bounded
from ..structures.provenance import ENTITY_CHUNK_LIMIT, entity_chunks, provenance
from ..structures.push import DEFAULT_EPSILON
from . import explain as ex
from .base import (
    DAMPING,
    POSITIVE,
    UNIT,
    Method,
    OptionSpec,
    Retrieval,
    community_hit,
    entity_hit,
    hybrid_arrays,
    rank_arrays,
    relation_hits,
    scored,
    spread_rows,
)
from .propagation import named_chunks, propagate_arrays
from .temporal import order_clauses


class ArchRAG(Method):
    """Attributed-community hierarchical retrieval over C-HNSW (ArchRAG, offline).

    Scores: chunks — with ``propagate`` (default) the chunk's PageRank mass relative to the
    best chunk's (the best ≈ 1; :func:`~graphstrata.methods.propagation.propagate`), without it
    the query score over its maximum, ``(hybrid + Σ weight · evidence) / (1 + Σ weights)``;
    entities and communities ``max(0, cos)``; relations ``max(0, mean endpoint cos)``. The
    method's own number is in ``metadata["raw_score"]``.

    Options:
        k_per_layer: communities per layer ≥ 1 (paper default 5).
        k_entities: entities at layer 0 (paper: same k as other layers; 10 here, they are
            the relation context).
        ef_search: C-HNSW beam width (``None``: the index default).
        alpha: dense weight of the hybrid base score.
        entity_weight, community_weight: weights of the graph evidence in the chunk query
            score (measured on MuSiQue + HotpotQA dev: entity mentions added nothing at @5
            over the hybrid base, community membership +0.01–0.02).
        candidates: dense and BM25 candidates each.
        propagate: rank by passage propagation (``False``: by the query score alone).
        date_links: also seed the walk with the documents dated on a day the question names
            (:class:`~graphstrata.structures.passages.DateIndex`).
        decompose: score a before/after question's clauses as queries of their own too
            (:func:`~graphstrata.methods.temporal.order_clauses`); a chunk keeps its best score. At
            most ``config.max_query_clauses`` clauses (the first ones) are scored.
        entity_chunks: chunks read per retrieved entity (1 … 50): all of them for an entity of
            at most that many chunks, else its most representative ones (highest chunk–entity
            cosine, :class:`~graphstrata.structures.provenance.EntityChunks`); also the entity and
            relation hits' provenance (``metadata["chunk_count"]`` holds the full count).
            ``None``: every chunk, as before issue 33 (work grows with hub entities). Same
            recall@5 on the three dev corpora with 20, 50 or ``None``.
        ppr_epsilon: forward-push tolerance of the passage walk
            (:func:`~graphstrata.structures.push.local_pagerank`): its work per query is bounded by
            ``1 / ((1 − damping) · ppr_epsilon)`` pushes, whatever the corpus size.
        seed_top_n, seed_power, damping, max_df, title_weight, document_weight, named_weight:
            propagation settings
            (:func:`~graphstrata.methods.propagation.propagate`; chosen on the dev questions
            of three corpora, README "Retrieval quality").
    """

    name = "archrag"
    defaults = {
        "k_per_layer": 5,
        "k_entities": 10,
        "ef_search": None,
        "alpha": 0.5,
        "entity_weight": 0.0,
        "community_weight": 0.1,
        "candidates": 100,
        "propagate": True,
        "seed_top_n": 10,
        "seed_power": 6.0,
        "damping": 0.5,
        "max_df": 50,
        "title_weight": 2.0,
        "document_weight": 2.0,
        "named_weight": 1.0,
        "date_links": True,
        "decompose": True,
        "ppr_epsilon": DEFAULT_EPSILON,
        "entity_chunks": ENTITY_CHUNK_LIMIT,
    }
    option_specs = {
        "k_per_layer": POSITIVE,
        "k_entities": POSITIVE,
        "ef_search": OptionSpec("int", ge=1),
        "alpha": UNIT,
        "seed_top_n": POSITIVE,
        "seed_power": OptionSpec(gt=0.0),
        "damping": DAMPING,
        "ppr_epsilon": OptionSpec("float", gt=0.0, le=1.0),
        "entity_chunks": OptionSpec("int", ge=1, le=ENTITY_CHUNK_LIMIT, optional=True),
    }

    def retrieve(self, state, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        o = self.resolved(options)
        context, entity_sources, community_sources, entity_scores, community_sims = _graph_context(state, qvec, o)
        ent_rows, ent_vals = spread_rows(entity_sources)
        com_rows, com_vals = spread_rows(community_sources)
        n = max(int(o["candidates"]), k)
        named = (
            named_chunks(state, query, dates=bool(o["date_links"]))
            if o["propagate"] and o["named_weight"]
            else []
        )
        extra = np.concatenate([ent_rows, com_rows, np.asarray(named, np.int64)])
        rows, fused = hybrid_arrays(state, query, qvec, n, float(o["alpha"]), extra_rows=extra)
        if o["decompose"]:
            for clause in order_clauses(query, max_clauses=state.config.max_query_clauses):
                cvec = embed_query(state.embedder, clause, state.config.query_threads)
                sub_rows, sub = hybrid_arrays(state, clause, cvec, n, float(o["alpha"]), extra_rows=extra)
                rows, fused = _union_max(rows, fused, sub_rows, sub)
        total = fused.astype(np.float64)
        added: dict[str, dict[int, float]] = {}  # the weighted evidence terms, for explain
        for part, weight, (ev_rows, ev_vals) in (
            ("entity", o["entity_weight"], (ent_rows, ent_vals)),
            ("community", o["community_weight"], (com_rows, com_vals)),
        ):
            if not len(ev_rows) or not weight:
                continue
            terms = float(weight) * ev_vals / float(ev_vals.max())
            total[np.searchsorted(rows, ev_rows)] += terms  # every evidence row is a candidate
            if o["explain"]:
                added[part] = dict(zip(ev_rows.tolist(), terms.tolist(), strict=True))
        # without propagation: hybrid (≤ 1) plus each evidence part (≤ its weight)
        bound = 1.0 + float(o["entity_weight"]) + float(o["community_weight"])
        trace: dict[str, Any] | None = {} if o["explain"] and o["propagate"] else None
        ranked_rows, ranked_vals = rows, total
        if o["propagate"]:
            bound = 1.0  # propagate_arrays() returns scores in [0, 1]
            ranked_rows, ranked_vals = propagate_arrays(
                state,
                rows,
                total,
                seed_top_n=int(o["seed_top_n"]),
                seed_power=float(o["seed_power"]),
                damping=float(o["damping"]),
                max_df=int(o["max_df"]),
                title_weight=float(o["title_weight"]),
                document_weight=float(o["document_weight"]),
                named_rows=named,
                named_weight=float(o["named_weight"]),
                trace=trace,
                epsilon=float(o["ppr_epsilon"]),
            )
        out = scored(rank_arrays(ranked_rows, ranked_vals, k), lambda v: bounded(v, bound), context)
        if o["explain"]:
            base = dict(zip(rows.tolist(), fused.astype(np.float64).tolist(), strict=True))
            _explain(state, query, qvec, out, entity_scores, community_sims, base, added, set(named), trace, o)
        return out


def _graph_context(state, qvec: np.ndarray, o):
    """ArchRAG's graph context (spec A12): the ``k_entities`` nearest entities, the relations
    among them and the ``k_per_layer`` nearest communities of each layer (one C-HNSW pass), with
    the chunk rows each hit cites as evidence sources ``(similarity, rows, chunk count)``.

    Returns:
        ``(context hits, entity sources, community sources, {entity id: cosine},
        {community id: cosine})``.
    """
    layered = state.layered
    context = []
    entity_sources: list[tuple[float, np.ndarray, int]] = []
    community_sources: list[tuple[float, np.ndarray, int]] = []
    entity_scores: dict[str, float] = {}
    community_sims: dict[str, float] = {}
    per_entity = o["entity_chunks"]
    if layered is not None:
        bounded_rows = entity_chunks(state) if per_entity is not None else None
        prov = provenance(state)
        ks = [int(o["k_entities"])] + [int(o["k_per_layer"])] * (layered.num_layers - 1)
        per_layer = layered.search_all_layers(qvec, ks, ef_search=o["ef_search"])
        for row, sim in zip(*per_layer[0], strict=True):
            hit = entity_hit(state, int(row), float(sim), max_chunks=per_entity)
            entity_scores[hit.id] = float(sim)
            if bounded_rows is not None:
                mentions = bounded_rows.top(int(row), per_entity)
                entity_sources.append((float(sim), mentions, int(bounded_rows.counts[int(row)])))
            else:
                chunk_ids = state.kg.entities[hit.id].chunk_ids
                entity_sources.append((float(sim), _rows_of(state, chunk_ids), len(chunk_ids)))
            context.append(hit)
        context.extend(relation_hits(state, entity_scores, max_chunks=per_entity))
        for layer in range(1, layered.num_layers):
            for row, sim in zip(*per_layer[layer], strict=True):
                hit = community_hit(state, layer, int(row), float(sim))
                community_sims[hit.id] = float(sim)
                community_sources.append((float(sim), prov.community_rows(layer, int(row)), len(hit.chunk_ids)))
                context.append(hit)
    return context, entity_sources, community_sources, entity_scores, community_sims


def _rows_of(state, chunk_ids) -> np.ndarray:
    """int64 rows of ``chunk_ids`` (unknown ids skipped), in order."""
    get = state.chunk_row.get
    return np.fromiter((r for r in map(get, chunk_ids) if r is not None), np.int64)


def _union_max(rows_a: np.ndarray, vals_a: np.ndarray, rows_b: np.ndarray, vals_b: np.ndarray):
    """Rows of both (ascending) with each row's larger value (a row in one only keeps its
    value, clipped below at 0)."""
    rows = np.union1d(rows_a, rows_b)
    out = np.zeros(len(rows), np.float32)
    np.maximum.at(out, np.searchsorted(rows, rows_a), vals_a)
    np.maximum.at(out, np.searchsorted(rows, rows_b), vals_b)
    return rows, out


def _explain(state, query, qvec, out: Retrieval, entity_scores, community_sims, base, added, named, trace,
             o) -> None:
    """Fill ``out.explain`` and the context hits' ``explain`` (:mod:`.explain`): chunks get their
    seed signals, the retrieved entities that mention them, the community path through the
    best retrieved community holding them, and with propagation their restart share, PageRank
    mass and the seed chunks linked to them; entity / relation / community hits their cosine,
    layer and community path."""
    name = ArchRAG.name
    rows = [r for r, _ in out.chunks]
    signals = ex.chunk_signals(state, query, qvec, rows)
    by_id = ex.communities_by_id(state)
    ranked_communities = sorted(community_sims, key=lambda c: (-community_sims[c], c))
    chunk_sets: dict[str, set[str]] = {}
    reset = mass = None
    seeds: list[tuple[int, float]] = []
    if trace:
        reset, mass = trace.get("reset"), trace.get("mass")
        if reset is not None:
            seeds = sorted(((int(r), float(v)) for r, v in reset.items() if v > 0), key=lambda x: (-x[1], x[0]))
    for r in rows:
        cid = state.chunks[r].id
        matched = ex.matched_in_chunk(state, r, entity_scores)
        anchor = None
        for com in ranked_communities:
            if com not in chunk_sets:
                chunk_sets[com] = set(by_id[com].chunk_ids)
            if cid in chunk_sets[com]:
                under = set(by_id[com].entity_ids)
                anchor = next((m["id"] for m in matched if m["id"] in under), com)
                break
        if anchor is None and matched:
            anchor = matched[0]["id"]
        seed_share = float(reset[r]) if reset is not None and reset.get(r, 0.0) > 0 else None
        fields = ex.chunk_base(
            signals[r], hybrid=base.get(r), named=True if r in named else None, ppr_reset=seed_share
        )
        lead = None
        links = []
        if mass is not None:
            links = ex.walk_links(state, r, seeds, int(o["max_df"]), float(o["title_weight"]),
                                  float(o["document_weight"]))
            lead = "seeded the passage walk" if seed_share else "reached by passage propagation"
        out.explain[r] = ex.explanation(
            name,
            lead,
            **fields,
            matched_entities=matched,
            community_path=ex.community_path(state, anchor, community_sims) if anchor else [],
            ppr_mass=float(mass.get(r, 0.0)) if mass is not None else None,
            linked_from=links,
            score_parts=ex.parts(
                hybrid=base.get(r),
                **{part: terms.get(r) for part, terms in added.items()},
            ),
        )
    for hit in out.context:
        if hit.kind == "entity":
            hit.explain = ex.explanation(
                name, "entity matched the query (C-HNSW layer 0)", layer=0,
                similarity=entity_scores.get(hit.id),
                community_path=ex.community_path(state, hit.id, community_sims),
            )
        elif hit.kind == "relation":
            ends = [e for e in hit.id.split("\u241f") if e in entity_scores]
            hit.explain = ex.explanation(
                name, "relation between two retrieved entities", layer=0,
                similarity=hit.metadata.get("raw_score"),
                matched_entities=[ex.entity_ref(state, e, similarity=entity_scores[e]) for e in ends],
            )
        elif hit.kind == "community":
            c = by_id[hit.id]
            inside = {e: entity_scores[e] for e in c.entity_ids if e in entity_scores}
            members = sorted(inside, key=lambda e: (-inside[e], e))[: ex.MAX_LISTED]
            hit.explain = ex.explanation(
                name, f"community matched the query at layer {c.layer} (C-HNSW)", layer=int(c.layer),
                similarity=community_sims.get(hit.id),
                community_path=ex.community_path(state, hit.id, community_sims),
                matched_entities=[ex.entity_ref(state, e, similarity=inside[e]) for e in members],
            )
