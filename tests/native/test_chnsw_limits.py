"""The native index under thread and address-space limits, and NUL paths (issue 30 finding 1).

Before the fix ``GRAPHSTRATA_NUM_THREADS=512`` under ``prlimit --as=3221225472`` killed the
process with SIGABRT (``std::terminate``: a ``std::thread`` that could not start, while others
were joinable), and ``save`` / ``load`` cut a path at a NUL byte.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from graphstrata_chnsw import CHNSW, max_threads

PRLIMIT = shutil.which("prlimit")
AS_LIMIT = 3 * 1024**3  # the probe's 3221225472 bytes

_SCRIPT = textwrap.dedent(
    """
    import sys, threading
    import numpy as np
    from graphstrata_chnsw import CHNSW, max_threads
    from graphstrata.index import index_threads

    refuse = sys.argv[1] == "refuse"
    if refuse:  # the environment really refuses a worker thread's stack
        try:
            t = threading.Thread(target=lambda: None)
            t.start()
            t.join()
            sys.exit("precondition: a thread started under the limits")
        except RuntimeError:
            pass
    n = index_threads()
    assert 1 <= n <= max_threads(), n
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((3000, 32)).astype(np.float32)
    index = CHNSW(32, num_threads=512)
    assert index.num_threads == max_threads(), index.num_threads
    assert index.set_num_threads(512) == max_threads()
    index.add_layer(vecs)  # parallel insert: every worker the system lets start
    ids, _ = index.search(vecs[:200], k=1)  # parallel batch search
    assert (ids[:, 0] == np.arange(200)).mean() > 0.95
    print("ok", n, index.num_threads)
    """
)


def _run_limited(mode: str, *limits: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, GRAPHSTRATA_NUM_THREADS="512", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return subprocess.run(
        [PRLIMIT, *limits, sys.executable, "-c", _SCRIPT, mode],
        env=env, capture_output=True, text=True, timeout=120,
    )


def test_thread_count_is_clamped_to_the_machine():
    index = CHNSW(8)
    assert max_threads() >= 1
    assert index.set_num_threads(512) == max_threads()
    assert index.num_threads == max_threads()
    assert CHNSW(8, num_threads=10_000).num_threads == max_threads()
    with pytest.raises(ValueError, match=">= 1"):
        index.set_num_threads(0)


def test_graphstrata_num_threads_is_clamped(monkeypatch):
    from graphstrata.index import index_threads, machine_threads

    monkeypatch.setenv("GRAPHSTRATA_NUM_THREADS", "512")
    assert index_threads() == machine_threads() <= 512
    monkeypatch.setenv("GRAPHSTRATA_NUM_THREADS", "1")
    assert index_threads() == 1


@pytest.mark.skipif(PRLIMIT is None, reason="needs util-linux prlimit")
def test_512_threads_under_an_address_space_limit_exit_cleanly():
    proc = _run_limited("plain", f"--as={AS_LIMIT}")
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.startswith("ok")


@pytest.mark.skipif(PRLIMIT is None, reason="needs util-linux prlimit")
def test_a_worker_thread_the_system_refuses_is_a_fallback_not_an_abort():
    # a thread stack as large as the address space: no worker thread can start at all
    proc = _run_limited("refuse", f"--as={AS_LIMIT}", f"--stack={AS_LIMIT}")
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.startswith("ok")


def test_paths_with_a_nul_byte_are_refused(tmp_path):
    index = CHNSW(4)
    index.add_layer(np.eye(4, dtype=np.float32))
    index.save(tmp_path / "ok.chnsw")
    for bad in (str(tmp_path / "cut\0.chnsw"), os.fsencode(tmp_path / "cut\0.chnsw")):
        with pytest.raises(ValueError, match="NUL byte"):
            index.save(bad)
        with pytest.raises(ValueError, match="NUL byte"):
            CHNSW.load(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.chnsw"]  # nothing at the cut path
    assert len(CHNSW.load(os.fsencode(tmp_path / "ok.chnsw"))) == 4
