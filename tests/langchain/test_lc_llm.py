"""Bring your own LLM, LangChain side: ``ChatModelLLM`` (any chat model behind graphstrata's
protocol), ``GraphStrataRetriever.from_documents(llm=...)`` / ``(index_dir=..., llm=...)``,
the answer Runnable (``GraphStrataAnswerer`` / ``retriever.as_answer_chain()``, streamed with
``.stream()`` / ``.astream()``) and ``GraphStrataTransformer(llm=...)``.

Outputs are scripted in graphstrata's record formats, keyed on each step's system prompt, so
the assertions are about wiring: what reaches the model, what comes back, what is counted.
The real small model runs in ``integration_tests/llm``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from graphstrata.llm import LLMResponse
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_graphstrata import (
    ChatModelLLM,
    GraphStrataAnswerer,
    GraphStrataRetriever,
    GraphStrataTransformer,
)
from pydantic import PrivateAttr

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


def scripted_output(prompt: str, system: str | None) -> str:
    """graphstrata-format outputs keyed on each LLM step's system prompt; the answer text
    for every other step."""
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
        return (
            '{"title": "Computing pioneers", "summary": "Babbage, Lovelace and the engine.", "rating": 7.5, '
            '"findings": [{"summary": "The engine", "explanation": "Babbage designed it."}]}'
        )
    if system == hirag.SUMMARY_ENTITY_SYSTEM:
        return f'("entity"{D}Early computing{D}concept{D}Machines and algorithms of early computing.){R}'
    if system == lightrag_query.KEYWORDS_SYSTEM:
        return '{"high_level_keywords": ["computer design"], "low_level_keywords": ["Babbage"]}'
    return ANSWER


class ScriptedChatModel(BaseChatModel):
    """A chat model answering with :func:`scripted_output`; records every call as
    ``(api, messages, kwargs)``; reports ``usage_metadata`` when ``report_usage``."""

    report_usage: bool = False
    model_name: str = "scripted-chat"
    _calls: list = PrivateAttr(default_factory=list)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    @property
    def calls(self) -> list[tuple[str, list[BaseMessage], dict]]:
        return self._calls

    def _output(self, messages: list[BaseMessage]) -> str:
        system = next((m.content for m in messages if isinstance(m, SystemMessage)), None)
        user = [m.content for m in messages if isinstance(m, HumanMessage)][-1]
        return scripted_output(user, system)

    def _result(self, messages: list[BaseMessage]) -> ChatResult:
        text = self._output(messages)
        usage = None
        if self.report_usage:
            usage = {"input_tokens": 21, "output_tokens": len(text.split()), "total_tokens": 21 + len(text.split())}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text, usage_metadata=usage))])

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        with self._lock:
            self._calls.append(("generate", list(messages), dict(kwargs)))
        return self._result(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        with self._lock:
            self._calls.append(("agenerate", list(messages), dict(kwargs)))
        return self._result(messages)


CITED = "Charles Babbage designed the Analytical Engine [1] and worked in London [2]."


class StreamingChatModel(ScriptedChatModel):
    """:class:`ScriptedChatModel` answering :data:`CITED` (other steps as scripted), which
    ``_stream`` gives word by word, the last chunk with ``usage_metadata`` when
    ``report_usage``."""

    def _output(self, messages: list[BaseMessage]) -> str:
        text = super()._output(messages)
        return CITED if text == ANSWER else text

    def _stream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        from graphstrata.testing import word_pieces
        from langchain_core.messages import AIMessageChunk
        from langchain_core.outputs import ChatGenerationChunk

        with self._lock:
            self._calls.append(("stream", list(messages), dict(kwargs)))
        text = self._output(messages)
        for piece in word_pieces(text):
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
        if self.report_usage:
            usage = {"input_tokens": 21, "output_tokens": len(text.split()), "total_tokens": 21 + len(text.split())}
            yield ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata=usage))


DOCS = [
    Document(
        id="babbage",
        page_content="Charles Babbage designed the Analytical Engine, a mechanical general-purpose "
        "computer. He worked in London for most of his life.",
        metadata={"title": "Charles Babbage"},
    ),
    Document(
        id="lovelace",
        page_content="Ada Lovelace wrote the first published algorithm intended for the Analytical "
        "Engine. She collaborated with Charles Babbage.",
        metadata={"title": "Ada Lovelace"},
    ),
    Document(
        id="london",
        page_content="London was home to Charles Babbage, where he built parts of the Difference "
        "Engine and showed them to visitors.",
        metadata={"title": "London"},
    ),
]


@pytest.fixture(scope="module")
def embeddings():
    from langchain_core.embeddings import DeterministicFakeEmbedding

    return DeterministicFakeEmbedding(size=64)


@pytest.fixture(scope="module")
def llm_retriever(embeddings):
    model = ScriptedChatModel()
    retriever = GraphStrataRetriever.from_documents(DOCS, llm=model, embeddings=embeddings, method="hybrid", k=2)
    return retriever, model


# ---------------------------------------------------------------------------- the adapter
def test_system_prompt_becomes_a_system_message():
    model = ScriptedChatModel()
    out = ChatModelLLM(model).complete("Who designed it?", system="Answer briefly.")
    assert isinstance(out, LLMResponse) and out.text == ANSWER
    ((api, messages, kwargs),) = model.calls
    assert api == "generate" and kwargs == {}
    assert [type(m) for m in messages] == [SystemMessage, HumanMessage]
    assert [m.content for m in messages] == ["Answer briefly.", "Who designed it?"]
    assert out.usage.estimated  # no usage_metadata: estimated, and labelled so


def test_no_system_prompt_sends_one_human_message():
    model = ScriptedChatModel()
    ChatModelLLM(model).complete("Hello?")
    assert [type(m) for m in model.calls[0][1]] == [HumanMessage]


def test_usage_metadata_is_used_unestimated():
    out = ChatModelLLM(ScriptedChatModel(report_usage=True)).complete("Who?", system="Be brief.")
    assert (out.usage.prompt_tokens, out.usage.completion_tokens, out.usage.estimated) == (
        21, len(ANSWER.split()), False,
    )


def test_framework_fake_models_work_and_are_estimated():
    out = ChatModelLLM(FakeListChatModel(responses=["forty-two"])).complete("Q?", system="S")
    assert out.text == "forty-two" and out.usage.estimated and out.usage.prompt_tokens > 0
    generic = GenericFakeChatModel(messages=iter([AIMessage(content="hi", usage_metadata={
        "input_tokens": 3, "output_tokens": 1, "total_tokens": 4})]))
    out = ChatModelLLM(generic).complete("Q?")
    assert out.text == "hi" and (out.usage.prompt_tokens, out.usage.completion_tokens) == (3, 1)
    assert not out.usage.estimated


def test_acomplete_uses_ainvoke():
    model = ScriptedChatModel()
    out = asyncio.run(ChatModelLLM(model).acomplete("Who?", system="Be brief."))
    assert out.text == ANSWER and [api for api, _, _ in model.calls] == ["agenerate"]


def test_acomplete_falls_back_to_a_thread_without_async_support():
    class NoAsync(ScriptedChatModel):
        async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            raise NotImplementedError("async generation is not supported")

    model = NoAsync()
    out = asyncio.run(ChatModelLLM(model).acomplete("Who?"))
    assert out.text == ANSWER and [api for api, _, _ in model.calls] == ["generate"]


def test_json_mode_binds_only_known_models():
    plain = ScriptedChatModel()
    ChatModelLLM(plain).complete("x", json_mode=True)
    assert plain.calls[-1][2] == {}  # unknown model: the prompt alone asks for JSON

    class ChatOpenAI(ScriptedChatModel):  # the class name is what is recognised
        pass

    openai = ChatOpenAI()
    adapter = ChatModelLLM(openai)
    adapter.complete("x", json_mode=True)
    adapter.complete("x")
    assert openai.calls[0][2] == {"response_format": {"type": "json_object"}}
    assert openai.calls[1][2] == {}

    class ChatOllama(ScriptedChatModel):
        pass

    ollama = ChatOllama()
    ChatModelLLM(ollama).complete("x", json_mode=True)
    assert ollama.calls[-1][2] == {"format": "json"}

    custom = ScriptedChatModel()
    ChatModelLLM(custom, json_mode_kwargs={"response_format": "json"}).complete("x", json_mode=True)
    assert custom.calls[-1][2] == {"response_format": "json"}


def test_id_and_type_checks():
    assert ChatModelLLM(ScriptedChatModel()).id == "langchain:ScriptedChatModel:scripted-chat"
    assert ChatModelLLM(ScriptedChatModel(), id="mine").id == "mine"
    with pytest.raises(TypeError, match="chat model"):
        ChatModelLLM(lambda s: s)


def test_core_refuses_a_bare_chat_model_naming_the_adapter():
    from graphstrata.llm import as_llm

    with pytest.raises(TypeError, match="ChatModelLLM"):
        as_llm(FakeListChatModel(responses=["x"]))


# ---------------------------------------------------------------------------- building
def test_from_documents_with_llm_builds_a_typed_graph(llm_retriever):
    retriever, model = llm_retriever
    gs = retriever.graphstrata
    assert gs.llm.id == "langchain:ScriptedChatModel:scripted-chat"
    types = {e.name: e.type for e in gs.kg.entities.values()}
    assert types.get("Charles Babbage") == "person" and types.get("London") == "geo"
    usage = gs.build_usage
    assert usage["total"]["calls"] > 0 and any(s.startswith("extract") for s in usage["stages"])
    from graphstrata.llm.prompts.lightrag_extract import EXTRACT_SYSTEM

    assert any(m[0].content == EXTRACT_SYSTEM for _, m, _ in model.calls)
    # retrieval itself still works as before
    assert retriever.invoke("Who designed the Analytical Engine?")


def test_from_documents_without_llm_is_offline(embeddings):
    retriever = GraphStrataRetriever.from_documents(DOCS[:2], embeddings=embeddings, method="bm25")
    assert retriever.graphstrata.llm is None and retriever.llm is None


def test_index_dir_with_llm_attaches_it(embeddings, tmp_path):
    model = ScriptedChatModel()
    GraphStrataRetriever.from_documents(DOCS, embeddings=embeddings, persist_dir=tmp_path / "ix")
    loaded = GraphStrataRetriever(index_dir=tmp_path / "ix", embeddings=embeddings, llm=model, method="dense")
    assert loaded.graphstrata.llm.id == "langchain:ScriptedChatModel:scripted-chat"
    out = loaded.as_answer_chain().invoke("Who designed the Analytical Engine?")
    assert out["answer"] == ANSWER and model.calls


# ---------------------------------------------------------------------------- answering
@pytest.mark.parametrize("method", ["archrag", "hirag", "lightrag", "agrag", "dense", "bm25", "hybrid"])
def test_answer_chain_answers_with_each_method(llm_retriever, method):
    retriever, _ = llm_retriever
    out = retriever.as_answer_chain().invoke({"question": "Who designed the Analytical Engine?"}, method=method)
    assert set(out) == {"question", "answer", "context", "usage", "method", "fallbacks", "citations"}
    assert out["answer"] == ANSWER and out["method"] == method
    assert out["context"] and all(isinstance(d, Document) for d in out["context"])
    assert all(d.metadata["method"] == method for d in out["context"])
    assert out["usage"]["total"]["calls"] + out["usage"]["total"]["cached"] > 0
    assert set(out["usage"]["total"]) >= {"calls", "cached", "prompt_tokens", "completion_tokens", "estimated"}


def test_answerer_is_a_runnable_taking_a_string(llm_retriever):
    retriever, _ = llm_retriever
    chain = retriever.as_answer_chain()
    assert isinstance(chain, GraphStrataAnswerer) and isinstance(chain, Runnable)
    assert chain.pick("answer").invoke("Who designed the Analytical Engine?") == ANSWER
    assert chain.invoke("Who designed the Analytical Engine?")["fallbacks"] == []  # every step read it
    assert chain.invoke({"input": "Who designed it?"})["question"] == "Who designed it?"
    batch = chain.batch(["Who designed it?", {"query": "Where did Babbage work?"}])
    assert [b["answer"] for b in batch] == [ANSWER, ANSWER]


def test_answerer_async(llm_retriever):
    retriever, _ = llm_retriever
    out = asyncio.run(retriever.as_answer_chain().ainvoke("Who designed the Analytical Engine?"))
    assert out["answer"] == ANSWER and out["context"]


def test_answerer_with_another_model(llm_retriever):
    retriever, attached = llm_retriever
    other = ScriptedChatModel(model_name="other")
    before = len(attached.calls)
    out = GraphStrataAnswerer(retriever=retriever, llm=other).invoke("Who designed it?", method="dense")
    assert out["answer"] == ANSWER and other.calls and len(attached.calls) == before


def test_answerer_options_and_errors(llm_retriever, embeddings):
    retriever, _ = llm_retriever
    chain = retriever.as_answer_chain(response_type="one sentence")
    assert chain.answer_options == {"response_type": "one sentence"}
    assert chain.invoke("Who designed it?")["answer"] == ANSWER
    with pytest.raises(ValueError, match="non-empty"):
        chain.invoke("  ")
    with pytest.raises(ValueError, match="question"):
        chain.invoke({"text": "Who?"})
    with pytest.raises(TypeError):
        chain.invoke(42)
    with pytest.raises(ValueError, match="unknown method"):
        chain.invoke("Who?", method="nope")
    with pytest.raises(ValueError, match="answer option"):
        retriever.as_answer_chain(top_k=3).invoke("Who?")
    offline = GraphStrataRetriever.from_documents(DOCS[:2], embeddings=embeddings, method="bm25")
    with pytest.raises(ValueError, match="needs an LLM"):
        offline.as_answer_chain().invoke("Who?")


# ---------------------------------------------------------------------------- transformer
def test_transformer_with_llm_extracts_typed_entities():
    model = ScriptedChatModel()
    out = GraphStrataTransformer(llm=model, include_descriptions=True).transform_documents(DOCS[:2])
    assert model.calls
    meta = out[0].metadata
    assert "Charles Babbage" in meta["entities"]
    assert meta["entity_types"]["Charles Babbage"] == "person"
    rel = next(r for r in meta["relations"] if {r["source"], r["target"]} == {"Charles Babbage", "Analytical Engine"})
    assert rel["keywords"] == "design, invention" and rel["description"]


def test_transformer_refuses_llm_and_extractor_together():
    with pytest.raises(ValueError, match="either"):
        GraphStrataTransformer(extractor=object(), llm=ScriptedChatModel())


def test_cache_key_follows_the_chat_model_settings():
    """``ChatModelLLM`` reports the chat model's generation settings (max tokens, temperature)
    for the response cache key (issue 29)."""
    from graphstrata.llm import LLMClient, ResponseCache

    class Settled(FakeListChatModel):
        max_tokens: int = 0
        temperature: float = 0.0

    cache = ResponseCache()
    a = LLMClient(ChatModelLLM(Settled(responses=["a"], max_tokens=128), id="m"), cache)
    b = LLMClient(ChatModelLLM(Settled(responses=["b"], max_tokens=64), id="m"), cache)
    c = LLMClient(ChatModelLLM(Settled(responses=["c"], max_tokens=64, temperature=0.9), id="m"), cache)
    assert [x.complete("q").text for x in (a, b, c)] == ["a", "b", "c"]
    assert b.llm.generation_settings == {"max_tokens": 64, "temperature": 0.0}


def test_the_context_window_comes_from_the_chat_model_profile():
    """The window is the LangChain model's profile ``max_input_tokens`` (or the adapter's
    setting); budgets are fitted to it (issue 29)."""
    from graphstrata.llm import LLMClient

    model = FakeListChatModel(responses=["a"], profile={"max_input_tokens": 1234})
    assert ChatModelLLM(model).context_window == 1234
    assert ChatModelLLM(model, context_window=999).context_window == 999
    assert ChatModelLLM(FakeListChatModel(responses=["a"])).context_window is None
    client = LLMClient(ChatModelLLM(model))
    assert client.context_budget(12000) < 1234 and client.context_budget(None) < 1234


def test_answerer_passes_the_core_fallbacks_through(llm_retriever, monkeypatch):
    """The LLM steps that fell back (graphstrata's ``Answer.fallbacks``) reach the chain's output."""
    from graphstrata.testing import answer_with_fallbacks

    retriever, _ = llm_retriever
    core = retriever.graphstrata
    monkeypatch.setattr(core, "answer", answer_with_fallbacks(core.answer, ["keywords: offline fallback, unreadable answer"]))
    out = retriever.as_answer_chain().invoke("Who designed the Analytical Engine?")
    assert out["fallbacks"] == ["keywords: offline fallback, unreadable answer"] and out["answer"] == ANSWER


# ---------------------------------------------------------------------------- streaming (issue 29)
def test_adapter_streams_the_chunks_then_the_usage_they_report():
    from graphstrata.llm import Usage as CoreUsage

    adapter = ChatModelLLM(StreamingChatModel(report_usage=True))
    items = list(adapter.stream("Who designed it?", system="Answer briefly."))
    assert "".join(i for i in items if isinstance(i, str)) == CITED and len(items) > 3
    assert items[-1] == CoreUsage(21, len(CITED.split()), estimated=False) == adapter.complete("Who?").usage


def test_adapter_of_a_model_without_streaming_gives_one_piece():
    items = list(ChatModelLLM(ScriptedChatModel()).stream("Who?", system="S"))
    assert items[0] == ANSWER and len(items) == 2 and items[1].estimated


def test_adapter_astream_falls_back_to_a_thread_without_async_support():
    class NoAsync(StreamingChatModel):
        async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def _astream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            raise NotImplementedError
            yield  # an async generator

    async def main(model: Any) -> list[Any]:
        return [i async for i in ChatModelLLM(model).astream("Who?")]

    for model in (StreamingChatModel(), NoAsync()):
        items = asyncio.run(main(model))
        assert "".join(i for i in items if isinstance(i, str)) == CITED and len(items) > 3
        assert [api for api, _, _ in model.calls] == ["stream"]


@pytest.fixture()
def streaming_chain(llm_retriever):
    retriever, _ = llm_retriever

    def chain(label: str) -> GraphStrataAnswerer:
        return GraphStrataAnswerer(retriever=retriever, llm=StreamingChatModel(model_name=label))

    return chain


def test_answer_chain_stream_yields_the_answer_in_pieces(streaming_chain):
    from langchain_core.runnables.utils import AddableDict

    expected = streaming_chain("plain").invoke("Who designed the Analytical Engine?")
    chunks = list(streaming_chain("streamed").stream("Who designed the Analytical Engine?"))
    assert all(isinstance(c, AddableDict) for c in chunks)
    pieces = [c["answer"] for c in chunks if "answer" in c]
    assert len(pieces) > 3 and "".join(pieces) == expected["answer"] == CITED
    assert set(chunks[0]) == {"question", "method", "context"}  # the sources come first
    merged = chunks[0]
    for c in chunks[1:]:
        merged = merged + c
    assert set(merged) == set(expected)
    assert merged["usage"] == expected["usage"] and merged["citations"] == expected["citations"]
    assert [d.id for d in merged["context"]] == [d.id for d in expected["context"]]
    assert [c["number"] for c in expected["citations"]] == [1, 2]
    chunks_shown = [d for d in expected["context"] if d.metadata["kind"] == "chunk"]
    assert expected["citations"][1]["chunk_ids"] == [chunks_shown[1].metadata["chunk_id"]]


def test_answer_chain_pick_streams_the_text_alone(streaming_chain):
    pieces = list(streaming_chain("picked").pick("answer").stream("Who designed the Analytical Engine?"))
    assert len(pieces) > 3 and "".join(pieces) == CITED and all(isinstance(p, str) for p in pieces)


def test_answer_chain_astream(streaming_chain):
    chain = streaming_chain("async")

    async def main() -> list[dict[str, Any]]:
        return [c async for c in chain.astream({"question": "Who designed the Analytical Engine?"}, method="dense")]

    chunks = asyncio.run(main())
    pieces = [c["answer"] for c in chunks if "answer" in c]
    assert len(pieces) > 3 and "".join(pieces) == CITED
    assert chunks[0]["method"] == "dense" and [c["number"] for c in chunks[-1]["citations"]] == [1, 2]


def test_answer_chain_stream_of_a_model_without_streaming_is_one_piece(llm_retriever):
    retriever, _ = llm_retriever
    chunks = list(GraphStrataAnswerer(retriever=retriever, llm=ScriptedChatModel(model_name="one")).stream("Who?"))
    assert [c["answer"] for c in chunks if "answer" in c] == [ANSWER]
    assert chunks[-1]["citations"] == []  # the scripted answer cites nothing


# ---------------------------------------------------------------------------- records and cache
class ToyChatModel(ScriptedChatModel):
    """:class:`ScriptedChatModel` answering every step with graphstrata's stand-in model
    (:func:`graphstrata.testing.answer_every_prompt`: records of each chunk's own capitalised
    words, so every chunk's answer is grounded in it)."""

    model_name: str = "toy-chat"

    def _output(self, messages: list[BaseMessage]) -> str:
        from graphstrata.testing import answer_every_prompt

        system = next((m.content for m in messages if isinstance(m, SystemMessage)), None)
        user = [m.content for m in messages if isinstance(m, HumanMessage)][-1]
        return answer_every_prompt(user, system)


def _sample_documents(n: int) -> list[Document]:
    import json
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "cookbook" / "sample_corpus" / "wiki_sample.jsonl"
    with open(sample, encoding="utf-8") as f:
        rows = [json.loads(line) for _, line in zip(range(n), f, strict=False)]
    return [Document(id=r["id"], page_content=r["text"], metadata={"title": r.get("title", r["id"])}) for r in rows]


def test_an_llm_index_persisted_later_keeps_its_cache_and_an_insert_pays_for_its_chunks(embeddings, tmp_path):
    """On the LangChain side (issue 29), an index built with a chat model and no persist_dir
    writes its response cache beside the index when persisted; loaded with that cache
    deleted, ``add_documents`` costs extraction calls for the new document's chunks only
    (the per-chunk LLM answers are persisted with the index)."""
    from graphstrata.llm import CACHE_FILE

    config = {"min_communities": 2, "max_community_size": 6, "chunk_size": 120, "chunk_overlap": 16}
    docs = _sample_documents(9)
    built = GraphStrataRetriever.from_documents(docs[:8], llm=ToyChatModel(), embeddings=embeddings, config=config)
    built.graphstrata.persist(tmp_path / "ix")
    assert (tmp_path / "ix" / CACHE_FILE).is_file()
    for p in (tmp_path / "ix").glob(CACHE_FILE + "*"):
        p.unlink()

    model = ToyChatModel()
    loaded = GraphStrataRetriever(index_dir=tmp_path / "ix", embeddings=embeddings, llm=model, method="dense")
    loaded.add_documents([docs[8]])
    gs = loaded.graphstrata
    new_chunks = [c for c in gs.chunks if c.document_id == docs[8].id]
    stages = gs.state.drift["last_update_usage"]["stages"]
    assert new_chunks and stages["extract"]["calls"] == len(new_chunks)
    assert stages["extract:gleaning"]["calls"] == len(new_chunks)
    from graphstrata.llm.prompts.lightrag_extract import EXTRACT_SYSTEM

    asked = [m[-1].content for _, m, _ in model.calls if m[0].content == EXTRACT_SYSTEM]
    assert len(asked) == 2 * len(new_chunks)  # each new chunk's question and its gleaning pass
    assert set(gs.state.llm_answers.records) == set(gs.state.chunk_row)
    # the report and HiRAG stages kept their answers too: unchanged prompts were not asked
    assert gs.state.drift["last_update_usage"]["total"].get("kept", 0) > 0
    assert set(gs.state.llm_answers.owners) == {c.id for layer in gs.state.communities for c in layer}
