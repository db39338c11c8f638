"""What ``graphstrata serve`` is started with: indexes, transport, tokens and limits.

Nothing here imports the MCP SDK, so ``graphstrata --help`` and the argument checks work
without the ``serve`` extra.

Tokens (HTTP only; a stdio server talks to the one process that started it) come from a JSON
file named by ``--token FILE`` and/or from the ``GRAPHSTRATA_TOKENS`` environment variable
holding the same JSON, never from a command-line value (command lines end up in process lists
and logs)::

    {"tokens": [
      {"name": "tenant-a", "token": "a-long-random-secret", "read": ["a"], "write": ["a"]},
      {"name": "ops", "sha256": "<hex sha256 of the token>", "read": ["*"]}
    ]}

``read`` / ``write`` list index names (``"*"``: every index). A token may be given in clear
(``token``, at least :data:`MIN_TOKEN_CHARS` characters) or as the SHA-256 hex digest of its
UTF-8 bytes (``sha256``); only digests are kept in memory and they are compared in constant
time. ``write`` matters only with ``--allow-writes``.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import ipaddress
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ALL",
    "DEFAULT_MAX_CONCURRENT",
    "DEFAULT_MAX_K",
    "DEFAULT_MAX_REQUEST_BYTES",
    "MIN_TOKEN_CHARS",
    "TOKENS_ENV",
    "Principal",
    "ServeConfig",
    "TokenTable",
    "add_arguments",
    "config_from_args",
    "is_loopback",
    "parse_tokens",
]

TOKENS_ENV = "GRAPHSTRATA_TOKENS"
#: shortest token accepted in clear (a guessable token is no protection)
MIN_TOKEN_CHARS = 16
#: default bounds (``--max-k``, ``--max-request-bytes``, ``--max-concurrent``)
DEFAULT_MAX_K = 50
DEFAULT_MAX_REQUEST_BYTES = 1 << 20
DEFAULT_MAX_CONCURRENT = 8
ALL = "*"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Principal:
    """Who is calling: a token's name and the indexes it may read and write.

    Attributes:
        name: the token's ``name`` (``"local"`` for stdio and for a loopback HTTP server
            started without tokens); used in logs and as the key of the concurrency bound.
        read: index names it may read, or ``None`` for every index.
        write: index names it may change (``insert`` / ``delete``; only with
            ``--allow-writes``), or ``None`` for every index.
    """

    name: str
    read: frozenset[str] | None = None
    write: frozenset[str] | None = field(default_factory=frozenset)

    def can_read(self, index: str) -> bool:
        """Whether ``index`` is readable with this principal."""
        return self.read is None or index in self.read

    def can_write(self, index: str) -> bool:
        """Whether ``index`` is writable with this principal (``--allow-writes`` aside)."""
        return self.write is None or index in self.write


class TokenTable:
    """Bearer tokens and their scopes (see the module docstring for the JSON form).

    ``lookup(token)`` compares SHA-256 digests with :func:`hmac.compare_digest` against every
    entry, so the time taken does not depend on where a wrong token differs.
    """

    def __init__(self, entries: Sequence[tuple[bytes, Principal]] = ()) -> None:
        self._entries = list(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    @property
    def principals(self) -> list[Principal]:
        """The principals, in file order."""
        return [p for _, p in self._entries]

    def lookup(self, token: str) -> Principal | None:
        """The principal of ``token``, or ``None`` when it is not a known token."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found = None
        for known, principal in self._entries:
            if hmac.compare_digest(known, digest) and found is None:
                found = principal
        return found

    def extended(self, other: TokenTable) -> TokenTable:
        """This table followed by ``other``'s entries."""
        return TokenTable(self._entries + other._entries)


def _scope(value: Any, where: str, key: str) -> frozenset[str] | None:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: {key!r} must be a list of index names (or \"*\"), got {value!r}")
    if ALL in value:
        return None
    return frozenset(value)


def parse_tokens(text: str, source: str) -> TokenTable:
    """Parse the tokens JSON (see the module docstring).

    Args:
        text: the JSON: ``{"tokens": [...]}`` or the list itself.
        source: where it came from (``"--token FILE"``, ``"$GRAPHSTRATA_TOKENS"``), for messages;
            never the token itself.

    Returns:
        The table.

    Raises:
        ValueError: invalid JSON, an entry without ``token`` / ``sha256`` or with both, a clear
            token shorter than :data:`MIN_TOKEN_CHARS`, a malformed digest, a bad scope, a
            repeated token or name. Messages name the entry by position and ``name``, never
            the token.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, Mapping):
        data = data.get("tokens")
    if not isinstance(data, list) or not data:
        raise ValueError(f'{source}: expected {{"tokens": [{{"name", "token" or "sha256", "read", "write"}}, ...]}}')
    entries: list[tuple[bytes, Principal]] = []
    names: set[str] = set()
    for i, entry in enumerate(data):
        where = f"{source}: entry {i}"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: expected an object")
        unknown = sorted(set(entry) - {"name", "token", "sha256", "read", "write"})
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {unknown}")
        name = entry.get("name", f"token-{i}")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}: 'name' must be a non-empty string")
        where = f"{source}: entry {i} ({name})"
        if name in names:
            raise ValueError(f"{where}: the name is used twice")
        names.add(name)
        token, hexdigest = entry.get("token"), entry.get("sha256")
        if (token is None) == (hexdigest is None):
            raise ValueError(f"{where}: give exactly one of 'token' and 'sha256'")
        if token is not None:
            if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
                raise ValueError(f"{where}: a token must be a string of at least {MIN_TOKEN_CHARS} characters")
            digest = hashlib.sha256(token.encode("utf-8")).digest()
        else:
            if not isinstance(hexdigest, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", hexdigest):
                raise ValueError(f"{where}: 'sha256' must be 64 hex digits")
            digest = bytes.fromhex(hexdigest)
        if any(hmac.compare_digest(digest, d) for d, _ in entries):
            raise ValueError(f"{where}: the same token is listed twice")
        read = _scope(entry.get("read", [ALL]), where, "read")
        write = _scope(entry.get("write"), where, "write")
        entries.append((digest, Principal(name=name, read=read, write=write)))
    return TokenTable(entries)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` only accepts connections from this machine
    (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    h = host.strip("[]")
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


@dataclass
class ServeConfig:
    """A server's settings (what :func:`config_from_args` makes of the command line).

    Attributes:
        indexes: index name → persisted index directory, in the order given.
        transport: ``"stdio"`` or ``"http"`` (streamable HTTP, plus the plain JSON routes).
        host, port: where the HTTP transport listens.
        allow_writes: expose ``insert`` / ``delete``.
        tokens: bearer tokens (HTTP); empty = no authentication (loopback only).
        max_k: the largest ``k`` a request may ask for.
        max_request_bytes: the largest HTTP request body accepted (bytes).
        max_concurrent: requests one token (or the local caller) may have in flight at once.
        allowed_origins: browser ``Origin`` values accepted besides the loopback ones.
    """

    indexes: dict[str, Path]
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8765
    allow_writes: bool = False
    tokens: TokenTable = field(default_factory=TokenTable)
    max_k: int = DEFAULT_MAX_K
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    allowed_origins: tuple[str, ...] = ()

    def check(self) -> None:
        """Validate the settings as a whole.

        Raises:
            ValueError: no index; a bad index name; a token scoped to an index the server does
                not serve; a non-loopback ``host`` with no token; a bound ≤ 0; a bad port.
        """
        if not self.indexes:
            raise ValueError("serve needs at least one index: INDEX_DIR or --index NAME=DIR")
        for name in self.indexes:
            if not _NAME_RE.match(name):
                raise ValueError(
                    f"--index {name}=...: an index name is 1-64 letters, digits, '_', '-' or '.', "
                    "starting with a letter or digit"
                )
        for p in self.tokens.principals:
            for scope, names in (("read", p.read), ("write", p.write)):
                unknown = sorted(set(names or ()) - set(self.indexes))
                if unknown:
                    raise ValueError(
                        f"token {p.name!r}: {scope} names index(es) {unknown} this server does not "
                        f"serve (indexes: {', '.join(self.indexes)})"
                    )
        if self.transport not in ("stdio", "http"):
            raise ValueError(f"--transport must be stdio or http, got {self.transport!r}")
        if self.transport == "http" and not self.tokens and not is_loopback(self.host):
            raise ValueError(
                f"--host {self.host}: refusing to listen beyond this machine without a token; "
                f"give tokens with --token FILE or ${TOKENS_ENV}, or bind 127.0.0.1"
            )
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port must be in 0..65535, got {self.port}")
        for flag, value in (("--max-k", self.max_k), ("--max-request-bytes", self.max_request_bytes),
                            ("--max-concurrent", self.max_concurrent)):
            if value <= 0:
                raise ValueError(f"{flag} must be positive, got {value}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``graphstrata serve``'s arguments (all but ``--llm``, which the CLI adds) to ``p``."""
    p.add_argument("index_dirs", nargs="*", metavar="INDEX_DIR",
                   help="persisted index directories, each served under its folder name")
    p.add_argument("--index", action="append", default=[], metavar="NAME=DIR",
                   help="serve the index in DIR under NAME (repeatable)")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                   help="stdio (default: for an MCP client that starts the server) or http "
                   "(streamable HTTP MCP at /mcp, plus POST /v1/retrieve, /v1/answer and /openapi.json)")
    p.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1; another "
                   "address needs tokens)")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    p.add_argument("--allow-writes", action="store_true",
                   help="expose the insert and delete tools (for tokens with write scope)")
    p.add_argument("--token", default=None, metavar="FILE",
                   help=f"JSON file of bearer tokens and their index scopes (also ${TOKENS_ENV})")
    p.add_argument("--max-k", type=int, default=DEFAULT_MAX_K, help=f"largest k a request may ask (default {DEFAULT_MAX_K})")
    p.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES,
                   help=f"largest HTTP request body (default {DEFAULT_MAX_REQUEST_BYTES})")
    p.add_argument("--max-concurrent", type=int, default=DEFAULT_MAX_CONCURRENT,
                   help=f"requests in flight per token (default {DEFAULT_MAX_CONCURRENT})")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="browser Origin to accept besides http(s)://localhost / 127.0.0.1 / [::1] (repeatable)")


def _index_specs(dirs: Iterable[str], specs: Iterable[str]) -> dict[str, Path]:
    out: dict[str, Path] = {}

    def add(name: str, path: str, flag: str) -> None:
        if name in out:
            raise ValueError(f"{flag}: two indexes named {name!r}; name them with --index NAME=DIR")
        p = Path(path)
        if not p.is_dir():
            raise FileNotFoundError(f"{flag}: index directory not found: {p}")
        out[name] = p

    for d in dirs:
        add(Path(d).resolve().name, d, d)
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--index {spec}: expected NAME=DIR")
        add(name, path, f"--index {spec}")
    return out


def config_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ServeConfig:
    """A checked :class:`ServeConfig` from parsed arguments and the environment.

    Raises:
        ValueError: as :meth:`ServeConfig.check`, or a token file / variable that does not parse.
        FileNotFoundError: an index directory or the ``--token`` file does not exist.
    """
    env = os.environ if environ is None else environ
    tokens = TokenTable()
    if args.token:
        path = Path(args.token)
        if not path.is_file():
            raise FileNotFoundError(f"--token {args.token}: no such file")
        tokens = tokens.extended(parse_tokens(path.read_text(encoding="utf-8"), f"--token {args.token}"))
    if env.get(TOKENS_ENV, "").strip():
        tokens = tokens.extended(parse_tokens(env[TOKENS_ENV], f"${TOKENS_ENV}"))
    config = ServeConfig(
        indexes=_index_specs(args.index_dirs, args.index),
        transport=args.transport,
        host=args.host,
        port=args.port,
        allow_writes=args.allow_writes,
        tokens=tokens,
        max_k=args.max_k,
        max_request_bytes=args.max_request_bytes,
        max_concurrent=args.max_concurrent,
        allowed_origins=tuple(args.allow_origin),
    )
    config.check()
    return config
