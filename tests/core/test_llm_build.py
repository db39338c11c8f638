"""The LLM path end to end through GraphStrata (issue 13) with a scripted model.

``toy`` (:func:`graphstrata.testing.answer_every_prompt`) answers every prompt family in its
expected format (entity / relationship records made of the chunk's capitalised words, JSON
community reports, summary-entity records, keywords, scored points, answers). It tests control flow, persistence, caching and cost
accounting — never quality.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from graphstrata import GraphStrata
from graphstrata.cli import main
from graphstrata.llm import LLMError
from graphstrata.llm.prompts import agrag as agrag_triples
from graphstrata.llm.prompts import (
    archrag,
    lightrag_query,
)
from graphstrata.llm.prompts import lightrag_extract as lx
from graphstrata.testing import HashEmbedder, ScriptedLLM
from graphstrata.testing import answer_every_prompt as toy

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "cookbook" / "sample_corpus" / "wiki_sample.jsonl"
CONFIG = {"min_communities": 2, "max_community_size": 6, "chunk_size": 120, "chunk_overlap": 16}
_NAME = re.compile(r"\b[A-Z][a-z]{3,}\b")


def _docs(n: int = 10) -> list[dict]:
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f, strict=False)]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("llm") / "index"
    llm = ScriptedLLM(toy, usage=True)
    gs = GraphStrata.build(_docs(), config=CONFIG, embedder=HashEmbedder(), persist_dir=out, llm=llm)
    return gs, out, llm


def test_llm_build_makes_a_typed_graph_with_reports_and_counts_its_cost(built):
    gs, out, llm = built
    types = {e.type for e in gs.kg.entities.values()}
    assert types == {"person", "geo"}
    assert all(r.keywords == "co-mention" for r in gs.kg.relations.values())
    layer1 = gs.communities[0]
    assert layer1 and all(c.rating == 6.0 and c.title.startswith("Community ") for c in layer1)
    assert all(c.findings == [{"summary": "Co-mentions", "explanation": "They share passages."}] for c in layer1)
    usage = gs.build_usage
    stages = usage["stages"]
    assert stages["extract"]["calls"] == len(gs.chunks)
    assert stages["community_reports:layer_1"]["calls"] == len(layer1)
    assert stages["hirag_summaries"]["calls"] >= 1
    assert stages["hirag_reports"]["calls"] >= 1  # one report per HiRAG Leiden community (spec §2.7)
    assert usage["total"]["calls"] == len(llm.calls)
    assert not usage["total"]["estimated"]  # ScriptedLLM(usage=True) reports real usage
    assert usage["total"]["prompt_tokens"] > 0
    assert (out / "llm-cache.sqlite").is_file()


def test_llm_records_and_usage_survive_persist_and_load(built):
    gs, out, _ = built
    again = GraphStrata.load(out, embedder=HashEmbedder())
    assert {e.id: e.type for e in again.kg.entities.values()} == {e.id: e.type for e in gs.kg.entities.values()}
    assert [r.keywords for r in again.kg.relations.values()] == [r.keywords for r in gs.kg.relations.values()]
    assert [(c.rating, c.findings) for c in again.communities[0]] == [(c.rating, c.findings) for c in gs.communities[0]]
    assert again.build_usage == gs.build_usage
    assert again.llm is None  # no LLM given to load: retrieval runs offline


def test_rebuild_with_the_cache_makes_zero_calls(built, tmp_path):
    gs, out, _ = built
    fresh = ScriptedLLM(toy, usage=True)
    again = GraphStrata.build(_docs(), config=CONFIG, embedder=HashEmbedder(), persist_dir=out, llm=fresh)
    assert fresh.calls == []
    assert again.build_usage["total"]["calls"] == 0
    # every request of the first build is answered from the cache (the first build itself may
    # have had cache hits: two HiRAG communities with the same members' text ask the same report)
    first = gs.build_usage["total"]
    assert again.build_usage["total"]["cached"] == first["calls"] + first["cached"]
    assert sorted(again.kg.entities) == sorted(gs.kg.entities)


def test_interrupted_build_resumes_without_paying_twice(tmp_path):
    out = tmp_path / "index"
    n_fail = [0]

    def flaky(prompt, system):
        if system == archrag.COMMUNITY_REPORT_SYSTEM:
            n_fail[0] += 1
            raise KeyError("the model went away")  # permanent: no retry
        return toy(prompt, system)

    first = ScriptedLLM(flaky)
    with pytest.raises(LLMError, match="community_reports"):
        GraphStrata.build(_docs(6), config=CONFIG, embedder=HashEmbedder(), persist_dir=out, llm=first)
    extract_calls = sum(1 for _, s, _ in first.calls if s == lx.EXTRACT_SYSTEM)
    assert extract_calls > 0 and n_fail[0] > 0
    second = ScriptedLLM(toy)
    gs = GraphStrata.build(_docs(6), config=CONFIG, embedder=HashEmbedder(), persist_dir=out, llm=second)
    assert not any(s == lx.EXTRACT_SYSTEM for _, s, _ in second.calls)  # extraction all cached
    stages = gs.build_usage["stages"]
    assert sum(u["cached"] for name, u in stages.items() if name.startswith("extract")) == extract_calls
    assert stages["community_reports:layer_1"]["calls"] > 0  # what failed is paid for now


def test_answer_uses_each_methods_generation_and_reports_per_query_usage(built):
    gs, out, _ = built
    llm = ScriptedLLM(toy)
    loaded = GraphStrata.load(out, embedder=HashEmbedder(), llm=llm)
    expected = {"archrag": "Toy merged answer.", "agrag": "Toy answer."}
    for method in ("archrag", "lightrag", "hirag", "agrag", "dense", "bm25", "hybrid"):
        before = len(llm.calls)
        ans = loaded.answer("Who is named in the sample pages?", method=method, k=3)
        assert ans.text == expected.get(method, "Toy answer."), method
        assert ans.hits, method
        calls = ans.usage["total"]["calls"] + ans.usage["total"]["cached"]
        assert calls == len(llm.calls) - before + ans.usage["total"]["cached"], method
        assert calls >= 1
    ans = loaded.answer("Who is named in the sample pages?", method="lightrag", k=3)
    assert "query:keywords" in ans.usage["stages"] and "answer" in ans.usage["stages"]
    ans = loaded.answer("Who is named in the sample pages?", method="archrag", k=3)
    assert set(ans.usage["stages"]) >= {"answer:filter", "answer:merge"}


def test_updates_of_an_llm_index_need_its_llm(built, tmp_path):
    gs, out, _ = built
    offline = GraphStrata.load(out, embedder=HashEmbedder())
    with pytest.raises(ValueError, match="built with the LLM 'scripted'.*llm="):
        offline.insert([{"id": "new", "text": "Grace Hopper wrote compilers in Philadelphia."}])
    with pytest.raises(ValueError, match="load it with llm="):
        offline.delete(next(iter(gs.documents)))
    assert GraphStrata.load(out, embedder=HashEmbedder()).state.stats() == gs.state.stats()  # nothing changed


def test_insert_into_an_llm_index_pays_only_for_the_new_chunks(tmp_path):
    out = tmp_path / "index"
    GraphStrata.build(_docs(5), config=CONFIG, embedder=HashEmbedder(), persist_dir=out, llm=ScriptedLLM(toy))
    llm = ScriptedLLM(toy)
    gs = GraphStrata.load(out, embedder=HashEmbedder(), llm=llm)
    gs.insert([{"id": "new", "text": "Grace Hopper wrote the Flowmatic compiler in Philadelphia."}])
    extract_prompts = [p for p, s, _ in llm.calls if s == lx.EXTRACT_SYSTEM and "Output:" in p[-10:]]
    assert len(extract_prompts) == 1 and "Grace Hopper" in extract_prompts[0]
    assert gs.kg.entities["hopper"].type in ("person", "geo")
    assert GraphStrata.load(out, embedder=HashEmbedder()).state.stats() == gs.state.stats()


def test_attach_llm_enables_answers_and_detach_turns_them_off(built):
    gs, out, _ = built
    loaded = GraphStrata.load(out, embedder=HashEmbedder())
    llm = ScriptedLLM(toy)
    loaded.attach_llm(llm)
    assert loaded.answer("Who is named?", method="dense", k=2).text == "Toy answer." and llm.calls
    loaded.attach_llm(None)
    with pytest.raises(ValueError, match="needs an LLM"):
        loaded.answer("Who is named?", method="dense")


def test_statistical_extraction_with_an_llm_keeps_the_offline_graph_and_adds_reports():
    cfg = {**CONFIG, "llm_extraction": "statistical"}
    offline = GraphStrata.build(_docs(6), config=CONFIG, embedder=HashEmbedder())
    llm = ScriptedLLM(toy)
    gs = GraphStrata.build(_docs(6), config=cfg, embedder=HashEmbedder(), llm=llm)
    assert sorted(gs.kg.entities) == sorted(offline.kg.entities)
    assert sorted(gs.kg.relations) == sorted(offline.kg.relations)
    assert not any(s == lx.EXTRACT_SYSTEM for _, s, _ in llm.calls)
    assert all(c.rating == 6.0 for c in gs.communities[0])


def test_answer_without_an_llm_is_a_clear_error(built):
    gs, out, _ = built
    offline = GraphStrata.load(out, embedder=HashEmbedder())
    with pytest.raises(ValueError, match="needs an LLM"):
        offline.answer("anything")
    with pytest.raises(ValueError, match="unknown method"):
        offline.answer("anything", method="nope", llm=ScriptedLLM(toy))


def test_retrieval_calls_an_llm_only_where_the_method_needs_one(built):
    gs, out, _ = built
    llm = ScriptedLLM(toy)
    loaded = GraphStrata.load(out, embedder=HashEmbedder(), llm=llm)
    for method in ("archrag", "hirag", "dense", "bm25", "hybrid"):
        loaded.retrieve("Who is named?", method=method, k=3)
    assert llm.calls == []
    loaded.retrieve("Who is named?", method="lightrag", k=3)
    assert [s for _, s, _ in llm.calls] == [lightrag_query.KEYWORDS_SYSTEM]


def test_build_refuses_a_foreign_directory_before_any_llm_call(tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    llm = ScriptedLLM(toy)
    with pytest.raises(FileExistsError):
        GraphStrata.build(_docs(3), config=CONFIG, embedder=HashEmbedder(), persist_dir=foreign, llm=llm)
    assert llm.calls == [] and sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_agrag_extraction_keeps_statistical_entities(tmp_path):
    def triples(prompt, system):
        if system == agrag_triples.TRIPLES_SYSTEM:
            return "no triples here, sorry"
        return toy(prompt, system)

    cfg = {**CONFIG, "llm_extraction": "agrag", "llm_community_reports": False}
    offline = GraphStrata.build(_docs(6), config={**CONFIG}, embedder=HashEmbedder())
    with pytest.warns(UserWarning, match="no usable triple for 8 chunk"):
        gs = GraphStrata.build(_docs(6), config=cfg, embedder=HashEmbedder(), llm=ScriptedLLM(triples))
    assert sorted(gs.kg.entities) == sorted(offline.kg.entities)
    assert gs.build_usage["stages"]["extract:triples"]["calls"] == len(gs.chunks)
    assert all(c.rating is None for layer in gs.communities for c in layer)


# -- CLI ---------------------------------------------------------------------------------------


def _llm_module(tmp_path, monkeypatch):
    (tmp_path / "toy_llm_factory.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_llm_build import toy\n"
        "from graphstrata.testing import ScriptedLLM\n"
        "def make():\n    return ScriptedLLM(toy)\n"
        "def broken():\n    raise RuntimeError('no key')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_cli_llm_argument_errors_name_the_flag(tmp_path, monkeypatch, capsys):
    _llm_module(tmp_path, monkeypatch)
    (tmp_path / "d.txt").write_text("Ada Lovelace met Charles Babbage in London.")
    for spec, msg in [
        ("nocolon", "expected MODULE:FACTORY"),
        ("no_such_module_xyz:make", "cannot import"),
        ("toy_llm_factory:missing", "no callable 'missing'"),
        ("toy_llm_factory:broken", "broken() failed: RuntimeError: no key"),
    ]:
        assert main(["index", str(tmp_path / "d.txt"), "--out", str(tmp_path / "o"), "--llm", spec]) == 2
        err = capsys.readouterr().err
        assert f"--llm {spec}" in err and msg in err, err
    assert main(["eval", str(tmp_path / "o"), "--questions", "q.jsonl", "--answers"]) == 2
    assert "--answers needs --llm" in capsys.readouterr().err


def test_cli_query_with_llm_prints_the_answer_and_tokens(built, tmp_path, monkeypatch, capsys):
    gs, out, _ = built
    _llm_module(tmp_path, monkeypatch)
    monkeypatch.setattr("graphstrata.models.default_embedder", lambda: HashEmbedder())
    monkeypatch.setattr("graphstrata.api.default_embedder", lambda: HashEmbedder())
    from graphstrata.models import MiniLMEmbedder

    monkeypatch.setattr(MiniLMEmbedder, "id", HashEmbedder().id)
    rc = main(["query", str(out), "Who is named?", "--method", "lightrag", "--llm", "toy_llm_factory:make"])
    text = capsys.readouterr().out
    assert rc == 0
    assert text.startswith("Toy answer.")
    assert "query:keywords" in text and "answer" in text and "total" in text
    assert "~" in text  # ScriptedLLM(toy) reports no usage: estimates are marked


def test_cli_index_with_llm_prints_costs_and_dry_run_spends_nothing(tmp_path, monkeypatch, capsys):
    _llm_module(tmp_path, monkeypatch)
    monkeypatch.setattr("graphstrata.models.default_embedder", lambda: HashEmbedder())
    monkeypatch.setattr("graphstrata.api.default_embedder", lambda: HashEmbedder())
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in _docs(6)), encoding="utf-8")
    out = tmp_path / "idx"
    assert main(["index", str(corpus), "--out", str(out), "--llm", "toy_llm_factory:make", "--dry-run",
                 "--chunk-size", "120", "--chunk-overlap", "16"]) == 0
    text = capsys.readouterr().out
    assert "dry run: no LLM called" in text and not out.exists()
    n_chunks = int(re.search(r"(\d+) chunks", text).group(1))
    row = next(line for line in text.splitlines() if line.strip().startswith("extract "))
    assert int(re.search(r"calls\s+(\d+)", row).group(1)) == n_chunks  # one extraction call per chunk
    assert "community_reports (projected)" in text
    assert main(["index", str(corpus), "--out", str(out), "--llm", "toy_llm_factory:make", "--quiet",
                 "--chunk-size", "120", "--chunk-overlap", "16"]) == 0
    text = capsys.readouterr().out
    assert "LLM calls and tokens by stage" in text and re.search(r"extract\s+calls\s+" + str(n_chunks), text)
    assert (out / "llm-cache.sqlite").is_file()
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "LLM scripted" in text and "entity types  person" in text
    assert re.search(r"extract\s+calls\s+" + str(n_chunks), text)


def test_llm_insert_extracts_only_new_chunks_and_delete_removes_their_graph(tmp_path):
    """On the LLM path (issue 16), an insert pays extraction calls for the new chunks only (the
    response cache answers the rest), reports only for touched communities, and a delete
    leaves nothing the deleted document alone supported."""
    docs = _docs(12)
    llm = ScriptedLLM(toy, usage=True)
    gs = GraphStrata.build(docs[:10], config=CONFIG, embedder=HashEmbedder(), persist_dir=tmp_path / "i", llm=llm)
    calls_before = len(llm.calls)
    n_reports = sum(len(layer) for layer in gs.communities)
    gs.insert(docs[10:])
    new_calls = llm.calls[calls_before:]
    new_chunks = [c for c in gs.chunks if c.document_id in {d["id"] for d in docs[10:]}]
    extraction = [c for c in new_calls if c[1] == lx.EXTRACT_SYSTEM and "Text: " in c[0]]
    first_pass = [c for c in extraction if not c[0].rstrip().endswith((lx.CONTINUE_QUESTION, lx.GLEANING_INSTRUCTION))]
    assert len(first_pass) == len(new_chunks)  # cached chunks were not asked again
    reports = [c for c in new_calls if c[1] == archrag.COMMUNITY_REPORT_SYSTEM]
    assert 0 < len(reports) < n_reports + 5  # touched communities only, not the whole hierarchy
    new_names = {n for c in new_chunks for n in _NAME.findall(c.text)}
    assert any(gs.kg.entities[e].name in new_names for e in gs.kg.entities)
    assert gs.state.drift["updates"] == 1
    gone = {d["id"] for d in docs[10:]}
    gs.delete(sorted(gone))
    live = set(gs.chunk_row)
    assert all(set(e.chunk_ids) <= live and e.chunk_ids for e in gs.kg.entities.values())
    assert all(set(r.chunk_ids) <= live and r.chunk_ids for r in gs.kg.relations.values())
    reloaded = GraphStrata.load(tmp_path / "i", embedder=HashEmbedder(), llm=ScriptedLLM(toy))
    assert set(reloaded.documents) == {d["id"] for d in docs[:10]}
