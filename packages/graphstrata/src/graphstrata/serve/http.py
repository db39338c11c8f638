"""The HTTP server: streamable-HTTP MCP at ``/mcp``, plain JSON routes, and the security layer
in front of both.

Routes:

- ``POST /mcp`` (and ``GET`` / ``DELETE``): the MCP streamable HTTP transport.
- ``POST /v1/retrieve``, ``POST /v1/answer`` (with ``--llm``): the MCP tools' arguments as a
  JSON object, validated against the same schemas; the tools' structured result as the body.
- ``GET /v1/indexes``: ``list_indexes``.
- ``GET /openapi.json``: an OpenAPI 3.1 document of the plain routes.

Every request first passes :class:`Guard`, in this order:

1. **Host** (bound to a loopback address only): the ``Host`` header must be a loopback name,
   which defeats DNS rebinding — 421 otherwise.
2. **Origin** (the MCP specification's requirement for HTTP servers): a request carrying an
   ``Origin`` header is refused (403) unless it is a loopback origin or one given with
   ``--allow-origin``. Requests without one (programs, not browsers) pass.
3. **Bearer token** (when the server has tokens): ``Authorization: Bearer <token>``; a missing
   or unknown token gets 401 with the same body either way, so it learns nothing — not even
   which indexes exist. Without tokens (loopback only) every caller is ``local``.
4. **Size**: a body over ``--max-request-bytes`` gets 413 (by ``Content-Length``, or while
   reading one sent without it).

Errors of the plain routes are ``{"error": {"code", "message"}}`` with the status of the
:class:`~graphstrata.serve.service.ServeError`.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio.to_thread
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .config import ServeConfig, is_loopback
from .mcp_server import LOCAL, PRINCIPAL_KEY, build_tools, create_mcp_server
from .service import TOOL_DESCRIPTIONS, GraphService, ServeError

log = logging.getLogger(__name__)

__all__ = ["Guard", "create_http_app", "openapi_document", "run_http"]

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]

_LOOPBACK_HOST = re.compile(r"^(localhost|127(?:\.\d{1,3}){3}|\[::1\])(:\d+)?$", re.I)
_LOOPBACK_ORIGIN = re.compile(r"^https?://(localhost|127(?:\.\d{1,3}){3}|\[::1\])(:\d+)?$", re.I)


async def _send_json(send: Callable[[dict], Awaitable[None]], status: int, body: dict[str, Any],
                     headers: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[assignment]
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *headers]})
    await send({"type": "http.response.body", "body": data})


class Guard:
    """ASGI middleware: Host, Origin, bearer token and body size checks (module docstring),
    then the wrapped app with the caller in ``scope[PRINCIPAL_KEY]``.

    Args:
        app: the ASGI app to protect.
        config: the server's settings (``host``, ``tokens``, ``max_request_bytes``,
            ``allowed_origins``).
    """

    def __init__(self, app: ASGIApp, config: ServeConfig) -> None:
        self.app = app
        self.config = config
        self.check_host = is_loopback(config.host)
        self.origins = frozenset(o.rstrip("/").lower() for o in config.allowed_origins)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.check_host and not _LOOPBACK_HOST.match(headers.get("host", "")):
            await _send_json(send, 421, ServeError(421, "bad_host", "Host header is not this machine's").to_dict())
            return
        origin = headers.get("origin")
        if origin is not None and not (_LOOPBACK_ORIGIN.match(origin) or origin.rstrip("/").lower() in self.origins):
            await _send_json(send, 403, ServeError(403, "forbidden_origin", f"Origin {origin!r} is not allowed "
                                                   "(--allow-origin)").to_dict())
            return
        principal = LOCAL
        if self.config.tokens:
            auth = headers.get("authorization", "")
            scheme, _, token = auth.partition(" ")
            found = self.config.tokens.lookup(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
            if found is None:
                await _send_json(send, 401, ServeError(401, "unauthorized", "missing or unknown bearer token").to_dict(),
                                 [(b"www-authenticate", b'Bearer realm="graphstrata"')])
                return
            principal = found
        limit = self.config.max_request_bytes
        too_large = ServeError(413, "too_large", f"request body over {limit} bytes (--max-request-bytes)").to_dict()
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await _send_json(send, 413, too_large)
            return
        body = bytearray()
        if scope.get("method") in ("POST", "PUT", "PATCH"):
            more = True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > limit:
                    await _send_json(send, 413, too_large)
                    return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        scope[PRINCIPAL_KEY] = principal
        await self.app(scope, replay, send)


def _error_response(exc: ServeError) -> JSONResponse:
    return JSONResponse(exc.to_dict(), status_code=exc.status)


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def _json_route(service: GraphService, tool: Any, call: Callable[..., dict[str, Any]]) -> Callable[[Request], Awaitable[JSONResponse]]:
    arg_model = tool.fn_metadata.arg_model

    async def endpoint(request: Request) -> JSONResponse:
        principal = request.scope[PRINCIPAL_KEY]
        try:
            try:
                body = json.loads(await request.body() or b"null")
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise ServeError(400, "bad_argument", f"request body is not JSON ({exc})") from None
            if not isinstance(body, dict):
                raise ServeError(400, "bad_argument", "request body must be a JSON object of arguments")
            try:
                kwargs = arg_model.model_validate(body).model_dump_one_level()
            except ValidationError as exc:
                raise ServeError(400, "bad_argument", _validation_message(exc)) from None
            result = await anyio.to_thread.run_sync(lambda: call(principal, **kwargs))
        except ServeError as exc:
            return _error_response(exc)
        return JSONResponse(result)

    return endpoint


def _hoist_defs(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$defs`` moved into ``defs`` (OpenAPI components) and its
    ``#/$defs/X`` references rewritten to ``#/components/schemas/X``."""
    text = json.dumps(schema).replace('"#/$defs/', '"#/components/schemas/')
    out = json.loads(text)
    defs.update(out.pop("$defs", {}))
    return out


def openapi_document(service: GraphService, tools: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the plain JSON routes (request and response schemas are the
    MCP tools' input and output schemas)."""
    from .. import __version__

    schemas: dict[str, Any] = {"Error": {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["code", "message"],
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}}}
    errors = {str(s): {"description": d, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
              for s, d in ((400, "a bad argument, named in the message"), (401, "missing or unknown bearer token"),
                           (403, "Origin not allowed"), (404, "no such index for this token"),
                           (413, "request body too large"), (429, "too many requests in flight for this token"))}
    security = [{"bearer": []}] if service.config.tokens else []
    paths: dict[str, Any] = {}
    for name in ("retrieve", "answer"):
        if name not in tools:
            continue
        tool = tools[name]
        paths[f"/v1/{name}"] = {"post": {
            "operationId": name, "summary": f"{name} (the MCP tool's arguments and result)",
            "description": TOOL_DESCRIPTIONS[name], "security": security,
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": _hoist_defs(tool.parameters, schemas)}}},
            "responses": {"200": {"description": "the result", "content": {"application/json": {
                "schema": _hoist_defs(tool.output_schema or {"type": "object"}, schemas)}}}, **errors},
        }}
    paths["/v1/indexes"] = {"get": {
        "operationId": "list_indexes", "summary": "list_indexes", "description": TOOL_DESCRIPTIONS["list_indexes"],
        "security": security, "responses": {"200": {"description": "the indexes", "content": {"application/json": {
            "schema": _hoist_defs(tools["list_indexes"].output_schema or {"type": "object"}, schemas)}}},
            "401": errors["401"]}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "graphstrata", "version": __version__,
                 "description": "Graph-RAG retrieval over persisted graphstrata indexes. MCP (streamable "
                 "HTTP) is served at /mcp with the same tools."},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


def create_http_app(service: GraphService) -> Guard:
    """The whole HTTP server as one ASGI app: :class:`Guard` in front of the MCP streamable
    HTTP transport (``/mcp``) and the plain JSON routes (module docstring)."""
    tools = {t.name: t for t in build_tools(service)}
    mcp = create_mcp_server(service, list(tools.values()))
    mcp_app = mcp.streamable_http_app()
    document = openapi_document(service, tools)

    async def indexes(request: Request) -> JSONResponse:
        try:
            result = await anyio.to_thread.run_sync(lambda: service.list_indexes(request.scope[PRINCIPAL_KEY]))
        except ServeError as exc:
            return _error_response(exc)
        return JSONResponse(result)

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(document)

    routes = [
        Route("/v1/retrieve", _json_route(service, tools["retrieve"], service.retrieve), methods=["POST"]),
        Route("/v1/indexes", indexes, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
    if "answer" in tools:
        routes.append(Route("/v1/answer", _json_route(service, tools["answer"], service.answer), methods=["POST"]))
    app = Starlette(routes=routes + list(mcp_app.routes), lifespan=lambda _app: mcp.session_manager.run())
    return Guard(app, service.config)


def run_http(service: GraphService) -> None:
    """Serve :func:`create_http_app` with uvicorn on ``config.host:config.port`` until stopped."""
    import uvicorn

    config = service.config
    host = f"[{config.host}]" if ":" in config.host else config.host
    print(f"graphstrata serve: MCP at http://{host}:{config.port}/mcp, JSON at /v1/retrieve"
          f"{', /v1/answer' if service.has_llm else ''}, OpenAPI at /openapi.json; indexes: "
          f"{', '.join(service.registry.names())}; {len(config.tokens) or 'no'} token(s)"
          f"{'; writes allowed' if config.allow_writes else ''}", file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn.Config(create_http_app(service), host=config.host, port=config.port,
                                           log_level="warning", access_log=False))
    server.run()
