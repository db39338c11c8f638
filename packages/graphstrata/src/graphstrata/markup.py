"""Markdown, reStructuredText and HTML files read as the text a reader sees (issue 44).

A chunk of raw markup carries what no reader sees — ``.. _applying_patches:``, ``++++``
heading underlines, ``<div class="...">`` — and the entities and descriptions cut from it
carry it too. The loaders (:mod:`graphstrata.loaders`, :mod:`graphstrata.sources`) read these
files through this module instead:

=====================  ====================  ==============================================
suffix                 parser                what is kept
=====================  ====================  ==============================================
``.md``, ``.markdown`` markdown-it-py         headings, paragraphs, list items, table cells,
                       (CommonMark + tables)  code spans and blocks, link texts, image alt
                                              texts; dropped: ``#``/``*``/``_``/backtick
                                              markers, link targets, HTML tags, rules
``.rst`` (and          docutils               titles (without their under/overlines),
``.rst.txt``)                                 paragraphs, lists, tables' cells, literal
                                              blocks, admonitions' text, a role's shown text
                                              (``:ref:`Patches <patches>``` → ``Patches``);
                                              dropped: comments (``.. SPDX-...``), targets,
                                              substitution definitions, directives'
                                              options, ``toctree``/``kernel-doc``/``index``
                                              and other directives that show no prose,
                                              tables' rules, parser messages
``.html``, ``.htm``    selectolax (Lexbor)    the text of ``<main>`` (else ``<body>``) and
                                              the ``<title>``; dropped: tags, comments,
                                              ``script``/``style``/``template``/``svg``;
                                              Sphinx's ``¶`` permalinks; whitespace
                                              collapsed as a browser shows it (kept in
                                              ``<pre>``)
=====================  ====================  ==============================================

Blocks (headings, paragraphs, list items, table rows, code blocks) are separated by a blank
line, so a heading stays a paragraph of its own and sentence-boundary chunking never glues it
to the sentence after it (:mod:`graphstrata.sentences`).

Why these libraries: markdown-it-py is the CommonMark parser the Python ecosystem maintains
(MyST, Jupyter, rich) and was already installed with the project's dependencies; docutils is
the reference reST parser (Sphinx runs on it). For HTML, selectolax parses with Lexbor, an
HTML5-conformant C parser (malformed pages parse as a browser parses them), in ~1 ms for a
typical page and gives the tree to walk, so the same block/whitespace rules and offset map as
the other two formats apply; inscriptis lays out tables as text columns but is pure Python on
lxml (~10x slower) and renders padding, html2text writes Markdown (its ``**``/``#`` would then
need stripping again).

**Offsets.** The document's text is the visible text; chunks' and hits' ``start``/``end``
point into it, as for any document. :class:`TextMap` maps an offset of the visible text back
to the file's text (string offsets into the decoded file): every piece of visible text is
located in the file in order (verbatim, or word by word where the parser unescaped or
re-flowed it), so a citation can quote the file itself. The loaders record the format in
``metadata["text_format"]``; :func:`source_span` re-reads the file and maps a span.
"""

from __future__ import annotations

import io
import re
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMATS: dict[str, str] = {
    ".md": "markdown", ".markdown": "markdown", ".rst": "rst", ".html": "html", ".htm": "html",
}
"""File suffix → markup format read as visible text (``.rst.txt`` and ``.md.txt``, Sphinx's
``_sources`` names, count as ``.rst`` / ``.md``)."""
FORMAT_KEY = "text_format"
"""``Document.metadata`` key naming the markup a document's text was read from."""

_WORD_RE = re.compile(r"\S+")
_SPACE_RE = re.compile(r"[ \t\n\r\f\v]+")


def markup_format(path: str | Path) -> str | None:
    """The markup format of a file name (:data:`FORMATS`), or ``None`` for plain text."""
    name = Path(path).name.lower()
    if name.endswith((".rst.txt", ".md.txt")):
        name = name[:-4]
    return FORMATS.get(Path(name).suffix)


# ---------------------------------------------------------------------------------------------
# the offset map
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TextMap:
    """Where the visible text lies in the file: aligned segments
    ``text[t : t + n] == source[s : s + n]``, in increasing ``t`` and ``s``.

    Attributes:
        segments: ``((t, s, n), ...)``, string offsets into the visible text (``t``) and the
            file's decoded text (``s``), ``n`` characters each.
        source_len: length of the file's text (characters).
    """

    segments: tuple[tuple[int, int, int], ...]
    source_len: int
    _starts: list[int] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._starts.extend(t for t, _, _ in self.segments)

    def source_offset(self, i: int) -> int:
        """The file offset of visible-text offset ``i``: exact inside a located segment, else
        the start of the next located text (the file's end after the last)."""
        k = bisect_right(self._starts, i) - 1
        if k >= 0:
            t, s, n = self.segments[k]
            if i < t + n:
                return s + (i - t)
        k += 1
        return self.segments[k][1] if k < len(self.segments) else self.source_len

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The file span ``(s, e)`` of the visible span ``[start, end)``: from the first
        located character at or after ``start`` to one past the last located character before
        ``end`` (``s == e`` when none is located inside)."""
        s = self.source_offset(start)
        m = bisect_left(self._starts, end) - 1
        if m < 0:
            return s, s
        t, so, n = self.segments[m]
        e = so + min(end - t, n)
        return s, max(s, e)


@dataclass(frozen=True)
class MarkupText:
    """A markup file's visible text.

    Attributes:
        text: the text a reader sees (blocks separated by blank lines).
        format: ``"markdown"``, ``"rst"`` or ``"html"``.
        map: offsets back into the file's text (:class:`TextMap`).
    """

    text: str
    format: str
    map: TextMap


class _Builder:
    """Collects visible text block by block and locates each piece in the source."""

    def __init__(self, source: str, in_markup: Callable[[int], bool] | None = None) -> None:
        self.src = source
        self.parts: list[str] = []
        self.n = 0
        self.segs: list[tuple[int, int, int]] = []
        self.cursor = 0
        self.block_start = True
        self.space = ""
        self.in_markup = in_markup

    def seek(self, pos: int) -> None:
        """Locate the following text at or after ``pos`` in the source."""
        self.cursor = max(self.cursor, pos)

    def brk(self) -> None:
        """End the current block (a blank line before the next text)."""
        if self.n:
            self.block_start = True
        self.space = ""

    def sep(self, text: str) -> None:
        """Whitespace between two inline pieces (dropped at a block's start or end)."""
        if not self.block_start and not self.space:
            self.space = text

    def add(self, text: str, locate: bool = True, verbatim: bool = False) -> None:
        """Append visible text: leading whitespace dropped at a block's start (kept for
        ``verbatim`` text: preformatted blocks, apart from blank lines), trailing whitespace
        held until more text follows in the block."""
        if self.block_start:
            text = text.lstrip("\n") if verbatim else text.lstrip()
        core = text.rstrip()
        if not core:
            if text:
                self.sep(text)
            return
        lead = len(text) - len(text.lstrip())
        if self.block_start:
            if self.n:
                self._emit("\n\n")
            self.block_start = False
        elif self.space and not lead:
            self._emit(self.space)
        self.space = text[len(core):]
        t0 = self.n
        self._emit(core)
        if locate:
            self._locate(core, t0)

    def _emit(self, text: str) -> None:
        self.parts.append(text)
        self.n += len(text)

    def _find(self, needle: str, start: int) -> int:
        end = start + max(8192, 8 * len(needle))
        p = self.src.find(needle, start, end)
        while p >= 0 and self.in_markup is not None and self.in_markup(p):
            p = self.src.find(needle, p + 1, end)
        return p

    def _locate(self, text: str, t0: int) -> None:
        p = self._find(text, self.cursor)
        if p >= 0:
            self.segs.append((t0, p, len(text)))
            self.cursor = p + len(text)
            return
        for m in _WORD_RE.finditer(text):  # unescaped or re-flowed: word by word
            word = m.group(0)
            p = self._find(word, self.cursor)
            if p >= 0:
                self.segs.append((t0 + m.start(), p, len(word)))
                self.cursor = p + len(word)

    def result(self, fmt: str) -> MarkupText:
        return MarkupText("".join(self.parts), fmt, TextMap(tuple(self.segs), len(self.src)))


# ---------------------------------------------------------------------------------------------
# Markdown (markdown-it-py)
# ---------------------------------------------------------------------------------------------
_FRONT_MATTER_RE = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_MD_BLOCK_CLOSE = frozenset({
    "paragraph_close", "heading_close", "list_item_close", "blockquote_close", "tr_close",
    "table_close", "bullet_list_close", "ordered_list_close",
})


def markdown_text(source: str) -> MarkupText:
    """The visible text of a Markdown document (CommonMark with tables and strikethrough).

    Args:
        source: the file's text.

    Returns:
        A :class:`MarkupText` (format ``"markdown"``).
    """
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    front = _FRONT_MATTER_RE.match(source)
    if front:  # YAML front matter: metadata, not text (blanked, offsets kept)
        source = re.sub(r"[^\n]", " ", front.group(0)) + source[front.end():]
    line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
    b = _Builder(source)
    for tok in md.parse(source):
        if tok.map:
            b.seek(line_starts[min(tok.map[0], len(line_starts) - 1)])
        kind = tok.type
        if kind == "inline":
            for child in tok.children or ():
                ck = child.type
                if ck in ("text", "code_inline"):
                    b.add(child.content)
                elif ck in ("softbreak", "hardbreak"):
                    b.sep("\n")
                elif ck == "image":
                    b.add(child.content or "".join(c.content for c in child.children or ()))
        elif kind in ("fence", "code_block"):
            b.brk()
            b.add(tok.content, verbatim=True)
            b.brk()
        elif kind == "html_block":
            b.brk()
            for block in html_text(tok.content).text.split("\n\n"):
                b.add(block)
                b.brk()
        elif kind in ("th_close", "td_close"):
            b.sep("\t")
        elif kind in _MD_BLOCK_CLOSE or kind == "hr":
            b.brk()
    return b.result("markdown")


# ---------------------------------------------------------------------------------------------
# reStructuredText (docutils)
# ---------------------------------------------------------------------------------------------
_RST_DROP = frozenset({
    "toctree", "kernel-doc", "kernel-include", "kernel-feat", "kernel-abi", "index", "include",
    "literalinclude", "raw", "highlight", "contents", "sectnum", "tabularcolumns", "meta",
    "sectionauthor", "moduleauthor", "codeauthor", "default-domain", "default-role",
    "c:namespace", "c:namespace-push", "c:namespace-pop", "cpp:namespace", "currentmodule",
    "module", "automodule", "autoclass", "autofunction", "automethod", "autodata",
    "autosummary", "spelling", "role", "cssclass", "rst-class", "class", "target-notes",
    "header", "footer", "title", "image", "figure", "graphviz", "kernel-figure",
    "kernel-image", "kernel-render", "only", "ifconfig",
})
"""Directives that show no prose of the document (navigation, includes, API stubs, images)."""
_RST_LITERAL = frozenset({"code-block", "code", "sourcecode", "prompt", "parsed-literal"})
_RST_LOCK = threading.Lock()


class _AnyOptions(dict):
    """An option spec accepting any option (its value is ignored)."""

    def __missing__(self, key: str) -> Callable[[Any], Any]:
        return lambda value: value


def _rst_generic_directive() -> type:
    from docutils import nodes
    from docutils.parsers.rst import Directive

    class AnyDirective(Directive):
        """A directive docutils does not know (Sphinx's, the kernel's): its content parsed as
        reST (its arguments kept for a domain directive's signature), or dropped for the
        directives of :data:`_RST_DROP`; code directives keep their content verbatim."""

        required_arguments = 0
        optional_arguments = 1
        final_argument_whitespace = True
        has_content = True
        option_spec = _AnyOptions()

        def run(self) -> list[Any]:
            name = self.name.lower()
            if name in _RST_DROP:
                return []
            if name in _RST_LITERAL:
                return [nodes.literal_block(text="\n".join(self.content))] if self.content else []
            out: list[Any] = []
            if self.arguments and ":" in name:  # c:function:: int foo(void): the signature
                out.append(nodes.paragraph(text=self.arguments[0]))
            if self.content:
                box = nodes.container()
                self.state.nested_parse(self.content, self.content_offset, box)
                out.append(box)
            return out

    return AnyDirective


_ROLE_TARGET_RE = re.compile(r"^(.*?)\s*<([^<>]*)>$", re.S)


def _rst_generic_role(name: str, rawtext: str, text: str, lineno: int, inliner: Any,
                      options: Mapping[str, Any] | None = None, content: Any = None) -> tuple[list, list]:
    """A role docutils does not know (``:ref:``, ``:doc:``, ``:c:func:``): the text it shows,
    ``Title`` of ``Title <target>`` or the target itself (``~`` / ``!`` prefixes dropped)."""
    from docutils import nodes, utils

    m = _ROLE_TARGET_RE.match(text)
    shown = m.group(1) if m and m.group(1).strip() else (m.group(2) if m else text)
    return [nodes.inline(rawtext, utils.unescape(shown.lstrip("~!")))], []


def _rst_doctree(source: str) -> Any:
    """docutils' doctree of ``source``, unknown directives and roles handled generically and
    no message printed or raised."""
    from docutils.core import publish_doctree
    from docutils.parsers.rst import directives, roles

    settings = {
        "report_level": 5, "halt_level": 5, "warning_stream": io.StringIO(),
        "file_insertion_enabled": False, "raw_enabled": False, "_disable_config": True,
        "syntax_highlight": "none", "line_length_limit": 1 << 30, "input_encoding": "unicode",
        "character_level_inline_markup": False, "traceback": True,
    }
    generic = _rst_generic_directive()
    with _RST_LOCK:  # docutils looks directives and roles up through module functions
        old_directive, old_role = directives.directive, roles.role

        def directive(name: str, language: Any, document: Any) -> tuple[Any, list]:
            if name.lower() in _RST_DROP:
                return generic, []
            cls, messages = old_directive(name, language, document)
            return (cls, messages) if cls is not None else (generic, [])

        def role(name: str, language: Any, lineno: int, reporter: Any) -> tuple[Any, list]:
            fn, messages = old_role(name, language, lineno, reporter)
            return (fn, messages) if fn is not None else (_rst_generic_role, [])

        directives.directive, roles.role = directive, role
        try:
            return publish_doctree(source, settings_overrides=settings)
        finally:
            directives.directive, roles.role = old_directive, old_role


def rst_text(source: str) -> MarkupText:
    """The visible text of a reStructuredText document (see the module docstring).

    Args:
        source: the file's text.

    Returns:
        A :class:`MarkupText` (format ``"rst"``).
    """
    from docutils import nodes

    skip = (nodes.comment, nodes.substitution_definition, nodes.system_message, nodes.raw,
            nodes.pending, nodes.meta if hasattr(nodes, "meta") else nodes.comment)
    b = _Builder(source)
    stack: list[tuple[Any, bool]] = [(_rst_doctree(source), False)]
    while stack:
        node, closing = stack.pop()
        if closing:
            b.brk()
            continue
        if isinstance(node, nodes.Text):
            b.add(node.astext())
            continue
        if isinstance(node, skip):
            continue
        if isinstance(node, nodes.problematic):  # an unresolved `name`_ reference: its text
            b.add(node.astext().strip("`_|"))
            continue
        if isinstance(node, nodes.image):
            b.add(node.get("alt", ""), locate=False)
            continue
        block = not isinstance(node, nodes.Inline) and isinstance(node, (
            nodes.TextElement, nodes.list_item, nodes.entry, nodes.row, nodes.field,
            nodes.definition_list_item, nodes.Admonition, nodes.section, nodes.topic,
            nodes.sidebar, nodes.table))
        if block:
            b.brk()
            stack.append((node, True))
        stack.extend((child, False) for child in reversed(node.children))
    return b.result("rst")


# ---------------------------------------------------------------------------------------------
# HTML (selectolax / Lexbor)
# ---------------------------------------------------------------------------------------------
_HTML_SKIP = frozenset({
    "-comment", "-doctype", "script", "style", "noscript", "template", "svg", "math", "head",
    "iframe", "object", "canvas", "select", "button", "input", "textarea", "map",
})
_HTML_BLOCK = frozenset({
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details",
    "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1",
    "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "li", "main", "nav", "ol", "p",
    "pre", "section", "summary", "table", "tbody", "thead", "tfoot", "tr", "ul", "html",
    "legend", "menu", "title",
})


def _html_in_tag(source: str) -> Callable[[int], bool]:
    def inside(pos: int) -> bool:
        return source.rfind("<", 0, pos) > source.rfind(">", 0, pos)

    return inside


def html_text(source: str) -> MarkupText:
    """The visible text of an HTML document: ``<title>``, then ``<main>`` (or an element with
    ``role="main"``; else ``<body>``).

    Args:
        source: the file's text.

    Returns:
        A :class:`MarkupText` (format ``"html"``).
    """
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(source)
    b = _Builder(source, _html_in_tag(source))
    roots = []
    title = tree.css_first("title")
    if title is not None:
        roots.append(title)
    main = tree.css_first("main") or tree.css_first('[role="main"]') or tree.body
    if main is not None:
        roots.append(main)
    elif tree.root is not None:  # a fragment without <body>
        roots.append(tree.root)
    for root in roots:
        _html_walk(root, b)
        b.brk()
    return b.result("html")


def _html_walk(root: Any, b: _Builder) -> None:
    stack: list[tuple[Any, int]] = [(root, 0)]  # (node, 0 open | 1 close | 2 close <pre>)
    pre = 0
    while stack:
        node, state = stack.pop()
        tag = node.tag
        if state:
            if tag in ("td", "th"):
                b.sep("\t")
            else:
                b.brk()
            pre -= state == 2
            continue
        if tag == "-text":
            text = node.text_content or ""
            if pre:
                b.add(text, verbatim=True)
            else:
                b.add(_SPACE_RE.sub(" ", text))
            continue
        if tag in _HTML_SKIP and node is not root:
            continue
        if tag == "a" and "headerlink" in ((node.attributes or {}).get("class") or ""):
            continue  # Sphinx's ¶ permalink, shown on hover only
        if tag == "br":
            b.sep("\n")
            continue
        if tag == "img":
            alt = (node.attributes or {}).get("alt")
            if alt:
                b.add(alt, locate=False)
            continue
        if tag in _HTML_BLOCK or tag in ("td", "th"):
            if tag in _HTML_BLOCK:
                b.brk()
            if tag == "pre":
                pre += 1
            stack.append((node, 2 if tag == "pre" else 1))
        children = []
        child = node.child
        while child is not None:
            children.append(child)
            child = child.next
        stack.extend((c, 0) for c in reversed(children))


# ---------------------------------------------------------------------------------------------
# entry points
# ---------------------------------------------------------------------------------------------
_READERS: dict[str, Callable[[str], MarkupText]] = {
    "markdown": markdown_text, "rst": rst_text, "html": html_text,
}


def markup_text(source: str, fmt: str) -> MarkupText:
    """The visible text of ``source`` read as ``fmt`` (``"markdown"``, ``"rst"``, ``"html"``).

    Raises:
        ValueError: an unknown format.
    """
    try:
        reader = _READERS[fmt]
    except KeyError:
        raise ValueError(f"unknown markup format {fmt!r} (one of {', '.join(_READERS)})") from None
    return reader(source)


def visible_text(source: str, path: str | Path) -> tuple[str, str | None]:
    """The text a document of file ``path`` holds: ``(visible text, format)`` for a markup
    file (:func:`markup_format`), ``(source, None)`` for any other.

    Raises:
        ValueError: a markup file with no visible text (``"no visible text"``).
    """
    fmt = markup_format(path)
    if fmt is None:
        return source, None
    text = markup_text(source, fmt).text
    if not text.strip():
        raise ValueError(f"{path}: no visible text ({fmt} markup only)")
    return text, fmt


def source_span(document: Any, start: int, end: int, source: str | None = None) -> tuple[int, int]:
    """The span of the file a document was read from that its visible span ``[start, end)``
    shows (string offsets into the file's decoded text), for citing the file itself.

    Args:
        document: a :class:`~graphstrata.types.Document` read from a file
            (``metadata["source"]``; ``metadata["text_format"]`` for a markup file).
        start, end: offsets into ``document.text`` (a chunk's or hit's ``start``/``end``).
        source: the file's text when the caller has it (else the file is read, as UTF-8).

    Returns:
        ``(file_start, file_end)``; ``(start, end)`` itself for a document not read from markup.

    Raises:
        ValueError: the file's text no longer gives the document's text (it changed since it
            was indexed), or the document names no source file.
        OSError: the file cannot be read.
    """
    meta = getattr(document, "metadata", None) or {}
    fmt = meta.get(FORMAT_KEY)
    if fmt is None:
        return start, end
    if source is None:
        if not meta.get("source"):
            raise ValueError(f"document {document.id!r} names no source file")
        source = Path(meta["source"]).read_text(encoding="utf-8-sig")
    read = markup_text(source, fmt)
    if read.text != document.text:
        raise ValueError(
            f"document {document.id!r}: {meta.get('source')} no longer gives its text (changed "
            "since it was indexed)"
        )
    return read.map.source_span(start, end)
