"""The MCP server (official ``mcp`` SDK, FastMCP): tools, their JSON schemas, resources.

Tools: ``retrieve``, ``list_indexes``, ``stats``; ``answer`` only when the server has an LLM;
``insert`` and ``delete`` only with ``--allow-writes``. Arguments are validated against the
tools' input schemas, which refuse unknown argument names (``additionalProperties: false``), so
a misspelt argument is an error naming it, not silently ignored. Results are structured
(``structuredContent`` matching each tool's output schema; the same JSON as text for clients
that read only text). A refused call is a tool error (``isError``) whose text names the
argument or limit at fault.

Resources: ``graphstrata://{index}/stats`` and ``graphstrata://{index}/communities`` (templates:
a caller learns index names from ``list_indexes``, which shows only what its token may read);
a server without tokens also lists them as concrete resources.

Who is calling: over HTTP the security layer (:mod:`graphstrata.serve.http`) authenticates the
request and leaves its :class:`~graphstrata.serve.config.Principal` in the ASGI scope under
:data:`PRINCIPAL_KEY`; over stdio the caller is the process that started the server, with
every scope.
"""

# no `from __future__ import annotations`: FastMCP reads the tools' annotations at runtime, and
# those built from the server's limits are local names

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.fastmcp.tools import Tool
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, ConfigDict, Field

from ..methods import METHODS
from ..types import HIT_KINDS
from .config import Principal
from .service import TOOL_DESCRIPTIONS, GraphService, ServeError

__all__ = ["LOCAL", "PRINCIPAL_KEY", "build_tools", "create_mcp_server", "principal_of", "strict_tools"]

#: ASGI scope key under which the HTTP layer leaves the authenticated caller
PRINCIPAL_KEY = "graphstrata.principal"
#: the caller of a stdio server (and of a loopback HTTP server without tokens): every index
LOCAL = Principal(name="local", read=None, write=None)

Method = Literal[tuple(METHODS)]  # type: ignore[valid-type]
Kind = Literal[HIT_KINDS]  # type: ignore[valid-type]


class HitOut(BaseModel):
    """One hit (``graphstrata.Hit.to_dict``)."""

    id: str
    text: str
    score: float = Field(description="relevance in [0, 1], non-increasing down the ranking")
    kind: str = Field(description="chunk, entity, relation, community or path")
    layer: int | None = None
    chunk_ids: list[str]
    document_ids: list[str]
    metadata: dict[str, Any] = Field(description="chunks: document_id, chunk_index, document_metadata, "
                                     "method, raw_score; context hits: method-specific")
    explain: dict[str, Any] | None = None


class RetrieveOut(BaseModel):
    index: str
    version: str = Field(description="the persisted index version the hits come from")
    method: str
    query: str
    hits: list[HitOut]


class CitationOut(BaseModel):
    number: int = Field(description="the n of an [n] marker in the answer")
    chunk_ids: list[str] = Field(description="the chunks behind source n")
    document_ids: list[str] = Field(description="the documents of those chunks")


class AnswerOut(BaseModel):
    index: str
    version: str
    method: str
    query: str
    answer: str
    sources: list[HitOut] = Field(description="the hits the answer was generated from")
    usage: dict[str, Any] = Field(description="LLM calls and tokens of this query, per stage and in total")
    fallbacks: list[str] = Field(
        default_factory=list,
        description="the LLM steps of this query that fell back, one note each (empty when every step used "
        "the model's answer)",
    )
    citations: list[CitationOut] = Field(
        default_factory=list,
        description="the [n] markers the answer cites, each mapped to the chunk and document ids of "
        "source n of the answer prompt (empty when the answer cites nothing)",
    )


class IndexOut(BaseModel):
    name: str
    version: str
    documents: int
    chunks: int
    entities: int
    communities_per_layer: list[int]
    writable: bool


class IndexesOut(BaseModel):
    indexes: list[IndexOut]
    methods: dict[str, str] = Field(description="retrieval method -> what it is good for")
    answer: bool = Field(description="whether the answer tool is available")


class StatsOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    index: str
    version: str
    documents: int
    chunks: int
    entities: int
    relations: int
    communities_per_layer: list[int]
    layers: list[dict[str, Any]]
    top_entities: list[dict[str, Any]]


class InsertOut(BaseModel):
    index: str
    version: str
    ids: list[str]


class DeleteOut(BaseModel):
    index: str
    version: str
    deleted: int


def principal_of(ctx: Context) -> Principal:
    """The caller of the current MCP request.

    Raises:
        ToolError: an HTTP request that reached a tool without an authenticated caller (the
            security layer was bypassed; never expected).
    """
    request = ctx.request_context.request
    if request is None:  # stdio
        return LOCAL
    principal = getattr(request, "scope", {}).get(PRINCIPAL_KEY)
    if not isinstance(principal, Principal):
        raise ToolError("unauthorized")
    return principal


async def _call(fn: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Run a blocking service call in a worker thread; a :class:`ServeError` becomes a tool
    error with its message."""
    try:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
    except ServeError as exc:
        raise ToolError(exc.message) from None


Query = Annotated[str, Field(description="the question or search text")]
IndexArg = Annotated[str | None, Field(description="index name (see list_indexes); may be omitted "
                                                     "when the caller can read only one")]
MethodArg = Annotated[Method, Field(description="retrieval method; archrag unless another fits better")]
Filters = Annotated[dict[str, Any] | None, Field(
    description='metadata filter on documents, applied before k is cut: {"year": {"$gte": 2020}}, '
    '{"author": "Ada"}; operators $eq $ne $gt $gte $lt $lte $in $nin $contains, $and / $or')]


# one document of the insert tool (no docstring: pydantic would put it in the tool's schema)
class DocumentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str | None = Field(None, description="document id (an existing id is replaced); default: a content hash")
    text: str = Field(min_length=1)
    metadata: dict[str, Any] | None = None


def build_tools(service: GraphService) -> list[Tool]:
    """The tools ``service`` offers (see the module docstring), with strict argument models."""
    chosen = _read_tools(service)
    if service.config.allow_writes:
        chosen += _write_tools(service)
    return strict_tools(
        Tool.from_function(fn, name=name, description=TOOL_DESCRIPTIONS[name], structured_output=True)
        for name, fn in chosen
    )


def _read_tools(service: GraphService) -> list[tuple[str, Callable[..., Awaitable[Any]]]]:
    """``(name, tool function)`` of retrieve, list_indexes and stats, and answer when the
    service has an LLM."""
    max_k = service.config.max_k

    async def retrieve(
        ctx: Context,
        query: Query,
        index: IndexArg = None,
        method: MethodArg = "archrag",
        k: Annotated[int, Field(ge=1, le=max_k, description=f"at most this many source passages (1..{max_k})")] = 5,
        filters: Filters = None,
        kinds: Annotated[list[Kind] | None, Field(
            description="hit kinds to return; default ['chunk']; add entity, relation, community, path "
            "for graph context, or null for every kind")] = ["chunk"],  # noqa: B006
        context_k: Annotated[int | None, Field(ge=1, le=max_k, description="at most this many graph-context "
                                                "hits, best first (default: all the method returned)")] = None,
        explain: Annotated[bool, Field(description="add why each hit came back")] = False,
    ) -> RetrieveOut:
        out = await _call(service.retrieve, principal_of(ctx), query, index=index, method=method, k=k,
                          filters=filters, kinds=kinds, context_k=context_k, explain=explain)
        return RetrieveOut.model_validate(out)

    async def list_indexes(ctx: Context) -> IndexesOut:
        return IndexesOut.model_validate(await _call(service.list_indexes, principal_of(ctx)))

    async def stats(
        ctx: Context,
        index: IndexArg = None,
        top: Annotated[int, Field(ge=1, le=max_k, description="entities and community titles listed per layer")] = 10,
    ) -> StatsOut:
        return StatsOut.model_validate(await _call(service.stats, principal_of(ctx), index=index, top=top))

    async def answer(
        ctx: Context,
        query: Query,
        index: IndexArg = None,
        method: MethodArg = "archrag",
        k: Annotated[int, Field(ge=1, le=max_k, description="source passages retrieved for the answer")] = 10,
        filters: Filters = None,
    ) -> AnswerOut:
        out = await _call(service.answer, principal_of(ctx), query, index=index, method=method, k=k, filters=filters)
        return AnswerOut.model_validate(out)

    chosen: list[tuple[str, Callable[..., Awaitable[Any]]]] = [
        ("retrieve", retrieve), ("list_indexes", list_indexes), ("stats", stats)]
    if service.has_llm:
        chosen.append(("answer", answer))
    return chosen


def _write_tools(service: GraphService) -> list[tuple[str, Callable[..., Awaitable[Any]]]]:
    """``(name, tool function)`` of insert and delete."""

    async def insert(
        ctx: Context,
        documents: Annotated[list[DocumentIn], Field(min_length=1, description="documents to add or replace")],
        index: IndexArg = None,
    ) -> InsertOut:
        docs = [d.model_dump(exclude_none=True) for d in documents]
        return InsertOut.model_validate(await _call(service.insert, principal_of(ctx), docs, index=index))

    async def delete(
        ctx: Context,
        document_ids: Annotated[list[str], Field(min_length=1, description="ids of the documents to remove")],
        index: IndexArg = None,
    ) -> DeleteOut:
        return DeleteOut.model_validate(await _call(service.delete, principal_of(ctx), document_ids, index=index))

    return [("insert", insert), ("delete", delete)]


def strict_tools(tools: Any) -> list[Tool]:
    """``tools`` with argument models that refuse unknown names (FastMCP's ignore them) and
    input schemas that say so (``additionalProperties: false``)."""
    out = []
    for tool in tools:
        base = tool.fn_metadata.arg_model
        strict = type(base.__name__, (base,), {
            "model_config": ConfigDict(extra="forbid", arbitrary_types_allowed=True),
            "__module__": base.__module__,
        })
        tool.fn_metadata = tool.fn_metadata.model_copy(update={"arg_model": strict})
        tool.parameters = {**tool.parameters, "additionalProperties": False}
        out.append(tool)
    return out


def _add_resources(mcp: FastMCP, service: GraphService, listed: bool) -> None:
    async def stats_resource(index: str, ctx: Context) -> str:
        return json.dumps(await _call(service.stats, principal_of(ctx), index=index))

    async def communities_resource(index: str, ctx: Context) -> str:
        return json.dumps(await _call(service.communities, principal_of(ctx), index=index))

    mcp.resource("graphstrata://{index}/stats", name="index-stats", mime_type="application/json",
                 description="counts, layers, top entities and build cost of an index")(stats_resource)
    mcp.resource("graphstrata://{index}/communities", name="index-communities", mime_type="application/json",
                 description="community titles per layer, largest first (at most 100 a layer)")(communities_resource)
    if not listed:
        return
    for name in service.registry.names():  # listed only without tokens: every caller is LOCAL
        def make(index: str, fn: Callable[..., Any]) -> Callable[[], Awaitable[str]]:
            async def read() -> str:
                return json.dumps(await _call(fn, LOCAL, index=index))
            return read

        mcp.resource(f"graphstrata://{name}/stats", name=f"{name}-stats", mime_type="application/json",
                     description=f"stats of index {name}")(make(name, service.stats))
        mcp.resource(f"graphstrata://{name}/communities", name=f"{name}-communities", mime_type="application/json",
                     description=f"community titles of index {name}")(make(name, service.communities))


def create_mcp_server(service: GraphService, tools: list[Tool] | None = None) -> FastMCP:
    """The FastMCP server over ``service``: tools (``tools``, default :func:`build_tools`) and
    resources (see the module docstring).

    DNS-rebinding and Origin checks for HTTP are done by :mod:`graphstrata.serve.http` for every
    route (MCP and plain JSON alike), so the SDK's own check is off here; request bodies are
    bounded there too.
    """
    config = service.config
    mcp = FastMCP(
        name="graphstrata",
        instructions="Graph-RAG retrieval over indexed document collections. Call list_indexes to see "
        "the collections, then retrieve with a question; each result lists source passages with "
        "scores and document ids. Use graph context (kinds) for entities, relations and community "
        "summaries.",
        tools=build_tools(service) if tools is None else tools,
        host=config.host,
        port=config.port,
        max_request_body_size=config.max_request_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        log_level="WARNING",
    )
    _add_resources(mcp, service, listed=not config.tokens)
    return mcp
