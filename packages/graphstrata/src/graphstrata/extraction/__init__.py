"""Chunk → entity and relation records, without an LLM (:class:`StatisticalExtractor`).

The package's modules:

* :mod:`~graphstrata.extraction.statistical` — :class:`StatisticalExtractor`, the per-chunk
  records (:class:`ChunkRecord`, :class:`CompactRecord`) and their merge
  (:class:`RecordMerge`, :func:`merge_records`, :func:`extract_shard`);
* :mod:`~graphstrata.extraction.tfidf` — the corpus TF-IDF models (:func:`fit_tfidf`,
  :class:`FrozenTfidf`, :class:`TfidfSpec`);
* :mod:`~graphstrata.extraction.text` — sentences, capitalised spans, canonical names;
* :mod:`~graphstrata.extraction.titles` — document titles (:func:`document_title`,
  :class:`TitleIndex`).

Every name below is importable from ``graphstrata.extraction`` as before the split.
"""

from .statistical import (
    RECORD_ZLIB_LEVEL,
    UNSPECIFIC_LABELS,
    ChunkRecord,
    CompactRecord,
    RecordMerge,
    StatisticalExtractor,
    extract_shard,
    merge_records,
)
from .text import DEFAULT_MAX_SENTENCE_CHARS, bounded_sentences, canonical, capitalised_spans, split_sentences
from .tfidf import TFIDF_SHARD, FrozenTfidf, TfidfSpec, analyse_shard, fit_tfidf
from .titles import TitleIndex, document_title

__all__ = [
    "UNSPECIFIC_LABELS",
    "DEFAULT_MAX_SENTENCE_CHARS",
    "RECORD_ZLIB_LEVEL",
    "TFIDF_SHARD",
    "ChunkRecord",
    "CompactRecord",
    "FrozenTfidf",
    "RecordMerge",
    "StatisticalExtractor",
    "TfidfSpec",
    "TitleIndex",
    "analyse_shard",
    "bounded_sentences",
    "canonical",
    "capitalised_spans",
    "document_title",
    "extract_shard",
    "fit_tfidf",
    "merge_records",
    "split_sentences",
]
