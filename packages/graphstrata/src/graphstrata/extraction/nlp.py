"""The NLP extractor: per-chunk records of typed entities and labelled relations.

:class:`NLPExtractor` is a :class:`~graphstrata.extraction.StatisticalExtractor` whose
:meth:`~NLPExtractor.chunk_records` reads each chunk with the spaCy pipeline of
:mod:`graphstrata.nlp` instead of TF-IDF terms and capitalised spans. Its records are
:class:`~graphstrata.extraction.ChunkRecord` s with :attr:`~graphstrata.extraction.ChunkRecord.types`
and :attr:`~graphstrata.extraction.ChunkRecord.labels` filled, so the knowledge graph is still
their merge in corpus order (:func:`~graphstrata.extraction.merge_records`): an entity's type
is its mentions' most frequent type, a relation's label (``Relation.keywords``) its mentions'
most frequent label other than co-occurrence. Incremental updates, entity resolution,
persistence and sharded builds treat these records as any other.

Descriptions are whole sentences: the parser's sentences, as they stand in the chunk.
Selected by ``GraphStrataConfig(extractor="nlp")``. Source: issue 46; DESIGN.md "Offline
default".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config import DEFAULT_MAX_ENTITIES_PER_CHUNK, DEFAULT_MAX_RELATIONS_PER_SENTENCE
from ..nlp import CO_OCCURS, ENTITY_TYPES, NLPAnalyser
from ..types import Chunk
from .statistical import ChunkRecord, StatisticalExtractor
from .text import canonical
from .tfidf import FrozenTfidf
from .titles import document_title


class NLPExtractor(StatisticalExtractor):
    """Offline extraction by a real NLP pipeline (:mod:`graphstrata.nlp`).

    Args:
        use_titles: each document's title becomes an entity mentioned in every sentence of
            its chunks (as the statistical extractor does); its relations to the sentence's
            entities are labelled by the sentence where the sentence names the title, else
            :data:`~graphstrata.nlp.CO_OCCURS`.
        max_entities_per_chunk: entities kept per chunk (> 0), the title included.
        max_relations_per_sentence: relation mentions kept per sentence (≥ 0), title links
            included.
        max_description_sentences: sentences kept in an entity or relation description.
        types: NER label → entity type (:data:`graphstrata.nlp.ENTITY_TYPES`).
        concepts: keep noun-phrase concepts.
        analyser: an :class:`~graphstrata.nlp.NLPAnalyser` to use (tests); ``None``: one made
            from the arguments above.

    Raises:
        ValueError: out-of-range caps.
        graphstrata.nlp.NLPModelError: (on first extraction) the pipeline cannot be loaded.
    """

    def __init__(
        self,
        use_titles: bool = True,
        max_entities_per_chunk: int = DEFAULT_MAX_ENTITIES_PER_CHUNK,
        max_relations_per_sentence: int = DEFAULT_MAX_RELATIONS_PER_SENTENCE,
        max_description_sentences: int = 4,
        types: Mapping[str, str | None] = ENTITY_TYPES,
        concepts: bool = True,
        analyser: NLPAnalyser | None = None,
    ) -> None:
        super().__init__(
            top_n=0, use_titles=use_titles, max_entities_per_chunk=max_entities_per_chunk,
            max_relations_per_sentence=max_relations_per_sentence,
            max_description_sentences=max_description_sentences,
        )
        self.analyser = analyser or NLPAnalyser(
            canonical, types=types, concepts=concepts,
            max_entities_per_chunk=max(1, max_entities_per_chunk - int(use_titles)),
            max_relations_per_sentence=max_relations_per_sentence,
        )

    @classmethod
    def from_config(cls, config: Any) -> NLPExtractor:
        """The extractor a :class:`~graphstrata.config.GraphStrataConfig` describes (its
        ``use_titles``, ``max_entities_per_chunk``, ``max_relations_per_sentence``,
        ``entity_types``)."""
        kwargs = {name: getattr(config, name) for name in
                  ("use_titles", "max_entities_per_chunk", "max_relations_per_sentence")
                  if getattr(config, name, None) is not None}
        if getattr(config, "entity_types", None) is not None:
            kwargs["types"] = dict(config.entity_types)
        return cls(**kwargs)

    def chunk_records(
        self,
        chunks: Sequence[Chunk],
        titles: Mapping[str, str] | None,
        tfidf: FrozenTfidf | None = None,
        terms: Sequence[Sequence[str]] | None = None,
    ) -> list[ChunkRecord]:
        """One :class:`~graphstrata.extraction.ChunkRecord` per chunk, same order (``tfidf``
        and ``terms`` are accepted for the extractor protocol and not used).

        An entity's mention count is the number of the chunk's sentences naming it (as the
        statistical extractor counts), each mention's type is counted in ``types``; each
        relation mention adds one to its pair and its label.
        """
        analyses = self.analyser.analyse([c.text for c in chunks])
        out = []
        for chunk, analysis in zip(chunks, analyses, strict=True):
            title = document_title((titles or {}).get(chunk.document_id)) if self.use_titles else None
            out.append(self._record(chunk, analysis, title))
        return out

    def _record(self, chunk: Chunk, analysis: Any, title: str | None) -> ChunkRecord:
        rec = ChunkRecord(chunk.id)
        text = chunk.text
        sentences = [text[s:e].strip() for s, e in analysis.sentences]
        title_key = canonical(title) if title else ""
        per_sentence: list[dict[str, str]] = [{} for _ in sentences]
        for m in analysis.mentions:
            per_sentence[m.sentence].setdefault(m.key, m.surface)
            counts = rec.types.setdefault(m.key, {})
            counts[m.type] = counts.get(m.type, 0) + 1
        limit = self.max_description_sentences
        for i, sentence in enumerate(sentences):
            found = per_sentence[i]
            if title_key and len(title_key) >= 2:
                found.setdefault(title_key, title)
            for key, surface in found.items():
                ent = rec.entities.get(key)
                if ent is None:
                    ent = rec.entities[key] = ({}, [0], [])
                ent[0][surface] = ent[0].get(surface, 0) + 1
                ent[1][0] += 1
                if len(ent[2]) < limit and sentence not in ent[2]:
                    ent[2].append(sentence)
        linked: dict[int, set[tuple[str, str]]] = {}
        for link in analysis.links:
            self._add_relation(rec, (link.a, link.b), link.label, sentences[link.sentence])
            linked.setdefault(link.sentence, set()).add((link.a, link.b))
        if title_key and len(title_key) >= 2 and title_key not in rec.types:
            title_type = self.analyser.title_type(title)
            if title_type:
                rec.types[title_key] = {title_type: 1}
        if title_key and len(title_key) >= 2:
            for i, sentence in enumerate(sentences):
                have = linked.get(i, set())
                room = self.max_relations_per_sentence - len(have)
                for key in per_sentence[i]:
                    if room <= 0:
                        break
                    if key == title_key:
                        continue
                    pair = (key, title_key) if key < title_key else (title_key, key)
                    if pair in have:
                        continue
                    self._add_relation(rec, pair, CO_OCCURS, sentence)
                    room -= 1
        return rec

    def _add_relation(self, rec: ChunkRecord, pair: tuple[str, str], label: str, sentence: str) -> None:
        rel = rec.relations.get(pair)
        if rel is None:
            rel = rec.relations[pair] = ([0], [])
        rel[0][0] += 1
        if len(rel[1]) < self.max_description_sentences and sentence not in rel[1]:
            rel[1].append(sentence)
        counts = rec.labels.setdefault(pair, {})
        counts[label] = counts.get(label, 0) + 1
