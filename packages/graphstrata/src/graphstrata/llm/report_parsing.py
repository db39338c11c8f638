"""Forgiving parsing of the LLM's index-time summaries: ArchRAG community reports
(``seed-archrag.md`` §1.4 output format) and HiRAG summary entities (``seed-hirag.md`` §2.5.1).

Nothing here raises on model output: an unreadable answer gives ``None``, and the stage that
asked (:mod:`graphstrata.indexing.reports`) falls back to its extractive text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .extraction_parsing import parse_extraction
from .parsing import as_float, as_text, extract_json

__all__ = ["CommunityReport", "parse_community_report", "parse_summary_entity"]


@dataclass
class CommunityReport:
    """One community's report (spec seed-archrag.md §1.4 output format).

    Attributes:
        title: short title.
        summary: executive summary (may be ``""`` when the model gave only findings).
        findings: ``[{"summary": str, "explanation": str}, ...]`` (empty for a fallback).
        rating: importance in [0, 10], or ``None`` (fallback, or no readable rating).
        rating_explanation: one sentence on the rating (``""`` when absent).
        answer_key: the :func:`~graphstrata.llm.records.answer_key` of the answer the report
            was read from (or fell back from) during a build or update that keeps its answers,
            else ``None``; not part of the report's value (not compared, not shown).
    """

    title: str
    summary: str
    findings: list[dict[str, str]] = field(default_factory=list)
    rating: float | None = None
    rating_explanation: str = ""
    answer_key: str | None = field(default=None, compare=False, repr=False)

    def text(self) -> str:
        """The text embedded as the community vector and shown to readers (spec §1.5 embeds
        title + this text): the summary, then one line per finding,
        ``"- <summary>: <explanation>"``."""
        parts = [self.summary] if self.summary else []
        for f in self.findings:
            s, e = f.get("summary", ""), f.get("explanation", "")
            parts.append("- " + (f"{s}: {e}" if s and e else s or e))
        return "\n".join(parts)


def _norm_keys(d: Mapping[Any, Any]) -> dict[str, Any]:
    return {str(k).strip().lower().replace(" ", "_").replace("-", "_"): v for k, v in d.items()}


# -- ArchRAG community reports ------------------------------------------------------------


_FINDING_SUMMARY = ("summary", "title", "finding", "insight", "point", "headline")
_FINDING_EXPLANATION = ("explanation", "description", "details", "detail", "text", "evidence")


def _first(d: Mapping[str, Any], keys: Sequence[str]) -> str:
    for k in keys:
        v = as_text(d.get(k))
        if v:
            return v
    return ""


def _findings(value: Any) -> list[dict[str, str]]:
    if isinstance(value, (str, Mapping)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return []
    out = []
    for item in value:
        if isinstance(item, Mapping):
            d = _norm_keys(item)
            s, e = _first(d, _FINDING_SUMMARY), _first(d, _FINDING_EXPLANATION)
        else:
            s, e = as_text(item), ""
        if s or e:
            out.append({"summary": s, "explanation": e})
    return out


_FIELD_RE = re.compile(
    r'"\s*(title|summary|rating|rating_explanation)\s*"\s*:\s*("(?:[^"\\]|\\.)*"|[-+]?\d+(?:\.\d+)?)', re.I
)


def _salvage_fields(text: str) -> dict[str, Any] | None:
    """The complete top-level ``"title"``, ``"summary"``, ``"rating"`` and
    ``"rating_explanation"`` values of a JSON report that is not a whole object (its output
    cut off by the token limit), first occurrence of each; ``None`` when there is none."""
    out: dict[str, Any] = {}
    for key, raw in _FIELD_RE.findall(text if isinstance(text, str) else ""):
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        out.setdefault(key.lower(), value)
    return out or None


def parse_community_report(text: str) -> CommunityReport | None:
    """A :class:`CommunityReport` from a model's output, or ``None`` when unreadable.

    Forgiving (spec §1.4 format): the first JSON object anywhere in the text (chatter and code
    fences skipped, trailing commas and single quotes repaired, a one-object list or a
    ``{"report": {...}}`` wrapper unwrapped; from an object cut short, its complete ``title``,
    ``summary``, ``rating`` and ``rating_explanation`` values); key case and spaces ignored; ``rating`` from
    ``8``, ``"7.5"`` or ``"8/10"``, clamped to [0, 10] (unreadable → ``None``); findings as
    objects (``summary``/``explanation`` or near synonyms) or plain strings. Readable means a
    non-empty ``summary`` or at least one finding; a missing ``title`` is returned as ``""``.
    Never raises.
    """
    data = extract_json(text, (dict, list))
    if isinstance(data, list):
        data = next((x for x in data if isinstance(x, dict)), None)
    if not isinstance(data, dict):
        data = _salvage_fields(text)  # an object cut short (a small model's token limit)
    if not isinstance(data, dict):
        return None
    d = _norm_keys(data)
    if not ({"summary", "findings"} & d.keys()):
        inner = [v for v in d.values() if isinstance(v, dict)]
        if len(inner) == 1:
            d = _norm_keys(inner[0])
    summary = as_text(d.get("summary"))
    findings = _findings(d.get("findings", d.get("key_findings")))
    if not summary and not findings:
        return None
    rating = as_float(d.get("rating", d.get("impact_rating", d.get("importance"))))
    if rating is not None:
        rating = min(10.0, max(0.0, rating))
    return CommunityReport(
        title=as_text(d.get("title")),
        summary=summary,
        findings=findings,
        rating=rating,
        rating_explanation=as_text(d.get("rating_explanation", d.get("explanation"))),
    )


def parse_summary_entity(text: str) -> tuple[str, str, str] | None:
    """The first summary entity ``(name, type, description)`` in a model's output, or
    ``None`` when there is none.

    The spec's record ``("entity"<|>NAME<|>TYPE<|>DESCRIPTION)`` (seed-hirag.md §2.5.1) is
    read by the extraction parser (:func:`graphstrata.llm.extraction_parsing.parse_extraction`: quotes,
    missing parentheses or delimiters, chatter, JSON objects tolerated); relationship records
    and later entities are ignored (HiIndex keeps one summary entity per cluster). Never
    raises.
    """
    if not isinstance(text, str):
        return None
    entities = parse_extraction(text).entities
    if not entities or not entities[0].name:
        return None
    e = entities[0]
    return e.name, e.type, e.description
