"""CJK text in BM25 and the statistical extractor (issue 44): character bigrams, no
clause-length entities, English unchanged."""

from graphstrata import Document
from graphstrata.cjk import cjk_bigrams, cjk_words, cut_long_cjk_runs
from graphstrata.extraction import StatisticalExtractor, capitalised_spans
from graphstrata.bm25 import BM25Index, bm25_tokenize

ZH = "Andrew Morton通常是最后的补丁接收者。他会审阅补丁，然后发送给Linus。"


def test_a_chinese_paragraphs_bm25_tokens_are_character_bigrams():
    assert bm25_tokenize("北京大学在北京") == ["北京", "京大", "大学", "学在", "在北", "北京"]
    assert bm25_tokenize("他会审阅补丁") == ["他会", "会审", "审阅", "阅补", "补丁"]
    tokens = bm25_tokenize(ZH)
    assert "andrew" in tokens and "morton" in tokens and "linus" in tokens
    han = [t for t in tokens if not t.isascii()]
    assert han and all(len(t) == 2 for t in han)
    assert "补丁" in han and "通常" in han


def test_a_lone_cjk_character_is_a_unigram_and_other_scripts_are_unchanged():
    assert bm25_tokenize("学 x") == ["学", "x"]
    assert cjk_bigrams("学") == ["学"] and cjk_bigrams("") == []
    assert bm25_tokenize("インフィニット") == ["イン", "ンフ", "フィ", "ィニ", "ニッ", "ット"]
    assert bm25_tokenize("인피니트") == ["인피", "피니", "니트"]
    english = "The WolfgangSchulz bakery in Zürich, Ελλάδα and Москва opened in 1990."
    assert list(cjk_words(english.split())) == english.split()
    tokens = bm25_tokenize(english)
    assert {"wolfgangschulz", "schulz", "zürich", "ελλάδα", "москва", "1990"} <= set(tokens)


def test_bm25_finds_a_chinese_query_word_inside_a_clause():
    docs = ["Andrew Morton通常是最后的补丁接收者", "内核文档介绍如何编译内核", "他们讨论了天气"]
    scores = BM25Index(docs).scores("补丁")  # a word inside a clause, standing alone nowhere
    assert scores[0] > 0 and scores[1] == scores[2] == 0
    assert BM25Index(docs).scores("编译")[1] > 0


def test_no_clause_length_entity_from_unsegmented_cjk_text():
    assert cut_long_cjk_runs("Andrew Morton通常是最后的补丁接收者") == "Andrew Morton"
    assert cut_long_cjk_runs("通常是最后的补丁接收者") == ""
    assert cut_long_cjk_runs("Tokyo 東京") == "Tokyo 東京"  # a short run is a name
    assert cut_long_cjk_runs("Andrew Morton") == "Andrew Morton"
    assert capitalised_spans(ZH) == ["Andrew Morton"]
    chunks = [Document(f"d{i}", ZH + " Linux内核的开发者们每天都会提交很多补丁给维护者审阅。") for i in range(3)]
    from graphstrata.chunking import chunk_documents

    entities, _ = StatisticalExtractor(min_df=1).extract(chunk_documents(chunks))
    names = [e.name for e in entities]
    assert "Andrew Morton" in names
    assert not [n for n in names if cut_long_cjk_runs(n) != n], names
