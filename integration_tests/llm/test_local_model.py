"""The LLM path end to end with a real model running locally (SmolLM2-135M-Instruct, CPU).

Reached only through the frameworks' own published classes — LlamaIndex's ``HuggingFaceLLM``
and LangChain's ``ChatHuggingFace`` — and this project's adapters around them: LLM extraction,
LLM community reports and HiRAG summaries at build time, then one question answered with every
method's own generation step through ``GraphStrataIndex.as_query_engine(response_mode=
"method")`` (LlamaIndex) and ``GraphStrataRetriever.as_answer_chain()`` (LangChain).

A 135M-parameter model writes junk: these tests check that the path works (records parsed
into a typed graph, calls made and counted, non-empty answers with their sources), never the
quality of what it says. Run with ``make test-llm`` (see ``conftest.py``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

#: the lihua_world slice: its first N_DOCS conversations (one chunk each); every LLM call of
#: SmolLM2-135M costs 5-40 s on the shared 2-core machines, so the slice is small
N_DOCS = 2
#: a lihua_world question (lihua-q0069) about the people of the slice
QUESTION = "What does Li Hua report to Adam on January 6th?"


def _slice(shared_data: Path) -> list[dict[str, Any]]:
    with open(shared_data / "lihua_world" / "corpus.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(N_DOCS), f, strict=False)]


def _config(**overrides: Any) -> Any:
    from graphstrata import GraphStrataConfig

    # one extraction call per chunk (no gleaning), one call in flight: a CPU model gains
    # nothing from concurrent calls on 2 cores. SmolLM2-135M copies the names of the extraction
    # prompt's worked example and breaks its record format, but answers the short question
    # (llm_prompt_examples=False) with a list of the people it names: typed entities, no
    # relationships.
    # These tests check the path, not the model: llm_max_failure_share=1 lets the build go on
    # whatever share of SmolLM2's answers the output checks reject (rejected records are
    # dropped and counted); test_papers_prompts_... checks the default threshold.
    return GraphStrataConfig(
        **{"llm_gleaning": 0, "llm_concurrency": 1, "llm_prompt_examples": False, "llm_max_failure_share": 1.0,
           **overrides}
    )


def _check_usage(usage: dict[str, Any], what: str) -> None:
    total = usage["total"]
    assert total["calls"] + total["cached"] > 0, f"{what}: no LLM call counted: {usage}"
    if total["calls"]:
        assert total["prompt_tokens"] > 0 and total["completion_tokens"] >= 0, usage
        assert total["estimated"] is True, usage  # these local classes report no token counts


def _graph_summary(engine: Any) -> dict[str, Any]:
    """What the build made of the model's output (printed; the assertions are about the path)."""
    entities = list(engine.kg.entities.values())
    communities = [c for layer in engine.communities for c in layer]
    return {
        "entities": len(entities),
        "typed_entities": sum(1 for e in entities if e.type.strip()),
        "relations": engine.stats()["relations"],
        "communities": len(communities),
        "llm_reports": sum(1 for c in communities if c.rating is not None or c.findings),
        "usage": engine.build_usage["total"],
    }


def _check_typed_graph(engine: Any, texts: list[str]) -> None:
    """Entities with a type, named as the slice writes them (not copied from a prompt)."""
    typed = [e for e in engine.kg.entities.values() if e.type.strip()]
    assert typed, f"no typed entity: {[(e.name, e.type) for e in engine.kg.entities.values()]}"
    from_text = [e for e in typed if any(e.name in t for t in texts)]
    assert from_text, f"no typed entity named as in the text: {[(e.name, e.type) for e in typed]}"
    from graphstrata.extraction import canonical
    from graphstrata.llm.prompts import lightrag_extract

    copied = {canonical(n) for n in lightrag_extract.EXAMPLE_ENTITY_NAMES} & set(engine.kg.entities)
    assert not copied, f"entities copied from the prompt's example: {copied}"


def _check_reports(engine: Any) -> None:
    """At least one community with an LLM report the parser read (not the extractive fallback)."""
    communities = [c for layer in engine.communities for c in layer]
    assert communities, "no community"
    stages = engine.build_usage["stages"]
    report_stages = [v for s, v in stages.items() if s.startswith("community_reports")]
    answered = sum(v["calls"] + v["cached"] for v in report_stages)
    skipped = sum(v["skipped"] for v in report_stages)
    # a report copying the prompt's example is rejected (issue 29): counted as a failure
    failed = sum(sum(v.get("failures", {}).values()) for v in report_stages)
    assert answered > skipped or failed, f"no community report parsed nor rejected: {stages}"


def _check_build(engine: Any, extract_stage: str | None = "extract") -> None:
    """The LLM steps ran and were counted; the records the model got right are in the graph."""
    stats = engine.stats()
    entities = list(engine.kg.entities.values())
    assert entities and stats["entities"] == len(entities), stats
    assert all(isinstance(e.type, str) for e in entities)
    usage = engine.build_usage
    _check_usage(usage, "build")
    stages = usage["stages"]
    if extract_stage is not None:  # "extract" (LightRAG records) or "extract:triples" (AGRAG)
        assert sum(v["calls"] for s, v in stages.items() if s.startswith(extract_stage)) > 0, stages
    communities = [c for layer in engine.communities for c in layer]
    report_stages = {s: v for s, v in stages.items() if s.startswith("community_reports")}
    if communities and engine.config.llm_community_reports:
        # one report call per community with a context; a report the model botched falls
        # back to the extractive summary and is counted as skipped
        assert sum(v["calls"] + v["cached"] for v in report_stages.values()) > 0, stages
        reported = [c for c in communities if c.rating is not None or c.findings]
        skipped = sum(v["skipped"] for v in report_stages.values())
        assert len(reported) + skipped >= 1, "community reports neither parsed nor counted as skipped"


@pytest.fixture(scope="module")
def llama_index_engine(shared_data: Path, llama_index_llm: Any, timings: dict[str, float]) -> Any:
    """A ``GraphStrataIndex`` built with ``use_llm=True`` and ``Settings.llm`` = the local
    ``HuggingFaceLLM`` (the documented way to build with LlamaIndex's configured LLM)."""
    from graphstrata.testing import HashEmbedder
    from llama_index.core import Document, Settings
    from llama_index.graph_rag.graphstrata import GraphStrataIndex

    docs = [Document(id_=r["id"], text=r["text"], metadata={"title": r["title"]}) for r in _slice(shared_data)]
    old_llm, old_embed = Settings._llm, Settings._embed_model
    Settings.llm = llama_index_llm
    try:
        start = time.perf_counter()
        index = GraphStrataIndex.from_documents(
            docs,
            use_llm=True,
            embed_model=HashEmbedder(),
            # communities of the LLM graph come from the entities' similarity alone (no
            # relationship): on a handful of entities only with small communities, few wanted
            config=_config(min_communities=2, max_community_size=2),
        )
        timings["llama_index_build"] = time.perf_counter() - start
    finally:
        Settings._llm, Settings._embed_model = old_llm, old_embed
    return index


def test_llama_index_build_runs_llm_extraction(llama_index_engine: Any) -> None:
    engine = llama_index_engine.engine
    assert engine.llm is not None and engine.llm.id.startswith("llama-index:HuggingFaceLLM:")
    print("\nllama-index build:", _graph_summary(engine))
    print("entities:", [(e.name, e.type) for e in engine.kg.entities.values()])
    print("reports:", [(c.title, c.summary[:200], c.rating) for layer in engine.communities for c in layer])
    _check_build(engine)
    _check_typed_graph(engine, [c.text for c in engine.chunks])
    # TODO(issue 13): SmolLM2-135M names 3 people of the first chunk only (Li, LiHua,
    # WolfgangSchulz; the other chunks' answers are unreadable): too few, too alike entities for
    # a community, so the LLM report is checked only where communities formed
    if engine.communities:
        _check_reports(engine)


def test_llama_index_query_engine_answers_with_each_method(
    llama_index_engine: Any, llama_index_llm: Any, timings: dict[str, float]
) -> None:
    start = time.perf_counter()
    for method in llama_index_engine.methods:
        engine = llama_index_engine.as_query_engine(
            llm=llama_index_llm, response_mode="method", method=method, similarity_top_k=2
        )
        response = engine.query(QUESTION)
        assert isinstance(response.response, str) and response.response.strip(), method
        # the hits the answer used (none when ArchRAG's filter found no useful point)
        assert all(n.node.metadata["method"] == method  # context nodes name their method
                   for n in response.source_nodes if n.node.metadata["kind"] != "chunk")
        assert response.metadata["method"] == method
        _check_usage(response.metadata["usage"], f"llama-index {method}")
    timings["llama_index_answers"] = time.perf_counter() - start


def test_langchain_answer_chain_answers_with_each_method(
    llama_index_engine: Any, langchain_chat_model: Any, timings: dict[str, float]
) -> None:
    from langchain_graphstrata import GraphStrataRetriever

    retriever = GraphStrataRetriever(index=llama_index_engine.engine, llm=langchain_chat_model, k=2)
    start = time.perf_counter()
    calls = 0
    for method in retriever.graphstrata.methods:
        out = retriever.as_answer_chain().invoke({"question": QUESTION}, method=method)
        assert isinstance(out["answer"], str) and out["answer"].strip(), method
        assert out["method"] == method and all(d.metadata["method"] == method for d in out["context"])
        _check_usage(out["usage"], f"langchain {method}")
        calls += out["usage"]["total"]["calls"]
    # the LangChain model answered (its own cache key), not the LlamaIndex model's cache
    # (methods with the same prompt, e.g. bm25 after dense on two chunks, are cache hits)
    assert calls > 0
    timings["langchain_answers"] = time.perf_counter() - start


def test_langchain_build_from_documents_with_chat_model(
    shared_data: Path, langchain_chat_model: Any, timings: dict[str, float]
) -> None:
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_graphstrata import GraphStrataRetriever

    records = _slice(shared_data)[:1]
    docs = [Document(id=r["id"], page_content=r["text"], metadata={"title": r["title"]}) for r in records]
    # SmolLM2-135M writes no usable relation, so its LLM-extracted graph of this slice (the
    # LlamaIndex build above: typed entities) has no community to report on. Here the graph is
    # the offline one (llm_extraction="statistical") and the model writes the community reports
    # and HiRAG summaries: the report path on a real model.
    config, extract_stage = _config(llm_extraction="statistical", min_communities=2, max_community_size=4), None
    start = time.perf_counter()
    retriever = GraphStrataRetriever.from_documents(
        docs, llm=langchain_chat_model, embeddings=DeterministicFakeEmbedding(size=64),
        config=config, method="lightrag", k=2,
    )
    timings["langchain_build"] = time.perf_counter() - start
    engine = retriever.graphstrata
    assert engine.llm is not None and engine.llm.id.startswith("langchain:ChatHuggingFace:")
    _check_build(engine, extract_stage)
    print("\nlangchain build:", _graph_summary(engine))
    _check_reports(engine)
    assert retriever.invoke(QUESTION)  # plain retrieval still works on the LLM-built index


def test_papers_prompts_on_a_real_model_fail_fast_or_keep_only_grounded_entities(
    shared_data: Path, llama_index_llm: Any, timings: dict[str, float]
) -> None:
    """With the papers' extraction prompt (worked example included) and the default failure
    threshold, SmolLM2-135M either stops the build with one error naming the model, the stage
    and the share, or leaves only entities its chunks name (none from the example; issue 29)."""
    from graphstrata import GraphStrata, GraphStrataConfig
    from graphstrata.extraction import canonical
    from graphstrata.llm import LLMOutputError
    from graphstrata.llm.prompts import lightrag_extract
    from graphstrata.testing import HashEmbedder
    from llama_index.graph_rag.graphstrata import LlamaIndexLLM

    config = GraphStrataConfig(llm_gleaning=0, llm_concurrency=1, llm_community_reports=False)
    start = time.perf_counter()
    try:
        engine = GraphStrata.build(_slice(shared_data), config=config, embedder=HashEmbedder(),
                                   llm=LlamaIndexLLM(llama_index_llm))
    except LLMOutputError as exc:
        timings["papers_prompts_build"] = time.perf_counter() - start
        print("\npapers' prompts: the build stopped:", exc)
        assert exc.stage == "extract" and "HuggingFaceLLM" in exc.model and exc.failed > exc.answers / 2
        return
    timings["papers_prompts_build"] = time.perf_counter() - start
    print("\npapers' prompts: the build kept", sorted(engine.kg.entities), engine.build_usage["stages"]["extract"])
    copied = {canonical(n) for n in lightrag_extract.EXAMPLE_ENTITY_NAMES} & set(engine.kg.entities)
    assert not copied, f"entities copied from the prompt's example: {copied}"
