"""graphstrata's offline embedders as a LlamaIndex ``BaseEmbedding``.

:class:`GraphStrataEmbedding` gives a LlamaIndex index (``VectorStoreIndex``, a property graph,
``Settings.embed_model``) the vectors a graphstrata index holds: the packaged all-MiniLM-L6-v2
(``preset="default"``) or the static embedder distilled from it (``preset="fast"``), with no
network and no API key. Passed back into graphstrata (``GraphStrataIndex.from_documents(...,
embed_model=...)``, ``GraphStrataRetriever(embed_model=...)``), it is unwrapped to the core
embedder it holds, so the index persists the core's embedder id and loads with no embedder.
"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.embeddings.base import DEFAULT_EMBED_BATCH_SIZE, BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr

from graphstrata.models import Embedder, Preset, embed_query, preset_embedder


class GraphStrataEmbedding(BaseEmbedding):
    """A LlamaIndex embedding over one of graphstrata's offline embedders.

    Vectors are lists of ``dim`` floats (384 for MiniLM, 256 for the fast preset), L2-normalised, equal to the
    core embedder's own: texts as ``embedder.embed(texts)``, queries as
    ``graphstrata.models.embed_query(embedder, query)`` (what a graphstrata index stores and
    what its queries search with).

    Args:
        preset: ``"default"`` (all-MiniLM-L6-v2) or ``"fast"`` (the static embedder distilled
            from it): :func:`graphstrata.models.preset_embedder`.
        embed_batch_size: texts per call to the embedder (LlamaIndex's batching).
        **kwargs: other ``BaseEmbedding`` fields (``callback_manager``, ``num_workers``, ...).

    Attributes:
        preset: the preset name.
        model_name: the core embedder's id (``"minilm-l6-v2"``, ``"minilm-l6-v2-static256"``),
            the id a graphstrata index persists.

    Raises:
        ValueError, ImportError: as :func:`graphstrata.models.preset_embedder`.
    """

    preset: str = Field(default="default", description="graphstrata embedder preset: default or fast.")
    _embedder: Embedder = PrivateAttr()

    def __init__(
        self,
        preset: Preset = "default",
        embed_batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
        **kwargs: Any,
    ) -> None:
        embedder = preset_embedder(preset)
        kwargs.setdefault("model_name", embedder.id)
        super().__init__(preset=preset, embed_batch_size=embed_batch_size, **kwargs)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        """Serialisation name of the component."""
        return "GraphStrataEmbedding"

    @property
    def graphstrata_embedder(self) -> Embedder:
        """The core embedder (``graphstrata.models.Embedder``) this wraps; graphstrata's
        framework packages unwrap to it when this embedding is passed back to them."""
        return self._embedder

    @property
    def dim(self) -> int:
        """Vector dimension (384 for MiniLM, 256 for the fast preset)."""
        return int(self._embedder.dim)

    def _get_query_embedding(self, query: str) -> list[float]:
        return embed_query(self._embedder, query).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embedder.embed([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        # CPU-bound: a worker thread keeps the event loop free
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)
