"""bench/bench_chnsw.py helpers: an unreachable recall target never crashes a run, small layers
and chunked ground truth are exact, thread lists parse."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "bench_chnsw.py"
_spec = importlib.util.spec_from_file_location("bench_chnsw_under_test", _PATH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_tune_unreachable_target_reports_best_ef(capsys):
    truth = np.arange(10)[None, :].repeat(4, axis=0)

    def run(ef):  # recall 0.2 everywhere except 0.4 at ef=64
        hits = 4 if ef == 64 else 2
        return np.where(np.arange(10) < hits, truth, -1)

    ef, r, reached = bench.tune(run, truth, 0.95, "lib")
    assert not reached
    assert ef == 64 and r == pytest.approx(0.4)
    assert "lib: target not reached (best recall 0.400 at ef=64)" in capsys.readouterr().out


def test_tune_reached_returns_smallest_ef():
    truth = np.arange(10)[None, :]
    ef, r, reached = bench.tune(lambda ef: truth if ef >= 20 else truth * 0 - 1, truth, 0.95)
    assert (ef, r, reached) == (20, 1.0, True)


def test_exact_topk_chunked_and_small_layers():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(300, 8)).astype(np.float32)
    queries = rng.normal(size=(37, 8)).astype(np.float32)
    expect = np.argsort(-(queries @ base.T), axis=1)[:, :10]
    np.testing.assert_array_equal(bench.exact_topk(queries, base, 10), expect)
    small = base[:4]  # fewer vectors than k: all of them, nearest first
    got = bench.exact_topk(queries, small, 10)
    assert got.shape == (37, 4)
    np.testing.assert_array_equal(got, np.argsort(-(queries @ small.T), axis=1))


def test_parse_threads_and_oversubscription_note():
    assert bench.parse_threads("1,2,4,8,16") == [1, 2, 4, 8, 16]
    with pytest.raises(SystemExit):
        bench.parse_threads("0,2")
    assert "oversubscribed" in bench.oversubscribed(10_000)
    assert bench.oversubscribed(1) == ""
