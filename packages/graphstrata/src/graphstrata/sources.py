"""Files and folders as the command line reads them: every file is indexed or skipped with a
reason, PDFs through pypdf, a fallback encoding, and a content hash per file for updates.

:func:`graphstrata.loaders.load_documents` (the Python API) stops at the first file it cannot
read. A folder of real documents holds PDFs, a stray binary file, a file in Latin-1; the CLI
reads it with :func:`load_sources`, which gives the documents it could read and a
:class:`Skipped` entry (path and reason) for every file it could not — or, with
``on_error="fail"``, raises at the first one.

What a file becomes:

* ``.txt`` / ``.md`` / ``.markdown`` / ``.rst``: one document, decoded as UTF-8, else as
  ``encoding`` when one is given (``"latin-1"``, ``"cp1252"``, ...); a file with a NUL byte in
  its first 8 KiB is binary and skipped;
* ``.pdf``: one document of its pages' text (pypdf, the ``graphstrata[pdf]`` extra; without it
  PDFs are skipped with a reason naming the extra);
* ``.jsonl``: one document per line ``{"id", "title", "text", "metadata"}`` (as the loaders);
* anything else in a folder is skipped as an unsupported type; hidden files and folders (a
  name starting with ``"."``, e.g. ``.git``) are not looked at.

Every document gets ``metadata["source"]`` (the path as walked), ``metadata["file"]`` (the
file's key: its path relative to the folder given, or its name for a file given directly) and
``metadata["file_sha256"]`` (SHA-256 of the file's bytes); ``graphstrata update`` compares
those to add, replace and delete documents file by file. Documents of text and PDF files have
the file key as id.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .loaders import JSONL_SUFFIXES, TEXT_SUFFIXES
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
            skipped): what exists now.
        unchanged: keys of files left unread because ``known`` had the same hash.
    """

    documents: list[Document] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)


def iter_source_files(paths: Iterable[str | os.PathLike]) -> Iterator[tuple[Path, str]]:
    """``(file, key)`` for each file named in ``paths`` and each file under each folder
    (recursively, sorted, hidden entries left out; symlinks that leave the folder are not
    followed). ``key`` is the path relative to the folder, or the file's name.

    Raises:
        FileNotFoundError: a path that does not exist.
    """
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise FileNotFoundError(f"no such file or folder: {path}")
        if not path.is_dir():
            yield path, path.name
            continue
        root = path.resolve()
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.startswith("."):
                    continue
                f = Path(dirpath) / name
                if f.is_symlink() and not f.resolve().is_relative_to(root):
                    continue  # a link out of the folder is not part of it
                yield f, f.relative_to(path).as_posix()


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


def pdf_text(path: Path) -> str:
    """The text of a PDF's pages (pypdf), pages joined by blank lines.

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
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            raise ValueError("encrypted PDF")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except (PyPdfError, OSError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a readable PDF ({type(exc).__name__}: {exc})") from None
    text = "\n\n".join(p for p in pages if p)
    if not text.strip():
        raise ValueError("PDF has no extractable text (scanned pages need OCR first)")
    return text


def _documents(path: Path, key: str, data: bytes, encoding: str | None) -> list[Document]:
    suffix = path.suffix.lower()
    digest = hashlib.sha256(data).hexdigest()
    base = {"source": str(path), FILE_KEY: key, HASH_KEY: digest}
    if suffix in PDF_SUFFIXES:
        return [Document(id=key, text=pdf_text(path), metadata=dict(base))]
    text = decode_text(data, path, encoding)
    if suffix in TEXT_SUFFIXES:
        return [Document(id=key, text=text, metadata=dict(base))]
    docs = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {lineno}: invalid JSON ({exc.msg})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str):
            raise ValueError(f'line {lineno}: expected an object with a "text" string')
        body, meta = rec["text"], dict(rec.get("metadata") or {})
        if rec.get("title"):
            meta.setdefault("title", str(rec["title"]))
            body = f"{rec['title']}\n{body}"
        meta.setdefault("source", base["source"])
        meta.update({FILE_KEY: key, HASH_KEY: digest})
        docs.append(Document(id=str(rec.get("id") or f"{path.name}:{lineno}"), text=body, metadata=meta))
    if not docs:
        raise ValueError("no records")
    return docs


def load_sources(
    paths: Iterable[str | os.PathLike],
    encoding: str | None = None,
    on_error: str = "skip",
    known: Mapping[str, str] | None = None,
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
    for path, key in iter_source_files(paths):
        try:
            if path.suffix.lower() not in SOURCE_SUFFIXES:
                raise ValueError(f"unsupported file type {path.suffix or '(no suffix)'!r}")
            if not path.is_file():
                raise ValueError("not a regular file")
            data = path.read_bytes()
            out.files[key] = hashlib.sha256(data).hexdigest()
            if known.get(key) == out.files[key]:
                out.unchanged.append(key)
                continue
            out.documents.extend(_documents(path, key, data, encoding))
        except (ValueError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            if on_error == "fail":
                raise ValueError(f"{path}: {reason} (--on-error skip indexes the other files)") from None
            out.skipped.append(Skipped(str(path), reason))
    return out
