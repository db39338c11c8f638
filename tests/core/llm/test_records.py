"""Per-chunk LLM extraction records (issue 29, "Cache and records"): an LLM-extracted index
keeps each chunk's raw LLM answers and its description summaries, so an insert asks the LLM
for its new chunks only, with or without a response cache, and a record answers a chunk only
while asking again would send the same prompt.

The model is :func:`graphstrata.testing.answer_every_prompt` behind a
:class:`~graphstrata.testing.ScriptedLLM` (records made of each chunk's capitalised words):
the tests count calls per stage and compare graphs, never quality.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from graphstrata import GraphStrata
from graphstrata.indexing import AgragLLMExtractor, LLMExtractor, update_state
from graphstrata.llm import CACHE_FILE, LLMClient, ResponseCache
from graphstrata.llm.prompts import lightrag_extract as lx
from graphstrata.llm.records import LLMAnswers, LLMRecord
from graphstrata.testing import HashEmbedder, ScriptedLLM
from graphstrata.testing import answer_every_prompt as toy
from graphstrata.types import Chunk

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "cookbook" / "sample_corpus" / "wiki_sample.jsonl"
CONFIG = {"min_communities": 2, "max_community_size": 6, "chunk_size": 120, "chunk_overlap": 16}


def _docs(n: int) -> list[dict]:
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f, strict=False)]


def _drop_cache(directory: Path) -> None:
    for p in directory.glob(CACHE_FILE + "*"):
        p.unlink()


def _first_prompts(llm: ScriptedLLM, system: str = lx.EXTRACT_SYSTEM) -> list[str]:
    """The first extraction prompts the model got (not gleaning passes or continue checks)."""
    return [
        p for p, s, _ in llm.calls
        if s == system and not p.rstrip().endswith((lx.CONTINUE_QUESTION, lx.GLEANING_INSTRUCTION))
    ]


def _graph(gs: GraphStrata) -> tuple[dict, dict]:
    kg = gs.state.kg
    return (
        {e.id: (e.name, e.type, e.description, tuple(e.chunk_ids), e.weight) for e in kg.entities.values()},
        {k: (r.description, r.keywords, tuple(r.chunk_ids), r.weight) for k, r in kg.relations.items()},
    )


@pytest.fixture(scope="module")
def persisted(tmp_path_factory):
    out = tmp_path_factory.mktemp("records") / "index"
    gs = GraphStrata.build(_docs(10), config=CONFIG, embedder=HashEmbedder(), persist_dir=out, llm=ScriptedLLM(toy))
    return gs, out


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_a_build_keeps_one_record_per_chunk_and_persists_them(persisted):
    gs, out = persisted
    answers = gs.state.llm_answers
    assert answers is not None and list(answers.records) == [c.id for c in gs.chunks]
    assert all(len(r.answers()) == 2 for r in answers.records.values())  # the answer + one gleaning pass
    loaded = GraphStrata.load(out, embedder=HashEmbedder())
    assert loaded.state.llm_answers == answers


def test_insert_without_a_cache_asks_only_for_the_new_chunks(persisted, tmp_path):
    """The core must-show: cache deleted, an insert costs extraction calls for its own chunks
    (× the gleaning pass) and nothing for the old ones; the graph is the one a build over the
    same answers makes."""
    _, out = persisted
    index = _copy(out, tmp_path / "index")
    _drop_cache(index)
    llm = ScriptedLLM(toy)
    gs = GraphStrata.load(index, embedder=HashEmbedder(), llm=llm)
    new = _docs(11)[10]
    gs.insert([new])
    new_chunks = [c for c in gs.chunks if c.document_id == new["id"]]
    stages = gs.state.drift["last_update_usage"]["stages"]
    assert stages["extract"]["calls"] == len(new_chunks) == len(_first_prompts(llm))
    assert stages["extract:gleaning"]["calls"] == len(new_chunks)  # gleaning=1: one pass, no check
    assert "extract:summaries" not in stages
    assert all(c.text in p for c, p in zip(new_chunks, _first_prompts(llm), strict=True))
    assert set(gs.state.llm_answers.records) == set(gs.chunk_row)
    scratch = GraphStrata.build(_docs(11), config=CONFIG, embedder=HashEmbedder(), llm=ScriptedLLM(toy))
    assert _graph(gs) == _graph(scratch)
    reloaded = GraphStrata.load(index, embedder=HashEmbedder())
    assert reloaded.state.llm_answers == gs.state.llm_answers


def test_delete_and_rebuild_ask_nothing_and_drop_the_records_of_deleted_chunks(persisted, tmp_path):
    _, out = persisted
    index = _copy(out, tmp_path / "index")
    _drop_cache(index)
    llm = ScriptedLLM(toy)
    gs = GraphStrata.load(index, embedder=HashEmbedder(), llm=llm)
    gone = next(iter(gs.documents))
    gs.delete([gone])
    assert set(gs.state.llm_answers.records) == set(gs.chunk_row)
    assert not _first_prompts(llm)
    gs.rebuild()
    assert not _first_prompts(llm)  # the rebuild re-reads the answers too
    assert set(gs.state.llm_answers.records) == set(gs.chunk_row)


def test_an_index_without_records_falls_back_to_asking_through_the_client(persisted):
    """An LLM index persisted before the records (``llm_answers`` None) updates as it did:
    every chunk through the client (and its response cache), then keeps the answers."""
    gs, _ = persisted
    old = dataclasses.replace(gs.state, llm_answers=None, llm=LLMClient(ScriptedLLM(toy)))
    new_doc = _docs(11)[10]
    from graphstrata.loaders import load_documents

    nxt = update_state(old, load_documents([new_doc]))
    asked = _first_prompts(old.llm.llm)
    assert len(asked) == len(nxt.chunks)
    assert set(nxt.llm_answers.records) == set(nxt.chunk_row)


def _chunk(i: int, text: str) -> Chunk:
    return Chunk(id=f"c{i}", document_id=f"d{i}", index=0, text=text, start=0, end=len(text), n_tokens=len(text.split()))


def _chunks(*texts: str) -> list[Chunk]:
    return [_chunk(i, t) for i, t in enumerate(texts)]


TEXTS = (
    "Charles Babbage designed the Analytical Engine in London.",
    "Ada Lovelace wrote programs for the Analytical Engine of Babbage.",
    "Grace Hopper built compilers in Philadelphia for Remington.",
)


def test_a_chunk_whose_text_changed_under_the_same_id_is_asked_again():
    llm = ScriptedLLM(toy)
    ex = LLMExtractor(llm, gleaning=0)
    first = ex.extract_with_answers(_chunks(*TEXTS))
    assert first.asked == 3
    changed = _chunks(TEXTS[0], TEXTS[1], "Alan Turing worked at Bletchley during the war.")
    before = len(llm.calls)
    again = ex.extract_with_answers(changed, known=first.answers)
    assert again.asked == 1 and len(llm.calls) == before + 1
    assert "Alan Turing" in llm.calls[-1][0]
    ids = {e.id for e in again.entities}
    assert "turing" in ids and "hopper" not in ids
    assert again.answers.records["c0"] is first.answers.records["c0"]  # reused as it was
    assert again.answers.records["c2"] != first.answers.records["c2"]


def test_a_title_or_a_setting_change_invalidates_the_record():
    llm = ScriptedLLM(toy)
    chunks = _chunks(*TEXTS)
    first = LLMExtractor(llm, gleaning=0).extract_with_answers(chunks)
    titled = LLMExtractor(llm, gleaning=0).extract_with_answers(chunks, {"d1": "Ada Lovelace"}, known=first.answers)
    assert titled.asked == 1  # the title is in the chunk's prompt
    gleaned = LLMExtractor(llm, gleaning=1).extract_with_answers(chunks, known=first.answers)
    assert gleaned.asked == 3  # another gleaning setting: other prompts
    typed = LLMExtractor(llm, gleaning=0, entity_types=["person"]).extract_with_answers(chunks, known=first.answers)
    assert typed.asked == 3


def test_a_damaged_or_foreign_record_is_asked_again_and_loses_no_entity():
    llm = ScriptedLLM(toy)
    ex = LLMExtractor(llm, gleaning=0)
    chunks = _chunks(*TEXTS)
    first = ex.extract_with_answers(chunks)
    records = dict(first.answers.records)
    records["c0"] = LLMRecord(records["c0"].key, b"not zlib")  # unreadable
    records["c1"] = LLMRecord(records["c1"].key, LLMRecord.of("k", [1, 2]).packed)  # not strings
    records["c2"] = LLMRecord("another key", records["c2"].packed)  # another prompt's answers
    again = ex.extract_with_answers(chunks, known=LLMAnswers(records))
    assert again.asked == 3
    assert again.entities == first.entities and again.relations == first.relations
    assert again.answers == first.answers  # repaired: the next update finds valid records


def test_summaries_are_asked_only_when_their_input_changed():
    llm = ScriptedLLM(toy)
    ex = LLMExtractor(llm, gleaning=0, summary_trigger_tokens=8)
    chunks = _chunks(*TEXTS)
    first = ex.extract_with_answers(chunks)
    n_summaries = sum(1 for _, s, _ in llm.calls if s == lx.SUMMARY_SYSTEM)
    assert n_summaries > 0 and len(first.answers.summaries) == n_summaries
    before = len(llm.calls)
    same = ex.extract_with_answers(chunks, known=first.answers)
    assert len(llm.calls) == before  # no extraction, no summary asked
    assert same.entities == first.entities and same.relations == first.relations
    more = [*chunks, _chunk(3, "Grace Hopper met Ada Lovelace in London.")]
    grown = ex.extract_with_answers(more, known=first.answers)
    asked = [p for p, s, _ in llm.calls[before:] if s == lx.SUMMARY_SYSTEM]
    assert grown.asked == 1
    assert 0 < len(asked) < len(grown.answers.summaries)
    assert all(any(name in p for name in ("Hopper", "Lovelace", "London")) for p in asked)


def test_agrag_records_ignore_the_statistical_hints_and_ask_only_new_chunks():
    def triples(prompt, system):
        passage = prompt.rsplit("Passage:\n```\n", 1)[1].split("\n```", 1)[0]  # the chunk's, not the example's
        names = [w for w in ("Babbage", "Lovelace", "Hopper", "London", "Philadelphia") if w in passage]
        pairs = [[a, "is linked to", b] for a, b in zip(names, names[1:], strict=False)]
        return json.dumps({"triples": pairs})

    llm = ScriptedLLM(triples)
    ex = AgragLLMExtractor(llm)
    first = ex.extract_with_answers(_chunks(*TEXTS[:2]))
    assert first.asked == 2
    grown = ex.extract_with_answers(_chunks(*TEXTS), known=first.answers)
    assert grown.asked == 1  # the refit TF-IDF moves the hints of old chunks: not asked for that
    assert set(grown.answers.records) == {"c0", "c1", "c2"}


@pytest.mark.filterwarnings("ignore:AGRAG triple extraction")  # the toy model states no triple
def test_agrag_insert_without_a_cache_asks_only_for_the_new_chunks(tmp_path):
    out = tmp_path / "index"
    cfg = {**CONFIG, "llm_extraction": "agrag"}
    GraphStrata.build(_docs(8), config=cfg, embedder=HashEmbedder(), persist_dir=out, llm=ScriptedLLM(toy))
    _drop_cache(out)
    gs = GraphStrata.load(out, embedder=HashEmbedder(), llm=ScriptedLLM(toy))
    new = _docs(9)[8]
    gs.insert([new])
    stages = gs.state.drift["last_update_usage"]["stages"]
    assert stages["extract:triples"]["calls"] == sum(1 for c in gs.chunks if c.document_id == new["id"])


def test_persisting_an_index_built_without_a_directory_writes_its_cache_beside_it(tmp_path):
    llm = ScriptedLLM(toy)
    gs = GraphStrata.build(_docs(4), config=CONFIG, embedder=HashEmbedder(), llm=llm)
    assert gs.state.llm.cache.path is None
    n = len(gs.state.llm.cache)
    out = gs.persist(tmp_path / "index")
    assert (out / CACHE_FILE).is_file() and len(ResponseCache(out / CACHE_FILE)) == n
    assert gs.state.llm.cache.path == out / CACHE_FILE  # later calls land there too
    again = GraphStrata.build(_docs(4), config=CONFIG, embedder=HashEmbedder(), persist_dir=out, llm=ScriptedLLM(toy))
    assert again.build_usage["total"]["calls"] == 0  # the persisted cache answers a rebuild


def test_attach_file_keeps_what_the_file_holds(tmp_path):
    from graphstrata.llm import LLMResponse, Usage

    path = tmp_path / CACHE_FILE
    on_disk = ResponseCache(path)
    on_disk.put("a", LLMResponse("from the file", Usage(1, 2, False)))
    on_disk.close()
    mem = ResponseCache()
    mem.put("a", LLMResponse("from memory", Usage(1, 2, False)))
    mem.put("b", LLMResponse("only in memory", Usage(3, 4, True)))
    assert mem.attach_file(path) is True
    assert mem.get("a").text == "from the file" and mem.get("b").text == "only in memory"
    assert mem.attach_file(tmp_path / "other.sqlite") is False
    mem.close()
    assert len(ResponseCache(path)) == 2
