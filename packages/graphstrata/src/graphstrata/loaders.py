"""Turn user input (texts, paths, folders, records) into :class:`~graphstrata.types.Document`s.

Accepted inputs, each element of the iterable passed to ``GraphStrata.build``/``insert``:

* :class:`Document` — kept as is;
* ``dict`` with ``"text"`` and optional ``"id"``, ``"title"``, ``"metadata"``;
* :class:`pathlib.Path`, or a ``str`` naming an existing file or folder — ``.txt`` / ``.md``
  files become one document each (id = file name, or the path relative to a given folder);
  ``.jsonl`` files give one document per line ``{"id", "title", "text"}`` (title prepended to
  the text, kept in ``metadata["title"]``); folders are walked recursively for those suffixes;
* any other ``str`` — the document text itself (id ``"doc-<n>"``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .types import Document

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
JSONL_SUFFIXES = (".jsonl",)
SUFFIXES = TEXT_SUFFIXES + JSONL_SUFFIXES


def _read_text(path: Path) -> str:
    """Read a UTF-8 text file; ``ValueError`` for an empty or binary file."""
    data = path.read_bytes()
    if not data.strip():
        raise ValueError(f"{path}: empty file")
    if b"\x00" in data[:8192]:
        raise ValueError(f"{path}: binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def jsonl_objects(path: Path, required: str) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-empty line of a JSONL file.

    Args:
        path: the file (UTF-8 text).
        required: a key whose value must be a string in every object.

    Raises:
        FileNotFoundError: no such file.
        ValueError: an empty or binary file, a line that is not JSON, or an object without a
            string ``required`` field (file and line number in the message).
    """
    out = []
    for lineno, line in enumerate(_read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from exc
        if not isinstance(rec, dict) or not isinstance(rec.get(required), str):
            raise ValueError(f'{path}:{lineno}: expected an object with a "{required}" string')
        out.append((lineno, rec))
    return out


def _jsonl_documents(path: Path) -> list[Document]:
    docs = []
    for lineno, rec in jsonl_objects(path, "text"):
        docs.append(_record_document(rec, default_id=f"{path.name}:{lineno}", source=str(path)))
    if not docs:
        raise ValueError(f"{path}: no records")
    return docs


def _record_document(rec: dict[str, Any], default_id: str, source: str | None = None) -> Document:
    title = rec.get("title")
    text = rec["text"]
    metadata = dict(rec.get("metadata") or {})
    if title:
        metadata.setdefault("title", str(title))
        text = f"{title}\n{text}"
    if source:
        metadata.setdefault("source", source)
    return Document(id=str(rec.get("id") or default_id), text=text, metadata=metadata)


def _file_documents(path: Path, doc_id: str) -> list[Document]:
    if path.suffix.lower() in JSONL_SUFFIXES:
        return _jsonl_documents(path)
    if path.suffix.lower() not in TEXT_SUFFIXES:
        raise ValueError(f"{path}: unsupported file type {path.suffix!r} (use {', '.join(SUFFIXES)})")
    return [Document(id=doc_id, text=_read_text(path), metadata={"source": str(path)})]


def _looks_like_path(s: str) -> bool:
    return "\n" not in s and len(s) < 4096 and (
        s.lower().endswith(SUFFIXES) or s.endswith(os.sep) or s.endswith("/")
    )


def load_documents(inputs: Iterable[Any], start: int = 0) -> list[Document]:
    """Normalise ``inputs`` into documents (see the module docstring for accepted forms).

    Args:
        inputs: iterable of documents, dicts, paths or texts. A single ``str``/``Path`` is
            treated as a one-element list.
        start: first number used for generated ids ``"doc-<n>"``.

    Returns:
        Documents in input order (folders sorted by path).

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: an empty, binary or non-UTF-8 file; an unsupported suffix; a malformed
            JSONL line; an element of unsupported type; duplicate document ids.
    """
    if isinstance(inputs, (str, Path, Document, dict)):
        inputs = [inputs]
    docs: list[Document] = []
    n = start
    for item in inputs:
        if isinstance(item, Document):
            if not isinstance(item.text, str):
                raise ValueError(f"document {item.id!r}: text must be a str")
            docs.append(item)
        elif isinstance(item, dict):
            if not isinstance(item.get("text"), str):
                raise ValueError('a dict document needs a "text" string')
            docs.append(_record_document(item, default_id=f"doc-{n}"))
            n += 1
        elif isinstance(item, Path) or (isinstance(item, str) and (os.path.exists(item) or _looks_like_path(item))):
            path = Path(item)
            if not path.exists():
                raise FileNotFoundError(f"no such file or folder: {path}")
            if path.is_dir():
                files = sorted(
                    p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES
                )
                if not files:
                    raise ValueError(f"{path}: folder has no {', '.join(SUFFIXES)} files")
                for f in files:
                    docs.extend(_file_documents(f, f.relative_to(path).as_posix()))
            else:
                docs.extend(_file_documents(path, path.name))
        elif isinstance(item, str):
            docs.append(Document(id=f"doc-{n}", text=item))
            n += 1
        else:
            raise ValueError(
                f"unsupported document type {type(item).__name__}: pass str, Path, dict or "
                "graphstrata.Document"
            )
    seen: set[str] = set()
    for d in docs:
        if d.id in seen:
            raise ValueError(f"duplicate document id {d.id!r}")
        seen.add(d.id)
    return docs
