"""Entity resolution: one entity per thing, whatever surface form a chunk used (issue 28).

A stage of its own, run after extraction (opt-in: ``GraphStrataConfig.entity_resolution``).
It decides which extracted entity ids name the same thing and maps each alias id onto one
canonical id:

1. **Normal form** (:func:`normal_key`): case, punctuation / hyphens / spaces, a trailing
   possessive (``'s``) and the plural of the last word are folded, so ``CD-ROM device`` and
   ``cdrom devices`` share one key.
2. **Acronyms** (:func:`acronym_of`): an all-capital name of 2-6 letters (``NASA``) is
   mapped to the one entity of the corpus whose word initials spell it (``National
   Aeronautics and Space Administration``); when several do, or the acronym has two letters,
   only to the one sharing a chunk with it, else to none.
3. **Aliases by similarity**: two names whose normal forms are close by string similarity
   (rapidfuzz ``fuzz.ratio`` at least :data:`FUZZY_MIN`) and differ like two spellings of one
   name (:func:`spelling_variant`: one word misspelt, no digit, prefix or whole-word change)
   *and* whose name embeddings are close
   (cosine at least :data:`COSINE_MIN`) with compatible types (equal, or one of them untyped /
   generic) are merged. Names that only contain one another (``Paris`` / ``Paris Hilton``) are
   not similar by ``fuzz.ratio``, and ``mount`` / ``amount`` fall below its threshold.

The canonical entity of a group is its heaviest (most mentions; ties: the shortest id, then
the smallest). Every merge is recorded: :func:`apply_to_records` rewrites the statistical
extractor's per-chunk records onto canonical ids (so a build's graph and every later
incremental update merge the same records), and the canonical entity keeps the merged ids in
:attr:`~graphstrata.types.Entity.aliases`, persisted with the index.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .types import Entity

FUZZY_MIN = 92.0
"""Least rapidfuzz ``fuzz.ratio`` (0-100) of two normal forms for an alias pair
(``mount`` / ``amount`` score 90.9)."""

COSINE_MIN = 0.85
"""Least cosine similarity of two names' embeddings for an alias pair."""

GENERIC_TYPES = frozenset({"", "entity", "concept", "unknown", "other"})
"""Entity types that carry no type: compatible with any type."""

_ACRONYM = re.compile(r"^[A-Z]{2,6}$")
_SKIP_INITIAL = frozenset({"of", "the", "and", "for", "in", "on", "at", "to", "a", "an", "&"})
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_JOINER = re.compile(r"[\s\-_\u2010-\u2015/]+")
_DIGITS = re.compile(r"\d+")
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")
_POSSESSIVE = re.compile(r"(?:'s|’s|s'|s’)$", re.IGNORECASE)


def _singular(word: str) -> str:
    """The singular of an English plural noun by suffix rules (``devices`` → ``device``,
    ``entries`` → ``entry``, ``boxes`` → ``box``); other words unchanged. Short words
    (under 4 letters) and ``-ss`` / ``-us`` / ``-is`` endings are left alone."""
    if len(word) < 4 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "ches", "shes", "xes", "zzes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def normal_key(name: str) -> str:
    """The normal form of an entity name: case-folded, accents removed, a trailing possessive and
    leading / trailing punctuation dropped, the last word made singular (unless it is all
    capitals: ``AAAS`` is not the plural of ``AAA``), then the joiners
    between words (spaces, hyphens, dashes, underscores, slashes) removed.
    ``"CD-ROM devices"``, ``"cdrom device"`` and ``"CD-ROM Device's"`` all give
    ``"cdromdevice"``. Punctuation inside a word stays, so initialisms keep apart from words
    (``"H.O.R.S.E"`` / ``"horse"``, ``"P&O"`` / ``"PO"``).

    Args:
        name: a surface form (any string).

    Returns:
        The key (``""`` for a name with no word character).
    """
    return "".join(normal_words(name))


def normal_words(name: str) -> list[str]:
    """The words of :func:`normal_key` before they are joined (``[]`` for no word)."""
    text = unicodedata.normalize("NFKD", name)
    text = "".join(c for c in text if not unicodedata.combining(c))  # città → citta
    text = _EDGE_PUNCT.sub("", _POSSESSIVE.sub("", unicodedata.normalize("NFKC", text).strip()))
    words = [w for w in _JOINER.split(text) if w]
    if words and not words[-1].isupper():  # AAAS is an acronym, not the plural of AAA
        words[-1] = _singular(words[-1].casefold())
    return [w.casefold() for w in words]


def spelling_variant(a: str, b: str, word_min: float = 88.0) -> bool:
    """Whether names ``a`` and ``b`` differ like two spellings of one name: the same number
    of words (:func:`normal_words`), exactly one pair of words different, and that pair a
    misspelling rather than another word — no digit differs (``2005`` / ``2009``,
    ``under-21`` / ``under-23``), neither word is a prefix of the other (``austria`` /
    ``austrian``, ``alien`` / ``aliens``) and their rapidfuzz ``fuzz.ratio`` is at least
    ``word_min`` (``basaveshwara`` / ``basaveshvara`` yes; ``east`` / ``west``,
    ``american`` / ``mexican``, ``minister`` / ``ministry`` no)."""
    from rapidfuzz import fuzz

    wa, wb = normal_words(a), normal_words(b)
    if len(wa) != len(wb):
        return False
    diff = [(x, y) for x, y in zip(wa, wb, strict=True) if x != y]
    if len(diff) != 1:
        return False
    (x, y), = diff
    if _DIGITS.findall(x) != _DIGITS.findall(y) or x.startswith(y) or y.startswith(x):
        return False
    return fuzz.ratio(x, y) >= word_min


def acronym_of(name: str) -> str:
    """The initials of a multi-word name, upper-case, skipping function words (``"National
    Aeronautics and Space Administration"`` → ``"NASA"``); ``""`` for a single word or a name
    with a one-letter word (``"P&O"``, ``"J. Smith"``: initials already)."""
    words = [w for w in _JOINER.split(name.strip()) if w and w.casefold() not in _SKIP_INITIAL]
    if len(words) < 2 or any(len(w) < 2 or not w[0].isalpha() for w in words):
        return ""
    return "".join(w[0] for w in words).upper()


def types_compatible(a: str, b: str) -> bool:
    """Whether entities of types ``a`` and ``b`` may be one entity: equal (case-insensitive),
    or one of them in :data:`GENERIC_TYPES`."""
    a, b = a.strip().casefold(), b.strip().casefold()
    return a == b or a in GENERIC_TYPES or b in GENERIC_TYPES


class _Groups:
    """Union-find over entity ids."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        p = self.parent.setdefault(x, x)
        while p != self.parent.setdefault(p, p):
            self.parent[p] = self.parent[self.parent[p]]
            p = self.parent[p]
        self.parent[x] = p
        return p

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def resolve_entities(
    entities: Sequence[Entity],
    embed: Callable[[list[str]], np.ndarray] | None = None,
    fuzzy_min: float = FUZZY_MIN,
    cosine_min: float = COSINE_MIN,
) -> dict[str, str]:
    """Which entities are one: ``{alias_id: canonical_id}`` (see the module docstring).

    Args:
        entities: the extracted entities (ids unique).
        embed: names → float32 ``(n, dim)`` unit vectors (an embedder's ``embed``); ``None``
            skips the similarity step (normal forms and acronyms only).
        fuzzy_min: least ``fuzz.ratio`` (0-100) of two normal forms for a similarity merge.
        cosine_min: least cosine of two name vectors for a similarity merge.

    Returns:
        The alias ids mapped to their group's canonical id; ids not merged are absent.

    Raises:
        ValueError: duplicate entity ids, or thresholds out of range.
    """
    if not 0 <= fuzzy_min <= 100 or not -1 <= cosine_min <= 1:
        raise ValueError(f"fuzzy_min must be in [0, 100] and cosine_min in [-1, 1], got {fuzzy_min}, {cosine_min}")
    by_id = {e.id: e for e in entities}
    if len(by_id) != len(entities):
        raise ValueError("duplicate entity ids given to resolve_entities")
    groups = _Groups()
    keys = {e.id: normal_key(e.name or e.id) for e in entities}

    # 1. normal forms (the type check applies here too: "Paris" the place, "paris" a person)
    by_key: dict[str, list[str]] = defaultdict(list)
    for eid, key in keys.items():
        if key:
            by_key[key].append(eid)
    for ids in by_key.values():
        for other in ids[1:]:
            if types_compatible(by_id[ids[0]].type, by_id[other].type):
                groups.union(ids[0], other)

    # 2. acronyms onto an expansion seen in the corpus
    expansions: dict[str, list[str]] = defaultdict(list)
    for e in entities:
        initials = acronym_of(e.name or e.id)
        if len(initials) >= 2:
            expansions[initials].append(e.id)
    for e in entities:
        name = (e.name or e.id).strip()
        if not _ACRONYM.match(name):
            continue
        cands = [c for c in expansions.get(name, ()) if types_compatible(by_id[c].type, e.type)]
        if len(cands) > 1 or len(name) == 2:  # ambiguous (two letters always): the same chunk must name both
            mine = set(e.chunk_ids)
            cands = [c for c in cands if mine.intersection(by_id[c].chunk_ids)]
        if len(cands) == 1:
            groups.union(cands[0], e.id)

    # 3. string similarity (blocked by the first three characters of the normal form), then
    #    name-embedding similarity and the type check
    if embed is not None:
        _similar_pairs(entities, keys, groups, embed, fuzzy_min, cosine_min)

    members: dict[str, list[str]] = defaultdict(list)
    for eid in by_id:
        members[groups.find(eid)].append(eid)
    mapping: dict[str, str] = {}
    for ids in members.values():
        if len(ids) < 2:
            continue
        canonical = min(ids, key=lambda i: (-by_id[i].weight, len(i), i))
        mapping.update({i: canonical for i in ids if i != canonical})
    return mapping


def _similar_pairs(
    entities: Sequence[Entity], keys: Mapping[str, str], groups: _Groups,
    embed: Callable[[list[str]], np.ndarray], fuzzy_min: float, cosine_min: float,
) -> None:
    from rapidfuzz import fuzz

    blocks: dict[str, list[Entity]] = defaultdict(list)
    for e in entities:
        k = keys[e.id]
        if len(k) >= 4:  # short names differ by one letter too often (mount / count)
            blocks[k[:3]].append(e)
    pairs: list[tuple[Entity, Entity]] = []
    for block in blocks.values():
        for i, a in enumerate(block):
            for b in block[i + 1 :]:
                if keys[a.id] == keys[b.id] or not types_compatible(a.type, b.type):
                    continue
                if fuzz.ratio(keys[a.id], keys[b.id]) >= fuzzy_min and spelling_variant(a.name or a.id, b.name or b.id):
                    pairs.append((a, b))
    if not pairs:
        return
    names = sorted({e.name or e.id for p in pairs for e in p})
    vecs = np.asarray(embed(names), dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = vecs / np.where(norms > 0, norms, 1.0)
    row = {n: i for i, n in enumerate(names)}
    for a, b in pairs:
        if float(vecs[row[a.name or a.id]] @ vecs[row[b.name or b.id]]) >= cosine_min:
            groups.union(a.id, b.id)


def resolve_onto(
    existing: Mapping[str, Entity], new_ids: Iterable[str], names: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Map the entity ids an incremental update extracted onto the existing graph's entities.

    A new id that is an alias of an existing entity maps to that entity; one whose normal form
    (:func:`normal_key`) equals an existing entity's or one of its aliases' maps to it.

    Args:
        existing: the current graph's entities by id (their ``aliases`` included).
        new_ids: ids the new chunks' records name.
        names: ``{id: surface form}`` of the new ids (default: the id itself).

    Returns:
        ``{new_id: existing_id}`` for the ids resolved; ids already in ``existing`` are absent.
    """
    alias_of: dict[str, str] = {}
    by_key: dict[str, str] = {}
    for e in existing.values():
        for alias in e.aliases:
            alias_of[alias] = e.id
        for form in (e.id, e.name, *e.aliases):
            by_key.setdefault(normal_key(form), e.id)
    out: dict[str, str] = {}
    for nid in new_ids:
        if nid in existing:
            continue
        target = alias_of.get(nid) or by_key.get(normal_key((names or {}).get(nid, nid)))
        if target is not None and target != nid:
            out[nid] = target
    return out


def apply_to_record(rec: Any, mapping: Mapping[str, str], max_sentences: int) -> Any:
    """``rec`` (a :class:`~graphstrata.extraction.ChunkRecord`) with its entity ids mapped
    through ``mapping``: entries that become one add their surface counts and mentions and
    keep their first ``max_sentences`` distinct sentences; relations are remapped, merged, and
    dropped where both ends became one entity. Returns ``rec`` itself when nothing maps."""
    from .extraction import ChunkRecord

    if not any(k in mapping for k in rec.entities):
        return rec
    out = ChunkRecord(rec.chunk_id)
    for key, (surfaces, mentions, sentences) in rec.entities.items():
        target = mapping.get(key, key)
        have = out.entities.get(target)
        if have is None:
            out.entities[target] = (dict(surfaces), [mentions[0]], list(sentences[:max_sentences]))
            continue
        for form, n in surfaces.items():
            have[0][form] = have[0].get(form, 0) + n
        have[1][0] += mentions[0]
        for s in sentences:
            if len(have[2]) >= max_sentences:
                break
            if s not in have[2]:
                have[2].append(s)
    for (a, b), (mentions, sentences) in rec.relations.items():
        a, b = mapping.get(a, a), mapping.get(b, b)
        if a == b:
            continue
        pair = (a, b) if a < b else (b, a)
        have = out.relations.get(pair)
        if have is None:
            out.relations[pair] = ([mentions[0]], list(sentences))
        else:
            have[1].extend(s for s in sentences if s not in have[1])
            have[0][0] += mentions[0]
    for key, counts in rec.types.items():
        into = out.types.setdefault(mapping.get(key, key), {})
        for t, n in counts.items():
            into[t] = into.get(t, 0) + n
    for (a, b), counts in rec.labels.items():
        a, b = mapping.get(a, a), mapping.get(b, b)
        if a == b:
            continue
        into = out.labels.setdefault((a, b) if a < b else (b, a), {})
        for label, n in counts.items():
            into[label] = into.get(label, 0) + n
    return out


def apply_to_records(records: Mapping[str, Any], mapping: Mapping[str, str], max_sentences: int) -> dict[str, Any]:
    """:func:`apply_to_record` over ``{chunk_id: record}`` (order kept)."""
    return {cid: apply_to_record(rec, mapping, max_sentences) for cid, rec in records.items()}


def alias_table(mapping: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """``{canonical_id: (alias ids, sorted)}`` of an ``{alias_id: canonical_id}`` mapping."""
    out: dict[str, list[str]] = defaultdict(list)
    for alias, canonical in mapping.items():
        out[canonical].append(alias)
    return {c: tuple(sorted(a)) for c, a in out.items()}


def with_aliases(entities: Iterable[Entity], aliases: Mapping[str, Iterable[str]]) -> list[Entity]:
    """``entities`` with :attr:`~graphstrata.types.Entity.aliases` set from ``aliases``
    (``{entity_id: alias ids}``, merged with the aliases an entity already has)."""
    out = []
    for e in entities:
        extra = aliases.get(e.id)
        if extra:
            e.aliases = tuple(sorted(set(e.aliases).union(extra) - {e.id}))
        out.append(e)
    return out


def resolution_stage(
    entities: Sequence[Entity],
    relations: Sequence[Any],
    records: Mapping[str, Any] | None,
    embed: Callable[[list[str]], np.ndarray] | None,
    max_sentences: int,
) -> tuple[list[Entity], list[Any], Mapping[str, Any] | None]:
    """The build's resolution stage over a statistical extraction's output.

    Resolves ``entities`` (:func:`resolve_entities`), rewrites the per-chunk ``records`` onto
    the canonical ids (:func:`apply_to_records`) and merges them again
    (:func:`~graphstrata.extraction.merge_records`), so the graph is exactly the merge of the
    records an incremental update later extends; each canonical entity gets its merged ids as
    ``aliases``.

    Args:
        entities, relations: the extraction's merge of ``records``.
        records: ``{chunk_id: ChunkRecord}`` in corpus order; ``None`` for an LLM extraction
            (which keeps no records): its entities and relations are merged directly
            (:func:`merge_graph`).
        embed: names → unit vectors for the similarity step, or ``None``.
        max_sentences: the extractor's ``max_description_sentences``.

    Returns:
        ``(entities, relations, records)``: entities sorted by id, relations by pair.
    """
    mapping = resolve_entities(entities, embed)
    if not mapping:
        return list(entities), list(relations), records
    if records is None:
        ents, rels = merge_graph(entities, relations, mapping)
        return ents, rels, None
    from .extraction import merge_records

    rewritten = apply_to_records(records, mapping, max_sentences)
    ents, rels = merge_records(list(rewritten.values()), max_description_sentences=max_sentences)
    return with_aliases(ents, alias_table(mapping)), rels, rewritten


def merge_graph(
    entities: Sequence[Entity], relations: Sequence[Any], mapping: Mapping[str, str]
) -> tuple[list[Entity], list[Any]]:
    """Entities and relations with every alias id of ``mapping`` merged into its canonical
    entity (the LLM path, which keeps no per-chunk records).

    A merged entity keeps the canonical one's id and name, the first specific type of the
    group, the distinct descriptions joined by a newline (canonical first), the union of the
    chunks in order, the summed weight and the merged ids as ``aliases``. Relations are
    remapped, those that became self-loops dropped, and those that became one pair merged
    (weights summed, distinct descriptions and keywords joined, chunks united).

    Returns:
        ``(entities, relations)`` in the order of the input's first occurrences.
    """
    from .types import Relation

    aliases = alias_table(mapping)
    by_id = {e.id: e for e in entities}
    out: dict[str, Entity] = {}
    for e in entities:
        cid = mapping.get(e.id, e.id)
        if cid in out:
            continue
        group = [by_id[cid], *(by_id[a] for a in aliases.get(cid, ()) if a in by_id)]
        head = group[0]
        etype = next((g.type for g in group if g.type.strip().casefold() not in GENERIC_TYPES), head.type)
        descriptions = list(dict.fromkeys(g.description for g in group if g.description))
        chunks = list(dict.fromkeys(c for g in group for c in g.chunk_ids))
        out[cid] = Entity(
            id=cid, name=head.name, description="\n".join(descriptions), chunk_ids=chunks,
            weight=float(sum(g.weight for g in group)), type=etype,
            aliases=tuple(sorted(set(head.aliases).union(aliases.get(cid, ())))),
        )
    rels: dict[tuple[str, str], Any] = {}
    for r in relations:
        a, b = mapping.get(r.source, r.source), mapping.get(r.target, r.target)
        if a == b:
            continue
        a, b = min(a, b), max(a, b)
        have = rels.get((a, b))
        if have is None:
            rels[(a, b)] = Relation(a, b, r.description, r.weight, list(r.chunk_ids), r.keywords)
            continue
        have.weight += r.weight
        if r.description and r.description not in have.description.split("\n"):
            have.description = "\n".join(x for x in (have.description, r.description) if x)
        have.chunk_ids = list(dict.fromkeys([*have.chunk_ids, *r.chunk_ids]))
        words = [w.strip() for w in f"{have.keywords},{r.keywords}".split(",") if w.strip()]
        have.keywords = ", ".join(dict.fromkeys(words))
    return list(out.values()), list(rels.values())
