"""Forgiving parsing of LLM extraction answers: entity and relationship records
(LightRAG / HiRAG, ``seed-lightrag.md`` §1.4–1.5) and AGRAG triples (``seed-agrag.md`` §1.3).

The parsers (:func:`parse_extraction`, :func:`parse_triples`) are forgiving: small local
models break delimiters, drop fields, answer in JSON, wrap records in chatter, markdown
bullets or quotes. They take what is valid, count what they skip, and never raise. The
extraction stage that sends the prompts and merges the records is
:mod:`graphstrata.indexing.llm_extract`.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .parsing import as_float, as_text, extract_json
from .prompts.lightrag_extract import DEFAULT_ENTITY_TYPES

#: relationship strength range (the prompt asks for 1–10) and the value of a missing strength
MIN_STRENGTH, MAX_STRENGTH, DEFAULT_STRENGTH = 1.0, 10.0, 1.0

__all__ = [
    "DEFAULT_ENTITY_TYPES",
    "DEFAULT_STRENGTH",
    "MAX_STRENGTH",
    "MIN_STRENGTH",
    "EntityRecord",
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
