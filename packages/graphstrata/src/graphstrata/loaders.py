"""Turn user input (texts, paths, folders, records) into :class:`~graphstrata.types.Document`s.

Accepted inputs, each element of the iterable passed to ``GraphStrata.build``/``insert``:

* :class:`Document` — kept as is;
* ``dict`` with ``"text"`` and optional ``"id"``, ``"title"``, ``"metadata"``;
* :class:`pathlib.Path` — ``.txt``, ``.md``, ``.rst`` and ``.html`` files become one document
  each (id = file name, or the path relative to a given folder); Markdown, reST and HTML are
  read as the text a reader sees (:mod:`graphstrata.markup`: no tags, directives, heading
  underlines; ``metadata["text_format"]`` names the markup and
  :func:`graphstrata.markup.source_span` maps offsets back into the file); ``.jsonl`` files
  give one document per line
  ``{"id", "title", "text"}`` (title prepended to the text, kept in ``metadata["title"]``);
  folders are walked recursively for those suffixes;
* ``str`` — always the document text itself, never a file name (texts come from users: a text
  that happens to name a file on this machine must not be read from disk). Pass file names
  as ``Path`` objects or through ``paths=`` / the CLI.

Folders are read defensively (issue 30): a symlink inside a folder that points outside it is
refused unless ``follow_symlinks=True``; only regular files are opened (a FIFO, device or
socket is refused by its type, without opening it); a file is refused by its size before it is
read when it has more bytes than ``max_document_chars`` (UTF-8 needs at least one byte per
character); and files are read in pieces of :data:`READ_PIECE` bytes, never more than that
limit in all (:func:`check_source_file`, :func:`read_file_bounded`).

Documents without an id get ``"doc-<first 16 hex digits of the text's sha256>"`` — stable
across runs and never reused after a delete; a second identical text in the same index gets
``"-2"``, ``"-3"``, ... appended.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Container, Iterable, Iterator
from pathlib import Path
from typing import Any

from .config import DEFAULT_MAX_DOCUMENT_CHARS
from .markup import FORMAT_KEY, visible_text
from .types import Document

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".html", ".htm")
JSONL_SUFFIXES = (".jsonl",)
SUFFIXES = TEXT_SUFFIXES + JSONL_SUFFIXES
READ_PIECE = 1 << 20
"""Bytes read from a file per ``read`` call (:func:`read_file_bounded`)."""


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_source_file(
    path: Path, root: Path | None = None, follow_symlinks: bool = False,
    max_bytes: int | None = DEFAULT_MAX_DOCUMENT_CHARS,
) -> os.stat_result:
    """Check a file before anything is read from it (``stat`` only: a FIFO is never opened).

    Args:
        path: the file.
        root: the folder it was found in (resolved), or ``None`` for a path the caller named.
        follow_symlinks: allow a symlink found in ``root`` to point outside it.
        max_bytes: largest size accepted in bytes (``None``: no limit).

    Returns:
        The ``os.stat`` of the file (of the symlink's target).

    Raises:
        FileNotFoundError: it does not exist (or is a dangling symlink).
        ValueError: a symlink out of ``root`` (unless ``follow_symlinks``), a FIFO, device,
            socket or anything but a regular file, or a file larger than ``max_bytes``; the
            message names the path and the problem.
    """
    if root is not None and not follow_symlinks and path.is_symlink():
        target = path.resolve()
        if not target.is_relative_to(root):
            raise ValueError(
                f"{path}: symlink to {target}, outside the folder {root}; not followed "
                "(load_documents(..., follow_symlinks=True) allows it)"
            )
    try:
        st = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"no such file: {path} (or a dangling symlink)") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path}: {_file_kind(st.st_mode)}, not a regular file; refused")
    if max_bytes is not None and st.st_size > max_bytes:
        raise ValueError(
            f"{path}: {st.st_size:,} bytes, more than max_document_chars={max_bytes:,} "
            "(a file is checked by its size in bytes before it is read)"
        )
    return st


def _open_regular(path: Path) -> int:
    """A read-only descriptor of ``path``, opened non-blocking (a FIFO does not wait for a
    writer) and refused unless it is a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ValueError(f"{path}: {_file_kind(mode)}, not a regular file; refused")
    return fd


def read_file_bounded(path: Path, max_bytes: int | None = DEFAULT_MAX_DOCUMENT_CHARS) -> bytes:
    """The bytes of a regular file, read in pieces of :data:`READ_PIECE`, at most ``max_bytes``.

    The file is opened non-blocking and checked again on the open descriptor, so a file
    swapped for a FIFO or device after :func:`check_source_file` cannot block or stream
    forever.

    Raises:
        ValueError: not a regular file, or more than ``max_bytes`` bytes (also when it grew
            while being read).
        OSError: it cannot be opened or read.
    """
    fd = _open_regular(path)
    try:
        st = os.fstat(fd)
        limit = None if max_bytes is None else int(max_bytes)
        if limit is not None and st.st_size > limit:
            raise ValueError(f"{path}: {st.st_size:,} bytes, more than max_document_chars={limit:,}")
        pieces, total = [], 0
        while True:
            piece = os.read(fd, READ_PIECE)
            if not piece:
                break
            total += len(piece)
            if limit is not None and total > limit:
                raise ValueError(f"{path}: more than max_document_chars={limit:,} bytes (it grew while read)")
            pieces.append(piece)
        return b"".join(pieces)
    finally:
        os.close(fd)


def iter_folder_files(
    folder: Path, follow_symlinks: bool = False, suffixes: tuple[str, ...] = SUFFIXES
) -> Iterator[Path]:
    """Files under ``folder`` whose suffix is in ``suffixes``, sorted by path, without leaving
    the folder: symlinked folders are not entered unless ``follow_symlinks`` (then each real
    folder once, so a link cycle ends), and a symlinked file is yielded for
    :func:`check_source_file` to judge. Nothing is opened here."""
    root = folder.resolve()
    seen: set[Path] = set()
    found = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=follow_symlinks):
        real = Path(dirpath).resolve()
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        if not follow_symlinks and not real.is_relative_to(root):  # pragma: no cover - os.walk keeps out
            dirnames[:] = []
            continue
        dirnames.sort()
        found.extend(Path(dirpath) / f for f in filenames if Path(f).suffix.lower() in suffixes)
    return iter(sorted(found))


def _read_text(path: Path, max_bytes: int | None = DEFAULT_MAX_DOCUMENT_CHARS) -> str:
    """Read a UTF-8 text file (bounded, :func:`read_file_bounded`); ``ValueError`` for an
    empty or binary file."""
    data = read_file_bounded(path, max_bytes)
    if not data.strip():
        raise ValueError(f"{path}: empty file")
    if b"\x00" in data[:8192]:
        raise ValueError(f"{path}: binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def jsonl_objects(
    path: Path, required: str, max_line_bytes: int | None = DEFAULT_MAX_DOCUMENT_CHARS
) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-empty line of a JSONL file, read line by line in
    bounded pieces (a line is never read past ``max_line_bytes``).

    Args:
        path: the file (UTF-8 text; a regular file).
        required: a key whose value must be a string in every object.
        max_line_bytes: longest line accepted in bytes (``None``: no limit).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a FIFO, device or socket; an empty or binary file; a line longer than
            ``max_line_bytes``, not UTF-8 or not JSON; an object without a string
            ``required`` field (file and line number in the message).
    """
    out = []
    fd = _open_regular(path)
    limit = None if max_line_bytes is None else int(max_line_bytes)
    nonblank = False
    with os.fdopen(fd, "rb", buffering=READ_PIECE) as f:
        if b"\x00" in f.peek(8192)[:8192]:  # before a (long) first line is read
            raise ValueError(f"{path}: binary file, not text")
        lineno = 0
        while True:
            raw = f.readline(-1 if limit is None else limit + 2)
            if not raw:
                break
            lineno += 1
            body = raw.rstrip(b"\r\n")
            if limit is not None and len(body) > limit:
                raise ValueError(f"{path}:{lineno}: line longer than max_document_chars={limit:,} bytes")
            if not body.strip():
                continue
            nonblank = True
            try:
                line = body.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from exc
            if not isinstance(rec, dict) or not isinstance(rec.get(required), str):
                raise ValueError(f'{path}:{lineno}: expected an object with a "{required}" string')
            out.append((lineno, rec))
    if not nonblank:
        raise ValueError(f"{path}: empty file")
    return out


def _jsonl_documents(path: Path, max_bytes: int | None = DEFAULT_MAX_DOCUMENT_CHARS) -> list[Document]:
    docs = []
    for lineno, rec in jsonl_objects(path, "text", max_bytes):
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


def _file_documents(path: Path, doc_id: str, root: Path | None = None, follow_symlinks: bool = False,
                    max_bytes: int | None = DEFAULT_MAX_DOCUMENT_CHARS) -> list[Document]:
    jsonl = path.suffix.lower() in JSONL_SUFFIXES
    if not jsonl and path.suffix.lower() not in TEXT_SUFFIXES:
        raise ValueError(f"{path}: unsupported file type {path.suffix!r} (use {', '.join(SUFFIXES)})")
    # a JSONL file holds many documents: its lines are bounded, not the file
    check_source_file(path, root, follow_symlinks, None if jsonl else max_bytes)
    if jsonl:
        return _jsonl_documents(path, max_bytes)
    text, fmt = visible_text(_read_text(path, max_bytes), path)
    meta = {"source": str(path)} if fmt is None else {"source": str(path), FORMAT_KEY: fmt}
    return [Document(id=doc_id, text=text, metadata=meta)]


def _path_documents(path: Path, follow_symlinks: bool = False,
                    max_bytes: int | None = DEFAULT_MAX_DOCUMENT_CHARS) -> list[Document]:
    if not path.exists():
        raise FileNotFoundError(f"no such file or folder: {path}")
    if path.is_dir():
        root = path.resolve()
        files = list(iter_folder_files(path, follow_symlinks))
        if not files:
            raise ValueError(f"{path}: folder has no {', '.join(SUFFIXES)} files")
        return [
            d for f in files
            for d in _file_documents(f, f.relative_to(path).as_posix(), root, follow_symlinks, max_bytes)
        ]
    return _file_documents(path, path.name, None, follow_symlinks, max_bytes)


def load_documents(
    inputs: Iterable[Any] = (),
    paths: Iterable[str | os.PathLike] = (),
    taken: Container[str] = (),
    follow_symlinks: bool = False,
    max_document_chars: int | None = DEFAULT_MAX_DOCUMENT_CHARS,
) -> list[Document]:
    """Normalise ``inputs`` and the files under ``paths`` into documents (see the module
    docstring for accepted forms).

    Args:
        inputs: iterable of documents, dicts, ``Path`` s or texts. A single ``str`` (a text),
            ``Path``, ``Document`` or dict is treated as a one-element list.
        paths: files or folders to read (``str`` or ``PathLike``), loaded after ``inputs``.
        taken: ids already in use (an index's documents): generated ids avoid them.
        follow_symlinks: follow symlinks found inside a folder to files or folders outside
            it (default: refused with ``ValueError``). A path named directly is always read.
        max_document_chars: a text file with more bytes than this is refused before it is
            read (and a JSONL line longer than this); ``None``: no limit.

    Returns:
        Documents in input order (folders sorted by path).

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: a symlink out of a folder (unless ``follow_symlinks``); a FIFO, device,
            socket or other non-regular file; a file over ``max_document_chars`` bytes; an
            empty, binary or non-UTF-8 file; an unsupported suffix; a malformed
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
            docs.extend(_path_documents(item, follow_symlinks, max_document_chars))
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
        docs.extend(_path_documents(Path(p), follow_symlinks, max_document_chars))
    seen: set[str] = set()
    for d in docs:
        if d.id in seen:
            raise ValueError(f"duplicate document id {d.id!r}")
        seen.add(d.id)
        _check_unicode(d)
    return docs

