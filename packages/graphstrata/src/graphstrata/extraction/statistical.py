"""Chunk → entity and relation records.

:class:`StatisticalExtractor` needs no LLM (spec seed-agrag.md §1.2 and §6.3, the offline
variant): entities are

* capitalised multi-word spans (``"Bank of America"``, ``"Wolfgang Schulz"``), surface form kept;
* the top-n TF-IDF 1–3-grams of each chunk, fitted on the corpus with scikit-learn (the paper's
  absolute threshold of 0.5 extracts almost nothing on real chunks, spec §6.3, so we take a
  per-chunk top-n instead);
* the document title, when the document has one (``metadata["title"]``): the subject of the
  whole passage.

Relations are entity pairs that co-occur in one sentence, weighted by the number of sentences
they share, described by those sentences. An entity's description is the sentences that mention
it. Records are merged by canonical name (lower-cased, whitespace-folded, leading article
dropped) and keep every source chunk id.

Bounds on work (issue 15: build time and memory must grow linearly with the input, whatever
the text looks like). Three caps, whose defaults change nothing on the shared QA corpora
(identical entity and relation counts on MuSiQue, HotpotQA and LiHua-World):

* a "sentence" longer than ``max_sentence_chars`` (2,000 characters; text without sentence
  breaks, a table, a log line) is cut at whitespace into pieces of at most that length, which
  then act as sentences: co-occurrence, descriptions and the sentence-initial-capital rule
  work per piece;
* at most ``max_entities_per_chunk`` entities per chunk (100; the corpora peak at 53): those
  mentioned in the most sentences of the chunk (the document title first, then first
  mention), the others are dropped *from that chunk* only;
* at most ``max_relations_per_sentence`` co-occurrence pairs per sentence (2,000; the corpora
  peak at 1,378 in one list-like sentence): the pairs of the most-mentioned entities.

So one chunk yields at most ``max_entities_per_chunk`` entity mentions and, per sentence piece,
at most ``max_relations_per_sentence`` relation mentions, and a description at most
``max_description_sentences`` pieces.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from ..cjk import cut_long_cjk_runs
from ..config import DEFAULT_MAX_ENTITIES_PER_CHUNK, DEFAULT_MAX_RELATIONS_PER_SENTENCE
from ..types import Chunk, Entity, Relation
from .text import (
    CAP_STOP,
    DEFAULT_MAX_SENTENCE_CHARS,
    WORD_RE,
    bounded_sentences,
    canonical,
    capitalised_spans,
    term_finder,
    term_head,
)
from .tfidf import FrozenTfidf, TfidfSpec, fit_tfidf, tfidf_vectorizer, top_terms
from .titles import document_title


class StatisticalExtractor:
    """LLM-free entity and relation extraction (spec seed-agrag.md §6.3, offline variant).

    Args:
        top_n: TF-IDF terms kept per chunk.
        ngram_range: n-gram lengths of TF-IDF terms (inclusive).
        min_df: minimum document frequency (in chunks) of a TF-IDF term; lowered to 1 for
            corpora of fewer than 20 chunks.
        max_description_sentences: sentences kept in an entity or relation description.
        use_titles: add each document's ``metadata["title"]`` as an entity of its chunks.
        max_entities_per_chunk: entities kept per chunk (> 0): the ones mentioned in the most
            sentences of the chunk (the title first, ties by first mention); the rest are
            not recorded for that chunk (``config.max_entities_per_chunk``).
        max_relations_per_sentence: co-occurrence pairs kept per sentence (≥ 0): those with
            the largest summed mention counts of their two entities in the chunk, ties by
            first mention (``config.max_relations_per_sentence``).
        max_sentence_chars: longest span treated as one sentence, in characters (> 0); longer
            spans are cut at whitespace (:func:`bounded_sentences`).
        sentence_split: ``"regex"`` (the sentence regex, the default) or ``"splitter"``
            (:mod:`graphstrata.sentences`, what ``chunking="sentence"`` uses).

    The extractor is fitted on the chunks passed to :meth:`extract`, so the same corpus always
    gives the same records (deterministic, no randomness). The caps bound the work per chunk
    (see the module notes), so extraction time and output grow linearly with the corpus.

    Raises:
        ValueError: a negative ``top_n`` or ``max_relations_per_sentence``, a non-positive
            ``max_entities_per_chunk`` or ``max_sentence_chars``.
    """

    def __init__(
        self,
        top_n: int = 8,
        ngram_range: tuple[int, int] = (1, 3),
        min_df: int = 2,
        max_description_sentences: int = 4,
        use_titles: bool = True,
        max_entities_per_chunk: int = DEFAULT_MAX_ENTITIES_PER_CHUNK,
        max_relations_per_sentence: int = DEFAULT_MAX_RELATIONS_PER_SENTENCE,
        max_sentence_chars: int = DEFAULT_MAX_SENTENCE_CHARS,
        sentence_split: str = "regex",
    ) -> None:
        if top_n < 0:
            raise ValueError(f"top_n must be >= 0, got {top_n}")
        if max_entities_per_chunk <= 0:
            raise ValueError(f"max_entities_per_chunk must be > 0, got {max_entities_per_chunk}")
        if max_relations_per_sentence < 0:
            raise ValueError(
                f"max_relations_per_sentence must be >= 0, got {max_relations_per_sentence}"
            )
        if max_sentence_chars <= 0:
            raise ValueError(f"max_sentence_chars must be > 0, got {max_sentence_chars}")
        self.top_n = int(top_n)
        self.ngram_range = tuple(ngram_range)
        self.min_df = int(min_df)
        self.max_description_sentences = int(max_description_sentences)
        self.use_titles = bool(use_titles)
        self.max_entities_per_chunk = int(max_entities_per_chunk)
        self.max_relations_per_sentence = int(max_relations_per_sentence)
        self.max_sentence_chars = int(max_sentence_chars)
        self.sentence_split = "splitter" if sentence_split == "splitter" else "regex"

    @classmethod
    def from_config(cls, config: Any) -> StatisticalExtractor:
        """The extractor a :class:`~graphstrata.config.GraphStrataConfig` describes.

        Reads ``tfidf_top_n``, ``use_titles``, ``max_entities_per_chunk`` and
        ``max_relations_per_sentence``; a field the object lacks (an older config) keeps the
        default.

        Raises:
            ValueError: out-of-range values (see the class).
        """
        kwargs: dict[str, Any] = {}
        for name, arg in (
            ("tfidf_top_n", "top_n"),
            ("use_titles", "use_titles"),
            ("max_entities_per_chunk", "max_entities_per_chunk"),
            ("max_relations_per_sentence", "max_relations_per_sentence"),
        ):
            value = getattr(config, name, None)
            if value is not None:
                kwargs[arg] = value
        if getattr(config, "chunking", "tokens") == "sentence":  # one splitter for chunks and sentences
            kwargs["sentence_split"] = "splitter"
        return cls(**kwargs)

    # -- TF-IDF ---------------------------------------------------------------------------
    def tfidf_spec(self, n_texts: int) -> TfidfSpec:
        """The :class:`TfidfSpec` of :meth:`fit` on a corpus of ``n_texts`` texts."""
        return TfidfSpec.of(tfidf_vectorizer(self.ngram_range, n_texts, self.min_df), "extraction", self.top_n)

    def fit(self, texts: Sequence[str], runner: Any = None) -> tuple[FrozenTfidf | None, list[list[str]]]:
        """Fit the TF-IDF model of :meth:`extract` on ``texts`` (the corpus chunks).

        scikit-learn's ``TfidfVectorizer`` model and matrix, computed in shards
        (:func:`fit_tfidf`; on ``runner``'s workers when it has a ``map``).

        Returns:
            ``(tfidf, terms)``: the fitted vocabulary and idf, frozen (``None`` when
            ``top_n == 0``, no text, or no vocabulary at all), and the top-``top_n`` terms of
            each text. Incremental inserts reuse the frozen model for new chunks
            (:meth:`chunk_records`); :meth:`~graphstrata.GraphStrata.rebuild` refits it.
        """
        if self.top_n == 0 or not texts:
            return None, [[] for _ in texts]
        [(tfidf, terms)] = fit_tfidf([self.tfidf_spec(len(texts))], texts, runner)
        return tfidf, terms

    def _top_terms(self, matrix: Any, tfidf: FrozenTfidf) -> list[list[str]]:
        """Top-``top_n`` terms per row of a TF-IDF matrix (ties: the matrix's stored order)."""
        return top_terms(matrix, tfidf.terms_array(), self.top_n)

    def _tfidf_terms(self, texts: Sequence[str], tfidf: FrozenTfidf | None) -> list[list[str]]:
        if self.top_n == 0 or not texts or tfidf is None:
            return [[] for _ in texts]
        return self._top_terms(tfidf.vectorizer().transform(texts), tfidf)

    def _pairs(
        self, kept: list[str], mentions: Mapping[str, int], priority: Mapping[str, tuple]
    ) -> list[tuple[str, str]]:
        """Co-occurrence pairs ``(a, b)``, ``a < b``, of one sentence's entities, at most
        ``max_relations_per_sentence``: the largest summed chunk mention counts first."""
        n = len(kept)
        pairs = list(combinations(sorted(kept), 2))
        if n * (n - 1) // 2 <= self.max_relations_per_sentence:
            return pairs
        pairs.sort(
            key=lambda p: (
                -(mentions[p[0]] + mentions[p[1]]),
                sorted((priority[p[0]], priority[p[1]])),
            )
        )
        return pairs[: self.max_relations_per_sentence]

    # -- main -----------------------------------------------------------------------------
    def extract(
        self, chunks: Sequence[Chunk], titles: dict[str, str] | None = None
    ) -> tuple[list[Entity], list[Relation]]:
        """Extract and merge entities and relations from ``chunks``.

        Equivalent to :meth:`fit` on the chunk texts, :meth:`chunk_records` and :func:`merge_records`.

        Args:
            chunks: the corpus chunks (the TF-IDF model is fitted on them).
            titles: optional ``{document_id: title}``; each title becomes an entity mentioned
                in every sentence of its document's chunks.

        Returns:
            ``(entities, relations)``, entities sorted by id, relations by ``(source, target)``.
        """
        _tfidf, terms = self.fit([c.text for c in chunks])
        return merge_records(
            self.chunk_records(chunks, titles, None, terms=terms),
            max_description_sentences=self.max_description_sentences,
        )

    def chunk_records(
        self,
        chunks: Sequence[Chunk],
        titles: Mapping[str, str] | None,
        tfidf: FrozenTfidf | None,
        terms: Sequence[Sequence[str]] | None = None,
    ) -> list[ChunkRecord]:
        """What each chunk says on its own: its entity and relation mentions.

        The knowledge graph is a pure function of these records in corpus order
        (:func:`merge_records`), so an insert extracts only the new chunks and a delete
        re-merges the entities and relations the deleted chunks touched.

        Args:
            chunks: chunks to extract, in corpus order.
            titles: ``{document_id: title}`` (see :meth:`extract`).
            tfidf: the frozen TF-IDF model (:meth:`fit`), or ``None`` for no TF-IDF terms.
            terms: the chunks' TF-IDF terms when already known (:meth:`fit` returns them for
                the corpus it was fitted on); ``tfidf`` is then not used.

        Returns:
            One :class:`ChunkRecord` per chunk, same order.
        """
        tfidf_terms = terms if terms is not None else self._tfidf_terms([c.text for c in chunks], tfidf)
        out: list[ChunkRecord] = []
        for chunk, terms in zip(chunks, tfidf_terms, strict=True):
            text = chunk.text
            term_heads = [term_head(t) for t in terms]
            title = document_title((titles or {}).get(chunk.document_id)) if self.use_titles else None
            title_key = canonical(title) if title else ""
            # pass 1: the entities of each sentence piece
            sentences: list[tuple[str, list[str], dict[str, str]]] = []
            mentions: Counter = Counter()  # sentences of this chunk naming each entity
            for s, e in bounded_sentences(text, self.max_sentence_chars, getattr(self, "sentence_split", "regex")):
                sent = text[s:e].strip()
                found = _sentence_entities(sent, terms, term_heads)
                if title_key:
                    found.setdefault(title_key, title)
                kept = _outermost_keys(found, title_key)
                sentences.append((sent, kept, found))
                mentions.update(kept)
            out.append(self._record(chunk.id, sentences, mentions, title_key))
        return out

    def _record(
        self,
        chunk_id: str,
        sentences: Sequence[tuple[str, list[str], dict[str, str]]],
        mentions: Counter,
        title_key: str,
    ) -> ChunkRecord:
        """Pass 2 of :meth:`chunk_records`: the record of one chunk from its sentences'
        ``(sentence, kept keys, {key: surface})``, at most ``max_entities_per_chunk`` entities
        (the title, then most sentences, then first mention)."""
        max_sents = self.max_description_sentences
        priority = {
            key: (key != title_key, -n, order)
            for order, (key, n) in enumerate(mentions.items())
        }
        allowed: set[str] | None = None
        if len(mentions) > self.max_entities_per_chunk:
            best = sorted(mentions, key=priority.__getitem__)
            allowed = set(best[: self.max_entities_per_chunk])
        rec = ChunkRecord(chunk_id)
        for sent, kept, found in sentences:
            if allowed is not None:
                kept = [key for key in kept if key in allowed]
            for key in kept:
                ent = rec.entities.get(key)
                if ent is None:
                    ent = rec.entities[key] = ({}, [0], [])
                surfaces, count, sents = ent
                surfaces[found[key]] = surfaces.get(found[key], 0) + 1
                count[0] += 1
                if len(sents) < max_sents and sent not in sents:
                    sents.append(sent)
            for pair in self._pairs(kept, mentions, priority):
                rel = rec.relations.get(pair)
                if rel is None:
                    rel = rec.relations[pair] = ([0], [])
                rel[0][0] += 1
                if len(rel[1]) < max_sents and sent not in rel[1]:
                    rel[1].append(sent)
        return rec


def _sentence_entities(
    sent: str, terms: Sequence[str], term_heads: Sequence[tuple[tuple[str, ...], tuple[str, ...]] | None]
) -> dict[str, str]:
    """``{canonical key: surface form}`` of one sentence's capitalised spans and TF-IDF terms
    (first surface kept)."""
    found: dict[str, str] = {}
    for span in capitalised_spans(sent):
        key = canonical(span)
        if len(key) >= 2 and key not in CAP_STOP:
            found.setdefault(key, span)
    # an ASCII term can only be found in an ASCII sentence that holds its words (as
    # words when they are plain words, else as text): most (sentence, term) pairs
    # are ruled out here, and the finder is made only when a term may be there
    lower = sent.lower() if sent.isascii() else None
    words = None
    find = None
    for term, need in zip(terms, term_heads, strict=True):
        if lower is not None and need is not None:
            plain, other = need
            if plain:
                if words is None:
                    words = set(WORD_RE.findall(lower))
                if not words.issuperset(plain):
                    continue
            if other and not all(part in lower for part in other):
                continue
        if find is None:
            find = term_finder(sent)
        match = find(term)
        if match:
            key = canonical(match)
            if len(key) >= 2 and cut_long_cjk_runs(match) == match:
                found.setdefault(key, match)
    return found


def _outermost_keys(found: Mapping[str, str], title_key: str) -> list[str]:
    """The keys of ``found``, longest first, without those contained in a longer one of the
    same sentence ("america" ⊂ "bank of america"); the title's key is always kept."""
    keys = sorted(found, key=len, reverse=True)
    kept: list[str] = []
    padded: list[str] = []
    for key in keys:
        if key != title_key and padded:
            inner = f" {key} "
            if any(inner in longer for longer in padded):
                continue
        kept.append(key)
        padded.append(f" {key} ")
    return kept



@dataclass
class ChunkRecord:
    """The entity and relation mentions of one chunk (:meth:`StatisticalExtractor.chunk_records`).

    Attributes:
        chunk_id: the chunk.
        entities: ``{entity_key: (surface_counts, [mentions], sentences)}``: surface forms
            with their counts (first-seen order), the number of sentence pieces naming the
            entity, and its first distinct sentences (at most ``max_description_sentences``).
        relations: ``{(a, b): ([mentions], sentences)}`` with ``a < b``.
        types: ``{entity_key: {type: mentions}}``, the types the NLP extractor gave the
            entity's mentions (:mod:`graphstrata.nlp`); empty for statistical records.
        labels: ``{(a, b): {label: mentions}}``, the labels its relation mentions carry.
    """

    chunk_id: str
    entities: dict[str, tuple[dict[str, int], list[int], list[str]]] = field(default_factory=dict)
    relations: dict[tuple[str, str], tuple[list[int], list[str]]] = field(default_factory=dict)
    types: dict[str, dict[str, int]] = field(default_factory=dict)
    labels: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> str:
        """Compact JSON (persisted per chunk); types and labels only when there are any, so a
        statistical record's JSON is what it always was."""
        parts: list[Any] = [
            [[k, s, c[0], t] for k, (s, c, t) in self.entities.items()],
            [[a, b, c[0], t] for (a, b), (c, t) in self.relations.items()],
        ]
        if self.types or self.labels:
            parts.append([[k, v] for k, v in self.types.items()])
            parts.append([[a, b, v] for (a, b), v in self.labels.items()])
        return json.dumps(parts, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, chunk_id: str, text: str) -> ChunkRecord:
        """Inverse of :meth:`to_json`; ``ValueError`` if malformed."""
        try:
            parts = json.loads(text)
            ents, rels = parts[:2]
            rec = cls(chunk_id)
            for k, s, c, t in ents:
                rec.entities[str(k)] = ({str(x): int(n) for x, n in s.items()}, [int(c)], [str(x) for x in t])
            for a, b, c, t in rels:
                rec.relations[(str(a), str(b))] = ([int(c)], [str(x) for x in t])
            if len(parts) == 4:
                for k, v in parts[2]:
                    rec.types[str(k)] = {str(x): int(n) for x, n in v.items()}
                for a, b, v in parts[3]:
                    rec.labels[(str(a), str(b))] = {str(x): int(n) for x, n in v.items()}
            elif len(parts) != 2:
                raise ValueError(f"{len(parts)} parts")
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"corrupt extraction record of chunk {chunk_id!r}: {exc}") from exc
        return rec


def _add_distinct(have: list[str], sentences: Sequence[str], limit: int) -> None:
    """Append the ``sentences`` not yet in ``have``, in order, until it holds ``limit``."""
    for s in sentences:
        if len(have) >= limit:
            break
        if s not in have:
            have.append(s)



def _extend_entry(entry: list, later: list, limit: int) -> None:
    """Add ``later``'s count, chunk ids and sentences (distinct, at most ``limit``) to
    ``entry``: the last three fields of a merged entity ``[surfaces, count, chunk ids,
    sentences]`` or relation ``[count, chunk ids, sentences]`` (:class:`RecordMerge`)."""
    entry[-3] += later[-3]
    entry[-2].extend(later[-2])
    if len(entry[-1]) < limit:
        _add_distinct(entry[-1], later[-1], limit)


RECORD_ZLIB_LEVEL = 1
"""zlib level of a :class:`CompactRecord` (the level the store compresses records at)."""


class CompactRecord(ChunkRecord):
    """A :class:`ChunkRecord` kept as its zlib-compressed :meth:`~ChunkRecord.to_json` (about
    500 bytes a chunk on the kernel docs, against ~9 kB of Python objects) and decoded on the
    first read of :attr:`entities` or :attr:`relations`; a large build keeps its records so.
    :attr:`packed` is the compressed JSON (the bytes the store persists) while the record
    was never decoded.

    Args:
        chunk_id: the chunk.
        blob: ``zlib.compress(record.to_json().encode("utf-8"))``.

    Raises:
        ValueError: (on first read) a damaged blob, naming its chunk.
    """

    def __init__(self, chunk_id: str, blob: bytes) -> None:  # not the dataclass __init__
        self.chunk_id = chunk_id
        self._blob = blob
        self._decoded: ChunkRecord | None = None

    @classmethod
    def pack(cls, record: ChunkRecord) -> CompactRecord:
        """``record`` compressed (a :class:`CompactRecord` is returned as it is)."""
        if isinstance(record, CompactRecord):
            return record
        import zlib

        return cls(record.chunk_id, zlib.compress(record.to_json().encode("utf-8"), RECORD_ZLIB_LEVEL))

    def _text(self) -> str:
        import zlib

        try:
            return zlib.decompress(self._blob).decode("utf-8")
        except (zlib.error, UnicodeDecodeError) as exc:
            raise ValueError(f"extraction record of {self.chunk_id!r} unreadable ({exc})") from None

    def _record(self) -> ChunkRecord:
        rec = self._decoded
        if rec is None:
            rec = self._decoded = ChunkRecord.from_json(self.chunk_id, self._text())
        return rec

    @property  # type: ignore[override]
    def entities(self) -> dict[str, tuple[dict[str, int], list[int], list[str]]]:
        return self._record().entities

    @entities.setter
    def entities(self, value: dict[str, tuple[dict[str, int], list[int], list[str]]]) -> None:
        self._record().entities = value

    @property  # type: ignore[override]
    def relations(self) -> dict[tuple[str, str], tuple[list[int], list[str]]]:
        return self._record().relations

    @relations.setter
    def relations(self, value: dict[tuple[str, str], tuple[list[int], list[str]]]) -> None:
        self._record().relations = value

    @property  # type: ignore[override]
    def types(self) -> dict[str, dict[str, int]]:
        return self._record().types

    @types.setter
    def types(self, value: dict[str, dict[str, int]]) -> None:
        self._record().types = value

    @property  # type: ignore[override]
    def labels(self) -> dict[tuple[str, str], dict[str, int]]:
        return self._record().labels

    @labels.setter
    def labels(self, value: dict[tuple[str, str], dict[str, int]]) -> None:
        self._record().labels = value

    @property
    def packed(self) -> bytes | None:
        """The compressed JSON while the record was never decoded, else ``None``."""
        return self._blob if self._decoded is None else None

    def to_json(self) -> str:
        """As :meth:`ChunkRecord.to_json` (the stored text while never decoded)."""
        return self._text() if self._decoded is None else self._decoded.to_json()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChunkRecord):
            return NotImplemented
        return (self.chunk_id, self.entities, self.relations, self.types, self.labels) == (
            other.chunk_id, other.entities, other.relations, other.types, other.labels)

    __hash__ = None  # type: ignore[assignment]  (mutable, as ChunkRecord)

    def __repr__(self) -> str:
        return f"CompactRecord({self.chunk_id!r}, {len(self._blob)} bytes)"


class RecordMerge:
    """The merge of extraction records in corpus order, built record by record or from the
    merges of consecutive runs of records (a worker merges its shard, the driver merges the
    shards in order): both give :func:`merge_records`' entities and relations exactly.

    Per entity key it keeps the surface forms with their counts (first-seen order), the
    mention count, the chunk ids and the first ``max_description_sentences`` distinct
    sentences; per relation the count, chunk ids and sentences. Merging two consecutive runs
    is exact because the first ``m`` distinct sentences of a concatenation are among the first
    ``m`` distinct ones of each part.

    Args:
        max_description_sentences: sentences kept per description.
    """

    __slots__ = ("max_sentences", "entities", "relations", "types", "labels")

    def __init__(self, max_description_sentences: int = 4) -> None:
        self.max_sentences = int(max_description_sentences)
        # key -> [surface counts, mentions, chunk ids, sentences]
        self.entities: dict[str, list[Any]] = {}
        # (a, b) -> [mentions, chunk ids, sentences]
        self.relations: dict[tuple[str, str], list[Any]] = {}
        # key -> {type: mentions}; (a, b) -> {label: mentions} (NLP records only)
        self.types: dict[str, dict[str, int]] = {}
        self.labels: dict[tuple[str, str], dict[str, int]] = {}

    def add_record(self, rec: ChunkRecord, only: set[str] | None = None) -> None:
        """Merge one record (the next in corpus order); ``only``: as :func:`merge_records`."""
        limit = self.max_sentences
        cid = rec.chunk_id
        ents = self.entities
        for key, (surfaces, count, sents) in rec.entities.items():
            if only is not None and key not in only:
                continue
            e = ents.get(key)
            if e is None:
                have: list[str] = []
                _add_distinct(have, sents, limit)
                ents[key] = [dict(surfaces), count[0], [cid], have]
                continue
            merged = e[0]
            for form, n in surfaces.items():
                merged[form] = merged.get(form, 0) + n
            e[1] += count[0]
            e[2].append(cid)
            if len(e[3]) < limit:
                _add_distinct(e[3], sents, limit)
        rels = self.relations
        for pair, (count, sents) in rec.relations.items():
            if only is not None and (pair[0] not in only or pair[1] not in only):
                continue
            r = rels.get(pair)
            if r is None:
                have = []
                _add_distinct(have, sents, limit)
                rels[pair] = [count[0], [cid], have]
                continue
            r[0] += count[0]
            r[1].append(cid)
            if len(r[2]) < limit:
                _add_distinct(r[2], sents, limit)
        if rec.types or rec.labels:
            _add_counts(self.types, rec.types, None if only is None else lambda k: k in only)
            _add_counts(self.labels, rec.labels,
                        None if only is None else lambda p: p[0] in only and p[1] in only)

    def update(self, later: RecordMerge) -> None:
        """Merge ``later``, the merge of the records that follow this one's in corpus order
        (its lists are taken over, not copied: do not use ``later`` afterwards)."""
        limit = self.max_sentences
        ents = self.entities
        for key, f in later.entities.items():
            e = ents.setdefault(key, f)
            if e is not f:
                merged = e[0]
                for form, n in f[0].items():
                    merged[form] = merged.get(form, 0) + n
                _extend_entry(e, f, limit)
        rels = self.relations
        for pair, f in later.relations.items():
            r = rels.setdefault(pair, f)
            if r is not f:
                _extend_entry(r, f, limit)
        _add_counts(self.types, later.types)
        _add_counts(self.labels, later.labels)

    def __getstate__(self) -> tuple:
        return (self.max_sentences, self.entities, self.relations, self.types, self.labels)

    def __setstate__(self, state: tuple) -> None:
        self.max_sentences, self.entities, self.relations, self.types, self.labels = state

    def result(self) -> tuple[list[Entity], list[Relation]]:
        """``(entities, relations)`` as :func:`merge_records` returns them (the merge is
        emptied: its lists become the records'). Entity ids and relation endpoints are
        interned (``sys.intern``): a relation names its entities with their id strings
        instead of copies that came from other shards."""
        import sys

        ents, rels = self.entities, self.relations
        types, labels = self.types, self.labels
        self.entities, self.relations, self.types, self.labels = {}, {}, {}, {}
        entities = []
        for key in sorted(ents):
            surfaces, count, chunks, sents = ents.pop(key)
            entities.append(
                Entity(
                    id=sys.intern(key),
                    name=max(surfaces.items(), key=_second)[0],  # Counter.most_common(1): first max
                    description=" ".join(sents),
                    chunk_ids=list(dict.fromkeys(chunks)),
                    weight=float(count),
                    type=_most_common(types.get(key), ()),
                    aliases=_aliases(key, surfaces),
                )
            )
        relations = []
        for pair in sorted(rels):
            count, chunks, sents = rels.pop(pair)
            relations.append(
                Relation(
                    source=sys.intern(pair[0]),
                    target=sys.intern(pair[1]),
                    description=" ".join(sents),
                    weight=float(count),
                    chunk_ids=list(dict.fromkeys(chunks)),
                    keywords=_most_common(labels.get(pair), UNSPECIFIC_LABELS),
                )
            )
        return entities, relations


UNSPECIFIC_LABELS = ("co-occurs with",)
"""Relation labels that say nothing more than co-occurrence: a relation takes one only when
none of its mentions has another (:data:`graphstrata.nlp.CO_OCCURS`)."""


def _second(item: tuple[Any, Any]) -> Any:
    return item[1]


def _aliases(key: str, surfaces: Mapping[str, int]) -> tuple[str, ...]:
    """The ids entity resolution merged into ``key``: the canonical forms of its surface forms
    other than ``key`` (a mention's id is the canonical form of its surface, so without
    resolution there are none), sorted. Derived from the records, so a delete drops the
    aliases only the deleted chunks gave."""
    if len(surfaces) == 1:
        (only,) = surfaces
        return () if canonical(only) == key else (canonical(only),)
    return tuple(sorted({canonical(s) for s in surfaces} - {key}))


def _most_common(counts: Mapping[str, int] | None, unspecific: Sequence[str]) -> str:
    """The most frequent key of ``counts`` (ties: the first seen), preferring any key not in
    ``unspecific``; ``""`` for no counts."""
    if not counts:
        return ""
    specific = {k: n for k, n in counts.items() if k not in unspecific}
    return max((specific or counts).items(), key=_second)[0]


def _add_counts(into: dict[Any, dict[str, int]], counts: Mapping[Any, Mapping[str, int]], keep: Any = None) -> None:
    """Add the nested counts ``counts`` (``{key: {value: n}}``) into ``into``; ``keep(key)``
    selects the keys (``None``: all)."""
    for key, values in counts.items():
        if keep is not None and not keep(key):
            continue
        have = into.setdefault(key, {})
        for value, n in values.items():
            have[value] = have.get(value, 0) + n


def merge_records(
    records: Sequence[ChunkRecord],
    only: set[str] | None = None,
    max_description_sentences: int = 4,
) -> tuple[list[Entity], list[Relation]]:
    """Merge per-chunk records (corpus order) into entities and relations.

    An entity's name is its most frequent surface form (ties: first seen), its description
    its first ``max_description_sentences`` distinct sentences in corpus order, its chunks in
    corpus order, its weight the number of sentence pieces naming it; relations likewise.

    Args:
        records: per-chunk records in corpus order.
        only: merge only these entity keys and the relations between two of them (``None``:
            all). Incremental updates re-merge just what the changed chunks touched.
        max_description_sentences: sentences kept per description.

    Returns:
        ``(entities, relations)``, entities sorted by id, relations by ``(source, target)``.
    """
    merge = RecordMerge(max_description_sentences)
    for rec in records:
        merge.add_record(rec, only)
    return merge.result()


def extract_shard(
    extractor: StatisticalExtractor,
    chunks: Sequence[Chunk | tuple[str, str, str]],
    titles: Mapping[str, str] | None,
    terms: Sequence[Sequence[str]] | None,
    tfidf: FrozenTfidf | None = None,
) -> tuple[list[bytes], RecordMerge]:
    """Extract one run of consecutive chunks and merge it (the worker half of a sharded
    extraction: :func:`graphstrata.indexing.extract.extract_stage`).

    Args:
        extractor: the build's extractor.
        chunks: :class:`~graphstrata.types.Chunk` s, or ``(id, document_id, text)`` tuples
            (what a worker is sent).
        titles: ``{document_id: title}`` of these chunks' documents.
        terms: the chunks' TF-IDF terms (:meth:`StatisticalExtractor.fit`), or ``None`` to
            score them with ``tfidf``.
        tfidf: the frozen model when ``terms`` is ``None``.

    Returns:
        ``(blobs, merge)``: each chunk's record compressed (:class:`CompactRecord` bytes, in
        order) and the :class:`RecordMerge` of the run.
    """
    import zlib

    rows = [c if isinstance(c, Chunk) else Chunk(c[0], c[1], 0, c[2], 0, len(c[2]), 0) for c in chunks]
    records = extractor.chunk_records(rows, titles, tfidf, terms=terms)
    merge = RecordMerge(extractor.max_description_sentences)
    blobs = []
    for rec in records:
        merge.add_record(rec)
        blobs.append(zlib.compress(rec.to_json().encode("utf-8"), RECORD_ZLIB_LEVEL))
    return blobs, merge

