"""Layers of attributed communities over the knowledge graph (ArchRAG Algorithm 1, §3.1.2).

One iteration of :func:`attributed_communities` (spec seed-archrag.md §1.3, the CODE procedure):

1. weight every existing edge by the cosine similarity of its endpoints' vectors (spec A1:
   similarity, not ``1 − cos``, clipped to ``min_weight``);
2. augment with k-NN edges (spec A3): ``K`` = mean degree of non-isolated nodes (capped at
   ``max_knn``), ``int(1.5·K)+1`` nearest candidates per node (exact, scikit-learn
   ``NearestNeighbors``, up to :data:`EXACT_KNN_MAX` nodes; above, one batch search of a C-HNSW
   over the level's vectors — the entity layer of the build's own index at level 1 — so no
   step is quadratic in the number of entities), keep at most ``K`` new edges whose cosine
   exceeds the ``similarity_percentile`` of existing-edge cosines;
3. weighted Leiden with a maximum community size (graspologic-native ``hierarchical_leiden``,
   leaf clusters, fixed seed, spec A4); nodes left without any edge join the community of their
   nearest clustered neighbour (our choice: the spec leaves them undefined);
4. stop when a level yields fewer than ``min_communities`` communities (the level is discarded)
   or ``max_layers`` layers exist (spec A5);
5. summarise each community (extractive offline: :func:`extractive_summary`); its vector is
   the embedding of ``title + summary`` (spec §1.5) or, offline by default, the normalised
   centroid of its members' vectors;
6. the next level's graph: one node per community, an edge between two communities whose
   members are linked in the level's original graph (spec A2).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from .heap import release_free_memory
from .types import Community

log = logging.getLogger(__name__)

LEIDEN_SEED = 0xDEADBEEF

EXACT_KNN_MAX = 5_000
"""Levels with more nodes than this take their k-NN candidates from a C-HNSW graph
(approximate, about ``n log n``) rather than an exact scan (``n²``: 30 CPU-seconds for the
36k entities of MuSiQue against about 7 CPU-seconds for the graph search at beam 34)."""

Neighbours = Callable[[int], tuple[np.ndarray, np.ndarray]]
"""``neighbours(k) -> (rows, similarity)``: int64 / float32 ``(n, k)`` nearest rows of every node
of a level, best first, ``-1`` / ``-inf`` padded (:meth:`graphstrata.index.LayeredIndex.knn`)."""


def nearest_neighbours(
    vectors: np.ndarray, k: int, neighbours: Neighbours | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest nodes of every node (itself included), best first.

    Exact (scikit-learn brute force, cosine) up to :data:`EXACT_KNN_MAX` nodes; above, from
    ``neighbours`` when given, else from a C-HNSW built over ``vectors`` here.

    Returns:
        ``(rows, similarity)``: int64 and float ``(n, k)``; ``-1`` / ``-inf`` padding.
    """
    n = len(vectors)
    if n <= EXACT_KNN_MAX:
        from sklearn.neighbors import NearestNeighbors

        nn = NearestNeighbors(n_neighbors=k, metric="cosine", algorithm="brute")
        nn.fit(vectors)
        dist, idx = nn.kneighbors(vectors)
        return idx.astype(np.int64), 1.0 - dist
    if neighbours is None:
        from .index import LayeredIndex

        neighbours = LayeredIndex.build([vectors]).knn
    return neighbours(k)


@dataclass
class HierarchyConfig:
    """Parameters of Algorithm 1 (defaults: ArchRAG CODE run script, spec §1.6)."""

    max_community_size: int = 15
    min_communities: int = 10
    max_layers: int = 5
    similarity_percentile: float = 80.0
    max_knn: int = 10
    min_weight: float = 0.01
    seed: int = LEIDEN_SEED


EDGE_BLOCK = 65_536
"""Edges per block of :func:`_edge_cosines` (two float32 ``(block, dim)`` gathers at a time,
instead of two ``(m, dim)`` copies: 2.7 GB at 100k chunks)."""


def _edge_cosines(vectors: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """float32 ``(m,)`` cosines of the edges' endpoint vectors (rows L2-normalised), computed
    a block of :data:`EDGE_BLOCK` edges at a time (the same values as one pass)."""
    out = np.zeros(len(edges), dtype=np.float32)
    for start in range(0, len(edges), EDGE_BLOCK):
        e = edges[start : start + EDGE_BLOCK]
        out[start : start + len(e)] = np.einsum("ij,ij->i", vectors[e[:, 0]], vectors[e[:, 1]])
    return out


def knn_augment(
    vectors: np.ndarray, edges: np.ndarray, config: HierarchyConfig, neighbours: Neighbours | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Augmented weighted edge list of one level (steps 1–2 above).

    Args:
        vectors: float32 ``(n, dim)``, rows L2-normalised.
        edges: int64 ``(m, 2)`` existing undirected edges, ``i < j``, no duplicates.
        config: hierarchy parameters.
        neighbours: k-NN of a level over :data:`EXACT_KNN_MAX` nodes from an index the caller
            already has (see :func:`nearest_neighbours`).

    Returns:
        ``(edges, weights)``: int64 ``(m', 2)`` and float32 ``(m',)`` cosine weights.
    """
    n = len(vectors)
    cos = _edge_cosines(vectors, edges)
    if n < 2:
        return edges, np.maximum(cos, config.min_weight)
    degree = np.bincount(edges.ravel(), minlength=n) if len(edges) else np.zeros(n, int)
    if len(edges):
        k = int(degree[degree > 0].mean())
        threshold = float(np.percentile(cos, config.similarity_percentile))
    else:
        k = int(np.sqrt(n) / 2)
        threshold = -1.0
    k = max(1, min(k, config.max_knn, n - 1))
    n_candidates = min(n, int(1.5 * k) + 2)  # +1 for the node itself
    idx, sims = nearest_neighbours(vectors, n_candidates, neighbours)
    # candidates come best first, padded with -1 / -inf: "skip the node itself, stop at the first
    # candidate at or below the threshold" is a prefix mask, and the pairs become int keys
    idx = np.asarray(idx, dtype=np.int64)
    valid = (idx >= 0) & (np.asarray(sims) > threshold)
    itself = idx == np.arange(n)[:, None]
    ok = valid & ~itself & np.cumprod(valid | itself, axis=1).astype(bool)
    us, cols = np.nonzero(ok)  # row-major: node by node, best candidate first
    vs = idx[us, cols]
    keys = np.minimum(us, vs) * n + np.maximum(us, vs)  # pair (a, b), a < b, as a·n + b
    del idx, sims, valid, itself, ok, cols, vs
    if len(edges):  # candidates that are edges already are skipped whatever the order
        fresh = ~np.isin(keys, edges[:, 0] * n + edges[:, 1])
        us, keys = us[fresh], keys[fresh]
    new_keys = _take_pairs(us, keys, n, k)
    if len(new_keys):
        new_edges = np.stack([new_keys // n, new_keys % n], axis=1)
        edges = np.vstack([edges, new_edges]) if len(edges) else new_edges
        cos = np.concatenate([cos, _edge_cosines(vectors, new_edges)])
    return edges, np.maximum(cos, config.min_weight).astype(np.float32)


def leiden_edges(a: np.ndarray, b: np.ndarray, weights: np.ndarray) -> list[tuple[str, str, float]]:
    """graspologic-native's edge list: ``(str(a[e]), str(b[e]), float(weights[e]))`` per edge,
    in edge order. Each node's label is one string object shared by all its edges (a string per
    endpoint doubled the memory of the list: ~2 GB at a million chunks).

    Args:
        a, b: int ``(m,)`` endpoint node indices (``>= 0``); weights: ``(m,)`` edge weights.
    """
    if len(a) == 0:
        return []
    names = [str(i) for i in range(int(max(a.max(), b.max())) + 1)]
    return list(
        zip(
            [names[x] for x in np.asarray(a).tolist()],
            [names[y] for y in np.asarray(b).tolist()],
            np.asarray(weights).tolist(),
            strict=True,
        )
    )


KNN_PAIR_BLOCK = 1 << 20
"""Candidate pairs :func:`_take_pairs` walks as Python ints at once: the whole candidate list as
two Python lists and the set of taken keys came to ~2 GB at a million chunks (issue 33)."""


def _take_pairs(us: np.ndarray, keys: np.ndarray, n: int, k: int) -> np.ndarray:
    """The pairs taken in candidate order: node ``us[i]`` takes pair ``keys[i]`` unless it has
    ``k`` pairs already or an earlier candidate took that pair (knn_augment's step 2).

    Walked :data:`KNN_PAIR_BLOCK` candidates at a time: pairs taken in earlier blocks are a
    sorted int64 array (8 bytes a pair) checked for a whole block at once, those of the block in
    a small set; the same pairs in the same order as one walk over everything.

    Args:
        us: int64 ``(c,)`` the node of each candidate, candidates in order.
        keys: int64 ``(c,)`` the candidate pair ``a * n + b`` (``a < b``).
        n: nodes of the level; k: pairs a node may take.

    Returns:
        int64 ``(t,)`` the keys taken, in the order they were taken.
    """
    count = [0] * n  # pairs each node has taken (small ints: one shared object each)
    earlier = np.zeros(0, np.int64)  # sorted keys taken by earlier blocks
    parts: list[np.ndarray] = []
    for start in range(0, len(us), KNN_PAIR_BLOCK):
        block_us, block_keys = us[start : start + KNN_PAIR_BLOCK], keys[start : start + KNN_PAIR_BLOCK]
        seen = np.isin(block_keys, earlier)
        taken: set[int] = set()
        out: list[int] = []
        for u, key, old in zip(block_us.tolist(), block_keys.tolist(), seen.tolist(), strict=True):
            if old or count[u] >= k or key in taken:
                continue
            taken.add(key)
            out.append(key)
            count[u] += 1
        del taken
        if out:
            part = np.asarray(out, dtype=np.int64)
            parts.append(part)
            earlier = np.union1d(earlier, part)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


ASSIGN_EXACT_MAX = 50_000_000
"""A node left without any edge joins the cluster of its nearest clustered node. Up to this
many (unclustered × clustered) pairs, and at most :data:`ASSIGN_EXACT_COLUMNS` clustered nodes,
that is one exact product as always; above (a million-chunk corpus: hundreds of such nodes
against millions), the level's C-HNSW proposes candidates when the caller has one
(:func:`leiden_clusters` ``search``), else the scan runs a block of columns at a time."""

ASSIGN_EXACT_COLUMNS = 200_000
"""Most clustered nodes gathered for the one exact product of :data:`ASSIGN_EXACT_MAX`."""

SearchFn = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]
"""``search(queries, k) -> (rows, similarity)``: int64 / float32 ``(q, k)`` nearest nodes of a
level for float32 ``(q, dim)`` queries, best first, ``-1`` / ``-inf`` padded
(:meth:`graphstrata.index.LayeredIndex.search_layer`)."""


def leiden_clusters(
    n: int,
    edges: np.ndarray,
    weights: np.ndarray,
    vectors: np.ndarray,
    config: HierarchyConfig,
    search: SearchFn | None = None,
) -> list[list[int]]:
    """Weighted Leiden with a size cap (graspologic-native), every node assigned.

    Args:
        n: nodes of the level.
        edges: int64 ``(m, 2)`` undirected edges.
        weights: float32 ``(m,)`` edge weights.
        vectors: float32 ``(n, dim)`` L2-normalised node vectors.
        config: hierarchy parameters.
        search: the level's C-HNSW search, used past :data:`ASSIGN_EXACT_MAX` to find the
            nearest clustered node of a node without edges.

    Returns:
        Clusters as lists of node indices, each of size ≤ ``max_community_size`` except when a
        node without edges is attached to its nearest clustered neighbour's cluster; clusters
        sorted by their smallest member.
    """
    import graspologic_native as gn

    label = np.full(n, -1, dtype=np.int64)
    if len(edges):
        edge_list = leiden_edges(edges[:, 0], edges[:, 1], weights)
        result = gn.hierarchical_leiden(
            edge_list,
            max_cluster_size=config.max_community_size,
            seed=config.seed,
            resolution=1.0,
        )
        del edge_list
        final = {}
        for hc in result:
            if hc.is_final_cluster:
                final[int(hc.node)] = int(hc.cluster)
        del result
        remap: dict[int, int] = {}
        for node in sorted(final):
            cid = remap.setdefault(final[node], len(remap))
            label[node] = cid
    missing = np.flatnonzero(label < 0)
    if len(missing):
        clustered = np.flatnonzero(label >= 0)
        if len(clustered) == 0:
            # no edges at all: group by nearest-neighbour chains of size cap
            for start in range(0, n, config.max_community_size):
                label[start : start + config.max_community_size] = start // config.max_community_size
        else:
            label[missing] = label[_nearest_clustered(vectors, missing, clustered, label >= 0, search)]
    clusters: dict[int, list[int]] = {}
    for node, cid in enumerate(label.tolist()):
        clusters.setdefault(cid, []).append(node)
    return sorted(clusters.values(), key=lambda members: members[0])


def _nearest_clustered(
    vectors: np.ndarray, missing: np.ndarray, clustered: np.ndarray, is_clustered: np.ndarray,
    search: SearchFn | None,
) -> np.ndarray:
    """int64 ``(len(missing),)``: the nearest clustered node of each missing node (exact, first
    of equals, below the limits of :data:`ASSIGN_EXACT_MAX`; else candidates from ``search``,
    a blocked exact scan for the nodes it finds no clustered candidate for)."""
    if len(missing) * len(clustered) <= ASSIGN_EXACT_MAX and len(clustered) <= ASSIGN_EXACT_COLUMNS:
        sims = vectors[missing] @ vectors[clustered].T
        return clustered[np.argmax(sims, axis=1)]
    out = np.full(len(missing), -1, dtype=np.int64)
    if search is not None:
        rows, _sims = search(np.ascontiguousarray(vectors[missing]), 32)
        rows = np.asarray(rows, dtype=np.int64)
        ok = (rows >= 0) & is_clustered[np.maximum(rows, 0)]
        first = np.argmax(ok, axis=1)  # candidates come best first
        found = ok[np.arange(len(rows)), first]
        out[found] = rows[found, first[found]]
    todo = np.flatnonzero(out < 0)
    if len(todo):
        q = vectors[missing[todo]]
        best = np.full(len(todo), -np.inf, dtype=np.float32)
        arg = np.full(len(todo), -1, dtype=np.int64)
        block = max(1, (1 << 24) // max(1, len(todo)))
        for start in range(0, len(vectors), block):
            s = q @ vectors[start : start + block].T
            s[:, ~is_clustered[start : start + block]] = -np.inf
            j = np.argmax(s, axis=1)
            v = s[np.arange(len(todo)), j]
            better = v > best  # strictly: the first of equals wins, as one argmax
            best[better] = v[better]
            arg[better] = start + j[better]
        out[todo] = arg
    return out


SummariseFn = Callable[[int, list[list[int]]], list[tuple[str, str]]]
EmbedFn = Callable[[list[str]], np.ndarray]


def attributed_communities(
    vectors: np.ndarray,
    edges: np.ndarray,
    summarise: SummariseFn,
    embed: EmbedFn | None,
    config: HierarchyConfig | None = None,
    progress: Callable[[str], None] | None = None,
    neighbours: Neighbours | None = None,
    index: Any = None,
    add_layer: Callable[[np.ndarray], None] | None = None,
) -> tuple[list[list[Community]], list[np.ndarray]]:
    """Build the community layers (ArchRAG Algorithm 1).

    Args:
        vectors: float32 ``(n_entities, dim)`` L2-normalised entity vectors (layer 0).
        edges: int64 ``(m, 2)`` entity row pairs of the KG relations (``i < j``).
        summarise: ``summarise(layer, clusters) -> [(title, summary), ...]`` where ``clusters``
            are lists of node indices of the level below (entity rows for layer 1).
        embed: ``embed(texts) -> float32 (len(texts), dim)`` normalised, used on
            ``title + "\n" + summary`` (spec §1.5). ``None``: a community's vector is the
            normalised mean of its members' vectors (no model call; our offline default,
            since extractive summaries are made of the members' own sentences).
        config: parameters; :class:`HierarchyConfig` defaults when ``None``.
        progress: optional callback receiving one line per finished layer.
        neighbours: the k-NN of the entities (level 1) from the build's entity index, for
            :func:`knn_augment` (``None``: computed here, or read from ``index``).
        index: the build's C-HNSW (:class:`~graphstrata.index.LayeredIndex`) holding the
            entities as layer 0. Each level's community vectors become its next layer as soon
            as the level is kept (``add_layer``), so a level over :data:`EXACT_KNN_MAX` nodes
            takes its k-NN (:meth:`~graphstrata.index.LayeredIndex.knn`) and its isolated
            nodes' nearest neighbours (:meth:`~graphstrata.index.LayeredIndex.search_layer`)
            from the layer that holds it, instead of a C-HNSW built for that level alone and
            thrown away; the index ends with every layer, in the order a build after
            clustering would add them.
        add_layer: ``add_layer(layer_vectors)`` adds a kept level to ``index`` (default
            ``index.add_layers([layer_vectors])``; the build times it as a stage of its own).

    Returns:
        ``(layers, layer_vectors)``: ``layers[i]`` are the communities of layer ``i + 1``
        (``Community.members`` are *indices* into the level below, converted to ids by the
        caller), ``layer_vectors[i]`` their float32 ``(n_i, dim)`` vectors.
    """
    config = config or HierarchyConfig()
    layers: list[list[Community]] = []
    layer_vectors: list[np.ndarray] = []
    cur_vectors = np.asarray(vectors, dtype=np.float32)
    cur_edges = _dedupe_edges(np.asarray(edges, dtype=np.int64).reshape(-1, 2))
    # entity rows under each node of the current level
    cur_entities: list[list[int]] = [[i] for i in range(len(cur_vectors))]
    for level in range(1, config.max_layers + 1):
        n = len(cur_vectors)
        if n < config.min_communities:
            break
        clusters = _level_clusters(level, cur_vectors, cur_edges, config, neighbours, index)
        if len(clusters) < config.min_communities or len(clusters) >= n:
            break
        texts = summarise(level, clusters)
        comm_vectors = _community_vectors(texts, clusters, cur_vectors, embed)
        communities, cur_entities = _level_communities(level, clusters, texts, cur_entities)
        layers.append(communities)
        layer_vectors.append(comm_vectors)
        if index is not None:
            if add_layer is not None:
                add_layer(comm_vectors)
            else:
                index.add_layers([comm_vectors])
        if progress:
            progress(f"layer {level}: {len(communities)} communities from {n} nodes")
        cur_edges = _coarsened_edges(cur_edges, clusters, n)
        cur_vectors = comm_vectors
    return layers, layer_vectors


def _level_clusters(
    level: int, vectors: np.ndarray, edges: np.ndarray, config: HierarchyConfig,
    neighbours: Neighbours | None, index: Any,
) -> list[list[int]]:
    """One level's clusters (lists of node rows): k-NN-augmented weighted Leiden over its
    nodes; a level over :data:`EXACT_KNN_MAX` nodes reads its k-NN and nearest neighbours from
    ``index``'s layer ``level - 1``, level 1 its k-NN from ``neighbours`` when given."""
    n = len(vectors)
    level_neighbours, level_search = neighbours if level == 1 else None, None
    if index is not None and n > EXACT_KNN_MAX:
        layer = level - 1  # the index layer holding this level's nodes (0: entities)
        if level_neighbours is None:
            level_neighbours = partial(index.knn, layer=layer)
        level_search = partial(_search_layer, index, layer)
    aug_edges, weights = knn_augment(vectors, edges, config, level_neighbours)
    clusters = leiden_clusters(n, aug_edges, weights, vectors, config, search=level_search)
    del aug_edges, weights
    release_free_memory()  # the edge list and Leiden's own graph, freed: handed back
    return clusters


def _community_vectors(
    texts: Sequence[tuple[str, str]], clusters: Sequence[Sequence[int]], vectors: np.ndarray,
    embed: EmbedFn | None,
) -> np.ndarray:
    """Float32 ``(len(clusters), dim)`` vectors of a level's communities: ``title + "\n" +
    summary`` embedded, or (``embed`` ``None``) the normalised mean of the members' vectors."""
    if embed is not None:
        return embed([f"{t}\n{s}" for t, s in texts])
    comm_vectors = np.vstack([vectors[m].mean(axis=0) for m in clusters])
    comm_vectors /= np.maximum(np.linalg.norm(comm_vectors, axis=1, keepdims=True), 1e-12)
    return comm_vectors


def _level_communities(
    level: int, clusters: Sequence[Sequence[int]], texts: Sequence[tuple[str, str]],
    entities_below: Sequence[Sequence[int]],
) -> tuple[list[Community], list[list[int]]]:
    """The communities of ``level`` (members as row indices of the level below) and the
    entity rows under each."""
    communities = []
    next_entities = []
    for ci, (members, (title, summary)) in enumerate(zip(clusters, texts, strict=True)):
        ents = sorted({e for m in members for e in entities_below[m]})
        next_entities.append(ents)
        communities.append(
            Community(
                id=f"L{level}C{ci}",
                layer=level,
                members=[str(m) for m in members],
                entity_ids=[str(e) for e in ents],
                title=title,
                summary=summary,
            )
        )
    return communities, next_entities


def _coarsened_edges(edges: np.ndarray, clusters: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """The next level's graph: communities linked when their members are linked (spec A2)."""
    label = np.empty(n, dtype=np.int64)
    for ci, members in enumerate(clusters):
        label[members] = ci
    if not len(edges):
        return edges
    a, b = label[edges[:, 0]], label[edges[:, 1]]
    keep = a != b
    pairs = np.stack([np.minimum(a, b)[keep], np.maximum(a, b)[keep]], axis=1)
    return _dedupe_edges(pairs)


def _search_layer(index: Any, layer: int, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    return index.search_layer(queries, k, layer=layer, ef_search=max(64, 2 * k))


def _dedupe_edges(edges: np.ndarray) -> np.ndarray:
    if len(edges) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    lo = np.minimum(edges[:, 0], edges[:, 1])
    hi = np.maximum(edges[:, 0], edges[:, 1])
    e = np.stack([lo, hi], axis=1)
    e = e[lo != hi]
    return np.unique(e, axis=0)


def extractive_summary(
    names: Sequence[str],
    weights: Sequence[float],
    sentences: Sequence[str],
    vectorizer,
    max_sentences: int = 3,
    title_terms: int = 3,
) -> tuple[str, str]:
    """Offline community summary: a title from the top members, a body of central sentences.

    Args:
        names: member names (entity names, or child-community titles).
        weights: member weights (occurrence counts), same length as ``names``.
        sentences: candidate sentences (member descriptions / child summaries).
        vectorizer: a fitted scikit-learn TF-IDF vectorizer; the body is the ``max_sentences``
            candidate sentences closest (cosine) to the candidates' TF-IDF centroid.
        max_sentences: sentences in the body.
        title_terms: member names in the title.

    Returns:
        ``(title, summary)``.
    """
    return extractive_summaries([(names, weights, sentences)], vectorizer, max_sentences, title_terms)[0]


def extractive_summaries(
    communities: Sequence[tuple[Sequence[str], Sequence[float], Sequence[str]]],
    vectorizer,
    max_sentences: int = 3,
    title_terms: int = 3,
) -> list[tuple[str, str]]:
    """:func:`extractive_summary` of many communities, ``(names, weights, sentences)`` each,
    with one TF-IDF transform of all their distinct sentences and sparse products over all
    communities at once (per-community transforms and means cost more in scikit-learn's and
    scipy's input checks than in the arithmetic).

    Returns:
        ``[(title, summary), ...]``, one per community, in order.
    """
    texts: dict[str, int] = {}
    plans = []
    for _names, _weights, sentences in communities:
        uniq = list(dict.fromkeys(s for s in sentences if s))
        if len(uniq) > max_sentences:
            for sent in uniq:
                texts.setdefault(sent, len(texts))
        plans.append(uniq)
    ranked = _central_sentences(vectorizer, texts, plans, max_sentences)
    out = []
    for (names, weights, _), uniq, top in zip(communities, plans, ranked, strict=True):
        title = _summary_title(names, weights, title_terms)
        body = uniq if top is None else [uniq[i] for i in top]
        out.append((title, " ".join(body)))
    return out


def _central_sentences(
    vectorizer, texts: dict[str, int], plans: Sequence[list[str]], max_sentences: int
) -> list[list[int] | None]:
    """Per community, the positions (ascending) of its ``max_sentences`` sentences closest to
    the TF-IDF centroid of its sentences (scores rounded to 6 decimals; ties: first); ``None`` when it has no more than
    ``max_sentences``. All communities at once: one transform, one sparse product for the
    centroids and one for every (community, sentence) score — no per-community sparse calls."""
    big = [c for c, uniq in enumerate(plans) if len(uniq) > max_sentences]
    out: list[list[int] | None] = [None] * len(plans)
    if not big:
        return out
    matrix = vectorizer.transform(list(texts)).tocsr()
    average = mean_operator([[texts[sent] for sent in plans[c]] for c in big], matrix.shape[0])
    # every (community, sentence) pair in plan order: the operator's own rows and columns
    starts, member = average.indptr.copy(), average.indices.astype(np.int64)
    owner = np.repeat(np.arange(len(big)), np.diff(starts))
    centroids = average @ matrix  # (n_big, vocab)
    scores = np.asarray(matrix[member].multiply(centroids[owner]).sum(axis=1)).ravel()
    # equal sentences score equal up to summation order: round so that ties go to the first
    scores = np.round(scores, 6)
    for j, c in enumerate(big):
        part = scores[starts[j] : starts[j + 1]]
        out[c] = sorted(np.argsort(-part, kind="stable")[:max_sentences].tolist())
    return out


def mean_operator(groups: Sequence[Sequence[int]], n: int, dtype=np.float64):
    """The sparse averaging matrix of ``groups``: ``mean_operator(groups, n) @ X`` is the mean of
    the rows ``groups[i]`` of ``X`` (``n`` rows), for every group at once — the community
    centroids of summaries, the chunk means of entity vectors.

    Args:
        groups: row indices (in ``[0, n)``) per group; a row listed twice counts twice.
        n: rows of the matrices it multiplies.
        dtype: of the weights (``1 / len(group)``).

    Returns:
        scipy CSR ``(len(groups), n)``; an empty group is an all-zero row.

    Raises:
        ValueError: an index outside ``[0, n)``.
    """
    import scipy.sparse as sp

    sizes = np.fromiter((len(g) for g in groups), dtype=np.int64, count=len(groups))
    cols = np.fromiter((i for g in groups for i in g), dtype=np.int64, count=int(sizes.sum()))
    if len(cols) and (cols.min() < 0 or cols.max() >= n):
        bad = int(cols[(cols < 0) | (cols >= n)][0])
        raise ValueError(f"mean_operator: row index {bad} is outside [0, {n})")
    weights = np.repeat(1.0 / np.maximum(sizes, 1), sizes).astype(dtype)
    return sp.csr_matrix((weights, cols, np.concatenate([[0], np.cumsum(sizes)])), shape=(len(groups), n))


def _summary_title(names: Sequence[str], weights: Sequence[float], title_terms: int) -> str:
    """The first ``title_terms`` distinct names (case-insensitive) by weight, then name."""
    order = sorted(range(len(names)), key=lambda i: (-weights[i], names[i]))
    title_parts: list[str] = []
    for i in order:
        if names[i] and names[i].lower() not in (t.lower() for t in title_parts):
            title_parts.append(names[i])
        if len(title_parts) >= title_terms:
            break
    return ", ".join(title_parts)


def rank_chunks(entity_chunk_lists: Sequence[Sequence[str]], limit: int = 50) -> list[str]:
    """Chunk ids of a community's members, most shared among members first (ties: first seen)."""
    counts: Counter = Counter()
    first: dict[str, int] = {}
    for chunk_ids in entity_chunk_lists:
        for cid in chunk_ids:
            counts[cid] += 1
            first.setdefault(cid, len(first))
    return sorted(counts, key=lambda c: (-counts[c], first[c]))[:limit]
