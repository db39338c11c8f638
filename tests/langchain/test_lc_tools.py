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
        GraphStrataRetriever(index=lc_gs, method="bm25", k=2, include_scores=True),
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


# --------------------------------------------------------------------------- size by default


def test_every_method_returns_at_most_k_documents_under_8000_chars(lc_gs: Any) -> None:
    for method in lc_gs.methods:
        for kinds, cap in ((("chunk",), 5), (None, 10)):  # k=5 chunks (+ context_k=5 context)
            retriever = GraphStrataRetriever(index=lc_gs, method=method, kinds=kinds)
            msg = _call(create_graphstrata_tool(retriever), QUERY)
            assert 0 < len(msg.artifact) <= cap, (method, kinds, len(msg.artifact))
            assert len(msg.content) < 8000, (method, kinds, len(msg.content))
            assert sum(d.metadata["kind"] == "chunk" for d in msg.artifact) <= 5


class _Long(BaseRetriever):
    """Ten Documents of ``size`` characters each."""

    size: int = 3000

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return [Document(page_content=str(i) * self.size, id=str(i)) for i in range(10)]


async def test_text_stays_within_max_chars_keeping_whole_documents() -> None:
    tool = create_graphstrata_tool(_Long())
    msg = _call(tool, "q")
    assert len(msg.content) <= 8000
    assert [d.id for d in msg.artifact] == ["0", "1"]  # the third would pass 8,000 characters
    assert msg.content == "0" * 3000 + "\n\n" + "1" * 3000
    amsg = await tool.ainvoke({"name": tool.name, "args": {"query": "q"}, "id": "c3",
                               "type": "tool_call"})
    assert (amsg.content, amsg.artifact) == (msg.content, msg.artifact)
    wide = _call(create_graphstrata_tool(_Long(), max_chars=None), "q")
    assert len(wide.artifact) == 10 and len(wide.content) == 10 * 3000 + 9 * 2
    assert len(_call(create_graphstrata_tool(_Long(), max_chars=6002), "q").artifact) == 2


def test_a_first_document_over_the_budget_is_cut_not_dropped() -> None:
    msg = _call(create_graphstrata_tool(_Long(size=20000), max_chars=1000), "q")
    assert len(msg.content) == 1000 and msg.content.endswith(" [...]")
    assert [d.id for d in msg.artifact] == ["0"]


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "8000"])
def test_bad_max_chars(lc_gs: Any, bad: Any) -> None:
    with pytest.raises(ValueError, match="max_chars"):
        create_graphstrata_tool(GraphStrataRetriever(index=lc_gs), max_chars=bad)
