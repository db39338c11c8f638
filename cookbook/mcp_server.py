"""graphstrata as an MCP server: agents in LangChain (LangGraph) and LlamaIndex call its tools.

What it shows:

1. ``graphstrata serve INDEX_DIR`` over **stdio**, started by LangChain's MCP client
   (``langchain-mcp-adapters``' ``MultiServerMCPClient``): the server's tools become LangChain
   tools, and a LangGraph agent (``create_react_agent``) calls ``retrieve`` and answers.
2. ``graphstrata serve INDEX_DIR --transport http --token FILE`` over **streamable HTTP** with a
   bearer token, used by LlamaIndex's MCP client (``llama-index-tools-mcp``) inside a
   ``ReActAgent``; then the same server's plain JSON route (``POST /v1/retrieve``) for a client
   that does not speak MCP, and a call without the token (refused).

Both agents run on a scripted model that stands in for your LLM: it calls ``retrieve`` with the
user's question, then answers by citing the first page the tool returned. Put any
tool-calling chat model (LangChain) or any LLM (LlamaIndex) in its place.

Run from the repository root (needs ``pip install "graphstrata[serve]" langchain-mcp-adapters
llama-index-tools-mcp``; about a minute the first time, most of it building the index)::

    .venv/bin/python cookbook/mcp_server.py [--workdir DIR] [--index-dir DIR]

The index is opened from ``--index-dir`` if it holds one, else built there (default
``WORKDIR/index``; ``--workdir`` defaults to a new temporary directory).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "sample_corpus" / "wiki_sample.jsonl"
QUESTION = "Who assassinated the 20th President of the United States?"


def cite(result: dict[str, Any]) -> str:
    """What the stand-in models answer: the first page the ``retrieve`` result lists."""
    hit = result["hits"][0]
    return f"The best passage comes from {hit['document_ids'][0]!r}: {' '.join(hit['text'].split())[:100]}..."


def open_or_build(index_dir: Path) -> None:
    from graphstrata import GraphStrata

    t0 = time.perf_counter()
    if index_dir.is_dir() and any(index_dir.iterdir()):
        print(f"opened {index_dir}: {GraphStrata.load(index_dir)}")
    else:
        gs = GraphStrata.build(paths=[CORPUS], persist_dir=index_dir)
        print(f"built {index_dir} in {time.perf_counter() - t0:.1f} s: {gs}")


# -------------------------------------------------------------------------------- LangChain
async def langchain_part(index_dir: Path) -> None:
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools

    print("\n== LangChain: MultiServerMCPClient starts `graphstrata serve` over stdio ==")
    # the same entry an MCP client's configuration holds: a command and its arguments
    client = MultiServerMCPClient({"graphstrata": {
        "transport": "stdio", "command": sys.executable,
        "args": ["-m", "graphstrata.cli", "serve", "--index", f"wiki={index_dir}"],
    }})
    async with client.session("graphstrata") as session:  # one server for the whole conversation
        await agent_over(await load_mcp_tools(session))


async def agent_over(tools: list[Any]) -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.prebuilt import create_react_agent

    print("tools:", ", ".join(t.name for t in tools))

    class ScriptedModel(GenericFakeChatModel):  # stands in for your tool-calling chat model
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    answers: list[str] = []

    class Citing(ScriptedModel):
        def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            last = messages[-1]
            if isinstance(last, ToolMessage):  # the tool answered: cite what it returned
                text = last.content if isinstance(last.content, str) else "".join(
                    b.get("text", "") for b in last.content)
                answers.append(cite(json.loads(text)))
                self.messages = iter([AIMessage(content=answers[-1])])
            return super()._generate(messages, *args, **kwargs)

    model = Citing(messages=iter([AIMessage(content="", tool_calls=[
        {"id": "call_1", "name": "retrieve", "args": {"query": QUESTION, "k": 3}}])]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        agent = create_react_agent(model, tools)
    state = await agent.ainvoke({"messages": [("user", QUESTION)]})
    for m in state["messages"]:
        if isinstance(m, ToolMessage):
            hits = m.artifact["structured_content"]["hits"]
            print(f"tool  retrieve -> {len(hits)} hits: {[h['document_ids'][0] for h in hits]}")
    print("agent answer:", state["messages"][-1].content)


# -------------------------------------------------------------------------------- LlamaIndex
async def llamaindex_part(url: str, token: str) -> None:
    from llama_index.core.agent.workflow import ReActAgent, ToolCallResult
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    print("\n== LlamaIndex: McpToolSpec over streamable HTTP with a bearer token ==")
    client = BasicMCPClient(f"{url}/mcp", headers={"Authorization": f"Bearer {token}"})
    tools = await McpToolSpec(client=client, allowed_tools=["retrieve", "list_indexes"]).to_tool_list_async()
    print("tools:", ", ".join(t.metadata.name for t in tools))

    class ScriptedLLM(CustomLLM):  # stands in for your LLM (ReAct text format)
        calls: int = 0

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="scripted")

        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            self.calls += 1
            if self.calls == 1:
                args = json.dumps({"query": QUESTION, "k": 3})
                return CompletionResponse(text=f"Thought: I should search.\nAction: retrieve\nAction Input: {args}")
            # the observation is the MCP result as text; cite the first document id in it
            found = re.search(r"document_ids['\"]: \[['\"]([^'\"]+)", prompt.rsplit("Observation:", 1)[1])
            page = found.group(1) if found else "?"
            return CompletionResponse(text="Thought: I can answer without using any more tools.\n"
                                      f"Answer: The best passage comes from {page!r}.")

        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            yield self.complete(prompt, formatted, **kwargs)

    agent = ReActAgent(tools=tools, llm=ScriptedLLM(), streaming=False)
    handler = agent.run(user_msg=QUESTION)
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            print(f"tool  {event.tool_name}({json.dumps(event.tool_kwargs)[:80]}) -> "
                  f"{len(str(event.tool_output.content))} chars")
    print("agent answer:", str(await handler))


def plain_http_part(url: str, token: str) -> None:
    print("\n== plain JSON: POST /v1/retrieve (same arguments and token) ==")
    body = json.dumps({"query": QUESTION, "k": 3, "method": "hybrid"}).encode()
    request = urllib.request.Request(f"{url}/v1/retrieve", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request) as r:
        result = json.loads(r.read())
    print(f"index {result['index']} version {result['version']}: {[h['document_ids'][0] for h in result['hits']]}")
    try:
        urllib.request.urlopen(urllib.request.Request(f"{url}/v1/retrieve", data=body, method="POST"))
    except urllib.error.HTTPError as exc:
        print(f"without the token: HTTP {exc.code} {exc.read().decode()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--index-dir", type=Path, default=None)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="graphstrata-mcp-"))
    work.mkdir(parents=True, exist_ok=True)
    index_dir = args.index_dir or work / "index"
    open_or_build(index_dir)

    asyncio.run(langchain_part(index_dir))

    from graphstrata.testing.serve import http_server

    token = "cookbook-token-" + os.urandom(12).hex()  # in real use: a secret from your vault
    tokens = work / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"name": "agents", "token": token, "read": ["wiki"]}]}))
    tokens.chmod(0o600)
    print(f"\n== graphstrata serve --index wiki={index_dir.name} --transport http --token {tokens.name} ==")
    with http_server(["--index", f"wiki={index_dir}", "--token", str(tokens)], token=token) as url:
        print(f"serving on {url}/mcp (MCP) and {url}/v1/retrieve (JSON); OpenAPI at {url}/openapi.json")
        asyncio.run(llamaindex_part(url, token))
        plain_http_part(url, token)
    print("\nmcp_server finished")


if __name__ == "__main__":
    main()
