"""Vector and lexical indexes over the store.

* :class:`LayeredIndex` — one C-HNSW (``graphstrata_chnsw.CHNSW``) holding entities at layer 0
  and the community layers 1..L above; one call answers every layer (ArchRAG §3.2.1).
* :class:`ChunkIndex` — chunk vectors in their own single-layer C-HNSW, plus the raw vectors for
  exact re-scoring of candidate chunks.
* :class:`BM25Index` — Okapi BM25 over chunk texts (bm25s, Lucene variant), each chunk indexed
  as its :func:`lexical_texts` entry.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .extraction import document_title

if TYPE_CHECKING:  # pragma: no cover
    from .types import Chunk, Document

_TOKEN_RE = re.compile(r"\w+", re.UNICODE)
# parts of a CamelCase / letter-digit word: "WolfgangSchulz" -> Wolfgang, Schulz; "HTTPServer2"
# -> HTTP, Server, 2
_PART_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def _chnsw():
    import graphstrata_chnsw

    return graphstrata_chnsw


PARALLEL_BUILD_MIN = 20_000
"""A C-HNSW layer of at least this many vectors is built on :func:`index_threads` threads.
Parallel inserts race for neighbour slots, so the links of such a layer (and approximate
results that depend on them) can differ between two builds of the same vectors; smaller layers
are built on one thread and are identical from build to build."""


def index_threads() -> int:
    """Threads for building large C-HNSW layers and batch k-NN queries:
    ``$GRAPHSTRATA_NUM_THREADS`` when set, else the CPUs this process may run on."""
    env = os.environ.get("GRAPHSTRATA_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


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
    """``index.add_layer(vectors)`` on :func:`index_threads` threads when the layer has at least
    :data:`PARALLEL_BUILD_MIN` vectors, else on one."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    with _threads(index, index_threads() if len(vectors) >= PARALLEL_BUILD_MIN else 1):
        index.add_layer(vectors)


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
        vecs = _read_vectors(self.index, self.labels[layer], self.index.dim)
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


def stored_vectors(chunk_index: ChunkIndex, layered: LayeredIndex | None, dim: int) -> dict[str, np.ndarray]:
    """The state's vectors read back from its C-HNSW indexes, by row: ``"chunks"`` (also set as
    ``chunk_index.vectors``) and :func:`layer_vectors`, float32 ``(n, dim)``, as the indexes
    store them (L2-normalised there). A build and an update keep these copies rather than their
    own, so a state and the same state loaded from disk, where vectors are only in the
    ``.chnsw`` files (schema 5), hold identical bits.

    Raises:
        ValueError: a label the index does not hold (a corrupt index).
    """
    chunk_index.vectors = _read_vectors(chunk_index.index, chunk_index.labels, dim)
    return {"chunks": chunk_index.vectors, **layer_vectors(layered, dim)}


def layer_vectors(layered: LayeredIndex | None, dim: int) -> dict[str, np.ndarray]:
    """``"entities"`` and ``"layer_<i>"``: float32 ``(n_l, dim)`` vectors of each layer of
    ``layered`` by row, as stored there (``"entities"`` empty without an index).

    Raises:
        ValueError: a label the index does not hold (a corrupt index).
    """
    if layered is None:
        return {"entities": np.zeros((0, dim), dtype=np.float32)}
    out = {"entities": _read_vectors(layered.index, layered.labels[0], dim)}
    for i in range(1, layered.num_layers):
        out[f"layer_{i}"] = _read_vectors(layered.index, layered.labels[i], dim)
    return out


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
        """Index float32 ``(n_chunks, dim)`` L2-normalised chunk vectors (ids = rows)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        index = _chnsw().CHNSW(
            int(vectors.shape[1]), metric="cosine", M=M, ef_construction=ef_construction
        )
        _add_layer(index, vectors)
        return cls(index, vectors)

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
        ``None`` (schema 5): read from the file. ``ValueError`` if corrupt or not matching
        ``vectors``."""
        index = _chnsw().CHNSW.load(str(path))
        live = _live_labels(index, 0) if index.num_layers else np.zeros(0, np.int64)
        if labels is None:
            labels = live
        elif not np.array_equal(np.sort(np.asarray(labels, np.int64)), live):
            raise ValueError(f"corrupt index: {path.name} does not hold the chunks its labels name")
        if vectors is None:
            vectors = _read_vectors(index, labels, index.dim)
        if len(labels) != len(vectors):
            raise ValueError(
                f"corrupt index: {path.name} holds {len(labels)} live chunks, vectors hold {len(vectors)}"
            )
        return cls(index, vectors, labels)


def bm25_tokenize(text: str) -> list[str]:
    """Lower-cased word tokens minus English stop words (scikit-learn's list).

    A word made of several CamelCase or letter/digit parts also yields its parts, so the query
    "Wolfgang" matches the chat speaker "WolfgangSchulz" and "Li Hua" matches "LiHua" (measured:
    BM25 recall@5 on LiHua-World 0.81 → 0.90; ±0.01 on MuSiQue / HotpotQA).
    """
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    out = []
    for word in _TOKEN_RE.findall(text):
        lower = word.lower()
        parts = _PART_RE.findall(word)
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
        out.append(lower)
    return [t for t in out if t not in ENGLISH_STOP_WORDS]


def lexical_texts(chunks: Sequence[Chunk], documents: Mapping[str, Document], use_titles: bool) -> list[str]:
    """The text BM25 indexes per chunk: ``"<title>\\n<text>"`` when ``use_titles`` and the
    chunk's document has a subject title (:func:`~graphstrata.extraction.document_title`),
    else the chunk text.

    This gives every chunk of a document its title, and counts the title once more where the
    text already starts with it (JSONL records get their title prepended on loading): a
    title-field boost in the spirit of BM25F. Measured BM25 recall@5 with vs without it:
    MuSiQue 0.496 vs 0.479, HotpotQA 0.773 vs 0.760 (dev questions).
    """
    out = []
    for c in chunks:
        doc = documents.get(c.document_id)
        title = document_title(doc.metadata.get("title")) if use_titles and doc else None
        out.append(f"{title}\n{c.text}" if title else c.text)
    return out


class BM25Index:
    """Okapi BM25 over chunk texts (bm25s, Lucene variant); rebuilt on load.

    bm25s keeps the per-term scores in a sparse matrix, so a query costs one column sum per
    query term: p50 0.2 ms on LiHua-World's 1,543 chunks and HotpotQA's 3,326, against 13 and
    47 ms for rank-bm25's per-document Python loop (same busy 2-core VM, interleaved); building
    takes 1.3–1.9× rank-bm25's (0.7 s for LiHua-World, tokenising included).

    A chunk's score for a query is ``Σ_t idf(t) · tf / (tf + k1 · (1 − b + b · len / avg_len))``
    over the query tokens ``t`` (:func:`bm25_tokenize`, repeats counted), with ``k1 = 1.5``,
    ``b = 0.75`` and the Lucene idf ``ln(1 + (N − df + 0.5) / (df + 0.5))``, which is positive
    for every term: a chunk sharing no term with the query scores exactly 0 and a chunk that
    matches scores above 0, however small the corpus and however many chunks share a term.
    (rank-bm25, used before, gives terms in more than half the chunks a negative idf floored at
    ``0.25 × mean idf``: on small corpora every chunk could score 0, or a matching chunk below
    a non-matching one.)

    Each term's part is below its idf (the tf factor saturates below 1), so
    :meth:`max_score` — the sum of the query tokens' idf — bounds every chunk's score for that
    query; :meth:`unit_scores` divides by it (scores in [0, 1), order unchanged).

    The engine indexes each chunk as ``"<document title>\n<chunk text>"`` when its document has
    a subject title (:func:`lexical_texts`: a title-field boost).

    Args:
        texts: chunk texts (tokenised with :func:`bm25_tokenize`), or
        tokens: their token lists, already tokenised (kept as :attr:`tokens`).
        lazy: build the bm25s index on first use (thread-safe) instead of now.
    """

    k1 = 1.5
    b = 0.75

    def __init__(
        self, texts: Sequence[str] = (), tokens: Sequence[list[str]] | None = None, lazy: bool = False
    ) -> None:
        if tokens is None:
            tokens = [bm25_tokenize(t) for t in texts]
        tokens = list(tokens)
        self.n = len(tokens)
        self.tokens = tokens
        self._index = None
        self._lock = threading.Lock()
        if not lazy:
            _ = self._bm25

    @property
    def _bm25(self):
        """The bm25s index, built on first use (``None`` for a corpus without any token)."""
        if self._index is None:
            with self._lock:
                if self._index is None and any(self.tokens):  # bm25s needs at least one token
                    import bm25s

                    index = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
                    index.index(self.tokens, show_progress=False)
                    self._index = index
        return self._index

    def updated(self, keep_rows: np.ndarray, new_texts: Sequence[str]) -> BM25Index:
        """The BM25 index of the next state: the kept rows' tokens (in order) then the new
        texts'. Only the new texts are tokenised; bm25s re-indexes the token lists (its score
        matrix bakes in idf and average length, so exact scores need the whole re-index:
        about 0.2 s per 3,000 chunks here, against ~1 s with tokenising). The re-index is lazy:
        it runs on the first query of the next state, so a burst of inserts pays it once."""
        kept = [self.tokens[int(i)] for i in np.asarray(keep_rows, np.int64)]
        return BM25Index(tokens=kept + [bm25_tokenize(t) for t in new_texts], lazy=True)

    def df(self, term: str) -> int:
        """Number of chunks holding ``term`` (one token of :func:`bm25_tokenize`)."""
        if self._bm25 is None:
            return 0
        tid = self._bm25.vocab_dict.get(term)
        indptr = self._bm25.scores["indptr"]  # CSC over the vocabulary: one column per term
        if tid is None or tid + 1 >= len(indptr):
            return 0
        return int(indptr[tid + 1] - indptr[tid])

    def idf(self, term: str) -> float:
        """Lucene idf of one (already tokenised) term; a term in no chunk has the largest."""
        df = self.df(term)
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for ``query``: float32 ``(n_chunks,)``, all ≥ 0."""
        q = bm25_tokenize(query)
        if not q or self._bm25 is None:
            return np.zeros(self.n, dtype=np.float32)
        ids = self._bm25.get_tokens_ids(q)
        if not ids:
            return np.zeros(self.n, dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float32)

    def top(self, query: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` best-scoring chunks that share a term with ``query``, from the postings of
        the query's terms only: the work is the query terms' document frequencies, not the
        corpus size (:meth:`scores` fills an array over every chunk).

        Returns:
            ``(rows, scores)``: int64 rows and float32 BM25 scores (> 0), best first, ties by
            row; at most ``n`` of them (fewer when fewer chunks match).
        """
        q = bm25_tokenize(query)
        if not q or self._bm25 is None or n <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        ids = self._bm25.get_tokens_ids(q)
        if not ids:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        mat = self._bm25.scores  # CSC over the vocabulary: one column (doc rows, parts) per term
        indptr, indices, data = mat["indptr"], mat["indices"], mat["data"]
        parts_rows, parts_vals = [], []
        for tid in ids:  # a repeated query token counts once per repeat, as in bm25s
            a, b = int(indptr[tid]), int(indptr[tid + 1])
            parts_rows.append(indices[a:b])
            parts_vals.append(data[a:b])
        rows = np.concatenate(parts_rows).astype(np.int64, copy=False)
        if not len(rows):
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        vals = np.concatenate(parts_vals).astype(np.float64)
        if len(rows) * 16 >= self.n:  # postings long against the corpus: one dense pass is cheaper
            dense = np.bincount(rows, weights=vals, minlength=self.n)
            uniq = np.flatnonzero(dense > 0)
            sums = dense[uniq].astype(np.float32)
        else:
            uniq, inverse = np.unique(rows, return_inverse=True)
            sums = np.bincount(inverse, weights=vals, minlength=len(uniq)).astype(np.float32)
            keep = sums > 0
            uniq, sums = uniq[keep], sums[keep]
        if len(uniq) > n:  # every row that can make the cut, ties at the n-th score included
            kth = np.partition(sums, len(sums) - n)[len(sums) - n]
            cand = sums >= kth
            uniq, sums = uniq[cand], sums[cand]
        order = np.lexsort((uniq, -sums))[:n]
        return uniq[order], sums[order]

    def max_score(self, query: str) -> float:
        """Upper bound of any chunk's :meth:`scores` for ``query``: the sum of its tokens' idf
        (a token no chunk contains counts too, with ``df = 0``: a chunk can match at most the
        rest of the query). 0 for a query with no token."""
        return float(sum(self.idf(t) for t in bm25_tokenize(query)))

    def unit_scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """``(raw, unit)``: :meth:`scores` and the same divided by :meth:`max_score`, clipped to
        [0, 1] — the idf-weighted, saturated share of the query a chunk matches."""
        raw = self.scores(query)
        bound = self.max_score(query)
        if bound <= 0:
            return raw, np.zeros_like(raw)
        return raw, np.clip(raw / np.float32(bound), 0.0, 1.0).astype(np.float32)
