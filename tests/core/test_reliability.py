"""Hostile input, failed writes, trusted manifests, leftovers (issue 15 findings 3–7 and 9).

Concurrency, multi-process loading and SIGKILL crash points run on real data in
integration_tests/core/test_core_reliability.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from graphstrata import Document, GraphStrata, store
from graphstrata.loaders import text_id


@pytest.fixture()
def gs(corpus, embedder, small_config):
    return GraphStrata.build(corpus, config=small_config, embedder=embedder)


@pytest.fixture()
def persisted(gs, tmp_path):
    return gs.persist(tmp_path / "idx")


def _rewrite_manifest(vdir: Path, edit=None) -> None:
    """Recompute sizes and checksums of ``vdir``'s files (a forger's manifest), then ``edit``."""
    m = json.loads((vdir / "manifest.json").read_text())
    for name in m["files"]:
        data = (vdir / name).read_bytes()
        m["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if edit is not None:
        edit(m)
    (vdir / "manifest.json").write_text(json.dumps(m))


# -- 4. strings are texts ------------------------------------------------------------------


def test_a_text_that_names_a_file_or_folder_is_indexed_as_text(tmp_path, embedder, monkeypatch):
    (tmp_path / "notes.txt").write_text("SECRET contents of a file on this machine.", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "other.md").write_text("Another private file.", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    texts = [".", "hello", "notes.txt", "see chapter.md", "sub/"]
    gs = GraphStrata.build(texts, embedder=embedder)
    assert sorted(d.text for d in gs.documents.values()) == sorted(texts)
    assert not any("SECRET" in c.text or "private" in c.text for c in gs.chunks)
    # files are read only when the caller says they are files
    gs2 = GraphStrata.build(paths=["notes.txt"], embedder=embedder)
    assert [d.text for d in gs2.documents.values()] == ["SECRET contents of a file on this machine."]
    gs2.insert([Path("sub")])
    assert "other.md" in gs2.documents
    with pytest.raises(FileNotFoundError):
        GraphStrata.build(paths=["chapter.md"], embedder=embedder)


# -- 5. delete("abc") ---------------------------------------------------------------------


def test_delete_of_a_bare_string_removes_that_one_document(embedder, tmp_path):
    docs = [Document(i, f"Document {i} talks about topic {i}.") for i in ("a", "b", "c", "abc")]
    gs = GraphStrata.build(docs, embedder=embedder, persist_dir=tmp_path / "idx")
    assert gs.delete("abc") == 1
    assert sorted(gs.documents) == ["a", "b", "c"]
    assert sorted(GraphStrata.load(tmp_path / "idx", embedder=embedder).documents) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="must be strings"):
        gs.delete([1])


# -- 6. generated ids ----------------------------------------------------------------------


def test_generated_ids_are_content_hashes_and_never_collide_after_a_delete(embedder):
    gs = GraphStrata.build(["First plain text about apples.", "Second plain text about pears."],
                           embedder=embedder)
    first = text_id("First plain text about apples.")
    assert sorted(gs.documents) == sorted([first, text_id("Second plain text about pears.")])
    gs.delete([first])
    for text in ("Third text about plums.", "Fourth text about figs."):
        (new_id,) = gs.insert([text])
        assert new_id == text_id(text) and gs.documents[new_id].text == text
    # the same text again is a new document with its own id, never a clash
    (again,) = gs.insert(["Second plain text about pears."])
    assert again == text_id("Second plain text about pears.") + "-2"
    assert len(gs.documents) == 4


# -- 3. failed auto-persist ----------------------------------------------------------------


def test_a_failed_persist_changes_neither_memory_nor_disk(gs, persisted, embedder, monkeypatch):
    before_state = gs.state
    before_files = {p: p.read_bytes() for p in persisted.rglob("*") if p.is_file()}

    def broken(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(store.codec, "write_sqlite", broken)
    new = {"id": "kiwi", "text": "The kiwi is a flightless bird of New Zealand."}
    with pytest.raises(OSError, match="disk full"):
        gs.insert([new])
    assert gs.state is before_state and "kiwi" not in gs.documents
    assert {p: p.read_bytes() for p in persisted.rglob("*") if p.is_file()} == before_files
    assert GraphStrata.load(persisted, embedder=embedder).stats() == gs.stats()
    monkeypatch.undo()
    assert gs.insert([new]) == ["kiwi"]  # the retry is not refused as a duplicate
    assert "kiwi" in GraphStrata.load(persisted, embedder=embedder).documents


def test_a_lone_surrogate_is_refused_up_front_naming_the_document(gs, persisted, embedder):
    with pytest.raises(ValueError, match=r"document 'bad'.*not valid Unicode"):
        gs.insert([{"id": "bad", "text": "broken \ud800 text"}])
    with pytest.raises(ValueError, match="not valid Unicode"):
        GraphStrata.build(["ok text", "bad \udfff"], embedder=embedder)
    assert "bad" not in gs.documents
    assert "bad" not in GraphStrata.load(persisted, embedder=embedder).documents


# -- 7. the manifest is not trusted ----------------------------------------------------------


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda m: m.clear(), "format"),
        (lambda m: m.__setitem__("schema_version", 0), "schema_version"),
        (lambda m: m.__setitem__("schema_version", -7), "schema_version"),
        (lambda m: m.__setitem__("schema_version", True), "schema_version"),
        (lambda m: m.__setitem__("schema_version", "2"), "schema_version"),
        (lambda m: m.__setitem__("schema_version", 99), "newer than this graphstrata"),
        (lambda m: m.pop("files"), "files"),
        (lambda m: m["files"].pop("labels.npz"), "required files"),
        (lambda m: m["files"].__setitem__("/etc/passwd", {"bytes": 1, "sha256": "0" * 64}),
         "not index files"),
        (lambda m: m["files"].__setitem__("../idx2/graphstrata.sqlite", {"bytes": 1, "sha256": "0" * 64}),
         "not index files"),
        (lambda m: m["files"]["chunks.chnsw"].__setitem__("bytes", "12"), "bytes"),
        (lambda m: m.__setitem__("embedder", {"id": "test-hash-64"}), "embedder"),
    ],
)
def test_invalid_manifests_are_refused_with_a_clear_error(persisted, embedder, edit, match):
    vdir = store.version_dir(persisted)
    _rewrite_manifest(vdir, edit)
    with pytest.raises(ValueError, match=match) as exc:
        GraphStrata.load(persisted, embedder=embedder)
    assert "passwd" not in str(exc.value) or "not index files" in str(exc.value)


def test_a_manifest_that_is_not_an_object_is_not_an_index(persisted, embedder):
    (store.version_dir(persisted) / "manifest.json").write_text("[]")
    with pytest.raises(ValueError, match="not an object"):
        GraphStrata.load(persisted, embedder=embedder)


def test_an_unlisted_file_in_a_version_is_refused(persisted, embedder):
    (store.version_dir(persisted) / "extra.bin").write_bytes(b"x")
    with pytest.raises(ValueError, match="unlisted file"):
        GraphStrata.load(persisted, embedder=embedder)


@pytest.mark.parametrize(
    "sql,match",
    [
        ("UPDATE chunks SET document_id = 'ghost' WHERE pos = 0", "unknown document 'ghost'"),
        ("UPDATE entities SET chunk_ids = '[\"ghost#0\"]' WHERE pos = 0", "unknown chunk 'ghost#0'"),
        ("UPDATE communities SET members = '[\"nobody\"]' WHERE pos = 0", "unknown node 'nobody'"),
        ("UPDATE relations SET chunk_ids = '[\"x#1\"]' WHERE pos = 0", "unknown chunk 'x#1'"),
        ("DELETE FROM entities WHERE pos = 0", "corrupt index"),
    ],
)
def test_dangling_references_fail_at_load_not_at_query_time(persisted, embedder, sql, match):
    vdir = store.version_dir(persisted)
    con = sqlite3.connect(vdir / "graphstrata.sqlite")
    con.execute(sql)
    con.commit()
    con.close()
    _rewrite_manifest(vdir)
    with pytest.raises(ValueError, match=match):
        GraphStrata.load(persisted, embedder=embedder)


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda v: v["entities"].__setitem__((0, 0), np.nan), "NaN or infinite"),
        (lambda v: v.__setitem__("entities", v["entities"][:, :32]), "shape"),
        (lambda v: v.__setitem__("layer_1", v["layer_1"][:-1]), "shape"),
        (lambda v: v.__setitem__("bogus", np.zeros((2, 64), np.float32)), "unexpected vector"),
    ],
)
def test_bad_vectors_fail_at_load(persisted, embedder, mutate, match):
    """Schema ≤ 4 kept every vector in vectors.npz too: bad ones there are refused at load."""
    vdir = store.version_dir(persisted)
    _as_schema_4(persisted, embedder)
    with np.load(vdir / "vectors.npz") as npz:
        vectors = {k: np.array(npz[k]) for k in npz.files}
    mutate(vectors)
    with open(vdir / "vectors.npz", "wb") as f:
        np.savez(f, **vectors)
    _rewrite_manifest(vdir)
    with pytest.raises(ValueError, match=match):
        GraphStrata.load(persisted, embedder=embedder)


def _as_schema_4(persisted: Path, embedder) -> None:
    """Rewrite the current version as graphstrata wrote it before schema 5: vectors.npz with
    every vector beside the labels (a second copy of what the .chnsw files hold)."""
    vdir = store.version_dir(persisted)
    vectors = GraphStrata.load(persisted, embedder=embedder).vectors
    with np.load(vdir / "labels.npz") as npz:
        labels = {k: np.array(npz[k]) for k in npz.files}
    (vdir / "labels.npz").unlink()
    with open(vdir / "vectors.npz", "wb") as f:
        np.savez(f, **vectors, **labels)

    for name in (store.BM25, store.DERIVED):  # files of schema 6
        (vdir / name).unlink(missing_ok=True)

    def edit(m):
        m["schema_version"] = 4
        m["files"]["vectors.npz"] = m["files"].pop("labels.npz")
        for name in (store.BM25, store.DERIVED):
            m["files"].pop(name, None)

    m = json.loads((vdir / "manifest.json").read_text())
    edit(m)
    (vdir / "manifest.json").write_text(json.dumps(m))
    _rewrite_manifest(vdir)


def test_vectors_are_stored_once_and_schema_4_indexes_still_load(gs, persisted, embedder):
    vdir = store.version_dir(persisted)
    assert not (vdir / "vectors.npz").exists()
    with np.load(vdir / "labels.npz") as npz:
        assert all(npz[k].dtype == np.int64 for k in npz.files)  # no float arrays beside the .chnsw
    loaded = GraphStrata.load(persisted, embedder=embedder)
    for name, v in gs.vectors.items():  # the built state already holds the indexes' copies
        assert np.array_equal(loaded.vectors[name], v), name
    q = "Who founded Bank of America?"
    want = [(h.id, h.score) for h in gs.retrieve(q, k=5)]
    assert [(h.id, h.score) for h in loaded.retrieve(q, k=5)] == want
    _as_schema_4(persisted, embedder)
    old = GraphStrata.load(persisted, embedder=embedder)
    assert [(h.id, h.score) for h in old.retrieve(q, k=5)] == want
    old.persist(persisted)  # the next write converts it
    assert store.read_manifest(persisted)["schema_version"] == store.SCHEMA_VERSION
    assert not (store.version_dir(persisted) / "vectors.npz").exists()


def test_an_index_written_before_schema_5_loads_unchanged():
    """tests/core/data/index_schema4: 12 LiHua-World documents persisted by graphstrata before
    issue 17 (schema 4, HashEmbedder(64)); it loads and retrieves what it did then."""
    from graphstrata.testing import HashEmbedder

    data = Path(__file__).parent / "data"
    assert store.read_manifest(data / "index_schema4")["schema_version"] == 4
    gs = GraphStrata.load(data / "index_schema4", embedder=HashEmbedder(64))
    want = json.loads((data / "index_schema4.expected.json").read_text())
    # the expected scores came from exact power-iteration PageRank; forward push with a tight
    # tolerance reaches the same numbers (the default tolerance ranks the same, scores ±3e-4)
    got = gs.retrieve("What did Li Hua do with Wolfgang?", k=5, kinds=("chunk",), ppr_epsilon=1e-10)
    assert [h.id for h in got] == [w[0] for w in want]
    assert [h.score for h in got] == pytest.approx([w[1] for w in want], abs=1e-6)


def test_an_index_format_older_than_the_oldest_supported_says_rebuild(persisted, embedder, monkeypatch):
    vdir = store.version_dir(persisted)
    assert store.MIN_SCHEMA_VERSION == 1  # today every format ever written still loads
    monkeypatch.setattr(store.versions, "MIN_SCHEMA_VERSION", store.SCHEMA_VERSION)  # a future cut-off
    old = store.SCHEMA_VERSION - 1
    _rewrite_manifest(vdir, lambda m: m.__setitem__("schema_version", old))
    with pytest.raises(ValueError, match=rf"rebuild: index format {old} is older than {store.SCHEMA_VERSION}"):
        GraphStrata.load(persisted, embedder=embedder)


def test_labels_that_are_not_labels_fail_at_load(persisted, embedder):
    vdir = store.version_dir(persisted)
    with np.load(vdir / "labels.npz") as npz:
        labels = {k: np.array(npz[k]) for k in npz.files}
    with open(vdir / "labels.npz", "wb") as f:
        np.savez(f, chunks=np.zeros((2, 64), np.float32), **labels)
    _rewrite_manifest(vdir)
    with pytest.raises(ValueError, match="not labels"):
        GraphStrata.load(persisted, embedder=embedder)
    labels["labels:chunks"] = labels["labels:chunks"][:-1]
    with open(vdir / "labels.npz", "wb") as f:
        np.savez(f, **labels)
    _rewrite_manifest(vdir)
    with pytest.raises(ValueError, match="corrupt index"):
        GraphStrata.load(persisted, embedder=embedder)


def test_current_pointer_is_validated(persisted, embedder):
    (persisted / "CURRENT").write_text("../../etc\n")
    with pytest.raises(ValueError, match="does not name a version"):
        GraphStrata.load(persisted, embedder=embedder)
    (persisted / "CURRENT").write_text("v000099\n")
    with pytest.raises(ValueError, match="v000099, which is missing"):
        GraphStrata.load(persisted, embedder=embedder)


# -- persistence layout: versions, leftovers, older indexes -----------------------------------


def test_versions_switch_atomically_and_old_ones_are_pruned(gs, persisted, embedder):
    first = store.version_dir(persisted)
    gs.insert([{"id": "kiwi", "text": "The kiwi is a flightless bird."}])
    gs.delete(["kiwi"])
    versions = sorted(p.name for p in persisted.iterdir() if p.name.startswith("v"))
    assert len(versions) == store.KEEP_VERSIONS and first.name not in versions
    assert store.version_dir(persisted).name == versions[-1]
    assert GraphStrata.load(persisted, embedder=embedder).state.generation == 2


def test_leftovers_of_interrupted_writes_are_cleaned_on_load(persisted, embedder, tmp_path):
    (persisted / ".tmp-123-456").mkdir()
    (persisted / ".tmp-123-456" / "graphstrata.sqlite").write_bytes(b"half")
    (persisted / ".CURRENT.tmp-9-9").write_text("v000005\n")
    shutil.copytree(store.version_dir(persisted), persisted / "v000007")  # never made current
    (tmp_path / ".idx.tmp-1-2").mkdir()  # graphstrata 0.1's sibling temp directory
    loaded = GraphStrata.load(persisted, embedder=embedder)
    assert loaded.stats()["documents"] == 6
    assert sorted(p.name for p in persisted.iterdir()) == [".lock", "CURRENT", "v000001"]
    assert not (tmp_path / ".idx.tmp-1-2").exists()


def _as_schema_1(persisted: Path, flat: Path) -> None:
    """What graphstrata 0.1 wrote: the files directly in the index directory."""
    shutil.copytree(store.version_dir(persisted), flat)
    m = json.loads((flat / "manifest.json").read_text())
    m["schema_version"] = 1
    m.pop("generation")
    for name in (store.BM25, store.DERIVED):  # files of schema 6
        (flat / name).unlink(missing_ok=True)
        m["files"].pop(name, None)
    (flat / "manifest.json").write_text(json.dumps(m))


def test_schema_1_indexes_load_and_convert_on_persist(gs, persisted, embedder, tmp_path):
    flat = tmp_path / "old"
    _as_schema_1(persisted, flat)
    old = GraphStrata.load(flat, embedder=embedder)
    assert old.stats() == gs.stats()
    old.insert([{"id": "kiwi", "text": "The kiwi is a flightless bird."}])
    assert (flat / "CURRENT").is_file() and not (flat / "manifest.json").exists()
    assert "kiwi" in GraphStrata.load(flat, embedder=embedder).documents


def test_an_index_lost_between_the_renames_of_0_1_is_recovered(persisted, embedder, tmp_path):
    flat = tmp_path / "old"
    _as_schema_1(persisted, flat)
    os.rename(flat, tmp_path / ".old.old-77-1")  # 0.1 killed after renaming the old one aside
    loaded = GraphStrata.load(flat, embedder=embedder)
    assert loaded.stats()["documents"] == 6 and flat.is_dir()


def test_an_interrupted_first_persist_is_not_an_index_and_can_be_persisted_over(gs, embedder, tmp_path):
    target = tmp_path / "idx"
    (target / ".tmp-1-1").mkdir(parents=True)
    (target / ".lock").write_bytes(b"")
    with pytest.raises(ValueError, match="interrupted first persist"):
        GraphStrata.load(target, embedder=embedder)
    gs.persist(target)
    assert GraphStrata.load(target, embedder=embedder).stats() == gs.stats()


# -- 9. smaller ------------------------------------------------------------------------------


@pytest.mark.parametrize("method", [["dense"], None, 3, "Dense"])
def test_a_method_that_is_not_a_known_name_is_a_value_error(gs, method):
    with pytest.raises(ValueError, match="unknown method"):
        gs.retrieve("Auckland", method=method)


def test_states_are_immutable_snapshots(gs):
    old = gs.state
    n_docs, n_chunks = len(old.documents), len(old.chunks)
    with pytest.raises(ValueError, match="read-only"):
        old.vectors["chunks"][0, 0] = 1.0
    gs.insert([{"id": "kiwi", "text": "The kiwi is a flightless bird of New Zealand."}])
    assert gs.state is not old and gs.state.generation == old.generation + 1
    assert (len(old.documents), len(old.chunks)) == (n_docs, n_chunks)  # the old one is untouched
    assert "kiwi" not in old.documents and "kiwi" in gs.documents


def test_extraction_records_are_compressed_and_a_damaged_one_is_named(gs, persisted, embedder):
    import sqlite3

    vdir = store.version_dir(persisted)
    con = sqlite3.connect(vdir / "graphstrata.sqlite")
    rows = con.execute("SELECT chunk_id, record FROM chunk_records").fetchall()
    assert rows and all(isinstance(r, bytes) for _, r in rows)
    loaded = GraphStrata.load(persisted, embedder=embedder)
    assert {k: v.to_json() for k, v in loaded.state.records.items()} == {k: v.to_json() for k, v in gs.state.records.items()}
    con.execute("UPDATE chunk_records SET record = ? WHERE chunk_id = ?", (b"not zlib", rows[0][0]))
    con.commit()
    con.close()
    _rewrite_manifest(vdir)
    with pytest.raises(ValueError, match=f"extraction record of '{rows[0][0]}' unreadable"):
        GraphStrata.load(persisted, embedder=embedder)


@pytest.mark.parametrize("damage", ["not a zip", "wrong arrays"])
def test_a_damaged_bm25_file_is_named(persisted, embedder, damage):
    vdir = store.version_dir(persisted)
    if damage == "not a zip":
        (vdir / store.BM25).write_bytes(b"PK\x03\x04 garbage")
    else:
        with np.load(vdir / store.BM25) as npz:
            arrays = {k: np.array(npz[k]) for k in npz.files}
        arrays["indices"] = arrays["indices"] + 1000
        with open(vdir / store.BM25, "wb") as f:
            np.savez(f, **arrays)
    _rewrite_manifest(vdir)
    with pytest.raises(ValueError, match=r"bm25\.npz"):
        GraphStrata.load(persisted, embedder=embedder)
