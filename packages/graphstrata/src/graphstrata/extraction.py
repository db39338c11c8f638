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
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np

from .types import Chunk, Entity, Relation

_SENT_RE = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_CAP_WORD = r"(?:[A-Z][\w\-.&]*[\w]|[A-Z])"
_CONNECT = r"(?:of|the|de|del|la|le|von|van|der|du|da|di|&)"
_CAP_SPAN_RE = re.compile(
    rf"\b{_CAP_WORD}(?:\s+(?:{_CONNECT}\s+)*{_CAP_WORD})*"
)
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


def canonical(name: str) -> str:
    """Canonical merge key of an entity surface form: lower-case, folded spaces, no article."""
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


def capitalised_spans(sentence: str) -> list[str]:
    """Capitalised word runs of ``sentence`` that look like names.

    A run may contain lower-case connectors (``of``, ``de``, ``von`` …) between capitalised
    words. A single capitalised word is kept only when it is not the sentence's first word and
    not a common function word.
    """
    out = []
    for m in _CAP_SPAN_RE.finditer(sentence):
        span = re.sub(r"['’]s$", "", m.group(0).strip(" .-"))
        words = span.split()
        # strip trailing connectors picked up by the pattern
        while words and re.fullmatch(_CONNECT, words[-1]):
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

    The extractor is fitted on the chunks passed to :meth:`extract`, so the same corpus always
    gives the same records (deterministic, no randomness).
    """

    def __init__(
        self,
        top_n: int = 8,
        ngram_range: tuple[int, int] = (1, 3),
        min_df: int = 2,
        max_description_sentences: int = 4,
        use_titles: bool = True,
    ) -> None:
        if top_n < 0:
            raise ValueError(f"top_n must be >= 0, got {top_n}")
        self.top_n = int(top_n)
        self.ngram_range = tuple(ngram_range)
        self.min_df = int(min_df)
        self.max_description_sentences = int(max_description_sentences)
        self.use_titles = bool(use_titles)

    # -- TF-IDF ---------------------------------------------------------------------------
    def _tfidf_terms(self, texts: Sequence[str]) -> list[list[str]]:
        if self.top_n == 0 or not texts:
            return [[] for _ in texts]
        from sklearn.feature_extraction.text import TfidfVectorizer

        vec = TfidfVectorizer(
            ngram_range=self.ngram_range,
            stop_words="english",
            min_df=self.min_df if len(texts) >= 20 else 1,
            max_df=0.5 if len(texts) >= 20 else 1.0,
            sublinear_tf=True,
            token_pattern=r"(?u)\b[^\W\d_][\w\-]+\b",
        )
        try:
            matrix = vec.fit_transform(texts)
        except ValueError:  # empty vocabulary
            return [[] for _ in texts]
        vocab = np.asarray(vec.get_feature_names_out())
        out: list[list[str]] = []
        matrix = matrix.tocsr()
        for row in range(matrix.shape[0]):
            start, end = matrix.indptr[row], matrix.indptr[row + 1]
            if start == end:
                out.append([])
                continue
            data = matrix.data[start:end]
            idx = matrix.indices[start:end]
            order = np.argsort(-data, kind="stable")[: self.top_n]
            out.append([str(vocab[idx[i]]) for i in order])
        return out

    # -- main -----------------------------------------------------------------------------
    def extract(
        self, chunks: Sequence[Chunk], titles: dict[str, str] | None = None
    ) -> tuple[list[Entity], list[Relation]]:
        """Extract and merge entities and relations from ``chunks``.

        Args:
            chunks: the corpus chunks (the TF-IDF model is fitted on them).
            titles: optional ``{document_id: title}``; each title becomes an entity mentioned
                in every sentence of its document's chunks.

        Returns:
            ``(entities, relations)``, entities sorted by id, relations by ``(source, target)``.
        """
        tfidf_terms = self._tfidf_terms([c.text for c in chunks])
        surface: dict[str, Counter] = defaultdict(Counter)
        ent_chunks: dict[str, dict[str, None]] = defaultdict(dict)
        ent_sents: dict[str, list[str]] = defaultdict(list)
        ent_count: Counter = Counter()
        rel_count: Counter = Counter()
        rel_chunks: dict[tuple[str, str], dict[str, None]] = defaultdict(dict)
        rel_sents: dict[tuple[str, str], list[str]] = defaultdict(list)
        max_sents = self.max_description_sentences

        for chunk, terms in zip(chunks, tfidf_terms, strict=True):
            text = chunk.text
            term_res = [
                (t, re.compile(r"\b" + r"[\s\-]+".join(map(re.escape, t.split())) + r"\b", re.I))
                for t in terms
            ]
            title = document_title((titles or {}).get(chunk.document_id)) if self.use_titles else None
            title_key = canonical(title) if title else ""
            for s, e in split_sentences(text):
                sent = text[s:e].strip()
                found: dict[str, str] = {}
                for span in capitalised_spans(sent):
                    key = canonical(span)
                    if len(key) >= 2 and key not in _CAP_STOP:
                        found.setdefault(key, span)
                for _term, pattern in term_res:
                    m = pattern.search(sent)
                    if m:
                        key = canonical(m.group(0))
                        if len(key) >= 2:
                            found.setdefault(key, m.group(0))
                if title_key:
                    found.setdefault(title_key, title)
                # drop keys contained in a longer key of the same sentence ("america" ⊂ "bank of america")
                keys = sorted(found, key=len, reverse=True)
                kept: list[str] = []
                for key in keys:
                    if key != title_key and any(
                        f" {key} " in f" {longer} " for longer in kept
                    ):
                        continue
                    kept.append(key)
                for key in kept:
                    surface[key][found[key]] += 1
                    ent_count[key] += 1
                    ent_chunks[key][chunk.id] = None
                    if len(ent_sents[key]) < max_sents and sent not in ent_sents[key]:
                        ent_sents[key].append(sent)
                for a, b in combinations(sorted(kept), 2):
                    pair = (a, b)
                    rel_count[pair] += 1
                    rel_chunks[pair][chunk.id] = None
                    if len(rel_sents[pair]) < max_sents and sent not in rel_sents[pair]:
                        rel_sents[pair].append(sent)

        entities = [
            Entity(
                id=key,
                name=surface[key].most_common(1)[0][0],
                description=" ".join(ent_sents[key]),
                chunk_ids=list(ent_chunks[key]),
                weight=float(ent_count[key]),
            )
            for key in sorted(surface)
        ]
        relations = [
            Relation(
                source=a,
                target=b,
                description=" ".join(rel_sents[(a, b)]),
                weight=float(rel_count[(a, b)]),
                chunk_ids=list(rel_chunks[(a, b)]),
            )
            for (a, b) in sorted(rel_count)
        ]
        return entities, relations
