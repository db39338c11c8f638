"""LightRAG and HiRAG at scale (issue 33): their derived structures round-trip through the
persisted-array codecs (decoded == fresh build, same answers, never rebuilt when seeded), the
bounded searches give what the exhaustive ones give, and a query's work follows its seeds, not
the corpus (unrelated documents added do not change what it touches)."""

from __future__ import annotations

import dataclasses
import random
from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest
from graphstrata import Document, GraphStrata
from graphstrata.structures.registry import decode, encode, pack_strings, prepare, unpack_strings
from graphstrata.graph import KnowledgeGraph
from graphstrata.structures import hirag as hirag_index
from graphstrata.structures.clustering import csr_edges as _csr
from graphstrata.structures.hirag import DEFAULT_HI_INDEX, HiIndex, build_hi_index, hi_index, hi_index_arrays
from graphstrata.methods import hirag as hirag_method
from graphstrata.methods import lightrag
from graphstrata.structures import lightrag as lightrag_structures
from graphstrata.methods.hirag import bridge_path_rows, bridge_triples_rows, shortest_path, weighted_path
from graphstrata.structures.lightrag import (
    LIGHT_GRAPH,
    RELATION_VECTORS,
    build_light_graph,
    build_relation_vectors,
    light_graph,
)
from graphstrata.state import EngineState
from graphstrata.testing import HashEmbedder
from graphstrata.types import Entity, Relation

from .conftest import CORPUS

QUERY = "Where was Edmund Hillary born?"
KEYS = [LIGHT_GRAPH.key, RELATION_VECTORS.key, DEFAULT_HI_INDEX.key]


def _docs() -> list[Document]:
    return [Document(d.id, d.text, dict(d.metadata)) for d in CORPUS]


def _unrelated(n: int, seed: int = 7) -> list[Document]:
    """``n`` documents of made-up names and words that share nothing with :data:`CORPUS`."""
    rng = random.Random(seed)
    syl = ["zor", "vak", "mil", "tra", "quo", "pel", "dax", "rin", "fum", "gol", "wex", "bry"]

    def word(cap: bool) -> str:
        w = "".join(rng.choice(syl) for _ in range(3))
        return w.capitalize() if cap else w

    docs = []
    for i in range(n):
        names = [f"{word(True)} {word(True)}" for _ in range(3)]
        text = " ".join(
            f"{names[j % 3]} {word(False)} {word(False)} {names[(j + 1) % 3]} in {word(True)}."
            for j in range(4)
        )
        docs.append(Document(f"x{i}", text, {"title": names[0]}))
    return docs


@pytest.fixture(scope="module")
def gs() -> GraphStrata:
    return GraphStrata.build(_docs(), config={"chunk_size": 40, "chunk_overlap": 8},
                             embedder=HashEmbedder(256))


def _fresh(state: EngineState, seed=None) -> EngineState:
    fields = {f: getattr(state, f) for f in state.__dataclass_fields__ if not f.startswith("_") and f != "derived_seed"}
    return EngineState(**fields, derived_seed=seed)


def _hits(gs_or_state, method: str, **options):
    g = gs_or_state if isinstance(gs_or_state, GraphStrata) else GraphStrata(gs_or_state)
    return [(h.kind, h.id, round(h.score, 9), tuple(h.document_ids)) for h in g.retrieve(QUERY, method=method, k=5, **options)]


# -- codecs ------------------------------------------------------------------------------------


def test_light_graph_and_relation_vectors_round_trip(gs: GraphStrata) -> None:
    state = _fresh(gs.state)
    prepare(state, [LIGHT_GRAPH.key, RELATION_VECTORS.key])
    arrays = encode(state)
    assert arrays and all(v.dtype != object for v in arrays.values())
    got = decode(arrays)
    want = build_light_graph(gs.state)
    for f in dataclasses.fields(want):
        a, b = getattr(got[LIGHT_GRAPH.key], f.name), getattr(want, f.name)
        assert np.array_equal(a, b) if isinstance(b, np.ndarray) else a == b, f.name
    rv, fresh = got[RELATION_VECTORS.key], build_relation_vectors(gs.state, 0.5)
    assert rv.weight == fresh.weight and np.array_equal(rv.norms, fresh.norms)
    assert np.array_equal(rv.heavy, fresh.heavy) and np.array_equal(rv.heavy_mean, fresh.heavy_mean)


def test_hi_index_round_trips(gs: GraphStrata) -> None:
    state = _fresh(gs.state)
    prepare(state, [DEFAULT_HI_INDEX.key])
    got = decode(encode(state))[DEFAULT_HI_INDEX.key]
    want = build_hi_index(gs.state)
    for name, arr in hi_index_arrays(want).items():
        assert np.array_equal(hi_index_arrays(got)[name], arr), name
    assert (got.summary_ids, got.names, got.descriptions, got.chunk_ids, got.variant, got.sparsity) == (
        want.summary_ids, want.names, want.descriptions, want.chunk_ids, want.variant, want.sparsity)
    with pytest.raises(ValueError, match="not bound"):
        got.node_id(0)
    got.bind(gs.kg, gs.vectors["entities"])
    assert got.node_ids == want.node_ids and np.array_equal(got.vectors, want.vectors)
    rows = list(range(got.n_nodes - 1, -1, -3))  # entities and summary nodes, out of order
    assert got.node_ids_of(rows) == [got.node_id(i) for i in rows] == [want.node_ids[i] for i in rows]
    assert got.n_nodes > got.n_entities  # the sample has summary nodes: both branches ran
    assert got.communities == want.communities and got.community_of == want.community_of
    assert {tuple(sorted(e)) for e in got.graph.edges} == {tuple(sorted(e)) for e in want.graph.edges}


def test_codecs_name_corrupt_arrays(gs: GraphStrata) -> None:
    state = _fresh(gs.state)
    prepare(state, KEYS)
    arrays = encode(state)
    broken = dict(arrays)
    name = f"{DEFAULT_HI_INDEX.key}|{DEFAULT_HI_INDEX.version}|indptr"
    broken[name] = broken[name][:-1]
    with pytest.raises(ValueError, match="hirag:index"):
        decode(broken)
    broken = dict(arrays)
    name = f"{LIGHT_GRAPH.key}|{LIGHT_GRAPH.version}|src"
    broken[name] = broken[name][:-1]
    with pytest.raises(ValueError, match="lightrag:graph"):
        decode(broken)
    with pytest.raises(ValueError, match="offsets"):
        unpack_strings(pack_strings(["a", "bé"])["utf8"], np.asarray([0, 5]))
    packed = pack_strings(["a", "", "bé"])
    assert unpack_strings(packed["utf8"], packed["offsets"]) == ["a", "", "bé"]


def test_a_seeded_state_answers_the_same_without_building(gs: GraphStrata, monkeypatch) -> None:
    built = _fresh(gs.state)
    prepare(built, KEYS)
    seeded = _fresh(gs.state, decode(encode(built)))
    want = {m: _hits(built, m, explain=True) for m in ("lightrag", "hirag")}

    def boom(*a, **k):
        raise AssertionError("rebuilt a persisted structure")

    for mod, name in ((lightrag_structures, "build_light_graph"), (lightrag_structures, "build_relation_vectors"),
                      (hirag_index, "build_hi_index")):
        monkeypatch.setattr(mod, name, boom)
    for m in ("lightrag", "hirag"):
        assert _hits(seeded, m, explain=True) == want[m]
    assert hi_index(seeded) is seeded.derived_snapshot()[DEFAULT_HI_INDEX.key]


def test_persisted_hi_index_of_another_variant_is_not_used(gs: GraphStrata) -> None:
    state = _fresh(gs.state)
    prepare(state, [DEFAULT_HI_INDEX.key])
    hi = decode(encode(state))[DEFAULT_HI_INDEX.key]
    hi.variant = "llm:some-model"
    seeded = _fresh(gs.state, {DEFAULT_HI_INDEX.key: hi})
    assert hi_index(seeded) is not hi and hi_index(seeded).variant == "extractive"


def test_light_graph_matches_the_kg(gs: GraphStrata) -> None:
    state = gs.state
    g = light_graph(state)
    kg = state.kg
    assert np.array_equal(g.degree, np.diff(kg.adjacency().indptr))
    for row in range(len(state.chunks)):
        ents = [kg.entity_ids[e] for e in g.chunk_ent[g.chunk_ent_indptr[row]:g.chunk_ent_indptr[row + 1]]]
        assert ents == kg.chunk_entities().get(state.chunks[row].id, [])
    for i in range(g.n_relations):
        r = kg.relations[g.key(kg, i)]
        rows = g.rel_chunk_rows[g.rel_chunk_indptr[i]:g.rel_chunk_indptr[i + 1]]
        assert [state.chunks[c].id for c in rows] == list(r.chunk_ids)
        assert g.documents(rows) == state.document_ids_of(r.chunk_ids)
    with pytest.raises(ValueError, match="does not fit"):
        g.check(SimpleNamespace(kg=kg, chunks=state.chunks[:-1]))


# -- bounded searches give the exhaustive answers ------------------------------------------


EXHAUSTIVE = {
    "lightrag": {"ef_search": 10_000, "relation_seed_chunks": 10_000, "relation_seed_cap": None,
                 "spread_max_chunks": 10**9},
    "hirag": {"ef_search": 10_000, "max_path_visits": None},
}


@pytest.mark.parametrize("method", ["lightrag", "hirag"])
@pytest.mark.parametrize("mode", [None, "local", "global"])
def test_bounded_search_equals_exhaustive_on_a_small_corpus(gs: GraphStrata, method: str, mode) -> None:
    opts = {} if mode is None else {"mode": mode}
    assert _hits(gs, method, **opts) == _hits(gs, method, **opts, **EXHAUSTIVE[method])


def _brute_incident(kg, found, limit, tokens=3):
    """The one-hop expansion as the pre-issue-33 code made it: every incident relation, ranked
    by (edge degree, float32 weight, endpoint rows), cut greedily at ``limit`` tokens."""
    adj = kg.adjacency()
    deg = np.diff(adj.indptr)
    best = {}
    for eid, s, _ in found:
        for nb in kg.neighbors(eid):
            key = (eid, nb) if eid < nb else (nb, eid)
            best[key] = max(best.get(key, -1.0), s)
    order = sorted(best, key=lambda k: (
        -(deg[kg.row[k[0]]] + deg[kg.row[k[1]]]), -float(np.float32(kg.relations[k].weight)),
        min(kg.row[k[0]], kg.row[k[1]]), max(kg.row[k[0]], kg.row[k[1]])))
    out = []
    for key in order[: limit // tokens if limit is not None else None]:
        out.append((key, best[key]))
    return out


@pytest.mark.parametrize("limit", [3, 60, 600, 3000, None])
def test_incident_edges_merge_rank_ordered_prefixes_exactly(limit) -> None:
    rng = np.random.default_rng(1)
    n = 700
    ents = [Entity(f"e{i:03d}", f"E{i}", "", [], 1.0) for i in range(n)]
    rels = [Relation("e000", f"e{j:03d}", "", float(rng.integers(1, 5)), []) for j in range(1, 600)]
    rels += [Relation("e001", f"e{j:03d}", "", float(rng.integers(1, 5)), []) for j in range(2, 300)]
    rels += [Relation(f"e{a:03d}", f"e{b:03d}", "", 1.0, []) for a, b in rng.integers(2, n, (800, 2)) if a != b]
    kg = KnowledgeGraph(ents, rels)
    state = SimpleNamespace(kg=kg, chunks=[], chunk_row={})
    g = build_light_graph(state)
    found = [("e000", 0.9, "local"), ("e001", 0.7, "local"), ("e005", 0.95, "local")]
    got = lightrag._incident_edges(kg, g, found, lambda x: "a b c", limit)
    assert [(k, s) for k, s, _, _ in got] == _brute_incident(kg, found, limit)
    assert all(g.key(kg, i) == k for k, _, _, i in got)


def _hi_of(edges, n, weights=None) -> HiIndex:
    a = np.asarray([e[0] for e in edges], np.int64)
    b = np.asarray([e[1] for e in edges], np.int64)
    w = np.asarray(weights if weights is not None else [1.0] * len(edges), np.float64)
    indptr, indices, ws = _csr(n, a, b, w)
    return HiIndex(n, [], [], [], [], [], np.zeros((0, 4), np.float32), indptr, indices, ws,
                   np.zeros(1, np.int64), np.zeros(0, np.int32), np.full(n, -1, np.int32))


def test_shortest_paths_are_networkx_paths() -> None:
    rng = np.random.default_rng(3)
    for trial in range(20):
        n = int(rng.integers(5, 80))
        m = int(rng.integers(n, 4 * n))
        pairs = {tuple(sorted(map(int, rng.integers(0, n, 2)))) for _ in range(m)}
        edges = [p for p in pairs if p[0] != p[1]]
        rng.shuffle(edges)
        weights = rng.integers(1, 6, len(edges)).astype(float)
        hi = _hi_of(edges, n, weights)
        g = nx.Graph()
        g.add_nodes_from(range(n))
        g.add_weighted_edges_from((a, b, w) for (a, b), w in zip(edges, weights, strict=True))
        for a, b in rng.integers(0, n, (10, 2)).tolist():
            try:
                want = nx.bidirectional_shortest_path(g, a, b)
            except nx.NetworkXNoPath:
                want = None
            assert shortest_path(hi, a, b) == want, (trial, a, b)
            try:
                want = nx.dijkstra_path(g, a, b, weight=lambda u, v, d: 1.0 / max(d["weight"], 1e-6))
            except nx.NetworkXNoPath:
                want = None
            assert weighted_path(hi, a, b) == want, (trial, a, b)


def test_bridge_path_rows_follow_the_networkx_bridge_path() -> None:
    # the ladder of test_hirag.py: a-b-c-d-e chain, shortcut a-x-e, island y-z
    names = ["a", "b", "c", "d", "e", "x", "y", "z"]
    ix = {v: i for i, v in enumerate(names)}
    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("a", "x"), ("x", "e"), ("y", "z")]
    hi = _hi_of([(ix[a], ix[b]) for a, b in edges], len(names))
    hi.bind(SimpleNamespace(entity_ids=names, row=ix), None)

    def path(keys, **kw):
        return [names[i] for i in bridge_path_rows(hi, [ix[k] for k in keys], **kw)]

    assert path(["a", "c"]) == ["a", "b", "c"]
    assert path(["a", "e"]) == ["a", "x", "e"]
    assert path(["b", "d", "e"]) == ["b", "c", "d", "e"]
    assert path(["c", "y", "z"]) == ["c", "y", "z"]
    assert path(["a", "d"], max_visits=2) == ["a", "d"]  # over budget: skipped like a disconnected pair
    triples = bridge_triples_rows(hi, [ix[v] for v in ["a", "x", "e", "d"]])
    assert {(names[i], names[j]) for i, j in triples} == {("a", "x"), ("e", "x"), ("d", "e")}


# -- bounded work --------------------------------------------------------------------------


def _component(prefix: str, n: int, rng) -> tuple[list[Entity], list[Relation], list[str]]:
    """A random connected component: ``n`` entities, a chain plus random chords, one chunk per
    relation group (chunk ids ``<prefix>#<j>``)."""
    ents = [Entity(f"{prefix}{i:03d}", f"{prefix.upper()}{i}", "", [], 1.0) for i in range(n)]
    chunks = [f"{prefix}#{j}" for j in range(n // 3 + 1)]
    pairs = [(i, i + 1) for i in range(n - 1)] + [tuple(sorted(map(int, rng.integers(0, n, 2)))) for _ in range(2 * n)]
    rels = {}
    for a, b in pairs:
        if a != b:
            cids = sorted({chunks[a // 3], chunks[b // 3]})
            rels[(a, b)] = Relation(ents[a].id, ents[b].id, "", float(rng.integers(1, 4)), cids)
    for (a, b), r in rels.items():
        for e in (ents[a], ents[b]):
            e.chunk_ids = sorted(set(e.chunk_ids) | set(r.chunk_ids))
    return ents, list(rels.values()), chunks


class _FixedChunks:
    """A chunk index whose search returns the given chunk ids' rows (the seeds)."""

    def __init__(self, rows):
        self.rows = np.asarray(rows, np.int64)

    def search(self, query, n):
        return self.rows[:n], np.ones(min(n, len(self.rows)), np.float32)


def _synthetic_state(components):
    ents, rels, chunk_ids = [], [], []
    for e, r, c in components:
        ents += e
        rels += r
        chunk_ids += c
    chunks = [SimpleNamespace(id=c, document_id=c.split("#")[0]) for c in chunk_ids]
    return SimpleNamespace(kg=KnowledgeGraph(ents, rels), chunks=chunks, chunk_row={c: i for i, c in enumerate(chunk_ids)})


def test_touched_relations_do_not_grow_with_unrelated_components() -> None:
    rng = np.random.default_rng(5)
    core = _component("core", 60, rng)
    others = [_component(f"u{k}", 200, rng) for k in range(10)]
    small, big = _synthetic_state([core]), _synthetic_state([core] + others)
    assert len(big.kg.relations) > 20 * len(small.kg.relations)
    touched = []
    for state in (small, big):
        g = build_light_graph(state)
        kg = state.kg
        state.chunk_index = _FixedChunks([state.chunk_row["core#2"], state.chunk_row["core#7"]])
        seeds = np.asarray([kg.row["core005"], kg.row["core040"]], np.int64)
        cand = lightrag._relation_candidates(state, g, np.zeros(4, np.float32), seeds, 2, 8)
        found = [("core005", 0.9, "local"), ("core040", 0.8, "local")]
        inc = lightrag._incident_edges(kg, g, found, lambda x: "a b c", 30)
        touched.append(({g.key(kg, int(i)) for i in cand}, [(k, s) for k, s, _, _ in inc]))
    assert touched[0][0] and touched[0] == touched[1]


def _touched_entities(state, monkeypatch, **options) -> set:
    seen: set = set()
    real = HiIndex.similarity

    def counting(self, rows, query):
        seen.update(int(i) for i in rows if i < self.n_entities)
        return real(self, rows, query)

    monkeypatch.setattr(HiIndex, "similarity", counting)
    GraphStrata(state).retrieve(QUERY, method="hirag", k=3, **options)
    monkeypatch.undo()
    return seen


def test_query_work_is_bounded_by_the_seeds(monkeypatch) -> None:
    """30x the documents: LightRAG scores at most the relations of its seed chunks and capped
    seed entities, HiRAG computes similarities for at most the local top-n, the retrieved
    communities' members and the bridge path (the KG around the query is allowed to change:
    statistical extraction depends on the corpus)."""
    config = {"chunk_size": 40, "chunk_overlap": 8}
    state = GraphStrata.build(_docs() + _unrelated(300), config=config, embedder=HashEmbedder(512)).state
    opts = {"top_k": 3, "relation_seed_chunks": 2, "relation_seed_cap": 8}
    scored: list[int] = []
    real = lightrag_structures.RelationVectors.similarity

    def counting(self, g, st, rels, query):
        scored.append(len(rels))
        return real(self, g, st, rels, query)

    monkeypatch.setattr(lightrag_structures.RelationVectors, "similarity", counting)
    GraphStrata(state).retrieve(QUERY, method="lightrag", k=3, **opts)
    monkeypatch.undo()
    g = light_graph(state)
    per_chunk = int(np.diff(g.chunk_rel_indptr).max())
    assert 0 < sum(scored) <= 2 * per_chunk + 3 * 8 < len(state.kg.relations) // 20
    o = {"top_n": 5, "max_communities": 2}
    touched = _touched_entities(state, monkeypatch, **o)
    hits = GraphStrata(state).retrieve(QUERY, method="hirag", k=3, **o)
    path = next((h.metadata["nodes"] for h in hits if h.kind == "path"), [])
    bound = o["top_n"] + o["max_communities"] * hirag_index.HiIndexConfig().leiden_max_cluster_size + len(path)
    assert 0 < len(touched) <= bound < len(state.kg) // 20


def test_hirag_max_path_visits_bounds_the_bridge_search(gs: GraphStrata) -> None:
    hits = gs.retrieve(QUERY, method="hirag", k=3, mode="bridge", max_path_visits=1)
    path = next(h for h in hits if h.kind == "path")
    # every pair is adjacent or over budget (skipped like a disconnected pair): the keys in order
    assert path.metadata["nodes"] == path.metadata["key_entities"]
    with pytest.raises(ValueError, match="max_path_visits"):
        gs.retrieve(QUERY, method="hirag", max_path_visits=0)
    assert hirag_method.HiRAG.defaults["max_path_visits"] >= 1
