"""Graph operators: PPR, Steiner tree, MCMI expansion, path text (spec seed-agrag.md §2.4–§2.9).

Golden values: the PPR of a 3-node path is solved by hand below; the Steiner/MCMI values are
the spec's worked example (§2.8) in both modes.
"""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from graphstrata.methods.graph_ops import mcmi_expand, personalized_pagerank, render_paths, steiner_tree
from graphstrata.structures.push import transition_matrix

# -- PPR -----------------------------------------------------------------------------------------


def test_ppr_path_graph_hand_computed():
    # a - b - c, reset on a, d = 0.5:
    #   s_a = 0.5 + 0.5·s_b/2,  s_b = 0.5·(s_a + s_c),  s_c = 0.5·s_b/2
    #   → s = (7/12, 1/3, 1/12)
    adj = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], float))
    s = personalized_pagerank(adj, np.array([1.0, 0, 0]), damping=0.5, tol=1e-12)
    np.testing.assert_allclose(s, [7 / 12, 1 / 3, 1 / 12], atol=1e-9)
    assert s.sum() == pytest.approx(1.0)


def test_ppr_matches_networkx_weighted_with_dangling_node():
    rng = np.random.default_rng(0)
    g = nx.gnm_random_graph(30, 70, seed=1)
    for u, v in g.edges:
        g.edges[u, v]["weight"] = float(rng.uniform(0.1, 3.0))
    g.add_node(30)  # dangling
    reset = np.zeros(31)
    reset[[0, 5, 30]] = [2.0, 1.0, 1.0]
    adj = nx.to_scipy_sparse_array(g, nodelist=range(31), weight="weight")
    ours = personalized_pagerank(transition_matrix(adj), reset, damping=0.5, tol=1e-12)
    pers = {i: float(reset[i]) for i in range(31)}
    ref = nx.pagerank(g, alpha=0.5, personalization=pers, dangling=pers, weight="weight", tol=1e-13)
    np.testing.assert_allclose(ours, [ref[i] for i in range(31)], atol=1e-8)


def test_ppr_zero_weight_edges_and_validation():
    adj = sp.csr_matrix(np.array([[0, 0.0], [0.0, 0]]))
    s = personalized_pagerank(adj, np.array([0.0, 0.0]))  # no edges, no reset → uniform
    np.testing.assert_allclose(s, [0.5, 0.5])
    with pytest.raises(ValueError):
        personalized_pagerank(adj, np.array([1.0]))
    with pytest.raises(ValueError):
        personalized_pagerank(adj, np.array([-1.0, 1.0]))
    with pytest.raises(ValueError):
        personalized_pagerank(adj, np.array([1.0, 0.0]), damping=1.0)


# -- the worked example (spec §2.8) -------------------------------------------------------------

COSTS = {("A", "B"): 0.30, ("B", "C"): 0.40, ("A", "D"): 0.20, ("D", "C"): 0.35,
         ("C", "E"): 0.60, ("A", "P"): 0.10, ("P", "F"): 0.50, ("B", "F"): 0.90}
SCORES = {"A": 0.30, "B": 0.25, "C": 0.15, "D": 0.12, "E": 0.02, "P": 0.01, "F": 0.05}


@pytest.fixture()
def example():
    g = nx.Graph()
    for (u, v), c in COSTS.items():
        g.add_edge(u, v, cost=c)
    return g


def edge_set(g):
    return {tuple(sorted(e)) for e in g.edges}


def test_steiner_tree_worked_example(example):
    tree = steiner_tree(example, ["A", "C"])
    assert edge_set(tree) == {("A", "D"), ("C", "D")}
    assert sum(example.edges[e]["cost"] for e in tree.edges) == pytest.approx(0.55)
    ref = nx.approximation.steiner_tree(example, ["A", "C"], weight="cost", method="mehlhorn")
    assert edge_set(tree) == edge_set(ref)


def test_steiner_tree_degenerate_cases(example):
    assert list(steiner_tree(example, []).nodes) == []
    assert list(steiner_tree(example, ["Z"]).nodes) == []  # missing terminal dropped
    one = steiner_tree(example, ["A", "Z"])
    assert list(one.nodes) == ["A"] and one.number_of_edges() == 0
    # terminals in two components: a forest, not an error
    example.add_edge("X", "Y", cost=1.0)
    forest = steiner_tree(example, ["A", "C", "X", "Y"])
    assert edge_set(forest) == {("A", "D"), ("C", "D"), ("X", "Y")}


def test_steiner_tree_three_terminals_matches_networkx():
    g = nx.grid_2d_graph(5, 5)
    rng = np.random.default_rng(3)
    for u, v in g.edges:
        g.edges[u, v]["cost"] = float(rng.uniform(0.1, 1.0))
    terms = [(0, 0), (4, 4), (0, 4)]
    ours = steiner_tree(g, terms)
    ref = nx.approximation.steiner_tree(g, terms, weight="cost", method="mehlhorn")
    assert edge_set(ours) == edge_set(ref)
    assert nx.is_tree(ours) and set(terms) <= set(ours)


def test_mcmi_paper_mode_worked_example(example):
    res = mcmi_expand(example, SCORES, ["A", "C"], mode="paper")
    assert set(res.subgraph.nodes) == {"A", "B", "C", "D"}
    # induced output: the 4-cycle A-B-C-D (the paper's "cycles")
    assert edge_set(res.subgraph) == {("A", "B"), ("A", "D"), ("B", "C"), ("C", "D")}
    assert len(nx.cycle_basis(res.subgraph)) == 1
    assert res.added == ["B"]
    assert res.rbar == pytest.approx(0.7131, abs=1e-4)  # r̄₁; r̄₀ = 0.7179 < 0.8333 (B)
    assert res.subgraph.edges["A", "B"]["cost"] == pytest.approx(0.30)


def test_mcmi_initial_rbar_and_stop_rule(example):
    # no expansion allowed → r̄₀ of the Steiner tree
    res = mcmi_expand(example, SCORES, ["A", "C"], mode="paper", max_expansion=0)
    assert res.rbar == pytest.approx((0.21 / 0.20 + 0.135 / 0.35) / 2, abs=1e-9)
    assert res.rbar == pytest.approx(0.7179, abs=1e-4)
    assert set(res.subgraph.nodes) == {"A", "C", "D"}


def test_mcmi_code_mode_worked_example(example):
    res = mcmi_expand(example, SCORES, ["A", "C"], mode="agrag_code_2025")
    assert res.rbar == pytest.approx((0.21 * 0.20 + 0.135 * 0.35) / 2)  # 0.0446, frozen
    assert res.added == ["B", "P", "F"]  # E (0.033) < r̄ stops
    assert set(res.subgraph.nodes) == {"A", "B", "C", "D", "F", "P"}
    assert {("A", "P"), ("F", "P"), ("B", "F")} <= edge_set(res.subgraph)


def test_mcmi_cap_single_anchor_exclude_and_bad_mode(example):
    res = mcmi_expand(example, SCORES, ["A", "C"], mode="agrag_code_2025", max_expansion=1)
    assert res.added == ["B"]
    one = mcmi_expand(example, SCORES, ["A"], mode="paper")
    # single anchor: r̄ = 0 over no edge, so B (0.25/0.30) joins; then r̄ = 0.275/0.30 = 0.917
    # beats every frontier ratio (D 0.6, C 0.375, P 0.1, F 0.056) and the loop stops
    assert one.added == ["B"] and set(one.subgraph.nodes) == {"A", "B"}
    assert one.rbar == pytest.approx(0.275 / 0.30)
    ex = mcmi_expand(example, SCORES, ["A", "C"], mode="agrag_code_2025", exclude=["B"])
    assert "B" not in ex.subgraph
    with pytest.raises(ValueError):
        mcmi_expand(example, SCORES, ["A", "C"], mode="nope")
    with pytest.raises(ValueError):
        mcmi_expand(example, SCORES, ["A", "C"], max_expansion=-1)


def test_mcmi_is_deterministic_on_ties():
    g = nx.Graph()
    for v in ("x", "y", "z"):
        g.add_edge("a", v, cost=0.5)
    s = {"a": 1.0, "x": 0.2, "y": 0.2, "z": 0.2}
    runs = {tuple(mcmi_expand(g, s, ["a"], max_expansion=1).added) for _ in range(5)}
    assert runs == {("x",)}  # equal ratio, score and cost: lowest id


# -- path text ---------------------------------------------------------------------------------


def test_render_paths_golden_strings(example):
    sub = mcmi_expand(example, SCORES, ["A", "C"], mode="paper").subgraph
    names = {"A": "kidney", "B": "tumors", "C": "blood vessels", "D": "kidney cancer"}

    def triples(u, v):
        return [(names[u], "related to", names[v])]

    paths, passages = render_paths(sub, triples, scores=SCORES)
    assert passages == []
    assert len(paths) == 1
    # edges by (−max score, cost): A-D (0.30, 0.20), A-B (0.30, 0.30), B-C (0.25), C-D (0.15)
    assert paths[0].text == (
        "(kidney [SEP] related to [SEP] kidney cancer) [SEP_REC] "
        "(kidney [SEP] related to [SEP] tumors) [SEP_REC] "
        "(tumors [SEP] related to [SEP] blood vessels) [SEP_REC] "
        "(blood vessels [SEP] related to [SEP] kidney cancer)"
    )
    assert paths[0].nodes[0] == "A" and paths[0].score == pytest.approx(0.30)


def test_render_paths_components_passages_and_parallel_facts():
    g = nx.Graph()
    g.add_edge(0, 1, cost=0.1)
    g.add_edge(1, 10, cost=0.2)  # 10 is a passage
    g.add_edge(2, 3, cost=0.3)  # a second component
    g.add_node(4)  # singleton: not rendered
    s = {0: 0.5, 1: 0.4, 2: 0.1, 3: 0.2, 10: 0.9}

    def triples(u, v):
        if (u, v) == (0, 1):
            return [("a", "p", "b"), ("a", "q", "b")]  # parallel facts both rendered
        return [(str(u), "synonym", str(v))]

    paths, passages = render_paths(g, triples, is_passage=lambda n: n >= 10, scores=s)
    assert passages == [10]
    assert [p.text for p in paths] == [
        "(a [SEP] p [SEP] b) [SEP_REC] (a [SEP] q [SEP] b)",
        "(2 [SEP] synonym [SEP] 3)",
    ]
    assert paths[0].edges == [(0, 1), (0, 1)]
