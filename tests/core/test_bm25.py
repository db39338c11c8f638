"""BM25 (issue 14 part 6): bm25s with non-negative idf, so a matching chunk always scores above
a non-matching one, on any corpus size."""

import numpy as np
import pytest
from graphstrata import Document, GraphStrata
from graphstrata.bm25 import BM25Index, bm25_tokenize

LAKE = "Alpine lakes freeze in winter."  # 4 tokens
DUNES = "Desert dunes shift with wind."  # 4 tokens: rank-bm25's mean idf is 0 with 2 × LAKE
SHORT_DUNES = "Desert dunes shift."  # 3 tokens: rank-bm25's mean idf is negative


def test_three_documents_one_a_duplicate_exact_match_ranks_first():
    # rank-bm25 scored all three 0 here (idf of a term in 2 of 3 documents is negative,
    # floored at 0.25 × the mean idf, which is 0 for this vocabulary)
    bm = BM25Index([LAKE, LAKE, DUNES])
    s = bm.scores("alpine lakes freeze")
    assert s[0] > 0 and s[0] == s[1] and s[2] == 0
    s = bm.scores("desert dunes")
    assert s[2] > 0 and s[0] == s[1] == 0


def test_a_non_matching_document_never_outranks_a_match():
    # rank-bm25: [-0.078, -0.078, 0] — the document sharing no term ranked first
    bm = BM25Index(["apple banana", "apple banana", "cherry"])
    s = bm.scores("apple banana")
    assert s[0] > 0 and s[1] > 0 and s[2] == 0
    assert int(np.argmax(s)) in (0, 1)


@pytest.mark.parametrize(
    ("method", "dunes"), [("bm25", DUNES), ("bm25", SHORT_DUNES), ("hybrid", SHORT_DUNES)]
)
def test_engine_ranks_the_exact_match_first_with_a_positive_score(embedder, method, dunes):
    # rank-bm25: every chunk 0 with DUNES; with SHORT_DUNES the lakes scored below 0 (BM25
    # ranked the dunes first) and hybrid's normalised BM25 part made the dunes tie the lakes
    docs = [Document("lake", LAKE), Document("lake-copy", LAKE), Document("dunes", dunes)]
    gs = GraphStrata.build(docs, embedder=embedder)
    hits = gs.retrieve("alpine lakes freeze", method=method, k=3, kinds=["chunk"])
    assert {h.document_ids[0] for h in hits[:2]} == {"lake", "lake-copy"}
    assert hits[0].score > 0 and hits[1].score == hits[0].score
    # hybrid tied the dunes with the lakes before (its BM25 part was the best of the three)
    assert hits[2].document_ids == ["dunes"] and hits[2].score < hits[1].score
    if method == "bm25":
        assert hits[2].score == 0 and hits[2].metadata["raw_score"] == 0


def test_unit_scores_divide_by_the_query_maximum():
    bm = BM25Index([LAKE, LAKE, DUNES])
    raw, unit = bm.unit_scores("desert dunes")
    # the sum of the query tokens' idf bounds every score; each term saturates below its idf
    assert bm.max_score("desert dunes") == pytest.approx(2 * bm.idf("desert"))
    # a document of average length holding each query term once: 1 / (1 + k1) of the maximum
    assert unit[2] == pytest.approx(1 / (1 + bm.k1), rel=1e-5)
    assert raw[2] == pytest.approx(unit[2] * bm.max_score("desert dunes"), rel=1e-5)
    assert unit[0] == unit[1] == 0
    # a query term no document holds still counts in the maximum: half the query is missing
    _, half = bm.unit_scores("desert dunes zzzword qqqword")
    assert 0 < half[2] < unit[2]


def test_scores_are_bounded_and_non_negative_on_a_real_sized_corpus():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(300)]
    texts = [" ".join(rng.choice(words, size=rng.integers(1, 60))) for _ in range(400)]
    bm = BM25Index(texts)
    tokenised = [set(bm25_tokenize(t)) for t in texts]
    for w in words[:30]:
        assert bm.df(w) == sum(w in toks for toks in tokenised)
    for _ in range(20):
        q = " ".join(rng.choice(words, size=rng.integers(1, 8)))
        raw, unit = bm.unit_scores(q)
        assert (raw >= 0).all() and (unit >= 0).all() and (unit < 1).all()
        assert raw.max() <= bm.max_score(q)
        # a document matches iff it shares a token with the query
        toks = set(bm25_tokenize(q))
        matches = np.array([bool(toks & t) for t in tokenised])
        assert ((raw > 0) == matches).all()


def test_scores_of_rows_are_the_full_scores_bit_for_bit_without_scoring_every_chunk(monkeypatch):
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(200)]
    texts = [" ".join(rng.choice(words, size=rng.integers(1, 40))) for _ in range(500)]
    bm = BM25Index(texts)
    queries = [" ".join(rng.choice(words, size=rng.integers(1, 6))) for _ in range(20)] + ["w1 w1 w2", "zzz"]
    want = {q: bm.scores(q) for q in queries}
    monkeypatch.setattr(BM25Index, "scores", lambda self, query: pytest.fail("scored every chunk"))
    for q in queries:
        rows = np.unique(rng.integers(0, len(texts), 60))
        got = bm.scores_of(q, rows)
        assert got.dtype == np.float32 and np.array_equal(got, want[q][rows]), q
    assert bm.scores_of("w1", np.zeros(0, np.int64)).shape == (0,)
    with pytest.raises(IndexError, match="chunk rows"):
        bm.scores_of("w1", np.array([len(texts)]))


def test_empty_corpora_and_queries_score_zero():
    assert BM25Index([]).scores("anything").shape == (0,)
    bm = BM25Index(["", "the of and"])  # no token survives the stop words
    assert (bm.scores("lake") == 0).all() and bm.unit_scores("lake")[1].tolist() == [0, 0]
    bm = BM25Index([LAKE, ""])
    assert bm.scores("the of").tolist() == [0, 0]  # a query of stop words only
    assert bm.scores("winter")[0] > 0 and bm.scores("winter")[1] == 0


@pytest.mark.parametrize("query", ["Paris bridge bank", "bank bank founder", "nothing matches qqq", ""])
def test_top_equals_the_best_of_every_score(query):
    """BM25Index.top reads only the query terms' postings, and gives the same rows and scores as
    sorting the full score array (best first, ties by row)."""
    texts = [f"The bank {i % 7} financed bridge {i % 5} in Paris." if i % 3 else f"Founder {i} of the bank."
             for i in range(300)]
    index = BM25Index(texts)
    full = index.scores(query)
    for n in (1, 10, 500):
        rows, scores = index.top(query, n)
        ref = np.lexsort((np.arange(len(full)), -full))[:n]
        ref = ref[full[ref] > 0]
        assert rows.tolist() == ref.tolist()
        assert np.allclose(scores, full[ref], rtol=1e-5)


# -- the index as arrays (issue 33): bm25s' scores, persisted, updated without re-tokenising ----


def _random_corpus(seed: int, n: int = 400) -> list[str]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(300)] + ["Ünïcode", "naïve", "日本語", "LiHua", "bank", "HTTPServer2"]
    texts = [" ".join(rng.choice(words, size=rng.integers(0, 70))) for _ in range(n)]
    texts[1], texts[2] = "", "the of and"
    return texts


@pytest.mark.parametrize("seed", [0, 1])
def test_scores_are_bm25s_bit_for_bit(seed):
    bm25s = pytest.importorskip("bm25s")
    texts = _random_corpus(seed)
    index = BM25Index(texts)
    ref = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    ref.index([bm25_tokenize(t) for t in texts], show_progress=False)
    rng = np.random.default_rng(seed + 10)
    words = [f"w{i}" for i in range(320)] + ["naïve", "日本語", "lihua"]
    for _ in range(50):
        q = " ".join(rng.choice(words, size=rng.integers(1, 8)))
        ids = ref.get_tokens_ids(bm25_tokenize(q))
        want = np.asarray(ref.get_scores_from_ids(ids), np.float32) if ids else np.zeros(len(texts), np.float32)
        assert np.array_equal(index.scores(q), want), q


def test_an_update_equals_a_fresh_index_and_arrays_round_trip():
    texts = _random_corpus(3)
    index = BM25Index(texts)
    rng = np.random.default_rng(4)
    keep = np.sort(rng.choice(len(texts), 300, replace=False))[::-1]  # any order
    new = ["fresh words w1 w2 w2", "HTTPServer2 naïve", ""]
    updated = index.updated(keep, new)
    fresh = BM25Index([texts[i] for i in keep] + new)
    for name, arr in fresh.to_arrays().items():
        assert np.array_equal(updated.to_arrays()[name], arr), name
    assert updated.df("w7") == fresh.df("w7") and updated.vocabulary_size == fresh.vocabulary_size
    back = BM25Index.from_arrays(updated.to_arrays(), n=updated.n)
    assert np.array_equal(back.scores("w1 fresh naïve"), fresh.scores("w1 fresh naïve"))
    assert back.top("w1 fresh", 5)[0].tolist() == fresh.top("w1 fresh", 5)[0].tolist()
    with pytest.raises(IndexError):
        index.updated(np.asarray([len(texts)]), [])


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda a: a.pop("data"), "lack"),
        (lambda a: a.__setitem__("format", np.asarray([99, 400])), "format"),
        (lambda a: a.__setitem__("indices", a["indices"] + 10_000), "outside"),
        (lambda a: a.__setitem__("data", -a["data"]), "invalid"),
        (lambda a: a.__setitem__("indptr", a["indptr"][:-1]), "fit together"),
        (lambda a: a.__setitem__("data", a["data"].astype(np.int64)), "dtype"),
    ],
)
def test_bad_arrays_are_refused_by_name(edit, match):
    arrays = dict(BM25Index(_random_corpus(5)).to_arrays())
    edit(arrays)
    with pytest.raises(ValueError, match=match):
        BM25Index.from_arrays(arrays)
    with pytest.raises(ValueError, match="index"):
        BM25Index.from_arrays(BM25Index(["a b"]).to_arrays(), n=3)


def test_a_loaded_index_reads_bm25_without_tokenising(embedder, tmp_path, monkeypatch):
    import graphstrata.bm25 as index_module
    from graphstrata import store

    docs = [Document(f"d{i}", f"Lake {i} freezes in winter near town {i % 3}.") for i in range(8)]
    gs = GraphStrata.build(docs, embedder=embedder, persist_dir=tmp_path / "idx")
    assert (store.version_dir(tmp_path / "idx") / store.BM25).is_file()

    def boom(text):
        raise AssertionError("tokenised a chunk at load")

    monkeypatch.setattr(index_module, "bm25_tokenize", boom)
    # warm_up off: the load's warm-up query is tokenised (a query, not a chunk)
    loaded = GraphStrata.load(tmp_path / "idx", embedder=embedder, warm_up=False)
    monkeypatch.undo()
    for name, arr in gs.bm25.to_arrays().items():
        assert np.array_equal(loaded.bm25.to_arrays()[name], arr), name
    hits = loaded.retrieve("lake winter town 2", method="bm25", k=3)
    assert [(h.id, h.score) for h in hits] == [(h.id, h.score) for h in gs.retrieve("lake winter town 2", method="bm25", k=3)]


def test_stop_words_are_scikit_learns_without_importing_it():
    import subprocess
    import sys

    import graphstrata.bm25 as index_module
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    assert index_module.english_stop_words() == frozenset(ENGLISH_STOP_WORDS)
    code = ("import sys, graphstrata.bm25 as i; w = i.english_stop_words(); "
            "print(len(w), 'sklearn.base' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(len(ENGLISH_STOP_WORDS)), "False"]


# -- MaxScore top-n (issue 33): the common terms skipped, the same rows and bits ----------------


def _reference_top(index: BM25Index, query: str, n: int) -> tuple[list[int], np.ndarray]:
    """Every posting of every query token summed per chunk in float64 in query order (as the
    full pass does), best ``n`` first, ties by row."""
    sums = np.zeros(index.n, np.float64)
    for tid in index._term_ids(bm25_tokenize(query)):
        a, b = int(index._indptr[tid]), int(index._indptr[tid + 1])
        sums[index._indices[a:b]] += index._data[a:b]
    full = sums.astype(np.float32)
    order = np.lexsort((np.arange(index.n), -full))[:n]
    order = order[full[order] > 0]
    return order.tolist(), full[order]


def _zipf_corpus(seed: int, n: int = 3000) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = np.asarray([f"t{i}" for i in range(2000)])
    p = 1.0 / np.arange(1, len(vocab) + 1)  # a few terms in most chunks, most in a handful
    p /= p.sum()
    return [" ".join(vocab[rng.choice(len(vocab), size=rng.integers(5, 60), p=p)]) for _ in range(n)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_maxscore_top_is_the_full_pass_bit_for_bit(seed, monkeypatch):
    """Queries mixing the corpus's most common terms (skipped by MaxScore) with rarer ones, with
    repeated tokens: the same rows, in the same order, with the same float32 scores as summing
    every posting; and MaxScore did run (skipped terms) on most of them."""
    import graphstrata.bm25 as index_module

    monkeypatch.setattr(index_module, "BM25_PRUNE_MIN", 0)
    index = BM25Index(_zipf_corpus(seed))
    rng = np.random.default_rng(100 + seed)
    pruned = 0
    calls = 0
    original = BM25Index._top_maxscore

    def counting(self, ids, n):
        nonlocal pruned
        out = original(self, ids, n)
        pruned += out is not None
        return out

    monkeypatch.setattr(BM25Index, "_top_maxscore", counting)
    for _ in range(150):
        common = [f"t{i}" for i in rng.integers(0, 8, rng.integers(1, 4))]
        rare = [f"t{i}" for i in rng.integers(20, 2000, rng.integers(0, 4))]
        query = " ".join(common + rare + common[:1])
        for n in (1, 10, 100):
            calls += 1
            rows, scores = index.top(query, n)
            ref_rows, ref_scores = _reference_top(index, query, n)
            assert rows.tolist() == ref_rows, query
            assert scores.dtype == np.float32 and scores.tobytes() == ref_scores.tobytes(), query
    assert pruned > calls // 2


def test_maxscore_keeps_ties_at_the_cut():
    """Twenty identical chunks tie at the n-th score: top(n) takes the lowest rows among them,
    with skipping on (the bound's margin keeps every tied chunk a candidate)."""
    import graphstrata.bm25 as index_module

    texts = ["common filler words here"] * 400 + ["rare common words"] * 20 + ["common"] * 400
    index = BM25Index(texts)
    old = index_module.BM25_PRUNE_MIN
    index_module.BM25_PRUNE_MIN = 0
    try:
        for n in (5, 20, 25):
            rows, scores = index.top("rare common", n)
            ref_rows, ref_scores = _reference_top(index, "rare common", n)
            assert rows.tolist() == ref_rows and scores.tobytes() == ref_scores.tobytes()
    finally:
        index_module.BM25_PRUNE_MIN = old


# -- impact-ordered candidates (issue 33): a bounded read per term ---------------------------------


def _reference_impact(index: BM25Index, query: str, n: int, keep: int) -> tuple[list[int], np.ndarray]:
    """By hand: a term held by more than ``keep`` chunks counts only in its ``keep`` chunks of
    largest part (ties at the cut: the lower rows); parts summed in float64 in query order;
    best ``n`` first, ties by row."""
    sums = np.zeros(index.n, np.float64)
    for tid in index._term_ids(bm25_tokenize(query)):
        a, b = int(index._indptr[tid]), int(index._indptr[tid + 1])
        rows, parts = index._indices[a:b], index._data[a:b]
        if b - a > keep:
            pick = np.lexsort((rows, -parts))[:keep]  # largest part first, then the lower row
            rows, parts = rows[pick], parts[pick]
        sums[rows] += parts
    full = sums.astype(np.float32)
    order = np.lexsort((np.arange(index.n), -full))[:n]
    order = order[full[order] > 0]
    return order.tolist(), full[order]


@pytest.mark.parametrize("seed", [0, 1])
def test_top_impact_reads_each_common_term_only_in_its_largest_parts(seed, monkeypatch):
    """With the prefix length cut to 64 on a 3,000-chunk Zipf corpus: the rows and float32
    scores of summing, per common term, only its 64 largest parts (by hand); a query of rare
    terms only is exactly :meth:`BM25Index.top`; and the pruning did change some answers (so
    the first check is not the exact top by accident)."""
    import graphstrata.bm25 as index_module

    monkeypatch.setattr(index_module, "BM25_IMPACT_ROWS", 64)
    index = BM25Index(_zipf_corpus(seed))
    assert len(index._imp_terms) > 5 and index._imp_rows.shape == (64 * len(index._imp_terms),)
    rng = np.random.default_rng(200 + seed)
    differs = 0
    for _ in range(120):
        common = [f"t{i}" for i in rng.integers(0, 8, rng.integers(1, 4))]
        rare = [f"t{i}" for i in rng.integers(600, 2000, rng.integers(0, 4))]
        query = " ".join(common + rare + common[:1])
        for n in (1, 10, 100):
            rows, scores = index.top_impact(query, n)
            ref_rows, ref_scores = _reference_impact(index, query, n, 64)
            assert rows.tolist() == ref_rows, query
            assert scores.dtype == np.float32 and scores.tobytes() == ref_scores.tobytes(), query
            differs += rows.tolist() != index.top(query, n)[0].tolist()
        rare_only = " ".join(r[1:] for r in rare) or "1999"  # "t600" is also read as "t" and "600"
        assert all(index.df(t) <= 64 for t in bm25_tokenize(rare_only))
        assert [a.tolist() for a in index.top_impact(rare_only, 10)] == [a.tolist() for a in index.top(rare_only, 10)]
    assert differs > 0


def test_top_impact_is_top_when_no_term_is_long_and_survives_updates_and_arrays(monkeypatch):
    """Below the prefix length :meth:`top_impact` is :meth:`top` bit for bit; an updated index
    and one rebuilt from its arrays hold the same prefixes as a fresh one."""
    import graphstrata.bm25 as index_module

    texts = _zipf_corpus(3, n=600)
    index = BM25Index(texts)  # the default 4,096 rows: no term of 600 chunks is long
    assert len(index._imp_terms) == 0
    for q in ("t0 t1 t2", "t0 t5 t700", "t3 t3 t9"):
        a, b = index.top_impact(q, 20), index.top(q, 20)
        assert a[0].tolist() == b[0].tolist() and a[1].tobytes() == b[1].tobytes()
    monkeypatch.setattr(index_module, "BM25_IMPACT_ROWS", 16)
    small = BM25Index(texts[:500])
    updated = small.updated(np.arange(500), texts[500:])
    fresh = BM25Index(texts)
    loaded = BM25Index.from_arrays(fresh.to_arrays())
    for other in (updated, loaded):
        assert other._imp_terms.tolist() == fresh._imp_terms.tolist()
        assert other._imp_rows.tobytes() == fresh._imp_rows.tobytes()
        assert other._imp_data.tobytes() == fresh._imp_data.tobytes()
