"""Our retriever as an agent tool, and under heavy concurrent async use."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.core.tools import RetrieverTool
from llama_index.retrievers.graphstrata import GraphStrataRetriever


@pytest.mark.asyncio
async def test_function_agent_calls_our_retriever_tool(lihua_persisted, lihua_questions):
    index, _ = lihua_persisted
    question = lihua_questions[1]["question"]
    retriever = index.as_retriever(method="hybrid", similarity_top_k=3)
    tool = RetrieverTool.from_defaults(
        retriever, name="lihua_search", description="Search LiHua's chat logs."
    )
    seen = []

    def script(messages, **kwargs):  # a scripted LLM: call the tool once, then answer
        seen.append([m.role for m in messages])
        tool_msgs = [m for m in messages if m.role == MessageRole.TOOL]
        if tool_msgs:
            return ChatMessage(role="assistant", content="FINAL: " + (tool_msgs[-1].content or "")[:200])
        return ChatMessage(
            role="assistant",
            blocks=[ToolCallBlock(tool_call_id="call-1", tool_name="lihua_search",
                                  tool_kwargs={"input": question})],
        )

    agent = FunctionAgent(tools=[tool], llm=MockFunctionCallingLLM(response_generator=script),
                          system_prompt="Answer from the logs.")
    handler = agent.run(user_msg=question)
    results = [ev async for ev in handler.stream_events() if isinstance(ev, ToolCallResult)]
    final = await handler

    assert len(results) == 1 and results[0].tool_name == "lihua_search"
    nodes = results[0].tool_output.raw_output
    expected = GraphStrataRetriever(index.engine, method="hybrid", similarity_top_k=3).retrieve(
        f"input is {question}\n"  # RetrieverTool's query string for keyword input
    )
    assert [n.node.node_id for n in nodes] == [n.node.node_id for n in expected]
    assert nodes[0].node.metadata["kind"] == "chunk" and nodes[0].node.metadata["document_ids"]
    # the tool output went back to the LLM, and the agent finished with it
    assert len(seen) == 2 and MessageRole.TOOL in seen[1]
    assert str(final).startswith("FINAL: ") and nodes[0].node.text[:30] in str(final)


@pytest.mark.asyncio
async def test_fifty_concurrent_aretrieve_calls_in_a_running_loop(lihua_persisted, lihua_questions):
    index, _ = lihua_persisted
    asyncio.get_running_loop()
    questions = [q["question"] for q in lihua_questions][:10]
    queries = [questions[i % len(questions)] for i in range(50)]
    ticks = 0
    done = asyncio.Event()

    async def ticker():  # runs only if retrieval leaves the event loop free
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.001)

    tick_task = asyncio.create_task(ticker())
    by_method = {}
    retrievers = {m: index.as_retriever(method=m, similarity_top_k=4) for m in ("archrag", "hybrid")}
    jobs = [retrievers[m].aretrieve(q) for i, m in enumerate(("archrag", "hybrid")) for q in queries[i::2]]
    all_results = await asyncio.gather(*jobs)
    done.set()
    await tick_task
    by_method["archrag"] = (retrievers["archrag"], queries[0::2], all_results[:25])
    by_method["hybrid"] = (retrievers["hybrid"], queries[1::2], all_results[25:])
    assert ticks > 1
    total = sum(len(r[2]) for r in by_method.values())
    assert total == 50
    for retriever, qs, results in by_method.values():
        for q, nodes in zip(qs[:5], results[:5], strict=True):  # concurrent answers == sequential answers
            assert [n.node.node_id for n in nodes] == [n.node.node_id for n in retriever.retrieve(q)]
        assert all(len([n for n in nodes if n.node.metadata["kind"] == "chunk"]) == 4 for nodes in results)


def _scripted_agent(tool_name: str, question: str) -> MockFunctionCallingLLM:
    def script(messages, **kwargs):  # call the tool once, then answer with what it returned
        tool_msgs = [m for m in messages if m.role == MessageRole.TOOL]
        if tool_msgs:
            return ChatMessage(role="assistant", content="FINAL: " + (tool_msgs[-1].content or ""))
        return ChatMessage(
            role="assistant",
            blocks=[ToolCallBlock(tool_call_id="call-1", tool_name=tool_name,
                                  tool_kwargs={"input": question})],
        )

    return MockFunctionCallingLLM(response_generator=script)


@pytest.mark.asyncio
async def test_agent_tool_output_is_at_most_k_nodes_and_small_for_every_method(
    lihua_persisted, lihua_questions
):
    """A RetrieverTool over any method hands the agent at most k nodes, < 8k chars (issue 14)."""
    index, _ = lihua_persisted
    question = lihua_questions[2]["question"]
    for method in index.methods:
        retriever = index.as_retriever(method=method)  # every default: k = 5, chunks only
        tool = RetrieverTool.from_defaults(retriever, name="search", description="Search the logs.")
        agent = FunctionAgent(tools=[tool], llm=_scripted_agent("search", question),
                              system_prompt="Answer from the logs.")
        handler = agent.run(user_msg=question)
        results = [ev async for ev in handler.stream_events() if isinstance(ev, ToolCallResult)]
        final = await handler
        (result,) = results
        nodes = result.tool_output.raw_output
        assert 1 <= len(nodes) <= retriever.similarity_top_k, method
        assert all(n.node.metadata["kind"] == "chunk" for n in nodes), method
        content = result.tool_output.content
        assert len(content) < 8000, (method, len(content))
        # what reached the LLM is the chunks' LLM view: no provenance keys
        assert "chunk_ids" not in content and "raw_score" not in content, method
        assert str(final).startswith("FINAL: ") and nodes[0].node.text[:30] in str(final)
