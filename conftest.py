"""Repository-wide pytest fixtures: where the shared QA corpora live."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


def _data_dir() -> Path:
    env = os.environ.get("GRAPHSTRATA_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (or ``$GRAPHSTRATA_DATA``): musique, hotpotqa, lihua_world.

    Skips where the data is absent, except under CI (``CI`` set), where it fails: CI always
    has ``shared/`` beside the clone.
    """
    d = _data_dir()
    if not (d / "musique" / "corpus.jsonl").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"shared QA data not found at {d}")
        pytest.skip(f"shared QA data not found at {d}")
    return d


def read_jsonl(path: Path, limit: int | None = None) -> list[dict]:
    """Records of a JSONL file, in order: all of them, or the first ``limit`` (the rest of the
    file is not read)."""
    out: list[dict] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if limit is not None and len(out) >= limit:
                break
            if line.strip():
                out.append(json.loads(line))
    return out


@pytest.fixture(scope="session")
def jsonl():
    """The :func:`read_jsonl` helper, as a fixture (test modules cannot import conftest)."""
    return read_jsonl


@pytest.fixture(scope="session")
def serve_indexes(shared_data, tmp_path_factory) -> dict[str, Path]:
    """Two small real indexes for the ``graphstrata serve`` tests, built once per session with
    the fast embedder preset: ``hotpot`` (60 HotpotQA passages) and ``musique`` (40 MuSiQue
    passages). Tests that write copy them first."""
    from graphstrata.testing.serve import build_small_index

    root = tmp_path_factory.mktemp("serve-indexes")
    return {
        "hotpot": build_small_index(shared_data / "hotpotqa" / "corpus.jsonl", root / "hotpot", n=60),
        "musique": build_small_index(shared_data / "musique" / "corpus.jsonl", root / "musique", n=40),
    }


@pytest.fixture()
def readme_folder(tmp_path: Path) -> Path:
    """A working folder for the README's Python blocks: ``docs/`` holds the first 12 pages of
    ``cookbook/sample_corpus/wiki_sample.jsonl`` as ``pageNN.txt`` (title line, then text), the
    folder the README's examples index. Returns the working folder (``tmp_path``)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    with open(ROOT / "cookbook" / "sample_corpus" / "wiki_sample.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= 12:
                break
            rec = json.loads(line)
            (docs / f"page{i:02d}.txt").write_text(f"{rec['title']}\n{rec['text']}", encoding="utf-8")
    return tmp_path

