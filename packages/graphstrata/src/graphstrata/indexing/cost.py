"""What a build with an LLM would spend, estimated without calling one (``index --dry-run``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..chunking import chunk_documents
from ..config import GraphStrataConfig
from ..llm import DryRunLLM, LLMClient
from ..models import Embedder
from ..structures.hirag import HiIndexConfig
from ..types import Document
from .extract import extractor
from .hirag_extract import HiragLLMExtractor

#: Completion tokens a call of each prompt family answers with, per token of its basis: the
#: chunk text's tokens for ``extract`` and ``extract:gleaning`` (the answer restates the
#: chunk's entities and relations; the ~1,000-token instructions and examples around it do
#: not grow it), the prompt's tokens for the other families. Measured with
#: ``bench/dry_run_calibration.py``: a scripted build of the first 40 HotpotQA documents
#: (``../shared/data/hotpotqa``) answered by ``graphstrata.testing.answer_at_realistic_length``
#: (answers sized as gpt-4o-mini answers these prompts), tokens counted by one tokenizer on
#: both sides; ``build_usage`` completion tokens over the basis, per family. Replaces a flat
#: 300 tokens a call, which was 2–5× off.
COMPLETION_RATIOS: dict[str, float] = {
    "extract": 6.0,  # 5.8 (40 docs) and 6.5 (12 docs) completion tokens a chunk token
    "extract:gleaning": 0.93,  # 0.89 and 1.0
    "extract:summaries": 0.1,  # not met in the measured run: a short summary of a long prompt
    "community_reports": 0.63,  # 0.61 and 0.66 of the prompt
}
#: :data:`COMPLETION_RATIOS` of HiRAG's two-stage extraction (``llm_extraction="hirag"``,
#: :mod:`graphstrata.indexing.hirag_extract`), completion tokens per chunk token: its
#: ``extract`` answer lists entities only, and ``extract:relations`` the relations among them.
#: Same measurement.
HIRAG_EXTRACTION_RATIOS: dict[str, float] = {
    "extract": 3.45,  # 3.67 (12 docs) and 3.25 (40 docs)
    "extract:gleaning": 0.46,  # 0.51 and 0.42
    "extract:relations": 2.8,  # 2.98 and 2.65
    "extract:relations:gleaning": 0.05,  # 0.05 and 0.047
}
#: Entities the relation prompt of HiRAG's two-stage extraction lists per chunk, at most: the
#: chunk's offline entities stand in for stage 1's (unknown before the model answers), the
#: first this many of them
HIRAG_LISTED_ENTITIES_PER_CHUNK = 8
#: Completion tokens per call where the answer's size does not follow its prompt: HiRAG
#: summary entities answer ~138 tokens whatever the cluster size (138 and 138 measured).
COMPLETION_PER_CALL: dict[str, int] = {"hirag_summaries": 138}
#: Entities the LLM extracts per chunk token (0.091 on 12 documents, 0.077 on 40): the graph
#: that community reports and HiRAG summaries are projected from. The offline extractor's
#: count overshot it by 20-50 %.
LLM_ENTITIES_PER_CHUNK_TOKEN = 0.08
#: HiRAG summary calls per ``sqrt(entities)`` (0.65 and 0.60 measured: one GMM layer of
#: ``~sqrt(n)`` clusters, most of which the build keeps).
HIRAG_CALLS_PER_SQRT_ENTITY = 0.62


#: HiRAG Leiden communities (one ``"hirag_reports"`` call each) per ``leiden_max_cluster_size / 2``
#: nodes of its multi-layer graph (entities + summary entities): 1.0 and 1.06 measured (5.2
#: and 5.35 nodes a community with the default cap of 10), the same half-full rule as
#: ArchRAG's communities.
HIRAG_COMMUNITIES_PER_HALF_CAP = 1.0


#: Report prompt tokens per member-description token (entity rows, relation rows, table
#: headers); same measurement as :data:`COMPLETION_RATIOS`.
REPORT_MEMBER_TOKENS_PER_DESC_TOKEN = 2.0
#: HiRAG report prompt tokens per member-description token: fewer than
#: :data:`REPORT_MEMBER_TOKENS_PER_DESC_TOKEN` since the multi-layer graph's communities have
#: fewer relation rows per member, and its inter-layer edges' rows are short; same
#: measurement as :data:`COMPLETION_RATIOS`.
HIRAG_REPORT_MEMBER_TOKENS_PER_DESC_TOKEN = 1.15
#: HiRAG summary prompt tokens per member-description token of the offline graph (the
#: prompt lists each member's name and its LLM description, shorter than the offline one's
#: sentences); same measurement as :data:`COMPLETION_RATIOS`.
SUMMARY_MEMBER_TOKENS_PER_DESC_TOKEN = 0.7


def family_of(stage: str) -> str:
    """The prompt family of a ledger stage name: ``"community_reports:layer_2"`` and
    ``"community_reports (projected)"`` → ``"community_reports"``; ``"extract:gleaning"`` stays."""
    stage = stage.removesuffix(" (projected)")
    return stage.split(":layer_")[0]


def usage_by_family(stages: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """A ledger's or an estimate's per-stage ``{"calls", "prompt_tokens", "completion_tokens"}``
    summed per prompt family (:func:`family_of`): the unit the dry run's estimate is compared
    with a run's actual counts in."""
    out: dict[str, dict[str, int]] = {}
    for name, s in stages.items():
        f = out.setdefault(family_of(name), {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        for k in f:
            f[k] += int(s[k])
    return out


def _project_relation_stage(
    ex: HiragLLMExtractor,
    chunks: Sequence[Any],
    titles: Mapping[str, str],
    offline: Sequence[Any],
    client: LLMClient,
) -> None:
    """The relation stage of HiRAG's two-stage extraction, sent to ``client`` (a dry-run
    client) with the chunks' offline entities standing in for the names stage 1 would list
    (the first :data:`HIRAG_LISTED_ENTITIES_PER_CHUNK` of each chunk's, most mentioned first):
    a real relation prompt, and its gleaning passes, per chunk with at least two."""
    listed: dict[str, list[str]] = {}
    for e in sorted(offline, key=lambda e: -e.weight):
        for cid in e.chunk_ids:
            names = listed.setdefault(cid, [])
            if len(names) < HIRAG_LISTED_ENTITIES_PER_CHUNK:
                names.append(e.name)
    todo = [c for c in chunks if len(listed.get(c.id, ())) >= 2]
    if todo:
        ex.relation_answers(todo, titles, [listed[c.id] for c in todo])


def estimate_llm_cost(
    docs: Sequence[Document], config: GraphStrataConfig, embedder: Embedder, llm: Any = None
) -> dict[str, Any]:
    """What a build with an LLM would spend, without calling one (``graphstrata index --dry-run``).

    Extraction calls are counted exactly: the real prompts of every chunk go to a
    :class:`~graphstrata.llm.DryRunLLM` that answers nothing and counts their tokens with
    ``llm``'s tokenizer when it has one (``count_tokens``: the LlamaIndex and LangChain
    adapters expose the model's), else ``ceil(chars / 3)``
    (:func:`~graphstrata.llm.base.count_prompt_tokens`). Gleaning prompts get the estimated
    extraction answer they repeat. HiRAG's two-stage extraction (``llm_extraction="hirag"``)
    sends its relation prompts with each chunk's offline entities as the listed names
    (:data:`HIRAG_LISTED_ENTITIES_PER_CHUNK`): a projection, labelled so. Completion tokens are
    :data:`COMPLETION_RATIOS` (:data:`HIRAG_EXTRACTION_RATIOS` for the two-stage extraction's
    families; measured per prompt family) times each family's basis. Community reports and HiRAG summary
    entities depend on the graph the LLM will extract, so they are projected from the offline
    graph sized from the chunks (:data:`LLM_ENTITIES_PER_CHUNK_TOKEN`): ``n / (max_community_size / 2)`` communities per layer while at
    least ``min_communities`` remain, ``sqrt(n)`` GMM clusters per HiRAG layer, and one HiRAG
    report per ``leiden_max_cluster_size / 2`` nodes of HiRAG's multi-layer graph
    (:data:`HIRAG_COMMUNITIES_PER_HALF_CAP`, stage ``"hirag_reports"``, seed-hirag.md §2.7),
    their prompts sized from the real templates — projections, labelled so.

    Args:
        docs: the documents the build would index.
        config: the build's configuration (chunking, gleaning, reports, layers).
        embedder: the embedder whose tokenizer chunks the documents.
        llm: the LLM the build would use (never called), or ``None``: only its tokenizer
            is read.

    Returns:
        ``{"chunks": n, "stages": {stage: {"calls", "prompt_tokens", "completion_tokens",
        "estimated": True, "exact_calls": bool}}, "total": {...}}``; tokens as above.

    Raises:
        ValueError: an empty corpus, or a document over ``config.max_document_chars``.
    """
    from ..llm.base import count_prompt_tokens

    if not docs:
        raise ValueError("empty corpus: no documents given")
    chunks = chunk_documents(
        docs, config.chunk_size, config.chunk_overlap, embedder=embedder, max_document_chars=config.max_document_chars
    )
    if not chunks:
        raise ValueError("empty corpus: the documents contain no text")

    def count(text: str) -> int:
        return count_prompt_tokens(llm, text)

    titles = {d.id: d.metadata["title"] for d in docs if d.metadata.get("title")}
    stages, offline, chunk_tokens = _extraction_stages(chunks, titles, config, llm, count)
    stages.update(_projected_stages(offline, chunk_tokens, config, count))
    total = {
        key: int(sum(s[key] for s in stages.values())) for key in ("calls", "prompt_tokens", "completion_tokens")
    }
    return {"chunks": len(chunks), "stages": stages, "total": {**total, "estimated": True}}


def _extraction_stages(
    chunks: Sequence[Any], titles: Mapping[str, str], config: GraphStrataConfig, llm: Any,
    count: Callable[[str], int],
) -> tuple[dict[str, dict[str, Any]], list[Any], int]:
    """The extraction stages of :func:`estimate_llm_cost`: the real prompts counted by a
    dry-run client, completion tokens from the family's ratio. Returns ``(stages, offline
    entities, chunk tokens)``; the offline entities and the chunks' tokens size the
    projections."""
    dry = DryRunLLM(tokenizer=llm)
    client = LLMClient(dry, concurrency=1, max_failure_share=1.0)  # empty answers are no model failure
    ex = extractor(config, client, False)
    try:
        ex.extract(chunks, titles)
    except ValueError:
        pass  # the dry run extracts nothing, by design
    offline, _ = extractor(config, None, False).extract(chunks, titles)
    ratios = dict(COMPLETION_RATIOS)
    if isinstance(ex, HiragLLMExtractor):
        ratios.update(HIRAG_EXTRACTION_RATIOS)
        _project_relation_stage(ex, chunks, titles, offline, client)
    # the relation stage's calls depend on what stage 1 will find: projected, labelled so
    stages: dict[str, dict[str, Any]] = {
        (f"{name} (projected)" if name.startswith("extract:relations") else name): {
            **{k: v for k, v in u.to_dict().items() if k not in ("checked", "failures")},
            "exact_calls": not name.startswith("extract:relations"),
        }
        for name, u in client.ledger.stages.items()
    }
    chunk_tokens = sum(count(c.text) for c in chunks)
    per_chunk = chunk_tokens / len(chunks)
    # one chunk's answer, which a gleaning prompt repeats, per stage
    answer_of = {"extract:gleaning": "extract", "extract:relations:gleaning": "extract:relations"}
    per_chunk_families = ("extract", "extract:gleaning", "extract:relations", "extract:relations:gleaning")
    for name, s in stages.items():
        family = family_of(name)
        if family in answer_of:
            s["prompt_tokens"] = int(s["prompt_tokens"] + s["calls"] * ratios[answer_of[family]] * per_chunk)
        basis = s["calls"] * per_chunk if family in per_chunk_families else s["prompt_tokens"]
        s["completion_tokens"] = int(round(ratios.get(family, 0.0) * basis))
    return stages, offline, chunk_tokens


def _projection(calls: int, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """One projected stage of :func:`estimate_llm_cost` (estimated, calls not exact)."""
    return {
        "calls": calls, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
        "estimated": True, "exact_calls": False,
    }


def _projected_stages(
    offline: Sequence[Any], chunk_tokens: int, config: GraphStrataConfig, count: Callable[[str], int]
) -> dict[str, dict[str, Any]]:
    """The stages that depend on the graph the LLM will extract (community reports, HiRAG
    summary entities and reports), projected from the offline graph sized from the chunks
    (see :func:`estimate_llm_cost`); a stage with no call is left out."""
    from ..llm.prompts.archrag import COMMUNITY_REPORT_PROMPT, COMMUNITY_REPORT_SYSTEM
    from ..llm.prompts.hirag import SUMMARY_ENTITY_PROMPT, SUMMARY_ENTITY_SYSTEM

    stages: dict[str, dict[str, Any]] = {}
    desc_tokens = float(np.mean([count(e.description) for e in offline])) if offline else 0.0
    n_entities = int(round(LLM_ENTITIES_PER_CHUNK_TOKEN * chunk_tokens))
    members = config.max_community_size / 2
    report_prompt = count(COMMUNITY_REPORT_SYSTEM + COMMUNITY_REPORT_PROMPT.format(context=""))
    per_report = int(min(report_prompt + REPORT_MEMBER_TOKENS_PER_DESC_TOKEN * desc_tokens * members, 8000))
    n, reports = n_entities, 0
    for _ in range(config.max_layers):
        n = int(n // max(members, 1))
        if n < config.min_communities:
            break
        reports += n
    if config.llm_community_reports and reports:
        stages["community_reports (projected)"] = _projection(
            reports, reports * per_report,
            int(round(reports * per_report * COMPLETION_RATIOS["community_reports"])),
        )
    summary_template = count(SUMMARY_ENTITY_SYSTEM + SUMMARY_ENTITY_PROMPT)
    summaries = int(round(HIRAG_CALLS_PER_SQRT_ENTITY * np.sqrt(n_entities))) if n_entities > 2 else 0
    size = n_entities / max(summaries, 1)  # members per cluster
    summary_prompts = summaries * (summary_template + size * desc_tokens * SUMMARY_MEMBER_TOKENS_PER_DESC_TOKEN)
    if summaries:
        stages["hirag_summaries (projected)"] = _projection(
            summaries, int(summary_prompts), summaries * COMPLETION_PER_CALL["hirag_summaries"]
        )
    hi_nodes = n_entities + summaries  # HiRAG's Leiden runs over entities and summary entities
    hi_members = HiIndexConfig().leiden_max_cluster_size / 2
    hi_reports = int(round(HIRAG_COMMUNITIES_PER_HALF_CAP * hi_nodes / max(hi_members, 1))) if n_entities > 2 else 0
    if hi_reports:
        per_hi_report = int(
            min(report_prompt + HIRAG_REPORT_MEMBER_TOKENS_PER_DESC_TOKEN * desc_tokens * hi_members, 8000)
        )
        stages["hirag_reports (projected)"] = _projection(
            hi_reports, hi_reports * per_hi_report,
            int(round(hi_reports * per_hi_report * COMPLETION_RATIOS["community_reports"])),
        )
    return stages
