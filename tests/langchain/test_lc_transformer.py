"""GraphStrataTransformer: entities and relations added to Document metadata."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import BaseDocumentTransformer, Document
from langchain_graphstrata import GraphStrataTransformer


def test_adds_entities_and_relations(lc_documents: list[Document]) -> None:
    t = GraphStrataTransformer()
    assert isinstance(t, BaseDocumentTransformer)
    before = [dict(d.metadata) for d in lc_documents]
    out = t.transform_documents(lc_documents)

    assert [d.id for d in out] == [d.id for d in lc_documents]
    assert [d.page_content for d in out] == [d.page_content for d in lc_documents]
    assert [d.metadata for d in lc_documents] == before  # inputs untouched
    by_id = {d.id: d.metadata for d in out}
    for m in by_id.values():
        assert m["title"] and isinstance(m["entities"], list) and isinstance(m["relations"], list)
    # Capitalised names and the document title are found in the right documents only.
    assert "Analytical Engine" in by_id["babbage"]["entities"]
    assert "Charles Babbage" in by_id["babbage"]["entities"]
    assert "Edmund Hillary" in by_id["hillary"]["entities"]
    assert "Edmund Hillary" not in by_id["babbage"]["entities"]
    # Relations link entities that co-occur in that document.
    pairs = {frozenset((r["source"], r["target"])) for r in by_id["hillary"]["relations"]}
    assert frozenset(("Edmund Hillary", "Tenzing Norgay")) in pairs
    for doc_id, m in by_id.items():
        for r in m["relations"]:
            assert set(r) == {"source", "target", "weight"}
            assert r["source"] in m["entities"] and r["target"] in m["entities"], doc_id
        weights = [r["weight"] for r in m["relations"]]
        assert weights == sorted(weights, reverse=True)


def test_limits_keys_and_descriptions(lc_documents: list[Document]) -> None:
    t = GraphStrataTransformer(
        entities_key="kg_entities",
        relations_key="kg_relations",
        max_entities=2,
        max_relations=1,
        include_descriptions=True,
    )
    out = t.transform_documents(lc_documents)
    for d in out:
        assert "entities" not in d.metadata
        assert len(d.metadata["kg_entities"]) <= 2 and len(d.metadata["kg_relations"]) <= 1
    rels = [r for d in out for r in d.metadata["kg_relations"]]
    assert rels and all(r["description"] for r in rels)
    # A relation's description is a sentence of the document it was found in.
    d = next(d for d in out if d.metadata["kg_relations"])
    assert d.metadata["kg_relations"][0]["description"].split(".")[0] in d.page_content


def test_empty_input_and_empty_documents() -> None:
    t = GraphStrataTransformer()
    assert t.transform_documents([]) == []
    out = t.transform_documents(
        [
            Document(page_content=""),
            Document(page_content="In 1898 Marie Curie discovered radium in Paris."),
        ]
    )
    assert out[0].metadata == {"entities": [], "relations": []}
    assert "Marie Curie" in out[1].metadata["entities"]


async def test_async_matches_sync(lc_documents: list[Document]) -> None:
    t = GraphStrataTransformer()
    a = await t.atransform_documents(lc_documents)
    assert [d.metadata for d in a] == [d.metadata for d in t.transform_documents(lc_documents)]


def test_custom_extractor_receives_one_chunk_per_document() -> None:
    from graphstrata import Entity, Relation

    seen: list[Any] = []

    class Scripted:
        def extract(self, chunks: Any) -> Any:
            seen.extend(chunks)
            return (
                [Entity(id="x", name="X", chunk_ids=["1#0"], weight=3.0)],
                [Relation(source="x", target="y", weight=1.0, chunk_ids=["1#0"])],
            )

    docs = [Document(page_content="a b"), Document(page_content="c d e")]
    out = GraphStrataTransformer(extractor=Scripted()).transform_documents(docs)
    assert [c.text for c in seen] == ["a b", "c d e"]
    assert out[0].metadata == {"entities": [], "relations": []}
    assert out[1].metadata["entities"] == ["X"]
    assert out[1].metadata["relations"] == [{"source": "X", "target": "y", "weight": 1.0}]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="must differ"):
        GraphStrataTransformer(entities_key="k", relations_key="k")
    with pytest.raises(ValueError, match="max_entities"):
        GraphStrataTransformer(max_entities=-1)
    with pytest.raises(TypeError, match="extract"):
        GraphStrataTransformer(extractor=object())
    with pytest.raises(TypeError, match="not a Document"):
        GraphStrataTransformer().transform_documents(["text"])  # type: ignore[list-item]
