"""The LLM runtime: protocol adapters, response cache, retries, bounded concurrency, ledgers,
forgiving JSON parsing (graphstrata.llm)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from graphstrata.llm import (
    CallableLLM,
    LLMClient,
    LLMError,
    LLMRequest,
    LLMResponse,
    ResponseCache,
    TransientLLMError,
    Usage,
    as_llm,
    estimate_tokens,
    is_transient,
    usage_scope,
)
from graphstrata.llm.parsing import as_float, as_text, extract_json
from graphstrata.testing import ScriptedLLM, StreamingScriptedLLM, word_pieces


def _fast(client: LLMClient) -> LLMClient:
    client._wait = lambda retry_state: 0  # no backoff sleeps in tests
    return client


# -- adapters ------------------------------------------------------------------------------------


def test_callable_llm_prepends_the_system_prompt_when_the_function_takes_none():
    seen = []
    llm = CallableLLM(lambda p: seen.append(p) or "ok")
    out = llm.complete("question", system="be brief")
    assert seen == ["be brief\n\nquestion"]
    assert out.text == "ok" and out.usage.estimated
    assert out.usage.prompt_tokens == estimate_tokens("be brief\n\nquestion")


def test_callable_llm_passes_system_and_json_mode_to_a_function_that_takes_them():
    seen = []

    def fn(prompt, system=None, json_mode=False):
        seen.append((prompt, system, json_mode))
        return LLMResponse("x", Usage(11, 3, False))

    out = CallableLLM(fn).complete("p", system="s", json_mode=True)
    assert seen == [("p", "s", True)]
    assert out.usage == Usage(11, 3, False)


def test_async_callable_works_from_sync_and_async_code():
    async def fn(prompt):
        await asyncio.sleep(0)
        return prompt[::-1]

    llm = CallableLLM(fn)
    assert llm.complete("abc").text == "cba"
    assert asyncio.run(llm.acomplete("xyz")).text == "zyx"


def test_callable_returning_a_non_string_is_a_clear_error_through_the_client():
    client = LLMClient(lambda p: 42)
    with pytest.raises(LLMError, match="returned int"):
        client.complete("p", stage="extract")


def test_as_llm_refuses_framework_objects_naming_the_adapter():
    FakeLlama = type("OpenAI", (), {"__module__": "llama_index.llms.openai"})
    FakeChat = type("ChatOpenAI", (), {"__module__": "langchain_openai.chat_models"})
    with pytest.raises(TypeError, match="LlamaIndexLLM"):
        as_llm(FakeLlama())
    with pytest.raises(TypeError, match="ChatModelLLM"):
        as_llm(FakeChat())
    with pytest.raises(TypeError, match="callable"):
        as_llm(3)
    UserLlama = type("MyLLM", (FakeLlama,), {"__module__": "my_app.models"})  # a user's subclass
    with pytest.raises(TypeError, match="LlamaIndexLLM"):
        as_llm(UserLlama())
    scripted = ScriptedLLM()
    assert as_llm(scripted) is scripted


# -- cache ---------------------------------------------------------------------------------------


def test_cache_key_separates_model_system_prompt_and_json_mode():
    base = LLMRequest("p", "s", False)
    keys = {
        base.key("m"),
        base.key("m2"),
        LLMRequest("p", None, False).key("m"),
        LLMRequest("p", "s", True).key("m"),
        LLMRequest("p2", "s", False).key("m"),
        # the separator cannot be forged by moving text between fields
        LLMRequest("s\x00p", None, False).key("m"),
    }
    assert len(keys) == 6
    assert base.key("m") == LLMRequest("p", "s", False).key("m")


def test_cached_call_costs_nothing_and_is_counted_as_cached(tmp_path):
    llm = ScriptedLLM([("", "answer")], usage=True)
    client = LLMClient(llm, cache=ResponseCache(tmp_path / "c.sqlite"))
    first = client.complete("hello world", stage="s")
    again = client.complete("hello world", stage="s")
    assert first == again and len(llm.calls) == 1
    s = client.ledger.stages["s"]
    assert (s.calls, s.cached) == (1, 1)
    assert s.prompt_tokens == 2 and not s.estimated


def test_file_cache_survives_a_new_process_view_of_the_file(tmp_path):
    path = tmp_path / "sub" / "cache.sqlite"
    LLMClient(ScriptedLLM([("", "one")]), cache=ResponseCache(path)).complete("q")
    llm = ScriptedLLM([("", "two")])
    out = LLMClient(llm, cache=ResponseCache(path)).complete("q")
    assert out.text == "one" and llm.calls == []


def test_a_corrupt_cache_file_is_a_clear_error(tmp_path):
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ValueError, match="LLM response cache"):
        ResponseCache(path)


# -- retries ---------------------------------------------------------------------------------------


def test_transient_errors_are_retried_then_succeed():
    llm = ScriptedLLM([("", "fine")], fail_first=2)
    client = _fast(LLMClient(llm, attempts=3))
    assert client.complete("p").text == "fine"
    assert len(llm.calls) == 3
    assert client.ledger.stages["llm"].calls == 1  # only the call that answered is counted


def test_retries_give_up_after_the_attempts_naming_the_stage():
    llm = ScriptedLLM([("", "never")], fail_first=10)
    client = _fast(LLMClient(llm, attempts=2))
    with pytest.raises(LLMError, match="stage 'extract'.*TransientLLMError"):
        client.complete("p", stage="extract")
    assert len(llm.calls) == 2


def test_a_permanent_error_is_not_retried():
    calls = []

    def fn(prompt):
        calls.append(prompt)
        raise KeyError("bad request")

    with pytest.raises(LLMError, match="KeyError"):
        _fast(LLMClient(fn, attempts=5)).complete("p")
    assert len(calls) == 1


def test_is_transient_recognises_sdk_style_errors():
    RateLimitError = type("RateLimitError", (Exception,), {})
    http = Exception("server")
    http.status_code = 503
    bad = Exception("bad")
    bad.status_code = 400
    assert is_transient(RateLimitError())
    assert is_transient(http) and is_transient(TimeoutError()) and is_transient(TransientLLMError())
    assert not is_transient(bad) and not is_transient(ValueError())


# -- concurrency and ledgers -------------------------------------------------------------------------


def test_map_keeps_input_order_and_bounds_calls_in_flight():
    active, peak = [0], [0]
    lock = threading.Lock()

    def fn(prompt):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.02)
        with lock:
            active[0] -= 1
        return prompt.upper()

    client = LLMClient(fn, concurrency=3)
    out = client.map([LLMRequest(f"p{i}") for i in range(12)], "stage")
    assert [r.text for r in out] == [f"P{i}" for i in range(12)]
    assert peak[0] == 3


def test_map_runs_every_request_before_raising_so_a_rerun_pays_only_for_failures():
    def fn(prompt):
        if prompt == "bad":
            raise KeyError("no")
        return "ok:" + prompt

    cache = ResponseCache()
    client = LLMClient(fn, cache=cache, concurrency=2)
    with pytest.raises(LLMError):
        client.map([LLMRequest(p) for p in ("a", "bad", "c", "d")], "s")
    assert len(cache) == 3  # a, c, d were answered and cached


def test_usage_scope_counts_only_calls_made_inside_it_including_map_workers():
    client = LLMClient(ScriptedLLM([("", "r")]), concurrency=4)
    client.complete("before")
    with usage_scope() as ledger:
        client.map([LLMRequest(f"q{i}") for i in range(5)], "query:x")
        client.complete("before")  # cached: counted as cached in the scope
    assert ledger.stages["query:x"].calls == 5
    assert ledger.stages["llm"].cached == 1 and ledger.stages["llm"].calls == 0
    assert client.ledger.total().calls == 6
    assert ledger.to_dict()["total"]["calls"] == 5


def test_skip_counts_land_in_client_ledger_and_open_scopes():
    client = LLMClient(ScriptedLLM())
    with usage_scope() as ledger:
        client.skip("extract", 3)
    assert client.ledger.stages["extract"].skipped == 3
    assert ledger.stages["extract"].skipped == 3


def test_bad_client_settings_are_refused():
    with pytest.raises(ValueError, match="concurrency"):
        LLMClient(ScriptedLLM(), concurrency=0)
    with pytest.raises(ValueError, match="attempts"):
        LLMClient(ScriptedLLM(), attempts=True)


# -- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure! Here it is:\n```json\n{"a": [1, 2,],}\n```\nHope it helps.', {"a": [1, 2]}),
        ("{'a': 'b'}", {"a": "b"}),
        ('noise { not json } then {"ok": true}', {"ok": True}),
        ('["x", "y"]', ["x", "y"]),
        ('{"text": "a } inside a string"}', {"text": "a } inside a string"}),
    ],
)
def test_extract_json_repairs_what_small_models_emit(text, expected):
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "no json here", '{"a": 1', "{{{{", None])
def test_extract_json_returns_none_on_garbage(text):
    assert extract_json(text) is None


def test_extract_json_want_restricts_the_type():
    assert extract_json('[1] {"a": 2}', want=dict) == {"a": 2}


def test_field_coercion():
    assert as_float("8/10") == 8.0 and as_float("score: 6.5") == 6.5 and as_float(True, 1.0) == 1.0
    assert as_float("none", None) is None
    assert as_text([" a ", "b", None]) == "a, b" and as_text(None) == ""


def test_cache_distinguishes_max_token_settings():
    """An answer generated under a 128-token limit is not reused by a 64-token model (same id,
    same prompt), while the same settings share one entry (issue 29)."""
    calls: list[str] = []
    cache = ResponseCache()
    long = LLMClient(CallableLLM(lambda p: calls.append("128") or "a long answer", id="m", settings={"max_tokens": 128}), cache)
    short = LLMClient(CallableLLM(lambda p: calls.append("64") or "short", id="m", settings={"max_tokens": 64}), cache)
    again = LLMClient(CallableLLM(lambda p: calls.append("x") or "other", id="m", settings={"max_tokens": 128}), cache)
    assert long.complete("q").text == "a long answer"
    assert short.complete("q").text == "short"
    assert again.complete("q").text == "a long answer"
    assert calls == ["128", "64"]
    # temperature is a setting too; no settings keep the pre-settings key
    req = LLMRequest("q", "s", False)
    assert req.key("m", {"temperature": 0.0}) != req.key("m", {"temperature": 0.7})
    assert req.key("m", {}) == req.key("m", None) == req.key("m")


# -- the client's stream ---------------------------------------------------------------------------


def test_a_transient_error_before_the_first_piece_is_retried():
    llm = StreamingScriptedLLM(default="one two three", fail_first=1)
    client = _fast(LLMClient(llm, attempts=2))
    assert list(client.stream_request(LLMRequest("q"), "answer")) == ["one ", "two ", "three"]
    assert len(llm.calls) == 2 and client.ledger.stages["answer"].calls == 1


class StreamOnly:
    """An LLM whose ``complete`` must not be used (the tests give it a ``stream``)."""

    id = "stream-only"

    def complete(self, prompt, *, system=None, json_mode=False):
        raise AssertionError("not used")

    async def acomplete(self, prompt, *, system=None, json_mode=False):
        raise AssertionError("not used")


def test_an_error_after_a_piece_ends_the_stream_and_counts_the_call():
    class Breaks(StreamOnly):
        def stream(self, prompt, *, system=None, json_mode=False):
            yield "partial "
            raise TransientLLMError("connection dropped")

    client = LLMClient(Breaks())
    pieces = client.stream_request(LLMRequest("q"), "answer")
    assert next(pieces) == "partial "
    with pytest.raises(LLMError, match="connection dropped"):
        next(pieces)  # not retried: the piece was already given
    assert client.ledger.stages["answer"].calls == 1 and len(client.cache) == 0


def test_a_stream_closed_early_is_counted_and_not_cached():
    client = LLMClient(StreamingScriptedLLM(default="one two three"))
    pieces = client.stream_request(LLMRequest("q"), "answer")
    assert next(pieces) == "one "
    pieces.close()
    assert client.ledger.stages["answer"].calls == 1 and len(client.cache) == 0
    assert list(client.stream_request(LLMRequest("q"), "answer")) == ["one ", "two ", "three"]
    assert len(client.cache) == 1


def test_the_stream_reports_the_llms_usage_and_rejects_other_items():
    class Reports(StreamOnly):
        def stream(self, prompt, *, system=None, json_mode=False):
            yield from ("a", "b")
            yield Usage(7, 2, estimated=False)
            yield 42

    client = LLMClient(Reports())
    with pytest.raises(LLMError, match="int"):
        list(client.stream_request(LLMRequest("q"), "answer"))

    class Good(Reports):
        def stream(self, prompt, *, system=None, json_mode=False):
            yield from ("a", "b")
            yield Usage(7, 2, estimated=False)

    client = LLMClient(Good())
    assert "".join(client.stream_request(LLMRequest("q"), "answer")) == "ab"
    stage = client.ledger.stages["answer"]
    assert (stage.prompt_tokens, stage.completion_tokens, stage.estimated) == (7, 2, False)


async def test_astream_request_reads_a_blocking_stream_in_a_worker_thread_or_awaits_astream():
    for native in (False, True):
        llm = StreamingScriptedLLM(default="one two three", native_async=native)
        client = LLMClient(llm)
        pieces = [p async for p in client.astream_request(LLMRequest("q"), "answer")]
        assert pieces == ["one ", "two ", "three"] and client.ledger.stages["answer"].calls == 1
    plain = LLMClient(ScriptedLLM(default="one two three"))  # cannot stream: one piece
    assert [p async for p in plain.astream_request(LLMRequest("q"), "answer")] == ["one two three"]


def test_a_client_without_a_streaming_llm_gives_one_piece_and_counts_it_once():
    client = LLMClient(ScriptedLLM(default="one two three"))
    assert list(client.stream_request(LLMRequest("q"), "answer")) == ["one two three"]
    assert client.ledger.stages["answer"].calls == 1
    assert list(client.stream_request(LLMRequest("q"), "answer")) == ["one two three"]  # from the cache
    assert client.ledger.stages["answer"].cached == 1


def test_word_pieces_join_to_the_text():
    text = "  Hello  world\n[1]. "
    assert word_pieces(text) == ["  ", "Hello  ", "world\n", "[1]. "] and "".join(word_pieces(text)) == text
