"""``index --dry-run`` against a scripted build (issue 29): per stage, the estimate of prompt
and completion tokens is within ±25 % of what the build's ledger counted.

The scripted model (:func:`graphstrata.testing.answer_at_realistic_length`) answers every
family at a realistic length and reports usage by its own tokenizer
(:func:`graphstrata.testing.count_tokens`), which the dry run reads through ``count_tokens``:
both sides count with one rule. Tests the estimator's arithmetic, never answer quality.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from graphstrata import GraphStrata
from graphstrata.config import as_config
from graphstrata.indexing import estimate_llm_cost
from graphstrata.indexing.cost import usage_by_family
from graphstrata.llm import DryRunLLM
from graphstrata.testing import HashEmbedder, TokenizedLLM, answer_at_realistic_length
from graphstrata.types import Document

CONFIG = {"min_communities": 2, "max_community_size": 6}
FAMILIES = ("extract", "extract:gleaning", "community_reports", "hirag_summaries", "hirag_reports")


#: HiRAG's two-stage extraction (llm_extraction="hirag"): its own four extraction families
HIRAG_CONFIG = {**CONFIG, "llm_extraction": "hirag"}
HIRAG_FAMILIES = ("extract", "extract:gleaning", "extract:relations", "extract:relations:gleaning")


def _measure(config: dict, corpus: list[dict]):
    llm = TokenizedLLM(answer_at_realistic_length)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # records the extractor rejects are counted, not fatal
        gs = GraphStrata.build(corpus, config=config, embedder=HashEmbedder(), llm=llm)
    docs = [Document(d["id"], d["text"], {"title": d["title"]}) for d in corpus]
    est = estimate_llm_cost(docs, as_config(config), HashEmbedder(), llm=llm)
    return usage_by_family(gs.build_usage["stages"]), est, len(llm.calls)


@pytest.fixture(scope="module")
def measured(shared_data: Path, jsonl):
    return _measure(CONFIG, jsonl(shared_data / "hotpotqa" / "corpus.jsonl", 12))


@pytest.fixture(scope="module")
def measured_hirag(shared_data: Path, jsonl):
    return _measure(HIRAG_CONFIG, jsonl(shared_data / "hotpotqa" / "corpus.jsonl", 12))


def _assert_within_25_percent(measurement, family: str, kind: str) -> None:
    actual, est, _ = measurement
    estimate = usage_by_family(est["stages"])
    assert actual[family][kind] > 0
    assert estimate[family][kind] == pytest.approx(actual[family][kind], rel=0.25), (family, kind)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", ["prompt_tokens", "completion_tokens"])
def test_dry_run_estimate_is_within_25_percent_of_the_scripted_build(measured, family, kind):
    _assert_within_25_percent(measured, family, kind)


def test_dry_run_counts_extraction_calls_exactly_and_calls_no_model(measured):
    actual, est, calls = measured
    estimate = usage_by_family(est["stages"])
    assert estimate["extract"]["calls"] == actual["extract"]["calls"]
    assert estimate["extract:gleaning"]["calls"] == actual["extract:gleaning"]["calls"]
    assert calls == sum(a["calls"] for a in actual.values())  # the dry run added no call


def test_dry_run_llm_counts_prompts_with_the_model_tokenizer_else_chars_over_3():
    text = "Alpha, beta; gamma."  # 6 tokens by count_tokens, 19 characters
    with_tokenizer = DryRunLLM(tokenizer=TokenizedLLM(answer_at_realistic_length)).complete(text)
    assert with_tokenizer.usage.prompt_tokens == 6
    assert DryRunLLM().complete(text).usage.prompt_tokens == 7  # ceil(19 / 3)
    assert with_tokenizer.text == ""


@pytest.mark.parametrize("family", HIRAG_FAMILIES)
@pytest.mark.parametrize("kind", ["prompt_tokens", "completion_tokens"])
def test_dry_run_estimate_of_two_stage_extraction_is_within_25_percent(measured_hirag, family, kind):
    _assert_within_25_percent(measured_hirag, family, kind)


def test_dry_run_of_two_stage_extraction_counts_entity_calls_exactly_and_projects_relations(measured_hirag):
    actual, est, calls = measured_hirag
    assert usage_by_family(est["stages"])["extract"]["calls"] == actual["extract"]["calls"]
    relations = est["stages"]["extract:relations (projected)"]
    assert relations["exact_calls"] is False and relations["calls"] == actual["extract:relations"]["calls"]
    assert calls == sum(a["calls"] for a in actual.values())  # the dry run added no call
