"""Folders cannot pull in files from elsewhere, hang or exhaust memory (issue 30 finding 4).

Before the fix folder loading followed symlinks out of the folder, read a whole file before
checking it (a 2 GB file took 15–57 s and 2–4 GB of memory to reject, ``/dev/zero`` ran until
MemoryError) and a FIFO hung forever.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from graphstrata.loaders import load_documents

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX files (FIFO, symlinks)")


def _folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("A normal document about the bridge loan.", encoding="utf-8")
    return docs


def test_a_symlink_out_of_the_folder_is_refused_unless_allowed(tmp_path):
    docs = _folder(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("PIN 4921 of the card ending 7731.", encoding="utf-8")
    (docs / "leak.txt").symlink_to(secret)
    (docs / "inside.md").symlink_to(docs / "a.txt")  # a link inside the folder is fine
    with pytest.raises(ValueError, match=r"leak\.txt: symlink to .*secret\.txt, outside the folder"):
        load_documents(paths=[docs])
    (docs / "leak.txt").unlink()
    (docs / "out").symlink_to(tmp_path, target_is_directory=True)  # a folder link is not entered
    assert sorted(d.id for d in load_documents(paths=[docs])) == ["a.txt", "inside.md"]
    (docs / "out").unlink()
    (docs / "leak.txt").symlink_to(secret)
    got = {d.id: d.text for d in load_documents(paths=[docs], follow_symlinks=True)}
    assert got["leak.txt"].startswith("PIN 4921")
    assert load_documents(paths=[docs / "leak.txt"])[0].text.startswith("PIN")  # named directly: read


_PROBE = textwrap.dedent(
    """
    import json, os, resource, sys, time
    from pathlib import Path
    from graphstrata.loaders import load_documents
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {}
    for name in sys.argv[1:]:
        t0 = time.perf_counter()
        try:
            load_documents(paths=[name])
            out[name] = ["loaded", time.perf_counter() - t0]
        except (ValueError, OSError) as exc:
            out[name] = [f"{type(exc).__name__}: {exc}", time.perf_counter() - t0]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"results": out, "rss_growth_kb": peak - base}))
    """
)


def test_fifo_device_and_a_2_gb_file_are_refused_fast_in_bounded_memory(tmp_path):
    folders = {}
    for kind in ("fifo", "sparse", "sparse_jsonl"):
        (tmp_path / kind).mkdir()
        folders[kind] = _folder(tmp_path / kind)
    os.mkfifo(folders["fifo"] / "pipe.txt")
    with open(folders["sparse"] / "big.txt", "wb") as f:
        f.truncate(2 * 1024**3)
    with open(folders["sparse_jsonl"] / "big.jsonl", "wb") as f:
        f.truncate(2 * 1024**3)
    (tmp_path / "zero.txt").symlink_to("/dev/zero")  # a device behind a text file's name
    targets = [str(p) for p in folders.values()] + [str(tmp_path / "zero.txt")]
    proc = subprocess.run([sys.executable, "-c", _PROBE, *targets], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    res = report["results"]
    assert "pipe.txt: a FIFO (named pipe), not a regular file" in res[targets[0]][0]
    assert "big.txt: 2,147,483,648 bytes, more than max_document_chars=50,000,000" in res[targets[1]][0]
    assert "big.jsonl: binary file" in res[targets[2]][0]
    assert "zero.txt: a character device, not a regular file" in res[targets[3]][0]
    for name, (_, seconds) in res.items():
        assert seconds < 1.0, (name, seconds)
    assert report["rss_growth_kb"] < 200 * 1024, report


def test_the_size_limit_is_the_configured_one(tmp_path, embedder):
    from graphstrata import GraphStrata

    docs = _folder(tmp_path)
    (docs / "b.txt").write_text("x" * 500, encoding="utf-8")
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"b\.txt: 500 bytes, more than max_document_chars=100"):
        GraphStrata.build(paths=[docs], embedder=embedder, config={"max_document_chars": 100})
    assert time.perf_counter() - t0 < 5
    assert len(load_documents(paths=[docs], max_document_chars=None)) == 2
