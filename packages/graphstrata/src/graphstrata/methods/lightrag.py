"""LightRAG retrieval, offline (spec seed-lightrag.md §2: dual-level retrieval).

1. **Keywords** (spec §2.2 step 1, §2.3). The paper asks an LLM for high-level (themes) and
   low-level (specific entities) keywords; so do we when the query has an LLM (the ``llm``
   option, else the state's ``llm``): one call, stage ``"query:keywords"``
   (:mod:`graphstrata.llm.prompts.lightrag_query`); output the parser cannot read falls back
   to the offline keywords for that query and is counted with ``LLMClient.skip``. Offline,
   :func:`~.keywords.offline_keywords` matches the query's word n-grams against the corpus vocabulary
   (entity ids): low-level = the longest non-overlapping n-grams that name an entity, plus
   capitalised spans of the query the KG does not know; high-level = the remaining content
   words. ``keywords_fn=callable(query) -> (high_level, low_level)`` overrides both.
2. **Low-level / local path** (spec §2.4): the low-level keywords search the *entity* vectors
   (the entity layer's C-HNSW, beam ``ef_search``, cosines recomputed exactly; ``top_k``,
   floor ``min_similarity``; entities named exactly by a keyword come first); one-hop
   expansion = every relation incident to a retrieved entity, ranked by edge degree
   ``deg(u) + deg(v)`` then weight, cut at ``max_relation_tokens`` (merged exactly from
   each entity's rank-ordered relation list, reading only as much of it as the cut needs).
3. **High-level / global path**: the high-level keywords search the *relation* vectors (see
   below); the kept relations are ranked by (edge degree, weight) and cut at
   ``max_relation_tokens``; one-hop expansion = their endpoint entities, ranked by degree, cut
   at ``max_entity_tokens``.
4. **Hybrid** = the de-duplicated union of both paths (no re-truncation, spec §2.4).
5. **Sources**: chunks ranked by graph evidence (similarity-weighted, hub-damped mentions by
   the retrieved entities and relations and their one-hop expansion) and cut at
   ``max_source_tokens``; the returned chunk ranking fuses that evidence with the hybrid
   (dense + BM25) score, as ArchRAG does, so every mode returns ``k`` ranked chunks.
6. **Mix** (``mode="mix"``; LightRAG's reference code after the paper, HKUDS/LightRAG
   ``operate.py``, v1.1 ``mix_kg_vector_query`` and v1.4 ``_merge_all_chunks``; not in the
   paper or ``seed-lightrag.md``, whose §2.7 lists local / global / hybrid / naive): the hybrid
   context as it is, plus the chunks of a plain dense search of the query (the ``dense``
   method's chunk C-HNSW search, :func:`~.base.dense_candidates`, cut at ``min_similarity`` as
   the reference's chunk vector store is, spec §1.8). The chunk ranking merges the dense
   top ``k`` and the hybrid mode's own chunk ranking (top ``k``) the reference's way: taking
   turns, dense first, without repeats (:func:`~.base.round_robin`), cut at ``k``. Each chunk
   hit says which list brought it (``metadata["retrieved_by"]``), so the answer prompt shows
   the graph's chunks as Sources and the dense search's as Document Chunks
   (:mod:`graphstrata.generation.lightrag`).

Relation vectors (spec §1.8: keywords + endpoints + description, one vector per relation). In
an LLM build (:func:`~graphstrata.structures.text_vectors.describes_relations`) each relation's
keywords, endpoint names and description are embedded, as the spec says
(:data:`RELATION_TEXT_VECTORS`, :func:`relation_text_vectors`; option
``relation_vectors="auto"``). Offline the descriptions are extractive sentences and are not
embedded: a relation's vector is the normalised combination
``(1 − w)·mean(endpoint entity vectors) + w·mean(source chunk vectors)`` (``w`` =
``relation_chunk_weight``; :class:`RelationVectors` keeps only the norms). Either way a query
scores only its *candidates* (issue 33: no step reads every relation, entity or chunk): the relations
sourced from the ``relation_seed_chunks`` chunks nearest the query (chunk C-HNSW) and those
incident to the ``top_k`` nearest entities (at most ``relation_seed_cap`` each). On the dev
sets that candidate set holds 99.9–100 % of the exact top 60 (recall unchanged).

The graph arrays a query reads (:class:`LightGraph`: endpoints, ranks, incident lists,
chunk ↔ relation and chunk ↔ entity maps, chunk → document) and the relation-vector norms
are derived structures built at index time and persisted with the index
(:data:`LIGHT_GRAPH`, :data:`RELATION_VECTORS`, :mod:`graphstrata.structures`), so a loaded
index's first query builds nothing. A query's work is bounded by its seeds: ``top_k``
entities, ``relation_seed_chunks`` chunks, their capped incident lists, and graph evidence
spread over sources of at most ``spread_max_chunks`` chunks each (a larger source only adds
to chunks the others reached).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from ..scores import bounded, relative, unit
from ..structures.lightrag import (
    DEFAULT_RELATION_CHUNK_WEIGHT,
    LightGraph,
    csr_ranges,
    light_graph,
    relation_text_vectors,
    relation_vectors,
    rows_dot,
)
from ..structures.provenance import ENTITY_CHUNK_LIMIT
from ..types import Hit
from . import explain as ex
from .base import (
    COSINE,
    TOKEN_BUDGET,
    UNIT,
    Method,
    OptionSpec,
    Retrieval,
    dense_candidates,
    hybrid_scores,
    query_llm,
    rank,
    representative_chunks,
    round_robin,
    scored,
)
from .keywords import Keywords, query_keywords

MODES = ("local", "global", "hybrid", "mix")
"""The ``mode`` values: the paper's three (spec §2.4) and the reference code's ``mix``."""

#: ``metadata["retrieved_by"]`` of a mix chunk hit: which of the two merged lists hold it
RETRIEVED_BY = ("graph", "vector", "both")

_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


# -- context -----------------------------------------------------------------------------------


@lru_cache(maxsize=1 << 16)
def count_tokens(text: str) -> int:
    """Budget tokens of ``text``: words and punctuation marks
    (:func:`~graphstrata.models.regex_token_spans`, about 0.75 of a WordPiece count).

    Tokenizer-free on purpose: the embedder's tokenizer costs about 1 ms per call, and a query
    counts a few hundred descriptions. Memoised: the same descriptions and chunks recur from
    query to query (the regex was a third of a MuSiQue query's time)."""
    return len(_TOKEN_RE.findall(text))


def _budget(items: list, text: Callable[[Any], str], state, limit: int | None) -> list:
    """Greedy truncation by list order: stop at the first item that overflows (spec §7.7).

    ``text(item)`` gives the item's text; tokens are counted only up to the cut."""
    if limit is None:
        return items
    out, used = [], 0
    for item in items:
        t = count_tokens(text(item))
        if used + t > limit:
            break
        used += t
        out.append(item)
    return out


def _entity_search(state, v: np.ndarray, k: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
    """The top-``k`` entity rows for ``v``: candidates from the entity layer's C-HNSW (beam
    ``max(ef, k)``; an exact scan when the state has none), cosines recomputed exactly.

    Returns:
        ``(rows, sims)``: int64 rows and their float32 cosines (unordered)."""
    ents = state.vectors["entities"]
    k = min(int(k), len(ents))
    if k <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    q = np.asarray(v, np.float32)
    layered = getattr(state, "layered", None)
    if layered is not None:
        rows, _ = layered.search_layer(q[None, :], k, 0, ef_search=max(int(ef), k))
        rows = rows[0][rows[0] >= 0].astype(np.int64)
        return rows, rows_dot(ents[rows], q).astype(np.float32)
    sims = rows_dot(ents, q)
    rows = np.argpartition(-sims, k - 1)[:k].astype(np.int64)
    return rows, sims[rows].astype(np.float32)


def _relation_candidates(
    state, g: LightGraph, v: np.ndarray, seed_entities: np.ndarray, n_chunks: int, cap: int | None
) -> np.ndarray:
    """Relations that can score high for ``v`` (the global path's search space): those sourced
    from the top-``n_chunks`` chunks (chunk C-HNSW) and those incident to the seed entities
    (at most ``cap`` each, in :attr:`LightGraph.rank` order). int64, ascending, unique."""
    parts = []
    if n_chunks > 0 and len(state.chunks):
        rows, _ = state.chunk_index.search(np.asarray(v, np.float32), n_chunks)
        pos, _ = csr_ranges(g.chunk_rel_indptr, rows)
        parts.append(g.chunk_rel[pos])
    if len(seed_entities):
        pos, _ = csr_ranges(g.inc_indptr, seed_entities, None if cap is None else int(cap))
        parts.append(g.inc_rel[pos])
    if not parts:
        return np.zeros(0, np.int64)
    return np.unique(np.concatenate(parts).astype(np.int64))


def _incident_edges(kg, g: LightGraph, found: list[tuple[str, float, str]], text: Callable[[Any], str],
                    limit: int | None) -> list[tuple[tuple[str, str], float, str, int]]:
    """One-hop expansion of the local path, cut at ``limit`` tokens: the relations incident to
    a found entity, as ``(key, similarity of its best found endpoint, "local", relation index)``
    ranked by edge degree, then weight, then endpoint rows (:attr:`LightGraph.rank`), greedily
    kept while ``text`` fits the budget (:func:`_budget`).

    Exact without reading every incident relation: each entity's relations are stored in rank
    order, so the ranked union is merged from per-entity prefixes (of 64, then 4× more while the
    cut falls past the shortest cut-off prefix)."""
    if not found:
        return []
    rows = np.fromiter((kg.row[e] for e, _, _ in found), np.int64, len(found))
    sims = np.fromiter((s for _, s, _ in found), np.float64, len(found))
    lens = g.inc_indptr[rows + 1] - g.inc_indptr[rows]
    cap = 64 if limit is not None else None
    while True:
        pos, owner = csr_ranges(g.inc_indptr, rows, cap)
        rel = g.inc_rel[pos].astype(np.int64)
        s = sims[owner]
        first = np.lexsort((-s, rel))  # by relation, best similarity first
        keep = first[np.r_[True, rel[first][1:] != rel[first][:-1]]] if len(first) else first
        rel, s = rel[keep], s[keep]
        order = np.argsort(g.rank[rel], kind="stable")
        cut = np.inf
        if cap is not None:
            short = np.flatnonzero(lens > cap)
            if len(short):
                cut = float(g.rank[g.inc_rel[g.inc_indptr[rows[short]] + cap - 1]].min())
        out, used, stop = [], 0, None
        for i in order.tolist():
            r = int(rel[i])
            item = (g.key(kg, r), float(s[i]), "local", r)
            if limit is not None:
                t = count_tokens(text(item))
                if used + t > limit:
                    stop = float(g.rank[r])
                    break
                used += t
            out.append(item)
        if cut == np.inf or (stop is not None and stop <= cut):
            return out
        cap *= 4


def _spread(g: LightGraph, sources: list[tuple[float, str, int]], max_chunks: int) -> tuple[np.ndarray, np.ndarray]:
    """Graph evidence on chunks (as :func:`~graphstrata.methods.base.spread_to_chunks`): each
    source (an entity row or relation index with similarity ``s`` and chunk list ``C``) adds
    ``s / sqrt(|C|)`` to every chunk of ``C``; a source with more than ``max_chunks`` chunks
    adds only to chunks the other sources reached (its share per chunk is at most
    ``s / sqrt(max_chunks)``), so a hub costs what the query already touched.

    Returns:
        ``(rows, evidence)``: int64 ascending chunk rows and their float64 evidence
        (unnormalised, > 0)."""
    small_pos, small_w, hubs = [], [], []
    for score, kind, i in sources:
        if score <= 0:
            continue
        indptr, values = (g.ent_chunk_indptr, g.ent_chunk_rows) if kind == "entity" else (
            g.rel_chunk_indptr, g.rel_chunk_rows)
        s, e = int(indptr[i]), int(indptr[i + 1])
        if e == s:
            continue
        w = float(score) / np.sqrt(e - s)
        if e - s > max_chunks:
            hubs.append((w, values[s:e]))
        else:
            small_pos.append(values[s:e])
            small_w.append(np.full(e - s, w))
    if not small_pos:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    uniq, inv = np.unique(np.concatenate(small_pos).astype(np.int64), return_inverse=True)
    total = np.bincount(inv, weights=np.concatenate(small_w), minlength=len(uniq))
    for w, rows in hubs:
        hit = np.minimum(np.searchsorted(uniq, rows), len(uniq) - 1)
        ok = uniq[hit] == rows
        np.add.at(total, hit[ok], w)
    return uniq, total


def add_second_hop(state, scores: dict[int, float], base: dict[int, float], o: Mapping[str, Any]) -> dict[int, float]:
    """:func:`graphstrata.methods.graph_ops.add_second_hop` (the same evidence, scores and
    result) read from :class:`LightGraph`'s chunk ↔ entity arrays instead of the KG's
    chunk → entities dict, which a loaded index would build on its first query: a chunk of
    another document sharing an entity of 2 … ``second_hop_max_df`` chunks with one of the top
    ``second_hop_seeds`` chunks of ``base`` gains ``seed score / log2(1 + df)`` per shared
    entity, normalised to at most ``second_hop_weight`` and added to ``scores`` in place.

    Returns:
        ``{chunk_row: the amount added}`` (empty when nothing was)."""
    w = float(o["second_hop_weight"])
    if w <= 0 or not base:
        return {}
    g = light_graph(state)
    max_df = int(o["second_hop_max_df"])
    rows_parts, weight_parts = [], []
    for row, score in rank(base, int(o["second_hop_seeds"])):
        if score <= 0:
            continue
        ents = g.chunk_ent[g.chunk_ent_indptr[row] : g.chunk_ent_indptr[row + 1]].astype(np.int64)
        df = g.ent_chunk_indptr[ents + 1] - g.ent_chunk_indptr[ents]
        ents, df = ents[(df >= 2) & (df <= max_df)], df[(df >= 2) & (df <= max_df)]
        pos, owner = csr_ranges(g.ent_chunk_indptr, ents)
        rows = g.ent_chunk_rows[pos].astype(np.int64)
        other = g.chunk_doc[rows] != g.chunk_doc[row]
        rows_parts.append(rows[other])
        weight_parts.append((float(score) / np.log2(1.0 + df.astype(np.float64)))[owner[other]])
    if not rows_parts or not sum(len(r) for r in rows_parts):
        return {}
    uniq, inv = np.unique(np.concatenate(rows_parts), return_inverse=True)
    ev = np.bincount(inv, weights=np.concatenate(weight_parts), minlength=len(uniq))
    top = float(ev.max())
    added = {}
    for r, v in zip(uniq.tolist(), ev.tolist(), strict=True):
        added[r] = w * v / top
        scores[r] = scores.get(r, 0.0) + added[r]
    return added


@dataclass
class LightRAGContext:
    """The three context sections of one query (spec §2.5: Entities, Relationships, Sources).

    Attributes:
        keywords: the query's keywords.
        entities: ``[(entity_id, similarity, path), ...]`` in section order (rank = degree);
            ``path`` is ``"local"`` (retrieved by a low-level keyword) or ``"global"``
            (endpoint of a retrieved relation, one hop).
        relations: ``[(relation_key, similarity, path), ...]`` in section order (rank = edge
            degree, then weight); ``"local"`` = incident to a retrieved entity (one hop),
            ``"global"`` = retrieved by the high-level keywords.
        sources: ``[(chunk_row, evidence), ...]`` best first, within ``max_source_tokens``.
        relation_rows: ``{relation_key: relation index}`` of :class:`LightGraph` for the
            relations listed.
    """

    keywords: Keywords
    entities: list[tuple[str, float, str]]
    relations: list[tuple[tuple[str, str], float, str]]
    sources: list[tuple[int, float]]
    relation_rows: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)


class LightRAG(Method):
    """LightRAG dual-level retrieval, offline (spec seed-lightrag.md §2, §2.4 mechanics).

    Options:
        mode: ``"local"`` (low-level keywords → entities → incident relations),
            ``"global"`` (high-level keywords → relations → endpoint entities),
            ``"hybrid"`` (both, the default; spec §2.4, the paper's "LightRAG") or ``"mix"``
            (the hybrid context plus the chunks of a dense search of the query, merged into
            the chunk ranking by turns; LightRAG's reference code, see the module docstring
            and "Chunk scores" below). Another value raises ``ValueError`` naming these four.
        keywords_fn: ``None`` (the LLM keyword prompt when the query has an LLM, else
            offline vocabulary matching, :func:`~.keywords.offline_keywords`) or
            ``fn(query) -> (high_level, low_level)`` (or the spec's JSON dict), which wins
            over both.
        llm: the :class:`~graphstrata.llm.LLMClient` of the keyword step (``None``: the
            state's ``llm``; none there either: offline keywords).
        top_k: entities searched by the low-level keywords and relations by the high-level
            keywords (spec default 60).
        min_similarity: cosine floor of both searches (spec 0.2).
        keyword_vectors: ``"keywords"`` embeds each keyword list joined by ", " once (spec
            §2.4; one extra embedder call per non-empty list), ``"query"`` reuses the query
            vector for both searches (no extra call), ``"auto"`` (default) = ``"keywords"``
            when the keywords come from the LLM or a ``keywords_fn``, else ``"query"``
            (offline keywords are pieces of the query: embedding them measured no better on
            musique, 100 questions, and cost two embedder calls).
        relation_vectors: ``"auto"`` (default): the embedded relation texts (keywords,
            endpoint names, description; spec §1.8) where the index has them (an LLM build,
            :func:`relation_text_vectors`), else the composed vectors; ``"composed"``: always
            the composed vectors (``relation_chunk_weight``).
        relation_chunk_weight: weight of the source-chunk centroid in a composed relation
            vector (the rest is the endpoint-entity centroid).
        max_entity_tokens, max_relation_tokens, max_source_tokens: per-section budgets in
            tokens (spec 4000 each; ``None`` = no limit), counted by :func:`count_tokens`
            (words and punctuation marks). Entities and relations count their hit text
            (``name: description``), sources the chunk text.
        alpha: dense weight of the hybrid base score of the chunk ranking.
        entity_weight, relation_weight, hop_weight: weights of the graph evidence from the
            retrieved entities, the retrieved relations, and the one-hop expansion, added to
            the hybrid score of the chunks inside the Sources budget (defaults measured on
            musique, 100 questions: the one-hop expansion shapes the context but added no
            chunk recall, so ``hop_weight`` is 0).
        candidates: dense and BM25 candidates each.
        ef_search: beam of the entity C-HNSW search (128; larger = closer to exact).
        relation_seed_chunks: chunks (nearest the high-level vector) whose relations are
            candidates of the relation search (100).
        relation_seed_cap: relations per seed entity (the ``top_k`` nearest) added to the
            candidates, first by rank (256; ``None`` = all).
        entity_chunks: provenance of the entity and relation hits (1 … 50, as ArchRAG's and
            HiRAG's option): an entity of more chunks lists its most representative ones
            (highest chunk–entity cosine, :class:`~graphstrata.structures.provenance.EntityChunks`), a
            relation its first ones; ``metadata["chunk_count"]`` holds the full count. A hub
            entity's chunk list grows with the corpus (a context listed ~3.4k chunk ids per
            query at 50k chunks, ~14k at 1M): bounded, a query costs what it costs at 50k.
            ``None``: every chunk. The chunk ranking is the same either way.
        spread_max_chunks: a source (entity / relation) with more chunks than this adds its
            evidence only to chunks other sources reached (1024; above every entity of the
            dev corpora).
        second_hop_weight, second_hop_seeds, second_hop_max_df: second-hop chunk evidence
            (:func:`~graphstrata.methods.base.bridge_evidence`, shared with ArchRAG): chunks of
            other documents sharing an entity of at most ``second_hop_max_df`` chunks with
            the top ``second_hop_seeds`` hybrid chunks; 0 disables. 0.3 measured as the
            compromise: 0.5 lifts musique recall@5/10 by ~3 points but costs hotpotqa
            recall@2 ~2 points (150 questions each). Read from :class:`LightGraph`
            (:func:`add_second_hop`).

    Ambiguities (spec §8) taken: 1/2 single vector per entity / relation (embedded name +
    description and keywords + names + description in an LLM build, composed offline); 4 one-hop expansion as in the code (local: incident edges, global: endpoints);
    5 ``top_k`` 60 and 4000-token budgets; 6 the entity list is truncated too; 8 hybrid
    order is deterministic: each kind sorted by its rank (degree), ties by weight then id —
    not "high-level rows first", so that context hits stay ordered by score as the core API
    promises. Entity hits are ranked by degree, relation hits by edge degree (the spec's rank
    column): hit ``score`` = that rank over the section's first (in [0, 1], non-increasing),
    ``metadata["raw_score"]`` = the degree itself, ``metadata["similarity"]`` = the cosine.

    Chunk scores: ``(hybrid + Σ weight · normalised evidence) / (1 + entity_weight +
    relation_weight + hop_weight + second_hop_weight)``, a weighted mean of parts in [0, 1];
    raw score: the weighted sum.

    Mix chunk scores: at most ``k`` chunks, the dense top ``k`` (cosine ≥ ``min_similarity``)
    and the hybrid mode's top ``k`` taken in turns, dense first, without repeats
    (:func:`~.base.round_robin`); a chunk taken in round ``i`` (its best 0-based rank in
    either list) scores ``1 / (1 + i)`` (in (0, 1], non-increasing; raw score the same), a
    rank statistic: the two lists' own scores (cosine, weighted graph sum) are on different
    scales. ``metadata["retrieved_by"]``: ``"vector"`` (only in the dense list), ``"graph"``
    (only in the hybrid ranking) or ``"both"``. The context hits are the hybrid mode's.
    With ``explain=True`` a chunk's explanation has ``mix`` (its rank in each list) and no
    ``score_parts``.
    """

    name = "lightrag"
    defaults = {
        "mode": "hybrid",
        "keywords_fn": None,
        "top_k": 60,
        "min_similarity": 0.2,
        "keyword_vectors": "auto",
        "relation_vectors": "auto",
        "relation_chunk_weight": DEFAULT_RELATION_CHUNK_WEIGHT,
        "max_entity_tokens": 4000,
        "max_relation_tokens": 4000,
        "max_source_tokens": 4000,
        "alpha": 0.5,
        "entity_weight": 0.3,
        "relation_weight": 0.5,
        "hop_weight": 0.0,
        "candidates": 100,
        "second_hop_weight": 0.3,
        "second_hop_seeds": 1,
        "second_hop_max_df": 50,
        "ef_search": 128,
        "relation_seed_chunks": 100,
        "relation_seed_cap": 256,
        "spread_max_chunks": 1024,
        "entity_chunks": ENTITY_CHUNK_LIMIT,
    }
    option_specs = {
        "ef_search": OptionSpec("int", ge=1),
        "relation_seed_chunks": OptionSpec("int", ge=0),
        "relation_seed_cap": OptionSpec("int", ge=0, optional=True),
        "spread_max_chunks": OptionSpec("int", ge=1),
        "entity_chunks": OptionSpec("int", ge=1, le=ENTITY_CHUNK_LIMIT, optional=True),
        "mode": OptionSpec(choices=MODES),
        "keywords_fn": OptionSpec("callable"),
        "min_similarity": COSINE,
        "keyword_vectors": OptionSpec(choices=("auto", "keywords", "query")),
        "relation_vectors": OptionSpec(choices=("auto", "composed")),
        "relation_chunk_weight": UNIT,
        "max_entity_tokens": TOKEN_BUDGET,
        "max_relation_tokens": TOKEN_BUDGET,
        "max_source_tokens": TOKEN_BUDGET,
        "alpha": UNIT,
    }

    # -- the two paths -------------------------------------------------------------------
    def context(self, state, query: str, qvec: np.ndarray, **options: Any) -> LightRAGContext:
        """Build the Entities / Relationships / Sources sections for ``query``.

        Returns:
            A :class:`LightRAGContext` (what the answer prompt of spec §2.6 consumes).
        """
        o = self.resolved(options)
        return self._context(state, query, qvec, o)[0]

    def _context(self, state, query, qvec, o):
        client = query_llm(state, o) if o["keywords_fn"] is None else None
        kw = query_keywords(state, query, o["keywords_fn"], client)
        mode = "hybrid" if o["mode"] == "mix" else o["mode"]  # mix adds chunks, not context
        ents_vec = state.vectors.get("entities")
        if not len(state.kg) or ents_vec is None or len(ents_vec) == 0:
            return LightRAGContext(kw, [], [], []), {}
        q = _ContextQuery(state, light_graph(state), kw, qvec, o)
        if mode in ("global", "hybrid"):
            q.global_path(query)
        if mode in ("local", "hybrid"):
            q.local_path(query)
        sources = _sources(state, q.g, q.evidence_src, o)
        ent_list = q.ent_order([(e, s, p) for e, (s, p) in q.entities.items()])
        rel_list = q.rel_order([(k, s, p) for k, (s, p) in q.relations.items()])
        rel_rows = {key: q.rel_rows[key] for key in q.relations}
        return LightRAGContext(kw, ent_list, rel_list, sources, rel_rows), dict(sources)

    # -- retrieval -----------------------------------------------------------------------
    def retrieve(self, state, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        o = self.resolved(options)
        ctx, evidence = self._context(state, query, qvec, o)
        n = max(int(o["candidates"]), k)
        base = hybrid_scores(state, query, qvec, n, float(o["alpha"]), extra_rows=evidence)
        scores = dict(base)
        for r, v in evidence.items():
            scores[r] = scores.get(r, 0.0) + v
        hop = add_second_hop(state, scores, base, o)  # this module's, from the persisted arrays
        # hybrid (≤ 1) + each evidence part and the second hop (≤ its weight)
        bound = 1.0 + sum(
            float(o[w])
            for w in ("entity_weight", "relation_weight", "hop_weight", "second_hop_weight")
        )
        graph = rank(scores, k)
        mix = None
        if o["mode"] == "mix":
            out, mix = _mix(state, qvec, k, graph, float(o["min_similarity"]), self._hits(state, ctx, o["entity_chunks"]))
        else:
            out = scored(graph, lambda v: bounded(v, bound), self._hits(state, ctx, o["entity_chunks"]))
        if o["explain"]:
            _explain(state, query, qvec, out, ctx, base, evidence, hop, o, mix)
        return out

    @staticmethod
    def _hits(state, ctx: LightRAGContext, per_entity: int | None = None) -> list[Hit]:
        kg = state.kg
        g = light_graph(state)
        degree = g.degree
        hits: list[Hit] = []
        # scores: the rank column (degree, edge degree) relative to the first of its section
        top_e = max((float(degree[kg.row[e]]) for e, _, _ in ctx.entities), default=0.0)
        top_r = max(
            (float(degree[kg.row[a]] + degree[kg.row[b]]) for (a, b), _, _ in ctx.relations),
            default=0.0,
        )
        for eid, sim, path in ctx.entities:
            e = kg.entities[eid]
            row = kg.row[eid]
            if per_entity is None or len(e.chunk_ids) <= per_entity:
                rows = g.ent_chunk_rows[g.ent_chunk_indptr[row] : g.ent_chunk_indptr[row + 1]]
                chunk_ids = list(e.chunk_ids)
            else:  # a hub: its most representative chunks
                chunk_ids, rows = representative_chunks(state, row, per_entity)
            extra = {} if per_entity is None else {"chunk_count": len(e.chunk_ids)}
            hits.append(
                Hit(
                    id=e.id,
                    text=f"{e.name}: {e.description}" if e.description else e.name,
                    score=relative(float(degree[row]), top_e),
                    kind="entity",
                    layer=0,
                    chunk_ids=chunk_ids,
                    document_ids=g.documents(rows),
                    metadata={"name": e.name, "type": e.type, "weight": e.weight, "similarity": sim,
                              "rank": int(degree[row]), "path": path,
                              "raw_score": float(degree[row]), **extra,
                              **({"aliases": list(e.aliases)} if e.aliases else {})},
                )
            )
        for key, sim, path in ctx.relations:
            r = kg.relations[key]
            a, b = kg.entities[key[0]], kg.entities[key[1]]
            d = int(degree[kg.row[key[0]]] + degree[kg.row[key[1]]])
            if per_entity is None or len(r.chunk_ids) <= per_entity:
                chunk_ids = list(r.chunk_ids)
                document_ids = _documents(state, g, ctx.relation_rows.get(key), r.chunk_ids)
            else:  # its first chunks, as ArchRAG's relation hits
                chunk_ids = list(r.chunk_ids[:per_entity])
                document_ids = state.document_ids_of(chunk_ids)
            extra = {} if per_entity is None else {"chunk_count": len(r.chunk_ids)}
            hits.append(
                Hit(
                    id=r.id,
                    text=f"{a.name} — {b.name}: {r.description}",
                    score=relative(float(d), top_r),
                    kind="relation",
                    layer=0,
                    chunk_ids=chunk_ids,
                    document_ids=document_ids,
                    metadata={"source": a.name, "target": b.name, "weight": r.weight,
                              "keywords": r.keywords, "similarity": sim, "rank": d, "path": path,
                              "raw_score": float(d), **extra},
                )
            )
        return hits


class _ContextQuery:
    """One query's two LightRAG paths (spec §2.4) and what they gather: the context entities
    and relations (``{key: (similarity, path)}``), each listed relation's row, and the graph
    evidence sources per part (``(similarity, "entity" | "relation", row)``)."""

    def __init__(self, state, g: LightGraph, kw: Keywords, qvec: np.ndarray, o: Mapping[str, Any]) -> None:
        self.state, self.kg, self.g, self.kw, self.qvec, self.o = state, state.kg, g, kw, qvec, o
        self.top_k, self.floor = int(o["top_k"]), float(o["min_similarity"])
        self.searched: dict[int, tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]] = {}
        self.entities: dict[str, tuple[float, str]] = {}
        self.relations: dict[tuple[str, str], tuple[float, str]] = {}
        self.rel_rows: dict[tuple[str, str], int] = {}
        self.evidence_src: dict[str, list[tuple[float, str, int]]] = {"entity": [], "relation": [], "hop": []}

    def vec(self, words: list[str]) -> np.ndarray:
        """The search vector of keywords ``words`` (the query's own when offline)."""
        kv = self.o["keyword_vectors"]
        if not words or kv == "query" or (kv == "auto" and self.kw.source == "offline"):
            return self.qvec
        return np.asarray(self.state.embedder.embed([", ".join(words)])[0], np.float32)

    def entity_top(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # global and local modes share the search when they query the same vector (offline);
        # the vector is kept with its result, so its id is not reused within the query
        if id(v) not in self.searched:
            self.searched[id(v)] = (v, _entity_search(self.state, v, self.top_k, int(self.o["ef_search"])))
        return self.searched[id(v)][1]

    def top(self, rows: np.ndarray, sims: np.ndarray) -> list[tuple[int, float]]:
        keep = sims >= self.floor
        rows, sims = rows[keep], sims[keep]
        order = np.lexsort((rows, -sims))[: self.top_k]
        return list(zip(rows[order].tolist(), sims[order].tolist(), strict=True))

    def ent_text(self, eid):
        e = self.kg.entities[eid]
        return f"{e.name}: {e.description}" if e.description else e.name

    def rel_text(self, key):
        kg = self.kg
        return f"{kg.entities[key[0]].name} — {kg.entities[key[1]].name}: {kg.relations[key].description}"

    def ent_order(self, items):  # rank = degree, then weight, then id
        kg, degree = self.kg, self.g.degree
        return sorted(items, key=lambda x: (-degree[kg.row[x[0]]], -kg.entities[x[0]].weight, x[0]))

    def rel_order(self, items):
        kg, degree = self.kg, self.g.degree

        def edeg(key):
            return float(degree[kg.row[key[0]]] + degree[kg.row[key[1]]])

        return sorted(items, key=lambda x: (-edeg(x[0]), -kg.relations[x[0]].weight, x[0]))

    def global_path(self, query: str) -> None:
        """High-level keywords → relations (their vectors), one hop to their endpoints."""
        state, kg, g, o = self.state, self.kg, self.g, self.o
        hvec = self.vec(self.kw.high_level or [query])
        seeds = _relation_candidates(
            state, g, hvec, self.entity_top(hvec)[0], int(o["relation_seed_chunks"]), o["relation_seed_cap"]
        )
        tv = relation_text_vectors(state) if o["relation_vectors"] == "auto" else None
        if tv is not None:  # an LLM build: the embedded keywords + names + description (spec §1.8)
            rsim = rows_dot(tv.vectors[seeds], np.asarray(hvec, np.float32))
        else:
            rv = relation_vectors(state, float(o["relation_chunk_weight"]))
            rsim = rv.similarity(g, state, seeds, hvec)
        found = []
        for i, s in self.top(seeds, rsim):
            found.append((g.key(kg, i), s, "global"))
            self.rel_rows[found[-1][0]] = i
            self.evidence_src["relation"].append((s, "relation", i))
        kept = _budget(self.rel_order(found), lambda x: self.rel_text(x[0]), state, o["max_relation_tokens"])
        ends: dict[str, float] = {}
        for key, s, _ in kept:
            self.relations.setdefault(key, (s, "global"))
            for eid in key:
                ends[eid] = max(ends.get(eid, 0.0), s)
        hop = self.ent_order([(e, s, "global") for e, s in ends.items()])
        hop = _budget(hop, lambda x: self.ent_text(x[0]), state, o["max_entity_tokens"])
        for eid, s, p in hop:
            self.entities.setdefault(eid, (s, p))
            self.evidence_src["hop"].append((s, "entity", kg.row[eid]))

    def local_path(self, query: str) -> None:
        """Low-level keywords → entities, one hop to their incident relations."""
        state, kg, o, entities = self.state, self.kg, self.o, self.entities
        rows, esim = self.entity_top(self.vec(self.kw.low_level or [query]))
        sims = {kg.entity_ids[r]: s for r, s in self.top(rows, esim)}
        for eid in self.kw.matched:  # named exactly by a keyword: always retrieved, first
            sims[eid] = max(sims.get(eid, 0.0), 1.0)
        found_e = self.ent_order([(e, s, "local") for e, s in sims.items()])
        for eid, s, _ in found_e:
            self.evidence_src["entity"].append((s, "entity", kg.row[eid]))
        kept_e = _budget(found_e, lambda x: self.ent_text(x[0]), state, o["max_entity_tokens"])
        hop_r = _incident_edges(kg, self.g, found_e, lambda x: self.rel_text(x[0]), o["max_relation_tokens"])
        for _, s, _, i in hop_r:
            self.evidence_src["hop"].append((s, "relation", i))
        for eid, s, p in kept_e:
            if eid not in entities or entities[eid][1] != "local":
                entities[eid] = (max(s, entities.get(eid, (0.0, ""))[0]), p)
        for key, s, p, i in hop_r:
            self.relations.setdefault(key, (s, p))
            self.rel_rows[key] = i


def _sources(state, g: LightGraph, evidence_src: Mapping[str, list], o: Mapping[str, Any]) -> list[tuple[int, float]]:
    """The Sources section: each part's evidence spread to chunks, scaled to its weight, summed,
    best first within ``max_source_tokens``: ``[(chunk_row, evidence), ...]``."""
    weights = {"entity": o["entity_weight"], "relation": o["relation_weight"], "hop": o["hop_weight"]}
    part_rows, part_values = [], []
    for part, srcs in evidence_src.items():
        rows, values = _spread(g, srcs, int(o["spread_max_chunks"]))
        if len(rows):
            part_rows.append(rows)
            part_values.append(float(weights[part]) * values / values.max())
    limit = o["max_source_tokens"]
    sources = []
    used = 0
    if part_rows:
        rows, inv = np.unique(np.concatenate(part_rows), return_inverse=True)
        evidence = np.bincount(inv, weights=np.concatenate(part_values), minlength=len(rows))
        for i in np.lexsort((rows, -evidence)).tolist():
            row = int(rows[i])
            t = count_tokens(state.chunks[row].text)
            if limit is not None and used + t > limit:
                break
            used += t
            sources.append((row, float(evidence[i])))
    return sources


def _mix(state, qvec: np.ndarray, k: int, graph: list[tuple[int, float]], floor: float,
         context: list[Hit]) -> tuple[Retrieval, dict[int, dict[str, int]]]:
    """Mix mode's chunk ranking (see :class:`LightRAG`, "Mix chunk scores"): the dense top
    ``k`` at cosine ≥ ``floor`` (the ``dense`` method's search) and ``graph`` (the hybrid
    mode's ranking, best first) merged by :func:`~.base.round_robin`, cut at ``k``.

    Returns:
        The :class:`Retrieval` (scores ``1 / (1 + round)``, ``chunk_metadata`` with each row's
        ``retrieved_by``, ``context``), and :func:`_mix_ranks` of the two lists."""
    vector = [(r, s) for r, s in rank(dense_candidates(state, qvec, k), k) if s >= floor]
    merged = round_robin((vector, graph), k)
    out = scored([(r, 1.0 / (1 + i)) for r, i in merged], unit, context)
    ranks = _mix_ranks(vector, graph)
    out.chunk_metadata = {r: {"retrieved_by": _retrieved_by(ranks[r])} for r, _ in merged}
    return out, ranks


def _mix_ranks(vector: list[tuple[int, float]], graph: list[tuple[int, float]]) -> dict[int, dict[str, int]]:
    """``{row: {"vector_rank": n, "graph_rank": m}}``: the 1-based rank of each row in the
    dense list and in the hybrid mode's chunk ranking (a key only where the list holds it)."""
    out: dict[int, dict[str, int]] = {}
    for key, ranking in (("vector_rank", vector), ("graph_rank", graph)):
        for n, (r, _) in enumerate(ranking, 1):
            out.setdefault(r, {})[key] = n
    return out


def _retrieved_by(ranks: Mapping[str, int]) -> str:
    """``"both"``, ``"vector"`` or ``"graph"`` (:data:`RETRIEVED_BY`) for a row's
    :func:`_mix_ranks` entry."""
    if "vector_rank" in ranks:
        return "both" if "graph_rank" in ranks else "vector"
    return "graph"


def _mix_lead(ranks: Mapping[str, int]) -> str:
    where = []
    if "vector_rank" in ranks:
        where.append(f"rank {ranks['vector_rank']} of the dense search")
    if "graph_rank" in ranks:
        where.append(f"rank {ranks['graph_rank']} of the graph ranking")
    return "mix: " + " and ".join(where)


def _documents(state, g: LightGraph, rel: int | None, chunk_ids: list[str]) -> list[str]:
    """Distinct document ids of relation ``rel``'s chunks (``state.document_ids_of(chunk_ids)``
    when its index is unknown)."""
    if rel is None:
        return state.document_ids_of(chunk_ids)
    return g.documents(g.rel_chunk_rows[g.rel_chunk_indptr[rel] : g.rel_chunk_indptr[rel + 1]])


_PATHS = {
    "local": "local path: retrieved by the low-level keywords",
    "global": "global path: endpoint of a relation the high-level keywords retrieved",
}
_RELATION_PATHS = {
    "local": "local path: incident to an entity the low-level keywords retrieved",
    "global": "global path: retrieved by the high-level keywords",
}


def _explain(state, query: str, qvec, out: Retrieval, ctx: LightRAGContext, base, evidence, hop, o,
             mix: Mapping[int, Mapping[str, int]] | None = None) -> None:
    """Fill ``out.explain`` and the context hits' ``explain`` (:mod:`.explain`): a chunk's seed
    signals and the query's keywords (the entities a keyword names exactly are its entity
    seeds), the context entities and relations that come from it, whether it made the Sources
    section, its second hop and score terms; entity / relation hits their path and cosine.
    ``mix`` (mode ``"mix"``: :func:`_mix_ranks`): a chunk's ranks in the two merged lists
    replace its score terms, which do not add up to its mix score."""
    name = LightRAG.name
    kg = state.kg
    kw = ctx.keywords
    keywords = {"low_level": list(kw.low_level), "high_level": list(kw.high_level), "source": kw.source}
    sims = {e: s for e, s, _ in ctx.entities}
    paths = {e: p for e, _, p in ctx.entities}
    named = set(kw.matched)
    rows = [r for r, _ in out.chunks]
    signals = ex.chunk_signals(state, query, qvec, rows)
    hop_seeds = [r for r, _ in rank(base, int(o["second_hop_seeds"]))] if hop else []
    for r in rows:
        cid = state.chunks[r].id
        here = ex.chunk_entity_ids(state, r)
        seeds = [ex.entity_ref(state, e, value=1.0) for e in here if e in named][: ex.MAX_LISTED]
        rels = [
            {"id": kg.relations[key].id, "source": key[0], "target": key[1], "path": p}
            for key, _, p in ctx.relations
            if cid in kg.relations[key].chunk_ids
        ][: ex.MAX_LISTED]
        out.explain[r] = ex.explanation(
            name,
            None if mix is None else _mix_lead(mix[r]),
            **ex.chunk_base(signals[r], hybrid=base.get(r), entities=seeds, keywords=keywords),
            matched_entities=ex.matched_in_chunk(state, r, sims, path=paths),
            matched_relations=rels,
            in_sources=r in evidence,
            second_hop=ex.second_hop(state, r, hop_seeds, int(o["second_hop_max_df"])) if r in hop else None,
            mix=None if mix is None else dict(mix[r]),
            score_parts=None if mix is not None else ex.parts(
                hybrid=base.get(r), graph=evidence.get(r), second_hop=hop.get(r)),
        )
    for h in out.context:
        path = h.metadata.get("path", "")
        if h.kind == "entity":
            lead = "named exactly by a low-level keyword" if h.id in named else _PATHS.get(path)
            h.explain = ex.explanation(
                name, lead, layer=0, similarity=h.metadata.get("similarity"), path=path,
                seeds={"keywords": keywords},
            )
        elif h.kind == "relation":
            ends = h.id.split("\u241f")
            h.explain = ex.explanation(
                name, _RELATION_PATHS.get(path), layer=0, similarity=h.metadata.get("similarity"), path=path,
                matched_entities=[ex.entity_ref(state, e, **({"path": paths[e]} if e in paths else {}))
                                  for e in ends],
                seeds={"keywords": keywords},
            )
