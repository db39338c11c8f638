"""Bring your own LLM: the papers' LLM steps at build time and at answer time, with their cost.

What it shows, on a slice of the sample corpus (``--pages``, default 12 Wikipedia pages):

1. ``GraphStrata.build(docs, persist_dir=..., llm=my_llm)``: LLM extraction (typed entities,
   described relations), community reports, HiRAG summary entities; ``gs.build_usage``: calls
   and tokens per stage;
2. the same build again: every response comes from the cache in ``DIR/llm-cache.sqlite``,
   zero calls;
3. ``GraphStrata.load(dir, llm=my_llm)`` and ``gs.answer(question, method=...)`` for every
   method: ``Answer.text``, ``Answer.hits`` (what the answer was generated from) and
   ``Answer.usage`` (this question's calls and tokens, per stage);
4. the framework adapters over the same index: LlamaIndex
   ``GraphStrataIndex.load(dir, llm=...).as_query_engine(response_mode="method")`` and LangChain
   ``GraphStrataRetriever(index_dir=..., llm=...).as_answer_chain()``, first with ``my_llm``,
   then with each framework's own model class (``MockLLM``, ``FakeListChatModel``) wrapped by
   the packages' ``LlamaIndexLLM`` / ``ChatModelLLM``.

``my_llm`` is where your model goes: any ``str -> str`` function (sync or async; one with a
``system`` keyword gets the system prompt apart), a LlamaIndex ``LLM`` or a LangChain chat model.
Here it calls ``offline_stand_in``, which is **not a model**: it answers each kind of prompt
graphstrata sends in the format that prompt asks for, from the words of the prompt
(capitalised names as entities, the sentence sharing most words with the question as the
answer), so that this script runs offline in seconds. Its answers show the plumbing, not the
quality of an LLM.

Run from the repository root (well under a minute)::

    .venv/bin/python cookbook/bring_your_llm.py [--workdir DIR] [--pages N]

Everything it writes goes under ``--workdir`` (default: a new temporary directory).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "sample_corpus" / "wiki_sample.jsonl"
QUESTIONS = HERE / "sample_corpus" / "questions.jsonl"


# -------------------------------------------------------------------------- your model goes here
def my_llm(prompt: str, system: str | None = None) -> str:
    """Your LLM. Replace the body with a call to your model, e.g.
    ``return client.chat.completions.create(model=..., messages=[...]).choices[0].message.content``."""
    return offline_stand_in(prompt, system)


# -------------------------------------------------------------------------- the offline stand-in
_NAME = re.compile(r"\b[A-Z][\w'’.-]*[a-z][\w'’.-]*(?:\s+(?:of |de |the |von |van )?[A-Z][\w'’.-]*[a-z][\w'’.-]*)*")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "the a an of in on at to for by with from and or is was were are be been what which who whom whose when "
    "where why how did does do that this these those it its as than then both also he she they his her their "
    "there after before during january february march april may june july august september october november "
    "december".split()
)
_TYPES = (
    ("organization", ("University", "College", "School", "Company", "Records", "Pictures", "Studios", "Party",
                      "Club", "Team", "Inc", "Corporation", "Disney", "Association", "Council", "Navy", "Army")),
    ("event", ("War", "Battle", "Championship", "Olympics", "Bowl", "Cup", "Season", "Festival", "Election")),
    ("geo", ("River", "Mountain", "Mount", "Lake", "Island", "County", "City", "Province", "State", "Kingdom",
             "Republic", "Valley", "Peak", "Range", "Sea", "Ocean", "Australia", "England", "China", "Nepal")),
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


def _sentences(text: str) -> list[str]:
    """Sentences of ``text``, also split at table cells; a leading ``"name: "`` label dropped."""
    parts = re.split(r"(?<=[.!?])\s+|\n+|\"?,\t\"?", text)
    out = [re.sub(r"^[\s\"'\[\]()\d,|-]*(?:[^:\n]{1,40}: )?", "", p).strip(" \"") for p in parts]
    return [p for p in out if len(p) > 20]


def _best_sentence(context: str, question: str) -> str:
    """The sentence of ``context`` sharing the most words with ``question``."""
    q = _words(question)
    return max(_sentences(context), key=lambda s: len(q & _words(s)), default="I don't know.")[:300]


def _names(text: str) -> list[str]:
    """Capitalised spans, without a leading function word or month ("The", "In", "March")."""
    out = []
    for span in _NAME.findall(text):
        words = span.split()
        while words and words[0].lower() in _STOP:
            words = words[1:]
        if words:
            out.append(" ".join(words))
    return list(dict.fromkeys(out))


def _table_names(prompt: str, table: str) -> list[str]:
    """The names in the second column of a ``-----<table>-----`` CSV table of a prompt."""
    section = prompt.split(f"-----{table}-----", 1)[-1].split("-----", 1)[0]
    section = section.replace("```csv", "").replace("```", "").strip()
    return [row[1].strip() for row in list(csv.reader(io.StringIO(section)))[1:] if len(row) > 1]


def _entity_type(name: str) -> str:
    for etype, cues in _TYPES:
        if any(c in name for c in cues):
            return etype
    return "person" if 2 <= len(name.split()) <= 3 else "concept"


def _after(text: str, marker: str, end: str | None = None) -> str:
    part = text.rsplit(marker, 1)[-1]
    return part.split(end, 1)[0].strip() if end else part.strip()


def offline_stand_in(prompt: str, system: str | None) -> str:
    """Answer one graphstrata prompt in the format it asks for, without a model (see above)."""
    from graphstrata.llm.prompts import (
        agrag,
        agrag_query,
        archrag,
        archrag_answer,
        hirag,
        lightrag_query,
    )
    from graphstrata.llm.prompts import lightrag_extract as lx

    system = system or ""
    d = lx.TUPLE_DELIMITER
    if system == lx.EXTRACT_SYSTEM:  # LightRAG-style records: entities, then relationships
        if prompt.rstrip().endswith(lx.CONTINUE_QUESTION):
            return "NO"  # no gleaning pass needed
        if prompt.rstrip().endswith(lx.GLEANING_INSTRUCTION):
            return lx.COMPLETION_DELIMITER
        text = _after(prompt, "Text:", "Output:")
        records = []
        for sentence in _sentences(text):
            names = _names(sentence)[:5]
            records += [f'("entity"{d}{n}{d}{_entity_type(n)}{d}{n}: {sentence})' for n in names]
            records += [f'("relationship"{d}{a}{d}{b}{d}{sentence}{d}co-occurrence{d}5)'
                        for a, b in zip(names, names[1:], strict=False)]
        return lx.RECORD_DELIMITER.join(records[:40]) + lx.RECORD_DELIMITER + lx.COMPLETION_DELIMITER
    if system == lx.SUMMARY_SYSTEM:  # merge descriptions: keep the first
        return _sentences(prompt.split("\n", 1)[-1])[0] if _sentences(prompt) else "A description."
    if system == archrag.COMMUNITY_REPORT_SYSTEM:
        names = _table_names(prompt, "Entities")[:3] or ["Community"]
        return json.dumps({
            "title": ", ".join(names), "summary": f"Entities related to {', '.join(names)}.", "rating": 5,
            "rating_explanation": "A stand-in rating.",
            "findings": [{"summary": f"{n} is a member.", "explanation": f"{n} appears in the tables."}
                         for n in names],
        })
    if system == hirag.SUMMARY_ENTITY_SYSTEM:
        members = re.findall(r'^\("([^"]+)"', prompt.rsplit("Real data", 1)[-1], re.M)
        theme = f"Theme of {members[0]}" if members else "Common theme"
        return f'("entity"{d}{theme}{d}normal_entity{d}What {", ".join(members[:4])} have in common.)\n<|COMPLETE|>'
    if system == lightrag_query.KEYWORDS_SYSTEM:
        question = _after(prompt, "Question:", "Output:")
        return json.dumps({"high_level_keywords": sorted(_words(question))[:3],
                           "low_level_keywords": _names(question)[:4]})
    if system == agrag_query.FILTER_SYSTEM:  # keep the candidate facts that share words with the question
        question = _after(prompt, "Question:", "\n")
        facts = [json.loads(f) for f in re.findall(r"^\s*(\[\"[^\n]*?\"\])", prompt, re.M)]
        keep = [f for f in facts if _words(question) & _words(" ".join(map(str, f)))][:5]
        return json.dumps({"fact": keep})
    if system == agrag.TRIPLES_SYSTEM:
        return "[]"
    if system == archrag_answer.FILTER_SYSTEM:  # one scored point per layer, from the best row
        question = _after(prompt, "Question:", "\n")
        tables = _after(prompt, "Data tables:", "List the key points")
        point = _best_sentence(tables, question)
        return json.dumps({"points": [{"description": f"{point} [Data: Entities (0)]", "score": 60}]})
    if system == archrag_answer.MERGE_SYSTEM:
        question = _after(prompt, "Question:", "\n")
        return _best_sentence(_after(prompt, "Analyst reports:", "Answer:"), question)
    if system.startswith(agrag_query.ANSWER_SYSTEM[:60]):
        question = _after(prompt, "Question:", "Thought:")
        return f"Thought: the passages say so.\nAnswer: {_best_sentence(prompt.rsplit('Question:', 1)[0], question)}"
    if "answer" in system.lower():  # the answer prompts of lightrag, hirag and the baselines
        return _best_sentence(system, prompt)
    return "I don't know."


# -------------------------------------------------------------------------- the walk-through
def load_slice(n_pages: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The first ``n_pages`` pages, plus the questions whose evidence all lies in them."""
    with open(CORPUS, encoding="utf-8") as f:
        pages = [json.loads(line) for line in f if line.strip()]
    with open(QUESTIONS, encoding="utf-8") as f:
        questions = [json.loads(line) for line in f if line.strip()]
    # take the evidence pages of the first questions first, so the slice can answer them
    order = [p for q in questions for p in q["evidence_ids"]]
    by_id = {p["id"]: p for p in pages}
    chosen = list(dict.fromkeys([*order, *by_id]))[:n_pages]
    docs = [by_id[i] for i in chosen if i in by_id]
    answerable = [q for q in questions if set(q["evidence_ids"]) <= set(chosen)]
    return docs, answerable


def print_usage(usage: dict[str, Any], indent: str = "  ") -> None:
    rows = [*usage.get("stages", {}).items(), ("total", usage.get("total", {}))]
    print(f"{indent}{'stage':<26}{'calls':>6}{'cached':>7}{'prompt tok':>11}{'compl. tok':>11}")
    for stage, u in rows:
        est = "~" if u.get("estimated") else " "
        print(f"{indent}{stage:<26}{u.get('calls', 0):>6}{u.get('cached', 0):>7}"
              f"{est}{u.get('prompt_tokens', 0):>10}{est}{u.get('completion_tokens', 0):>10}")


def short(text: str, n: int = 100) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--pages", type=int, default=12, help="pages of the sample corpus to index (default 12)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="graphstrata-cookbook-"))
    workdir.mkdir(parents=True, exist_ok=True)
    index_dir = workdir / "llm_index"

    from graphstrata import GraphStrata, GraphStrataConfig

    docs, questions = load_slice(args.pages)
    config = GraphStrataConfig(llm_concurrency=4, llm_gleaning=1)  # the defaults, spelled out
    print(f"== 1. build {len(docs)} pages with an LLM ==")
    t0 = time.perf_counter()
    gs = GraphStrata.build(docs, config=config, persist_dir=index_dir, llm=my_llm)
    print(f"built in {time.perf_counter() - t0:.1f} s: {gs}")
    types: dict[str, int] = {}
    for e in gs.kg.entities.values():
        types[e.type or "(none)"] = types.get(e.type or "(none)", 0) + 1
    print(f"entity types from the LLM: {dict(sorted(types.items(), key=lambda kv: -kv[1]))}")
    report = gs.communities[0][0]
    print(f"a community report: {report.title!r} (rating {report.rating}): {short(report.summary, 80)}")
    print("gs.build_usage (~: estimated, the function reports no token counts):")
    print_usage(gs.build_usage)

    print("\n== 2. the same build again: answered from DIR/llm-cache.sqlite ==")
    again = GraphStrata.build(docs, config=config, persist_dir=index_dir, llm=my_llm)
    total = again.build_usage["total"]
    print(f"calls {total['calls']}, cached {total['cached']}")

    print("\n== 3. GraphStrata.load(dir, llm=my_llm) and gs.answer(question, method=...) ==")
    gs = GraphStrata.load(index_dir, llm=my_llm)
    question = questions[0]
    print(f"Q: {question['question']}  (gold: {question['answer']})")
    for method in gs.methods:
        ans = gs.answer(question["question"], method=method, k=3)
        used = ans.usage["total"]
        kinds = sorted({h.kind for h in ans.hits})
        print(f"  {method:<8} {used['calls']} calls ({used['cached']:>2} cached), {used['prompt_tokens']:>5} prompt "
              f"tokens, {len(ans.hits):>2} hits ({', '.join(kinds)}): {short(ans.text, 60)}")
    ans = gs.answer(question["question"], method="archrag", k=3)
    print("archrag asked again: per-stage usage of this question")
    print_usage(ans.usage)

    print("\n== 4a. LlamaIndex: GraphStrataIndex.load(dir, llm=...) + as_query_engine(response_mode='method') ==")
    from llama_index.core.llms import MockLLM
    from llama_index.graph_rag.graphstrata import GraphStrataIndex, LlamaIndexLLM

    index = GraphStrataIndex.load(index_dir, llm=my_llm)
    engine = index.as_query_engine(response_mode="method", method="lightrag", similarity_top_k=3)
    response = engine.query(question["question"])
    print(f"lightrag: {short(response.response, 90)}")
    print(f"  {len(response.source_nodes)} source nodes, usage {response.metadata['usage']['total']}")
    # a LlamaIndex LLM class (MockLLM echoes placeholder tokens), wrapped in LlamaIndexLLM
    engine = index.as_query_engine(response_mode="method", method="dense", llm=MockLLM(max_tokens=6))
    print(f"dense with MockLLM: {short(engine.query(question['question']).response, 60)!r}; "
          f"the wrapper: {LlamaIndexLLM(MockLLM())!r}")

    print("\n== 4b. LangChain: GraphStrataRetriever(index_dir=..., llm=...).as_answer_chain() ==")
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_graphstrata import ChatModelLLM, GraphStrataRetriever

    retriever = GraphStrataRetriever(index_dir=str(index_dir), method="hirag", k=3, llm=my_llm)
    out = retriever.as_answer_chain().invoke(question["question"])
    print(f"hirag: {short(out['answer'], 90)}")
    print(f"  {len(out['context'])} context Documents, usage {out['usage']['total']}")
    chat = FakeListChatModel(responses=["(your chat model's answer)"])  # a LangChain chat model class
    out = retriever.as_answer_chain(llm=chat).invoke({"question": question["question"]}, method="dense")
    print(f"dense with FakeListChatModel: {out['answer']!r}; the wrapper: {ChatModelLLM(chat)!r}")
    print(f"\nbring_your_llm finished; files in {workdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
