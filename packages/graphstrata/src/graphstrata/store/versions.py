"""Versioned index directories: versions switched atomically, the write lock, the manifest.

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
                             graphstrata.structures.registry.encode): built at index time, so the first
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
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..llm.cache import CACHE_FILE

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
DERIVED = "derived.npz"  # schema 6: graphstrata.structures.registry.encode(state), when there is any
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



def checkpoint(label: str) -> None:
    """Mark a step between the file operations of a write (:func:`save_state
    <graphstrata.store.codec.save_state>` marks its own): calls this module's ``_checkpoint``,
    which does nothing unless a crash test replaced it."""
    _checkpoint(label)


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



class IndexDirectory:
    """One index directory as one holder (a :class:`~graphstrata.GraphStrata` instance) keeps
    it: its path, its write lock, the LLM response cache file beside its versions, and the
    version the holder's state was read from or last written as (:attr:`base`), which tells
    the holder when another writer switched ``CURRENT`` since.

    Nothing is created or read by making one.

    Attributes:
        path: the directory, resolved (what :attr:`GraphStrata.persist_dir
            <graphstrata.GraphStrata.persist_dir>` reports).
        named: the directory as the caller named it (what load errors name).
        base: the name of the version the holder's state was read from or last written as;
            ``None``: none yet, or unknown (a writer switched versions during the read).
    """

    def __init__(self, path: str | os.PathLike, base: str | None = None) -> None:
        self.named = Path(path)
        self.path = self.named.resolve()
        self.base = base

    @classmethod
    def checked(cls, path: str | os.PathLike) -> IndexDirectory:
        """A handle on ``path`` after :meth:`check`.

        Raises:
            FileExistsError: ``path`` is a file or a non-empty directory that is not an index.
        """
        index = cls(path)
        index.check()
        return index

    def __repr__(self) -> str:
        return f"IndexDirectory({str(self.path)!r}, base={self.base!r})"

    @property
    def cache_path(self) -> Path:
        """The LLM response cache of this index (``DIR/llm-cache.sqlite``,
        :class:`~graphstrata.llm.ResponseCache`); it outlives versions."""
        return self.path / CACHE_FILE

    def check(self) -> None:
        """:func:`check_target`: raise unless the directory may become (or is) an index.

        Raises:
            FileExistsError: a file, or a non-empty directory that is not an index.
        """
        check_target(self.path)

    def current(self) -> str | None:
        """:func:`current_version` of the directory (``None``: no pointer yet)."""
        return current_version(self.path)

    def stale(self) -> bool:
        """Whether another writer switched ``CURRENT`` since :attr:`base` (``False`` while the
        directory holds no version)."""
        current = self.current()
        return current is not None and current != self.base

    @contextmanager
    def locked(self, timeout: float | None = None, check: bool = False) -> Iterator[Path]:
        """Hold the directory's write lock (:func:`write_lock`; re-entrant in a thread).

        Args:
            timeout: seconds to wait (``None``: :func:`write_timeout`).
            check: :meth:`check` the directory first (so no lock file is created in a directory
                that is not an index).

        Raises:
            FileExistsError: ``check`` and the directory may not be an index.
            ConcurrentWriteError: the lock was not free within ``timeout``.
        """
        if check:
            self.check()
        with write_lock(self.path, timeout) as d:
            yield d

    def recover(self) -> list[str]:
        """:func:`recover`: clean up after interrupted writes unless a writer is active."""
        return recover(self.path)

    def write(self, write_files: Callable[[Path], dict[str, Any]]) -> Path:
        """:func:`write_version` into this directory; :attr:`base` becomes the version written.

        Raises:
            as :func:`write_version` (:attr:`base` unchanged).
        """
        path = write_version(self.path, write_files)
        self.base = current_version(path)
        return path

    def read(self, read: Callable[[Path, dict[str, Any]], T]) -> T:
        """:func:`open_version` of this directory; :attr:`base` becomes the version read, or
        ``None`` when ``CURRENT`` switched while it was read (the holder's next write reloads).

        Raises:
            as :func:`open_version` (:attr:`base` unchanged).
        """
        before = self.current()
        out = open_version(self.named, read)
        self.base = before if before == self.current() else None
        return out

    def keep_cache(self, client: Any) -> None:
        """Move ``client``'s in-memory response cache into :attr:`cache_path` (the file a
        load opens); nothing for no client, or a cache already in a file."""
        cache = getattr(client, "cache", None)
        if cache is not None and getattr(cache, "path", "") is None and hasattr(cache, "attach_file"):
            cache.attach_file(self.cache_path)
