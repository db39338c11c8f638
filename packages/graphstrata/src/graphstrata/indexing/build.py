"""The full build: every indexing stage over a corpus, then one immutable state.

Stages, in order (each timed in ``build_seconds`` under its name): chunking → chunk vectors →
BM25 → extraction → entity vectors (name + chunk centroid; in an LLM build name + description,
:mod:`.descriptions`) → entity C-HNSW → clustering (with summaries or LLM reports) → community layers in the C-HNSW → chunk C-HNSW (built on a worker thread beside BM25,
extraction and clustering); with an LLM, HiRAG's summary entities last
(:func:`~.hirag.summary_entity_stage`).
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any

import numpy as np

from ..bm25 import BM25Index, bm25_tokenize, lexical_texts
from ..config import GraphStrataConfig, resolved_config
from ..graph import KnowledgeGraph
from ..heap import rebuilt, release_free_memory
from ..index import ChunkIndex, LayeredIndex, stored_vectors
from ..llm import LLMClient, usage_scope
from ..llm.records import LLMAnswers, keeping_answers
from ..models import Embedder
from ..resolution import resolution_stage
from ..runner import LOCAL, ProcessRunner, Runner, build_workers, current_runner, use_runner
from ..state import EngineState, new_drift
from ..types import Community, Document, DocumentChunk
from .chunks import chunk_stage, chunk_vectors
from .communities import cluster_communities
from .descriptions import described_entity_vectors, describes_entities
from .entities import entity_vectors
from .extract import extract_stage, extractor
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
    llm_answers: LLMAnswers | None = None,
) -> EngineState:
    """Run every indexing stage over ``docs`` and return the new state.

    Args:
        docs: the whole corpus of the new state (ids unique).
        config: build configuration.
        embedder: embeds chunks, entity names (an LLM build: names and descriptions,
            :mod:`.descriptions`) and (optionally) community summaries.
        show_progress: a progress bar per stage (stderr).
        cached_chunk_vectors: ``{(chunk_id, chunk_text): float32 (dim,)}`` of chunks already
            embedded (insert / delete reuse them; only other chunks are embedded).
        generation: stored on the state (0 for a build, previous + 1 for an update).
        llm: with an :class:`~graphstrata.llm.LLMClient`, the papers' index-time LLM steps
            replace the offline ones: LLM extraction (``config.llm_extraction``), ArchRAG
            community reports embedded as the community vectors
            (``config.llm_community_reports``), HiRAG summary entities and community reports
            (built eagerly so their answers are kept with the index and land in the response
            cache, and handed to the state's derived cache). Their calls and tokens are the
            state's ``build_usage``.
        stats_version: ``drift["stats_version"]`` of the new state: the version of the
            statistics this build fits (1 for a new index; a rebuild or an update's fallback
            build passes the previous version + 1).
        llm_answers: the LLM answers of a previous build (``state.llm_answers``; a
            rebuild or an update's fallback build): LLM extraction asks only for the chunks
            and summaries they do not answer, and the community-report and HiRAG stages only
            for the prompts they do not answer (:mod:`graphstrata.llm.records`). The new
            state's ``llm_answers`` hold the answers this build read (reused or asked), and
            no other.

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
    config = resolved_config(config, embedder.id)
    args = (docs, config, embedder, show_progress, cached_chunk_vectors, generation, stats_version, llm_answers)
    if llm is None:
        with build_runner(docs, config), no_cyclic_gc():
            return _build_state(*args, None)
    with usage_scope() as ledger, keeping_answers(llm_answers) as book:
        with build_runner(docs, config), no_cyclic_gc():
            provisional = _build_state(*args, llm)
        derived = Progress(show_progress).stage(
            "HiRAG summary entities (LLM)", lambda: summary_entity_stage(provisional)
        )
    # the published state, constructed whole: the records of the provisional one, the build's
    # LLM usage, the answers its stages read (kept for the next update), and the HiRAG index
    # built from those same records in its derived cache
    return dataclasses.replace(
        provisional,
        build_usage=ledger.to_dict(),
        llm_answers=book.answers(provisional.llm_answers),
        derived_seed=derived,
    )


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the ``with`` block (as it was before, after).

    A build allocates tens of millions of container objects (records, entities, relations,
    token lists) and frees few cycles; every full collection walks all of them, so collections
    cost a sixth of the build's Python time at 50k chunks and more as the heap grows (each pass
    is proportional to it). Objects without cycles are still freed at once (reference
    counting); the few cycles a build leaves are collected after it. Process-wide while it
    lasts.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


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
    token = _OWN_POOL.set(runner)
    try:
        with use_runner(runner):
            yield runner
    finally:
        _OWN_POOL.reset(token)
        runner.close()


_OWN_POOL: ContextVar[ProcessRunner | None] = ContextVar("graphstrata_build_pool", default=None)
"""The worker pool :func:`build_runner` started for this build (``None`` when the caller chose
the runner or the build runs in this process)."""


def _stop_own_pool() -> None:
    """Stop the workers of the pool this build started, once the per-chunk stages are done:
    clustering and the derived structures run in this process, and the idle workers held
    1.9 GiB at 1M chunks beside them (issue 33). A later use (summary-vector embedding of
    communities) starts them again; a runner the caller chose is left alone."""
    pool = _OWN_POOL.get()
    if pool is not None:
        pool.close()


COMPACT_MIN_CHUNKS = 20_000
"""A build of at least this many chunks rebuilds its graph and records in fresh memory after
extraction (:func:`~graphstrata.heap.rebuilt`); below it the arenas it would free are a few
megabytes."""

BM25_SHARD = 5_000
"""Texts per shard of :func:`lexical_tokens` (one worker task)."""


def _tokenize_shard(texts: Sequence[str]) -> list[list[str]]:
    """:func:`~graphstrata.bm25.bm25_tokenize` of each text; equal tokens are one object (a
    worker's answer pickles each distinct token once)."""
    same: dict[str, str] = {}
    return [[same.setdefault(t, t) for t in bm25_tokenize(text)] for text in texts]


def lexical_tokens(texts: Sequence[str], runner: Any = None) -> list[list[str]]:
    """The BM25 tokens of every text (:func:`~graphstrata.bm25.bm25_tokenize`), in shards of
    :data:`BM25_SHARD` on ``runner``'s workers when it has a ``map``. Equal tokens are one
    string object across the corpus (about 5 kB a chunk less than a string per occurrence).

    Returns:
        One token list per text, in order.
    """
    shards = [(list(texts[i : i + BM25_SHARD]),) for i in range(0, len(texts), BM25_SHARD)]
    mapper = getattr(runner, "map", None)
    results = mapper(_tokenize_shard, shards) if callable(mapper) and len(shards) > 1 else (
        _tokenize_shard(*shard) for shard in shards
    )
    same: dict[str, str] = {}
    out: list[list[str]] = []
    for part in results:
        out.extend([same.setdefault(t, t) for t in toks] for toks in part)
    return out


def _build_state(
    docs, config, embedder, show_progress, cached_chunk_vectors, generation, stats_version, llm_answers, llm
) -> EngineState:
    prog = Progress(show_progress)
    chunks = prog.stage("chunking", lambda: chunk_stage(docs, config, embedder))
    if not chunks:
        raise ValueError("empty corpus: the documents contain no text")
    # each chunk reads its text from its document, as a published state's do: the corpus text
    # is held once through the build instead of twice (~600 bytes a chunk; issue 33)
    documents = {d.id: d for d in docs}
    chunks = DocumentChunk.of_documents(chunks, documents)
    chunk_vecs = chunk_vectors(chunks, embedder, prog, cached_chunk_vectors or {})
    release_free_memory()
    # the chunk C-HNSW (native, one thread, GIL released) is built beside extraction and
    # clustering, which are mostly single-threaded Python: its stage time is the wait left
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphstrata-chunk-index") as pool:
        chunk_index_job = pool.submit(
            ChunkIndex.build, chunk_vecs, M=config.hnsw_M, ef_construction=config.hnsw_ef_construction
        )
        owned = [chunk_vecs]  # handed over: _graph_stages drops them once the entity vectors are made
        del chunk_vecs
        return _graph_stages(
            documents, config, embedder, prog, chunks, owned, chunk_index_job, generation, stats_version, llm,
            llm_answers,
        )


def _graph_stages(
    documents: dict[str, Document], config, embedder, prog: Progress, chunks, owned: list[np.ndarray],
    chunk_index_job: Future, generation, stats_version, llm, llm_answers=None,
) -> EngineState:
    """Extraction, entity vectors and index, communities, the chunk index (``chunk_index_job``)
    and BM25 → the new state. ``owned`` holds the chunk vectors (taken out of it: what the
    build no longer needs is dropped as early as it can be, so that at no point three copies of
    the vectors exist — ours, the C-HNSW's and the state's)."""
    # BM25 first, while the heap is smallest: its token lists are the build's largest transient
    # after the vectors' (1.4 GB at 200k chunks), and at the end they came on top of everything
    # (issue 33)
    bm25 = prog.stage(
        "indexing chunks (BM25)",
        lambda: BM25Index(
            tokens=lexical_tokens(lexical_texts(chunks, documents, config.use_titles), current_runner())
        ),
    )
    release_free_memory()
    kg, records, frozen, answers = _knowledge_graph(documents, chunks, config, embedder, prog, llm, llm_answers)
    chunk_row = {c.id: i for i, c in enumerate(chunks)}
    # each stage frees most of what it allocated (records, token lists, edge lists) in sizes the
    # next ones do not reuse: returned to the OS between stages, not held to the end (issue 33)
    release_free_memory()
    communities, layered = _entity_layers(kg, chunks, chunk_row, owned, config, embedder, prog, llm, frozen)
    release_free_memory()
    chunk_index = prog.stage("indexing chunks (C-HNSW)", chunk_index_job.result)
    # the indexes' own copies (persisted once, in the .chnsw files): built == loaded, bit for bit
    chunk_index.vectors = None  # its view goes before stored_vectors makes the state's
    vectors = stored_vectors(chunk_index, layered, embedder.dim)
    release_free_memory()
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
        llm_answers=answers,
        frozen=frozen,
        drift=new_drift(
            len(documents), len(chunks), len(kg), sum(len(layer) for layer in communities),
            stats_version=stats_version,
        ),
    )


def _knowledge_graph(
    documents: dict[str, Document], chunks, config, embedder, prog: Progress, llm, llm_answers
) -> tuple[KnowledgeGraph, Any, dict[str, Any], Any]:
    """Extraction (and the opt-in entity resolution) → ``(kg, records, frozen, answers)``;
    on a large corpus the graph and records are compacted into fresh memory."""
    titles = {d.id: d.metadata["title"] for d in documents.values() if d.metadata.get("title")}
    entities, relations, records, frozen, answers = extract_stage(
        chunks, titles, config, llm, prog, summary=True, known=llm_answers
    )
    if config.entity_resolution:  # opt-in (issue 28): aliases merged into one entity each
        entities, relations, records = prog.stage(
            "resolving entities",
            partial(
                resolution_stage,
                entities, relations, records, embedder.embed, extractor(config, None).max_description_sentences,
            ),
        )
    kg = KnowledgeGraph(entities, relations)
    del entities, relations
    own_ids = {c.id: c.id for c in chunks}
    kg.share_strings(own_ids)
    if len(chunks) >= COMPACT_MIN_CHUNKS:
        # the graph and the records were made among the extraction's short-lived objects:
        # rebuilt in fresh memory, the arenas those pinned go back to the OS (issue 33)
        box = [(kg, records)]
        del kg, records
        try:
            kg, records = prog.stage("compacting the graph", lambda: rebuilt(box))
        except OSError:  # no room for the temporary file: keep them where they are
            kg, records = box.pop()
        kg.share_strings(own_ids)  # chunk ids: the chunks' own strings again
    return kg, records, frozen, answers


def _entity_layers(
    kg: KnowledgeGraph, chunks, chunk_row: dict[str, int], owned: list[np.ndarray], config, embedder,
    prog: Progress, llm, frozen: dict[str, Any],
) -> tuple[list[list[Community]], LayeredIndex | None]:
    """Entity vectors (the chunk vectors are taken out of ``owned`` and dropped once they are
    made), the entity C-HNSW and the community layers clustered into it →
    ``(communities, layered)``; ``([], None)`` for an empty graph."""
    chunk_vecs = owned.pop()
    entity_vecs = np.zeros((0, embedder.dim), dtype=np.float32)
    if len(kg) and describes_entities(config, llm.id if llm is not None else None):
        # an LLM build embeds what the model wrote (LightRAG §3.1): name + description
        entity_vecs = described_entity_vectors(kg, embedder, prog)
    elif len(kg):
        entity_vecs = entity_vectors(kg, chunk_row, chunk_vecs, config, embedder, prog)
    del chunk_vecs  # the chunk index keeps what it needs
    _stop_own_pool()
    release_free_memory()
    if not len(kg):
        return [], None
    # layer 0 first: its graph also gives the k-NN edges of clustering (no O(n²) scan)
    entity_index = prog.stage(
        "indexing entities (C-HNSW)",
        lambda: LayeredIndex.build(
            [entity_vecs], M=config.hnsw_M, ef_construction=config.hnsw_ef_construction
        ),
    )
    # each kept community layer joins the entity index as it is clustered (the levels above
    # take their k-NN from it too); the entity index holds the vectors
    communities, _ = cluster_communities(
        kg, chunks, entity_vecs, config, embedder, prog, llm, summary_tfidf=frozen.get("summary"),
        neighbours=entity_index.knn, index=entity_index,
    )
    return communities, entity_index
