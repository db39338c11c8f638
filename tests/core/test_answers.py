"""Answers users can stream and check (issue 29): ``answer(..., stream=True)`` /
``aanswer(..., stream=True)`` give the answer's text in pieces and then the same ``Answer``
as the call without ``stream``; ``Answer.citations`` maps the ``[n]`` markers of the text to
the chunks and documents of the n-th passage of the answer prompt.

The LLMs are scripted (:class:`~graphstrata.testing.StreamingScriptedLLM` streams the scripted
output word by word): these tests check parsing and control flow, never answer quality.
"""

from __future__ import annotations

import json

import pytest
from graphstrata import GraphStrata
from graphstrata.answers import AsyncStreamingAnswer, StreamingAnswer
from graphstrata.generation import NO_ANSWER
from graphstrata.llm import LLMError, TransientLLMError
from graphstrata.methods import METHODS
from graphstrata.testing import HashEmbedder, ScriptedLLM, StreamingScriptedLLM
from graphstrata.testing.contract import contract_documents

Q = "Who designed the Analytical Engine?"
ANSWER = "Charles Babbage designed it [2], with notes by Ada Lovelace [1][2]; see also [9]."


def script(prompt: str, system: str | None) -> str:
    """ArchRAG's filter calls get two scored points (one per report), AGRAG's answer a
    ``Thought:`` / ``Answer:`` pair, every other call :data:`ANSWER` (which LightRAG's keyword
    step cannot read: it falls back, and says so)."""
    if system and system.startswith("You are an analyst"):
        return json.dumps({"points": [
            {"description": "Babbage designed the engine [Data: Sources (1)]", "score": 90},
            {"description": "Lovelace wrote notes on it [Data: Sources (2)]", "score": 60},
        ]})
    if "Thought:" in prompt:
        return "Thought: passage [3] says so.\nAnswer:  Charles Babbage [3], not [1] (a path). \n"
    return "  " + ANSWER + "\n"


@pytest.fixture(scope="module")
def gs() -> GraphStrata:
    return GraphStrata.build(contract_documents(), embedder=HashEmbedder())


def same_answer(a, b) -> None:
    assert a.text == b.text
    assert [(h.kind, h.id) for h in a.hits] == [(h.kind, h.id) for h in b.hits]
    assert a.citations == b.citations
    assert a.usage == b.usage
    assert a.fallbacks == b.fallbacks
    assert (a.method, a.query) == (b.method, b.query)


# -- streamed and returned at once give the same Answer --------------------------------------------


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_streamed_answer_equals_the_answer_returned_at_once(gs, method):
    at_once = gs.answer(Q, method=method, llm=ScriptedLLM(script), k=3)
    llm = StreamingScriptedLLM(script)
    stream = gs.answer(Q, method=method, llm=llm, k=3, stream=True)
    assert isinstance(stream, StreamingAnswer) and not stream.done
    assert [h.id for h in stream.hits] == [h.id for h in at_once.hits]  # known before the first piece
    pieces = list(stream)
    assert len(pieces) > 3 and "".join(pieces) == stream.answer.text
    same_answer(stream.answer, at_once)
    assert at_once.citations, "the scripted answer cites at least one passage"
    # only the last call streamed; the earlier steps (keywords, ArchRAG filters) ran as before
    assert len(llm.streamed) == 1 and llm.streamed[0] == llm.calls[-1]
    if method in ("lightrag", "archrag"):
        assert len(llm.calls) > 1
    if method == "lightrag":
        assert at_once.fallbacks == ["keywords: offline fallback, unreadable answer"]


def test_agrag_streams_only_the_text_after_its_answer_marker(gs):
    stream = gs.answer(Q, method="agrag", llm=StreamingScriptedLLM(script), k=3, stream=True)
    pieces = list(stream)
    assert "".join(pieces) == "Charles Babbage [3], not [1] (a path)."
    assert not any("Thought" in p or "passage" in p for p in pieces)


@pytest.mark.parametrize("native_async", [True, False])
async def test_the_async_stream_gives_the_same_answer(gs, native_async):
    at_once = gs.answer(Q, method="lightrag", llm=ScriptedLLM(script), k=3)
    llm = StreamingScriptedLLM(script, native_async=native_async)
    stream = await gs.aanswer(Q, method="lightrag", llm=llm, k=3, stream=True)
    assert isinstance(stream, AsyncStreamingAnswer)
    with pytest.raises(RuntimeError, match="still streaming"):
        _ = stream.answer
    pieces = [p async for p in stream]
    assert len(pieces) > 3 and "".join(pieces) == stream.answer.text
    same_answer(stream.answer, at_once)
    assert len(llm.streamed) == 1


async def test_async_get_answer_reads_the_rest_of_the_stream(gs):
    stream = await gs.aanswer(Q, method="dense", llm=StreamingScriptedLLM(script), k=3, stream=True,
                              filters={"topic": {"$ne": "nothing"}})
    first = await anext(aiter(stream))
    answer = await stream.get_answer()
    assert answer.text.startswith(first) and answer.text == ANSWER
    assert [p async for p in stream] == []  # nothing is given twice


def test_an_llm_that_cannot_stream_gives_the_whole_text_in_one_piece(gs):
    llm = ScriptedLLM(script)  # no stream method
    stream = gs.answer(Q, method="hybrid", llm=llm, k=3, stream=True)
    assert list(stream) == [ANSWER] and stream.answer.text == ANSWER
    assert stream.answer.usage["stages"]["answer"]["calls"] == 1


def test_reading_answer_first_reads_the_stream_and_iteration_then_ends(gs):
    stream = gs.answer(Q, method="dense", llm=StreamingScriptedLLM(script), k=3, stream=True)
    assert stream.answer.text == ANSWER and stream.done
    assert list(stream) == []


def test_a_cached_answer_streams_as_one_piece_counted_as_cached(gs):
    llm = StreamingScriptedLLM(script)
    engine = GraphStrata(gs.state)
    engine.attach_llm(llm)  # one client, one response cache
    first = list(engine.answer(Q, method="dense", k=3, stream=True))
    again = engine.answer(Q, method="dense", k=3, stream=True)
    assert list(again) == ["".join(first)] == [ANSWER]
    stage = again.answer.usage["stages"]["answer"]
    assert (stage["calls"], stage["cached"]) == (0, 1)
    assert len(llm.streamed) == 1


def test_no_context_streams_the_no_answer_text_without_a_call(gs):
    llm = StreamingScriptedLLM(script)
    stream = gs.answer(Q, method="dense", llm=llm, k=3, stream=True, filters={"topic": "no such topic"})
    assert list(stream) == [NO_ANSWER] and stream.answer.citations == [] and llm.calls == []


def test_answer_to_dict_has_its_citations(gs):
    ans = gs.answer(Q, method="dense", llm=ScriptedLLM(script), k=3)
    d = ans.to_dict()
    assert d["citations"] == [c.to_dict() for c in ans.citations]
    assert [c["number"] for c in d["citations"]] == [2, 1]
    hit_chunks = [h.id for h in ans.hits if h.kind == "chunk"]
    assert d["citations"][0]["chunk_ids"] == [hit_chunks[1]]  # [2]: the second passage shown
    json.dumps(d)


class BreaksMidway(StreamingScriptedLLM):
    """Streams its answer up to its second word, then loses the connection (after a piece:
    no retry)."""

    def stream(self, prompt, *, system=None, json_mode=False):
        words = 0
        for piece in super().stream(prompt, system=system, json_mode=json_mode):
            yield piece
            words += bool(piece.strip())
            if words == 2:
                raise TransientLLMError("connection dropped")

    async def astream(self, prompt, *, system=None, json_mode=False):
        for item in self.stream(prompt, system=system, json_mode=json_mode):
            yield item


def test_a_stream_that_fails_midway_raises_and_keeps_raising(gs):
    stream = gs.answer(Q, method="dense", llm=BreaksMidway(script), k=3, stream=True)
    assert next(stream) + next(stream) == "Charles Babbage"
    with pytest.raises(LLMError, match="connection dropped"):
        next(stream)
    with pytest.raises(LLMError, match="connection dropped"):
        _ = stream.answer  # no half answer passes for a whole one
    assert not stream.done


async def test_an_async_stream_that_fails_midway_raises_and_keeps_raising(gs):
    stream = await gs.aanswer(Q, method="dense", llm=BreaksMidway(script, native_async=True), k=3, stream=True)
    with pytest.raises(LLMError, match="connection dropped"):
        _ = [p async for p in stream]
    with pytest.raises(LLMError, match="connection dropped"):
        _ = stream.answer
    with pytest.raises(LLMError, match="connection dropped"):
        await stream.get_answer()
