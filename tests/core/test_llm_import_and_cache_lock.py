"""``--llm`` imports, factories that exit or return nothing, a locked cache (issue 30 finding 6).

Before the fix ``--llm MODULE:FACTORY`` put the working directory first on ``sys.path`` (a
stray ``sklearn.py`` there ran during indexing), ``--llm sys:exit`` exited 0 writing and
printing nothing, and a locked LLM cache raised a raw ``sqlite3.OperationalError`` after 30 s.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from graphstrata.cli import main
from graphstrata.llm import cache as cache_mod
from graphstrata.llm.cache import LLMCacheLockedError, ResponseCache


def test_a_stray_module_in_the_working_directory_shadows_no_installed_package(tmp_path):
    (tmp_path / "sklearn.py").write_text("open('STRAY_RAN', 'w').write('x')\n", encoding="utf-8")
    (tmp_path / "my_llms.py").write_text("def make():\n    return lambda prompt: 'ok'\n", encoding="utf-8")
    code = textwrap.dedent(
        """
        from graphstrata.cli import _load_llm
        llm = _load_llm("my_llms:make")
        assert llm("hi") == "ok"
        import sklearn.feature_extraction.text  # what indexing imports
        print(sklearn.__file__)
        """
    )
    # -I: the interpreter itself puts no working directory on sys.path (as the console script)
    proc = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not (tmp_path / "STRAY_RAN").exists()
    assert str(tmp_path) not in proc.stdout


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("sys:exit", r"--llm sys:exit: exit\(\) exited \(SystemExit None\) instead of returning an LLM"),
        ("gs_none_llm:make", r"--llm gs_none_llm:make: make\(\) returned None, not an LLM \(.*gs_none_llm\.py\)"),
    ],
)
def test_a_factory_that_exits_or_returns_nothing_is_an_error(factory, message, tmp_path, monkeypatch, capsys):
    (tmp_path / "gs_none_llm.py").write_text("def make():\n    return None\n", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("A document.", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    status = main(["index", "docs", "--out", "idx", "--llm", factory])
    assert status == 2
    assert __import__("re").search(message, capsys.readouterr().err)
    assert not (tmp_path / "idx").exists()


def test_a_locked_cache_names_the_file_and_the_process(tmp_path, monkeypatch):
    path = tmp_path / "llm-cache.sqlite"
    ResponseCache(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(
            """
            import sqlite3, sys, time
            con = sqlite3.connect(sys.argv[1], isolation_level=None)
            con.execute("PRAGMA locking_mode=EXCLUSIVE")
            con.execute("BEGIN EXCLUSIVE")
            con.execute("INSERT INTO responses VALUES ('k', 't', 1, 1, 0)")
            print("locked", flush=True)
            time.sleep(60)
            """
        ), str(path)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        monkeypatch.setattr(cache_mod, "CACHE_LOCK_TIMEOUT", 0.3)
        t0 = time.perf_counter()
        with pytest.raises(LLMCacheLockedError) as info:
            ResponseCache(path).get("k")
        assert time.perf_counter() - t0 < 10
        assert str(path) in str(info.value) and f"process {holder.pid}" in str(info.value)
    finally:
        holder.kill()
        holder.wait()
    assert ResponseCache(path).get("k") is None  # the holder's transaction never committed
