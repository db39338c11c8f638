"""GraphStrataIndex updates over the core's insert / delete (issue 16).

Every LlamaIndex update goes through the core in exactly one call: ``insert`` /
``insert_documents`` / ``update_ref_doc`` / ``refresh_ref_docs`` in one core ``insert`` (an
update of an indexed id is an insert too, never a delete-then-insert pair) and
``delete_ref_doc`` / ``delete_nodes`` in one core ``delete``. The core's ``KeyError`` for
unknown ids never escapes: ``delete_ref_doc`` of an unknown id warns and changes nothing.

Corpus: the first 30 HotpotQA passages of ``/work/shared/data/hotpotqa`` (real text), with
the core's ``HashEmbedder`` and a small community configuration so a build takes ~2 s. A
removed (or replaced) text is checked gone from the engine's documents, chunks and entity
chunk ids, and from what every retrieval method returns through the adapter's retriever,
chunks and graph context alike; an inserted one is checked retrievable.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from graphstrata.testing import HashEmbedder, UpdateCalls
from llama_index.core import Document
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.graph_rag.graphstrata import GraphStrataIndex

CONFIG = {"min_communities": 2, "max_community_size": 8}
N_INDEXED = 30
#: chunk-ranking methods for which the exact first sentence of a passage must rank it first
TOP1_METHODS = ("bm25", "dense", "hybrid")



# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rows(shared_data: Path) -> list[dict[str, str]]:
    """The first 36 HotpotQA passages: 30 indexed, 6 kept back for inserts / replacements."""
    out = []
    with (shared_data / "hotpotqa" / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            out.append(json.loads(line))
            if len(out) == N_INDEXED + 6:
                break
    return out


def as_document(row: dict[str, str], doc_id: str | None = None) -> Document:
    """``row`` as a LlamaIndex Document (its title in metadata), under ``doc_id`` if given."""
    return Document(id_=doc_id or row["id"], text=row["text"], metadata={"title": row["title"]})


def first_sentence(text: str) -> str:
    """The passage's first sentence (its most distinctive query)."""
    head = text.split(". ")[0]
    return head if len(head) > 20 else text[:200]


@pytest.fixture
def index(rows) -> GraphStrataIndex:
    return GraphStrataIndex.from_documents(
        [as_document(r) for r in rows[:N_INDEXED]], embed_model=HashEmbedder(), config=CONFIG
    )



def retrieved_document_ids(index: GraphStrataIndex, query: str, method: str, k: int = 5) -> set:
    """Document ids of everything a retriever returns: chunks and graph context."""
    retriever = index.as_retriever(method=method, similarity_top_k=k, kinds=None, context_k=20)
    out: set = set()
    for n in retriever.retrieve(query):
        out.update(n.node.metadata.get("document_ids") or [])
        if n.node.metadata.get("kind") == "chunk":
            out.add(n.node.ref_doc_id)
    return out


def top_chunk_document(index: GraphStrataIndex, query: str, method: str) -> str:
    nodes = index.as_retriever(method=method, similarity_top_k=1).retrieve(query)
    assert nodes, f"{method} returned nothing for {query!r}"
    return nodes[0].node.ref_doc_id


def assert_retrievable(index: GraphStrataIndex, doc_id: str, text: str) -> None:
    engine = index.engine
    assert engine.documents[doc_id].text == text
    assert [c.document_id for c in engine.chunks].count(doc_id) >= 1
    query = first_sentence(text)
    for method in TOP1_METHODS:
        assert top_chunk_document(index, query, method) == doc_id, method
    for method in index.methods:
        assert doc_id in retrieved_document_ids(index, query, method), method


def assert_graph_consistent(index: GraphStrataIndex) -> None:
    """Every entity points only at chunks the engine still has."""
    engine = index.engine
    chunk_ids = {c.id for c in engine.chunks}
    assert set(engine.chunk_row) == chunk_ids
    for entity in engine.kg.entities.values():
        assert set(entity.chunk_ids) <= chunk_ids, entity.id


def assert_gone(index: GraphStrataIndex, doc_id: str, old_chunk_ids: set, query: str) -> None:
    """``doc_id`` is no longer indexed nor retrievable by any method."""
    engine = index.engine
    assert doc_id not in engine.documents
    assert doc_id not in {c.document_id for c in engine.chunks}
    assert not old_chunk_ids & set(engine.chunk_row)
    for entity in engine.kg.entities.values():
        assert not old_chunk_ids & set(entity.chunk_ids), entity.id
    assert_graph_consistent(index)
    for method in index.methods:
        assert doc_id not in retrieved_document_ids(index, query, method, k=10), method


def chunk_ids_of(index: GraphStrataIndex, doc_id: str) -> set:
    return {c.id for c in index.engine.chunks if c.document_id == doc_id}


# --------------------------------------------------------------------------------------------
# insert / insert_documents / update_ref_doc
# --------------------------------------------------------------------------------------------
def test_insert_makes_a_new_document_retrievable_in_one_core_insert(index, rows, monkeypatch):
    new = rows[N_INDEXED]
    assert new["id"] not in index.engine.documents
    query = first_sentence(new["text"])
    assert all(new["id"] not in retrieved_document_ids(index, query, m) for m in TOP1_METHODS)
    calls = UpdateCalls(index.engine, monkeypatch.setattr)

    index.insert(as_document(new))

    assert calls.calls == [("insert", [new["id"]])]
    assert len(index.engine.documents) == N_INDEXED + 1
    assert_retrievable(index, new["id"], new["text"])
    assert_graph_consistent(index)
    assert index.docstore.get_document_hash(new["id"]) is not None


def test_insert_with_an_indexed_id_replaces_the_old_text(index, rows, monkeypatch):
    target, replacement = rows[3], rows[N_INDEXED + 1]
    old_query = first_sentence(target["text"])
    assert top_chunk_document(index, old_query, "bm25") == target["id"]
    engine_before = index.engine
    calls = UpdateCalls(index.engine, monkeypatch.setattr)

    index.insert(as_document(replacement, doc_id=target["id"]))

    # one core insert, no delete-then-insert pair, the same engine object
    assert calls.calls == [("insert", [target["id"]])]
    assert index.engine is engine_before
    assert index.storage_context.vector_stores["graphstrata"].client is index.engine
    assert len(index.engine.documents) == N_INDEXED
    assert_retrievable(index, target["id"], replacement["text"])
    # the old text is nowhere: not in a chunk, not behind an entity of the replaced chunks
    old_sentence = first_sentence(target["text"]).lower()
    assert not any(old_sentence in c.text.lower() for c in index.engine.chunks)
    new_chunks = chunk_ids_of(index, target["id"])
    new_text = (replacement["title"] + " " + replacement["text"]).lower()  # titles are entities
    for entity in index.engine.kg.entities.values():
        if new_chunks & set(entity.chunk_ids) and entity.name.lower() in target["text"].lower():
            assert entity.name.lower() in new_text, f"stale entity {entity.id!r}"
    for method in TOP1_METHODS:
        hits = index.as_retriever(method=method, similarity_top_k=10).retrieve(old_query)
        assert not any(old_sentence in n.node.get_content().lower() for n in hits), method
    assert_graph_consistent(index)


def test_insert_documents_mixes_new_and_replaced_in_one_core_insert(index, rows, monkeypatch):
    replaced, new = rows[7], rows[N_INDEXED + 2]
    replacement = rows[N_INDEXED + 3]
    replaced_text = replacement["text"]
    old_chunks = chunk_ids_of(index, replaced["id"])
    calls = UpdateCalls(index.engine, monkeypatch.setattr)

    index.insert_documents([as_document(new), as_document(replacement, doc_id=replaced["id"])])

    assert calls.calls == [("insert", [new["id"], replaced["id"]])]
    assert len(index.engine.documents) == N_INDEXED + 1
    assert_retrievable(index, new["id"], new["text"])
    assert_retrievable(index, replaced["id"], replaced_text)
    old_sentence = first_sentence(replaced["text"]).lower()
    assert not any(old_sentence in c.text.lower() for c in index.engine.chunks)
    assert old_chunks  # the replaced document had chunks to drop
    assert_graph_consistent(index)


def test_inserting_an_unchanged_document_changes_no_result(index, rows):
    target = rows[11]
    query = first_sentence(target["text"])

    def results() -> list:
        return [
            (n.node.node_id, round(n.score or 0.0, 6))
            for m in index.methods
            for n in index.as_retriever(method=m, kinds=None).retrieve(query)
        ]

    before_docs, before = dict(index.engine.documents), results()
    index.insert(as_document(target))
    assert dict(index.engine.documents) == before_docs
    assert results() == before


def test_update_ref_doc_of_every_document_is_one_insert(rows, monkeypatch):
    index = GraphStrataIndex.from_documents(
        [as_document(r) for r in rows[:3]], embed_model=HashEmbedder(), config=CONFIG
    )
    engine_before = index.engine
    calls = UpdateCalls(index.engine, monkeypatch.setattr)
    replacements = [
        as_document(src, doc_id=old["id"]) for src, old in zip(rows[3:6], rows[:3], strict=True)
    ]

    index.insert_documents(replacements)

    # replacing the whole corpus needs no fresh build: one core insert on the same engine
    assert calls.calls == [("insert", [r["id"] for r in rows[:3]])]
    assert index.engine is engine_before
    for doc, src in zip(replacements, rows[3:6], strict=True):
        assert index.engine.documents[doc.doc_id].text == src["text"]
        assert top_chunk_document(index, first_sentence(src["text"]), "bm25") == doc.doc_id
    assert_graph_consistent(index)

    calls.calls.clear()
    index.update_ref_doc(as_document(rows[6], doc_id=rows[0]["id"]))
    assert calls.calls == [("insert", [rows[0]["id"]])]
    assert index.engine.documents[rows[0]["id"]].text == rows[6]["text"]


# --------------------------------------------------------------------------------------------
# delete_ref_doc / delete_nodes
# --------------------------------------------------------------------------------------------
def test_delete_ref_doc_removes_the_text_from_every_method(index, rows, monkeypatch):
    target = rows[5]
    query = first_sentence(target["text"])
    old_chunks = chunk_ids_of(index, target["id"])
    assert old_chunks
    assert any(old_chunks & set(e.chunk_ids) for e in index.engine.kg.entities.values())
    for method in index.methods:
        assert target["id"] in retrieved_document_ids(index, query, method, k=10), method
    calls = UpdateCalls(index.engine, monkeypatch.setattr)

    index.delete_ref_doc(target["id"])

    assert calls.calls == [("delete", [target["id"]])]
    assert len(index.engine.documents) == N_INDEXED - 1
    assert_gone(index, target["id"], old_chunks, query)
    assert index.docstore.get_document_hash(target["id"]) is None
    # the other documents are still there and still found
    other = rows[6]
    assert top_chunk_document(index, first_sentence(other["text"]), "bm25") == other["id"]


def test_delete_ref_doc_of_an_unknown_id_warns_and_changes_nothing(index, rows, monkeypatch, caplog):
    query = first_sentence(rows[2]["text"])
    before_docs = dict(index.engine.documents)
    before_hits = [n.node.node_id for n in index.as_retriever(method="hybrid").retrieve(query)]
    index.docstore.set_document_hash("not-indexed", "h")  # a hash LlamaIndex may hold
    calls = UpdateCalls(index.engine, monkeypatch.setattr)

    with caplog.at_level(logging.WARNING):
        index.delete_ref_doc("not-indexed")  # never a KeyError

    assert "not-indexed" in caplog.text and "nothing deleted" in caplog.text
    assert calls.calls == []
    assert dict(index.engine.documents) == before_docs
    assert [n.node.node_id for n in index.as_retriever(method="hybrid").retrieve(query)] == before_hits
    assert index.docstore.get_document_hash("not-indexed") == "h"


async def test_adelete_ref_doc_of_an_unknown_id_does_not_raise(index, caplog):
    with caplog.at_level(logging.WARNING):
        await index.adelete_ref_doc("not-indexed-either")
    assert "not-indexed-either" in caplog.text
    assert len(index.engine.documents) == N_INDEXED


def test_delete_ref_doc_survives_a_concurrent_delete(index, rows, monkeypatch, caplog):
    """Between the adapter's lookup and its core delete another writer removes one of the
    ids; the core answers ``KeyError`` (deleting nothing) and the adapter deletes the rest."""
    engine = index.engine
    ref = "shared-source"
    for i, r in enumerate(rows[N_INDEXED:N_INDEXED + 2]):
        node = TextNode(text=r["text"], id_=f"part-{i}")
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=ref)
        index.insert_nodes([node])
    real_delete = engine.delete
    attempts: list[list[str]] = []

    def racing_delete(ids: Any, *args: Any, **kwargs: Any) -> int:
        ids = list(ids)
        attempts.append(ids)
        if len(attempts) == 1:
            real_delete(["part-0"])  # the other writer
            raise KeyError("part-0")  # what the core answers: unknown id, nothing deleted
        return real_delete(ids, *args, **kwargs)

    monkeypatch.setattr(engine, "delete", racing_delete)
    index.delete_ref_doc(ref)
    assert attempts == [["part-0", "part-1"], ["part-1"]]
    assert not {"part-0", "part-1"} & set(engine.documents)
    assert len(engine.documents) == N_INDEXED

    # and when the other writer removed everything, it is the unknown-id warning
    attempts.clear()
    node = TextNode(text=rows[N_INDEXED + 3]["text"], id_="part-9")
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="gone-source")
    index.insert_nodes([node])

    def all_gone(ids: Any, *args: Any, **kwargs: Any) -> int:
        attempts.append(list(ids))
        real_delete(["part-9"])
        raise KeyError("part-9")

    monkeypatch.setattr(engine, "delete", all_gone)
    with caplog.at_level(logging.WARNING):
        index.delete_ref_doc("gone-source")
    assert attempts == [["part-9"]] and "gone-source" in caplog.text


def test_delete_nodes_is_one_core_delete_and_refuses_unknown_ids(index, rows, monkeypatch):
    ids = [rows[1]["id"], rows[2]["id"]]
    old_chunks = chunk_ids_of(index, ids[0]) | chunk_ids_of(index, ids[1])
    calls = UpdateCalls(index.engine, monkeypatch.setattr)
    with pytest.raises(ValueError, match="delete_ref_doc"):
        index.delete_nodes([ids[0], f"{ids[1]}#0"])  # a chunk id: nothing deleted
    assert calls.calls == [] and set(ids) <= set(index.engine.documents)

    index.delete_nodes(ids)

    assert calls.calls == [("delete", ids)]
    for doc_id, row in zip(ids, rows[1:3], strict=True):
        assert_gone(index, doc_id, old_chunks, first_sentence(row["text"]))


def test_vector_store_delete_follows_the_llama_index_contract(index, rows, monkeypatch):
    store = index.storage_context.vector_stores["graphstrata"]
    calls = UpdateCalls(index.engine, monkeypatch.setattr)
    store.delete("never-indexed")  # SimpleVectorStore: an unknown ref_doc_id is a no-op
    assert calls.calls == [] and len(index.engine.documents) == N_INDEXED
    target = rows[9]
    old_chunks = chunk_ids_of(index, target["id"])
    store.delete(target["id"])
    assert calls.calls == [("delete", [target["id"]])]
    assert_gone(index, target["id"], old_chunks, first_sentence(target["text"]))


def test_deleting_every_document_is_refused_and_changes_nothing(rows):
    index = GraphStrataIndex.from_documents(
        [as_document(rows[0])], embed_model=HashEmbedder(), config=CONFIG
    )
    with pytest.raises(ValueError, match="every document"):
        index.delete_ref_doc(rows[0]["id"])
    assert list(index.engine.documents) == [rows[0]["id"]]


# --------------------------------------------------------------------------------------------
# refresh_ref_docs
# --------------------------------------------------------------------------------------------
def test_refresh_ref_docs_reinserts_only_changed_documents_in_one_core_insert(
    index, rows, monkeypatch
):
    unchanged, changed, new = rows[0], rows[4], rows[N_INDEXED + 4]
    replacement = rows[N_INDEXED + 5]
    changed_text = replacement["text"]
    old_query = first_sentence(changed["text"])
    old_chunks = chunk_ids_of(index, changed["id"])
    calls = UpdateCalls(index.engine, monkeypatch.setattr)
    docs = [
        as_document(unchanged), as_document(replacement, doc_id=changed["id"]), as_document(new)
    ]

    assert index.refresh_ref_docs(docs) == [False, True, True]

    assert calls.calls == [("insert", [changed["id"], new["id"]])]
    assert_retrievable(index, changed["id"], changed_text)
    assert_retrievable(index, new["id"], new["text"])
    assert_retrievable(index, unchanged["id"], unchanged["text"])
    old_sentence = old_query.lower()
    assert not any(old_sentence in c.text.lower() for c in index.engine.chunks)
    assert old_chunks
    assert_graph_consistent(index)

    # nothing changed since: no core call at all
    calls.calls.clear()
    assert index.refresh_ref_docs(docs) == [False, False, False]
    assert calls.calls == []
    # a metadata-only change is a change
    retitled = as_document(unchanged)
    retitled.metadata["title"] = "Another title"
    assert index.refresh_ref_docs([retitled, docs[1]]) == [True, False]
    assert calls.calls == [("insert", [unchanged["id"]])]
    assert index.engine.documents[unchanged["id"]].metadata["title"] == "Another title"


def test_refresh_ref_docs_refuses_duplicate_ids_before_any_update(index, rows, monkeypatch):
    calls = UpdateCalls(index.engine, monkeypatch.setattr)
    dup = [as_document(rows[0]), as_document(rows[N_INDEXED], doc_id=rows[0]["id"])]
    with pytest.raises(ValueError, match="duplicate"):
        index.refresh_ref_docs(dup)
    assert calls.calls == []


# --------------------------------------------------------------------------------------------
# persisted
# --------------------------------------------------------------------------------------------
def test_updates_of_a_persisted_index_reach_the_disk(index, rows, tmp_path):
    index.storage_context.persist(persist_dir=str(tmp_path))
    gone, new = rows[8], rows[N_INDEXED]
    index.delete_ref_doc(gone["id"])
    index.insert(as_document(new))
    index.storage_context.persist(persist_dir=str(tmp_path))
    loaded = GraphStrataIndex.load(tmp_path, embed_model=HashEmbedder())
    assert gone["id"] not in loaded.engine.documents
    assert_retrievable(loaded, new["id"], new["text"])
    assert top_chunk_document(loaded, first_sentence(gone["text"]), "bm25") != gone["id"]
