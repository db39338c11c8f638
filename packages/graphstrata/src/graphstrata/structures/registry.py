"""Structures derived from a state's records that methods read at query time (passage graphs,
relation indexes, HiRAG's summary layers, ...): registered once, built at index time,
persisted with the index, and handed to a loaded state, so the first query after a load costs
what any other query costs (issue 33; DESIGN.md "Scale is part of the design").

Each module of :mod:`graphstrata.structures` registers its structures with :func:`register_derived`: the key it
uses with :meth:`EngineState.derived <graphstrata.state.EngineState.derived>`, a builder from the
state, and a codec to and from named numpy arrays. The facade runs :func:`prepare` on every new
state (build, update, rebuild) before persisting it; the store writes :func:`encode` of the
state's cache and hands :func:`decode` of what it read to the loaded state as its
``derived_seed``. A structure whose arrays are missing or of another ``version`` is simply built
again on first use, so indexes persisted before a structure existed still load.

Nothing here imports a method or an indexing stage: the structures import this module.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..heap import release_free_memory

if TYPE_CHECKING:  # pragma: no cover
    from ..state import EngineState

#: separator of ``key``, ``version`` and array name in an encoded array's name
SEP = "|"


@dataclass(frozen=True)
class DerivedSpec:
    """One persisted derived structure.

    Attributes:
        key: the :meth:`~graphstrata.state.EngineState.derived` key the method reads it under
            (no ``"|"`` in it).
        build: ``build(state) -> structure``, from the state's records only.
        to_arrays: ``to_arrays(structure) -> {name: ndarray}`` (numeric arrays, no objects).
        from_arrays: ``from_arrays({name: ndarray}) -> structure``; raises ``ValueError`` on
            arrays it cannot use.
        version: the codec's format version; persisted arrays of another version are ignored
            (the structure is built again).
        eager: build it at index time (:func:`prepare`); ``False`` leaves it to first use
            (still persisted once built).
        order: :func:`prepare` builds structures of a lower order first (registration order
            among equals): a structure whose build needs much transient memory goes first,
            while the heap holds none of the others.
        update: optional incremental hook, ``update(old_structure, old_state, new_state) ->
            structure | None``: the structure of ``new_state`` (the next state of an insert,
            delete or rebuild) from the one ``old_state`` held, where a method can do better
            than a rebuild; ``None`` (or no hook) means "build it again" (:func:`prepare`).
            It must return exactly what ``build(new_state)`` would (the tests of a hook compare
            both), and must not modify ``old_structure`` (queries of the old state continue).
    """

    key: str
    build: Callable[[EngineState], Any]
    to_arrays: Callable[[Any], Mapping[str, np.ndarray]]
    from_arrays: Callable[[Mapping[str, np.ndarray]], Any]
    version: int = 1
    eager: bool = True
    update: Callable[[Any, EngineState, EngineState], Any] | None = None
    order: int = 0


_SPECS: dict[str, DerivedSpec] = {}
_LOCK = threading.Lock()


def register_derived(spec: DerivedSpec) -> DerivedSpec:
    """Register ``spec`` (a later registration of the same key replaces it).

    Raises:
        ValueError: a key with ``"|"`` in it, or a version < 1.
    """
    if SEP in spec.key or not spec.key:
        raise ValueError(f"derived structure key must be non-empty and free of {SEP!r}: {spec.key!r}")
    if spec.version < 1:
        raise ValueError(f"derived structure {spec.key!r}: version must be >= 1")
    with _LOCK:
        _SPECS[spec.key] = spec
    return spec


def registered() -> tuple[DerivedSpec, ...]:
    """Every registered structure, in registration order."""
    with _LOCK:
        return tuple(_SPECS.values())


def prepare(
    state: EngineState,
    keys: Iterable[str] | None = None,
    previous: EngineState | None = None,
    carried_only: bool = False,
) -> list[str]:
    """Build the registered eager structures (or only ``keys``) into ``state``'s derived cache;
    those already there (seeded or built) are kept.

    Args:
        state: the state to prepare (a new build, the next state of an update, a rebuild).
        keys: only these structures (eager or not); ``None``: every eager one.
        previous: the state ``state`` was made from (insert / delete / rebuild), or ``None``.
            A spec with an :attr:`DerivedSpec.update` hook whose structure ``previous`` holds
            is updated from it; where the hook returns ``None`` (or there is none) the
            structure is built from ``state``.
        carried_only: prepare only the structures an update hook carries over from
            ``previous``'s (those ``previous`` holds and whose spec has a hook); the others are
            left to the first query that reads them (what an update does: rebuilding every
            structure made a one-document insert cost seconds).

    Returns:
        The keys prepared, in the order they were prepared (:attr:`DerivedSpec.order`, then
        registration order).
    """
    wanted = None if keys is None else set(keys)
    old_cache = previous.derived_snapshot() if previous is not None else {}
    done = []
    for spec in sorted(registered(), key=lambda s: s.order):
        if not ((wanted is None and spec.eager) or (wanted is not None and spec.key in wanted)):
            continue
        if carried_only and (spec.update is None or spec.key not in old_cache):
            continue

        built: list[str] = []

        def make(spec: DerivedSpec = spec, built: list[str] = built) -> Any:
            built.append(spec.key)
            if spec.update is not None and spec.key in old_cache:
                out = spec.update(old_cache[spec.key], previous, state)
                if out is not None:
                    return out
            return spec.build(state)

        state.derived(spec.key, make)
        done.append(spec.key)
        if built and previous is None:  # built for a build or a load: hand back its temporaries
            release_free_memory()
    return done


def encode(state: EngineState) -> dict[str, np.ndarray]:
    """The registered structures present in ``state``'s derived cache as flat named arrays
    (``"<key>|<version>|<name>"``): what the store persists."""
    cache = state.derived_snapshot()
    out: dict[str, np.ndarray] = {}
    for spec in registered():
        if spec.key not in cache:
            continue
        for name, arr in spec.to_arrays(cache[spec.key]).items():
            out[f"{spec.key}{SEP}{spec.version}{SEP}{name}"] = np.asarray(arr)
    return out


def decode(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """``{key: structure}`` for every registered structure whose arrays of its current version
    are in ``arrays`` (:func:`encode`'s names); others are left out, to be built on first use.

    Raises:
        ValueError: a structure's codec refused its arrays (corrupt data, named).
    """
    grouped: dict[tuple[str, int], dict[str, np.ndarray]] = {}
    for full, arr in arrays.items():
        parts = full.split(SEP)
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        grouped.setdefault((parts[0], int(parts[1])), {})[parts[2]] = arr
    out: dict[str, Any] = {}
    for spec in registered():
        found = grouped.get((spec.key, spec.version))
        if found is None:
            continue
        try:
            out[spec.key] = spec.from_arrays(found)
        except (KeyError, ValueError, IndexError) as exc:
            raise ValueError(f"derived structure {spec.key!r} unreadable: {exc}") from exc
    return out


def pack_strings(values: Iterable[str]) -> dict[str, np.ndarray]:
    """Strings as numeric arrays (for :mod:`graphstrata.structures.registry` codecs): ``{"utf8": uint8
    (total bytes,), "offsets": int64 (len + 1,)}``; :func:`unpack_strings` reads them back."""
    encoded = [str(v).encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    if encoded:
        offsets[1:] = np.cumsum([len(b) for b in encoded])
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
    return {"utf8": blob, "offsets": offsets}


def unpack_strings(utf8: np.ndarray, offsets: np.ndarray) -> list[str]:
    """The strings :func:`pack_strings` packed.

    Raises:
        ValueError: offsets that do not fit the bytes, or bytes that are not UTF-8.
    """
    blob = np.ascontiguousarray(utf8, np.uint8).tobytes()
    offsets = np.asarray(offsets, np.int64).ravel()
    if len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(blob) or (np.diff(offsets) < 0).any():
        raise ValueError("packed strings: offsets do not match the bytes")
    try:
        return [blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]
    except UnicodeDecodeError as exc:
        raise ValueError(f"packed strings: not UTF-8 ({exc})") from None


def lossless_float32(weights: np.ndarray) -> np.ndarray:
    """float64 ``weights`` as float32 when that loses nothing (counts, simple fractions), else
    unchanged: what a codec stores (decoders widen them back to float64)."""
    w32 = weights.astype(np.float32)
    return w32 if np.array_equal(w32.astype(np.float64), weights) else weights
