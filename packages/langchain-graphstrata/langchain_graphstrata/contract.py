"""LangChain's retriever arguments translated into the core's retrieval contract.

The contract itself — ``k`` is at most k chunk hits; graph context follows, best first, at most
``context_k``; a threshold drops hits scoring below it; ``filter`` applies before ``k`` is cut;
method options are checked against the method — lives in the core
(:mod:`graphstrata.retrieval`), which checks the arguments and selects the hits. What is
LangChain's is here: the vector-store argument forms (``search_type``, ``search_kwargs``,
``score_threshold``), the names of ``invoke``'s per-call arguments, and the hints for names users
bring from other retrievers. The retriever (:mod:`langchain_graphstrata.retrievers`) and the
answer chain (:mod:`langchain_graphstrata.answer`) share them through this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphstrata.retrieval import RetrieveRequest, check_min_score, check_retrieve_args

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
    "doc_ids": "search_kwargs={'filter': {'document_id': {'$in': [...]}}}",
    "document_ids": "search_kwargs={'filter': {'document_id': {'$in': [...]}}}",
}


def check_search(search_type: Any, threshold: Any) -> float | None:
    """LangChain's search type and threshold as the core's ``min_score``.

    Returns:
        The threshold to apply (``None`` for ``"similarity"``).

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
        return check_min_score(threshold, "score_threshold")
    if threshold is not None:
        raise ValueError(
            "score_threshold is only used with search_type='similarity_score_threshold' "
            f"(this retriever's search_type is {search_type!r})"
        )
    return None


def request(
    method: Any,
    k: Any,
    kinds: Any,
    context_k: Any,
    threshold: float | None,
    filter: Any,
    options: Mapping[str, Any] | None,
    *,
    per_call: bool = False,
    k_name: str = "k",
) -> RetrieveRequest:
    """The core request of a LangChain call (:func:`graphstrata.retrieval.check_retrieve_args`,
    the one argument check of every adapter), in this package's argument names
    (``score_threshold``, ``search_kwargs['k']``, the per-call arguments of ``invoke``).

    Raises:
        ValueError: the first bad argument, named.
    """
    names = {"k": k_name, "min_score": "score_threshold"}
    if per_call:
        names["arguments"] = "per-call arguments"
    return check_retrieve_args(
        method, k, kinds, context_k, threshold, filter, options, names=names,
        arguments=CALL_ARGUMENTS if per_call else (),
    )
