"""The indexes a server keeps loaded, and how it follows new persisted versions.

Each request asks :meth:`IndexRegistry.get` for its index. That reads the index directory's
``CURRENT`` pointer (one small file, :func:`graphstrata.store.version_dir`); when another
process has switched it since the index was loaded, the new version is loaded first (with the
same embedder and LLM) and becomes the one later requests get. A request holds the
:class:`~graphstrata.GraphStrata` it was given until it finishes, and every query of a
``GraphStrata`` reads one immutable state, so requests already in flight finish on the version
they started on and no request ever reads parts of two versions. The store keeps the version
before the current one on disk for such readers (:data:`graphstrata.store.KEEP_VERSIONS`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .. import store
from ..api import GraphStrata

log = logging.getLogger(__name__)

__all__ = ["IndexRegistry"]

T = TypeVar("T")


def current_version(path: Path) -> str:
    """The version name ``CURRENT`` in ``path`` names now (the directory's own name for an
    index of schema 1, which has no versions).

    Raises:
        FileNotFoundError, ValueError: as :func:`graphstrata.store.version_dir`.
    """
    return store.version_dir(path).name


@dataclass
class _Entry:
    path: Path
    current: tuple[GraphStrata, str]  # replaced as one tuple, so a reader never pairs two versions
    failed: str | None = None  # a version that failed to load (not retried until CURRENT moves on)
    lock: threading.Lock = field(default_factory=threading.Lock)


class IndexRegistry:
    """Loaded indexes by name, each following its directory's current version.

    Args:
        indexes: name → persisted index directory.
        llm: the LLM to load every index with (``None``: offline; see :meth:`GraphStrata.load`).
        load: how an index is opened (``GraphStrata.load``'s signature), for tests.

    Raises:
        FileNotFoundError, ValueError: an index fails to load (named), as :meth:`GraphStrata.load`.
    """

    def __init__(
        self,
        indexes: Mapping[str, str | Path],
        llm: Any = None,
        load: Callable[..., GraphStrata] = GraphStrata.load,
    ) -> None:
        self._llm = llm
        self._load = load
        self._entries: dict[str, _Entry] = {}
        for name, path in indexes.items():
            p = Path(path)
            try:
                version = current_version(p)
                gs = load(p, llm=llm)
            except (FileNotFoundError, ValueError) as exc:
                raise type(exc)(f"index {name!r} ({p}): {exc}") from exc
            self._entries[name] = _Entry(p, (gs, version))

    def names(self) -> list[str]:
        """The index names, in the order given."""
        return list(self._entries)

    def path(self, name: str) -> Path:
        """The directory of index ``name`` (``KeyError`` if unknown)."""
        return self._entries[name].path

    def get(self, name: str) -> tuple[GraphStrata, str]:
        """Index ``name`` at its directory's current version, and that version's name.

        Loads the current version first when another process switched ``CURRENT`` since the
        last load. When that load fails (a version that is not readable), the version already
        loaded keeps serving, a warning is logged, and the same version is not tried again.

        Raises:
            KeyError: no index of that name.
        """
        entry = self._entries[name]
        current = entry.current
        try:
            now = current_version(entry.path)
        except (FileNotFoundError, ValueError) as exc:
            log.warning("index %r: cannot read its current version (%s); serving %s", name, exc, current[1])
            return current
        if now == current[1] or now == entry.failed:
            return current
        with entry.lock:
            self._refresh(name, entry)
            return entry.current

    def _refresh(self, name: str, entry: _Entry) -> None:
        """Load ``entry``'s current version if it is not the loaded one (lock held)."""
        try:
            now = current_version(entry.path)
        except (FileNotFoundError, ValueError):
            return
        loaded, version = entry.current
        if now in (version, entry.failed):
            return
        try:
            gs = self._load(entry.path, embedder=loaded.embedder, llm=self._llm)
        except (FileNotFoundError, ValueError, OSError) as exc:
            log.warning("index %r: version %s does not load (%s); still serving %s", name, now, exc, version)
            entry.failed = now
            return
        log.info("index %r: now serving version %s (was %s)", name, now, version)
        entry.current, entry.failed = (gs, now), None

    def write(self, name: str, change: Callable[[GraphStrata], T]) -> tuple[T, str]:
        """Run ``change(index)`` (an ``insert`` / ``delete``, which persists atomically under
        the store's writer lock) on the current version of index ``name``, one writer per index
        in this process; returns its result and the version it persisted.

        The index is first brought up to the directory's current version, so a write never
        builds on a version another process has replaced.

        Raises:
            KeyError: no index of that name; whatever ``change`` raises (nothing is changed).
        """
        entry = self._entries[name]
        with entry.lock:
            self._refresh(name, entry)
            gs = entry.current[0]
            result = change(gs)
            try:
                entry.current = (gs, current_version(entry.path))
            except (FileNotFoundError, ValueError):  # pragma: no cover - just written
                pass
            return result, entry.current[1]
