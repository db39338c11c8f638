"""The root README's Python blocks run as pasted, in order, each in a fresh interpreter.

They share one working folder with a ``docs/`` subfolder of text files (some pages of the
shipped sample corpus), as the README says.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_root_readme_python_blocks_run_as_pasted(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 3
    docs = tmp_path / "docs"
    docs.mkdir()
    with open(ROOT / "cookbook" / "sample_corpus" / "wiki_sample.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= 12:
                break
            rec = json.loads(line)
            (docs / f"page{i:02d}.txt").write_text(f"{rec['title']}\n{rec['text']}", encoding="utf-8")
    for n, code in enumerate(blocks, 1):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=tmp_path, timeout=600)
        assert proc.returncode == 0, f"README block {n} failed:\n{code}\n{proc.stderr[-3000:]}"
        assert proc.stdout.strip(), f"README block {n} printed nothing"
