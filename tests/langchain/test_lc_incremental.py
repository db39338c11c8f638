"""``GraphStrataRetriever.add_documents`` / ``delete`` over the core's insert / delete (issue 16).

``add_documents`` is LangChain's "add or update" in exactly one core ``insert`` (an indexed id
with new content is an update, never a delete-then-insert pair); ``delete`` is one core
``delete`` of the indexed ids among those given. Unknown ids are ignored, as LangChain's
``InMemoryVectorStore.delete`` does (the standard vector-store suite's
``test_delete_missing_content``: deleting missing content must not raise), so the core's
``KeyError`` never escapes.

Corpus: the first 30 HotpotQA passages of ``/work/shared/data/hotpotqa`` (real text), the
core's ``HashEmbedder`` and a small community configuration (~2 s a build). A removed or
replaced text is checked gone from the engine's documents, chunks and entity chunk ids and
from what every method returns through the retriever (chunks and graph context); an added
one is checked retrievable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from graphstrata.testing import UpdateCalls
from langchain_core.documents import Document
from langchain_graphstrata import GraphStrataRetriever

CONFIG = {"min_communities": 2, "max_community_size": 8}
N_INDEXED = 30
#: chunk-ranking methods for which the exact first sentence of a passage must rank it first
TOP1_METHODS = ("bm25", "dense", "hybrid")



@pytest.fixture(scope="module")
def rows(shared_data: Path) -> list[dict[str, str]]:
    """The first 36 HotpotQA passages: 30 indexed, 6 kept back for adds / replacements."""
    out = []
    with (shared_data / "hotpotqa" / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            out.append(json.loads(line))
            if len(out) == N_INDEXED + 6:
                break
    return out


def as_document(row: dict[str, str], doc_id: str | None = None) -> Document:
    """``row`` as a LangChain Document (its title in metadata), under ``doc_id`` if given."""
    return Document(id=doc_id or row["id"], page_content=row["text"],
                    metadata={"title": row["title"]})


def first_sentence(text: str) -> str:
    head = text.split(". ")[0]
    return head if len(head) > 20 else text[:200]


def build(rows: list[dict[str, str]], persist_dir: Path | None = None) -> GraphStrataRetriever:
    from graphstrata import Document as GSDocument
    from graphstrata import GraphStrata
    from graphstrata.testing import HashEmbedder

    gs = GraphStrata.build(
        [GSDocument(id=r["id"], text=r["text"], metadata={"title": r["title"]}) for r in rows],
        config=CONFIG, embedder=HashEmbedder(), persist_dir=persist_dir,
    )
    return GraphStrataRetriever(index=gs, method="hybrid", k=5, include_scores=True)


@pytest.fixture
def retriever(rows) -> GraphStrataRetriever:
    return build(rows[:N_INDEXED])



def retrieved_document_ids(r: GraphStrataRetriever, query: str, method: str, k: int = 5) -> set:
    """Document ids of everything the retriever returns with ``method``: chunks and context."""
    out: set = set()
    for doc in r.invoke(query, method=method, k=k, kinds=None, context_k=20):
        out.update(doc.metadata.get("document_ids") or [])
        if doc.metadata.get("kind") == "chunk":
            out.add(doc.metadata["document_id"])
    return out


def top_document(r: GraphStrataRetriever, query: str, method: str) -> str:
    docs = r.invoke(query, method=method, k=1)
    assert docs, f"{method} returned nothing for {query!r}"
    return docs[0].metadata["document_id"]


def chunk_ids_of(r: GraphStrataRetriever, doc_id: str) -> set:
    return {c.id for c in r.graphstrata.chunks if c.document_id == doc_id}


def assert_graph_consistent(r: GraphStrataRetriever) -> None:
    chunk_ids = {c.id for c in r.graphstrata.chunks}
    assert set(r.graphstrata.chunk_row) == chunk_ids
    for entity in r.graphstrata.kg.entities.values():
        assert set(entity.chunk_ids) <= chunk_ids, entity.id


def assert_retrievable(r: GraphStrataRetriever, doc_id: str, text: str) -> None:
    gs = r.graphstrata
    assert gs.documents[doc_id].text == text
    assert doc_id in {c.document_id for c in gs.chunks}
    query = first_sentence(text)
    for method in TOP1_METHODS:
        assert top_document(r, query, method) == doc_id, method
    for method in gs.methods:
        assert doc_id in retrieved_document_ids(r, query, method), method


def assert_gone(r: GraphStrataRetriever, doc_id: str, old_chunk_ids: set, query: str) -> None:
    gs = r.graphstrata
    assert doc_id not in gs.documents
    assert doc_id not in {c.document_id for c in gs.chunks}
    assert not old_chunk_ids & set(gs.chunk_row)
    for entity in gs.kg.entities.values():
        assert not old_chunk_ids & set(entity.chunk_ids), entity.id
    assert_graph_consistent(r)
    for method in gs.methods:
        assert doc_id not in retrieved_document_ids(r, query, method, k=10), method


# --------------------------------------------------------------------------------------------
# add_documents
# --------------------------------------------------------------------------------------------
def test_add_documents_makes_new_documents_retrievable_in_one_core_insert(
    retriever, rows, monkeypatch
):
    new = rows[N_INDEXED:N_INDEXED + 2]
    for row in new:
        assert row["id"] not in retrieved_document_ids(retriever, first_sentence(row["text"]), "bm25")
    calls = UpdateCalls(retriever.graphstrata, monkeypatch.setattr)

    ids = retriever.add_documents([as_document(r) for r in new])

    assert ids == [r["id"] for r in new]
    assert calls.calls == [("insert", ids)]
    assert len(retriever.graphstrata.documents) == N_INDEXED + 2
    for row in new:
        assert_retrievable(retriever, row["id"], row["text"])
    top = retriever.invoke(first_sentence(new[0]["text"]), method="bm25", k=1)[0]
    assert top.metadata["title"] == new[0]["title"]
    assert_graph_consistent(retriever)


def test_add_documents_with_an_indexed_id_replaces_it(retriever, rows, monkeypatch):
    target, replacement = rows[3], rows[N_INDEXED + 1]
    new = rows[N_INDEXED + 2]
    old_query = first_sentence(target["text"])
    assert top_document(retriever, old_query, "bm25") == target["id"]
    engine = retriever.graphstrata
    calls = UpdateCalls(engine, monkeypatch.setattr)

    # ids= wins over Document.id; one call mixes a replacement and a new document
    ids = retriever.add_documents(
        [as_document(replacement, doc_id="ignored"), as_document(new)], ids=[target["id"], "n"]
    )

    assert ids == [target["id"], "n"]
    assert calls.calls == [("insert", [target["id"], "n"])]  # no delete-then-insert pair
    assert retriever.graphstrata is engine
    assert len(engine.documents) == N_INDEXED + 1
    assert_retrievable(retriever, target["id"], replacement["text"])
    assert_retrievable(retriever, "n", new["text"])
    assert engine.documents[target["id"]].metadata["title"] == replacement["title"]
    old_sentence = old_query.lower()
    assert not any(old_sentence in c.text.lower() for c in engine.chunks)
    for method in TOP1_METHODS:
        docs = retriever.invoke(old_query, method=method, k=10)
        assert not any(old_sentence in d.page_content.lower() for d in docs), method
    # no entity of the replaced chunks comes only from the old text
    new_text = (replacement["title"] + " " + replacement["text"]).lower()
    new_chunks = chunk_ids_of(retriever, target["id"])
    for entity in engine.kg.entities.values():
        if new_chunks & set(entity.chunk_ids) and entity.name.lower() in target["text"].lower():
            assert entity.name.lower() in new_text, f"stale entity {entity.id!r}"
    assert_graph_consistent(retriever)


def test_adding_unchanged_documents_changes_no_result(retriever, rows):
    query = first_sentence(rows[12]["text"])

    def results() -> list:
        return [
            (d.id, round(d.metadata["score"], 6))
            for m in retriever.graphstrata.methods
            for d in retriever.invoke(query, method=m, kinds=None)
        ]

    before_docs, before = dict(retriever.graphstrata.documents), results()
    assert retriever.add_documents([as_document(rows[12]), as_document(rows[13])]) == [
        rows[12]["id"], rows[13]["id"]]
    assert dict(retriever.graphstrata.documents) == before_docs
    assert results() == before


# --------------------------------------------------------------------------------------------
# delete
# --------------------------------------------------------------------------------------------
def test_delete_removes_the_text_from_every_method_in_one_core_delete(
    retriever, rows, monkeypatch
):
    target = rows[5]
    query = first_sentence(target["text"])
    old_chunks = chunk_ids_of(retriever, target["id"])
    assert old_chunks
    assert any(old_chunks & set(e.chunk_ids) for e in retriever.graphstrata.kg.entities.values())
    for method in retriever.graphstrata.methods:
        assert target["id"] in retrieved_document_ids(retriever, query, method, k=10), method
    calls = UpdateCalls(retriever.graphstrata, monkeypatch.setattr)

    assert retriever.delete(target["id"]) == 1  # a bare str is one id

    assert calls.calls == [("delete", [target["id"]])]
    assert len(retriever.graphstrata.documents) == N_INDEXED - 1
    assert_gone(retriever, target["id"], old_chunks, query)
    assert top_document(retriever, first_sentence(rows[6]["text"]), "bm25") == rows[6]["id"]


def test_delete_ignores_unknown_ids_like_in_memory_vector_store(retriever, rows, monkeypatch):
    known = [rows[1]["id"], rows[2]["id"]]
    old_chunks = chunk_ids_of(retriever, known[0]) | chunk_ids_of(retriever, known[1])
    calls = UpdateCalls(retriever.graphstrata, monkeypatch.setattr)

    # unknown only: nothing happens, no core call, no error
    before = dict(retriever.graphstrata.documents)
    assert retriever.delete(["nobody", "nobody-else"]) == 0
    assert retriever.delete([]) == 0
    assert calls.calls == [] and dict(retriever.graphstrata.documents) == before

    # known and unknown (and a repeat): the known ones go, in one core delete
    assert retriever.delete([known[0], "nobody", known[1], known[0]]) == 2
    assert calls.calls == [("delete", known)]
    for doc_id, row in zip(known, rows[1:3], strict=True):
        assert_gone(retriever, doc_id, old_chunks, first_sentence(row["text"]))

    # deleting them again is deleting unknown ids
    calls.calls.clear()
    assert retriever.delete(known) == 0
    assert calls.calls == []


async def test_adelete_ignores_unknown_ids(retriever, rows):
    assert await retriever.adelete(["nobody"]) == 0
    assert await retriever.adelete([rows[0]["id"], "nobody"]) == 1
    assert rows[0]["id"] not in retriever.graphstrata.documents


def test_delete_refusals_change_nothing(retriever, rows, monkeypatch):
    calls = UpdateCalls(retriever.graphstrata, monkeypatch.setattr)
    with pytest.raises(ValueError, match="strings"):
        retriever.delete([rows[0]["id"], 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="ids"):
        retriever.delete(None)  # type: ignore[arg-type]
    assert calls.calls == []
    with pytest.raises(ValueError, match="every document"):
        retriever.delete([*retriever.graphstrata.documents, "nobody"])
    assert len(retriever.graphstrata.documents) == N_INDEXED


def test_delete_survives_a_concurrent_delete(retriever, rows, monkeypatch):
    """Another writer removes one of the ids between the adapter's check and its core delete:
    the core answers ``KeyError`` (deleting nothing); the adapter deletes the rest."""
    gs = retriever.graphstrata
    a, b = rows[1]["id"], rows[2]["id"]
    real_delete = gs.delete
    attempts: list[list[str]] = []

    def racing_delete(ids: Any, *args: Any, **kwargs: Any) -> int:
        ids = list(ids)
        attempts.append(ids)
        if len(attempts) == 1:
            real_delete([a])  # the other writer
            raise KeyError(a)  # the core: unknown id, nothing deleted
        return real_delete(ids, *args, **kwargs)

    monkeypatch.setattr(gs, "delete", racing_delete)
    assert retriever.delete([a, b]) == 1  # the other writer deleted a
    assert attempts == [[a, b], [b]]
    assert not {a, b} & set(gs.documents)


def test_updates_of_a_persisted_index_reach_the_disk(rows, tmp_path):
    path = tmp_path / "idx"
    r = build(rows[:N_INDEXED], persist_dir=path)
    gone, new, replaced = rows[8], rows[N_INDEXED], rows[9]
    r.add_documents([as_document(new), as_document(rows[N_INDEXED + 1], doc_id=replaced["id"])])
    assert r.delete([gone["id"], "nobody"]) == 1

    from graphstrata import GraphStrata
    from graphstrata.testing import HashEmbedder

    fresh = GraphStrataRetriever(
        index=GraphStrata.load(path, embedder=HashEmbedder()), method="hybrid", k=5
    )
    assert gone["id"] not in fresh.graphstrata.documents
    assert_retrievable(fresh, new["id"], new["text"])
    assert_retrievable(fresh, replaced["id"], rows[N_INDEXED + 1]["text"])
    assert top_document(fresh, first_sentence(gone["text"]), "bm25") != gone["id"]
