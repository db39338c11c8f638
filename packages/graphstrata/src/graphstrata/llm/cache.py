"""Content-hash response cache: an LLM call already paid for is never paid for again.

Keys are :meth:`LLMRequest.key` (sha256 of model id, system prompt, prompt, JSON mode); the
value is the response text and its usage. A persisted index keeps its cache at
``DIR/llm-cache.sqlite``, beside (not inside) the index versions, so it survives every
insert, delete and rebuild, and an interrupted build resumes where it stopped: every response
is committed the moment it arrives. SQLite in WAL mode lets several processes (a build and a
server, or distributed workers) share one file.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import threading
from pathlib import Path
from typing import NoReturn

from .base import LLMResponse, Usage

#: file name of the cache inside an index directory
CACHE_FILE = "llm-cache.sqlite"
CACHE_LOCK_TIMEOUT = 30.0
"""Seconds a cache read or write waits for another process's lock on the file."""


class LLMCacheLockedError(RuntimeError):
    """The response cache file stayed locked by another process (a build, a server, a
    worker, a SQLite shell with an open transaction) past :data:`CACHE_LOCK_TIMEOUT`; the
    message names the file and, where the system tells, the process."""


def _lock_holder(path: Path) -> str:
    """``"process <pid>"`` holding a POSIX lock on the cache (its database, WAL or shared
    memory file), else ``"another process"`` (best effort: F_GETLK)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover
        return "another process"
    for p in (path, Path(f"{path}-shm"), Path(f"{path}-wal")):
        try:
            fd = os.open(p, os.O_RDWR)
        except OSError:
            continue
        try:
            probe = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
            kind, _, _, _, pid = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, probe))
            if kind != fcntl.F_UNLCK and pid > 0:
                return f"process {pid}"
        except OSError:
            pass
        finally:
            os.close(fd)
    return "another process"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    estimated INTEGER NOT NULL
);
"""


class ResponseCache:
    """Thread-safe response cache, in memory (``path=None``) or in a SQLite file.

    Args:
        path: the SQLite file (created with its parent directory when missing), or ``None``.

    Raises:
        ValueError: ``path`` exists and is not a readable cache (message names the file).
        LLMCacheLockedError: (here and from every read and write) another process held the
            file locked past :data:`CACHE_LOCK_TIMEOUT` seconds.
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._mem: dict[str, LLMResponse] = {}
        self._con: sqlite3.Connection | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                con = sqlite3.connect(self.path, check_same_thread=False, timeout=CACHE_LOCK_TIMEOUT)
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA synchronous=NORMAL")
                con.executescript(_SCHEMA)
                con.commit()
            except sqlite3.OperationalError as exc:
                if _is_lock_error(exc):
                    self._raise_locked(exc)
                raise ValueError(f"cannot open the LLM response cache {self.path}: {exc}") from exc
            except sqlite3.Error as exc:
                raise ValueError(f"cannot open the LLM response cache {self.path}: {exc}") from exc
            self._con = con

    def _raise_locked(self, exc: sqlite3.Error) -> NoReturn:
        raise LLMCacheLockedError(
            f"the LLM response cache {self.path} is locked by {_lock_holder(self.path)} "
            f"(waited {CACHE_LOCK_TIMEOUT:g} s): let that process finish, or end its open transaction"
        ) from exc

    def get(self, key: str) -> LLMResponse | None:
        """The cached response for ``key``, or ``None``."""
        with self._lock:
            if self._con is None:
                return self._mem.get(key)
            try:
                row = self._con.execute(
                    "SELECT text, prompt_tokens, completion_tokens, estimated FROM responses WHERE key = ?",
                    (key,),
                ).fetchone()
            except sqlite3.OperationalError as exc:
                if _is_lock_error(exc):
                    self._raise_locked(exc)
                raise
        if row is None:
            return None
        return LLMResponse(row[0], Usage(int(row[1]), int(row[2]), bool(row[3])))

    def put(self, key: str, response: LLMResponse) -> None:
        """Store ``response`` under ``key`` (committed before returning)."""
        with self._lock:
            if self._con is None:
                self._mem[key] = response
                return
            u = response.usage
            try:
                self._con.execute(
                    "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                    (key, response.text, u.prompt_tokens, u.completion_tokens, int(u.estimated)),
                )
                self._con.commit()
            except sqlite3.OperationalError as exc:
                if self._con.in_transaction:
                    self._con.rollback()
                if _is_lock_error(exc):
                    self._raise_locked(exc)
                raise

    def attach_file(self, path: str | os.PathLike) -> bool:
        """Move an in-memory cache into the SQLite file at ``path`` (created when missing; its
        entries are kept, and each key of this cache is added unless the file has it: equal
        keys are equal requests), and read and write that file from then on. What an index
        built without a directory does when it is persisted (``GraphStrata.persist``, the
        LlamaIndex and LangChain packages' persist): its cache lives beside the index, as a
        build into a directory's does.

        Returns:
            ``True`` when the cache moved; ``False`` when it already uses a file (left as it
            is).

        Raises:
            ValueError: ``path`` exists and is not a readable cache.
            LLMCacheLockedError: another process held the file locked too long.
        """
        with self._lock:
            if self._con is not None:
                return False
            target = ResponseCache(path)
            con = target._con
            assert con is not None
            try:
                con.executemany(
                    "INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?, ?)",
                    (
                        (k, r.text, r.usage.prompt_tokens, r.usage.completion_tokens, int(r.usage.estimated))
                        for k, r in self._mem.items()
                    ),
                )
                con.commit()
            except sqlite3.OperationalError as exc:
                if con.in_transaction:
                    con.rollback()
                con.close()
                if _is_lock_error(exc):
                    target._raise_locked(exc)
                raise
            self.path, self._con, self._mem = target.path, con, {}
            target._con = None  # the connection is this cache's now
            return True

    def __len__(self) -> int:
        with self._lock:
            if self._con is None:
                return len(self._mem)
            return int(self._con.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


def _is_lock_error(exc: sqlite3.Error) -> bool:
    msg = str(exc).lower()
    return "locked" in msg or "busy" in msg
