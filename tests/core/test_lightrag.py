"""LightRAG (spec seed-lightrag.md §2): keywords, dual-level paths, one-hop expansion, budgets."""

import pytest
from graphstrata import GraphStrata
from graphstrata.methods.lightrag import LightRAG, count_tokens, offline_keywords

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
    with pytest.raises(ValueError, match="mode"):
        gs.retrieve(QUERY, method="lightrag", mode="naive")
    with pytest.raises(ValueError, match="unknown option"):
        gs.retrieve(QUERY, method="lightrag", top_n=3)
