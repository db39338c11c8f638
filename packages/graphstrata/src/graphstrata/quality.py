"""How readable a knowledge graph is: the graph-quality report of issue 28.

Four shares, each in ``[0, 1]`` (``0.0`` for an empty graph), computed from entity names and
types and relation labels only, so the same function reads a live index, a persisted one
(:func:`graphstrata.inspection.read_records`) or the JSON export
(:func:`graphstrata.inspection.export_graph`):

- ``stray_words``: entities whose name is one lower-case word that is a function word
  (scikit-learn's ``ENGLISH_STOP_WORDS``, the Glasgow IR stop list), a month or weekday
  name (:mod:`calendar`'s English names, any case), an adverb (an ``-ly`` word of at least
  five letters, or one of :data:`ADVERBS`) or a verb form (one of :data:`VERB_FORMS`, or a
  ``-ed`` word of at least six letters not ending ``-eed``). Without a part-of-speech tagger
  these are list and suffix rules: they find the words the issue names (``named``,
  ``currently``, ``achieved``, ``far``, ``later``, ``September``) and miss some others.
- ``variants``: entities whose :func:`~graphstrata.resolution.normal_key` (case,
  punctuation, plural, possessive folded) equals another entity's: per group of ``n`` such
  entities, ``n - 1`` count (the one that would stay is not a variant).
- ``typed``: entities with a specific type, i.e. not in
  :data:`~graphstrata.resolution.GENERIC_TYPES` (``""``, ``entity``, ``concept``, ...).
- ``labelled_relations``: relations whose label (``keywords``) is neither empty nor a
  co-occurrence label (:data:`COOCCURRENCE_LABELS`).
"""

from __future__ import annotations

import calendar
import json
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .resolution import GENERIC_TYPES, normal_key

ADVERBS = frozenset(
    "far early later soon often still already almost also always never again ever just once twice "
    "perhaps maybe instead however thus hence therefore yet quite rather much very too here there "
    "now then today tomorrow yesterday later afterwards meanwhile nevertheless nonetheless "
    "otherwise indeed away back forth ahead apart aside further together anyway somewhat".split()
)
"""Common adverbs without an ``-ly`` ending (a documented list; see the module docstring)."""

VERB_FORMS = frozenset(
    "named called known made became become done gone given taken seen said found held led left "
    "began begun brought built chose chosen drew drawn grew grown kept lost met paid put ran "
    "sent set sold spent stood told thought won wrote written distinguish include includes "
    "including based located used using according".split()
)
"""Common verb forms (irregular past forms, participles used as connectives) counted as stray."""

NOUNS_IN_LY = frozenset(
    "family assembly supply anomaly monopoly butterfly reply rally ally belly jelly bully folly "
    "holly lily homily melancholy panoply italy july".split()
)
"""``-ly`` words that are nouns, not adverbs."""

COOCCURRENCE_LABELS = frozenset({"", "co_occurs_with", "co-occurs with", "co_occurs", "cooccurs", "related"})
"""Relation labels that say only that two entities occur together (compared case-folded)."""


def _function_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


_CALENDAR = frozenset(
    n.casefold()
    for n in (*calendar.month_name[1:], *calendar.month_abbr[1:], *calendar.day_name, *calendar.day_abbr)
    if n
)


def stray_kind(name: str, function_words: frozenset[str] | None = None) -> str:
    """Why ``name`` is a stray word as an entity: ``"function"``, ``"calendar"``,
    ``"adverb"``, ``"verb"``, or ``""`` when it is not one (any multi-word name, a
    capitalised word other than a month / weekday, a noun).

    Args:
        name: an entity's name.
        function_words: the stop list (default: scikit-learn's ``ENGLISH_STOP_WORDS``).
    """
    word = name.strip()
    if not word or " " in word:
        return ""
    low = word.casefold()
    if low in _CALENDAR and len(low) >= 3:
        return "calendar"
    if word != low or not word.isalpha():
        return ""
    if low in (function_words if function_words is not None else _function_words()):
        return "function"
    if low in ADVERBS or (len(low) >= 5 and low.endswith("ly") and low not in NOUNS_IN_LY):
        return "adverb"
    if low in VERB_FORMS or (len(low) >= 6 and low.endswith("ed") and not low.endswith("eed")):
        return "verb"
    return ""


def graph_quality(
    entities: Iterable[tuple[str, str, str]], relation_labels: Iterable[str], examples: int = 10
) -> dict[str, Any]:
    """The graph-quality report (module docstring) of entities and relation labels.

    Args:
        entities: ``(id, name, type)`` per entity.
        relation_labels: one label (``keywords``) per relation.
        examples: how many examples of each problem to list (most frequent names first).

    Returns:
        ``{"entities": n, "relations": m, "stray_words": share, "stray_by_kind": {kind: count},
        "variants": share, "typed": share, "labelled_relations": share,
        "examples": {"stray_words": [names], "variants": [[ids of one group]]}}``; shares
        are floats in ``[0, 1]`` rounded to 4 places.

    Raises:
        ValueError: ``examples`` is negative.
    """
    if examples < 0:
        raise ValueError(f"examples must be >= 0, got {examples}")
    words = _function_words()
    n = typed = 0
    stray: Counter[str] = Counter()
    stray_names: list[str] = []
    groups: dict[str, list[str]] = {}
    for eid, name, etype in entities:
        n += 1
        kind = stray_kind(name or eid, words)
        if kind:
            stray[kind] += 1
            if len(stray_names) < examples:
                stray_names.append(name or eid)
        key = normal_key(name or eid)
        if key:
            groups.setdefault(key, []).append(eid)
        if (etype or "").strip().casefold() not in GENERIC_TYPES:
            typed += 1
    m = labelled = 0
    for label in relation_labels:
        m += 1
        if (label or "").strip().casefold() not in COOCCURRENCE_LABELS:
            labelled += 1
    variant_groups = [g for g in groups.values() if len(g) > 1]
    n_variants = sum(len(g) - 1 for g in variant_groups)

    def share(k: int, total: int) -> float:
        return round(k / total, 4) if total else 0.0

    return {
        "entities": n,
        "relations": m,
        "stray_words": share(sum(stray.values()), n),
        "stray_by_kind": dict(sorted(stray.items())),
        "variants": share(n_variants, n),
        "typed": share(typed, n),
        "labelled_relations": share(labelled, m),
        "examples": {
            "stray_words": stray_names,
            "variants": [sorted(g) for g in sorted(variant_groups, key=len, reverse=True)[:examples]],
        },
    }


def records_quality(records: Any, examples: int = 10) -> dict[str, Any]:
    """:func:`graph_quality` of an engine state or :class:`~graphstrata.inspection.IndexRecords`
    (anything with a ``kg``)."""
    kg = records.kg
    return graph_quality(
        ((e.id, e.name, e.type) for e in kg.entities.values()),
        (r.keywords for r in kg.relations.values()),
        examples,
    )


def export_quality(path: str | os.PathLike, examples: int = 10) -> dict[str, Any]:
    """:func:`graph_quality` of a JSON graph export (``graphstrata export --format json``):
    its ``kind="entity"`` nodes and ``kind="relation"`` edges.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a JSON graph export (no ``nodes`` / ``edges`` lists).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not isinstance(data.get("edges"), list):
        raise ValueError(f"{path} is not a graph export: expected an object with 'nodes' and 'edges' lists")
    return graph_quality(
        ((str(n["id"]), str(n.get("name", n["id"])), str(n.get("type", ""))) for n in data["nodes"] if n.get("kind") == "entity"),
        (str(e.get("keywords", "")) for e in data["edges"] if e.get("kind") == "relation"),
        examples,
    )
