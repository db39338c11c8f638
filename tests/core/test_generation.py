"""Answer generation per method (issue 13; graphstrata.generation): the prompts carry the
method's context sections, ArchRAG's adaptive filtering (seed-archrag.md §3.2) makes one
filter call per layer and one merge, sorts the scored points and keeps them within the
budget, malformed outputs are counted and survived, and every method returns an answer."""

from __future__ import annotations

import json
import re

import pytest
from graphstrata import GraphStrata
from graphstrata.generation import GENERATORS, NO_ANSWER, generate, generation_options
from graphstrata.generation.context import Row, Table, fit, pack, render
from graphstrata.generation.lightrag import lightrag_tables
from graphstrata.llm import LLMClient, estimate_tokens
from graphstrata.methods import METHODS
from graphstrata.testing import ScriptedLLM
from graphstrata.types import Hit

Q = "Where was Edmund Hillary born?"


def ent(name, desc, layer=0, **md):
    return Hit(name.lower(), f"{name}: {desc}", 0.9, "entity", layer, ["c1"], ["d1"], {"name": name, **md})


def rel(src, dst, desc, layer=0, **md):
    return Hit(f"{src.lower()}|{dst.lower()}", f"{src} — {dst}: {desc}", 0.8, "relation", layer, ["c1"], ["d1"],
               {"source": src, "target": dst, **md})


def com(cid, title, summary, layer):
    return Hit(cid, f"{title}\n{summary}", 0.7, "community", layer, ["c1"], ["d1"], {"title": title})


def chunk(cid, text, title=None):
    meta = {"document_metadata": {"title": title} if title else {}}
    return Hit(cid, text, 0.6, "chunk", None, [cid], ["d1"], meta)


def path(text, passages=()):
    return Hit("path-1", text, 1.0, "path", None, list(passages), ["d1"], {"path_passages": list(passages)})


HILLARY = ent("Edmund Hillary", "A mountaineer from New Zealand.", type="person", rank=5)
AUCKLAND = ent("Auckland", "The largest city in New Zealand.", type="city", rank=3)
BORN = rel("Edmund Hillary", "Auckland", "Edmund Hillary was born in Auckland.", keywords="birthplace",
           weight=2.0, rank=8)
C1 = chunk("c1", "Edmund Hillary was born in Auckland.", title="Edmund Hillary")
C2 = chunk("c2", "Auckland lies on the North Island.", title="Auckland")


def client_of(script=(), default="An answer."):
    llm = ScriptedLLM(script, default=default)
    return LLMClient(llm), llm


def stages(client):
    return client.ledger.to_dict()["stages"]


def between(text, start, end):
    return text[text.index(start) + len(start): text.index(end, text.index(start))]


# -- API ----------------------------------------------------------------------------------------


def test_every_method_has_an_answer_step():
    assert set(GENERATORS) == set(METHODS)
    for name in METHODS:
        opts = generation_options(name)
        assert {"max_context_tokens", "response_type"} <= set(opts)


@pytest.mark.parametrize(
    ("method", "options", "match"),
    [
        ("lightrag", {"max_tokens": 100}, r"unknown option\(s\) \['max_tokens'\]"),
        ("lightrag", {"self_answer": True}, r"unknown option\(s\) \['self_answer'\]"),
        ("hybrid", {"max_context_tokens": 0}, r"option 'max_context_tokens' .* must be an integer >= 1"),
        ("archrag", {"max_context_tokens": "4000"}, r"option 'max_context_tokens'"),
        ("agrag", {"response_type": 3}, r"option 'response_type'"),
        ("archrag", {"general_knowledge": "yes"}, r"option 'general_knowledge'"),
    ],
)
def test_bad_options_raise_before_any_call(method, options, match):
    client, llm = client_of()
    with pytest.raises(ValueError, match=match):
        generate(method, Q, [C1], client, **options)
    assert llm.calls == []


def test_unknown_method_and_empty_query_raise():
    client, llm = client_of()
    with pytest.raises(ValueError, match="no answer generation for method 'graphrag'"):
        generate("graphrag", Q, [C1], client)
    with pytest.raises(ValueError, match="non-empty"):
        generate("dense", "  ", [C1], client)
    with pytest.raises(TypeError, match="Hit"):
        generate("dense", Q, ["c1"], client)
    assert llm.calls == []


@pytest.mark.parametrize("method", sorted(METHODS))
def test_no_context_answers_no_answer_without_a_call(method):
    client, llm = client_of()
    out = generate(method, Q, [], client)
    assert out.text == NO_ANSWER and out.used_hits == [] and llm.calls == []


# -- LightRAG / HiRAG / AGRAG / naive -------------------------------------------------------------


def test_lightrag_prompt_has_the_three_tables_in_the_system_message():
    client, llm = client_of(default="  He was born in Auckland.  ")
    hits = [C1, C2, HILLARY, AUCKLAND, BORN]
    out = generate("lightrag", Q, hits, client)
    assert out.text == "He was born in Auckland." and out.raw == "  He was born in Auckland.  "
    [(prompt, system, _)] = llm.calls
    assert prompt == Q
    pos = [system.index(f"-----{s}-----") for s in ("Entities", "Relationships", "Sources")]
    assert pos == sorted(pos)
    assert "id,\tentity,\ttype,\tdescription,\trank" in system
    assert '1,\t"Edmund Hillary",\t"person",\t"A mountaineer from New Zealand.",\t"5"' in system
    assert ('1,\t"Edmund Hillary",\t"Auckland",\t"Edmund Hillary was born in Auckland.",\t"birthplace",'
            '\t"2",\t"8"') in system
    assert '2,\t"Auckland lies on the North Island."' in system
    assert "Multiple Paragraphs" in system
    assert {h.id for h in out.used_hits} == {h.id for h in hits}
    assert stages(client)["answer"]["calls"] == 1


def test_response_type_reaches_the_prompt():
    client, llm = client_of()
    generate("lightrag", Q, [C1], client, response_type="One short sentence")
    assert "One short sentence" in llm.calls[0][1] and "Multiple Paragraphs" not in llm.calls[0][1]


def test_context_budget_is_shared_and_respected():
    ents = [ent(f"Entity {i}", "word " * 60) for i in range(30)]
    chunks = [chunk(f"c{i}", f"chunk {i} " + "text " * 60) for i in range(30)]
    tables = fit(lightrag_tables(ents + chunks), 400)
    assert estimate_tokens(render(tables)) <= 400
    kept = {t.title: len(t.rows) for t in tables}
    assert kept["Entities"] >= 1 and kept["Sources"] >= 1  # the entities did not starve the sources
    client, llm = client_of()
    out = generate("lightrag", Q, ents + chunks, client, max_context_tokens=400)
    system = llm.calls[0][1]
    assert 2 <= len(out.used_hits) < 60
    used = {h.id for h in out.used_hits}
    for h in ents:
        assert (f'"{h.metadata["name"]}"' in system) == (h.id in used)
    for h in chunks:
        assert (f'"{h.text.strip()}"' in system) == (h.id in used)


def mixed(hit, retrieved_by):
    """``hit`` as LightRAG's mix mode returns it (``metadata["retrieved_by"]``)."""
    return Hit(hit.id, hit.text, hit.score, hit.kind, hit.layer, hit.chunk_ids, hit.document_ids,
               {**hit.metadata, "retrieved_by": retrieved_by})


C3 = chunk("c3", "Hillary kept bees with his father.")


def test_lightrag_mix_prompt_adds_document_chunks_numbered_after_the_sources():
    client, llm = client_of()
    hits = [mixed(C3, "vector"), mixed(C1, "both"), mixed(C2, "graph"), HILLARY, AUCKLAND, BORN]
    out = generate("lightrag", Q, hits, client)
    [(prompt, system, _)] = llm.calls
    assert prompt == Q
    titles = ("Entities", "Relationships", "Sources", "Document Chunks")
    pos = [system.index(f"-----{t}-----") for t in titles]
    assert pos == sorted(pos)
    # the KG tables as in the hybrid prompt, numbered from 1 each
    assert '1,\t"Edmund Hillary",\t"person",\t"A mountaineer from New Zealand.",\t"5"' in system
    assert '1,\t"Edmund Hillary",\t"Auckland",\t"Edmund Hillary was born in Auckland.",' in system
    # graph chunks (graph or both) are the Sources, the dense search's own the Document Chunks,
    # whose ids go on from the last Sources id
    sources = between(system, "-----Sources-----", "-----Document Chunks-----")
    assert '1,\t"Edmund Hillary was born in Auckland."' in sources
    assert '2,\t"Auckland lies on the North Island."' in sources
    assert "bees" not in sources
    assert '3,\t"Hillary kept bees with his father."' in system.split("-----Document Chunks-----")[1]
    assert "Sources or Document Chunks row" in system  # the mix instructions
    assert {h.id for h in out.used_hits} == {h.id for h in hits}
    # without the label (every other mode) the prompt and its tables are the three of spec §2.5
    client, llm = client_of()
    generate("lightrag", Q, [C3, C1, C2, HILLARY], client)
    assert "Document Chunks" not in llm.calls[0][1] and "-----Sources-----" in llm.calls[0][1]


def test_lightrag_mix_tables_share_the_budget_and_keep_their_numbering():
    chunks = [mixed(chunk(f"g{i}", f"graph chunk {i} " + "text " * 40), "graph") for i in range(10)]
    chunks += [mixed(chunk(f"v{i}", f"vector chunk {i} " + "text " * 40), "vector") for i in range(10)]
    ents = [ent(f"Entity {i}", "word " * 40) for i in range(10)]
    tables = fit(lightrag_tables(ents + chunks), 600)
    assert estimate_tokens(render(tables)) <= 600
    kept = {t.title: len(t.rows) for t in tables}
    assert kept["Entities"] >= 1 and kept["Sources"] >= 1 and kept["Document Chunks"] >= 1
    text = render(tables)
    first_vector = kept["Sources"] + 1
    assert f'{first_vector},\t"vector chunk 0 ' in text.split("-----Document Chunks-----")[1]


def test_hirag_prompt_has_its_four_sections_in_order():
    client, llm = client_of()
    bridge = rel("Edmund Hillary", "Auckland", "Edmund Hillary was born in Auckland.", weight=1.0, rank=9)
    hits = [C1, HILLARY, bridge, com("hirag:C1", "Hillary, Auckland", "Hillary comes from Auckland.", 1),
            path("Edmund Hillary → Auckland")]
    out = generate("hirag", Q, hits, client)
    system = llm.calls[0][1]
    titles = ("Backgrounds", "Reasoning Path", "Detail Entity Information", "Source Documents")
    pos = [system.index(f"-----{t}-----") for t in titles]
    assert pos == sorted(pos)
    assert '1,\t"Hillary, Auckland Hillary comes from Auckland."' in system
    path_part = between(system, "-----Reasoning Path-----", "-----Detail")
    assert "id,\tsource,\ttarget,\tdescription,\tweight,\trank" in path_part
    assert path_part.index("Edmund Hillary → Auckland") < path_part.index("was born in Auckland")
    assert len(out.used_hits) == len(hits)


def test_agrag_prompt_has_paths_then_reference_then_other_passages():
    answer = "Thought: the passage says he was born in Auckland.\nAnswer: Auckland"
    client, llm = client_of(default=answer)
    graph = "(Edmund Hillary [SEP] co-occurs with [SEP] Auckland)"
    hits = [C2, C1, BORN, path(graph, passages=["c1"])]
    out = generate("agrag", Q, hits, client)
    assert out.text == "Auckland" and out.raw == answer
    prompt, system, _ = llm.calls[0]
    assert "Thought:" in system and "Answer:" in system
    assert prompt.endswith(f"Question: {Q}\nThought: ")
    i_path, i_ref, i_other = (prompt.index(graph), prompt.index(C1.text), prompt.index(C2.text))
    assert i_path < i_ref < i_other
    assert "Reference passages" in between(prompt, graph, C1.text)
    assert "[3] Auckland lies" in prompt  # numbered across the sections
    assert "born in Auckland." not in prompt.replace(C1.text, "")  # the anchor fact itself is not shown
    assert [h.id for h in out.used_hits] == ["path-1", "c1", "c2"]


def test_agrag_answer_without_marker_is_the_whole_output():
    client, _ = client_of(default="Auckland, New Zealand")
    assert generate("agrag", Q, [C1], client).text == "Auckland, New Zealand"


@pytest.mark.parametrize("method", ["dense", "bm25", "hybrid"])
def test_naive_prompt_lists_the_passages(method):
    client, llm = client_of(default="Auckland.")
    untitled = chunk("c3", "Auckland is a city.", title="Cities")
    out = generate(method, Q, [C1, untitled, HILLARY], client)
    system = llm.calls[0][1]
    assert "[1] Edmund Hillary was born" in system  # the text starts with its title: not repeated
    assert "[2] Title: Cities\nAuckland is a city." in system
    assert "A mountaineer" not in system  # entity hits are not shown
    assert out.text == "Auckland." and [h.id for h in out.used_hits] == ["c1", "c3"]


# -- ArchRAG adaptive filtering ------------------------------------------------------------------

LAYERED = [
    C1,
    HILLARY,
    AUCKLAND,
    BORN,
    com("L1C0", "Hillary group", "LAYER-ONE summary about Hillary.", 1),
    com("L2C0", "Oceania group", "LAYER-TWO summary about New Zealand.", 2),
]


def points(*pts):
    return json.dumps({"points": [{"description": d, "score": s} for d, s in pts]})


def archrag_script(by_marker, merge="Edmund Hillary was born in Auckland."):
    """Filter calls answer by the first marker found in their data tables; the merge call
    answers ``merge``."""

    def fn(prompt, system):
        if "Analyst reports" in prompt:
            return merge
        for marker, out in by_marker.items():
            if marker in prompt:
                return out
        return points()

    return fn


def test_archrag_one_filter_call_per_layer_then_one_merge():
    script = archrag_script({
        "-----Relationships-----": points(("Hillary was born in Auckland [Data: Relationships (3)]", 30),
                                ("I don't know", 0)),
        "LAYER-ONE": points(("The Hillary group is about his life", 90)),
        "LAYER-TWO": points(("New Zealand context", "60/100")),
        "-----Sources-----": points(("The source says Auckland [Data: Sources (1)]", 75)),
    })
    client = LLMClient(ScriptedLLM(script))
    out = generate("archrag", Q, LAYERED, client)
    llm = client.llm
    filters = [c for c in llm.calls if "Analyst reports" not in c[0]]
    merges = [c for c in llm.calls if "Analyst reports" in c[0]]
    assert len(filters) == 4 and len(merges) == 1
    assert all(json_mode for _, _, json_mode in filters)
    # each layer's rows in its own call
    layer0 = next(p for p, _, _ in filters if "-----Entities-----" in p)
    assert "-----Relationships-----" in layer0 and "LAYER-ONE" not in layer0 and "-----Sources-----" not in layer0
    assert sum("LAYER-ONE" in p for p, _, _ in filters) == 1
    assert sum("LAYER-TWO" in p for p, _, _ in filters) == 1
    assert stages(client)["answer:filter"]["calls"] == 4 and stages(client)["answer:merge"]["calls"] == 1
    # points sorted by score, 0-scored dropped
    merge_prompt = merges[0][0]
    scores = [int(s) for s in re.findall(r"Importance Score: (\d+)", merge_prompt)]
    assert scores == [90, 75, 60, 30]
    assert "----Analyst 1----\nImportance Score: 90\nThe Hillary group" in merge_prompt
    assert "I don't know" not in merge_prompt
    assert out.text == "Edmund Hillary was born in Auckland."
    # used hits: cited rows where a point cites, the whole call where it does not
    ids = {h.id for h in out.used_hits}
    assert ids == {"L1C0", "L2C0", "c1", BORN.id}


def test_archrag_reports_are_cut_to_the_budget():
    many = [(f"Point number {i} " + "detail " * 20, 100 - i) for i in range(40)]
    client = LLMClient(ScriptedLLM(archrag_script({"-----Sources-----": points(*many)})))
    generate("archrag", Q, [C1], client, max_context_tokens=200)
    merge_prompt = next(p for p, _, _ in client.llm.calls if "Analyst reports" in p)
    reports = between(merge_prompt, "Analyst reports:\n\n", "\n\nAnswer:")
    assert estimate_tokens(reports) <= 200
    kept = [int(s) for s in re.findall(r"Importance Score: (\d+)", reports)]
    assert kept == list(range(100, 100 - len(kept), -1)) and 1 <= len(kept) < 40


def test_archrag_splits_a_layer_over_the_budget_into_several_calls():
    ents = [ent(f"Entity {i}", "word " * 40) for i in range(20)]
    client = LLMClient(ScriptedLLM(archrag_script({})))
    generate("archrag", Q, ents, client, max_context_tokens=300)
    filters = [p for p, _, _ in client.llm.calls if "Analyst reports" not in p]
    assert len(filters) > 1
    shown = []
    for p in filters:
        tables = between(p, "Data tables:\n\n", "\n\nList the key points")
        assert estimate_tokens(tables) <= 300
        shown += re.findall(r'"(Entity \d+)"', tables)
    assert shown == [f"Entity {i}" for i in range(20)]  # every row once, in order


def test_archrag_survives_malformed_filter_output():
    script = archrag_script({
        "-----Entities-----": "Sorry, I can't produce JSON today.",
        "LAYER-ONE": json.dumps({"points": [{"description": "no score"}, "junk",
                                            {"description": "Hillary group", "score": 80}]}),
        "LAYER-TWO": "```json\n{'points': [{'description': 'Oceania', 'score': '55'},]}\n```",
    })
    client = LLMClient(ScriptedLLM(script))
    out = generate("archrag", Q, LAYERED[1:], client)
    merge_prompt = next(p for p, _, _ in client.llm.calls if "Analyst reports" in p)
    assert re.findall(r"Importance Score: (\d+)", merge_prompt) == ["80", "55"]
    assert stages(client)["answer:filter"]["skipped"] == 3  # one unreadable answer, two bad records
    assert out.text


def test_archrag_without_points_does_not_know():
    client = LLMClient(ScriptedLLM(archrag_script({"-----Sources-----": points(("I don't know", 0))})))
    out = generate("archrag", Q, [C1], client)
    assert out.text == NO_ANSWER and out.used_hits == []
    assert "answer:merge" not in stages(client)
    # the authors' code path: answer from general knowledge, marked for verification
    client = LLMClient(ScriptedLLM(archrag_script({"-----Sources-----": points()}, merge="Auckland [LLM: verify]")))
    out = generate("archrag", Q, [C1], client, general_knowledge=True)
    merge_prompt = next(p for p, _, _ in client.llm.calls if "Analyst reports" in p)
    assert "[LLM: verify]" in merge_prompt and out.text == "Auckland [LLM: verify]" and out.used_hits == []


def test_archrag_self_answer_is_filtered_like_a_layer():
    def fn(prompt, system):
        if "step by step" in prompt:
            return "MY-OWN-ANSWER: Auckland"
        if "Analyst reports" in prompt:
            return "Auckland"
        if "MY-OWN-ANSWER" in prompt:
            return points(("The model believes Auckland", 40))
        return points()

    client = LLMClient(ScriptedLLM(fn))
    out = generate("archrag", Q, [C1], client, self_answer=True)
    assert stages(client)["answer:self"]["calls"] == 1 and stages(client)["answer:filter"]["calls"] == 2
    assert "The model believes Auckland" in next(p for p, _, _ in client.llm.calls if "Analyst reports" in p)
    assert out.used_hits == []  # the point came from no retrieved hit


# -- context helpers -------------------------------------------------------------------------------


def test_pack_numbers_rows_across_tables_and_clips_a_huge_row():
    t1 = Table("A", ("content",), tuple(Row((f"row {i} " + "x " * 40,)) for i in range(6)))
    t2 = Table("B", ("content",), (Row(("y " * 2000,)),))
    batches = pack([t1, t2], 120)
    assert len(batches) >= 3
    for batch in batches:
        assert estimate_tokens(render(batch, continuous=True)) <= 120
    first = render(batches[0], continuous=True)
    assert first.splitlines()[3].startswith("1,\t") and first.splitlines()[4].startswith("2,\t")
    assert "…" in render(batches[-1], continuous=True)
    assert pack([Table("A", ("content",))], 100) == []


# -- through a built index -------------------------------------------------------------------------


@pytest.fixture()
def gs(corpus, embedder, small_config):
    return GraphStrata.build(corpus, config=small_config, embedder=embedder)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_answers_from_its_own_hits(gs, method):
    def fn(prompt, system):
        if system and system.startswith("You are an analyst"):
            return points(("Hillary was born in Auckland [Data: Sources (1)]", 90))
        return "Thought: it says so.\nAnswer: Auckland" if "Thought:" in prompt else "Auckland"

    client = LLMClient(ScriptedLLM(fn))
    hits = gs.retrieve(Q, method=method, k=3)
    out = generate(method, Q, hits, client)
    assert out.text == "Auckland"
    assert out.used_hits and all(any(h is g for g in hits) for h in out.used_hits)
    assert "Edmund Hillary was born in Auckland" in "\n".join((p + (s or "")) for p, s, _ in client.llm.calls)
