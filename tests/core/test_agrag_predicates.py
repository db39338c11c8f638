"""AGRAG keeps what the LLM said (issue 29). A triple ``X PRED Y`` reaches the fact filter and
the answer prompt with its predicate (not ``co-occurs with``), and parallel facts between one
pair of entities stay distinct (``methods/agrag.py`` ``fact_triples``)."""

from __future__ import annotations

import json

from graphstrata import GraphStrata
from graphstrata.llm.prompts import agrag as agrag_triples
from graphstrata.llm.prompts import agrag_query
from graphstrata.structures.agrag import PREDICATE
from graphstrata.testing import HashEmbedder, ScriptedLLM
from graphstrata.testing import answer_every_prompt as toy

DOCS = [
    {"id": "fm", "title": "Fjord Motors",
     "text": "Fjord Motors buys batteries from Brightwater Labs. Brightwater Labs supplies Fjord Motors with cells "
             "for its buses. Erik Dahl runs Fjord Motors in Bergen."},
    {"id": "bl", "title": "Brightwater Labs",
     "text": "Brightwater Labs was founded by Lena Park in Oslo. Lena Park leads its battery research."},
]
TRIPLES = {
    "fm": [["Fjord Motors", "buys batteries from", "Brightwater Labs"], ["Brightwater Labs", "supplies", "Fjord Motors"],
           ["Erik Dahl", "runs", "Fjord Motors"], ["Fjord Motors", "is based in", "Bergen"]],
    "bl": [["Lena Park", "founded", "Brightwater Labs"], ["Brightwater Labs", "is based in", "Oslo"]],
}
CONFIG = {"llm_extraction": "agrag", "llm_community_reports": False, "chunk_size": 200, "chunk_overlap": 16}


def _script(seen: dict[str, list[str]]):
    def fn(prompt: str, system: str | None) -> str:
        if system == agrag_triples.TRIPLES_SYSTEM:
            doc = "fm" if "Fjord Motors buys" in prompt else "bl"
            return json.dumps({"triples": TRIPLES[doc]})
        if system == agrag_query.FILTER_SYSTEM:  # keep the supply facts
            seen.setdefault("filter", []).append(prompt)
            return json.dumps({"fact": [["Brightwater Labs", "supplies", "Fjord Motors"],
                                        ["Fjord Motors", "buys batteries from", "Brightwater Labs"]]})
        if system and system.startswith(agrag_query.ANSWER_SYSTEM[:40]):
            seen.setdefault("answer", []).append(prompt)
        return toy(prompt, system)

    return fn


def test_the_llm_predicates_and_parallel_facts_reach_the_filter_and_the_answer_prompt():
    seen: dict[str, list[str]] = {}
    gs = GraphStrata.build(DOCS, config=CONFIG, embedder=HashEmbedder(), llm=ScriptedLLM(_script(seen)))
    gs.answer("Who supplies batteries to Fjord Motors?", method="agrag")
    [filter_prompt], [answer_prompt] = seen["filter"], seen["answer"]
    # both facts of the one pair (Fjord Motors, Brightwater Labs) are candidates, each with its predicate
    assert "buys batteries from" in filter_prompt and "supplies" in filter_prompt
    assert PREDICATE not in filter_prompt
    # the answer prompt's reasoning subgraph names the model's predicates, in their direction
    assert "Brightwater Labs [SEP] supplies [SEP] Fjord Motors" in answer_prompt.replace("  ", " ")
    assert PREDICATE not in answer_prompt


def test_offline_agrag_facts_keep_the_co_occurrence_predicate():
    gs = GraphStrata.build(DOCS, config={"chunk_size": 200, "chunk_overlap": 16}, embedder=HashEmbedder())
    hits = gs.retrieve("Who supplies batteries to Fjord Motors?", method="agrag", k=2, context_k=10)
    preds = {h.metadata.get("predicate") for h in hits if h.kind == "relation"}
    assert preds <= {PREDICATE}
