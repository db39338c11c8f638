"""A compact loaded state (issue 33): extraction records and frozen statistics kept compressed
until an update reads them, vectors memory-mapped from the C-HNSW files instead of copied."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from graphstrata import GraphStrata
from graphstrata.extraction import ChunkRecord, CompactRecord
from graphstrata.index import ChunkIndex, LayeredIndex, mapped_vectors
from graphstrata.state import ChunkRecords, FrozenStats


@pytest.fixture()
def gs(corpus, embedder, small_config, tmp_path):
    return GraphStrata.build(corpus, config=small_config, embedder=embedder, persist_dir=tmp_path / "idx")


def test_a_published_state_holds_its_records_and_statistics_compressed(gs, embedder):
    for state in (gs.state, GraphStrata.load(gs.persist_dir, embedder=embedder).state):
        assert isinstance(state.records, ChunkRecords) and isinstance(state.frozen, FrozenStats)
        assert set(state.records) == set(state.chunk_row) and "extraction" in state.frozen
        assert state.records.nbytes < sum(len(state.records[c].to_json()) for c in state.records)


def test_records_decode_on_first_use_and_keep_their_bytes_until_then():
    rec = ChunkRecord("c#0", {"ada": ({"Ada": 2}, [2], ["Ada wrote."])}, {("ada", "engine"): ([1], ["x"])})
    packed = ChunkRecords.from_records({"c#0": rec})
    got = packed["c#0"]
    assert isinstance(got, CompactRecord) and got.packed is not None
    assert got.to_json() == rec.to_json() and got.packed is not None  # text without decoding
    assert ChunkRecords.from_records({"c#0": got}).raw("c#0") == packed.raw("c#0")
    assert got.entities == rec.entities and got.relations == rec.relations and got == rec
    assert got.packed is None  # decoded: a later pack encodes it again
    assert ChunkRecords.from_records({"c#0": got})["c#0"] == rec
    with pytest.raises(KeyError):
        packed["nope"]


def test_a_damaged_record_is_named_when_read():
    blob = zlib.compress(b"[[],[]]")
    long = zlib.compress(("[[" + ",".join(f'["e{i}",{{"E":1}},1,["s"]]' for i in range(200)) + "],[]]").encode())
    # the load-time check reads the first bytes only; damage further in is named when read
    damaged = ChunkRecords(["a", "b"], [blob, long[:-4] + b"\x00\x00\x00\x00"], level_check=True)
    assert damaged["a"].relations == {}
    with pytest.raises(ValueError, match="extraction record of 'b' unreadable"):
        damaged["b"].entities
    with pytest.raises(ValueError, match="extraction record of 'b' unreadable"):
        ChunkRecords(["a", "b"], [blob, b"not zlib"])


def test_frozen_statistics_decode_on_use(gs):
    frozen = gs.state.frozen
    model = frozen["extraction"]
    assert frozen["extraction"] is model  # reused while held
    again = FrozenStats.from_models({"extraction": model.to_dict()})
    assert again["extraction"].terms == model.terms and np.array_equal(again["extraction"].idf, model.idf)
    with pytest.raises(ValueError, match="'x' unreadable"):
        FrozenStats({"x": b"garbage"})["x"]


def test_an_insert_after_a_load_decodes_only_what_it_touches(gs, embedder, monkeypatch):
    loaded = GraphStrata.load(gs.persist_dir, embedder=embedder)
    decoded: list[str] = []
    real = ChunkRecord.from_json.__func__

    def counting(cls, chunk_id, text):
        decoded.append(chunk_id)
        return real(cls, chunk_id, text)

    monkeypatch.setattr(ChunkRecord, "from_json", classmethod(counting))
    loaded.insert([{"id": "kiwi", "text": "The kiwi is a flightless bird of New Zealand."}])
    gs.insert([{"id": "kiwi", "text": "The kiwi is a flightless bird of New Zealand."}])
    assert len(set(decoded)) < len(loaded.state.chunks)
    assert {k: v.to_json() for k, v in loaded.state.records.items()} == {k: v.to_json() for k, v in gs.state.records.items()}


def _rows(n: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize("n", [8, 12, 9])
def test_vectors_are_mapped_from_the_index_file_where_aligned(tmp_path, n):
    index = ChunkIndex.build(_rows(n))
    index.save(tmp_path / "c.chnsw")
    loaded = ChunkIndex.load(tmp_path / "c.chnsw", None, index.labels)
    stored = index.index.get_vectors(index.labels)  # as the index holds them (normalised there)
    assert np.array_equal(loaded.vectors, stored)
    mapped = mapped_vectors(tmp_path / "c.chnsw", loaded.index, [loaded.labels])[0]
    # the vector block follows n one-byte deletion flags: float32-aligned when n % 4 == 0
    assert (mapped is not None) == (n % 4 == 0)
    if mapped is not None:
        root = mapped
        while isinstance(root.base, np.ndarray):
            root = root.base
        assert isinstance(root, np.memmap) and not mapped.flags.writeable


def test_layers_and_updated_indexes_fall_back_to_copies(tmp_path):
    layered = LayeredIndex.build([_rows(12), _rows(4, seed=1)])
    layered.save(tmp_path / "l.chnsw")
    loaded = LayeredIndex.load(tmp_path / "l.chnsw", [12, 4], layered.labels)
    views = mapped_vectors(tmp_path / "l.chnsw", loaded.index, loaded.labels)
    assert all(v is not None for v in views)
    # rows out of node order (an update moved them) cannot be one view: copied instead
    assert mapped_vectors(tmp_path / "l.chnsw", loaded.index, [loaded.labels[0][::-1]]) == [None]
    (tmp_path / "x.chnsw").write_bytes(b"not an index")
    assert mapped_vectors(tmp_path / "x.chnsw", loaded.index, loaded.labels) == [None, None]


def test_a_loaded_index_shares_its_strings_and_reads_chunk_texts_from_documents(gs, embedder):
    from graphstrata.types import DocumentChunk

    state = GraphStrata.load(gs.persist_dir, embedder=embedder).state
    assert [c.text for c in state.chunks] == [c.text for c in gs.state.chunks]
    assert all(isinstance(c, DocumentChunk) for c in state.chunks)
    assert all(isinstance(c, DocumentChunk) for c in gs.state.chunks)  # published states too
    ids = {c.id: c.id for c in state.chunks}
    assert all(cid is ids[cid] for e in state.kg.entities.values() for cid in e.chunk_ids)
    assert all(cid is ids[cid] for layer in state.communities for c in layer for cid in c.chunk_ids)
    ents = {e: e for e in state.kg.entity_ids}
    assert all(r.source is ents[r.source] and r.target is ents[r.target] for r in state.kg.relations.values())
    chunk = state.chunks[0]
    assert chunk == gs.state.chunks[0] and chunk.text == state.documents[chunk.document_id].text[chunk.start : chunk.end]


def _shares_native_memory(arr: np.ndarray) -> bool:
    """True when ``arr`` is (a view of) a zero-copy view of a native index's vectors."""
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    return not root.flags.owndata and type(root.base).__name__ == "PyCapsule"


def test_built_and_loaded_vectors_are_the_indexes_own_memory(gs, embedder):
    """A state holds each vector once (issue 33) — its ``vectors`` are views of the C-HNSW's own
    buffers, bit for bit what the index stores, not a second copy."""
    loaded = GraphStrata.load(gs.persist_dir, embedder=embedder).state
    for state in (gs.state, loaded):
        assert state.vectors["chunks"] is state.chunk_index.vectors
        for name, vecs in state.vectors.items():
            assert _shares_native_memory(vecs), name
            index = state.chunk_index if name == "chunks" else state.layered
            labels = index.labels if name == "chunks" else index.labels[
                0 if name == "entities" else int(name.split("_")[1])]
            assert np.array_equal(vecs, index.index.get_vectors(labels)), name
        assert state.chunk_index.index.vector_views >= 1 and state.layered.index.vector_views >= 1
    for name in gs.state.vectors:
        assert np.array_equal(gs.state.vectors[name], loaded.vectors[name])


def test_an_update_leaves_the_previous_states_views_valid(gs, embedder):
    before = gs.state
    chunks_before = np.array(before.vectors["chunks"])
    entities_before = np.array(before.vectors["entities"])
    gs.insert([{"id": "kiwi", "text": "The kiwi is a flightless bird of New Zealand."}])
    after = gs.state
    assert after.chunk_index.index is not before.chunk_index.index  # updates change a clone
    assert np.array_equal(before.vectors["chunks"], chunks_before)
    assert np.array_equal(before.vectors["entities"], entities_before)
    assert len(after.vectors["chunks"]) == len(chunks_before) + 1
    assert gs.retrieve("flightless bird of New Zealand", method="dense", k=1)[0].document_ids == ["kiwi"]


def test_a_built_graph_shares_its_strings_like_a_loaded_one(corpus, embedder, small_config):
    # extraction on worker processes: their records come back with a string per occurrence
    state = GraphStrata.build(corpus, config={**small_config, "build_workers": 2}, embedder=embedder).state
    ids = {c.id: c.id for c in state.chunks}
    assert all(cid is ids[cid] for e in state.kg.entities.values() for cid in e.chunk_ids)
    assert all(cid is ids[cid] for r in state.kg.relations.values() for cid in r.chunk_ids)
    ents = {e: e for e in state.kg.entity_ids}
    assert all(r.source is ents[r.source] and r.target is ents[r.target] for r in state.kg.relations.values())
    assert all(a is ents[a] and b is ents[b] for a, b in state.kg.relations)


def test_share_strings_makes_equal_values_one_object_and_changes_no_value():
    from graphstrata.graph import KnowledgeGraph
    from graphstrata.types import Entity, Relation

    def fresh(s: str) -> str:  # an equal string that is another object (as unpickled ones are)
        return "".join(list(s))

    sentence = "Ada Lovelace wrote the first program for the Analytical Engine."
    entities = [
        Entity(fresh("ada"), fresh("ada"), fresh(sentence), [fresh("c#0"), fresh("c#1")], float(2)),
        Entity(fresh("engine"), "Engine", fresh(sentence), [fresh("c#0")], float(2)),
    ]
    relations = [Relation(fresh("ada"), fresh("engine"), fresh(sentence), float(1), [fresh("c#0")])]
    kg = KnowledgeGraph(entities, relations)
    before = ([(e.id, e.name, e.description, e.chunk_ids, e.weight) for e in kg.entities.values()],
              [(k, r.source, r.target, r.description, r.chunk_ids, r.weight) for k, r in kg.relations.items()])
    chunk_ids = {c: c for c in ("c#0", "c#1")}
    kg.share_strings(chunk_ids)
    after = ([(e.id, e.name, e.description, e.chunk_ids, e.weight) for e in kg.entities.values()],
             [(k, r.source, r.target, r.description, r.chunk_ids, r.weight) for k, r in kg.relations.items()])
    assert after == before
    ada, engine = kg.entities["ada"], kg.entities["engine"]
    (key, rel), = kg.relations.items()
    assert ada.name is ada.id and rel.source is ada.id and rel.target is engine.id
    assert key[0] is ada.id and key[1] is engine.id
    assert ada.description is engine.description is rel.description
    assert ada.chunk_ids[0] is chunk_ids["c#0"] is engine.chunk_ids[0] is rel.chunk_ids[0]
    assert ada.weight is engine.weight
    assert kg.relation("engine", "ada") is rel and kg.neighbors("ada") == ["engine"]


def _fingerprint(state) -> dict:
    from graphstrata.testing import index_fingerprint

    return {
        **index_fingerprint(state),
        "community_chunks": [[c.chunk_ids for c in layer] for layer in state.communities],
        "records": {c: state.records.raw(c) for c in state.chunk_row},
    }


def test_a_build_that_rebuilds_its_graph_in_fresh_memory_is_the_same_build(corpus, embedder, small_config, monkeypatch):
    from graphstrata.indexing import build as build_mod

    plain = GraphStrata.build(corpus, config=small_config, embedder=embedder).state
    calls = []
    monkeypatch.setattr(build_mod, "COMPACT_MIN_CHUNKS", 0)
    real = build_mod.rebuilt
    monkeypatch.setattr(build_mod, "rebuilt", lambda box: calls.append(1) or real(box))
    compacted = GraphStrata.build(corpus, config=small_config, embedder=embedder).state
    assert calls == [1] and "compacting the graph" in compacted.build_seconds
    assert _fingerprint(compacted) == _fingerprint(plain)
    # identity as a build without it: chunk ids are the chunks' own strings, endpoints the entities'
    ids = {c.id: c.id for c in compacted.chunks}
    assert all(cid is ids[cid] for r in compacted.kg.relations.values() for cid in r.chunk_ids)
    ents = {e: e for e in compacted.kg.entity_ids}
    assert all(r.source is ents[r.source] for r in compacted.kg.relations.values())


def test_a_build_without_room_for_the_rebuild_file_keeps_its_graph(corpus, embedder, small_config, monkeypatch):
    from graphstrata.indexing import build as build_mod

    def no_room(box):
        raise OSError(28, "No space left on device")

    plain = GraphStrata.build(corpus, config=small_config, embedder=embedder).state
    monkeypatch.setattr(build_mod, "COMPACT_MIN_CHUNKS", 0)
    monkeypatch.setattr(build_mod, "rebuilt", no_room)
    state = GraphStrata.build(corpus, config=small_config, embedder=embedder).state
    assert _fingerprint(state) == _fingerprint(plain)


def test_entity_vectors_in_blocks_are_the_whole_at_once_bit_for_bit(corpus, embedder, small_config, monkeypatch):
    from graphstrata.indexing import entities as entities_mod
    from graphstrata.indexing import progress as progress_mod

    whole = GraphStrata.build(corpus, config=small_config, embedder=embedder).state
    monkeypatch.setattr(entities_mod, "ENTITY_BLOCK", 3)
    monkeypatch.setattr(progress_mod, "EMBED_BATCH", 5)
    blocks = GraphStrata.build(corpus, config=small_config, embedder=embedder).state
    assert len(whole.kg) > 3 and len(whole.chunks) > 5
    for name in ("chunks", "entities"):
        assert blocks.vectors[name].tobytes() == whole.vectors[name].tobytes()
