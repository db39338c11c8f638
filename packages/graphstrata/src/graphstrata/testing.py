"""Test doubles for code that builds indexes without the real embedder.

:class:`HashEmbedder` embeds a text as signed counts of its hashed words: deterministic, no
model, thousands of texts a second. It tests control flow, persistence, concurrency and crash
safety; it has no semantic quality and never backs a retrieval-quality claim.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from .models import regex_token_spans

_WORD = re.compile(r"\w+")


class HashEmbedder:
    """Bag of hashed lower-cased words → ``dim`` signed counts, L2-normalised.

    Args:
        dim: output dimension (default 64).

    ``embed(texts)`` returns float32 ``(len(texts), dim)``; ``id`` is ``"test-hash-<dim>"``.
    """

    def __init__(self, dim: int = 64) -> None:
        self.dim = int(dim)
        self.id = f"test-hash-{self.dim}"

    def embed(self, texts):
        """float32 ``(len(texts), dim)``, rows L2-normalised (never a zero row)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in _WORD.findall(t.lower()):
                h = int.from_bytes(hashlib.md5(w.encode()).digest()[:4], "little")
                out[i, h % self.dim] += 1.0 if (h >> 16) & 1 else -1.0
            out[i, 0] += 1e-3  # never a zero vector
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def token_spans(self, text):
        """``[(start, end), ...]`` character offsets of the regex word tokens (chunking)."""
        return regex_token_spans(text)
