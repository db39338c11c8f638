"""LangChain quickstart: GraphStrataRetriever over the sample corpus, alone and inside an LCEL
RAG chain — offline, no API key.

What it shows:

1. the index: built from LangChain ``Document``s with ``GraphStrataRetriever.from_documents``
   (persisted to ``--index-dir``), or opened with ``GraphStrataRetriever(index_dir=...)`` when
   that directory already holds one (so a second run starts in seconds);
2. ``retriever.invoke(question)``: at most ``k`` chunk Documents with scores in [0, 1] and the
   Wikipedia page ids they came from; ``kinds=None`` adds the graph context (entities,
   relations, community summaries);
3. the retriever in an LCEL chain ``{context, question} | prompt | chat model | parser``; the
   chat model is LangChain's ``FakeListChatModel`` (a scripted reply): put your own there;
4. ``search_type="similarity_score_threshold"`` and a metadata ``filter``, as on a vector store
   retriever.

Run from the repository root (about a minute the first time, most of it embedding)::

    .venv/bin/python cookbook/quickstart_langchain.py [--workdir DIR] [--index-dir DIR]

Everything it writes goes under ``--workdir`` (default: a new temporary directory); the index
goes to ``--index-dir`` (default ``WORKDIR/index``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "sample_corpus" / "wiki_sample.jsonl"
QUESTIONS = [
    "Who assassinated the 20th President of the United States?",
    "Both Never Cry Wolf and Big Hero 6 films were released by what label?",
]


def load_corpus(path: Path):
    """The JSONL pages as LangChain Documents (page id as ``Document.id``)."""
    from langchain_core.documents import Document

    docs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                docs.append(Document(id=rec["id"], page_content=f"{rec['title']}\n{rec['text']}",
                                     metadata={"title": rec["title"]}))
    return docs


def short(text: str, n: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--index-dir", type=Path, default=None,
                        help="index directory: opened if it holds an index, else built there (default WORKDIR/index)")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="JSONL pages {id, title, text}")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="graphstrata-cookbook-"))
    workdir.mkdir(parents=True, exist_ok=True)
    index_dir = args.index_dir or workdir / "index"

    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_graphstrata import GraphStrataRetriever

    t0 = time.perf_counter()
    if index_dir.is_dir() and any(index_dir.iterdir()):
        retriever = GraphStrataRetriever(index_dir=str(index_dir), method="archrag", k=3,
                                         include_scores=True)  # score / raw_score / rank in metadata
        print(f"opened the index in {index_dir} in {time.perf_counter() - t0:.1f} s")
    else:
        docs = load_corpus(args.corpus)
        retriever = GraphStrataRetriever.from_documents(docs, persist_dir=str(index_dir), method="archrag", k=3,
                                                        include_scores=True)  # scores in metadata
        print(f"built an index of {len(docs)} Documents in {time.perf_counter() - t0:.1f} s, persisted to {index_dir}")
    print(f"index: {retriever.graphstrata}")

    print("\n== retriever.invoke: method='archrag', k=3 ==")
    for q in QUESTIONS:
        print(f"\nQ: {q}")
        for d in retriever.invoke(q):
            print(f"  {d.metadata['score']:.3f} {d.metadata['document_ids']} {short(d.page_content, 70)}")

    print("\n== with graph context: kinds=None, context_k=3 ==")
    for d in retriever.invoke(QUESTIONS[0], kinds=None, context_k=3):
        print(f"  {d.metadata['kind']:<9} {d.metadata['score']:.3f} {short(d.page_content, 70)}")

    print("\n== LCEL chain: retriever | prompt | chat model ==")
    chat_model = FakeListChatModel(responses=["(your chat model's answer would appear here)"])  # stand-in
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    chain = (
        {"context": retriever | (lambda ds: "\n\n".join(d.page_content for d in ds)),
         "question": RunnablePassthrough()}
        | prompt
        | chat_model
        | StrOutputParser()
    )
    print(f"Q: {QUESTIONS[1]}")
    print(f"chain output: {chain.invoke(QUESTIONS[1])}")
    # what the chat model was sent: the prompt filled with the retrieved chunks
    filled = prompt.invoke({"context": "\n\n".join(d.page_content for d in retriever.invoke(QUESTIONS[1])),
                            "question": QUESTIONS[1]})
    print(f"prompt sent to the model: {len(filled.to_string())} characters, starting {short(filled.to_string(), 60)!r}")

    print("\n== vector-store style: score threshold and a metadata filter ==")
    strict = GraphStrataRetriever(index=retriever.graphstrata, method="hybrid",
                                  search_type="similarity_score_threshold",
                                  search_kwargs={"k": 5, "score_threshold": 0.5})
    kept = strict.invoke(QUESTIONS[0])
    print(f"hybrid, score >= 0.5: {len(kept)} of at most 5 chunks: {[d.metadata['document_ids'][0] for d in kept]}")
    only = GraphStrataRetriever(index=retriever.graphstrata, method="dense", k=2,
                                search_kwargs={"filter": {"title": "Big Hero 6 (film)"}})
    print(f"dense, filter title='Big Hero 6 (film)': {[d.metadata['document_ids'] for d in only.invoke(QUESTIONS[1])]}")
    print(f"\nquickstart_langchain finished; files in {workdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
