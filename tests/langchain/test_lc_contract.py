"""GraphStrataRetriever keeps the adapter contract of docs/python-api.md (issue 14, LangChain side).

One section per bullet of issue 14's first list that concerns LangChain: k and graph context,
[0, 1] scores and thresholds, filters and vector-store-style arguments, metadata on every
Document, the add/delete lifecycle and the load error. The agent-tool budget is in
test_lc_tools.py, the README in test_lc_packaging.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_graphstrata import GraphStrataRetriever

QUERY = "Who designed the Analytical Engine?"
CONTEXT_KINDS = {"entity", "relation", "community", "path"}
TOPICS = {
    "computing": {"babbage", "lovelace", "london"},
    "codebreaking": {"turing", "bletchley", "enigma", "rejewski"},
    "radioactivity": {"curie", "pierre", "becquerel", "radium"},
    "mountains": {"everest", "hillary", "tenzing", "k2", "himalaya"},
}


@pytest.fixture(scope="module")
def topic_gs(lc_corpus: list[tuple[str, str, str]]) -> Any:
    """The inline corpus with filterable metadata: topic (str), n (int), title."""
    from graphstrata import Document as GSDocument
    from graphstrata import GraphStrata

    topic_of = {d: t for t, ids in TOPICS.items() for d in ids}
    docs = [
        GSDocument(id=i, text=text, metadata={"title": title, "topic": topic_of[i], "n": n})
        for n, (i, title, text) in enumerate(lc_corpus)
    ]
    return GraphStrata.build(docs)


# --------------------------------------------------------------------------- 1. k and context


def test_context_is_opt_in_with_its_own_cap(lc_gs: Any) -> None:
    for method in ("archrag", "lightrag", "hirag", "agrag"):
        if method not in lc_gs.methods:
            continue
        r = GraphStrataRetriever(index=lc_gs, method=method, k=3, kinds=None, include_scores=True)
        assert r.context_k == 5
        docs = r.invoke(QUERY)
        kinds = [d.metadata["kind"] for d in docs]
        n_chunks = kinds.count("chunk")
        assert 0 < n_chunks <= 3, method
        assert kinds[:n_chunks] == ["chunk"] * n_chunks, f"{method}: chunks come first"
        context = docs[n_chunks:]
        assert 0 < len(context) <= 5, (method, len(context))
        assert {d.metadata["kind"] for d in context} <= CONTEXT_KINDS
        scores = [d.metadata["score"] for d in context]
        assert scores == sorted(scores, reverse=True), f"{method}: context best first"
        # context_k per call and in the constructor; it never counts against k
        assert len(r.invoke(QUERY, context_k=2)) == n_chunks + 2
        two = GraphStrataRetriever(index=lc_gs, method=method, k=3, kinds=None, context_k=2)
        assert [d.id for d in two.invoke(QUERY)] == [d.id for d in docs[: n_chunks + 2]]


def test_context_only_kinds_are_capped_by_context_k(lc_gs: Any) -> None:
    r = GraphStrataRetriever(index=lc_gs, method="archrag", k=2, kinds=("entity", "relation"))
    docs = r.invoke(QUERY)
    assert 0 < len(docs) <= 5
    assert {d.metadata["kind"] for d in docs} <= {"entity", "relation"}
    assert len(r.invoke(QUERY, context_k=1)) == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_bad_context_k(lc_gs: Any, bad: Any) -> None:
    with pytest.raises(ValueError, match="context_k must be a positive int"):
        GraphStrataRetriever(index=lc_gs, kinds=None, context_k=bad)
    r = GraphStrataRetriever(index=lc_gs, kinds=None)
    with pytest.raises(ValueError, match="context_k must be a positive int"):
        r.invoke(QUERY, context_k=bad)


# --------------------------------------------------------------------------- 2. scores


def test_scores_in_unit_interval_with_raw_score_for_every_method(lc_gs: Any) -> None:
    for method in lc_gs.methods:
        r = GraphStrataRetriever(index=lc_gs, method=method, k=6, kinds=None, include_scores=True)
        docs = r.invoke(QUERY)
        for d in docs:
            s = d.metadata["score"]
            assert isinstance(s, float) and 0.0 <= s <= 1.0, (method, d.metadata["kind"], s)
            assert isinstance(d.metadata["raw_score"], float), method
        chunk_scores = [d.metadata["score"] for d in docs if d.metadata["kind"] == "chunk"]
        assert chunk_scores == sorted(chunk_scores, reverse=True), method


def test_score_and_raw_score_come_from_the_hit() -> None:
    from graphstrata import Hit

    class Fixed:
        methods = ("dense",)

        def retrieve(self, query: str, **kw: Any) -> list[Any]:
            return [
                Hit(id="a#0", text="alpha", score=0.75, kind="chunk", layer=None,
                    chunk_ids=["a#0"], document_ids=["a"],
                    metadata={"raw_score": 12.5, "document_id": "a", "chunk_index": 0,
                              "document_metadata": {"title": "A", "score": "mine"}}),
            ]

    (d,) = GraphStrataRetriever(index=Fixed(), method="dense", include_scores=True).invoke("q")
    assert d.metadata["score"] == 0.75 and d.metadata["raw_score"] == 12.5
    assert d.metadata["title"] == "A"  # the document's own "score" key loses to ours


def test_similarity_score_threshold(lc_gs: Any) -> None:
    for method in lc_gs.methods:
        plain = GraphStrataRetriever(index=lc_gs, method=method, k=8, include_scores=True).invoke(QUERY)
        scores = [d.metadata["score"] for d in plain]
        cut = sorted(scores)[len(scores) // 2]  # a threshold inside this query's range
        r = GraphStrataRetriever(
            index=lc_gs, method=method, search_type="similarity_score_threshold",
            search_kwargs={"k": 8, "score_threshold": cut}, include_scores=True,
        )
        kept = r.invoke(QUERY)
        assert kept, method
        assert [d.id for d in kept] == [d.id for d in plain if d.metadata["score"] >= cut]
        # per-call threshold
        assert r.invoke(QUERY, score_threshold=0.0) == plain
        assert all(d.metadata["score"] >= 1.0 for d in r.invoke(QUERY, score_threshold=1.0))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"search_type": "similarity_score_threshold"}, "needs search_kwargs"),
        ({"search_type": "similarity_score_threshold",
          "search_kwargs": {"score_threshold": 1.5}}, r"score_threshold must be a number in \[0, 1\]"),
        ({"search_type": "similarity_score_threshold",
          "search_kwargs": {"score_threshold": True}}, "score_threshold must be a number"),
        ({"search_kwargs": {"score_threshold": 0.5}}, "only used with search_type="),
        ({"search_type": "mmr"}, "search_type 'mmr' is not supported; supported: 'similarity', "
                                 "'similarity_score_threshold'"),
        ({"search_type": "similarity_search"}, "not supported"),
    ],
)
def test_bad_search_type_or_threshold(lc_gs: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GraphStrataRetriever(index=lc_gs, method="dense", **kwargs)


def test_per_call_threshold_needs_the_threshold_search_type(lc_gs: Any) -> None:
    with pytest.raises(ValueError, match="only used with search_type="):
        GraphStrataRetriever(index=lc_gs, method="dense").invoke(QUERY, score_threshold=0.1)


# --------------------------------------------------------------------------- 3. filters, kwargs


def test_search_kwargs_k(lc_gs: Any) -> None:
    r = GraphStrataRetriever(index=lc_gs, method="hybrid", search_kwargs={"k": 2})
    assert r.k == 2 and len(r.invoke(QUERY)) == 2
    same = GraphStrataRetriever(index=lc_gs, method="hybrid", k=2, search_kwargs={"k": 2})
    assert len(same.invoke(QUERY)) == 2
    with pytest.raises(ValueError, match="disagree"):
        GraphStrataRetriever(index=lc_gs, k=3, search_kwargs={"k": 2})
    with pytest.raises(ValueError, match=r"search_kwargs\['k'\] must be a positive int"):
        GraphStrataRetriever(index=lc_gs, search_kwargs={"k": 0})


def test_filter_operators_and_per_call_filter(topic_gs: Any) -> None:
    r = GraphStrataRetriever(
        index=topic_gs, method="bm25", k=16,
        search_kwargs={"filter": {"$or": [{"topic": {"$in": ["radioactivity"]}},
                                          {"n": {"$gte": 14}}]}},
    )
    ids = {d.metadata["document_id"] for d in r.invoke("Marie Curie radium London Himalayas")}
    assert ids and ids <= TOPICS["radioactivity"] | {"himalaya", "london"}
    # a per-call filter replaces the constructor's
    one = r.invoke("Curie", filter={"document_id": "pierre"})
    assert one and {d.metadata["document_id"] for d in one} == {"pierre"}
    assert all(d.metadata["topic"] == "computing" for d in r.invoke(QUERY, filter={"topic": "computing"}))
    # context hits honour the filter too (they come from a matching document)
    ctx = r.invoke(QUERY, method="archrag", kinds=None, filter={"topic": "computing"})
    for d in ctx:
        assert set(d.metadata["document_ids"]) & TOPICS["computing"], d.metadata


def test_bad_filter_raises_at_construction_and_per_call(lc_gs: Any) -> None:
    with pytest.raises(ValueError, match="unknown operator '\\$like'"):
        GraphStrataRetriever(index=lc_gs, search_kwargs={"filter": {"title": {"$like": "A"}}})
    with pytest.raises(ValueError, match="filters must be a mapping"):
        GraphStrataRetriever(index=lc_gs, search_kwargs={"filter": "title = A"})
    r = GraphStrataRetriever(index=lc_gs, method="dense")
    with pytest.raises(ValueError, match="needs a list"):
        r.invoke(QUERY, filter={"title": {"$in": "Ada"}})


def test_filter_reaches_the_core_as_filters(lc_gs: Any) -> None:
    calls: list[dict[str, Any]] = []

    class Recording:
        methods = lc_gs.methods

        def retrieve(self, query: str, **kw: Any) -> list[Any]:
            calls.append(kw)
            return []

    r = GraphStrataRetriever(index=Recording(), method="dense",
                             search_kwargs={"k": 4, "filter": {"year": {"$gte": 2020}}})
    r.invoke(QUERY)
    assert calls[-1] == {"method": "dense", "k": 4, "kinds": ("chunk",),
                         "filters": {"year": {"$gte": 2020}}}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"foo": 1}, r"unknown argument\(s\) \['foo'\]"),
        ({"top_k": 2}, r"unknown argument\(s\) \['top_k'\].*'top_k' -> k"),
        ({"similarity_top_k": 2}, "-> k"),
        ({"filter": {"a": 1}}, "search_kwargs=\\{'filter'"),
        ({"search_kwargs": {"top_k": 2}}, r"unknown search_kwargs key\(s\) \['top_k'\]"),
        ({"search_kwargs": {"fetch_k": 20, "lambda_mult": 0.5}}, "unknown search_kwargs key"),
        ({"search_kwargs": {"k": 2, "kinds": None}}, "unknown search_kwargs key"),
    ],
)
def test_unknown_arguments_raise(lc_gs: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GraphStrataRetriever(index=lc_gs, method="dense", **kwargs)


def test_unknown_arguments_raise_before_from_documents_builds(
    lc_documents: list[Document], monkeypatch: pytest.MonkeyPatch
) -> None:
    import graphstrata

    def no_build(*a: Any, **kw: Any) -> Any:
        raise AssertionError("built before refusing the arguments")

    monkeypatch.setattr(graphstrata.GraphStrata, "build", no_build)
    for kwargs in ({"top_k": 2}, {"search_type": "mmr"}, {"search_kwargs": {"x": 1}},
                   {"search_kwargs": {"filter": {"a": {"$bad": 1}}}}, {"context_k": 0}):
        with pytest.raises(ValueError):
            GraphStrataRetriever.from_documents(lc_documents[:2], **kwargs)


def test_unknown_per_call_argument_names_the_per_call_arguments(lc_gs: Any) -> None:
    r = GraphStrataRetriever(index=lc_gs, method="dense")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['top_k'\].*per-call arguments: k, filter"):
        r.invoke(QUERY, top_k=3)


async def test_async_path_keeps_the_contract(topic_gs: Any) -> None:
    r = GraphStrataRetriever(
        index=topic_gs, method="archrag", kinds=None, context_k=2,
        search_kwargs={"k": 2, "filter": {"topic": "computing"}},
    )
    sync, asyn = r.invoke(QUERY), await r.ainvoke(QUERY)
    assert [(d.id, d.metadata) for d in asyn] == [(d.id, d.metadata) for d in sync]
    assert sum(d.metadata["kind"] == "chunk" for d in asyn) <= 2
    assert sum(d.metadata["kind"] != "chunk" for d in asyn) <= 2


# --------------------------------------------------------------------------- 4. metadata


def test_every_document_carries_provenance(topic_gs: Any) -> None:
    for method in topic_gs.methods:
        r = GraphStrataRetriever(index=topic_gs, method=method, k=4, kinds=None)
        for d in r.invoke(QUERY):
            m = d.metadata
            assert m["method"] == method and m["kind"] in {"chunk", *CONTEXT_KINDS}
            assert m["document_ids"] and set(m["document_ids"]) <= set(topic_gs.documents)
            assert m["chunk_ids"] and all("#" in c for c in m["chunk_ids"])
            assert m["source"]
            if m["kind"] == "chunk":
                (doc_id,) = m["document_ids"]
                assert m["document_id"] == doc_id and m["chunk_id"] == d.id == m["chunk_ids"][0]
                src = topic_gs.documents[doc_id].metadata
                assert (m["title"], m["topic"], m["n"]) == (src["title"], src["topic"], src["n"])
            elif len(set(m["document_ids"])) == 1:
                # graph context from one document carries that document's metadata too
                assert m["document_id"] == m["document_ids"][0]
                assert m["topic"] == topic_gs.documents[m["document_id"]].metadata["topic"]


# --------------------------------------------------------------------------- 5. lifecycle

SMALL = [
    Document(id="ada", page_content="Ada Lovelace wrote the first published algorithm for the "
             "Analytical Engine of Charles Babbage.", metadata={"title": "Ada", "year": 1843}),
    Document(id="babbage", page_content="Charles Babbage designed the Analytical Engine, a "
             "mechanical computer, in London.", metadata={"title": "Babbage", "year": 1837}),
    Document(id="turing", page_content="Alan Turing formalised computation with the Turing "
             "machine and worked at Bletchley Park.", metadata={"title": "Turing", "year": 1936}),
]
HOPPER = Document(page_content="Grace Hopper wrote the A-0 system, the first compiler, in "
                  "1952 at Remington Rand.", metadata={"title": "Hopper", "year": 1952})


def _versions(path: Path) -> tuple[str, list[str]]:
    return (path / "CURRENT").read_text(), sorted(p.name for p in path.iterdir())


@pytest.mark.slow  # from_documents without embeddings: the default MiniLM
def test_add_documents_and_delete_persist(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    r = GraphStrataRetriever.from_documents(SMALL, method="bm25", k=1, persist_dir=path)
    ids = r.add_documents([HOPPER], ids=["hopper"])
    assert ids == ["hopper"]
    assert r.invoke("first compiler A-0")[0].metadata["document_id"] == "hopper"
    # persisted: a fresh retriever over the directory sees it, metadata included
    fresh = GraphStrataRetriever(index_dir=path, method="bm25", k=1)
    top = fresh.invoke("first compiler A-0")[0]
    assert top.metadata["document_id"] == "hopper" and top.metadata["year"] == 1952
    # add or update: the same id replaces the document
    r.add_documents([Document(page_content="Grace Hopper popularised the term debugging.")],
                    ids=["hopper"])
    assert "debugging" in r.graphstrata.documents["hopper"].text
    assert len(r.graphstrata.documents) == 4
    # delete: a bare string is one id; unknown ids are ignored
    assert r.delete("hopper") == 1
    assert r.delete(["hopper", "nobody"]) == 0
    assert set(GraphStrataRetriever(index_dir=path, k=1).graphstrata.documents) == {
        "ada", "babbage", "turing"}


@pytest.mark.slow  # from_documents without embeddings: the default MiniLM
def test_add_documents_ids(tmp_path: Path) -> None:
    r = GraphStrataRetriever.from_documents(SMALL, method="bm25", k=1)
    # Document.id, then the text hash (what from_documents gives), so re-adding is idempotent
    no_id = Document(page_content=HOPPER.page_content)
    ids = r.add_documents([Document(id="x1", page_content="Konrad Zuse built the Z3."), no_id])
    assert ids[0] == "x1" and len(ids[1]) == 16
    assert r.add_documents([no_id]) == [ids[1]]
    assert len(r.graphstrata.documents) == 5
    assert r.add_documents([]) == []
    with pytest.raises(ValueError, match="got 1 ids for 2 documents"):
        r.add_documents([HOPPER, HOPPER], ids=["a"])
    with pytest.raises(ValueError, match="duplicate document id 'a'"):
        r.add_documents([HOPPER, HOPPER], ids=["a", "a"])
    with pytest.raises(ValueError, match="not one string"):
        r.add_documents([HOPPER], ids="abc")
    with pytest.raises(TypeError, match="not a LangChain Document"):
        r.add_documents(["text"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        r.add_documents([HOPPER], foo=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="every document"):
        r.delete(list(r.graphstrata.documents))


@pytest.mark.slow  # from_documents without embeddings: the default MiniLM
def test_failed_write_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphstrata import store

    path = tmp_path / "idx"
    r = GraphStrataRetriever.from_documents(SMALL, method="bm25", k=3, persist_dir=path)
    before_docs = dict(r.graphstrata.documents)
    before_hits = [d.id for d in r.invoke("Analytical Engine")]
    before_disk = _versions(path)

    def disk_full(*a: Any, **kw: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "save_state", disk_full)
    with pytest.raises(OSError, match="No space left"):
        r.add_documents([HOPPER])
    with pytest.raises(OSError, match="No space left"):
        r.delete("ada")
    monkeypatch.undo()
    assert dict(r.graphstrata.documents) == before_docs
    assert [d.id for d in r.invoke("Analytical Engine")] == before_hits
    assert _versions(path) == before_disk
    assert set(GraphStrataRetriever(index_dir=path, k=1).graphstrata.documents) == set(before_docs)


@pytest.mark.slow  # from_documents without embeddings: the default MiniLM
async def test_async_lifecycle(tmp_path: Path) -> None:
    r = GraphStrataRetriever.from_documents(SMALL, method="bm25", k=1, persist_dir=tmp_path / "i")
    assert await r.aadd_documents([HOPPER], ids=["hopper"]) == ["hopper"]
    assert (await r.ainvoke("compiler"))[0].metadata["document_id"] == "hopper"
    assert await r.adelete(["hopper"]) == 1


def test_load_error_names_embeddings(tmp_path: Path) -> None:
    emb = DeterministicFakeEmbedding(size=32)
    path = tmp_path / "idx"
    GraphStrataRetriever.from_documents(SMALL, embeddings=emb, method="dense", persist_dir=path)
    with pytest.raises(ValueError) as err:
        GraphStrataRetriever(index_dir=path, method="dense")
    msg = str(err.value)
    assert "embeddings=" in msg and "embedder=" not in msg
    assert "langchain:DeterministicFakeEmbedding" in msg
    assert GraphStrataRetriever(index_dir=path, embeddings=emb, method="dense").invoke("Ada")


@pytest.mark.slow  # from_documents without embeddings: the default MiniLM
def test_persisted_manifest_is_untouched_by_a_refused_call(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    r = GraphStrataRetriever.from_documents(SMALL, method="bm25", k=1, persist_dir=path)
    before = _versions(path)
    with pytest.raises(ValueError):
        r.add_documents([HOPPER, HOPPER], ids=["h", "h"])
    assert _versions(path) == before
    manifest = path / before[0].strip() / "manifest.json"
    assert json.loads(manifest.read_text())["embedder"]


@pytest.mark.slow  # from_documents without embeddings: the default MiniLM
def test_concurrent_queries_during_add(tmp_path: Path) -> None:
    r = GraphStrataRetriever.from_documents(SMALL, method="bm25", k=2)

    async def run() -> list[list[Document]]:
        add = asyncio.to_thread(r.add_documents, [HOPPER], ids=["hopper"])
        queries = [r.ainvoke("Analytical Engine") for _ in range(4)]
        *results, _ = await asyncio.gather(*queries, add)
        return results

    for docs in asyncio.run(run()):
        assert 1 <= len(docs) <= 2
