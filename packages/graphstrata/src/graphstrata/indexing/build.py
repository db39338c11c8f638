"""The full build: every indexing stage over a corpus, then one immutable state.

Stages, in order (each timed in ``build_seconds`` under its name): chunking → chunk vectors →
extraction → entity vectors → entity C-HNSW → clustering (with summaries or LLM reports) →
community layers in the C-HNSW → chunk C-HNSW (built on a worker thread beside extraction
and clustering) → BM25; with an LLM, HiRAG's summary entities last
(:func:`~.hirag.summary_entity_stage`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ..config import GraphStrataConfig
from ..graph import KnowledgeGraph
from ..index import BM25Index, ChunkIndex, LayeredIndex, lexical_texts, stored_vectors
from ..llm import LLMClient, usage_scope
from ..models import Embedder
from ..runner import LOCAL, ProcessRunner, Runner, build_workers, current_runner, use_runner
from ..state import EngineState, new_drift
from ..types import Community, Document
from .chunks import chunk_stage, chunk_vectors
from .communities import cluster_communities
from .entities import entity_vectors
from .extract import extract_stage
from .hirag import summary_entity_stage
from .progress import Progress


def build_state(
    docs: Sequence[Document],
    config: GraphStrataConfig,
    embedder: Embedder,
    show_progress: bool = False,
    cached_chunk_vectors: Mapping[tuple[str, str], np.ndarray] | None = None,
    generation: int = 0,
    llm: LLMClient | None = None,
    stats_version: int = 1,
) -> EngineState:
    """Run every indexing stage over ``docs`` and return the new state.

    Args:
        docs: the whole corpus of the new state (ids unique).
        config: build configuration.
        embedder: embeds chunks, entity names and (optionally) community summaries.
        show_progress: a progress bar per stage (stderr).
        cached_chunk_vectors: ``{(chunk_id, chunk_text): float32 (dim,)}`` of chunks already
            embedded (insert / delete reuse them; only other chunks are embedded).
        generation: stored on the state (0 for a build, previous + 1 for an update).
        llm: with an :class:`~graphstrata.llm.LLMClient`, the papers' index-time LLM steps
            replace the offline ones: LLM extraction (``config.llm_extraction``), ArchRAG
            community reports embedded as the community vectors
            (``config.llm_community_reports``), HiRAG summary entities (built eagerly so their
            calls land in the response cache, and handed to the state's derived cache). Their
            calls and tokens are the state's ``build_usage``.
        stats_version: ``drift["stats_version"]`` of the new state: the version of the
            statistics this build fits (1 for a new index; a rebuild or an update's fallback
            build passes the previous version + 1).

    Returns:
        An :class:`~graphstrata.state.EngineState`, constructed once with everything it
        holds; nothing shared with any other state is mutated.

    Raises:
        ValueError: no documents, no text in any document, embedder output of the wrong shape,
            a document over ``config.max_document_chars`` (from chunking), an LLM extraction
            that produced no entities.
        graphstrata.llm.LLMError: an LLM call failed after its retries (responses received
            so far are cached: the same build again resumes without paying for them).
    """
    if not docs:
        raise ValueError("empty corpus: no documents given")
    args = (docs, config, embedder, show_progress, cached_chunk_vectors, generation, stats_version)
    if llm is None:
        with build_runner(docs, config):
            return _build_state(*args, None)
    with usage_scope() as ledger:
        with build_runner(docs, config):
            provisional = _build_state(*args, llm)
        derived = Progress(show_progress).stage(
            "HiRAG summary entities (LLM)", lambda: summary_entity_stage(provisional)
        )
    # the published state, constructed whole: the records of the provisional one, the build's
    # LLM usage, and the HiRAG index built from those same records in its derived cache
    return dataclasses.replace(provisional, build_usage=ledger.to_dict(), derived_seed=derived)


@contextmanager
def build_runner(docs: Sequence[Document], config: GraphStrataConfig) -> Iterator[Runner]:
    """The runner of a build's per-chunk stages: the active one when a caller chose it
    (:func:`~graphstrata.runner.use_runner`), else a :class:`~graphstrata.runner.ProcessRunner`
    of :func:`~graphstrata.runner.build_workers` workers when that is more than one (a large
    corpus), stopped when the ``with`` block ends, else this process.

    Raises:
        ValueError: ``$GRAPHSTRATA_NUM_WORKERS`` is not a non-negative integer.
    """
    active = current_runner()
    workers = 1
    if active is LOCAL:
        workers = build_workers(sum(len(d.text) for d in docs), getattr(config, "build_workers", 0))
    if workers <= 1:
        yield active
        return
    runner = ProcessRunner(workers)
    try:
        with use_runner(runner):
            yield runner
    finally:
        runner.close()


def _build_state(
    docs, config, embedder, show_progress, cached_chunk_vectors, generation, stats_version, llm
) -> EngineState:
    prog = Progress(show_progress)
    chunks = prog.stage("chunking", lambda: chunk_stage(docs, config, embedder))
    if not chunks:
        raise ValueError("empty corpus: the documents contain no text")
    chunk_vecs = chunk_vectors(chunks, embedder, prog, cached_chunk_vectors or {})
    # the chunk C-HNSW (native, one thread, GIL released) is built beside extraction and
    # clustering, which are mostly single-threaded Python: its stage time is the wait left
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphstrata-chunk-index") as pool:
        chunk_index_job = pool.submit(
            ChunkIndex.build, chunk_vecs, M=config.hnsw_M, ef_construction=config.hnsw_ef_construction
        )
        return _graph_stages(
            docs, config, embedder, prog, chunks, chunk_vecs, chunk_index_job, generation, stats_version, llm
        )


def _graph_stages(
    docs, config, embedder, prog: Progress, chunks, chunk_vecs, chunk_index_job: Future, generation,
    stats_version, llm,
) -> EngineState:
    """Extraction, entity vectors and index, communities, the chunk index (``chunk_index_job``)
    and BM25 → the new state."""
    titles = {d.id: d.metadata["title"] for d in docs if d.metadata.get("title")}
    entities, relations, records, frozen = extract_stage(chunks, titles, config, llm, prog, summary=True)
    kg = KnowledgeGraph(entities, relations)
    del entities, relations
    chunk_row = {c.id: i for i, c in enumerate(chunks)}
    entity_vecs = np.zeros((0, embedder.dim), dtype=np.float32)
    communities: list[list[Community]] = []
    layer_vecs: list[np.ndarray] = []
    layered = None
    summary_tfidf = frozen.get("summary")
    if len(kg):
        entity_vecs = entity_vectors(kg, chunk_row, chunk_vecs, config, embedder, prog)
        # layer 0 first: its graph also gives the k-NN edges of clustering (no O(n²) scan)
        entity_index = prog.stage(
            "indexing entities (C-HNSW)",
            lambda: LayeredIndex.build(
                [entity_vecs], M=config.hnsw_M, ef_construction=config.hnsw_ef_construction
            ),
        )
        # each kept community layer joins the entity index as it is clustered (the levels above
        # take their k-NN from it too)
        communities, layer_vecs = cluster_communities(
            kg, chunks, entity_vecs, config, embedder, prog, llm, summary_tfidf=summary_tfidf,
            neighbours=entity_index.knn, index=entity_index,
        )
        layered = entity_index
    chunk_index = prog.stage("indexing chunks (C-HNSW)", chunk_index_job.result)
    documents = {d.id: d for d in docs}
    bm25 = prog.stage(
        "indexing chunks (BM25)",
        lambda: BM25Index(lexical_texts(chunks, documents, config.use_titles)),
    )
    # the indexes' own copies (persisted once, in the .chnsw files): built == loaded, bit for bit
    vectors = stored_vectors(chunk_index, layered, embedder.dim)
    return EngineState(
        config=config,
        embedder=embedder,
        documents=documents,
        chunks=chunks,
        chunk_row=chunk_row,
        kg=kg,
        communities=communities,
        layered=layered,
        chunk_index=chunk_index,
        bm25=bm25,
        vectors=vectors,
        build_seconds=dict(prog.seconds),
        generation=generation,
        llm_id=llm.id if llm is not None else None,
        llm=llm,
        records=records,
        frozen=frozen,
        drift=new_drift(
            len(documents), len(chunks), len(kg), sum(len(layer) for layer in communities),
            stats_version=stats_version,
        ),
    )
