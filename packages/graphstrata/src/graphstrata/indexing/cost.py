"""What a build with an LLM would spend, estimated without calling one (``index --dry-run``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..chunking import chunk_documents
from ..config import GraphStrataConfig
from ..llm import DryRunLLM, LLMClient, estimate_tokens
from ..models import Embedder
from ..types import Document
from .extract import extractor


def estimate_llm_cost(docs: Sequence[Document], config: GraphStrataConfig, embedder: Embedder) -> dict[str, Any]:
    """What a build with an LLM would spend, without calling one (``graphstrata index --dry-run``).

    Extraction is counted exactly: the real prompts of every chunk go to a
    :class:`~graphstrata.llm.DryRunLLM` that answers nothing and counts their tokens
    (gleaning passes included; completion tokens are a flat estimate per call). Community
    reports and HiRAG summary entities depend on the graph the LLM will extract, so they are
    projected from the offline graph of the same chunks: ``n / (max_community_size / 2)``
    communities per layer while at least ``min_communities`` remain, and ``sqrt(n)`` GMM
    clusters per HiRAG layer — rough, and labelled so.

    Returns:
        ``{"chunks": n, "stages": {stage: {"calls", "prompt_tokens", "completion_tokens",
        "estimated": True, "exact_calls": bool}}, "total": {...}}``; tokens are
        ``chars / 4`` estimates.

    Raises:
        ValueError: an empty corpus, or a document over ``config.max_document_chars``.
    """
    if not docs:
        raise ValueError("empty corpus: no documents given")
    chunks = chunk_documents(
        docs, config.chunk_size, config.chunk_overlap, embedder=embedder, max_document_chars=config.max_document_chars
    )
    if not chunks:
        raise ValueError("empty corpus: the documents contain no text")
    titles = {d.id: d.metadata["title"] for d in docs if d.metadata.get("title")}
    dry = DryRunLLM()
    client = LLMClient(dry, concurrency=1, max_failure_share=1.0)  # empty answers are no model failure
    try:
        extractor(config, client, False).extract(chunks, titles)
    except ValueError:
        pass  # the dry run extracts nothing, by design
    stages: dict[str, dict[str, Any]] = {
        name: {**{k: v for k, v in u.to_dict().items() if k not in ("checked", "failures")}, "exact_calls": True}
        for name, u in client.ledger.stages.items()
    }
    entities, _ = extractor(config, None, False).extract(chunks, titles)
    desc_tokens = np.mean([estimate_tokens(e.description) for e in entities]) if entities else 0.0
    per_report = int(min(desc_tokens * config.max_community_size / 2 + 400, 8000))
    n, reports = len(entities), 0
    for _ in range(config.max_layers):
        n = int(n // max(config.max_community_size / 2, 1))
        if n < config.min_communities:
            break
        reports += n
    if config.llm_community_reports and reports:
        stages["community_reports (projected)"] = {
            "calls": reports, "prompt_tokens": reports * per_report,
            "completion_tokens": reports * dry.completion_estimate, "estimated": True, "exact_calls": False,
        }
    n, summaries = len(entities), 0
    while n > 2:
        n = int(np.sqrt(n))
        summaries += n
    if summaries:
        stages["hirag_summaries (projected)"] = {
            "calls": summaries, "prompt_tokens": summaries * 600,
            "completion_tokens": summaries * dry.completion_estimate, "estimated": True, "exact_calls": False,
        }
    total = {
        key: int(sum(s[key] for s in stages.values())) for key in ("calls", "prompt_tokens", "completion_tokens")
    }
    return {"chunks": len(chunks), "stages": stages, "total": {**total, "estimated": True}}
