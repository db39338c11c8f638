"""Shared retrieval operators; every method is a small configuration of these.

Operators (DIGIMON-style): dense chunk search, BM25 chunk scoring, score fusion, entity search
and community search per layer (one C-HNSW pass), induced relations, and chunk ranking from
graph evidence. A method returns a :class:`Retrieval`: a ranked list of chunk rows (so every
method can be scored by evidence recall) and its context hits.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..llm.client import LLMClient
from ..scores import cosine, unit, unit_ranking
from ..structures.provenance import entity_chunks, provenance
from ..types import Hit

if TYPE_CHECKING:  # pragma: no cover
    from ..state import EngineState


@dataclass
class Retrieval:
    """What a method returns.

    Attributes:
        chunks: ``[(chunk_row, score), ...]`` best first; ``score`` in [0, 1], non-increasing
            (:mod:`graphstrata.scores`; build it with :func:`scored`).
        context: entity / relation / community / path hits, in the method's order; each
            ``score`` in [0, 1], non-increasing within a kind, the method's own number in
            ``metadata["raw_score"]``.
        raw_scores: ``{chunk_row: the method's own score}`` for the rows of ``chunks`` (a row
            missing here: its raw score is its score).
        explain: ``{chunk_row: explanation}`` for every row of ``chunks`` when the method ran
            with ``explain=True`` (empty otherwise); an explanation is a JSON-serialisable dict
            (:mod:`graphstrata.methods.explain`), the value of the chunk hit's
            :attr:`~graphstrata.types.Hit.explain`. Context hits carry theirs on the hit.
        chunk_metadata: ``{chunk_row: {key: value}}``: what the method adds to the metadata of
            a row's chunk hit (e.g. LightRAG's ``mode="mix"``: ``retrieved_by``); plain str /
            int / float values, never the keys the core sets (``document_id``, ``raw_score``,
            ...). Empty for most methods.
    """

    chunks: list[tuple[int, float]]
    context: list[Hit] = field(default_factory=list)
    raw_scores: dict[int, float] = field(default_factory=dict)
    explain: dict[int, dict[str, Any]] = field(default_factory=dict)
    chunk_metadata: dict[int, dict[str, Any]] = field(default_factory=dict)


def scored(
    ranked: Iterable[tuple[int, float]],
    transform: Callable[[float], float],
    context: Iterable[Hit] = (),
) -> Retrieval:
    """A :class:`Retrieval` from the method's ranking ``[(row, raw score), ...]`` (best first)
    and its non-decreasing map of a raw score into [0, 1]
    (:func:`graphstrata.scores.unit_ranking`)."""
    chunks, raw = unit_ranking(ranked, transform)
    return Retrieval(chunks, list(context), raw)


def hit_scores(hit: Hit, raw: float, score: float) -> Hit:
    """Set ``hit.score`` (clipped to [0, 1]) and keep ``raw`` in ``metadata["raw_score"]``."""
    hit.score = unit(score)
    hit.metadata["raw_score"] = float(raw)
    return hit


@dataclass(frozen=True)
class OptionSpec:
    """Type and range of one per-query method option (see :meth:`Method.options`).

    Attributes:
        kind: ``"bool"``, ``"int"``, ``"float"``, ``"str"``, ``"callable"``, a class (an
            instance of it is required) or ``None`` (no check); ``None`` in a method's
            :attr:`Method.option_specs` entry means "the type of the default".
        ge, gt, le, lt: bounds of a number (``>=``, ``>``, ``<=``, ``<``); ``None`` = none.
        optional: ``None`` is accepted too (always so when the default is ``None``).
        choices: the accepted values of a ``str`` option; ``None`` = any string.
    """

    kind: str | type | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    optional: bool = False
    choices: tuple[Any, ...] | None = None

    def describe(self) -> str:
        """What the option must be, in words (``"an integer >= 1"``)."""
        kind = self.kind
        if kind == "bool":
            text = "a bool (True or False)"
        elif kind == "int":
            text = "an integer"
        elif kind == "float":
            text = "a finite number"
        elif kind == "str":
            text = "one of " + ", ".join(map(repr, self.choices)) if self.choices else "a string"
        elif kind == "callable":
            text = "a callable"
        elif isinstance(kind, type):
            text = f"a {kind.__name__}"
        else:
            text = "any value"
        bounds = [
            f"{op} {_number(v)}"
            for op, v in ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt))
            if v is not None
        ]
        if bounds:
            text += " " + " and ".join(bounds)
        return text + (" or None" if self.optional else "")

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` has the kind and lies in the bounds."""
        if value is None:
            return self.optional
        kind = self.kind
        if kind == "bool":
            return isinstance(value, (bool, np.bool_))
        if kind == "int":
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
                return False
        elif kind == "float":
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
                return False
            if not math.isfinite(float(value)):
                return False
        elif kind == "str":
            if not isinstance(value, str):
                return False
            return self.choices is None or value in self.choices
        elif kind == "callable":
            return callable(value)
        elif isinstance(kind, type):
            return isinstance(value, kind)
        if kind in ("int", "float"):
            v = float(value)
            if self.ge is not None and not v >= self.ge:
                return False
            if self.gt is not None and not v > self.gt:
                return False
            if self.le is not None and not v <= self.le:
                return False
            if self.lt is not None and not v < self.lt:
                return False
        return True


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def _inferred_spec(default: Any) -> OptionSpec:
    """The spec a default implies: its type; numbers ``>= 0``; ``None`` defaults unchecked."""
    if isinstance(default, bool):
        return OptionSpec("bool")
    if isinstance(default, numbers.Integral):
        return OptionSpec("int", ge=0)
    if isinstance(default, numbers.Real):
        return OptionSpec("float", ge=0)
    if isinstance(default, str):
        return OptionSpec("str")
    if default is None:
        return OptionSpec(None, optional=True)
    return OptionSpec(type(default))


UNIT = OptionSpec(ge=0.0, le=1.0)
"""A share or probability in [0, 1] (``alpha``, mixing weights)."""
COSINE = OptionSpec(ge=-1.0, le=1.0)
"""A cosine-similarity floor in [-1, 1]."""
POSITIVE = OptionSpec(ge=1)
"""A count that must be at least 1."""
DAMPING = OptionSpec(ge=0.0, lt=1.0)
"""A walk's continuation probability in [0, 1)."""
TOKEN_BUDGET = OptionSpec("int", ge=0, optional=True)
"""A budget in tokens, ``None`` = no limit."""


def resolve_spec(defaults: Mapping[str, Any], specs: Mapping[str, OptionSpec], name: str) -> OptionSpec:
    """How option ``name`` is checked: the type of ``defaults[name]`` (numbers ``>= 0``), with
    the bounds, choices and ``None``-acceptance of ``specs[name]`` when given (its ``kind``,
    when set, replaces the default's type).

    Raises:
        KeyError: ``name`` is not in ``defaults``.
    """
    inferred = _inferred_spec(defaults[name])
    given = specs.get(name)
    if given is None:
        return inferred
    return OptionSpec(
        kind=given.kind if given.kind is not None else inferred.kind,
        ge=given.ge,
        gt=given.gt,
        le=given.le,
        lt=given.lt,
        optional=given.optional or defaults[name] is None,
        choices=given.choices,
    )


def check_options(
    owner: str,
    defaults: Mapping[str, Any],
    specs: Mapping[str, OptionSpec],
    given: Mapping[str, Any],
    hint: str = "",
) -> dict[str, Any]:
    """Merge ``given`` options over ``defaults``, checking each given value against
    :func:`resolve_spec` (shared by :meth:`Method.options` and answer generation).

    Args:
        owner: what the options belong to, for the messages (``"method 'archrag'"``).
        hint: text put before the list of known options in the unknown-option message
            (``"per-call arguments: k, filter; "``: the caller's own arguments).

    Returns:
        ``{name: value}`` for every option in ``defaults``.

    Raises:
        ValueError: unknown option name(s), listing the known ones; or the first invalid
            value, naming the option, ``owner``, what it must be and the value given.
    """
    unknown = set(given) - set(defaults)
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)} for {owner}; {hint}known: {sorted(defaults)}")
    for key, value in given.items():
        spec = resolve_spec(defaults, specs, key)
        if not spec.accepts(value):
            raise ValueError(f"option {key!r} of {owner} must be {spec.describe()}, got {value!r}")
    return {**defaults, **given}


COMMON_DEFAULTS: Mapping[str, Any] = {"llm": None, "explain": False}
"""Options every method accepts (added to each subclass's ``defaults``): ``llm``, the
:class:`~graphstrata.llm.LLMClient` of the query-time LLM steps (LightRAG keywords, AGRAG fact
filter; see :func:`query_llm`), accepted and ignored by methods without such a step; and
``explain``: ``True`` attaches to every returned hit why it came back
(:attr:`Retrieval.explain` for the chunk rows, :attr:`~graphstrata.types.Hit.explain` on the
context hits; :mod:`graphstrata.methods.explain`). Default ``False``: no extra work, and the
ranking (rows and scores) is the same either way."""
COMMON_SPECS: Mapping[str, OptionSpec] = {
    "llm": OptionSpec(LLMClient, optional=True),
    "explain": OptionSpec("bool"),
}


def query_llm(state: Any, options: Mapping[str, Any]) -> LLMClient | None:
    """The LLM a method's query-time LLM step uses: ``options["llm"]`` when given, else the
    state's ``llm`` (``None`` when it has none), else ``None`` (the offline path).

    A state ``llm`` that is not yet an :class:`~graphstrata.llm.LLMClient` is wrapped in one
    (:meth:`LLMClient.of`)."""
    client = options.get("llm")
    if client is None:
        client = getattr(state, "llm", None)
    if client is None:
        return None
    return LLMClient.of(client)


class Method:
    """Base class of a retrieval method.

    Subclasses set ``name`` and implement :meth:`retrieve`. ``defaults`` holds the options a
    caller may override per query (unknown option names raise ``ValueError``);
    ``option_specs`` refines how a given value is checked (see :meth:`options`). Every
    subclass also gets the :data:`COMMON_DEFAULTS` options (``llm``, ``explain``).
    """

    name: ClassVar[str] = ""
    defaults: ClassVar[Mapping[str, Any]] = dict(COMMON_DEFAULTS)
    option_specs: ClassVar[Mapping[str, OptionSpec]] = dict(COMMON_SPECS)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.defaults = {**cls.defaults, **{k: v for k, v in COMMON_DEFAULTS.items() if k not in cls.defaults}}
        cls.option_specs = {**COMMON_SPECS, **cls.option_specs}

    @classmethod
    def option_spec(cls, name: str) -> OptionSpec:
        """How option ``name`` is checked: the type of its default (numbers ``>= 0``), with
        the bounds, choices and ``None``-acceptance of ``option_specs[name]`` when given
        (its ``kind``, when set, replaces the default's type).

        Raises:
            KeyError: ``name`` is not an option of the method.
        """
        return resolve_spec(cls.defaults, cls.option_specs, name)

    def options(self, given: Mapping[str, Any], hint: str = "") -> dict[str, Any]:
        """Merge per-query ``given`` options over ``defaults``, checking each given value.

        A value must have the type of the option's default — a real ``bool`` for a bool
        option (not ``"no"`` or ``1``), an integer for an int option (numpy integers
        accepted, not ``1.5`` or ``True``), a finite int or float for a float option — and
        lie in the option's range: ``>= 0`` for numbers unless the method's
        :attr:`option_specs` says otherwise (e.g. ``alpha`` in [0, 1], ``k_per_layer >= 1``).
        Options whose default is ``None`` accept ``None`` and what the spec names (``llm``:
        an :class:`~graphstrata.llm.LLMClient`).

        ``hint`` goes into the unknown-option message before the known options
        (:func:`check_options`).

        Returns:
            ``{name: value}`` for every option of the method.

        Raises:
            ValueError: unknown option name(s), listing the known ones; or the first invalid
                value, naming the option, the method, what it must be and the value given.
        """
        check_options(f"method {self.name!r}", self.defaults, self.option_specs, given, hint)
        return self.resolved(given)

    def resolved(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The options :meth:`retrieve` runs with: ``given`` over :attr:`defaults`, not checked
        again (the request was checked once where it was built:
        :func:`graphstrata.retrieval.check_retrieve_args` calls :meth:`options`)."""
        return {**self.defaults, **given}

    def wants_query_vector(self, options: Mapping[str, Any]) -> bool:
        """Whether :meth:`retrieve` reads the query vector with these options; ``False`` (e.g.
        BM25 without ``explain``): the query is not embedded and ``qvec`` is ``None``."""
        return True

    def retrieve(
        self, state: EngineState, query: str, qvec: np.ndarray, k: int, **options: Any
    ) -> Retrieval:  # pragma: no cover - abstract
        """Run the method for one query.

        Args:
            state: the :class:`~graphstrata.state.EngineState` of this query (read only; one
                immutable state, so everything read from it is consistent).
            query: the question text.
            qvec: float32 ``(dim,)`` L2-normalised query embedding (``None`` when
                :meth:`wants_query_vector` says it does not read it).
            k: number of chunks wanted (> 0); return at least ``min(k, n_chunks)``.
            **options: overrides of :attr:`defaults`, already checked (:meth:`options`, which
                :func:`graphstrata.retrieval.check_retrieve_args` calls); read through
                :meth:`resolved`.

        Returns:
            A :class:`Retrieval`: ranked chunk rows and context hits.
        """
        raise NotImplementedError


# -- operators -------------------------------------------------------------------------------


def minmax(values: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; a constant vector maps to all ones (or zeros when all ≤ 0)."""
    values = np.asarray(values, dtype=np.float32)
    if len(values) == 0:
        return values
    lo, hi = float(values.min()), float(values.max())
    if hi - lo < 1e-12:
        return np.ones_like(values) if hi > 0 else np.zeros_like(values)
    return (values - lo) / (hi - lo)


def dense_candidates(state: EngineState, qvec: np.ndarray, n: int) -> dict[int, float]:
    """Top-``n`` chunk rows by cosine similarity (C-HNSW): ``{row: similarity}``."""
    rows, sims = state.chunk_index.search(qvec, n)
    return {int(r): float(s) for r, s in zip(rows, sims, strict=True)}


def bm25_candidates(state: EngineState, query: str, n: int) -> tuple[dict[int, float], np.ndarray]:
    """Top-``n`` chunk rows by BM25: ``({row: score}, all_scores)``; zero scores dropped.

    Scores every chunk (``all_scores`` is float32 ``(n_chunks,)``): O(corpus) per query. Kept
    for callers that read ``all_scores``; the methods use :func:`bm25_top` and
    :func:`bm25_scores_of`, whose work is the query terms' postings only."""
    scores = state.bm25.scores(query)
    if len(scores) == 0:
        return {}, scores
    n = min(n, len(scores))
    top = np.argpartition(-scores, n - 1)[:n]
    return {int(r): float(scores[r]) for r in top if scores[r] > 0}, scores


def bm25_top(state: EngineState, query: str, n: int) -> dict[int, float]:
    """Top-``n`` chunk rows by BM25 from the query terms' postings
    (:meth:`~graphstrata.bm25.BM25Index.top`): ``{row: score > 0}``, best first (ties: lower
    row); fewer when fewer chunks share a term with the query."""
    rows, scores = state.bm25.top(query, int(n))
    return dict(zip(rows.tolist(), scores.tolist(), strict=True))


def bm25_scores_of(state: EngineState, query: str, rows: np.ndarray) -> np.ndarray:
    """BM25 scores of chunk ``rows`` only: float32 ``(len(rows),)``, equal to
    ``state.bm25.scores(query)[rows]`` (:meth:`~graphstrata.bm25.BM25Index.scores_of`: the
    query terms' postings, nothing per chunk of the corpus). A BM25 object without
    ``scores_of`` is scored in full.
    """
    rows = np.asarray(rows, dtype=np.int64)
    scores_of = getattr(state.bm25, "scores_of", None)
    if scores_of is not None:
        return scores_of(query, rows)
    if not len(rows):
        return np.zeros(0, np.float32)
    return np.asarray(state.bm25.scores(query), np.float32)[rows]


def hybrid_arrays(
    state: EngineState,
    query: str,
    qvec: np.ndarray,
    n: int,
    alpha: float,
    extra_rows: Iterable[int] | np.ndarray = (),
    exact_lexical: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`hybrid_scores` as arrays: int64 candidate rows ascending and their float32 fused
    scores in [0, 1].

    The lexical candidates are BM25's top-``n`` over each query term's impact-ordered prefix
    (:meth:`~graphstrata.bm25.BM25Index.top_impact`: exact BM25 top-``n`` unless a term is
    held by more than ``BM25_IMPACT_ROWS`` chunks; ``exact_lexical=True``: the exact top-``n``,
    :meth:`~graphstrata.bm25.BM25Index.top`, whatever the terms); every candidate, whichever
    list brought it, is then scored exactly.

    Work: one C-HNSW search, at most ``BM25_IMPACT_ROWS`` postings per query term and one dot
    product and ``terms`` binary searches per candidate — bounded by ``n``, ``len(extra_rows)``
    and the query's terms, not by the number of chunks.
    """
    dense_rows, _ = state.chunk_index.search(qvec, n)
    top_impact = None if exact_lexical else getattr(state.bm25, "top_impact", None)  # else exact top
    lex_rows, _ = (top_impact or state.bm25.top)(query, int(n))
    extra = np.fromiter(extra_rows, np.int64) if not isinstance(extra_rows, np.ndarray) else extra_rows
    rows = np.unique(np.concatenate([np.asarray(dense_rows, np.int64), np.asarray(lex_rows, np.int64),
                                     np.asarray(extra, np.int64)]))
    if len(rows) == 0:
        return rows, np.zeros(0, np.float32)
    cos = state.chunk_index.similarity(qvec, rows)
    bm = bm25_scores_of(state, query, rows)
    fused = alpha * minmax(cos) + (1.0 - alpha) * minmax(bm)
    return rows, np.asarray(fused, np.float32)


def hybrid_scores(
    state: EngineState,
    query: str,
    qvec: np.ndarray,
    n: int,
    alpha: float,
    extra_rows: Iterable[int] = (),
) -> dict[int, float]:
    """Normalised score fusion of dense and BM25 over their top-``n`` candidates.

    ``score = alpha · minmax(cosine) + (1 − alpha) · minmax(bm25)`` over the union of both
    candidate lists and ``extra_rows``; exact scores are computed for every candidate (and
    only for them: :func:`hybrid_arrays`). Normalised-score fusion measured 2–4 points of
    recall@5 above RRF on our corpora (DESIGN.md, "What measured well offline").

    Returns:
        ``{chunk_row: fused score in [0, 1]}``.
    """
    rows, fused = hybrid_arrays(state, query, qvec, n, alpha, extra_rows)
    return dict(zip(rows.tolist(), fused.astype(np.float64).tolist(), strict=True))


def representative_chunks(state: EngineState, row: int, m: int) -> tuple[list[str], np.ndarray]:
    """The ``m`` most representative chunks of entity ``row`` (:func:`entity_chunks`: all of
    them for an entity of at most ``m``; ``m`` ≤ :data:`~graphstrata.structures.provenance.ENTITY_CHUNK_LIMIT`): their ids and
    their int64 rows ``(≤ m,)``, most representative first. What a bounded entity hit lists."""
    rows = entity_chunks(state).top(int(row), int(m))
    chunks = state.chunks
    return [chunks[r].id for r in rows.tolist()], rows


def rank(scores: Mapping[int, float], limit: int) -> list[tuple[int, float]]:
    """Sort ``{row: score}`` best first (ties: lower row first), keep ``limit``.

    Large inputs (a score for every chunk after propagation) are cut to the ``limit`` best
    with a partial sort in numpy before the exact sort, which gives the same list."""
    limit = max(int(limit), 0)
    if len(scores) <= max(4 * limit, 256):
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    if limit == 0:
        return []
    try:
        keys = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
        vals = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
    except (TypeError, ValueError, OverflowError):  # keys that are not row numbers
        keys = vals = None
    if keys is None or np.isnan(vals).any():  # NaN breaks the partition's order
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    kth = np.partition(vals, len(vals) - limit)[len(vals) - limit]  # the limit-th best value
    cand = np.flatnonzero(vals >= kth)  # every row that can make the cut, ties included
    order = cand[np.lexsort((keys[cand], -vals[cand]))][:limit]
    return list(zip(keys[order].tolist(), vals[order].tolist(), strict=True))


def rank_arrays(rows: np.ndarray, values: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """:func:`rank` of ``{rows[i]: values[i]}`` (rows distinct): best first, ties lower row
    first, at most ``limit``; a partial sort, so the work is linear in ``len(rows)``.

    Raises:
        ValueError: ``rows`` and ``values`` of different lengths.
    """
    rows = np.asarray(rows, np.int64)
    vals = np.asarray(values, np.float64)
    if rows.shape != vals.shape:
        raise ValueError(f"rows and values differ in length: {len(rows)} vs {len(vals)}")
    limit = min(max(int(limit), 0), len(rows))
    if limit == 0:
        return []
    if np.isnan(vals).any():  # NaN breaks the partition's order: the exact sort of rank()
        return rank(dict(zip(rows.tolist(), vals.tolist(), strict=True)), limit)
    if len(vals) > 4 * limit:
        kth = np.partition(vals, len(vals) - limit)[len(vals) - limit]
        cand = np.flatnonzero(vals >= kth)
    else:
        cand = np.arange(len(vals))
    order = cand[np.lexsort((rows[cand], -vals[cand]))][:limit]
    return list(zip(rows[order].tolist(), vals[order].tolist(), strict=True))


def round_robin(rankings: Sequence[Sequence[tuple[int, float]]], limit: int) -> list[tuple[int, int]]:
    """Merge ranked chunk lists by taking turns, without repeats (LightRAG's merge of its
    vector, entity and relation chunks in ``mode="mix"``: HKUDS/LightRAG ``operate.py``,
    ``_merge_all_chunks``, v1.4; ``seed-lightrag.md`` §2.4 names only the older modes).

    Round ``i`` takes the ``i``-th row of each list in list order; a row already taken is
    skipped. The result is therefore the rows sorted by their best (lowest) rank in any list,
    ties in list order.

    Args:
        rankings: lists of ``(row, score)``, each best first (scores are not read).
        limit: most rows returned (≥ 0).

    Returns:
        ``[(row, round), ...]`` in merged order, at most ``limit``: ``round`` the 0-based rank
        at which the row was taken (its best rank in any list).
    """
    out: list[tuple[int, int]] = []
    seen: set[int] = set()
    limit = max(int(limit), 0)
    for i in range(max((len(r) for r in rankings), default=0)):
        for ranking in rankings:
            if len(out) >= limit:
                return out
            if i < len(ranking) and ranking[i][0] not in seen:
                seen.add(ranking[i][0])
                out.append((int(ranking[i][0]), i))
    return out


def entity_hit(state: EngineState, row: int, similarity: float, max_chunks: int | None = None) -> Hit:
    """A ``kind="entity"`` hit for entity ``row`` (layer 0) at cosine ``similarity``: score
    ``max(0, cos)``, the cosine in ``metadata["raw_score"]``, the entity's ``type`` (``""``
    offline) in ``metadata["type"]``, and the ids entity resolution merged into it in
    ``metadata["aliases"]`` when it has any.

    ``max_chunks``: provenance bounded to the entity's ``max_chunks`` most representative
    chunks (:func:`entity_chunks`; all of them when it has no more), its full chunk count in
    ``metadata["chunk_count"]`` — a hub entity's hit then costs what any other costs. ``None``
    (default): every chunk that mentions it."""
    e = state.kg.entities[state.kg.entity_ids[row]]
    metadata = {"name": e.name, "type": e.type, "weight": e.weight, "raw_score": float(similarity)}
    if e.aliases:  # the ids entity resolution merged into it (issue 28)
        metadata["aliases"] = list(e.aliases)
    if max_chunks is not None:
        metadata["chunk_count"] = len(e.chunk_ids)
    if max_chunks is None or len(e.chunk_ids) <= int(max_chunks):
        chunk_ids = list(e.chunk_ids)
        document_ids = state.document_ids_of(chunk_ids)
    else:
        if int(max_chunks) <= entity_chunks(state).limit:  # the hub's most representative chunks
            chunk_ids, rows = representative_chunks(state, row, int(max_chunks))
            document_ids = provenance(state).document_ids(rows)
        else:
            chunk_ids = list(e.chunk_ids)[: int(max_chunks)]
            document_ids = state.document_ids_of(chunk_ids)
    return Hit(
        id=e.id,
        text=f"{e.name}: {e.description}" if e.description else e.name,
        score=cosine(similarity),
        kind="entity",
        layer=0,
        chunk_ids=chunk_ids,
        document_ids=document_ids,
        metadata=metadata,
    )


def relation_hits(
    state: EngineState, entity_scores: Mapping[str, float], max_chunks: int | None = None
) -> list[Hit]:
    """Relations among the retrieved entities (ArchRAG R_0, spec A12: induced subgraph).

    Raw score = mean of the endpoint entities' cosine similarities (``entity_scores``), score
    ``max(0, raw)``; best first. ``metadata["keywords"]``: the relation's keywords (``""``
    offline). ``max_chunks``: provenance bounded to the relation's first ``max_chunks`` chunks
    (its full count in ``metadata["chunk_count"]``); ``None`` (default): all of them.
    """
    hits = []
    for r in state.kg.induced_relations(entity_scores):
        a, b = state.kg.entities[r.source], state.kg.entities[r.target]
        raw = (entity_scores[r.source] + entity_scores[r.target]) / 2.0
        metadata = {"source": a.name, "target": b.name, "weight": r.weight,
                    "keywords": r.keywords, "raw_score": float(raw)}
        if max_chunks is None:
            chunk_ids = list(r.chunk_ids)
        else:
            chunk_ids = list(r.chunk_ids[: int(max_chunks)])
            metadata["chunk_count"] = len(r.chunk_ids)
        hits.append(relation_hit(state, r, a.name, b.name, raw, chunk_ids, metadata))
    hits.sort(key=lambda h: (-h.metadata["raw_score"], h.id))
    return hits


def relation_hit(
    state: EngineState, r: Any, source: str, target: str, raw: float, chunk_ids: list[str], metadata: dict[str, Any]
) -> Hit:
    """The ``kind="relation"`` hit (layer 0) of KG relation ``r`` between the entities named
    ``source`` and ``target``: text ``"<source> — <target>: <description>"``, score
    ``max(0, raw)`` (a cosine), the documents of ``chunk_ids``, ``metadata`` as given."""
    return Hit(
        id=r.id,
        text=f"{source} — {target}: {r.description}",
        score=cosine(raw),
        kind="relation",
        layer=0,
        chunk_ids=chunk_ids,
        document_ids=state.document_ids_of(chunk_ids),
        metadata=metadata,
    )


def community_hit(state: EngineState, layer: int, row: int, similarity: float) -> Hit:
    """A ``kind="community"`` hit for community ``row`` of ``layer`` (≥ 1) at cosine
    ``similarity``: score ``max(0, cos)``, the cosine in ``metadata["raw_score"]``, the LLM
    report's rating (``None`` offline) in ``metadata["rating"]``."""
    c = state.communities[layer - 1][row]
    prov = provenance(state)
    return Hit(
        id=c.id,
        text=f"{c.title}\n{c.summary}".strip(),
        score=cosine(similarity),
        kind="community",
        layer=layer,
        chunk_ids=list(c.chunk_ids),
        document_ids=prov.document_ids(prov.community_rows(layer, row)),
        metadata={"title": c.title, "size": len(c.entity_ids), "rating": c.rating,
                  "raw_score": float(similarity)},
    )


def spread_to_chunks(
    weighted_sources: Iterable[tuple[float, list[str]] | tuple[float, list[str], int]], state: EngineState
) -> dict[int, float]:
    """Graph evidence on chunks: each source (entity/community with similarity ``s`` and
    chunk list ``C``) adds ``s / sqrt(|C|)`` to every chunk of ``C`` (IDF-like damping, so a
    hub entity mentioned everywhere says little about any one chunk). A source given as
    ``(s, C, size)`` read only part of its chunks: it is damped by its full ``size``.

    Returns:
        ``{chunk_row: evidence}`` (unnormalised).
    """
    out: dict[int, float] = {}
    for score, chunk_ids, *size in weighted_sources:
        if not chunk_ids or score <= 0:
            continue
        w = float(score) / np.sqrt(size[0] if size else len(chunk_ids))
        for cid in chunk_ids:
            row = state.chunk_row.get(cid)
            if row is not None:
                out[row] = out.get(row, 0.0) + w
    return out


def spread_rows(sources: Iterable[tuple[float, np.ndarray, int]]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`spread_to_chunks` over chunk rows: each source ``(s, rows, size)`` adds
    ``s / sqrt(size)`` to each of ``rows`` (``size``: the source's full chunk count, which may
    exceed ``len(rows)`` when only its most representative chunks are read); sources with
    ``s ≤ 0`` or ``size`` 0 add nothing.

    Returns:
        ``(rows, evidence)``: int64 distinct rows ascending and their float64 evidence
        (unnormalised). Work: the rows given, nothing per chunk of the corpus.
    """
    parts_rows, weights, counts = [], [], []
    for score, rows, size in sources:
        if score <= 0 or size <= 0 or not len(rows):
            continue
        parts_rows.append(np.asarray(rows, np.int64))
        weights.append(float(score) / math.sqrt(size))
        counts.append(len(rows))
    if not parts_rows:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    rows, inverse = np.unique(np.concatenate(parts_rows), return_inverse=True)
    values = np.repeat(np.asarray(weights, np.float64), counts)
    return rows, np.bincount(inverse, weights=values, minlength=len(rows))


def bridge_evidence(
    state: EngineState, seeds: Iterable[tuple[int, float]], max_df: int
) -> dict[int, float]:
    """Second-hop evidence (entity bridging, no LLM): chunks that share a rare entity with a
    seed chunk of another document.

    For each seed chunk ``s`` with score ``h_s`` and each entity ``e`` it mentions that occurs
    in at most ``max_df`` chunks, every chunk ``c`` of another document mentioning ``e`` gains
    ``h_s / log2(1 + df(e))``. Multi-hop questions name the first passage; the second is
    usually about an entity (often its title) that the first mentions.

    Returns:
        ``{chunk_row: evidence}`` (unnormalised).
    """
    kg = state.kg
    chunk_entities = kg.chunk_entities()
    out: dict[int, float] = {}
    for row, score in seeds:
        if score <= 0:
            continue
        seed = state.chunks[row]
        for eid in chunk_entities.get(seed.id, ()):
            chunk_ids = kg.entities[eid].chunk_ids
            df = len(chunk_ids)
            if df > max_df or df < 2:
                continue
            w = float(score) / float(np.log2(1.0 + df))
            for cid in chunk_ids:
                r = state.chunk_row.get(cid)
                if r is not None and state.chunks[r].document_id != seed.document_id:
                    out[r] = out.get(r, 0.0) + w
    return out
