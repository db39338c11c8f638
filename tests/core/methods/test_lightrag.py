"""LightRAG (spec seed-lightrag.md §2): keywords, dual-level paths, one-hop expansion, budgets;
the reference code's mix mode (hybrid context + a dense search's chunks, merged by turns)."""

import pytest
from graphstrata import Document, GraphStrata
from graphstrata.methods.base import round_robin
from graphstrata.methods.keywords import offline_keywords
from graphstrata.methods.lightrag import RETRIEVED_BY, LightRAG, count_tokens
from graphstrata.testing import HashEmbedder, ScriptedLLM, answer_every_prompt

QUERY = "Where was Edmund Hillary born?"


@pytest.fixture()
def gs(corpus, embedder, small_config):
    return GraphStrata.build(corpus, config=small_config, embedder=embedder)


def test_offline_keywords_match_longest_entity_ngrams():
    vocab = {"bank of america", "america", "amadeo giannini", "founder", "san jose"}
    q = "Who was the founder of Bank of America, and did Giannini visit Paris?"
    kw = offline_keywords(q, vocab)
    # longest match wins ("america" is inside "bank of america"), query order kept
    assert kw.matched == ["founder", "bank of america"]
    assert kw.low_level[:2] == ["founder", "Bank of America"]
    # capitalised spans the KG does not know are low-level keywords too
    assert "Giannini" in kw.low_level and "Paris" in kw.low_level
    # high-level = the remaining content words (no stop words, nothing already matched)
    assert "visit" in kw.high_level
    assert not {"who", "was", "the", "of", "founder", "Giannini"} & set(kw.high_level)
    # single stop words never match even when they are entity ids
    assert offline_keywords("the", {"the"}).matched == []


def test_keywords_fn_is_the_llm_seam(gs):
    seen = []

    def fn(query):
        seen.append(query)
        return {"high_level_keywords": ["mountaineering"], "low_level_keywords": ["Auckland"]}

    ctx = LightRAG().context(gs, QUERY, gs.embedder.embed([QUERY])[0], keywords_fn=fn, mode="local")
    assert seen == [QUERY]
    assert ctx.keywords.low_level == ["Auckland"] and ctx.keywords.matched == ["auckland"]
    assert "auckland" in [e for e, _, _ in ctx.entities]
    # tuple form works too
    ctx2 = LightRAG().context(gs, QUERY, gs.embedder.embed([QUERY])[0],
                              keywords_fn=lambda q: ([], ["Mount Everest"]), mode="local")
    assert ctx2.keywords.matched == ["mount everest"]


def test_local_path_expands_one_hop_to_incident_relations(gs):
    hits = gs.retrieve(QUERY, method="lightrag", k=2, mode="local")
    ents = [h for h in hits if h.kind == "entity"]
    rels = [h for h in hits if h.kind == "relation"]
    assert "edmund hillary" in {h.id for h in ents}  # named in the query: retrieved first
    assert rels
    local = {h.id for h in ents}
    for r in rels:
        src, dst = r.id.split("\u241f")
        assert src in local or dst in local  # incident to a retrieved entity
        assert r.metadata["path"] == "local"
    # ranked by edge degree (the spec's rank), best first
    assert [h.score for h in rels] == sorted((h.score for h in rels), reverse=True)


def test_global_path_expands_relations_to_their_endpoints(gs):
    hits = gs.retrieve(QUERY, method="lightrag", k=2, mode="global")
    rels = [h for h in hits if h.kind == "relation"]
    ents = [h for h in hits if h.kind == "entity"]
    assert rels and ents
    endpoints = {e for r in rels for e in r.id.split("\u241f")}
    assert {h.id for h in ents} <= endpoints
    assert all(h.metadata["path"] == "global" for h in rels + ents)
    for h in rels + ents:  # provenance
        assert h.chunk_ids and h.document_ids


def test_modes_differ_and_hybrid_is_their_union(gs):
    ctx = {m: LightRAG().context(gs, QUERY, gs.embedder.embed([QUERY])[0], mode=m)
           for m in ("local", "global", "hybrid")}
    rel = {m: {k for k, _, _ in c.relations} for m, c in ctx.items()}
    ent = {m: {e for e, _, _ in c.entities} for m, c in ctx.items()}
    assert rel["local"] != rel["global"] or ent["local"] != ent["global"]
    assert rel["hybrid"] == rel["local"] | rel["global"]
    assert ent["hybrid"] == ent["local"] | ent["global"]


def test_token_budgets_are_respected(gs):
    qvec = gs.embedder.embed([QUERY])[0]
    opts = {"max_entity_tokens": 40, "max_relation_tokens": 60, "max_source_tokens": 50}
    for mode in ("local", "global"):
        hits = gs.retrieve(QUERY, method="lightrag", k=3, mode=mode, **opts)
        ents = [h for h in hits if h.kind == "entity"]
        rels = [h for h in hits if h.kind == "relation"]
        assert sum(count_tokens(h.text) for h in ents) <= 40
        assert sum(count_tokens(h.text) for h in rels) <= 60
        ctx = LightRAG().context(gs, QUERY, qvec, mode=mode, **opts)
        assert sum(count_tokens(gs.chunks[r].text) for r, _ in ctx.sources) <= 50
        # the chunk ranking still has k chunks
        assert len([h for h in hits if h.kind == "chunk"]) == 3
    unlimited = gs.retrieve(QUERY, method="lightrag", k=3, max_entity_tokens=None,
                            max_relation_tokens=None, kinds=["relation"])
    limited = gs.retrieve(QUERY, method="lightrag", k=3, max_relation_tokens=60, kinds=["relation"])
    assert len(limited) < len(unlimited)


def test_chunks_ranked_deterministic_and_fused(gs):
    a = gs.retrieve(QUERY, method="lightrag", k=4)
    b = gs.retrieve(QUERY, method="lightrag", k=4)
    assert [(h.kind, h.id, h.score) for h in a] == [(h.kind, h.id, h.score) for h in b]
    chunks = [h for h in a if h.kind == "chunk"]
    assert len(chunks) == 4 and chunks[0].document_ids == ["hillary"]
    assert [h.score for h in chunks] == sorted((h.score for h in chunks), reverse=True)
    kinds = [h.kind for h in a if h.kind != "chunk"]
    assert kinds == sorted(kinds, key=["entity", "relation"].index)  # ordered by kind


def test_unknown_mode_and_option_raise(gs):
    # the message names the option and every mode it accepts (naive is the `dense` method here)
    allowed = "'local', 'global', 'hybrid', 'mix'"
    for bad in ("naive", "MIX", "hybrid "):
        with pytest.raises(ValueError, match=f"option 'mode' of method 'lightrag' must be one of {allowed}, got"):
            gs.retrieve(QUERY, method="lightrag", mode=bad)
    with pytest.raises(ValueError, match="unknown option"):
        gs.retrieve(QUERY, method="lightrag", top_n=3)
    llm = ScriptedLLM(default="x")  # answer() refuses it too, before any LLM call
    with pytest.raises(ValueError, match=f"must be one of {allowed}, got 'naive'"):
        gs.answer(QUERY, method="lightrag", llm=llm, mode="naive")
    assert llm.calls == []


# -- mix mode: the hybrid context plus a dense search's chunks (LightRAG's reference code) --------

#: a paraphrase of QUERY that only the dense search sees: the embedder reads "apiarist" as the
#: query's words, BM25 and the graph see one unknown word
PARAPHRASE = "where was edmund hillary born"


class ParaphraseEmbedder(HashEmbedder):
    """:class:`HashEmbedder` that embeds "apiarist" as :data:`PARAPHRASE`."""

    def embed(self, texts):
        return super().embed([t.replace("apiarist", PARAPHRASE) for t in texts])


@pytest.fixture()
def mixed(corpus, small_config):
    """The core corpus, two more pages on Edmund Hillary (graph and BM25 evidence for the
    query) and one page only the dense search finds: "the apiarist"."""
    docs = corpus + [
        Document("note", "the apiarist", {"title": "Note"}),
        Document("tuakau", "Tuakau\nEdmund Hillary grew up in Tuakau. Edmund Hillary was born before his "
                 "family moved to Tuakau.", {"title": "Tuakau"}),
        Document("antarctica", "Antarctica\nEdmund Hillary reached the South Pole in 1958. Edmund Hillary was "
                 "born to a family of beekeepers.", {"title": "Antarctica"}),
    ]
    return GraphStrata.build(docs, config=small_config, embedder=ParaphraseEmbedder())


def chunk_hits(gs, k, **options):
    return [h for h in gs.retrieve(QUERY, k=k, kinds=["chunk"], **options)]


def test_mix_adds_the_dense_chunks_the_hybrid_ranking_misses(mixed):
    k = 3
    dense = chunk_hits(mixed, k, method="dense")
    hybrid = chunk_hits(mixed, k, method="lightrag", mode="hybrid")
    mix = chunk_hits(mixed, k, method="lightrag", mode="mix")
    # the construction: dense ranks the paraphrase first (cosine above the 0.2 floor), the
    # hybrid mode's graph + BM25 ranking leaves it out of its k
    assert dense[0].id == "note#0" and dense[0].score >= 0.2
    assert "note#0" not in [h.id for h in hybrid]
    # mix takes turns, dense first: dense #1, hybrid #1, then round two
    assert [h.id for h in mix][:2] == ["note#0", hybrid[0].id]
    assert mix[0].metadata["retrieved_by"] == "vector"
    assert {h.id for h in mix} <= {h.id for h in dense} | {h.id for h in hybrid}
    assert len({h.id for h in mix}) == len(mix) == k
    for h in mix:  # which merged list holds each chunk
        in_dense, in_hybrid = h.id in {x.id for x in dense}, h.id in {x.id for x in hybrid}
        expected = "both" if in_dense and in_hybrid else "vector" if in_dense else "graph"
        assert h.metadata["retrieved_by"] == expected, h.id
    # the other modes' chunk hits say nothing of the kind
    assert all("retrieved_by" not in h.metadata for h in hybrid)


def test_mix_context_hits_are_the_hybrid_modes(mixed):
    def context(mode):
        hits = mixed.retrieve(QUERY, method="lightrag", k=3, mode=mode, kinds=["entity", "relation"], context_k=500)
        return [(h.kind, h.id, h.score, h.text, h.metadata) for h in hits]

    hybrid = context("hybrid")
    assert hybrid and {kind for kind, *_ in hybrid} == {"entity", "relation"}
    assert context("mix") == hybrid
    qvec = mixed.embedder.embed([QUERY])[0]
    a, b = (LightRAG().context(mixed.state, QUERY, qvec, mode=m) for m in ("hybrid", "mix"))
    assert (a.entities, a.relations, a.sources) == (b.entities, b.relations, b.sources)


def test_mix_returns_at_most_k_chunks_with_round_robin_scores(mixed):
    n = len(mixed.chunks)
    for k in (1, 2, 3, 5, n, n + 3):
        dense = [h.id for h in chunk_hits(mixed, k, method="dense") if h.score >= 0.2]
        graph = [h.id for h in chunk_hits(mixed, k, method="lightrag")]
        mix = chunk_hits(mixed, k, method="lightrag", mode="mix")
        assert len(mix) == min(k, n), k
        assert len({h.id for h in mix}) == len(mix)
        for h in mix:
            assert h.metadata["retrieved_by"] in RETRIEVED_BY
            # round = the best 0-based rank in either list; score = raw score = 1 / (1 + round)
            rounds = [lst.index(h.id) for lst in (dense, graph) if h.id in lst]
            assert 0.0 < h.score <= 1.0
            assert h.score == pytest.approx(1.0 / (1 + min(rounds))), (k, h.id)
            assert h.metadata["raw_score"] == pytest.approx(h.score)
        assert [h.score for h in mix] == sorted((h.score for h in mix), reverse=True)


def test_mix_keeps_the_cosine_floor_of_the_vector_search(mixed):
    # no chunk is within cosine 0.999 of the query: no dense chunk joins, mix = the hybrid ranking
    mix = chunk_hits(mixed, 4, method="lightrag", mode="mix", min_similarity=0.999)
    hybrid = chunk_hits(mixed, 4, method="lightrag", min_similarity=0.999)
    assert [h.id for h in mix] == [h.id for h in hybrid]
    assert {h.metadata["retrieved_by"] for h in mix} == {"graph"}


def test_mix_with_a_filter_pages_and_keeps_the_labels(mixed):
    hits = chunk_hits(mixed, 2, method="lightrag", mode="mix", filters={"title": {"$in": ["Note", "Auckland"]}})
    assert [h.id for h in hits] == ["note#0", "auckland#0"]
    # the filter asked the method for more chunks (both lists deeper): the labels came along
    assert hits[0].metadata["retrieved_by"] in ("vector", "both")
    assert hits[1].metadata["retrieved_by"] == "graph"  # cosine below the floor
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_mix_explains_each_chunk_by_its_ranks_in_the_two_lists(mixed):
    plain = chunk_hits(mixed, 3, method="lightrag", mode="mix")
    explained = chunk_hits(mixed, 3, method="lightrag", mode="mix", explain=True)
    assert [(h.id, h.score) for h in explained] == [(h.id, h.score) for h in plain]
    dense = [h.id for h in chunk_hits(mixed, 3, method="dense") if h.score >= 0.2]
    graph = [h.id for h in chunk_hits(mixed, 3, method="lightrag")]
    for h in explained:
        e = h.explain
        expected = {f"{name}_rank": lst.index(h.id) + 1 for name, lst in (("vector", dense), ("graph", graph))
                    if h.id in lst}
        assert e["mix"] == expected
        assert e["reason"].startswith("mix: ")
        assert "score_parts" not in e  # the graph terms do not add up to a round-robin score
    assert explained[0].explain["reason"].startswith("mix: rank 1 of the dense search")


def test_mix_answer_prompt_shows_the_kg_context_and_the_dense_chunks_and_cites_them(mixed):
    llm = ScriptedLLM(default="Born at home [3]; see also [1].")
    answer = mixed.answer(QUERY, method="lightrag", llm=llm, k=3, mode="mix")
    system = llm.calls[-1][1]
    hits = answer.hits
    sources = [h for h in hits if h.kind == "chunk" and h.metadata["retrieved_by"] != "vector"]
    vector = [h for h in hits if h.kind == "chunk" and h.metadata["retrieved_by"] == "vector"]
    assert [h.id for h in vector] == ["note#0"] and len(sources) == 2
    # the KG context (entities, relations of the hybrid mode) and the dense chunk's text
    assert '"Edmund Hillary"' in system.split("-----Relationships-----")[0].split("-----Entities-----")[1]
    assert "-----Relationships-----" in system
    assert any(h.kind == "relation" for h in hits)
    kg_sources, dense_chunks = system.split("-----Sources-----")[1].split("-----Document Chunks-----")
    for i, h in enumerate(sources, 1):
        assert f'{i},\t"{" ".join(h.text.split())}"' in kg_sources
    assert '3,\t"the apiarist"' in dense_chunks
    # [3] is the Document Chunks row: the dense search's chunk; [1] the first Sources row
    assert [(c.number, c.chunk_ids) for c in answer.citations] == [(3, ["note#0"]), (1, [sources[0].id])]
    # the prompt helper of the other tests answers the mix prompt too
    toy = mixed.answer(QUERY, method="lightrag", llm=ScriptedLLM(answer_every_prompt), k=3, mode="mix")
    assert toy.text == "Toy answer."


def test_round_robin_takes_turns_without_repeats():
    a = [(5, 0.9), (1, 0.8), (2, 0.1)]
    b = [(1, 3.0), (7, 2.0), (5, 1.0), (8, 0.5)]
    # round 0: 5 (a), 1 (b); round 1: 1 taken, 7 (b); round 2: 2 (a), 5 taken; round 3: 8 (b)
    assert round_robin((a, b), 10) == [(5, 0), (1, 0), (7, 1), (2, 2), (8, 3)]
    assert round_robin((a, b), 3) == [(5, 0), (1, 0), (7, 1)]
    assert round_robin((b, a), 3) == [(1, 0), (5, 0), (7, 1)]  # ties in list order
    assert round_robin((a, b), 0) == []
    assert round_robin(([], b), 2) == [(1, 0), (7, 1)]
