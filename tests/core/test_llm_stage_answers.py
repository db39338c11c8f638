"""Kept answers of the build-time LLM stages besides extraction (issue 29): ArchRAG community
reports (``community_reports:layer_<k>``), HiRAG summary entities (``hirag_summaries``) and
HiRAG community reports (``hirag_reports``) keep their answers with the index
(``LLMAnswers.stages`` / ``owners``, :mod:`graphstrata.llm.records`), so an update without a
response cache asks exactly the prompts an update with the cache asks, and gets the same
index.

The model is :func:`graphstrata.testing.answer_every_prompt` behind a
:class:`~graphstrata.testing.ScriptedLLM`: the tests count calls per stage and compare
indexes, never quality.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from graphstrata import GraphStrata
from graphstrata.structures.hirag import build_hi_index, hi_index
from graphstrata.indexing.reports import ReportContext, community_reports
from graphstrata.llm import CACHE_FILE, LLMClient, LLMOutputError
from graphstrata.llm.base import LLMRequest
from graphstrata.llm.prompts.archrag import EXAMPLE_REPORT_SUMMARY, EXAMPLE_REPORT_TITLE
from graphstrata.llm.records import LLMAnswers, LLMRecord, answer_key, keeping_answers, kept_map
from graphstrata.store import read_sqlite, write_sqlite
from graphstrata.testing import HashEmbedder, ScriptedLLM
from graphstrata.testing import answer_every_prompt as toy

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "cookbook" / "sample_corpus" / "wiki_sample.jsonl"
CONFIG = {"min_communities": 2, "max_community_size": 6, "chunk_size": 120, "chunk_overlap": 16}
AGRAG = {**CONFIG, "llm_extraction": "agrag"}
STAGES = ("community_reports", "hirag_summaries", "hirag_reports")


def _docs(n: int) -> list[dict]:
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f, strict=False)]


def _drop_cache(directory: Path) -> None:
    for p in directory.glob(CACHE_FILE + "*"):
        p.unlink()


def _calls(usage: dict) -> dict[str, int]:
    """Calls per stage (cache misses that reached the model)."""
    return {k: v["calls"] for k, v in usage["stages"].items()}


def _index(gs: GraphStrata) -> dict:
    """What the LLM stages produced: the graph, the communities with their reports, and the
    HiRAG index's summary entities and reports."""
    st = gs.state
    hi = hi_index(st)
    return {
        "entities": {e.id: (e.name, e.description, tuple(e.chunk_ids)) for e in st.kg.entities.values()},
        "relations": {k: (r.description, tuple(r.chunk_ids)) for k, r in st.kg.relations.items()},
        "communities": [
            [(c.id, tuple(c.members), c.title, c.summary, json.dumps(c.findings), c.rating) for c in layer]
            for layer in st.communities
        ],
        "hirag": (list(hi.names), list(hi.descriptions), hi.report_titles, hi.report_texts),
    }


def _community_ids(gs: GraphStrata) -> set[str]:
    return {c.id for layer in gs.state.communities for c in layer}


@pytest.fixture(scope="module", params=[CONFIG, AGRAG], ids=["default", "agrag"])
def built(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("stage-answers") / "index"
    gs = GraphStrata.build(
        _docs(10), config=request.param, embedder=HashEmbedder(), persist_dir=out, llm=ScriptedLLM(toy)
    )
    return gs, out


def _loaded(src: Path, dst: Path, keep_cache: bool) -> GraphStrata:
    shutil.copytree(src, dst)
    if not keep_cache:
        _drop_cache(dst)
    return GraphStrata.load(dst, embedder=HashEmbedder(), llm=ScriptedLLM(toy))


pytestmark = pytest.mark.filterwarnings("ignore:AGRAG triple extraction")  # the toy model states no triple


def test_a_build_keeps_the_answers_of_its_report_and_hirag_stages(built):
    gs, out = built
    answers = gs.state.llm_answers
    assert answers is not None and answers.stages
    assert set(answers.owners) == _community_ids(gs)  # every community's report came from an answer
    assert set(answers.owners.values()) <= set(answers.stages)
    usage = gs.build_usage["stages"]
    asked = sum(v["calls"] + v["cached"] + v.get("kept", 0) for k, v in usage.items() if k.startswith(STAGES))
    assert len(answers.stages) <= asked  # one answer per distinct prompt, no more
    assert all(len(r.answers()) == 1 for r in answers.stages.values())
    loaded = GraphStrata.load(out, embedder=HashEmbedder())
    assert loaded.state.llm_answers == answers


@pytest.mark.parametrize("op", ["insert", "delete"])
def test_an_update_without_the_cache_asks_what_an_update_with_it_asks(built, tmp_path, op):
    """The must-show: cache deleted, the update's calls per stage are those of the same update
    with the cache kept (only prompts that changed are asked), and the index is the same."""
    _, out = built
    runs = {}
    for keep in (True, False):
        gs = _loaded(out, tmp_path / f"cache-{keep}", keep)
        if op == "insert":
            gs.insert([_docs(11)[10]])
        else:
            gs.delete([next(iter(gs.documents))])
        runs[keep] = gs
    with_cache, without = runs[True], runs[False]
    usage = without.state.drift["last_update_usage"]
    assert _calls(usage) == _calls(with_cache.state.drift["last_update_usage"])
    assert _index(without) == _index(with_cache)
    if op == "insert":  # unchanged HiRAG clusters are read back, not asked
        assert usage["stages"]["hirag_summaries"].get("kept", 0) > 0
        assert usage["total"]["kept"] > 0
    assert without.state.llm_answers == with_cache.state.llm_answers
    reloaded = GraphStrata.load(tmp_path / "cache-False", embedder=HashEmbedder())
    assert reloaded.state.llm_answers == without.state.llm_answers


def test_an_update_keeps_only_the_answers_its_index_uses(built, tmp_path):
    """After an insert the kept answers are exactly those of the state's communities (their
    owners) and of its HiRAG index (rebuilt from them without a call); the answers of
    re-described communities and changed HiRAG clusters are gone."""
    _, out = built
    gs = _loaded(out, tmp_path / "index", keep_cache=False)
    before = gs.state.llm_answers
    gs.insert([_docs(11)[10]])
    after = gs.state.llm_answers
    assert set(after.owners) == _community_ids(gs)
    never = ScriptedLLM(toy)
    with keeping_answers(after) as book:
        hi = build_hi_index(dataclasses.replace(gs.state, llm=LLMClient(never)))
    assert not never.calls  # the kept answers rebuild the HiRAG index alone
    assert (hi.names, hi.report_texts) == (hi_index(gs.state).names, hi_index(gs.state).report_texts)
    assert set(after.stages) == set(after.owners.values()) | set(book.used)
    assert set(before.stages) - set(after.stages)  # some answers were no longer used: dropped


def test_a_rebuild_without_the_cache_asks_nothing(built, tmp_path):
    _, out = built
    gs = _loaded(out, tmp_path / "index", keep_cache=False)
    before = _index(gs)
    gs.rebuild()
    usage = gs.build_usage
    assert usage["total"]["calls"] == 0 and usage["total"]["kept"] > 0
    assert _index(gs) == before
    assert gs.state.llm_answers.stages == GraphStrata.load(out, embedder=HashEmbedder()).state.llm_answers.stages


# -- the kept path keeps the guards --------------------------------------------------------------
GARBAGE = "I am sorry, I cannot write that report."
ECHO = json.dumps({"title": EXAMPLE_REPORT_TITLE, "summary": EXAMPLE_REPORT_SUMMARY, "rating": 5})
GOOD = json.dumps({"title": "Babbage's engine", "summary": "Babbage designed the engine.", "rating": 6})


def _contexts(n: int) -> list[ReportContext]:
    return [ReportContext([(f"Entity {i}", "", f"Entity {i} designed engines.")], [], []) for i in range(n)]


def _script(prompt: str, system: str | None) -> str:
    if "Entity 0" in prompt:
        return GARBAGE
    if "Entity 1" in prompt:
        return ECHO
    return GOOD


def test_kept_answers_are_parsed_and_checked_as_the_models_are():
    """Unreadable and echoed answers fall back to the extractive text and count as the same
    failures whether the model wrote them now or the index kept them; the failure share stops
    a stage in both cases."""
    fallbacks = [(f"t{i}", f"s{i}") for i in range(4)]
    model = LLMClient(ScriptedLLM(_script), max_failure_share=1.0)
    with keeping_answers(None) as book:
        asked = community_reports(model, _contexts(4), fallbacks, stage="community_reports:layer_1")
    kept = book.answers(None)
    assert len(kept.stages) == 4 and all(r.answer_key in kept.stages for r in asked)

    silent = ScriptedLLM(_script)
    client = LLMClient(silent, max_failure_share=1.0)
    with keeping_answers(kept):
        again = community_reports(client, _contexts(4), fallbacks, stage="community_reports:layer_1")
    assert not silent.calls
    assert [(r.title, r.summary, r.rating, r.findings) for r in again] == [
        (r.title, r.summary, r.rating, r.findings) for r in asked
    ]
    assert (again[0].title, again[1].title) == ("t0", "t1")  # the fallbacks
    a, b = model.ledger.stages["community_reports:layer_1"], client.ledger.stages["community_reports:layer_1"]
    assert (b.calls, b.kept, b.cached) == (0, 4, 0)
    assert (a.skipped, a.checked, a.failures) == (b.skipped, b.checked, b.failures) == (2, 4, {"parse": 1, "echo": 1})
    strict = LLMClient(ScriptedLLM(_script), max_failure_share=0.25)
    with keeping_answers(kept), pytest.raises(LLMOutputError):
        community_reports(strict, _contexts(4), fallbacks, stage="community_reports:layer_1")
    assert not strict.llm.calls


def test_a_damaged_kept_answer_is_asked_again_and_a_repeated_prompt_once():
    llm = ScriptedLLM(lambda p, s: f"answer to {p}")
    client = LLMClient(llm)
    reqs = [LLMRequest("one"), LLMRequest("two"), LLMRequest("one")]
    key_one = answer_key("hirag_summaries", reqs[0])
    damaged = LLMAnswers(stages={key_one: LLMRecord(key_one, b"not zlib")})
    with keeping_answers(damaged) as book:
        out = kept_map(client, reqs, "hirag_summaries")
    assert [r.text for r, _ in out] == ["answer to one", "answer to two", "answer to one"]
    assert [p for p, _, _ in llm.calls] == ["one", "two"]  # the repeat is answered once
    assert client.ledger.stages["hirag_summaries"].kept == 1
    assert book.used[key_one].answers() == ["answer to one"]  # repaired
    assert answer_key("hirag_summaries", reqs[0]) != answer_key("hirag_reports", reqs[0])
    assert answer_key("community_reports:layer_1", reqs[0]) == answer_key("community_reports:layer_2", reqs[0])
    plain = kept_map(client, reqs[:1], "hirag_summaries")  # no book open: the client alone
    assert plain[0][1] is None and client.ledger.stages["hirag_summaries"].cached == 1


def test_an_index_written_without_the_answer_tables_still_loads(tmp_path):
    path = tmp_path / "g.sqlite"
    rec = LLMRecord.of("k", ["a"])
    write_sqlite(path, {}, [], [], [], [], [], llm_answers=LLMAnswers({}, {"s": "x"}, {"k": rec}, {"L1C0": "k"}))
    data = read_sqlite(path)
    assert data["llm_answers"] == [("k", rec.packed)] and data["llm_answer_owners"] == [("L1C0", "k")]
    con = sqlite3.connect(path)
    con.execute("DROP TABLE llm_answers")
    con.execute("DROP TABLE llm_answer_owners")
    con.commit()
    con.close()
    data = read_sqlite(path)
    assert data["llm_answers"] == [] and data["llm_answer_owners"] == []
