"""k-NN edges of clustering from the C-HNSW graph, parallel index builds (issue 17)."""

from __future__ import annotations

import types

import numpy as np
import pytest
from graphstrata import hierarchy, index
from graphstrata.config import GraphStrataConfig
from graphstrata.hierarchy import HierarchyConfig, knn_augment, nearest_neighbours
from graphstrata.index import LayeredIndex
from graphstrata.indexing import build_state


def _clustered(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(n // 20, 2), dim))
    x = centres[rng.integers(0, len(centres), n)] + 0.6 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found.tolist(), truth.tolist(), strict=True)]))


def test_knn_from_the_graph_agrees_with_the_exact_scan(monkeypatch):
    x = _clustered(3000)
    exact_idx, exact_sim = nearest_neighbours(x, 12)  # 3000 <= EXACT_KNN_MAX: brute force
    monkeypatch.setattr(hierarchy, "EXACT_KNN_MAX", 100)
    idx, sim = nearest_neighbours(x, 12)
    assert idx.shape == sim.shape == (3000, 12)
    assert _recall(idx, exact_idx) >= 0.95
    assert (idx[:, 0] == np.arange(3000)).mean() > 0.99  # each node finds itself first
    assert np.all(np.diff(sim, axis=1) <= 1e-6)  # best first
    # the similarities are the true cosines of the rows returned
    cos = np.einsum("ij,ikj->ik", x, x[idx])
    assert np.allclose(sim, cos, atol=1e-5)


def test_knn_augment_of_a_large_level_adds_almost_the_exact_edges(monkeypatch):
    x = _clustered(2500, seed=1)
    rng = np.random.default_rng(2)
    pairs = rng.integers(0, len(x), size=(4000, 2))
    pairs = np.unique(np.sort(pairs[pairs[:, 0] != pairs[:, 1]], axis=1), axis=0)
    cfg = HierarchyConfig()
    exact_edges, _ = knn_augment(x, pairs, cfg)
    monkeypatch.setattr(hierarchy, "EXACT_KNN_MAX", 100)
    approx_edges, w = knn_augment(x, pairs, cfg)
    exact, approx = set(map(tuple, exact_edges.tolist())), set(map(tuple, approx_edges.tolist()))
    assert len(approx & exact) >= 0.95 * len(exact)
    assert len(w) == len(approx_edges) and (w > 0).all()


def test_a_build_clusters_with_its_own_entity_index(monkeypatch, corpus, embedder, small_config):
    """Above EXACT_KNN_MAX the build asks the entity layer it already built for neighbours:
    exactly one C-HNSW is built for entities + communities, none for k-NN alone."""
    builds = []
    real = LayeredIndex.build.__func__

    def counting(cls, layer_vectors, *a, **kw):
        builds.append([len(v) for v in layer_vectors])
        return real(cls, layer_vectors, *a, **kw)

    monkeypatch.setattr(LayeredIndex, "build", classmethod(counting))
    monkeypatch.setattr(hierarchy, "EXACT_KNN_MAX", 10)  # the entities, not the upper levels
    calls = []
    real_knn = LayeredIndex.knn
    monkeypatch.setattr(LayeredIndex, "knn", lambda self, k, layer=0: calls.append(k) or real_knn(self, k, layer))
    state = build_state(corpus, GraphStrataConfig(**small_config), embedder)
    assert len(builds) == 1 and builds[0] == [len(state.kg)]
    assert calls, "clustering did not use the entity index"
    assert state.layered.num_layers == 1 + len(state.communities)
    assert [len(x) for x in state.layered.labels] == [len(state.kg)] + [len(c) for c in state.communities]


def test_small_builds_are_identical_from_build_to_build(corpus, embedder, small_config):
    cfg = GraphStrataConfig(**small_config)
    a, b = build_state(corpus, cfg, embedder), build_state(corpus, cfg, embedder)
    assert [[c.members for c in layer] for layer in a.communities] == [[c.members for c in layer] for layer in b.communities]
    assert a.layered.index.to_bytes() == b.layered.index.to_bytes()
    assert a.chunk_index.index.to_bytes() == b.chunk_index.index.to_bytes()


def test_a_large_layer_is_built_on_several_threads_and_still_finds_its_neighbours(monkeypatch):
    native = index._chnsw()
    seen = []

    class Spy(native.CHNSW):
        def set_num_threads(self, n):
            seen.append(n)
            super().set_num_threads(n)

    monkeypatch.setattr(index, "_chnsw", lambda: types.SimpleNamespace(CHNSW=Spy))
    monkeypatch.setenv("GRAPHSTRATA_NUM_THREADS", "2")
    monkeypatch.setenv("GRAPHSTRATA_PARALLEL_INSERTS", "1")  # opt-in since issue 44 (not reproducible)
    monkeypatch.setattr(index, "PARALLEL_BUILD_MIN", 1000)
    x, small = _clustered(4000, seed=3), _clustered(200, seed=4)
    layered = LayeredIndex.build([x, small], M=16, ef_construction=100)
    assert seen == [2, 1, 1, 1]  # layer 0 on 2 threads, the small layer on one, left at one
    assert layered.index.num_threads == 1
    rows, _ = layered.knn(10)
    truth = np.argsort(-(x @ x.T), axis=1)[:, :10]
    assert _recall(rows, truth) >= 0.95
    assert layered.index.num_threads == 1


@pytest.mark.parametrize("value,expected", [("3", 3), ("", None), ("zero", None), ("0", None)])
def test_index_threads_reads_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("GRAPHSTRATA_NUM_THREADS", value)
    got = index.index_threads()
    # clamped to the CPUs this process may use (issue 30)
    assert got == min(expected, index.machine_threads()) if expected is not None else got >= 1


def test_entity_vectors_blend_names_with_chunk_means_and_skip_names_at_weight_one(corpus, embedder, small_config):
    from graphstrata.models import l2_normalise

    class Recording:
        id, dim = embedder.id, embedder.dim

        def __init__(self):
            self.texts: list[str] = []

        def embed(self, texts):
            self.texts += list(texts)
            return embedder.embed(texts)

        def token_spans(self, text):
            return embedder.token_spans(text)

    rec = Recording()
    state = build_state(corpus, GraphStrataConfig(**small_config, entity_context_weight=0.4), rec)
    kg, chunks = state.kg, state.vectors["chunks"]
    names = {kg.entities[e].name for e in kg.entity_ids}
    assert names <= set(rec.texts)
    means = l2_normalise(np.stack([chunks[[state.chunk_row[c] for c in kg.entities[e].chunk_ids]].mean(0)
                                   for e in kg.entity_ids]))
    expected = l2_normalise(0.6 * embedder.embed([kg.entities[e].name for e in kg.entity_ids]) + 0.4 * means)
    assert np.allclose(state.vectors["entities"], expected, atol=1e-5)

    rec = Recording()
    state = build_state(corpus, GraphStrataConfig(**small_config, entity_context_weight=1.0), rec)
    assert len(rec.texts) == len(state.chunks)  # the chunks only: no entity-name pass
    assert np.allclose(state.vectors["entities"], means, atol=1e-5)


def test_a_failing_chunk_index_build_fails_the_build_and_leaves_no_worker(monkeypatch, corpus, embedder, small_config):
    """The chunk C-HNSW is built on a worker thread beside extraction: its error still reaches
    the caller, after the other stages, and the worker is gone when build_state returns."""
    import threading

    from graphstrata.index import ChunkIndex

    def broken(*a, **kw):
        raise ValueError("chunk index: boom")

    monkeypatch.setattr(ChunkIndex, "build", broken)
    with pytest.raises(ValueError, match="chunk index: boom"):
        build_state(corpus, GraphStrataConfig(**small_config), embedder)
    assert not [t for t in threading.enumerate() if t.name.startswith("graphstrata-chunk-index")]


def test_the_chunk_index_is_built_beside_extraction(monkeypatch, corpus, embedder, small_config):
    import threading

    from graphstrata.index import ChunkIndex

    real = ChunkIndex.build.__func__
    where = []

    def spy(cls, *a, **kw):
        where.append(threading.current_thread().name)
        return real(cls, *a, **kw)

    monkeypatch.setattr(ChunkIndex, "build", classmethod(spy))
    state = build_state(corpus, GraphStrataConfig(**small_config), embedder)
    assert len(where) == 1 and where[0].startswith("graphstrata-chunk-index")
    assert len(state.chunk_index.labels) == len(state.chunks)
