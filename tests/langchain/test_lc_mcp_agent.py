"""A LangGraph agent calling ``graphstrata serve``'s MCP tools through langchain-mcp-adapters
(issue 32), with a scripted chat model standing in for the LLM: the model asks for
``retrieve``, the adapter calls the server over stdio, and the passages the agent gets back are
the ones ``GraphStrata.retrieve`` returns in process."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("mcp")
pytest.importorskip("langchain_mcp_adapters")
prebuilt = pytest.importorskip("langgraph.prebuilt")

from graphstrata import GraphStrata  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_mcp_adapters.client import MultiServerMCPClient  # noqa: E402
from langchain_mcp_adapters.tools import load_mcp_tools  # noqa: E402

QUESTION = "Which band released the album F.I.R.?"
# langchain (create_agent) is not a dependency; langgraph's prebuilt agent is the same loop
pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")


class ScriptedChatModel(GenericFakeChatModel):
    """Replays its messages in order; tools bound by the agent are accepted and ignored."""

    def bind_tools(self, tools, **kwargs):  # noqa: D102 - the agent binds the MCP tools
        return self


async def test_langgraph_agent_calls_the_mcp_retrieve_tool(serve_indexes):
    hotpot = serve_indexes["hotpot"]
    client = MultiServerMCPClient({"graphstrata": {
        "transport": "stdio", "command": sys.executable,
        "args": ["-m", "graphstrata.cli", "serve", "--index", f"wiki={hotpot}"],
    }})
    async with client.session("graphstrata") as session:  # one server process for the conversation
        tools = await load_mcp_tools(session)
        await _conversation(tools, hotpot)


async def _conversation(tools, hotpot):
    assert {t.name for t in tools} == {"retrieve", "list_indexes", "stats"}
    retrieve = next(t for t in tools if t.name == "retrieve")
    assert "archrag" in retrieve.description and "k" in retrieve.args

    model = ScriptedChatModel(messages=iter([
        AIMessage(content="", tool_calls=[{"id": "call-1", "name": "retrieve",
                                           "args": {"query": QUESTION, "k": 3, "method": "hybrid"}}]),
        AIMessage(content="F.I.R. is a Taiwanese band."),
    ]))
    agent = prebuilt.create_react_agent(model, tools)
    state = await agent.ainvoke({"messages": [("user", QUESTION)]})

    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1 and tool_messages[0].status != "error"
    content = tool_messages[0].content
    text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    got = json.loads(text)
    expected = GraphStrata.load(hotpot).retrieve(QUESTION, method="hybrid", k=3, kinds=("chunk",))
    assert got["index"] == "wiki"
    assert [h["id"] for h in got["hits"]] == [h.id for h in expected]
    assert [h["document_ids"] for h in got["hits"]] == [h.document_ids for h in expected]
    assert tool_messages[0].artifact["structured_content"]["hits"][0]["id"] == expected[0].id
    assert state["messages"][-1].content == "F.I.R. is a Taiwanese band."


async def test_a_bad_argument_reaches_the_agent_as_a_tool_error(serve_indexes):
    client = MultiServerMCPClient({"graphstrata": {
        "transport": "stdio", "command": sys.executable,
        "args": ["-m", "graphstrata.cli", "serve", str(serve_indexes["hotpot"])],
    }})
    tools = await client.get_tools()
    model = ScriptedChatModel(messages=iter([
        AIMessage(content="", tool_calls=[{"id": "c", "name": "retrieve",
                                           "args": {"query": QUESTION, "method": "pagerank"}}]),
        AIMessage(content="done"),
    ]))
    state = await prebuilt.create_react_agent(model, tools).ainvoke({"messages": [("user", QUESTION)]})
    (message,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    text = message.content if isinstance(message.content, str) else json.dumps(message.content)
    assert "method" in text and "pagerank" in text
