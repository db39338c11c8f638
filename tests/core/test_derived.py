"""Persisted derived structures (graphstrata.derived, issue 33): the registry's codec round
trip gives the structure a fresh derivation gives, and a seeded state never rebuilds it."""

from __future__ import annotations

import numpy as np
import pytest

from graphstrata import GraphStrata
from graphstrata.derived import DerivedSpec, decode, encode, prepare, register_derived, registered
from graphstrata.methods.propagation import DEFAULT_PASSAGE_GRAPH, build_passage_graph
from graphstrata.state import EngineState
from graphstrata.testing import HashEmbedder
from graphstrata.testing.contract import contract_documents


@pytest.fixture(scope="module")
def gs() -> GraphStrata:
    return GraphStrata.build(contract_documents(), embedder=HashEmbedder())


def _fresh(state: EngineState) -> EngineState:
    import dataclasses

    return dataclasses.replace(state)  # same records, empty derived cache


def test_passage_graph_round_trips_through_the_codec(gs: GraphStrata) -> None:
    state = _fresh(gs.state)
    prepare(state, [DEFAULT_PASSAGE_GRAPH.key])
    arrays = encode(state)  # with what the graph's builder derived on the way (document rows)
    assert any(name.startswith(DEFAULT_PASSAGE_GRAPH.key + "|") for name in arrays)
    got = decode(arrays)[DEFAULT_PASSAGE_GRAPH.key]
    want = build_passage_graph(gs.state, 50, 2.0, 2.0)
    for name, arr in want.push.arrays().items():
        assert np.array_equal(got.push.arrays()[name], arr), name
    assert (got.nodes, got.title_nodes) == (want.nodes, want.title_nodes)


def test_a_seeded_state_answers_without_building(gs: GraphStrata, monkeypatch: pytest.MonkeyPatch) -> None:
    state = _fresh(gs.state)
    prepare(state)
    seeded = EngineState(**{f: getattr(state, f) for f in state.__dataclass_fields__ if not f.startswith("_")
                            and f != "derived_seed"}, derived_seed=decode(encode(state)))
    import graphstrata.methods.propagation as propagation

    def boom(*a, **k):
        raise AssertionError("rebuilt a persisted structure")

    monkeypatch.setattr(propagation, "build_passage_graph", boom)
    hits_seeded = GraphStrata(seeded).retrieve("Who designed the Analytical Engine?", k=3)
    hits_built = GraphStrata(state).retrieve("Who designed the Analytical Engine?", k=3)
    assert [h.id for h in hits_seeded] == [h.id for h in hits_built]


def test_registry_ignores_other_versions_and_names_bad_arrays() -> None:
    spec = register_derived(DerivedSpec(
        key="test:toy", build=lambda s: np.arange(3),
        to_arrays=lambda a: {"a": a}, from_arrays=lambda d: np.asarray(d["a"]), version=2, eager=False,
    ))
    assert spec in registered()
    assert decode({"test:toy|1|a": np.arange(3)}) == {}
    assert np.array_equal(decode({"test:toy|2|a": np.arange(3)})["test:toy"], np.arange(3))
    with pytest.raises(ValueError, match="test:toy"):
        decode({"test:toy|2|b": np.arange(3)})
    with pytest.raises(ValueError):
        register_derived(DerivedSpec(key="a|b", build=len, to_arrays=dict, from_arrays=dict))
