"""GraphStrataNodeParser and GraphStrataExtractor as LlamaIndex transformations."""

from __future__ import annotations

import re

import pytest
from graphstrata import Document as GSDocument
from graphstrata.chunking import chunk_documents
from llama_index.core import PropertyGraphIndex
from llama_index.core.graph_stores.types import (
    KG_NODES_KEY,
    KG_RELATIONS_KEY,
    TRIPLET_SOURCE_KEY,
    EntityNode,
    Relation,
)
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import MetadataMode, NodeRelationship, TextNode, TransformComponent
from llama_index.extractors.graphstrata import GraphStrataExtractor
from llama_index.node_parser.graphstrata import GraphStrataNodeParser


def norm(text: str) -> str:
    return " " + re.sub(r"[\W_]+", " ", text.lower()).strip() + " "


# -- node parser ---------------------------------------------------------------------------
def test_parser_types():
    assert issubclass(GraphStrataNodeParser, NodeParser)
    assert issubclass(GraphStrataExtractor, TransformComponent)


@pytest.mark.parametrize(
    "kwargs", [{"chunk_size": 0}, {"chunk_size": 10, "chunk_overlap": 10},
               {"chunk_size": 10, "chunk_overlap": -1}, {"tokenizer": "bpe"}, {"tokenizer": 3}]
)
def test_parser_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        GraphStrataNodeParser(**kwargs)


def test_parser_defaults_are_the_core_defaults():
    from graphstrata import GraphStrataConfig

    p = GraphStrataNodeParser(tokenizer="words")
    cfg = GraphStrataConfig()
    assert (p.chunk_size, p.chunk_overlap) == (cfg.chunk_size, cfg.chunk_overlap)
    assert GraphStrataNodeParser(chunk_size=16, tokenizer="words").chunk_overlap == 4


def test_parser_chunks_exactly_like_the_core(small_docs):
    parser = GraphStrataNodeParser(chunk_size=12, chunk_overlap=3, tokenizer="words")
    nodes = parser.get_nodes_from_documents(small_docs)
    core = chunk_documents(
        [GSDocument(id=d.doc_id, text=d.text) for d in small_docs], chunk_size=12, chunk_overlap=3
    )
    assert [n.node_id for n in nodes] == [c.id for c in core]
    assert [n.get_content(MetadataMode.NONE) for n in nodes] == [c.text for c in core]
    assert [(n.start_char_idx, n.end_char_idx) for n in nodes] == [(c.start, c.end) for c in core]
    by_id = {d.doc_id: d for d in small_docs}
    for n in nodes:
        src = by_id[n.ref_doc_id]
        assert src.text[n.start_char_idx : n.end_char_idx] == n.text
        assert n.metadata["title"] == src.metadata["title"]
    # prev / next links within one document, none across documents
    first, second = nodes[0], nodes[1]
    assert first.relationships[NodeRelationship.NEXT].node_id == second.node_id
    assert second.relationships[NodeRelationship.PREVIOUS].node_id == first.node_id
    last_of_acme = [n for n in nodes if n.ref_doc_id == "acme"][-1]
    assert NodeRelationship.NEXT not in last_of_acme.relationships


def test_parser_custom_id_func(small_docs):
    parser = GraphStrataNodeParser(
        chunk_size=50, chunk_overlap=5, tokenizer="words", id_func=lambda i, doc: f"{doc.node_id}/{i}"
    )
    nodes = parser.get_nodes_from_documents(small_docs[:1])
    assert [n.node_id for n in nodes] == [f"acme/{i}" for i in range(len(nodes))]


# -- extractor -----------------------------------------------------------------------------
def test_extractor_bad_arguments():
    with pytest.raises(ValueError, match="top_n"):
        GraphStrataExtractor(top_n=-1)
    with pytest.raises(ValueError, match="max_entities_per_node"):
        GraphStrataExtractor(max_entities_per_node=0)


def test_extractor_writes_property_graph_metadata(small_docs):
    nodes = [TextNode(text=d.text, id_=f"n-{d.doc_id}", metadata=dict(d.metadata)) for d in small_docs]
    out = GraphStrataExtractor()(nodes)
    assert KG_NODES_KEY == "nodes" and KG_RELATIONS_KEY == "relations"
    n_rel = 0
    for node in out:
        ents = node.metadata[KG_NODES_KEY]
        rels = node.metadata[KG_RELATIONS_KEY]
        assert ents and all(isinstance(e, EntityNode) for e in ents)
        assert all(isinstance(r, Relation) for r in rels)
        ids = {e.id for e in ents}
        text = norm(node.text)
        for e in ents:  # every entity comes from this node's text (or its title)
            assert norm(e.name) in text or e.name == node.metadata["title"], e.name
            assert e.properties["title"] == node.metadata["title"]  # node metadata copied
        for r in rels:
            assert r.source_id in ids and r.target_id in ids
            assert r.label == "CO_OCCURS_WITH" and r.properties["weight"] >= 1
            n_rel += 1
    assert n_rel > 0
    names = {e.name for n in out for e in n.metadata[KG_NODES_KEY]}
    assert {"Alice Martin", "Bruno Keller", "Clara Vos"} <= names


def test_extractor_relation_descriptions_are_source_sentences(small_docs):
    nodes = [TextNode(text=d.text, id_=d.doc_id) for d in small_docs]
    corpus = " ".join(d.text for d in small_docs)
    for node in GraphStrataExtractor()(nodes):
        for r in node.metadata[KG_RELATIONS_KEY]:
            desc = r.properties["description"]
            assert desc and all(part.strip() in corpus for part in re.split(r"(?<=\.)\s+", desc))


def test_extractor_appends_to_existing_metadata_and_respects_caps(small_docs):
    marker = EntityNode(name="Pre-existing")
    node = TextNode(text=small_docs[0].text, id_="x", metadata={KG_NODES_KEY: [marker]})
    other = TextNode(text=small_docs[1].text, id_="y")
    out = GraphStrataExtractor(max_relations_per_node=1, max_entities_per_node=2)([node, other])
    ents = out[0].metadata[KG_NODES_KEY]
    assert ents[0] is marker
    assert len(out[0].metadata[KG_RELATIONS_KEY]) <= 1
    assert len(ents) - 1 <= 2 + 2  # two heaviest + the relation's endpoints


def test_extractor_empty_input():
    assert GraphStrataExtractor()([]) == []


def test_ingestion_pipeline_runs_parser_then_extractor(small_docs):
    pipeline = IngestionPipeline(
        transformations=[
            GraphStrataNodeParser(chunk_size=40, chunk_overlap=8, tokenizer="words"),
            GraphStrataExtractor(),
        ]
    )
    nodes = pipeline.run(documents=small_docs)
    assert nodes and all(n.node_id.split("#")[0] in {d.doc_id for d in small_docs} for n in nodes)
    assert all(KG_NODES_KEY in n.metadata for n in nodes)
    assert sum(len(n.metadata[KG_RELATIONS_KEY]) for n in nodes) > 0


def test_property_graph_index_with_the_extractor(small_docs):
    index = PropertyGraphIndex.from_documents(
        small_docs,
        kg_extractors=[GraphStrataExtractor()],
        transformations=[GraphStrataNodeParser(chunk_size=60, chunk_overlap=8, tokenizer="words")],
        show_progress=False,
    )
    store = index.property_graph_store
    triplets = store.get_triplets(relation_names=["CO_OCCURS_WITH"])
    assert len(triplets) >= 5
    titles = {d.metadata["title"] for d in small_docs}
    for subj, rel, obj in triplets:
        # each triplet comes from one chunk of the corpus: both names occur in that chunk
        (source,) = store.get_llama_nodes([rel.properties[TRIPLET_SOURCE_KEY]])
        text = norm(source.get_content(MetadataMode.NONE))
        for ent in (subj, obj):
            assert norm(ent.name) in text or ent.name in titles, (ent.name, text)
        for sentence in re.split(r"(?<=\.)\s+", rel.properties["description"]):
            assert norm(sentence) in norm(" ".join(d.text for d in small_docs))
    names = {s.name for s, _, _ in triplets} | {o.name for _, _, o in triplets}
    assert {"Clara Vos", "Bruno Keller"} <= names


# -- the extractor's move to llama-index-extractors-graphstrata ----------------------------------
def test_extractor_imports_from_its_new_home_without_a_warning():
    import subprocess
    import sys

    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "from llama_index.extractors.graphstrata import GraphStrataExtractor\n"
        "from llama_index.node_parser.graphstrata import GraphStrataNodeParser\n"
        "print(GraphStrataExtractor.__module__)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "llama_index.extractors.graphstrata.base"


def test_old_extractor_import_path_still_works_and_warns():
    import llama_index.node_parser.graphstrata as old_package
    import llama_index.node_parser.graphstrata.base as old_module

    with pytest.warns(DeprecationWarning, match="from llama_index.extractors.graphstrata import"):
        from llama_index.node_parser.graphstrata import GraphStrataExtractor as Old
    assert Old is GraphStrataExtractor
    with pytest.warns(DeprecationWarning, match="llama-index-extractors-graphstrata"):
        assert old_module.GraphStrataExtractor is GraphStrataExtractor
    # the moved class still extracts through the old name
    with pytest.warns(DeprecationWarning):
        extractor = old_package.GraphStrataExtractor()
    (node,) = extractor([TextNode(text="Alice Martin founded Acme Robotics. Alice Martin lives in Lyon.")])
    assert node.metadata[KG_NODES_KEY]
    with pytest.raises(AttributeError, match="GraphStrataExtractr"):
        old_package.GraphStrataExtractr  # noqa: B018 - a typo is still an AttributeError


def test_parser_sentence_chunking_like_the_core():
    from graphstrata.sentences import sentence_boundaries
    from llama_index.core import Document

    text = (
        "Dr. Smith moved to Washington, D.C. in 1990. He founded a bakery on Main St. with his "
        "brother. The bakery sold rye at $3.50 a loaf. It closed in 2004!\n\nA new owner "
        "reopened it. Was it the same? Nobody could tell."
    )
    parser = GraphStrataNodeParser(chunk_size=16, chunk_overlap=4, tokenizer="words", chunking="sentence")
    nodes = parser.get_nodes_from_documents([Document(text=text, id_="bakery")])
    core = chunk_documents([GSDocument(id="bakery", text=text)], 16, 4, chunking="sentence")
    assert [(n.node_id, n.start_char_idx, n.end_char_idx) for n in nodes] == [
        (c.id, c.start, c.end) for c in core
    ]
    starts = set(sentence_boundaries(text)[0])
    assert len(nodes) > 2 and all(n.start_char_idx in starts for n in nodes)
    assert all(text[n.start_char_idx : n.end_char_idx] == n.text for n in nodes)
    assert GraphStrataNodeParser(tokenizer="words").chunking == "tokens"
    with pytest.raises(ValueError, match="chunking"):
        GraphStrataNodeParser(tokenizer="words", chunking="paragraphs")
