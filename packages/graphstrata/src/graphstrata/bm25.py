"""Okapi BM25 over chunk texts: :class:`BM25Index` (bm25s' Lucene variant, as numpy arrays that
are persisted with the index), its tokeniser :func:`bm25_tokenize` with scikit-learn's
:func:`english_stop_words`, and :func:`lexical_texts`, the text each chunk is indexed as.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .cjk import cjk_words
from .extraction import document_title

if TYPE_CHECKING:  # pragma: no cover
    from .types import Chunk, Document

_TOKEN_RE = re.compile(r"\w+", re.UNICODE)
# parts of a CamelCase / letter-digit word: "WolfgangSchulz" -> Wolfgang, Schulz; "HTTPServer2"
# -> HTTP, Server, 2
_PART_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def bm25_tokenize(text: str) -> list[str]:
    """Lower-cased word tokens minus English stop words (scikit-learn's list).

    A word made of several CamelCase or letter/digit parts also yields its parts, so the query
    "Wolfgang" matches the chat speaker "WolfgangSchulz" and "Li Hua" matches "LiHua" (measured:
    BM25 recall@5 on LiHua-World 0.81 → 0.90; ±0.01 on MuSiQue / HotpotQA).
    """
    stop = english_stop_words()
    out = []
    for word in cjk_words(_TOKEN_RE.findall(text)):  # CJK runs: character bigrams (cjk.py)
        lower = word.lower()
        parts = _PART_RE.findall(word)
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
        out.append(lower)
    return [t for t in out if t not in stop]


_STOP_WORDS: frozenset[str] | None = None


def english_stop_words() -> frozenset[str]:
    """scikit-learn's English stop words, read when first needed; a loaded index reads them
    while loading (:meth:`BM25Index.from_arrays`), not on its first query.

    The list is scikit-learn's own ``sklearn/feature_extraction/_stop_words.py`` (a module with
    no imports), executed by itself: importing scikit-learn for it costs 1–3 s and ~70 MB of
    RSS that a query never needs. Where that file is not found, scikit-learn is imported.
    """
    global _STOP_WORDS
    if _STOP_WORDS is None:
        import sys

        words: frozenset[str] | None = None
        text_module = sys.modules.get("sklearn.feature_extraction.text")
        if text_module is None:
            try:
                import importlib.util

                found = importlib.util.find_spec("sklearn")  # locates it, runs nothing
                if found is not None and found.submodule_search_locations:
                    path = Path(next(iter(found.submodule_search_locations))) / "feature_extraction" / "_stop_words.py"
                    spec = importlib.util.spec_from_file_location("graphstrata._sklearn_stop_words", path)
                    if spec is not None and spec.loader is not None and path.is_file():
                        module = importlib.util.module_from_spec(spec)
                        spec.loader.exec_module(module)
                        words = frozenset(module.ENGLISH_STOP_WORDS)
            except Exception:  # noqa: BLE001 - any surprise: import scikit-learn below
                words = None
        if not words:
            from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

            words = frozenset(ENGLISH_STOP_WORDS)
        _STOP_WORDS = words
    return _STOP_WORDS


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


class _Vocabulary:
    """A sorted vocabulary in two arrays: the terms' UTF-8 bytes end to end (``blob``) and the
    offsets of each term in it (``offsets``, int64 ``(V + 1,)``); term ``i`` is column ``i``.
    About 10 bytes per term against ~120 for a ``dict`` of ``str`` (a 1M-chunk corpus has
    millions of distinct tokens); a lookup is a binary search (~20 byte comparisons)."""

    __slots__ = ("blob", "offsets", "_n")

    def __init__(self, blob: bytes, offsets: np.ndarray) -> None:
        self.blob = bytes(blob)
        self.offsets = np.asarray(offsets, np.int64)
        self._n = len(self.offsets) - 1

    @classmethod
    def from_sorted(cls, terms: Sequence[bytes]) -> _Vocabulary:
        """From UTF-8 terms already in ascending byte order, without duplicates."""
        offsets = np.zeros(len(terms) + 1, np.int64)
        if terms:
            np.cumsum(np.fromiter(map(len, terms), np.int64, len(terms)), out=offsets[1:])
        return cls(b"".join(terms), offsets)

    def __len__(self) -> int:
        return self._n

    def term(self, i: int) -> bytes:
        """UTF-8 bytes of term ``i``."""
        off = self.offsets
        return self.blob[int(off[i]) : int(off[i + 1])]

    def terms(self) -> list[bytes]:
        """Every term (UTF-8 bytes), in column order."""
        off = self.offsets.tolist()
        blob = self.blob
        return [blob[a:b] for a, b in zip(off[:-1], off[1:])]

    def get(self, term: str) -> int | None:
        """Column of ``term``, or ``None`` when no chunk holds it."""
        key = term.encode("utf-8", "surrogatepass")
        lo, hi = 0, self._n
        off, blob = self.offsets, self.blob
        while lo < hi:
            mid = (lo + hi) // 2
            if blob[int(off[mid]) : int(off[mid + 1])] < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < self._n and blob[int(off[lo]) : int(off[lo + 1])] == key:
            return lo
        return None


def _bm25_matrix(
    n: int, rows: np.ndarray, cols: np.ndarray, tf: np.ndarray, n_terms: int, k1: float, b: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The BM25 score matrix of ``n`` documents from their (document, term, count) triples.

    Each stored score is bit for bit what bm25s 0.3 (``method="lucene"``) computes: idf
    ``ln(1 + (N − df + 0.5) / (df + 0.5))`` in double precision rounded to float32, the term
    part ``tf / (k1 · ((1 − b) + b · len / avg_len) + tf)`` in float64, their product rounded to
    float32 (``tests/core/test_bm25.py`` compares with bm25s on random corpora).

    Args:
        n: documents (rows); documents without a term count in the average length as 0.
        rows, cols, tf: one entry per (document, term) pair: int document rows, int term
            columns in ``[0, n_terms)``, positive int counts.

    Returns:
        ``(indptr, indices, data, tf)``: CSC over the terms: int64 ``(n_terms + 1,)``, int32
        document rows ascending within a column, float32 scores, and the counts in the same
        order (uint16, or uint32 when a count exceeds 65,535).
    """
    rows = np.asarray(rows, np.int64)
    cols = np.asarray(cols, np.int64)
    tf = np.asarray(tf, np.int64)
    order = np.lexsort((rows, cols))
    rows, cols, tf = rows[order], cols[order], tf[order]
    indptr = np.zeros(n_terms + 1, np.int64)
    np.cumsum(np.bincount(cols, minlength=n_terms), out=indptr[1:])
    if not len(rows):
        return indptr, np.zeros(0, np.int32), np.zeros(0, np.float32), np.zeros(0, np.uint16)
    doc_len = np.bincount(rows, weights=tf, minlength=n).astype(np.int64)
    avg_len = doc_len.mean()  # float64, as bm25s: the mean of an int array of lengths
    df = np.diff(indptr)
    uniq, inv = np.unique(df, return_inverse=True)
    idf_u = np.array([math.log(1 + (n - int(d) + 0.5) / (int(d) + 0.5)) for d in uniq.tolist()], np.float64)
    idf = idf_u.astype(np.float32)[inv]  # per term, float32 as bm25s stores it
    tf32 = tf.astype(np.float32)
    norm = k1 * ((1 - b) + b * doc_len[rows] / avg_len)  # float64 per entry
    tfc = tf32 / (norm + tf32)  # float64 (float32 counts are exact)
    data = (idf[cols] * tfc).astype(np.float32)
    counts = tf.astype(np.uint16 if tf.max() <= np.iinfo(np.uint16).max else np.uint32)
    return indptr, rows.astype(np.int32), data, counts


def _term_counts(tokens: Sequence[Sequence[str]]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Distinct terms (first-seen order) and the (document, term id, count) triples of token
    lists."""
    from array import array
    from collections import Counter

    vocab: dict[str, int] = {}
    rows, cols, counts = array("q"), array("q"), array("q")  # 8 bytes an entry, no int objects
    for d, toks in enumerate(tokens):
        c = Counter(toks)
        rows.extend([d] * len(c))
        cols.extend(vocab.setdefault(t, len(vocab)) for t in c)
        counts.extend(c.values())
    return (
        list(vocab),
        np.frombuffer(rows, np.int64) if len(rows) else np.zeros(0, np.int64),
        np.frombuffer(cols, np.int64) if len(cols) else np.zeros(0, np.int64),
        np.frombuffer(counts, np.int64) if len(counts) else np.zeros(0, np.int64),
    )


BM25_FORMAT = 1
"""Version of :meth:`BM25Index.to_arrays`' arrays (persisted as ``bm25.npz``, index schema 6)."""

BM25_PRUNE_MIN = 16_384
"""Postings (summed over a query's terms) above which :meth:`BM25Index.top` skips common
terms by MaxScore; below it reading every posting is as cheap."""

BM25_SEED_ROWS = 4_096
"""Rows of one term :meth:`BM25Index.top`'s MaxScore scores whole for its first bound (a common
term's rows with its largest parts)."""

BM25_IMPACT_ROWS = 4_096
"""Postings per term that :meth:`BM25Index.top_impact` reads: a term held by more chunks is read
only in its ``BM25_IMPACT_ROWS`` chunks of largest score part (its impact-ordered prefix, kept
at index and load time: 8 bytes a row, ~51 MB at a million chunks)."""

_BOUND_MARGIN = 1e-6
"""Relative slack of MaxScore's bounds in :meth:`BM25Index.top` (float32 rounds at ~6e-8)."""


def _best(rows: np.ndarray, sums: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` largest ``sums`` (float32) with their ``rows`` (int64, ascending), best first,
    ties by row."""
    if len(rows) > n:  # every row that can make the cut, ties at the n-th score included
        kth = np.partition(sums, len(sums) - n)[len(sums) - n]
        cand = sums >= kth
        rows, sums = rows[cand], sums[cand]
    order = np.lexsort((rows, -sums))[:n]
    return rows[order], sums[order]


class BM25Index:
    """Okapi BM25 over chunk texts (the Lucene variant of bm25s, computed here in numpy).

    The index is a score matrix in CSC form over the vocabulary — per term the rows of the
    chunks holding it and each one's precomputed score part — plus the term counts behind it
    (for updates); a query costs one column read per query term. The arrays are persisted
    with the index (:meth:`to_arrays`, ``bm25.npz``) so a load neither tokenises nor indexes
    a chunk; memory is ~10 bytes per (chunk, distinct term) pair plus ~10 bytes per term (no
    token lists, no Python object per term).

    A chunk's score for a query is ``Σ_t idf(t) · tf / (tf + k1 · (1 − b + b · len / avg_len))``
    over the query tokens ``t`` (:func:`bm25_tokenize`, repeats counted), with ``k1 = 1.5``,
    ``b = 0.75`` and the Lucene idf ``ln(1 + (N − df + 0.5) / (df + 0.5))``, which is positive
    for every term: a chunk sharing no term with the query scores exactly 0 and a chunk that
    matches scores above 0, however small the corpus and however many chunks share a term.
    (rank-bm25, used before, gives terms in more than half the chunks a negative idf floored at
    ``0.25 × mean idf``: on small corpora every chunk could score 0, or a matching chunk below
    a non-matching one.) The stored scores are bit for bit those of bm25s 0.3, used before
    (:func:`_bm25_matrix`).

    Each term's part is below its idf (the tf factor saturates below 1), so
    :meth:`max_score` — the sum of the query tokens' idf — bounds every chunk's score for that
    query; :meth:`unit_scores` divides by it (scores in [0, 1), order unchanged).

    The engine indexes each chunk as ``"<document title>\\n<chunk text>"`` when its document has
    a subject title (:func:`lexical_texts`: a title-field boost).

    Args:
        texts: chunk texts (tokenised with :func:`bm25_tokenize`), or
        tokens: their token lists, already tokenised.
        lazy: accepted for compatibility; the index is always built at once (numpy, ~1 s per
            100k chunks after tokenising).
    """

    k1 = 1.5
    b = 0.75

    def __init__(
        self, texts: Sequence[str] = (), tokens: Sequence[Sequence[str]] | None = None, lazy: bool = False
    ) -> None:
        if tokens is None:
            tokens = [bm25_tokenize(t) for t in texts]
        terms, rows, cols, counts = _term_counts(tokens)
        self._init(len(tokens), terms, rows, cols, counts)

    def _init(self, n: int, terms: Sequence[str], rows: np.ndarray, cols: np.ndarray, counts: np.ndarray) -> None:
        """Index ``n`` documents from (row, term id, count) triples over ``terms`` (any order,
        no duplicates)."""
        keys = [t.encode("utf-8", "surrogatepass") for t in terms]
        order = sorted(range(len(keys)), key=keys.__getitem__)
        rank = np.empty(len(keys), np.int64)
        rank[np.asarray(order, np.int64)] = np.arange(len(keys), dtype=np.int64)
        self.n = int(n)
        self._vocab = _Vocabulary.from_sorted([keys[i] for i in order])
        self._indptr, self._indices, self._data, self._tf = _bm25_matrix(
            self.n, rows, rank[np.asarray(cols, np.int64)] if len(cols) else cols, counts, len(keys), self.k1, self.b
        )
        self._init_impact()

    def _init_impact(self) -> None:
        """The impact-ordered prefixes of the terms held by more than :data:`BM25_IMPACT_ROWS`
        chunks (:meth:`top_impact`): per such term (``_imp_terms``, ascending) the rows of its
        ``BM25_IMPACT_ROWS`` largest score parts (ties at the cut: the lower rows), ascending,
        in ``_imp_rows`` (int32) and their parts in ``_imp_data`` (float32), one block of
        ``BM25_IMPACT_ROWS`` per term. O(postings of those terms)."""
        keep = BM25_IMPACT_ROWS
        indptr, data = self._indptr, self._data
        terms = np.flatnonzero(np.diff(indptr) > keep).astype(np.int64)
        rows = np.empty(len(terms) * keep, np.int32)
        parts = np.empty(len(terms) * keep, np.float32)
        for i, tid in enumerate(terms.tolist()):
            a, b = int(indptr[tid]), int(indptr[tid + 1])
            d = data[a:b]
            kth = np.partition(d, (b - a) - keep)[(b - a) - keep]
            above = np.flatnonzero(d > kth)
            ties = np.flatnonzero(d == kth)[: keep - len(above)]  # positions ascend with rows
            sel = np.sort(np.concatenate([above, ties]))
            rows[i * keep : (i + 1) * keep] = self._indices[a + sel]
            parts[i * keep : (i + 1) * keep] = d[sel]
        self._imp_keep, self._imp_terms, self._imp_rows, self._imp_data = keep, terms, rows, parts

    # -- persistence ---------------------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Everything the index is, as named numeric arrays (persisted as ``bm25.npz``):
        ``format`` int64 ``(2,)`` (:data:`BM25_FORMAT`, documents), ``vocab_blob`` uint8 (the
        sorted terms' UTF-8 bytes), ``vocab_offsets`` int64 ``(V + 1,)``, ``indptr`` int64
        ``(V + 1,)``, ``indices`` int32 ``(nnz,)`` document rows, ``data`` float32 ``(nnz,)``
        scores, ``tf`` uint16/uint32 ``(nnz,)`` counts."""
        return {
            "format": np.asarray([BM25_FORMAT, self.n], np.int64),
            "vocab_blob": np.frombuffer(self._vocab.blob, np.uint8),
            "vocab_offsets": self._vocab.offsets,
            "indptr": self._indptr,
            "indices": self._indices,
            "data": self._data,
            "tf": self._tf,
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], n: int | None = None) -> BM25Index:
        """Inverse of :meth:`to_arrays`, checked (O(nnz) array checks, no tokenising).

        Args:
            arrays: :meth:`to_arrays`' arrays.
            n: the documents the index must have (the state's chunks), or ``None``.

        Raises:
            ValueError: a missing or malformed array, another format version, or another
                number of documents than ``n`` (named).
        """
        try:
            fmt = np.asarray(arrays["format"]).ravel()
            blob = np.asarray(arrays["vocab_blob"])
            offsets = np.asarray(arrays["vocab_offsets"])
            indptr = np.asarray(arrays["indptr"])
            indices = np.asarray(arrays["indices"])
            data = np.asarray(arrays["data"])
            tf = np.asarray(arrays["tf"])
        except KeyError as exc:
            raise ValueError(f"BM25 arrays lack {exc}") from None
        if len(fmt) != 2 or fmt.dtype.kind not in "iu" or int(fmt[0]) != BM25_FORMAT:
            raise ValueError(f"BM25 arrays of an unknown format {fmt.tolist()}")
        docs = int(fmt[1])
        if n is not None and docs != n:
            raise ValueError(f"BM25 arrays index {docs} chunks, the index has {n}")
        dtypes = {
            "vocab_blob": (blob, "u", 1), "vocab_offsets": (offsets, "i", 1), "indptr": (indptr, "i", 1),
            "indices": (indices, "i", 1), "data": (data, "f", 1), "tf": (tf, "u", 1),
        }
        for name, (arr, kind, ndim) in dtypes.items():
            if arr.dtype.kind != kind or arr.ndim != ndim:
                raise ValueError(f"BM25 array {name} has dtype {arr.dtype} and {arr.ndim} dimensions")
        n_terms = len(offsets) - 1
        nnz = len(indices)
        if (
            n_terms < 0 or len(indptr) != n_terms + 1 or len(data) != nnz or len(tf) != nnz
            or (n_terms >= 0 and len(offsets) and (offsets[0] != 0 or offsets[-1] != len(blob)))
            or (len(indptr) and (indptr[0] != 0 or indptr[-1] != nnz))
            or (len(offsets) > 1 and (np.diff(offsets) <= 0).any())
            or (len(indptr) > 1 and (np.diff(indptr) < 0).any())
        ):
            raise ValueError("BM25 arrays do not fit together (vocabulary, pointers, postings)")
        if nnz and (int(indices.min()) < 0 or int(indices.max()) >= docs):
            raise ValueError("BM25 postings name chunks outside the index")
        if nnz and (not np.isfinite(data).all() or (data < 0).any() or (tf == 0).any()):
            raise ValueError("BM25 scores or counts are invalid (negative, NaN or zero counts)")
        english_stop_words()  # queries tokenise with them: pay the import now, not on the first query
        self = cls.__new__(cls)
        self.n = docs
        self._vocab = _Vocabulary(blob.tobytes(), offsets.astype(np.int64))
        self._indptr = indptr.astype(np.int64, copy=False)
        self._indices = indices.astype(np.int32, copy=False)
        self._data = data.astype(np.float32, copy=False)
        self._tf = tf
        self._init_impact()
        return self

    @property
    def nbytes(self) -> int:
        """Bytes of the index's arrays (vocabulary included)."""
        return len(self._vocab.blob) + sum(
            a.nbytes
            for a in (self._vocab.offsets, self._indptr, self._indices, self._data, self._tf, self._imp_terms,
                      self._imp_rows, self._imp_data)
        )

    @property
    def vocabulary_size(self) -> int:
        """Distinct terms indexed."""
        return len(self._vocab)

    # -- updates -------------------------------------------------------------------------------
    def updated(self, keep_rows: np.ndarray, new_texts: Sequence[str]) -> BM25Index:
        """The BM25 index of the next state: the kept rows (in ``keep_rows`` order) then the
        new texts. Only the new texts are tokenised; the kept rows' term counts come from this
        index, and the scores are recomputed for every chunk (idf and the average length
        change with the corpus: exact scores need it), in numpy, O(postings). Terms no chunk
        holds any more leave the vocabulary.

        Raises:
            IndexError: a row in ``keep_rows`` outside ``[0, n)``.
        """
        import scipy.sparse as sp

        keep = np.asarray(keep_rows, np.int64)
        if len(keep) and (int(keep.min()) < 0 or int(keep.max()) >= self.n):
            raise IndexError(f"keep_rows outside [0, {self.n})")
        counts = sp.csc_matrix(
            (self._tf.astype(np.int64), self._indices, self._indptr), shape=(self.n, len(self._vocab))
        )
        kept = counts[keep].tocoo()
        old_cols = np.unique(kept.col)  # the old terms still held, ascending (= byte order)
        new_terms, new_rows, new_cols, new_counts = _term_counts([bm25_tokenize(t) for t in new_texts])
        old_terms = [self._vocab.term(int(c)).decode("utf-8", "surrogatepass") for c in old_cols]
        # one id per distinct term: old ones first, then new ones not among them
        ids = {t: i for i, t in enumerate(old_terms)}
        new_id = np.fromiter((ids.setdefault(t, len(ids)) for t in new_terms), np.int64, len(new_terms))
        terms = list(ids)
        remap = np.full(len(self._vocab), -1, np.int64)
        remap[old_cols] = np.arange(len(old_cols), dtype=np.int64)
        rows = np.concatenate([kept.row.astype(np.int64), new_rows + len(keep)])
        cols = np.concatenate([remap[kept.col], new_id[new_cols] if len(new_cols) else new_cols])
        tf = np.concatenate([kept.data.astype(np.int64), new_counts])
        out = BM25Index.__new__(BM25Index)
        out._init(len(keep) + len(new_texts), terms, rows, cols, tf)
        return out

    # -- queries -------------------------------------------------------------------------------
    def _term_ids(self, tokens: Sequence[str]) -> list[int]:
        """Columns of the tokens the index holds, in order (repeats kept, unknown ones left out)."""
        out = []
        for t in tokens:
            i = self._vocab.get(t)
            if i is not None:
                out.append(i)
        return out

    def df(self, term: str) -> int:
        """Number of chunks holding ``term`` (one token of :func:`bm25_tokenize`)."""
        tid = self._vocab.get(term)
        if tid is None:
            return 0
        return int(self._indptr[tid + 1] - self._indptr[tid])

    def idf(self, term: str) -> float:
        """Lucene idf of one (already tokenised) term; a term in no chunk has the largest."""
        df = self.df(term)
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for ``query``: float32 ``(n_chunks,)``, all ≥ 0 (summed in
        float32, one query token after the other, as bm25s does)."""
        out = np.zeros(self.n, dtype=np.float32)
        indptr, indices, data = self._indptr, self._indices, self._data
        for tid in self._term_ids(bm25_tokenize(query)):
            a, b = int(indptr[tid]), int(indptr[tid + 1])
            out[indices[a:b]] += data[a:b]  # rows are distinct within a column
        return out

    def scores_of(self, query: str, rows: np.ndarray) -> np.ndarray:
        """BM25 scores of chunk ``rows`` only (int array): float32 ``(len(rows),)``, bit for bit
        ``scores(query)[rows]`` (summed in float32 in the same token order), from the query
        terms' postings: one binary search per (term, row) in the term's row-sorted postings,
        ``O(len(rows) · terms · log df)``, nothing per chunk of the corpus.

        Raises:
            IndexError: a row outside ``[0, n_chunks)`` (as ``scores(query)[rows]`` would).
        """
        rows = np.asarray(rows, np.int64)
        if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= self.n):
            raise IndexError(f"chunk rows outside [0, {self.n})")
        out = np.zeros(len(rows), np.float32)
        if not len(rows):
            return out
        indptr, indices, data = self._indptr, self._indices, self._data
        for tid in self._term_ids(bm25_tokenize(query)):  # repeats count once per repeat
            a, b = int(indptr[tid]), int(indptr[tid + 1])
            if a == b:
                continue
            col = indices[a:b]  # rows ascending within a term
            pos = np.minimum(np.searchsorted(col, rows), b - a - 1)
            hit = col[pos] == rows
            out[hit] += data[a + pos[hit]]
        return out

    def top(self, query: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` best-scoring chunks that share a term with ``query``.

        Exact top-``n`` (the same rows and the same float32 scores as ranking :meth:`scores`),
        from the postings of the query's terms only. When those postings are long against
        ``n`` (:data:`BM25_PRUNE_MIN`), the common terms are skipped by MaxScore (Turtle and
        Flood 1995, "Query evaluation: strategies and optimizations"): a lower bound ``θ`` of
        the ``n``-th score comes from the chunks holding the rarest terms, the terms whose
        summed maximum parts stay below ``θ`` cannot lift a chunk holding none of the others
        into the top ``n``, so only the other terms' postings are read whole and the common
        ones are probed for the surviving candidates (binary search). At a million chunks a
        query's postings were ~140k entries and a dense pass over every chunk; the work is now
        the rarer terms' postings (:meth:`_top_maxscore`).

        Returns:
            ``(rows, scores)``: int64 rows and float32 BM25 scores (> 0), best first, ties by
            row; at most ``n`` of them (fewer when fewer chunks match).
        """
        q = bm25_tokenize(query)
        if not q or n <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        ids = self._term_ids(q)
        if not ids:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        indptr = self._indptr
        postings = sum(int(indptr[t + 1] - indptr[t]) for t in ids)
        if postings > max(BM25_PRUNE_MIN, 16 * n):
            pruned = self._top_maxscore(ids, n)
            if pruned is not None:
                return pruned
        rows, vals = self._postings(ids)
        if not len(rows):
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        if len(rows) * 16 >= self.n:  # postings long against the corpus: one dense pass is cheaper
            dense = np.bincount(rows, weights=vals, minlength=self.n)
            uniq = np.flatnonzero(dense > 0)
            sums = dense[uniq].astype(np.float32)
        else:
            uniq, inverse = np.unique(rows, return_inverse=True)
            sums = np.bincount(inverse, weights=vals, minlength=len(uniq)).astype(np.float32)
            keep = sums > 0
            uniq, sums = uniq[keep], sums[keep]
        return _best(uniq, sums, n)

    def top_impact(self, query: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Candidate chunks for ``query``: the ``n`` best by BM25 over each query term's
        impact-ordered prefix — a term held by more than :data:`BM25_IMPACT_ROWS` chunks counts
        only in its ``BM25_IMPACT_ROWS`` chunks of largest score part (static impact-ordered
        pruning, the bounded evaluation of Anh and Moffat 2006, "Pruned query evaluation using
        pre-computed impacts", SIGIR). The work is at most ``BM25_IMPACT_ROWS`` postings a term
        however large the corpus; :meth:`top`'s exact MaxScore grows with the common terms'
        postings (at a million chunks 1.5 ms of a hybrid query's 4.1 ms).

        When no query term is held by more than ``BM25_IMPACT_ROWS`` chunks this *is*
        :meth:`top` (same rows, same scores). Otherwise the scores are partial sums (a chunk
        outside a long term's prefix gets no part from it), so a chunk that scores high only by
        holding several common terms weakly can be missed: the result is a candidate list for a
        caller that scores its candidates exactly (:func:`~graphstrata.methods.base.hybrid_arrays`
        does), not a BM25 ranking — the ``bm25`` method keeps :meth:`top`.

        Returns:
            ``(rows, scores)``: int64 rows and float32 partial scores (> 0), best first, ties
            by row; at most ``n``.
        """
        q = bm25_tokenize(query)
        if not q or n <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        ids = self._term_ids(q)
        held = self._imp_terms
        if not ids or not len(held):
            return self.top(query, n)
        id_arr = np.asarray(ids, np.int64)
        slots = np.minimum(np.searchsorted(held, id_arr), len(held) - 1)
        long = held[slots] == id_arr
        if not long.any():
            return self.top(query, n)
        keep = self._imp_keep
        indptr, indices, data = self._indptr, self._indices, self._data
        parts_rows, parts_vals = [], []
        for tid, slot, is_long in zip(ids, slots.tolist(), long.tolist(), strict=True):
            if is_long:
                parts_rows.append(self._imp_rows[slot * keep : (slot + 1) * keep])
                parts_vals.append(self._imp_data[slot * keep : (slot + 1) * keep])
            else:
                a, b = int(indptr[tid]), int(indptr[tid + 1])
                parts_rows.append(indices[a:b])
                parts_vals.append(data[a:b])
        rows = np.concatenate(parts_rows)
        vals = np.concatenate(parts_vals).astype(np.float64)
        # sum each row's parts by sorting the (at most terms x BM25_IMPACT_ROWS) postings: the
        # work and the memory touched stay bounded by the postings, where a dense accumulator
        # over every chunk (8 MB at a million chunks, written whole) grew with the corpus and
        # evicted the caches the rest of the query reads (0.8 -> 0.5 ms at 1M, cache-cold 1.4 -> 0.6)
        order = np.argsort(rows, kind="stable")  # stable: a row's parts added in term order
        rows, vals = rows[order], vals[order]
        first = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
        uniq = rows[first].astype(np.int64)
        sums = np.add.reduceat(vals, first).astype(np.float32)
        keep_rows = sums > 0
        return _best(uniq[keep_rows], sums[keep_rows], n)

    def _postings(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The postings of term ids ``ids`` one after the other (a repeated id repeats): int64
        rows and their float64 score parts."""
        indptr, indices, data = self._indptr, self._indices, self._data
        spans = [(int(indptr[t]), int(indptr[t + 1])) for t in ids]
        rows = np.concatenate([indices[a:b] for a, b in spans] or [np.zeros(0, np.int32)])
        vals = np.concatenate([data[a:b] for a, b in spans] or [np.zeros(0, np.float32)])
        return rows.astype(np.int64, copy=False), vals.astype(np.float64)

    def _term_max(self, tid: int) -> float:
        """The largest score part in term ``tid``'s postings (0 for none), cached per term."""
        cache = self.__dict__.setdefault("_max_part", {})
        out = cache.get(tid)
        if out is None:
            a, b = int(self._indptr[tid]), int(self._indptr[tid + 1])
            out = cache[tid] = float(self._data[a:b].max()) if b > a else 0.0
        return out

    def _full_sums(self, ids: Sequence[int], rows: np.ndarray) -> np.ndarray:
        """float64 sums of ``rows``' (ascending int64) parts of terms ``ids``, added one term
        after the other in ``ids`` order: bit for bit what :meth:`top`'s ``bincount`` over the
        concatenated postings gives those rows."""
        indptr, indices, data = self._indptr, self._indices, self._data
        out = np.zeros(len(rows), np.float64)
        for tid in ids:
            a, b = int(indptr[tid]), int(indptr[tid + 1])
            if a == b:
                continue
            col = indices[a:b]
            pos = np.minimum(np.searchsorted(col, rows), b - a - 1)
            hit = col[pos] == rows
            out[hit] += data[a + pos[hit]]
        return out

    def _top_maxscore(self, ids: list[int], n: int) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`top` by MaxScore, or ``None`` when no term can be skipped (the caller then
        reads every posting). Exact: every bound below leaves a relative margin of
        :data:`_BOUND_MARGIN`, far above float32 rounding, so a chunk it drops scores below
        the ``n``-th score and can neither enter the top ``n`` nor tie with it."""
        indptr, indices, data = self._indptr, self._indices, self._data
        terms, mult = np.unique(np.asarray(ids, np.int64), return_counts=True)
        df = (indptr[terms + 1] - indptr[terms]).astype(np.int64)
        # 1. a lower bound of the n-th score: full scores of chunks holding the rarest terms
        #    (of a common one, the BM25_SEED_ROWS with its largest parts)
        seeds, held = [], 0
        for i in np.argsort(df, kind="stable").tolist():
            if held >= n:
                break
            a, b = int(indptr[terms[i]]), int(indptr[terms[i] + 1])
            rows = indices[a:b]
            if b - a > BM25_SEED_ROWS:
                rows = rows[np.argpartition(data[a:b], b - a - BM25_SEED_ROWS)[b - a - BM25_SEED_ROWS :]]
            seeds.append(rows)
            held += len(rows)
        if len(seeds) == len(terms) or held < n:
            return None
        first = np.unique(np.concatenate(seeds).astype(np.int64)) if len(seeds) > 1 else np.sort(seeds[0].astype(np.int64))
        if len(first) < n:
            return None
        full = self._full_sums(ids, first)
        theta = float(np.partition(full, len(full) - n)[len(full) - n]) * (1.0 - _BOUND_MARGIN)
        if theta <= 0:
            return None
        # 2. skip the terms of smallest maximum part while their sum stays below the bound
        upper = np.asarray([self._term_max(int(t)) for t in terms.tolist()], np.float64) * mult
        order = np.argsort(upper, kind="stable")
        skip_upto, bound = 0, 0.0
        for i in order.tolist():
            if (bound + upper[i]) * (1.0 + _BOUND_MARGIN) >= theta:
                break
            bound += upper[i]
            skip_upto += 1
        if skip_upto == 0:
            return None
        skipped = set(terms[order[:skip_upto]].tolist())
        kept = [t for t in ids if t not in skipped]
        if 2 * sum(int(indptr[t + 1] - indptr[t]) for t in kept) > int(sum(df * mult)):
            return None  # most postings would be read anyway
        # 3. candidates: chunks holding a term not skipped whose parts plus the skipped terms'
        #    bound reach theta (every other chunk scores below it)
        rows, vals = self._postings(kept)
        part = np.bincount(rows, weights=vals, minlength=self.n)
        cand = rows[(part[rows] + bound) * (1.0 + _BOUND_MARGIN) >= theta]
        # each candidate once, without sorting them: the last write of its position wins
        part[cand] = np.arange(len(cand), dtype=np.float64)
        cand = cand[part[cand] == np.arange(len(cand), dtype=np.float64)]
        # 4. their exact scores, summed one term after the other in query order as top() sums
        #    them: a term's whole postings when they are short against the candidates, else
        #    a binary search for each candidate
        parts_rows, parts_vals = [], []
        for tid in ids:
            a, b = int(indptr[tid]), int(indptr[tid + 1])
            if b - a <= 16 * len(cand):
                parts_rows.append(indices[a:b])
                parts_vals.append(data[a:b])
            elif b > a:
                col = indices[a:b]
                pos = np.minimum(np.searchsorted(col, cand), b - a - 1)
                hit = col[pos] == cand
                parts_rows.append(cand[hit])
                parts_vals.append(data[a + pos[hit]])
        rows = np.concatenate(parts_rows).astype(np.int64, copy=False)
        dense = np.bincount(rows, weights=np.concatenate(parts_vals).astype(np.float64), minlength=self.n)
        sums = dense[cand].astype(np.float32)
        keep = sums > 0
        return _best(cand[keep], sums[keep], n)

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
