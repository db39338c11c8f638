"""Indexing as stages: documents → chunks → vectors → graph → hierarchy → indexes → a state.

Each stage is a function from records to records with its own progress bar and timing
(:class:`Progress`); :func:`build_state` runs them over a corpus and returns one immutable
:class:`~graphstrata.state.EngineState`. An insert or delete runs the same stages over the delta
only (:mod:`graphstrata.incremental`); ``rebuild`` and the incremental path's fallbacks run
:func:`build_state` over the whole corpus with the previous chunk vectors as a cache. An LLM
extractor or summariser replaces one stage (DESIGN.md, "Where the core goes next").

Offline pipeline (no LLM, no network): token-window chunks → statistical entities and sentence
co-occurrence relations → attributed community layers (ArchRAG Alg. 1, ``seed-archrag.md``
§1) → one C-HNSW over entities and community layers, chunk vectors in a second C-HNSW, BM25
over chunks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from .chunking import check_document_size, chunk_documents
from .config import GraphStrataConfig
from .extraction import (
    FrozenTfidf,
    StatisticalExtractor,
    merge_records,
    split_sentences,
)
from .graph import KnowledgeGraph
from .hierarchy import (
    HierarchyConfig,
    Neighbours,
    attributed_communities,
    extractive_summaries,
    mean_operator,
    rank_chunks,
)
from .index import BM25Index, ChunkIndex, LayeredIndex, lexical_texts, stored_vectors
from .llm import LLMClient, estimate_tokens, usage_scope
from .models import Embedder, l2_normalise
from .runner import current_runner
from .state import EngineState, new_drift
from .types import Chunk, Community, Document

EMBED_BATCH = 256


class Progress:
    """Stage timer and optional tqdm bars (``show``): ``seconds[stage]`` accumulates wall time."""

    def __init__(self, show: bool) -> None:
        self.show = show
        self.seconds: dict[str, float] = {}

    def embed(self, embedder: Embedder, texts: Sequence[str], stage: str) -> np.ndarray:
        """Embed ``texts`` in batches of :data:`EMBED_BATCH` on the active runner
        (:func:`graphstrata.runner.current_runner`; the batches are the same whatever runs them).

        Returns:
            float32 ``(len(texts), embedder.dim)``, rows L2-normalised.

        Raises:
            ValueError: the embedder returned another shape.
        """
        t0 = time.perf_counter()
        texts = list(texts)
        bar = None
        if self.show and texts:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(texts), desc=stage, unit="text")
        parts = []
        batches = [texts[i : i + EMBED_BATCH] for i in range(0, len(texts), EMBED_BATCH)]
        for batch, out in zip(batches, current_runner().embed(embedder, batches), strict=True):
            vecs = np.asarray(out, dtype=np.float32)
            if vecs.shape != (len(batch), embedder.dim):
                raise ValueError(
                    f"embedder {embedder.id!r} returned shape {vecs.shape} for {len(batch)} "
                    f"texts; expected ({len(batch)}, {embedder.dim})"
                )
            parts.append(vecs)
            if bar is not None:
                bar.update(len(batch))
        if bar is not None:
            bar.close()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - t0
        if not parts:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        return l2_normalise(np.vstack(parts))

    def stage(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` as stage ``name`` (timed, with a one-step bar when ``show``)."""
        t0 = time.perf_counter()
        if self.show:
            from tqdm.auto import tqdm

            with tqdm(total=1, desc=name, unit="stage") as bar:
                out = fn()
                bar.update(1)
        else:
            out = fn()
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0
        return out


def build_state(
    docs: Sequence[Document],
    config: GraphStrataConfig,
    embedder: Embedder,
    show_progress: bool = False,
    cached_chunk_vectors: Mapping[tuple[str, str], np.ndarray] | None = None,
    generation: int = 0,
    llm: LLMClient | None = None,
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
            calls land in the response cache). Their calls and tokens are the state's
            ``build_usage``.

    Returns:
        An :class:`~graphstrata.state.EngineState`; nothing shared with any other state is
        mutated.

    Raises:
        ValueError: no documents, no text in any document, embedder output of the wrong shape,
            a document over ``config.max_document_chars`` (from chunking), an LLM extraction
            that produced no entities.
        graphstrata.llm.LLMError: an LLM call failed after its retries (responses received
            so far are cached: the same build again resumes without paying for them).
    """
    if not docs:
        raise ValueError("empty corpus: no documents given")
    if llm is None:
        return _build_state(docs, config, embedder, show_progress, cached_chunk_vectors, generation, None)
    with usage_scope() as ledger:
        state = _build_state(docs, config, embedder, show_progress, cached_chunk_vectors, generation, llm)
        from .methods.hirag import hi_index

        Progress(show_progress).stage("HiRAG summary entities (LLM)", lambda: hi_index(state))
    # filled once here, before the state is published (a replace() would drop the HiRAG index)
    state.build_usage.update(ledger.to_dict())  # type: ignore[attr-defined]
    return state


def _build_state(docs, config, embedder, show_progress, cached_chunk_vectors, generation, llm) -> EngineState:
    prog = Progress(show_progress)
    chunks = prog.stage("chunking", lambda: chunk_stage(docs, config, embedder))
    if not chunks:
        raise ValueError("empty corpus: the documents contain no text")
    chunk_vecs = _chunk_vectors(chunks, embedder, prog, cached_chunk_vectors or {})
    # the chunk C-HNSW (native, one thread, GIL released) is built beside extraction and
    # clustering, which are mostly single-threaded Python: its stage time is the wait left
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphstrata-chunk-index") as pool:
        chunk_index_job = pool.submit(
            ChunkIndex.build, chunk_vecs, M=config.hnsw_M, ef_construction=config.hnsw_ef_construction
        )
        return _graph_stages(
            docs, config, embedder, prog, chunks, chunk_vecs, chunk_index_job, generation, llm
        )


def _graph_stages(
    docs, config, embedder, prog: Progress, chunks, chunk_vecs, chunk_index_job: Future, generation, llm
) -> EngineState:
    """Extraction, entity vectors and index, communities, the chunk index (``chunk_index_job``)
    and BM25 → the new state."""
    titles = {d.id: d.metadata["title"] for d in docs if d.metadata.get("title")}
    extractor = _extractor(config, llm, prog.show)
    records = None
    frozen: dict[str, Any] = {}
    if isinstance(extractor, StatisticalExtractor):

        def statistical():
            tfidf, terms = extractor.fit([c.text for c in chunks])
            recs = current_runner().chunk_records(extractor, chunks, titles, None, terms=terms)
            return tfidf, recs, merge_records(recs, max_description_sentences=extractor.max_description_sentences)

        tfidf, recs, (entities, relations) = prog.stage("extracting entities", statistical)
        records = {r.chunk_id: r for r in recs}
        if tfidf is not None:
            frozen["extraction"] = tfidf
    else:
        entities, relations = prog.stage("extracting entities", lambda: extractor.extract(chunks, titles))
    kg = KnowledgeGraph(entities, relations)
    chunk_row = {c.id: i for i, c in enumerate(chunks)}
    entity_vecs = np.zeros((0, embedder.dim), dtype=np.float32)
    communities: list[list[Community]] = []
    layer_vecs: list[np.ndarray] = []
    layered = None
    summary_tfidf = fit_summary_tfidf([c.text for c in chunks])
    if summary_tfidf is not None:
        frozen["summary"] = summary_tfidf
    if len(kg):
        entity_vecs = _entity_vectors(kg, chunk_row, chunk_vecs, config, embedder, prog)
        # layer 0 first: its graph also gives the k-NN edges of clustering (no O(n²) scan)
        entity_index = prog.stage(
            "indexing entities (C-HNSW)",
            lambda: LayeredIndex.build(
                [entity_vecs], M=config.hnsw_M, ef_construction=config.hnsw_ef_construction
            ),
        )
        communities, layer_vecs = cluster_communities(
            kg, chunks, entity_vecs, config, embedder, prog, llm, summary_tfidf=summary_tfidf,
            neighbours=entity_index.knn,
        )
        layered = prog.stage("indexing layers (C-HNSW)", lambda: entity_index.add_layers(layer_vecs))
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
        drift=new_drift(len(documents), len(chunks), len(kg), sum(len(layer) for layer in communities)),
    )


def chunk_stage(docs: Sequence[Document], config: GraphStrataConfig, embedder: Embedder) -> list[Chunk]:
    """:func:`~graphstrata.chunking.chunk_documents` with the build's settings, on the active
    runner. Every document's size is checked here first, so an oversized one fails the stage
    before any work is sent out.

    Raises:
        ValueError: a document over ``config.max_document_chars`` (named).
    """
    for doc in docs:
        check_document_size(doc.id, len(doc.text), config.max_document_chars)
    return current_runner().chunk(
        docs, config.chunk_size, config.chunk_overlap, embedder, config.max_document_chars
    )


def fit_summary_tfidf(texts: Sequence[str]) -> FrozenTfidf | None:
    """The unigram TF-IDF model of extractive community summaries
    (:func:`~graphstrata.hierarchy.extractive_summary`), fitted on the chunk texts and frozen
    for incremental updates; ``None`` when the texts have no vocabulary."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True)
    try:
        vectorizer.fit(list(texts))
    except ValueError:  # no vocabulary at all
        return None
    return FrozenTfidf.from_vectorizer(vectorizer, kind="summary")


def _extractor(config: GraphStrataConfig, llm: LLMClient | None, show_progress: bool):
    """The extraction stage: statistical offline; with an LLM, LightRAG-style LLM extraction,
    AGRAG's TF-IDF entities + LLM triples, or still statistical (``config.llm_extraction``)."""
    statistical = StatisticalExtractor(
        top_n=config.tfidf_top_n,
        use_titles=config.use_titles,
        max_entities_per_chunk=config.max_entities_per_chunk,
        max_relations_per_sentence=config.max_relations_per_sentence,
    )
    if llm is None or config.llm_extraction == "statistical":
        return statistical
    from .llm.extract import AgragLLMExtractor, LLMExtractor

    if config.llm_extraction == "agrag":
        return AgragLLMExtractor(llm, statistical=statistical)
    return LLMExtractor(llm, gleaning=config.llm_gleaning, examples=config.llm_prompt_examples)


def _chunk_vectors(
    chunks: list[Chunk],
    embedder: Embedder,
    prog: Progress,
    cached: Mapping[tuple[str, str], np.ndarray],
) -> np.ndarray:
    """float32 ``(n_chunks, dim)``: cached rows reused, the rest embedded."""
    todo = [i for i, c in enumerate(chunks) if (c.id, c.text) not in cached]
    new_vecs = prog.embed(embedder, [chunks[i].text for i in todo], "embedding chunks")
    out = np.zeros((len(chunks), embedder.dim), dtype=np.float32)
    for i, c in enumerate(chunks):
        v = cached.get((c.id, c.text))
        if v is not None:
            out[i] = v
    if todo:
        out[np.asarray(todo)] = new_vecs
    return out


def _entity_vectors(
    kg: KnowledgeGraph,
    chunk_row: Mapping[str, int],
    chunk_vecs: np.ndarray,
    config: GraphStrataConfig,
    embedder: Embedder,
    prog: Progress,
    ids: Sequence[str] | None = None,
) -> np.ndarray:
    """Entity vectors ``(1 - w)·name + w·mean(its chunks)``, ``w = entity_context_weight``;
    ``w = 1`` embeds no names at all (the chunk vectors are reused: no second embedding pass).

    Returns:
        float32 ``(len(ids), dim)`` for entities ``ids`` (``None``: every entity, in row order;
        incremental updates pass the entities that need a new vector).
    """
    ids = kg.entity_ids if ids is None else list(ids)
    if not ids:
        return np.zeros((0, embedder.dim), np.float32)
    w = config.entity_context_weight
    names = None
    if w < 1:
        names = prog.embed(embedder, [kg.entities[e].name for e in ids], "embedding entities")
        if w <= 0:
            return names
    # mean of each entity's chunk vectors as one sparse (entities × chunks) product
    chunk_rows = [[chunk_row[c] for c in kg.entities[e].chunk_ids] for e in ids]
    mean = mean_operator(chunk_rows, len(chunk_vecs), np.float32)
    ctx = l2_normalise(np.asarray(mean @ chunk_vecs, dtype=np.float32))
    return ctx if names is None else l2_normalise((1 - w) * names + w * ctx)


def hierarchy_config(config: GraphStrataConfig) -> HierarchyConfig:
    """The :class:`~graphstrata.hierarchy.HierarchyConfig` a build configuration describes (used
    by the build and by incremental re-clustering, so both cluster alike)."""
    return HierarchyConfig(
        max_community_size=config.max_community_size,
        min_communities=config.min_communities,
        max_layers=config.max_layers,
        similarity_percentile=config.similarity_percentile,
        max_knn=config.max_knn,
        seed=config.seed,
    )


def cluster_communities(
    kg: KnowledgeGraph,
    chunks: Sequence[Chunk],
    entity_vecs: np.ndarray,
    config: GraphStrataConfig,
    embedder: Embedder,
    prog: Progress,
    llm: LLMClient | None = None,
    summary_tfidf: FrozenTfidf | None = None,
    neighbours: Neighbours | None = None,
) -> tuple[list[list[Community]], list[np.ndarray]]:
    """Attributed community layers over the KG (ArchRAG Alg. 1) with extractive summaries, or
    with an ``llm`` (and ``config.llm_community_reports``) LLM community reports (ArchRAG
    §1.4-1.5: level 1 from member entities and their relations, higher levels from the
    sub-communities' reports), embedded as the community vectors.

    ``summary_tfidf`` is the summaries' TF-IDF model (:func:`fit_summary_tfidf`; fitted on
    ``chunks`` when ``None``). ``neighbours``: the entities' k-NN from the build's entity index
    (:meth:`~graphstrata.index.LayeredIndex.knn`), used when there are more than
    :data:`~graphstrata.hierarchy.EXACT_KNN_MAX` entities.

    Returns:
        ``(layers, layer_vectors)``: communities per layer (members and entity ids as ids,
        chunk provenance ranked) and float32 ``(n_i, dim)`` vectors per layer.
    """
    if summary_tfidf is None:
        summary_tfidf = fit_summary_tfidf([c.text for c in chunks])
    if summary_tfidf is None:
        return [], []
    vectorizer = summary_tfidf.vectorizer()
    entities = [kg.entities[e] for e in kg.entity_ids]
    # per node of the level below: entity rows and sentences
    below_rows: list[list[int]] = [[i] for i in range(len(entities))]
    below_sentences: list[list[str]] = [
        [e.description[s:t] for s, t in split_sentences(e.description)] for e in entities
    ]

    use_reports = llm is not None and config.llm_community_reports
    reports: dict[int, list[Any]] = {}  # level -> CommunityReport per community (LLM only)

    def summarise(level: int, clusters: list[list[int]]) -> list[tuple[str, str]]:
        nonlocal below_rows, below_sentences
        rows_next = [sorted({r for m in members for r in below_rows[m]}) for members in clusters]
        out = extractive_summaries(
            [
                (
                    [entities[r].name for r in rows],
                    [entities[r].weight for r in rows],
                    [s for m in members for s in below_sentences[m]],
                )
                for members, rows in zip(clusters, rows_next, strict=True)
            ],
            vectorizer,
        )
        sents_next = [[summary] if summary else [] for _, summary in out]
        if use_reports:
            level_reports = _llm_reports(llm, kg, level, clusters, rows_next, reports.get(level - 1), out)
            reports[level] = level_reports
            out = [(r.title, r.text()) for r in level_reports]
            sents_next = [[r.text()] for r in level_reports]
        below_rows, below_sentences = rows_next, sents_next
        return out

    edges = np.asarray([(kg.row[a], kg.row[b]) for a, b in kg.relations], dtype=np.int64).reshape(-1, 2)
    hcfg = hierarchy_config(config)

    def run():
        return attributed_communities(
            entity_vecs,
            edges,
            summarise,
            (lambda texts: prog.embed(embedder, texts, "embedding communities"))
            if config.community_vectors == "summary" or use_reports
            else None,
            hcfg,
            neighbours=neighbours,
        )

    layers, layer_vecs = prog.stage("clustering communities", run)
    # indices → ids, chunk provenance
    below_ids = kg.entity_ids
    for level, comms in enumerate(layers, 1):
        for ci, c in enumerate(comms):
            if level in reports:
                c.rating = reports[level][ci].rating
                c.findings = list(reports[level][ci].findings)
            c.members = [below_ids[int(m)] for m in c.members]
            c.entity_ids = [kg.entity_ids[int(e)] for e in c.entity_ids]
            c.chunk_ids = rank_chunks([kg.entities[e].chunk_ids for e in c.entity_ids])
        below_ids = [c.id for c in comms]
    return layers, layer_vecs


def _llm_reports(llm, kg, level, clusters, rows, below_reports, fallbacks) -> list[Any]:
    """One LLM community report per cluster of ``level`` (ArchRAG §1.4-1.5).

    The context of a community is its entities (name, type, description; ranked by degree in
    the KG) and the relations among them; above layer 1 the member communities' reports take
    their place when the raw context does not fit the budget
    (:func:`~graphstrata.llm.reports.graph_context`). ``rows`` are the entity rows under each
    cluster; ``fallbacks`` the extractive ``(title, summary)`` used where the model's output is
    unreadable.
    """
    from .llm.reports import community_reports, graph_context

    contexts = [
        graph_context(
            kg,
            [kg.entity_ids[r] for r in rows_of],
            [below_reports[int(m)] for m in members] if level > 1 else (),
        )
        for members, rows_of in zip(clusters, rows, strict=True)
    ]
    return community_reports(llm, contexts, fallbacks, stage=f"community_reports:layer_{level}")


def estimate_llm_cost(docs: Sequence[Document], config: GraphStrataConfig, embedder: Embedder) -> dict[str, Any]:
    """What a build with an LLM would spend, without calling one (``graphstrata index --dry-run``).

    Extraction is counted exactly: the real prompts of every chunk go to a
    :class:`~graphstrata.llm.DryRunLLM` that answers nothing and counts their tokens
    (gleaning passes included; completion tokens are a flat estimate per call). Community
    reports and HiRAG summary entities depend on the graph the LLM will extract, so they are
    projected from the offline graph of the same chunks: ``n / (max_community_size / 2)``
    communities per layer while at least ``min_communities`` remain, and ``sqrt(n)`` GMM
    clusters per HiRAG layer — rough, and labelled so.

    Returns:
        ``{"chunks": n, "stages": {stage: {"calls", "prompt_tokens", "completion_tokens",
        "estimated": True, "exact_calls": bool}}, "total": {...}}``; tokens are
        ``chars / 4`` estimates.

    Raises:
        ValueError: an empty corpus, or a document over ``config.max_document_chars``.
    """
    from .llm import DryRunLLM

    if not docs:
        raise ValueError("empty corpus: no documents given")
    chunks = chunk_documents(
        docs, config.chunk_size, config.chunk_overlap, embedder=embedder, max_document_chars=config.max_document_chars
    )
    if not chunks:
        raise ValueError("empty corpus: the documents contain no text")
    titles = {d.id: d.metadata["title"] for d in docs if d.metadata.get("title")}
    dry = DryRunLLM()
    client = LLMClient(dry, concurrency=1)
    try:
        _extractor(config, client, False).extract(chunks, titles)
    except ValueError:
        pass  # the dry run extracts nothing, by design
    stages: dict[str, dict[str, Any]] = {
        name: {**u.to_dict(), "exact_calls": True} for name, u in client.ledger.stages.items()
    }
    entities, _ = _extractor(config, None, False).extract(chunks, titles)
    desc_tokens = np.mean([estimate_tokens(e.description) for e in entities]) if entities else 0.0
    per_report = int(min(desc_tokens * config.max_community_size / 2 + 400, 8000))
    n, reports = len(entities), 0
    for _ in range(config.max_layers):
        n = int(n // max(config.max_community_size / 2, 1))
        if n < config.min_communities:
            break
        reports += n
    if config.llm_community_reports and reports:
        stages["community_reports (projected)"] = {
            "calls": reports, "prompt_tokens": reports * per_report,
            "completion_tokens": reports * dry.completion_estimate, "estimated": True, "exact_calls": False,
        }
    n, summaries = len(entities), 0
    while n > 2:
        n = int(np.sqrt(n))
        summaries += n
    if summaries:
        stages["hirag_summaries (projected)"] = {
            "calls": summaries, "prompt_tokens": summaries * 600,
            "completion_tokens": summaries * dry.completion_estimate, "estimated": True, "exact_calls": False,
        }
    total = {
        key: int(sum(s[key] for s in stages.values())) for key in ("calls", "prompt_tokens", "completion_tokens")
    }
    return {"chunks": len(chunks), "stages": stages, "total": {**total, "estimated": True}}
