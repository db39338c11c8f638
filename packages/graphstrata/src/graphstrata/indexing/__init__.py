"""Indexing as stages: documents → chunks → vectors → graph → hierarchy → indexes → a state.

Each stage is a function from records to records with its own progress bar and timing
(:class:`~.progress.Progress`); :func:`~.build.build_state` runs them over a corpus and returns
one immutable :class:`~graphstrata.state.EngineState`. An insert or delete runs the same stages
over the delta only (:func:`~.update.update_state`); ``rebuild`` and the incremental path's
fallbacks run :func:`~.build.build_state` over the whole corpus with the previous chunk vectors
as a cache. An LLM extractor or summariser replaces one stage (DESIGN.md, "Where the core goes
next").

Offline pipeline (no LLM, no network): token-window chunks → statistical entities and sentence
co-occurrence relations → attributed community layers (ArchRAG Alg. 1, ``seed-archrag.md``
§1) → one C-HNSW over entities and community layers, chunk vectors in a second C-HNSW, BM25
over chunks.

Modules, one per stage (data flows one way: nothing here imports a retrieval method):

* :mod:`.progress` — stage timing, progress bars, batched embedding;
* :mod:`.chunks` — chunking and chunk vectors;
* :mod:`.extract` — the extraction stage (statistical, or an LLM extractor);
* :mod:`.llm_extract` — LightRAG / HiRAG and AGRAG LLM extraction;
* :mod:`.entities` — entity vectors;
* :mod:`.descriptions` — an LLM build's descriptions embedded (entity, relation and fact
  vectors, LightRAG §3.1, AGRAG §III-C);
* :mod:`.communities` — community layers with extractive summaries or LLM reports;
* :mod:`.reports` — LLM community reports and HiRAG summary entities;
* :mod:`.hirag` — HiRAG's hierarchical index (summary-entity layers, Leiden over G_k);
* :mod:`.build` — the full build;
* :mod:`.update`, :mod:`.update_communities` — incremental insert and delete;
* :mod:`.cost` — what a build with an LLM would spend.
"""

from .build import build_state
from .chunks import chunk_stage, chunk_vectors
from .communities import cluster_communities, fit_summary_tfidf, hierarchy_config
from .cost import estimate_llm_cost
from .descriptions import (
    TextVectors,
    described_entity_vectors,
    describes_entities,
    describes_relations,
)
from .entities import entity_vectors
from .extract import extract_stage, extractor
from .hirag_extract import HiragLLMExtractor
from .llm_extract import AgragLLMExtractor, LLMExtractor
from .progress import EMBED_BATCH, Progress
from .update import drift_report, rebuild_state, update_state

__all__ = [
    "EMBED_BATCH",
    "AgragLLMExtractor",
    "HiragLLMExtractor",
    "LLMExtractor",
    "Progress",
    "TextVectors",
    "build_state",
    "chunk_stage",
    "chunk_vectors",
    "cluster_communities",
    "described_entity_vectors",
    "describes_entities",
    "describes_relations",
    "drift_report",
    "entity_vectors",
    "estimate_llm_cost",
    "extract_stage",
    "extractor",
    "fit_summary_tfidf",
    "hierarchy_config",
    "rebuild_state",
    "update_state",
]
