"""Persistence: one directory per index, written atomically.

Layout of a persisted index::

    graphstrata.sqlite   documents, chunks, entities, relations, communities, metadata
    vectors.npz          float32 vectors: chunks (n_c, d), entities (n_e, d), layer_<i> (n_i, d)
    layers.chnsw         C-HNSW over entities (layer 0) and community layers 1..L
    chunks.chnsw         C-HNSW over chunk vectors (one layer)
    manifest.json        format, schema version, embedder id/dim, counts, bytes + sha256 per file

:func:`write_index_dir` writes everything into a fresh sibling directory and swaps it into
place with renames, so a crash or an exception during a write never leaves a half-written
index at the target path, and an existing index stays untouched until the new one is complete.
:func:`read_manifest` verifies every file's size and checksum before anything is loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .types import Chunk, Community, Document, Entity, Relation

SCHEMA_VERSION = 1
FORMAT = "graphstrata-index"
MANIFEST = "manifest.json"
SQLITE = "graphstrata.sqlite"

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents (pos INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, text TEXT NOT NULL,
                        metadata TEXT NOT NULL);
CREATE TABLE chunks (pos INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, document_id TEXT NOT NULL,
                     idx INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
                     n_tokens INTEGER NOT NULL, text TEXT NOT NULL);
CREATE TABLE entities (pos INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, name TEXT NOT NULL,
                       description TEXT NOT NULL, chunk_ids TEXT NOT NULL, weight REAL NOT NULL);
CREATE TABLE relations (pos INTEGER PRIMARY KEY, source TEXT NOT NULL, target TEXT NOT NULL,
                        description TEXT NOT NULL, weight REAL NOT NULL, chunk_ids TEXT NOT NULL);
CREATE TABLE communities (pos INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, layer INTEGER NOT NULL,
                          members TEXT NOT NULL, entity_ids TEXT NOT NULL, title TEXT NOT NULL,
                          summary TEXT NOT NULL, chunk_ids TEXT NOT NULL);
"""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_sqlite(
    path: Path,
    meta: dict[str, Any],
    documents: list[Document],
    chunks: list[Chunk],
    entities: list[Entity],
    relations: list[Relation],
    communities: list[Community],
) -> None:
    """Write all records into a new SQLite file at ``path`` (must not exist)."""
    con = sqlite3.connect(path)
    try:
        con.executescript(_SCHEMA)
        con.executemany(
            "INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()]
        )
        con.executemany(
            "INSERT INTO documents VALUES (?, ?, ?, ?)",
            [(i, d.id, d.text, json.dumps(d.metadata, default=str)) for i, d in enumerate(documents)],
        )
        con.executemany(
            "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (i, c.id, c.document_id, c.index, c.start, c.end, c.n_tokens, c.text)
                for i, c in enumerate(chunks)
            ],
        )
        con.executemany(
            "INSERT INTO entities VALUES (?, ?, ?, ?, ?, ?)",
            [
                (i, e.id, e.name, e.description, json.dumps(e.chunk_ids), e.weight)
                for i, e in enumerate(entities)
            ],
        )
        con.executemany(
            "INSERT INTO relations VALUES (?, ?, ?, ?, ?, ?)",
            [
                (i, r.source, r.target, r.description, r.weight, json.dumps(r.chunk_ids))
                for i, r in enumerate(relations)
            ],
        )
        con.executemany(
            "INSERT INTO communities VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    i,
                    c.id,
                    c.layer,
                    json.dumps(c.members),
                    json.dumps(c.entity_ids),
                    c.title,
                    c.summary,
                    json.dumps(c.chunk_ids),
                )
                for i, c in enumerate(communities)
            ],
        )
        con.commit()
    finally:
        con.close()


def read_sqlite(path: Path) -> dict[str, Any]:
    """Read every table of an index's SQLite file.

    Returns:
        ``{"meta": dict, "documents": [...], "chunks": [...], "entities": [...],
        "relations": [...], "communities": [...]}`` with records in stored order.

    Raises:
        ValueError: the file is not a readable graphstrata database.
    """
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ValueError(f"cannot open index database {path}: {exc}") from exc
    try:
        q = con.execute
        meta = {k: json.loads(v) for k, v in q("SELECT key, value FROM meta")}
        documents = [
            Document(id=i, text=t, metadata=json.loads(m))
            for i, t, m in q("SELECT id, text, metadata FROM documents ORDER BY pos")
        ]
        chunks = [
            Chunk(id=i, document_id=d, index=x, text=t, start=s, end=e, n_tokens=n)
            for i, d, x, s, e, n, t in q(
                "SELECT id, document_id, idx, start, end, n_tokens, text FROM chunks ORDER BY pos"
            )
        ]
        entities = [
            Entity(id=i, name=n, description=d, chunk_ids=json.loads(c), weight=w)
            for i, n, d, c, w in q(
                "SELECT id, name, description, chunk_ids, weight FROM entities ORDER BY pos"
            )
        ]
        relations = [
            Relation(source=s, target=t, description=d, weight=w, chunk_ids=json.loads(c))
            for s, t, d, w, c in q(
                "SELECT source, target, description, weight, chunk_ids FROM relations ORDER BY pos"
            )
        ]
        communities = [
            Community(
                id=i,
                layer=layer,
                members=json.loads(m),
                entity_ids=json.loads(e),
                title=t,
                summary=s,
                chunk_ids=json.loads(c),
            )
            for i, layer, m, e, t, s, c in q(
                "SELECT id, layer, members, entity_ids, title, summary, chunk_ids "
                "FROM communities ORDER BY pos"
            )
        ]
    except (sqlite3.Error, json.JSONDecodeError) as exc:
        raise ValueError(f"corrupt index database {path}: {exc}") from exc
    finally:
        con.close()
    return {
        "meta": meta,
        "documents": documents,
        "chunks": chunks,
        "entities": entities,
        "relations": relations,
        "communities": communities,
    }


def write_index_dir(
    target: str | os.PathLike, write_files: Callable[[Path], dict[str, Any]]
) -> Path:
    """Write an index directory atomically.

    Args:
        target: final directory path. Its parent is created if needed. An existing directory
            there must be a graphstrata index (it is replaced) or empty; anything else raises.
        write_files: ``write_files(tmp_dir) -> manifest_extra``: writes the payload files into
            ``tmp_dir`` and returns extra manifest fields (embedder, counts, ...).

    Returns:
        The target path.

    Raises:
        FileExistsError: ``target`` exists and is a file, or a non-empty directory that is not
            a graphstrata index.
        Exception: whatever ``write_files`` raises; the target is then left untouched.
    """
    target = Path(target).resolve()
    if target.exists():
        if not target.is_dir():
            raise FileExistsError(f"{target} exists and is not a directory")
        if any(target.iterdir()) and not (target / MANIFEST).exists():
            raise FileExistsError(
                f"{target} is a non-empty directory that is not a graphstrata index; "
                "refusing to overwrite it"
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        extra = write_files(tmp)
        files = {}
        for p in sorted(tmp.iterdir()):
            files[p.name] = {"bytes": p.stat().st_size, "sha256": _sha256(p)}
        manifest = {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "files": files,
            **extra,
        }
        with open(tmp / MANIFEST, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        old = None
        if target.exists():
            old = target.parent / f".{target.name}.old-{os.getpid()}-{time.time_ns()}"
            os.rename(target, old)
        os.rename(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def read_manifest(directory: str | os.PathLike, verify: bool = True) -> dict[str, Any]:
    """Read and check ``manifest.json`` of an index directory.

    Args:
        directory: the index directory.
        verify: check every listed file's size and sha256.

    Returns:
        The manifest dict.

    Raises:
        FileNotFoundError: the directory does not exist.
        ValueError: no/unreadable manifest, another format, a newer schema, or a missing,
            truncated or corrupted file (the message names the file).
    """
    d = Path(directory)
    if not d.is_dir():
        raise FileNotFoundError(f"index directory not found: {d}")
    mpath = d / MANIFEST
    if not mpath.is_file():
        raise ValueError(f"{d} is not a graphstrata index: {MANIFEST} is missing")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"corrupt {MANIFEST} in {d}: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{d} is not a graphstrata index (format {manifest.get('format')!r})")
    version = manifest.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ValueError(
            f"index schema version {version!r} is not supported by this graphstrata "
            f"(supports ≤ {SCHEMA_VERSION}); upgrade graphstrata"
        )
    if verify:
        for name, info in manifest.get("files", {}).items():
            p = d / name
            if not p.is_file():
                raise ValueError(f"corrupt index {d}: file {name} is missing")
            if p.stat().st_size != info.get("bytes"):
                raise ValueError(
                    f"corrupt index {d}: {name} has {p.stat().st_size} bytes, "
                    f"manifest says {info.get('bytes')}"
                )
            if _sha256(p) != info.get("sha256"):
                raise ValueError(f"corrupt index {d}: checksum mismatch in {name}")
    return manifest
