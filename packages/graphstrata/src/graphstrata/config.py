"""Build-time configuration (pydantic), persisted with every index, and the input limits.

The limits (``max_document_chars``, ``max_query_chars``, ``max_query_clauses``,
``max_entities_per_chunk``, ``max_relations_per_sentence``) bound the work one input can cause,
so build time and memory grow linearly with the corpus and one query's cost is bounded. Their
defaults are generous: they change nothing on the shared QA corpora (MuSiQue, HotpotQA,
LiHua-World: identical entity and relation counts with and without them). A document or query
over a hard limit raises ``ValueError`` naming it; the extraction and clause caps degrade
(documented where they apply) instead of failing. Configs persisted before these fields
existed load with the defaults.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_MAX_DOCUMENT_CHARS = 50_000_000
"""Default :attr:`GraphStrataConfig.max_document_chars` (characters, about 50 MB of text)."""
DEFAULT_MAX_QUERY_CHARS = 4_000
"""Default :attr:`GraphStrataConfig.max_query_chars` (characters; 13× the longest shared
QA question)."""
DEFAULT_MAX_QUERY_CLAUSES = 4
"""Default :attr:`GraphStrataConfig.max_query_clauses` (clauses; no shared QA question yields
more than 3)."""
DEFAULT_MAX_ENTITIES_PER_CHUNK = 100
"""Default :attr:`GraphStrataConfig.max_entities_per_chunk` (entities per chunk)."""
DEFAULT_MAX_RELATIONS_PER_SENTENCE = 2_000
"""Default :attr:`GraphStrataConfig.max_relations_per_sentence` (entity pairs per sentence)."""


class GraphStrataConfig(BaseModel):
    """Everything that decides how an index is built.

    Chunk sizes are in tokens of the embedder's tokenizer. Defaults were chosen by measuring
    evidence recall on the shared QA corpora (see the README's table).
    """

    model_config = ConfigDict(extra="forbid")

    chunk_size: int = Field(200, gt=0, description="tokens per chunk")
    chunk_overlap: int = Field(32, ge=0, description="tokens shared by consecutive chunks")
    chunking: Literal["tokens", "sentence"] = Field(
        "tokens",
        description="where chunks are cut: 'tokens', a window every chunk_size - chunk_overlap"
        " tokens, cut anywhere (the default, as every index was built so far); 'sentence', whole"
        " sentences within the same token budget, ending at a paragraph where one falls in the"
        " window's second half (graphstrata.chunking.sentence_chunk_text; the statistical"
        " extractor then splits descriptions with the same splitter)",
    )
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
        description="entity vector = (1-w)·name vector + w·mean of its chunks' vectors; 1.0 embeds"
        " no entity names (no second embedding pass: about a fifth of a MiniLM build)",
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
    hnsw_ef_construction: int = Field(
        100,
        ge=1,
        description="C-HNSW build beam (ArchRAG TR §B.3 uses 100); 200 built MuSiQue's indexes"
        " in twice the time with the same recall@5 on the three dev corpora",
    )
    seed: int = 0xDEADBEEF
    max_document_chars: int = Field(
        DEFAULT_MAX_DOCUMENT_CHARS,
        gt=0,
        description="largest document accepted, in characters (str length); a longer one"
        " raises ValueError naming it at loading and chunking: split it first or raise the limit",
    )
    max_query_chars: int = Field(
        DEFAULT_MAX_QUERY_CHARS,
        gt=0,
        description="longest query accepted by retrieve, in characters; a longer one raises"
        " ValueError (the shared QA questions are at most 300 characters)",
    )
    max_query_clauses: int = Field(
        DEFAULT_MAX_QUERY_CLAUSES,
        ge=0,
        description="before/after clauses of one query scored as queries of their own (ArchRAG"
        " decompose), in clauses; the first ones in question order are kept, 0 disables",
    )
    max_entities_per_chunk: int = Field(
        DEFAULT_MAX_ENTITIES_PER_CHUNK,
        gt=0,
        description="entities the statistical extractor keeps per chunk, in entities: the"
        " most-mentioned in the chunk (the document title first); shared QA corpora peak at 53",
    )
    max_relations_per_sentence: int = Field(
        DEFAULT_MAX_RELATIONS_PER_SENTENCE,
        ge=0,
        description="co-occurrence relations the statistical extractor keeps per sentence, in"
        " entity pairs: those of the most-mentioned entities; shared QA corpora peak at 1,378",
    )
    extractor: Literal["auto", "statistical", "nlp"] = Field(
        "statistical",
        description="offline extraction: typed named entities, noun-phrase concepts and relations labelled"
        " from the dependency path by the packaged spaCy pipeline en_core_web_sm 3.8.0 (nlp;"
        " graphstrata.nlp), or TF-IDF 1-3-grams, capitalised spans and sentence co-occurrence"
        " (statistical); auto: nlp, but statistical with the fast preset's embedder (the parser costs"
        " more than that whole build)",
    )
    entity_types: dict[str, str | None] | None = Field(
        None,
        description="the nlp extractor's NER label -> entity type table (OntoNotes labels; None drops a"
        " label); None: graphstrata.nlp.ENTITY_TYPES (person, organization, place, date, work, event,"
        " product, law, group, facility, language). When given, the LLM extraction prompt offers the"
        " same types (otherwise the paper's: organization, person, geo, event)",
    )
    entity_resolution: bool | Literal["auto"] = Field(
        False,
        description="entity resolution after offline extraction (graphstrata.resolution): case,"
        " punctuation, plural and possessive variants, acronyms and close aliases merged into one"
        " entity that keeps the merged ids as its aliases; also applied to incremental inserts;"
        " auto: on with the nlp extractor",
    )
    # -- the LLM path (used only when build gets an llm; issue 13) --------------------------
    llm_extraction: Literal["lightrag", "hirag", "agrag", "statistical"] = Field(
        "lightrag",
        description="extraction with an LLM: typed entities and described relations with"
        " keywords and strength from one joint prompt (LightRAG §1.4-1.7, also what ArchRAG uses),"
        " HiRAG's two-stage extraction (HiRAG §2.2-2.4: entities of the meta types first, then the"
        " relations among them; about twice the calls), AGRAG's TF-IDF entities with LLM triples"
        " (AGRAG §1.3), or the offline statistical"
        " extraction (no extraction calls: the LLM writes only reports, summaries and answers;"
        " the cheapest LLM build, and the one small local models can do)",
    )
    llm_prompt_examples: bool = Field(
        True,
        description="LightRAG extraction prompt with its worked example; False: a short question for small "
        "local models, which copy the example's names (typed entities, no relationships)",
    )
    llm_gleaning: int = Field(1, ge=0, le=5, description="extra extraction passes per chunk (LightRAG §1.6)")
    llm_community_reports: bool = Field(
        True,
        description="LLM community reports (ArchRAG §1.4-1.5) embedded as the community vectors;"
        " False keeps the extractive summaries",
    )
    llm_description_vectors: bool = Field(
        True,
        description="in an LLM build, embed what the LLM wrote (LightRAG §3.1): with lightrag extraction"
        " each entity vector embeds its name and description; with lightrag or agrag extraction each"
        " relation vector its keywords, endpoint names and description, and each AGRAG fact its text"
        " (AGRAG §3.3) for the query-to-fact match. False keeps the offline vectors (name + chunk"
        " centroid, relations composed from their endpoints, facts scored without vectors); offline"
        " and statistical builds never change. Indexes persisted before this field load with False",
    )
    llm_concurrency: int = Field(4, ge=1, le=256, description="LLM calls in flight at once")
    llm_context_window: int | None = Field(
        None,
        ge=1,
        description="the LLM's context window in tokens (prompt and answer); None takes the model's own"
        " (LlamaIndex LLM.metadata.context_window, the LangChain model's profile). Prompt budgets shrink"
        " to fit it, and no prompt over it is sent",
    )
    llm_max_failure_share: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="largest share of a build stage's LLM answers that may be unusable (unreadable,"
        " naming nothing in their chunk, or copied from the prompt's example) before the build stops"
        " with one error naming the model, the stage and the share (nothing persisted)",
    )
    build_workers: int = Field(
        0,
        ge=0,
        le=1024,
        description="worker processes for chunking, statistical extraction and (static) embedding"
        " when a build runs in this process (no runner given): 0 decides by corpus size (the CPUs"
        " from 5M characters of text on, else none), 1 runs everything in this process;"
        " $GRAPHSTRATA_NUM_WORKERS overrides it. The index is the same whatever the number",
    )
    query_threads: int = Field(
        1,
        ge=0,
        le=1024,
        description="torch intra-op threads for embedding one query (1: a query never competes "
        "with other work for cores; 0: torch's own setting)",
    )

    @model_validator(mode="after")
    def _check_overlap(self) -> GraphStrataConfig:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size "
                f"({self.chunk_size})"
            )
        return self


def as_config(config: GraphStrataConfig | dict[str, Any] | None) -> GraphStrataConfig:
    """A :class:`GraphStrataConfig` from what a caller may pass as a config.

    Args:
        config: a config (returned as is), a dict of its fields, or ``None`` (the defaults).

    Raises:
        ValueError: ``config`` is of another type, or a dict with an unknown field or an
            invalid value (pydantic's message, as one ``ValueError``).
    """
    if config is None:
        return GraphStrataConfig()
    if isinstance(config, GraphStrataConfig):
        return config
    if isinstance(config, dict):
        try:
            return GraphStrataConfig(**config)
        except Exception as exc:  # pydantic.ValidationError → one clear ValueError
            raise ValueError(f"invalid config: {exc}") from exc
    raise ValueError(f"config must be a GraphStrataConfig or dict, got {type(config).__name__}")


STORED_DEFAULTS: dict[str, Any] = {
    "llm_description_vectors": False, "extractor": "statistical", "entity_resolution": False, "chunking": "tokens",
}
"""Fields that change what a build makes, with the value that reproduces an index persisted
before the field existed: :func:`stored_config` fills them in when a stored config lacks them
(the class default would apply otherwise, and an update would mix old and new vectors)."""


def resolved_config(config: GraphStrataConfig, embedder_id: str) -> GraphStrataConfig:
    """``config`` with its ``"auto"`` choices made for a build with the embedder
    ``embedder_id`` (what the index then stores, so an update extracts as its build did):
    ``extractor`` ``"statistical"`` for the fast preset's static embedder, else ``"nlp"``;
    ``entity_resolution`` on exactly with the ``"nlp"`` extractor. Returned as is when
    nothing is ``"auto"``."""
    changes: dict[str, Any] = {}
    extractor = config.extractor
    if extractor == "auto":
        from .static_embedder import FAST_ID

        extractor = changes["extractor"] = "statistical" if embedder_id == FAST_ID else "nlp"
    if config.entity_resolution == "auto":
        changes["entity_resolution"] = extractor == "nlp"
    return config.model_copy(update=changes) if changes else config


def stored_config(data: dict[str, Any] | None) -> GraphStrataConfig:
    """The :class:`GraphStrataConfig` of a persisted index from its stored config dict:
    :func:`as_config`, with each field of :data:`STORED_DEFAULTS` the dict lacks set to the value
    that reproduces an index persisted before the field existed (``llm_description_vectors``:
    ``False``, the name + chunk-centroid entity vectors such an index holds; ``chunking``:
    ``"tokens"``, its token windows, whatever the default becomes).

    Args:
        data: the stored dict (``None``: an index that stored no config, read as ``{}``).

    Raises:
        ValueError: as :func:`as_config` (an unknown field or an invalid value).
    """
    data = dict(data) if isinstance(data, dict) else ({} if data is None else data)
    if isinstance(data, dict):
        data = {**STORED_DEFAULTS, **data}
    return as_config(data)


def _limit(config: Any, name: str, default: int) -> int:
    value = getattr(config, name, None) if config is not None else None
    if value is None and isinstance(config, dict):
        value = config.get(name)
    return int(default if value is None else value)


def check_query(query: Any, config: GraphStrataConfig | dict[str, Any] | None = None) -> None:
    """Reject a query that is not a non-empty string or is longer than ``max_query_chars``.

    Args:
        query: the query text.
        config: the index's :class:`GraphStrataConfig` (or a dict of its fields); ``None``
            uses the default limit (4,000 characters).

    Raises:
        ValueError: ``query`` is not a ``str``, is empty or blank, or has more than
            ``config.max_query_chars`` characters (the message gives its length and the
            limit, in characters).
    """
    if not isinstance(query, str):
        raise ValueError(f"query must be a non-empty string, got {type(query).__name__}")
    if not query.strip():
        raise ValueError("query must be a non-empty string")
    limit = _limit(config, "max_query_chars", DEFAULT_MAX_QUERY_CHARS)
    if len(query) > limit:
        raise ValueError(
            f"query is {len(query):,} characters long, over the limit of {limit:,} "
            f"(config max_query_chars); shorten it or raise max_query_chars in the index's config"
        )


def check_document_size(
    document_id: str, n_chars: int, limit: int | None = DEFAULT_MAX_DOCUMENT_CHARS
) -> None:
    """Reject a document longer than ``limit`` characters.

    Args:
        document_id: the document's id (named in the message).
        n_chars: its length in characters (``len(text)``).
        limit: the largest length accepted, in characters (``config.max_document_chars``);
            ``None`` accepts any length.

    Raises:
        ValueError: ``n_chars > limit``; the message names the document, its size and the
            limit.
    """
    if limit is not None and n_chars > int(limit):
        raise ValueError(
            f"document {document_id!r} is {n_chars:,} characters long, over the limit of "
            f"{int(limit):,} (config max_document_chars); split it into smaller documents or "
            f"raise max_document_chars"
        )
