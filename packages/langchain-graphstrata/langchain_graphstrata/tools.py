"""`create_graphstrata_tool`: expose a graphstrata retriever to tool-calling agents."""

from __future__ import annotations

from langchain_core.callbacks import Callbacks  # noqa: TC002 - StructuredTool reads it at runtime
from langchain_core.documents import Document  # noqa: TC002
from langchain_core.prompts import (
    BasePromptTemplate,
    PromptTemplate,
    aformat_document,
    format_document,
)
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from langchain_graphstrata.retrievers import GraphStrataRetriever

DEFAULT_TOOL_NAME = "graphstrata_search"
DEFAULT_TOOL_DESCRIPTION = (
    "Search the knowledge base (a graph-RAG index over the user's documents) and return the "
    "most relevant passages. Input: a natural-language question or keywords."
)
#: Default rendering of each Document in the tool's text output: the source document ids in
#: brackets, then the text, so the model can cite its sources.
DEFAULT_DOCUMENT_PROMPT = PromptTemplate.from_template("[{source}] {page_content}")
#: Default cap on the text the model reads from one tool call (characters).
DEFAULT_MAX_CHARS = 8000
_ELLIPSIS = " [...]"


class GraphStrataToolInput(BaseModel):
    """Input of the graphstrata search tool."""

    query: str = Field(description="query to look up in the knowledge base")


def _fit(
    texts: list[str], docs: list[Document], separator: str, max_chars: int | None
) -> tuple[str, list[Document]]:
    """Join rendered documents, keeping whole documents (best first) within ``max_chars``.

    A first document longer than the budget alone is cut (ending in ``" [...]"``) rather than
    dropped, so a call never returns nothing when the retriever found something.
    """
    if max_chars is None:
        return separator.join(texts), docs
    used, kept_texts, kept_docs = 0, [], []
    for text, doc in zip(texts, docs, strict=True):
        extra = len(text) + (len(separator) if kept_texts else 0)
        if used + extra > max_chars:
            if not kept_texts:
                kept_texts.append(text[: max(0, max_chars - len(_ELLIPSIS))] + _ELLIPSIS)
                kept_docs.append(doc)
            break
        kept_texts.append(text)
        kept_docs.append(doc)
        used += extra
    return separator.join(kept_texts), kept_docs


def create_graphstrata_tool(
    retriever: BaseRetriever,
    name: str = DEFAULT_TOOL_NAME,
    description: str = DEFAULT_TOOL_DESCRIPTION,
    *,
    document_prompt: BasePromptTemplate[str] | None = None,
    document_separator: str = "\n\n",
    max_chars: int | None = DEFAULT_MAX_CHARS,
) -> BaseTool:
    """Wrap a retriever (normally a ``GraphStrataRetriever``) as an agent tool.

    Works like :func:`langchain_core.tools.create_retriever_tool` with
    ``response_format="content_and_artifact"``: when the tool is called with a ``ToolCall``,
    the resulting ``ToolMessage.content`` is the text the model reads (each Document rendered by
    ``document_prompt``, joined by ``document_separator``) and ``ToolMessage.artifact`` is the
    ``list[Document]`` shown in that text (ids and metadata intact) for the application. Called
    directly with ``tool.invoke({"query": ...})`` it returns only the text.

    What a call returns by default: what the retriever returns (for a ``GraphStrataRetriever``
    at most ``k`` chunk Documents, plus at most ``context_k`` graph-context Documents when its
    ``kinds`` asks for them), in at most ``max_chars`` characters (8,000): Documents are kept
    whole, best first, until the next one would not fit; a first Document longer than the
    budget is cut and ends in ``" [...]"``. The artifact holds exactly the Documents shown.

    Args:
        retriever: the retriever to call with the tool's ``query`` argument.
        name: tool name shown to the model; letters, digits, ``_`` and ``-`` only.
        description: what the tool does, shown to the model.
        document_prompt: template for one Document; may use ``page_content`` and any
            metadata key. Default for a ``GraphStrataRetriever``: ``"[{source}] {page_content}"``
            (``source`` is the source document id(s)); ``"{page_content}"`` for others.
        document_separator: text between rendered Documents.
        max_chars: most characters of text per call (> 0), ``None`` for no cap.

    Returns:
        A ``StructuredTool`` with one string argument ``query``.

    Raises:
        TypeError: ``retriever`` is not a ``BaseRetriever``.
        ValueError: ``name`` is empty or has characters model APIs reject, ``description``
            is empty, or ``max_chars`` is not None or a positive int.
    """
    if not isinstance(retriever, BaseRetriever):
        raise TypeError(f"retriever must be a BaseRetriever, got {type(retriever).__name__}")
    if not name or not all(c.isalnum() or c in "_-" for c in name):
        raise ValueError(f"tool name must be non-empty and use only [A-Za-z0-9_-], got {name!r}")
    if not description or not description.strip():
        raise ValueError("tool description must be a non-empty string")
    if max_chars is not None and (
        isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars <= 0
    ):
        raise ValueError(f"max_chars must be None or a positive int, got {max_chars!r}")
    if document_prompt is None:
        # GraphStrataRetriever always sets metadata["source"]; other retrievers may not.
        if isinstance(retriever, GraphStrataRetriever):
            document_prompt = DEFAULT_DOCUMENT_PROMPT
        else:
            document_prompt = PromptTemplate.from_template("{page_content}")
    prompt = document_prompt

    def search(query: str, callbacks: Callbacks = None) -> tuple[str, list[Document]]:
        docs = retriever.invoke(query, config={"callbacks": callbacks})
        texts = [format_document(doc, prompt) for doc in docs]
        return _fit(texts, docs, document_separator, max_chars)

    async def asearch(query: str, callbacks: Callbacks = None) -> tuple[str, list[Document]]:
        docs = await retriever.ainvoke(query, config={"callbacks": callbacks})
        texts = [await aformat_document(doc, prompt) for doc in docs]
        return _fit(texts, docs, document_separator, max_chars)

    return StructuredTool(
        name=name,
        description=description,
        func=search,
        coroutine=asearch,
        args_schema=GraphStrataToolInput,
        response_format="content_and_artifact",
    )
