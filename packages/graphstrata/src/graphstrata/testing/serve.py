"""Helpers for tests of ``graphstrata serve``: a small real index, and a server in a child
process (what an MCP client meets in practice).

Nothing here imports the MCP SDK.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["build_small_index", "free_port", "http_server", "post_json", "serve_command"]


def build_small_index(corpus: str | os.PathLike, out: str | os.PathLike, n: int = 60) -> Path:
    """Persist an index of the first ``n`` records of a shared-data ``corpus.jsonl``
    (``{"id", "title", "text"}`` lines) with the ``fast`` embedder preset (seconds).

    Returns:
        The index directory.

    Raises:
        FileNotFoundError: no such corpus file.
    """
    from ..api import GraphStrata

    docs = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            d = json.loads(line)
            docs.append({"id": d["id"], "text": f"{d['title']}\n{d['text']}", "metadata": {"title": d["title"]}})
            if len(docs) >= n:
                break
    GraphStrata.build(docs, embedder="fast", persist_dir=out)
    return Path(out)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_command(*args: str) -> list[str]:
    """``python -m graphstrata.cli serve ARGS...`` with this interpreter."""
    return [sys.executable, "-m", "graphstrata.cli", "serve", *args]


@contextlib.contextmanager
def http_server(
    args: Sequence[str],
    env: dict[str, str] | None = None,
    token: str | None = None,
    timeout: float = 120.0,
) -> Iterator[str]:
    """Run ``graphstrata serve ARGS --transport http --port P`` in a child process until the
    block ends; yields its base URL (``http://127.0.0.1:P``) once ``GET /v1/indexes`` answers.

    Args:
        args: index directories and options (not ``--transport`` / ``--port``).
        env: extra environment variables for the child.
        token: a bearer token to poll readiness with (a server with tokens answers 401
            without one, which also counts as up).
        timeout: seconds to wait for the server to answer.

    Raises:
        RuntimeError: the child exited or did not answer in time (its stderr in the message).
    """
    port = free_port()
    proc = subprocess.Popen(
        serve_command(*args, "--transport", "http", "--port", str(port)),
        env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            request = urllib.request.Request(f"{url}/v1/indexes")
            if token:
                request.add_header("Authorization", f"Bearer {token}")
            try:
                urllib.request.urlopen(request, timeout=2).close()
                break
            except urllib.error.HTTPError:
                break  # it answered
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not answer on {url} within {timeout} s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def post_json(url: str, body: Any, token: str | None = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """POST ``body`` as JSON; returns ``(status, decoded JSON body)`` for any status (the text
    of a body that is not JSON)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json",
                                                                             **(headers or {})})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        payload = exc.read()
        exc.close()
        try:
            return exc.code, json.loads(payload) if payload else None
        except ValueError:
            return exc.code, payload.decode("utf-8", "replace")
