"""Bring your own LLM, LlamaIndex side: ``LlamaIndexLLM`` (any LlamaIndex ``LLM`` behind
graphstrata's protocol), ``GraphStrataIndex.from_documents(llm=... / use_llm=True)`` and
``as_query_engine(response_mode="method")``, streamed with ``streaming=True``.

The LLM outputs are scripted (graphstrata's own record formats, keyed on each step's system
prompt), so every assertion is about wiring: what reaches the model, what comes back, what is
counted. The real small model runs in ``integration_tests/llm``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from graphstrata.llm import LLMResponse, Usage
from llama_index.core import Document, Settings
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms import CustomLLM, MockLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.graph_rag.graphstrata import (
    GraphStrataIndex,
    GraphStrataQueryEngine,
    LlamaIndexLLM,
)

D, R = "<|>", "##"
ANSWER = "Charles Babbage designed the Analytical Engine in London."
RECORDS = "\n".join(
    [
        f'("entity"{D}Charles Babbage{D}person{D}An English mathematician who designed the Analytical Engine.){R}',
        f'("entity"{D}Analytical Engine{D}event{D}A mechanical general-purpose computer.){R}',
        f'("entity"{D}Ada Lovelace{D}person{D}She wrote the first published algorithm.){R}',
        f'("entity"{D}London{D}geo{D}The city where Babbage worked.){R}',
        f'("relationship"{D}Charles Babbage{D}Analytical Engine{D}Babbage designed the engine.{D}design, invention{D}9){R}',
        f'("relationship"{D}Ada Lovelace{D}Analytical Engine{D}Ada wrote an algorithm for it.{D}algorithm{D}8){R}',
        f'("relationship"{D}Charles Babbage{D}London{D}Babbage worked in London.{D}location{D}6){R}',
        "<|COMPLETE|>",
    ]
)
REPORT = (
    '{"title": "Computing pioneers", "summary": "Babbage and Lovelace and the Analytical Engine.", '
    '"rating": 7.5, "findings": [{"summary": "The engine", "explanation": "Babbage designed it."}]}'
)


def scripted_output(prompt: str, system: str | None) -> str:
    """graphstrata-format outputs keyed on each LLM step's system prompt; the answer text
    for every other step (answer generation, merges)."""
    from graphstrata.llm.prompts import (
        archrag,
        archrag_answer,
        hirag,
        lightrag_extract,
        lightrag_query,
    )

    system = system or ""
    if system == archrag_answer.FILTER_SYSTEM:
        return '{"points": [{"description": "Charles Babbage designed the engine [Data: Entities (1)]", "score": 90}]}'
    if system == lightrag_extract.EXTRACT_SYSTEM:
        return "NO" if "YES or NO" in prompt else RECORDS
    if system == archrag.COMMUNITY_REPORT_SYSTEM:
        return REPORT
    if system == hirag.SUMMARY_ENTITY_SYSTEM:
        return f'("entity"{D}Early computing{D}concept{D}Machines and algorithms of early computing.){R}'
    if system == lightrag_query.KEYWORDS_SYSTEM:
        return '{"high_level_keywords": ["computer design"], "low_level_keywords": ["Babbage"]}'
    return ANSWER


class ScriptedChatLLM(CustomLLM):
    """A LlamaIndex chat LLM answering with :func:`scripted_output`; records every call
    (``calls``: ``(api, messages or prompt, kwargs)``) and reports OpenAI-style token counts
    in ``additional_kwargs`` when ``report_usage``."""

    is_chat: bool = True
    report_usage: bool = False
    model_label: str = "scripted-7b"

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._calls: list[tuple[str, Any, dict]] = []
        self._lock = threading.Lock()

    @property
    def calls(self) -> list[tuple[str, Any, dict]]:
        return self._calls

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=self.is_chat, model_name=self.model_label)

    def _output(self, messages: Any) -> str:
        system = next((m.content for m in messages if m.role == MessageRole.SYSTEM), None)
        user = [m.content for m in messages if m.role == MessageRole.USER][-1]
        return scripted_output(user, system)

    def _record(self, api: str, payload: Any, kwargs: dict) -> None:
        with self._lock:
            self._calls.append((api, payload, dict(kwargs)))

    def _extra(self, text: str) -> dict[str, Any]:
        return {"prompt_tokens": 11, "completion_tokens": len(text.split())} if self.report_usage else {}

    @llm_chat_callback()
    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        self._record("chat", list(messages), kwargs)
        text = self._output(messages)
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=text),
            additional_kwargs=self._extra(text),
        )

    @llm_chat_callback()
    async def achat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        self._record("achat", list(messages), kwargs)
        response = self.chat(messages, **kwargs)
        self._calls.pop()  # chat() recorded itself too
        return response

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._record("complete", prompt, kwargs)
        return CompletionResponse(text=ANSWER, additional_kwargs=self._extra(ANSWER))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


CITED = "Charles Babbage designed the Analytical Engine [1] and worked in London [2]."


class StreamingChatLLM(ScriptedChatLLM):
    """:class:`ScriptedChatLLM` answering :data:`CITED` (other steps as scripted), which
    ``stream_chat`` / ``astream_chat`` give word by word (``delta`` and the text so far)."""

    def _output(self, messages: Any) -> str:
        text = super()._output(messages)
        return CITED if text == ANSWER else text

    def _chunks(self, messages: Any) -> list[ChatResponse]:
        from graphstrata.testing import word_pieces

        out, so_far = [], ""
        for piece in word_pieces(self._output(messages)):
            so_far += piece
            out.append(ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=so_far), delta=piece))
        return out

    @llm_chat_callback()
    def stream_chat(self, messages: Any, **kwargs: Any) -> Any:
        self._record("stream_chat", list(messages), kwargs)
        yield from self._chunks(messages)

    @llm_chat_callback()
    async def astream_chat(self, messages: Any, **kwargs: Any) -> Any:
        self._record("astream_chat", list(messages), kwargs)
        chunks = self._chunks(messages)

        async def gen() -> Any:
            for chunk in chunks:
                await asyncio.sleep(0)
                yield chunk

        return gen()


DOCS = [
    Document(
        id_="babbage",
        text="Charles Babbage designed the Analytical Engine, a mechanical general-purpose "
        "computer. He worked in London for most of his life.",
        metadata={"title": "Charles Babbage"},
    ),
    Document(
        id_="lovelace",
        text="Ada Lovelace wrote the first published algorithm intended for the Analytical "
        "Engine. She collaborated with Charles Babbage.",
        metadata={"title": "Ada Lovelace"},
    ),
    Document(
        id_="london",
        text="London was home to Charles Babbage, where he built parts of the Difference "
        "Engine and showed them to visitors.",
        metadata={"title": "London"},
    ),
]


# ---------------------------------------------------------------------------- the adapter
def test_chat_model_gets_system_and_user_messages():
    llm = ScriptedChatLLM()
    adapter = LlamaIndexLLM(llm)
    out = adapter.complete("Who designed it?", system="Answer briefly.")
    assert isinstance(out, LLMResponse) and out.text == ANSWER
    ((api, messages, kwargs),) = llm.calls
    assert api == "chat" and kwargs == {}
    assert [(m.role, m.content) for m in messages] == [
        (MessageRole.SYSTEM, "Answer briefly."),
        (MessageRole.USER, "Who designed it?"),
    ]
    # no usage reported: estimated from the text, and labelled so
    assert out.usage.estimated and out.usage.prompt_tokens > 0 and out.usage.completion_tokens > 0


def test_no_system_prompt_sends_only_the_user_message():
    llm = ScriptedChatLLM()
    LlamaIndexLLM(llm).complete("Hello?")
    (_, messages, _), = llm.calls
    assert [m.role for m in messages] == [MessageRole.USER]


def test_completion_model_gets_the_system_prompt_prefixed():
    adapter = LlamaIndexLLM(MockLLM())  # echoes its prompt
    out = adapter.complete("Who designed it?", system="Answer briefly.")
    assert out.text == "Answer briefly.\n\nWho designed it?"
    assert adapter.id == "llama-index:MockLLM:unknown"


def test_usage_reported_by_the_llm_is_used_unestimated():
    adapter = LlamaIndexLLM(ScriptedChatLLM(report_usage=True))
    out = adapter.complete("Who?", system="Be brief.")
    assert out.usage == Usage(11, len(ANSWER.split()), estimated=False)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"usage": {"prompt_tokens": 5, "completion_tokens": 7}}, (5, 7)),  # OpenAI dict
        ({"usage": {"input_tokens": 3, "output_tokens": 4}}, (3, 4)),  # Anthropic
        ({"prompt_eval_count": 9, "eval_count": 2}, (9, 2)),  # Ollama
        ({"usage_metadata": {"prompt_token_count": 6, "candidates_token_count": 1}}, (6, 1)),  # Gemini
    ],
)
def test_usage_found_in_raw_responses(raw, expected):
    from llama_index.retrievers.graphstrata.llm import usage_counts

    assert usage_counts(None, raw) == expected


def test_usage_found_on_sdk_objects():
    from types import SimpleNamespace

    from llama_index.retrievers.graphstrata.llm import usage_counts

    raw = SimpleNamespace(usage=SimpleNamespace(prompt_tokens=12, completion_tokens=3))
    assert usage_counts({}, raw) == (12, 3)
    assert usage_counts({}, {"usage": {"prompt_tokens": True, "completion_tokens": 1}}) is None


def test_acomplete_uses_the_async_api():
    llm = ScriptedChatLLM()
    out = asyncio.run(LlamaIndexLLM(llm).acomplete("Who?", system="Be brief."))
    assert out.text == ANSWER
    assert [api for api, _, _ in llm.calls] == ["achat"]


def test_acomplete_falls_back_to_a_thread_without_async_support():
    class NoAsync(ScriptedChatLLM):
        @llm_chat_callback()
        async def achat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            raise NotImplementedError("no async here")

    llm = NoAsync()
    out = asyncio.run(LlamaIndexLLM(llm).acomplete("Who?"))
    assert out.text == ANSWER and [api for api, _, _ in llm.calls] == ["chat"]


def test_json_mode_is_sent_only_where_supported():
    plain = ScriptedChatLLM()
    LlamaIndexLLM(plain).complete("x", json_mode=True)
    assert plain.calls[-1][2] == {}  # unknown model: nothing sent, the prompt asks for JSON

    class OpenAILike(ScriptedChatLLM):
        pass

    OpenAILike.__module__ = "llama_index.llms.openai.base"
    openai = OpenAILike()
    adapter = LlamaIndexLLM(openai)
    adapter.complete("x", json_mode=True)
    adapter.complete("x", json_mode=False)
    assert openai.calls[0][2] == {"response_format": {"type": "json_object"}}
    assert openai.calls[1][2] == {}

    class WithJsonField(ScriptedChatLLM):
        json_mode: bool = False

    ollama_like = WithJsonField()
    adapter = LlamaIndexLLM(ollama_like)
    assert adapter._target(True)[0].json_mode is True and ollama_like.json_mode is False

    custom = ScriptedChatLLM()
    LlamaIndexLLM(custom, json_mode_kwargs={"format": "json"}).complete("x", json_mode=True)
    assert custom.calls[-1][2] == {"format": "json"}


def test_id_names_class_and_model():
    assert LlamaIndexLLM(ScriptedChatLLM()).id == "llama-index:ScriptedChatLLM:scripted-7b"
    assert LlamaIndexLLM(ScriptedChatLLM(), id="mine").id == "mine"
    with pytest.raises(TypeError, match="LlamaIndex LLM"):
        LlamaIndexLLM(object())


def test_core_refuses_a_bare_llama_index_llm_naming_the_adapter():
    from graphstrata.llm import as_llm

    with pytest.raises(TypeError, match="LlamaIndexLLM"):
        as_llm(MockLLM())
    assert as_llm(LlamaIndexLLM(MockLLM())).id == "llama-index:MockLLM:unknown"


# ---------------------------------------------------------------------------- build wiring
def test_from_documents_without_llm_never_reads_settings_llm(hash_embedding):
    Settings._llm = None  # reading Settings.llm now would resolve LlamaIndex's hosted default
    index = GraphStrataIndex.from_documents(DOCS, embed_model=hash_embedding(model_name="h"))
    assert Settings._llm is None
    assert index.engine.llm is None and not index.engine.build_usage


def test_from_documents_with_llm_runs_llm_extraction(hash_embedding):
    llm = ScriptedChatLLM(report_usage=True)
    index = GraphStrataIndex.from_documents(DOCS, llm=llm, embed_model=hash_embedding(model_name="h"))
    engine = index.engine
    assert engine.llm.id == "llama-index:ScriptedChatLLM:scripted-7b"
    types = {e.name: e.type for e in engine.kg.entities.values()}
    assert types.get("Charles Babbage") == "person" and types.get("London") == "geo"
    usage = engine.build_usage
    assert usage["total"]["calls"] > 0 and usage["total"]["estimated"] is False
    assert any(stage.startswith("extract") for stage in usage["stages"])
    # every extraction call reached the chat API with graphstrata's system prompt
    from graphstrata.llm.prompts.lightrag_extract import EXTRACT_SYSTEM

    systems = [m[0].content for api, m, _ in llm.calls if api == "chat" and m[0].role == MessageRole.SYSTEM]
    assert EXTRACT_SYSTEM in systems


def test_use_llm_builds_with_settings_llm(hash_embedding):
    llm = ScriptedChatLLM()
    Settings.llm = llm
    index = GraphStrataIndex.from_documents(DOCS, use_llm=True, embed_model=hash_embedding(model_name="h"))
    assert llm.calls and index.engine.llm is not None
    assert any(e.type for e in index.engine.kg.entities.values())


def test_use_llm_must_be_a_bool(hash_embedding):
    with pytest.raises(TypeError, match="use_llm"):
        GraphStrataIndex.from_documents(DOCS, use_llm="yes", embed_model=hash_embedding(model_name="h"))


# ---------------------------------------------------------------------------- query engine
@pytest.fixture(scope="module")
def llm_index(hash_embedding):
    llm = ScriptedChatLLM()
    return GraphStrataIndex.from_documents(DOCS, llm=llm, embed_model=hash_embedding(model_name="h")), llm


@pytest.mark.parametrize("method", ["archrag", "hirag", "lightrag", "agrag", "hybrid"])
def test_method_query_engine_answers_with_the_method(llm_index, method):
    index, _ = llm_index
    engine = index.as_query_engine(response_mode="method", method=method, similarity_top_k=2)
    assert isinstance(engine, GraphStrataQueryEngine) and engine.method == method
    response = engine.query("Who designed the Analytical Engine?")
    assert response.response == ANSWER
    assert response.metadata["method"] == method
    usage = response.metadata["usage"]
    assert usage["total"]["calls"] + usage["total"]["cached"] > 0
    # the scripted chat model has no reply AGRAG's fact filter can read: that step says so
    unread = {"agrag": ["fact_filter: offline fallback, unreadable answer"]}
    assert response.metadata["fallbacks"] == unread.get(method, [])
    assert response.source_nodes
    assert all(n.node.metadata["method"] == method  # context nodes name their method
               for n in response.source_nodes if n.node.metadata["kind"] != "chunk")
    assert any(n.node.metadata["kind"] == "chunk" for n in response.source_nodes)


def test_method_query_engine_async(llm_index):
    index, _ = llm_index
    engine = index.as_query_engine(response_mode="method", method="archrag")
    response = asyncio.run(engine.aquery("Who designed the Analytical Engine?"))
    assert response.response == ANSWER and response.source_nodes


def test_method_query_engine_with_another_llm(llm_index):
    index, attached = llm_index
    other = ScriptedChatLLM(model_label="other-model")
    engine = index.as_query_engine(llm=other, response_mode="method", method="hybrid")
    assert engine.query("Who designed the Analytical Engine?").response == ANSWER
    assert other.calls  # the given LLM answered, not the attached one


def test_method_query_engine_falls_back_to_settings_llm_for_an_offline_index(hash_embedding):
    index = GraphStrataIndex.from_documents(DOCS, embed_model=hash_embedding(model_name="h"))
    llm = ScriptedChatLLM()
    Settings.llm = llm
    response = index.as_query_engine(response_mode="method", method="dense").query("Who designed it?")
    assert response.response == ANSWER and llm.calls


def test_method_query_engine_rejects_synthesizer_options(llm_index):
    index, _ = llm_index
    with pytest.raises(ValueError, match="node_postprocessors"):
        index.as_query_engine(response_mode="method", node_postprocessors=[])
    with pytest.raises(ValueError, match="unknown method"):
        index.as_query_engine(response_mode="method", method="nope")


def test_other_response_modes_are_unchanged(llm_index):
    from llama_index.core.query_engine import RetrieverQueryEngine

    index, _ = llm_index
    engine = index.as_query_engine(response_mode="compact", method="hybrid")
    assert isinstance(engine, RetrieverQueryEngine)
    assert isinstance(index.as_query_engine(), RetrieverQueryEngine)


# ---------------------------------------------------------------------------- KG extractor
def test_kg_extractor_with_llm_writes_typed_entity_nodes():
    from llama_index.core.graph_stores.types import KG_NODES_KEY, KG_RELATIONS_KEY
    from llama_index.core.schema import TextNode
    from llama_index.extractors.graphstrata import GraphStrataExtractor

    llm = ScriptedChatLLM()
    extractor = GraphStrataExtractor(llm=llm, gleaning=0)
    nodes = [TextNode(id_=d.doc_id, text=d.text, metadata=dict(d.metadata)) for d in DOCS[:2]]
    out = extractor(nodes)
    assert llm.calls and extractor.last_usage["total"]["calls"] == 2  # one per node, no gleaning
    entities = {e.name: e for e in out[0].metadata[KG_NODES_KEY]}
    assert entities["Charles Babbage"].label == "person" and entities["London"].label == "geo"
    assert "designed" in entities["Charles Babbage"].properties["description"]
    relations = out[0].metadata[KG_RELATIONS_KEY]
    design = next(r for r in relations if r.label == "design")
    assert design.properties["keywords"] == "design, invention" and design.properties["weight"] > 0
    # offline stays as it was: no LLM, the co-occurrence label
    offline = GraphStrataExtractor()(
        [TextNode(id_=d.doc_id, text=d.text, metadata=dict(d.metadata)) for d in DOCS]
    )
    assert all(r.label == "CO_OCCURS_WITH" for n in offline for r in n.metadata[KG_RELATIONS_KEY])


def test_kg_extractor_async_with_llm():
    from llama_index.core.schema import TextNode
    from llama_index.extractors.graphstrata import GraphStrataExtractor

    extractor = GraphStrataExtractor(llm=ScriptedChatLLM(), gleaning=0)
    out = asyncio.run(extractor.acall([TextNode(id_="b", text=DOCS[0].text)]))
    assert out[0].metadata["nodes"]


def test_cache_key_follows_the_llama_index_llm_max_tokens():
    """``LlamaIndexLLM`` reports the model's token limit, so one shared response cache never
    hands a 128-token answer to the same model limited to 64 (issue 29)."""
    from graphstrata.llm import LLMClient, ResponseCache

    cache = ResponseCache()
    c128 = LLMClient(LlamaIndexLLM(MockLLM(max_tokens=128), id="mock"), cache)
    c64 = LLMClient(LlamaIndexLLM(MockLLM(max_tokens=64), id="mock"), cache)
    assert c128.llm.generation_settings["max_tokens"] == 128
    c128.complete("hello there")
    c64.complete("hello there")
    LLMClient(LlamaIndexLLM(MockLLM(max_tokens=64), id="mock"), cache).complete("hello there")
    assert [s.calls for s in (c128.ledger.stages["llm"], c64.ledger.stages["llm"])] == [1, 1]
    assert len(cache) == 2


def test_the_context_window_comes_from_the_llama_index_metadata():
    """The window is ``LLM.metadata.context_window`` (or the adapter's setting), and the client
    refuses a prompt over it without calling the model (issue 29)."""
    from graphstrata.llm import LLMClient, PromptTooLongError

    class Small(MockLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(context_window=700, num_output=200)

    assert LlamaIndexLLM(Small()).context_window == 700
    assert LlamaIndexLLM(Small(), context_window=4096).context_window == 4096
    client = LLMClient(LlamaIndexLLM(Small(), id="small"))
    assert client.answer_reserve() == 200
    with pytest.raises(PromptTooLongError, match="700 tokens"):
        client.complete("word " * 600)
    assert client.ledger.stages == {}  # nothing was sent


def test_query_engine_passes_the_core_fallbacks_through(llm_index, monkeypatch):
    """The LLM steps that fell back (graphstrata's ``Answer.fallbacks``) reach ``Response.metadata``."""
    from graphstrata.testing import answer_with_fallbacks

    index, _ = llm_index
    engine = index.as_query_engine(response_mode="method", method="lightrag")
    core = engine._engine
    monkeypatch.setattr(core, "answer", answer_with_fallbacks(core.answer, ["keywords: offline fallback, unreadable answer"]))
    response = engine.query("Who designed the Analytical Engine?")
    assert response.metadata["fallbacks"] == ["keywords: offline fallback, unreadable answer"]


# ---------------------------------------------------------------------------- streaming (issue 29)
def test_adapter_streams_the_chat_deltas_then_the_usage():
    from graphstrata.llm import Usage as CoreUsage

    llm = StreamingChatLLM()
    adapter = LlamaIndexLLM(llm)
    items = list(adapter.stream("Who designed it?", system="Answer briefly."))
    assert items[:-1] == ["Charles ", "Babbage ", "designed ", "the ", "Analytical ", "Engine ", "[1] ", "and ",
                          "worked ", "in ", "London ", "[2]."]
    assert isinstance(items[-1], CoreUsage) and items[-1] == adapter.complete("Who designed it?", system="Answer briefly.").usage
    assert [api for api, _, _ in llm.calls] == ["stream_chat", "chat"]


def test_adapter_without_streaming_gives_one_piece():
    llm = ScriptedChatLLM()  # its stream_complete raises NotImplementedError
    items = list(LlamaIndexLLM(llm).stream("Who?"))
    assert items[0] == ANSWER and len(items) == 2 and [api for api, _, _ in llm.calls] == ["chat"]


def test_adapter_astream_awaits_the_async_stream():
    llm = StreamingChatLLM()

    async def main() -> list[Any]:
        return [item async for item in LlamaIndexLLM(llm).astream("Who?")]

    items = asyncio.run(main())
    assert "".join(i for i in items if isinstance(i, str)) == CITED and len(items) > 3
    assert [api for api, _, _ in llm.calls] == ["astream_chat"]


@pytest.mark.parametrize("method", ["hybrid", "lightrag"])
def test_streaming_query_engine_yields_the_answer_in_pieces(llm_index, method):
    from llama_index.core.base.response.schema import StreamingResponse

    index, _ = llm_index
    plain = index.as_query_engine(llm=StreamingChatLLM(model_label=f"plain-{method}"), response_mode="method",
                                  method=method, similarity_top_k=2)
    expected = plain.query("Who designed the Analytical Engine?")
    engine = index.as_query_engine(llm=StreamingChatLLM(model_label=f"streamed-{method}"), response_mode="method",
                                   method=method, similarity_top_k=2, streaming=True)
    assert engine.streaming
    response = engine.query("Who designed the Analytical Engine?")
    assert isinstance(response, StreamingResponse)
    assert [n.node.node_id for n in response.source_nodes] == [n.node.node_id for n in expected.source_nodes]
    assert response.metadata == {"method": method}  # the rest comes with the end of the stream
    pieces = list(response.response_gen)
    assert len(pieces) > 3 and "".join(pieces) == expected.response == CITED
    assert response.metadata == expected.metadata
    cited = [c["number"] for c in expected.metadata["citations"]]
    assert cited == [1, 2]
    chunk_nodes = [n.node.node_id for n in expected.source_nodes if n.node.metadata["kind"] == "chunk"]
    assert expected.metadata["citations"][1]["chunk_ids"] == [chunk_nodes[1]]  # [2]: the second passage


def test_streaming_query_engine_async(llm_index):
    from llama_index.core.base.response.schema import AsyncStreamingResponse

    index, _ = llm_index
    llm = StreamingChatLLM(model_label="streamed-async")
    engine = index.as_query_engine(llm=llm, response_mode="method", method="hybrid", similarity_top_k=2,
                                   streaming=True)

    async def main() -> tuple[Any, list[str]]:
        response = await engine.aquery("Who designed the Analytical Engine?")
        return response, [p async for p in response.async_response_gen()]

    response, pieces = asyncio.run(main())
    assert isinstance(response, AsyncStreamingResponse)
    assert len(pieces) > 3 and "".join(pieces) == CITED and response.source_nodes
    assert [c["number"] for c in response.metadata["citations"]] == [1, 2]
    assert "astream_chat" in [api for api, _, _ in llm.calls]


def test_the_method_response_metadata_has_the_citations(llm_index):
    index, _ = llm_index
    response = index.as_query_engine(response_mode="method", method="dense").query("Who designed it?")
    assert response.metadata["citations"] == []  # the scripted answer cites nothing
    with pytest.raises(ValueError, match="streaming"):
        GraphStrataQueryEngine(index.engine, streaming="yes")


# ---------------------------------------------------------------------------- records and cache
class ToyChatLLM(ScriptedChatLLM):
    """:class:`ScriptedChatLLM` answering every step with graphstrata's stand-in model
    (:func:`graphstrata.testing.answer_every_prompt`: records of each chunk's own capitalised
    words, so every chunk's answer is grounded in it)."""

    model_label: str = "toy"

    def _output(self, messages: Any) -> str:
        from graphstrata.testing import answer_every_prompt

        system = next((m.content for m in messages if m.role == MessageRole.SYSTEM), None)
        user = [m.content for m in messages if m.role == MessageRole.USER][-1]
        return answer_every_prompt(user, system)


def _sample_documents(n: int) -> list[Document]:
    import json
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "cookbook" / "sample_corpus" / "wiki_sample.jsonl"
    with open(sample, encoding="utf-8") as f:
        rows = [json.loads(line) for _, line in zip(range(n), f, strict=False)]
    return [Document(id_=r["id"], text=r["text"], metadata={"title": r.get("title", r["id"])}) for r in rows]


def test_an_llm_index_loaded_without_its_cache_pays_only_for_an_inserted_documents_chunks(hash_embedding, tmp_path):
    """A LlamaIndex-built LLM index (issue 29's must-show) persists its per-chunk LLM answers
    (and its response cache, beside the engine); loaded with the cache deleted, inserting a
    document costs extraction calls for that document's chunks only."""
    from graphstrata.llm import CACHE_FILE
    from graphstrata.llm.prompts.lightrag_extract import (
        CONTINUE_QUESTION,
        EXTRACT_SYSTEM,
        GLEANING_INSTRUCTION,
    )

    config = {"min_communities": 2, "max_community_size": 6, "chunk_size": 120, "chunk_overlap": 16}
    docs = _sample_documents(9)
    index = GraphStrataIndex.from_documents(
        docs[:8], llm=ToyChatLLM(), embed_model=hash_embedding(model_name="h"), config=config
    )
    index.storage_context.persist(persist_dir=str(tmp_path))
    engine_dir = tmp_path / "graphstrata"
    assert (engine_dir / CACHE_FILE).is_file()  # the in-memory cache went with the index
    for p in engine_dir.glob(CACHE_FILE + "*"):
        p.unlink()

    llm = ToyChatLLM()
    loaded = GraphStrataIndex.load(tmp_path, embed_model=hash_embedding(model_name="h"), llm=llm)
    loaded.insert(docs[8])
    engine = loaded.engine
    new_chunks = [c for c in engine.chunks if c.document_id == docs[8].id_]
    extraction = [
        m[-1].content for api, m, _ in llm.calls
        if api in ("chat", "achat") and m[0].role == MessageRole.SYSTEM and m[0].content == EXTRACT_SYSTEM
    ]
    first = [p for p in extraction if not p.rstrip().endswith((CONTINUE_QUESTION, GLEANING_INSTRUCTION))]
    assert new_chunks and len(first) == len(new_chunks)
    assert all(any(c.text in p for p in first) for c in new_chunks)
    stages = engine.state.drift["last_update_usage"]["stages"]
    assert stages["extract"]["calls"] == len(new_chunks)
    assert stages["extract:gleaning"]["calls"] == len(new_chunks)  # one gleaning pass each
    assert "extract:summaries" not in stages
    assert set(engine.state.llm_answers.records) == set(engine.state.chunk_row)
    # the report and HiRAG stages kept their answers too: unchanged prompts were not asked
    assert engine.state.drift["last_update_usage"]["total"].get("kept", 0) > 0
    kept = engine.state.llm_answers
    assert set(kept.owners) == {c.id for layer in engine.state.communities for c in layer}
