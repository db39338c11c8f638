"""The Python blocks of the root README and of every documentation page run as pasted, in
order, each in a fresh interpreter.

They share one working folder with a ``docs/`` subfolder of text files (some pages of the
shipped sample corpus), as the README says. The README's blocks start from that folder alone
(its first block builds ``my_index``); each page of ``docs/`` gets a folder of its own holding
the same ``docs/`` and a copy of the index ``my_index`` that the README's first block builds,
which the pages say their examples read.

A block that cannot run alone (it needs an LLM server, say) is listed in ``NOT_RUN`` with its
reason, and its page must show that reason in the line before the block.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
DOC_PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if PYTHON_BLOCK.search(p.read_text(encoding="utf-8")))

#: (page relative to docs/, 1-based block number) -> the reason shown on the page. Keep it short.
NOT_RUN: dict[tuple[str, int], str] = {}


def python_blocks(path: Path) -> list[str]:
    return PYTHON_BLOCK.findall(path.read_text(encoding="utf-8"))


def run_blocks(blocks: list[str], cwd: Path, where: str, skip: set[int] = frozenset()) -> None:
    for n, code in enumerate(blocks, 1):
        if n in skip:
            continue
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=cwd, timeout=600)
        assert proc.returncode == 0, f"{where} block {n} failed:\n{code}\n{proc.stderr[-3000:]}"
        assert proc.stdout.strip(), f"{where} block {n} printed nothing"


def test_root_readme_python_blocks_run_as_pasted(readme_folder):
    blocks = python_blocks(ROOT / "README.md")
    assert len(blocks) >= 3
    run_blocks(blocks, readme_folder, "README")


@pytest.fixture(scope="module")
def built_index(tmp_path_factory) -> Path:
    """``my_index`` built from the sample pages by the README's first block, once per module."""
    folder = tmp_path_factory.mktemp("docs-index")
    _sample_pages(folder)
    first = python_blocks(ROOT / "README.md")[0]
    assert 'persist_dir="my_index"' in first, "the README's first block no longer builds my_index"
    run_blocks([first], folder, "README")
    return folder / "my_index"


def _sample_pages(folder: Path) -> None:
    # the same pages as the root conftest's readme_folder fixture
    import json

    docs = folder / "docs"
    docs.mkdir()
    with open(ROOT / "cookbook" / "sample_corpus" / "wiki_sample.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= 12:
                break
            rec = json.loads(line)
            (docs / f"page{i:02d}.txt").write_text(f"{rec['title']}\n{rec['text']}", encoding="utf-8")


def test_the_documentation_has_python_blocks():
    assert DOC_PAGES, "no page of docs/ has a Python block"
    for (page, n), reason in NOT_RUN.items():
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        blocks = python_blocks(ROOT / "docs" / page)
        assert 1 <= n <= len(blocks), f"NOT_RUN names block {n} of {page}, which has {len(blocks)}"
        before = text[: text.index("```python\n" + blocks[n - 1])].rstrip().rsplit("\n", 1)[-1]
        assert reason in before, f"{page} block {n}: the line before it must show {reason!r}"


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: p.relative_to(ROOT / "docs").as_posix())
def test_docs_page_python_blocks_run_as_pasted(page: Path, built_index: Path, tmp_path: Path):
    _sample_pages(tmp_path)
    shutil.copytree(built_index, tmp_path / "my_index")
    rel = page.relative_to(ROOT / "docs").as_posix()
    skip = {n for (p, n) in NOT_RUN if p == rel}
    run_blocks(python_blocks(page), tmp_path, f"docs/{rel}", skip)
