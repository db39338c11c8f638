"""The adapter contract as this package applies it: what a retriever call may ask for, how
each argument is checked, and which hits come back.

``k`` is at most k chunk hits; graph context follows, best first, at most ``context_k``;
``score_threshold`` drops hits scoring below it; ``filter`` is checked with the core's
``graphstrata.filters``; method options are checked against the method's declared options.
The retriever (:mod:`langchain_graphstrata.retrievers`) and the answer chain
(:mod:`langchain_graphstrata.answer`) share these rules through this module only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphstrata import Hit

#: Search types, as for LangChain's ``VectorStoreRetriever`` (``"mmr"`` is not offered: a graph
#: method's ranking is not a plain vector ranking to re-diversify).
SEARCH_TYPES: tuple[str, ...] = ("similarity", "similarity_score_threshold")
#: Keys ``search_kwargs`` accepts.
SEARCH_KWARGS: tuple[str, ...] = ("k", "filter", "score_threshold")
#: Keyword arguments ``invoke`` / ``ainvoke`` accept besides method options.
CALL_ARGUMENTS: tuple[str, ...] = (
    "k",
    "filter",
    "score_threshold",
    "method",
    "kinds",
    "context_k",
)
#: Graph-context Documents per query when ``kinds`` asks for them and ``context_k`` is not given.
DEFAULT_CONTEXT_K = 5

#: Keyword arguments LangChain itself may pass through ``invoke(**kwargs)``; never method
#: options.
LANGCHAIN_KWARGS = frozenset({"verbose", "run_id", "run_name", "callbacks", "tags", "metadata"})

#: Names users bring from other retrievers, and what they are called here.
ARGUMENT_HINTS = {
    "top_k": "k",
    "similarity_top_k": "k",
    "n_results": "k",
    "filters": "search_kwargs={'filter': {...}}",
    "filter": "search_kwargs={'filter': {...}}",
    "score_threshold": "search_kwargs={'score_threshold': ...}",
    "embedder": "embeddings",
    "embedding": "embeddings",
    "persist_dir": "index_dir",
}


def check_method(method: str, known: Iterable[str] | None = None) -> None:
    """Check that ``method`` is one of ``known`` (default: the core's registered methods).

    Raises:
        ValueError: an unknown method (the message lists the known ones).
    """
    if known is None:
        from graphstrata.methods import METHODS

        known = METHODS
    known = tuple(known)
    if method not in known:
        raise ValueError(f"unknown method {method!r}; known methods: {', '.join(known)}")


def check_options(method: str, options: Mapping[str, Any], *, per_call: bool = False) -> None:
    """Reject option names the method does not declare (when the core declares them).

    Raises:
        ValueError: an option ``method`` does not declare (the message lists its options, and
            the per-call arguments when ``per_call``).
    """
    from graphstrata.methods import METHODS

    cls = METHODS.get(method)
    defaults = getattr(cls, "defaults", None)
    if not isinstance(defaults, Mapping):
        return  # the core will validate at query time
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        known = ", ".join(sorted(defaults)) or "none"
        where = f"per-call arguments: {', '.join(CALL_ARGUMENTS)}; " if per_call else ""
        raise ValueError(
            f"unknown option(s) {unknown} for method {method!r}; {where}its options: {known}"
        )


def check_filter(spec: Any) -> dict[str, Any] | None:
    """Validate a metadata filter now (``None`` = no filter), so a bad one fails early.

    Raises:
        ValueError: a bad key or operator (from ``graphstrata.filters.compile_filter``).
    """
    if spec is None:
        return None
    from graphstrata.filters import compile_filter

    compile_filter(spec)  # ValueError naming the bad key / operator
    return dict(spec)


def check_threshold(value: Any) -> float:
    """A score threshold as a float.

    Raises:
        ValueError: ``value`` is not a number in [0, 1].
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and 0.0 <= value <= 1.0
    ):
        raise ValueError(
            f"score_threshold must be a number in [0, 1] (scores are the core's [0, 1] "
            f"scores), got {value!r}"
        )
    return float(value)


def check_search(search_type: Any, threshold: Any) -> float | None:
    """Validate a search type with its threshold; returns the threshold to apply.

    Raises:
        ValueError: a search type not in :data:`SEARCH_TYPES`;
            ``"similarity_score_threshold"`` without a threshold or with one outside [0, 1];
            a threshold with ``"similarity"``.
    """
    if search_type not in SEARCH_TYPES:
        raise ValueError(
            f"search_type {search_type!r} is not supported; supported: "
            f"{', '.join(repr(s) for s in SEARCH_TYPES)}"
        )
    if search_type == "similarity_score_threshold":
        if threshold is None:
            raise ValueError(
                "search_type='similarity_score_threshold' needs "
                "search_kwargs={'score_threshold': <number in [0, 1]>}"
            )
        return check_threshold(threshold)
    if threshold is not None:
        raise ValueError(
            "score_threshold is only used with search_type='similarity_score_threshold' "
            f"(this retriever's search_type is {search_type!r})"
        )
    return None


@dataclass(frozen=True)
class CallArguments:
    """One query's resolved arguments."""

    method: str
    k: int
    kinds: tuple[str, ...] | None
    context_k: int
    filter: dict[str, Any] | None
    threshold: float | None
    options: dict[str, Any]

    def core_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the core's ``retrieve`` / ``aretrieve`` for this call."""
        kw: dict[str, Any] = {"method": self.method, "k": self.k, "kinds": self.kinds}
        if self.filter is not None:
            kw["filters"] = self.filter
        return {**kw, **self.options}


def select_hits(hits: Sequence[Hit], call: CallArguments) -> list[Hit]:
    """The hits a call returns: at most ``call.k`` chunks (in the core's order), then at most
    ``call.context_k`` graph-context hits, best score first; then, with a threshold, only
    those scoring at least ``call.threshold``."""
    chunks = [h for h in hits if h.kind == "chunk"][: call.k]
    context = [h for h in hits if h.kind != "chunk"]
    # Best first across kinds (stable: the core's order breaks ties), then the own cap.
    context = sorted(context, key=lambda h: -float(h.score))[: call.context_k]
    kept = [*chunks, *context]
    if call.threshold is not None:
        kept = [h for h in kept if float(h.score) >= call.threshold]
    return kept
