"""`create_graphstrata_tool`: expose a graphstrata retriever to tool-calling agents."""

from __future__ import annotations

from langchain_core.prompts import BasePromptTemplate, PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool
from langchain_core.tools.retriever import create_retriever_tool

DEFAULT_TOOL_NAME = "graphstrata_search"
DEFAULT_TOOL_DESCRIPTION = (
    "Search the knowledge base (a graph-RAG index over the user's documents) and return the "
    "most relevant passages. Input: a natural-language question or keywords."
)
#: Default rendering of each Document in the tool's text output: the source document ids in
#: brackets, then the text, so the model can cite its sources.
DEFAULT_DOCUMENT_PROMPT = PromptTemplate.from_template("[{source}] {page_content}")


def create_graphstrata_tool(
    retriever: BaseRetriever,
    name: str = DEFAULT_TOOL_NAME,
    description: str = DEFAULT_TOOL_DESCRIPTION,
    *,
    document_prompt: BasePromptTemplate[str] | None = None,
    document_separator: str = "\n\n",
) -> BaseTool:
    """Wrap a retriever (normally a ``GraphStrataRetriever``) as an agent tool.

    Built on :func:`langchain_core.tools.create_retriever_tool` with
    ``response_format="content_and_artifact"``: when the tool is called with a ``ToolCall``,
    the resulting ``ToolMessage.content`` is the text the model reads (each Document rendered by
    ``document_prompt``, joined by ``document_separator``) and ``ToolMessage.artifact`` is the
    ``list[Document]`` itself (ids and metadata intact) for the application. Called directly
    with ``tool.invoke({"query": ...})`` it returns only the text.

    Args:
        retriever: the retriever to call with the tool's ``query`` argument.
        name: tool name shown to the model; letters, digits, ``_`` and ``-`` only.
        description: what the tool does, shown to the model.
        document_prompt: template for one Document; may use ``page_content`` and any
            metadata key. Default for a ``GraphStrataRetriever``: ``"[{source}] {page_content}"``
            (``source`` is the source document id(s)); ``"{page_content}"`` for others.
        document_separator: text between rendered Documents.

    Returns:
        A ``StructuredTool`` with one string argument ``query``.

    Raises:
        TypeError: ``retriever`` is not a ``BaseRetriever``.
        ValueError: ``name`` is empty or has characters model APIs reject, or ``description``
            is empty.
    """
    if not isinstance(retriever, BaseRetriever):
        raise TypeError(f"retriever must be a BaseRetriever, got {type(retriever).__name__}")
    if not name or not all(c.isalnum() or c in "_-" for c in name):
        raise ValueError(f"tool name must be non-empty and use only [A-Za-z0-9_-], got {name!r}")
    if not description or not description.strip():
        raise ValueError("tool description must be a non-empty string")
    if document_prompt is None:
        # GraphStrataRetriever always sets metadata["source"]; other retrievers may not.
        from langchain_graphstrata.retrievers import GraphStrataRetriever

        if isinstance(retriever, GraphStrataRetriever):
            document_prompt = DEFAULT_DOCUMENT_PROMPT
        else:
            document_prompt = PromptTemplate.from_template("{page_content}")
    return create_retriever_tool(
        retriever,
        name,
        description,
        document_prompt=document_prompt,
        document_separator=document_separator,
        response_format="content_and_artifact",
    )
