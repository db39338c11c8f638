"""Build-time configuration (pydantic), persisted with every index."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class GraphStrataConfig(BaseModel):
    """Everything that decides how an index is built.

    Chunk sizes are in tokens of the embedder's tokenizer. Defaults were chosen by measuring
    evidence recall on the shared QA corpora (see the README's table).
    """

    model_config = ConfigDict(extra="forbid")

    chunk_size: int = Field(200, gt=0, description="tokens per chunk")
    chunk_overlap: int = Field(32, ge=0, description="tokens shared by consecutive chunks")
    tfidf_top_n: int = Field(8, ge=0, description="TF-IDF 1-3-gram entities kept per chunk")
    use_titles: bool = Field(
        True,
        description="document titles become entities, link the chunks that name them, and are"
        " indexed with their chunks by BM25",
    )
    entity_context_weight: float = Field(
        0.4,
        ge=0.0,
        le=1.0,
        description="entity vector = (1-w)·name vector + w·mean of its chunks' vectors",
    )
    community_vectors: Literal["centroid", "summary"] = Field(
        "centroid",
        description="community vector: members' centroid (no model call) or embedded title+summary",
    )
    max_community_size: int = Field(15, ge=2)
    min_communities: int = Field(10, ge=1)
    max_layers: int = Field(5, ge=0)
    similarity_percentile: float = Field(80.0, ge=0.0, le=100.0)
    max_knn: int = Field(10, ge=1)
    hnsw_M: int = Field(16, ge=2)
    hnsw_ef_construction: int = Field(200, ge=1)
    seed: int = 0xDEADBEEF

    @model_validator(mode="after")
    def _check_overlap(self) -> GraphStrataConfig:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size "
                f"({self.chunk_size})"
            )
        return self
