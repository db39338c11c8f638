"""Freed heap memory handed back between build stages (issue 33)."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest
from graphstrata.heap import release_free_memory


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "malloc_trim"),
                    reason="glibc's malloc_trim is Linux/glibc only")
def test_freed_small_objects_go_back_to_the_os():
    # ~200 MB of 1 kB C allocations, freed in runs of 16 with 16 kept between them: glibc keeps
    # the 16 kB holes mapped (none reaches the top of the heap) until malloc_trim returns them
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    ptrs = []
    for _ in range(200_000):
        p = libc.malloc(1024)
        ctypes.memset(p, 1, 1024)
        ptrs.append(p)
    freed = [p for i, p in enumerate(ptrs) if (i // 16) % 2 == 0]
    kept = [p for i, p in enumerate(ptrs) if (i // 16) % 2 == 1]
    for p in freed:
        libc.free(p)
    held = _rss()
    assert release_free_memory()
    released = held - _rss()
    for p in kept:
        libc.free(p)
    assert released > 50 * 1024 * 1024, released


def test_without_malloc_trim_it_does_nothing_and_says_so(monkeypatch):
    import graphstrata.heap as heap

    monkeypatch.setattr(heap, "_trim", lambda: None)  # macOS, Windows, musl
    assert heap.release_free_memory() is False


def test_rebuilt_returns_an_equal_object_with_its_inner_sharing_and_empties_the_box():
    from graphstrata.heap import rebuilt

    shared = "one string held twice " * 3
    obj = {"a": [shared, shared], "b": (1.5, shared)}
    box = [obj]
    got = rebuilt(box)
    assert box == [] and got == obj and got is not obj
    assert got["a"][0] is got["a"][1] is got["b"][1]  # pickle's memo keeps identity inside


def test_rebuilt_puts_an_unpicklable_object_back():
    from graphstrata.heap import rebuilt

    obj = [lambda: 1]
    box = [obj]
    with pytest.raises(Exception):
        rebuilt(box)
    assert box == [obj] and box[0] is obj


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmRSS is Linux only")
def test_rebuilding_objects_made_among_freed_ones_gives_memory_back():
    from graphstrata.heap import rebuilt

    # long-lived small objects interleaved with short-lived ones: freeing the short-lived
    # leaves every arena pinned by a few live objects
    keep, drop = [], []
    for i in range(400_000):
        keep.append((i, str(i)))
        drop.append([i, i + 1, i + 2, str(i) * 3])
    del drop
    release_free_memory()
    before = _rss()
    box = [keep]
    del keep
    kept = rebuilt(box)
    release_free_memory()
    assert len(kept) == 400_000 and kept[123] == (123, "123")
    assert _rss() < before - 40 * 2**20
