"""`make demo`: index the sample corpus, then answer three questions through the CLI,
LlamaIndex and LangChain — offline, no API key.

Run from the repository root with the project's virtual environment:
``.venv/bin/python cookbook/demo.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "sample_corpus" / "wiki_sample.jsonl"
INDEX = HERE.parent / "demo_index"
QUESTIONS = [
    "Who assassinated the 20th President of the United States?",
    "Which peak stands higher, Muztagh Ata or Manaslu?",
    "Both Never Cry Wolf and Big Hero 6 films were released by what label?",
]
CLI = [str(Path(sys.executable).with_name("graphstrata"))]


def banner(text: str) -> None:
    print(f"\n{'=' * 78}\n{text}\n{'=' * 78}", flush=True)


def run_cli() -> None:
    banner("1. CLI: graphstrata index + graphstrata query")
    shutil.rmtree(INDEX, ignore_errors=True)
    subprocess.run([*CLI, "index", str(CORPUS), "--out", str(INDEX)], check=True)
    for q in QUESTIONS:
        print(f"\n$ graphstrata query demo_index {json.dumps(q)} -k 3")
        subprocess.run([*CLI, "query", str(INDEX), q, "-k", "3"], check=True)


def run_llama_index() -> None:
    banner("2. LlamaIndex: GraphStrataRetriever inside a RetrieverQueryEngine")
    from llama_index.core import Settings
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.retrievers.graphstrata import GraphStrataRetriever

    # a placeholder LLM (emits 16 filler tokens); swap in any LlamaIndex LLM for real answers
    Settings.llm = MockLLM(max_tokens=16)
    retriever = GraphStrataRetriever.from_persist_dir(str(INDEX), method="archrag", similarity_top_k=3)
    engine = RetrieverQueryEngine.from_args(retriever)
    for q in QUESTIONS:
        response = engine.query(q)
        print(f"\nQ: {q}")
        for n in response.source_nodes:
            text = " ".join(n.node.get_content().split())[:90]
            ids = n.node.metadata.get("document_ids") or []
            where = ",".join(ids[:2]) + (f" +{len(ids) - 2}" if len(ids) > 2 else "")
            print(f"  {n.node.metadata.get('kind'):<9} {n.score:6.3f}  [{where}]  {text}")


def run_langchain() -> None:
    banner("3. LangChain: GraphStrataRetriever in an LCEL chain")
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_graphstrata import GraphStrataRetriever

    retriever = GraphStrataRetriever(index_dir=str(INDEX), method="archrag", k=3, include_scores=True)
    for q in QUESTIONS:
        docs = retriever.invoke(q)
        print(f"\nQ: {q}")
        for d in docs:
            text = " ".join(d.page_content.split())[:90]
            print(f"  {d.metadata['score']:6.3f}  {d.metadata['document_ids']}  {text}")
    # the same retriever inside a chain; a scripted chat model stands in for your LLM
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    chat_model = FakeListChatModel(responses=["(your chat model's answer would appear here)"])
    chain = (
        {"context": retriever | (lambda ds: "\n\n".join(d.page_content for d in ds)),
         "question": RunnablePassthrough()}
        | prompt
        | chat_model
        | StrOutputParser()
    )
    print("\nLCEL chain output:", chain.invoke(QUESTIONS[0]))


if __name__ == "__main__":
    run_cli()
    run_llama_index()
    run_langchain()
    print("\ndemo finished: index in", INDEX)
