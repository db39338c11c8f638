"""create_graphstrata_tool: text for the model, Documents as the artifact."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage
from langchain_core.prompts import PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool
from langchain_graphstrata import GraphStrataRetriever, create_graphstrata_tool

QUERY = "Who designed the Analytical Engine?"


def _call(tool: BaseTool, query: str) -> ToolMessage:
    call = {"name": tool.name, "args": {"query": query}, "id": "c1", "type": "tool_call"}
    msg = tool.invoke(call)
    assert isinstance(msg, ToolMessage)
    return msg


def test_tool_returns_text_and_documents(lc_gs: Any) -> None:
    retriever = GraphStrataRetriever(index=lc_gs, method="hybrid", k=3)
    tool = create_graphstrata_tool(retriever, "history_search", "Search history notes.")
    assert tool.name == "history_search" and tool.description == "Search history notes."
    assert tool.response_format == "content_and_artifact"
    assert set(tool.args) == {"query"}

    msg = _call(tool, QUERY)
    expected = retriever.invoke(QUERY)
    assert msg.tool_call_id == "c1"
    assert [d.id for d in msg.artifact] == [d.id for d in expected]
    assert all(isinstance(d, Document) and d.metadata["document_ids"] for d in msg.artifact)
    # The model-facing text is every passage, prefixed by its source document id.
    blocks = msg.content.split("\n\n")
    assert blocks == [f"[{d.metadata['document_ids'][0]}] {d.page_content}" for d in expected]


async def test_tool_async_matches_sync(lc_gs: Any) -> None:
    tool = create_graphstrata_tool(GraphStrataRetriever(index=lc_gs, method="dense", k=2))
    assert tool.name == "graphstrata_search" and tool.description
    amsg = await tool.ainvoke(
        {"name": tool.name, "args": {"query": QUERY}, "id": "c2", "type": "tool_call"}
    )
    msg = _call(tool, QUERY)
    assert amsg.content == msg.content
    assert [d.id for d in amsg.artifact] == [d.id for d in msg.artifact]


def test_plain_invoke_returns_only_text(lc_gs: Any) -> None:
    tool = create_graphstrata_tool(GraphStrataRetriever(index=lc_gs, method="bm25", k=1))
    out = tool.invoke({"query": "Enigma cipher"})
    assert isinstance(out, str) and "Enigma" in out


def test_custom_document_prompt(lc_gs: Any) -> None:
    tool = create_graphstrata_tool(
        GraphStrataRetriever(index=lc_gs, method="bm25", k=2),
        "t",
        "d",
        document_prompt=PromptTemplate.from_template("<{title}|{score:.0f}>"),
        document_separator=" ; ",
    )
    msg = _call(tool, "Enigma cipher")
    titles = [d.metadata["title"] for d in msg.artifact]
    assert msg.content.count(" ; ") == 1
    assert all(f"<{t}|" in msg.content for t in titles)


def test_other_retrievers_get_plain_text(lc_gs: Any) -> None:
    class Fixed(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            return [Document(page_content="alpha"), Document(page_content="beta")]

    msg = _call(create_graphstrata_tool(Fixed()), "q")
    assert msg.content == "alpha\n\nbeta"


def test_bad_arguments(lc_gs: Any) -> None:
    r = GraphStrataRetriever(index=lc_gs, method="dense")
    with pytest.raises(TypeError, match="must be a BaseRetriever"):
        create_graphstrata_tool(lc_gs, "t", "d")
    for name in ("", "has space", "semi;colon"):
        with pytest.raises(ValueError, match="tool name"):
            create_graphstrata_tool(r, name, "d")
    with pytest.raises(ValueError, match="description"):
        create_graphstrata_tool(r, "t", "  ")
