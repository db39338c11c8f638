"""graphstrata as an agent tool, in LangChain (LangGraph) and in LlamaIndex — offline.

What it shows:

1. LangChain: ``create_graphstrata_tool(retriever, "search_docs", ...)``; a call with a
   ``ToolCall`` gives the ``ToolMessage`` an agent sees (the text the model reads, the
   Documents as its ``artifact``); then a real LangGraph agent loop
   (``langgraph.prebuilt.create_react_agent``) whose model decides to call the tool, reads
   the result and answers.
2. LlamaIndex: the package's retriever as LlamaIndex's own ``RetrieverTool`` (graphstrata
   needs no tool class of its own there), called directly, then inside a ``ReActAgent`` loop.

Both agents run on a scripted model that stands in for your LLM: it calls the search tool with
the user's question, then answers by citing the page the first passage came from. Put any
tool-calling chat model (LangChain) or any LLM (LlamaIndex) in its place; the tools stay as
they are.

Run from the repository root (about a minute the first time, most of it building the index)::

    .venv/bin/python cookbook/agent_tool.py [--workdir DIR] [--index-dir DIR]

The index is opened from ``--index-dir`` if it holds one, else built there (default
``WORKDIR/index``; ``--workdir`` defaults to a new temporary directory).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "sample_corpus" / "wiki_sample.jsonl"
QUESTION = "Who assassinated the 20th President of the United States?"
# the scripted models cite the first source they read in a tool result: a LangChain tool
# result starts each passage with "[page id]", LlamaIndex's RetrieverTool with "title: ..."
_SOURCE = re.compile(r"\[([\w.:-]+)\] |title: ([^\n]+)")


def scripted_answer(tool_result: str) -> str:
    """What the stand-in models answer: the first source of the tool result and its text."""
    m = _SOURCE.search(tool_result)
    source = (m.group(1) or m.group(2)).strip() if m else "?"
    passage = tool_result[m.end():] if m else tool_result
    return f"The best passage comes from {source!r}: {short(passage, 110)}"


def short(text: str, n: int = 90) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def open_or_build(index_dir: Path, corpus: Path):
    """Open the index in ``index_dir``, or build it there from ``corpus`` when there is none."""
    from graphstrata import GraphStrata

    t0 = time.perf_counter()
    if index_dir.is_dir() and any(index_dir.iterdir()):
        gs = GraphStrata.load(index_dir)
        print(f"opened {index_dir} in {time.perf_counter() - t0:.1f} s: {gs}")
    else:
        gs = GraphStrata.build(paths=[corpus], persist_dir=index_dir)
        print(f"built {index_dir} in {time.perf_counter() - t0:.1f} s: {gs}")
    return gs


# -------------------------------------------------------------------------------- LangChain
def scripted_tool_calling_model(tool_name: str):
    """A LangChain chat model standing in for yours: it first asks for ``tool_name`` with the
    user's question, then answers from the tool result it gets back."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ScriptedToolCaller(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted-tool-caller"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:  # a real model sends the tool schemas
            return self

        def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any):
            last = messages[-1]
            if isinstance(last, ToolMessage):  # the tool answered: cite the first page it returned
                reply = AIMessage(content=scripted_answer(str(last.content)))
            else:  # decide to search, with the user's question as the query
                question = next(str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage))
                reply = AIMessage(content="", tool_calls=[
                    {"name": tool_name, "args": {"query": question}, "id": "call_1", "type": "tool_call"}])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    return ScriptedToolCaller()


def langchain_part(gs: Any) -> None:
    from langchain_graphstrata import GraphStrataRetriever, create_graphstrata_tool
    from langgraph.prebuilt import create_react_agent

    print("\n== LangChain: create_graphstrata_tool ==")
    retriever = GraphStrataRetriever(index=gs, method="archrag", k=3)
    tool = create_graphstrata_tool(retriever, "search_docs", "Search the indexed Wikipedia pages.")
    print(f"tool {tool.name!r}: args {json.dumps(tool.args)}")
    # what an agent's tool node does with the model's tool call: a ToolMessage back
    message = tool.invoke({"name": "search_docs", "args": {"query": QUESTION}, "id": "call_0", "type": "tool_call"})
    print(f"ToolMessage.content ({len(message.content)} chars, what the model reads):")
    for block in message.content.split("\n\n"):
        print(f"  {short(block, 100)}")
    print(f"ToolMessage.artifact: {[d.metadata['document_ids'] for d in message.artifact]}")

    print("\n== LangChain: a LangGraph agent loop (ReAct agent + scripted tool-calling model) ==")
    # LangGraph's prebuilt ReAct loop (with the `langchain` package installed,
    # `langchain.agents.create_agent(model, [tool])` is its newer spelling; the tool is the same)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*create_react_agent has been moved.*")
        agent = create_react_agent(scripted_tool_calling_model(tool.name), [tool])
    state = agent.invoke({"messages": [("user", QUESTION)]})
    for msg in state["messages"]:
        calls = getattr(msg, "tool_calls", None)
        if calls:
            print(f"  {msg.type:<5} -> calls {calls[0]['name']}({json.dumps(calls[0]['args'])})")
        else:
            print(f"  {msg.type:<5} {short(msg.content, 100)}")
    print(f"agent answer: {state['messages'][-1].content}")


# -------------------------------------------------------------------------------- LlamaIndex
def scripted_react_llm():
    """A LlamaIndex LLM standing in for yours in a ReActAgent: it writes a ReAct ``Action``
    calling ``search_docs`` with the user's question, then an ``Answer`` from the observation."""
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback

    class ScriptedReAct(CustomLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="scripted-react")

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            talk = prompt.rsplit("## Current Conversation", 1)[-1]  # after the ReAct instructions
            if "Observation:" in talk:
                observation = talk.rsplit("Observation:", 1)[1]
                text = f"Thought: I can answer without using any more tools.\nAnswer: {scripted_answer(observation)}"
            else:
                question = talk.rsplit("user:", 1)[1].split("\n")[0].strip()
                text = ("Thought: I need to search the indexed pages.\nAction: search_docs\n"
                        f"Action Input: {json.dumps({'input': question})}")
            return CompletionResponse(text=text)

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
            text = self.complete(prompt, formatted=formatted).text
            yield CompletionResponse(text=text, delta=text)

    return ScriptedReAct()


def llama_index_part(gs: Any) -> None:
    from llama_index.core.agent.workflow import ReActAgent, ToolCall, ToolCallResult
    from llama_index.core.tools import RetrieverTool
    from llama_index.retrievers.graphstrata import GraphStrataRetriever

    print("\n== LlamaIndex: GraphStrataRetriever as a RetrieverTool ==")
    retriever = GraphStrataRetriever(gs, method="archrag", similarity_top_k=3)
    tool = RetrieverTool.from_defaults(retriever, name="search_docs",
                                       description="Search the indexed Wikipedia pages.")
    output = tool.call(input=QUESTION)
    print(f"tool {tool.metadata.name!r}: {len(output.raw_output)} nodes, "
          f"{len(output.content)} chars of text for the model")
    for n in output.raw_output:
        print(f"  {n.score:.3f} {n.node.metadata.get('document_ids')} {short(n.node.get_content(), 70)}")

    print("\n== LlamaIndex: a ReActAgent loop (scripted LLM) ==")
    agent = ReActAgent(tools=[tool], llm=scripted_react_llm(), streaming=False)

    async def run() -> str:
        handler = agent.run(user_msg=QUESTION)
        async for event in handler.stream_events():
            if isinstance(event, ToolCall):
                print(f"  agent calls {event.tool_name}({json.dumps(event.tool_kwargs)})")
            elif isinstance(event, ToolCallResult):
                print(f"  tool returns {short(event.tool_output.content, 90)}")
        result = await handler
        return str(result.response.content)

    print(f"agent answer: {asyncio.run(run())}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--index-dir", type=Path, default=None,
                        help="index directory: opened if it holds an index, else built there (default WORKDIR/index)")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="JSONL pages {id, title, text}")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="graphstrata-cookbook-"))
    workdir.mkdir(parents=True, exist_ok=True)
    gs = open_or_build(args.index_dir or workdir / "index", args.corpus)
    print(f"question: {QUESTION}")
    langchain_part(gs)
    llama_index_part(gs)
    print("\nagent_tool finished")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
