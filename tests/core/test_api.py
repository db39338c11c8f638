"""GraphStrata build / retrieve / persist / load / insert / delete, on a tiny corpus."""

import json
import shutil

import numpy as np
import pytest
from graphstrata import GraphStrata, store
from graphstrata.types import HIT_KINDS


@pytest.fixture()
def gs(corpus, embedder, small_config):
    return GraphStrata.build(corpus, config=small_config, embedder=embedder)


def test_build_produces_graph_hierarchy_and_provenance(gs, corpus):
    s = gs.stats()
    assert s["documents"] == len(corpus)
    assert s["chunks"] >= len(corpus)
    assert s["entities"] > 10 and s["relations"] > 10
    assert s["communities_per_layer"] and s["communities_per_layer"][0] >= 2
    # every community's entities and chunks exist; members point one layer down
    for layer, comms in enumerate(gs.communities, 1):
        below = set(gs.kg.entities) if layer == 1 else {c.id for c in gs.communities[layer - 2]}
        for c in comms:
            assert c.layer == layer and set(c.members) <= below
            assert set(c.entity_ids) <= set(gs.kg.entities)
            assert set(c.chunk_ids) <= set(gs.chunk_row)
    # each entity is mentioned in every chunk listed as its source
    for e in gs.kg.entities.values():
        for cid in e.chunk_ids:
            assert e.name.lower() in gs.chunks[gs.chunk_row[cid]].text.lower()


@pytest.mark.parametrize("method", ["archrag", "dense", "bm25", "hybrid"])
def test_every_method_returns_k_ranked_chunks_with_provenance(gs, method):
    hits = gs.retrieve("Where was Edmund Hillary born?", method=method, k=3, kinds=["chunk"])
    assert len(hits) == 3
    assert [h.kind for h in hits] == ["chunk"] * 3
    assert all(h.metadata["method"] == method for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    for h in hits:
        assert h.document_ids == [h.id.split("#")[0]]
        assert h.text == gs.chunks[gs.chunk_row[h.id]].text


def test_lexical_methods_find_the_right_document(gs):
    for method in ("bm25", "hybrid", "archrag"):
        top = gs.retrieve("Edmund Hillary mountaineer New Zealand", method=method, k=1, kinds=["chunk"])
        assert top[0].document_ids == ["hillary"], method


def test_archrag_context_has_entities_relations_and_communities(gs):
    hits = gs.retrieve("Amadeo Giannini bank founder", method="archrag", k=2)
    kinds = [h.kind for h in hits]
    assert kinds[:2] == ["chunk", "chunk"]
    assert "entity" in kinds and "community" in kinds
    assert set(kinds) <= set(HIT_KINDS)
    ents = [h for h in hits if h.kind == "entity"]
    assert all(h.layer == 0 and h.chunk_ids and h.document_ids for h in ents)
    entity_ids = {h.id for h in ents}
    for r in (h for h in hits if h.kind == "relation"):
        src, dst = r.id.split("\u241f")
        assert {src, dst} <= entity_ids  # induced subgraph of the retrieved entities
    comms = [h for h in hits if h.kind == "community"]
    assert all(h.layer >= 1 and h.text for h in comms)
    only = gs.retrieve("Amadeo Giannini", method="archrag", k=2, kinds=["community"])
    assert only and {h.kind for h in only} == {"community"}


def test_k_larger_than_corpus_returns_every_chunk(gs):
    hits = gs.retrieve("city", method="dense", k=1000, kinds=["chunk"])
    assert len(hits) == len(gs.chunks)
    assert len({h.id for h in hits}) == len(hits)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"method": "nope"}, "unknown method"),
        ({"k": 0}, "k must be a positive integer"),
        ({"k": -3}, "k must be a positive integer"),
        ({"k": 2.5}, "k must be a positive integer"),
        ({"kinds": ["chunks"]}, "unknown hit kind"),
        ({"bogus_option": 1}, "unknown option"),
    ],
)
def test_bad_retrieval_arguments_raise(gs, kwargs, match):
    with pytest.raises(ValueError, match=match):
        gs.retrieve("question", **kwargs)


def test_empty_query_and_empty_corpus_raise(gs, embedder):
    with pytest.raises(ValueError, match="non-empty"):
        gs.retrieve("   ")
    with pytest.raises(ValueError, match="empty corpus"):
        GraphStrata.build([], embedder=embedder)
    with pytest.raises(ValueError, match="empty corpus"):
        GraphStrata.build(["", "   "], embedder=embedder)
    with pytest.raises(ValueError, match="invalid config"):
        GraphStrata.build(["text"], embedder=embedder, config={"chunk_size": 0})


async def test_aretrieve_under_a_running_loop(gs):
    import asyncio

    results = await asyncio.gather(*(gs.aretrieve("Auckland", method="hybrid", k=2) for _ in range(20)))
    ids = {tuple(h.id for h in r) for r in results}
    assert len(ids) == 1  # same answer every time, no error


def test_persist_load_round_trip_gives_identical_results(gs, embedder, tmp_path):
    path = gs.persist(tmp_path / "idx")
    version = store.version_dir(path)
    assert (path / "CURRENT").read_text().strip() == version.name
    assert (version / "manifest.json").is_file() and (version / "graphstrata.sqlite").is_file()
    loaded = GraphStrata.load(path, embedder=embedder)
    assert loaded.stats() == gs.stats()
    for method in gs.methods:
        a = [(h.kind, h.id, round(h.score, 5)) for h in gs.retrieve("Auckland city", method=method, k=4)]
        b = [(h.kind, h.id, round(h.score, 5)) for h in loaded.retrieve("Auckland city", method=method, k=4)]
        assert a == b, method
    manifest = json.loads((version / "manifest.json").read_text())
    assert manifest["embedder"] == {"id": embedder.id, "dim": embedder.dim}


def test_load_rejects_missing_corrupt_and_mismatched(gs, embedder, tmp_path):
    with pytest.raises(FileNotFoundError):
        GraphStrata.load(tmp_path / "missing", embedder=embedder)
    (tmp_path / "notindex").mkdir()
    with pytest.raises(ValueError, match="not a graphstrata index"):
        GraphStrata.load(tmp_path / "notindex", embedder=embedder)
    path = gs.persist(tmp_path / "idx")

    class Other:
        id, dim = "other", 64

    with pytest.raises(ValueError, match="embedder mismatch"):
        GraphStrata.load(path, embedder=Other())
    with pytest.raises(ValueError, match="built with embedder"):
        GraphStrata.load(path)  # default embedder is not the one it was built with
    for name in ("graphstrata.sqlite", "chunks.chnsw", "labels.npz"):
        bad = tmp_path / f"bad-{name}"
        shutil.copytree(path, bad)
        target = store.version_dir(bad) / name
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0xFF
        target.write_bytes(bytes(data))
        with pytest.raises(ValueError, match=f"checksum mismatch in {name}"):
            GraphStrata.load(bad, embedder=embedder)
    trunc = tmp_path / "trunc"
    shutil.copytree(path, trunc)
    (store.version_dir(trunc) / "manifest.json").write_text("{trunc", encoding="utf-8")
    with pytest.raises(ValueError, match="corrupt manifest"):
        GraphStrata.load(trunc, embedder=embedder)


def test_failed_build_leaves_existing_index_untouched(gs, embedder, tmp_path):
    path = gs.persist(tmp_path / "idx")
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}

    class Broken:
        id, dim = "test-hash-64", 64

        def embed(self, texts):
            raise RuntimeError("model crashed")

        def token_spans(self, text):
            return embedder.token_spans(text)

    with pytest.raises(RuntimeError, match="model crashed"):
        GraphStrata.build(["new text"], embedder=Broken(), persist_dir=path)
    with pytest.raises(ValueError, match="empty corpus"):
        GraphStrata.build([], embedder=embedder, persist_dir=path)
    after = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    assert after == before
    assert not [p for p in path.iterdir() if p.name.startswith(".tmp")]  # no temp leftovers


def test_persist_refuses_to_overwrite_a_foreign_directory(gs, tmp_path):
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "cat.jpg").write_bytes(b"meow")
    with pytest.raises(FileExistsError, match="not a graphstrata index"):
        gs.persist(foreign)
    assert (foreign / "cat.jpg").read_bytes() == b"meow"


def test_insert_and_delete_update_the_index_and_its_directory(gs, embedder, tmp_path):
    path = gs.persist(tmp_path / "idx")
    ids = gs.insert([{"id": "kiwi", "title": "Kiwi", "text": "The kiwi is a flightless bird of New Zealand."}])
    assert ids == ["kiwi"]
    top = gs.retrieve("flightless kiwi bird", method="bm25", k=1, kinds=["chunk"])
    assert top[0].document_ids == ["kiwi"]
    reloaded = GraphStrata.load(path, embedder=embedder)
    assert "kiwi" in reloaded.documents  # persisted automatically
    generation = gs.state.generation
    assert gs.insert([{"id": "kiwi", "title": "Kiwi", "text": "The kiwi is a flightless bird of New Zealand."}]) == ["kiwi"]
    assert gs.state.generation == generation  # same id, same content: a no-op
    gs.insert([{"id": "kiwi", "text": "The kiwi lays a very large egg."}])  # same id, new content: an update
    assert gs.state.generation == generation + 1
    assert gs.documents["kiwi"].text == "The kiwi lays a very large egg."
    assert not any("flightless" in c.text for c in gs.chunks)
    with pytest.raises(KeyError, match="unknown-id"):
        gs.delete(["kiwi", "unknown-id"])
    assert "kiwi" in gs.documents  # nothing deleted
    assert gs.delete(["kiwi"]) == 1
    assert "kiwi" not in gs.documents
    assert all("kiwi" not in h.document_ids for h in gs.retrieve("kiwi bird", method="bm25", k=20))
    with pytest.raises(ValueError, match="every document"):
        gs.delete(list(gs.documents))
    assert np.isfinite(gs.vectors["chunks"]).all()


def test_bm25_fills_k_with_non_matching_chunks(gs):
    n = len(gs.chunks)
    hits = gs.retrieve("zzzunmatched qqqword", method="bm25", k=n, kinds=["chunk"])
    assert len(hits) == n and all(h.score == 0.0 for h in hits)
    hits = gs.retrieve("Auckland", method="bm25", k=n, kinds=["chunk"])
    assert len(hits) == n and hits[0].score > 0 and hits[-1].score == 0.0


def test_upsert_replaces_and_appends(gs):
    order = list(gs.documents)
    ids = gs.upsert([
        {"id": "auckland", "text": "Auckland hosts the Sky Tower, a telecommunications tower."},
        {"id": "kiwi", "text": "The kiwi is a flightless bird."},
    ])
    assert ids == ["auckland", "kiwi"]
    # an updated document moves to the end, like a delete followed by an insert
    assert list(gs.documents) == [d for d in order if d != "auckland"] + ["auckland", "kiwi"]
    assert "Sky Tower" in gs.documents["auckland"].text
    top = gs.retrieve("Sky Tower telecommunications", method="bm25", k=1, kinds=["chunk"])
    assert top[0].document_ids == ["auckland"]
    assert not any("North Island" in c.text for c in gs.chunks)  # the old text is gone


def test_summary_embedded_communities(corpus, embedder, small_config):
    gs = GraphStrata.build(corpus, config={**small_config, "community_vectors": "summary"}, embedder=embedder)
    comm = gs.communities[0][0]
    expected = embedder.embed([f"{comm.title}\n{comm.summary}"])[0]
    assert np.allclose(gs.vectors["layer_1"][0], expected, atol=1e-5)
    hits = gs.retrieve(comm.title, method="archrag", k=1, kinds=["community"])
    assert hits and all(h.kind == "community" for h in hits)


def test_check_k_and_kinds_are_shared_by_every_adapter():
    from graphstrata.types import check_k, check_kinds

    assert check_k(np.int64(3)) == 3
    with pytest.raises(ValueError, match="similarity_top_k must be a positive integer"):
        check_k(True, "similarity_top_k")
    assert check_kinds("chunk") == ("chunk",)
    assert check_kinds(None) is None
    with pytest.raises(ValueError, match="non-empty"):
        check_kinds([])
    with pytest.raises(ValueError, match="unknown hit kind"):
        check_kinds(["chunks"])
