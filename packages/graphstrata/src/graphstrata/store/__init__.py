"""Persistence: one directory per index, versions switched atomically.

Three concerns, one module each:

- :mod:`graphstrata.store.versions`: the directory (layout, ``CURRENT``, atomic version
  switch, the write lock, the manifest, cleanup after interrupted writes) and
  :class:`IndexDirectory`, the handle a :class:`~graphstrata.GraphStrata` keeps on its directory
  (path, lock, LLM response cache file, the version its state was read from);
- :mod:`graphstrata.store.sqlite`: the records of a version (``graphstrata.sqlite``);
- :mod:`graphstrata.store.codec`: an :class:`~graphstrata.state.EngineState` as a version's
  files (:func:`save_state`, :func:`load_state`).

Every public name of the three is importable from here (``from graphstrata import store;
store.save_state(...)``).
"""

from .codec import as_persisted, load_state, matching_embedder, registered_derived, save_state
from .sqlite import read_sqlite, write_sqlite
from .versions import (
    BM25,
    CHUNKS,
    CURRENT,
    DERIVED,
    FILES_SINCE,
    FORMAT,
    INDEX_FILES,
    KEEP_VERSIONS,
    LABELS,
    LABELS_PREFIX,
    LAYERS,
    LOCK,
    MANIFEST,
    MIN_SCHEMA_VERSION,
    REQUIRED_FILES,
    ROW_FILES,
    SCHEMA_VERSION,
    SQLITE,
    VECTORS,
    WRITE_LOCK_TIMEOUT,
    ConcurrentWriteError,
    EmbedderInfo,
    FileEntry,
    IndexDirectory,
    Manifest,
    check_target,
    current_version,
    open_version,
    read_manifest,
    recover,
    version_dir,
    write_lock,
    write_timeout,
    write_version,
)

__all__ = [
    "BM25", "CHUNKS", "CURRENT", "DERIVED", "FILES_SINCE", "FORMAT", "INDEX_FILES", "KEEP_VERSIONS", "LABELS",
    "LABELS_PREFIX", "LAYERS", "LOCK", "MANIFEST", "MIN_SCHEMA_VERSION", "REQUIRED_FILES", "ROW_FILES",
    "SCHEMA_VERSION", "SQLITE", "VECTORS", "WRITE_LOCK_TIMEOUT", "ConcurrentWriteError", "EmbedderInfo",
    "FileEntry", "IndexDirectory", "Manifest", "as_persisted", "check_target", "current_version", "load_state",
    "matching_embedder", "open_version", "read_manifest", "read_sqlite", "recover", "registered_derived",
    "save_state", "version_dir", "write_lock", "write_sqlite", "write_timeout", "write_version",
]
