"""Check that the running interpreter imports the version floors, not the pins of ``make test``.

``make test-floors`` runs the adapter tests in ``build/venv-floors``, an overlay on ``.venv``
(see the Makefile): its own site-packages holds the ``requirements/floors.txt`` pins and
``.venv``'s site-packages follows it on ``sys.path``. Both venvs hold a copy of each pinned
framework, so a wrong order would test the newest versions and pass silently. For every
``name==version`` line of the floors file this checks that the installed distribution found
first has that version, lives in this interpreter's own site-packages, and that its top-level
package imports from there.

Usage: ``python tools/check_floors.py requirements/floors.txt``; prints one line per floor,
exits 1 with the reason on the first mismatch.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import re
import sys
import sysconfig
from pathlib import Path


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)\s*$", line.strip())
        if m:
            pins[m.group(1)] = m.group(2)
    return pins


def _top_package(dist: md.Distribution) -> str | None:
    """The shallowest package (a folder with ``__init__.py``) the distribution installs."""
    inits = [Path(str(f)) for f in (dist.files or []) if Path(str(f)).name == "__init__.py"
             and not str(f).startswith("..")]
    if not inits:
        return None
    best = min(inits, key=lambda p: (len(p.parts), str(p)))
    return ".".join(best.parts[:-1])


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python tools/check_floors.py requirements/floors.txt", file=sys.stderr)
        return 2
    pins = _pins(Path(argv[1]))
    if not pins:
        print(f"{argv[1]}: no name==version lines", file=sys.stderr)
        return 1
    own = Path(sysconfig.get_path("purelib")).resolve()
    for name, want in pins.items():
        dist = md.distribution(name)
        where = Path(str(dist.locate_file(""))).resolve()
        if dist.version != want:
            print(f"{name}: {dist.version} found first (at {where}), floors.txt pins {want}", file=sys.stderr)
            return 1
        if where != own:
            print(f"{name} {want} is installed at {where}, not in this venv's {own}", file=sys.stderr)
            return 1
        pkg = _top_package(dist)
        if pkg is not None:
            mod = importlib.import_module(pkg)
            origin = Path(mod.__file__).resolve()
            if own not in origin.parents:
                print(f"{name}: import {pkg} loads {origin}, not the floor in {own}", file=sys.stderr)
                return 1
        print(f"{name} {dist.version} ({pkg or 'no package'} from {own})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
