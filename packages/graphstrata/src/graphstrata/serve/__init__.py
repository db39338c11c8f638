"""``graphstrata serve``: persisted indexes as an MCP server (stdio or streamable HTTP) and a
plain JSON HTTP API, for agents and programs that keep one index loaded and query it often.

- :mod:`~graphstrata.serve.config` — settings, bearer tokens and their index scopes (no MCP
  import: usable without the ``serve`` extra);
- :mod:`~graphstrata.serve.registry` — loaded indexes following their directory's ``CURRENT``;
- :mod:`~graphstrata.serve.service` — the operations, transport aside, and their refusals;
- :mod:`~graphstrata.serve.mcp_server` — the MCP tools and resources (official ``mcp`` SDK);
- :mod:`~graphstrata.serve.http` — the HTTP app: ``/mcp``, ``/v1/*``, ``/openapi.json`` behind
  Host / Origin / token / size checks.

Install with ``pip install "graphstrata[serve]"``.
"""

from __future__ import annotations

from typing import Any

from .config import (
    Principal,
    ServeConfig,
    TokenTable,
    add_arguments,
    config_from_args,
    parse_tokens,
)

__all__ = ["Principal", "ServeConfig", "TokenTable", "add_arguments", "config_from_args", "parse_tokens", "run"]


def run(config: ServeConfig, llm: Any = None) -> None:
    """Load ``config.indexes`` and serve them until stopped (stdio: until the client closes
    the stream; HTTP: until interrupted).

    Args:
        config: checked settings (:func:`config_from_args` or :meth:`ServeConfig.check`).
        llm: an LLM for the ``answer`` tool and query-time LLM steps (as
            :meth:`graphstrata.GraphStrata.load` takes it); ``None``: no ``answer`` tool.

    Raises:
        ValueError: the ``mcp`` SDK is not installed (the message says how to install it), or
            an index fails to load (named).
        FileNotFoundError: an index directory vanished.
    """
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ValueError('graphstrata serve needs the MCP SDK: pip install "graphstrata[serve]"') from None
    from .mcp_server import create_mcp_server
    from .registry import IndexRegistry
    from .service import GraphService

    config.check()
    service = GraphService(IndexRegistry(config.indexes, llm=llm), config, has_llm=llm is not None)
    if config.transport == "stdio":
        create_mcp_server(service).run("stdio")
    else:
        from .http import run_http

        run_http(service)
