"""Where the keyword arguments of ``GraphStrataIndex.as_query_engine`` / ``as_chat_engine`` go.

LlamaIndex's ``BaseIndex`` hands one ``**kwargs`` to the retriever, the query engine and the
chat engine alike, and those swallow what they do not know. Here each name is routed to the
one component that takes it, and a name none of them takes raises ``ValueError`` (named, with
a hint), so a misspelt option never vanishes silently.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from llama_index.core.chat_engine import (
    CondensePlusContextChatEngine,
    CondenseQuestionChatEngine,
    ContextChatEngine,
    SimpleChatEngine,
)
from llama_index.core.chat_engine.types import ChatMode
from llama_index.core.query_engine.retriever_query_engine import RetrieverQueryEngine
from llama_index.retrievers.graphstrata import RETRIEVER_ARGUMENTS, unknown_arguments_error

#: :meth:`GraphStrataIndex.as_retriever` arguments that are not also query-engine options.
RETRIEVER_ONLY_ARGUMENTS: tuple[str, ...] = tuple(
    a for a in RETRIEVER_ARGUMENTS if a not in ("callback_manager", "verbose")
)

#: Arguments of ``as_query_engine(response_mode="method")`` besides ``llm`` / ``response_mode``.
METHOD_ENGINE_ARGUMENTS: tuple[str, ...] = (
    "method", "similarity_top_k", "filters", "method_options", "streaming", "callback_manager",
)

#: The chat engine class of each chat mode ``as_chat_engine`` offers.
CHAT_ENGINES: dict[ChatMode, type] = {
    ChatMode.CONDENSE_QUESTION: CondenseQuestionChatEngine,
    ChatMode.CONTEXT: ContextChatEngine,
    ChatMode.CONDENSE_PLUS_CONTEXT: CondensePlusContextChatEngine,
    ChatMode.BEST: CondensePlusContextChatEngine,
    ChatMode.SIMPLE: SimpleChatEngine,
}


def query_engine_arguments() -> tuple[str, ...]:
    """Named parameters of ``RetrieverQueryEngine.from_args`` (not ``retriever`` / ``llm``)."""
    params = inspect.signature(RetrieverQueryEngine.from_args).parameters.values()
    return tuple(
        p.name
        for p in params
        if p.kind is not inspect.Parameter.VAR_KEYWORD and p.name not in ("retriever", "llm", "cls")
    )


def partition_kwargs(
    kwargs: Mapping[str, Any], *groups: Collection[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Split ``kwargs`` by argument name: one dict per group of names (the first group that
    names an argument takes it), and the names no group knows."""
    parts: list[dict[str, Any]] = [{} for _ in groups]
    unknown: list[str] = []
    for name, value in kwargs.items():
        for part, names in zip(parts, groups, strict=True):
            if name in names:
                part[name] = value
                break
        else:
            unknown.append(name)
    return parts, unknown


def route_query_engine_arguments(
    kwargs: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``as_query_engine`` keywords → ``(retriever arguments, RetrieverQueryEngine options)``.

    ``callback_manager`` and ``verbose`` go to the query engine (it hands its callback manager
    on).

    Raises:
        ValueError: a name neither the retriever nor the query engine takes (named).
    """
    engine_names = query_engine_arguments()
    (retriever_kwargs, engine_kwargs), unknown = partition_kwargs(
        kwargs, RETRIEVER_ONLY_ARGUMENTS, engine_names
    )
    if unknown:
        raise unknown_arguments_error(
            unknown,
            ("llm", *RETRIEVER_ONLY_ARGUMENTS, *engine_names),
            "GraphStrataIndex.as_query_engine",
        )
    return retriever_kwargs, engine_kwargs


def method_engine_arguments(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``as_query_engine(response_mode="method", ...)`` keywords → ``GraphStrataQueryEngine``
    arguments (``response_mode`` dropped).

    Raises:
        ValueError: a name outside :data:`METHOD_ENGINE_ARGUMENTS` (named).
    """
    kwargs = {k: v for k, v in kwargs.items() if k != "response_mode"}
    unknown = [name for name in kwargs if name not in METHOD_ENGINE_ARGUMENTS]
    if unknown:
        raise unknown_arguments_error(
            unknown, ("llm", "response_mode", *METHOD_ENGINE_ARGUMENTS),
            'GraphStrataIndex.as_query_engine(response_mode="method")',
        )
    return kwargs


@dataclass(frozen=True)
class ChatEngineArguments:
    """``as_chat_engine`` keywords routed: the chat mode, its engine class and the keywords
    of each component."""

    mode: ChatMode
    chat_cls: type
    retriever: dict[str, Any]
    chat: dict[str, Any]
    query_engine: dict[str, Any]


def route_chat_engine_arguments(chat_mode: Any, kwargs: Mapping[str, Any]) -> ChatEngineArguments:
    """Route ``as_chat_engine`` keywords: retriever arguments to the retriever (not for
    ``"simple"``), the chat engine's own ``from_defaults`` parameters to the chat engine, and
    for ``"condense_question"`` ``RetrieverQueryEngine`` options to its query engine.

    Raises:
        ValueError: an unknown chat mode, or a name none of the mode's components takes
            (named).
    """
    mode = ChatMode(chat_mode)
    chat_cls = CHAT_ENGINES.get(mode)
    if chat_cls is None:
        raise ValueError(f"unsupported chat mode {chat_mode!r}")
    chat_names = [
        p.name
        for p in inspect.signature(chat_cls.from_defaults).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
        and p.name not in ("cls", "retriever", "query_engine", "llm")
    ]
    engine_names = query_engine_arguments() if mode == ChatMode.CONDENSE_QUESTION else ()
    retriever_names = RETRIEVER_ONLY_ARGUMENTS if mode != ChatMode.SIMPLE else ()
    (retriever_kwargs, chat_kwargs, engine_kwargs), unknown = partition_kwargs(
        kwargs, retriever_names, chat_names, engine_names
    )
    if unknown:
        raise unknown_arguments_error(
            unknown,
            (*retriever_names, *chat_names, *engine_names),
            f"GraphStrataIndex.as_chat_engine(chat_mode={mode.value!r})",
        )
    return ChatEngineArguments(mode, chat_cls, retriever_kwargs, chat_kwargs, engine_kwargs)
