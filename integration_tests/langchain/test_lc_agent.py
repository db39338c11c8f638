"""A LangGraph ReAct agent calls the graphstrata tool and receives our Documents."""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_graphstrata import GraphStrataRetriever, create_graphstrata_tool
from pydantic import Field

TOOL_NAME = "musique_search"


class ScriptedToolCallingModel(BaseChatModel):
    """Scripted control flow only: turn 1 calls the tool with the user's question; turn 2
    answers by citing the first source in the tool's text. Records what it was shown."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-caller"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        assert [t.name for t in tools] == [TOOL_NAME]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.seen.append(list(messages))
        tool_results = [m for m in messages if isinstance(m, ToolMessage)]
        if not tool_results:
            question = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
            msg = AIMessage(
                content="",
                tool_calls=[{"name": TOOL_NAME, "args": {"query": question.content},
                             "id": "call_1", "type": "tool_call"}],
            )
        else:
            first = re.search(r"\[(musique-[0-9a-f]+)\]", str(tool_results[-1].content))
            msg = AIMessage(content=f"Answer from {first.group(1) if first else 'nothing'}.")
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _make_agent(model: BaseChatModel, tool: Any) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():  # LangGraph 1.x marks it as moving to `langchain.agents`
        warnings.simplefilter("ignore")
        return create_react_agent(model, [tool])


def _question_with_evidence_hit(
    retriever: GraphStrataRetriever, questions: list[dict[str, Any]]
) -> dict[str, Any]:
    for q in questions[:20]:
        ids = {i for d in retriever.invoke(q["question"]) for i in d.metadata["document_ids"]}
        if ids & set(q["evidence_ids"]):
            return q
    pytest.fail("no question of the slice retrieves any evidence passage")


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_react_agent_receives_graphstrata_documents(
    mode: str, musique_index_dir: Any, musique_questions: list[dict[str, Any]]
) -> None:
    retriever = GraphStrataRetriever(index_dir=musique_index_dir, method="archrag", k=4)
    tool = create_graphstrata_tool(
        retriever, TOOL_NAME, "Search Wikipedia paragraphs for facts needed to answer."
    )
    q = _question_with_evidence_hit(retriever, musique_questions)
    model = ScriptedToolCallingModel()
    agent = _make_agent(model, tool)
    inputs = {"messages": [HumanMessage(content=q["question"])]}
    state = agent.invoke(inputs) if mode == "sync" else await agent.ainvoke(inputs)

    messages = state["messages"]
    assert [type(m).__name__ for m in messages] == [
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage"
    ]
    tool_msg = messages[2]
    assert tool_msg.name == TOOL_NAME and tool_msg.tool_call_id == "call_1"
    # The artifact is our Documents, with ids and provenance, exactly the retriever's output.
    docs = tool_msg.artifact
    assert isinstance(docs, list) and len(docs) == 4
    assert all(isinstance(d, Document) for d in docs)
    expected = retriever.invoke(q["question"])
    assert [d.id for d in docs] == [d.id for d in expected]
    for d in docs:
        (doc_id,) = d.metadata["document_ids"]
        assert d.id.startswith(f"{doc_id}#") and doc_id.startswith("musique-")
        assert d.metadata["method"] == "archrag" and d.metadata["kind"] == "chunk"
    assert {d.metadata["document_ids"][0] for d in docs} & set(q["evidence_ids"])
    # The model's second turn was shown the passages as text, and the answer cites one.
    second_turn = model.seen[1]
    shown = str(next(m for m in second_turn if isinstance(m, ToolMessage)).content)
    assert all(d.page_content in shown for d in docs)
    assert messages[-1].content == f"Answer from {docs[0].metadata['document_ids'][0]}."


def test_tool_call_over_every_method_is_small_by_default(
    musique_index_dir: Any, musique_questions: list[dict[str, Any]]
) -> None:
    """Default k (5), chunks only: at most 5 Documents and under 8,000 characters per call;
    with graph context opted in, at most 5 more, still under 8,000 characters."""
    from graphstrata import GraphStrata

    gs = GraphStrata.load(musique_index_dir)
    questions = [q["question"] for q in musique_questions[:3]]
    for method in gs.methods:
        for kinds, cap in ((("chunk",), 5), (None, 10)):
            tool = create_graphstrata_tool(
                GraphStrataRetriever(index=gs, method=method, kinds=kinds), TOOL_NAME, "Search."
            )
            for i, question in enumerate(questions):
                msg = tool.invoke({"name": TOOL_NAME, "args": {"query": question},
                                   "id": f"c{i}", "type": "tool_call"})
                assert 0 < len(msg.artifact) <= cap, (method, kinds, len(msg.artifact))
                assert sum(d.metadata["kind"] == "chunk" for d in msg.artifact) <= 5
                assert len(msg.content) < 8000, (method, kinds, len(msg.content))
