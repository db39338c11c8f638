"""LLM extraction as an indexing stage: chunks → merged entity and relation records, behind
the :class:`~graphstrata.llm.client.LLMClient` (cache, retries, bounded concurrency, ledger).

* :class:`LLMExtractor`: LightRAG's joint entity + relationship extraction with gleaning and
  summarise-on-merge (``seed-lightrag.md`` §1.4–1.7; HiRAG ``seed-hirag.md`` §2.2–2.4 uses
  the same records and merge).
* :class:`AgragLLMExtractor`: AGRAG's statistical (TF-IDF) entities plus LLM triples as
  relations (``seed-agrag.md`` §1.3–1.5).

Both have :meth:`StatisticalExtractor.extract`'s signature and output, so the build can swap
them in (:func:`graphstrata.indexing.extract.extractor`). Entity ids are
:func:`graphstrata.extraction.canonical` keys (lower-cased, whitespace-folded, leading article
dropped), the same keys the statistical extractor uses.

The answers are read by the forgiving parsers of :mod:`graphstrata.llm.extraction_parsing`
(:func:`~graphstrata.llm.extraction_parsing.parse_extraction`,
:func:`~graphstrata.llm.extraction_parsing.parse_triples`), which take what is valid, count
what they skip, and never raise.

Stages (ledger names): ``"extract"``, ``"extract:gleaning"`` (gleaning passes and the
continue checks between them), ``"extract:summaries"``, ``"extract:triples"``.

Both also have ``extract_with_answers(chunks, titles, known)``: the same extraction, given the
answers a previous extraction kept (:class:`~graphstrata.llm.records.LLMAnswers`), asking the
LLM only for the chunks (and summaries) those do not answer, and returning the answers of the
whole result, which the index persists (issue 29: an insert pays for its new chunks only, with
or without a response cache).
"""

from __future__ import annotations

import operator
import re
import warnings
from collections import Counter
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..extraction import StatisticalExtractor, canonical, document_title
from ..llm.base import LLMRequest, estimate_tokens
from ..llm.client import LLMClient
from ..llm.extraction_parsing import (
    EntityRecord,
    LLMOutputWarning,
    RelationRecord,
    parse_extraction,
    parse_triples,
)
from ..llm.guards import (
    MAX_ANSWER_CHARS,
    MAX_ENTITIES_PER_CHUNK,
    MAX_RELATIONS_PER_CHUNK,
    Grounding,
)
from ..llm.prompts import agrag as agrag_prompts
from ..llm.prompts import lightrag_extract as lr_prompts
from ..llm.prompts.lightrag_extract import DEFAULT_ENTITY_TYPES
from ..llm.records import LLMAnswers, LLMRecord, record_key
from ..types import Chunk, Entity, Relation

STAGE_EXTRACT = "extract"
STAGE_GLEANING = "extract:gleaning"
STAGE_SUMMARIES = "extract:summaries"
STAGE_TRIPLES = "extract:triples"

#: summarise a merged description of at least this many tokens (spec §1.7: 500)
DEFAULT_SUMMARY_TRIGGER_TOKENS = 500
#: the longest summary asked for, in tokens (spec §1.7: ``max_tokens=500``)
DEFAULT_SUMMARY_MAX_TOKENS = 500
#: the most description tokens sent to one summary call (spec §1.7: input truncated to 32768)
SUMMARY_INPUT_MAX_TOKENS = 32_768
#: joins the distinct descriptions of a merged record (a parsed description holds no newline)
DESCRIPTION_SEPARATOR = "\n"

__all__ = [
    "DEFAULT_SUMMARY_MAX_TOKENS",
    "DEFAULT_SUMMARY_TRIGGER_TOKENS",
    "DESCRIPTION_SEPARATOR",
    "STAGE_EXTRACT",
    "STAGE_GLEANING",
    "STAGE_SUMMARIES",
    "STAGE_TRIPLES",
    "SUMMARY_INPUT_MAX_TOKENS",
    "AgragLLMExtractor",
    "LLMExtraction",
    "LLMExtractor",
]


def entity_key(name: str) -> str:
    """Canonical entity id of a surface form (:func:`graphstrata.extraction.canonical`)."""
    return canonical(name)


# ---------------------------------------------------------------------------------------------
# merge (spec §1.7)
# ---------------------------------------------------------------------------------------------
@dataclass
class _Acc:
    """Mentions of one entity or one relation across chunks."""

    names: Counter = field(default_factory=Counter)
    types: Counter = field(default_factory=Counter)
    descriptions: dict[str, None] = field(default_factory=dict)
    keywords: dict[str, str] = field(default_factory=dict)
    strength: dict[str, float] = field(default_factory=dict)  # chunk id -> strength in that chunk
    chunks: dict[str, None] = field(default_factory=dict)

    def mention(self, chunk_id: str, name: str = "", description: str = "") -> None:
        if name:
            self.names[name] += 1
        if description:
            self.descriptions.setdefault(description, None)
        self.chunks.setdefault(chunk_id, None)

    @staticmethod
    def top(counter: Counter) -> str:
        """Most frequent value, the first seen among ties; ``""`` when empty."""
        return max(counter.items(), key=operator.itemgetter(1))[0] if counter else ""


class GraphBuilder:
    """Merges parsed records across chunks into entities and undirected relations.

    Entities by canonical key: name and type by majority (first seen on ties), distinct
    descriptions joined in corpus order, chunk ids in corpus order, weight = number of chunks
    that mention the entity. Relations by the sorted key pair: weight = sum over chunks of the
    strength in that chunk (``within_chunk`` combines several records of one pair in one
    chunk: ``max`` for LightRAG, where a gleaning pass repeating a record is not a new mention;
    ``operator.add`` for AGRAG's distinct triples), keywords merged case-insensitively,
    descriptions joined. Relation endpoints without an entity record become entities with type
    ``""`` whose description is their relations' descriptions (spec §1.7, ``UNKNOWN`` type).
    """

    def __init__(self, chunk_pos: Mapping[str, int], within_chunk: Callable[[float, float], float] = max) -> None:
        self.pos = chunk_pos
        self.within_chunk = within_chunk
        self.entities: dict[str, _Acc] = {}
        self.relations: dict[tuple[str, str], _Acc] = {}
        self.endpoints: dict[str, _Acc] = {}

    def entity(self, record: EntityRecord, chunk_id: str) -> bool:
        """Add one mention of entity ``record`` in chunk ``chunk_id`` (name, description, type
        vote); ``False`` when its name has no canonical key (nothing added)."""
        key = entity_key(record.name)
        if not key:
            return False
        acc = self.entities.setdefault(key, _Acc())
        acc.mention(chunk_id, record.name, record.description)
        if record.type:
            acc.types[record.type] += 1
        return True

    def relation(self, record: RelationRecord, chunk_id: str) -> bool:
        """Add one mention of relation ``record`` in chunk ``chunk_id`` (undirected pair,
        description, keywords, strength: ``within_chunk`` of a pair repeated in one chunk) and
        of its two endpoints; ``False`` for an endpoint without a canonical key or a
        self-relation (nothing added)."""
        a, b = entity_key(record.source), entity_key(record.target)
        if not a or not b or a == b:
            return False
        pair = (a, b) if a < b else (b, a)
        acc = self.relations.setdefault(pair, _Acc())
        acc.mention(chunk_id, description=record.description)
        for kw in re.split(r"[,;]", record.keywords):
            if kw.strip():
                acc.keywords.setdefault(kw.strip().lower(), kw.strip())
        old = acc.strength.get(chunk_id)
        acc.strength[chunk_id] = record.strength if old is None else self.within_chunk(old, record.strength)
        for key, name in ((a, record.source), (b, record.target)):
            self.endpoints.setdefault(key, _Acc()).mention(chunk_id, name, record.description)
        return True

    def _chunks(self, ids: Iterable[str]) -> list[str]:
        return sorted(dict.fromkeys(ids), key=lambda c: self.pos.get(c, len(self.pos)))

    def _entity(self, key: str, acc: _Acc) -> Entity:
        chunks = self._chunks(acc.chunks)
        return Entity(
            id=key,
            name=_Acc.top(acc.names) or key,
            description=DESCRIPTION_SEPARATOR.join(acc.descriptions),
            chunk_ids=chunks,
            weight=float(len(chunks)),
            type=_Acc.top(acc.types),
        )

    def build(self, existing: Iterable[Entity] = ()) -> tuple[list[Entity], list[Relation]]:
        """``(entities sorted by id, relations sorted by (source, target))``.

        ``existing`` entities (AGRAG's statistical ones) are kept as they are, except that the
        chunks where a relation names them join their ``chunk_ids``; they take precedence over
        records of the same key.
        """
        out = {e.id: e for e in existing}
        for key, e in out.items():
            if key in self.endpoints:
                out[key] = replace(e, chunk_ids=self._chunks([*e.chunk_ids, *self.endpoints[key].chunks]))
        for accs in (self.entities, self.endpoints):
            for key, acc in accs.items():
                if key not in out:
                    out[key] = self._entity(key, acc)
        relations = [
            Relation(
                source=a,
                target=b,
                description=DESCRIPTION_SEPARATOR.join(acc.descriptions),
                weight=float(sum(acc.strength.values())),
                chunk_ids=self._chunks(acc.chunks),
                keywords=", ".join(acc.keywords.values()),
            )
            for (a, b), acc in sorted(self.relations.items())
        ]
        return [out[k] for k in sorted(out)], relations


def count_skipped(client: LLMClient, skipped: Mapping[str, int]) -> int:
    """Count the skipped records of each stage in the client's ledger; returns the total."""
    for stage, n in skipped.items():
        if n:
            client.skip(stage, n)
    return sum(skipped.values())


def report_skipped(client: LLMClient, skipped: Mapping[str, int], what: str, note: str = "") -> None:
    """:func:`count_skipped`, then one :class:`LLMOutputWarning` when records were skipped
    or there is a ``note``."""
    total = count_skipped(client, skipped)
    parts = []
    if total:
        stages = ", ".join(f"{n} in {stage!r}" for stage, n in skipped.items() if n)
        parts.append(f"skipped {total} unreadable record(s) of the LLM output ({stages})")
    if note:
        parts.append(note)
    if parts:
        warnings.warn(f"{what}: " + "; ".join(parts), LLMOutputWarning, stacklevel=3)


class ExtractionChecks:
    """The output checks of one extraction stage (:mod:`graphstrata.llm.guards`): per chunk a
    :class:`Grounding` of its title and text; per answer the bounds, the records rejected as
    ungrounded or echoed, and whether the answer gave anything usable."""

    def __init__(self, client: LLMClient, stage: str, examples: Iterable[str]) -> None:
        self.client, self.stage = client, stage
        self.example_keys = {entity_key(n) for n in examples}
        self.answers = 0
        self.failures: Counter = Counter()
        self.rejected: Counter = Counter()
        self.capped: Counter = Counter()

    def text(self, answer: str) -> str:
        """``answer`` cut to :data:`MAX_ANSWER_CHARS` characters."""
        if len(answer) > MAX_ANSWER_CHARS:
            self.capped["characters"] += 1
            return answer[:MAX_ANSWER_CHARS]
        return answer

    def bound(self, records: list, cap: int, what: str) -> list:
        """The first ``cap`` of ``records`` (counted when more were given)."""
        if len(records) > cap:
            self.capped[what] += 1
            return records[:cap]
        return records

    def names(self, ground: Grounding, names: Iterable[str]) -> str | None:
        """``None`` when every name is grounded, else the reason of the first that is not:
        ``"echo"`` (an example name) or ``"grounding"``."""
        for name in names:
            if not ground(name):
                return "echo" if entity_key(name) in self.example_keys else "grounding"
        return None

    def reject(self, reason: str) -> None:
        """Count one record rejected for ``reason`` (``"grounding"`` or ``"echo"``), reported
        by :meth:`finish`."""
        self.rejected[reason] += 1

    def keep_entities(
        self, builder: GraphBuilder, records: list, chunk_id: str, ground: Grounding,
        skipped: Counter, stage: str, reasons: Counter,
    ) -> list[EntityRecord]:
        """Add to ``builder`` the entity ``records`` of one answer for chunk ``chunk_id`` whose
        name ``ground`` finds (at most :data:`MAX_ENTITIES_PER_CHUNK`); rejections are counted
        in ``reasons``, records the builder refuses in ``skipped[stage]``. Returns those kept."""
        kept = []
        for e in self.bound(records, MAX_ENTITIES_PER_CHUNK, "entities"):
            why = self.names(ground, [e.name])
            if why:
                reasons[why] += 1
                self.reject(why)
            elif builder.entity(e, chunk_id):
                kept.append(e)
            else:
                skipped[stage] += 1
        return kept

    def keep_relations(
        self, builder: GraphBuilder, records: list, chunk_id: str, ground: Grounding,
        known: Container[str], skipped: Counter, stage: str, reasons: Counter,
    ) -> int:
        """Add to ``builder`` the relation ``records`` of one answer for chunk ``chunk_id``
        (at most :data:`MAX_RELATIONS_PER_CHUNK`) whose endpoints are entity keys in ``known``
        or names ``ground`` finds; a record without two distinct endpoints, or one the builder
        refuses, counts in ``skipped[stage]``, rejections in ``reasons``. Returns how many were
        kept."""
        kept = 0
        for r in self.bound(records, MAX_RELATIONS_PER_CHUNK, "relations"):
            a, b = entity_key(r.source), entity_key(r.target)
            if not a or not b or a == b:  # unusable: skipped, not ungrounded
                skipped[stage] += 1
                continue
            why = self.names(ground, [x for x in (r.source, r.target) if entity_key(x) not in known])
            if why:
                reasons[why] += 1
                self.reject(why)
            elif builder.relation(r, chunk_id):
                kept += 1
            else:
                skipped[stage] += 1
        return kept

    def answer(self, readable: bool, kept: int, reasons: Counter) -> None:
        """Count one checked answer: failed when unreadable (``"parse"``) or when none of its
        records was kept (the commoner rejection reason, echo on ties)."""
        self.answers += 1
        if not readable:
            self.failures["parse"] += 1
        elif not kept and reasons:
            self.failures["echo" if reasons["echo"] >= reasons["grounding"] else "grounding"] += 1

    def finish(self) -> str:
        """Count the answers in the ledger and stop on too many failures; returns the warning
        note on rejected records and caps (``""`` when none).

        Raises:
            LLMOutputError: the stage's failure share is above ``client.max_failure_share``.
        """
        if self.answers:
            self.client.check_answers(self.stage, self.answers, self.failures)
        notes = []
        if self.rejected:
            notes.append(
                f"rejected {self.rejected['grounding']} record(s) naming something not found in their chunk and "
                f"{self.rejected['echo']} copied from the prompt's example"
            )
        caps = {
            "characters": f"{MAX_ANSWER_CHARS} characters (MAX_ANSWER_CHARS)",
            "entities": f"{MAX_ENTITIES_PER_CHUNK} entities (MAX_ENTITIES_PER_CHUNK)",
            "relations": f"{MAX_RELATIONS_PER_CHUNK} relations (MAX_RELATIONS_PER_CHUNK)",
        }
        for what, n in self.capped.items():
            notes.append(f"{n} answer(s) cut to the cap of {caps[what]} per chunk")
        return "; ".join(notes)


@dataclass(frozen=True)
class LLMExtraction:
    """The result of ``extract_with_answers``: the graph and the answers it was made from.

    Attributes:
        entities: sorted by id.
        relations: sorted by ``(source, target)``.
        answers: the records of every chunk extracted (reused or new) and the summaries the
            graph uses (:class:`~graphstrata.llm.records.LLMAnswers`).
        asked: how many chunks were sent to the LLM (the others' answers were known).
    """

    entities: list[Entity]
    relations: list[Relation]
    answers: LLMAnswers
    asked: int = 0


def known_answers(known: LLMAnswers | None, chunk: Chunk, key: str, most: int) -> tuple[LLMRecord, list[str]] | None:
    """``chunk``'s record in ``known`` and its answers when the record was made under ``key``
    and holds 1 to ``most`` readable answers; else ``None`` (the chunk is asked again)."""
    rec = known.records.get(chunk.id) if known is not None else None
    if rec is None or rec.key != key:
        return None
    answers = rec.answers()
    if answers is None or len(answers) > most:
        return None
    return rec, answers


def chunk_positions(chunks: Sequence[Chunk]) -> dict[str, int]:
    """``{chunk_id: row}`` of ``chunks``, the first row of an id that repeats: the corpus order
    :class:`GraphBuilder` sorts ``chunk_ids`` by."""
    pos: dict[str, int] = {}
    for i, c in enumerate(chunks):
        pos.setdefault(c.id, i)
    return pos


# ---------------------------------------------------------------------------------------------
# extractors
# ---------------------------------------------------------------------------------------------
class _ExtractsWithAnswers:
    """``extract(chunks, titles)``: ``extract_with_answers`` with no known answers, its graph
    only (the signature of :meth:`StatisticalExtractor.extract`)."""

    def extract(
        self, chunks: Sequence[Chunk], titles: Mapping[str, str] | None = None
    ) -> tuple[list[Entity], list[Relation]]:
        """Extract the graph of ``chunks``: :meth:`extract_with_answers` with no known answers.

        Returns:
            ``(entities, relations)``: entities sorted by id, relations by ``(source,
            target)``; ``([], [])`` for no chunks.

        Raises:
            As ``extract_with_answers``.
        """
        out = self.extract_with_answers(chunks, titles)  # type: ignore[attr-defined]
        return out.entities, out.relations


class LLMExtractor(_ExtractsWithAnswers):
    """LightRAG / HiRAG LLM extraction (``seed-lightrag.md`` §1.4–1.7, ``seed-hirag.md``
    §2.2–2.4): one joint entity + relationship prompt per chunk, ``gleaning`` more passes,
    records merged across chunks, long descriptions summarised by the LLM.

    Calls (all through ``client.map``: bounded concurrency, cached, counted per stage):

    * ``"extract"``: one per chunk (:func:`~graphstrata.llm.prompts.lightrag_extract.extract_prompt`,
      the document title shown as context when it has one);
    * ``"extract:gleaning"``: per chunk and pass, the conversation so far (prompt, answers)
      plus "some were missed, add them"; with ``gleaning > 1``, before each pass after the
      first a YES/NO "still missing?" check, and chunks answering anything but yes stop
      (spec §1.6). Gleaned records are merged with the chunk's first answer;
    * ``"extract:summaries"``: one per merged entity or relation whose description reaches
      ``summary_trigger_tokens`` (:func:`~graphstrata.llm.base.estimate_tokens`); an empty
      summary keeps the joined descriptions (counted as one skipped record).

    Merge (spec §1.7): entities by canonical name (ids as in ``StatisticalExtractor``): type by
    majority vote (lower-case; first seen on ties; ``""`` when no record gave one), name = the
    most frequent surface form, distinct descriptions joined with new lines in corpus order,
    ``chunk_ids`` in corpus order, ``weight`` = number of chunks naming the entity. Relations
    undirected (``source < target``): ``weight`` = sum over chunks of the strength (1–10; the
    highest when one chunk's records repeat a pair), keywords merged, descriptions joined;
    self-relations are skipped. Relationship endpoints that no entity record names are
    created as entities with type ``""``, their relations' descriptions and chunks (the
    reference code's choice, spec §1.7: ``UNKNOWN`` type).

    Args:
        llm: an :class:`~graphstrata.llm.client.LLMClient`, an LLM, or a callable
            (:meth:`LLMClient.of`).
        entity_types: the types the prompt offers (default the paper's
            ``organization, person, geo, event``).
        gleaning: extra passes per chunk (≥ 0; the paper's 1 gives 2 calls per chunk).
        summary_trigger_tokens: summarise a merged description of at least this many tokens
            (> 0; spec: 500).
        summary_max_tokens: the longest summary asked for, in tokens (> 0; spec: 500).
        language: language of descriptions and summaries.
        show_progress: a progress bar per stage (stderr).
        examples: the extraction prompt with its worked example (``False``: the short
            question for small local models, :func:`~graphstrata.llm.prompts.lightrag_extract.
            short_extract_prompt`, answered with typed entities and no relationships).

    Raises:
        TypeError: ``llm`` is not an LLM, callable or client.
        ValueError: ``gleaning`` < 0, non-positive token limits, no entity types, or an empty
            ``language``.
    """

    def __init__(
        self,
        llm: Any,
        *,
        entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES,
        gleaning: int = 1,
        summary_trigger_tokens: int = DEFAULT_SUMMARY_TRIGGER_TOKENS,
        summary_max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS,
        language: str = "English",
        show_progress: bool = False,
        examples: bool = True,
    ) -> None:
        if isinstance(entity_types, str):
            entity_types = [entity_types]
        types = [t.strip().lower() for t in entity_types if isinstance(t, str) and t.strip()]
        if not types:
            raise ValueError(f"entity_types must name at least one type, got {entity_types!r}")
        for name, value, low in (
            ("gleaning", gleaning, 0),
            ("summary_trigger_tokens", summary_trigger_tokens, 1),
            ("summary_max_tokens", summary_max_tokens, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not isinstance(language, str) or not language.strip():
            raise ValueError(f"language must be a non-empty string, got {language!r}")
        self.client = LLMClient.of(llm)
        self.entity_types = tuple(types)
        self.gleaning = gleaning
        self.summary_trigger_tokens = summary_trigger_tokens
        self.summary_max_tokens = summary_max_tokens
        self.language = language.strip()
        self.show_progress = bool(show_progress)
        self.examples = bool(examples)

    def _map(self, prompts: Sequence[str], stage: str, system: str = lr_prompts.EXTRACT_SYSTEM) -> list[str]:
        requests = [LLMRequest(p, system) for p in prompts]
        return [r.text for r in self.client.map(requests, stage, self.show_progress)]

    def _answers(
        self, chunks: Sequence[Chunk], titles: Mapping[str, str] | None, known: LLMAnswers | None = None
    ) -> tuple[list[list[str]], dict[str, LLMRecord], int]:
        """Per chunk: the extraction answer, then one answer per gleaning pass it took; the
        chunks' records (``{chunk_id: LLMRecord}``); and how many chunks were asked. A chunk
        whose record in ``known`` was made with the same prompt and settings is not asked."""
        title_of = document_title
        titles = titles or {}
        prompts = [
            lr_prompts.extract_prompt(
                c.text, self.entity_types, self.language, title_of(titles.get(c.document_id)), self.examples
            )
            for c in chunks
        ]
        system = lr_prompts.EXTRACT_SYSTEM if self.examples else lr_prompts.EXTRACT_SYSTEM_SHORT
        keys = [
            record_key(
                "lightrag", system, p, str(self.gleaning), lr_prompts.CONTINUE_QUESTION, lr_prompts.GLEANING_INSTRUCTION
            )
            for p in prompts
        ]
        answers: list[list[str]] = [[] for _ in chunks]
        records: dict[str, LLMRecord] = {}
        todo = []
        for i, c in enumerate(chunks):
            hit = known_answers(known, c, keys[i], 1 + self.gleaning)
            if hit is None:
                todo.append(i)
            else:
                records[c.id], answers[i] = hit[0], hit[1]
        if todo:
            for i, a in zip(todo, self._map([prompts[i] for i in todo], STAGE_EXTRACT, system), strict=True):
                answers[i] = [a]
        self._glean(
            prompts, answers, todo, STAGE_GLEANING, lr_prompts.EXTRACT_SYSTEM,
            lr_prompts.GLEANING_INSTRUCTION, lr_prompts.CONTINUE_QUESTION,
        )
        for i in todo:
            records[chunks[i].id] = LLMRecord.of(keys[i], answers[i])
        return answers, {c.id: records[c.id] for c in chunks}, len(todo)

    def _glean(
        self,
        prompts: Sequence[str],
        answers: list[list[str]],
        active: Sequence[int],
        stage: str,
        system: str,
        gleaning_instruction: str,
        continue_question: str,
    ) -> None:
        """``self.gleaning`` more passes over prompts ``active`` (indices into ``prompts``),
        each answer appended, in place, to ``answers[i]`` (which holds the first answer): the
        conversation so far (:func:`~graphstrata.llm.prompts.lightrag_extract.continued`) plus
        ``gleaning_instruction``; before each pass after the first, ``continue_question``, and
        only prompts answered yes go on (spec §1.6). All calls in ledger stage ``stage``."""
        active = list(active)

        def ask(instruction: str) -> list[str]:
            conversations = [
                lr_prompts.continued(prompts[i], answers[i], instruction, gleaning_instruction) for i in active
            ]
            return self._map(conversations, stage, system)

        for done in range(self.gleaning):
            if not active:
                break
            if done:  # go on only where the model says records are still missing
                checks = ask(continue_question)
                active = [i for i, a in zip(active, checks, strict=True) if re.match(r"\W*yes\b", a, re.I)]
            if not active:
                break
            for i, a in zip(active, ask(gleaning_instruction), strict=True):
                answers[i].append(a)

    def _summarise(
        self,
        records: Sequence[Entity | Relation],
        names: Callable[[Any], str],
        skipped: Counter,
        known: Mapping[str, str],
        used: dict[str, str],
    ) -> None:
        """Replace, in place, each description of at least ``summary_trigger_tokens`` tokens by
        its LLM summary (stage ``"extract:summaries"``). A summary whose prompt is in ``known``
        (``{record_key: summary}``) is not asked again; every summary used is put in ``used``
        under its key (an empty answer too: it keeps the joined descriptions, as it did)."""
        todo = [r for r in records if estimate_tokens(r.description) >= self.summary_trigger_tokens]
        prompts, keys = [], []
        for r in todo:
            parts, budget = [], SUMMARY_INPUT_MAX_TOKENS
            for d in r.description.split(DESCRIPTION_SEPARATOR):
                budget -= estimate_tokens(d)
                if budget < 0 and parts:
                    break
                parts.append(d)
            max_words = max(1, self.summary_max_tokens * 3 // 4)
            prompts.append(lr_prompts.summary_prompt(names(r), parts, max_words, self.language))
            keys.append(record_key("summary", lr_prompts.SUMMARY_SYSTEM, prompts[-1]))
        ask = [i for i, k in enumerate(keys) if k not in known]
        texts = [known.get(k) for k in keys]
        for i, text in zip(ask, self._map([prompts[i] for i in ask], STAGE_SUMMARIES, lr_prompts.SUMMARY_SYSTEM), strict=True):
            texts[i] = text
        for r, key, text in zip(todo, keys, texts, strict=True):
            used[key] = text or ""
            if text and text.strip():
                r.description = text.strip()
            else:
                skipped[STAGE_SUMMARIES] += 1

    def extract_with_answers(
        self, chunks: Sequence[Chunk], titles: Mapping[str, str] | None = None, known: LLMAnswers | None = None
    ) -> LLMExtraction:
        """Extract, merge and summarise entities and relations of ``chunks``, asking the LLM
        only what ``known`` does not answer.

        Args:
            chunks: the corpus chunks, in corpus order (fixes the order of ``chunk_ids``).
            titles: optional ``{document_id: title}``; a chunk's title is shown to the LLM.
            known: the answers of a previous extraction (``state.llm_answers``): a chunk whose
                record was made with the same prompt and settings
                (:class:`~graphstrata.llm.records.LLMRecord` ``key``) and holds readable
                answers is not asked (its answers are parsed, grounded and merged as if they
                had just come back); a summary whose prompt is known is not asked either. A
                record under another key (the chunk's text, title or the settings changed)
                or a damaged one is ignored and the chunk asked again.

        Returns:
            An :class:`LLMExtraction`: entities sorted by id, relations by ``(source,
            target)`` (both empty for no chunks), the records of every chunk in ``chunks`` and
            the summaries used, and the number of chunks asked. The same answers give the
            same entities and relations, whether they were known or asked.

        Raises:
            LLMOutputError: more than ``client.max_failure_share`` of the chunks' first
                answers gave nothing usable: unreadable, or every record naming something
                absent from the chunk (its title included) or copied from the prompt's example
                (:mod:`graphstrata.llm.guards`; the message names the model, stage and share).
            ValueError: no entity could be read from any chunk's answers (the message gives
                the number of chunks and of skipped records).
            LLMError: an LLM call failed after its retries (answers received are cached).

        Only grounded records are kept: an entity whose name, or a relation one of whose
        endpoints, does not occur in its chunk (nor names an entity kept from another chunk) is
        rejected. Each answer is bounded
        (:data:`~graphstrata.llm.guards.MAX_ANSWER_CHARS` characters,
        :data:`~graphstrata.llm.guards.MAX_ENTITIES_PER_CHUNK` entities,
        :data:`~graphstrata.llm.guards.MAX_RELATIONS_PER_CHUNK` relations). Skipped records,
        rejections and caps are counted per stage in ``client.ledger`` and reported by one
        :class:`LLMOutputWarning` naming the caps.
        """
        chunks = list(chunks)
        if not chunks:
            return LLMExtraction([], [], LLMAnswers())
        builder = GraphBuilder(chunk_positions(chunks), within_chunk=max)
        skipped: Counter = Counter()
        checks = ExtractionChecks(self.client, STAGE_EXTRACT, lr_prompts.EXAMPLE_ENTITY_NAMES)
        titles = titles or {}
        all_answers, records, asked = self._answers(chunks, titles, known)
        # pass 1: entity records, kept where their name occurs in their chunk
        pending: list[tuple[Chunk, Grounding, str, Any, Counter, list[int]]] = []
        for chunk, answers in zip(chunks, all_answers, strict=True):
            ground = Grounding(f"{document_title(titles.get(chunk.document_id)) or ''}\n{chunk.text}")
            for n, answer in enumerate(answers):
                stage = STAGE_GLEANING if n else STAGE_EXTRACT
                parsed = parse_extraction(checks.text(answer), self.entity_types)
                skipped[stage] += parsed.skipped
                reasons: Counter = Counter()
                kept = [len(checks.keep_entities(builder, parsed.entities, chunk.id, ground, skipped, stage, reasons))]
                pending.append((chunk, ground, stage, parsed, reasons, kept))
        # pass 2: relations, kept where each endpoint occurs in the chunk or is an entity kept
        # in pass 1 (a model resolving "she" to the name written in another chunk)
        kept_keys = set(builder.entities)
        for chunk, ground, stage, parsed, reasons, kept in pending:
            kept[0] += checks.keep_relations(builder, parsed.relations, chunk.id, ground, kept_keys, skipped, stage, reasons)
            if stage == STAGE_EXTRACT:  # the first answer of each chunk is the one that must be usable
                checks.answer(bool(parsed), kept[0], reasons)
        note = checks.finish()
        entities, relations, summaries = self._merged(builder, len(chunks), skipped, known)
        report_skipped(self.client, skipped, f"LLM extraction over {len(chunks)} chunk(s)", note)
        return LLMExtraction(entities, relations, LLMAnswers(records, summaries), asked)

    def _merged(
        self, builder: GraphBuilder, n_chunks: int, skipped: Counter, known: LLMAnswers | None
    ) -> tuple[list[Entity], list[Relation], dict[str, str]]:
        """The merged entities and relations of ``builder``, long descriptions summarised
        (``known``'s summaries reused), and the summaries used (``{record_key: summary}``).

        Raises:
            ValueError: no entity was kept from any of the ``n_chunks`` chunks.
        """
        entities, relations = builder.build()
        if not entities:
            total = count_skipped(self.client, skipped)
            raise ValueError(
                f"the LLM produced no entities from {n_chunks} chunk(s) ({total} record(s) skipped as unreadable); "
                f"check that the model ({self.client.id}) follows the extraction format"
            )
        names = {e.id: e.name for e in entities}
        known_summaries = known.summaries if known is not None else {}
        summaries: dict[str, str] = {}
        self._summarise(entities, lambda e: e.name, skipped, known_summaries, summaries)
        self._summarise(relations, lambda r: f"{names[r.source]} and {names[r.target]}", skipped, known_summaries, summaries)
        return entities, relations, summaries


class AgragLLMExtractor(_ExtractsWithAnswers):
    """AGRAG graph construction (``seed-agrag.md`` §1.2–1.5): statistical (TF-IDF) entities,
    LLM triples as relations.

    ``statistical.extract`` gives the entities, kept as they are; its co-occurrence relations
    are dropped: the relations are the triples the LLM extracts from each chunk (stage
    ``"extract:triples"``, one JSON-mode call per chunk through ``client.map``, the chunk's
    statistical entity names given as hints, spec §1.3). A triple ``(s, p, o)`` becomes the
    undirected relation between ``canonical(s)`` and ``canonical(o)``: ``keywords`` = the
    relation phrases, ``description`` = the sentences ``"s p o"``, ``weight`` = number of
    distinct triples linking the pair (spec §1.5: parallel facts are kept), ``chunk_ids`` the
    chunks they come from. Identical triples of one chunk count once; triples whose subject
    and object are the same entity are skipped.

    Triple endpoints that are not statistical entities become entities (the spec's choice,
    §1.4 and §6.1 #3: entity nodes come from the triples): type ``""``, description = the
    triples naming them, ``weight`` = number of chunks. A statistical entity named by a triple
    of a chunk gains that chunk in ``chunk_ids`` (spec §1.5: passage edges link a chunk to the
    entities of its own triples).

    Args:
        llm: an :class:`~graphstrata.llm.client.LLMClient`, an LLM, or a callable.
        statistical: the entity extractor (default ``StatisticalExtractor()``; the build passes
            ``StatisticalExtractor.from_config(config)``).
        show_progress: a progress bar (stderr).

    Raises:
        TypeError: ``llm`` is not an LLM, callable or client.
    """

    def __init__(
        self, llm: Any, statistical: StatisticalExtractor | None = None, *, show_progress: bool = False
    ) -> None:
        self.client = LLMClient.of(llm)
        self.statistical = statistical if statistical is not None else StatisticalExtractor()
        self.show_progress = bool(show_progress)

    def extract_with_answers(
        self, chunks: Sequence[Chunk], titles: Mapping[str, str] | None = None, known: LLMAnswers | None = None
    ) -> LLMExtraction:
        """Statistical entities of ``chunks`` plus LLM triples as relations, asking the LLM
        only for chunks whose triples ``known`` does not hold.

        Args:
            chunks: the corpus chunks, in corpus order.
            titles: optional ``{document_id: title}`` (passed to the statistical extractor).
            known: the answers of a previous extraction (``state.llm_answers``). A chunk's
                record is keyed on its text and the prompt template, not on the statistical
                entity names the prompt lists as hints: those come from a TF-IDF model fitted
                over the whole corpus, which an insert moves, and re-asking every chunk whose
                hints shifted would make an insert cost a build. A record under another key
                (the text changed) or a damaged one is ignored and the chunk asked again.

        Returns:
            An :class:`LLMExtraction` (entities sorted by id, relations by ``(source,
            target)``, both empty for no chunks; the records of every chunk; no summaries;
            the number of chunks asked).

        Raises:
            LLMOutputError: more than ``client.max_failure_share`` of the answers were
                unreadable or had every triple rejected (a subject or object absent from the
                chunk and not a statistical entity, or copied from the prompt's example; at most
                :data:`~graphstrata.llm.guards.MAX_RELATIONS_PER_CHUNK` triples are read per
                chunk).
            ValueError: the result has no entity at all (the message gives the number of chunks
                and of skipped triples).
            LLMError: an LLM call failed after its retries (answers received are cached).

        Skipped triples are counted in ``client.ledger`` under ``"extract:triples"``; one
        :class:`LLMOutputWarning` reports them, and also an answer set without any triple.
        """
        chunks = list(chunks)
        if not chunks:
            return LLMExtraction([], [], LLMAnswers())
        stat_entities, _cooccurrence = self.statistical.extract(chunks, titles)
        hints: dict[str, list[str]] = {c.id: [] for c in chunks}
        for e in stat_entities:
            for cid in e.chunk_ids:
                if cid in hints:
                    hints[cid].append(e.name)
        texts, records, asked = self._triple_answers(chunks, hints, known)
        builder = GraphBuilder(chunk_positions(chunks), within_chunk=operator.add)
        checks = ExtractionChecks(self.client, STAGE_TRIPLES, agrag_prompts.EXAMPLE_ENTITY_NAMES)
        stat_keys = {e.id for e in stat_entities}  # grounded by construction
        skipped = sum(
            self._keep_triples(builder, checks, chunk, text, titles or {}, stat_keys)
            for chunk, text in zip(chunks, texts, strict=True)
        )
        guard_note = checks.finish()
        entities, relations = builder.build(stat_entities)
        counts = {STAGE_TRIPLES: skipped}
        if not entities:
            total = count_skipped(self.client, counts)
            raise ValueError(
                f"extraction produced no entities from {len(chunks)} chunk(s): no statistical entity and no "
                f"readable triple ({total} triple(s) skipped as unreadable)"
            )
        note = "" if relations else f"the LLM ({self.client.id}) gave no usable triple for {len(chunks)} chunk(s)"
        note = "; ".join(n for n in (note, guard_note) if n)
        report_skipped(self.client, counts, f"AGRAG triple extraction over {len(chunks)} chunk(s)", note)
        return LLMExtraction(entities, relations, LLMAnswers({c.id: records[c.id] for c in chunks}), asked)

    def _triple_answers(
        self, chunks: Sequence[Chunk], hints: Mapping[str, list[str]], known: LLMAnswers | None
    ) -> tuple[list[str], dict[str, LLMRecord], int]:
        """Each chunk's triples answer: kept in ``known`` or asked (one JSON-mode call per
        chunk, its statistical entity names as hints). Returns ``(answer per chunk,
        {chunk_id: record}, chunks asked)``."""
        texts: list[str] = [""] * len(chunks)
        records: dict[str, LLMRecord] = {}
        todo = []
        for i, c in enumerate(chunks):
            key = record_key("agrag", agrag_prompts.TRIPLES_SYSTEM, agrag_prompts.triples_prompt(c.text, []))
            hit = known_answers(known, c, key, 1)
            if hit is None:
                todo.append((i, key))
            else:
                records[c.id], texts[i] = hit[0], hit[1][0]
        requests = [
            LLMRequest(
                agrag_prompts.triples_prompt(chunks[i].text, hints[chunks[i].id]), agrag_prompts.TRIPLES_SYSTEM,
                json_mode=True,
            )
            for i, _ in todo
        ]
        for (i, key), response in zip(todo, self.client.map(requests, STAGE_TRIPLES, self.show_progress), strict=True):
            texts[i] = response.text
            records[chunks[i].id] = LLMRecord.of(key, [response.text])
        return texts, records, len(todo)

    @staticmethod
    def _keep_triples(
        builder: GraphBuilder, checks: ExtractionChecks, chunk: Chunk, text: str, titles: Mapping[str, str],
        stat_keys: set[str],
    ) -> int:
        """One chunk's triples answer parsed into ``builder``: a triple is kept when each
        endpoint is a statistical entity or occurs in the chunk (its title included); an
        identical triple counts once. Returns the triples skipped as unusable."""
        parsed = parse_triples(checks.text(text))
        skipped = parsed.skipped
        ground = Grounding(f"{document_title(titles.get(chunk.document_id)) or ''}\n{chunk.text}")
        seen: set[tuple[str, str, str]] = set()
        reasons: Counter = Counter()
        kept = 0
        for s, p, o in checks.bound(parsed.triples, MAX_RELATIONS_PER_CHUNK, "relations"):
            ident = (entity_key(s), p.lower(), entity_key(o))
            if ident in seen:
                continue
            seen.add(ident)
            if not ident[0] or not ident[2] or ident[0] == ident[2]:  # unusable: skipped, not ungrounded
                skipped += 1
                continue
            why = checks.names(ground, [x for x in (s, o) if entity_key(x) not in stat_keys])
            if why:
                reasons[why] += 1
                checks.reject(why)
                continue
            ok = builder.relation(RelationRecord(s, o, f"{s} {p} {o}", p, 1.0), chunk.id)
            kept += ok
            skipped += not ok
        # a chunk may state no fact: only unreadable answers and all-rejected ones fail
        checks.answer(bool(parsed) or not parsed.skipped, kept, reasons)
        return skipped
