"""The extraction stage: chunks → entities and relations (statistical, or an LLM extractor).

Offline, the statistical extractor (TF-IDF n-grams à la AGRAG, capitalised spans, sentence
co-occurrence relations; :mod:`graphstrata.extraction`) keeps one
:class:`~graphstrata.extraction.ChunkRecord` per chunk, and the KG is their merge, so an update
extracts only new chunks (:mod:`graphstrata.indexing.update`). With an LLM the stage is
LightRAG, HiRAG's two-stage (:mod:`graphstrata.indexing.hirag_extract`) or AGRAG extraction
(:mod:`graphstrata.indexing.llm_extract`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config import GraphStrataConfig
from ..extraction import (
    ChunkRecord,
    CompactRecord,
    RecordMerge,
    StatisticalExtractor,
    extract_shard,
    fit_tfidf,
    merge_records,
)
from ..llm import LLMClient
from ..llm.records import LLMAnswers
from ..runner import LocalRunner, current_runner
from ..types import Chunk, Entity, Relation
from .communities import fit_summary_tfidf, summary_tfidf_spec
from .hirag_extract import HiragLLMExtractor
from .llm_extract import AgragLLMExtractor, LLMExtractor
from .progress import Progress


def extractor(
    config: GraphStrataConfig, llm: LLMClient | None, show_progress: bool = False
) -> StatisticalExtractor | LLMExtractor | AgragLLMExtractor:
    """The extractor of the extraction stage: statistical offline; with an LLM, LightRAG-style
    LLM extraction (``"lightrag"``), HiRAG's two-stage extraction (``"hirag"``), AGRAG's TF-IDF
    entities + LLM triples (``"agrag"``), or still statistical (``config.llm_extraction``).

    Args:
        config: the build configuration (TF-IDF and cap settings, ``llm_extraction``,
            ``llm_gleaning``, ``llm_prompt_examples``).
        llm: the build's :class:`~graphstrata.llm.LLMClient`, or ``None`` (offline).
        show_progress: accepted for the stage signature; the extractors' own bars stay off.

    Returns:
        A :class:`~graphstrata.extraction.StatisticalExtractor`,
        :class:`~.llm_extract.LLMExtractor`, :class:`~.hirag_extract.HiragLLMExtractor` (an
        ``LLMExtractor``) or :class:`~.llm_extract.AgragLLMExtractor`; all have
        ``extract(chunks, titles) -> (entities, relations)``.
    """
    if getattr(config, "extractor", "statistical") == "nlp":
        from ..extraction.nlp import NLPExtractor

        statistical: StatisticalExtractor = NLPExtractor.from_config(config)
    else:
        statistical = StatisticalExtractor(
            top_n=config.tfidf_top_n,
            use_titles=config.use_titles,
            max_entities_per_chunk=config.max_entities_per_chunk,
            max_relations_per_sentence=config.max_relations_per_sentence,
            sentence_split="splitter" if config.chunking == "sentence" else "regex",
        )
    if llm is None or config.llm_extraction == "statistical":
        return statistical
    if config.llm_extraction == "agrag":
        return AgragLLMExtractor(llm, statistical=statistical)
    if config.llm_extraction == "hirag":  # its own prompts, which always carry their examples
        return HiragLLMExtractor(llm, gleaning=config.llm_gleaning)
    types = llm_entity_types(config)
    return LLMExtractor(llm, gleaning=config.llm_gleaning, examples=config.llm_prompt_examples,
                        **({"entity_types": types} if types else {}))


def llm_entity_types(config: GraphStrataConfig) -> list[str]:
    """The entity types an LLM extraction prompt offers for ``config``: the distinct types of
    ``config.entity_types`` (the nlp extractor's table) in table order when it is set, else
    ``[]`` (the prompt's own default: the paper's types)."""
    table = getattr(config, "entity_types", None) or {}
    return list(dict.fromkeys(t for t in table.values() if t))


SHARDED_MIN_CHUNKS = 20_000
"""In this process, a statistical extraction of at least this many chunks runs shard by shard
(:func:`~graphstrata.extraction.extract_shard`; other runners, such as Ray's, extract records
with their ``chunk_records``): records kept compressed
(:class:`~graphstrata.extraction.CompactRecord`) and merged a shard at a time, so the records of
the whole corpus never exist as Python objects at once. A runner with a ``map``
(:class:`~graphstrata.runner.ProcessRunner`) always extracts so, on its workers."""

EXTRACT_SHARD = 1_000
"""Chunks per shard of a sharded extraction (one worker task)."""


def extract_stage(
    chunks: Sequence[Chunk],
    titles: Mapping[str, str],
    config: GraphStrataConfig,
    llm: LLMClient | None,
    prog: Progress,
    summary: bool = False,
    known: LLMAnswers | None = None,
) -> tuple[list[Entity], list[Relation], Mapping[str, ChunkRecord] | None, dict[str, Any], LLMAnswers | None]:
    """Extract the corpus graph (stage ``"extracting entities"``) with :func:`extractor`.

    Statistical extraction fits its TF-IDF model on the chunk texts
    (:meth:`~graphstrata.extraction.StatisticalExtractor.fit`, in shards), extracts each
    chunk's record on the active runner and merges the records
    (:func:`~graphstrata.extraction.merge_records`); with a runner that has a ``map``, or at
    least :data:`SHARDED_MIN_CHUNKS` chunks, records are extracted, compressed and merged shard
    by shard (the same entities and relations, and the same records, kept compressed). An LLM
    extractor extracts and merges in one call (``extract_with_answers``), asking only what
    ``known`` does not answer, and returns the answers it used.

    Args:
        chunks: the corpus chunks in row order.
        titles: ``{document_id: title}`` of the documents that have one.
        config: the build configuration.
        llm: the build's LLM client, or ``None``.
        prog: the build's :class:`~.progress.Progress`.
        summary: also fit the community summaries' TF-IDF model
            (:func:`~.communities.fit_summary_tfidf`; in the same pass over the texts as the
            extraction's) into ``frozen["summary"]``.
        known: LLM answers of a previous extraction of (some of) these chunks
            (``state.llm_answers``: a rebuild, or an update's fallback build); ignored by
            statistical extraction.

    Returns:
        ``(entities, relations, records, frozen, llm_answers)``: entities sorted by id,
        relations by ``(source, target)``; ``records`` ``{chunk_id: ChunkRecord}`` of
        statistical extraction (``None`` for an LLM extractor); ``frozen``
        ``{"extraction": FrozenTfidf}`` when a TF-IDF model was fitted (and ``"summary"`` when
        asked and the texts have a vocabulary), else ``{}``; ``llm_answers`` the
        :class:`~graphstrata.llm.records.LLMAnswers` of an LLM extractor (``None`` for
        statistical extraction).

    Raises:
        ValueError: an LLM extraction produced no entities.
        graphstrata.llm.LLMError: an LLM call failed after its retries.
    """
    ex = extractor(config, llm, prog.show)
    runner = current_runner()
    if not isinstance(ex, StatisticalExtractor):
        out = prog.stage("extracting entities", lambda: ex.extract_with_answers(chunks, titles, known))
        frozen: dict[str, Any] = {}
        if summary:
            model = prog.stage("fitting summary TF-IDF", lambda: fit_summary_tfidf([c.text for c in chunks], runner))
            if model is not None:
                frozen["summary"] = model
        return out.entities, out.relations, None, frozen, out.answers
    return prog.stage(
        "extracting entities", lambda: _statistical_extraction(ex, chunks, titles, runner, summary)
    )


def _statistical_extraction(
    ex: StatisticalExtractor, chunks: Sequence[Chunk], titles: Mapping[str, str], runner: Any, summary: bool
) -> tuple[list[Entity], list[Relation], Mapping[str, ChunkRecord], dict[str, Any], None]:
    """:func:`extract_stage` of a statistical extractor: the TF-IDF models fitted in one
    pass over the texts, the records extracted (shard by shard on a mapping runner or a large
    corpus) and merged."""
    texts = [c.text for c in chunks]
    specs = [ex.tfidf_spec(len(texts))] if ex.top_n and texts else []
    if summary:
        specs.append(summary_tfidf_spec())
    fits = fit_tfidf(specs, texts, runner) if specs else []
    del texts
    if ex.top_n and chunks:
        tfidf, terms = fits.pop(0)
    else:
        tfidf, terms = None, [[] for _ in chunks]
    frozen = {} if tfidf is None else {"extraction": tfidf}
    if summary and fits[0][0] is not None:
        frozen["summary"] = fits[0][0]
    workers = _nlp_workers(ex, runner, len(chunks))
    if workers:  # the spaCy pipeline on every core: records in chunk order, as locally
        from ..runner import ProcessRunner

        with ProcessRunner(workers) as pool:
            records, (entities, relations) = _sharded(ex, chunks, titles, terms, pool)
    elif callable(getattr(runner, "map", None)) or (
        isinstance(runner, LocalRunner) and len(chunks) >= SHARDED_MIN_CHUNKS
    ):
        records, (entities, relations) = _sharded(ex, chunks, titles, terms, runner)
    else:
        recs = runner.chunk_records(ex, chunks, titles, None, terms=terms)
        entities, relations = merge_records(recs, max_description_sentences=ex.max_description_sentences)
        records = {r.chunk_id: r for r in recs}
    return entities, relations, records, frozen, None


NLP_PROCESS_MIN_CHUNKS = 500
"""In this process, an NLP extraction (``extractor="nlp"``) of at least this many chunks runs on
worker processes, one per CPU this process may use (:func:`graphstrata.index.index_threads`):
the parser is pure CPU work that one process cannot spread over cores."""


def _nlp_workers(ex: StatisticalExtractor, runner: Any, n_chunks: int) -> int:
    """Worker processes for an NLP extraction on the local runner (0: none)."""
    from ..extraction.nlp import NLPExtractor

    if not isinstance(ex, NLPExtractor) or not isinstance(runner, LocalRunner) or n_chunks < NLP_PROCESS_MIN_CHUNKS:
        return 0
    from ..index import index_threads

    workers = min(index_threads(), -(-n_chunks // EXTRACT_SHARD))
    return workers if workers > 1 else 0


def _sharded(ex: StatisticalExtractor, chunks: Sequence[Chunk], titles: Mapping[str, str],
             terms: list[list[str]], runner: Any) -> tuple[dict[str, CompactRecord], tuple[list[Entity], list[Relation]]]:
    """Records (compressed) and their merge, shard by shard, on ``runner``'s workers when it
    has a ``map``: the shards' merges are merged here in corpus order."""
    slices = [range(i, min(len(chunks), i + EXTRACT_SHARD)) for i in range(0, len(chunks), EXTRACT_SHARD)]

    def tasks():
        for r in slices:
            part = chunks[r.start : r.stop]
            part_titles = {c.document_id: titles[c.document_id] for c in part if c.document_id in titles}
            yield (ex, [(c.id, c.document_id, c.text) for c in part], part_titles, terms[r.start : r.stop])

    mapper = getattr(runner, "map", None)
    results = mapper(extract_shard, tasks()) if callable(mapper) else (extract_shard(*t) for t in tasks())
    records: dict[str, CompactRecord] = {}
    merge = RecordMerge(ex.max_description_sentences)
    for r, (blobs, part) in zip(slices, results, strict=True):
        for i, blob in zip(r, blobs, strict=True):
            cid = chunks[i].id
            records[cid] = CompactRecord(cid, blob)
        merge.update(part)
    return records, merge.result()
