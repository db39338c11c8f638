"""The clustering and summary stage: attributed community layers over the KG (ArchRAG
Alg. 1, ``seed-archrag.md`` §1) with extractive summaries or LLM community reports
(``seed-archrag.md`` §1.4–1.5), and the settings and TF-IDF model both the build and
incremental re-clustering use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import GraphStrataConfig
from ..extraction import FrozenTfidf, TfidfSpec, fit_tfidf, split_sentences
from ..graph import KnowledgeGraph
from ..hierarchy import (
    HierarchyConfig,
    Neighbours,
    attributed_communities,
    extractive_summaries,
    rank_chunks,
)
from ..llm import LLMClient
from ..llm.records import current_book
from ..llm.report_parsing import CommunityReport
from ..models import Embedder
from ..types import Chunk, Community
from .progress import Progress
from .reports import community_reports, graph_context


def summary_tfidf_spec() -> TfidfSpec:
    """The :class:`~graphstrata.extraction.TfidfSpec` of :func:`fit_summary_tfidf`: unigrams,
    English stop words, sublinear tf (scikit-learn's defaults otherwise)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfSpec.of(TfidfVectorizer(stop_words="english", sublinear_tf=True), "summary")


def fit_summary_tfidf(texts: Sequence[str], runner: Any = None) -> FrozenTfidf | None:
    """The unigram TF-IDF model of extractive community summaries
    (:func:`~graphstrata.hierarchy.extractive_summary`), fitted on the chunk texts and frozen
    for incremental updates; ``None`` when the texts have no vocabulary. scikit-learn's
    ``TfidfVectorizer`` model, computed in shards (:func:`~graphstrata.extraction.fit_tfidf`,
    on ``runner``'s workers when it has a ``map``)."""
    [(model, _)] = fit_tfidf([summary_tfidf_spec()], texts, runner)
    return model


def hierarchy_config(config: GraphStrataConfig) -> HierarchyConfig:
    """The :class:`~graphstrata.hierarchy.HierarchyConfig` a build configuration describes (used
    by the build and by incremental re-clustering, so both cluster alike)."""
    return HierarchyConfig(
        max_community_size=config.max_community_size,
        min_communities=config.min_communities,
        max_layers=config.max_layers,
        similarity_percentile=config.similarity_percentile,
        max_knn=config.max_knn,
        seed=config.seed,
    )


def cluster_communities(
    kg: KnowledgeGraph,
    chunks: Sequence[Chunk],
    entity_vecs: np.ndarray,
    config: GraphStrataConfig,
    embedder: Embedder,
    prog: Progress,
    llm: LLMClient | None = None,
    summary_tfidf: FrozenTfidf | None = None,
    neighbours: Neighbours | None = None,
    index: Any = None,
) -> tuple[list[list[Community]], list[np.ndarray]]:
    """Attributed community layers over the KG (ArchRAG Alg. 1) with extractive summaries, or
    with an ``llm`` (and ``config.llm_community_reports``) LLM community reports (ArchRAG
    §1.4-1.5: level 1 from member entities and their relations, higher levels from the
    sub-communities' reports), embedded as the community vectors.

    ``entity_vecs`` are float32 ``(n_entities, dim)`` in ``kg.entity_ids`` order (rows
    L2-normalised). ``summary_tfidf`` is the summaries' TF-IDF model
    (:func:`fit_summary_tfidf`; fitted on ``chunks`` when ``None``). ``neighbours``: the
    entities' k-NN from the build's entity index (:meth:`~graphstrata.index.LayeredIndex.knn`),
    used when there are more than :data:`~graphstrata.hierarchy.EXACT_KNN_MAX` entities.
    ``index``: the build's entity C-HNSW (:class:`~graphstrata.index.LayeredIndex`): each kept
    layer is added to it as soon as it is clustered (stage ``"indexing layers (C-HNSW)"``) and
    large levels read their k-NN from it (``attributed_communities``' ``index``).

    Returns:
        ``(layers, layer_vectors)``: communities per layer (members and entity ids as ids,
        chunk provenance ranked) and float32 ``(n_i, dim)`` vectors per layer; ``([], [])``
        when the chunks have no vocabulary.

    Raises:
        ValueError: the embedder returned another shape (summary or report vectors).
        graphstrata.llm.LLMError: an LLM report call failed after its retries.
    """
    if summary_tfidf is None:
        summary_tfidf = fit_summary_tfidf([c.text for c in chunks])
    if summary_tfidf is None:
        return [], []
    use_reports = llm is not None and config.llm_community_reports
    summarise = _LayerSummaries(kg, summary_tfidf.vectorizer(), llm if use_reports else None)
    row = kg.row
    edges = np.fromiter(
        (r for a, b in kg.relations for r in (row[a], row[b])), np.int64, count=2 * len(kg.relations)
    ).reshape(-1, 2)
    hcfg = hierarchy_config(config)

    def run():
        return attributed_communities(
            entity_vecs,
            edges,
            summarise,
            (lambda texts: prog.embed(embedder, texts, "embedding communities"))
            if config.community_vectors == "summary" or use_reports
            else None,
            hcfg,
            neighbours=neighbours,
            index=index,
            add_layer=None
            if index is None
            else lambda vecs: prog.stage("indexing layers (C-HNSW)", lambda: index.add_layers([vecs])),
        )

    layers, layer_vecs = prog.stage("clustering communities", run)
    _name_layers(kg, layers, summarise.reports)
    return layers, layer_vecs


class _LayerSummaries:
    """The ``summarise`` callback of :func:`~graphstrata.hierarchy.attributed_communities`,
    called once per level, bottom-up: extractive summaries, or LLM community reports
    (``llm``), of each cluster of the level's nodes.

    Per node of the level below it keeps the entity rows and sentences (at layer 1 an entity's
    sentences are split from its description when its community is summarised, not all held
    at once: ~0.3 kB an entity, 0.5 GB at a million chunks).

    Attributes:
        reports: ``{level: [CommunityReport per community]}`` (LLM reports only).
    """

    def __init__(self, kg: KnowledgeGraph, vectorizer: Any, llm: LLMClient | None) -> None:
        self.kg = kg
        self.vectorizer = vectorizer
        self.llm = llm
        self.entities = [kg.entities[e] for e in kg.entity_ids]
        self.below_rows: list[list[int]] | None = None  # layer 1: node m is entity row m
        self.below_sentences: list[list[str]] | None = None
        self.reports: dict[int, list[CommunityReport]] = {}

    def sentences(self, m: int) -> list[str]:
        """The sentences of node ``m`` of the level below."""
        if self.below_sentences is not None:
            return self.below_sentences[m]
        d = self.entities[m].description
        return [d[s:t] for s, t in split_sentences(d)]

    def __call__(self, level: int, clusters: list[list[int]]) -> list[tuple[str, str]]:
        """``(title, summary)`` per cluster of ``level`` (clusters of rows of the level below)."""
        entities = self.entities
        rows_next = (
            [sorted(set(members)) for members in clusters] if self.below_rows is None
            else [sorted({r for m in members for r in self.below_rows[m]}) for members in clusters]
        )
        out = extractive_summaries(
            [
                (
                    [entities[r].name for r in rows],
                    [entities[r].weight for r in rows],
                    [s for m in members for s in self.sentences(m)],
                )
                for members, rows in zip(clusters, rows_next, strict=True)
            ],
            self.vectorizer,
        )
        sents_next = [[summary] if summary else [] for _, summary in out]
        if self.llm is not None:
            level_reports = _llm_reports(
                self.llm, self.kg, level, clusters, rows_next, self.reports.get(level - 1), out
            )
            self.reports[level] = level_reports
            out = [(r.title, r.text()) for r in level_reports]
            sents_next = [[r.text()] for r in level_reports]
        self.below_rows, self.below_sentences = rows_next, sents_next
        return out


def _name_layers(
    kg: KnowledgeGraph, layers: list[list[Community]], reports: dict[int, list[CommunityReport]]
) -> None:
    """The clustered layers' indices turned into ids, their chunk provenance ranked, and the
    LLM reports' ratings and findings set (in place); the answer a report was read from stays
    with the index."""
    below_ids = kg.entity_ids
    book = current_book()
    for level, comms in enumerate(layers, 1):
        for ci, c in enumerate(comms):
            if level in reports:
                c.rating = reports[level][ci].rating
                c.findings = list(reports[level][ci].findings)
                if book is not None:  # the answer the report was read from stays with the index
                    book.own(c.id, reports[level][ci].answer_key)
            c.members = [below_ids[int(m)] for m in c.members]
            c.entity_ids = [kg.entity_ids[int(e)] for e in c.entity_ids]
            c.chunk_ids = rank_chunks([kg.entities[e].chunk_ids for e in c.entity_ids])
        below_ids = [c.id for c in comms]


def _llm_reports(llm, kg, level, clusters, rows, below_reports, fallbacks) -> list[CommunityReport]:
    """One LLM community report per cluster of ``level`` (ArchRAG §1.4-1.5).

    The context of a community is its entities (name, type, description; ranked by degree in
    the KG) and the relations among them; above layer 1 the member communities' reports take
    their place when the raw context does not fit the budget
    (:func:`~.reports.graph_context`). ``rows`` are the entity rows under each
    cluster; ``fallbacks`` the extractive ``(title, summary)`` used where the model's output is
    unreadable.
    """
    contexts = [
        graph_context(
            kg,
            [kg.entity_ids[r] for r in rows_of],
            [below_reports[int(m)] for m in members] if level > 1 else (),
        )
        for members, rows_of in zip(clusters, rows, strict=True)
    ]
    return community_reports(llm, contexts, fallbacks, stage=f"community_reports:layer_{level}")
