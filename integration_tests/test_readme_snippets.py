"""The root README's Python blocks run as pasted, in order, each in a fresh interpreter.

They share one working folder with a ``docs/`` subfolder of text files (some pages of the
shipped sample corpus), as the README says.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_root_readme_python_blocks_run_as_pasted(readme_folder):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 3
    for n, code in enumerate(blocks, 1):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=readme_folder, timeout=600)
        assert proc.returncode == 0, f"README block {n} failed:\n{code}\n{proc.stderr[-3000:]}"
        assert proc.stdout.strip(), f"README block {n} printed nothing"
