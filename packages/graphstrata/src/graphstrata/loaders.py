"""Turn user input (texts, paths, folders, records) into :class:`~graphstrata.types.Document`s.

Accepted inputs, each element of the iterable passed to ``GraphStrata.build``/``insert``:

* :class:`Document` — kept as is;
* ``dict`` with ``"text"`` and optional ``"id"``, ``"title"``, ``"metadata"``;
* :class:`pathlib.Path` — ``.txt`` / ``.md`` files become one document each (id = file name, or
  the path relative to a given folder); ``.jsonl`` files give one document per line
  ``{"id", "title", "text"}`` (title prepended to the text, kept in ``metadata["title"]``);
  folders are walked recursively for those suffixes;
* ``str`` — always the document text itself, never a file name (texts come from users: a text
  that happens to name a file on this machine must not be read from disk). Pass file names
  as ``Path`` objects or through ``paths=`` / the CLI.

Documents without an id get ``"doc-<first 16 hex digits of the text's sha256>"`` — stable
across runs and never reused after a delete; a second identical text in the same index gets
``"-2"``, ``"-3"``, ... appended.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Container, Iterable
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


def text_id(text: str, taken: Container[str] = ()) -> str:
    """Content-hash id of a text: ``"doc-<16 hex digits of sha256(text)>"``, with ``"-<n>"``
    appended (n = 2, 3, ...) while the id is in ``taken``."""
    base = "doc-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    out, n = base, 1
    while out in taken:
        n += 1
        out = f"{base}-{n}"
    return out


def _check_unicode(doc: Document) -> None:
    """``ValueError`` naming the document when its text or metadata is not encodable UTF-8."""
    try:
        doc.text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"document {doc.id!r}: text is not valid Unicode ({exc.reason} at character {exc.start})"
        ) from None
    try:
        doc.id.encode("utf-8")
        json.dumps(doc.metadata, default=str).encode("utf-8")
    except (UnicodeEncodeError, TypeError, ValueError) as exc:
        raise ValueError(f"document {doc.id!r}: id or metadata is not storable ({exc})") from None


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


def _path_documents(path: Path) -> list[Document]:
    if not path.exists():
        raise FileNotFoundError(f"no such file or folder: {path}")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        if not files:
            raise ValueError(f"{path}: folder has no {', '.join(SUFFIXES)} files")
        return [d for f in files for d in _file_documents(f, f.relative_to(path).as_posix())]
    return _file_documents(path, path.name)


def load_documents(
    inputs: Iterable[Any] = (),
    paths: Iterable[str | os.PathLike] = (),
    taken: Container[str] = (),
) -> list[Document]:
    """Normalise ``inputs`` and the files under ``paths`` into documents (see the module
    docstring for accepted forms).

    Args:
        inputs: iterable of documents, dicts, ``Path`` s or texts. A single ``str`` (a text),
            ``Path``, ``Document`` or dict is treated as a one-element list.
        paths: files or folders to read (``str`` or ``PathLike``), loaded after ``inputs``.
        taken: ids already in use (an index's documents): generated ids avoid them.

    Returns:
        Documents in input order (folders sorted by path).

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: an empty, binary or non-UTF-8 file; an unsupported suffix; a malformed
            JSONL line; an element of unsupported type; a text or metadata that is not valid
            Unicode (a lone surrogate, named with its document); an empty or non-str id;
            duplicate document ids.
    """
    if isinstance(inputs, (str, Path, Document, dict)):
        inputs = [inputs]
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    docs: list[Document] = []
    used = set(taken)

    def new_id(text: str) -> str:
        return text_id(text, used)

    for item in inputs:
        before = len(docs)
        if isinstance(item, Document):
            if not isinstance(item.text, str):
                raise ValueError(f"document {item.id!r}: text must be a str")
            if not isinstance(item.id, str) or not item.id:
                raise ValueError(f"document id must be a non-empty str, got {item.id!r}")
            docs.append(item)
        elif isinstance(item, dict):
            if not isinstance(item.get("text"), str):
                raise ValueError('a dict document needs a "text" string')
            docs.append(_record_document(item, default_id=new_id(item["text"])))
        elif isinstance(item, Path):
            docs.extend(_path_documents(item))
        elif isinstance(item, str):
            docs.append(Document(id=new_id(item), text=item))
        else:
            raise ValueError(
                f"unsupported document type {type(item).__name__}: pass str (a text), Path, "
                "dict or graphstrata.Document"
            )
        used.update(d.id for d in docs[before:])
    for p in paths:
        if not isinstance(p, (str, os.PathLike)):
            raise ValueError(f"paths must be str or Path, got {type(p).__name__}")
        docs.extend(_path_documents(Path(p)))
    seen: set[str] = set()
    for d in docs:
        if d.id in seen:
            raise ValueError(f"duplicate document id {d.id!r}")
        seen.add(d.id)
        _check_unicode(d)
    return docs

