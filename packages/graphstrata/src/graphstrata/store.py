"""Persistence: one directory per index, versions switched atomically.

Layout of a persisted index (schema 6; 1 to 5 still load)::

    DIR/CURRENT              one line: the name of the complete version readers open
    DIR/v000007/             one complete version, never modified once CURRENT names it:
        graphstrata.sqlite   documents, chunks, entities, relations, communities, metadata;
                             per-chunk extraction records (zlib JSON) and the frozen TF-IDF statistics
                             incremental updates reuse (schema 4), drift counters in metadata;
                             an LLM-extracted index's per-chunk LLM answers and description
                             summaries (tables llm_records, llm_summaries: optional in schema 6,
                             an index without them updates through its response cache); the
                             other build-time LLM stages' answers (community reports, HiRAG
                             summaries and reports: tables llm_answers, llm_answer_owners,
                             optional in schema 6 too)
        labels.npz           int64 "labels:<name>" (n,) for chunks, entities, layer_<i>: each
                             row's node id in the C-HNSW files
        bm25.npz             the BM25 score matrix (schema 6; BM25Index.to_arrays): a load
                             neither tokenises nor indexes a chunk
        derived.npz          the derived structures methods read (schema 6, optional;
                             graphstrata.derived.encode): built at index time, so the first
                             query after a load builds nothing
        layers.chnsw         C-HNSW over entities (layer 0) and community layers 1..L
        chunks.chnsw         C-HNSW over chunk vectors (one layer)
        manifest.json        format, schema version, embedder id/dim, counts, bytes + sha256 per file
    DIR/.lock                advisory lock (flock) held by the one writer at a time

A write (:func:`write_version`) fills a hidden ``.tmp-*`` directory, fsyncs every file and the
directory, renames it to the next ``vNNNNNN`` and fsyncs ``DIR``; only then does it replace
``CURRENT`` (write a temporary file, fsync, ``os.replace``, fsync ``DIR``). That replace is the
one atomic step that switches versions: a process killed at any instruction leaves ``CURRENT``
naming either the old or the new complete version. Right after the switch the writer removes
every other version (a delete's text must not survive in the version before it), except one
that a reader in another process is loading at that moment: readers hold a shared flock on the
version directory they read, and the last reader of a superseded version removes it when its
load ends. Leftovers of interrupted writes are removed by the next writer, or by a loader that
can take the lock.

Writers hold the directory's write lock (:func:`write_lock`, ``DIR/.lock``) from reading the
base version to switching ``CURRENT`` (the facade reloads the base under the lock when another
process wrote since), so two processes writing one index never lose a write; a writer that
waits longer than :func:`write_timeout` gets :class:`ConcurrentWriteError`.

Readers (:func:`open_version`) resolve ``CURRENT`` once, read that version's files only, and
start over if the version vanished under them (a writer pruned it), so a load returns one whole
version or a clear error. Schema 1 indexes (the files directly in ``DIR``, written by
graphstrata 0.1 before versioning) still load, and the next persist converts them.

:func:`read_manifest` validates ``manifest.json`` with a strict schema (:class:`Manifest`:
known file names only, schema version in range) and verifies every file's size and checksum
before anything is parsed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .llm.cache import CACHE_FILE
from .llm.records import LLMAnswers, LLMRecord
from .state import ChunkRecords, FrozenStats
from .types import Chunk, Community, Document, DocumentChunk, Entity, Relation

if TYPE_CHECKING:  # pragma: no cover
    from .config import GraphStrataConfig
    from .models import Embedder
    from .state import EngineState

try:  # POSIX advisory locks; elsewhere one writer per index is the caller's business
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

SCHEMA_VERSION = 6
MIN_SCHEMA_VERSION = 1
"""Indexes of schema 1 to 5 (graphstrata up to issue 32) load as they are (schema ≤ 5: BM25 is
rebuilt from the chunk texts and derived structures on first use); a schema below
:data:`MIN_SCHEMA_VERSION` fails with "rebuild: index format N is older than M"."""
FORMAT = "graphstrata-index"
MANIFEST = "manifest.json"
SQLITE = "graphstrata.sqlite"
VECTORS = "vectors.npz"  # schema ≤ 4: every vector a second time beside the C-HNSW files
LABELS = "labels.npz"  # schema 5: only the row → node id maps; vectors live in the .chnsw files
LAYERS = "layers.chnsw"
CHUNKS = "chunks.chnsw"
BM25 = "bm25.npz"  # schema 6: BM25Index.to_arrays()
DERIVED = "derived.npz"  # schema 6: graphstrata.derived.encode(state), when there is any
CURRENT = "CURRENT"
LOCK = ".lock"
#: the only payload files an index version may hold (besides manifest.json)
INDEX_FILES = frozenset({SQLITE, VECTORS, LABELS, LAYERS, CHUNKS, BM25, DERIVED})
#: payload files first written by a schema; a manifest of an older schema may not list them
FILES_SINCE = {BM25: 6, DERIVED: 6}
REQUIRED_FILES = frozenset({SQLITE, CHUNKS})
ROW_FILES = (LABELS, VECTORS)  # one of them: labels.npz (schema 5) or vectors.npz (schema ≤ 4)
_VERSION_RE = re.compile(r"^v(\d{6,12})$")
_TMP_PREFIX = ".tmp-"
_CURRENT_TMP = ".CURRENT.tmp-"
LABELS_PREFIX = "labels:"  # npz arrays of native ids per row (schema ≥ 4), not vectors
KEEP_VERSIONS = 1
"""Versions kept on disk besides those a reader has open: only the current one. A superseded
version (which may hold text a delete removed) is removed by the writer that superseded it,
or, while a reader in another process still reads it, by the last such reader when it is done
(:func:`open_version`): the window is the length of that load."""
WRITE_LOCK_TIMEOUT = 600.0
"""Seconds a writer waits for the index's write lock (another process or instance writing)
before :class:`ConcurrentWriteError`; ``$GRAPHSTRATA_WRITE_TIMEOUT`` overrides it."""


class ConcurrentWriteError(TimeoutError):
    """Another writer (process, thread or instance) held an index directory's write lock for
    longer than the timeout (:func:`write_timeout`). Nothing was written; the write can be
    retried."""

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents (pos INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, text TEXT NOT NULL,
                        metadata TEXT NOT NULL);
CREATE TABLE chunks (pos INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, document_id TEXT NOT NULL,
                     idx INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
                     n_tokens INTEGER NOT NULL, text TEXT NOT NULL);
CREATE TABLE entities (pos INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, name TEXT NOT NULL,
                       description TEXT NOT NULL, chunk_ids TEXT NOT NULL, weight REAL NOT NULL,
                       type TEXT NOT NULL DEFAULT '', aliases TEXT NOT NULL DEFAULT '[]');
CREATE TABLE relations (pos INTEGER PRIMARY KEY, source TEXT NOT NULL, target TEXT NOT NULL,
                        description TEXT NOT NULL, weight REAL NOT NULL, chunk_ids TEXT NOT NULL,
                        keywords TEXT NOT NULL DEFAULT '');
CREATE TABLE communities (pos INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, layer INTEGER NOT NULL,
                          members TEXT NOT NULL, entity_ids TEXT NOT NULL, title TEXT NOT NULL,
                          summary TEXT NOT NULL, chunk_ids TEXT NOT NULL,
                          rating REAL, findings TEXT NOT NULL DEFAULT '[]');
CREATE TABLE chunk_records (chunk_id TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE frozen_stats (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE llm_records (chunk_id TEXT PRIMARY KEY, key TEXT NOT NULL, answers BLOB NOT NULL);
CREATE TABLE llm_summaries (key TEXT PRIMARY KEY, summary TEXT NOT NULL);
CREATE TABLE llm_answers (key TEXT PRIMARY KEY, answer BLOB NOT NULL);
CREATE TABLE llm_answer_owners (owner TEXT PRIMARY KEY, key TEXT NOT NULL);
"""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _checkpoint(label: str) -> None:
    """Called between the file operations of a write; does nothing.

    Crash tests replace it (in a child process) to kill the process at every step of
    :func:`write_version` in turn.
    """


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def write_sqlite(
    path: Path,
    meta: dict[str, Any],
    documents: list[Document],
    chunks: list[Chunk],
    entities: list[Entity],
    relations: list[Relation],
    communities: list[Community],
    chunk_records: Any = None,
    frozen: Any = None,
    llm_answers: LLMAnswers | None = None,
) -> None:
    """Write all records into a new SQLite file at ``path`` (must not exist).

    ``chunk_records`` (``{chunk_id: ChunkRecord}`` or :class:`~graphstrata.state.ChunkRecords`,
    schema 4), ``frozen`` (``{name: FrozenTfidf}`` or :class:`~graphstrata.state.FrozenStats`)
    and ``llm_answers`` (:class:`~graphstrata.llm.records.LLMAnswers`: tables ``llm_records``,
    ``llm_summaries``, and the other build-time stages' answers in ``llm_answers`` and
    ``llm_answer_owners``) are what incremental updates need (:mod:`graphstrata.indexing.update`);
    compressed ones are written as they are held.

    Raises:
        ValueError: a record SQLite cannot store (e.g. a lone surrogate in a text), named.
    """
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
            "INSERT INTO entities VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (i, e.id, e.name, e.description, _ids_json(e.chunk_ids), e.weight, e.type,
                 _ids_json(e.aliases) if e.aliases else "[]")
                for i, e in enumerate(entities)
            ),
        )
        con.executemany(
            "INSERT INTO relations VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                (i, r.source, r.target, r.description, r.weight, _ids_json(r.chunk_ids), r.keywords)
                for i, r in enumerate(relations)
            ),
        )
        con.executemany(
            "INSERT INTO communities VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    i,
                    c.id,
                    c.layer,
                    _ids_json(c.members),
                    _ids_json(c.entity_ids),
                    c.title,
                    c.summary,
                    _ids_json(c.chunk_ids),
                    c.rating,
                    json.dumps(c.findings),
                )
                for i, c in enumerate(communities)
            ),
        )
        if chunk_records:
            # zlib level 1 (schema 5): records repeat their sentences, 17× smaller on MuSiQue; a
            # state's ChunkRecords already hold exactly these bytes
            recs = ChunkRecords.from_records(chunk_records)
            con.executemany("INSERT INTO chunk_records VALUES (?, ?)", ((cid, recs.raw(cid)) for cid in recs))
        if frozen:
            stats = FrozenStats.from_models(frozen)
            con.executemany("INSERT INTO frozen_stats VALUES (?, ?)", ((n, stats.text(n)) for n in stats))
        if llm_answers is not None:
            con.executemany(
                "INSERT INTO llm_records VALUES (?, ?, ?)",
                ((cid, r.key, r.packed) for cid, r in llm_answers.records.items()),
            )
            con.executemany("INSERT INTO llm_summaries VALUES (?, ?)", llm_answers.summaries.items())
            con.executemany(
                "INSERT INTO llm_answers VALUES (?, ?)", ((k, r.packed) for k, r in llm_answers.stages.items())
            )
            con.executemany("INSERT INTO llm_answer_owners VALUES (?, ?)", llm_answers.owners.items())
        con.commit()
    except (sqlite3.Error, UnicodeEncodeError, ValueError, OverflowError, TypeError) as exc:
        raise ValueError(f"cannot store the index records: {exc}") from exc
    finally:
        con.close()


def read_sqlite(path: Path) -> dict[str, Any]:
    """Read every table of an index's SQLite file.

    Returns:
        ``{"meta": dict, "documents": [...], "chunks": [...], "entities": [...],
        "relations": [...], "communities": [...], "chunk_records": {chunk_id: bytes | str},
        "frozen": {name: JSON text}, "llm_records": [(chunk_id, key, answers), ...],
        "llm_summaries": {key: summary}, "llm_answers": [(key, answer), ...],
        "llm_answer_owners": [(community_id, key), ...]}`` with records in stored order; extraction records,
        frozen statistics and LLM answers as stored (not decoded: only updates read them;
        the LLM tables are empty for an index written without them).

    Raises:
        ValueError: the file is not a readable graphstrata database.
    """
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ValueError(f"cannot open index database {path}: {exc}") from exc
    try:
        q = con.execute

        def cols(table: str, *names: str) -> str:
            # columns added in schema 3 read as their defaults from older files
            have = {row[1] for row in q(f"PRAGMA table_info({table})")}
            defaults = {"type": "''", "aliases": "'[]'", "keywords": "''", "rating": "NULL", "findings": "'[]'"}
            return ", ".join(n if n in have else f"{defaults[n]} AS {n}" for n in names)

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
        # one str object per id: lists of ids name the chunks' / entities' own id strings
        # (a 44k-chunk index names chunks ~1.5M times), and each document id is shared
        by_id = {d.id: d for d in documents}
        for i, c in enumerate(chunks):
            doc = by_id.get(c.document_id)
            if doc is not None:  # the text is read from the document (once in memory)
                c.document_id = doc.id
                chunks[i] = DocumentChunk.of(c, doc)
        chunk_ids = {c.id: c.id for c in chunks}
        numbers: dict[float, float] = {}  # weights are counts: a few hundred distinct values
        # one str object per distinct description: an offline relation's is the sentence its
        # entities share, often an entity's own (half of them repeat: ~0.5 kB a chunk)
        texts: dict[str, str] = {}
        entities = [
            Entity(
                id=i, name=i if n == i else n, description=texts.setdefault(d, d), chunk_ids=_id_list(c, chunk_ids),
                weight=numbers.setdefault(w, w), type=ty, aliases=tuple(json.loads(al)) if al != "[]" else (),
            )
            for i, n, d, c, w, ty, al in q(
                f"SELECT id, name, description, chunk_ids, weight, {cols('entities', 'type', 'aliases')} "
                "FROM entities ORDER BY pos"
            )
        ]
        node_ids = {e.id: e.id for e in entities}
        relations = [
            Relation(
                source=node_ids.get(s, s), target=node_ids.get(t, t), description=texts.setdefault(d, d),
                weight=numbers.setdefault(w, w),
                chunk_ids=_id_list(c, chunk_ids), keywords=kw,
            )
            for s, t, d, w, c, kw in q(
                f"SELECT source, target, description, weight, chunk_ids, {cols('relations', 'keywords')} "
                "FROM relations ORDER BY pos"
            )
        ]
        communities = []
        for i, layer, m, e, t, s_, c, rating, f in q(
            "SELECT id, layer, members, entity_ids, title, summary, chunk_ids, "
            f"{cols('communities', 'rating', 'findings')} FROM communities ORDER BY pos"
        ):
            communities.append(Community(
                id=i, layer=layer, members=_id_list(m, node_ids), entity_ids=_id_list(e, node_ids),
                title=t, summary=s_, chunk_ids=_id_list(c, chunk_ids), rating=rating,
                findings=_json(f) if f != "[]" else [],
            ))
            node_ids[i] = i
        del texts
        tables = {row[0] for row in q("SELECT name FROM sqlite_master WHERE type = 'table'")}
        chunk_records = (
            dict(q("SELECT chunk_id, record FROM chunk_records")) if "chunk_records" in tables else {}
        )
        frozen = dict(q("SELECT name, value FROM frozen_stats")) if "frozen_stats" in tables else {}
        llm_records = list(q("SELECT chunk_id, key, answers FROM llm_records")) if "llm_records" in tables else []
        llm_summaries = dict(q("SELECT key, summary FROM llm_summaries")) if "llm_summaries" in tables else {}
        llm_stage_answers = list(q("SELECT key, answer FROM llm_answers")) if "llm_answers" in tables else []
        llm_owners = list(q("SELECT owner, key FROM llm_answer_owners")) if "llm_answer_owners" in tables else []
    except (sqlite3.Error, json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"corrupt index database {path}: {exc}") from exc
    finally:
        con.close()
    return {
        "chunk_records": chunk_records,
        "frozen": frozen,
        "llm_records": llm_records,
        "llm_summaries": llm_summaries,
        "llm_answers": llm_stage_answers,
        "llm_answer_owners": llm_owners,
        "meta": meta,
        "documents": documents,
        "chunks": chunks,
        "entities": entities,
        "relations": relations,
        "communities": communities,
    }




_DECODE = json.JSONDecoder().raw_decode
_ESCAPE = json.encoder.encode_basestring_ascii  # what json.dumps applies to a str (ensure_ascii)


def _ids_json(ids: list[Any]) -> str:
    """``json.dumps(ids)`` for a list of ids: the same text, each ``str`` escaped by the C
    function ``json.dumps`` itself uses, without its per-call Python overhead (a write encodes
    ~8 id lists per chunk)."""
    try:
        return "[" + ", ".join(map(_ESCAPE, ids)) + "]"
    except TypeError:  # not all str
        return json.dumps(ids)


def _json(text: str) -> Any:
    """``json.loads(text)`` for the texts ``json.dumps`` wrote (no surrounding whitespace),
    without its per-call overhead (a load parses ~8 id lists per chunk).

    Raises:
        json.JSONDecodeError: not one JSON value.
    """
    value, end = _DECODE(text)
    if end != len(text) and text[end:].strip():
        raise json.JSONDecodeError("extra data", text, end)
    return value


def _id_list(text: str, canonical: dict[str, str]) -> list[str]:
    """A stored JSON list of ids, each replaced by the canonical ``str`` object of that id
    when there is one (unknown ids are kept: :func:`~graphstrata.state.check_integrity`
    names them).

    Raises:
        json.JSONDecodeError, TypeError: not a JSON list of strings.
    """
    ids = _json(text)
    if not isinstance(ids, list):
        raise TypeError(f"expected a JSON list of ids, got {text[:40]!r}")
    get = canonical.get
    return [get(x, x) for x in ids]


# -- manifest ---------------------------------------------------------------------------------


class FileEntry(BaseModel):
    """One payload file of a version: its size in bytes and sha256 hex digest."""

    model_config = ConfigDict(extra="forbid", strict=True)

    bytes: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class EmbedderInfo(BaseModel):
    """The embedder an index was built with (its vectors are only comparable with its own)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(min_length=1)
    dim: int = Field(gt=0)


class Manifest(BaseModel):
    """``manifest.json`` of one index version (strict: no coercion, unknown keys refused).

    Raises (on validation):
        pydantic.ValidationError: another format, a schema version outside
            ``[MIN_SCHEMA_VERSION, SCHEMA_VERSION]`` (bools are not versions), a file name that
            is not one of :data:`INDEX_FILES`, a required file not listed, a malformed entry.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    format: Literal["graphstrata-index"]
    schema_version: int = Field(ge=MIN_SCHEMA_VERSION, le=SCHEMA_VERSION)
    created: str
    files: dict[str, FileEntry]
    embedder: EmbedderInfo
    counts: dict[str, Any] = Field(default_factory=dict)
    generation: int = Field(0, ge=0)
    llm: dict[str, Any] | None = None  # {"id", "usage"}: the LLM the records were built with
    build_seconds: dict[str, float] = Field(default_factory=dict)

    @field_validator("files")
    @classmethod
    def _known_files(cls, files: dict[str, FileEntry]) -> dict[str, FileEntry]:
        unknown = sorted(set(files) - INDEX_FILES)
        if unknown:
            raise ValueError(f"names files that are not index files: {unknown}")
        missing = sorted(REQUIRED_FILES - set(files))
        if not any(name in files for name in ROW_FILES):
            missing.append(" or ".join(ROW_FILES))
        if missing:
            raise ValueError(f"does not list required files {missing}")
        return files

    @model_validator(mode="after")
    def _files_of_the_schema(self) -> Manifest:
        early = sorted(n for n in self.files if FILES_SINCE.get(n, 0) > self.schema_version)
        if early:
            raise ValueError(f"files: schema {self.schema_version} has no {early}")
        return self


def _manifest_error(d: Path, exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "manifest"
    return f"invalid {MANIFEST} in {d}: {where}: {first.get('msg')}"


# -- versions ---------------------------------------------------------------------------------


def _version_number(name: str) -> int | None:
    m = _VERSION_RE.match(name)
    return int(m.group(1)) if m else None


def _read_current(directory: Path) -> str | None:
    """The version name ``CURRENT`` holds (validated), or ``None`` when there is no pointer.

    Raises:
        ValueError: ``CURRENT`` is unreadable or does not name a version directory.
    """
    p = directory / CURRENT
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"corrupt index {directory}: cannot read {CURRENT} ({exc})") from exc
    name = raw.decode("ascii", errors="replace").strip()
    if _version_number(name) is None:
        raise ValueError(f"corrupt index {directory}: {CURRENT} does not name a version ({raw[:40]!r})")
    return name


def version_dir(directory: str | os.PathLike) -> Path:
    """The directory holding the files of the version ``directory`` currently points to.

    Schema 2: ``directory / <CURRENT>``; schema 1 (files directly in ``directory``): itself.

    Raises:
        FileNotFoundError: ``directory`` does not exist.
        ValueError: not an index (no ``CURRENT`` and no ``manifest.json``), or ``CURRENT``
            is corrupt or names a missing version.
    """
    d = Path(directory)
    if not d.is_dir():
        raise FileNotFoundError(f"index directory not found: {d}")
    name = _read_current(d)
    if name is None:
        if (d / MANIFEST).is_file():
            return d
        raise ValueError(
            f"{d} is not a graphstrata index: no {CURRENT} pointer and no {MANIFEST}"
            + (" (an interrupted first persist left only temporary files)" if _is_ours(d) and any(d.iterdir()) else "")
        )
    vdir = d / name
    if not vdir.is_dir():
        raise ValueError(f"corrupt index {d}: {CURRENT} names {name}, which is missing")
    return vdir


def _is_ours(d: Path) -> bool:
    """Every entry of ``d`` is something an index directory holds (or a write left behind)."""
    for p in d.iterdir():
        n = p.name
        if n in (CURRENT, MANIFEST, LOCK) or n in INDEX_FILES or _version_number(n) is not None:
            continue
        if n.startswith(CACHE_FILE):  # the LLM response cache (+ its -wal / -shm files)
            continue
        if n.startswith((_TMP_PREFIX, _CURRENT_TMP)):
            continue
        return False
    return True


class _WriterLock:
    """Exclusive advisory lock on ``DIR/.lock`` (blocking, or a non-blocking try)."""

    def __init__(self, directory: Path, blocking: bool = True) -> None:
        self.path = directory / LOCK
        self.blocking = blocking
        self.fd: int | None = None

    def __enter__(self) -> bool:
        if fcntl is None:  # pragma: no cover
            return True
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            if self.blocking:
                raise
            return False  # read-only directory: a reader cannot clean up, and need not
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if self.blocking else fcntl.LOCK_NB))
        except OSError:
            os.close(self.fd)
            self.fd = None
            if self.blocking:
                raise
            return False
        return True

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


class _HeldLock:
    """This process's hold on one directory's write lock: a thread lock (other threads and
    instances of this process wait on it) and the flock'ed file (other processes wait on it),
    re-entrant for the owning thread."""

    def __init__(self) -> None:
        self.thread_lock = threading.RLock()
        self.fd: int | None = None
        self.depth = 0


_HELD: dict[Path, _HeldLock] = {}
_HELD_GUARD = threading.Lock()


def _lock_holder(path: Path) -> str:
    try:
        pid = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return "another process"
    return f"process {pid}" if pid.isdigit() else "another process"


def write_timeout() -> float:
    """``$GRAPHSTRATA_WRITE_TIMEOUT`` (seconds) when set, else :data:`WRITE_LOCK_TIMEOUT`.

    Raises:
        ValueError: the variable is not a non-negative number.
    """
    raw = os.environ.get("GRAPHSTRATA_WRITE_TIMEOUT", "").strip()
    if not raw:
        return WRITE_LOCK_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ValueError(f"$GRAPHSTRATA_WRITE_TIMEOUT must be a non-negative number of seconds, got {raw!r}")
    return value


@contextmanager
def write_lock(directory: str | os.PathLike, timeout: float | None = None) -> Iterator[Path]:
    """Hold the exclusive write lock of an index directory (``DIR/.lock``, flock) across
    processes, threads and :class:`~graphstrata.GraphStrata` instances; re-entrant within a
    thread. The facade holds it from reading the base version to switching ``CURRENT``, so
    load → change → write of two writers never interleave.

    Args:
        directory: the index directory (created if missing).
        timeout: seconds to wait (``None``: :func:`write_timeout`).

    Yields:
        The resolved directory.

    Raises:
        ConcurrentWriteError: the lock was not free within ``timeout`` (the message names the
            lock file and the holder's pid).
        OSError: the lock file cannot be created (read-only directory).
    """
    d = Path(directory).resolve()
    d.mkdir(parents=True, exist_ok=True)
    wait = write_timeout() if timeout is None else float(timeout)
    deadline = time.monotonic() + wait
    with _HELD_GUARD:
        held = _HELD.setdefault(d, _HeldLock())
    lock_path = d / LOCK
    if not held.thread_lock.acquire(timeout=max(wait, 0.0)):
        raise ConcurrentWriteError(
            f"index {d} is being written by another thread of this process (lock {lock_path}); "
            f"gave up after {wait:g} s"
        )
    try:
        if held.depth == 0 and fcntl is not None:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            delay = 0.005
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        os.close(fd)
                        raise ConcurrentWriteError(
                            f"index {d} is being written by {_lock_holder(lock_path)} (lock {lock_path}); "
                            f"gave up after {wait:g} s ($GRAPHSTRATA_WRITE_TIMEOUT)"
                        ) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.1)
                except BaseException:
                    os.close(fd)
                    raise
            try:  # who holds it, for the message of a writer that times out
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
            except OSError:  # pragma: no cover - informative only
                pass
            held.fd = fd
        held.depth += 1
        try:
            yield d
        finally:
            held.depth -= 1
            if held.depth == 0 and held.fd is not None:
                fcntl.flock(held.fd, fcntl.LOCK_UN)
                os.close(held.fd)
                held.fd = None
    finally:
        held.thread_lock.release()


def current_version(directory: str | os.PathLike) -> str | None:
    """The version name ``DIR/CURRENT`` holds (``None``: no pointer, e.g. a schema-1 index or
    no index yet).

    Raises:
        ValueError: ``CURRENT`` is unreadable or names no version.
    """
    d = Path(directory)
    return _read_current(d) if d.is_dir() else None


def _remove_version(p: Path) -> bool:
    """Remove the version directory ``p`` unless a reader holds it (its shared flock,
    :func:`open_version`). Returns whether it is gone."""
    if fcntl is None or not p.is_dir() or p.is_symlink():  # pragma: no cover
        shutil.rmtree(p, ignore_errors=True)
        return not p.exists()
    try:
        fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return not p.exists()
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a reader is still loading it: it removes it when done
        shutil.rmtree(p, ignore_errors=True)
        return not p.exists()
    finally:
        os.close(fd)


def _cleanup(directory: Path) -> list[str]:
    """Remove what interrupted or superseded writes left (caller holds the writer lock).

    Removes ``.tmp-*`` directories, ``.CURRENT.tmp-*`` files, schema-1 files once ``CURRENT``
    exists, and every version but the current one (versions above it were never completed),
    except a version a reader in another process is loading right now (it holds the version
    directory's shared flock): that reader removes it when it is done. Returns the removed names.
    """
    removed = []
    current = _read_current(directory)
    cur_n = _version_number(current) if current else None
    versions = sorted(
        (n, p) for p in directory.iterdir() if (n := _version_number(p.name)) is not None
    )
    keep = set()
    if cur_n is not None:
        keep = {n for n, _ in versions if n <= cur_n}
        keep = set(sorted(keep)[-KEEP_VERSIONS:])
    for p in directory.iterdir():
        n = _version_number(p.name)
        stale = (
            p.name.startswith((_TMP_PREFIX, _CURRENT_TMP))
            or (n is not None and cur_n is not None and n not in keep)
            or (cur_n is not None and (p.name == MANIFEST or p.name in INDEX_FILES))
        )
        if stale:
            if n is not None:
                if _remove_version(p):
                    removed.append(p.name)
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                try:
                    p.unlink()
                except OSError:
                    continue
            removed.append(p.name)
    if removed:
        _fsync_dir(directory)
    return removed


def recover(directory: str | os.PathLike) -> list[str]:
    """Clean up after interrupted writes if no writer is active (non-blocking lock try).

    Also restores a schema-1 index that a crash of graphstrata 0.1's rename-aside persist left
    only as a hidden ``.<name>.old-*`` sibling, and removes that version's ``.<name>.tmp-*``
    siblings. Called by :meth:`GraphStrata.load`; safe to call at any time.

    Returns:
        The names removed or restored (empty when nothing was left, or a writer holds the lock).
    """
    d = Path(directory)
    done: list[str] = []
    parent = d.parent
    if parent.is_dir():
        old = sorted(parent.glob(f".{d.name}.old-*"))
        if not d.exists() and old and (old[-1] / MANIFEST).is_file():
            os.rename(old[-1], d)
            _fsync_dir(parent)
            done.append(old[-1].name)
            old = old[:-1]
        if d.is_dir():
            for p in [*old, *parent.glob(f".{d.name}.tmp-*")]:
                shutil.rmtree(p, ignore_errors=True)
                done.append(p.name)
    if d.is_dir() and (d / CURRENT).exists():
        with _WriterLock(d, blocking=False) as locked:
            if locked:
                done += _cleanup(d)
    return done


def check_target(target: str | os.PathLike) -> None:
    """Raise unless ``target`` may become (or already is) an index directory.

    Raises:
        FileExistsError: ``target`` is a file, or a non-empty directory that is not an index.
    """
    target = Path(target)
    if target.exists():
        if not target.is_dir():
            raise FileExistsError(f"{target} exists and is not a directory")
        if not ((target / CURRENT).exists() or (target / MANIFEST).exists() or _is_ours(target)):
            raise FileExistsError(
                f"{target} is a non-empty directory that is not a graphstrata index; "
                "refusing to overwrite it"
            )


def write_version(
    target: str | os.PathLike,
    write_files: Callable[[Path], dict[str, Any]],
) -> Path:
    """Write a new index version under ``target`` and switch ``CURRENT`` to it atomically.

    Args:
        target: the index directory (created with its parents if needed). An existing
            directory must be an index (either schema) or hold only what an interrupted write
            left there; anything else raises.
        write_files: ``write_files(tmp_dir) -> manifest_extra``: writes the payload files
            (names from :data:`INDEX_FILES`) into ``tmp_dir`` and returns the manifest's
            ``embedder`` / ``counts`` / ``generation`` fields.

    Returns:
        The resolved ``target``.

    Raises:
        FileExistsError: ``target`` is a file, or a non-empty directory that is not an index.
        ValueError: ``write_files`` wrote a file that is not an index file.
        ConcurrentWriteError: another writer held the write lock past :func:`write_timeout`.
        Exception: whatever ``write_files`` raises. On any error the version ``CURRENT``
            named before stays current and complete.
    """
    target = Path(target).resolve()
    check_target(target)
    if not target.exists():
        target.mkdir(parents=True)
        _fsync_dir(target.parent)
    with write_lock(target):
        _cleanup(target)
        _checkpoint("cleaned")
        tmp = target / f"{_TMP_PREFIX}{os.getpid()}-{time.time_ns()}"
        tmp.mkdir()
        try:
            extra = write_files(tmp)
            files = {}
            for p in sorted(tmp.iterdir()):
                if p.name not in INDEX_FILES or not p.is_file():
                    raise ValueError(f"not an index file: {p.name}")
                _fsync_file(p)
                _checkpoint(f"fsync {p.name}")
                files[p.name] = {"bytes": p.stat().st_size, "sha256": _sha256(p)}
            manifest = {
                "format": FORMAT,
                "schema_version": SCHEMA_VERSION,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "files": files,
                **extra,
            }
            Manifest.model_validate(manifest)  # never write what read_manifest would refuse
            with open(tmp / MANIFEST, "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=2)
                f.flush()
                os.fsync(f.fileno())
            _checkpoint("manifest written")
            _fsync_dir(tmp)
            _checkpoint("version fsynced")
            numbers = [n for p in target.iterdir() if (n := _version_number(p.name)) is not None]
            name = f"v{max(numbers, default=0) + 1:06d}"
            os.rename(tmp, target / name)
            _checkpoint("version renamed")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(target)
        _checkpoint("directory fsynced")
        pointer = target / f"{_CURRENT_TMP}{os.getpid()}-{time.time_ns()}"
        with open(pointer, "w", encoding="ascii") as f:
            f.write(name + "\n")
            f.flush()
            os.fsync(f.fileno())
        _checkpoint("pointer written")
        os.replace(pointer, target / CURRENT)
        _checkpoint("pointer replaced")
        _fsync_dir(target)
        _checkpoint("pointer fsynced")
        _cleanup(target)
        _checkpoint("pruned")
    return target


def read_manifest(directory: str | os.PathLike) -> dict[str, Any]:
    """Read, validate and verify the manifest of the version ``directory`` points to.

    Every listed file's size and sha256 are checked (always), and the version directory may
    hold no file the manifest does not list.

    Args:
        directory: the index directory (either schema), or a version directory.

    Returns:
        The manifest as a dict, plus ``"version_dir"``: the :class:`Path` of the files.

    Raises:
        FileNotFoundError: the directory does not exist.
        ValueError: not an index; an unreadable or invalid manifest (another format, a schema
            version out of range, an unknown or missing file name, ...); a missing, truncated
            or corrupted file (the message names the file).
    """
    d = Path(directory)
    vdir = d if _version_number(d.name) is not None and (d / MANIFEST).is_file() else version_dir(d)
    mpath = vdir / MANIFEST
    if not mpath.is_file():
        raise ValueError(f"{d} is not a graphstrata index: {MANIFEST} is missing")
    try:
        raw = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"corrupt {MANIFEST} in {d}: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"{d} is not a graphstrata index: {MANIFEST} is not an object")
    if raw.get("format") != FORMAT:
        raise ValueError(f"{d} is not a graphstrata index (format {raw.get('format')!r})")
    version = raw.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise ValueError(
            f"index schema version {version} is newer than this graphstrata supports "
            f"(≤ {SCHEMA_VERSION}); upgrade graphstrata"
        )
    if isinstance(version, int) and not isinstance(version, bool) and 0 < version < MIN_SCHEMA_VERSION:
        raise ValueError(
            f"rebuild: index format {version} is older than {MIN_SCHEMA_VERSION}, the oldest this "
            f"graphstrata reads ({d}); build it again from its documents"
        )
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(_manifest_error(d, exc)) from None
    if manifest.schema_version == 1 and vdir != d:
        raise ValueError(f"invalid {MANIFEST} in {d}: schema 1 in a versioned layout")
    for name, info in manifest.files.items():
        p = vdir / name
        if not p.is_file() or p.is_symlink():
            raise ValueError(f"corrupt index {d}: file {name} is missing")
        size = p.stat().st_size
        if size != info.bytes:
            raise ValueError(f"corrupt index {d}: {name} has {size} bytes, manifest says {info.bytes}")
        if _sha256(p) != info.sha256:
            raise ValueError(f"corrupt index {d}: checksum mismatch in {name}")
    if vdir != d:  # a version directory holds the listed files and the manifest, nothing else
        extra = sorted(p.name for p in vdir.iterdir() if p.name != MANIFEST and p.name not in manifest.files)
        if extra:
            raise ValueError(f"corrupt index {d}: unlisted file(s) {extra} in {vdir.name}")
    out = manifest.model_dump()
    out["version_dir"] = vdir
    return out


T = TypeVar("T")


@contextmanager
def _reading(vdir: Path) -> Iterator[None]:
    """Hold a shared flock on a version directory while it is read, so no writer removes it
    under the reader; the last reader of a version that is no longer current removes it."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    try:
        fd = os.open(vdir, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        raise ValueError(f"corrupt index {vdir.parent}: {vdir.name} is missing") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        try:
            superseded = False
            n = _version_number(vdir.name)
            cur = _read_current(vdir.parent)
            if n is not None and cur is not None and n < (_version_number(cur) or 0):
                superseded = True
            if superseded:  # the last reader out removes what a writer could not
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    shutil.rmtree(vdir, ignore_errors=True)
                except OSError:
                    pass  # another reader is still in it
        except (OSError, ValueError):  # pragma: no cover - cleanup is best effort
            pass
        finally:
            os.close(fd)


def open_version(
    directory: str | os.PathLike,
    read: Callable[[Path, dict[str, Any]], T],
    attempts: int = 5,
) -> T:
    """Read one whole version: resolve ``CURRENT`` once, call ``read(version_dir, manifest)``.

    If reading fails while a writer switched ``CURRENT`` meanwhile (the version was pruned
    under the reader), it starts over with the new version, up to ``attempts`` times.

    Raises:
        FileNotFoundError, ValueError: as :func:`read_manifest`, or whatever ``read`` raises
            for a version that is still current (a real corruption).
    """
    d = Path(directory)
    for attempt in range(attempts):
        before = _read_current(d) if d.is_dir() else None
        try:
            vdir = version_dir(d)
            if vdir == d:  # schema 1: the files directly in the directory
                manifest = read_manifest(d)
                return read(manifest["version_dir"], manifest)
            with _reading(vdir):
                manifest = read_manifest(d)
                if manifest["version_dir"] != vdir:  # CURRENT switched meanwhile: start over
                    raise ValueError(f"index {d} switched versions while it was opened")
                return read(vdir, manifest)
        except (ValueError, OSError) as exc:
            after = _read_current(d) if d.is_dir() else None
            if before == after or attempt == attempts - 1:
                raise
            if isinstance(exc, FileNotFoundError) and not d.is_dir():
                raise
    raise AssertionError("unreachable")  # pragma: no cover


# -- engine states ----------------------------------------------------------------------------


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write numeric arrays uncompressed (no pickled objects: a loader refuses them).

    Raises:
        ValueError: an array of Python objects (named).
    """
    for name, arr in arrays.items():
        if np.asarray(arr).dtype.hasobject:
            raise ValueError(f"cannot persist array {name!r}: it holds Python objects")
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _read_npz(vdir: Path, name: str, where: Path) -> dict[str, np.ndarray]:
    """Every array of the npz payload file ``name``, read whole.

    Raises:
        ValueError: an unreadable file (named), or one holding pickled objects.
    """
    try:
        with np.load(vdir / name, allow_pickle=False) as npz:
            return {k: np.asarray(npz[k]) for k in npz.files}
    except Exception as exc:  # zip errors of every kind, pickled objects
        raise ValueError(f"corrupt index {where}: {name} unreadable ({exc})") from exc


def save_state(state: EngineState, target: str | os.PathLike) -> Path:
    """Persist one :class:`~graphstrata.state.EngineState` as the next version of ``target``.

    Writes the records (SQLite), the row labels, both C-HNSW files, the BM25 arrays and the
    derived structures present in the state's cache (:func:`graphstrata.derived.encode`; the
    facade prepares them first, :func:`graphstrata.derived.prepare`).

    Returns:
        The resolved index directory.

    Raises:
        FileExistsError: see :func:`write_version`.
        ValueError: a record SQLite cannot store (named), a derived structure whose codec
            gives Python objects.
        OSError: the disk write failed. In every failure case the previous version stays
            current and loadable.
    """
    from .structures import registry as derived

    emb = state.embedder

    def write(tmp: Path) -> dict[str, Any]:
        meta = {
            "schema_version": SCHEMA_VERSION,
            "embedder_id": emb.id,
            "embedder_dim": int(emb.dim),
            "config": state.config.model_dump(),
            "generation": state.generation,
            "build_seconds": dict(state.build_seconds),
            "build_usage": dict(state.build_usage),
            "llm_id": state.llm_id,
            "drift": dict(state.drift),
        }
        write_sqlite(
            tmp / SQLITE,
            meta,
            list(state.documents.values()),
            list(state.chunks),
            [state.kg.entities[e] for e in state.kg.entity_ids],
            list(state.kg.relations.values()),
            [c for layer in state.communities for c in layer],
            chunk_records=state.records,
            frozen=state.frozen,
            llm_answers=state.llm_answers,
        )
        _checkpoint("sqlite written")
        labels = {LABELS_PREFIX + "chunks": state.chunk_index.labels}
        if state.layered is not None:
            names = ["entities"] + [f"layer_{i}" for i in range(1, state.layered.num_layers)]
            labels.update({LABELS_PREFIX + n: lab for n, lab in zip(names, state.layered.labels, strict=True)})
        # the vectors themselves are stored once, in the .chnsw files (schema 5)
        _write_npz(tmp / LABELS, labels)
        _checkpoint("labels written")
        if state.layered is not None:
            state.layered.save(tmp / LAYERS)
            _checkpoint("layers written")
        state.chunk_index.save(tmp / CHUNKS)
        _checkpoint("chunks written")
        _write_npz(tmp / BM25, state.bm25.to_arrays())
        _checkpoint("bm25 written")
        arrays = derived.encode(state)
        if arrays:
            _write_npz(tmp / DERIVED, arrays)
            _checkpoint("derived written")
        return {
            "embedder": {"id": emb.id, "dim": int(emb.dim)},
            "counts": state.stats(),
            "generation": state.generation,
            "llm": {"id": state.llm_id, "usage": dict(state.build_usage)} if state.llm_id else None,
            "build_seconds": {k: float(v) for k, v in state.build_seconds.items()},
        }

    return write_version(target, write)


def load_state(
    directory: str | os.PathLike,
    embedder_for: Callable[[dict[str, Any]], Embedder],
    config_of: Callable[[Any], GraphStrataConfig],
    llm: Any = None,
) -> EngineState:
    """Load the current version of an index as one :class:`~graphstrata.state.EngineState`.

    What only updates read stays compact: the extraction records and frozen TF-IDF models are
    kept compressed (:class:`~graphstrata.state.ChunkRecords`,
    :class:`~graphstrata.state.FrozenStats`). Vectors are memory-mapped from the C-HNSW files
    where they can be (:func:`graphstrata.index.mapped_vectors`), BM25 is read as arrays
    (schema 6; rebuilt from the chunk texts for older ones), and the persisted derived
    structures are handed to the state as its ``derived_seed`` (schema 6; older indexes build
    them on first use).

    Args:
        directory: an index directory (either schema).
        embedder_for: ``embedder_for(manifest["embedder"]) -> Embedder``; raises
            ``ValueError`` when the caller's embedder does not match.
        config_of: turns the stored config dict into a config (``ValueError`` if invalid).
        llm: the :class:`~graphstrata.llm.LLMClient` to attach to the state (or ``None``).

    Returns:
        The state, after :func:`~graphstrata.state.check_integrity`.

    Raises:
        FileNotFoundError: the directory does not exist.
        ValueError: not an index, an invalid manifest, a corrupt or truncated file (named), an
            embedder mismatch, broken references between records, vectors of the wrong shape
            or with NaN / infinite values, BM25 arrays or derived structures that do not fit
            the index (the file named).
    """
    from .structures import registry as derived  # importing structures registers every structure
    from .graph import KnowledgeGraph
    from .index import BM25Index, ChunkIndex, LayeredIndex, layer_vectors, lexical_texts
    from .state import EngineState, check_integrity

    path = Path(directory)

    def read(vdir: Path, manifest: dict[str, Any]) -> EngineState:
        embedder = embedder_for(manifest["embedder"])
        data = read_sqlite(vdir / SQLITE)
        config = config_of(data["meta"].get("config"))
        rows_file = LABELS if LABELS in manifest["files"] else VECTORS
        try:
            with np.load(vdir / rows_file, allow_pickle=False) as npz:
                vectors = {
                    k: np.array(npz[k], dtype=np.float32, order="C")
                    for k in npz.files
                    if not k.startswith(LABELS_PREFIX)
                }
                labels = {
                    k[len(LABELS_PREFIX):]: np.array(npz[k], dtype=np.int64)
                    for k in npz.files
                    if k.startswith(LABELS_PREFIX)
                }
        except Exception as exc:  # zip errors of every kind
            raise ValueError(f"corrupt index {path}: {rows_file} unreadable ({exc})") from exc
        if rows_file == LABELS and vectors:
            raise ValueError(f"corrupt index {path}: {LABELS} holds arrays that are not labels")
        documents = {d.id: d for d in data["documents"]}
        if len(documents) != len(data["documents"]):
            raise ValueError(f"corrupt index {path}: duplicate document ids")
        chunks = data["chunks"]
        kg = KnowledgeGraph(data["entities"], data["relations"])
        if len(kg.entities) != len(data["entities"]) or len(kg.relations) != len(data["relations"]):
            raise ValueError(f"corrupt index {path}: duplicate entities or dangling relations")
        by_layer: dict[int, list[Community]] = {}
        for c in data["communities"]:
            by_layer.setdefault(c.layer, []).append(c)
        if sorted(by_layer) != list(range(1, len(by_layer) + 1)):
            raise ValueError(f"corrupt index {path}: community layers {sorted(by_layer)} are not 1..L")
        communities = [by_layer[i] for i in sorted(by_layer)]
        if rows_file == LABELS:
            if "chunks" not in labels or len(labels["chunks"]) != len(chunks):
                raise ValueError(f"corrupt index {path}: chunk labels do not match the chunks")
        elif vectors.get("chunks") is None or len(vectors["chunks"]) != len(chunks):
            raise ValueError(f"corrupt index {path}: chunk vectors do not match the chunks")
        chunk_index = ChunkIndex.load(vdir / CHUNKS, vectors.get("chunks"), labels.get("chunks"))
        layered = None
        if len(kg):
            if LAYERS not in manifest["files"]:
                raise ValueError(f"corrupt index {path}: {LAYERS} is missing")
            sizes = [len(kg)] + [len(layer) for layer in communities]
            names = ["entities"] + [f"layer_{i}" for i in range(1, len(sizes))]
            layer_labels = [labels[n] for n in names] if all(n in labels for n in names) else None
            if rows_file == LABELS and layer_labels is None:
                raise ValueError(f"corrupt index {path}: {LABELS} lacks the labels of the layers")
            layered = LayeredIndex.load(vdir / LAYERS, sizes, layer_labels)
        native_vectors = rows_file == LABELS  # schema ≥ 5: the one stored copy is the index's
        if native_vectors:
            vectors = {"chunks": chunk_index.vectors, **layer_vectors(layered, embedder.dim, vdir / LAYERS)}
        if BM25 in manifest["files"]:
            try:
                bm25 = BM25Index.from_arrays(_read_npz(vdir, BM25, path), n=len(chunks))
            except ValueError as exc:
                raise ValueError(f"corrupt index {path}: {BM25} unusable ({exc})") from exc
        else:  # schema ≤ 5: BM25 was rebuilt from the texts at every load
            bm25 = BM25Index(lexical_texts(chunks, documents, config.use_titles))
        seed = None
        if DERIVED in manifest["files"]:
            try:
                seed = derived.decode(_read_npz(vdir, DERIVED, path))
            except ValueError as exc:
                raise ValueError(f"corrupt index {path}: {DERIVED} unusable ({exc})") from exc
        state = EngineState(
            config=config,
            embedder=embedder,
            documents=documents,
            chunks=chunks,
            chunk_row={c.id: i for i, c in enumerate(chunks)},
            kg=kg,
            communities=communities,
            layered=layered,
            chunk_index=chunk_index,
            bm25=bm25,
            vectors=vectors,
            generation=int(manifest.get("generation", 0)),
            build_seconds=dict(data["meta"].get("build_seconds") or {}),
            build_usage=dict(data["meta"].get("build_usage") or {}),
            llm_id=data["meta"].get("llm_id"),
            llm=llm,
            records=_chunk_records(data["chunk_records"], chunks, path),
            llm_answers=_llm_answers(
                data["llm_records"], data["llm_summaries"], chunks, data["llm_answers"], data["llm_answer_owners"]
            ),
            frozen=_frozen(data["frozen"], path),
            drift=dict(data["meta"].get("drift") or {}),
            derived_seed=seed,
        )
        # vectors read from a .chnsw file were checked finite by its loader
        check_integrity(state, where=f"index {path}", finite_checked=native_vectors)
        return state

    state = open_version(path, read)
    _release_free_memory()
    return state


def _release_free_memory() -> None:
    """Hand the heap memory a load freed (SQLite rows, JSON texts, temporaries) back to the
    operating system (glibc ``malloc_trim``; ~90 MB of RSS at 44k chunks). Does nothing where
    there is no glibc."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def _chunk_records(raw: dict[str, str | bytes], chunks: list[Chunk], path: Path) -> ChunkRecords | None:
    """The persisted extraction records, one per chunk, kept compressed
    (:class:`~graphstrata.state.ChunkRecords`; decoded when an update reads them), or ``None``
    when the index has none (an LLM-extracted graph, or schema ≤ 3: the first update derives
    them). Schema 4 stored them as JSON text: compressed here.

    Raises:
        ValueError: records that do not match the chunks, or a record that is not zlib data
            (named; a record damaged further in is named when an update reads it).
    """
    if not raw:
        return None
    if len(raw) != len(chunks) or any(c.id not in raw for c in chunks):
        raise ValueError(f"corrupt index {path}: extraction records do not match the chunks")
    ids = [c.id for c in chunks]  # the chunks' own id strings, in row order
    blobs = [
        v if isinstance(v, bytes) else zlib.compress(str(v).encode("utf-8"), 1) for v in (raw[i] for i in ids)
    ]
    try:
        return ChunkRecords(ids, blobs)
    except ValueError as exc:
        raise ValueError(f"corrupt index {path}: {exc}") from None


def _llm_answers(
    rows: list[tuple[Any, Any, Any]],
    summaries: dict[Any, Any],
    chunks: list[Chunk],
    stage_rows: Sequence[tuple[Any, Any]] = (),
    owner_rows: Sequence[tuple[Any, Any]] = (),
) -> LLMAnswers | None:
    """The persisted LLM answers (:class:`~graphstrata.llm.records.LLMAnswers`), records in
    chunk order, or ``None`` when the index has none (statistical extraction, or an LLM index
    persisted before them: its next update asks through the response cache).

    Args:
        rows: ``(chunk_id, key, answers)`` of table ``llm_records``.
        summaries: ``{key: summary}`` of table ``llm_summaries``.
        chunks: the index's chunks (records are kept in their order).
        stage_rows: ``(key, answer)`` of table ``llm_answers`` (absent in an index written
            before it: empty).
        owner_rows: ``(community_id, key)`` of table ``llm_answer_owners``.

    Lenient by design: a row of a chunk the index does not hold, or not of the stored types,
    is left out, and its chunk (or prompt) is asked again by the next update (a missing record
    costs a call; it never loses an entity or a report).
    """
    if not rows and not summaries and not stage_rows:
        return None
    by_id = {
        cid: LLMRecord(key, bytes(blob))
        for cid, key, blob in rows
        if isinstance(cid, str) and isinstance(key, str) and isinstance(blob, (bytes, memoryview))
    }
    records = {c.id: by_id[c.id] for c in chunks if c.id in by_id}
    kept = {k: v for k, v in summaries.items() if isinstance(k, str) and isinstance(v, str)}
    stages = {
        k: LLMRecord(k, bytes(blob))
        for k, blob in stage_rows
        if isinstance(k, str) and isinstance(blob, (bytes, memoryview))
    }
    owners = {o: k for o, k in owner_rows if isinstance(o, str) and isinstance(k, str) and k in stages}
    return LLMAnswers(records, kept, stages, owners)


def _frozen(raw: dict[str, str], path: Path) -> FrozenStats:
    """The frozen TF-IDF statistics, kept compressed (:class:`~graphstrata.state.FrozenStats`,
    decoded when an update reads them).

    Raises:
        ValueError: a value that is not a JSON object (named).
    """
    for name, text in raw.items():
        if not isinstance(text, str) or not text.lstrip().startswith("{"):
            raise ValueError(f"corrupt index {path}: frozen statistics {name!r} are not a JSON object")
    return FrozenStats.from_models(raw)
