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
import threading
from pathlib import Path

from .base import LLMResponse, Usage

#: file name of the cache inside an index directory
CACHE_FILE = "llm-cache.sqlite"

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
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._mem: dict[str, LLMResponse] = {}
        self._con: sqlite3.Connection | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                con = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA synchronous=NORMAL")
                con.executescript(_SCHEMA)
                con.commit()
            except sqlite3.Error as exc:
                raise ValueError(f"cannot open the LLM response cache {self.path}: {exc}") from exc
            self._con = con

    def get(self, key: str) -> LLMResponse | None:
        """The cached response for ``key``, or ``None``."""
        with self._lock:
            if self._con is None:
                return self._mem.get(key)
            row = self._con.execute(
                "SELECT text, prompt_tokens, completion_tokens, estimated FROM responses WHERE key = ?",
                (key,),
            ).fetchone()
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
            self._con.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                (key, response.text, u.prompt_tokens, u.completion_tokens, int(u.estimated)),
            )
            self._con.commit()

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
