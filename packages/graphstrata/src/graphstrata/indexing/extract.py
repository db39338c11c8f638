"""The extraction stage: chunks → entities and relations (statistical, or an LLM extractor).

Offline, the statistical extractor (TF-IDF n-grams à la AGRAG, capitalised spans, sentence
co-occurrence relations; :mod:`graphstrata.extraction`) keeps one
:class:`~graphstrata.extraction.ChunkRecord` per chunk, and the KG is their merge, so an update
extracts only new chunks (:mod:`graphstrata.indexing.update`). With an LLM the stage is
LightRAG / HiRAG or AGRAG extraction (:mod:`graphstrata.indexing.llm_extract`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config import GraphStrataConfig
from ..extraction import ChunkRecord, StatisticalExtractor, merge_records
from ..llm import LLMClient
from ..runner import current_runner
from ..types import Chunk, Entity, Relation
from .llm_extract import AgragLLMExtractor, LLMExtractor
from .progress import Progress


def extractor(
    config: GraphStrataConfig, llm: LLMClient | None, show_progress: bool = False
) -> StatisticalExtractor | LLMExtractor | AgragLLMExtractor:
    """The extractor of the extraction stage: statistical offline; with an LLM, LightRAG-style
    LLM extraction, AGRAG's TF-IDF entities + LLM triples, or still statistical
    (``config.llm_extraction``).

    Args:
        config: the build configuration (TF-IDF and cap settings, ``llm_extraction``,
            ``llm_gleaning``, ``llm_prompt_examples``).
        llm: the build's :class:`~graphstrata.llm.LLMClient`, or ``None`` (offline).
        show_progress: accepted for the stage signature; the extractors' own bars stay off.

    Returns:
        A :class:`~graphstrata.extraction.StatisticalExtractor`,
        :class:`~.llm_extract.LLMExtractor` or :class:`~.llm_extract.AgragLLMExtractor`; all
        three have ``extract(chunks, titles) -> (entities, relations)``.
    """
    statistical = StatisticalExtractor(
        top_n=config.tfidf_top_n,
        use_titles=config.use_titles,
        max_entities_per_chunk=config.max_entities_per_chunk,
        max_relations_per_sentence=config.max_relations_per_sentence,
    )
    if llm is None or config.llm_extraction == "statistical":
        return statistical
    if config.llm_extraction == "agrag":
        return AgragLLMExtractor(llm, statistical=statistical)
    return LLMExtractor(llm, gleaning=config.llm_gleaning, examples=config.llm_prompt_examples)


def extract_stage(
    chunks: Sequence[Chunk],
    titles: Mapping[str, str],
    config: GraphStrataConfig,
    llm: LLMClient | None,
    prog: Progress,
) -> tuple[list[Entity], list[Relation], dict[str, ChunkRecord] | None, dict[str, Any]]:
    """Extract the corpus graph (stage ``"extracting entities"``) with :func:`extractor`.

    Statistical extraction fits its TF-IDF model on the chunk texts, extracts each chunk's
    record on the active runner and merges the records
    (:func:`~graphstrata.extraction.merge_records`); an LLM extractor extracts and merges in
    one call.

    Args:
        chunks: the corpus chunks in row order.
        titles: ``{document_id: title}`` of the documents that have one.
        config: the build configuration.
        llm: the build's LLM client, or ``None``.
        prog: the build's :class:`~.progress.Progress`.

    Returns:
        ``(entities, relations, records, frozen)``: entities sorted by id, relations by
        ``(source, target)``; ``records`` ``{chunk_id: ChunkRecord}`` of statistical
        extraction (``None`` for an LLM extractor); ``frozen`` ``{"extraction": FrozenTfidf}``
        when a TF-IDF model was fitted, else ``{}``.

    Raises:
        ValueError: an LLM extraction produced no entities.
        graphstrata.llm.LLMError: an LLM call failed after its retries.
    """
    ex = extractor(config, llm, prog.show)
    if not isinstance(ex, StatisticalExtractor):
        entities, relations = prog.stage("extracting entities", lambda: ex.extract(chunks, titles))
        return entities, relations, None, {}

    def statistical():
        tfidf, terms = ex.fit([c.text for c in chunks])
        recs = current_runner().chunk_records(ex, chunks, titles, None, terms=terms)
        return tfidf, recs, merge_records(recs, max_description_sentences=ex.max_description_sentences)

    tfidf, recs, (entities, relations) = prog.stage("extracting entities", statistical)
    frozen: dict[str, Any] = {} if tfidf is None else {"extraction": tfidf}
    return entities, relations, {r.chunk_id: r for r in recs}, frozen
