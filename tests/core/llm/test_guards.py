"""The LLM build keeps only what the model read in the text (issue 29).

Scripted models stand in for the failure modes SmolLM2-135M showed on this machine: answers
copying the extraction prompt's worked example, reports copying the example report, names
found nowhere in the chunk, and unbounded output. Corpus: the first HotpotQA passages of
``../shared/data`` (real text, so the grounding check meets real names).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from graphstrata import GraphStrata
from graphstrata.llm import LLMClient, LLMOutputError
from graphstrata.llm.extraction_parsing import LLMOutputWarning
from graphstrata.llm.guards import MAX_ENTITIES_PER_CHUNK, Grounding, is_echo
from graphstrata.llm.prompts import archrag
from graphstrata.llm.prompts import lightrag_extract as lx
from graphstrata.testing import HashEmbedder, ScriptedLLM
from graphstrata.testing import answer_every_prompt as toy
from graphstrata.types import Chunk

CONFIG = {"min_communities": 2, "max_community_size": 6, "chunk_size": 120, "chunk_overlap": 16}

# what SmolLM2 answered: the worked example's records, whatever the passage
ECHO = "##\n".join(
    [
        '("entity"<|>Mara Ilves<|>person<|>Mara Ilves is a chemist who founded Ilves Labs in 1998.)',
        '("entity"<|>Ilves Labs<|>organization<|>Ilves Labs is a company that Mara Ilves founded.)',
        '("entity"<|>Tallinn<|>geo<|>Tallinn is the city where Ilves Labs was founded.)',
        '("relationship"<|>Mara Ilves<|>Ilves Labs<|>Mara Ilves founded Ilves Labs in 1998.<|>founding<|>9)',
    ]
) + "##\n" + lx.COMPLETION_DELIMITER

EXAMPLE_REPORT = json.dumps(
    {
        "title": archrag.EXAMPLE_REPORT_TITLE,
        "summary": "The community centres on Acme Corporation, founded by Jane Doe and John Roe in Springfield.",
        "rating": 6.5,
        "rating_explanation": "Acme is a large employer in the region.",
        "findings": [{"summary": "Jane Doe founded Acme", "explanation": "Jane Doe founded Acme Corporation."}],
    }
)


@pytest.fixture(scope="module")
def hotpot_docs(shared_data: Path, jsonl):
    """``hotpot_docs(n=8)``: the first ``n`` HotpotQA documents (``shared_data``: the root conftest)."""
    return lambda n=8: jsonl(shared_data / "hotpotqa" / "corpus.jsonl", n)


def _echo_extraction(prompt: str, system: str | None) -> str:
    if system == lx.EXTRACT_SYSTEM and not prompt.rstrip().endswith((lx.CONTINUE_QUESTION, lx.GLEANING_INSTRUCTION)):
        return ECHO
    return toy(prompt, system)


def _echo_reports(prompt: str, system: str | None) -> str:
    if system == archrag.COMMUNITY_REPORT_SYSTEM:
        return EXAMPLE_REPORT
    return toy(prompt, system)


def test_an_echoing_llm_stops_the_build_with_one_error_and_persists_nothing(tmp_path, hotpot_docs):
    out = tmp_path / "index"
    llm = ScriptedLLM(_echo_extraction, id="echo-model")
    with pytest.raises(LLMOutputError) as err:
        GraphStrata.build(hotpot_docs(), config=CONFIG, embedder=HashEmbedder(), persist_dir=out, llm=llm)
    msg = str(err.value)
    assert "'echo-model'" in msg and "stage 'extract'" in msg and "(100%)" in msg
    assert "copied from the prompt's example" in msg
    assert err.value.reasons == {"echo": err.value.answers}
    with pytest.raises(Exception):  # noqa: B017 - no index of any kind was written
        GraphStrata.load(out, embedder=HashEmbedder())


def test_a_failed_llm_build_leaves_the_existing_index_as_it_was(tmp_path, hotpot_docs):
    out = tmp_path / "index"
    docs = hotpot_docs()
    good = GraphStrata.build(docs, config=CONFIG, embedder=HashEmbedder(), persist_dir=out, llm=ScriptedLLM(toy))
    before = sorted(good.kg.entities)
    with pytest.raises(LLMOutputError, match="stage 'community_reports:layer_1'"):
        GraphStrata.build(
            docs, config={**CONFIG, "chunk_size": 100}, embedder=HashEmbedder(), persist_dir=out,
            llm=ScriptedLLM(_echo_reports, id="report-echo"),
        )
    assert sorted(GraphStrata.load(out, embedder=HashEmbedder()).kg.entities) == before


def test_the_failure_threshold_is_a_setting_and_failures_are_counted_in_stats(tmp_path, hotpot_docs):
    """A model echoing on some chunks: with ``llm_max_failure_share=1`` the build goes through,
    keeps none of the example's entities, and ``stats()`` shows the failures per stage; the
    same answers stop the build at a threshold below their share."""
    echoed: list[str] = []

    def sometimes(prompt: str, system: str | None) -> str:
        first = not prompt.rstrip().endswith((lx.CONTINUE_QUESTION, lx.GLEANING_INSTRUCTION))
        if system == lx.EXTRACT_SYSTEM and first and len(prompt) % 3 == 0:
            echoed.append(prompt)
            return _echo_extraction(prompt, system)
        return toy(prompt, system)

    gs = GraphStrata.build(
        hotpot_docs(), config={**CONFIG, "llm_max_failure_share": 1.0}, embedder=HashEmbedder(),
        llm=ScriptedLLM(sometimes, id="echo-model"), persist_dir=tmp_path / "i",
    )
    assert not {"mara ilves", "ilves labs", "tallinn"} & set(gs.kg.entities)
    stage = gs.stats()["build_usage"]["stages"]["extract"]
    assert 0 < len(echoed) < stage["calls"]
    assert stage["checked"] == stage["calls"] and stage["failures"] == {"echo": len(echoed)}
    share = len(echoed) / stage["calls"]
    with pytest.raises(LLMOutputError, match=f"{len(echoed)} of {stage['calls']} answers"):
        GraphStrata.build(
            hotpot_docs(), config={**CONFIG, "llm_max_failure_share": share / 2}, embedder=HashEmbedder(),
            llm=ScriptedLLM(sometimes, id="echo-model"),
        )


def test_ungrounded_names_are_rejected_and_grounded_ones_kept():
    text = "Charles Babbage designed the Analytical Engine in London."
    chunk = Chunk(id="d#0", document_id="d", index=0, text=text, start=0, end=len(text), n_tokens=10)
    answer = "##\n".join(
        [
            '("entity"<|>Charles Babbage<|>person<|>A mathematician.)',
            '("entity"<|>analytical engines<|>event<|>A machine.)',  # fuzzy: plural, lower case
            '("entity"<|>Ada Lovelace<|>person<|>Not in this chunk.)',
            '("relationship"<|>Charles Babbage<|>Paris<|>Invented.<|>travel<|>3)',
        ]
    )
    from graphstrata.indexing.llm_extract import LLMExtractor

    client = LLMClient(ScriptedLLM([("", answer)]))
    with pytest.warns(LLMOutputWarning, match="rejected 2 record"):
        entities, relations = LLMExtractor(client, gleaning=0).extract([chunk])
    assert sorted(e.id for e in entities) == ["analytical engines", "charles babbage"]
    assert relations == []
    assert client.ledger.stages["extract"].failures == {}  # the answer was usable


def test_llm_output_is_bounded_per_chunk_with_the_cap_named():
    text = "Alpha Beta Gamma"
    chunk = Chunk(id="d#0", document_id="d", index=0, text=text, start=0, end=len(text), n_tokens=10)
    answer = "##\n".join(f'("entity"<|>Alpha<|>person<|>Mention {i}.)' for i in range(50_000))
    from graphstrata.indexing.llm_extract import LLMExtractor

    client = LLMClient(ScriptedLLM(lambda p, s: answer))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        [alpha], _ = LLMExtractor(client, gleaning=0, summary_trigger_tokens=10**9).extract([chunk])
    msgs = " ".join(str(w.message) for w in rec if issubclass(w.category, LLMOutputWarning))
    assert "MAX_ANSWER_CHARS" in msgs and "MAX_ENTITIES_PER_CHUNK" in msgs
    assert len(alpha.description.split("\n")) == MAX_ENTITIES_PER_CHUNK


def test_grounding_and_echo_helpers():
    ground = Grounding("F.I.R. is Taiwanese Mandopop band F.I.R.'s debut album, released by Warner Music Taiwan.")
    assert ground("Warner Music Taiwan") and ground("warner music") and ground("F.I.R.")
    assert not ground("Mara Ilves") and not ground("")
    assert is_echo("Acme corporation and its founders!", [archrag.EXAMPLE_REPORT_TITLE])
    assert not is_echo("Warner Music Taiwan and its artists", [archrag.EXAMPLE_REPORT_TITLE])


# -- query-time fallbacks are reported in Answer ----------------------------------------------


def test_answer_reports_the_query_steps_that_fell_back(hotpot_docs):
    from graphstrata.llm.prompts import agrag_query, archrag_answer, lightrag_query

    gs = GraphStrata.build(hotpot_docs(), config={**CONFIG, "llm_community_reports": False}, embedder=HashEmbedder(),
                           llm=ScriptedLLM(toy))
    query = "Which label released the debut album of F.I.R.?"
    assert gs.answer(query, method="lightrag").fallbacks == []  # every step read the model's answer

    unreadable = {lightrag_query.KEYWORDS_SYSTEM, agrag_query.FILTER_SYSTEM, archrag_answer.FILTER_SYSTEM}

    def garbled(prompt: str, system: str | None) -> str:
        return "Sure! Here is what I think." if system in unreadable else toy(prompt, system)

    llm = ScriptedLLM(garbled, id="garbled")
    light = gs.answer(query, method="lightrag", llm=llm)
    assert light.fallbacks == ["keywords: offline fallback, unreadable answer"]
    assert light.to_dict()["fallbacks"] == light.fallbacks
    assert gs.answer(query, method="agrag", llm=llm).fallbacks == ["fact_filter: offline fallback, unreadable answer"]
    arch = gs.answer(query, method="archrag", llm=llm)
    assert arch.fallbacks[0] == "answer:filter: unreadable answer, its context dropped"
    assert arch.fallbacks[-1].startswith("answer: no usable point")


# -- context windows: every prompt fits; budgets shrink to the window --------------------------


def test_an_over_window_prompt_is_never_sent():
    from graphstrata.llm import CallableLLM, LLMRequest, PromptTooLongError, count_prompt_tokens

    sent: list[str] = []
    client = LLMClient(CallableLLM(lambda p: sent.append(p) or "ok", id="small", context_window=300,
                                   settings={"max_tokens": 100}))
    assert client.context_window == 300 and client.answer_reserve() == 100
    client.complete("x" * 300)  # about 100 tokens: fits 300 - 100
    with pytest.raises(PromptTooLongError, match=r"stage 'extract'.*context window of small \(300 tokens, 100 kept"):
        client.map([LLMRequest("y" * 900)], "extract")  # about 300 tokens
    assert sent == ["x" * 300]
    assert count_prompt_tokens(object(), "z" * 9) == 3  # no tokenizer: 3 characters a token, never fewer


def test_answer_budgets_shrink_to_the_window_and_every_prompt_fits(tmp_path, hotpot_docs):
    """LightRAG's default context budget (12,000 tokens) overflowed an 8k window; with the window
    known (here a setting, ``llm_context_window``) the budget is fitted and nothing over it is sent."""
    from graphstrata.llm import count_prompt_tokens

    window, reserve = 2000, 512
    sizes: list[int] = []

    def measured(prompt: str, system: str | None) -> str:
        sizes.append(count_prompt_tokens(object(), (system or "") + "\n\n" + prompt))
        return toy(prompt, system)

    docs = hotpot_docs(30)
    gs = GraphStrata.build(docs, config={**CONFIG, "llm_community_reports": False}, embedder=HashEmbedder(),
                           llm=ScriptedLLM(toy))
    unbounded = gs.answer("Which label released the debut album of F.I.R.?", method="lightrag", k=20,
                          llm=ScriptedLLM(measured, id="big"))
    assert max(sizes) > window - reserve  # without a window the answer prompt is larger than it
    sizes.clear()
    small = GraphStrata.build(docs, config={**CONFIG, "llm_community_reports": False, "llm_gleaning": 0, "llm_context_window": window},
                              embedder=HashEmbedder(), llm=ScriptedLLM(toy))
    fitted = small.answer("Which label released the debut album of F.I.R.?", method="lightrag", k=20,
                          llm=ScriptedLLM(measured, id="small"))
    assert sizes and max(sizes) <= window - reserve
    assert fitted.text and len(fitted.hits) < len(unbounded.hits)
