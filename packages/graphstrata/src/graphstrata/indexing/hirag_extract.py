"""HiRAG's two-stage LLM extraction as an indexing stage (``seed-hirag.md`` §2.2–2.4, §8 #1):
per chunk, the entities first, then the relationships among the entities found.

:class:`HiragLLMExtractor` is an :class:`~.llm_extract.LLMExtractor` (same signature, output,
merge, summaries and guards) whose answers come from two prompts
(:mod:`graphstrata.llm.prompts.hirag_extract`) instead of LightRAG's joint one. The build uses
it when ``config.llm_extraction == "hirag"`` (:func:`graphstrata.indexing.extract.extractor`).

Ledger stages: ``"extract"`` (the entity prompt, one per chunk: the same stage as the joint
prompt's, so the failure guard, ``build_usage`` readers and the dry run treat it alike),
``"extract:gleaning"`` (entity gleaning passes and their continue checks),
``"extract:relations"`` (the relation prompt, one per chunk with at least two entities) and
``"extract:relations:gleaning"``; ``"extract:summaries"`` as for LightRAG.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..extraction import document_title
from ..llm.extraction_parsing import parse_extraction
from ..llm.guards import Grounding
from ..llm.prompts import hirag_extract as hp
from ..llm.records import LLMAnswers, LLMRecord, record_key
from ..types import Chunk
from .llm_extract import (
    DEFAULT_SUMMARY_MAX_TOKENS,
    DEFAULT_SUMMARY_TRIGGER_TOKENS,
    STAGE_EXTRACT,
    STAGE_GLEANING,
    ExtractionChecks,
    GraphBuilder,
    LLMExtraction,
    LLMExtractor,
    chunk_positions,
    entity_key,
    known_answers,
    report_skipped,
)

STAGE_RELATIONS = "extract:relations"
STAGE_RELATION_GLEANING = "extract:relations:gleaning"

__all__ = ["STAGE_RELATIONS", "STAGE_RELATION_GLEANING", "HiragLLMExtractor"]


class HiragLLMExtractor(LLMExtractor):
    """HiRAG's two-stage extraction (``seed-hirag.md`` §2.2–2.4): per chunk an entity prompt,
    then a relation prompt listing the entities that stage kept for the chunk.

    Calls (through ``client.map``: bounded concurrency, cached, counted per stage):

    * ``"extract"``: one entity prompt per chunk
      (:func:`~graphstrata.llm.prompts.hirag_extract.entity_prompt`, types = the meta set X
      plus ``normal_entity``), then ``"extract:gleaning"``: ``gleaning`` more passes (spec: 1),
      with a YES/NO "still missing?" check before each pass after the first (as LightRAG's);
    * ``"extract:relations"``: one relation prompt
      (:func:`~graphstrata.llm.prompts.hirag_extract.relation_prompt`) per chunk that kept at
      least two entities, listing them (a chunk with fewer cannot relate two: no call); then
      ``"extract:relations:gleaning"`` passes as for entities. With the spec's gleaning of 1,
      4 calls per chunk;
    * ``"extract:summaries"``: as :class:`~.llm_extract.LLMExtractor`.

    Checks (:mod:`graphstrata.llm.guards`) in both stages, each stage counted and stopped on
    its own: answers bounded (characters, entities, relations); an entity whose name is not in
    its chunk (or its title) is rejected; each stage's first answers fail when unreadable or
    when every record was rejected, and more than ``client.max_failure_share`` failures stop
    the build with :class:`~graphstrata.llm.LLMOutputError`. The entity stage is checked
    before any relation prompt is sent, so a model that echoes the example costs no relation
    calls. A relation answer of just ``<|COMPLETE|>`` (no pair related) is a valid answer; one
    with no record and no completion marker (``"I don't know."``) is unreadable.

    Relation endpoints (the spec's choice, §2.4: the reference code creates missing endpoints
    with type ``UNKNOWN``): an endpoint should be one of the names listed for the chunk; one
    that is not is kept only when it occurs in the chunk, and becomes an entity with type
    ``""`` whose description is its relations' (as in LightRAG's merge); any other is rejected
    as ungrounded (or as an echo of the example). Entity records in a relation answer, and
    relationship records in an entity answer, are ignored. The relation records have no
    keywords (spec §2.3), so ``Relation.keywords`` is ``""``.

    Merge, ids, types, weights, summaries: as :class:`~.llm_extract.LLMExtractor`.

    Args:
        llm: an :class:`~graphstrata.llm.client.LLMClient`, an LLM, or a callable.
        entity_types: the types stage 1 offers (default the meta set X, spec §2.9).
        gleaning: extra passes per chunk and stage (≥ 0; spec 1).
        summary_trigger_tokens, summary_max_tokens, language, show_progress: as
            :class:`~.llm_extract.LLMExtractor`.

    Raises:
        TypeError: ``llm`` is not an LLM, callable or client.
        ValueError: as :class:`~.llm_extract.LLMExtractor` (negative ``gleaning``, no entity
            types, ...).
    """

    def __init__(
        self,
        llm: Any,
        *,
        entity_types: Sequence[str] = hp.DEFAULT_ENTITY_TYPES,
        gleaning: int = 1,
        summary_trigger_tokens: int = DEFAULT_SUMMARY_TRIGGER_TOKENS,
        summary_max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS,
        language: str = "English",
        show_progress: bool = False,
    ) -> None:
        super().__init__(
            llm,
            entity_types=entity_types,
            gleaning=gleaning,
            summary_trigger_tokens=summary_trigger_tokens,
            summary_max_tokens=summary_max_tokens,
            language=language,
            show_progress=show_progress,
            examples=True,
        )

    # -- per-chunk answers ------------------------------------------------------------------
    def _staged_answers(
        self,
        prompts: Sequence[str],
        system: str,
        stages: tuple[str, str],
        instructions: tuple[str, str],
    ) -> list[list[str]]:
        """Per prompt: its answer (stage ``stages[0]``), then one answer per gleaning pass it
        took (``stages[1]``; ``instructions`` = the stage's gleaning instruction and continue
        question; :meth:`~.llm_extract.LLMExtractor._glean`)."""
        first, glean = stages
        answers = [[a] for a in self._map(prompts, first, system)]
        self._glean(prompts, answers, range(len(prompts)), glean, system, *instructions)
        return answers

    def _entity_prompts(self, chunks: Sequence[Chunk], titles: Mapping[str, str]) -> list[str]:
        return [
            hp.entity_prompt(c.text, self.entity_types, self.language, document_title(titles.get(c.document_id)))
            for c in chunks
        ]

    def _entity_answers(self, prompts: Sequence[str]) -> list[list[str]]:
        """Stage 1's answers per chunk prompt: the entity answer, then one per gleaning pass."""
        return self._staged_answers(
            prompts,
            hp.ENTITY_SYSTEM,
            (STAGE_EXTRACT, STAGE_GLEANING),
            (hp.ENTITY_GLEANING_INSTRUCTION, hp.ENTITY_CONTINUE_QUESTION),
        )

    def _record_key(self, entity_prompt: str) -> str:
        """The :class:`~graphstrata.llm.records.LLMRecord` key of a chunk: its entity prompt
        and every setting of both stages (the relation prompt is a function of the entity
        answers, which the record holds)."""
        return record_key(
            "hirag", hp.ENTITY_SYSTEM, entity_prompt, str(self.gleaning), hp.ENTITY_GLEANING_INSTRUCTION,
            hp.ENTITY_CONTINUE_QUESTION, hp.RELATION_SYSTEM, hp.relation_prompt("", ["a", "b"], self.language, None),
            hp.RELATION_GLEANING_INSTRUCTION, hp.RELATION_CONTINUE_QUESTION,
        )

    def relation_answers(
        self, chunks: Sequence[Chunk], titles: Mapping[str, str] | None, entities: Sequence[Sequence[str]]
    ) -> list[list[str]]:
        """Stage 2's answers per chunk, given each chunk's entity names from stage 1: the
        relation answer, then one per gleaning pass (calls in stages ``"extract:relations"``
        and ``"extract:relations:gleaning"``). Public so that the dry run
        (:mod:`~.cost`) can send the real relation prompts with projected names.

        Args:
            chunks: the chunks to ask about.
            titles: optional ``{document_id: title}`` (shown to the LLM).
            entities: per chunk, the entity names to list (same length as ``chunks``).

        Returns:
            Per chunk, its answers (strings), in ``chunks`` order.

        Raises:
            ValueError: ``entities`` and ``chunks`` differ in length.
            LLMError: a call failed after its retries.
        """
        titles = titles or {}
        prompts = [
            hp.relation_prompt(c.text, names, self.language, document_title(titles.get(c.document_id)))
            for c, names in zip(chunks, entities, strict=True)
        ]
        return self._staged_answers(
            prompts,
            hp.RELATION_SYSTEM,
            (STAGE_RELATIONS, STAGE_RELATION_GLEANING),
            (hp.RELATION_GLEANING_INSTRUCTION, hp.RELATION_CONTINUE_QUESTION),
        )

    # -- the stage ---------------------------------------------------------------------------
    def extract_with_answers(
        self, chunks: Sequence[Chunk], titles: Mapping[str, str] | None = None, known: LLMAnswers | None = None
    ) -> LLMExtraction:
        """Extract entities, then relations among them, from ``chunks``; merge and summarise,
        asking the LLM only what ``known`` does not answer (``extract(chunks, titles)`` is
        this without ``known``, as for :class:`~.llm_extract.LLMExtractor`).

        Args:
            chunks: the corpus chunks, in corpus order (fixes the order of ``chunk_ids``).
            titles: optional ``{document_id: title}``; a chunk's title is shown to the LLM and
                counts as part of its text for grounding.
            known: the answers of a previous extraction (``state.llm_answers``): a chunk whose
                record was made with the same entity prompt and settings holds both stages'
                answers and is not asked; a summary whose prompt is known is not asked. A
                record under another key, or a damaged one, is ignored and the chunk asked.

        Returns:
            An :class:`~.llm_extract.LLMExtraction`: entities sorted by id, relations by
            ``(source, target)`` (both empty for no chunks), each chunk's record (its entity
            answers, then its relation answers) and the summaries used, and the number of
            chunks asked. The same answers give the same graph, known or asked.

        Raises:
            LLMOutputError: more than ``client.max_failure_share`` of the chunks' first entity
                answers (stage ``"extract"``, checked before any relation prompt is sent) or of
                their first relation answers (stage ``"extract:relations"``) gave nothing
                usable: unreadable, or every record naming something absent from the chunk or
                copied from the prompts' example.
            ValueError: no entity could be read from any chunk's answers.
            LLMError: an LLM call failed after its retries (answers received are cached).
        """
        chunks = list(chunks)
        if not chunks:
            return LLMExtraction([], [], LLMAnswers())
        titles = titles or {}
        builder = GraphBuilder(chunk_positions(chunks), within_chunk=max)
        skipped: Counter = Counter()
        grounds = [Grounding(f"{document_title(titles.get(c.document_id)) or ''}\n{c.text}") for c in chunks]
        prompts = self._entity_prompts(chunks, titles)
        keys = [self._record_key(p) for p in prompts]
        entity_answers, relation_answers = self._known_records(chunks, keys, known)
        asked = [i for i, c in enumerate(chunks) if relation_answers[i] is None]
        if asked:
            for i, answers in zip(asked, self._entity_answers([prompts[i] for i in asked]), strict=True):
                entity_answers[i] = answers
        # stage 1: entities, kept where their name occurs in their chunk
        listed, note = self._keep_entities(builder, chunks, grounds, entity_answers, skipped)
        notes = [note]  # raised before any relation prompt is sent
        # stage 2: relations among each chunk's entities (asked for the chunks asked in stage 1)
        todo = [i for i in asked if len(listed[i]) >= 2]
        for i in asked:
            relation_answers[i] = []
        if todo:
            for i, answers in zip(
                todo,
                self.relation_answers([chunks[i] for i in todo], titles, [list(listed[i].values()) for i in todo]),
                strict=True,
            ):
                relation_answers[i] = answers
        notes.append(self._keep_relations(builder, chunks, grounds, listed, relation_answers, skipped))

        entities, relations, summaries = self._merged(builder, len(chunks), skipped, known)
        note = "; ".join(n for n in notes if n)
        report_skipped(self.client, skipped, f"HiRAG two-stage LLM extraction over {len(chunks)} chunk(s)", note)
        records = {
            c.id: LLMRecord.of(keys[i], [str(len(entity_answers[i])), *entity_answers[i], *(relation_answers[i] or [])])
            for i, c in enumerate(chunks)
        }
        return LLMExtraction(entities, relations, LLMAnswers(records, summaries), len(asked))

    def _known_records(
        self, chunks: Sequence[Chunk], keys: Sequence[str], known: LLMAnswers | None
    ) -> tuple[list[list[str]], list[list[str] | None]]:
        """Per chunk, the entity and relation answers its kept record holds (a record:
        ``[number of entity answers, entity answers..., relation answers...]``); a chunk
        with no valid record gets ``[]`` and ``None`` (to ask)."""
        entity_answers: list[list[str]] = [[] for _ in chunks]
        relation_answers: list[list[str] | None] = [None for _ in chunks]  # None: not known
        for i, c in enumerate(chunks):
            hit = known_answers(known, c, keys[i], 2 * (2 + self.gleaning))
            if hit is not None and hit[1][0].isdigit() and 1 <= int(hit[1][0]) < len(hit[1]):
                n = int(hit[1][0])
                entity_answers[i], relation_answers[i] = hit[1][1 : n + 1], hit[1][n + 1 :]
        return entity_answers, relation_answers

    def _keep_entities(
        self, builder: GraphBuilder, chunks: Sequence[Chunk], grounds: Sequence[Grounding],
        entity_answers: Sequence[Sequence[str]], skipped: Counter,
    ) -> tuple[list[dict[str, str]], str]:
        """Stage 1's answers parsed into ``builder``, an entity kept where its name occurs in
        its chunk. Returns per chunk ``{canonical key: the name as first written}`` and the
        checks' note.

        Raises:
            LLMOutputError: too many chunks' first answers gave nothing usable.
        """
        checks = ExtractionChecks(self.client, STAGE_EXTRACT, hp.EXAMPLE_ENTITY_NAMES)
        listed: list[dict[str, str]] = []
        for chunk, ground, answers in zip(chunks, grounds, entity_answers, strict=True):
            names: dict[str, str] = {}
            for n, answer in enumerate(answers):
                stage = STAGE_GLEANING if n else STAGE_EXTRACT
                parsed = parse_extraction(checks.text(answer), self.entity_types)
                skipped[stage] += parsed.skipped
                reasons: Counter = Counter()
                kept = checks.keep_entities(builder, parsed.entities, chunk.id, ground, skipped, stage, reasons)
                for e in kept:
                    names.setdefault(entity_key(e.name), e.name)
                if not n:  # the first answer of each chunk is the one that must be usable
                    checks.answer(bool(parsed.entities), len(kept), reasons)
            listed.append(names)
        return listed, checks.finish()

    def _keep_relations(
        self, builder: GraphBuilder, chunks: Sequence[Chunk], grounds: Sequence[Grounding],
        listed: Sequence[Mapping[str, str]], relation_answers: Sequence[Sequence[str] | None], skipped: Counter,
    ) -> str:
        """Stage 2's answers parsed into ``builder``: a listed name is grounded by stage 1,
        another must occur in the chunk. Returns the checks' note.

        Raises:
            LLMOutputError: too many chunks' first relation answers gave nothing usable.
        """
        checks = ExtractionChecks(self.client, STAGE_RELATIONS, hp.EXAMPLE_ENTITY_NAMES)
        for i, answers in enumerate(relation_answers):
            if not answers:
                continue
            chunk, ground, names = chunks[i], grounds[i], listed[i]
            for n, answer in enumerate(answers):
                stage = STAGE_RELATION_GLEANING if n else STAGE_RELATIONS
                text = checks.text(answer)
                parsed = parse_extraction(text, self.entity_types)
                skipped[stage] += parsed.skipped
                reasons: Counter = Counter()
                kept = checks.keep_relations(builder, parsed.relations, chunk.id, ground, names, skipped, stage, reasons)
                if not n:  # "<|COMPLETE|>" alone says no pair is related: readable
                    readable = bool(parsed.relations) or hp.COMPLETION_DELIMITER in text
                    checks.answer(readable, kept, reasons)
        return checks.finish()
