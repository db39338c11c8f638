"""The corpus TF-IDF models of the statistical extractor and of community titles: fitted in
shards (:func:`fit_tfidf`, :func:`analyse_shard`), frozen and persisted as JSON
(:class:`FrozenTfidf`), described for workers by :class:`TfidfSpec`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

def tfidf_vectorizer(ngram_range: tuple[int, ...], n_texts: int, min_df: int):
    """The scikit-learn ``TfidfVectorizer`` the extractor fits: English stop words, sublinear
    tf, word tokens starting with a letter; ``min_df`` and ``max_df=0.5`` only from 20 texts
    (a smaller corpus keeps every term)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(
        ngram_range=tuple(ngram_range),
        stop_words="english",
        min_df=min_df if n_texts >= 20 else 1,
        max_df=0.5 if n_texts >= 20 else 1.0,
        sublinear_tf=True,
        token_pattern=r"(?u)\b[^\W\d_][\w\-]+\b",
    )


class FrozenTfidf:
    """A fitted TF-IDF model frozen at build time (issue 16: frozen statistics are versioned).

    Incremental inserts score new chunks against the vocabulary and idf of the last full
    build instead of refitting on the whole corpus; :meth:`~graphstrata.GraphStrata.rebuild`
    refits. Persisted in the index (``graphstrata.store``). Read-only once made.

    The vocabulary is kept as one UTF-8 buffer (terms joined by new lines, which no term
    holds) rather than one string object per term: the extraction model of a million chunks
    has ~20M terms, 1.4 GB as a tuple of strings against ~0.3 GB so; :attr:`terms` decodes it.

    Args / attributes:
        kind: ``"extraction"`` (1–3-gram terms of :class:`StatisticalExtractor`) or
            ``"summary"`` (the unigram model of extractive community summaries).
        params: the vectorizer's parameters (``ngram_range``, ``min_df``, ``max_df``,
            ``token_pattern``), enough to rebuild it.
        terms: the vocabulary, in column order (a tuple of str, decoded on each read).
        idf: float64 ``(len(terms),)`` inverse document frequencies.
    """

    __slots__ = ("kind", "params", "idf", "_blob", "_size", "_plain", "_vectorizer", "_terms", "__weakref__")

    def __init__(self, kind: str, params: dict[str, Any], terms: Sequence[str], idf: np.ndarray) -> None:
        self.kind = kind
        self.params = params
        self.idf = idf
        self._size = len(terms)
        self._vectorizer: Any = None
        self._terms: np.ndarray | None = None
        if any("\n" in t for t in terms):  # not from a vectorizer: keep the strings as they are
            self._plain: tuple[str, ...] | None = tuple(terms)
            self._blob = b""
        else:
            self._plain = None
            self._blob = "\n".join(terms).encode("utf-8")

    @property
    def terms(self) -> tuple[str, ...]:
        """The vocabulary, in column order."""
        if self._plain is not None:
            return self._plain
        if self._size == 0:
            return ()
        return tuple(self._blob.decode("utf-8").split("\n"))

    def __len__(self) -> int:
        """Number of terms."""
        return self._size

    def __getstate__(self) -> tuple:
        return (self.kind, self.params, self.idf, self._blob, self._size, self._plain)

    def __setstate__(self, state: tuple) -> None:
        self.kind, self.params, self.idf, self._blob, self._size, self._plain = state
        self._vectorizer = None
        self._terms = None

    def __repr__(self) -> str:
        return f"FrozenTfidf(kind={self.kind!r}, terms={self._size})"

    @classmethod
    def from_vectorizer(cls, vec: Any, kind: str) -> FrozenTfidf:
        """Freeze a fitted scikit-learn ``TfidfVectorizer``."""
        p = vec.get_params()
        params = {
            "ngram_range": list(p["ngram_range"]),
            "min_df": p["min_df"],
            "max_df": p["max_df"],
            "token_pattern": p["token_pattern"],
            "stop_words": p["stop_words"],
            "sublinear_tf": p["sublinear_tf"],
        }
        terms = tuple(str(t) for t in vec.get_feature_names_out())
        return cls(kind, params, terms, np.asarray(vec.idf_, dtype=np.float64))

    def vectorizer(self) -> Any:
        """A scikit-learn ``TfidfVectorizer`` with this vocabulary and idf (``transform`` only;
        made once, then kept with the model)."""
        cached = self._vectorizer
        if cached is not None:
            return cached
        from sklearn.feature_extraction.text import TfidfVectorizer

        p = dict(self.params)
        p["ngram_range"] = tuple(p["ngram_range"])
        vec = TfidfVectorizer(**p)
        vec.vocabulary_ = {t: i for i, t in enumerate(self.terms)}
        vec.idf_ = self.idf
        self._vectorizer = vec
        return vec

    def terms_array(self) -> np.ndarray:
        """The vocabulary as a numpy object array (column order; made once, then kept)."""
        cached = self._terms
        if cached is None:
            cached = self._terms = np.asarray(self.terms, dtype=object)
        return cached

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (see :meth:`from_dict`)."""
        return {"kind": self.kind, "params": self.params, "terms": list(self.terms), "idf": self.idf.tolist()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FrozenTfidf:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: missing keys or terms / idf of different lengths.
        """
        try:
            terms, idf = tuple(d["terms"]), np.asarray(d["idf"], dtype=np.float64)
            out = cls(str(d["kind"]), dict(d["params"]), terms, idf)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"invalid frozen TF-IDF statistics: {exc}") from exc
        if len(terms) != len(idf) or not np.isfinite(idf).all():
            raise ValueError("invalid frozen TF-IDF statistics: terms and idf do not match")
        return out


# -- TF-IDF fit in shards ------------------------------------------------------------------
# scikit-learn's ``TfidfVectorizer.fit_transform`` keeps every n-gram occurrence of the corpus
# as a Python int in one list and every distinct n-gram in one dict: about 10 GB and an hour of
# one core for a million chunks. The same model (vocabulary, idf, and the very matrix the top
# terms are read from) is computed here from shards of texts, each analysed on its own
# (in worker processes when the runner has them), with numpy arrays for the occurrences.

TFIDF_SHARD = 2_000
"""Texts per shard of :func:`fit_tfidf` (one worker task)."""


@dataclass(frozen=True)
class TfidfSpec:
    """What one TF-IDF fit needs: the vectorizer's parameters (scikit-learn
    ``TfidfVectorizer(**params)``, ``ngram_range`` as a list), the model's ``kind``
    (:class:`FrozenTfidf`) and ``top_n``: top terms wanted per text (0: the model only)."""

    params: dict[str, Any]
    kind: str
    top_n: int = 0

    @classmethod
    def of(cls, vectorizer: Any, kind: str, top_n: int = 0) -> TfidfSpec:
        """The spec of an unfitted scikit-learn ``TfidfVectorizer`` (its ``get_params``)."""
        p = dict(vectorizer.get_params())
        p["ngram_range"] = list(p["ngram_range"])
        return cls(p, kind, int(top_n))

    def vectorizer(self) -> Any:
        """A fresh scikit-learn ``TfidfVectorizer`` with these parameters."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        p = dict(self.params)
        p["ngram_range"] = tuple(p["ngram_range"])
        return TfidfVectorizer(**p)


def analyse_shard(specs: Sequence[TfidfSpec], texts: Sequence[str]) -> list[tuple]:
    """Count the features of ``texts`` for each spec (the worker half of :func:`fit_tfidf`).

    Each text's features are those of scikit-learn's analyzer for the spec (``build_analyzer``:
    lower-casing, token pattern, stop words, n-grams), counted per text in order of first
    appearance in the text, as ``CountVectorizer._count_vocab`` counts them.

    Returns:
        Per spec ``(terms, ids, counts, indptr)``: the shard's distinct features in order of
        first appearance (``list[str]``), and per text ``t`` the local ids
        ``ids[indptr[t]:indptr[t + 1]]`` (int32, first appearance in the text first) with their
        counts (int32); ``indptr`` int64 ``(len(texts) + 1,)``.
    """
    from array import array

    out = []
    for spec in specs:
        analyse = spec.vectorizer().build_analyzer()
        local: dict[str, int] = {}
        ids = array("i")
        counts = array("i")
        indptr = np.zeros(len(texts) + 1, dtype=np.int64)
        for row, text in enumerate(texts):
            seen: dict[int, int] = {}
            for feature in analyse(text):
                i = local.get(feature)
                if i is None:
                    i = local[feature] = len(local)
                seen[i] = seen.get(i, 0) + 1
            ids.extend(seen.keys())
            counts.extend(seen.values())
            indptr[row + 1] = len(ids)
        out.append((list(local), np.frombuffer(ids, dtype=np.int32), np.frombuffer(counts, dtype=np.int32), indptr))
    return out


class _TfidfCounts:
    """The driver half of :func:`fit_tfidf`: shards' features numbered in corpus order of
    first appearance (the order ``CountVectorizer`` numbers them before sorting by name)."""

    def __init__(self, spec: TfidfSpec) -> None:
        self.spec = spec
        self.index: dict[str, int] = {}
        self.shards: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (indptr, gids, counts)
        self.n_texts = 0

    def add(self, shard: tuple) -> None:
        terms, ids, counts, indptr = shard
        index = self.index
        gmap = np.fromiter((index.setdefault(t, len(index)) for t in terms), dtype=np.int64, count=len(terms))
        self.shards.append((indptr, gmap[ids] if len(ids) else np.zeros(0, np.int64), counts))
        self.n_texts += len(indptr) - 1

    def finish(self) -> tuple[FrozenTfidf | None, list[list[str]]]:
        """The fitted model and each text's top terms (see :func:`fit_tfidf`)."""
        n = self.n_texts
        none: tuple[FrozenTfidf | None, list[list[str]]] = (None, [[] for _ in range(n)] if self.spec.top_n else [])
        n_features = len(self.index)
        if n_features == 0:  # "empty vocabulary"
            return none
        df = np.zeros(n_features, dtype=np.int64)
        for _indptr, gids, _counts in self.shards:
            df += np.bincount(gids, minlength=n_features)
        # CountVectorizer.fit_transform: min_df / max_df as document counts (ints as they are)
        p = self.spec.params
        max_df, min_df = p["max_df"], p["min_df"]
        high = max_df if isinstance(max_df, (int, np.integer)) else max_df * n
        low = min_df if isinstance(min_df, (int, np.integer)) else min_df * n
        if high < low:  # "max_df corresponds to < documents than min_df"
            return none
        kept = np.flatnonzero((df <= high) & (df >= low))
        if len(kept) == 0:  # "After pruning, no terms remain"
            return none
        names = list(self.index)  # feature number -> name
        self.index = {}
        kept_names = [names[g] for g in kept.tolist()]
        del names
        order = sorted(range(len(kept_names)), key=kept_names.__getitem__)  # columns by name
        terms = tuple(kept_names[i] for i in order)
        del kept_names
        column = np.full(n_features, -1, dtype=np.int64)
        column[kept[order]] = np.arange(len(kept), dtype=np.int64)
        # TfidfTransformer.fit, smooth idf, operation for operation
        dfk = df[kept[order]].astype(np.float64)
        dfk += 1.0
        idf = np.full_like(dfk, fill_value=n + 1, dtype=np.float64)
        idf /= dfk
        np.log(idf, out=idf)
        idf += 1.0
        model = FrozenTfidf(self.spec.kind, _frozen_params(self.spec.params), terms, idf)
        if not self.spec.top_n:
            self.shards = []
            return model, []
        vocab = np.asarray(terms, dtype=object)  # the model's strings, shared by every text's terms
        del terms
        top: list[list[str]] = []
        while self.shards:
            indptr, gids, counts = self.shards.pop(0)
            top.extend(top_terms(_shard_matrix(indptr, gids, counts, column, idf), vocab, self.spec.top_n))
        return model, top


def _frozen_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters :meth:`FrozenTfidf.from_vectorizer` keeps."""
    return {
        "ngram_range": list(params["ngram_range"]),
        "min_df": params["min_df"],
        "max_df": params["max_df"],
        "token_pattern": params["token_pattern"],
        "stop_words": params["stop_words"],
        "sublinear_tf": params["sublinear_tf"],
    }


def _shard_matrix(indptr, gids, counts, column, idf):
    """The rows of one shard of ``TfidfVectorizer.fit_transform``'s matrix, bit for bit: each
    row's entries in order of the features' first appearance in the corpus (the order
    ``_count_vocab`` sorts them in; pruning and renumbering by name keep it), counts as float64,
    then sublinear tf, idf and the l2 norm as ``TfidfTransformer.transform`` applies them."""
    import scipy.sparse as sp
    from sklearn.preprocessing import normalize

    n_rows = len(indptr) - 1
    row = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(indptr))
    order = np.lexsort((gids, row))
    cols = column[gids[order]]
    keep = cols >= 0
    row, cols = row[order][keep], cols[keep]
    data = counts[order][keep].astype(np.float64)
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=n_rows), out=ptr[1:])
    idx_type = np.int32 if len(idf) < 2**31 and len(data) < 2**31 else np.int64
    matrix = sp.csr_array((data, cols.astype(idx_type), ptr.astype(idx_type)), shape=(n_rows, len(idf)))
    np.log(matrix.data, out=matrix.data)
    matrix.data += 1.0
    matrix.data *= idf[matrix.indices]
    return normalize(matrix, norm="l2", copy=False)


def top_terms(matrix: Any, vocab: np.ndarray, top_n: int) -> list[list[str]]:
    """Top-``top_n`` terms per row of a TF-IDF matrix (``vocab``: object array of the column
    names), best first (ties: the matrix's stored order): one stable sort of every entry by
    (row, -score) instead of one per row."""
    matrix = matrix.tocsr()
    n_rows = matrix.shape[0]
    indptr = np.asarray(matrix.indptr, dtype=np.int64)
    sizes = np.diff(indptr)
    row = np.repeat(np.arange(n_rows, dtype=np.int64), sizes)
    order = np.lexsort((-np.asarray(matrix.data), row))  # stable: ties keep stored order
    rank = np.arange(len(order), dtype=np.int64) - indptr[row[order]]
    take = order[rank < top_n]
    cols = np.asarray(matrix.indices)[take]
    words = vocab[cols].tolist()
    out: list[list[str]] = []
    start = 0
    for size in np.minimum(sizes, top_n).tolist():
        out.append(words[start : start + size])
        start += size
    return out


def fit_tfidf(
    specs: Sequence[TfidfSpec], texts: Sequence[str], runner: Any = None, shard: int = TFIDF_SHARD
) -> list[tuple[FrozenTfidf | None, list[list[str]]]]:
    """Fit TF-IDF models on ``texts`` in shards: what ``TfidfVectorizer(**spec.params)
    .fit_transform(texts)`` gives, with far less memory, and in parallel on a runner with a
    ``map`` (:class:`graphstrata.runner.ProcessRunner`).

    Every shard of ``shard`` texts is analysed on its own (:func:`analyse_shard`, one pass per
    shard for all ``specs``); the driver numbers the features in corpus order of first
    appearance, counts document frequencies, prunes by ``min_df`` / ``max_df``, sorts the kept
    ones by name and computes the smoothed idf as scikit-learn does; the top terms come from
    the same float64 matrix ``fit_transform`` returns (same entry order, same operations), so
    the model and the top terms are scikit-learn's, tie for tie.

    Args:
        specs: the models to fit (:class:`TfidfSpec`).
        texts: the corpus (chunk texts, in row order).
        runner: where the shards are analysed: a runner with ``map(fn, argument_tuples)``
            (ordered results), else this process.
        shard: texts per shard (> 0).

    Returns:
        Per spec ``(model, top_terms)``: the :class:`FrozenTfidf` (``None`` when the texts have
        no vocabulary left after pruning, where scikit-learn raises), and each text's top
        ``spec.top_n`` terms, best first (``[]`` per text without a model; an empty list when
        ``top_n`` is 0).

    Raises:
        ValueError: ``shard`` ≤ 0.
    """
    if int(shard) <= 0:
        raise ValueError(f"shard must be > 0 texts, got {shard}")
    specs = list(specs)
    counts = [_TfidfCounts(spec) for spec in specs]
    tasks = [(specs, list(texts[i : i + shard])) for i in range(0, len(texts), shard)]
    mapper = getattr(runner, "map", None) if runner is not None else None
    results = mapper(analyse_shard, tasks) if mapper is not None and len(tasks) > 1 else (
        analyse_shard(*task) for task in tasks
    )
    for per_spec in results:
        for acc, part in zip(counts, per_spec, strict=True):
            acc.add(part)
    return [acc.finish() for acc in counts]

