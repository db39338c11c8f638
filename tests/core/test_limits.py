"""Bounds on work (issue 15, finding 8): document and query size limits, the query clause cap,
and the extraction caps that keep build time and memory linear in the input."""

from __future__ import annotations

import json
import random
import time
from itertools import combinations

import pytest
from graphstrata import Document, GraphStrata, GraphStrataConfig
from graphstrata.chunking import chunk_documents
from graphstrata.config import check_document_size, check_query
from graphstrata.extraction import StatisticalExtractor, bounded_sentences
from graphstrata.methods.temporal import order_clauses
from graphstrata.types import Chunk

_SYL = "ka lo mi ra ne to su vi da pe go hu ri sa mo te".split()
_WORDS = (
    "went met saw with the of and to from near over under about a an later then river city "
    "bridge house market school garden road tower station valley"
).split()


def no_break_text(n_chars: int, name_share: float = 0.05, seed: int = 7) -> str:
    """``n_chars`` of words and capitalised made-up names with no sentence break at all."""
    rnd = random.Random(seed)
    words, size = [], 0
    while size < n_chars:
        if rnd.random() < name_share:
            w = "".join(rnd.choice(_SYL) for _ in range(4)).capitalize()
        else:
            w = rnd.choice(_WORDS)
        words.append(w)
        size += len(w) + 1
    return " ".join(words)[:n_chars]


def one_chunk(text: str, doc_id: str = "d") -> Chunk:
    return Chunk(id=f"{doc_id}#0", document_id=doc_id, index=0, text=text, start=0,
                 end=len(text), n_tokens=len(text.split()))


# -- configuration --------------------------------------------------------------------------


def test_limit_fields_have_generous_defaults_and_old_configs_load():
    cfg = GraphStrataConfig()
    assert cfg.max_document_chars >= 10_000_000
    assert cfg.max_query_chars >= 1_000
    assert cfg.max_query_clauses >= 3
    assert cfg.max_entities_per_chunk > 0 and cfg.max_relations_per_sentence > 0
    # a config persisted before the limits existed: the defaults apply
    old = cfg.model_dump()
    for name in ("max_document_chars", "max_query_chars", "max_query_clauses",
                 "max_entities_per_chunk", "max_relations_per_sentence"):
        del old[name]
    loaded = GraphStrataConfig.model_validate(json.loads(json.dumps(old)))
    assert loaded == cfg


@pytest.mark.parametrize(
    "field", ["max_document_chars", "max_query_chars", "max_entities_per_chunk"]
)
def test_limit_fields_reject_non_positive_values(field):
    with pytest.raises(ValueError, match=field):
        GraphStrataConfig(**{field: 0})


# -- documents ------------------------------------------------------------------------------


def test_document_over_the_limit_is_refused_by_name():
    docs = [Document("small", "a few words"), Document("big-one", "word " * 40)]
    with pytest.raises(ValueError, match=r"'big-one'.*200.*limit of 100"):
        chunk_documents(docs, 20, 4, max_document_chars=100)
    assert chunk_documents(docs, 20, 4, max_document_chars=None)  # no limit
    assert chunk_documents(docs, 20, 4)  # the generous default


def test_check_document_size_names_document_size_and_limit():
    check_document_size("ok", 100, 100)
    with pytest.raises(ValueError, match=r"'doc-7' is 1,001 characters.*limit of 1,000"):
        check_document_size("doc-7", 1001, 1000)


def test_build_refuses_a_document_over_the_configured_limit(embedder):
    docs = [Document("fine", "Amadeo Giannini founded a bank."),
            Document("huge", "Edmund Hillary climbed mountains. " * 20)]
    with pytest.raises(ValueError, match="'huge'"):
        GraphStrata.build(docs, config={"max_document_chars": 200}, embedder=embedder)


# -- queries --------------------------------------------------------------------------------


def test_check_query_limits_length():
    check_query("Who founded Bank of America?", GraphStrataConfig())
    check_query("x" * 4_000)  # default limit, inclusive
    with pytest.raises(ValueError, match=r"4,001 characters.*limit of 4,000.*max_query_chars"):
        check_query("x" * 4_001)
    with pytest.raises(ValueError, match="limit of 10"):
        check_query("a question of some length", {"max_query_chars": 10})
    for bad in ("", "   ", None, 3):
        with pytest.raises(ValueError, match="non-empty string"):
            check_query(bad)


def _chained_question(n: int) -> str:
    """``n`` event clauses chained by "before" (100 of them: about 2.7 kB)."""
    things = ["heater", "tap", "window", "door", "roof"]
    return "Did " + " before ".join(f"Ann{i} fixed the {things[i % 5]}" for i in range(n)) + "?"


def test_order_clauses_caps_the_clause_count():
    q = _chained_question(100)
    assert len(q) < 4_000  # within the query limit: the cap is what bounds the work
    assert len(order_clauses(q, max_clauses=None)) == 100
    clauses = order_clauses(q)  # default cap
    assert len(clauses) == GraphStrataConfig().max_query_clauses
    assert clauses[:2] == ["Did Ann0 fixed the heater", "Ann1 fixed the tap"]
    assert len(order_clauses(q, max_clauses=2)) == 2
    assert order_clauses(q, max_clauses=0) == []
    with pytest.raises(ValueError, match="max_clauses"):
        order_clauses(q, max_clauses=-1)


class CountingEmbedder:
    """Wraps the test embedder and counts the texts it embeds."""

    def __init__(self, inner):
        self.inner, self.id, self.dim, self.texts = inner, inner.id, inner.dim, 0

    def embed(self, texts):
        self.texts += len(texts)
        return self.inner.embed(texts)

    def token_spans(self, text):
        return self.inner.token_spans(text)


@pytest.mark.parametrize("cap", [0, 2, 4])
def test_archrag_embeds_at_most_max_query_clauses_clauses(corpus, small_config, embedder, cap):
    counting = CountingEmbedder(embedder)
    gs = GraphStrata.build(corpus, config={**small_config, "max_query_clauses": cap},
                           embedder=counting)
    counting.texts = 0
    hits = gs.retrieve(_chained_question(100), method="archrag", k=2)
    assert len([h for h in hits if h.kind == "chunk"]) == 2
    assert counting.texts <= 1 + cap  # the whole question + at most `cap` clauses


# -- extraction caps ------------------------------------------------------------------------


def test_bounded_sentences_cuts_long_spans_at_whitespace():
    text = "Short one.\n" + no_break_text(10_000) + "\nLast line."
    spans = bounded_sentences(text, 500)
    assert all(e - s <= 500 for s, e in spans)
    assert text[spans[0][0]:spans[0][1]] == "Short one."
    assert text[spans[-1][0]:spans[-1][1]] == "Last line."
    # pieces cover every word, none cut inside a word
    words = [w for s, e in spans for w in text[s:e].split()]
    assert words == text.split()
    with pytest.raises(ValueError, match="max_chars"):
        bounded_sentences(text, 0)


def test_entities_per_chunk_are_capped_keeping_the_most_mentioned():
    names = [f"Name{chr(65 + i // 26)}{chr(97 + i % 26)}" for i in range(150)]
    # one long sentence naming 150 people; Alpha Prime is named in three more sentences
    text = ("We met " + " and ".join(names) + " there.\n"
            + "\n".join(f"Then we saw Alpha Prime again, {i} times." for i in range(3)))
    ex = StatisticalExtractor(top_n=0, max_entities_per_chunk=20, max_relations_per_sentence=10,
                              use_titles=True)
    entities, relations = ex.extract([one_chunk(text)], {"d": "Topic Page"})
    ids = {e.id for e in entities}
    assert len(ids) == 20
    assert {"topic page", "alpha prime"} <= ids  # the title first, then the most mentioned
    # the long sentence keeps 10 pairs, each 3-line sentence its single (title, Alpha) pair
    assert len(relations) <= 10 + 1
    assert all(r.source in ids and r.target in ids for r in relations)
    assert ("alpha prime", "topic page") in {(r.source, r.target) for r in relations}


def test_uncapped_chunk_would_be_quadratic_capped_one_is_bounded():
    text = "We met " + " and ".join(
        f"{a}{b}".capitalize() for a, b in combinations(_SYL + ["xo", "zu", "qi"], 2)
    )  # 171 distinct names, no sentence break
    chunk = one_chunk(text)
    free = StatisticalExtractor(top_n=0, max_entities_per_chunk=10_000,
                                max_relations_per_sentence=10**9, max_sentence_chars=10**9)
    e_free, r_free = free.extract([chunk])
    assert len(r_free) == len(e_free) * (len(e_free) - 1) // 2 > 10_000
    capped = StatisticalExtractor(top_n=0)  # the defaults
    e_cap, r_cap = capped.extract([chunk])
    assert len(e_cap) <= GraphStrataConfig().max_entities_per_chunk
    pieces = len(bounded_sentences(text, capped.max_sentence_chars))
    assert len(r_cap) <= pieces * GraphStrataConfig().max_relations_per_sentence


def test_long_sentences_are_split_so_descriptions_stay_bounded():
    text = no_break_text(30_000, name_share=0.2)
    ex = StatisticalExtractor(top_n=4, max_sentence_chars=1_000)
    entities, relations = ex.extract([one_chunk(text)])
    limit = ex.max_description_sentences * (1_000 + 1)
    assert relations and all(len(r.description) <= limit for r in relations)
    assert all(len(e.description) <= limit for e in entities)


def test_extractor_rejects_bad_caps_and_reads_them_from_a_config():
    for bad in ({"max_entities_per_chunk": 0}, {"max_relations_per_sentence": -1},
                {"max_sentence_chars": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            StatisticalExtractor(**bad)
    ex = StatisticalExtractor.from_config(
        GraphStrataConfig(max_entities_per_chunk=7, max_relations_per_sentence=3, tfidf_top_n=2)
    )
    assert (ex.max_entities_per_chunk, ex.max_relations_per_sentence, ex.top_n) == (7, 3, 2)


def test_default_caps_change_nothing_on_real_passages(shared_data):
    docs = []
    with open(shared_data / "musique" / "corpus.jsonl", encoding="utf-8") as f:
        for line, _ in zip(f, range(300), strict=False):
            row = json.loads(line)
            docs.append(Document(row["id"], row["text"], {"title": row["title"]}))
    chunks = chunk_documents(docs, 200, 32)
    titles = {d.id: d.metadata["title"] for d in docs}
    free = StatisticalExtractor(max_entities_per_chunk=10**6, max_relations_per_sentence=10**9,
                                max_sentence_chars=10**9)
    assert StatisticalExtractor().extract(chunks, titles) == free.extract(chunks, titles)


def test_two_megabyte_document_without_sentence_breaks_builds_linearly(embedder):
    """A 2 MB single document with no sentence break builds, and its graph grows linearly.

    ``max_layers=0`` leaves out the community hierarchy, whose clustering cost is not the
    extractor's (bench/bench_limits.py measures full builds); everything else runs.
    """
    config = {"max_layers": 0}
    small = GraphStrata.build([Document("half", no_break_text(500_000))], config=config,
                              embedder=embedder)
    start = time.perf_counter()
    big = GraphStrata.build([Document("two", no_break_text(2_000_000))], config=config,
                            embedder=embedder)
    assert time.perf_counter() - start < 900  # very generous: about 30 s here
    s, b = small.stats(), big.stats()
    cfg = GraphStrataConfig()
    assert b["entities"] <= b["chunks"] * cfg.max_entities_per_chunk
    for key in ("chunks", "entities", "relations"):
        assert 0 < b[key] <= 5 * s[key], (key, s[key], b[key])
    hits = big.retrieve("Kalomira went to the river", method="hybrid", k=3)
    assert len(hits) == 3
