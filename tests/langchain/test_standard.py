"""LangChain's standard retriever suite, once per graphstrata method.

One subclass of ``RetrieversIntegrationTests`` per method in the core's registry
(``graphstrata.methods.METHODS``) at import time; the planned names when the core has no such
registry (a planned method the index does not offer is then skipped).
``test_every_registered_method_is_covered`` fails if ``gs.methods`` holds a name with no
subclass here, so every method of the index is always covered.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_graphstrata import GraphStrataRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

_PLANNED = ("archrag", "dense", "bm25", "hybrid", "lightrag", "hirag", "agrag")
try:  # the core's method registry, when it exposes one: covers methods added later too
    from graphstrata.methods import METHODS as _REGISTRY
except ImportError:  # pragma: no cover
    _REGISTRY = {}
STANDARD_METHODS = tuple(_REGISTRY) or _PLANNED


class _GraphStrataStandard(RetrieversIntegrationTests):
    """Binds the session index; subclasses set ``method``."""

    method: str = ""

    @pytest.fixture(autouse=True)
    def _bind_index(self, lc_gs: Any) -> None:
        if self.method not in lc_gs.methods:
            pytest.skip(f"method {self.method!r} not registered in this graphstrata build")
        self._gs = lc_gs

    @property
    def retriever_constructor(self) -> type[GraphStrataRetriever]:
        return GraphStrataRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"index": self._gs, "method": self.method, "k": 5}

    @property
    def retriever_query_example(self) -> str:
        return "Who designed the Analytical Engine?"


for _method in STANDARD_METHODS:
    _name = f"TestGraphStrataRetrieverStandard_{_method}"
    globals()[_name] = type(_name, (_GraphStrataStandard,), {"method": _method})
del _method, _name


def test_every_registered_method_is_covered(lc_gs: Any) -> None:
    missing = set(lc_gs.methods) - set(STANDARD_METHODS)
    assert not missing, f"add these methods to STANDARD_METHODS: {sorted(missing)}"
