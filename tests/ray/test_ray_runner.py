"""Distributed indexing on Ray (issue 19): a local Ray cluster with two CPU worker processes
and two LLM worker processes builds slices of ``lihua_world`` and must give the index the local
build gives — chunk ids, entities, relations, community membership and vectors — with the
statistical extractor, with a scripted LLM that sleeps 50 ms per call, with a worker process
killed mid-build, and across an interrupted build resumed from the response cache.

The scripted LLM tests control flow only (never quality).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

ray = pytest.importorskip("ray")

from graphstrata import GraphStrata  # noqa: E402
from graphstrata.cli import main  # noqa: E402
from graphstrata.llm import LLMError  # noqa: E402
from graphstrata.ray_runner import LLM_BATCH_FACTOR, RayRunner  # noqa: E402
from graphstrata.testing import HashEmbedder, ScriptedLLM, answer_every_prompt, index_fingerprint  # noqa: E402

CONFIG = {"min_communities": 2, "max_community_size": 8, "chunk_size": 120, "chunk_overlap": 16}
LATENCY = 0.05


@pytest.fixture(scope="module")
def lihua(shared_data, jsonl):
    return jsonl(shared_data / "lihua_world" / "corpus.jsonl")


@pytest.fixture(scope="module")
def runner():
    """A local Ray (started by the runner: address None) with 2 CPUs: two stage-actor
    processes and two LLM-actor processes."""
    r = RayRunner(num_workers=2, init_kwargs={"num_cpus": 2, "object_store_memory": 200 * 1024 * 1024})
    yield r
    r.close()
    assert not ray.is_initialized()


def _llm(**kw) -> ScriptedLLM:
    return ScriptedLLM(answer_every_prompt, usage=True, latency=LATENCY, **kw)


def _assert_same_index(local, distributed) -> None:
    a, b = index_fingerprint(local), index_fingerprint(distributed)
    assert a["chunks"] == b["chunks"]
    assert a["entities"] == b["entities"]
    assert a["relations"] == b["relations"]
    assert a["communities"] == b["communities"]
    assert a["vectors"] == b["vectors"]


def test_statistical_build_on_ray_is_the_local_build(lihua, runner):
    docs = lihua[:40]
    local = GraphStrata.build(docs, config=CONFIG, embedder=HashEmbedder())
    distributed = GraphStrata.build(docs, config=CONFIG, embedder=HashEmbedder(), runner=runner)
    assert len(local.chunks) > 80 and len(local.kg) > 100 and len(local.communities) >= 2
    _assert_same_index(local, distributed)
    pids = runner.worker_pids()
    assert len(set(pids["stage"])) == 2 and os.getpid() not in pids["stage"]
    # the stages really ran on the cluster: chunking, embedding and extraction are timed there too
    assert {"chunking", "embedding chunks", "extracting entities"} <= set(distributed.build_seconds)


def test_llm_build_on_ray_is_the_local_build_and_its_tokens_add_up(lihua, runner, tmp_path):
    docs = lihua[:16]
    local = GraphStrata.build(docs, config=CONFIG, embedder=HashEmbedder(), llm=_llm())
    log = tmp_path / "calls"
    log.mkdir()
    distributed = GraphStrata.build(
        docs, config=CONFIG, embedder=HashEmbedder(), llm=_llm(log_dir=log), runner=runner
    )
    _assert_same_index(local, distributed)
    assert {e.type for e in distributed.kg.entities.values()} == {"person", "geo"}
    assert all(c.rating == 6.0 for c in distributed.communities[0])
    # calls and tokens counted on the driver add up to the local build's, stage by stage
    assert distributed.build_usage["stages"] == local.build_usage["stages"]
    calls = local.build_usage["total"]["calls"]
    assert calls > 40
    # ... and every call ran in an LLM worker process, never in this one
    per_pid = {int(p.stem.split("-")[1]): len(p.read_text().splitlines()) for p in log.glob("calls-*.log")}
    assert sum(per_pid.values()) == calls
    assert os.getpid() not in per_pid and set(per_pid) <= set(runner.worker_pids()["llm"])
    # inserts go through the same runner and stay equal to the local index's insert
    more = lihua[16:20]
    local.insert(more)
    distributed.insert(more)
    assert distributed.runner is runner
    _assert_same_index(local, distributed)


def test_a_worker_killed_mid_build_is_retried_and_the_index_is_identical(lihua, runner, tmp_path):
    docs = lihua[20:36]
    local = GraphStrata.build(docs, config=CONFIG, embedder=HashEmbedder(), llm=_llm())
    log = tmp_path / "calls"
    log.mkdir()
    killed: list[int] = []

    def kill_one_llm_worker() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            files = sorted(log.glob("calls-*.log"))
            if sum(len(f.read_text().splitlines()) for f in files) >= 20:
                pid = int(files[0].stem.split("-")[1])
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_one_llm_worker)
    killer.start()
    distributed = GraphStrata.build(
        docs, config=CONFIG, embedder=HashEmbedder(), llm=_llm(log_dir=log), runner=runner
    )
    killer.join()
    assert killed, "no LLM worker was killed: the build ended before 20 calls"
    assert killed[0] not in runner.worker_pids()["llm"]  # Ray restarted it as a new process
    _assert_same_index(local, distributed)  # no missing and no duplicate record
    # the killed worker's in-flight calls were made again, and nothing else
    usage = distributed.build_usage["total"]
    assert usage["calls"] == local.build_usage["total"]["calls"]
    made = sum(len(f.read_text().splitlines()) for f in log.glob("calls-*.log"))
    # at most the killed actor's one batch again (llm_concurrency 4 calls in flight per actor)
    assert usage["calls"] <= made <= usage["calls"] + 4 * LLM_BATCH_FACTOR


def test_an_interrupted_distributed_build_resumes_from_the_response_cache(lihua, runner, tmp_path):
    docs = lihua[36:44]
    bad_chunk = docs[5]["text"][:60]

    def failing(prompt: str, system: str | None) -> str:
        if bad_chunk in prompt:
            raise RuntimeError("model refused this chunk")  # not transient: no retry
        return answer_every_prompt(prompt, system)

    out = tmp_path / "index"
    with pytest.raises(LLMError, match="model refused this chunk"):
        GraphStrata.build(docs, config=CONFIG, embedder=HashEmbedder(), persist_dir=out, runner=runner,
                          llm=ScriptedLLM(failing, usage=True, latency=LATENCY))
    assert not (out / "manifest.json").exists()  # nothing but the response cache was written
    gs = GraphStrata.build(docs, config=CONFIG, embedder=HashEmbedder(), llm=_llm(), persist_dir=out,
                           runner=runner)
    extract = gs.build_usage["stages"]["extract"]
    n_chunks = len(gs.chunks)
    # every chunk answered before the failure came from the cache: only the failed one was paid
    assert extract["calls"] == 1 and extract["cached"] == n_chunks - 1
    local = GraphStrata.build(docs, config=CONFIG, embedder=HashEmbedder(), llm=_llm())
    _assert_same_index(local, gs)


def test_a_runner_that_cannot_get_workers_fails_instead_of_hanging(lihua, runner):
    runner.worker_pids()  # the fixture's runner holds both CPUs of the cluster
    assert ray.available_resources().get("CPU", 0) == 0
    second = RayRunner(num_workers=1, start_timeout=3)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="only 0 of 1 stage workers started within 3 s"):
        GraphStrata.build(lihua[:2], config=CONFIG, embedder=HashEmbedder(), runner=second)
    assert time.monotonic() - t0 < 60
    second.close()
    assert ray.is_initialized()  # it did not start Ray, so it does not stop it


def test_cli_index_with_ray_joins_the_running_cluster(lihua, runner, tmp_path, capsys):
    runner.close(shutdown=False)  # frees the cluster's CPUs for the CLI's own runner
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in lihua[:6]), encoding="utf-8")
    out = tmp_path / "index"
    assert main(["index", str(corpus), "--out", str(out), "--quiet", "--chunk-size", "120", "--ray"]) == 0
    assert "indexed into" in capsys.readouterr().out
    assert ray.is_initialized()  # the CLI's runner used this process's Ray and left it running
    built = GraphStrata.load(out)
    local = GraphStrata.build(lihua[:6], config={"chunk_size": 120})
    assert [c.id for c in built.chunks] == [c.id for c in local.chunks]
    assert built.kg.entity_ids == local.kg.entity_ids


def test_an_llm_that_cannot_travel_to_the_workers_is_one_clear_error(lihua, runner):
    llm = _llm()
    llm.unpicklable = threading.Lock()
    with pytest.raises(TypeError, match="RayRunner cannot send the LLM ScriptedLLM"):
        GraphStrata.build(lihua[:2], config=CONFIG, embedder=HashEmbedder(), llm=llm, runner=runner)


@pytest.mark.parametrize(
    "kwargs",
    [{"num_workers": 0}, {"calls_in_flight": -1}, {"max_retries": -1}, {"num_workers": True}, {"start_timeout": 0}],
)
def test_bad_runner_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        RayRunner(**kwargs)


def test_importing_graphstrata_does_not_import_ray():
    code = (
        "import sys, graphstrata; from graphstrata import GraphStrata, LocalRunner; "
        "assert 'ray' not in sys.modules, 'ray imported'; "
        "from graphstrata import RayRunner; assert 'ray' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_build_refuses_something_that_is_not_a_runner(lihua):
    with pytest.raises(TypeError, match="runner must be a graphstrata Runner"):
        GraphStrata.build(lihua[:2], config=CONFIG, embedder=HashEmbedder(), runner=object())

