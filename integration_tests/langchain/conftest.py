"""MuSiQue slice for the LangChain integration tests, indexed once per session.

The corpus is the evidence passages of the first ``N_QUESTIONS`` dev questions plus the first
``N_DISTRACTORS`` other passages of the pooled corpus (file order, so the slice is fixed). The
index is built with the real graphstrata core and the offline default embedder, persisted, and
every test opens it through ``GraphStrataRetriever(index_dir=...)``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

N_QUESTIONS = 20
N_DISTRACTORS = 160


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="session")
def musique_questions(shared_data: Path) -> list[dict[str, Any]]:
    """All MuSiQue dev questions (152), file order (``shared_data``: the root conftest)."""
    return _read_jsonl(shared_data / "musique" / "questions.jsonl")


@pytest.fixture(scope="session")
def musique_slice(
    shared_data: Path, musique_questions: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Corpus records of the slice: evidence of the first N_QUESTIONS + distractors."""
    corpus = _read_jsonl(shared_data / "musique" / "corpus.jsonl")
    evidence = {e for q in musique_questions[:N_QUESTIONS] for e in q["evidence_ids"]}
    chosen = [r for r in corpus if r["id"] in evidence]
    assert len(chosen) == len(evidence)
    chosen += [r for r in corpus if r["id"] not in evidence][:N_DISTRACTORS]
    return chosen


@pytest.fixture(scope="session")
def musique_index_dir(musique_slice: list[dict[str, Any]], tmp_path_factory: Any) -> Path:
    """The slice indexed by graphstrata from LangChain Documents and persisted (built once)."""
    from langchain_core.documents import Document
    from langchain_graphstrata import GraphStrataRetriever

    path = tmp_path_factory.mktemp("musique_lc") / "index"
    docs = [
        Document(id=r["id"], page_content=r["text"], metadata={"title": r["title"]})
        for r in musique_slice
    ]
    GraphStrataRetriever.from_documents(docs, persist_dir=path)
    return path
