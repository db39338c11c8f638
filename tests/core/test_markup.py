"""Markdown, reST and HTML files read as the text a reader sees, with offsets back into the
file (issue 44)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from graphstrata.loaders import load_documents
from graphstrata.markup import markdown_text, markup_format, rst_text, source_span
from graphstrata.sources import load_sources

RST = """\
.. SPDX-License-Identifier: GPL-2.0

.. _applying_patches:

Applying Patches To The Linux Kernel
++++++++++++++++++++++++++++++++++++

Original by:
	Jesper Juhl, August 2005

.. note::

   This document is obsolete.  In most cases you will want to use ``git am`` instead.

A frequently asked question on the mailing list is how to apply a patch, see
:ref:`the process guide <process_index>` and :doc:`howto`.

.. toctree::
   :maxdepth: 2

   howto

.. kernel-doc:: include/linux/foo.h
   :internal:

Tables
------

=====  =====
Tool   Use
=====  =====
patch  apply
=====  =====

.. |tool| replace:: interdiff

Use |tool| to compare two patches.
"""

MD = """\
---
title: front matter
---
# Patch *workflow*

Send patches with **git send-email** to the [list](https://lore.kernel.org "archive").
<!-- a comment nobody sees -->

<div class="note">Check <b>checkpatch</b> first.</div>

| Step | Tool |
|------|------|
| lint | checkpatch |

Review
======

```sh
git am < patch.mbox
```
"""

HTML = """\
<!DOCTYPE html>
<html><head><title>Kernel &amp; patches</title>
<style>p { color: red }</style><script>var x = "<p>hidden</p>";</script></head>
<body><nav class="sidebar">Index Search</nav>
<div role="main"><h1>Submitting patches</h1>
<p>Tom &amp; Jerry send
   <a href="/x" title="patches">patches</a> by mail.<br>Reviewers reply.</p>
<!-- not shown -->
<table><tr><th>Step</th><th>Tool</th></tr><tr><td>lint</td><td>checkpatch</td></tr></table>
<pre>  git format-patch
  git send-email</pre>
</div></body></html>
"""

TAG_RE = re.compile(r"</?[a-zA-Z][^>]*>")
DIRECTIVE_RE = re.compile(r"^\s*\.\.\s+(?:[\w:-]+::|_[^:]+:|\|[^|]+\||SPDX)", re.M)
UNDERLINE_RE = re.compile(r"^\s*([=\-+~^\"'`#*_.:])\1{3,}\s*$", re.M)


def _clean(text: str) -> None:
    assert not TAG_RE.search(text), TAG_RE.search(text)
    assert not DIRECTIVE_RE.search(text), DIRECTIVE_RE.search(text)
    assert not UNDERLINE_RE.search(text), UNDERLINE_RE.search(text)


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    (tmp_path / "patches.rst").write_text(RST, encoding="utf-8")
    (tmp_path / "workflow.md").write_text(MD, encoding="utf-8")
    (tmp_path / "submit.html").write_text(HTML, encoding="utf-8")
    (tmp_path / "howto.rst.txt").write_text(RST, encoding="utf-8")
    (tmp_path / "plain.txt").write_text("Plain text .. stays:: as it is.", encoding="utf-8")
    return tmp_path


def test_a_rest_file_is_read_as_its_visible_text(folder):
    [doc] = load_documents([folder / "patches.rst"])
    text = doc.text
    _clean(text)
    assert text.startswith("Applying Patches To The Linux Kernel\n\n")  # the heading, kept
    assert "This document is obsolete." in text and "git am" in text and "``" not in text
    assert "see\nthe process guide and howto." in text  # roles show their text
    for hidden in ("SPDX", "applying_patches", "toctree", "maxdepth", "kernel-doc", ":internal:",
                   "process_index", "++++", "|tool|", "replace::"):
        assert hidden not in text, hidden
    assert "Use interdiff to compare two patches." in text
    assert "Tables" in text and "patch" in text and "=====" not in text
    assert doc.metadata["text_format"] == "rst"


def test_a_markdown_file_is_read_as_its_visible_text(folder):
    [doc] = load_documents([folder / "workflow.md"])
    text = doc.text
    _clean(text)
    assert text.startswith("Patch workflow\n\n")
    assert "Send patches with git send-email to the list." in text
    for hidden in ("**", "#", "](", "lore.kernel.org", "comment", "front matter", "|---", "```"):
        assert hidden not in text, hidden
    assert "Check checkpatch first." in text and "lint\tcheckpatch" in text
    assert "Review" in text and "git am < patch.mbox" in text
    assert doc.metadata["text_format"] == "markdown"


def test_an_html_file_is_indexed_as_its_visible_text(folder):
    [doc] = load_documents([folder / "submit.html"])
    text = doc.text
    _clean(text)
    assert text.startswith("Kernel & patches\n\nSubmitting patches\n\n")
    assert "Tom & Jerry send patches by mail.\nReviewers reply." in text
    assert "Step\tTool" in text and "lint\tcheckpatch" in text
    assert "  git format-patch\n  git send-email" in text  # <pre> keeps its whitespace
    for hidden in ("color", "hidden", "not shown", "sidebar", "Index Search", "&amp;"):
        assert hidden not in text, hidden
    assert doc.metadata["text_format"] == "html"


def test_folders_and_the_cli_reader_take_markup_and_rst_txt(folder):
    docs = {d.id: d for d in load_documents([folder])}
    assert sorted(docs) == ["howto.rst.txt", "patches.rst", "plain.txt", "submit.html", "workflow.md"]
    assert docs["howto.rst.txt"].text == docs["patches.rst"].text
    assert docs["plain.txt"].text == "Plain text .. stays:: as it is."
    assert "text_format" not in docs["plain.txt"].metadata
    load = load_sources([folder])
    assert not load.skipped
    by_id = {d.id: d for d in load.documents}
    assert by_id["submit.html"].text == docs["submit.html"].text
    assert by_id["workflow.md"].metadata["text_format"] == "markdown"
    assert markup_format("a/b.HTM") == "html" and markup_format("x.md.txt") == "markdown"
    assert markup_format("notes.txt") is None


def test_a_markup_file_with_no_visible_text_is_refused_or_skipped(tmp_path):
    empty = tmp_path / "empty.rst"
    empty.write_text(".. a comment only\n\n.. _target:\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no visible text"):
        load_documents([empty])
    load = load_sources([empty])
    assert [s.reason for s in load.skipped] == ["no visible text (rst markup only)"]


@pytest.mark.parametrize("name", ["patches.rst", "workflow.md", "submit.html"])
def test_offsets_map_back_into_the_file(folder, name):
    source = (folder / name).read_text(encoding="utf-8")
    [doc] = load_documents([folder / name])
    words = list(re.finditer(r"[A-Za-z]{4,}", doc.text))
    assert words
    exact = 0
    for m in words:
        s, e = source_span(doc, m.start(), m.end())
        assert 0 <= s <= e <= len(source)
        exact += source[s:e] == m.group(0)
    assert exact >= 0.9 * len(words)  # substitutions, alt texts and entities map nearby
    # a sentence of the visible text maps to the file span that shows it
    i = doc.text.index("patch")
    s, e = source_span(doc, i, i + 5)
    assert source[s:e] == "patch"
    # a plain text document maps to itself; a changed file is refused
    assert source_span(load_documents([folder / "plain.txt"])[0], 3, 7) == (3, 7)
    (folder / name).write_text(source.replace("patch", "diff"), encoding="utf-8")
    with pytest.raises(ValueError, match="no longer gives its text"):
        source_span(doc, 0, 4)


def test_chunks_of_markup_point_into_the_visible_text(folder, embedder):
    from graphstrata import GraphStrata, GraphStrataConfig

    gs = GraphStrata.build(
        load_documents([folder / "patches.rst", folder / "submit.html"]), embedder=embedder,
        config=GraphStrataConfig(chunk_size=16, chunk_overlap=4, chunking="sentence"),
    )
    for c in gs.chunks:
        assert gs.documents[c.document_id].text[c.start : c.end] == c.text
        _clean(c.text)


def test_map_functions_directly():
    read = rst_text("Title\n=====\n\nSome *emphasis* here.\n")
    assert read.text == "Title\n\nSome emphasis here."
    assert read.map.source_span(0, 5) == (0, 5)
    s, e = read.map.source_span(read.text.index("emphasis"), read.text.index("emphasis") + 8)
    assert "Title\n=====\n\nSome *emphasis* here.\n"[s:e] == "emphasis"
    md = markdown_text("# A\n\ntext")
    assert md.text == "A\n\ntext" and md.map.source_offset(3) == 5
