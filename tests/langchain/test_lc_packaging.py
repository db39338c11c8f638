"""The package builds and installs on its own; its README example runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

PKG_DIR = Path(__file__).resolve().parents[2] / "packages" / "langchain-graphstrata"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: Any) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # --no-build-isolation: hatchling comes from this environment, so no network is needed.
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), str(PKG_DIR)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("langchain_graphstrata-*.whl")
    return whl


def test_wheel_contents(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ("__init__.py", "retrievers.py", "tools.py", "document_transformers.py",
                   "embeddings.py", "py.typed"):
        assert f"langchain_graphstrata/{module}" in names
    assert not any(n.startswith(("tests/", "integration_tests/")) for n in names)
    (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    meta = zipfile.ZipFile(wheel).read(meta_name).decode()
    assert "Name: langchain-graphstrata" in meta
    requires = re.findall(r"^Requires-Dist: (.+)$", meta, re.M)
    assert any(r.startswith("langchain-core") and ">=1.7" in r for r in requires)
    assert any(r.startswith("graphstrata") for r in requires)
    assert "GraphStrataRetriever" in meta  # the README is the long description


def test_wheel_installs_and_imports_alone(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
         "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    code = (
        "import langchain_graphstrata as m, sys; "
        "print(m.__file__); print(sorted(n for n in m.__all__ if not n.startswith('_')))"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    path, names = run.stdout.splitlines()
    assert Path(path).is_relative_to(target)  # the installed copy, not the source tree
    assert names == str(sorted(["ChatModelLLM", "GraphStrataAnswerer", "GraphStrataEmbeddings",
                                "GraphStrataRetriever",
                                "GraphStrataTransformer", "create_graphstrata_tool",
                                "embedder_from_langchain"]))


README_BLOCKS = re.findall(
    r"```python\n(.*?)```", (PKG_DIR / "README.md").read_text(encoding="utf-8"), re.S
)


def test_readme_has_the_documented_snippets() -> None:
    assert len(README_BLOCKS) >= 6
    code = "\n".join(README_BLOCKS)
    # the LLM lines use the documented fake chat model, never a hosted one
    assert "FakeListChatModel" in code and "OpenAI" not in code


@pytest.mark.parametrize("index", range(len(README_BLOCKS)))
def test_readme_snippet_runs_as_pasted(index: int, tmp_path: Path) -> None:
    """Each ```python block of the README on its own, in a fresh interpreter (a reader pastes
    one block), offline."""
    code = README_BLOCKS[index]
    assert "import" in code
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip()  # every snippet prints what it retrieved
    if index == 0:
        assert (tmp_path / "demo_lc_index").is_dir()


def test_readme_and_docstring_point_to_the_llm_extractor_that_exists() -> None:
    """They name ``graphstrata.indexing.LLMExtractor`` (issue 13 made it exist) and no
    longer call it planned."""
    from graphstrata.indexing import LLMExtractor  # noqa: F401 - it exists
    from langchain_graphstrata import GraphStrataTransformer

    readme = (PKG_DIR / "README.md").read_text(encoding="utf-8")
    doc = GraphStrataTransformer.__doc__ or ""
    assert "graphstrata.indexing.LLMExtractor" in readme
    assert "graphstrata.indexing.LLMExtractor" in doc
    assert "planned" not in readme and "planned" not in doc
