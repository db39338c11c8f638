"""Versions in the store: superseded versions go at once unless a reader is loading them (then
the last reader removes them); writers of one directory merge, never drop (issue 30 findings 2
and 3)."""

from __future__ import annotations

import pytest
from graphstrata import GraphStrata, store


@pytest.fixture()
def index(corpus, embedder, small_config, tmp_path):
    GraphStrata.build(corpus, config=small_config, embedder=embedder, persist_dir=tmp_path / "idx")
    return tmp_path / "idx"


def _versions(d):
    return sorted(p.name for p in d.iterdir() if p.name.startswith("v"))


def test_a_version_being_read_survives_the_switch_and_its_last_reader_removes_it(index, embedder):
    writer = GraphStrata.load(index, embedder=embedder)
    first = store.current_version(index)
    seen = {}

    def read(vdir, manifest):
        writer.insert([{"id": "kiwi", "text": "The kiwi is a flightless bird of New Zealand."}])
        seen["during"] = _versions(index)  # the writer could not remove what is being read
        return vdir.name

    assert store.open_version(index, read) == first
    assert seen["during"] == [first, store.current_version(index)]
    assert _versions(index) == [store.current_version(index)]  # removed by the reader on its way out


def test_a_write_merges_what_another_instance_wrote_meanwhile(index, embedder):
    a = GraphStrata.load(index, embedder=embedder)
    b = GraphStrata.load(index, embedder=embedder)
    a.insert([{"id": "kiwi", "text": "The kiwi is a flightless bird of New Zealand."}])
    b.insert([{"id": "tui", "text": "The tui is a songbird of New Zealand."}])  # b's base was stale
    assert {"kiwi", "tui"} <= set(GraphStrata.load(index, embedder=embedder).documents)
    assert {"kiwi", "tui"} <= set(b.documents)
    b.delete("kiwi")
    current = store.current_version(index)
    a.persist(index)  # a's state is older than the directory's: persisting it again writes nothing
    assert store.current_version(index) == current
    assert "kiwi" not in GraphStrata.load(index, embedder=embedder).documents
    assert _versions(index) == [current]


def test_the_write_lock_times_out_with_a_named_error(index, monkeypatch):
    monkeypatch.setenv("GRAPHSTRATA_WRITE_TIMEOUT", "0.2")
    import threading

    held, release = threading.Event(), threading.Event()

    def hold():
        with store.write_lock(index):
            held.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    try:
        held.wait(10)
        with pytest.raises(store.ConcurrentWriteError, match="another thread of this process"):
            with store.write_lock(index):
                pass
    finally:
        release.set()
        t.join()
    with store.write_lock(index), store.write_lock(index):  # re-entrant in one thread
        pass
    monkeypatch.setenv("GRAPHSTRATA_WRITE_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="GRAPHSTRATA_WRITE_TIMEOUT"):
        store.write_timeout()
