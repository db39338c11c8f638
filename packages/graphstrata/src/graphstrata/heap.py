"""Returning freed heap memory to the operating system between build stages.

A build frees gigabytes of small objects between its stages (token lists, per-chunk records,
edge lists of the clustering). glibc's allocator keeps most of what is freed mapped for reuse,
and the later stages allocate other sizes (large arrays, the native index), so the process
holds both: at 50k chunks 0.25 GB of a 1.67 GB build was free memory still mapped (issue 33).
:func:`release_free_memory` hands it back (glibc ``malloc_trim``) where the C library has it,
and does nothing elsewhere (macOS, Windows, musl).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from typing import Any


@functools.lru_cache(maxsize=1)
def _trim():
    """glibc's ``malloc_trim`` (``int malloc_trim(size_t pad)``), or ``None`` without glibc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def release_free_memory() -> bool:
    """Return the C heap's free pages to the operating system (glibc ``malloc_trim(0)``: the
    top of each arena and whole free pages inside it). Objects in use are untouched; the call
    walks the heap's free lists (milliseconds to a few hundred at a million chunks).

    Returns:
        ``True`` when memory was released, ``False`` when none was or the C library has no
        ``malloc_trim``.
    """
    fn = _trim()
    return bool(fn(0)) if fn is not None else False


def rebuilt(box: list[Any]) -> Any:
    """The object ``box`` holds (taken out of it), rebuilt in fresh memory: written to an
    unlinked temporary file with :mod:`pickle`, dropped, and read back.

    Python keeps its small objects in 1 MiB arenas that go back to the operating system only
    when every object in them is freed. A build's long-lived objects (the graph's entities,
    relations and their strings, the chunks' records) are made among tens of millions of
    short-lived ones (the extraction merge), so once those are freed most arenas still hold a
    few live objects: at 50k chunks 0.41 GB of unused pools stayed mapped after a build
    (issue 33). Read back, the objects fill arenas one after another, and the old arenas,
    empty now, are released. Object identity inside the object is kept (pickle's memo: shared
    strings stay shared); identity with objects outside it is not.

    The caller must hold no other reference to the object (``box`` is the only one), or
    nothing is freed and the memory doubles. The file is on disk, not in memory (about the
    size of the objects' text; seconds per 100 MB).

    Args:
        box: a one-element list holding the object; emptied.

    Returns:
        An equal object (a deep copy).

    Raises:
        pickle.PicklingError, TypeError: the object cannot be pickled.
        OSError: the temporary file cannot be written (disk full): the object is put back in
            ``box`` first.
    """
    import pickle
    import tempfile

    obj = box.pop()
    with tempfile.TemporaryFile(prefix="graphstrata-rebuild-") as f:
        try:
            pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:
            box.append(obj)
            raise
        del obj
        release_free_memory()
        f.seek(0)
        return pickle.load(f)
