"""One version, one license, type information: what every distribution of the repository
declares, checked on the sources (``tests/packaging/test_wheels.py`` checks the built wheels).

- The version is written once, in ``VERSION``: every pyproject declares it dynamic and reads
  that file; no package source holds a version literal (they read the installed metadata).
- Every distribution ships the repository's MIT ``LICENSE`` (a copy beside each pyproject:
  a wheel's license files must live under its project folder) and a ``py.typed``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = [ROOT / "native", *sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))]
VERSION = (ROOT / "VERSION").read_text(encoding="utf-8").strip()


def _pyproject(project: Path) -> dict:
    with open(project / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_version_file_is_a_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+([ab]|rc|\.dev|\.post)?\d*", VERSION), VERSION
    assert f"## [{VERSION}]" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_every_pyproject_reads_the_one_version_file(project: Path):
    data = _pyproject(project)
    assert "version" not in data["project"], f"{project.name} writes its own version"
    assert "version" in data["project"]["dynamic"]
    tool = data["tool"]
    if "hatch" in tool:
        source = tool["hatch"]["version"]
        path, pattern = source["path"], source["pattern"]
    else:
        source = tool["scikit-build"]["metadata"]["version"]
        path, pattern = source["input"], source["regex"]
        pattern = pattern.replace("(?P<value>", "(?P<version>")
    assert (project / path).resolve() == ROOT / "VERSION"
    assert re.search(pattern, (ROOT / "VERSION").read_text(encoding="utf-8")).group("version") == VERSION


def test_no_package_source_writes_a_version_literal():
    sources = [*(ROOT / "native" / "src").rglob("*.py"), *(ROOT / "packages").rglob("*.py")]
    offenders = [str(p.relative_to(ROOT)) for p in sources
                 if re.search(r"^__version__\s*=\s*['\"]\d", p.read_text(encoding="utf-8"), re.M)]
    assert offenders == []


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_every_project_ships_the_license_and_declares_it(project: Path):
    assert (project / "LICENSE").read_text(encoding="utf-8") == (ROOT / "LICENSE").read_text(encoding="utf-8")
    meta = _pyproject(project)["project"]
    assert meta["license"] == "MIT" and meta["license-files"] == ["LICENSE"]
    assert "MIT License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert {"Homepage", "Repository", "Issues", "Changelog"} <= set(meta["urls"])


def _project_urls_tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("project_urls", ROOT / "tools" / "project_urls.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_project_urls_come_from_the_one_home(project: Path):
    """Every distribution declares Homepage, Documentation, Repository, Changelog and Issues,
    all under ``[tool.graphstrata] home`` of the workspace pyproject (written there once;
    ``python tools/project_urls.py`` regenerates the tables), and the files they name exist."""
    tool = _project_urls_tool()
    with open(ROOT / "pyproject.toml", "rb") as f:
        home = tomllib.load(f)["tool"]["graphstrata"]["home"]
    declared = _pyproject(project)["project"]["urls"]
    assert declared == tool.urls(project, home), "run: python tools/project_urls.py"
    assert set(declared) == {"Homepage", "Documentation", "Repository", "Changelog", "Issues"}
    for url in declared.values():
        assert url == home or url.startswith((f"{home}/", f"{home}#")), url
        if "/blob/main/" in url:  # names a file of this repository
            assert (ROOT / url.split("/blob/main/", 1)[1]).is_file(), url


def test_project_urls_tool_rewrites_only_the_urls_table(tmp_path: Path):
    """The tool regenerates a drifted table (another home, a missing key) and leaves the rest
    of the file as it was."""
    tool = _project_urls_tool()
    project = ROOT / "packages" / "langchain-graphstrata"
    text = (project / "pyproject.toml").read_text(encoding="utf-8")
    out = tool.rendered(project, "https://example.org/fork")
    assert 'Issues = "https://example.org/fork/issues"' in out
    assert 'Documentation = "https://example.org/fork/blob/main/packages/langchain-graphstrata/README.md"' in out
    strip = lambda t: tool.TABLE.sub("", t)  # noqa: E731
    assert strip(out) == strip(text)
    assert tool.main(["--check"]) == 0


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_every_package_has_py_typed(project: Path):
    typed = [p for p in project.rglob("py.typed") if "build" not in p.parts]
    assert typed, f"{project.name} has no py.typed"


def test_public_signatures_name_the_types_they_take_and_return():
    """Where the type is known, the public signature says it (no ``Any``): what ``py.typed``
    promises a type checker."""
    import inspect

    from graphstrata import GraphStrata
    from graphstrata.runner import Runner
    from langchain_graphstrata import ChatModelLLM
    from llama_index.retrievers.graphstrata import (
        GraphStrataRetriever,
        LlamaIndexLLM,
        embedder_from_llama_index,
    )

    def annotations(fn) -> dict[str, str]:
        sig = inspect.signature(fn)
        out = {name: str(p.annotation) for name, p in sig.parameters.items()}
        out["return"] = str(sig.return_annotation)
        return out

    assert annotations(GraphStrata.to_networkx)["return"] == "nx.DiGraph"
    assert annotations(GraphStrata.llm.fget)["return"] == "LLMClient | None"
    assert annotations(GraphStrata.derived)["return"] == "_T"
    assert annotations(embedder_from_llama_index) == {
        "embed_model": "BaseEmbedding", "batch_size": "int | None", "return": "Embedder"}
    assert annotations(GraphStrataRetriever.__init__)["engine"] == "GraphStrata"
    assert annotations(GraphStrataRetriever.engine.fget)["return"] == "GraphStrata"
    assert annotations(Runner.embed)["embedder"] == "Embedder"
    assert annotations(LlamaIndexLLM.__init__)["llm"] == "LLM"
    assert annotations(ChatModelLLM.__init__)["model"] == "BaseLanguageModel"


@pytest.mark.parametrize("project", [ROOT / "native", ROOT / "packages" / "graphstrata"],
                         ids=["scikit-build-core", "hatchling"])
def test_a_wheel_built_from_the_sdist_keeps_the_version(project: Path, tmp_path: Path):
    """An sdist has no ``../VERSION``: its backend reads the version back from ``PKG-INFO``
    (metadata only: nothing is compiled)."""
    import subprocess
    import sys
    import tarfile

    backend = {"native": "scikit_build_core.build"}.get(project.name, "hatchling.build")

    def hook(cwd: Path, call: str) -> str:
        proc = subprocess.run([sys.executable, "-c", f"import {backend} as b; print(b.{call})"],
                              cwd=cwd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout.strip().splitlines()[-1]

    sdist = tmp_path / hook(project, f"build_sdist({str(tmp_path)!r})")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "src", filter="data")
    (unpacked,) = (tmp_path / "src").iterdir()
    assert not (unpacked.parent / "VERSION").exists()
    meta_dir = tmp_path / "meta"
    meta_dir.mkdir()
    dist_info = hook(unpacked, f"prepare_metadata_for_build_wheel({str(meta_dir)!r})")
    metadata = (meta_dir / dist_info / "METADATA").read_text(encoding="utf-8")
    assert re.search(rf"^Version: {re.escape(VERSION)}$", metadata, re.M), metadata[:500]
    assert (meta_dir / dist_info / "licenses" / "LICENSE").is_file() or "License-File: LICENSE" in metadata
