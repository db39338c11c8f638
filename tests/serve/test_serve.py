"""``graphstrata serve`` (issue 32) through the official MCP client, over stdio and streamable
HTTP, and through the plain JSON routes: tools and their schemas, results equal to the
in-process ``GraphStrata.retrieve``, errors naming the argument, tokens and scopes, bounds,
Origin checks, writes only when allowed, and a new version persisted by another process seen
by the next request.

The indexes are small real ones (``serve_indexes`` in the repository conftest: HotpotQA and
MuSiQue passages, fast embedder preset); each server runs in a child process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from contextlib import asynccontextmanager

import httpx
import pytest

pytest.importorskip("mcp")

from graphstrata import GraphStrata  # noqa: E402
from graphstrata.serve.config import ServeConfig, TokenTable, parse_tokens  # noqa: E402
from graphstrata.testing.serve import http_server, post_json, serve_command  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

TOKEN_A = "tenant-a-token-0123456789"
TOKEN_B = "tenant-b-token-9876543210"
QUESTION = "Which band released the album F.I.R.?"


def _tokens(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": [
        {"name": "a", "token": TOKEN_A, "read": ["hotpot"], "write": ["hotpot"]},
        {"name": "b", "token": TOKEN_B, "read": ["musique"]},
    ]}))
    return path


@asynccontextmanager
async def _stdio(*args: str):
    cmd = serve_command(*args)
    params = StdioServerParameters(command=cmd[0], args=cmd[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def _http(url: str, token: str | None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as client, \
            streamable_http_client(f"{url}/mcp", http_client=client) as (read, write, _), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _expected(index_dir, **kwargs):
    gs = GraphStrata.load(index_dir)
    return [h.to_dict() for h in gs.retrieve(QUESTION, **kwargs)]


def _same_hits(got, expected):
    assert [h["id"] for h in got] == [h["id"] for h in expected]
    assert [h["document_ids"] for h in got] == [h["document_ids"] for h in expected]
    assert [h["kind"] for h in got] == [h["kind"] for h in expected]
    assert [h["score"] for h in got] == pytest.approx([h["score"] for h in expected], abs=1e-9)
    assert [h["metadata"]["document_metadata"] for h in got if h["kind"] == "chunk"] == [
        h["metadata"]["document_metadata"] for h in expected if h["kind"] == "chunk"]


# -- stdio -------------------------------------------------------------------------------------


async def test_stdio_tools_retrieve_equals_in_process_and_errors_name_the_argument(serve_indexes):
    hotpot = serve_indexes["hotpot"]
    async with _stdio(str(hotpot)) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        # no --allow-writes: no write tool; no --llm: no answer tool
        assert set(tools) == {"retrieve", "list_indexes", "stats"}
        schema = tools["retrieve"].inputSchema
        assert schema["additionalProperties"] is False and schema["required"] == ["query"]
        assert schema["properties"]["k"]["maximum"] == 50
        assert set(schema["properties"]["method"]["enum"]) >= {"archrag", "dense", "bm25", "hybrid"}
        assert tools["retrieve"].outputSchema is not None
        assert "bm25" in tools["retrieve"].description and "exact names" in tools["retrieve"].description

        result = await session.call_tool("retrieve", {"query": QUESTION, "k": 3, "method": "hybrid"})
        assert not result.isError
        hits = result.structuredContent["hits"]
        assert len(hits) == 3
        _same_hits(hits, _expected(hotpot, method="hybrid", k=3, kinds=("chunk",)))
        assert json.loads(result.content[0].text)["hits"][0]["id"] == hits[0]["id"]

        # graph context when asked: every kind, the same as the library's kinds=None
        result = await session.call_tool("retrieve", {"query": QUESTION, "k": 4, "kinds": None, "context_k": 6})
        _same_hits(result.structuredContent["hits"], _expected(hotpot, k=4, kinds=None, context_k=6))
        assert {h["kind"] for h in result.structuredContent["hits"]} - {"chunk"}

        for args, named in [({"query": QUESTION, "k": 0}, "k"),
                            ({"query": QUESTION, "top_k": 3}, "top_k"),
                            ({"query": QUESTION, "method": "pagerank"}, "method"),
                            ({"query": QUESTION, "k": 51}, "k"),
                            ({"query": QUESTION, "kinds": ["chunks"]}, "kinds"),
                            ({"query": QUESTION, "filters": {"year": {"$near": 3}}}, "$near"),
                            ({"query": "   "}, "query"),
                            ({"query": QUESTION, "index": "nope"}, "index")]:
            result = await session.call_tool("retrieve", args)
            assert result.isError, args
            assert named in result.content[0].text, (args, result.content[0].text)

        listed = (await session.call_tool("list_indexes", {})).structuredContent
        assert [i["name"] for i in listed["indexes"]] == ["hotpot"]
        assert listed["indexes"][0]["documents"] == 60 and listed["answer"] is False
        resources = {str(r.uri) for r in (await session.list_resources()).resources}
        assert resources == {"graphstrata://hotpot/stats", "graphstrata://hotpot/communities"}
        titles = json.loads((await session.read_resource("graphstrata://hotpot/communities")).contents[0].text)
        gs = GraphStrata.load(hotpot)
        assert titles["layers"][0]["communities"] == len(gs.state.communities[0])
        assert {t["title"] for t in titles["layers"][0]["titles"]} <= {c.title for c in gs.state.communities[0]}


# -- HTTP: MCP and plain JSON -----------------------------------------------------------------


async def test_http_tokens_scopes_and_the_same_hits_over_mcp_and_json(serve_indexes, tmp_path):
    hotpot, musique = serve_indexes["hotpot"], serve_indexes["musique"]
    tokens = _tokens(tmp_path)
    with http_server([str(hotpot), str(musique), "--token", str(tokens), "--max-k", "20",
                      "--max-request-bytes", "8192"], token=TOKEN_A) as url:
        expected = _expected(hotpot, method="archrag", k=5, kinds=("chunk",))
        async with _http(url, TOKEN_A) as session:
            names = {t.name for t in (await session.list_tools()).tools}
            assert names == {"retrieve", "list_indexes", "stats"}
            result = await session.call_tool("retrieve", {"query": QUESTION, "index": "hotpot", "k": 5})
            assert not result.isError
            _same_hits(result.structuredContent["hits"], expected)
            # a token scoped to hotpot cannot read musique, and is told nothing about it
            result = await session.call_tool("retrieve", {"query": QUESTION, "index": "musique"})
            assert result.isError and "no such index" in result.content[0].text
            assert "indexes: hotpot)" in result.content[0].text
            listed = (await session.call_tool("list_indexes", {})).structuredContent
            assert [i["name"] for i in listed["indexes"]] == ["hotpot"]
            stats = await session.call_tool("stats", {"index": "musique"})
            assert stats.isError
            # no concrete resources are listed to a tenant; the template refuses other indexes
            assert not (await session.list_resources()).resources
            with pytest.raises(Exception, match="no such index"):
                await session.read_resource("graphstrata://musique/stats")
            result = await session.call_tool("retrieve", {"query": QUESTION, "k": 21})
            assert result.isError and "k" in result.content[0].text and "20" in result.content[0].text

        async with _http(url, TOKEN_B) as session:  # index omitted: its only index
            result = await session.call_tool("retrieve", {"query": QUESTION, "k": 2})
            assert result.structuredContent["index"] == "musique"

        # a wrong or missing token: refused before MCP, nothing revealed
        for token in ("not-a-token-at-all-xxxxxx", None):
            with pytest.raises(Exception):  # noqa: B017 - the SDK raises its transport error
                async with _http(url, token) as session:
                    await session.list_tools()
            status, body = post_json(f"{url}/v1/retrieve", {"query": QUESTION, "index": "hotpot"}, token=token)
            assert status == 401
            assert body == {"error": {"code": "unauthorized", "message": "missing or unknown bearer token"}}
        status, body = post_json(f"{url}/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token=None)
        assert status == 401 and "hotpot" not in json.dumps(body)

        # plain JSON: the same arguments, the same hits
        status, body = post_json(f"{url}/v1/retrieve", {"query": QUESTION, "index": "hotpot", "k": 5}, token=TOKEN_A)
        assert status == 200
        _same_hits(body["hits"], expected)
        status, body = post_json(f"{url}/v1/retrieve", {"query": QUESTION, "index": "musique"}, token=TOKEN_A)
        assert status == 404 and "musique" not in body["error"]["message"].split("(")[1]
        status, body = post_json(f"{url}/v1/retrieve", {"query": QUESTION, "kk": 3}, token=TOKEN_A)
        assert status == 400 and body["error"]["message"].startswith("kk:")
        status, body = post_json(f"{url}/v1/retrieve", {"query": QUESTION, "method": "dense", "k": 99}, token=TOKEN_A)
        assert status == 400 and body["error"]["message"].startswith("k:")
        status, body = post_json(f"{url}/v1/retrieve", b"[1, 2", token=TOKEN_A)
        assert status == 400 and "not JSON" in body["error"]["message"]
        status, body = post_json(f"{url}/v1/answer", {"query": QUESTION}, token=TOKEN_A)
        assert status == 404  # no --llm: no answer route
        # bounds and Origin
        status, body = post_json(f"{url}/v1/retrieve", {"query": "x" * 20_000}, token=TOKEN_A)
        assert status == 413 and "--max-request-bytes" in body["error"]["message"]
        status, body = post_json(f"{url}/v1/retrieve", {"query": QUESTION, "index": "hotpot"}, token=TOKEN_A,
                                 headers={"Origin": "https://attacker.example"})
        assert status == 403 and body["error"]["code"] == "forbidden_origin"
        status, _ = post_json(f"{url}/v1/retrieve", {"query": QUESTION, "index": "hotpot"}, token=TOKEN_A,
                              headers={"Origin": "http://localhost:3000"})
        assert status == 200

        # the OpenAPI document describes the same arguments
        import urllib.request
        req = urllib.request.Request(f"{url}/openapi.json", headers={"Authorization": f"Bearer {TOKEN_A}"})
        with urllib.request.urlopen(req) as r:
            doc = json.loads(r.read())
        body_schema = doc["paths"]["/v1/retrieve"]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body_schema["additionalProperties"] is False and body_schema["properties"]["k"]["maximum"] == 20
        assert "/v1/answer" not in doc["paths"] and "$defs" not in json.dumps(doc)


async def test_writes_only_with_allow_writes_and_write_scope(serve_indexes, tmp_path):
    target = tmp_path / "hotpot"
    shutil.copytree(serve_indexes["hotpot"], target)
    tokens = _tokens(tmp_path)
    text = "The Zorblax Accord of 2031 was signed in Quito by the lunar mining guilds."
    with http_server([str(target), str(serve_indexes["musique"]), "--token", str(tokens), "--allow-writes"],
                     token=TOKEN_A) as url:
        async with _http(url, TOKEN_B) as session:
            assert {"insert", "delete"} <= {t.name for t in (await session.list_tools()).tools}
            result = await session.call_tool("insert", {"index": "musique", "documents": [{"text": text}]})
            assert result.isError and "may not write" in result.content[0].text
        async with _http(url, TOKEN_A) as session:
            result = await session.call_tool("insert", {"index": "hotpot", "documents": [
                {"id": "zorblax", "text": text, "metadata": {"year": 2031}}]})
            assert not result.isError, result.content[0].text
            assert result.structuredContent["ids"] == ["zorblax"]
            hits = (await session.call_tool("retrieve", {"query": "Zorblax Accord", "method": "bm25", "k": 1})
                    ).structuredContent["hits"]
            assert hits[0]["document_ids"] == ["zorblax"]
            result = await session.call_tool("delete", {"index": "hotpot", "document_ids": ["no-such-doc"]})
            assert result.isError and "no-such-doc" in result.content[0].text
            result = await session.call_tool("delete", {"index": "hotpot", "document_ids": ["zorblax"]})
            assert result.structuredContent["deleted"] == 1
    assert "zorblax" not in GraphStrata.load(target).documents  # persisted


# -- a new version persisted by another process ------------------------------------------------


def _insert_in_another_process(index_dir, doc_id: str, text: str) -> None:
    code = textwrap.dedent(f"""
        from graphstrata import GraphStrata
        gs = GraphStrata.load({str(index_dir)!r})
        gs.insert([{{"id": {doc_id!r}, "text": {text!r}}}])
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_next_request_sees_a_version_another_process_persisted(serve_indexes, tmp_path):
    target = tmp_path / "hotpot"
    shutil.copytree(serve_indexes["hotpot"], target)
    text = "Quibblefrost the glacier cat was elected mayor of Tromso in 1999."
    with http_server([str(target)]) as url:
        status, before = post_json(f"{url}/v1/retrieve", {"query": "Quibblefrost glacier cat mayor", "method": "bm25", "k": 1})
        assert status == 200 and before["hits"][0]["document_ids"] != ["quibble"]
        _insert_in_another_process(target, "quibble", text)
        status, after = post_json(f"{url}/v1/retrieve", {"query": "Quibblefrost glacier cat mayor", "method": "bm25", "k": 1})
        assert status == 200
        assert after["hits"][0]["document_ids"] == ["quibble"]
        assert after["version"] != before["version"]


def test_in_flight_requests_keep_their_version(serve_indexes, tmp_path):
    from graphstrata.serve.registry import IndexRegistry

    target = tmp_path / "hotpot"
    shutil.copytree(serve_indexes["hotpot"], target)
    registry = IndexRegistry({"hotpot": target})
    old, v_old = registry.get("hotpot")
    assert registry.get("hotpot")[0] is old  # no reload while CURRENT stays
    _insert_in_another_process(target, "quibble", "Quibblefrost the glacier cat was elected mayor of Tromso.")
    new, v_new = registry.get("hotpot")
    assert v_new != v_old and new is not old
    # a request that took `old` before the switch still reads the old version, whole
    assert "quibble" not in old.documents
    assert old.retrieve("Quibblefrost glacier cat", method="bm25", k=1)[0].document_ids != ["quibble"]
    assert new.retrieve("Quibblefrost glacier cat", method="bm25", k=1)[0].document_ids == ["quibble"]


# -- settings and bounds (no server needed) ----------------------------------------------------


def test_refuses_a_non_loopback_bind_without_a_token(serve_indexes, tmp_path):
    proc = subprocess.run(serve_command(str(serve_indexes["hotpot"]), "--transport", "http", "--host", "0.0.0.0"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--host 0.0.0.0: refusing to listen beyond this machine without a token" in proc.stderr
    config = ServeConfig(indexes={"hotpot": serve_indexes["hotpot"]}, transport="http", host="0.0.0.0",
                         tokens=parse_tokens(json.dumps([{"token": TOKEN_A}]), "test"))
    config.check()  # with a token it may


def test_token_file_errors_never_echo_the_token():
    with pytest.raises(ValueError, match="at least 16 characters") as info:
        parse_tokens(json.dumps({"tokens": [{"name": "x", "token": "short-secret"}]}), "--token t.json")
    assert "short-secret" not in str(info.value)
    with pytest.raises(ValueError, match="unknown key"):
        parse_tokens(json.dumps([{"token": TOKEN_A, "reads": ["a"]}]), "env")
    table = parse_tokens(json.dumps([{"name": "h", "sha256": __import__("hashlib").sha256(TOKEN_A.encode()).hexdigest(),
                                      "read": ["a"]}]), "env")
    assert table.lookup(TOKEN_A).name == "h" and table.lookup(TOKEN_B) is None
    assert not table.lookup(TOKEN_A).can_write("a")
    config = ServeConfig(indexes={"a": "."}, tokens=parse_tokens(json.dumps([{"token": TOKEN_A, "read": ["b"]}]), "env"))
    with pytest.raises(ValueError, match=r"does not serve"):
        config.check()
    assert isinstance(ServeConfig(indexes={"a": "."}).tokens, TokenTable)


def test_tokens_from_the_environment_and_the_file_are_both_read(serve_indexes, tmp_path):
    import argparse

    from graphstrata.serve.config import add_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    tokens = _tokens(tmp_path)
    args = parser.parse_args([str(serve_indexes["hotpot"]), "--index", f"musique={serve_indexes['musique']}",
                              "--token", str(tokens), "--transport", "http", "--host", "0.0.0.0"])
    env = {"GRAPHSTRATA_TOKENS": json.dumps([{"name": "ops", "token": "ops-token-abcdefghijkl", "read": "*"}])}
    config = config_from_args(args, environ=env)
    assert [p.name for p in config.tokens.principals] == ["a", "b", "ops"]
    assert config.tokens.lookup("ops-token-abcdefghijkl").can_read("musique")
    assert config.tokens.lookup(TOKEN_B).can_read("musique") and not config.tokens.lookup(TOKEN_B).can_read("hotpot")
    with pytest.raises(ValueError, match=r"\$GRAPHSTRATA_TOKENS: not valid JSON"):
        config_from_args(args, environ={"GRAPHSTRATA_TOKENS": "ops-token-abcdefghijkl"})
    dup = parser.parse_args([str(serve_indexes["hotpot"]), "--index", f"hotpot={serve_indexes['musique']}"])
    with pytest.raises(ValueError, match="two indexes named 'hotpot'"):
        config_from_args(dup, environ={})


def test_concurrent_requests_per_token_are_bounded(serve_indexes):
    from graphstrata.serve.config import Principal
    from graphstrata.serve.registry import IndexRegistry
    from graphstrata.serve.service import GraphService, ServeError

    config = ServeConfig(indexes={"hotpot": serve_indexes["hotpot"]}, max_concurrent=2)
    service = GraphService(IndexRegistry(config.indexes), config)
    alice, bob = Principal("alice"), Principal("bob")
    with service.slot(alice), service.slot(alice):
        with pytest.raises(ServeError, match="at most 2 at a time") as info:
            service.retrieve(alice, QUESTION)
        assert info.value.status == 429
        assert service.retrieve(bob, QUESTION, k=2)["hits"]  # another token is not held up
    assert len(service.retrieve(alice, QUESTION, k=2)["hits"]) == 2  # slots come back


async def test_answer_tool_only_with_llm_returns_answer_sources_and_usage(serve_indexes, tmp_path):
    (tmp_path / "scripted_llm.py").write_text(
        "def make():\n    return lambda prompt: 'F.I.R. is a Taiwanese band [1].'\n")
    cmd = serve_command(str(serve_indexes["hotpot"]), "--llm", "scripted_llm:make")
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], cwd=str(tmp_path))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert "answer" in tools and tools["answer"].outputSchema is not None
        result = await session.call_tool("answer", {"query": QUESTION, "method": "hybrid", "k": 3})
        assert not result.isError, result.content[0].text
        out = result.structuredContent
        assert out["answer"] == "F.I.R. is a Taiwanese band [1]."
        expected = _expected(serve_indexes["hotpot"], method="hybrid", k=3, kinds=("chunk",))
        assert [h["id"] for h in out["sources"] if h["kind"] == "chunk"] == [h["id"] for h in expected]
        # [1] is the first passage of the prompt: the best chunk
        assert out["citations"] == [{"number": 1, "chunk_ids": [expected[0]["id"]],
                                     "document_ids": expected[0]["document_ids"]}]
        assert out["usage"]["total"]["calls"] + out["usage"]["total"]["cached"] >= 1
        assert out["fallbacks"] == []  # hybrid answers in one step, which read the model's answer
        assert (await session.call_tool("list_indexes", {})).structuredContent["answer"] is True
