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
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations
from typing import Any

import numpy as np

from .cjk import cut_long_cjk_runs
from .config import DEFAULT_MAX_ENTITIES_PER_CHUNK, DEFAULT_MAX_RELATIONS_PER_SENTENCE
from .sentences import sentence_spans
from .types import Chunk, Entity, Relation

DEFAULT_MAX_SENTENCE_CHARS = 2_000
"""Longest span treated as one sentence by :class:`StatisticalExtractor` (characters)."""

_SENT_RE = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_CAP_WORD = r"(?:[A-Z][\w\-.&]*[\w]|[A-Z])"
_CONNECT = r"(?:of|the|de|del|la|le|von|van|der|du|da|di|&)"
_CAP_SPAN_RE = re.compile(
    rf"\b{_CAP_WORD}(?:\s+(?:{_CONNECT}\s+)*{_CAP_WORD})*"
)
_CONNECT_RE = re.compile(_CONNECT)
_POSSESSIVE_RE = re.compile(r"['’]s$")
_ARTICLE_RE = re.compile(r"^(the|a|an)\s+", re.I)
_SPACE_RE = re.compile(r"\s+")
_FILE_LIKE_RE = re.compile(r"[/\\_]")
_WORD_OR_MARK_RE = re.compile(r"\w+|[^\w\s]")
_DISAMBIGUATION_RE = re.compile(r"\s*\([^)]*\)\s*$")  # "Big Eye (film)" -> "Big Eye"
# Capitalised words that are almost never entities on their own.
_CAP_STOP = frozenset(
    """a an the this that these those it its he she they we you i his her their our my your
    in on at by for from to of and or but if when while after before during since until as
    there here what which who whom whose where why how all any some each every no not
    also however although though because so then thus hence yes yeah ok okay hi hey hello
    thanks thank please sure great good well oh wow let just what's it's i'm i've i'll
    i'd don't can't won't that's there's let's mr mrs ms dr st jan feb mar apr jun jul aug
    sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday time""".split()
)


@lru_cache(maxsize=8192)
def _term_pattern(term: str) -> re.Pattern[str]:
    """Case-insensitive pattern of a TF-IDF term, its words joined by spaces or hyphens.

    Cached: the same terms recur across chunks, and ``re``'s own cache (512 patterns) thrashes
    on a large corpus (compiling was a sixth of extraction time on 1 MB of text).
    """
    return re.compile(r"\b" + r"[\s\-]+".join(map(re.escape, term.split())) + r"\b", re.I)


_WORD_RE = re.compile(r"\w+")
_TERM_GAP_RE = re.compile(r"[\s\-]+")


def _term_head(term: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """What an ASCII sentence must hold for :func:`_term_finder` to find the ASCII TF-IDF
    ``term`` in it: ``(plain, other)``, the term's lower-cased parts that are plain words (each
    a word of the sentence) and the others (each in its lower-cased text); ``None`` for a term
    that is not ASCII or has no part (no quick test)."""
    if not term.isascii():
        return None
    parts = [p.lower() for p in term.split()]
    if not parts:
        return None
    plain = tuple(p for p in parts if _WORD_RE.fullmatch(p))
    return plain, tuple(p for p in parts if not _WORD_RE.fullmatch(p))


def _term_finder(sentence: str) -> Callable[[str], str | None]:
    """``find(term)``: the leftmost occurrence in ``sentence`` of a TF-IDF term (lower-case
    words joined by single spaces), its words as whole words joined by spaces or hyphens,
    case-insensitive — what ``_term_pattern(term).search(sentence)`` matches, from one
    tokenisation of the sentence instead of one compiled pattern per term (compiling was half
    of extraction on MuSiQue's 22k distinct terms). Falls back to the pattern for a term that
    is not plain words or where lower-casing changes a word's length."""
    spans = [(m.start(), m.end()) for m in _WORD_RE.finditer(sentence)]
    words = [sentence[a:b].lower() for a, b in spans]
    first: dict[str, list[int]] = {}
    for i, w in enumerate(words):
        first.setdefault(w, []).append(i)
    exact = all(b - a == len(w) for (a, b), w in zip(spans, words, strict=True))

    def find(term: str) -> str | None:
        parts = term.split()
        if not exact or not parts or any(_WORD_RE.fullmatch(p) is None for p in parts):
            m = _term_pattern(term).search(sentence)
            return m.group(0) if m else None
        n = len(parts)
        for i in first.get(parts[0].lower(), ()):
            if i + n > len(words):
                break
            if all(
                words[i + j] == parts[j].lower()
                and _TERM_GAP_RE.fullmatch(sentence, spans[i + j - 1][1], spans[i + j][0])
                for j in range(1, n)
            ):
                return sentence[spans[i][0] : spans[i + n - 1][1]]
        return None

    return find


def document_title(title: object) -> str | None:
    """A document's ``metadata["title"]`` when it names a subject, else ``None``.

    Empty values and file-name-like titles (containing ``/``, ``\\`` or ``_``, such as
    ``"week1/20260105_1100"``) return ``None``.
    """
    if not isinstance(title, str):
        return None
    title = title.strip()
    if not title or _FILE_LIKE_RE.search(title):
        return None
    return title


class TitleIndex:
    """Find which document titles a text names: Wikipedia-style links without hyperlinks.

    A title matches where its tokens (words and punctuation marks) occur as a contiguous,
    case-sensitive token run in a text (also inside a longer name: "United" matches in "United
    States"; refusing such runs measured 0.005–0.02 worse at recall@5). A trailing parenthesised disambiguator is dropped first
    ("Big Eye (film)" matches "Big Eye"). Titles without an upper-case letter or longer than
    ``max_words`` tokens are skipped (they are phrases, not names). :meth:`find` is linear in
    the text length: every token n-gram up to the longest title is looked up in a hash table.

    Args:
        titles: ``{document_id: title}``; file-like titles are ignored
            (:func:`document_title`).
        max_words: longest title, in tokens.
    """

    def __init__(self, titles: Mapping[str, object], max_words: int = 8) -> None:
        self._by_tokens: dict[tuple[str, ...], list[str]] = {}
        for doc_id, raw in titles.items():
            title = document_title(raw)
            if title is None:
                continue
            title = _DISAMBIGUATION_RE.sub("", title)
            tokens = tuple(_WORD_OR_MARK_RE.findall(title))
            if 0 < len(tokens) <= max_words and any(ch.isupper() for ch in title):
                self._by_tokens.setdefault(tokens, []).append(doc_id)
        self._longest = max((len(t) for t in self._by_tokens), default=0)

    def __len__(self) -> int:
        """Number of distinct matchable titles."""
        return len(self._by_tokens)

    def find(self, text: str) -> set[str]:
        """Ids of the documents whose title ``text`` names."""
        tokens = _WORD_OR_MARK_RE.findall(text)
        named: set[str] = set()
        for n in range(1, self._longest + 1):
            for i in range(len(tokens) - n + 1):
                hit = self._by_tokens.get(tuple(tokens[i : i + n]))
                if hit:
                    named.update(hit)
        return named

    def mentions(self, texts: Sequence[str]) -> dict[str, list[int]]:
        """Which of ``texts`` (chunk texts, in row order) name which titles.

        Returns:
            ``{document_id: [text row, ...]}`` (rows ascending) for each title named at least
            once.
        """
        found: dict[str, list[int]] = {}
        if not self._by_tokens:
            return found
        for row, text in enumerate(texts):
            for doc_id in self.find(text):
                found.setdefault(doc_id, []).append(row)
        return found


@lru_cache(maxsize=1 << 16)
def canonical(name: str) -> str:
    """Canonical merge key of an entity surface form: lower-case, folded spaces, no article.
    (Cached: names recur across chunks.)"""
    key = _SPACE_RE.sub(" ", name.strip().lower())
    key = _ARTICLE_RE.sub("", key)
    return key.strip(" .,'’\"-")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences (and lines) of ``text``, empty spans dropped."""
    spans = []
    start = 0
    for m in _SENT_RE.finditer(text):
        if m.start() > start:
            spans.append((start, m.start()))
        start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return [(s, e) for s, e in spans if text[s:e].strip()]


def bounded_sentences(text: str, max_chars: int, split: str = "regex") -> list[tuple[int, int]]:
    """:func:`split_sentences` (``split="splitter"``: :func:`graphstrata.sentences.sentence_spans`),
    with every span longer than ``max_chars`` cut into pieces.

    A long span is cut at the last whitespace at most ``max_chars`` characters after the
    piece's start (at exactly ``max_chars`` where there is none), so each piece holds at most
    ``max_chars`` characters. Spans that fit are returned unchanged.

    Args:
        text: the text to split.
        max_chars: longest piece, in characters (> 0).

    Returns:
        Character spans ``[(start, end), ...]`` in text order, blank pieces dropped.

    Raises:
        ValueError: ``max_chars`` ≤ 0.
    """
    if int(max_chars) <= 0:
        raise ValueError(f"max_chars must be > 0 characters, got {max_chars}")
    out: list[tuple[int, int]] = []
    for s, e in sentence_spans(text) if split == "splitter" else split_sentences(text):
        while e - s > max_chars:
            cut = s + max_chars
            space = max(text.rfind(" ", s + 1, cut + 1), text.rfind("\t", s + 1, cut + 1))
            if space > s:
                cut = space
            if text[s:cut].strip():
                out.append((s, cut))
            s = cut
            while s < e and text[s].isspace():
                s += 1
        if s < e and text[s:e].strip():
            out.append((s, e))
    return out


def capitalised_spans(sentence: str) -> list[str]:
    """Capitalised word runs of ``sentence`` that look like names.

    A run may contain lower-case connectors (``of``, ``de``, ``von`` …) between capitalised
    words. A single capitalised word is kept only when it is not the sentence's first word and
    not a common function word.
    """
    out = []
    for m in _CAP_SPAN_RE.finditer(sentence):
        span = _POSSESSIVE_RE.sub("", cut_long_cjk_runs(m.group(0)).strip(" .-"))  # cjk.py
        words = span.split()
        # strip trailing connectors picked up by the pattern
        while words and _CONNECT_RE.fullmatch(words[-1]):
            words.pop()
        while words and words[0].lower() in _CAP_STOP:
            words.pop(0)
        if not words:
            continue
        span = " ".join(words)
        if len(words) == 1:
            w = words[0]
            if w.lower() in _CAP_STOP or len(w) < 2:
                continue
            if m.start() == 0 and not w.isupper():
                continue  # sentence-initial capital: ambiguous
        out.append(span)
    return out


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
        sentence_split: ``"regex"`` (this module's sentence regex, the default) or
            ``"splitter"`` (:mod:`graphstrata.sentences`, what ``chunking="sentence"`` uses).

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
        return TfidfSpec.of(_tfidf_vectorizer(self.ngram_range, n_texts, self.min_df), "extraction", self.top_n)

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
        return _top_terms(matrix, tfidf.terms_array(), self.top_n)

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
        max_sents = self.max_description_sentences
        out: list[ChunkRecord] = []
        for chunk, terms in zip(chunks, tfidf_terms, strict=True):
            text = chunk.text
            term_heads = [_term_head(t) for t in terms]
            title = document_title((titles or {}).get(chunk.document_id)) if self.use_titles else None
            title_key = canonical(title) if title else ""
            # pass 1: the entities of each sentence piece
            sentences: list[tuple[str, list[str], dict[str, str]]] = []
            mentions: Counter = Counter()  # sentences of this chunk naming each entity
            for s, e in bounded_sentences(text, self.max_sentence_chars, getattr(self, "sentence_split", "regex")):
                sent = text[s:e].strip()
                found: dict[str, str] = {}
                for span in capitalised_spans(sent):
                    key = canonical(span)
                    if len(key) >= 2 and key not in _CAP_STOP:
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
                                words = set(_WORD_RE.findall(lower))
                            if not words.issuperset(plain):
                                continue
                        if other and not all(part in lower for part in other):
                            continue
                    if find is None:
                        find = _term_finder(sent)
                    match = find(term)
                    if match:
                        key = canonical(match)
                        if len(key) >= 2 and cut_long_cjk_runs(match) == match:
                            found.setdefault(key, match)
                if title_key:
                    found.setdefault(title_key, title)
                # drop keys contained in a longer key of the same sentence ("america" ⊂ "bank of america")
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
                sentences.append((sent, kept, found))
                mentions.update(kept)
            # the chunk's entities, best first: title, most sentences, first mention
            priority = {
                key: (key != title_key, -n, order)
                for order, (key, n) in enumerate(mentions.items())
            }
            allowed: set[str] | None = None
            if len(mentions) > self.max_entities_per_chunk:
                best = sorted(mentions, key=priority.__getitem__)
                allowed = set(best[: self.max_entities_per_chunk])
            # pass 2: record the (capped) entities and relations
            rec = ChunkRecord(chunk.id)
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
            out.append(rec)
        return out


def _tfidf_vectorizer(ngram_range: tuple[int, ...], n_texts: int, min_df: int):
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(
        ngram_range=tuple(ngram_range),
        stop_words="english",
        min_df=min_df if n_texts >= 20 else 1,
        max_df=0.5 if n_texts >= 20 else 1.0,
        sublinear_tf=True,
        token_pattern=r"(?u)\b[^\W\d_][\w\-]+\b",
    )


class FrozenTfidf:
    """A fitted TF-IDF model frozen at build time (issue 16: frozen statistics are versioned).

    Incremental inserts score new chunks against the vocabulary and idf of the last full
    build instead of refitting on the whole corpus; :meth:`~graphstrata.GraphStrata.rebuild`
    refits. Persisted in the index (``graphstrata.store``). Read-only once made.

    The vocabulary is kept as one UTF-8 buffer (terms joined by new lines, which no term
    holds) rather than one string object per term: the extraction model of a million chunks
    has ~20M terms, 1.4 GB as a tuple of strings against ~0.3 GB so; :attr:`terms` decodes it.

    Args / attributes:
        kind: ``"extraction"`` (1–3-gram terms of :class:`StatisticalExtractor`) or
            ``"summary"`` (the unigram model of extractive community summaries).
        params: the vectorizer's parameters (``ngram_range``, ``min_df``, ``max_df``,
            ``token_pattern``), enough to rebuild it.
        terms: the vocabulary, in column order (a tuple of str, decoded on each read).
        idf: float64 ``(len(terms),)`` inverse document frequencies.
    """

    __slots__ = ("kind", "params", "idf", "_blob", "_size", "_plain", "_vectorizer", "_terms", "__weakref__")

    def __init__(self, kind: str, params: dict[str, Any], terms: Sequence[str], idf: np.ndarray) -> None:
        self.kind = kind
        self.params = params
        self.idf = idf
        self._size = len(terms)
        self._vectorizer: Any = None
        self._terms: np.ndarray | None = None
        if any("\n" in t for t in terms):  # not from a vectorizer: keep the strings as they are
            self._plain: tuple[str, ...] | None = tuple(terms)
            self._blob = b""
        else:
            self._plain = None
            self._blob = "\n".join(terms).encode("utf-8")

    @property
    def terms(self) -> tuple[str, ...]:
        """The vocabulary, in column order."""
        if self._plain is not None:
            return self._plain
        if self._size == 0:
            return ()
        return tuple(self._blob.decode("utf-8").split("\n"))

    def __len__(self) -> int:
        """Number of terms."""
        return self._size

    def __getstate__(self) -> tuple:
        return (self.kind, self.params, self.idf, self._blob, self._size, self._plain)

    def __setstate__(self, state: tuple) -> None:
        self.kind, self.params, self.idf, self._blob, self._size, self._plain = state
        self._vectorizer = None
        self._terms = None

    def __repr__(self) -> str:
        return f"FrozenTfidf(kind={self.kind!r}, terms={self._size})"

    @classmethod
    def from_vectorizer(cls, vec: Any, kind: str) -> FrozenTfidf:
        """Freeze a fitted scikit-learn ``TfidfVectorizer``."""
        p = vec.get_params()
        params = {
            "ngram_range": list(p["ngram_range"]),
            "min_df": p["min_df"],
            "max_df": p["max_df"],
            "token_pattern": p["token_pattern"],
            "stop_words": p["stop_words"],
            "sublinear_tf": p["sublinear_tf"],
        }
        terms = tuple(str(t) for t in vec.get_feature_names_out())
        return cls(kind, params, terms, np.asarray(vec.idf_, dtype=np.float64))

    def vectorizer(self) -> Any:
        """A scikit-learn ``TfidfVectorizer`` with this vocabulary and idf (``transform`` only;
        made once, then kept with the model)."""
        cached = self._vectorizer
        if cached is not None:
            return cached
        from sklearn.feature_extraction.text import TfidfVectorizer

        p = dict(self.params)
        p["ngram_range"] = tuple(p["ngram_range"])
        vec = TfidfVectorizer(**p)
        vec.vocabulary_ = {t: i for i, t in enumerate(self.terms)}
        vec.idf_ = self.idf
        self._vectorizer = vec
        return vec

    def terms_array(self) -> np.ndarray:
        """The vocabulary as a numpy object array (column order; made once, then kept)."""
        cached = self._terms
        if cached is None:
            cached = self._terms = np.asarray(self.terms, dtype=object)
        return cached

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (see :meth:`from_dict`)."""
        return {"kind": self.kind, "params": self.params, "terms": list(self.terms), "idf": self.idf.tolist()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FrozenTfidf:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: missing keys or terms / idf of different lengths.
        """
        try:
            terms, idf = tuple(d["terms"]), np.asarray(d["idf"], dtype=np.float64)
            out = cls(str(d["kind"]), dict(d["params"]), terms, idf)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"invalid frozen TF-IDF statistics: {exc}") from exc
        if len(terms) != len(idf) or not np.isfinite(idf).all():
            raise ValueError("invalid frozen TF-IDF statistics: terms and idf do not match")
        return out


# -- TF-IDF fit in shards ------------------------------------------------------------------
# scikit-learn's ``TfidfVectorizer.fit_transform`` keeps every n-gram occurrence of the corpus
# as a Python int in one list and every distinct n-gram in one dict: about 10 GB and an hour of
# one core for a million chunks. The same model (vocabulary, idf, and the very matrix the top
# terms are read from) is computed here from shards of texts, each analysed on its own
# (in worker processes when the runner has them), with numpy arrays for the occurrences.

TFIDF_SHARD = 2_000
"""Texts per shard of :func:`fit_tfidf` (one worker task)."""


@dataclass(frozen=True)
class TfidfSpec:
    """What one TF-IDF fit needs: the vectorizer's parameters (scikit-learn
    ``TfidfVectorizer(**params)``, ``ngram_range`` as a list), the model's ``kind``
    (:class:`FrozenTfidf`) and ``top_n``: top terms wanted per text (0: the model only)."""

    params: dict[str, Any]
    kind: str
    top_n: int = 0

    @classmethod
    def of(cls, vectorizer: Any, kind: str, top_n: int = 0) -> TfidfSpec:
        """The spec of an unfitted scikit-learn ``TfidfVectorizer`` (its ``get_params``)."""
        p = dict(vectorizer.get_params())
        p["ngram_range"] = list(p["ngram_range"])
        return cls(p, kind, int(top_n))

    def vectorizer(self) -> Any:
        """A fresh scikit-learn ``TfidfVectorizer`` with these parameters."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        p = dict(self.params)
        p["ngram_range"] = tuple(p["ngram_range"])
        return TfidfVectorizer(**p)


def analyse_shard(specs: Sequence[TfidfSpec], texts: Sequence[str]) -> list[tuple]:
    """Count the features of ``texts`` for each spec (the worker half of :func:`fit_tfidf`).

    Each text's features are those of scikit-learn's analyzer for the spec (``build_analyzer``:
    lower-casing, token pattern, stop words, n-grams), counted per text in order of first
    appearance in the text, as ``CountVectorizer._count_vocab`` counts them.

    Returns:
        Per spec ``(terms, ids, counts, indptr)``: the shard's distinct features in order of
        first appearance (``list[str]``), and per text ``t`` the local ids
        ``ids[indptr[t]:indptr[t + 1]]`` (int32, first appearance in the text first) with their
        counts (int32); ``indptr`` int64 ``(len(texts) + 1,)``.
    """
    from array import array

    out = []
    for spec in specs:
        analyse = spec.vectorizer().build_analyzer()
        local: dict[str, int] = {}
        ids = array("i")
        counts = array("i")
        indptr = np.zeros(len(texts) + 1, dtype=np.int64)
        for row, text in enumerate(texts):
            seen: dict[int, int] = {}
            for feature in analyse(text):
                i = local.get(feature)
                if i is None:
                    i = local[feature] = len(local)
                seen[i] = seen.get(i, 0) + 1
            ids.extend(seen.keys())
            counts.extend(seen.values())
            indptr[row + 1] = len(ids)
        out.append((list(local), np.frombuffer(ids, dtype=np.int32), np.frombuffer(counts, dtype=np.int32), indptr))
    return out


class _TfidfCounts:
    """The driver half of :func:`fit_tfidf`: shards' features numbered in corpus order of
    first appearance (the order ``CountVectorizer`` numbers them before sorting by name)."""

    def __init__(self, spec: TfidfSpec) -> None:
        self.spec = spec
        self.index: dict[str, int] = {}
        self.shards: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (indptr, gids, counts)
        self.n_texts = 0

    def add(self, shard: tuple) -> None:
        terms, ids, counts, indptr = shard
        index = self.index
        gmap = np.fromiter((index.setdefault(t, len(index)) for t in terms), dtype=np.int64, count=len(terms))
        self.shards.append((indptr, gmap[ids] if len(ids) else np.zeros(0, np.int64), counts))
        self.n_texts += len(indptr) - 1

    def finish(self) -> tuple[FrozenTfidf | None, list[list[str]]]:
        """The fitted model and each text's top terms (see :func:`fit_tfidf`)."""
        n = self.n_texts
        none: tuple[FrozenTfidf | None, list[list[str]]] = (None, [[] for _ in range(n)] if self.spec.top_n else [])
        n_features = len(self.index)
        if n_features == 0:  # "empty vocabulary"
            return none
        df = np.zeros(n_features, dtype=np.int64)
        for _indptr, gids, _counts in self.shards:
            df += np.bincount(gids, minlength=n_features)
        # CountVectorizer.fit_transform: min_df / max_df as document counts (ints as they are)
        p = self.spec.params
        max_df, min_df = p["max_df"], p["min_df"]
        high = max_df if isinstance(max_df, (int, np.integer)) else max_df * n
        low = min_df if isinstance(min_df, (int, np.integer)) else min_df * n
        if high < low:  # "max_df corresponds to < documents than min_df"
            return none
        kept = np.flatnonzero((df <= high) & (df >= low))
        if len(kept) == 0:  # "After pruning, no terms remain"
            return none
        names = list(self.index)  # feature number -> name
        self.index = {}
        kept_names = [names[g] for g in kept.tolist()]
        del names
        order = sorted(range(len(kept_names)), key=kept_names.__getitem__)  # columns by name
        terms = tuple(kept_names[i] for i in order)
        del kept_names
        column = np.full(n_features, -1, dtype=np.int64)
        column[kept[order]] = np.arange(len(kept), dtype=np.int64)
        # TfidfTransformer.fit, smooth idf, operation for operation
        dfk = df[kept[order]].astype(np.float64)
        dfk += 1.0
        idf = np.full_like(dfk, fill_value=n + 1, dtype=np.float64)
        idf /= dfk
        np.log(idf, out=idf)
        idf += 1.0
        model = FrozenTfidf(self.spec.kind, _frozen_params(self.spec.params), terms, idf)
        if not self.spec.top_n:
            self.shards = []
            return model, []
        vocab = np.asarray(terms, dtype=object)  # the model's strings, shared by every text's terms
        del terms
        top: list[list[str]] = []
        while self.shards:
            indptr, gids, counts = self.shards.pop(0)
            top.extend(_top_terms(_shard_matrix(indptr, gids, counts, column, idf), vocab, self.spec.top_n))
        return model, top


def _frozen_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters :meth:`FrozenTfidf.from_vectorizer` keeps."""
    return {
        "ngram_range": list(params["ngram_range"]),
        "min_df": params["min_df"],
        "max_df": params["max_df"],
        "token_pattern": params["token_pattern"],
        "stop_words": params["stop_words"],
        "sublinear_tf": params["sublinear_tf"],
    }


def _shard_matrix(indptr, gids, counts, column, idf):
    """The rows of one shard of ``TfidfVectorizer.fit_transform``'s matrix, bit for bit: each
    row's entries in order of the features' first appearance in the corpus (the order
    ``_count_vocab`` sorts them in; pruning and renumbering by name keep it), counts as float64,
    then sublinear tf, idf and the l2 norm as ``TfidfTransformer.transform`` applies them."""
    import scipy.sparse as sp
    from sklearn.preprocessing import normalize

    n_rows = len(indptr) - 1
    row = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(indptr))
    order = np.lexsort((gids, row))
    cols = column[gids[order]]
    keep = cols >= 0
    row, cols = row[order][keep], cols[keep]
    data = counts[order][keep].astype(np.float64)
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=n_rows), out=ptr[1:])
    idx_type = np.int32 if len(idf) < 2**31 and len(data) < 2**31 else np.int64
    matrix = sp.csr_array((data, cols.astype(idx_type), ptr.astype(idx_type)), shape=(n_rows, len(idf)))
    np.log(matrix.data, out=matrix.data)
    matrix.data += 1.0
    matrix.data *= idf[matrix.indices]
    return normalize(matrix, norm="l2", copy=False)


def _top_terms(matrix: Any, vocab: np.ndarray, top_n: int) -> list[list[str]]:
    """Top-``top_n`` terms per row of a TF-IDF matrix (``vocab``: object array of the column
    names), best first (ties: the matrix's stored order): one stable sort of every entry by
    (row, -score) instead of one per row."""
    matrix = matrix.tocsr()
    n_rows = matrix.shape[0]
    indptr = np.asarray(matrix.indptr, dtype=np.int64)
    sizes = np.diff(indptr)
    row = np.repeat(np.arange(n_rows, dtype=np.int64), sizes)
    order = np.lexsort((-np.asarray(matrix.data), row))  # stable: ties keep stored order
    rank = np.arange(len(order), dtype=np.int64) - indptr[row[order]]
    take = order[rank < top_n]
    cols = np.asarray(matrix.indices)[take]
    words = vocab[cols].tolist()
    out: list[list[str]] = []
    start = 0
    for size in np.minimum(sizes, top_n).tolist():
        out.append(words[start : start + size])
        start += size
    return out


def fit_tfidf(
    specs: Sequence[TfidfSpec], texts: Sequence[str], runner: Any = None, shard: int = TFIDF_SHARD
) -> list[tuple[FrozenTfidf | None, list[list[str]]]]:
    """Fit TF-IDF models on ``texts`` in shards: what ``TfidfVectorizer(**spec.params)
    .fit_transform(texts)`` gives, with far less memory, and in parallel on a runner with a
    ``map`` (:class:`graphstrata.runner.ProcessRunner`).

    Every shard of ``shard`` texts is analysed on its own (:func:`analyse_shard`, one pass per
    shard for all ``specs``); the driver numbers the features in corpus order of first
    appearance, counts document frequencies, prunes by ``min_df`` / ``max_df``, sorts the kept
    ones by name and computes the smoothed idf as scikit-learn does; the top terms come from
    the same float64 matrix ``fit_transform`` returns (same entry order, same operations), so
    the model and the top terms are scikit-learn's, tie for tie.

    Args:
        specs: the models to fit (:class:`TfidfSpec`).
        texts: the corpus (chunk texts, in row order).
        runner: where the shards are analysed: a runner with ``map(fn, argument_tuples)``
            (ordered results), else this process.
        shard: texts per shard (> 0).

    Returns:
        Per spec ``(model, top_terms)``: the :class:`FrozenTfidf` (``None`` when the texts have
        no vocabulary left after pruning, where scikit-learn raises), and each text's top
        ``spec.top_n`` terms, best first (``[]`` per text without a model; an empty list when
        ``top_n`` is 0).

    Raises:
        ValueError: ``shard`` ≤ 0.
    """
    if int(shard) <= 0:
        raise ValueError(f"shard must be > 0 texts, got {shard}")
    specs = list(specs)
    counts = [_TfidfCounts(spec) for spec in specs]
    tasks = [(specs, list(texts[i : i + shard])) for i in range(0, len(texts), shard)]
    mapper = getattr(runner, "map", None) if runner is not None else None
    results = mapper(analyse_shard, tasks) if mapper is not None and len(tasks) > 1 else (
        analyse_shard(*task) for task in tasks
    )
    for per_spec in results:
        for acc, part in zip(counts, per_spec, strict=True):
            acc.add(part)
    return [acc.finish() for acc in counts]


@dataclass
class ChunkRecord:
    """The entity and relation mentions of one chunk (:meth:`StatisticalExtractor.chunk_records`).

    Attributes:
        chunk_id: the chunk.
        entities: ``{entity_key: (surface_counts, [mentions], sentences)}``: surface forms
            with their counts (first-seen order), the number of sentence pieces naming the
            entity, and its first distinct sentences (at most ``max_description_sentences``).
        relations: ``{(a, b): ([mentions], sentences)}`` with ``a < b``.
    """

    chunk_id: str
    entities: dict[str, tuple[dict[str, int], list[int], list[str]]] = field(default_factory=dict)
    relations: dict[tuple[str, str], tuple[list[int], list[str]]] = field(default_factory=dict)

    def to_json(self) -> str:
        """Compact JSON (persisted per chunk)."""
        return json.dumps(
            [
                [[k, s, c[0], t] for k, (s, c, t) in self.entities.items()],
                [[a, b, c[0], t] for (a, b), (c, t) in self.relations.items()],
            ],
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, chunk_id: str, text: str) -> ChunkRecord:
        """Inverse of :meth:`to_json`; ``ValueError`` if malformed."""
        try:
            ents, rels = json.loads(text)
            rec = cls(chunk_id)
            for k, s, c, t in ents:
                rec.entities[str(k)] = ({str(x): int(n) for x, n in s.items()}, [int(c)], [str(x) for x in t])
            for a, b, c, t in rels:
                rec.relations[(str(a), str(b))] = ([int(c)], [str(x) for x in t])
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
        return (self.chunk_id, self.entities, self.relations) == (other.chunk_id, other.entities, other.relations)

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

    __slots__ = ("max_sentences", "entities", "relations")

    def __init__(self, max_description_sentences: int = 4) -> None:
        self.max_sentences = int(max_description_sentences)
        # key -> [surface counts, mentions, chunk ids, sentences]
        self.entities: dict[str, list[Any]] = {}
        # (a, b) -> [mentions, chunk ids, sentences]
        self.relations: dict[tuple[str, str], list[Any]] = {}

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

    def update(self, later: RecordMerge) -> None:
        """Merge ``later``, the merge of the records that follow this one's in corpus order
        (its lists are taken over, not copied: do not use ``later`` afterwards)."""
        limit = self.max_sentences
        ents = self.entities
        for key, f in later.entities.items():
            e = ents.get(key)
            if e is None:
                ents[key] = f
                continue
            merged = e[0]
            for form, n in f[0].items():
                merged[form] = merged.get(form, 0) + n
            e[1] += f[1]
            e[2].extend(f[2])
            if len(e[3]) < limit:
                _add_distinct(e[3], f[3], limit)
        rels = self.relations
        for pair, f in later.relations.items():
            r = rels.get(pair)
            if r is None:
                rels[pair] = f
                continue
            r[0] += f[0]
            r[1].extend(f[1])
            if len(r[2]) < limit:
                _add_distinct(r[2], f[2], limit)

    def __getstate__(self) -> tuple:
        return (self.max_sentences, self.entities, self.relations)

    def __setstate__(self, state: tuple) -> None:
        self.max_sentences, self.entities, self.relations = state

    def result(self) -> tuple[list[Entity], list[Relation]]:
        """``(entities, relations)`` as :func:`merge_records` returns them (the merge is
        emptied: its lists become the records'). Entity ids and relation endpoints are
        interned (``sys.intern``): a relation names its entities with their id strings
        instead of copies that came from other shards."""
        import sys

        ents, rels = self.entities, self.relations
        self.entities, self.relations = {}, {}
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
                )
            )
        return entities, relations


def _second(item: tuple[Any, Any]) -> Any:
    return item[1]


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
