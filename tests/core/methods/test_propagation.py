"""Passage propagation (PPR over the chunk–entity graph with title links) and the lexical
side it is seeded from: CamelCase-aware BM25 tokens, titles in the BM25 text."""

import numpy as np
import pytest
from graphstrata import Document, GraphStrata
from graphstrata.bm25 import BM25Index, bm25_tokenize, lexical_texts
from graphstrata.extraction import TitleIndex, document_title
from graphstrata.methods.propagation import named_chunks, propagate
from graphstrata.structures.passages import build_passage_graph


def test_bm25_tokens_split_camel_case_and_keep_the_word():
    toks = bm25_tokenize("WolfgangSchulz: see you at the HTTPServer2 at 7pm")
    assert toks[:3] == ["wolfgang", "schulz", "wolfgangschulz"]
    assert {"http", "server", "2", "httpserver2"} <= set(toks)
    assert "the" not in toks and "at" not in toks  # stop words still dropped
    assert bm25_tokenize("plain words only") == ["plain", "words"]


def test_bm25_matches_a_first_name_inside_a_chat_handle():
    bm = BM25Index(["WolfgangSchulz: dinner tonight?", "JenniferMoore: workout plan", "LiHua: ok"])
    scores = bm.scores("Did Wolfgang ask about dinner?")
    assert int(np.argmax(scores)) == 0 and scores[1] == 0
    assert int(np.argmax(bm.scores("what did Li Hua say"))) == 2


def test_document_title_rejects_file_names():
    assert document_title(" Mount Everest ") == "Mount Everest"
    for bad in ("week1/20260105_1100", "notes_v2", "", None, 3):
        assert document_title(bad) is None


def test_title_mentions_finds_case_sensitive_token_runs():
    texts = [
        "Tenzing Norgay and Edmund Hillary climbed it.",  # names "Edmund Hillary"
        "Big Eye was directed by Tim Burton.",  # names "Big Eye (film)" without its qualifier
        "edmund hillary in lower case is not a name; Hillary alone is not the title",
        "Mount Everestest is not Mount Everest's exact run? it is: Mount Everest",
    ]
    titles = {"h": "Edmund Hillary", "b": "Big Eye (film)", "e": "Mount Everest",
              "w": "week1/20260105_1100", "p": "a lowercase phrase"}
    found = TitleIndex(titles).mentions(texts)
    assert found == {"h": [0], "b": [1], "e": [3]}
    assert TitleIndex({}).mentions(texts) == {}


def test_lexical_texts_prefix_subject_titles_only(embedder):
    docs = [Document("a", "He was born in Auckland.", {"title": "Edmund Hillary"}),
            Document("c", "LiHua: hi", {"title": "week1/20260105_1100"}),
            Document("d", "Rivers of Europe drain into several seas.")]
    gs = GraphStrata.build(docs, embedder=embedder)
    texts = dict(zip((c.document_id for c in gs.chunks),
                     lexical_texts(gs.chunks, gs.documents, use_titles=True), strict=True))
    assert texts == {"a": "Edmund Hillary\nHe was born in Auckland.", "c": "LiHua: hi",
                     "d": "Rivers of Europe drain into several seas."}
    assert lexical_texts(gs.chunks, gs.documents, use_titles=False) == [c.text for c in gs.chunks]
    # the title reaches BM25: a query naming only the subject finds the pronoun paragraph
    assert gs.retrieve("Edmund Hillary", method="bm25", k=1)[0].document_ids == ["a"]


@pytest.fixture()
def linked(embedder):
    # "film" names its director's page by title, whose entity ("tim burton (director)") is not
    # the span "Tim Burton": nothing but the title link connects the two pages
    docs = [
        Document("film", "Big Eye is a 2014 drama. Big Eye was directed by Tim Burton.",
                 {"title": "Big Eye (film)"}),
        Document("burton", "He married Helena Bonham Carter in 2001. He lives in London.",
                 {"title": "Tim Burton (director)"}),
        Document("other", "Quantum chromodynamics describes quarks and gluons.",
                 {"title": "Quantum chromodynamics"}),
        Document("other2", "Rivers of Europe drain into several seas.", {"title": "Rivers"}),
    ]
    return GraphStrata.build(docs, embedder=embedder)


def test_passage_graph_links_a_page_to_the_pages_that_name_it(linked):
    with_titles = build_passage_graph(linked, max_df=50, title_weight=2.0)
    without = build_passage_graph(linked, max_df=50, title_weight=0.0)
    assert with_titles.title_nodes == 1 and without.title_nodes == 0
    film, burton = linked.chunk_row["film#0"], linked.chunk_row["burton#0"]
    # column-stochastic walk; film -> burton only through the title node
    m = with_titles.walk.matrix.toarray()
    assert m[burton, film] > 0
    assert without.walk.matrix.toarray()[burton, film] == 0
    cols = m.sum(axis=0)
    assert np.allclose(cols[~with_titles.walk.dangling], 1.0)


def test_propagate_lifts_the_linked_passage_above_unrelated_ones(linked):
    film, burton = linked.chunk_row["film#0"], linked.chunk_row["burton#0"]
    other = linked.chunk_row["other#0"]
    # seeds: the film page best, an unrelated page second, the director's page barely scored
    seeds = {film: 1.0, other: 0.3, burton: 0.01}
    out = propagate(linked, seeds, seed_top_n=2, seed_power=1.0, title_weight=2.0)
    assert out[film] == pytest.approx(1.0, abs=1e-2)
    assert out[burton] > out[other]
    flat = propagate(linked, seeds, seed_top_n=2, seed_power=1.0, title_weight=0.0)
    assert flat[burton] < flat[other]  # no link: seed order stands
    assert propagate(linked, {}) == {}
    with pytest.raises(ValueError, match="seed_top_n"):
        propagate(linked, seeds, seed_top_n=0)
    with pytest.raises(ValueError, match="seed_power"):
        propagate(linked, seeds, seed_power=0)


def test_archrag_two_hop_question_reaches_the_director_page(linked):
    q = "Who is the spouse of Big Eye's director?"
    on = [h.document_ids[0] for h in linked.retrieve(q, method="archrag", k=3, kinds=["chunk"])]
    off = [h.document_ids[0] for h in
           linked.retrieve(q, method="archrag", k=3, kinds=["chunk"], propagate=False)]
    assert on[:2] == ["film", "burton"]
    assert off[1] != "burton"  # by query score alone an unrelated page comes second


def test_document_nodes_join_the_chunks_of_one_long_document(embedder):
    # every word occurs once: no entity joins the chunks of "long", only its document node can
    long_text = " ".join(f"zq{i}a zq{i}b zq{i}c." for i in range(60))
    docs = [Document("long", long_text), Document("short", "Pears grow on trees.")]
    gs = GraphStrata.build(docs, config={"chunk_size": 40, "chunk_overlap": 0}, embedder=embedder)
    rows = [r for r, c in enumerate(gs.chunks) if c.document_id == "long"]
    assert len(rows) >= 3
    off = build_passage_graph(gs, title_weight=0.0, document_weight=0.0).walk.matrix.toarray()
    on = build_passage_graph(gs, title_weight=0.0, document_weight=2.0).walk.matrix.toarray()
    first, last = rows[0], rows[-1]
    assert off[last, first] == 0 and on[last, first] > 0
    short = gs.chunk_row["short#0"]
    assert on[short, first] == 0  # never across documents


def test_title_index_finds_the_titles_a_question_names():
    index = TitleIndex({"b": "Big Eye (film)", "t": "Tim Burton (director)", "w": "week1/x_1",
                        "l": "lowercase phrase"})
    assert len(index) == 2
    assert index.find("Who is the spouse of Big Eye's director?") == {"b"}
    assert index.find("Did Tim Burton direct Big Eye?") == {"b", "t"}
    assert index.find("big eye in lower case") == set()


def test_a_page_the_question_names_seeds_the_walk(linked):
    film, other = linked.chunk_row["film#0"], linked.chunk_row["other#0"]
    assert named_chunks(linked, "Is Quantum chromodynamics older than Big Eye?") == sorted(
        [film, other])
    assert named_chunks(linked, "nothing named here") == []
    # "other" is named but scored below the top seed; its reset mass comes from the naming
    scores = {film: 1.0, other: 0.6}
    plain = propagate(linked, scores, seed_top_n=1, seed_power=6.0)
    named = propagate(linked, scores, seed_top_n=1, seed_power=6.0, named_rows=[other],
                      named_weight=1.0)
    assert named[other] > plain[other]
    assert named[film] == pytest.approx(1.0, abs=1e-2)  # the best seed stays first
    # a named chunk without a query score adds nothing
    assert propagate(linked, {film: 1.0}, named_rows=[other], named_weight=1.0).get(other, 0) == 0


def test_rank_of_a_large_mapping_is_the_plain_sort_ties_included():
    """rank() cuts big inputs with a numpy partial sort first; it must give exactly what the
    (score desc, row asc) sort gives, ties at the cut and signed zeros included."""
    import random

    from graphstrata.methods.base import rank

    rng = random.Random(0)
    for n in (300, 1000, 5000):
        values = [0.0, -0.0, 1.0, 0.5, 0.25]
        scores = {rng.randrange(10 * n): rng.choice(values + [rng.random(), -rng.random()]) for _ in range(n)}
        for limit in (0, 1, 5, 10, 57, len(scores)):
            want = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
            assert rank(scores, limit) == want, (n, limit)
    strings = {f"e{i}": float(i % 7) for i in range(400)}  # non-row keys: the plain sort
    assert rank(strings, 3) == sorted(strings.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
