"""ArchRAG's adaptive filtering-based generation (``seed-archrag.md`` §3.2, Eq. 3–4, A13).

1. **Groups.** The hits are grouped by layer: layer 0 = the entities and the relations among
   them (tables ``Entities (entity, description)``, ``Relationships (source, target,
   description)``), layer ``i ≥ 1`` = the communities (``Communities (title, summary,
   rating)``); then the chunk hits as a group of their own (``Sources (content)``, our
   addition: the method returns them and they carry the evidence), then any other hits.
2. **Filter** (Eq. 3, "map"): one call per group — a group whose tables exceed
   ``max_context_tokens`` is split into several calls (A13), never merged with another —
   all through ``client.map`` (stage ``"answer:filter"``), each answering scored points
   ``{"points": [{"description", "score": 0-100}]}``. Unreadable answers and point records
   are counted with ``client.skip``; points scored 0 are dropped.
3. **Merge** (Eq. 4, "reduce"): all points sorted by score (descending; ties keep group and
   answer order), rendered as analyst reports and kept up to the first that overflows
   ``max_context_tokens``; one merge call (stage ``"answer:merge"``, the call a streamed
   answer streams) writes the answer, citing report ``j`` as ``[j]``: its citation is the
   chunks behind the hits of that report's point.
4. **No points**: :data:`~.base.NO_ANSWER` without a merge call; with
   ``general_knowledge=True``, the authors' code path instead — a merge call asking for an
   answer from the model's own knowledge, marked ``[LLM: verify]``.

``used_hits``: the hits of the rows that the points in the merge prompt cite (``[Data: ...
(ids)]``, row ids numbered across the tables of one filter call); a point citing no valid id
stands for every row of its call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..llm.base import estimate_tokens
from ..llm.client import LLMClient
from ..llm.prompts.archrag_answer import (
    DEFAULT_RESPONSE_TYPE,
    Point,
    filter_request,
    merge_request,
    parse_points,
    report_block,
    self_answer_request,
)
from ..types import Hit
from .base import BUDGET, NO_ANSWER, RESPONSE_TYPE, FinalCall, GeneratedAnswer, Generator
from .context import (
    COMMUNITY_COLUMNS,
    CONTENT_COLUMNS,
    Row,
    Table,
    clip,
    community_row,
    content_row,
    entity_row,
    numbered,
    pack,
    relation_row,
    render,
    used_hits,
)

FILTER_STAGE = "answer:filter"
MERGE_STAGE = "answer:merge"
SELF_STAGE = "answer:self"

_LAYERED = ("entity", "relation", "community")


def archrag_groups(hits: Sequence[Hit]) -> list[list[Table]]:
    """The filter groups of step 1 (module docstring): one list of tables per layer
    (ascending), then the chunks, then other hits; empty groups left out. Rows keep hit order."""
    layers = sorted({h.layer for h in hits if h.kind in _LAYERED and h.layer is not None})
    groups: list[list[Table]] = []
    for layer in layers:
        mine = [h for h in hits if h.kind in _LAYERED and h.layer == layer]
        tables = [
            Table("Entities", ("entity", "description"),
                  tuple(entity_row(h, details=False) for h in mine if h.kind == "entity")),
            Table("Relationships", ("source", "target", "description"),
                  tuple(relation_row(h, keywords=False, details=False) for h in mine if h.kind == "relation")),
            Table("Communities", COMMUNITY_COLUMNS,
                  tuple(community_row(h) for h in mine if h.kind == "community")),
        ]
        groups.append([t for t in tables if t.rows])
    chunks = [h for h in hits if h.kind == "chunk"]
    if chunks:
        groups.append([Table("Sources", CONTENT_COLUMNS, tuple(content_row(h) for h in chunks))])
    other = [h for h in hits if h.kind != "chunk" and not (h.kind in _LAYERED and h.layer is not None)]
    if other:
        groups.append([Table("Other context", CONTENT_COLUMNS, tuple(content_row(h) for h in other))])
    return groups


@dataclass(frozen=True)
class _Scored:
    point: Point
    hits: tuple[Hit, ...]


def _points(client: LLMClient, text: str, batch: list[Table]) -> list[_Scored]:
    """The points of one filter answer with score > 0, each with the hits it cites."""
    parsed = parse_points(text)
    if parsed is None:
        client.skip(FILTER_STAGE)
        client.fallback(FILTER_STAGE, "unreadable answer, its context dropped")
        return []
    points, bad = parsed
    if bad:
        client.skip(FILTER_STAGE, bad)
    rows = {rid: row for rid, _, row in numbered(batch, continuous=True)}
    every = tuple(h for row in rows.values() for h in row.hits)
    out = []
    for p in points:
        if p.score <= 0:
            continue
        cited = [rows[i] for i in p.cited if i in rows]
        out.append(_Scored(p, tuple(h for row in cited for h in row.hits) if cited else every))
    return out


def _clipped_block(point: Point, limit: int) -> str:
    """Report 1 with ``point``'s description clipped so the block costs at most ``limit``
    tokens (as near as one token of description allows)."""
    room = max(1, limit - estimate_tokens(report_block(1, Point("", point.score)) + "\n\n"))
    while True:
        block = report_block(1, Point(clip(point.description, room), point.score, point.cited))
        if room == 1 or estimate_tokens(block + "\n\n") <= limit:
            return block
        room = max(1, room * 3 // 4)


class ArchRAGGenerator(Generator):
    """ArchRAG adaptive filtering-based generation (see the module docstring).

    Options:
        max_context_tokens: budget in tokens (:func:`~graphstrata.llm.estimate_tokens`) of
            the data tables of one filter call and of the analyst reports of the merge call;
            default 4,000 (spec A13: a 4k-context 8B model); ``None`` = no cut (one filter
            call per group).
        response_type: the target length and format of the merged answer (default
            ``"Multiple Paragraphs"``).
        self_answer: first ask the model for its own step-by-step answer (stage
            ``"answer:self"``) and filter it like one more group (the authors' code, A13);
            default ``False``: the answer rests on the retrieved data only.
        general_knowledge: when no point survives, let the merge call answer from the
            model's own knowledge marked ``[LLM: verify]`` (the authors' code); default
            ``False``: :data:`~.base.NO_ANSWER` without a merge call.
    """

    name = "archrag"
    defaults = {
        "max_context_tokens": 4000,
        "response_type": DEFAULT_RESPONSE_TYPE,
        "self_answer": False,
        "general_knowledge": False,
    }
    option_specs = {"max_context_tokens": BUDGET, "response_type": RESPONSE_TYPE}

    def prepare(
        self, query: str, hits: Sequence[Hit], client: LLMClient, o: Mapping[str, Any]
    ) -> GeneratedAnswer | FinalCall:
        limit = o["max_context_tokens"]
        groups = archrag_groups(hits)
        if o["self_answer"]:
            own = client.request(self_answer_request(query), SELF_STAGE).text.strip()
            if own:
                groups.append([Table("Model's own answer", CONTENT_COLUMNS, (Row((own,)),))])
        batches = [batch for tables in groups for batch in pack(tables, limit)]
        answers = client.map(
            [filter_request(query, render(batch, continuous=True)) for batch in batches], FILTER_STAGE
        )
        scored = [s for batch, a in zip(batches, answers, strict=True) for s in _points(client, a.text, batch)]
        scored.sort(key=lambda s: -s.point.score)  # stable: ties keep group and answer order
        blocks, kept, used = [], [], 0
        for s in scored:
            block = report_block(len(blocks) + 1, s.point)
            cost = estimate_tokens(block + "\n\n")
            if limit is not None and used + cost > limit:
                if not blocks:  # the best point alone overflows: clip it to the budget
                    blocks.append(_clipped_block(s.point, limit))
                    kept.append(s)
                break
            blocks.append(block)
            kept.append(s)
            used += cost
        if not blocks and not o["general_knowledge"]:
            client.fallback("answer", "no usable point in the context, answered that it does not know")
            return GeneratedAnswer(NO_ANSWER)
        req = merge_request(query, "\n\n".join(blocks), o["response_type"], general_knowledge=not blocks)
        sources = {j: s.hits for j, s in enumerate(kept, 1)}  # report j, as the merge prompt numbers them
        return FinalCall(req, MERGE_STAGE, used_hits(Row((), s.hits) for s in kept), sources)
