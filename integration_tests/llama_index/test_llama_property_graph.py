"""GraphStrataExtractor inside PropertyGraphIndex on LiHua-World."""

from __future__ import annotations

import re

from llama_index.core import PropertyGraphIndex
from llama_index.core.graph_stores import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import TRIPLET_SOURCE_KEY
from llama_index.core.schema import MetadataMode
from llama_index.extractors.graphstrata import GraphStrataExtractor
from llama_index.node_parser.graphstrata import GraphStrataNodeParser


def norm(text: str) -> str:
    return " " + re.sub(r"[\W_]+", " ", text.lower()).strip() + " "


def corpus_pieces(text: str, corpus: str) -> int:
    """Fewest corpus substrings whose concatenation is ``text`` (greedy longest match)."""
    words, i, pieces = norm(text).split(), 0, 0
    while i < len(words):
        j = i + 1
        assert f" {words[i]} " in corpus, words[i]
        while j < len(words) and " " + " ".join(words[i : j + 1]) + " " in corpus:
            j += 1
        pieces, i = pieces + 1, j
    return pieces


def test_property_graph_index_triplets_come_from_the_corpus(lihua_docs, gs_support):
    docs = lihua_docs[:20]
    store = SimplePropertyGraphStore()
    index = PropertyGraphIndex.from_documents(
        docs,
        kg_extractors=[GraphStrataExtractor(max_relations_per_node=30)],
        transformations=[GraphStrataNodeParser(tokenizer="words")],
        property_graph_store=store,
        embed_model=gs_support.HashEmbedding(),  # KG nodes are embedded; keep it cheap
    )
    assert index.property_graph_store is store
    triplets = store.get_triplets(relation_names=["CO_OCCURS_WITH"])
    assert len(triplets) >= 50
    titles = {d.metadata["title"] for d in docs}
    corpus = norm(" ".join(d.text for d in docs))
    for subj, rel, obj in triplets:
        (chunk,) = store.get_llama_nodes([rel.properties[TRIPLET_SOURCE_KEY]])
        text = norm(chunk.get_content(MetadataMode.NONE))
        for ent in (subj, obj):  # both entities are in the chunk the triplet came from
            assert norm(ent.name) in text or ent.name in titles, (ent.name, chunk.node_id)
        # the description is at most 4 source sentences (some cut by a chunk edge), joined
        assert corpus_pieces(rel.properties["description"], corpus) <= 4, rel.properties
    names = {t[0].name for t in triplets} | {t[2].name for t in triplets}
    assert "LiHua" in names or "Li Hua" in names
    assert "WolfgangSchulz" in names or "Wolfgang Schulz" in names
    # the store's graph API sees the relations around an entity
    (subj, _, _) = next(t for t in triplets if "wolfgang" in t[0].name.lower() or "wolfgang" in t[2].name.lower())
    rel_map = store.get_rel_map([subj], depth=1, limit=50)
    assert rel_map and all(r.label == "CO_OCCURS_WITH" for _, r, _ in rel_map)


def test_the_nlp_extractor_gives_typed_entities_and_labelled_triplets(lihua_docs, gs_support):
    docs = lihua_docs[:60]
    store = SimplePropertyGraphStore()
    PropertyGraphIndex.from_documents(
        docs,
        kg_extractors=[GraphStrataExtractor(extractor="nlp", max_relations_per_node=30)],
        transformations=[GraphStrataNodeParser(tokenizer="words")],
        property_graph_store=store,
        embed_model=gs_support.HashEmbedding(),
    )
    triplets = store.get_triplets(relation_names=sorted({r.label for r in store.graph.relations.values()}))
    assert len(triplets) >= 50
    labels = [rel.label for _, rel, _ in triplets]
    assert sum(label != "CO_OCCURS_WITH" for label in labels) >= 0.5 * len(labels), labels[:20]
    entity_labels = {e.label for t in triplets for e in (t[0], t[2])}
    assert "person" in entity_labels and entity_labels != {"entity"}
