"""HiRAG's LLM stages: summary entities (spec seed-hirag.md §2.5.1) and community reports
(§2.7), and the index-time stage that builds the default HiIndex with them.

The :class:`~graphstrata.structures.hirag.HiIndex` itself — its GMM layers, Leiden communities,
codec and registration — is :mod:`graphstrata.structures.hirag`; a build of an index made with
an LLM hands its clusters to :func:`llm_summariser` and its communities to
:func:`llm_community_reports`, which this module provides to it
(:func:`~graphstrata.structures.summaries.provide_llm_stages`) when it is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..llm.client import LLMClient
from ..llm.prompts.hirag import META_TYPES
from ..structures.hirag import PERSISTED_KEY, HiIndex, HiIndexConfig, hi_index, hi_index_key, hi_node_name
from ..structures.summaries import LLMStages, SummaryCluster, extractive_summariser, provide_llm_stages
from .reports import (
    DEFAULT_SUMMARY_INPUT_TOKENS,
    SUMMARY_STAGE,
    ReportContext,
    community_reports,
    summary_entities,
)

#: ledger stage of HiRAG's LLM community reports (spec §2.7)
HIRAG_REPORT_STAGE = "hirag_reports"


class LLMSummariser:
    """The LLM :data:`SummariseFn` (spec §2.5.1): one call per cluster through
    ``client.map``, our prompt in the spec's record format, the extractive summary where the
    output is unreadable (counted with ``client.skip(stage)``); see
    :func:`graphstrata.indexing.reports.summary_entities`. Its ``repr`` names the model, so it
    keys the derived-index cache.

    Raises (when called):
        LLMError: an LLM call failed after its retries.
    """

    def __init__(
        self,
        client: Any,
        stage: str = SUMMARY_STAGE,
        meta_types: Sequence[str] = META_TYPES,
        max_input_tokens: int = DEFAULT_SUMMARY_INPUT_TOKENS,
    ) -> None:
        self.client = LLMClient.of(client)
        self.stage = stage
        self.meta_types = tuple(meta_types)
        self.max_input_tokens = int(max_input_tokens)

    def __call__(self, layer: int, clusters: list[SummaryCluster]) -> list[tuple[str, str]]:
        return summary_entities(
            self.client,
            [(c.member_names, c.member_descriptions) for c in clusters],
            extractive_summariser(layer, clusters),
            stage=self.stage,
            meta_types=self.meta_types,
            max_input_tokens=self.max_input_tokens,
        )

    def __repr__(self) -> str:
        return (
            f"LLMSummariser(llm={self.client.id!r}, stage={self.stage!r}, "
            f"meta_types={self.meta_types!r}, max_input_tokens={self.max_input_tokens})"
        )


def llm_summariser(
    client: Any,
    *,
    stage: str = SUMMARY_STAGE,
    meta_types: Sequence[str] = META_TYPES,
    max_input_tokens: int = DEFAULT_SUMMARY_INPUT_TOKENS,
) -> LLMSummariser:
    """The LLM :data:`SummariseFn` for ``client`` (an :class:`~graphstrata.llm.LLMClient`, an
    LLM or a callable): pass it as ``HiIndexConfig(summarise_fn=...)``.

    Args:
        client: the LLM.
        stage: ledger stage of its calls (default ``"hirag_summaries"``).
        meta_types: the meta summary-entity types X (spec §2.9 list).
        max_input_tokens: token budget of one cluster's member list (the most frequent
            members are kept; the reference code's 60,000 with random subsampling fits only
            hosted models).

    Raises:
        TypeError: ``client`` is not an LLM, client or callable.
    """
    return LLMSummariser(client, stage, meta_types, max_input_tokens)


def community_report_context(kg, hi: HiIndex, c: int) -> ReportContext:
    """What community ``c``'s LLM report is written from (spec §2.7 report input): its
    members (KG entities with their type and description; summary entities typed
    ``"summary"``), the G_k edges among them (a KG relation's description; an inter-layer
    edge reads ``"<member> is part of <summary>"``) and each member's degree in G_k for
    ranking. Leaf communities have no sub-communities, so there are no sub-reports.

    Raises:
        ValueError: ``hi`` is not bound to a state's entities.
    """
    members = hi.members(c).tolist()
    member_set = set(members)
    names = {i: hi_node_name(kg, hi, i) for i in members}
    entities = []
    for i in members:
        if i < hi.n_entities:
            e = kg.entities[hi.node_id(i)]
            entities.append((e.name, e.type, e.description))
        else:
            entities.append((names[i], "summary", hi.descriptions[i - hi.n_entities]))
    relations = []
    for i in members:
        for j in hi.neighbours(i).tolist():
            if j <= i or j not in member_set:
                continue
            if j < hi.n_entities:  # both KG entities (i < j)
                a, b = hi.node_id(i), hi.node_id(j)
                r = kg.relations.get((a, b) if a < b else (b, a))
                relations.append((names[i], names[j], r.description if r is not None else ""))
            else:
                relations.append((names[i], names[j], f"{names[i]} is part of {names[j]}"))
    degrees = {names[i]: int(hi.degree[i]) for i in members}
    return ReportContext(entities=entities, relations=relations, degrees=degrees)


def llm_community_reports(kg, hi: HiIndex, client: Any) -> tuple[list[str], list[str]]:
    """HiRAG's LLM community reports (spec seed-hirag.md §2.7): one report per Leiden leaf
    community of ``hi``, written by ``client`` with the GraphRAG-style report prompt shared with
    ArchRAG (:func:`graphstrata.indexing.reports.community_reports`: kept answers in a build or
    update, response cache, bounded
    concurrency, echo guard), counted under the ledger stage :data:`HIRAG_REPORT_STAGE`.

    Each answer is treated as ArchRAG's report stage treats it: an unreadable answer (``"I
    don't know."``) or one copying the prompt's example report keeps the extractive text, and
    is counted with ``client.skip`` and as the stage's ``"parse"`` / ``"echo"`` failure (shown
    in ``build_usage`` / ``stats()``). Unlike ArchRAG's stage, a large failure share does not
    stop anything: the stage is best-effort, like HiRAG's summary entities
    (``"hirag_summaries"``): a model that cannot write reports must not make HiRAG unusable,
    and in a full LLM build the extraction and ArchRAG report stages already stop a model that
    fails them.

    Returns:
        ``(titles, texts)``, one per community in community order: the report's title and body
        (:meth:`~graphstrata.llm.report_parsing.CommunityReport.text`); ``("", "")`` where the
        report failed, where the retrieval uses :func:`extractive_community_report`. Both
        lists are empty when every report failed (the index then stores exactly what an
        offline one does).

    Raises:
        LLMError: an LLM call failed after its retries.
        ValueError: ``hi`` is not bound to a state's entities.
    """
    n = hi.n_communities
    contexts = [community_report_context(kg, hi, c) for c in range(n)]
    # the ("", "") fallback marks a failed report: its text is then the extractive one
    reports = community_reports(
        client, contexts, [("", "")] * n, stage=HIRAG_REPORT_STAGE, stop_on_failures=False
    )
    titles, texts = [], []
    for r in reports:
        body = r.text()
        if not body:  # a fallback (or a report with neither summary nor findings)
            titles.append("")
            texts.append("")
        else:
            titles.append(r.title)
            texts.append(body)
    if not any(texts):
        return [], []
    return titles, texts


def summary_entity_stage(state) -> dict[str, HiIndex]:
    """HiRAG's LLM summary entities as an index-time stage (spec §2.5): the default HiIndex of
    ``state`` (:func:`hi_index` with ``HiIndexConfig()``, the one HiRAG retrieval uses), built
    now so that its calls count in the build's LLM usage and its answers are kept with the index
    (inside the build's or update's :func:`~graphstrata.llm.records.keeping_answers` block: a
    summary or report prompt the previous state answered is not asked again) and land in the
    response cache.

    A build or update with an LLM runs it on the state it is about to publish, then constructs
    the published state with the result as its ``derived_seed``
    (:class:`~graphstrata.state.EngineState`): the first HiRAG query finds the index built, and
    it is persisted with the index (under :data:`PERSISTED_KEY`).
    An index already in ``state``'s derived cache is returned without a call.

    Returns:
        ``{hi_index_key(state): HiIndex, PERSISTED_KEY: the same HiIndex}``.

    Raises:
        LLMError: an LLM call failed after its retries.
    """
    config = HiIndexConfig()
    hi = hi_index(state, config)
    return {hi_index_key(state, config): hi, PERSISTED_KEY: hi}


#: the LLM stages every HiIndex build of an LLM-built state uses
LLM_STAGES = provide_llm_stages(LLMStages(summariser=llm_summariser, community_reports=llm_community_reports))
