"""The SQLite rows of an index version (``graphstrata.sqlite``): documents, chunks, entities,
relations, communities and metadata, plus what incremental updates reuse (per-chunk extraction
records, frozen TF-IDF statistics, LLM answers). :func:`write_sqlite` writes a new file,
:func:`read_sqlite` reads one back (columns and tables added by later schemas read as their
defaults from older files). The directory layout around this file is :mod:`graphstrata.store.versions`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..llm.records import LLMAnswers
from ..state import ChunkRecords, FrozenStats
from ..types import Chunk, Community, Document, DocumentChunk, Entity, Relation

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents (pos INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, text TEXT NOT NULL,
                        metadata TEXT NOT NULL);
CREATE TABLE chunks (pos INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, document_id TEXT NOT NULL,
                     idx INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
                     n_tokens INTEGER NOT NULL, text TEXT NOT NULL);
CREATE TABLE entities (pos INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, name TEXT NOT NULL,
                       description TEXT NOT NULL, chunk_ids TEXT NOT NULL, weight REAL NOT NULL,
                       type TEXT NOT NULL DEFAULT '', aliases TEXT NOT NULL DEFAULT '[]');
CREATE TABLE relations (pos INTEGER PRIMARY KEY, source TEXT NOT NULL, target TEXT NOT NULL,
                        description TEXT NOT NULL, weight REAL NOT NULL, chunk_ids TEXT NOT NULL,
                        keywords TEXT NOT NULL DEFAULT '');
CREATE TABLE communities (pos INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, layer INTEGER NOT NULL,
                          members TEXT NOT NULL, entity_ids TEXT NOT NULL, title TEXT NOT NULL,
                          summary TEXT NOT NULL, chunk_ids TEXT NOT NULL,
                          rating REAL, findings TEXT NOT NULL DEFAULT '[]');
CREATE TABLE chunk_records (chunk_id TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE frozen_stats (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE llm_records (chunk_id TEXT PRIMARY KEY, key TEXT NOT NULL, answers BLOB NOT NULL);
CREATE TABLE llm_summaries (key TEXT PRIMARY KEY, summary TEXT NOT NULL);
CREATE TABLE llm_answers (key TEXT PRIMARY KEY, answer BLOB NOT NULL);
CREATE TABLE llm_answer_owners (owner TEXT PRIMARY KEY, key TEXT NOT NULL);
"""


def write_sqlite(
    path: Path,
    meta: dict[str, Any],
    documents: list[Document],
    chunks: list[Chunk],
    entities: list[Entity],
    relations: list[Relation],
    communities: list[Community],
    chunk_records: Any = None,
    frozen: Any = None,
    llm_answers: LLMAnswers | None = None,
) -> None:
    """Write all records into a new SQLite file at ``path`` (must not exist).

    ``chunk_records`` (``{chunk_id: ChunkRecord}`` or :class:`~graphstrata.state.ChunkRecords`,
    schema 4), ``frozen`` (``{name: FrozenTfidf}`` or :class:`~graphstrata.state.FrozenStats`)
    and ``llm_answers`` (:class:`~graphstrata.llm.records.LLMAnswers`: tables ``llm_records``,
    ``llm_summaries``, and the other build-time stages' answers in ``llm_answers`` and
    ``llm_answer_owners``) are what incremental updates need (:mod:`graphstrata.indexing.update`);
    compressed ones are written as they are held.

    Raises:
        ValueError: a record SQLite cannot store (e.g. a lone surrogate in a text), named.
    """
    con = sqlite3.connect(path)
    try:
        con.executescript(_SCHEMA)
        con.executemany(
            "INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()]
        )
        _insert_records(con.executemany, documents, chunks, entities, relations, communities)
        _insert_update_tables(con.executemany, chunk_records, frozen, llm_answers)
        con.commit()
    except (sqlite3.Error, UnicodeEncodeError, ValueError, OverflowError, TypeError) as exc:
        raise ValueError(f"cannot store the index records: {exc}") from exc
    finally:
        con.close()


def _insert_records(
    insert: Callable[[str, Iterable[Any]], Any],
    documents: list[Document],
    chunks: list[Chunk],
    entities: list[Entity],
    relations: list[Relation],
    communities: list[Community],
) -> None:
    """Fill the tables of the records (``insert``: a connection's ``executemany``)."""
    insert(
        "INSERT INTO documents VALUES (?, ?, ?, ?)",
        [(i, d.id, d.text, json.dumps(d.metadata, default=str)) for i, d in enumerate(documents)],
    )
    insert(
        "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (i, c.id, c.document_id, c.index, c.start, c.end, c.n_tokens, c.text)
            for i, c in enumerate(chunks)
        ],
    )
    insert(
        "INSERT INTO entities VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (i, e.id, e.name, e.description, _ids_json(e.chunk_ids), e.weight, e.type,
             _ids_json(e.aliases) if e.aliases else "[]")
            for i, e in enumerate(entities)
        ),
    )
    insert(
        "INSERT INTO relations VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            (i, r.source, r.target, r.description, r.weight, _ids_json(r.chunk_ids), r.keywords)
            for i, r in enumerate(relations)
        ),
    )
    insert(
        "INSERT INTO communities VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (
                i, c.id, c.layer, _ids_json(c.members), _ids_json(c.entity_ids), c.title, c.summary,
                _ids_json(c.chunk_ids), c.rating, json.dumps(c.findings),
            )
            for i, c in enumerate(communities)
        ),
    )


def _insert_update_tables(
    insert: Callable[[str, Iterable[Any]], Any], chunk_records: Any, frozen: Any, llm_answers: LLMAnswers | None
) -> None:
    """Fill the tables only incremental updates read (see :func:`write_sqlite`)."""
    if chunk_records:
        # zlib level 1 (schema 5): records repeat their sentences, 17× smaller on MuSiQue; a
        # state's ChunkRecords already hold exactly these bytes
        recs = ChunkRecords.from_records(chunk_records)
        insert("INSERT INTO chunk_records VALUES (?, ?)", ((cid, recs.raw(cid)) for cid in recs))
    if frozen:
        stats = FrozenStats.from_models(frozen)
        insert("INSERT INTO frozen_stats VALUES (?, ?)", ((n, stats.text(n)) for n in stats))
    if llm_answers is not None:
        insert(
            "INSERT INTO llm_records VALUES (?, ?, ?)",
            ((cid, r.key, r.packed) for cid, r in llm_answers.records.items()),
        )
        insert("INSERT INTO llm_summaries VALUES (?, ?)", llm_answers.summaries.items())
        insert("INSERT INTO llm_answers VALUES (?, ?)", ((k, r.packed) for k, r in llm_answers.stages.items()))
        insert("INSERT INTO llm_answer_owners VALUES (?, ?)", llm_answers.owners.items())


#: columns added in schema 3, read as these defaults from older files
_COLUMN_DEFAULTS = {"type": "''", "aliases": "'[]'", "keywords": "''", "rating": "NULL", "findings": "'[]'"}
#: the tables only updates read, and their queries (absent in older files: read as empty)
_UPDATE_TABLES = {
    "chunk_records": ("SELECT chunk_id, record FROM chunk_records", dict),
    "frozen": ("SELECT name, value FROM frozen_stats", dict),
    "llm_records": ("SELECT chunk_id, key, answers FROM llm_records", list),
    "llm_summaries": ("SELECT key, summary FROM llm_summaries", dict),
    "llm_answers": ("SELECT key, answer FROM llm_answers", list),
    "llm_answer_owners": ("SELECT owner, key FROM llm_answer_owners", list),
}


def read_sqlite(path: Path) -> dict[str, Any]:
    """Read every table of an index's SQLite file.

    Returns:
        ``{"meta": dict, "documents": [...], "chunks": [...], "entities": [...],
        "relations": [...], "communities": [...], "chunk_records": {chunk_id: bytes | str},
        "frozen": {name: JSON text}, "llm_records": [(chunk_id, key, answers), ...],
        "llm_summaries": {key: summary}, "llm_answers": [(key, answer), ...],
        "llm_answer_owners": [(community_id, key), ...]}`` with records in stored order; extraction records,
        frozen statistics and LLM answers as stored (not decoded: only updates read them;
        the LLM tables are empty for an index written without them).

    Raises:
        ValueError: the file is not a readable graphstrata database.
    """
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ValueError(f"cannot open index database {path}: {exc}") from exc
    try:
        q = con.execute
        meta = {k: json.loads(v) for k, v in q("SELECT key, value FROM meta")}
        documents, chunks = _read_texts(q)
        graph = _read_graph(q, {c.id: c.id for c in chunks})
        tables = {row[0] for row in q("SELECT name FROM sqlite_master WHERE type = 'table'")}
        updates = {
            key: kind(q(sql)) if sql.rsplit(" ", 1)[1] in tables else kind()
            for key, (sql, kind) in _UPDATE_TABLES.items()
        }
    except (sqlite3.Error, json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"corrupt index database {path}: {exc}") from exc
    finally:
        con.close()
    return {**updates, "meta": meta, "documents": documents, "chunks": chunks, **graph}


def _read_texts(q: Callable[..., Any]) -> tuple[list[Document], list[Chunk]]:
    """The documents and chunks in stored order (``q``: a connection's ``execute``); a chunk of
    a stored document reads its text from the document (one copy in memory,
    :class:`~graphstrata.types.DocumentChunk`) and names it by the document's own id string."""
    documents = [
        Document(id=i, text=t, metadata=json.loads(m))
        for i, t, m in q("SELECT id, text, metadata FROM documents ORDER BY pos")
    ]
    chunks = [
        Chunk(id=i, document_id=d, index=x, text=t, start=s, end=e, n_tokens=n)
        for i, d, x, s, e, n, t in q(
            "SELECT id, document_id, idx, start, end, n_tokens, text FROM chunks ORDER BY pos"
        )
    ]
    # one str object per id: lists of ids name the chunks' / entities' own id strings
    # (a 44k-chunk index names chunks ~1.5M times), and each document id is shared
    by_id = {d.id: d for d in documents}
    for i, c in enumerate(chunks):
        doc = by_id.get(c.document_id)
        if doc is not None:  # the text is read from the document (once in memory)
            c.document_id = doc.id
            chunks[i] = DocumentChunk.of(c, doc)
    return documents, chunks


def _read_graph(q: Callable[..., Any], chunk_ids: dict[str, str]) -> dict[str, list[Any]]:
    """``{"entities", "relations", "communities"}`` in stored order (``q``: a connection's
    ``execute``; ``chunk_ids``: the canonical chunk id strings), ids and repeated values
    shared as one ``str`` / ``float`` object each."""

    def cols(table: str, *names: str) -> str:
        have = {row[1] for row in q(f"PRAGMA table_info({table})")}
        return ", ".join(n if n in have else f"{_COLUMN_DEFAULTS[n]} AS {n}" for n in names)

    numbers: dict[float, float] = {}  # weights are counts: a few hundred distinct values
    # one str object per distinct description: an offline relation's is the sentence its
    # entities share, often an entity's own (half of them repeat: ~0.5 kB a chunk)
    texts: dict[str, str] = {}
    entities = [
        Entity(
            id=i, name=i if n == i else n, description=texts.setdefault(d, d), chunk_ids=_id_list(c, chunk_ids),
            weight=numbers.setdefault(w, w), type=ty, aliases=tuple(json.loads(al)) if al != "[]" else (),
        )
        for i, n, d, c, w, ty, al in q(
            f"SELECT id, name, description, chunk_ids, weight, {cols('entities', 'type', 'aliases')} "
            "FROM entities ORDER BY pos"
        )
    ]
    node_ids = {e.id: e.id for e in entities}
    relations = [
        Relation(
            source=node_ids.get(s, s), target=node_ids.get(t, t), description=texts.setdefault(d, d),
            weight=numbers.setdefault(w, w),
            chunk_ids=_id_list(c, chunk_ids), keywords=kw,
        )
        for s, t, d, w, c, kw in q(
            f"SELECT source, target, description, weight, chunk_ids, {cols('relations', 'keywords')} "
            "FROM relations ORDER BY pos"
        )
    ]
    communities = []
    for i, layer, m, e, t, s_, c, rating, f in q(
        "SELECT id, layer, members, entity_ids, title, summary, chunk_ids, "
        f"{cols('communities', 'rating', 'findings')} FROM communities ORDER BY pos"
    ):
        communities.append(Community(
            id=i, layer=layer, members=_id_list(m, node_ids), entity_ids=_id_list(e, node_ids),
            title=t, summary=s_, chunk_ids=_id_list(c, chunk_ids), rating=rating,
            findings=_json(f) if f != "[]" else [],
        ))
        node_ids[i] = i
    return {"entities": entities, "relations": relations, "communities": communities}


_DECODE = json.JSONDecoder().raw_decode
_ESCAPE = json.encoder.encode_basestring_ascii  # what json.dumps applies to a str (ensure_ascii)


def _ids_json(ids: list[Any]) -> str:
    """``json.dumps(ids)`` for a list of ids: the same text, each ``str`` escaped by the C
    function ``json.dumps`` itself uses, without its per-call Python overhead (a write encodes
    ~8 id lists per chunk)."""
    try:
        return "[" + ", ".join(map(_ESCAPE, ids)) + "]"
    except TypeError:  # not all str
        return json.dumps(ids)


def _json(text: str) -> Any:
    """``json.loads(text)`` for the texts ``json.dumps`` wrote (no surrounding whitespace),
    without its per-call overhead (a load parses ~8 id lists per chunk).

    Raises:
        json.JSONDecodeError: not one JSON value.
    """
    value, end = _DECODE(text)
    if end != len(text) and text[end:].strip():
        raise json.JSONDecodeError("extra data", text, end)
    return value


def _id_list(text: str, canonical: dict[str, str]) -> list[str]:
    """A stored JSON list of ids, each replaced by the canonical ``str`` object of that id
    when there is one (unknown ids are kept: :func:`~graphstrata.state.check_integrity`
    names them).

    Raises:
        json.JSONDecodeError, TypeError: not a JSON list of strings.
    """
    ids = _json(text)
    if not isinstance(ids, list):
        raise TypeError(f"expected a JSON list of ids, got {text[:40]!r}")
    get = canonical.get
    return [get(x, x) for x in ids]
