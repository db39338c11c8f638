"""A scale corpus grown from real text: the Linux kernel documentation, recombined to 1M chunks.

What it is for
--------------
Issue 33 asks how graphstrata behaves with a million chunks on one machine (build time per
stage, memory, disk, load time, query latency). No real corpus of that size ships with the
project, and repeating one corpus N times would not grow the knowledge graph: every copy would
extract the same entities, so the graph, the communities and the entity index would stay the
size of one copy while only the chunk index grew. This module grows real text into a corpus
whose graph grows with it. ``bench/bench_scale.py`` builds and queries it.

    python bench/scale_corpus.py --chunks 1000000 --out .bench_out/scale/corpus-1000000
                                 [--corpus DIR] [--seed 0] [--shard-documents 5000] [--force]

Source
------
By default the reStructuredText sources of the kernel documentation that the Debian package
``linux-doc-6.1`` installs (the ``*.rst.txt`` files ``dpkg -L linux-doc-6.1`` lists under
``html/_sources``: 3,184 files, 24 MB, about 44,400 chunks with the fast preset). When the
package is missing it is installed with ``apt-get install -y linux-doc-6.1`` if this process is
root (or has password-less sudo); otherwise the script stops and says how to install it.
``--corpus DIR`` takes any folder of ``.txt`` / ``.md`` / ``.rst(.txt)`` files instead. Every
file is one source document: its text (line ends normalised to ``\\n``), its title the first
reStructuredText heading (else the file name). Paragraphs are the blank-line separated blocks;
each is classed as a heading, prose (a plain block of 8+ words), code (an indented block after
``::`` or a code directive) or other (lists, tables, directives, indented prose).

Algorithm
---------
1. Entity-like tokens. A token is a maximal ASCII run of ``[A-Za-z0-9_]`` that starts with a
   letter or ``_`` and holds a letter. One pass over the source decides, per token string, whether
   it names something (the same decision everywhere it occurs):
   identifiers with ``_`` (``CONFIG_SLUB_DEBUG``, ``kmem_cache_alloc``, ``_CRS``), tokens mixing
   letters and digits (``x86``, ``PNP0A03``), CamelCase (``DeviceTree``, ``PCIe``) and ALLCAPS
   words of 2+ letters (``ACPI``) are always renamed; a lowercase word of 3+ letters
   (``kmalloc``) when it occurs in code context (inside backticks, in a code block, or directly
   followed by ``(``) at least as often as outside it; a Capitalised word (``Linus``) when it
   occurs capitalised but not at a sentence start more often than it occurs in lowercase.
   C keywords and types, licence words and roman numerals are never renamed (``STOP``).
2. Names. A renamed token is cut into pieces (lowercase runs, Capitalised runs, ALLCAPS runs,
   digits, underscores; ``APIs`` is ``API`` + a plural ``s``) and each letter piece is replaced by
   a pronounceable pseudo-word (consonant-vowel syllables) drawn from BLAKE2b of
   (seed, copy, piece, salt), in the piece's case. Within one copy the map is injective (keys are
   named in sorted order; a clash with a name already given, or with any word of the source,
   draws the next salt), so ``kmalloc``, ``kmalloc()``, ``kmalloc_array`` and ``KMALLOC`` stay
   related and every occurrence in the copy gets the same name; another copy gets other names.
3. Copies. Copy 0 is the source as is (texts unchanged; documents in a seeded order so that
   any prefix of the stream is a sample of the whole source). Copy c >= 1 walks the source
   documents in its own seeded order; generated document ``k{c}-{n}`` follows source document
   ``n`` paragraph by paragraph, but each prose paragraph is, with probability 0.25, replaced by a
   prose paragraph of another document, else with probability 0.15 has one of its sentences
   replaced by a sentence of another document (a random generator seeded by (seed, c, n));
   then title and text are renamed with copy c's names. Every sentence of a generated document
   is therefore a real source sentence with names consistently replaced: the graph grows by
   new entities whose co-occurrences repeat the source's structure, not by duplicates.
4. Size. The stream stops once the estimated chunk count reaches ``--chunks`` (the document that
   crosses the target is kept). A document's chunks are estimated from its characters: tokens =
   characters x tokens-per-character, measured with the fast preset's tokenizer
   (``graphstrata.models.resolve_embedder("fast")``) on an evenly spaced sample of source
   documents, once as they are (copy 0) and once as copy 1 renames them (pseudo-words cut into
   more word pieces: about 0.34 tokens/char against 0.31 on the kernel docs), then the core's
   window formula (200-token chunks overlapping by 32, as ``graphstrata.chunking.chunk_documents``
   cuts them; the title the loader prepends counted). The samples' real chunk counts
   (``chunk_documents``) beside the estimates are reported.

Output: JSONL shards ``docs-00000.jsonl`` ... (``{"id","title","text"}``, 5,000 documents each)
and ``corpus.json`` (counts, seed, source and its fingerprint, characters, the estimate), written
to ``OUT.tmp`` and renamed to ``OUT`` when complete.

Determinism
-----------
Everything is a function of (source files, seed): orders and swaps use ``random.Random`` seeded
with strings, names use BLAKE2b, no set or dict iteration order reaches the output, the token
ratio comes from a deterministic tokenizer, and ``corpus.json`` holds no timestamp. The same seed
and source give byte-identical output directories; ``generator_version`` changes whenever the
algorithm does.

License
-------
The kernel documentation is GPL-2.0 text (``SPDX-License-Identifier`` lines in the files). It is
read from the Debian package at benchmark time and written only under the ignored
``.bench_out/``; no kernel text is committed to this repository, and the generated corpus is for
local benchmarking, not for redistribution.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

GENERATOR_VERSION = 2
LINUX_DOC_PACKAGE = "linux-doc-6.1"
SHARD_DOCUMENTS = 5000
CHUNK_SIZE = 200  # tokens: GraphStrataConfig.chunk_size's default (the fast preset keeps it)
CHUNK_OVERLAP = 32  # tokens: GraphStrataConfig.chunk_overlap's default
PARAGRAPH_SWAP = 0.25
SENTENCE_SWAP = 0.15
SAMPLE_DOCUMENTS = 400
TEXT_SUFFIXES = (".txt", ".md", ".rst")  # ".rst.txt" ends in ".txt"

TOKEN_RE = re.compile(r"\b[A-Za-z_]\w*", re.ASCII)
PIECE_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z][a-z]+|[a-z]+|[0-9]+|_+")
PLURAL_RE = re.compile(r"[A-Z]{2,}s")
CALL_RE = re.compile(r"\b([A-Za-z_]\w*)\(", re.ASCII)
BACKTICK_RE = re.compile(r"`+([^`\n]+)`+")
CAP_RE = re.compile(r"\b[A-Z][a-z]+\b", re.ASCII)
START_CAP_RE = re.compile(
    r"(?:\A|[.!?:;][\"')\]*`]*\s+|^[ \t]*(?:[-*+|]|#\.|\d+[.)]|\(\d+\))[ \t]+)[\"'(\[*`<]*([A-Z][a-z]+)\b",
    re.M | re.ASCII,
)
LINE_START_CAP_RE = re.compile(r"[ \t]*[\"'(\[*`<]*([A-Z][a-z]+)\b", re.ASCII)
PARAGRAPH_RE = re.compile(r"\n\s*\n")
SENTENCE_RE = re.compile(r"(?<=[.!?])(\s+)(?=[A-Z])")
UNDERLINE_RE = re.compile(r"^([=\-~^*#\"+`:.'_])\1{2,}[ \t]*$", re.M)
LIST_RE = re.compile(r"[-*+|]\s|#\.\s|\d+[.)]\s|\(\d+\)\s|[+=]-|=")
CODE_DIRECTIVE_RE = re.compile(r"\.\.\s+(code-block|code|sourcecode|highlight|literalinclude)::")

#: never renamed: C keywords and types, licence words, roman numerals, RST admonitions
STOP = frozenset(
    """auto break case char const continue default do double else enum extern float for goto if
    inline int long register return short signed sizeof static struct switch typedef union
    unsigned void volatile while bool true false NULL define include ifdef ifndef endif undef
    u8 u16 u32 u64 s8 s16 s32 s64 __u8 __u16 __u32 __u64 __le16 __le32 __le64 __be16 __be32
    __be64 size_t ssize_t loff_t uint8_t uint16_t uint32_t uint64_t int8_t int16_t int32_t
    int64_t uintptr_t EOF SPDX GPL LGPL BSD MIT License Identifier TODO FIXME NOTE XXX OK
    II III IV VI VII VIII IX XI XII""".split()
)

ONSETS = "bdfgklmnprstvz"
VOWELS = "aeiou"
CODAS = ("", "n", "r", "s", "l", "k", "m")


# ---------------------------------------------------------------- the source


@dataclass
class SourceDocument:
    """One source file: ``name`` its path relative to the source root, ``title`` its first
    heading, ``paragraphs`` its blank-line separated blocks and ``kinds`` their classes
    (``heading``, ``prose``, ``code``, ``other``), ``headings`` every heading's text."""

    name: str
    title: str
    text: str
    paragraphs: list[str]
    kinds: list[str]
    headings: list[str] = field(default_factory=list)


@dataclass
class Source:
    """The documents a scale corpus grows from, with a SHA-256 ``fingerprint`` of their paths and
    contents and a ``description`` of where they came from."""

    root: str
    description: str
    documents: list[SourceDocument]
    fingerprint: str

    @property
    def characters(self) -> int:
        """Characters of all source texts."""
        return sum(len(d.text) for d in self.documents)


def split_paragraphs(text: str) -> list[str]:
    """The blank-line separated blocks of ``text``, right-stripped, empty ones dropped (leading
    indentation is kept). ``"\\n\\n".join`` of the result splits back into the same list."""
    return [p.rstrip() for p in PARAGRAPH_RE.split(text) if p.strip()]


def split_sentences(paragraph: str) -> list[str]:
    """The sentences of one paragraph: cut after ``.``, ``!`` or ``?`` plus whitespace before a
    capital letter (the separators are dropped)."""
    return SENTENCE_RE.split(paragraph)[0::2]


def _heading_lines(paragraph: str) -> list[str]:
    return [ln.strip() for ln in paragraph.splitlines() if ln.strip() and not UNDERLINE_RE.match(ln)]


def classify_paragraphs(paragraphs: list[str]) -> list[str]:
    """Class of each paragraph: ``heading`` (a text line with an RST under/overline), ``code``
    (an indented block after a paragraph ending in ``::`` or a code directive, and the indented
    blocks that follow it), ``prose`` (unindented, no list/table/directive marker, 8+ words)
    or ``other``."""
    kinds = []
    literal = False
    for p in paragraphs:
        lines = p.splitlines()
        if p[0] in " \t":
            kind = "code" if literal else "other"
        else:
            literal = False
            if UNDERLINE_RE.search(p) and len(lines) <= 3 and _heading_lines(p):
                kind = "heading"
            elif p.startswith(".."):
                kind = "other"
            elif LIST_RE.match(p) or len(p.split()) < 8:
                kind = "other"
            else:
                kind = "prose"
            if p.startswith(".."):
                literal = bool(CODE_DIRECTIVE_RE.match(p))
            elif p.endswith("::"):
                literal = True
        kinds.append(kind)
    return kinds


def _clean_heading(text: str) -> str:
    text = re.sub(r":[a-z:]+:`", "", text)
    text = re.sub(r"[`*]|\s+<[^>]*>", "", text)
    text = " ".join(text.split()).strip(" :.")
    return text if 3 <= len(text) <= 80 and re.search("[A-Za-z]{2}", text) else ""


def parse_document(name: str, text: str) -> SourceDocument:
    """A :class:`SourceDocument` from a file's relative path and text."""
    paragraphs = split_paragraphs(text)
    kinds = classify_paragraphs(paragraphs)
    headings = [_heading_lines(p)[0] for p, k in zip(paragraphs, kinds, strict=True) if k == "heading"]
    title = headings[0] if headings else re.sub(r"(\.rst)?\.(txt|md|rst)$", "", Path(name).name)
    return SourceDocument(name, title, text, paragraphs, kinds, headings)


def linux_doc_files(package: str = LINUX_DOC_PACKAGE) -> list[Path]:
    """The ``html/_sources/**/*.rst.txt`` files of the Debian package ``package``, sorted.

    Installs the package with ``apt-get install -y`` when it is missing and this process is root
    or has password-less sudo.

    Raises:
        SystemExit: the package is missing and cannot be installed here (the message says how).
    """

    def listed() -> list[Path] | None:
        try:
            out = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True, check=False)
        except OSError:
            return None
        if out.returncode != 0:
            return None
        files = [Path(x) for x in out.stdout.splitlines() if re.search(r"/html/_sources/.*\.rst\.txt$", x)]
        return sorted(p for p in files if p.is_file()) or None

    files = listed()
    if files:
        return files
    how = (f"the kernel documentation is missing: install it with `sudo apt-get install -y {package}` "
           "or pass --corpus DIR (a folder of .txt/.md/.rst files)")
    if shutil.which("apt-get") is None:
        raise SystemExit(how)
    prefix: list[str] = []
    if os.geteuid() != 0:
        sudo = shutil.which("sudo")
        if not sudo or subprocess.run([sudo, "-n", "true"], capture_output=True, check=False).returncode:
            raise SystemExit(how)
        prefix = [sudo, "-n"]
    print(f"installing {package} (apt-get) ...", file=sys.stderr)
    install = [*prefix, "apt-get", "install", "-y", "--no-install-recommends", package]
    if subprocess.run(install, check=False).returncode:
        subprocess.run([*prefix, "apt-get", "update"], check=False)
        subprocess.run(install, check=False)
    files = listed()
    if not files:
        raise SystemExit(how)
    return files


def load_source(corpus: str | Path | None = None) -> Source:
    """Read the source documents: every ``.txt`` / ``.md`` / ``.rst`` file under ``corpus``
    (recursively, sorted by relative path), or the kernel docs of ``linux-doc-6.1`` when
    ``corpus`` is ``None`` (see :func:`linux_doc_files`). Empty files are skipped.

    Raises:
        ValueError: ``corpus`` has no such file.
        FileNotFoundError: ``corpus`` does not exist.
    """
    if corpus is None:
        files = linux_doc_files()
        root = Path(os.path.commonpath([str(p) for p in files]))
        description = f"{LINUX_DOC_PACKAGE} ({root})"
    else:
        root = Path(corpus)
        if not root.is_dir():
            raise FileNotFoundError(f"{root}: no such directory")
        files = sorted(
            (p for p in root.rglob("*") if p.is_file() and p.name.lower().endswith(TEXT_SUFFIXES)),
            key=lambda p: p.relative_to(root).as_posix(),
        )
        description = str(root.resolve())
    if root.is_file():
        root = root.parent
    digest = hashlib.sha256()
    docs = []
    for path in files:
        raw = path.read_bytes()
        name = path.relative_to(root).as_posix()
        digest.update(name.encode() + b"\0" + hashlib.sha256(raw).digest())
        text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
        if text.strip():
            docs.append(parse_document(name, text))
    if not docs:
        raise ValueError(f"{root}: no non-empty {', '.join(TEXT_SUFFIXES)} file")
    return Source(str(root), description, docs, digest.hexdigest())


# ---------------------------------------------------------------- names


def token_pieces(token: str) -> list[tuple[str, bool]]:
    """A token cut into ``(piece, renamed)`` pairs: letter pieces (lowercase, Capitalised or
    ALLCAPS runs) are renamed; digits, underscores and the plural ``s`` of ``APIs`` are kept.
    Joining the pieces gives the token back."""
    if PLURAL_RE.fullmatch(token):
        return [(token[:-1], True), ("s", False)]
    return [(p, p[0].isalpha()) for p in PIECE_RE.findall(token)]


def recase(name: str, piece: str) -> str:
    """``name`` (lowercase) in the case of ``piece``: ALLCAPS, Capitalised or lowercase."""
    if piece.isupper():
        return name.upper()
    if piece[0].isupper():
        return name.capitalize()
    return name


def pseudo_word(key: str, syllables: int) -> str:
    """A pronounceable lowercase word of ``syllables`` consonant-vowel syllables and an optional
    final consonant, drawn from BLAKE2b of ``key`` (deterministic)."""
    h = hashlib.blake2b(key.encode(), digest_size=16).digest()
    word = "".join(ONSETS[h[2 * i] % len(ONSETS)] + VOWELS[h[2 * i + 1] % len(VOWELS)] for i in range(syllables))
    return word + CODAS[h[15] % len(CODAS)]


def _rename_decision(tok: str, total: Counter, code: Counter, cap_mid: Counter) -> bool:
    if tok in STOP or not re.search("[A-Za-z]", tok):
        return False
    if "_" in tok or re.search("[0-9]", tok):
        return True
    if PLURAL_RE.fullmatch(tok):  # APIs, CPUs: named like API, CPU
        return tok[:-1] not in STOP
    letters = [p for p, renamed in token_pieces(tok) if renamed]
    if len(letters) >= 2:  # CamelCase, PCIe, APIs
        return True
    if tok.isupper():
        return len(tok) >= 2
    if tok[0].isupper():
        return cap_mid[tok] >= 1 and total[tok.lower()] < cap_mid[tok]
    return len(tok) >= 3 and code[tok] >= 1 and code[tok] >= total[tok] - code[tok]


class ScaleCorpus:
    """The generator over one :class:`Source` and seed (see the module docstring).

    Attributes:
        source: the source documents.
        seed: the seed of orders, swaps and names.
        renamed_tokens: sorted token strings that copies >= 1 rename.
    """

    def __init__(self, source: Source, seed: int = 0) -> None:
        self.source = source
        self.seed = int(seed)
        total: Counter = Counter()
        code: Counter = Counter()
        cap_all: Counter = Counter()
        cap_start: Counter = Counter()
        self._paragraph_pool: list[tuple[int, str]] = []
        self._sentence_pool: list[tuple[int, str]] = []
        for n, doc in enumerate(source.documents):
            for p, kind in zip(doc.paragraphs, doc.kinds, strict=True):
                tokens = TOKEN_RE.findall(p)
                total.update(tokens)
                if kind == "code":
                    code.update(tokens)
                    continue
                for span in BACKTICK_RE.findall(p):
                    code.update(TOKEN_RE.findall(span))
                code.update(CALL_RE.findall(p))
                cap_all.update(CAP_RE.findall(p))
                if kind == "heading":
                    for line in _heading_lines(p):
                        m = LINE_START_CAP_RE.match(line)
                        if m:
                            cap_start[m.group(1)] += 1
                else:
                    cap_start.update(START_CAP_RE.findall(p))
                if kind == "prose":
                    self._paragraph_pool.append((n, p))
                    for s in split_sentences(p):
                        if _proper_sentence(s):
                            self._sentence_pool.append((n, s))
        cap_mid = cap_all - cap_start
        self.renamed_tokens = sorted(t for t in total if _rename_decision(t, total, code, cap_mid))
        self._keys = sorted({p.lower() for t in self.renamed_tokens for p, r in token_pieces(t) if r})
        self._vocabulary = frozenset(p.lower() for t in total for p, r in token_pieces(t) if r) | {
            s.lower() for s in STOP
        }
        self._names: dict[int, dict[str, str]] = {}
        self._tables: dict[int, dict[str, str]] = {}

    # -- names --------------------------------------------------------------------------------
    def names(self, copy: int) -> dict[str, str]:
        """Copy ``copy``'s name for every lowercase letter piece of the renamed tokens (an
        injective map whose values are no word of the source). Copy 0 renames nothing: ``{}``."""
        if copy == 0:
            return {}
        if copy not in self._names:
            used: set[str] = set()
            out: dict[str, str] = {}
            for key in self._keys:
                syllables = 2 if len(key) <= 4 else 3
                salt = 0
                while True:
                    name = pseudo_word(f"{self.seed}\x1f{copy}\x1f{key}\x1f{salt}", syllables)
                    if name not in used and name not in self._vocabulary:
                        break
                    salt += 1
                    if salt % 8 == 0:
                        syllables += 1
                used.add(name)
                out[key] = name
            self._names = {copy: out}  # one copy at a time: the stream walks copies in order
        return self._names[copy]

    def _table(self, copy: int) -> dict[str, str]:
        if copy not in self._tables:
            names = self.names(copy)
            self._tables = {
                copy: {
                    t: "".join(recase(names[p.lower()], p) if r else p for p, r in token_pieces(t))
                    for t in self.renamed_tokens
                }
            }
        return self._tables[copy]

    def rename(self, text: str, copy: int) -> str:
        """``text`` with every renamed token replaced by its copy-``copy`` name (unchanged for
        copy 0)."""
        if copy == 0:
            return text
        table = self._table(copy)
        return TOKEN_RE.sub(lambda m: table.get(m.group(0), m.group(0)), text)

    # -- documents ----------------------------------------------------------------------------
    def order(self, copy: int) -> list[int]:
        """Source document indices in the order copy ``copy`` emits them (seeded shuffle)."""
        order = list(range(len(self.source.documents)))
        random.Random(f"{self.seed}:order:{copy}").shuffle(order)
        return order

    def _other(self, pool: list[tuple[int, str]], rng: random.Random, n: int) -> str | None:
        if not pool:
            return None
        for _ in range(4):
            owner, text = pool[rng.randrange(len(pool))]
            if owner != n:
                return text
        return None

    def _swap_sentence(self, paragraph: str, rng: random.Random, n: int) -> str:
        parts = SENTENCE_RE.split(paragraph)
        slots = [i for i in range(0, len(parts), 2) if _proper_sentence(parts[i])]
        if not slots:
            return paragraph
        i = slots[rng.randrange(len(slots))]
        other = self._other(self._sentence_pool, rng, n)
        if other is not None:
            parts[i] = other
        return "".join(parts)

    def document(self, copy: int, n: int) -> dict[str, str]:
        """Generated document ``k{copy}-{n}`` (from source document ``n``) as
        ``{"id", "title", "text"}``."""
        doc = self.source.documents[n]
        if copy == 0:
            return {"id": f"k0-{n}", "title": doc.title, "text": doc.text}
        rng = random.Random(f"{self.seed}:doc:{copy}:{n}")
        paragraphs = []
        for p, kind in zip(doc.paragraphs, doc.kinds, strict=True):
            if kind == "prose":
                if rng.random() < PARAGRAPH_SWAP:
                    p = self._other(self._paragraph_pool, rng, n) or p
                elif rng.random() < SENTENCE_SWAP:
                    p = self._swap_sentence(p, rng, n)
            paragraphs.append(p)
        text = self.rename("\n\n".join(paragraphs), copy)
        return {"id": f"k{copy}-{n}", "title": self.rename(doc.title, copy), "text": text}

    def copy_documents(self, copy: int) -> Iterator[dict[str, str]]:
        """Every document of copy ``copy``, in its order."""
        for n in self.order(copy):
            yield self.document(copy, n)

    def documents(
        self,
        max_chunks: int | None = None,
        tokens_per_char: float = 0.25,
        tokens_per_char_renamed: float | None = None,
        max_copies: int | None = None,
        chunk_size: int = CHUNK_SIZE,
        chunk_overlap: int = CHUNK_OVERLAP,
    ) -> Iterator[tuple[int, dict[str, str], int]]:
        """Stream ``(copy, document, estimated chunks)``: copy 0, then 1, 2, ... until the
        estimated chunk total reaches ``max_chunks`` (the crossing document included) or
        ``max_copies`` copies are out; endless when both are ``None``.

        Args:
            max_chunks: target size in chunks (estimated, see :func:`estimate_chunks`).
            tokens_per_char: tokens of the chunking tokenizer per character of copy 0's text.
            tokens_per_char_renamed: the same for copies >= 1, whose pseudo-words cut into more
                word pieces; ``None``: ``tokens_per_char``.
            max_copies: at most this many copies.
            chunk_size: tokens per chunk, as the index will cut them.
            chunk_overlap: tokens shared by consecutive chunks.
        """
        total = 0
        copy = 0
        while max_copies is None or copy < max_copies:
            tpc = tokens_per_char if copy == 0 or tokens_per_char_renamed is None else tokens_per_char_renamed
            for doc in self.copy_documents(copy):
                chars = len(doc["text"]) + (len(doc["title"]) + 1 if doc["title"] else 0)
                est = estimate_chunks(chars, tpc, chunk_size, chunk_overlap)
                yield copy, doc, est
                total += est
                if max_chunks is not None and total >= max_chunks:
                    return
            copy += 1

    def queries(self, n: int = 60) -> list[str]:
        """At most ``n`` deterministic questions about the real corpus, the same at every size:
        ``"What does <title> describe?"`` and ``"How is <section heading> configured?"`` for the
        first documents of copy 0's order (which every corpus of a few hundred chunks holds), then
        ``"What is <heading>?"`` for their further headings; titles and headings of 2+ words."""
        out: list[str] = []
        rest: list[str] = []
        seen: set[str] = set()

        def add(target: list[str], text: str) -> None:
            if text and text not in seen:
                seen.add(text)
                target.append(text)

        for idx in self.order(0):
            doc = self.source.documents[idx]
            title = _clean_heading(doc.title)
            if len(title.split()) >= 2:
                add(out, f"What does {title} describe?")
            heads = [h for h in (_clean_heading(h) for h in doc.headings[1:]) if len(h.split()) >= 2 and h != title]
            if heads:
                add(out, f"How is {heads[0]} configured?")
            for h in heads[1:3]:
                add(rest, f"What is {h}?")
            if len(out) >= n:
                break
        return (out + rest)[:n]


def _proper_sentence(s: str) -> bool:
    return bool(s) and s[0].isupper() and s[-1] in ".!?" and len(s.split()) >= 5


# ---------------------------------------------------------------- size


def estimate_chunks(chars: int, tokens_per_char: float, chunk_size: int = CHUNK_SIZE,
                    chunk_overlap: int = CHUNK_OVERLAP) -> int:
    """Chunks of a ``chars``-character document: ``tokens = chars · tokens_per_char``, then the
    core's windows (``chunk_size`` tokens, stepping ``chunk_size - chunk_overlap``); 1 for a
    short one."""
    tokens = max(1, round(chars * tokens_per_char))
    if tokens <= chunk_size:
        return 1
    return 1 + math.ceil((tokens - chunk_size) / (chunk_size - chunk_overlap))


def measure_tokens_per_char(corpus: ScaleCorpus, embedder=None, sample: int = SAMPLE_DOCUMENTS) -> dict:
    """Tokens per character of the chunking tokenizer on an evenly spaced sample of ``sample``
    source documents, as they are (copy 0) and as copy 1 renames them, and each sample's real
    chunk count from :func:`graphstrata.chunking.chunk_documents` beside the estimate.

    Args:
        corpus: the generator (its source and copy 1).
        embedder: the embedder whose tokenizer chunks; the fast preset's when ``None``.
        sample: documents in each sample.

    Returns:
        ``{"tokens_per_char", "tokens_per_char_renamed", "embedder", "sample_documents",
        "sample_characters", "sample_chunks", "sample_chunks_estimated",
        "renamed_sample_chunks", "renamed_sample_chunks_estimated", "characters_per_chunk"}``
        (characters per real chunk of the copy-0 sample).
    """
    from graphstrata.chunking import chunk_documents
    from graphstrata.types import Document

    if embedder is None:
        from graphstrata.models import resolve_embedder

        embedder = resolve_embedder("fast")
    n_docs = len(corpus.source.documents)
    picked = list(range(0, n_docs, max(1, n_docs // sample)))[:sample]
    out: dict = {"embedder": getattr(embedder, "id", type(embedder).__name__), "sample_documents": len(picked)}
    for copy, tag in ((0, ""), (1, "renamed_")):
        docs = [corpus.document(copy, n) for n in picked]
        texts = [f"{d['title']}\n{d['text']}" for d in docs]  # as graphstrata.loaders reads a record
        chars = sum(len(t) for t in texts)
        tpc = round(sum(len(embedder.token_spans(t)) for t in texts) / chars, 6)
        chunks = chunk_documents(
            [Document(id=str(i), text=t) for i, t in enumerate(texts)], CHUNK_SIZE, CHUNK_OVERLAP, embedder
        )
        out[f"tokens_per_char{'_renamed' if copy else ''}"] = tpc
        out[f"{tag}sample_chunks"] = len(chunks)
        out[f"{tag}sample_chunks_estimated"] = sum(estimate_chunks(len(t), tpc) for t in texts)
        if copy == 0:
            out["sample_characters"] = chars
            out["characters_per_chunk"] = round(chars / max(1, len(chunks)), 1)
    return out


def write_corpus(
    corpus: ScaleCorpus,
    out: str | Path,
    chunks: int,
    measure: dict,
    shard_documents: int = SHARD_DOCUMENTS,
) -> dict:
    """Write the stream up to ``chunks`` estimated chunks as JSONL shards plus ``corpus.json``
    into ``out`` (built in ``out.tmp``, then renamed; an existing ``out`` is replaced).

    Args:
        corpus: the generator.
        out: output directory.
        chunks: target size in chunks.
        measure: :func:`measure_tokens_per_char`'s result (its ``tokens_per_char`` and
            ``tokens_per_char_renamed`` size the stream; the rest is recorded).
        shard_documents: documents per JSONL file.

    Returns:
        What ``corpus.json`` holds.
    """
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    per_copy: Counter = Counter()
    n_docs = est_total = chars = 0
    shards: list[str] = []
    fh = None
    try:
        for copy, doc, est in corpus.documents(
            chunks, measure["tokens_per_char"], measure.get("tokens_per_char_renamed")
        ):
            if n_docs % shard_documents == 0:
                if fh:
                    fh.close()
                shards.append(f"docs-{len(shards):05d}.jsonl")
                fh = open(tmp / shards[-1], "w", encoding="utf-8", newline="\n")
            fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
            n_docs += 1
            est_total += est
            chars += len(doc["text"])
            per_copy[copy] += 1
    finally:
        if fh:
            fh.close()
    src = corpus.source
    info = {
        "generator_version": GENERATOR_VERSION,
        "seed": corpus.seed,
        "chunks_requested": int(chunks),
        "chunks_estimated": est_total,
        "documents": n_docs,
        "characters": chars,
        "copies": len(per_copy),
        "documents_per_copy": [per_copy[c] for c in sorted(per_copy)],
        "renamed_tokens": len(corpus.renamed_tokens),
        "chunk_size": CHUNK_SIZE,
        "chunk_overlap": CHUNK_OVERLAP,
        "estimate": measure,
        "source": {
            "description": src.description,
            "documents": len(src.documents),
            "characters": src.characters,
            "fingerprint": src.fingerprint,
        },
        "shards": shards,
    }
    (tmp / "corpus.json").write_text(json.dumps(info, indent=2) + "\n")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return info


def is_current(out: str | Path, chunks: int, seed: int, source: Source) -> bool:
    """Whether ``out`` already holds the corpus of (``chunks``, ``seed``, ``source``) from this
    generator version."""
    try:
        info = json.loads((Path(out) / "corpus.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        info.get("generator_version") == GENERATOR_VERSION
        and info.get("seed") == seed
        and info.get("chunks_requested") == chunks
        and info.get("source", {}).get("fingerprint") == source.fingerprint
        and all((Path(out) / s).is_file() for s in info.get("shards", []))
    )


def describe(info: dict) -> str:
    """One paragraph about a written corpus (``corpus.json``'s contents)."""
    m = info["estimate"]
    return (
        f"{info['documents']:,} documents, {info['characters']:,} characters, "
        f"~{info['chunks_estimated']:,} chunks estimated ({info['copies']} copies of "
        f"{info['source']['documents']:,} source documents; {info['renamed_tokens']:,} token forms "
        f"renamed per copy)\n  estimate: {m['tokens_per_char']:.4f} tokens/char as is, "
        f"{m['tokens_per_char_renamed']:.4f} renamed ({m['embedder']}); on a "
        f"{m['sample_documents']}-document sample chunk_documents gives {m['sample_chunks']:,} chunks "
        f"(estimate {m['sample_chunks_estimated']:,}), renamed {m['renamed_sample_chunks']:,} "
        f"(estimate {m['renamed_sample_chunks_estimated']:,}); {m['characters_per_chunk']:.0f} "
        f"characters per chunk"
    )


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, required=True, help="target size in (estimated) chunks")
    ap.add_argument("--out", required=True, help="output directory (JSONL shards + corpus.json)")
    ap.add_argument("--corpus", default=None, help="folder of .txt/.md/.rst files (default: linux-doc-6.1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shard-documents", type=int, default=SHARD_DOCUMENTS)
    ap.add_argument("--force", action="store_true", help="regenerate even when OUT is current")
    args = ap.parse_args(argv)
    if args.chunks <= 0:
        ap.error("--chunks must be > 0")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    t0 = time.perf_counter()
    source = load_source(args.corpus)
    print(f"source: {source.description}: {len(source.documents):,} documents, "
          f"{source.characters:,} characters")
    if not args.force and is_current(args.out, args.chunks, args.seed, source):
        info = json.loads((Path(args.out) / "corpus.json").read_text())
        print(f"{args.out} is current: {describe(info)}")
        return 0
    corpus = ScaleCorpus(source, args.seed)
    info = write_corpus(corpus, args.out, args.chunks, measure_tokens_per_char(corpus), args.shard_documents)
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f} s: {describe(info)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
