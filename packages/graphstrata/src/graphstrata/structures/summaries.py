"""HiRAG's summary entities (spec seed-hirag.md §2.5): the seam a :class:`~.hirag.HiIndex`
build hands each layer's clusters to (:data:`SummariseFn`, :class:`SummaryCluster`), the offline
summariser (:func:`extractive_summariser`), and the LLM stages an indexing module provides
(:class:`LLMStages`, :func:`provide_llm_stages`: :mod:`graphstrata.indexing.hirag`'s LLM
summariser and community reports, which are indexing stages and are not imported here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..llm.client import LLMClient

if TYPE_CHECKING:  # pragma: no cover
    from .hirag import HiIndex


@dataclass(frozen=True)
class SummaryCluster:
    """One non-singleton cluster of layer ``l − 1`` that becomes a summary entity of layer ``l``.

    Attributes:
        member_names, member_descriptions: the cluster's nodes in layer ``l − 1`` (KG
            entities for ``l = 1``; summary entities or carried-forward nodes above), most
            frequent first (by the occurrence weight of their top entity): what the spec's
            prompt summarises (§2.5.1).
        entity_names: every KG entity under the cluster (flattened), by occurrence weight
            descending: what the extractive summary names. For :func:`extractive_summariser`
            itself the build passes a read-only sequence that looks names up on access (and
            leaves the member lists empty: it reads neither), so a layer of 10⁶ entities does
            not materialise their names.
    """

    member_names: list[str]
    member_descriptions: list[str]
    entity_names: list[str]


SummariseFn = Callable[[int, list[SummaryCluster]], list[tuple[str, str]]]
"""``summarise_fn(layer, clusters) -> [(name, description), ...]``: the summary-entity seam of
HiIndex (spec §2.5), called once per layer with all its non-singleton clusters, returning one
``(name, description)`` per cluster in order. Defaults: :func:`extractive_summariser` offline,
:func:`~graphstrata.indexing.hirag.llm_summariser` with the state's LLM (see :func:`~.hirag.hi_index`)."""

CommunityReportsFn = Callable[[Any, "HiIndex", LLMClient], tuple[list[str], list[str]]]
"""``community_reports(kg, hi, client) -> (titles, texts)``: one LLM report per community of a
bound :class:`~.hirag.HiIndex` (``("", "")`` where a report failed; both empty when all did)."""


@dataclass(frozen=True)
class LLMStages:
    """HiRAG's LLM stages, which a :class:`~.hirag.HiIndex` build hands its clusters and communities to
    when the state was built with an LLM (spec §2.5.1 summary entities, §2.7 reports). They are
    indexing stages (prompts, kept answers, ledger stages): :mod:`graphstrata.indexing.hirag`
    provides them (:func:`provide_llm_stages`) when it is imported, as the facade does.

    Attributes:
        summariser: ``summariser(client) -> SummariseFn``, the LLM summary-entity seam.
        community_reports: the LLM community reports (:data:`CommunityReportsFn`).
    """

    summariser: Callable[[LLMClient], SummariseFn]
    community_reports: CommunityReportsFn


_LLM_STAGES: list[LLMStages] = []


def provide_llm_stages(stages: LLMStages) -> LLMStages:
    """Make ``stages`` the LLM stages of every later HiIndex build (a later call replaces it)."""
    _LLM_STAGES[:] = [stages]
    return stages


def llm_stages() -> LLMStages:
    """The provided :class:`LLMStages`.

    Raises:
        RuntimeError: none were provided (:mod:`graphstrata.indexing.hirag` not imported).
    """
    if not _LLM_STAGES:
        raise RuntimeError("HiRAG's LLM stages are not provided: import graphstrata.indexing first")
    return _LLM_STAGES[0]


def _extractive_summary(names: list[str]) -> tuple[str, str]:
    title = ", ".join(names[:3])
    listed = ", ".join(names[:10])
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return title, f"Summary of {len(names)} related entities: {listed}{more}."


def extractive_summariser(layer: int, clusters: list[SummaryCluster]) -> list[tuple[str, str]]:
    """The offline :data:`SummariseFn`: name = the top three entities under the cluster (by
    occurrence weight), description = "Summary of N related entities: <up to ten names>"."""
    return [_extractive_summary(c.entity_names) for c in clusters]


class LazyNames(Sequence):
    """Entity names of ``rows`` (int array) read on access: the extractive summary reads ten of
    a cluster's thousands."""

    def __init__(self, rows: np.ndarray, name: Callable[[int], str]) -> None:
        self._rows, self._name = rows, name

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._name(int(r)) for r in self._rows[i]]
        return self._name(int(self._rows[i]))
