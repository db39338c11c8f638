"""Vector and lexical indexes over the store.

* :class:`LayeredIndex` — one C-HNSW (``graphstrata_chnsw.CHNSW``) holding entities at layer 0
  and the community layers 1..L above; one call answers every layer (ArchRAG §3.2.1).
* :class:`ChunkIndex` — chunk vectors in their own single-layer C-HNSW, plus the raw vectors for
  exact re-scoring of candidate chunks.
* :class:`BM25Index` — Okapi BM25 over chunk texts (bm25s, Lucene variant).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

_TOKEN_RE = re.compile(r"\w+", re.UNICODE)
# parts of a CamelCase / letter-digit word: "WolfgangSchulz" -> Wolfgang, Schulz; "HTTPServer2"
# -> HTTP, Server, 2
_PART_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def _chnsw():
    import graphstrata_chnsw

    return graphstrata_chnsw


class LayeredIndex:
    """Entities (layer 0) and community layers (1..L) in one C-HNSW.

    Node ids: entity row ``i`` → id ``i``; community row ``j`` of layer ``l`` → id
    ``offsets[l] + j`` where ``offsets[l]`` is the number of nodes below layer ``l``.

    Args:
        layer_vectors: float32 arrays ``(n_l, dim)``, layer 0 first.
        M, ef_construction: C-HNSW build parameters.
    """

    def __init__(self, index, offsets: list[int]) -> None:
        self.index = index
        self.offsets = offsets

    @classmethod
    def build(
        cls, layer_vectors: Sequence[np.ndarray], M: int = 16, ef_construction: int = 200
    ) -> LayeredIndex:
        """Build the C-HNSW bottom-up from float32 ``(n_l, dim)`` arrays, layer 0 first.

        Raises:
            ValueError: empty layers, NaN/inf or zero vectors, mismatched dimensions (from
                ``graphstrata_chnsw``).
        """
        dim = int(layer_vectors[0].shape[1])
        index = _chnsw().CHNSW(dim, metric="cosine", M=M, ef_construction=ef_construction)
        offsets = []
        total = 0
        for vecs in layer_vectors:
            offsets.append(total)
            index.add_layer(np.ascontiguousarray(vecs, dtype=np.float32))
            total += len(vecs)
        return cls(index, offsets)

    @property
    def num_layers(self) -> int:
        """Layers in the index (1 + number of community layers)."""
        return len(self.offsets)

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
        for layer, (ids, dist) in enumerate(results):
            ids = np.asarray(ids).reshape(-1)
            dist = np.asarray(dist).reshape(-1)
            keep = ids >= 0
            out.append(((ids[keep] - self.offsets[layer]).astype(np.int64), 1.0 - dist[keep]))
        return out

    def save(self, path: Path) -> None:
        """Write the native index file (checksummed, atomic)."""
        self.index.save(str(path))

    @classmethod
    def load(cls, path: Path, layer_sizes: Sequence[int]) -> LayeredIndex:
        """Open a native index file; ``ValueError`` if corrupt or its layers do not match."""
        index = _chnsw().CHNSW.load(str(path))
        offsets = list(np.cumsum([0, *layer_sizes[:-1]]).astype(int)) if layer_sizes else []
        if index.num_layers != len(layer_sizes) or len(index) != sum(layer_sizes):
            raise ValueError(
                f"corrupt index: {path.name} has {index.num_layers} layers / {len(index)} nodes, "
                f"the database has {len(layer_sizes)} / {sum(layer_sizes)}"
            )
        return cls(index, [int(o) for o in offsets])


class ChunkIndex:
    """Chunk vectors: a single-layer C-HNSW for top-N search plus exact scoring.

    Args:
        index: a ``CHNSW`` whose layer 0 holds the chunk vectors (ids = chunk rows).
        vectors: float32 ``(n_chunks, dim)``, L2-normalised.
    """

    def __init__(self, index, vectors: np.ndarray) -> None:
        self.index = index
        self.vectors = vectors

    @classmethod
    def build(cls, vectors: np.ndarray, M: int = 16, ef_construction: int = 200) -> ChunkIndex:
        """Index float32 ``(n_chunks, dim)`` L2-normalised chunk vectors (ids = rows)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        index = _chnsw().CHNSW(
            int(vectors.shape[1]), metric="cosine", M=M, ef_construction=ef_construction
        )
        index.add_layer(vectors)
        return cls(index, vectors)

    def search(self, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Approximate top-``n`` chunks: int64 rows and float32 cosine similarities."""
        n = min(int(n), len(self.vectors))
        if n <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
        ids, dist = self.index.search(q, n, layer=0, ef_search=max(64, 2 * n))
        ids = np.asarray(ids).reshape(-1)
        dist = np.asarray(dist).reshape(-1)
        keep = ids >= 0
        return ids[keep].astype(np.int64), (1.0 - dist[keep]).astype(np.float32)

    def similarity(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Exact cosine similarity of ``query`` to chunk ``rows``: float32 ``(len(rows),)``."""
        return self.vectors[np.asarray(rows, dtype=np.int64)] @ np.asarray(query, np.float32)

    def save(self, path: Path) -> None:
        """Write the native index file (checksummed, atomic)."""
        self.index.save(str(path))

    @classmethod
    def load(cls, path: Path, vectors: np.ndarray) -> ChunkIndex:
        """Open a native index file; ``ValueError`` if corrupt or not matching ``vectors``."""
        index = _chnsw().CHNSW.load(str(path))
        if len(index) != len(vectors):
            raise ValueError(
                f"corrupt index: {path.name} holds {len(index)} chunks, vectors hold {len(vectors)}"
            )
        return cls(index, vectors)


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
    a subject title (:func:`graphstrata.indexing.lexical_texts`: a title-field boost).
    """

    k1 = 1.5
    b = 0.75

    def __init__(self, texts: Sequence[str]) -> None:
        self.n = len(texts)
        tokens = [bm25_tokenize(t) for t in texts]
        self._bm25 = None
        if any(tokens):  # bm25s needs at least one token in the corpus
            import bm25s

            self._bm25 = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
            self._bm25.index(tokens, show_progress=False)

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
