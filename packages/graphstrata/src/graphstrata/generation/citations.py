"""Citations: the ``[n]`` markers an answer writes, read back into the sources they name.

Every answer prompt numbers what the model may cite and asks for ``[n]`` markers: the chunk
passages for the one-call methods (the ``Documents`` / ``Sources`` / ``Source Documents``
rows, LightRAG mix's ``Document Chunks`` numbered on from its ``Sources``, AGRAG's
passages), the analyst reports for ArchRAG's merge call. A marker is ``[n]`` or a list
``[n, m]`` / ``[n; m]``; a number the prompt did not give a source (a row of another table, a
year in brackets, a number past the last passage) is ignored, and an answer that cites
nothing has no citations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from ..types import Citation, Hit

_MARKER = re.compile(r"\[\s*(\d+(?:\s*[,;]\s*\d+)*)\s*\]")
_NUMBER = re.compile(r"\d+")
_MARKER_AND_SPACE = re.compile(r"[ \t]*" + _MARKER.pattern)


def cited_numbers(text: str) -> list[int]:
    """The numbers of the ``[n]`` markers in ``text``, in order of first appearance, without
    repeats (``"[2] and [1, 2]"`` → ``[2, 1]``)."""
    out: dict[int, None] = {}
    for m in _MARKER.finditer(text):
        for n in _NUMBER.findall(m.group(1)):
            out.setdefault(int(n), None)
    return list(out)


def citation_of(number: int, hits: Iterable[Hit]) -> Citation:
    """The :class:`~graphstrata.types.Citation` of source ``number`` shown from ``hits``: the
    chunks behind them (a chunk hit's own id, another hit's provenance ``chunk_ids``) and
    their documents, each in order without repeats."""
    chunks: dict[str, None] = {}
    docs: dict[str, None] = {}
    for h in hits:
        for cid in ([h.id] if h.kind == "chunk" else h.chunk_ids):
            chunks.setdefault(cid, None)
        for did in h.document_ids:
            docs.setdefault(did, None)
    return Citation(number, list(chunks), list(docs))


def citations(text: str, sources: Mapping[int, Sequence[Hit]]) -> list[Citation]:
    """The citations of an answer: one per number cited in ``text`` (:func:`cited_numbers`)
    that ``sources`` holds, in order of first appearance; numbers it does not hold are
    ignored.

    Args:
        text: the answer text.
        sources: ``{number: the hits the prompt showed as source number}``.
    """
    return [citation_of(n, sources[n]) for n in cited_numbers(text) if n in sources]


def strip_citations(text: str) -> str:
    """``text`` without its ``[n]`` markers (and the space before each), for scoring an answer
    against a gold string (:func:`graphstrata.eval.evaluate_answers`)."""
    return _MARKER_AND_SPACE.sub("", text).strip()


__all__ = ["cited_numbers", "citation_of", "citations", "strip_citations"]
