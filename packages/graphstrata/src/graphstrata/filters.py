"""Metadata filters on documents, applied inside retrieval before ``k`` is cut.

A filter is a plain mapping in the operator form LangChain vector stores accept (and that the
LlamaIndex adapter translates ``MetadataFilters`` into), evaluated against each document's
``metadata`` (plus the key ``"document_id"``, the document's id, unless the metadata has its
own):

* ``{"author": "Ada"}`` — equality; several keys in one mapping must all hold;
* ``{"year": {"$gte": 2020, "$lt": 2024}}`` — operators ``$eq``, ``$ne``, ``$gt``, ``$gte``,
  ``$lt``, ``$lte`` (numbers only; bools are not numbers), ``$in``, ``$nin`` (a list);
* list-valued fields (``{"tags": ["rust", "db"]}``): ``$contains`` (the list holds the value;
  on a string field: the string contains it), ``$any`` / ``$all`` (the list holds any / all of
  the given values). ``$in`` on a list field holds when any element is among the values,
  ``$nin`` when none is (LlamaIndex's ``CONTAINS`` / ``ANY`` / ``ALL``, Chroma's
  ``$contains``);
* ``{"$and": [f1, f2, ...]}``, ``{"$or": [f1, f2, ...]}`` — nested filters.

A key missing from a document's metadata fails every operator except ``$ne`` and ``$nin``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

Predicate = Callable[[Mapping[str, Any]], bool]

_COMPARE = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$contains", "$any", "$all")
_MISSING = object()


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and not (
        isinstance(x, float) and math.isnan(x)
    )


def _value_list(key: str, op: str, value: Any) -> list[Any]:
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise ValueError(f"filter {key!r}: {op} needs a list of values, got {value!r}")
    return list(value)


def _member(x: Any, values: list[Any]) -> bool:
    try:
        return x in values
    except TypeError:  # an unhashable / incomparable element never matches
        return False


def _holds(x: Any, value: Any) -> bool:
    """A list field holds ``value`` as an element; a string field holds it as a substring."""
    if isinstance(x, (list, tuple)):
        return _member(value, list(x))
    if isinstance(x, str) and isinstance(value, str):
        return value in x
    return False


def _operator(key: str, op: str, value: Any) -> Callable[[Any], bool]:
    if op == "$eq":
        return lambda x: x is not _MISSING and x == value
    if op == "$ne":
        return lambda x: x is _MISSING or x != value
    if op in _COMPARE:
        if not _is_number(value):
            raise ValueError(f"filter {key!r}: {op} compares numbers, got {value!r}")
        cmp = _COMPARE[op]
        return lambda x: _is_number(x) and cmp(x, value)
    if op in ("$in", "$nin"):
        values = _value_list(key, op, value)

        def among(x: Any) -> bool:  # a list field: any of its elements
            if isinstance(x, (list, tuple)):
                return any(_member(v, values) for v in x)
            return _member(x, values)

        if op == "$in":
            return lambda x: x is not _MISSING and among(x)
        return lambda x: x is _MISSING or not among(x)
    if op == "$contains":
        if isinstance(value, (list, tuple, set, frozenset, dict)):
            raise ValueError(f"filter {key!r}: $contains takes one value, got {value!r} (use $any / $all)")
        return lambda x: _holds(x, value)
    if op in ("$any", "$all"):
        values = _value_list(key, op, value)
        if not values:
            raise ValueError(f"filter {key!r}: {op} needs at least one value")
        if op == "$any":
            return lambda x: any(_holds(x, v) for v in values)
        return lambda x: all(_holds(x, v) for v in values)
    raise ValueError(f"filter {key!r}: unknown operator {op!r}; known: {', '.join(OPERATORS)}")


def _field(key: str, condition: Any) -> Predicate:
    if isinstance(condition, Mapping) and any(str(k).startswith("$") for k in condition):
        if not condition:
            raise ValueError(f"filter {key!r}: empty condition")
        bad = [k for k in condition if not str(k).startswith("$")]
        if bad:
            raise ValueError(f"filter {key!r}: mixes operators and plain keys {bad}")
        tests = [_operator(key, op, v) for op, v in condition.items()]
    else:
        tests = [_operator(key, "$eq", condition)]

    def pred(meta: Mapping[str, Any]) -> bool:
        x = meta.get(key, _MISSING)
        return all(t(x) for t in tests)

    return pred


def compile_filter(spec: Any) -> Predicate:
    """Compile a filter mapping (see the module docstring) into a predicate on metadata.

    Args:
        spec: the filter mapping.

    Returns:
        ``predicate(metadata) -> bool``.

    Raises:
        ValueError: not a mapping; an empty filter, ``$and`` or ``$or``; an unknown operator
            (named); ``$in`` / ``$nin`` / ``$any`` / ``$all`` without a list (or ``$any`` /
            ``$all`` with an empty one); ``$contains`` with a list; ``$gt``-style comparison with a
            non-number.
    """
    if not isinstance(spec, Mapping):
        raise ValueError(f"filters must be a mapping like {{'key': value}}, got {type(spec).__name__}")
    if not spec:
        raise ValueError("filters must not be empty (pass None for no filter)")
    preds: list[Predicate] = []
    for key, value in spec.items():
        if not isinstance(key, str):
            raise ValueError(f"filter keys must be strings, got {key!r}")
        if key in ("$and", "$or"):
            if not isinstance(value, (list, tuple)) or not value:
                raise ValueError(f"filter {key} needs a non-empty list of filters")
            parts = [compile_filter(v) for v in value]
            if key == "$and":
                preds.append(lambda m, parts=parts: all(p(m) for p in parts))
            else:
                preds.append(lambda m, parts=parts: any(p(m) for p in parts))
        elif key.startswith("$"):
            raise ValueError(f"unknown filter operator {key!r} at the top level; use $and / $or")
        else:
            preds.append(_field(key, value))
    return lambda m: all(p(m) for p in preds)


def allowed_documents(documents: Mapping[str, Any], spec: Any) -> set[str]:
    """Ids of the documents whose metadata passes the filter ``spec``.

    Args:
        documents: ``{document_id: Document}``.
        spec: a filter mapping.

    Raises:
        ValueError: an invalid filter (see :func:`compile_filter`).
    """
    pred = compile_filter(spec)
    out = set()
    for doc_id, doc in documents.items():
        meta = doc.metadata if "document_id" in doc.metadata else {**doc.metadata, "document_id": doc_id}
        if pred(meta):
            out.add(doc_id)
    return out
