"""graphstrata's offline embedders as LangChain ``Embeddings``.

:class:`GraphStrataEmbeddings` gives a LangChain vector store (``InMemoryVectorStore``, FAISS,
Chroma, ...) the vectors a graphstrata index holds: the packaged all-MiniLM-L6-v2
(``preset="default"``) or the static embedder distilled from it (``preset="fast"``), with no
network and no API key. Passed back into graphstrata (``GraphStrataRetriever(embeddings=...)``,
``GraphStrataRetriever.from_documents(..., embeddings=...)``) it is unwrapped to the core
embedder it holds, so the index persists the core's embedder id and loads with no embedder.
"""

from __future__ import annotations

from graphstrata.models import Embedder, Preset, embed_query, preset_embedder
from langchain_core.embeddings import Embeddings


class GraphStrataEmbeddings(Embeddings):
    """LangChain embeddings over one of graphstrata's offline embedders.

    Vectors are lists of ``dim`` floats (384 for MiniLM, 256 for the fast preset), L2-normalised, equal to the
    core embedder's own: documents as ``embedder.embed(texts)``, queries as
    ``graphstrata.models.embed_query(embedder, text)`` (what a graphstrata index stores and
    what its queries search with). ``aembed_documents`` / ``aembed_query`` run the same in a
    worker thread (LangChain's default).

    Args:
        preset: ``"default"`` (all-MiniLM-L6-v2) or ``"fast"`` (the static embedder distilled
            from it): :func:`graphstrata.models.preset_embedder`.

    Attributes:
        preset: the preset name.
        model: the core embedder's id (``"minilm-l6-v2"``, ``"minilm-l6-v2-static256"``), the
            id a graphstrata index persists.

    Raises:
        ValueError, ImportError: as :func:`graphstrata.models.preset_embedder`.
    """

    def __init__(self, preset: Preset = "default") -> None:
        self._embedder: Embedder = preset_embedder(preset)
        self.preset: str = preset
        self.model: str = self._embedder.id

    @property
    def graphstrata_embedder(self) -> Embedder:
        """The core embedder (``graphstrata.models.Embedder``) this wraps;
        :func:`~langchain_graphstrata.embedder_from_langchain` unwraps to it."""
        return self._embedder

    @property
    def dim(self) -> int:
        """Vector dimension (384 for MiniLM, 256 for the fast preset)."""
        return int(self._embedder.dim)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed ``texts``: one list of ``dim`` floats per text, L2-normalised."""
        return self._embedder.embed(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed one query: ``dim`` floats, L2-normalised."""
        return embed_query(self._embedder, text).tolist()

    def __reduce__(self) -> tuple[type, tuple[str]]:
        # pickled as its preset: the model loads again where it is unpickled
        return (type(self), (self.preset,))

    def __repr__(self) -> str:
        return f"GraphStrataEmbeddings(preset={self.preset!r})"
