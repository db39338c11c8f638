"""HiRAG (spec seed-hirag.md): HiIndex layers and communities, bridge paths, HiRetrieval."""

import networkx as nx
import numpy as np
import pytest
from graphstrata import GraphStrata
from graphstrata.structures.clustering import cluster_sparsity, gmm_clusters
from graphstrata.structures.hirag import SUMMARY_PREFIX, HiIndexConfig, hi_index
from graphstrata.methods.hirag import bridge_path, bridge_triples

QUERY = "Where was Edmund Hillary born?"


@pytest.fixture()
def gs(corpus, embedder, small_config):
    return GraphStrata.build(corpus, config=small_config, embedder=embedder)


def ladder():
    """a-b-c-d-e chain, a shortcut a-x-e through hub x, and a separate island y-z."""
    g = nx.Graph()
    g.add_edges_from([("a", "b"), ("b", "c"), ("c", "d"), ("d", "e")], weight=1.0)
    g.add_edges_from([("a", "x"), ("x", "e")], weight=1.0)
    g.add_edge("y", "z", weight=1.0)
    return g


def test_bridge_path_concatenates_shortest_paths_between_consecutive_keys():
    g = ladder()
    assert bridge_path(g, ["a", "c"]) == ["a", "b", "c"]
    assert bridge_path(g, ["a", "e"]) == ["a", "x", "e"]  # 2 hops through the hub, not 4
    # consecutive segments share their join node once
    assert bridge_path(g, ["b", "d", "e"]) == ["b", "c", "d", "e"]
    # disconnected pair: the next key just follows; unknown keys are skipped
    assert bridge_path(g, ["c", "y", "z", "nowhere"]) == ["c", "y", "z"]
    assert bridge_path(g, []) == []


def test_bridge_path_weighted_prefers_strong_edges():
    g = nx.Graph()
    g.add_edge("a", "b", weight=1.0)
    g.add_edge("b", "d", weight=1.0)
    g.add_edge("a", "c", weight=10.0)
    g.add_edge("c", "d", weight=10.0)
    assert len(bridge_path(g, ["a", "d"])) == 3
    assert bridge_path(g, ["a", "d"], weighted=True) == ["a", "c", "d"]
    g.add_edge("a", "d", weight=0.01)
    assert bridge_path(g, ["a", "d"]) == ["a", "d"]  # 1 hop
    assert bridge_path(g, ["a", "d"], weighted=True) == ["a", "c", "d"]  # 0.2 < 100


def test_bridge_triples_are_the_induced_edges_ranked_by_edge_degree():
    g = ladder()
    triples = bridge_triples(g, ["a", "b", "c"])
    assert set(triples) == {("a", "b"), ("b", "c")}
    assert triples[0] == ("a", "b")  # deg(a)+deg(b) = 4 > deg(b)+deg(c) = 4 → tie by id
    triples = bridge_triples(g, ["a", "x", "e", "d"])
    assert set(triples) == {("a", "x"), ("e", "x"), ("d", "e")}


def test_cluster_sparsity_formula():
    assert cluster_sparsity([[0], [1], [2], [3]], 4) == 1.0
    assert cluster_sparsity([[0, 1, 2, 3]], 4) == 0.0
    assert cluster_sparsity([[0, 1], [2, 3]], 4) == pytest.approx(1 - 4 / 12)


def test_gmm_clusters_recover_planted_groups():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(4, 8)) * 5
    x = np.repeat(centers, 30, axis=0) + 0.1 * rng.normal(size=(120, 8))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    clusters = gmm_clusters(x, HiIndexConfig(pca_dim=4, soft_threshold=None))
    truth = np.repeat(np.arange(4), 30)
    assert sorted(i for c in clusters for i in c) == list(range(120))  # hard = a partition
    assert all(len(set(truth[c])) == 1 for c in clusters)  # pure


def test_gmm_posteriors_in_row_blocks_give_the_same_clusters(monkeypatch):
    """Blocked prediction bounds memory; soft memberships are found in every block."""
    import graphstrata.structures.clustering as hirag_mod

    rng = np.random.default_rng(1)
    centers = rng.normal(size=(6, 12)) * 2
    x = np.repeat(centers, 50, axis=0) + 0.8 * rng.normal(size=(300, 12))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    config = HiIndexConfig(pca_dim=6, soft_threshold=0.1)
    whole = gmm_clusters(x, config)
    monkeypatch.setattr(hirag_mod, "PREDICT_BLOCK", 7)
    blocked = gmm_clusters(x, config)
    assert blocked == whole
    assert sum(len(c) for c in whole) > 300  # some soft memberships, across block borders


def test_hi_index_layers_edges_and_communities(gs):
    hi = hi_index(gs)
    assert hi is hi_index(gs)  # cached per index state
    n0 = hi.n_entities
    assert n0 == len(gs.kg) and len(hi.node_ids) > n0  # at least one summary layer
    assert hi.vectors.shape == (len(hi.node_ids), gs.embedder.dim)
    assert np.allclose(np.linalg.norm(hi.vectors, axis=1), 1.0, atol=1e-4)
    for nid in hi.node_ids[n0:]:
        assert nid.startswith(SUMMARY_PREFIX)
        i = hi.node_row[nid]
        nbrs = [hi.node_row[v] for v in hi.graph[nid]]
        assert nbrs and all(hi.layer[j] != hi.layer[i] for j in nbrs)  # inter-layer only
        assert all(abs(int(hi.layer[j]) - int(hi.layer[i])) == 1 for j in nbrs)
    members = [m for c in hi.communities for m in c]
    assert len(members) == len(set(members))  # leaf communities partition their nodes
    assert all(len(c) <= HiIndexConfig().leiden_max_cluster_size for c in hi.communities)


def test_hirag_modes_and_bridge_path_hits(gs):
    hits = gs.retrieve(QUERY, method="hirag", k=3)
    kinds = [h.kind for h in hits]
    assert kinds[:3] == ["chunk"] * 3
    assert {"entity", "community", "path", "relation"} <= set(kinds)
    assert hits[0].document_ids == ["hillary"]
    path = next(h for h in hits if h.kind == "path")
    nodes = set(path.metadata["nodes"])
    assert set(path.metadata["key_entities"]) <= nodes
    for r in (h for h in hits if h.kind == "relation"):
        assert set(r.id.split("\u241f")) <= nodes  # bridge triples lie on the path
        assert r.metadata["bridge"]
    for h in hits:
        summary = h.metadata.get("summary")
        if h.kind in ("entity", "community") and h.layer in (0, 1) and not summary:
            assert h.chunk_ids and h.document_ids
    only = {
        m: {h.kind for h in gs.retrieve(QUERY, method="hirag", k=2, mode=m) if h.kind != "chunk"}
        for m in ("local", "global", "bridge")
    }
    assert only["local"] == {"entity"}
    assert only["global"] == {"community"}
    assert only["bridge"] <= {"relation", "path"} and "path" in only["bridge"]


def test_hirag_deterministic_k_chunks_and_errors(gs):
    a = gs.retrieve(QUERY, method="hirag", k=5)
    b = gs.retrieve(QUERY, method="hirag", k=5)
    assert [(h.kind, h.id, h.score) for h in a] == [(h.kind, h.id, h.score) for h in b]
    assert len(gs.retrieve("city", method="hirag", k=1000, kinds=["chunk"])) == len(gs.chunks)
    with pytest.raises(ValueError, match="mode"):
        gs.retrieve(QUERY, method="hirag", mode="hi_nobridge")


def test_a_community_report_ranks_the_chunks_of_its_highest_degree_members(gs, monkeypatch):
    """With ``COMMUNITY_REPORT_MEMBERS`` = 2, a report of a larger community ranks the chunks
    of its two highest-degree members only (ties: lower node index), while ``size`` and
    ``members`` still give the whole community; with ``entity_chunks=None`` every member
    counts, as documented."""
    import graphstrata.methods.hirag as hirag_module
    from graphstrata.hierarchy import rank_chunks
    from graphstrata.methods.hirag import HiRAG, _entity_chunk_ids

    hi = hi_index(gs)
    big = [c for c in range(hi.n_communities) if int((hi.members(c) < hi.n_entities).sum()) >= 4]
    assert big, "the fixture needs a community of four or more entities"
    monkeypatch.setattr(hirag_module, "COMMUNITY_REPORT_MEMBERS", 2)
    method = HiRAG()
    differs = False
    for c in big:
        members = hi.members(c).tolist()
        top2 = sorted(sorted(members, key=lambda i: (-int(hi.degree[i]), i))[:2])
        hit = method._community_hit(gs._state, hi, c, 0.5, 50)
        want = rank_chunks([_entity_chunk_ids(gs._state, i, 10) for i in top2 if i < hi.n_entities])
        assert hit.chunk_ids == want
        differs |= want != rank_chunks([_entity_chunk_ids(gs._state, i, 10) for i in members if i < hi.n_entities])
        assert hit.metadata["size"] == len(members) and len(hit.metadata["members"]) == len(members)
        every = method._community_hit(gs._state, hi, c, 0.5, None)
        assert every.chunk_ids == rank_chunks([_entity_chunk_ids(gs._state, i, None)
                                              for i in members if i < hi.n_entities])
    assert differs  # the bound did change a report here: the check above is not vacuous
