"""Vector indexes over the store.

* :class:`LayeredIndex` — one C-HNSW (``graphstrata_chnsw.CHNSW``) holding entities at layer 0
  and the community layers 1..L above; one call answers every layer (ArchRAG §3.2.1).
* :class:`ChunkIndex` — chunk vectors in their own single-layer C-HNSW, plus the raw vectors for
  exact re-scoring of candidate chunks.

The lexical index (:class:`~graphstrata.bm25.BM25Index`) lives in :mod:`graphstrata.bm25`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
import numpy as np


def _chnsw():
    import graphstrata_chnsw

    return graphstrata_chnsw


PARALLEL_BUILD_MIN = 20_000
"""With ``$GRAPHSTRATA_PARALLEL_INSERTS=1`` (:func:`parallel_inserts`), a C-HNSW layer of at
least this many vectors is built on :func:`index_threads` threads. Parallel inserts race for
neighbour slots, so the links of such a layer (the k-NN edges of clustering taken from it, the
communities, and approximate results) then differ between two builds of the same vectors
(issue 44: 54,532 of 140k exported edges of HotpotQA). By default every layer is linked on one
thread, in row order: the same vectors give the same graph whatever the threads or the load;
batch searches (:meth:`LayeredIndex.knn`) stay on :func:`index_threads` threads, since each
query only reads the graph."""


def parallel_inserts() -> bool:
    """Whether large C-HNSW layers are linked on several threads: ``$GRAPHSTRATA_PARALLEL_INSERTS``
    set to ``1`` / ``true`` / ``yes`` (faster on many cores, not reproducible). Default ``False``."""
    return os.environ.get("GRAPHSTRATA_PARALLEL_INSERTS", "").strip().lower() in ("1", "true", "yes")


def machine_threads() -> int:
    """The CPUs this process may run on (its affinity mask; ``os.cpu_count()`` elsewhere), >= 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def index_threads() -> int:
    """Threads for building large C-HNSW layers and batch k-NN queries:
    ``$GRAPHSTRATA_NUM_THREADS`` when set, else the CPUs this process may run on, and never
    more than those CPUs (:func:`machine_threads`): ``GRAPHSTRATA_NUM_THREADS=512`` on a
    2-core machine means 2. The native index clamps again to the machine's hardware threads
    and runs on fewer threads when the system refuses to start one."""
    env = os.environ.get("GRAPHSTRATA_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return min(int(env), machine_threads())
    return machine_threads()


@contextmanager
def _threads(index, n: int) -> Iterator[None]:
    """Run a native call on ``n`` threads; the index is left at one thread afterwards (queries
    of one vector gain nothing from more)."""
    index.set_num_threads(n)
    try:
        yield
    finally:
        index.set_num_threads(1)


def _add_layer(index, vectors: np.ndarray) -> None:
    """``index.add_layer(vectors)`` on one thread (deterministic), or on :func:`index_threads`
    threads when :func:`parallel_inserts` and the layer has at least :data:`PARALLEL_BUILD_MIN`
    vectors."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    parallel = parallel_inserts() and len(vectors) >= PARALLEL_BUILD_MIN
    with _threads(index, index_threads() if parallel else 1):
        index.add_layer(vectors)


def shared_vectors(index, labels: np.ndarray, dim: int) -> np.ndarray | None:
    """A read-only float32 ``(len(labels), dim)`` view of the vectors a native index stores for
    ``labels``, sharing the index's own memory (``CHNSW.vectors_view``), or ``None`` where no
    view can be made (the labels are not one run of consecutive nodes — an updated index — or
    the native module predates views). The index holds each vector once; a view adds no copy,
    so a state's ``vectors`` cost nothing beyond the C-HNSW (issue 33: about 1 kB a chunk and
    1 kB an entity at dim 256).

    While a view is alive the index cannot grow its vector buffer (an insert that would
    reallocate raises ``RuntimeError``); updates insert into a clone (:func:`_clone`).

    Raises:
        ValueError: a label the index does not hold (a corrupt index).
    """
    view = getattr(index, "vectors_view", None)
    if view is None or len(labels) == 0:
        return None
    try:
        out = view(np.asarray(labels, np.int64))
    except KeyError as exc:
        raise ValueError(f"corrupt index: label {exc} is not in the C-HNSW file") from None
    if out is None or out.shape != (len(labels), dim):
        return None
    return out


def own_vectors(index, labels: np.ndarray, dim: int) -> np.ndarray:
    """float32 ``(len(labels), dim)``: the vectors a native index stores for ``labels``, as a
    zero-copy view of its memory where it can be (:func:`shared_vectors`), else copied.

    Raises:
        ValueError: a label the index does not hold (a corrupt index).
    """
    view = shared_vectors(index, labels, dim)
    return view if view is not None else _read_vectors(index, labels, dim)


def _read_vectors(index, labels: np.ndarray, dim: int) -> np.ndarray:
    """float32 ``(len(labels), dim)``: the vectors a native index stores for ``labels``, in order.

    Raises:
        ValueError: a label the index does not hold (a corrupt index).
    """
    if len(labels) == 0:
        return np.zeros((0, dim), dtype=np.float32)
    try:
        return np.ascontiguousarray(index.get_vectors(np.asarray(labels, np.int64)), dtype=np.float32)
    except KeyError as exc:
        raise ValueError(f"corrupt index: label {exc} is not in the C-HNSW file") from None


COMPACT_FRACTION = 0.25
"""An updated native index is rebuilt from its live vectors (compacted) once more than this
share of its nodes are marked deleted (issue 16); until then deleted nodes only route queries."""


def _row_map(labels: Sequence[np.ndarray], size: int) -> np.ndarray:
    """int64 ``(size,)``: the row (within its layer) of every native id, ``-1`` for ids that
    are deleted (labels are unique across layers)."""
    out = np.full(max(int(size), 1), -1, dtype=np.int64)
    for lab in labels:
        if len(lab):
            out[lab] = np.arange(len(lab), dtype=np.int64)
    return out


def _to_rows(row_of: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of native ``ids`` (``-1`` padding dropped). Returns ``(rows, keep)``: int64 rows and
    the mask of ``ids`` that map to a live row."""
    ids = np.asarray(ids, dtype=np.int64)
    ok = (ids >= 0) & (ids < len(row_of))
    rows = np.full(len(ids), -1, np.int64)
    rows[ok] = row_of[ids[ok]]
    keep = rows >= 0
    return rows[keep], keep


def _apply_update(index, old_labels: np.ndarray, old_rows: np.ndarray, vectors: np.ndarray, layer: int) -> np.ndarray:
    """Mark the old labels no new row reuses deleted, add the vectors of new rows
    (``old_rows == -1``) to ``layer``; return the new rows' labels."""
    old_rows = np.asarray(old_rows, dtype=np.int64)
    reused = old_rows[old_rows >= 0]
    dead = np.ones(len(old_labels), bool)
    dead[reused] = False
    for label in old_labels[dead].tolist():
        index.mark_deleted(int(label))
    labels = np.full(len(old_rows), -1, np.int64)
    labels[old_rows >= 0] = old_labels[reused]
    fresh = np.flatnonzero(old_rows < 0)
    if len(fresh):
        start = len(index)
        index.add(np.ascontiguousarray(vectors[fresh], dtype=np.float32), layer)
        labels[fresh] = np.arange(start, start + len(fresh), dtype=np.int64)
    return labels


def _deleted_fraction(index) -> float:
    """Share of a native index's nodes marked deleted."""
    n = len(index)
    return float(index.num_deleted) / n if n else 0.0


def _compaction_due(index, n_rows: int, old_rows: Sequence[np.ndarray]) -> bool:
    """Whether an update keeping the current rows ``old_rows`` names (of ``n_rows``) and adding
    the ``-1`` rows would leave more than :data:`COMPACT_FRACTION` of the nodes deleted."""
    kept = sum(int((np.asarray(r) >= 0).sum()) for r in old_rows)
    added = sum(len(r) for r in old_rows) - kept
    return index.num_deleted + n_rows - kept > COMPACT_FRACTION * (len(index) + added)


def _clone(index):
    """An independent copy of a native index (the next engine state mutates its own copy, so
    queries of the previous state never see a half-applied update)."""
    return _chnsw().CHNSW.from_bytes(index.to_bytes())


def _live_labels(index, layer: int) -> np.ndarray:
    ids = np.asarray(index.ids_in_layer(layer), dtype=np.int64)
    if index.num_deleted:
        ids = ids[[not index.is_deleted(int(i)) for i in ids]] if len(ids) else ids
    return np.sort(ids)


class LayeredIndex:
    """Entities (layer 0) and community layers (1..L) in one C-HNSW.

    Row ``r`` of layer ``l`` (entity row ``r`` for ``l = 0``, community
    ``communities[l - 1][r]`` above) is the native node ``labels[l][r]``. A fresh build numbers
    nodes bottom-up in row order; an incremental update (:meth:`updated`) marks the nodes of
    removed or changed rows deleted and adds new nodes, so rows and native ids are mapped both
    ways (``labels`` and a dense id → row array).

    Args:
        index: the native ``graphstrata_chnsw.CHNSW``.
        labels: per layer, int64 ``(n_l,)`` native ids of the rows.
    """

    def __init__(self, index, labels: Sequence[np.ndarray]) -> None:
        self.index = index
        self.labels = [np.asarray(x, dtype=np.int64) for x in labels]
        self._row_of = _row_map(self.labels, len(index))

    @classmethod
    def build(
        cls, layer_vectors: Sequence[np.ndarray], M: int = 16, ef_construction: int = 100
    ) -> LayeredIndex:
        """Build the C-HNSW bottom-up from float32 ``(n_l, dim)`` arrays, layer 0 first.

        Raises:
            ValueError: empty layers, NaN/inf or zero vectors, mismatched dimensions (from
                ``graphstrata_chnsw``).
        """
        dim = int(layer_vectors[0].shape[1])
        index = _chnsw().CHNSW(dim, metric="cosine", M=M, ef_construction=ef_construction)
        return cls(index, []).add_layers(layer_vectors)

    def add_layers(self, layer_vectors: Sequence[np.ndarray]) -> LayeredIndex:
        """Add layers on top (float32 ``(n_l, dim)`` each, bottom-up) to an index that is not
        published yet (a build adds the community layers to the entity index it clustered
        with); returns ``self``. Nodes are numbered on from ``len(index)`` in row order.

        Raises:
            ValueError: empty layers, NaN/inf or zero vectors, mismatched dimensions (from
                ``graphstrata_chnsw``).
        """
        total = len(self.index)
        for vecs in layer_vectors:
            self.labels.append(np.arange(total, total + len(vecs), dtype=np.int64))
            _add_layer(self.index, vecs)
            total += len(vecs)
        self._row_of = _row_map(self.labels, len(self.index))
        return self

    def knn(self, k: int, layer: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Approximate k nearest rows of every row of ``layer`` (itself usually first): one
        batch C-HNSW search of the layer's stored vectors on :func:`index_threads` threads,
        beam ``max(32, 2k)`` (recall@17 0.99 on MuSiQue entities). Used for the k-NN edges of large levels
        (:func:`~graphstrata.hierarchy.knn_augment`) instead of an O(n²) exact scan.

        Returns:
            ``(rows, similarity)``: int64 ``(n_l, k)`` rows within the layer (``-1`` padding)
            and float32 ``(n_l, k)`` cosine similarities (``-inf`` padding), best first.
        """
        vecs = own_vectors(self.index, self.labels[layer], self.index.dim)
        with _threads(self.index, index_threads()):
            return self.search_layer(vecs, k, layer, ef_search=max(32, 2 * int(k)))

    @property
    def num_layers(self) -> int:
        """Layers in the index (1 + number of community layers)."""
        return len(self.labels)

    @property
    def deleted_fraction(self) -> float:
        """Share of native nodes marked deleted (0 after a build or a compaction)."""
        return _deleted_fraction(self.index)

    def updated(
        self,
        old_rows: Sequence[np.ndarray],
        layer_vectors: Sequence[np.ndarray],
        M: int = 16,
        ef_construction: int = 100,
    ) -> LayeredIndex:
        """The index of the next state; ``self`` is not modified (its queries continue).

        The next state's row ``r`` of layer ``l`` keeps the native node of the current row
        ``old_rows[l][r]``, or gets a new node with vector ``layer_vectors[l][r]`` where that
        is ``-1``; current rows no new row keeps are marked deleted. The update runs on a copy
        of the native index, or, when more than :data:`COMPACT_FRACTION` of the copy's nodes
        would be deleted, a fresh index is built from ``layer_vectors`` (compaction).

        Args:
            old_rows: per layer, int64 ``(n_l,)``: the current row each next row keeps, or -1.
            layer_vectors: per layer, all float32 ``(n_l, dim)`` vectors of the next state.
            M, ef_construction: build parameters of a compaction.

        Raises:
            ValueError: a layer count that differs from this index's, bad vectors.
        """
        if not (len(old_rows) == len(layer_vectors) == self.num_layers):
            raise ValueError(
                f"an update must keep the {self.num_layers} layers of the index, got "
                f"{len(old_rows)} / {len(layer_vectors)}"
            )
        if _compaction_due(self.index, sum(len(x) for x in self.labels), old_rows):
            return LayeredIndex.build(layer_vectors, M=M, ef_construction=ef_construction)
        index = _clone(self.index)
        labels = [
            _apply_update(index, self.labels[layer], old_rows[layer], layer_vectors[layer], layer)
            for layer in range(self.num_layers)
        ]
        return LayeredIndex(index, labels)

    def search_all_layers(
        self, query: np.ndarray, k: Sequence[int], ef_search: int | None = None
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Top-k per layer in one top-down pass.

        Args:
            query: float32 ``(dim,)``.
            k: one count per layer (layer 0 first).
            ef_search: beam width (``None``: the index default).

        Returns:
            Per layer ``(rows, similarity)``: int64 row indices *within the layer* and float32
            cosine similarities, best first, padding removed.
        """
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
        results = self.index.search_all_layers(q, list(map(int, k)), ef_search=ef_search)
        out = []
        for ids, dist in results:
            ids = np.asarray(ids, dtype=np.int64).reshape(-1)
            dist = np.asarray(dist).reshape(-1)
            rows, keep = _to_rows(self._row_of, ids)
            out.append((rows, (1.0 - dist[keep]).astype(np.float32)))
        return out

    def search_layer(
        self, queries: np.ndarray, k: int, layer: int = 0, ef_search: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Batch top-``k`` of one layer.

        Args:
            queries: float32 ``(q, dim)``.
            ef_search: beam width (``None``: the index default).

        Returns:
            ``(rows, similarity)``: int64 ``(q, k)`` rows within the layer (``-1`` padding)
            and float32 ``(q, k)`` cosine similarities (``-inf`` padding).

        Raises:
            ValueError: queries of the wrong dimension, NaN / infinite or zero, ``k`` ≤ 0;
            IndexError: no such layer (from ``graphstrata_chnsw``).
        """
        q = np.ascontiguousarray(queries, dtype=np.float32)
        ids, dist = self.index.search(q, int(k), layer=layer, ef_search=ef_search)
        ids = np.asarray(ids, dtype=np.int64).reshape(len(q), -1)
        sims = (1.0 - np.asarray(dist, dtype=np.float32)).reshape(len(q), -1)
        rows = np.full(ids.shape, -1, np.int64)
        flat_rows, keep = _to_rows(self._row_of, ids.ravel())
        flat = rows.reshape(-1)  # a view: rows is C-contiguous
        flat[keep] = flat_rows
        sims[rows < 0] = -np.inf
        return rows, sims

    def save(self, path: Path) -> None:
        """Write the native index file (checksummed, atomic)."""
        self.index.save(str(path))

    @classmethod
    def load(
        cls, path: Path, layer_sizes: Sequence[int], labels: Sequence[np.ndarray] | None = None
    ) -> LayeredIndex:
        """Open a native index file with the rows' native ids (``labels``, persisted beside it;
        ``None``: the live ids in insertion order, as a build numbers them).

        Raises:
            ValueError: a corrupt file, layers that do not match ``layer_sizes``, or labels
                that are not the live nodes of their layer.
        """
        index = _chnsw().CHNSW.load(str(path))
        live = [_live_labels(index, layer) for layer in range(index.num_layers)]
        if labels is None:
            labels = live
        else:
            labels = [np.asarray(x, np.int64) for x in labels]
            if len(labels) != len(live) or any(
                not np.array_equal(np.sort(a), b) for a, b in zip(labels, live, strict=True)
            ):
                raise ValueError(f"corrupt index: {path.name} does not hold the nodes its labels name")
        if index.num_layers != len(layer_sizes) or [len(x) for x in labels] != list(layer_sizes):
            raise ValueError(
                f"corrupt index: {path.name} has {index.num_layers} layers / "
                f"{sum(len(x) for x in labels)} live nodes, the database has "
                f"{len(layer_sizes)} / {sum(layer_sizes)}"
            )
        return cls(index, labels)


_CHNSW_MAGIC = b"\x89GSCHNSW"
_CHNSW_HEADER = 40  # bytes before the payload (native/README.md, "File format (version 1)")


def mapped_vectors(path: Path, index, labels: Sequence[np.ndarray]) -> list[np.ndarray | None]:
    """Read-only float32 ``(len(labels[i]), dim)`` views of the vectors a ``.chnsw`` file
    stores for each array of native ids in ``labels``, memory-mapped from the file instead of
    copied out of the native index (which holds its own copy): the pages are the page cache's,
    shared, read only when touched and dropped under memory pressure.

    The file's payload ends with its ``n × dim`` float32 vectors in node order (format
    version 1, ``native/README.md``). A view is made where the ids of one array are one run of
    consecutive nodes in row order (every array of a fresh build or a compaction) and the
    vector block is aligned for float32 (its offset depends on the node count); anything else
    gives ``None`` for that array, and the caller copies the vectors out of the index. The
    first and last row of every view are compared with the index's own (``get_vectors``).
    Versions never change once written (:mod:`graphstrata.store`), so a mapping stays valid
    even after a later write prunes the file.

    Args:
        path: the file ``index`` was loaded from.
        index: the loaded ``graphstrata_chnsw.CHNSW``.
        labels: int64 arrays of native ids (one per layer or row set).

    Returns:
        One view or ``None`` per array of ``labels``.
    """
    none: list[np.ndarray | None] = [None] * len(labels)
    dim, n = int(index.dim), len(index)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(_CHNSW_HEADER + 48)
        if len(head) < _CHNSW_HEADER + 48 or head[:8] != _CHNSW_MAGIC:
            return none
        version, header, payload = (
            int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little"),
            int.from_bytes(head[16:24], "little"),
        )
        p = _CHNSW_HEADER
        f_dim = int.from_bytes(head[p : p + 4], "little")
        f_layers = int.from_bytes(head[p + 32 : p + 36], "little")
        f_n = int.from_bytes(head[p + 40 : p + 48], "little")
        if (version, header) != (1, _CHNSW_HEADER) or size != _CHNSW_HEADER + payload:
            return none
        if (f_dim, f_n, f_layers) != (dim, n, int(index.num_layers)) or n == 0:
            return none
        ids_at = _CHNSW_HEADER + 48 + 16 * f_layers
        vec_at = size - n * dim * 4
        if vec_at < ids_at + 8 * n or vec_at % 4:
            return none  # an unaligned block would make numpy copy the matrix for every product
        ids = np.fromfile(path, dtype="<i8", count=n, offset=ids_at)
        if len(ids) != n or int(ids.min()) < 0:
            return none
        pos_of = np.full(int(ids.max()) + 1, -1, np.int64)
        pos_of[ids] = np.arange(n, dtype=np.int64)
        block = np.memmap(path, dtype="<f4", mode="r", offset=vec_at, shape=(n, dim))
    except (OSError, ValueError):
        return none
    out: list[np.ndarray | None] = []
    for lab in labels:
        lab = np.asarray(lab, np.int64)
        if not len(lab):
            out.append(np.zeros((0, dim), np.float32))
            continue
        if int(lab.max()) >= len(pos_of) or int(lab.min()) < 0:
            out.append(None)
            continue
        pos = pos_of[lab]
        start = int(pos[0])
        if start < 0 or not np.array_equal(pos, np.arange(start, start + len(lab), dtype=np.int64)):
            out.append(None)
            continue
        view = block[start : start + len(lab)].view(np.ndarray)
        ends = _read_vectors(index, lab[[0, -1]], dim)
        if not (np.array_equal(view[0], ends[0]) and np.array_equal(view[-1], ends[1])):
            out.append(None)
            continue
        out.append(view)
    return out


def stored_vectors(chunk_index: ChunkIndex, layered: LayeredIndex | None, dim: int) -> dict[str, np.ndarray]:
    """The state's vectors read back from its C-HNSW indexes, by row: ``"chunks"`` (also set as
    ``chunk_index.vectors``) and :func:`layer_vectors`, float32 ``(n, dim)``, as the indexes
    store them (L2-normalised there): read-only views of the indexes' memory where the rows are
    consecutive nodes (:func:`own_vectors`: a build), else copies. A build and an update keep
    these rather than their own input vectors, so a state and the same state loaded from disk,
    where vectors are only in the ``.chnsw`` files (schema 5), hold identical bits.

    Raises:
        ValueError: a label the index does not hold (a corrupt index).
    """
    chunk_index.vectors = own_vectors(chunk_index.index, chunk_index.labels, dim)
    return {"chunks": chunk_index.vectors, **layer_vectors(layered, dim)}


def layer_vectors(layered: LayeredIndex | None, dim: int, path: Path | None = None) -> dict[str, np.ndarray]:
    """``"entities"`` and ``"layer_<i>"``: float32 ``(n_l, dim)`` vectors of each layer of
    ``layered`` by row, as stored there (``"entities"`` empty without an index): read-only views
    of the index's own memory where they can be (:func:`shared_vectors`); otherwise, with the
    ``path`` the index was loaded from, memory-mapped from it where they can be
    (:func:`mapped_vectors`), else copied.

    Raises:
        ValueError: a label the index does not hold (a corrupt index).
    """
    if layered is None:
        return {"entities": np.zeros((0, dim), dtype=np.float32)}
    names = ["entities"] + [f"layer_{i}" for i in range(1, layered.num_layers)]
    out = {name: shared_vectors(layered.index, lab, dim) for name, lab in zip(names, layered.labels, strict=True)}
    if path is not None and any(v is None for v in out.values()):
        mapped = mapped_vectors(path, layered.index, layered.labels)
        out = {name: v if v is not None else m for (name, v), m in zip(out.items(), mapped, strict=True)}
    return {
        name: view if view is not None else _read_vectors(layered.index, lab, dim)
        for (name, view), lab in zip(out.items(), layered.labels, strict=True)
    }


class ChunkIndex:
    """Chunk vectors: a single-layer C-HNSW for top-N search plus exact scoring.

    Args:
        index: a ``CHNSW`` whose layer 0 holds the chunk vectors.
        vectors: float32 ``(n_chunks, dim)``, L2-normalised, in chunk row order.
        labels: int64 ``(n_chunks,)`` native ids of the rows (``None``: ``0..n-1``, a build).
    """

    def __init__(self, index, vectors: np.ndarray, labels: np.ndarray | None = None) -> None:
        self.index = index
        self.vectors = vectors
        self.labels = (
            np.arange(len(vectors), dtype=np.int64) if labels is None else np.asarray(labels, np.int64)
        )
        self._row_of = _row_map([self.labels], len(index))

    @classmethod
    def build(cls, vectors: np.ndarray, M: int = 16, ef_construction: int = 100) -> ChunkIndex:
        """Index float32 ``(n_chunks, dim)`` L2-normalised chunk vectors (ids = rows).

        The index keeps a zero-copy view of the vectors the C-HNSW stores
        (:func:`shared_vectors`) rather than ``vectors``, so the caller's array is freed when
        the caller drops it (a build holds its chunk vectors only until the entity vectors are
        made: 1 GB at 1M chunks; issue 33); where no view can be made, ``vectors`` itself."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        dim = int(vectors.shape[1])
        index = _chnsw().CHNSW(dim, metric="cosine", M=M, ef_construction=ef_construction)
        _add_layer(index, vectors)
        view = shared_vectors(index, np.arange(len(vectors), dtype=np.int64), dim)
        return cls(index, vectors if view is None else view)

    @property
    def deleted_fraction(self) -> float:
        """Share of native nodes marked deleted (0 after a build or a compaction)."""
        return _deleted_fraction(self.index)

    def updated(
        self, old_rows: np.ndarray, vectors: np.ndarray, M: int = 16, ef_construction: int = 100
    ) -> ChunkIndex:
        """The chunk index of the next state (as :meth:`LayeredIndex.updated`, one layer).

        Args:
            old_rows: int64 ``(n,)``: the current row each next row keeps, or -1 (new chunk).
            vectors: float32 ``(n, dim)``: all chunk vectors of the next state.
            M, ef_construction: build parameters of a compaction.

        Raises:
            ValueError: vectors of the wrong dimension, NaN / infinite or zero (from
                ``graphstrata_chnsw``).
        """
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if _compaction_due(self.index, len(self.labels), [old_rows]):
            return ChunkIndex.build(vectors, M=M, ef_construction=ef_construction)
        index = _clone(self.index)
        labels = _apply_update(index, self.labels, old_rows, vectors, 0)
        return ChunkIndex(index, vectors, labels)

    def search(self, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Approximate top-``n`` chunks: int64 rows and float32 cosine similarities."""
        n = min(int(n), len(self.vectors))
        if n <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
        ids, dist = self.index.search(q, n, layer=0, ef_search=max(64, 2 * n))
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        dist = np.asarray(dist).reshape(-1)
        rows, keep = _to_rows(self._row_of, ids)
        return rows, (1.0 - dist[keep]).astype(np.float32)

    def similarity(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Exact cosine similarity of ``query`` to chunk ``rows``: float32 ``(len(rows),)``."""
        return self.vectors[np.asarray(rows, dtype=np.int64)] @ np.asarray(query, np.float32)

    def save(self, path: Path) -> None:
        """Write the native index file (checksummed, atomic)."""
        self.index.save(str(path))

    @classmethod
    def load(cls, path: Path, vectors: np.ndarray | None, labels: np.ndarray | None = None) -> ChunkIndex:
        """Open a native index file (``labels`` as in :meth:`LayeredIndex.load`); ``vectors``
        ``None`` (schema ≥ 5): the file's own, memory-mapped where they can be
        (:func:`mapped_vectors`), else copied. ``ValueError`` if corrupt or not matching
        ``vectors``."""
        index = _chnsw().CHNSW.load(str(path))
        live = _live_labels(index, 0) if index.num_layers else np.zeros(0, np.int64)
        if labels is None:
            labels = live
        elif not np.array_equal(np.sort(np.asarray(labels, np.int64)), live):
            raise ValueError(f"corrupt index: {path.name} does not hold the chunks its labels name")
        if vectors is None:  # the index's own (a view), else memory-mapped from the file, else copied
            vectors = shared_vectors(index, labels, index.dim)
            if vectors is None and len(labels):
                vectors = mapped_vectors(path, index, [labels])[0]
            if vectors is None:
                vectors = _read_vectors(index, labels, index.dim)
        if len(labels) != len(vectors):
            raise ValueError(
                f"corrupt index: {path.name} holds {len(labels)} live chunks, vectors hold {len(vectors)}"
            )
        return cls(index, vectors, labels)
