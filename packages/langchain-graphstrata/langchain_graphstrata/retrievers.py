"""`GraphStrataRetriever`: a LangChain retriever over a graphstrata index.

The retriever only translates: a query goes to :meth:`graphstrata.GraphStrata.retrieve` /
:meth:`~graphstrata.GraphStrata.aretrieve`, and each returned ``Hit`` comes back as a LangChain
:class:`~langchain_core.documents.Document`. Documents go the other way through
:meth:`GraphStrataRetriever.add_documents` / :meth:`~GraphStrataRetriever.delete`.

It keeps the adapter contract shared with the LlamaIndex packages (``docs/python-api.md``, "What
the framework adapters promise"): ``k`` is at most k chunk Documents; graph context is opt-in
through ``kinds`` with its own cap ``context_k``; scores are the core's [0, 1] scores (in
metadata only with ``include_scores=True``: ``Document.id`` is the chunk id and a chunk is the
same Document whatever the query); ``filter`` is the core's ``filters=`` applied before ``k``
is cut; unknown arguments raise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from graphstrata import EmbedderMismatchError, GraphStrata
from graphstrata.retrieval import retrieval_arguments
from graphstrata.retrieval import RetrieveRequest, check_retrieve_args
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, Field, PrivateAttr

from langchain_graphstrata.answer import GraphStrataAnswerer
from langchain_graphstrata.contract import (
    ARGUMENT_HINTS,
    CALL_ARGUMENTS,
    DEFAULT_CONTEXT_K,
    LANGCHAIN_KWARGS,
    SEARCH_KWARGS,
    SEARCH_TYPES,
    check_search,
    request,
)
from langchain_graphstrata.conversion import (
    RESERVED_METADATA_KEYS,
    embedder_from_langchain,
    hit_to_document,
    hits_to_documents,
    to_graphstrata_documents,
)
from langchain_graphstrata.llms import to_graphstrata_llm

if TYPE_CHECKING:
    from graphstrata import GraphStrataConfig, Hit
    from graphstrata.llm.base import LLMInput
    from langchain_core.language_models import BaseLanguageModel


class GraphStrataRetriever(BaseRetriever):
    """Graph-RAG retriever over a graphstrata index (ArchRAG, HiRAG, LightRAG, AGRAG, ...).

    Give exactly one of ``index_dir`` (a directory written by ``GraphStrata.persist`` or
    ``graphstrata index``) or ``index`` (a ``graphstrata.GraphStrata`` object), or build one
    from LangChain Documents with :meth:`from_documents`.

    Example:
        .. code-block:: python

            from langchain_graphstrata import GraphStrataRetriever

            retriever = GraphStrataRetriever(index_dir="my_index", method="archrag", k=5)
            docs = retriever.invoke("Who founded the company?")          # <= 5 chunk Documents
            docs = retriever.invoke("Who founded the company?", k=2)     # <= 2 chunk Documents
            filtered = GraphStrataRetriever(
                index_dir="my_index",
                search_type="similarity_score_threshold",
                search_kwargs={"k": 4, "filter": {"year": {"$gte": 2020}},
                               "score_threshold": 0.3},
            )
            ctx = GraphStrataRetriever(index_dir="my_index", kinds=None)  # + <= 5 context hits

    What comes back (the contract shared with the LlamaIndex packages):

    * ``k`` means **at most k chunk Documents**, best first (fewer only when the index, the
      filter or the threshold leaves fewer). By default ``kinds=("chunk",)``: chunks only.
    * Graph context is opt-in: ``kinds=None`` (every kind) or any subset including
      ``"entity"``, ``"relation"``, ``"community"``, ``"path"``. The context Documents come
      after the chunks, best score first, at most ``context_k`` of them (default 5); they do
      not count against ``k``.
    * ``Document.id`` is the hit id (the chunk id ``"<document_id>#<n>"`` for chunks) and the
      metadata depend on the chunk only, so the same chunk is an equal Document whatever the
      query: ``MultiQueryRetriever`` / ``EnsembleRetriever`` keep it once.
    * With ``include_scores=True``, ``metadata["score"]`` is the core's score in [0, 1]
      (monotone in the method's ranking), ``metadata["raw_score"]`` the method's own score and
      ``metadata["rank"]`` the position. See :func:`hit_to_document` for every metadata key.

    Vector-store style search arguments (as ``VectorStoreRetriever``):

    * ``search_type="similarity"`` (default) or ``"similarity_score_threshold"``; the latter
      needs ``search_kwargs["score_threshold"]`` in [0, 1] and drops every Document whose
      score is below it. Any other search type (``"mmr"``, ...) raises ``ValueError``.
    * ``search_kwargs``: ``{"k": int, "filter": {...}, "score_threshold": float}``; other keys
      raise. ``filter`` is a metadata filter on your documents (the operator form of
      ``graphstrata.filters``: ``{"author": "Ada", "year": {"$gte": 2020}}``, ``$eq $ne $gt
      $gte $lt $lte $in $nin``, ``$contains $any $all`` on list fields, ``$and`` / ``$or``), applied inside retrieval before ``k`` is
      cut: you get the best ``k`` chunks of the matching documents.
      ``search_kwargs["k"]`` and ``k=`` are the same setting (giving both with different
      values raises).

    Per-call overrides: ``invoke(query, k=..., filter=..., score_threshold=..., method=...,
    kinds=..., context_k=..., **method_options)``; any other keyword is a method option
    (merged over ``method_options`` for the constructor's method; a per-call ``method`` gets
    only the per-call options) and an option the method does not have raises ``ValueError``.

    Lifecycle: :meth:`add_documents` (add or replace by id) and :meth:`delete` change the
    index in place; when the index has a persist directory (``index_dir=``, or
    ``from_documents(persist_dir=...)``) each change is persisted there atomically before it
    becomes visible, and a failed write changes nothing.

    Args (fields):
        index_dir: path of a persisted index directory.
        index: a ``GraphStrata`` object (kept by reference, not copied).
        method: retrieval method name; one of ``index.methods`` (``"archrag"``, ``"dense"``,
            ``"bm25"``, ``"hybrid"``, ...).
        k: at most this many chunk Documents, > 0.
        kinds: hit kinds to return; ``("chunk",)`` by default, ``None`` for chunks + context.
        context_k: at most this many graph-context Documents (when ``kinds`` asks for them),
            > 0.
        search_type: ``"similarity"`` or ``"similarity_score_threshold"``.
        search_kwargs: ``k``, ``filter``, ``score_threshold`` (see above).
        method_options: keyword options for the method (see the graphstrata method docs).
        include_scores: put the per-query ``score`` / ``raw_score`` / ``rank`` (and LightRAG
            mix's ``retrieved_by``) into each Document's metadata (default ``False``: per-query
            values in metadata make the same chunk two different Documents for LangChain's
            deduplicating combinators).
        embeddings: a LangChain ``Embeddings`` to embed queries with when loading
            ``index_dir``; the index must have been built with the same embeddings (same id and
            dimension). ``None`` uses the embedder the index was built with (the offline
            default unless you chose another).
        llm: a LangChain chat model (wrapped in ``ChatModelLLM``; a ``graphstrata.llm.LLM``
            is taken as is). Loading ``index_dir``, it is attached to the index (with the
            index's response cache), so the retrieval steps that need an LLM (LightRAG
            keywords, AGRAG's fact filter) use it; with ``index=`` the index keeps the LLM it
            was built or loaded with. Either way it is the default LLM of
            :meth:`as_answer_chain`. ``None``: no LLM.

    Raises:
        ValueError: an unknown argument (named, with the name to use when it is a known
            alias such as ``top_k``); neither or both of ``index`` / ``index_dir`` given;
            ``k`` / ``context_k`` not a positive int; unknown ``method`` (the message lists
            the known ones); an option name the method does not declare (the message lists
            its options); unknown ``kinds``; an unsupported ``search_type``; an unknown
            ``search_kwargs`` key; a missing or out-of-range ``score_threshold``; an invalid
            ``filter``; ``embeddings`` given together with ``index``; an index built with
            other embeddings than ``embeddings`` (from ``GraphStrata.load``).
        FileNotFoundError: ``index_dir`` does not exist or is not a directory.
        TypeError: ``index`` is not a GraphStrata-like object.

    All of these are raised at construction; ``invoke`` raises ``ValueError`` for a bad
    per-call argument and for an empty query.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    allowed_search_types: ClassVar[tuple[str, ...]] = SEARCH_TYPES

    index_dir: str | Path | None = None
    """Path of a persisted graphstrata index directory."""
    index: Any = Field(default=None, exclude=True, repr=False)
    """A ``graphstrata.GraphStrata`` object; alternative to ``index_dir``."""
    method: str = "archrag"
    """Retrieval method; one of ``index.methods``."""
    k: int = 5
    """At most this many chunk Documents per query."""
    kinds: tuple[str, ...] | None = ("chunk",)
    """Hit kinds to return; None returns chunks followed by the method's graph context."""
    context_k: int = DEFAULT_CONTEXT_K
    """At most this many graph-context Documents (after the chunks) when kinds asks for them."""
    search_type: str = "similarity"
    """``"similarity"`` or ``"similarity_score_threshold"`` (needs a score_threshold)."""
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    """``{"k": ..., "filter": {...}, "score_threshold": ...}``, as for VectorStoreRetriever."""
    method_options: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword options passed to the method on every call."""
    include_scores: bool = False
    """Write ``score`` / ``raw_score`` / ``rank`` into each Document's metadata."""
    embeddings: Embeddings | None = Field(default=None, exclude=True, repr=False)
    """LangChain embeddings used when loading ``index_dir``; None keeps the index's own."""
    llm: Any = Field(default=None, exclude=True, repr=False)
    """LangChain chat model of the LLM path: attached to the index when loading ``index_dir``
    (query-time LLM steps use it) and the default LLM of :meth:`as_answer_chain`."""

    _gs: Any = PrivateAttr(default=None)
    _request: RetrieveRequest = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        # Validation happens before pydantic's so our errors surface as plain ValueError /
        # FileNotFoundError with one clear message instead of a wrapped ValidationError, and
        # "3" or True are not silently coerced into k.
        data, checked = type(self)._check_arguments(data)
        super().__init__(**data)
        self._request = checked
        if (self.index is None) == (self.index_dir is None):
            raise ValueError(
                "give exactly one of index_dir= (a persisted index directory) or index= "
                "(a graphstrata.GraphStrata); or use GraphStrataRetriever.from_documents(...)"
            )
        if self.index is not None:
            if self.embeddings is not None:
                raise ValueError(
                    "embeddings= is only used when loading index_dir=; a GraphStrata object "
                    "already carries its embedder"
                )
            if not callable(getattr(self.index, "retrieve", None)) or not hasattr(
                self.index, "methods"
            ):
                raise TypeError(
                    f"index must be a graphstrata.GraphStrata, got {type(self.index).__name__}"
                )
            self._gs = self.index
        else:
            self._gs = _load(Path(self.index_dir).expanduser(), self.embeddings, self.llm)  # type: ignore[arg-type]

    @classmethod
    def _check_arguments(cls, data: dict[str, Any]) -> tuple[dict[str, Any], RetrieveRequest]:
        """Check constructor arguments that need no index: LangChain's argument forms here,
        everything the core checks through :func:`~langchain_graphstrata.contract.request`.

        Returns:
            ``(data with k, kinds and context_k normalised, the core request of the settings)``.
        """
        unknown = sorted(set(data) - set(cls.model_fields))
        if unknown:
            hints = [f"{u!r} -> {ARGUMENT_HINTS[u]}" for u in unknown if u in ARGUMENT_HINTS]
            hint = f" (use {'; '.join(hints)})" if hints else ""
            known = ", ".join(n for n in cls.model_fields if n not in ("tags", "metadata"))
            raise ValueError(
                f"unknown argument(s) {unknown} for {cls.__name__}{hint}; its arguments: {known}"
            )
        data = dict(data)
        search_kwargs = data.get("search_kwargs") or {}
        if not isinstance(search_kwargs, Mapping):
            raise ValueError(f"search_kwargs must be a dict, got {type(search_kwargs).__name__}")
        bad = sorted(set(search_kwargs) - set(SEARCH_KWARGS))
        if bad:
            raise ValueError(
                f"unknown search_kwargs key(s) {bad}; supported: {', '.join(SEARCH_KWARGS)}"
                + (" (graph context is kinds= / context_k=, method options method_options=)")
            )
        k_name = "k"
        if "k" in search_kwargs:
            if "k" in data and data["k"] != search_kwargs["k"]:
                raise ValueError(
                    f"k={data['k']!r} and search_kwargs['k']={search_kwargs['k']!r} disagree; give one of them"
                )
            data["k"], k_name = search_kwargs["k"], "search_kwargs['k']"
        if "method_options" in data and not isinstance(data["method_options"], Mapping):
            raise ValueError("method_options must be a dict of method option names to values")
        threshold = check_search(
            data.get("search_type", "similarity"), search_kwargs.get("score_threshold")
        )
        fields = cls.model_fields
        checked = request(
            data.get("method", fields["method"].default),
            data.get("k", fields["k"].default),
            data.get("kinds", fields["kinds"].default),
            data.get("context_k", fields["context_k"].default),
            threshold,
            search_kwargs.get("filter"),
            data.get("method_options") or {},
            k_name=k_name,
        )
        data["k"], data["kinds"], data["context_k"] = checked.k, checked.kinds, checked.context_k
        return data, checked

    # ------------------------------------------------------------------ construction helpers

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        *,
        id_key: str | None = None,
        embeddings: Embeddings | None = None,
        config: GraphStrataConfig | Mapping[str, Any] | None = None,
        persist_dir: str | Path | None = None,
        show_progress: bool = False,
        llm: BaseLanguageModel | LLMInput | None = None,
        **kwargs: Any,
    ) -> GraphStrataRetriever:
        """Build a graphstrata index from LangChain Documents and return a retriever over it.

        Args:
            documents: LangChain ``Document`` objects; one graphstrata document each (the core
                chunks them). ``page_content`` is the text; ``metadata`` is kept (must be
                JSON-serialisable) and comes back on every chunk Document of that source.
            id_key: metadata key holding each document's id. When ``None``, ``Document.id`` is
                used, and a document without an id gets a deterministic one (the first 16 hex
                digits of the SHA-256 of its text).
            embeddings: a LangChain ``Embeddings`` to embed chunks, graph records and queries
                with (wrapped by :func:`embedder_from_langchain`); ``None`` uses graphstrata's
                offline default embedder.
            config: a ``graphstrata.GraphStrataConfig`` (``None`` for the defaults).
            persist_dir: if given, the index is persisted there (atomically), and every later
                :meth:`add_documents` / :meth:`delete` is persisted there too.
            show_progress: show the core's build progress bars.
            llm: a LangChain chat model (wrapped in ``ChatModelLLM``) to build with: LLM
                extraction (typed entities, described relations with keywords), LLM community
                reports, HiRAG summary entities. It stays attached to the index for the
                query-time LLM steps and :meth:`as_answer_chain`. With ``persist_dir`` every
                response is cached there, so an interrupted build resumes without paying
                twice. The build's calls and tokens: ``retriever.graphstrata.build_usage``.
                ``None``: the offline build.
            **kwargs: retriever fields: ``method``, ``k``, ``kinds``, ``context_k``,
                ``search_type``, ``search_kwargs``, ``method_options``.

        Returns:
            A ``GraphStrataRetriever`` whose ``index`` is the freshly built ``GraphStrata``.

        An empty ``documents`` gives an empty index (as ``InMemoryVectorStore``): ``invoke``
        returns ``[]`` until :meth:`add_documents` builds it with these settings.

        Raises:
            ValueError: a document lacks ``id_key``; duplicate ids; any argument
                the constructor would refuse (checked before the build).
            TypeError: an item is not a LangChain ``Document``, or ``llm`` is neither a
                LangChain model nor a graphstrata LLM / callable.
            graphstrata.llm.LLMError: an LLM call failed after its retries.
        """
        from graphstrata import GraphStrata

        for bad in ("index", "index_dir"):
            if bad in kwargs:
                raise ValueError(f"from_documents builds its own index; do not pass {bad}=")
        # Fail before the (slow) build when an argument, the method or its options are wrong.
        kwargs, _ = cls._check_arguments(kwargs)
        gs_docs = to_graphstrata_documents(documents, id_key)
        embedder = embedder_from_langchain(embeddings) if embeddings is not None else None
        core_llm = to_graphstrata_llm(llm)
        if not gs_docs:  # an empty index: the first add_documents builds it
            gs = GraphStrata.empty(
                config=config, persist_dir=persist_dir, embedder=embedder,
                **({"llm": core_llm} if core_llm is not None else {}),
            )
            return cls(index=gs, llm=llm, **kwargs)
        gs = GraphStrata.build(
            gs_docs,
            config=config,
            persist_dir=persist_dir,
            embedder=embedder,
            show_progress=show_progress,
            **({"llm": core_llm} if core_llm is not None else {}),
        )
        return cls(index=gs, llm=llm, **kwargs)

    @property
    def graphstrata(self) -> GraphStrata:
        """The underlying ``graphstrata.GraphStrata`` (loaded or given)."""
        return self._gs

    def as_answer_chain(self, llm: BaseLanguageModel | LLMInput | None = None, **answer_options: Any) -> GraphStrataAnswerer:
        """A Runnable answering with this retriever's method's own generation step.

        ``chain.invoke("question")`` (or ``{"question": ...}``) returns ``{"answer": str,
        "context": [Document, ...], "usage": {...}, "question": ..., "method": ...}``; see
        :class:`~langchain_graphstrata.GraphStrataAnswerer`.

        Args:
            llm: the LangChain chat model to answer with; ``None``: this retriever's ``llm``,
                else the LLM the index was built or loaded with.
            **answer_options: generation options (``response_type``, ``max_context_tokens``).
        """
        return GraphStrataAnswerer(retriever=self, llm=llm, answer_options=answer_options)

    # ------------------------------------------------------------------ lifecycle

    def add_documents(
        self, documents: Sequence[Document], *, ids: Sequence[str] | None = None
    ) -> list[str]:
        """Add documents to the index, or replace those whose id is already there.

        As LangChain's ``VectorStore.add_documents``: "add or update", in one core
        ``insert`` (one graph update): new ids are added, an indexed id with other text or
        metadata is replaced, an unchanged one is left as it is. When the index has a persist
        directory, the update is persisted there atomically before queries see it; if the
        update or the write fails, nothing changes, in memory or on disk.

        Args:
            documents: LangChain Documents; ``page_content`` is the text, ``metadata`` is kept
                (JSON-serialisable) and comes back on every chunk Document.
            ids: one id per document; they win over ``Document.id``. A document with neither
                gets the id :meth:`from_documents` would give it (16 hex digits of the SHA-256
                of its text), so adding the same text twice does not duplicate it.

        Returns:
            The document ids, in input order.

        Raises:
            ValueError: ``ids`` of another length or with an empty/non-str id; duplicate ids
                in one call; metadata the index cannot store.
            TypeError: an item is not a LangChain ``Document``.
            OSError: persisting failed (the index is unchanged).
        """
        gs_docs = to_graphstrata_documents(documents, ids=ids)
        if not gs_docs:
            return []
        self._gs.insert(gs_docs)
        return [d.id for d in gs_docs]

    async def aadd_documents(
        self, documents: Sequence[Document], *, ids: Sequence[str] | None = None
    ) -> list[str]:
        """:meth:`add_documents` in a worker thread."""
        return await run_in_executor(None, self.add_documents, documents, ids=ids)

    def delete(self, ids: str | Iterable[str]) -> int:
        """Remove documents by id (the ids :meth:`add_documents` returned), in one core
        ``delete``.

        Persisted like :meth:`add_documents`. Unknown ids are ignored, as in LangChain's
        ``InMemoryVectorStore.delete`` (the known ones are still removed; the core's
        ``KeyError`` for unknown ids never escapes). A single ``str`` is one id
        (``delete("abc")`` removes document ``"abc"``).

        Returns:
            How many documents were removed (0 when none of ``ids`` is indexed).

        Raises:
            ValueError: an id that is not a string; removing every document (an index needs at
                least one).
            OSError: persisting failed (the index is unchanged).
        """
        if ids is None:
            raise ValueError("delete needs the ids of the documents to remove")
        if isinstance(ids, str):
            ids = [ids]
        given = list(ids)
        bad = [i for i in given if not isinstance(i, str)]
        if bad:
            raise ValueError(f"document ids must be strings, got {bad[0]!r}")
        wanted = list(dict.fromkeys(given))
        self._gs.refresh()  # ids another worker added are known once its version is read
        for _ in range(3):
            known = [i for i in wanted if i in self._gs.documents]
            if not known:
                return 0
            try:
                return int(self._gs.delete(known))
            except KeyError:
                # a concurrent writer removed some of them meanwhile; the failed core delete
                # changed nothing, so retry with the ones still indexed
                continue
        raise RuntimeError(f"documents {wanted!r} kept changing during delete")

    async def adelete(self, ids: str | Iterable[str]) -> int:
        """:meth:`delete` in a worker thread."""
        return await run_in_executor(None, self.delete, ids)

    # ------------------------------------------------------------------ retrieval

    def check_method(self, method: str) -> None:
        """Check that ``method`` is a retrieval method of the core.

        Raises:
            ValueError: an unknown method (the message lists the known ones).
        """
        check_retrieve_args(method)

    def call_arguments(self, kwargs: dict[str, Any]) -> RetrieveRequest:
        """One call's core request: the per-call keywords of ``invoke`` (``k``, ``method``,
        ``kinds``, ``context_k``, ``filter``, ``score_threshold``; any other keyword is a
        method option) over this retriever's settings, checked by the core.

        Raises:
            ValueError: a bad ``k`` / ``context_k`` / ``kinds`` / ``filter`` /
                ``score_threshold``, an unknown method, or an option the method does not
                declare (the message lists the per-call arguments too).
        """
        kwargs = {k: v for k, v in kwargs.items() if k not in LANGCHAIN_KWARGS}
        for name in ("doc_ids", "document_ids"):
            if name in kwargs:
                raise ValueError(
                    f"{name}= is not an argument of GraphStrataRetriever.invoke: restrict the "
                    "search to some documents with filter={'document_id': {'$in': [...]}}"
                )
        base = self._request
        method = kwargs.pop("method", base.method)
        k = kwargs.pop("k", base.k)
        kinds = kwargs.pop("kinds", base.kinds)
        context_k = kwargs.pop("context_k", base.context_k)
        filter_ = kwargs.pop("filter") if "filter" in kwargs else base.filters
        if "score_threshold" in kwargs:
            threshold = check_search(self.search_type, kwargs.pop("score_threshold"))
        else:
            threshold = base.min_score
        # constructor options belong to the constructor's method
        options = {**base.options, **kwargs} if method == base.method else kwargs
        return request(method, k, kinds, context_k, threshold, filter_, options, per_call=True)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        call = self.call_arguments(kwargs)
        hits = self._gs.retrieve(query, **retrieval_arguments(self._gs, call))
        return hits_to_documents(
            hits, method=call.method, engine=self._gs, include_scores=self.include_scores
        )

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        call = self.call_arguments(kwargs)
        hits = await self._gs.aretrieve(query, **retrieval_arguments(self._gs, call))
        return hits_to_documents(
            hits, method=call.method, engine=self._gs, include_scores=self.include_scores
        )

    def _get_ls_params(self, **kwargs: Any) -> Any:
        params = super()._get_ls_params(**kwargs)
        params["ls_retriever_name"] = f"graphstrata-{kwargs.get('method', self.method)}"
        return params


def _load(path: Path, embeddings: Embeddings | None, llm: Any = None) -> Any:
    """``GraphStrata.load`` with errors in this package's terms (``embeddings=``); ``llm``
    (a LangChain model or graphstrata LLM) is attached when given."""
    if not path.exists():
        raise FileNotFoundError(f"graphstrata index directory not found: {str(path)!r}")
    if not path.is_dir():
        raise FileNotFoundError(
            f"graphstrata index_dir must be a directory, got a file: {str(path)!r}"
        )
    embedder = embedder_from_langchain(embeddings) if embeddings is not None else None
    core_llm = to_graphstrata_llm(llm)
    try:
        if core_llm is None:
            return GraphStrata.load(path, embedder=embedder)
        return GraphStrata.load(path, embedder=embedder, llm=core_llm)
    except EmbedderMismatchError as exc:
        # The core names its own parameter (embedder=); here it is embeddings=.
        if embeddings is None and exc.given is None:
            raise ValueError(
                f"graphstrata index {str(path)!r} was built with embedder {exc.built_with!r}, not "
                "the offline default; pass embeddings= (the LangChain Embeddings it was built "
                "with), e.g. GraphStrataRetriever(index_dir=..., embeddings=my_embeddings)"
            ) from exc
        raise


__all__: Sequence[str] = [
    "GraphStrataRetriever",
    "embedder_from_langchain",
    "hit_to_document",
    "RESERVED_METADATA_KEYS",
    "SEARCH_TYPES",
    "SEARCH_KWARGS",
    "CALL_ARGUMENTS",
]
