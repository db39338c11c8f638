"""Shared helpers of the LlamaIndex integration tests (also imported by subprocess scripts).

Loaded by file path (``importlib``) so it works under any pytest import mode and from a
fresh interpreter.
"""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core import Document
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr

LIHUA = Path(__file__).resolve().parents[3] / "shared" / "data" / "lihua_world"
#: Documents of LiHua-World used by the tests: the first N sessions of the year (chat logs
#: are chronological, so the slice is a coherent sub-corpus with 22 answerable questions).
N_DOCS = 50


def lihua_documents(n: int = N_DOCS) -> list[Document]:
    """The first ``n`` corpus lines as LlamaIndex Documents (``id_`` = corpus id)."""
    docs = []
    with open(LIHUA / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            docs.append(Document(text=row["text"], id_=row["id"], metadata={"title": row["title"]}))
            if len(docs) == n:
                break
    return docs


def lihua_questions(doc_ids: set) -> list[dict[str, Any]]:
    """Questions whose evidence lies entirely inside ``doc_ids`` (no unanswerable ones)."""
    out = []
    with open(LIHUA / "questions.jsonl", encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            if q["evidence_ids"] and set(q["evidence_ids"]) <= doc_ids:
                out.append(q)
    return out


class LocalMiniLMEmbedding(BaseEmbedding):
    """The packaged all-MiniLM-L6-v2 as a LlamaIndex embedding (local files, no network).

    It reuses graphstrata's offline default model, so the integration tests exercise the
    "user set ``Settings.embed_model``" path with a real sentence embedding.
    """

    model_name: str = "local-minilm-l6-v2"

    @classmethod
    def class_name(cls) -> str:
        return "LocalMiniLMEmbedding"

    def _model(self) -> Any:
        from graphstrata.models import default_embedder

        return default_embedder()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._model().embed([query])[0].astype(np.float64).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_query_embedding(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._model().embed(list(texts)).astype(np.float64).tolist()


_WORD = re.compile(r"\w+")


def hash_vector(text: str, dim: int) -> list[float]:
    """Bag of hashed words and word bigrams, ``dim`` floats (L2-normalised later by the core)."""
    vec = np.zeros(dim, dtype=np.float64)
    words = [w.lower() for w in _WORD.findall(text)]
    for w in words:
        vec[zlib.crc32(w.encode()) % dim] += 1.0
    for a, b in zip(words, words[1:], strict=False):
        vec[zlib.crc32(f"{a} {b}".encode()) % dim] += 0.5
    vec[0] += 1e-3  # never the zero vector
    return vec.tolist()


class HashEmbedding(BaseEmbedding):
    """Deterministic hashed bag of words and bigrams (no model): fast on a loaded 2-core box.

    The big LiHua index of these tests is built with it; what they check is that LlamaIndex
    and the core agree, which does not depend on embedding quality. The real offline model
    is exercised by ``LocalMiniLMEmbedding`` / the core default on smaller inputs. The unit
    tests (tests/llama_index) use it too, at 128 dimensions; ``_calls`` records how many texts
    each embedding call took, so they can see the embedding was used.
    """

    model_name: str = "hash-256"
    dim: int = 256
    _calls: list[int] = PrivateAttr(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "HashEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        self._calls.append(1)
        return hash_vector(query, self.dim)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        self._calls.append(1)
        return hash_vector(text, self.dim)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._calls.append(len(texts))
        return [hash_vector(t, self.dim) for t in texts]
