"""LlamaIndex quickstart: a GraphStrataIndex over the sample corpus, persisted, reloaded,
queried through a query engine and a retriever — offline, no API key.

What it shows:

1. LlamaIndex ``Document``s from the sample corpus (75 Wikipedia pages, ids kept) →
   ``GraphStrataIndex.from_documents`` (knowledge graph, community hierarchy, C-HNSW index);
2. ``index.storage_context.persist(dir)`` and ``load_index_from_storage`` back;
3. ``index.as_query_engine(method="archrag")``: the answer and its source nodes (chunks, with
   the Wikipedia page ids they came from);
4. ``index.as_retriever(method="hirag", kinds=None)``: chunks plus the graph context the
   method found (entities, relations, community summaries).

The LLM is LlamaIndex's ``MockLLM`` (it writes placeholder tokens): put your own LLM in
``Settings.llm``. The embedder is graphstrata's offline MiniLM; ``Settings.embed_model`` is
left alone (a LlamaIndex embedding set there would be used instead).

Run from the repository root (about a minute on a laptop, most of it embedding)::

    .venv/bin/python cookbook/quickstart_llamaindex.py [--workdir DIR]

Everything it writes goes under ``--workdir`` (default: a new temporary directory).
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
    "Which peak stands higher, Muztagh Ata or Manaslu?",
]


def load_corpus(path: Path):
    """The JSONL pages as LlamaIndex Documents (page id kept as the document id)."""
    from llama_index.core import Document

    docs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                docs.append(Document(id_=rec["id"], text=f"{rec['title']}\n{rec['text']}",
                                     metadata={"title": rec["title"]}))
    return docs


def short(text: str, n: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="JSONL pages {id, title, text}")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="graphstrata-cookbook-"))
    workdir.mkdir(parents=True, exist_ok=True)
    storage_dir = workdir / "llama_storage"

    from llama_index.core import Settings, StorageContext, load_index_from_storage
    from llama_index.core.llms import MockLLM
    from llama_index.graph_rag.graphstrata import GraphStrataIndex

    Settings.llm = MockLLM(max_tokens=8)  # offline stand-in (placeholder tokens): set your own LLM here

    docs = load_corpus(args.corpus)
    print(f"corpus: {len(docs)} LlamaIndex Documents from {args.corpus.name}")
    t0 = time.perf_counter()
    index = GraphStrataIndex.from_documents(docs)  # offline MiniLM embedder unless Settings.embed_model is set
    print(f"built GraphStrataIndex in {time.perf_counter() - t0:.1f} s: {index.engine}")

    index.storage_context.persist(str(storage_dir))
    print(f"persisted to {storage_dir}")
    index = load_index_from_storage(StorageContext.from_defaults(persist_dir=str(storage_dir)))
    print(f"reloaded: {type(index).__name__} with methods {', '.join(index.methods)}")

    print("\n== query engine: method='archrag', similarity_top_k=3 ==")
    engine = index.as_query_engine(method="archrag", similarity_top_k=3)
    for q in QUESTIONS:
        response = engine.query(q)
        print(f"\nQ: {q}")
        print(f"answer (MockLLM placeholder; your LLM writes it): {short(str(response), 50)}")
        for n in response.source_nodes:
            ids = ",".join(n.node.metadata.get("document_ids") or [])
            print(f"  source {n.score:.3f} [{ids}] {short(n.node.get_content(), 70)}")

    print("\n== retriever: method='hirag', kinds=None (chunks + graph context), context_k=3 ==")
    retriever = index.as_retriever(method="hirag", similarity_top_k=3, kinds=None, context_k=3)
    nodes = retriever.retrieve(QUESTIONS[0])
    print(f"Q: {QUESTIONS[0]}")
    for n in nodes:
        print(f"  {n.node.metadata.get('kind'):<9} {n.score:.3f} {short(n.node.get_content(), 80)}")
    kinds = sorted({n.node.metadata.get("kind") for n in nodes})
    print(f"{len(nodes)} nodes, kinds: {', '.join(kinds)}")
    print(f"\nquickstart_llamaindex finished; files in {workdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
