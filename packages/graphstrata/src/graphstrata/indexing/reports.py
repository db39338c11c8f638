"""LLM-written summaries of graph structure as indexing stages: ArchRAG community reports
(``seed-archrag.md`` §1.4–1.5) and HiRAG summary entities (``seed-hirag.md`` §2.5).

Both run one LLM call per community / cluster through :meth:`LLMClient.map` (bounded
concurrency, response cache: an unchanged community costs nothing the second time) — in a
build or update, after the answers the index keeps (:func:`~graphstrata.llm.records.kept_map`:
an unchanged prompt costs nothing without the cache either) — parse the
output forgivingly (:mod:`graphstrata.llm.report_parsing`), and fall back to the caller's
extractive text where the output is unreadable, counting it with :meth:`LLMClient.skip`.
Nothing here raises on model output; a model that *fails* (after the client's retries) raises
:class:`~graphstrata.llm.LLMError`.

The build calls :func:`community_reports` from the clustering stage
(:func:`graphstrata.indexing.communities.cluster_communities`) and from incremental updates;
:func:`summary_entities` is HiRAG's LLM summariser
(:func:`graphstrata.indexing.hirag.llm_summariser`).

Token counts are :func:`~graphstrata.llm.estimate_tokens` estimates (about 4 characters a
token) throughout.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..llm.base import LLMRequest, estimate_tokens
from ..llm.client import LLMClient
from ..llm.guards import Grounding, is_echo
from ..llm.prompts.archrag import (
    COMMUNITY_REPORT_PROMPT,
    COMMUNITY_REPORT_SYSTEM,
    EXAMPLE_REPORT_NAMES,
    EXAMPLE_REPORT_SUMMARY,
    EXAMPLE_REPORT_TITLE,
)
from ..llm.prompts.hirag import META_TYPES, SUMMARY_ENTITY_PROMPT, SUMMARY_ENTITY_SYSTEM
from ..llm.records import kept_map
from ..llm.report_parsing import CommunityReport, parse_community_report, parse_summary_entity

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import KnowledgeGraph

DEFAULT_REPORT_CONTEXT_TOKENS = 4000
#: token budget of one cluster's entity list in the summary-entity prompt (the reference code's
#: 60,000 fits only hosted models; we keep the most frequent members within this budget)
DEFAULT_SUMMARY_INPUT_TOKENS = 4000
REPORT_STAGE = "community_reports"
SUMMARY_STAGE = "hirag_summaries"

T = TypeVar("T")


# -- shared helpers ---------------------------------------------------------------------------
def _row_cap(budget: int) -> int:
    """Most tokens one description may take in a context of ``budget`` tokens: one long
    description must not crowd out every other row."""
    return max(32, budget // 16)


def _clip(text: str, max_tokens: int) -> str:
    """``text`` on one line, cut to about ``max_tokens`` tokens at a word boundary (``…``
    marks a cut)."""
    text = " ".join(str(text).split())
    limit = max_tokens * 4
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _csv_row(values: Iterable[Any]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(values)
    return buf.getvalue()


def _complete_parsed(
    client: Any,
    requests: Sequence[LLMRequest | None],
    parse: Callable[[str], T | None],
    stage: str,
    keys: list[str | None] | None = None,
) -> list[T | None]:
    """Complete every non-``None`` request through :func:`~graphstrata.llm.records.kept_map`
    (the answers the index keeps first, when a build or update keeps them; then
    ``client.map``; input order kept) and parse each output; ``None`` where the request was
    ``None`` or the output unreadable. Unreadable outputs are counted with
    ``client.skip(stage, n)``; a kept answer is parsed exactly as a new one.

    Args:
        keys: when given, filled with one entry per request: the answer's
            :func:`~graphstrata.llm.records.answer_key` (``None`` for a ``None`` request or
            outside a build that keeps answers).

    Raises:
        LLMError: an LLM call failed after its retries.
    """
    client = LLMClient.of(client)
    todo = [i for i, r in enumerate(requests) if r is not None]
    answered = kept_map(client, [requests[i] for i in todo], stage) if todo else []
    responses = [resp for resp, _ in answered]
    if keys is not None:
        keys[:] = [None] * len(requests)
        for i, (_, key) in zip(todo, answered, strict=True):
            keys[i] = key
    out: list[T | None] = [None] * len(requests)
    bad = 0
    for i, resp in zip(todo, responses, strict=True):
        try:
            value = parse(resp.text)
        except Exception:  # noqa: BLE001 - a parser bug on odd output must not fail a build
            value = None
        if value is None:
            bad += 1
        out[i] = value
    if bad:
        client.skip(stage, bad)
    return out


# -- ArchRAG community reports ------------------------------------------------------------
@dataclass
class ReportContext:
    """What one community's report is written from (spec §1.4 context).

    Attributes:
        entities: ``(name, type, description)`` of the member entities (flattened for a
            higher-layer community; ``type`` may be ``""``).
        relations: ``(source name, target name, description)`` of relations among them.
        sub_reports: reports of the community's member communities (layer ≥ 2), most
            important first (e.g. largest first); empty for layer 1.
        degrees: entity name → degree in the whole graph, for ranking rows (spec: relations
            by source + target degree, descending); ``None``: degrees counted in
            ``relations``.
    """

    entities: list[tuple[str, str, str]] = field(default_factory=list)
    relations: list[tuple[str, str, str]] = field(default_factory=list)
    sub_reports: list[CommunityReport] = field(default_factory=list)
    degrees: Mapping[str, int] | None = None


def graph_context(
    kg: KnowledgeGraph, entity_ids: Iterable[str], sub_reports: Sequence[CommunityReport] = ()
) -> ReportContext:
    """The :class:`ReportContext` of a community of ``entity_ids`` in ``kg``: the members,
    the relations among them (both ends members), and graph-wide degrees for ranking.

    Args:
        kg: the knowledge graph.
        entity_ids: the community's entity ids (unknown ids are skipped).
        sub_reports: reports of the member communities (layer ≥ 2).

    Returns:
        A context for :func:`community_reports`; O(members + their degrees) to build.
    """
    ids = [e for e in dict.fromkeys(entity_ids) if e in kg.entities]
    members = set(ids)
    g = kg.nx
    rels = []
    for a in ids:
        for b in g.adj[a]:
            if b in members and a < b:
                rels.append(kg.relations[(a, b)])
    ents = [kg.entities[e] for e in ids]
    return ReportContext(
        entities=[(e.name, e.type, e.description) for e in ents],
        relations=[(kg.entities[r.source].name, kg.entities[r.target].name, r.description) for r in rels],
        sub_reports=list(sub_reports),
        degrees={e.name: int(g.degree[e.id]) for e in ents},
    )


class _Budget:
    """Packs CSV tables into a token budget: a table's header is paid with its first row."""

    def __init__(self, tokens: int) -> None:
        self.left = tokens
        self.tables: dict[str, list[str]] = {}

    def add(self, table: str, header: str, row: str) -> bool:
        cost = estimate_tokens(row) + 1
        if table not in self.tables:
            cost += estimate_tokens(f"-----{table}-----\n{header}") + 1
        if cost > self.left:
            return False
        self.left -= cost
        self.tables.setdefault(table, [f"-----{table}-----", header]).append(row)
        return True

    def fill(self, table: str, header: str, rows: Sequence[str], start: int = 0, keep: int = 0) -> int:
        """Add ``rows[start:]`` in order until one does not fit or only ``keep`` tokens are
        left; returns the index of the first row not added."""
        i = start
        while i < len(rows) and self.left > keep and self.add(table, header, rows[i]):
            i += 1
        return i

    def text(self, order: Sequence[str]) -> str:
        return "\n\n".join("\n".join(self.tables[t]) for t in order if t in self.tables)


_ENT_HEADER = "id,entity,type,description"
_REL_HEADER = "id,source,target,description"
_REP_HEADER = "id,title,content,rating"


def _raw_rows(context: ReportContext, row_tokens: int) -> tuple[list[str], list[str]]:
    """Entity and relation CSV rows, ranked as the spec says: entities by degree, relations
    by source + target degree, both descending (ties: input order)."""
    deg = context.degrees
    if deg is None:
        counted: dict[str, int] = {}
        for s, t, _ in context.relations:
            counted[s] = counted.get(s, 0) + 1
            counted[t] = counted.get(t, 0) + 1
        deg = counted
    ents = sorted(enumerate(context.entities), key=lambda x: (-deg.get(x[1][0], 0), x[0]))
    rels = sorted(
        enumerate(context.relations), key=lambda x: (-(deg.get(x[1][0], 0) + deg.get(x[1][1], 0)), x[0])
    )
    ent_rows = [
        _csv_row((i, _clip(n, 32), _clip(t, 8), _clip(d, row_tokens))) for i, (_, (n, t, d)) in enumerate(ents, 1)
    ]
    rel_rows = [
        _csv_row((i, _clip(s, 32), _clip(t, 32), _clip(d, row_tokens))) for i, (_, (s, t, d)) in enumerate(rels, 1)
    ]
    return ent_rows, rel_rows


def format_report_context(context: ReportContext, max_tokens: int = DEFAULT_REPORT_CONTEXT_TOKENS) -> str:
    """The data tables of one community's report prompt, at most ``max_tokens`` tokens.

    Spec §1.4 (ArchRAG CODE, GraphRAG's context builder): CSV tables
    ``-----Entities-----`` (``id,entity,type,description``, by degree) and
    ``-----Relationships-----`` (``id,source,target,description``, by source + target degree).
    When all of that fits, it is the whole context (any ``sub_reports`` are then not needed).
    When it does not (or there are no raw rows) and sub-community reports exist,
    ``-----Reports-----`` (``id,title,content,rating``, in the given order) comes first and
    the entity and relation rows fill what budget is left — the sub-reports substitute for
    the raw rows they cover. Raw rows are packed half the budget for entities first, then relations, then more
    entities into what is left; each description is clipped to ``max(32, max_tokens // 16)``
    tokens; rows are cut at the first that does not fit.

    Returns:
        The tables (``""`` when the context is empty or nothing fits).
    """
    row_tokens = _row_cap(max_tokens)
    ent_rows, rel_rows = _raw_rows(context, row_tokens)
    whole = _Budget(max_tokens)
    fits = whole.fill("Entities", _ENT_HEADER, ent_rows) == len(ent_rows)
    fits = fits and whole.fill("Relationships", _REL_HEADER, rel_rows) == len(rel_rows)
    if fits and (ent_rows or rel_rows):
        return whole.text(("Entities", "Relationships"))
    budget = _Budget(max_tokens)
    if context.sub_reports:
        rep_rows = [
            _csv_row(
                (
                    i,
                    _clip(r.title, 32),
                    _clip(r.summary or r.text(), row_tokens),
                    "" if r.rating is None else f"{r.rating:g}",
                )
            )
            for i, r in enumerate(context.sub_reports, 1)
        ]
        budget.fill("Reports", _REP_HEADER, rep_rows)
    half = budget.left - budget.left // 2
    e = budget.fill("Entities", _ENT_HEADER, ent_rows, keep=half)
    budget.fill("Relationships", _REL_HEADER, rel_rows)
    budget.fill("Entities", _ENT_HEADER, ent_rows, start=e)
    return budget.text(("Reports", "Entities", "Relationships"))


def report_request(context: ReportContext, max_context_tokens: int = DEFAULT_REPORT_CONTEXT_TOKENS) -> LLMRequest | None:
    """The JSON-mode :class:`LLMRequest` for one community's report (prompt
    :data:`~graphstrata.llm.prompts.archrag.COMMUNITY_REPORT_PROMPT`), or ``None`` when the
    context has nothing to report on."""
    tables = format_report_context(context, max_context_tokens)
    if not tables:
        return None
    return LLMRequest(COMMUNITY_REPORT_PROMPT.format(context=tables), COMMUNITY_REPORT_SYSTEM, json_mode=True)


def report_echoes_example(report: CommunityReport, tables: str) -> bool:
    """Whether ``report`` copies the prompt's example report: its title or summary (nearly)
    equal to the example's, or naming one of the example's entities that the community's data
    ``tables`` do not name (:mod:`graphstrata.llm.guards`)."""
    if is_echo(report.title, [EXAMPLE_REPORT_TITLE]) or is_echo(report.summary, [EXAMPLE_REPORT_SUMMARY]):
        return True
    text = f"{report.title}\n{report.summary}".lower()
    named = [n for n in EXAMPLE_REPORT_NAMES if n.lower() in text]
    if not named:
        return False
    ground = Grounding(tables)
    return any(not ground(n) for n in named)


def community_reports(
    client: Any,
    contexts: Sequence[ReportContext],
    fallbacks: Sequence[tuple[str, str]],
    *,
    stage: str = REPORT_STAGE,
    max_context_tokens: int = DEFAULT_REPORT_CONTEXT_TOKENS,
    stop_on_failures: bool = True,
) -> list[CommunityReport]:
    """ArchRAG community reports (spec seed-archrag.md §1.4), one LLM call per community.

    Args:
        client: an :class:`LLMClient` (or an LLM / callable, wrapped by
            :meth:`LLMClient.of`); the calls run through ``client.map`` (at most
            ``client.concurrency`` in flight, response cache first; in a build or update the
            index's kept answers before that, :func:`~graphstrata.llm.records.kept_map`).
        contexts: one :class:`ReportContext` per community (see :func:`graph_context`).
        fallbacks: one extractive ``(title, summary)`` per community, same order: the report
            where the model's output is unreadable or the context is empty, and the title
            where the model gave none.
        stage: ledger stage of the calls and of the skip count.
        max_context_tokens: token budget of each community's data tables
            (:func:`format_report_context`), lowered to fit the model's context window when
            the client knows it (:meth:`LLMClient.context_budget`).
        stop_on_failures: ``True`` (ArchRAG's reports): stop with :class:`LLMOutputError`
            when too many reports failed. ``False`` (a best-effort stage, HiRAG's reports,
            seed-hirag.md §2.7): the failures are counted the same way
            (:meth:`LLMClient.count_answers`) and every failed report keeps its fallback.

    Returns:
        One :class:`CommunityReport` per context, in input order, its ``answer_key`` the
        key of the answer it was read from (or fell back from) when the build keeps its
        answers (:mod:`graphstrata.llm.records`). A fallback report has the
        fallback title and summary, no findings and ``rating=None``; each one made from an
        unreadable output is counted with ``client.skip(stage)`` (an empty context makes no
        call and counts nothing). A report copying the prompt's example
        (:func:`report_echoes_example`) is replaced by its fallback too (and counted as skipped);
        unreadable and copied reports are counted as the stage's ``"parse"`` / ``"echo"``
        failures.

    Raises:
        LLMOutputError: ``stop_on_failures`` and more than ``client.max_failure_share`` of the
            reports were unreadable or copied the example (the message names the model, stage
            and share).
        ValueError: ``contexts`` and ``fallbacks`` differ in length, or
            ``max_context_tokens`` < 1.
        LLMError: an LLM call failed after its retries (responses already received are
            cached).
    """
    if len(contexts) != len(fallbacks):
        raise ValueError(f"{len(contexts)} report contexts but {len(fallbacks)} fallbacks")
    if max_context_tokens < 1:
        raise ValueError(f"max_context_tokens must be >= 1, got {max_context_tokens!r}")
    client = LLMClient.of(client)
    max_context_tokens = client.context_budget(
        max_context_tokens, COMMUNITY_REPORT_SYSTEM + COMMUNITY_REPORT_PROMPT.format(context="")
    )
    tables = [format_report_context(c, max_context_tokens) for c in contexts]
    requests = [
        LLMRequest(COMMUNITY_REPORT_PROMPT.format(context=t), COMMUNITY_REPORT_SYSTEM, json_mode=True) if t else None
        for t in tables
    ]
    keys: list[str | None] = []
    parsed = _complete_parsed(client, requests, parse_community_report, stage, keys)
    _check_reports(client, requests, parsed, tables, stage, stop_on_failures)
    return _with_fallbacks(parsed, fallbacks, keys)


def _check_reports(
    client: LLMClient, requests: Sequence[LLMRequest | None], parsed: list[CommunityReport | None],
    tables: Sequence[str], stage: str, stop_on_failures: bool,
) -> None:
    """Count the unreadable reports and those copying the prompt's example (set to ``None``
    in ``parsed``: the fallback replaces them), and check or count the stage's failures.

    Raises:
        LLMOutputError: ``stop_on_failures`` and too many reports failed.
    """
    failures = {"parse": 0, "echo": 0}
    for i, report in enumerate(parsed):
        if requests[i] is None:
            continue
        if report is None:
            failures["parse"] += 1
        elif report_echoes_example(report, tables[i]):
            failures["echo"] += 1
            parsed[i] = None  # the extractive fallback replaces a copy of the example
    if failures["echo"]:
        client.skip(stage, failures["echo"])  # replaced by the fallback, as an unreadable one
    answers = sum(r is not None for r in requests)
    if answers and stop_on_failures:
        client.check_answers(stage, answers, failures)
    elif answers:
        client.count_answers(stage, answers, failures)


def _with_fallbacks(
    parsed: Sequence[CommunityReport | None], fallbacks: Sequence[tuple[str, str]], keys: Sequence[str | None]
) -> list[CommunityReport]:
    """One report per community: the parsed one (titled by its fallback when it has no
    title), else its extractive fallback; each with the key of the answer it came from."""
    out = []
    for report, (title, summary), key in zip(parsed, fallbacks, keys, strict=True):
        if report is None:
            report = CommunityReport(title=title, summary=summary)
        elif not report.title:
            report.title = title
        report.answer_key = key
        out.append(report)
    return out


# -- HiRAG summary entities -------------------------------------------------------------------


# -- HiRAG summary entities -------------------------------------------------------------------
def summary_request(
    member_names: Sequence[str],
    member_descriptions: Sequence[str],
    *,
    meta_types: Sequence[str] = META_TYPES,
    max_input_tokens: int = DEFAULT_SUMMARY_INPUT_TOKENS,
) -> LLMRequest:
    """The :class:`LLMRequest` for one cluster's summary entity (prompt
    :data:`~graphstrata.llm.prompts.hirag.SUMMARY_ENTITY_PROMPT`).

    Members are listed in the given order (most important first) as ``("name",
    "description")`` lines until ``max_input_tokens`` tokens; each description is clipped to
    ``max(32, max_input_tokens // 16)`` tokens; the first member is always listed.
    """
    row_tokens = _row_cap(max_input_tokens)
    lines: list[str] = []
    left = max_input_tokens
    for i, name in enumerate(member_names):
        desc = member_descriptions[i] if i < len(member_descriptions) else ""
        line = "(" + json.dumps(_clip(name, 32), ensure_ascii=False)
        line += ", " + json.dumps(_clip(desc, row_tokens), ensure_ascii=False) + ")"
        cost = estimate_tokens(line) + 1
        if lines and cost > left:
            break
        lines.append(line)
        left -= cost
    prompt = SUMMARY_ENTITY_PROMPT.format(meta_types=", ".join(meta_types), entities="\n".join(lines))
    return LLMRequest(prompt, SUMMARY_ENTITY_SYSTEM)


def summary_entities(
    client: Any,
    clusters: Sequence[tuple[Sequence[str], Sequence[str]]],
    fallbacks: Sequence[tuple[str, str]],
    *,
    stage: str = SUMMARY_STAGE,
    meta_types: Sequence[str] = META_TYPES,
    max_input_tokens: int = DEFAULT_SUMMARY_INPUT_TOKENS,
) -> list[tuple[str, str]]:
    """HiRAG summary entities (spec seed-hirag.md §2.5), one LLM call per cluster.

    Args:
        client: an :class:`LLMClient` (or an LLM / callable); calls go through ``client.map``.
        clusters: per cluster ``(member_names, member_descriptions)``, members most important
            first (see :func:`summary_request`).
        fallbacks: one extractive ``(name, description)`` per cluster, same order.
        stage: ledger stage of the calls and of the skip count.
        meta_types: the meta summary-entity types X (spec §2.9 default list).
        max_input_tokens: token budget of each cluster's member list (lowered to fit the
            model's context window when the client knows it).

    Returns:
        One ``(name, description)`` per cluster, in input order: the model's first summary
        entity (type dropped; an empty description replaced by the fallback's), or the
        fallback where the output is unreadable (each counted with ``client.skip(stage)``).

    Raises:
        ValueError: ``clusters`` and ``fallbacks`` differ in length, or
            ``max_input_tokens`` < 1.
        LLMError: an LLM call failed after its retries.
    """
    if len(clusters) != len(fallbacks):
        raise ValueError(f"{len(clusters)} clusters but {len(fallbacks)} fallbacks")
    if max_input_tokens < 1:
        raise ValueError(f"max_input_tokens must be >= 1, got {max_input_tokens!r}")
    client = LLMClient.of(client)
    max_input_tokens = client.context_budget(max_input_tokens, SUMMARY_ENTITY_SYSTEM + SUMMARY_ENTITY_PROMPT)
    requests = [
        summary_request(names, descs, meta_types=meta_types, max_input_tokens=max_input_tokens)
        for names, descs in clusters
    ]
    parsed = _complete_parsed(client, requests, parse_summary_entity, stage)
    out = []
    for entity, (name, desc) in zip(parsed, fallbacks, strict=True):
        out.append((name, desc) if entity is None else (entity[0], entity[2] or desc))
    return out
