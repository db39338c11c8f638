"""Persisted derived structures (graphstrata.structures.registry, issue 33): the registry's codec round
trip gives the structure a fresh derivation gives, and a seeded state never rebuilds it."""

from __future__ import annotations

import numpy as np
import pytest

from graphstrata import GraphStrata
from graphstrata.structures.registry import DerivedSpec, decode, encode, prepare, register_derived, registered
from graphstrata.structures.passages import DEFAULT_PASSAGE_GRAPH, build_passage_graph
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
    import graphstrata.structures.passages as propagation

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


# -- wired end to end: prepared by the facade, persisted by the store, seeded at load ----------


def _arrays_of(spec: DerivedSpec, structure) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in spec.to_arrays(structure).items()}


def _eager() -> list[DerivedSpec]:
    return [s for s in registered() if s.eager]


@pytest.fixture(scope="module")
def persisted(tmp_path_factory: pytest.TempPathFactory) -> tuple[GraphStrata, object]:
    path = tmp_path_factory.mktemp("derived") / "idx"
    gs = GraphStrata.build(contract_documents(), embedder=HashEmbedder(), persist_dir=path)
    return gs, path


def test_build_prepares_and_persists_every_eager_structure(persisted) -> None:
    from graphstrata import store

    gs, path = persisted
    assert _eager() and DEFAULT_PASSAGE_GRAPH in _eager()
    held = gs.state.derived_snapshot()
    assert all(spec.key in held for spec in _eager())  # built before the state was published
    assert (store.version_dir(path) / store.DERIVED).is_file()
    assert store.read_manifest(path)["schema_version"] == store.SCHEMA_VERSION


def test_persisted_structures_equal_freshly_derived_ones(persisted) -> None:
    gs, path = persisted
    loaded = GraphStrata.load(path, embedder=HashEmbedder()).state
    seeded = loaded.derived_snapshot()
    for spec in _eager():
        fresh = spec.build(_fresh(loaded))
        assert spec.key in seeded, spec.key
        got, want = _arrays_of(spec, seeded[spec.key]), _arrays_of(spec, fresh)
        assert got.keys() == want.keys(), spec.key
        for name in want:
            assert got[name].dtype == want[name].dtype and np.array_equal(got[name], want[name]), (spec.key, name)


def test_a_loaded_index_answers_its_first_query_without_building_them(persisted, monkeypatch) -> None:
    """Every method's first query on a loaded index: no registered structure is built (the
    builders raise), and the passage graph's own builder is never called."""
    import graphstrata.structures.passages as propagation

    gs, path = persisted
    # no warm-up query: it would run archrag's first query inside the load, unguarded
    loaded = GraphStrata.load(path, embedder=HashEmbedder(), warm_up=False)
    keys = {spec.key for spec in registered()}
    real = EngineState.derived

    def guarded(self, key, build):
        if key in keys and key not in self.derived_snapshot():
            raise AssertionError(f"rebuilt the persisted structure {key!r}")
        return real(self, key, build)

    def boom(*a, **k):
        raise AssertionError("rebuilt the persisted passage graph")

    monkeypatch.setattr(EngineState, "derived", guarded)
    monkeypatch.setattr(propagation, "build_passage_graph", boom)
    for method in loaded.methods:
        got = loaded.retrieve("Who designed the Analytical Engine?", method=method, k=3, kinds=["chunk"])
        want = gs.retrieve("Who designed the Analytical Engine?", method=method, k=3, kinds=["chunk"])
        assert [(h.id, h.score) for h in got] == [(h.id, h.score) for h in want], method


def test_updates_keep_the_persisted_structures_current(tmp_path) -> None:
    path = tmp_path / "idx"
    docs = contract_documents()
    gs = GraphStrata.build(docs[:-1], embedder=HashEmbedder(), persist_dir=path)
    gs.insert([docs[-1]])
    gs.delete([docs[0].id])
    loaded = GraphStrata.load(path, embedder=HashEmbedder()).state
    for spec in _eager():
        got = _arrays_of(spec, loaded.derived_snapshot()[spec.key])
        want = _arrays_of(spec, spec.build(_fresh(loaded)))
        for name in want:
            assert np.array_equal(got[name], want[name]), (spec.key, name)


def test_an_update_hook_replaces_the_rebuild_where_it_can(tmp_path) -> None:
    calls: list[str] = []

    def build(state):
        calls.append("build")
        return np.asarray([len(state.chunks)], np.int64)

    def update(old, old_state, new_state):
        calls.append("update")
        assert int(old[0]) == len(old_state.chunks)
        return None if len(new_state.chunks) < len(old_state.chunks) else np.asarray([len(new_state.chunks)], np.int64)

    key = "test:chunk-count"
    register_derived(DerivedSpec(key=key, build=build, to_arrays=lambda a: {"n": a},
                                 from_arrays=lambda d: np.asarray(d["n"]), update=update))
    try:
        docs = contract_documents()
        gs = GraphStrata.build(docs[:-1], embedder=HashEmbedder(), persist_dir=tmp_path / "idx")
        assert calls == ["build"]
        gs.insert([docs[-1]])  # grows: the hook answers
        assert calls == ["build", "update"] and int(gs.state.derived(key, lambda: None)[0]) == len(gs.chunks)
        gs.delete([docs[0].id])  # shrinks: the hook declines, prepare builds
        assert calls == ["build", "update", "update", "build"]
        loaded = GraphStrata.load(tmp_path / "idx", embedder=HashEmbedder()).state
        assert int(loaded.derived_snapshot()[key][0]) == len(loaded.chunks)
    finally:
        from graphstrata.structures import registry as derived

        derived._SPECS.pop(key, None)


def test_a_corrupt_derived_file_is_named(persisted, tmp_path) -> None:
    import hashlib
    import json
    import shutil

    from graphstrata import store

    _, path = persisted
    copy = tmp_path / "idx"
    shutil.copytree(path, copy)
    vdir = store.version_dir(copy)
    with np.load(vdir / store.DERIVED) as npz:
        arrays = {k: np.array(npz[k]) for k in npz.files}
    bad = {k: (v[:1] if k.endswith("|indptr") else v) for k, v in arrays.items()}
    for payload in (b"PK\x03\x04 not a zip at all", None):
        if payload is None:
            with open(vdir / store.DERIVED, "wb") as f:
                np.savez(f, **bad)
        else:
            (vdir / store.DERIVED).write_bytes(payload)
        m = json.loads((vdir / "manifest.json").read_text())
        data = (vdir / store.DERIVED).read_bytes()
        m["files"][store.DERIVED] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        (vdir / "manifest.json").write_text(json.dumps(m))
        with pytest.raises(ValueError, match=store.DERIVED.replace(".", r"\.")):
            GraphStrata.load(copy, embedder=HashEmbedder())


def test_an_index_without_derived_structures_builds_them_while_loading(persisted, tmp_path) -> None:
    """Schema ≤ 5, or persisted by an update (no derived.npz): the load builds them, so the
    first query builds nothing."""
    import json
    import shutil

    from graphstrata import store

    _, path = persisted
    copy = tmp_path / "idx"
    shutil.copytree(path, copy)
    vdir = store.version_dir(copy)
    (vdir / store.DERIVED).unlink()
    m = json.loads((vdir / "manifest.json").read_text())
    m["files"].pop(store.DERIVED)
    (vdir / "manifest.json").write_text(json.dumps(m))
    loaded = GraphStrata.load(copy, embedder=HashEmbedder())
    assert DEFAULT_PASSAGE_GRAPH.key in loaded.state.derived_snapshot()
    built = loaded.state.derived_snapshot()[DEFAULT_PASSAGE_GRAPH.key]
    assert loaded.retrieve("Who designed the Analytical Engine?", k=3)
    assert loaded.state.derived_snapshot()[DEFAULT_PASSAGE_GRAPH.key] is built


def test_an_update_leaves_its_derived_structures_to_first_use_and_a_load_builds_them(persisted, tmp_path) -> None:
    """An insert does not rebuild every derived structure (a one-document insert stays cheap);
    the first query builds the one it reads, and a load of the updated index builds the rest."""
    import shutil

    _, path = persisted
    copy = tmp_path / "idx"
    shutil.copytree(path, copy)
    gs = GraphStrata.load(copy, embedder=HashEmbedder())
    gs.insert([{"id": "hopper", "text": "Grace Hopper wrote the first compiler, the A-0 System, in 1952."}])
    assert DEFAULT_PASSAGE_GRAPH.key not in gs.state.derived_snapshot()
    hits = gs.retrieve("Who wrote the first compiler?", k=3)
    assert hits and DEFAULT_PASSAGE_GRAPH.key in gs.state.derived_snapshot()
    graph = gs.state.derived_snapshot()[DEFAULT_PASSAGE_GRAPH.key]
    assert graph.push.n_items == len(gs.chunks)  # built from the new state, the new chunk in it
    again = GraphStrata.load(copy, embedder=HashEmbedder())
    assert len(again.chunks) == len(gs.chunks)
    assert DEFAULT_PASSAGE_GRAPH.key in again.state.derived_snapshot()
    assert [h.id for h in again.retrieve("Who wrote the first compiler?", k=3)] == [h.id for h in hits]


def test_freed_memory_is_handed_back_only_after_a_structure_is_built(persisted, monkeypatch) -> None:
    """A load whose structures all come from ``derived.npz`` builds nothing, so it walks no heap
    (``release_free_memory`` is a whole-heap walk); a state that builds them trims at most once
    per structure (one structure's builder may build another it reads)."""
    import graphstrata.structures.registry as derived_mod

    gs, path = persisted
    calls: list[int] = []
    monkeypatch.setattr(derived_mod, "release_free_memory", lambda: calls.append(1) or True)
    GraphStrata.load(path, embedder=HashEmbedder())
    assert calls == []
    prepare(_fresh(gs.state))
    assert 0 < len(calls) <= len(_eager())


def test_prepare_builds_lower_orders_first(gs: GraphStrata) -> None:
    """HiRAG's index (order -1: the largest transient of the stage) is prepared before every
    other structure, which keep their registration order."""
    done = prepare(_fresh(gs.state))
    assert done[0] == "hirag:index"
    rest = [spec.key for spec in registered() if spec.eager and spec.key != "hirag:index"]
    assert done[1:] == rest
