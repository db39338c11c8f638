"""LLM extraction: chunks → merged entity and relation records, behind the
:class:`~graphstrata.llm.client.LLMClient` (cache, retries, bounded concurrency, ledger).

* :class:`LLMExtractor`: LightRAG's joint entity + relationship extraction with gleaning and
  summarise-on-merge (``seed-lightrag.md`` §1.4–1.7; HiRAG ``seed-hirag.md`` §2.2–2.4 uses
  the same records and merge).
* :class:`AgragLLMExtractor`: AGRAG's statistical (TF-IDF) entities plus LLM triples as
  relations (``seed-agrag.md`` §1.3–1.5).

Both have :meth:`StatisticalExtractor.extract`'s signature and output, so the build can swap
them in. Entity ids are :func:`graphstrata.extraction.canonical` keys (lower-cased,
whitespace-folded, leading article dropped), the same keys the statistical extractor uses.

The parsers (:func:`parse_extraction`, :func:`parse_triples`) are forgiving: small local
models break delimiters, drop fields, answer in JSON, wrap records in chatter, markdown
bullets or quotes. They take what is valid, count what they skip, and never raise.

Stages (ledger names): ``"extract"``, ``"extract:gleaning"`` (gleaning passes and the
continue checks between them), ``"extract:summaries"``, ``"extract:triples"``.

Note: :mod:`graphstrata.extraction` re-exports the two extractors, so this module imports it
lazily (:func:`_extraction`), keeping either import order free of a cycle.
"""

from __future__ import annotations

import html
import json
import operator
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from ..types import Chunk, Entity, Relation
from .base import LLMRequest, estimate_tokens
from .client import LLMClient
from .parsing import as_float, as_text, extract_json
from .prompts import agrag as agrag_prompts
from .prompts import lightrag_extract as lr_prompts
from .prompts.lightrag_extract import DEFAULT_ENTITY_TYPES

if TYPE_CHECKING:
    from ..extraction import StatisticalExtractor

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
#: relationship strength range (the prompt asks for 1–10) and the value of a missing strength
MIN_STRENGTH, MAX_STRENGTH, DEFAULT_STRENGTH = 1.0, 10.0, 1.0
#: joins the distinct descriptions of a merged record (a parsed description holds no newline)
DESCRIPTION_SEPARATOR = "\n"

__all__ = [
    "DEFAULT_ENTITY_TYPES",
    "STAGE_EXTRACT",
    "STAGE_GLEANING",
    "STAGE_SUMMARIES",
    "STAGE_TRIPLES",
    "AgragLLMExtractor",
    "EntityRecord",
    "LLMExtractor",
    "LLMOutputWarning",
    "ParsedRecords",
    "ParsedTriples",
    "RelationRecord",
    "parse_extraction",
    "parse_triples",
]


class LLMOutputWarning(UserWarning):
    """Records of the LLM's output were unreadable and skipped (at most one warning per
    ``extract()`` call, with the count; per-stage counts are in ``client.ledger``)."""


def _extraction() -> ModuleType:
    from .. import extraction  # lazy: graphstrata.extraction re-exports this module

    return extraction


def _key(name: str) -> str:
    """Canonical entity id of a surface form (:func:`graphstrata.extraction.canonical`)."""
    return _extraction().canonical(name)


# ---------------------------------------------------------------------------------------------
# records
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EntityRecord:
    """One parsed entity record: ``name`` as written, ``type`` lower-case (``""`` when
    missing), ``description`` (``""`` when missing)."""

    name: str
    type: str = ""
    description: str = ""


@dataclass(frozen=True)
class RelationRecord:
    """One parsed relationship record: endpoint names as written, ``keywords``
    (comma-separated), ``strength`` in [:data:`MIN_STRENGTH`, :data:`MAX_STRENGTH`]."""

    source: str
    target: str
    description: str = ""
    keywords: str = ""
    strength: float = DEFAULT_STRENGTH


@dataclass
class ParsedRecords:
    """What :func:`parse_extraction` read from one answer, and how many records it skipped."""

    entities: list[EntityRecord] = field(default_factory=list)
    relations: list[RelationRecord] = field(default_factory=list)
    skipped: int = 0

    def __bool__(self) -> bool:
        return bool(self.entities or self.relations)


@dataclass
class ParsedTriples:
    """What :func:`parse_triples` read: ``(subject, relation, object)`` triples, and how many
    triples it skipped."""

    triples: list[tuple[str, str, str]] = field(default_factory=list)
    skipped: int = 0

    def __bool__(self) -> bool:
        return bool(self.triples)


# ---------------------------------------------------------------------------------------------
# forgiving parsing
# ---------------------------------------------------------------------------------------------
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_SPACE_RE = re.compile(r"\s+")
_WRAPPERS = (("**", "**"), ("__", "__"), ('"', '"'), ("'", "'"), ("`", "`"), ("\u201c", "\u201d"), ("\u2018", "\u2019"))
_COMPLETE_RE = re.compile(
    r"(?:<\s*\|\s*>\s*)?(?:\[\s*COMPLETE\s*\]|<\s*\|?\s*COMPLETE\s*\|?\s*>|\{completion_delimiter\})(?:\s*<\s*\|\s*>)?",
    re.I,
)
_KIND_WORDS = r"(?:entity|entities|relationship|relationships|relation|relations|content_keywords)"
_RECORD_SPLIT_RE = re.compile(
    rf"#{{2,}}|\*{{3,}}|\{{record_delimiter\}}|\n|(?<=\))\s*(?=\(\s*[\"']?{_KIND_WORDS}\b)", re.I
)
_FIELD_SEP_RE = re.compile(r"\s*(?:<\s*\|+\s*>|<\s*\||\|\s*>|\{tuple_delimiter\}|\|+)\s*", re.I)
_BULLET_RE = re.compile(r"^\s*(?:[-*\u2022+>]|\d{1,3}[.)]|#+)(?:\s+|(?=[(\[\"']))")
_JSON_OPEN_RE = re.compile(r"[\[{]")
_NUMBER_RE = re.compile(r"(?:(?:strength|score|weight)\s*[:=]\s*)?[-+]?\d+(?:\.\d+)?(?:\s*/\s*10)?", re.I)
_KINDS = {
    "entity": "entity",
    "entities": "entity",
    "node": "entity",
    "relationship": "relationship",
    "relationships": "relationship",
    "relation": "relationship",
    "relations": "relationship",
    "edge": "relationship",
    "content_keywords": "ignore",
    "content_keyword": "ignore",
}
_LIST_KINDS = {
    "entities": "entity",
    "nodes": "entity",
    "relationships": "relationship",
    "relations": "relationship",
    "edges": "relationship",
}
_NAME_KEYS = ("entity_name", "name", "entity", "title", "id")
_TYPE_KEYS = ("entity_type", "type", "category", "label")
_DESC_KEYS = ("entity_description", "relationship_description", "description", "desc", "summary")
_SOURCE_KEYS = ("source_entity", "source", "src", "head", "from", "subject")
_TARGET_KEYS = ("target_entity", "target", "tgt", "tail", "to", "object")
_KEYWORD_KEYS = ("relationship_keywords", "keywords", "keyword", "labels")
_STRENGTH_KEYS = ("relationship_strength", "strength", "weight", "score")
_PREDICATE_KEYS = ("relation", "predicate", "relationship", "rel", "p")
_TRIPLE_LIST_KEYS = ("triples", "triplets", "facts", "relations")


def _clean(value: Any) -> str:
    """Field text: HTML entities decoded, control characters and runs of spaces folded,
    wrapping quotes / backticks / markdown emphasis removed (also a lone quote at one end)."""
    text = _SPACE_RE.sub(" ", _CONTROL_RE.sub(" ", html.unescape(as_text(value)))).strip()
    changed = True
    while changed and text:
        changed = False
        for left, right in _WRAPPERS:
            inner = text[len(left) : -len(right)]
            if len(text) > len(left) + len(right) and text.startswith(left) and text.endswith(right):
                if left not in inner and right not in inner:
                    text, changed = inner.strip(), True
        for q in "\"`":
            if text.count(q) == 1 and (text.startswith(q) or text.endswith(q)):
                text, changed = text.strip(q).strip(), True
    return text


def _kind(field0: str) -> tuple[str | None, str | None]:
    """``(kind, name)`` of a record's first field: kind ``"entity"``, ``"relationship"``,
    ``"ignore"`` or ``None``; ``name`` when the field reads ``entity: NAME``."""
    text = _clean(field0.strip().strip("()[]{} "))
    name = None
    head, sep, tail = text.partition(":")
    if sep and re.fullmatch(r"[A-Za-z_ ]+", head) and _KINDS.get(head.strip().lower().replace(" ", "_")):
        text, name = head, _clean(tail)
    return _KINDS.get(_clean(text).lower().replace(" ", "_")), name


def _fields(piece: str) -> list[str]:
    """The raw fields of one record candidate (bullets and the enclosing brackets removed).

    Fields are separated by ``<|>`` or a near miss (``<|``, ``|>``, ``< | >``, ``|``); a
    candidate without separators that reads as a bracketed literal list
    (``("entity", "Alice", ...)``) gives that list's items."""
    piece = _BULLET_RE.sub("", piece.strip()).strip().rstrip(",;").strip()
    opened = piece.startswith(("(", "["))
    fields = _FIELD_SEP_RE.split(piece)
    if len(fields) == 1 and opened:
        inner = piece[1:-1] if piece.endswith((")", "]")) else piece[1:]
        items = extract_json("[" + inner + "]", want=list)
        if items and len(items) > 1 and all(isinstance(x, (str, int, float)) for x in items):
            return [as_text(x) for x in items]
    if opened and len(fields) > 1:
        fields[-1] = re.sub(r"[)\]]\s*$", "", fields[-1].rstrip())
    return fields


def _strength(value: Any) -> float:
    """A relationship strength: :func:`as_float` (default :data:`DEFAULT_STRENGTH`), clipped to
    [:data:`MIN_STRENGTH`, :data:`MAX_STRENGTH`]."""
    x = as_float(value, DEFAULT_STRENGTH)
    return min(MAX_STRENGTH, max(MIN_STRENGTH, x if x is not None else DEFAULT_STRENGTH))


def _entity(fields: Sequence[str]) -> EntityRecord | None:
    name = _clean(fields[0]) if fields else ""
    if not name:
        return None
    etype = _clean(fields[1]).strip("[]<>").lower() if len(fields) > 1 else ""
    description = "; ".join(c for c in (_clean(f) for f in fields[2:]) if c)
    if not description and len(etype.split()) > 3:  # the type is missing, this is the description
        etype, description = "", _clean(fields[1])
    return EntityRecord(name, etype, description)


def _relation(fields: Sequence[str]) -> RelationRecord | None:
    if len(fields) < 2:
        return None
    source, target = _clean(fields[0]), _clean(fields[1])
    if not source or not target:
        return None
    rest = [_clean(f) for f in fields[2:]]
    numeric = [i for i, f in enumerate(rest) if _NUMBER_RE.fullmatch(f)]
    if numeric:  # the last number is the strength, wherever it stands
        slot: int | None = numeric[-1]
    else:  # DESCRIPTION<|>KEYWORDS<|>"high": the strength slot holds no number
        slot = len(rest) - 1 if len(rest) >= 3 else None
    strength = _strength(rest.pop(slot)) if slot is not None else DEFAULT_STRENGTH
    keywords = rest.pop() if len(rest) >= 2 else ""  # DESCRIPTION<|>KEYWORDS; HiRAG has no keywords
    return RelationRecord(source, target, "; ".join(r for r in rest if r), keywords, strength)


def _parse_tuples(text: str) -> ParsedRecords:
    out = ParsedRecords()
    for piece in _RECORD_SPLIT_RE.split(_COMPLETE_RE.sub("\n", text)):
        if not piece.strip():
            continue
        fields = _fields(piece)
        kind, name = _kind(fields[0])
        if kind == "ignore":
            continue
        rest = ([name] if name else []) + fields[1:]
        record = _entity(rest) if kind == "entity" else _relation(rest) if kind == "relationship" else None
        if isinstance(record, EntityRecord):
            out.entities.append(record)
        elif isinstance(record, RelationRecord):
            out.relations.append(record)
        elif kind is not None or len(fields) > 1:  # looked like a record; chatter is not counted
            out.skipped += 1
    return out


def _strict_values(text: str) -> list[Any]:
    """Every top-level JSON object or array in ``text`` that parses strictly, left to right; one
    that does not close (a truncated answer) gives way to the complete values inside it."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    pos = 0
    while (m := _JSON_OPEN_RE.search(text, pos)) is not None:
        try:
            value, pos = decoder.raw_decode(text, m.start())
        except ValueError:
            pos = m.start() + 1
            continue
        out.append(value)
    return out


_Read = TypeVar("_Read", "ParsedRecords", "ParsedTriples")


def _read_json(text: str, read: Callable[[list[Any]], _Read]) -> _Read:
    """``read(values)`` of the first reading of the JSON in ``text`` that finds records: the
    strict values (:func:`_strict_values`), then :func:`extract_json`'s repaired value (single
    quotes, trailing commas); the strict reading's result (its skipped count) when none does."""
    first = read(_strict_values(text))
    if first:
        return first
    repaired = extract_json(text)
    second = read([repaired]) if repaired is not None else first
    return second if second else first


def _get(d: Mapping[str, Any], keys: Sequence[str]) -> Any:
    lowered = {str(k).lower(): v for k, v in d.items()}
    for k in keys:
        if lowered.get(k) not in (None, ""):
            return lowered[k]
    return None


def _json_items(value: Any, hint: str | None = None) -> Iterator[tuple[str | None, Any]]:
    """``(kind hint, item)`` for every record-like item of a parsed JSON value."""
    if isinstance(value, list):
        for item in value:
            yield from _json_items(item, hint)
        return
    if isinstance(value, dict):
        lists = [(k, v) for k, v in value.items() if isinstance(v, list) and str(k).lower() in _LIST_KINDS]
        if lists:
            for k, v in lists:
                yield from _json_items(v, _LIST_KINDS[str(k).lower()])
            return
    yield hint, value


def _records_from_json(values: list[Any]) -> ParsedRecords:
    out = ParsedRecords()
    for value in values:
        for hint, item in _json_items(value):
            if not isinstance(item, dict):  # a scalar in a list of records
                out.skipped += 1
                continue
            declared = _KINDS.get(_clean(_get(item, ("record_type", "kind", "type"))).lower())
            kind = hint or (declared if declared in ("entity", "relationship") else None)
            if kind is None:
                has_ends = _get(item, _SOURCE_KEYS) is not None and _get(item, _TARGET_KEYS) is not None
                kind = "relationship" if has_ends else "entity" if _get(item, _NAME_KEYS) is not None else None
            record = _json_entity(item) if kind == "entity" else _json_relation(item) if kind else None
            if isinstance(record, EntityRecord):
                out.entities.append(record)
            elif isinstance(record, RelationRecord):
                out.relations.append(record)
            else:
                out.skipped += 1
    return out


def _json_entity(item: Mapping[str, Any]) -> EntityRecord | None:
    name = _clean(_get(item, _NAME_KEYS))
    etype = _get(item, _TYPE_KEYS)
    if _KINDS.get(_clean(etype).lower()):  # "type": "entity" is the record kind
        etype = _get(item, ("entity_type", "category", "label"))
    return EntityRecord(name, _clean(etype).lower(), _clean(_get(item, _DESC_KEYS))) if name else None


def _json_relation(item: Mapping[str, Any]) -> RelationRecord | None:
    source, target = _clean(_get(item, _SOURCE_KEYS)), _clean(_get(item, _TARGET_KEYS))
    if not source or not target:
        return None
    description, keywords = _clean(_get(item, _DESC_KEYS)), _clean(_get(item, _KEYWORD_KEYS))
    return RelationRecord(source, target, description, keywords, _strength(_get(item, _STRENGTH_KEYS)))


#: words that name an entity type in a list answer ("The people in this text are ...")
_TYPE_WORDS: dict[str, tuple[str, ...]] = {
    "person": ("people", "persons", "person", "characters", "character", "participants", "speakers"),
    "organization": ("organizations", "organisations", "organization", "organisation", "companies", "company"),
    "geo": ("places", "place", "locations", "location", "cities", "city", "countries", "country", "geo"),
    "event": ("events", "event"),
}
_LIST_BULLET_RE = re.compile(r"^\s*(?:[-*\u2022+]|\d{1,3}[.)])\s+(.*)$")
_ITEM_SPLIT_RE = re.compile(r"\s*:\s*|\s+[-\u2013\u2014]\s+")
_LIST_SPLIT_RE = re.compile(r",\s*(?:and\s+)?|\s+and\s+|;\s*")
_LIST_INTRO_RE = re.compile(r"(?:\b(?:are|is|include|includes)\b\s*:?|:)\s*", re.I)
_NAME_OK_RE = re.compile(r"[A-Z0-9\u00c0-\u024f\u0370-\uffff][^.!?]{0,59}")


def _list_name(text: str) -> str:
    """A list item's name (wrapping quotes and emphasis removed, end punctuation dropped), or
    ``""`` when it does not look like a name: 1-5 words starting with a capital or a digit."""
    name = _clean(text).rstrip(".,;:!?").strip()
    name = _clean(name)
    return name if _NAME_OK_RE.fullmatch(name) and len(name.split()) <= 5 else ""


def _parse_list(text: str, entity_types: Sequence[str]) -> ParsedRecords:
    """Entities of a plain-language list answer, the way small models answer a "who and what
    does this text name" question: a line naming a kind (``The people in this text are A, B
    and C.``, ``Places:``), its names inline or as bullets ``- NAME: description`` below it.
    The kind word gives the type (``people`` → ``person``, ``places`` → ``geo``, a type of
    ``entity_types`` or its plural): where the line names several kinds, the one a bullet's
    description names (``- Ana: the person who ...``), else the line's first. Items that do not look
    like names (lower-case phrases, sentences) are ignored; nothing is counted as skipped."""
    words: dict[str, str] = {}
    for etype in entity_types:
        for word in (*_TYPE_WORDS.get(etype, ()), etype, etype + "s"):
            words.setdefault(word.lower(), etype)
    kind_re = re.compile(r"\b(" + "|".join(sorted(map(re.escape, words), key=len, reverse=True)) + r")\b", re.I)
    out = ParsedRecords()
    current: list[str] = []  # the types the last kind line named, in its order
    for line in text.splitlines():
        bullet = _LIST_BULLET_RE.match(line)
        body = bullet.group(1) if bullet else line
        if bullet and current:
            parts = _ITEM_SPLIT_RE.split(body, maxsplit=1)
            name = _list_name(parts[0])
            description = _clean(parts[1]) if len(parts) > 1 else ""
            # a line naming several kinds: the kind its description names ("the person who ...")
            said = [words[m.lower()] for m in kind_re.findall(description)]
            etype = next((t for t in said if t in current), current[0])
            if name:
                out.entities.append(EntityRecord(name, etype, description))
            continue
        kind = kind_re.search(body)
        intro = _LIST_INTRO_RE.search(body, kind.end()) if kind else None
        if kind is None or intro is None:
            continue
        named = [words[m.lower()] for m in kind_re.findall(body[: intro.start()])]
        current = list(dict.fromkeys(named))
        for item in _LIST_SPLIT_RE.split(re.split(r"[.!?](?:\s|$)", body[intro.end() :], maxsplit=1)[0]):
            name = _list_name(item)
            if name:
                out.entities.append(EntityRecord(name, current[0]))
    return out


def parse_extraction(text: str, entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES) -> ParsedRecords:
    """Read entity and relationship records from one extraction answer; never raises.

    Accepts the spec's tuple records (``seed-lightrag.md`` §1.4–1.5: ``("entity"<|>NAME<|>TYPE
    <|>DESCRIPTION)``, ``("relationship"<|>SOURCE<|>TARGET<|>DESCRIPTION<|>KEYWORDS<|>STRENGTH)``,
    records split by ``##``, ``*****`` or new lines, ``<|COMPLETE|>`` / ``<|>[COMPLETE]<|>``
    ignored) and near misses: other separators (``|``, ``<|``, spaced ``< | >``), missing
    parentheses, Python-style tuples, bullets, any case of the record kind, quoted fields,
    ``entity: NAME<|>...``, a missing description, keywords or strength, a strength before the
    keywords, HiRAG's 5-field relationships (no keywords). When no tuple record is readable, a
    JSON answer is read instead: ``{"entities": [...], "relationships": [...]}`` or a list of
    records (``entity_name`` / ``name``, ``source`` / ``target``, ...), truncated JSON included.
    ``content_keywords`` records and chatter lines are ignored without counting. When neither
    gives a record, a plain-language list answer is read (a small model's answer to
    :func:`~graphstrata.llm.prompts.lightrag_extract.extract_prompt` with ``examples=False``):
    ``The people in this text are A, B and C.`` or a kind line with ``- NAME: description``
    bullets below it; the kind word (``people``, ``places``, one of ``entity_types`` ...) gives
    the type.

    Args:
        text: the model's answer.
        entity_types: the types offered, for list answers (default the paper's four).

    Returns:
        :class:`ParsedRecords`; ``skipped`` counts record-like items that could not be read
        (an entity without a name, a relationship without two endpoints, separators but no
        record kind). A strength is :func:`as_float` (default 1.0) clipped to [1, 10].
    """
    if not isinstance(text, str) or not text.strip():
        return ParsedRecords()
    best = _parse_tuples(text)
    if _JSON_OPEN_RE.search(text):
        from_json = _read_json(text, _records_from_json)
        n_tuples, n_json = len(best.entities) + len(best.relations), len(from_json.entities) + len(from_json.relations)
        best = from_json if (n_json, from_json.skipped) > (n_tuples, best.skipped) else best
    if best:
        return best
    listed = _parse_list(text, entity_types)
    return listed if listed else best


def _triple(item: Any) -> tuple[str, str, str] | None:
    if isinstance(item, dict):
        parts = [_get(item, _SOURCE_KEYS), _get(item, _PREDICATE_KEYS), _get(item, _TARGET_KEYS)]
    elif isinstance(item, (list, tuple)) and len(item) == 3:
        parts = list(item)
    else:
        return None
    if not all(isinstance(p, (str, int, float)) and not isinstance(p, bool) for p in parts):
        return None
    head, rel, tail = (_clean(p) for p in parts)
    return (head, rel, tail) if head and rel and tail else None


def _triple_items(value: Any) -> Iterator[Any]:
    """Triple-like items of a parsed JSON value (a list of scalars is one triple)."""
    if isinstance(value, dict):
        lists = [v for k, v in value.items() if str(k).lower() in _TRIPLE_LIST_KEYS and isinstance(v, list)]
        if lists:
            for v in lists:
                yield from _triple_items(v)
        elif _get(value, _SOURCE_KEYS) is not None or _get(value, _TARGET_KEYS) is not None:
            yield value
    elif isinstance(value, (list, tuple)):
        if value and all(not isinstance(x, (list, tuple, dict)) for x in value):
            yield value
            return
        for x in value:
            if isinstance(x, (list, tuple, dict)):
                yield from _triple_items(x)
            else:
                yield x


def _triples_from_json(values: list[Any]) -> ParsedTriples:
    out = ParsedTriples()
    for value in values:
        for item in _triple_items(value):
            triple = _triple(item)
            if triple is None:
                out.skipped += 1
            else:
                out.triples.append(triple)
    return out


def parse_triples(text: str) -> ParsedTriples:
    """Read ``(subject, relation, object)`` triples from one triple-extraction answer
    (``seed-agrag.md`` §1.3); never raises.

    Accepts ``{"triples": [[s, p, o], ...]}`` (also under ``"facts"`` / ``"triplets"``), a bare
    list of triples, ``{"subject", "predicate", "object"}`` objects, truncated JSON (the complete
    triples are kept), single-quoted pseudo-JSON, and, when no JSON triple is found, one triple
    per line as ``s <|> p <|> o``, ``s | p | o`` or ``("s", "p", "o")``.

    Returns:
        :class:`ParsedTriples`; ``skipped`` counts items that are not three non-empty
        strings (the spec's ``filter_invalid_triples``).
    """
    if not isinstance(text, str) or not text.strip():
        return ParsedTriples()
    out = _read_json(text, _triples_from_json)
    if out:
        return out
    lines = ParsedTriples()
    for line in text.splitlines():
        fields = _fields(line)
        if len(fields) == 1 and fields[0].count(",") == 2 and fields[0].startswith("("):  # (s, p, o) unquoted
            fields = fields[0].strip("()").split(",")
        if len(fields) < 2:
            continue
        triple = _triple([_clean(f.strip("()[]")) for f in fields]) if len(fields) == 3 else None
        if triple is None:
            lines.skipped += 1
        else:
            lines.triples.append(triple)
    return lines if lines.triples or lines.skipped > out.skipped else out


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


class _GraphBuilder:
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
        key = _key(record.name)
        if not key:
            return False
        acc = self.entities.setdefault(key, _Acc())
        acc.mention(chunk_id, record.name, record.description)
        if record.type:
            acc.types[record.type] += 1
        return True

    def relation(self, record: RelationRecord, chunk_id: str) -> bool:
        a, b = _key(record.source), _key(record.target)
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


def _count_skipped(client: LLMClient, skipped: Mapping[str, int]) -> int:
    """Count the skipped records of each stage in the client's ledger; returns the total."""
    for stage, n in skipped.items():
        if n:
            client.skip(stage, n)
    return sum(skipped.values())


def _report(client: LLMClient, skipped: Mapping[str, int], what: str, note: str = "") -> None:
    """:func:`_count_skipped`, then one :class:`LLMOutputWarning` when records were skipped
    or there is a ``note``."""
    total = _count_skipped(client, skipped)
    parts = []
    if total:
        stages = ", ".join(f"{n} in {stage!r}" for stage, n in skipped.items() if n)
        parts.append(f"skipped {total} unreadable record(s) of the LLM output ({stages})")
    if note:
        parts.append(note)
    if parts:
        warnings.warn(f"{what}: " + "; ".join(parts), LLMOutputWarning, stacklevel=3)


def _chunk_positions(chunks: Sequence[Chunk]) -> dict[str, int]:
    pos: dict[str, int] = {}
    for i, c in enumerate(chunks):
        pos.setdefault(c.id, i)
    return pos


# ---------------------------------------------------------------------------------------------
# extractors
# ---------------------------------------------------------------------------------------------
class LLMExtractor:
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

    def _answers(self, chunks: Sequence[Chunk], titles: Mapping[str, str] | None) -> list[list[str]]:
        """Per chunk: the extraction answer, then one answer per gleaning pass it took."""
        title_of = _extraction().document_title
        titles = titles or {}
        prompts = [
            lr_prompts.extract_prompt(
                c.text, self.entity_types, self.language, title_of(titles.get(c.document_id)), self.examples
            )
            for c in chunks
        ]
        system = lr_prompts.EXTRACT_SYSTEM if self.examples else lr_prompts.EXTRACT_SYSTEM_SHORT
        answers = [[a] for a in self._map(prompts, STAGE_EXTRACT, system)]
        active = list(range(len(chunks)))

        def ask(instruction: str) -> list[str]:
            conversations = [lr_prompts.continued(prompts[i], answers[i], instruction) for i in active]
            return self._map(conversations, STAGE_GLEANING)

        for done in range(self.gleaning):
            if done:  # spec §1.6: between passes, go on only where the model says entities are still missing
                checks = ask(lr_prompts.CONTINUE_QUESTION)
                active = [i for i, a in zip(active, checks, strict=True) if re.match(r"\W*yes\b", a, re.I)]
            if not active:
                break
            for i, a in zip(active, ask(lr_prompts.GLEANING_INSTRUCTION), strict=True):
                answers[i].append(a)
        return answers

    def _summarise(self, records: Sequence[Entity | Relation], names: Callable[[Any], str], skipped: Counter) -> None:
        """Replace, in place, each description of at least ``summary_trigger_tokens`` tokens by
        its LLM summary (stage ``"extract:summaries"``)."""
        todo = [r for r in records if estimate_tokens(r.description) >= self.summary_trigger_tokens]
        prompts = []
        for r in todo:
            parts, budget = [], SUMMARY_INPUT_MAX_TOKENS
            for d in r.description.split(DESCRIPTION_SEPARATOR):
                budget -= estimate_tokens(d)
                if budget < 0 and parts:
                    break
                parts.append(d)
            max_words = max(1, self.summary_max_tokens * 3 // 4)
            prompts.append(lr_prompts.summary_prompt(names(r), parts, max_words, self.language))
        for r, text in zip(todo, self._map(prompts, STAGE_SUMMARIES, lr_prompts.SUMMARY_SYSTEM), strict=True):
            if text.strip():
                r.description = text.strip()
            else:
                skipped[STAGE_SUMMARIES] += 1

    def extract(
        self, chunks: Sequence[Chunk], titles: Mapping[str, str] | None = None
    ) -> tuple[list[Entity], list[Relation]]:
        """Extract, merge and summarise entities and relations of ``chunks``.

        Args:
            chunks: the corpus chunks, in corpus order (fixes the order of ``chunk_ids``).
            titles: optional ``{document_id: title}``; a chunk's title is shown to the LLM.

        Returns:
            ``(entities, relations)``: entities sorted by id, relations by ``(source,
            target)``; ``([], [])`` for no chunks.

        Raises:
            ValueError: no entity could be read from any chunk's answers (the message gives
                the number of chunks and of skipped records).
            LLMError: an LLM call failed after its retries (answers received are cached).

        Skipped records are counted per stage in ``client.ledger`` and reported by one
        :class:`LLMOutputWarning`.
        """
        chunks = list(chunks)
        if not chunks:
            return [], []
        builder = _GraphBuilder(_chunk_positions(chunks), within_chunk=max)
        skipped: Counter = Counter()
        for chunk, answers in zip(chunks, self._answers(chunks, titles), strict=True):
            for n, answer in enumerate(answers):
                stage = STAGE_GLEANING if n else STAGE_EXTRACT
                parsed = parse_extraction(answer, self.entity_types)
                skipped[stage] += parsed.skipped
                skipped[stage] += sum(not builder.entity(e, chunk.id) for e in parsed.entities)
                skipped[stage] += sum(not builder.relation(r, chunk.id) for r in parsed.relations)
        entities, relations = builder.build()
        if not entities:
            total = _count_skipped(self.client, skipped)
            raise ValueError(
                f"the LLM produced no entities from {len(chunks)} chunk(s) ({total} record(s) skipped as unreadable); "
                f"check that the model ({self.client.id}) follows the extraction format"
            )
        names = {e.id: e.name for e in entities}
        self._summarise(entities, lambda e: e.name, skipped)
        self._summarise(relations, lambda r: f"{names[r.source]} and {names[r.target]}", skipped)
        _report(self.client, skipped, f"LLM extraction over {len(chunks)} chunk(s)")
        return entities, relations


class AgragLLMExtractor:
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
        self.statistical = statistical if statistical is not None else _extraction().StatisticalExtractor()
        self.show_progress = bool(show_progress)

    def extract(
        self, chunks: Sequence[Chunk], titles: Mapping[str, str] | None = None
    ) -> tuple[list[Entity], list[Relation]]:
        """Statistical entities of ``chunks`` plus LLM triples as relations.

        Args:
            chunks: the corpus chunks, in corpus order.
            titles: optional ``{document_id: title}`` (passed to the statistical extractor).

        Returns:
            ``(entities, relations)``: entities sorted by id, relations by ``(source,
            target)``; ``([], [])`` for no chunks.

        Raises:
            ValueError: the result has no entity at all (the message gives the number of chunks
                and of skipped triples).
            LLMError: an LLM call failed after its retries (answers received are cached).

        Skipped triples are counted in ``client.ledger`` under ``"extract:triples"``; one
        :class:`LLMOutputWarning` reports them, and also an answer set without any triple.
        """
        chunks = list(chunks)
        if not chunks:
            return [], []
        stat_entities, _cooccurrence = self.statistical.extract(chunks, titles)
        hints: dict[str, list[str]] = {c.id: [] for c in chunks}
        for e in stat_entities:
            for cid in e.chunk_ids:
                if cid in hints:
                    hints[cid].append(e.name)
        requests = [
            LLMRequest(agrag_prompts.triples_prompt(c.text, hints[c.id]), agrag_prompts.TRIPLES_SYSTEM, json_mode=True)
            for c in chunks
        ]
        responses = self.client.map(requests, STAGE_TRIPLES, self.show_progress)
        builder = _GraphBuilder(_chunk_positions(chunks), within_chunk=operator.add)
        skipped = 0
        for chunk, response in zip(chunks, responses, strict=True):
            parsed = parse_triples(response.text)
            skipped += parsed.skipped
            seen: set[tuple[str, str, str]] = set()
            for s, p, o in parsed.triples:
                ident = (_key(s), p.lower(), _key(o))
                if ident in seen:
                    continue
                seen.add(ident)
                skipped += not builder.relation(RelationRecord(s, o, f"{s} {p} {o}", p, 1.0), chunk.id)
        entities, relations = builder.build(stat_entities)
        counts = {STAGE_TRIPLES: skipped}
        if not entities:
            total = _count_skipped(self.client, counts)
            raise ValueError(
                f"extraction produced no entities from {len(chunks)} chunk(s): no statistical entity and no "
                f"readable triple ({total} triple(s) skipped as unreadable)"
            )
        note = "" if relations else f"the LLM ({self.client.id}) gave no usable triple for {len(chunks)} chunk(s)"
        _report(self.client, counts, f"AGRAG triple extraction over {len(chunks)} chunk(s)", note)
        return entities, relations
