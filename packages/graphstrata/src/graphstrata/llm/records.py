"""What an LLM-extracted index keeps of its extraction: the answers, per chunk (issue 29).

An index whose graph the LLM extracted (:class:`~graphstrata.indexing.LLMExtractor`,
:class:`~graphstrata.indexing.AgragLLMExtractor`) keeps, for every chunk, the raw answers its
extraction prompts got (:class:`LLMRecord`), and the LLM summaries of merged descriptions keyed
by their prompt (:class:`LLMAnswers`). Parsing, grounding and merging those answers again costs
no call and gives the same entities and relations as the build, so an incremental update asks
the LLM only for chunks without a valid record (new chunks, or chunks whose prompt changed),
whether or not a response cache (:mod:`graphstrata.llm.cache`) exists. They are persisted
with the index (:mod:`graphstrata.store`, tables ``llm_records`` and ``llm_summaries``).

A record is valid only for the prompt it was asked with: its :attr:`LLMRecord.key` hashes the
extractor kind and everything that makes the chunk's first prompt (system prompt, template,
chunk text, entity types, language, examples flag, title) and the gleaning setting
(:func:`record_key`); a chunk whose text changed under the same id gets another key and is
asked again. The model id is not part of the key: the records belong to the index, as its
entities do (``state.llm_id`` names the model that built it), and an update through a client
with other settings does not re-extract the corpus.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: zlib level of a record's answers (the answers repeat the chunk's names: ~4× smaller)
ANSWERS_ZLIB_LEVEL = 1

__all__ = ["ANSWERS_ZLIB_LEVEL", "LLMAnswers", "LLMRecord", "record_key"]


def record_key(*parts: str) -> str:
    """A 32-hex-digit hash of ``parts`` (sha256 of each part's UTF-8 bytes, each followed by a
    NUL): the key of an :class:`LLMRecord` or of a stored summary.

    Args:
        parts: what determines the prompt(s) (kind, system prompt, prompt, settings).
    """
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class LLMRecord:
    """The LLM's answers for one chunk, as its extraction asked for them.

    Attributes:
        key: :func:`record_key` of what determined the prompts; the record answers a chunk
            only while asking again would send the same prompts.
        packed: the answers as zlib-compressed JSON (a list of strings; what the store
            persists). LightRAG / HiRAG: the first extraction answer, then one per gleaning
            pass the chunk took; AGRAG: the triple answer.
    """

    key: str
    packed: bytes

    @classmethod
    def of(cls, key: str, answers: Sequence[str]) -> LLMRecord:
        """The record of ``answers`` (a sequence of strings) under ``key``."""
        text = json.dumps(list(answers), ensure_ascii=False)
        return cls(key, zlib.compress(text.encode("utf-8", "surrogatepass"), ANSWERS_ZLIB_LEVEL))

    def answers(self) -> list[str] | None:
        """The answers, or ``None`` when the stored bytes are not a list of strings (a damaged
        record: the extractor then asks again rather than lose the chunk's entities)."""
        try:
            value = json.loads(zlib.decompress(self.packed).decode("utf-8", "surrogatepass"))
        except (zlib.error, UnicodeDecodeError, ValueError, TypeError):
            return None
        if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
            return None
        return value


@dataclass(frozen=True)
class LLMAnswers:
    """The LLM answers an extracted graph was made from: what an update re-reads instead of
    asking again.

    Attributes:
        records: ``{chunk_id: LLMRecord}``, one per chunk of the index (a chunk without one,
            e.g. in an index persisted before issue 29, is asked again through the client and
            its response cache).
        summaries: ``{key: summary}`` of the merged descriptions the LLM summarised
            (``"extract:summaries"``), keyed by :func:`record_key` of the summary prompt: an
            entity or relation whose description inputs did not change finds its summary
            here. Only the summaries the current graph uses are kept.
    """

    records: Mapping[str, LLMRecord] = field(default_factory=dict)
    summaries: Mapping[str, str] = field(default_factory=dict)
