"""Every Python snippet of each LlamaIndex package README runs as pasted.

Each ```python block runs on its own in a fresh interpreter (a reader pastes one block, not
the concatenation of all of them), offline: the LLM lines use LlamaIndex's ``MockLLM``, as the
READMEs say, and embeddings are graphstrata's packaged model or a local mock.
"""

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
    "llama-index-extractors-graphstrata",
    "llama-index-embeddings-graphstrata",
]


def python_blocks(readme: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)


SNIPPETS = [
    pytest.param(pkg, i, code, id=f"{pkg}-{i}")
    for pkg in READMES
    for i, code in enumerate(python_blocks(ROOT / "packages" / pkg / "README.md"))
]


def test_every_readme_has_a_snippet():
    assert {pkg for pkg, *_ in (p.values for p in SNIPPETS)} == set(READMES)


@pytest.mark.parametrize(("pkg", "index", "code"), SNIPPETS)
def test_readme_snippet_runs_as_pasted(pkg, index, code, tmp_path):
    assert "import" in code
    # no hosted default may be reached: any LLM a snippet uses is MockLLM
    assert "OpenAI" not in code
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip()  # every snippet prints what it retrieved
