"""The README example of each LlamaIndex package runs as written (in a fresh interpreter)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READMES = [
    "llama-index-retrievers-graphstrata",
    "llama-index-graph-rag-graphstrata",
    "llama-index-node-parser-graphstrata",
]


def python_blocks(readme: Path) -> str:
    return "\n".join(re.findall(r"```python\n(.*?)```", readme.read_text(encoding="utf-8"), re.S))


@pytest.mark.parametrize("pkg", READMES)
def test_readme_example_runs(pkg, tmp_path):
    code = python_blocks(ROOT / "packages" / pkg / "README.md")
    assert "import" in code
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip()  # every example prints what it retrieved
