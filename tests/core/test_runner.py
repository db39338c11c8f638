"""The per-chunk stages on local worker processes (issue 33): a build on a ProcessRunner is the
in-process build (chunks, records, graph, communities, vectors, BM25 tokens); the sharded
TF-IDF fit and the shard-by-shard record merge equal scikit-learn's and merge_records'; a
worker's error reaches the caller; no worker process outlives its runner."""

from __future__ import annotations

import os
import random
import signal
import time

import numpy as np
import pytest
from graphstrata import GraphStrata, runner as runner_mod
from graphstrata.extraction import (
    ChunkRecord,
    CompactRecord,
    RecordMerge,
    StatisticalExtractor,
    TfidfSpec,
    extract_shard,
    fit_tfidf,
    merge_records,
)
from graphstrata.extraction.tfidf import tfidf_vectorizer as _tfidf_vectorizer
from graphstrata.config import GraphStrataConfig
from graphstrata.index import machine_threads
from graphstrata.indexing import build_state
from graphstrata.indexing import extract as extract_mod
from graphstrata.bm25 import bm25_tokenize
from graphstrata.indexing.build import lexical_tokens
from graphstrata.loaders import load_documents
from graphstrata.runner import LocalRunner, ProcessRunner, build_workers, use_runner
from graphstrata.testing import HashEmbedder, index_fingerprint
from graphstrata.types import Chunk
from sklearn.feature_extraction.text import TfidfVectorizer

CONFIG = {"min_communities": 2, "max_community_size": 8, "chunk_size": 120, "chunk_overlap": 16}


@pytest.fixture(scope="module")
def lihua(shared_data, jsonl):
    return jsonl(shared_data / "lihua_world" / "corpus.jsonl")[:60]


@pytest.fixture(scope="module")
def pool():
    r = ProcessRunner(2, embed=True)
    yield r
    r.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie has exited but not been reaped: count it as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill_then_wait(pid: int, wait: float) -> int:
    if pid:
        os.kill(pid, signal.SIGKILL)
    time.sleep(wait)
    return os.getpid()


def _gone(pids, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_a_build_on_worker_processes_is_the_in_process_build(lihua, pool):
    local = GraphStrata.build(lihua, config=CONFIG, embedder=HashEmbedder())
    on_workers = GraphStrata.build(lihua, config=CONFIG, embedder=HashEmbedder(), runner=pool)
    assert len(local.chunks) > 100 and len(local.kg) > 200 and len(local.communities) >= 2
    a, b = index_fingerprint(local), index_fingerprint(on_workers)
    for key in ("chunks", "entities", "relations", "communities", "vectors"):
        assert a[key] == b[key], key
    # the records: compressed on the workers, the same JSON
    ra, rb = local.state.records, on_workers.state.records
    assert list(ra) == list(rb)
    assert {k: r.to_json() for k, r in ra.items()} == {k: r.to_json() for k, r in rb.items()}
    assert rb == ra  # a CompactRecord equals the record it packs
    fa, fb = local.state.frozen, on_workers.state.frozen
    assert set(fa) == set(fb) == {"extraction", "summary"}
    for name in fa:
        assert fa[name].terms == fb[name].terms and np.array_equal(fa[name].idf, fb[name].idf)
    ba, bb = local.state.bm25.to_arrays(), on_workers.state.bm25.to_arrays()
    assert set(ba) == set(bb) and all(np.array_equal(ba[key], bb[key]) for key in ba)
    pids = pool.worker_pids()
    assert len(pids) == 2 and os.getpid() not in pids


def test_the_stages_of_the_protocol_run_on_the_workers(lihua, pool):
    emb = HashEmbedder()
    docs = load_documents(lihua[:5])
    assert pool.chunk(docs, 120, 16, emb, None) == LocalRunner().chunk(docs, 120, 16, emb, None)
    batches = [[f"text {i} {j}" for j in range(7)] for i in range(9)]
    assert all(np.array_equal(x, y) for x, y in zip(pool.embed(emb, batches), LocalRunner().embed(emb, batches)))
    chunks = LocalRunner().chunk(docs, 120, 16, emb, None)
    ex = StatisticalExtractor()
    tfidf, terms = ex.fit([c.text for c in chunks])
    titles = {d.id: d.metadata["title"] for d in docs if d.metadata.get("title")}
    local = ex.chunk_records(chunks, titles, None, terms=terms)
    assert pool.chunk_records(ex, chunks, titles, None, terms=terms) == local
    assert pool.chunk_records(ex, chunks, titles, tfidf) == ex.chunk_records(chunks, titles, tfidf)


def test_a_worker_error_reaches_the_caller(pool):
    with pytest.raises(ZeroDivisionError):
        list(pool.map(divmod, [(1, 1), (1, 0), (2, 1)]))
    # the pool is still usable afterwards
    assert list(pool.map(divmod, [(7, 2), (9, 4)])) == [(3, 1), (2, 1)]


class _BrokenEmbedder(HashEmbedder):
    embeds_in_processes = True

    def embed(self, texts):
        raise RuntimeError("the model is broken")


def test_an_embedder_error_on_a_worker_fails_the_build(lihua):
    with ProcessRunner(2) as r, pytest.raises(RuntimeError, match="the model is broken"):
        GraphStrata.build(lihua[:20], config=CONFIG, embedder=_BrokenEmbedder(), runner=r)


def test_a_killed_worker_is_a_clear_error_and_leaves_no_process():
    r = ProcessRunner(2)
    pids = list(r.map(os.getpid, [()] * 4))
    victims = r.worker_pids()
    assert set(pids) <= set(victims)
    with pytest.raises(RuntimeError, match="died"):
        list(r.map(_kill_then_wait, [(victims[0], 0.0)] + [(0, 0.3)] * 6))
    assert r.worker_pids() == []  # stopped; a later use starts new workers
    assert _gone(victims)
    assert list(r.map(divmod, [(5, 2)])) == [(2, 1)]
    fresh = r.worker_pids()
    r.close()
    assert _gone(fresh) and r.worker_pids() == []


def test_a_large_build_uses_worker_processes_and_stops_them(lihua, monkeypatch):
    seen: dict[str, list[int]] = {}
    real = ProcessRunner.close

    def close(self):
        seen.setdefault("pids", []).extend(self.worker_pids())
        real(self)

    monkeypatch.setattr(ProcessRunner, "close", close)
    monkeypatch.setattr(runner_mod, "PROCESS_MIN_CHARS", 1)
    monkeypatch.delenv("GRAPHSTRATA_NUM_WORKERS", raising=False)
    monkeypatch.setenv("GRAPHSTRATA_NUM_THREADS", "2")
    state = build_state(load_documents(lihua[:20]), GraphStrataConfig(**CONFIG), HashEmbedder())
    assert len(seen.get("pids", [])) == 2
    assert _gone(seen["pids"])
    assert all(isinstance(r, CompactRecord) for r in state.records.values())


def test_build_workers(monkeypatch):
    monkeypatch.delenv("GRAPHSTRATA_NUM_WORKERS", raising=False)
    monkeypatch.setenv("GRAPHSTRATA_NUM_THREADS", "3")
    assert build_workers(10) == 1
    # GRAPHSTRATA_NUM_THREADS is clamped to the CPUs this process may use (issue 30)
    assert build_workers(runner_mod.PROCESS_MIN_CHARS) == min(3, machine_threads())
    assert build_workers(10, configured=2) == 2
    monkeypatch.setenv("GRAPHSTRATA_NUM_WORKERS", "1")
    assert build_workers(10**9) == 1
    monkeypatch.setenv("GRAPHSTRATA_NUM_WORKERS", "two")
    with pytest.raises(ValueError, match="GRAPHSTRATA_NUM_WORKERS"):
        build_workers(10)
    with pytest.raises(ValueError):
        ProcessRunner(0)
    with pytest.raises(ValueError):
        ProcessRunner(2, start_method="teleport")


def _texts(shared_data, jsonl, n):
    rows = jsonl(shared_data / "musique" / "corpus.jsonl")[:n]
    return [r["text"] for r in rows]


@pytest.mark.parametrize("n, shard", [(400, 37), (15, 4), (1, 1)])
def test_the_sharded_tfidf_fit_is_scikit_learns(shared_data, jsonl, n, shard):
    texts = _texts(shared_data, jsonl, n)
    ex = StatisticalExtractor()
    vec = _tfidf_vectorizer(ex.ngram_range, len(texts), ex.min_df)
    matrix = vec.fit_transform(texts)
    [(model, terms)] = fit_tfidf([ex.tfidf_spec(len(texts))], texts, shard=shard)
    assert model.terms == tuple(vec.get_feature_names_out())
    assert np.array_equal(model.idf, vec.idf_)
    assert terms == ex._top_terms(matrix, model)  # ties broken alike


def test_the_sharded_tfidf_fit_runs_on_workers_and_handles_no_vocabulary(shared_data, jsonl, pool):
    texts = _texts(shared_data, jsonl, 300)
    spec = StatisticalExtractor().tfidf_spec(len(texts))
    assert fit_tfidf([spec], texts, pool, shard=50)[0][1] == fit_tfidf([spec], texts, shard=300)[0][1]
    # only stop words / nothing a term can be made of: no model, as scikit-learn raises
    assert fit_tfidf([spec], ["the of and", "a an the"] * 12)[0] == (None, [[] for _ in range(24)])
    summary = TfidfSpec.of(TfidfVectorizer(), "summary")
    assert fit_tfidf([summary], ["", "  "]) == [(None, [])]


def test_merging_shards_in_order_is_merging_every_record(shared_data, jsonl):
    rows = jsonl(shared_data / "musique" / "corpus.jsonl")[:150]
    chunks = [Chunk(f"c{i}", r["id"], 0, r["text"], 0, len(r["text"]), 0) for i, r in enumerate(rows)]
    ex = StatisticalExtractor(max_description_sentences=2)
    _, terms = ex.fit([c.text for c in chunks])
    records = ex.chunk_records(chunks, None, None, terms=terms)
    expected = merge_records(records, max_description_sentences=2)
    rng = random.Random(3)
    for _ in range(3):
        cuts = sorted(rng.sample(range(1, len(chunks)), 6))
        total = RecordMerge(2)
        for a, b in zip([0, *cuts], [*cuts, len(chunks)]):
            blobs, part = extract_shard(ex, [(c.id, c.document_id, c.text) for c in chunks[a:b]], None, terms[a:b])
            assert [CompactRecord(r.chunk_id, x) for r, x in zip(records[a:b], blobs)] == records[a:b]
            total.update(part)
        assert total.result() == expected


def test_a_compact_record_reads_as_the_record():
    rec = ChunkRecord("c1")
    rec.entities["bank"] = ({"Bank": 2}, [2], ["The Bank opened."])
    rec.relations[("bank", "city")] = ([1], ["The Bank opened."])
    packed = CompactRecord.pack(rec)
    assert packed.packed is not None and packed.to_json() == rec.to_json()
    assert packed == rec and packed.entities == rec.entities and packed.packed is None
    broken = CompactRecord("c2", b"not zlib")
    with pytest.raises(ValueError, match="c2"):
        _ = broken.entities


def test_lexical_tokens_share_one_string_per_token(pool):
    texts = [f"Graph number {i} links the graph to WolfgangSchulz" for i in range(12_000)]
    tokens = lexical_tokens(texts, pool)
    assert tokens == [bm25_tokenize(t) for t in texts]
    assert tokens[0][0] is tokens[-1][0]


def test_a_large_in_process_extraction_is_sharded_and_the_same(lihua, monkeypatch):
    docs = load_documents(lihua[:25])
    cfg = GraphStrataConfig(**CONFIG)
    monkeypatch.setenv("GRAPHSTRATA_NUM_WORKERS", "1")
    plain = build_state(docs, cfg, HashEmbedder())
    monkeypatch.setattr(extract_mod, "SHARDED_MIN_CHUNKS", 1)
    monkeypatch.setattr(extract_mod, "EXTRACT_SHARD", 7)
    with use_runner(None):
        sharded = build_state(docs, cfg, HashEmbedder())
    assert all(isinstance(r, CompactRecord) for r in sharded.records.values())
    a, b = index_fingerprint(plain), index_fingerprint(sharded)
    assert a == b


def test_a_build_stops_its_own_workers_before_clustering_and_leaves_a_callers_alone(lihua, monkeypatch):
    from graphstrata.indexing import build as build_mod

    alive_at_clustering: list[list[int]] = []
    real_cluster = build_mod.cluster_communities

    def cluster(*args, **kwargs):
        runner = runner_mod.current_runner()
        alive_at_clustering.append(runner.worker_pids() if isinstance(runner, ProcessRunner) else [])
        return real_cluster(*args, **kwargs)

    monkeypatch.setattr(build_mod, "cluster_communities", cluster)
    monkeypatch.setattr(runner_mod, "PROCESS_MIN_CHARS", 1)
    monkeypatch.delenv("GRAPHSTRATA_NUM_WORKERS", raising=False)
    monkeypatch.setenv("GRAPHSTRATA_NUM_THREADS", "2")
    docs = load_documents(lihua[:20])
    own = build_state(docs, GraphStrataConfig(**CONFIG), HashEmbedder())
    assert alive_at_clustering == [[]]  # the build's pool: stopped once the entity vectors were made
    with ProcessRunner(2) as mine, use_runner(mine):
        chosen = build_state(docs, GraphStrataConfig(**CONFIG), HashEmbedder())
        assert len(alive_at_clustering[1]) == 2 and mine.worker_pids() == alive_at_clustering[1]
    assert index_fingerprint(chosen) == index_fingerprint(own)
