"""Answers users can check (issue 29): every answer prompt numbers its passages (ArchRAG: its
analyst reports) and asks for ``[n]`` markers; the citations read back map ``[n]`` to the
chunks and documents of the n-th passage, ignoring numbers the prompt gave no passage. The
readers that take the answer out of a streamed output give the same text however the output
is cut. Scripted LLMs: parsing and control flow only.
"""

from __future__ import annotations

import json
import random

import pytest
from graphstrata import GraphStrata
from graphstrata.eval import evaluate_answers
from graphstrata.generation import AnswerStream, generate, prepare
from graphstrata.generation.citations import cited_numbers, strip_citations
from graphstrata.llm import LLMClient
from graphstrata.llm.parsing import StrippedText
from graphstrata.llm.prompts.agrag_query import AnswerText, parse_answer
from graphstrata.testing import HashEmbedder, ScriptedLLM, StreamingScriptedLLM
from graphstrata.testing.contract import contract_documents
from graphstrata.types import Citation, Hit

Q = "Who designed the Analytical Engine?"
ANSWER = "Charles Babbage designed it [2], with notes by Ada Lovelace [1][2]; see also [9]."

# -- the text readers are indifferent to how the output is cut ------------------------------------


def cuts(text: str, rng: random.Random):
    """Every way to cut ``text`` in two, and 50 random cuts into up to 8 pieces."""
    for i in range(len(text) + 1):
        yield [text[:i], text[i:]]
    for _ in range(50):
        points = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(1, 7))))
        yield [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def read(reader, pieces) -> str:
    return "".join(reader.feed(p) for p in pieces) + reader.end()


AGRAG_OUTPUTS = [
    "Thought: it says so.\nAnswer:  Babbage [2]  \n",
    "Thought: x\nanswer :\n\nLondon",
    "no marker at all  ",
    "Thought: nothing follows.\nAnswer:   \n",
    "  Answer: first. Answer: second",
    "",
]


@pytest.mark.parametrize("output", AGRAG_OUTPUTS)
def test_agrag_answer_reader_equals_parse_answer_however_cut(output):
    expected = parse_answer(output)
    rng = random.Random(7)
    for pieces in cuts(output, rng):
        assert read(AnswerText(), pieces) == expected, pieces


@pytest.mark.parametrize("output", ["  Auckland [1].  \n", "\n\n", "a  b\t", ""])
def test_stripped_reader_equals_strip_however_cut(output):
    rng = random.Random(11)
    for pieces in cuts(output, rng):
        assert read(StrippedText(), pieces) == output.strip(), pieces


def test_the_stripped_reader_holds_back_only_trailing_whitespace():
    reader = StrippedText()
    assert [reader.feed(p) for p in ["  ", " Hello", " ", "world ", "\n"]] == ["", "Hello", "", " world", ""]
    assert reader.end() == ""


# -- citations ---------------------------------------------------------------------------------------


def chunk(cid, text, doc):
    return Hit(cid, text, 0.6, "chunk", None, [cid], [doc], {})


def ent(name):
    return Hit(name.lower(), f"{name}: an entity.", 0.9, "entity", 0, ["e-chunk"], ["e-doc"], {"name": name})


P1, P2, P3 = chunk("d1#0", "Babbage designed it.", "d1"), chunk("d2#0", "Ada wrote notes.", "d2"), \
    chunk("d3#0", "London.", "d3")


def test_citations_map_the_second_passage_to_its_chunk():
    out = generate("dense", Q, [P1, P2, P3], LLMClient(ScriptedLLM(default="Ada wrote notes [2].")))
    assert out.citations == [Citation(2, ["d2#0"], ["d2"])]
    assert out.citations[0].chunk_id == "d2#0"


def test_numbers_outside_the_passages_are_ignored_and_order_is_first_citation():
    text = "Ada [2]; Babbage [1, 3]; again [2]; not a passage: [0] [4] [2023]; none: [x] [Data: (1)]"
    out = generate("bm25", Q, [P1, P2, P3], LLMClient(ScriptedLLM(default=text)))
    assert [c.number for c in out.citations] == [2, 1, 3]
    assert [c.chunk_id for c in out.citations] == ["d2#0", "d1#0", "d3#0"]
    assert cited_numbers(text) == [2, 1, 3, 0, 4, 2023]


def test_an_answer_citing_nothing_has_no_citations():
    out = generate("hybrid", Q, [P1, P2], LLMClient(ScriptedLLM(default="Babbage designed it.")))
    assert out.citations == []


def test_the_prompts_number_the_passages_and_ask_for_markers():
    for method in ("dense", "lightrag", "hirag", "agrag"):
        llm = ScriptedLLM(default="x")
        generate(method, Q, [ent("Babbage"), P1, P2], LLMClient(llm))
        prompt, system, _ = llm.calls[-1]
        both = (system or "") + prompt
        assert "square brackets, such as [" in both, method
        assert "Ada wrote notes." in both


def test_lightrag_cites_the_sources_table_not_the_entities_table():
    # the Entities table has its own row 1 and 2; [2] still means the second Sources row
    out = generate("lightrag", Q, [ent("Babbage"), ent("Lovelace"), P1, P2],
                   LLMClient(ScriptedLLM(default="Lovelace [2].")))
    assert out.citations == [Citation(2, ["d2#0"], ["d2"])]


def test_lightrag_mix_cites_sources_and_document_chunks_by_one_numbering():
    # mix: Sources rows 1-2 (the graph's chunks), Document Chunks row 3 (only the dense search's)
    def label(h, by):
        return Hit(h.id, h.text, h.score, h.kind, h.layer, h.chunk_ids, h.document_ids, {"retrieved_by": by})

    hits = [label(P3, "vector"), ent("Babbage"), label(P1, "both"), label(P2, "graph")]
    out = generate("lightrag", Q, hits, LLMClient(ScriptedLLM(default="London [3], notes [2], design [1]; [4].")))
    assert out.citations == [Citation(3, ["d3#0"], ["d3"]), Citation(2, ["d2#0"], ["d2"]),
                             Citation(1, ["d1#0"], ["d1"])]


def test_agrag_numbers_passages_after_its_paths():
    path = Hit("path-1", "(Babbage [SEP] designed [SEP] engine)", 1.0, "path", None, ["d1#0"], ["d1"],
               {"path_passages": ["d1#0"]})
    out = generate("agrag", Q, [P1, P2, path],
                   LLMClient(ScriptedLLM(default="Thought: x\nAnswer: Babbage [1] [2] [3]")))
    # [1] is the path row (not a passage); [2] the reference passage d1#0, [3] the other one
    assert [(c.number, c.chunk_id) for c in out.citations] == [(2, "d1#0"), (3, "d2#0")]


def test_archrag_cites_its_analyst_reports_by_the_chunks_behind_them():
    def fn(prompt, system):
        if system and system.startswith("You are an analyst"):
            return json.dumps({"points": [{"description": "Ada wrote notes [Data: Sources (2)]", "score": 80}]})
        assert "----Analyst 1----" in prompt and "square brackets" in prompt
        return "Ada wrote the notes [1]. [2]"

    out = generate("archrag", Q, [P1, P2], LLMClient(ScriptedLLM(fn)))
    assert out.citations == [Citation(1, ["d2#0"], ["d2"])]  # report 1 rests on Sources row 2


def test_answer_stream_of_a_prepared_call_matches_generate():
    hits = [chunk("c1", "Babbage designed the engine.", "d1"), chunk("c2", "Lovelace wrote notes.", "d2")]
    llm = StreamingScriptedLLM(default=ANSWER)
    step = prepare("dense", Q, hits, LLMClient(llm))
    streamed = AnswerStream(step, LLMClient(llm))
    assert streamed.result is None
    assert "".join(streamed) == ANSWER
    assert streamed.result == generate("dense", Q, hits, LLMClient(ScriptedLLM(default=ANSWER)))


def test_answer_scores_ignore_citation_markers():
    assert strip_citations("Charles Babbage [2] [1, 3].") == "Charles Babbage."
    gs = GraphStrata.build(contract_documents(), embedder=HashEmbedder())
    questions = [{"question": Q, "answer": "Charles Babbage"}]
    report = evaluate_answers(gs, questions, methods=["dense"], k=3, llm=ScriptedLLM(default="Charles Babbage [1]"))
    assert report["dense"]["em"] == 1.0
