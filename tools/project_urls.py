"""Write the ``[project.urls]`` table of every pyproject from the one project home.

The home is ``[tool.graphstrata] home`` in the workspace ``pyproject.toml``. Each project gets

* ``Homepage`` and ``Repository``: the home;
* ``Documentation``: the project's own ``README.md`` on the ``main`` branch (the core
  package's is a pointer: it gets the repository's README, ``<home>#readme``);
* ``Issues``: ``<home>/issues``; ``Changelog``: ``CHANGELOG.md`` on ``main``.

Usage: ``python tools/project_urls.py`` (rewrite) or ``--check`` (exit 1, listing the files
that differ). Only the ``[project.urls]`` table is touched; the rest of each file is kept
byte for byte.

Raises:
    SystemExit: a pyproject without a ``[project.urls]`` table, or no home configured.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
#: Projects whose documentation is the repository's README.
CORE_DOCS_AT_ROOT = ("packages/graphstrata",)
TABLE = re.compile(r"^\[project\.urls\]\n(?:(?!\[).*\n)*", re.M)


def home() -> str:
    """The project home URL (no trailing slash) from the workspace pyproject."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        value = tomllib.load(f).get("tool", {}).get("graphstrata", {}).get("home")
    if not isinstance(value, str) or not value.startswith("https://"):
        raise SystemExit("pyproject.toml: [tool.graphstrata] home must be an https URL")
    return value.rstrip("/")


def projects() -> list[Path]:
    """The folders of every published project (the native module and packages/*)."""
    return [ROOT / "native", *sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))]


def urls(project: Path, base: str | None = None) -> dict[str, str]:
    """The ``[project.urls]`` a project should declare (ordered as written)."""
    base = base or home()
    rel = project.relative_to(ROOT).as_posix()
    docs = f"{base}#readme" if rel in CORE_DOCS_AT_ROOT else f"{base}/blob/main/{rel}/README.md"
    return {
        "Homepage": base,
        "Documentation": docs,
        "Repository": base,
        "Issues": f"{base}/issues",
        "Changelog": f"{base}/blob/main/CHANGELOG.md",
    }


def rendered(project: Path, base: str | None = None) -> str:
    """The project's pyproject text with its ``[project.urls]`` table regenerated."""
    path = project / "pyproject.toml"
    text = path.read_text(encoding="utf-8")
    table = "[project.urls]\n" + "".join(f'{k} = "{v}"\n' for k, v in urls(project, base).items()) + "\n"
    new, n = TABLE.subn(lambda _m: table, text, count=1)
    if n != 1:
        raise SystemExit(f"{path}: no [project.urls] table")
    return new


def main(argv: list[str]) -> int:
    check = "--check" in argv
    base = home()
    stale = []
    for project in projects():
        path = project / "pyproject.toml"
        new = rendered(project, base)
        if new != path.read_text(encoding="utf-8"):
            stale.append(str(path.relative_to(ROOT)))
            if not check:
                path.write_text(new, encoding="utf-8")
    if check and stale:
        print("Project-URLs out of date (run python tools/project_urls.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
