"""Each LlamaIndex package builds a wheel on its own and installs as a namespace portion."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "llama-index-retrievers-graphstrata": ("llama_index/retrievers/graphstrata", "GraphStrataRetriever"),
    "llama-index-graph-rag-graphstrata": ("llama_index/graph_rag/graphstrata", "GraphStrataIndex"),
    "llama-index-node-parser-graphstrata": ("llama_index/node_parser/graphstrata", "GraphStrataNodeParser"),
    "llama-index-extractors-graphstrata": ("llama_index/extractors/graphstrata", "GraphStrataExtractor"),
    "llama-index-embeddings-graphstrata": ("llama_index/embeddings/graphstrata", "GraphStrataEmbedding"),
}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    out = tmp_path_factory.mktemp("llama_wheels")
    built = {}
    for pkg in PACKAGES:
        # --no-build-isolation: offline; hatchling is in the environment already
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
             "--no-index", "-q", "-w", str(out / pkg), str(ROOT / "packages" / pkg)],
            capture_output=True, text=True, timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        (wheel,) = (out / pkg).glob("*.whl")
        built[pkg] = wheel
    return built


@pytest.mark.parametrize("pkg", list(PACKAGES))
def test_wheel_contents(wheels, pkg):
    module_dir, _ = PACKAGES[pkg]
    names = zipfile.ZipFile(wheels[pkg]).namelist()
    assert f"{module_dir}/__init__.py" in names and f"{module_dir}/base.py" in names
    # namespace packages: no __init__.py in llama_index/ nor in the category folder
    category = module_dir.rsplit("/", 1)[0]
    assert "llama_index/__init__.py" not in names
    assert f"{category}/__init__.py" not in names
    assert not any(n.startswith(("tests/", "llama_index/core/")) for n in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheels[pkg]).read(metadata).decode()
    assert f"Name: {pkg}" in text
    assert "Requires-Dist: llama-index-core" in text and "Requires-Dist: graphstrata" in text
    if pkg == "llama-index-graph-rag-graphstrata":
        assert "Requires-Dist: llama-index-retrievers-graphstrata" in text


def test_installed_wheels_import_beside_llama_index_core(wheels, tmp_path):
    target = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
         "--target", str(target), *map(str, wheels.values())],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    imports = {pkg: module_dir.replace("/", ".") for pkg, (module_dir, _) in PACKAGES.items()}
    script = "import importlib, llama_index.core\n" + "".join(
        f"m = importlib.import_module({module!r}); print(m.__file__, m.{PACKAGES[pkg][1]}.__name__)\n"
        for pkg, module in imports.items()
    )
    env = dict(os.environ, PYTHONPATH=str(target))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == len(PACKAGES)
    assert all(line.startswith(str(target)) for line in lines), lines
    assert [line.split()[-1] for line in lines] == [name for _, name in PACKAGES.values()]
