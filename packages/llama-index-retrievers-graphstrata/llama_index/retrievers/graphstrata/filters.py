"""LlamaIndex ``MetadataFilters`` → the graphstrata core's filter mapping.

The core filters documents by their metadata inside retrieval, before ``k`` is cut
(``graphstrata.filters``): ``{"key": value}``, ``{"key": {"$gte": 3}}``, ``{"$and": [...]}``,
``{"$or": [...]}`` with the operators ``$eq $ne $gt $gte $lt $lte $in $nin $contains $any
$all``. This module
translates LlamaIndex's filter objects into that form:

==========================  ==============
LlamaIndex                  core
==========================  ==============
``FilterOperator.EQ``       ``$eq``
``FilterOperator.NE``       ``$ne``
``FilterOperator.GT``       ``$gt``  (numbers)
``FilterOperator.GTE``      ``$gte`` (numbers)
``FilterOperator.LT``       ``$lt``  (numbers)
``FilterOperator.LTE``      ``$lte`` (numbers)
``FilterOperator.IN``       ``$in``  (a list)
``FilterOperator.NIN``      ``$nin`` (a list)
``FilterOperator.CONTAINS`` ``$contains`` (a list field holds the value)
``FilterOperator.ANY``      ``$any`` (a list field holds any of the values)
``FilterOperator.ALL``      ``$all`` (a list field holds all of the values)
``FilterCondition.AND``     ``$and``
``FilterCondition.OR``      ``$or``
nested ``MetadataFilters``  nested filter
==========================  ==============

``IN`` / ``NIN`` on a list-valued field hold when any / none of its elements is among the
values. Everything else (``TEXT_MATCH``, ``TEXT_MATCH_INSENSITIVE``,
``IS_EMPTY``, ``FilterCondition.NOT``) raises ``ValueError`` naming it, never a silent no-op.
A metadata key missing from a document fails every operator except ``NE`` and ``NIN`` (the
core's rule). The key ``"document_id"`` is the document's id (``Document.doc_id``).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

#: LlamaIndex operator name → core operator.
OPERATORS: dict[str, str] = {
    "EQ": "$eq",
    "NE": "$ne",
    "GT": "$gt",
    "GTE": "$gte",
    "LT": "$lt",
    "LTE": "$lte",
    "IN": "$in",
    "NIN": "$nin",
    "CONTAINS": "$contains",
    "ANY": "$any",
    "ALL": "$all",
}


def _enum_name(enum: type[Enum], value: Any) -> str:
    """The member name of ``value`` in ``enum`` (a member or its value), else ``str(value)``."""
    if isinstance(value, enum):
        return value.name
    try:
        return enum(value).name
    except ValueError:
        return str(value)


def _operator_name(op: Any) -> str:
    return _enum_name(FilterOperator, op)


def _condition_name(cond: Any) -> str:
    return "AND" if cond is None else _enum_name(FilterCondition, cond)


def _one(flt: Any) -> dict[str, Any] | None:
    if isinstance(flt, MetadataFilters):
        return _group(flt)
    if not isinstance(flt, MetadataFilter):
        raise ValueError(
            "MetadataFilters.filters must hold MetadataFilter or MetadataFilters, "
            f"got {type(flt).__name__}"
        )
    name = _operator_name(flt.operator)
    if name not in OPERATORS:
        raise ValueError(
            f"unsupported filter operator FilterOperator.{name} on key {flt.key!r}; "
            f"graphstrata supports {', '.join(OPERATORS)}"
        )
    return {flt.key: {OPERATORS[name]: flt.value}}


def _group(filters: MetadataFilters) -> dict[str, Any] | None:
    cond = _condition_name(filters.condition)
    if cond not in ("AND", "OR"):
        raise ValueError(
            f"unsupported filter condition FilterCondition.{cond}; graphstrata supports AND, OR"
        )
    parts = [p for p in (_one(f) for f in filters.filters) if p is not None]
    if not parts:
        return None  # an empty group filters nothing (as in LlamaIndex's vector stores)
    if len(parts) == 1:
        return parts[0]
    return {"$and" if cond == "AND" else "$or": parts}


def to_core_filters(filters: MetadataFilters | MetadataFilter | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Translate ``filters`` into the core's filter mapping (validated).

    Args:
        filters: ``None``; a LlamaIndex ``MetadataFilters`` (nested groups allowed) or a
            single ``MetadataFilter``; or a mapping already in the core's form
            (``{"year": {"$gte": 2020}}``), passed through after validation.

    Returns:
        the core mapping, or ``None`` for no filter (``None`` or an empty ``MetadataFilters``).

    Raises:
        ValueError: an unsupported operator or condition (named), a value the core refuses
            (``GT`` with a string, ``IN`` without a list, ...), or any other type.
    """
    if filters is None:
        return None
    if isinstance(filters, MetadataFilters):
        out = _group(filters)
    elif isinstance(filters, MetadataFilter):
        out = _one(filters)
    elif isinstance(filters, Mapping):
        out = dict(filters)
    else:
        raise ValueError(
            "filters must be a llama_index MetadataFilters, a MetadataFilter or a mapping "
            f"in graphstrata's filter form, got {type(filters).__name__}"
        )
    return out  # the core validates it (graphstrata.retrieval.check_retrieve_args)
