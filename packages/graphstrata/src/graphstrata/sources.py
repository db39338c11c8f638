"""Files and folders as the command line reads them: every file is indexed or skipped with a
reason, PDFs through pypdf, a fallback encoding, and a content hash per file for updates.

:func:`graphstrata.loaders.load_documents` (the Python API) stops at the first file it cannot
read. A folder of real documents holds PDFs, a stray binary file, a file in Latin-1; the CLI
reads it with :func:`load_sources`, which gives the documents it could read and a
:class:`Skipped` entry (path and reason) for every file it could not — or, with
``on_error="fail"``, raises at the first one.

What a file becomes:

* ``.txt`` / ``.md`` / ``.markdown`` / ``.rst`` / ``.html`` / ``.htm``: one document, decoded
  as UTF-8, else as ``encoding`` when one is given (``"latin-1"``, ``"cp1252"``, ...); a file
  with a NUL byte in its first 8 KiB is binary and skipped; Markdown, reST (also
  ``.rst.txt``) and HTML are read as the text a reader sees (:mod:`graphstrata.markup`,
  ``metadata["text_format"]`` naming the markup), and one with no visible text is skipped;
* ``.pdf``: one document of its pages' text (pypdf, the ``graphstrata[pdf]`` extra; without it
  PDFs are skipped with a reason naming the extra);
* ``.jsonl``: one document per line ``{"id", "title", "text", "metadata"}`` (as the loaders;
  UTF-8, as JSON text is);
* anything else in a folder is skipped as an unsupported type; hidden files and folders (a
  name starting with ``"."``, e.g. ``.git``) are not looked at.

Every file passes the loaders' safety checks before a byte is read
(:func:`graphstrata.loaders.check_source_file`): a symlink found in a folder that points out of
it (unless ``follow_symlinks``), a FIFO, device or socket, and a text or PDF file of more bytes
than ``max_document_chars`` are skipped with the reason, judged by ``stat`` alone (a FIFO is
never opened). Text and PDF files are then read in bounded pieces
(:func:`graphstrata.loaders.read_file_bounded`); a JSONL file is hashed in pieces and parsed
line by line, each line bounded by ``max_document_chars``.

Every document gets ``metadata["source"]`` (the path as walked), ``metadata["file"]`` (the
file's key: its path relative to the folder given, or its name for a file given directly) and
``metadata["file_sha256"]`` (SHA-256 of the file's bytes); ``graphstrata update`` compares
those to add, replace and delete documents file by file. Documents of text and PDF files have
the file key as id.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .config import DEFAULT_MAX_DOCUMENT_CHARS
from .loaders import (
    JSONL_SUFFIXES,
    READ_PIECE,
    TEXT_SUFFIXES,
    check_source_file,
    jsonl_objects,
    read_file_bounded,
)
from .markup import FORMAT_KEY, visible_text
from .types import Document

PDF_SUFFIXES = (".pdf",)
SOURCE_SUFFIXES = TEXT_SUFFIXES + JSONL_SUFFIXES + PDF_SUFFIXES
ON_ERROR = ("skip", "fail")
#: Metadata keys :func:`load_sources` writes on every document.
FILE_KEY, HASH_KEY = "file", "file_sha256"
_BINARY_PROBE = 8192


@dataclass(frozen=True)
class Skipped:
    """A file that was not indexed: ``path`` as walked, ``reason`` in words."""

    path: str
    reason: str


@dataclass
class SourceLoad:
    """What :func:`load_sources` read.

    Attributes:
        documents: the documents of the files read, in walk order (sorted paths).
        skipped: the files that were not read, with why.
        files: ``{file key: sha256 hex}`` of every supported file found (read, unchanged or
            skipped): what exists now. A file refused before it was read (a symlink out of
            the folder, a FIFO, too large, unreadable) has ``""``: it exists, so
            ``graphstrata update`` keeps what it had indexed from it.
        unchanged: keys of files left unread because ``known`` had the same hash.
    """

    documents: list[Document] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)


def iter_source_files(paths: Iterable[str | os.PathLike]) -> Iterator[tuple[Path, str, Path | None]]:
    """``(file, key, root)`` for each file named in ``paths`` and each file under each folder
    (recursively, sorted, hidden entries left out; symlinked folders are not entered).
    ``key`` is the path relative to the folder, or the file's name; ``root`` is the folder
    resolved (``None`` for a file named directly), for
    :func:`graphstrata.loaders.check_source_file` to refuse a symlink out of it. Nothing is
    opened or judged here: a symlinked file, FIFO or device is yielded like any file.

    Raises:
        FileNotFoundError: a path that does not exist.
    """
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise FileNotFoundError(f"no such file or folder: {path}")
        if not path.is_dir():
            yield path, path.name, None
            continue
        root = path.resolve()
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.startswith("."):
                    continue
                f = Path(dirpath) / name
                yield f, f.relative_to(path).as_posix(), root


def _sha256_file(path: Path) -> str:
    """SHA-256 hex of a regular file's bytes, read in pieces of ``READ_PIECE`` (constant
    memory whatever its size); opened non-blocking and checked on the descriptor, so a file
    swapped for a FIFO after the ``stat`` check cannot block."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb", buffering=0) as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file; refused")
        digest = hashlib.sha256()
        while piece := f.read(READ_PIECE):
            digest.update(piece)
    return digest.hexdigest()


def decode_text(data: bytes, path: Path, encoding: str | None = None) -> str:
    """The text of a text file's bytes: UTF-8 (a BOM is dropped), else ``encoding``.

    Raises:
        ValueError: empty; binary (a NUL byte in the first 8 KiB); not UTF-8 and no (or a
            failing) ``encoding`` — the message suggests ``--encoding``; an unknown encoding.
    """
    if not data.strip():
        raise ValueError("empty file")
    if b"\x00" in data[:_BINARY_PROBE]:
        raise ValueError("binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if not encoding or encoding.replace("-", "").lower() in ("utf8", "utf8sig"):
            raise ValueError(
                f"not UTF-8 text ({exc.reason} at byte {exc.start}); if it is Latin-1 or "
                "Windows text, pass --encoding latin-1 (or cp1252)"
            ) from None
    try:
        return data.decode(encoding)
    except LookupError:
        raise ValueError(f"unknown encoding {encoding!r}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"neither UTF-8 nor {encoding} ({exc.reason} at byte {exc.start})") from None


def pdf_text(path: Path, data: bytes | None = None) -> str:
    """The text of a PDF's pages (pypdf), pages joined by blank lines.

    Args:
        path: the file (named in errors; read when ``data`` is ``None``).
        data: the file's bytes, already read (bounded) by the caller.

    Raises:
        ValueError: pypdf is not installed (names the ``graphstrata[pdf]`` extra), the file is
            not a readable PDF (encrypted, damaged), or it has no extractable text (scanned
            pages).
    """
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError:
        raise ValueError("PDF text needs pypdf: pip install 'graphstrata[pdf]'") from None
    try:
        reader = PdfReader(io.BytesIO(data) if data is not None else str(path))
        if reader.is_encrypted:
            raise ValueError("encrypted PDF")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except (PyPdfError, OSError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a readable PDF ({type(exc).__name__}: {exc})") from None
    text = "\n\n".join(p for p in pages if p)
    if not text.strip():
        raise ValueError("PDF has no extractable text (scanned pages need OCR first)")
    return text


def _documents(path: Path, key: str, data: bytes, digest: str, encoding: str | None) -> list[Document]:
    """The documents of a text or PDF file's bytes."""
    base = {"source": str(path), FILE_KEY: key, HASH_KEY: digest}
    if path.suffix.lower() in PDF_SUFFIXES:
        return [Document(id=key, text=pdf_text(path, data), metadata=dict(base))]
    text, fmt = visible_text(decode_text(data, path, encoding), path)
    if fmt is not None:
        base[FORMAT_KEY] = fmt
    return [Document(id=key, text=text, metadata=dict(base))]


def _jsonl_documents(
    path: Path, key: str, digest: str | None, max_line_bytes: int | None
) -> tuple[list[Document], str]:
    """The documents of a JSONL file, one per line (lines bounded by ``max_line_bytes``), and
    the file's hash (``digest``, or computed after the parse: a binary or malformed file is
    refused at its first bytes / line, not after hashing all of it)."""
    records = jsonl_objects(path, "text", max_line_bytes)
    digest = digest or _sha256_file(path)
    base = {"source": str(path), FILE_KEY: key, HASH_KEY: digest}
    docs = []
    for lineno, rec in records:
        body, meta = rec["text"], dict(rec.get("metadata") or {})
        if rec.get("title"):
            meta.setdefault("title", str(rec["title"]))
            body = f"{rec['title']}\n{body}"
        meta.setdefault("source", base["source"])
        meta.update({FILE_KEY: key, HASH_KEY: digest})
        docs.append(Document(id=str(rec.get("id") or f"{path.name}:{lineno}"), text=body, metadata=meta))
    if not docs:
        raise ValueError("no records")
    return docs, digest


def load_sources(
    paths: Iterable[str | os.PathLike],
    encoding: str | None = None,
    on_error: str = "skip",
    known: Mapping[str, str] | None = None,
    max_document_chars: int | None = DEFAULT_MAX_DOCUMENT_CHARS,
    follow_symlinks: bool = False,
) -> SourceLoad:
    """Read the files under ``paths`` (see the module docstring).

    Args:
        paths: files and folders.
        encoding: the codec for text files that are not UTF-8 (``None``: such files are
            skipped, or fail, with a reason suggesting ``--encoding``).
        on_error: ``"skip"`` records a file that cannot be read in ``skipped`` and goes on;
            ``"fail"`` raises at the first one.
        known: ``{file key: sha256}`` of files already indexed; a file with the same key and
            hash is not read again (listed in ``unchanged``).
        max_document_chars: a text or PDF file of more bytes than this is skipped before it
            is read, and so is a JSONL file with a longer line (``None``: no limit).
        follow_symlinks: read a symlink found in a folder that points outside it (default:
            skipped, with the reason).

    Returns:
        A :class:`SourceLoad`.

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: ``on_error`` not ``"skip"`` / ``"fail"``; with ``"fail"``, the first file
            that cannot be read (path and reason).
    """
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {', '.join(ON_ERROR)}, got {on_error!r}")
    known = known or {}
    out = SourceLoad()
    for path, key, root in iter_source_files(paths):
        suffix = path.suffix.lower()
        try:
            if suffix not in SOURCE_SUFFIXES:
                raise ValueError(f"unsupported file type {path.suffix or '(no suffix)'!r}")
            jsonl = suffix in JSONL_SUFFIXES
            # a JSONL file holds many documents: its lines are bounded, not the file
            check_source_file(path, root, follow_symlinks, None if jsonl else max_document_chars)
            if jsonl:  # hashed first only when an indexed hash may spare the parse
                data, digest = b"", (_sha256_file(path) if key in known else None)
            else:
                data = read_file_bounded(path, max_document_chars)
                digest = hashlib.sha256(data).hexdigest()
            if digest is not None:
                out.files[key] = digest
                if known.get(key) == digest:
                    out.unchanged.append(key)
                    continue
            if jsonl:
                docs, out.files[key] = _jsonl_documents(path, key, digest, max_document_chars)
                out.documents.extend(docs)
            else:
                out.documents.extend(_documents(path, key, data, digest, encoding))
        except (ValueError, OSError) as exc:
            if suffix in SOURCE_SUFFIXES:
                out.files.setdefault(key, "")  # it exists: update must not delete its documents
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            reason = reason.removeprefix(f"{path}: ")  # the skip list names the path
            if on_error == "fail":
                raise ValueError(f"{path}: {reason} (--on-error skip indexes the other files)") from None
            out.skipped.append(Skipped(str(path), reason))
    return out
