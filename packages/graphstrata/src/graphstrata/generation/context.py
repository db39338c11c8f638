"""Context building shared by every method's answer step: hits → rows of tables, token
budgets, and rendering.

A :class:`Table` is a titled list of :class:`Row` s, each row backed by the hits it shows.
Two styles render it:

* ``"csv"`` — the LightRAG / HiRAG / ArchRAG data tables (``seed-lightrag.md`` §2.5,
  ``seed-hirag.md`` §3.3): ``-----Title-----``, a fenced ``csv`` block, a header line, one
  line per row with an ``id`` first, cells quoted (``"`` doubled) and joined by ``",\\t"``,
  newlines inside a cell folded to spaces;
* ``"list"`` — numbered passages for plain prompts: ``Title:`` then ``[id] text`` per row.

Budgets are in tokens as :func:`~graphstrata.llm.estimate_tokens` counts them (about 4
characters a token). Every line is counted with its newline, so a rendered context never
exceeds the budget it was cut to.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from ..llm.base import estimate_tokens
from ..types import Hit


@dataclass(frozen=True)
class Row:
    """One row of a table.

    Attributes:
        cells: the cell texts, without the id (the id is the row's position when rendered).
        hits: the hits the row shows (what an answer built on it used).
    """

    cells: tuple[str, ...]
    hits: tuple[Hit, ...] = ()


@dataclass(frozen=True)
class Table:
    """A titled table of rows.

    Attributes:
        title: the section title (``"Entities"``).
        columns: the column names after ``id`` (``("entity", "type", ...)``); ``"list"``
            tables have one column.
        rows: the rows, in the order shown.
        style: ``"csv"`` or ``"list"`` (see the module docstring).
        continues: number the rows on from the table before (its first id follows that
            table's last) even where the tables are numbered each from 1 — so two passage
            tables share one numbering (LightRAG's Sources and Document Chunks in mix mode).
    """

    title: str
    columns: tuple[str, ...]
    rows: tuple[Row, ...] = field(default_factory=tuple)
    style: str = "csv"
    continues: bool = False


def _cell(text: str) -> str:
    return '"' + " ".join(str(text).split()).replace('"', '""') + '"'


def _head(table: Table) -> list[str]:
    if table.style == "csv":
        return [f"-----{table.title}-----", "```csv", ",\t".join(("id", *table.columns))]
    return [f"{table.title}:"]


def _tail(table: Table) -> list[str]:
    return ["```"] if table.style == "csv" else []


def _row_line(table: Table, row_id: int, row: Row) -> str:
    if table.style == "csv":
        return ",\t".join((str(row_id), *(_cell(c) for c in row.cells)))
    return f"[{row_id}] " + "\n".join(c.strip() for c in row.cells if c and c.strip())


def _cost(lines: Iterable[str]) -> int:
    return sum(estimate_tokens(line + "\n") for line in lines)


def clip(text: str, tokens: int) -> str:
    """``text`` cut to at most ``tokens`` tokens (:func:`~graphstrata.llm.estimate_tokens`),
    at a word boundary when one is near, with ``" …"`` marking the cut."""
    if estimate_tokens(text) <= tokens:
        return text
    limit = max(0, tokens * 4 - 2)
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit * 0.8:
        cut = cut[:space]
    return cut.rstrip() + " …"


def fit(tables: Sequence[Table], limit: int | None, continuous: bool = False) -> list[Table]:
    """Cut ``tables`` to ``limit`` tokens in all (``None`` = no cut), sharing the budget.

    Headers of every table are paid first; then each table in order gets an equal share of
    what is left (the budget a table leaves unused passes to the ones after it) and keeps its
    rows greedily in order, stopping at the first row that does not fit (spec §2.4 / §7.7
    truncation).

    Args:
        continuous: the rows will be numbered across tables (:func:`render`'s flag).

    Returns:
        The tables (all of them, possibly with no rows) whose :func:`render` is at most
        ``limit`` tokens — unless the headers alone exceed it, in which case no rows are kept.
    """
    if limit is None:
        return list(tables)
    left = limit - sum(_cost(_head(t) + _tail(t)) + 1 for t in tables)
    out = []
    rid = 0
    for i, t in enumerate(tables):
        share = max(0, left) // (len(tables) - i)
        kept, used = [], 0
        rid = rid if continuous or t.continues else 0
        for row in t.rows:
            cost = _cost([_row_line(t, rid + 1, row)])
            if used + cost > share:
                break
            kept.append(row)
            used += cost
            rid += 1
        left -= used
        out.append(replace(t, rows=tuple(kept)))
    return out


def _clip_row(t: Table, row: Row, room: int) -> Row:
    """``row`` with its cells clipped so that its line costs at most ``room`` tokens (or as
    close as one token a cell allows)."""
    per_cell = max(1, (room - _cost([_row_line(t, 1, Row(("",) * len(row.cells)))])) // max(1, len(row.cells)))
    while True:
        out = Row(tuple(clip(c, per_cell) for c in row.cells), row.hits)
        if per_cell == 1 or _cost([_row_line(t, 1, out)]) <= room:
            return out
        per_cell = max(1, per_cell * 3 // 4)


def pack(tables: Sequence[Table], limit: int | None) -> list[list[Table]]:
    """Split ``tables`` into batches of at most ``limit`` tokens each (``None`` = one batch),
    keeping table and row order; row ids run on across the tables of a batch
    (:func:`render` with ``continuous=True``). A row too long for a batch of its own is
    clipped (:func:`clip`) to fit one.

    Returns:
        The batches, each a list of non-empty tables; ``[]`` when no table has a row.
    """
    batches: list[list[Table]] = []
    cur: list[Table] = []
    used = rid = 0
    for t in tables:
        frame = _cost(_head(t) + _tail(t)) + 1
        rows: list[Row] = []
        for row in t.rows:
            need = _cost([_row_line(t, rid + 1, row)]) + (0 if rows else frame)
            if limit is not None and used + need > limit and (rows or cur):
                if rows:
                    cur.append(replace(t, rows=tuple(rows)))
                batches.append(cur)
                cur, rows, used, rid = [], [], 0, 0
                need = _cost([_row_line(t, 1, row)]) + frame
            if limit is not None and need > limit:  # alone in its batch and still too long
                row = _clip_row(t, row, limit - frame)
                need = _cost([_row_line(t, 1, row)]) + frame
            rows.append(row)
            used += need
            rid += 1
        if rows:
            cur.append(replace(t, rows=tuple(rows)))
    if cur:
        batches.append(cur)
    return batches


def numbered(tables: Sequence[Table], continuous: bool = False) -> list[tuple[int, Table, Row]]:
    """``[(row id, table, row), ...]`` as :func:`render` numbers them."""
    out = []
    rid = 0
    for t in tables:
        if not (continuous or t.continues):
            rid = 0
        for row in t.rows:
            rid += 1
            out.append((rid, t, row))
    return out


def render(tables: Sequence[Table], continuous: bool = False) -> str:
    """The tables as text, one blank line between tables.

    Args:
        continuous: number rows across all tables (1..n) instead of from 1 in each — so a
            row id names one row of the whole context (ArchRAG's cited ids); without it a
            table that :attr:`Table.continues` still numbers on from the one before.
    """
    blocks = []
    rid = 0
    for t in tables:
        if not (continuous or t.continues):
            rid = 0
        lines = _head(t)
        for row in t.rows:
            rid += 1
            lines.append(_row_line(t, rid, row))
        blocks.append("\n".join(lines + _tail(t)))
    return "\n\n".join(blocks)


def used_hits(rows: Iterable[Row]) -> list[Hit]:
    """The hits behind ``rows``, de-duplicated by ``(kind, id)``, first occurrence first."""
    seen: dict[tuple[str, str], Hit] = {}
    for row in rows:
        for h in row.hits:
            seen.setdefault((h.kind, h.id), h)
    return list(seen.values())


def rows_of(tables: Iterable[Table]) -> list[Row]:
    """Every row of ``tables``, in order."""
    return [row for t in tables for row in t.rows]


# -- hits → rows -------------------------------------------------------------------------------


def _strip_prefix(text: str, *names: str) -> str:
    """A hit's description: its text without the ``"name: "`` / ``"a — b: "`` prefix the
    methods put in front (:func:`~graphstrata.methods.base.entity_hit`, relation hits)."""
    prefix = " — ".join(n for n in names if n)
    if prefix and text.startswith(prefix + ":"):
        return text[len(prefix) + 1 :].strip()
    return text.strip()


def _number(value: object) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def entity_row(h: Hit, details: bool = True) -> Row:
    """``(entity, type, description, rank)`` of an entity hit — ``(entity, description)``
    without ``details``. Rank: ``metadata["rank"]`` (the node degree LightRAG ranks by;
    ``""`` when the method gives none); type: ``metadata["type"]`` (``""`` offline)."""
    name = str(h.metadata.get("name") or h.id)
    desc = _strip_prefix(h.text, name)
    if not details:
        return Row((name, desc), (h,))
    return Row((name, str(h.metadata.get("type") or ""), desc, _number(h.metadata.get("rank"))), (h,))


def relation_row(h: Hit, keywords: bool = True, details: bool = True) -> Row:
    """``(source, target, description[, keywords][, weight, rank])`` of a relation hit
    (``keywords``: ``metadata["keywords"]``, ``""`` offline; ``details``: weight and rank)."""
    src, dst = str(h.metadata.get("source") or ""), str(h.metadata.get("target") or "")
    desc = _strip_prefix(h.text, src, dst)
    cells = [src, dst, desc]
    if keywords:
        cells.append(str(h.metadata.get("keywords") or ""))
    if details:
        cells += [_number(h.metadata.get("weight")), _number(h.metadata.get("rank"))]
    return Row(tuple(cells), (h,))


def path_row(h: Hit) -> Row:
    """``(source, target, description, weight, rank)`` of a path hit (HiRAG's reasoning
    path ``a → b → c``): its first and last node, the whole path as the description."""
    names = [n.strip() for n in h.text.split("→")]
    return Row((names[0], names[-1], h.text, "", ""), (h,))


def passage_row(h: Hit) -> Row:
    """``(text,)`` of a chunk hit for a ``"list"`` table, ``("Title: <title>", text)`` when
    its document has a ``title`` the text does not start with."""
    meta = h.metadata.get("document_metadata") or {}
    title = str(meta.get("title") or "").strip() if isinstance(meta, dict) else ""
    if title and not h.text.lstrip().startswith(title):
        return Row((f"Title: {title}", h.text), (h,))
    return Row((h.text,), (h,))


def content_row(h: Hit) -> Row:
    """``(content,)`` of any hit: its text (chunks, community reports, paths)."""
    return Row((h.text,), (h,))


def community_row(h: Hit) -> Row:
    """``(title, summary, rating)`` of a community hit (rating: the LLM report's, ``""``
    offline)."""
    title = str(h.metadata.get("title") or "")
    summary = h.text[len(title) :].strip() if title and h.text.startswith(title) else h.text
    return Row((title, summary, _number(h.metadata.get("rating"))), (h,))


def of_kind(hits: Iterable[Hit], *kinds: str) -> list[Hit]:
    """The hits of ``kinds``, in order."""
    return [h for h in hits if h.kind in kinds]


ENTITY_COLUMNS = ("entity", "type", "description", "rank")
RELATION_COLUMNS = ("source", "target", "description", "keywords", "weight", "rank")
BRIDGE_COLUMNS = ("source", "target", "description", "weight", "rank")
CONTENT_COLUMNS = ("content",)
COMMUNITY_COLUMNS = ("title", "summary", "rating")
