"""LightRAG retrieval, offline (spec seed-lightrag.md §2: dual-level retrieval).

1. **Keywords** (spec §2.2 step 1, §2.3). The paper asks an LLM for high-level (themes) and
   low-level (specific entities) keywords; so do we when the query has an LLM (the ``llm``
   option, else the state's ``llm``): one call, stage ``"query:keywords"``
   (:mod:`graphstrata.llm.prompts.lightrag_query`); output the parser cannot read falls back
   to the offline keywords for that query and is counted with ``LLMClient.skip``. Offline,
   :func:`offline_keywords` matches the query's word n-grams against the corpus vocabulary
   (entity ids): low-level = the longest non-overlapping n-grams that name an entity, plus
   capitalised spans of the query the KG does not know; high-level = the remaining content
   words. ``keywords_fn=callable(query) -> (high_level, low_level)`` overrides both.
2. **Low-level / local path** (spec §2.4): the low-level keywords search the *entity* vectors
   (exact cosine, ``top_k``, floor ``min_similarity``; entities named exactly by a keyword
   come first); one-hop expansion = every relation incident to a retrieved entity, ranked by
   edge degree ``deg(u) + deg(v)`` then weight, cut at ``max_relation_tokens``.
3. **High-level / global path**: the high-level keywords search the *relation* vectors; the
   kept relations are ranked by (edge degree, weight) and cut at ``max_relation_tokens``;
   one-hop expansion = their endpoint entities, ranked by degree, cut at
   ``max_entity_tokens``.
4. **Hybrid** = the de-duplicated union of both paths (no re-truncation, spec §2.4).
5. **Sources**: chunks ranked by graph evidence (similarity-weighted, hub-damped mentions by
   the retrieved entities and relations and their one-hop expansion) and cut at
   ``max_source_tokens``; the returned chunk ranking fuses that evidence with the hybrid
   (dense + BM25) score, as ArchRAG does, so every mode returns ``k`` ranked chunks.

Relation vectors (spec §1.8: keywords + endpoints + description, one vector per relation) are
never embedded: a relation's vector is the normalised combination
``(1 − w)·mean(endpoint entity vectors) + w·mean(source chunk vectors)`` (``w`` =
``relation_chunk_weight``) and its cosine to a query is computed from the entity and chunk
similarities through two sparse matrices (``state.derived("lightrag:relations:<w>")``), so
no relation matrix is materialised.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..extraction import canonical, capitalised_spans
from ..llm.client import LLMClient
from ..llm.prompts.lightrag_query import keywords_request, parse_keywords
from ..scores import bounded, relative
from ..types import Hit
from . import explain as ex
from .base import (
    COSINE,
    TOKEN_BUDGET,
    UNIT,
    Method,
    OptionSpec,
    Retrieval,
    hybrid_scores,
    query_llm,
    rank,
    scored,
    spread_to_chunks,
)
from .graph_ops import add_second_hop

#: ledger stage of the keyword-extraction call
KEYWORDS_STAGE = "query:keywords"

KeywordsFn = Callable[[str], tuple[Sequence[str], Sequence[str]]]
"""``keywords_fn(query) -> (high_level_keywords, low_level_keywords)``: the LLM seam."""

MODES = ("local", "global", "hybrid")

_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_WORD_RE = re.compile(r"[\w][\w'’\-.&]*[\w]|\w", re.UNICODE)


def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


# -- keywords ----------------------------------------------------------------------------------


@dataclass
class Keywords:
    """The two keyword lists of a query (spec §2.3 JSON: high_level / low_level keywords).

    Attributes:
        high_level: themes / concepts (search relations).
        low_level: specific entities and details (search entities).
        matched: entity ids named exactly by a low-level keyword (vocabulary match).
        source: where they came from: ``"offline"`` (:func:`offline_keywords`, also the
            fallback for unreadable LLM output), ``"llm"`` (the keyword prompt) or
            ``"function"`` (a ``keywords_fn``).
    """

    high_level: list[str]
    low_level: list[str]
    matched: list[str] = field(default_factory=list)
    source: str = "offline"


def offline_keywords(query: str, vocabulary: Iterable[str] | Any, max_ngram: int = 5) -> Keywords:
    """Statistical stand-in for the keyword LLM call.

    Args:
        query: the question.
        vocabulary: entity ids (canonical names) — anything supporting ``in``.
        max_ngram: longest word n-gram tried against the vocabulary.

    Returns:
        :class:`Keywords`: low-level = longest-first, non-overlapping query n-grams whose
        canonical form is an entity id (n-grams never start or end with a stop word, and
        single stop words never match), then capitalised spans
        of the query not already covered; high-level = the remaining non-stop words, in query
        order. ``matched`` lists the matched entity ids in query order.
    """
    stop = _stop_words()
    words = [(m.start(), m.end()) for m in _WORD_RE.finditer(query)]
    used = [False] * len(words)
    found: list[tuple[int, str, str]] = []  # (first word index, surface, entity id)
    for n in range(min(max_ngram, len(words)), 0, -1):
        for i in range(len(words) - n + 1):
            if any(used[i : i + n]):
                continue
            surface = query[words[i][0] : words[i + n - 1][1]]
            key = canonical(surface)
            if not key or (n == 1 and (key in stop or len(key) < 2)):
                continue
            edge_words = (query[slice(*words[i])], query[slice(*words[i + n - 1])])
            if n > 1 and any(canonical(w) in stop for w in edge_words):
                continue  # "the founder", "Paris in": let the shorter n-gram match
            if key in vocabulary:
                found.append((i, surface, key))
                for j in range(i, i + n):
                    used[j] = True
    found.sort()
    low = [s for _, s, _ in found]
    matched = list(dict.fromkeys(k for _, _, k in found))
    covered = {canonical(s) for s in low}
    for span in capitalised_spans(query):
        key = canonical(span)
        if key and key not in covered and key not in stop:
            low.append(span)
            covered.add(key)
    high = [
        query[s:e]
        for (s, e), u in zip(words, used, strict=True)
        if not u and canonical(query[s:e]) not in stop and canonical(query[s:e]) not in covered
    ]
    return Keywords(high_level=high, low_level=low, matched=matched)


def llm_keywords(client: LLMClient, query: str) -> tuple[list[str], list[str]] | None:
    """Ask ``client`` for the query's ``(high_level, low_level)`` keywords (spec §2.3; one
    call, stage ``"query:keywords"``, JSON mode, cached by the client).

    Returns:
        The two lists, or ``None`` when the output is unreadable
        (:func:`~graphstrata.llm.prompts.lightrag_query.parse_keywords`); that is counted as
        one skipped record of the stage.

    Raises:
        LLMError: the call failed after the client's retries.
    """
    out = parse_keywords(client.request(keywords_request(query), KEYWORDS_STAGE).text)
    if out is None:
        client.skip(KEYWORDS_STAGE)
    return out


def _keywords(state, query: str, fn: KeywordsFn | None, client: LLMClient | None = None) -> Keywords:
    """The query's keywords: ``fn`` when given, else the LLM when there is one (offline
    fallback on unreadable output), else :func:`offline_keywords`."""
    if fn is not None:
        out, source = fn(query), "function"
    elif client is not None:
        out, source = llm_keywords(client, query), "llm"
    else:
        out = None
    if out is None:
        return offline_keywords(query, state.kg.entities)
    if isinstance(out, dict):  # the spec's JSON shape
        high, low = out.get("high_level_keywords", []), out.get("low_level_keywords", [])
    else:
        high, low = out
    high = [str(x) for x in high if str(x).strip()]
    low = [str(x) for x in low if str(x).strip()]
    matched = list(dict.fromkeys(canonical(x) for x in low if canonical(x) in state.kg.entities))
    return Keywords(high_level=high, low_level=low, matched=matched, source=source)


# -- derived structures ------------------------------------------------------------------------


@dataclass
class RelationIndex:
    """Implicit relation vectors (see the module docstring).

    Attributes:
        keys: relation keys ``(source, target)`` in ``kg.relations`` order.
        src, dst: int64 entity rows of the endpoints.
        chunk_mean: CSR ``(n_relations, n_chunks)``, rows sum to 1 over the source chunks.
        norms: float32 norms of the unnormalised combined vectors.
        weight: the chunk weight ``w`` used.
        degree: float32 entity degrees (number of neighbours).
    """

    keys: list[tuple[str, str]]
    src: np.ndarray
    dst: np.ndarray
    chunk_mean: sp.csr_matrix
    norms: np.ndarray
    weight: float
    degree: np.ndarray

    def similarity(self, entity_sims: np.ndarray, chunk_sims: np.ndarray) -> np.ndarray:
        """Cosine of the query to every relation vector, from the query's entity and chunk
        similarities: float32 ``(n_relations,)``."""
        if not self.keys:
            return np.zeros(0, np.float32)
        w = self.weight
        v = (1.0 - w) * 0.5 * (entity_sims[self.src] + entity_sims[self.dst])
        if w > 0:
            v = v + w * (self.chunk_mean @ chunk_sims)
        return (v / self.norms).astype(np.float32)


def relation_index(state, weight: float) -> RelationIndex:
    """Build (or fetch the cached) :class:`RelationIndex` for chunk weight ``weight``."""

    def build() -> RelationIndex:
        kg = state.kg
        keys = list(kg.relations)
        n_chunks = len(state.chunks)
        adj = kg.adjacency()
        degree = np.diff(adj.indptr).astype(np.float32)
        if not keys:
            z = np.zeros(0, np.int64)
            return RelationIndex([], z, z, sp.csr_matrix((0, n_chunks)), np.zeros(0, np.float32),
                                 weight, degree)
        src = np.fromiter((kg.row[a] for a, _ in keys), np.int64, len(keys))
        dst = np.fromiter((kg.row[b] for _, b in keys), np.int64, len(keys))
        rows, cols, vals = [], [], []
        for i, key in enumerate(keys):
            cids = [
                state.chunk_row[c] for c in kg.relations[key].chunk_ids if c in state.chunk_row
            ]
            if cids:
                rows.extend([i] * len(cids))
                cols.extend(cids)
                vals.extend([1.0 / len(cids)] * len(cids))
        chunk_mean = sp.csr_matrix(
            (
                np.asarray(vals, np.float32),
                (np.asarray(rows, np.int64), np.asarray(cols, np.int64)),
            ),
            shape=(len(keys), n_chunks),
        )
        ents = state.vectors["entities"]
        chunks = state.vectors["chunks"]
        norms = np.empty(len(keys), np.float32)
        step = 8192
        for s in range(0, len(keys), step):
            e = slice(s, s + step)
            v = (1.0 - weight) * 0.5 * (ents[src[e]] + ents[dst[e]])
            if weight > 0:
                v = v + weight * np.asarray(chunk_mean[e] @ chunks)
            norms[e] = np.linalg.norm(v, axis=1)
        norms = np.maximum(norms, 1e-6)
        return RelationIndex(keys, src, dst, chunk_mean, norms, weight, degree)

    return state.derived(f"lightrag:relations:{float(weight):g}", build)


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


def _incident_edges(kg, found: list[tuple[str, float, str]], degree: np.ndarray):
    """One-hop expansion of the local path: every relation incident to a found entity, as
    ``(key, similarity of its best found endpoint, "local")`` ranked by edge degree, then
    weight, then endpoint rows (vectorised: hub entities have thousands of edges)."""
    if not found:
        return []
    adj = kg.adjacency()
    rows = np.fromiter((kg.row[e] for e, _, _ in found), np.int64, len(found))
    sims = np.fromiter((s for _, s, _ in found), np.float64, len(found))
    counts = np.diff(adj.indptr)[rows]
    if counts.sum() == 0:
        return []
    u = np.repeat(rows, counts)
    s = np.repeat(sims, counts)
    spans = [slice(adj.indptr[r], adj.indptr[r + 1]) for r in rows]
    v = np.concatenate([adj.indices[s] for s in spans]).astype(np.int64)
    w = np.concatenate([adj.data[s] for s in spans]).astype(np.float64)
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    key = lo * len(kg.entity_ids) + hi
    first = np.lexsort((-s, key))  # by key, best similarity first
    keep = first[np.r_[True, key[first][1:] != key[first][:-1]]]
    lo, hi, s, w = lo[keep], hi[keep], s[keep], w[keep]
    edeg = degree[lo] + degree[hi]
    order = np.lexsort((hi, lo, -w, -edeg))
    ids = kg.entity_ids
    return [((ids[lo[i]], ids[hi[i]]), float(s[i]), "local") for i in order.tolist()]


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
    """

    keywords: Keywords
    entities: list[tuple[str, float, str]]
    relations: list[tuple[tuple[str, str], float, str]]
    sources: list[tuple[int, float]]


class LightRAG(Method):
    """LightRAG dual-level retrieval, offline (spec seed-lightrag.md §2, §2.4 mechanics).

    Options:
        mode: ``"local"`` (low-level keywords → entities → incident relations),
            ``"global"`` (high-level keywords → relations → endpoint entities) or
            ``"hybrid"`` (both, the default; spec §2.4, the paper's "LightRAG").
        keywords_fn: ``None`` (the LLM keyword prompt when the query has an LLM, else
            offline vocabulary matching, :func:`offline_keywords`) or
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
        relation_chunk_weight: weight of the source-chunk centroid in a relation's vector
            (the rest is the endpoint-entity centroid).
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
        second_hop_weight, second_hop_seeds, second_hop_max_df: second-hop chunk evidence
            (:func:`~graphstrata.methods.base.bridge_evidence`, shared with ArchRAG): chunks of
            other documents sharing an entity of at most ``second_hop_max_df`` chunks with
            the top ``second_hop_seeds`` hybrid chunks; 0 disables. 0.3 measured as the
            compromise: 0.5 lifts musique recall@5/10 by ~3 points but costs hotpotqa
            recall@2 ~2 points (150 questions each).

    Ambiguities (spec §8) taken: 1/2 single vector per entity / relation (composed, not
    embedded); 4 one-hop expansion as in the code (local: incident edges, global: endpoints);
    5 ``top_k`` 60 and 4000-token budgets; 6 the entity list is truncated too; 8 hybrid
    order is deterministic: each kind sorted by its rank (degree), ties by weight then id —
    not "high-level rows first", so that context hits stay ordered by score as the core API
    promises. Entity hits are ranked by degree, relation hits by edge degree (the spec's rank
    column): hit ``score`` = that rank over the section's first (in [0, 1], non-increasing),
    ``metadata["raw_score"]`` = the degree itself, ``metadata["similarity"]`` = the cosine.

    Chunk scores: ``(hybrid + Σ weight · normalised evidence) / (1 + entity_weight +
    relation_weight + hop_weight + second_hop_weight)``, a weighted mean of parts in [0, 1];
    raw score: the weighted sum.
    """

    name = "lightrag"
    defaults = {
        "mode": "hybrid",
        "keywords_fn": None,
        "top_k": 60,
        "min_similarity": 0.2,
        "keyword_vectors": "auto",
        "relation_chunk_weight": 0.5,
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
    }
    option_specs = {
        "mode": OptionSpec(choices=MODES),
        "keywords_fn": OptionSpec("callable"),
        "min_similarity": COSINE,
        "keyword_vectors": OptionSpec(choices=("auto", "keywords", "query")),
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
        o = self.options(options)
        return self._context(state, query, qvec, o)[0]

    def _context(self, state, query, qvec, o):
        kg = state.kg
        client = query_llm(state, o) if o["keywords_fn"] is None else None
        kw = _keywords(state, query, o["keywords_fn"], client)
        mode = o["mode"]
        top_k = int(o["top_k"])
        floor = float(o["min_similarity"])
        ents_vec = state.vectors.get("entities")
        empty = LightRAGContext(kw, [], [], [])
        if not len(kg) or ents_vec is None or len(ents_vec) == 0:
            return empty, {}
        rel_index = relation_index(state, float(o["relation_chunk_weight"]))
        degree = rel_index.degree

        kv = o["keyword_vectors"]

        def vec(words: list[str]) -> np.ndarray:
            if not words or kv == "query" or (kv == "auto" and kw.source == "offline"):
                return qvec
            return np.asarray(state.embedder.embed([", ".join(words)])[0], np.float32)

        sims_of: dict[int, np.ndarray] = {}

        def entity_sims(v: np.ndarray) -> np.ndarray:
            # global and local modes share the scan when they query the same vector (offline)
            if id(v) not in sims_of:
                sims_of[id(v)] = ents_vec @ v
            return sims_of[id(v)]

        def top(scores: np.ndarray, n: int) -> list[int]:
            n = min(n, len(scores))
            if n <= 0:
                return []
            idx = np.argpartition(-scores, n - 1)[:n]
            idx = idx[scores[idx] >= floor]
            return sorted(idx.tolist(), key=lambda i: (-scores[i], i))

        def edeg(key):
            return float(degree[kg.row[key[0]]] + degree[kg.row[key[1]]])

        def ent_text(eid):
            e = kg.entities[eid]
            return f"{e.name}: {e.description}" if e.description else e.name

        def rel_text(key):
            r = kg.relations[key]
            return f"{kg.entities[key[0]].name} — {kg.entities[key[1]].name}: {r.description}"

        def ent_order(items):  # rank = degree, then weight, then id
            return sorted(
                items, key=lambda x: (-degree[kg.row[x[0]]], -kg.entities[x[0]].weight, x[0])
            )

        def rel_order(items):
            return sorted(items, key=lambda x: (-edeg(x[0]), -kg.relations[x[0]].weight, x[0]))

        entities: dict[str, tuple[float, str]] = {}
        relations: dict[tuple[str, str], tuple[float, str]] = {}
        evidence_src: dict[str, list[tuple[float, list[str]]]] = {
            "entity": [], "relation": [], "hop": []
        }
        ent_limit, rel_limit = o["max_entity_tokens"], o["max_relation_tokens"]

        if mode in ("global", "hybrid"):
            hvec = vec(kw.high_level or [query])
            esim = entity_sims(hvec)
            csim = state.vectors["chunks"] @ hvec
            rsim = rel_index.similarity(esim, csim)
            found = [(rel_index.keys[i], float(rsim[i]), "global") for i in top(rsim, top_k)]
            for key, s, _ in found:
                evidence_src["relation"].append((s, kg.relations[key].chunk_ids))
            kept = _budget(rel_order(found), lambda x: rel_text(x[0]), state, rel_limit)
            ends: dict[str, float] = {}
            for key, s, _ in kept:
                relations.setdefault(key, (s, "global"))
                for eid in key:
                    ends[eid] = max(ends.get(eid, 0.0), s)
            hop = ent_order([(e, s, "global") for e, s in ends.items()])
            hop = _budget(hop, lambda x: ent_text(x[0]), state, ent_limit)
            for eid, s, p in hop:
                entities.setdefault(eid, (s, p))
                evidence_src["hop"].append((s, kg.entities[eid].chunk_ids))

        if mode in ("local", "hybrid"):
            lvec = vec(kw.low_level or [query])
            esim = entity_sims(lvec)
            rows = top(esim, top_k)
            sims = {kg.entity_ids[r]: float(esim[r]) for r in rows}
            for eid in kw.matched:  # named exactly by a keyword: always retrieved, first
                sims[eid] = max(sims.get(eid, 0.0), 1.0)
            found_e = ent_order([(e, s, "local") for e, s in sims.items()])
            for eid, s, _ in found_e:
                evidence_src["entity"].append((s, kg.entities[eid].chunk_ids))
            kept_e = _budget(found_e, lambda x: ent_text(x[0]), state, ent_limit)
            hop_r = _budget(
                _incident_edges(kg, found_e, degree), lambda x: rel_text(x[0]), state, rel_limit
            )
            for key, s, _ in hop_r:
                evidence_src["hop"].append((s, kg.relations[key].chunk_ids))
            for eid, s, p in kept_e:
                if eid not in entities or entities[eid][1] != "local":
                    entities[eid] = (max(s, entities.get(eid, (0.0, ""))[0]), p)
            for key, s, p in hop_r:
                relations.setdefault(key, (s, p))

        ent_list = ent_order([(e, s, p) for e, (s, p) in entities.items()])
        rel_list = rel_order([(k, s, p) for k, (s, p) in relations.items()])
        weights = {
            "entity": o["entity_weight"], "relation": o["relation_weight"], "hop": o["hop_weight"]
        }
        evidence: dict[int, float] = {}
        for part, srcs in evidence_src.items():
            ev = spread_to_chunks(srcs, state)
            if not ev:
                continue
            top_ev = max(ev.values())
            for r, v in ev.items():
                evidence[r] = evidence.get(r, 0.0) + float(weights[part]) * v / top_ev
        ranked = rank(evidence, len(evidence))
        limit = o["max_source_tokens"]
        sources = []
        used = 0
        for row, v in ranked:
            t = count_tokens(state.chunks[row].text)
            if limit is not None and used + t > limit:
                break
            used += t
            sources.append((row, v))
        return LightRAGContext(kw, ent_list, rel_list, sources), dict(sources)

    # -- retrieval -----------------------------------------------------------------------
    def retrieve(self, state, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        o = self.options(options)
        ctx, evidence = self._context(state, query, qvec, o)
        n = max(int(o["candidates"]), k)
        base = hybrid_scores(state, query, qvec, n, float(o["alpha"]), extra_rows=evidence)
        scores = dict(base)
        for r, v in evidence.items():
            scores[r] = scores.get(r, 0.0) + v
        hop = add_second_hop(state, scores, base, o)
        # hybrid (≤ 1) + each evidence part and the second hop (≤ its weight)
        bound = 1.0 + sum(
            float(o[w])
            for w in ("entity_weight", "relation_weight", "hop_weight", "second_hop_weight")
        )
        out = scored(rank(scores, k), lambda v: bounded(v, bound), self._hits(state, ctx))
        if o["explain"]:
            _explain(state, query, qvec, out, ctx, base, evidence, hop, o)
        return out

    @staticmethod
    def _hits(state, ctx: LightRAGContext) -> list[Hit]:
        kg = state.kg
        adj = kg.adjacency()
        degree = np.diff(adj.indptr)
        hits: list[Hit] = []
        # scores: the rank column (degree, edge degree) relative to the first of its section
        top_e = max((float(degree[kg.row[e]]) for e, _, _ in ctx.entities), default=0.0)
        top_r = max(
            (float(degree[kg.row[a]] + degree[kg.row[b]]) for (a, b), _, _ in ctx.relations),
            default=0.0,
        )
        for eid, sim, path in ctx.entities:
            e = kg.entities[eid]
            hits.append(
                Hit(
                    id=e.id,
                    text=f"{e.name}: {e.description}" if e.description else e.name,
                    score=relative(float(degree[kg.row[eid]]), top_e),
                    kind="entity",
                    layer=0,
                    chunk_ids=list(e.chunk_ids),
                    document_ids=state.document_ids_of(e.chunk_ids),
                    metadata={"name": e.name, "type": e.type, "weight": e.weight, "similarity": sim,
                              "rank": int(degree[kg.row[eid]]), "path": path,
                              "raw_score": float(degree[kg.row[eid]])},
                )
            )
        for key, sim, path in ctx.relations:
            r = kg.relations[key]
            a, b = kg.entities[key[0]], kg.entities[key[1]]
            d = int(degree[kg.row[key[0]]] + degree[kg.row[key[1]]])
            hits.append(
                Hit(
                    id=r.id,
                    text=f"{a.name} — {b.name}: {r.description}",
                    score=relative(float(d), top_r),
                    kind="relation",
                    layer=0,
                    chunk_ids=list(r.chunk_ids),
                    document_ids=state.document_ids_of(r.chunk_ids),
                    metadata={"source": a.name, "target": b.name, "weight": r.weight,
                              "keywords": r.keywords, "similarity": sim, "rank": d, "path": path,
                              "raw_score": float(d)},
                )
            )
        return hits


_PATHS = {
    "local": "local path: retrieved by the low-level keywords",
    "global": "global path: endpoint of a relation the high-level keywords retrieved",
}
_RELATION_PATHS = {
    "local": "local path: incident to an entity the low-level keywords retrieved",
    "global": "global path: retrieved by the high-level keywords",
}


def _explain(state, query: str, qvec, out: Retrieval, ctx: LightRAGContext, base, evidence, hop, o) -> None:
    """Fill ``out.explain`` and the context hits' ``explain`` (:mod:`.explain`): a chunk's seed
    signals and the query's keywords (the entities a keyword names exactly are its entity
    seeds), the context entities and relations that come from it, whether it made the Sources
    section, its second hop and score terms; entity / relation hits their path and cosine."""
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
            None,
            **ex.chunk_base(signals[r], hybrid=base.get(r), entities=seeds, keywords=keywords),
            matched_entities=ex.matched_in_chunk(state, r, sims, path=paths),
            matched_relations=rels,
            in_sources=r in evidence,
            second_hop=ex.second_hop(state, r, hop_seeds, int(o["second_hop_max_df"])) if r in hop else None,
            score_parts=ex.parts(hybrid=base.get(r), graph=evidence.get(r), second_hop=hop.get(r)),
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
