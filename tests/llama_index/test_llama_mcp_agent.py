"""A LlamaIndex agent calling ``graphstrata serve``'s MCP tools through llama-index-tools-mcp
(issue 32), over streamable HTTP with a bearer token, with a scripted LLM standing in for the
model: the agent's ReAct loop asks for ``retrieve``, the tool spec calls the server, and the
observation holds the passages ``GraphStrata.retrieve`` returns in process."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("mcp")
tools_mcp = pytest.importorskip("llama_index.tools.mcp")

from graphstrata import GraphStrata  # noqa: E402
from graphstrata.testing.serve import http_server  # noqa: E402
from llama_index.core.agent.workflow import ReActAgent, ToolCallResult  # noqa: E402
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata  # noqa: E402

QUESTION = "Which band released the album F.I.R.?"
TOKEN = "llama-agent-token-0123456789"


class ScriptedLLM(CustomLLM):
    """Answers each call with the next scripted text (ReAct format) and keeps the prompts."""

    script: list[str]
    prompts: list[str] = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted", is_chat_model=False)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=self.script[len(self.prompts) - 1])

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        text = self.complete(prompt, formatted=formatted, **kwargs).text
        yield CompletionResponse(text=text, delta=text)


async def test_llamaindex_react_agent_calls_the_mcp_retrieve_tool_over_http(serve_indexes, tmp_path):
    hotpot = serve_indexes["hotpot"]
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"name": "agent", "token": TOKEN, "read": ["hotpot"]}]}))
    with http_server([str(hotpot), str(serve_indexes["musique"]), "--token", str(tokens)], token=TOKEN) as url:
        client = tools_mcp.BasicMCPClient(f"{url}/mcp", headers={"Authorization": f"Bearer {TOKEN}"})
        tools = await tools_mcp.McpToolSpec(client=client).to_tool_list_async()
        assert {t.metadata.name for t in tools} == {"retrieve", "list_indexes", "stats"}
        action = json.dumps({"query": QUESTION, "k": 3, "method": "bm25"})
        llm = ScriptedLLM(script=[
            f"Thought: I need to search the documents.\nAction: retrieve\nAction Input: {action}",
            "Thought: I can answer without using any more tools.\nAnswer: F.I.R. is a Taiwanese band.",
        ], prompts=[])
        agent = ReActAgent(tools=tools, llm=llm, streaming=False)
        handler = agent.run(user_msg=QUESTION)
        results = [ev async for ev in handler.stream_events() if isinstance(ev, ToolCallResult)]
        response = await handler

    assert "F.I.R. is a Taiwanese band." in str(response)
    (result,) = results
    assert result.tool_name == "retrieve" and not result.tool_output.is_error
    expected = GraphStrata.load(hotpot).retrieve(QUESTION, method="bm25", k=3, kinds=("chunk",))
    observation = str(result.tool_output.content)
    positions = [observation.find(h.id) for h in expected]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), observation[:500]
    # the observation reached the model's second prompt
    assert expected[0].id in llm.prompts[1]
