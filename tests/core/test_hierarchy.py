"""ArchRAG Algorithm 1 on synthetic graphs whose community structure is known."""

import numpy as np
import pytest
from graphstrata.hierarchy import (
    HierarchyConfig,
    attributed_communities,
    knn_augment,
    leiden_clusters,
    rank_chunks,
)


def planted(n_groups=12, size=10, dim=16, seed=0):
    """n_groups cliques of `size` nodes with group-specific vectors, one weak link between groups."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n_groups, dim))
    vectors = np.repeat(centers, size, axis=0) + 0.05 * rng.normal(size=(n_groups * size, dim))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    edges = []
    for g in range(n_groups):
        base = g * size
        edges += [(base + i, base + j) for i in range(size) for j in range(i + 1, size)]
        edges.append((base, ((g + 1) % n_groups) * size + 1))
    edges = np.asarray([(min(a, b), max(a, b)) for a, b in edges], dtype=np.int64)
    return vectors, edges, np.repeat(np.arange(n_groups), size)


def test_leiden_recovers_planted_groups_with_size_cap():
    vectors, edges, truth = planted()
    cfg = HierarchyConfig(max_community_size=15)
    aug, w = knn_augment(vectors, edges, cfg)
    assert len(aug) >= len(edges) and np.all(w > 0)
    clusters = leiden_clusters(len(vectors), aug, w, vectors, cfg)
    assert sorted(i for c in clusters for i in c) == list(range(len(vectors)))  # a partition
    assert max(len(c) for c in clusters) <= 15
    purity = np.mean([np.bincount(truth[c]).max() / len(c) for c in clusters])
    assert purity > 0.95


def test_isolated_nodes_join_their_nearest_clustered_neighbour():
    vectors, edges, truth = planted(n_groups=3, size=5)
    # node 0 loses all its edges; it must still land with its own group
    edges = edges[(edges[:, 0] != 0) & (edges[:, 1] != 0)]
    clusters = leiden_clusters(len(vectors), edges, np.ones(len(edges), np.float32), vectors,
                               HierarchyConfig())
    home = next(c for c in clusters if 0 in c)
    assert np.bincount(truth[home]).argmax() == truth[0]


def test_layers_shrink_and_stop_below_min_communities():
    vectors, edges, _ = planted(n_groups=40, size=8)
    calls = []

    def summarise(level, clusters):
        calls.append((level, len(clusters)))
        return [(f"t{level}-{i}", "s") for i in range(len(clusters))]

    cfg = HierarchyConfig(max_community_size=10, min_communities=5, max_layers=4)
    layers, vecs = attributed_communities(vectors, edges, summarise, None, cfg)
    sizes = [len(x) for x in layers]
    assert sizes[0] >= 30 and all(a > b for a, b in zip(sizes, sizes[1:], strict=False))
    assert all(s >= cfg.min_communities for s in sizes) and len(layers) <= 4
    for layer, v in zip(layers, vecs, strict=True):
        assert v.shape == (len(layer), vectors.shape[1])
        assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # every entity is under exactly one community of each layer
    for layer in layers:
        flat = sorted(int(e) for c in layer for e in c.entity_ids)
        assert flat == list(range(len(vectors)))
    assert [lvl for lvl, _ in calls] == list(range(1, len(calls) + 1))


def test_max_layers_zero_gives_no_hierarchy():
    vectors, edges, _ = planted()
    layers, vecs = attributed_communities(vectors, edges, lambda layer, c: [("", "")] * len(c), None,
                                          HierarchyConfig(max_layers=0))
    assert layers == [] and vecs == []


def test_rank_chunks_orders_by_member_count():
    assert rank_chunks([["a", "b"], ["b", "c"], ["b", "a"]]) == ["b", "a", "c"]


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_graphs_do_not_crash(n):
    vectors = np.eye(n, 4, dtype=np.float32)
    layers, _ = attributed_communities(vectors, np.zeros((0, 2), np.int64),
                                       lambda layer, c: [("", "")] * len(c), None, HierarchyConfig())
    assert layers == []


def _reference_summary(sentences, vectorizer, max_sentences=3):
    """One community at a time, the plain way: centroid of its TF-IDF rows, best dot products."""
    uniq = list(dict.fromkeys(s for s in sentences if s))
    if len(uniq) <= max_sentences:
        return " ".join(uniq)
    m = vectorizer.transform(uniq).toarray()
    scores = np.round(m @ m.mean(axis=0), 6)
    top = sorted(np.argsort(-scores, kind="stable")[:max_sentences].tolist())
    return " ".join(uniq[i] for i in top)


def test_extractive_summaries_of_many_communities_equal_one_at_a_time(shared_data, jsonl):
    from graphstrata.extraction import split_sentences
    from graphstrata.hierarchy import extractive_summaries
    from graphstrata.indexing import fit_summary_tfidf

    texts = [d["text"] for d in jsonl(shared_data / "musique" / "corpus.jsonl")[:300]]
    sentences = [t[s:e] for t in texts for s, e in split_sentences(t)]
    vectorizer = fit_summary_tfidf(texts).vectorizer()
    rng = np.random.default_rng(3)
    communities = []
    for i in range(200):
        picked = [sentences[j] for j in rng.integers(0, len(sentences), size=int(rng.integers(0, 12)))]
        if i % 5 == 0:
            picked += picked[:2] + [""]  # repeats and blanks are dropped before ranking
        communities.append(([f"e{i}", f"f{i}"], [1.0, 2.0], picked))
    out = extractive_summaries(communities, vectorizer)
    assert [title for title, _ in out] == [f"f{i}, e{i}" for i in range(200)]
    assert [body for _, body in out] == [_reference_summary(s, vectorizer) for *_, s in communities]
    assert any(len(dict.fromkeys(s)) > 3 for *_, s in communities)


def test_extractive_summary_keeps_the_central_sentences_and_breaks_ties_by_order():
    from graphstrata.hierarchy import extractive_summary
    from sklearn.feature_extraction.text import TfidfVectorizer

    sentences = [
        "Paris is the capital of France.",
        "Bananas are yellow.",
        "France has Paris as its capital city.",
        "The capital of France is Paris.",
        "Kittens sleep a lot.",
    ]
    vectorizer = TfidfVectorizer().fit(sentences)
    _, body = extractive_summary(["Paris"], [1.0], sentences, vectorizer, max_sentences=3)
    assert body == " ".join([sentences[0], sentences[2], sentences[3]])
    # two unrelated sentences with equal scores: the first one wins the last slot
    same = ["alpha beta", "gamma delta", "epsilon zeta", "eta theta"]
    _, body = extractive_summary(["x"], [1.0], same, TfidfVectorizer().fit(same), max_sentences=2)
    assert body == "alpha beta gamma delta"


def test_mean_operator_averages_each_group_of_rows():
    from graphstrata.hierarchy import mean_operator

    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    op = mean_operator([[0, 2], [], [3, 3, 1], [1]], 4)
    assert op.shape == (4, 4)
    means = op @ x
    assert np.allclose(means[0], (x[0] + x[2]) / 2)
    assert np.all(means[1] == 0)  # an empty group: a zero row, no division by zero
    assert np.allclose(means[2], (2 * x[3] + x[1]) / 3)  # a row listed twice counts twice
    assert np.allclose(means[3], x[1])
    assert mean_operator([[0]], 1, np.float32).dtype == np.float32
    for bad in ([[0, 4]], [[-1]]):
        with pytest.raises(ValueError, match="outside"):
            mean_operator(bad, 4)


def _take_pairs_reference(us, keys, n, k):
    """knn_augment's step 2 as one walk over every candidate (the definition)."""
    taken, new, added = set(), [], [0] * n
    for u, key in zip(us.tolist(), keys.tolist(), strict=True):
        if added[u] >= k or key in taken:
            continue
        taken.add(key)
        new.append(key)
        added[u] += 1
    return np.asarray(new, dtype=np.int64)


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pairs_taken_in_blocks_equal_one_walk(monkeypatch, block, seed):
    import graphstrata.hierarchy as hmod

    rng = np.random.default_rng(seed)
    n, c = 60, 400
    us = np.sort(rng.integers(0, n, c))
    vs = rng.integers(0, n, c)
    keep = us != vs
    us, vs = us[keep], vs[keep]
    keys = np.minimum(us, vs) * n + np.maximum(us, vs)
    monkeypatch.setattr(hmod, "KNN_PAIR_BLOCK", block)
    for k in (1, 2, 5):
        got = hmod._take_pairs(us, keys, n, k)
        want = _take_pairs_reference(us, keys, n, k)
        assert got.dtype == np.int64 and np.array_equal(got, want)
