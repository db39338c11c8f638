"""The retrieval contract as a reusable test suite: one class of tests that the core and every
framework adapter run (``docs/python-api.md``, "What the framework adapters promise";
:mod:`graphstrata.retrieval` implements it).

An adapter's test module subclasses :class:`RetrievalContract` and implements
:meth:`~RetrievalContract.run`, which asks its framework object for results with the core's
argument names and returns them as :class:`Result` records; pytest collects the inherited
``test_*`` methods. The subclass also provides a ``contract_index`` fixture: a
:class:`~graphstrata.GraphStrata` built from :func:`contract_documents` (e.g. with
``embedder=graphstrata.testing.HashEmbedder()``)::

    class TestLangChainContract(RetrievalContract):
        @pytest.fixture(scope="class")
        def contract_index(self):
            return GraphStrata.build(contract_documents(), embedder=HashEmbedder())

        def run(self, index, query, **args):
            docs = GraphStrataRetriever(index=index, ...).invoke(query)
            return [Result(d.metadata["kind"], d.id, d.metadata["score"], ...) for d in docs]

The suite checks behaviour only through the results, and compares them with the core's own
answer for the same arguments, so an adapter that cuts, re-sorts or re-filters hits itself
fails. It imports no test framework (a failed check is an ``AssertionError``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..types import Document

QUERY = "Who designed the Analytical Engine with Ada Lovelace?"
"""The query most contract checks ask."""

_CORPUS = [
    ("babbage", "computing", 1837,
     "Charles Babbage designed the Analytical Engine, a mechanical general-purpose computer, in London."),
    ("lovelace", "computing", 1843,
     "Ada Lovelace wrote the first published algorithm for the Analytical Engine of Charles Babbage."),
    ("menabrea", "computing", 1842,
     "Luigi Menabrea described the Analytical Engine in a paper that Ada Lovelace translated."),
    ("jacquard", "computing", 1804,
     "Joseph Marie Jacquard built a loom driven by punched cards, which inspired Charles Babbage."),
    ("turing", "codebreaking", 1939,
     "Alan Turing broke the Enigma cipher at Bletchley Park with the bombe machine."),
    ("rejewski", "codebreaking", 1932,
     "Marian Rejewski reconstructed the Enigma machine before Alan Turing arrived at Bletchley Park."),
    ("flowers", "codebreaking", 1943,
     "Tommy Flowers built Colossus at Bletchley Park to break the Lorenz cipher."),
    ("curie", "radioactivity", 1898,
     "Marie Curie discovered radium and polonium with Pierre Curie in Paris."),
    ("becquerel", "radioactivity", 1896,
     "Henri Becquerel found that uranium salts emit radiation, which Marie Curie named radioactivity."),
    ("rutherford", "radioactivity", 1911,
     "Ernest Rutherford described the atomic nucleus after experiments on radioactivity in Manchester."),
]


def contract_documents() -> list[Document]:
    """The contract corpus: 10 short documents on three topics, each with metadata
    ``{"topic": str, "year": int, "title": str}``."""
    return [
        Document(id=doc_id, text=text, metadata={"topic": topic, "year": year, "title": doc_id.title()})
        for doc_id, topic, year, text in _CORPUS
    ]


@dataclass
class Result:
    """One framework result in neutral form.

    Attributes:
        kind: ``"chunk"``, ``"entity"``, ``"relation"``, ``"community"`` or ``"path"``.
        id: the core hit id (a chunk id ``"<document_id>#<n>"`` for chunks).
        score: the score the framework reports (the core's, in [0, 1]).
        document_ids: the source document ids.
        metadata: the source document's metadata as the framework carries it (for chunks).
    """

    kind: str
    id: str
    score: float
    document_ids: list[str]
    metadata: Mapping[str, Any] = field(default_factory=dict)


class RetrievalContract:
    """Tests every adapter (and the core) must pass; see the module docstring.

    Class attributes a subclass may set:
        methods: the methods checked (default: every registered method).
        supports_min_score: whether :meth:`run` accepts ``min_score`` (LlamaIndex leaves
            thresholds to node postprocessors: ``False`` skips that check).
    """

    methods: Sequence[str] | None = None
    supports_min_score: bool = True

    # -- what a subclass implements ----------------------------------------------------------
    def run(self, index: Any, query: str, **args: Any) -> list[Result]:  # pragma: no cover
        """Ask the framework object over ``index`` for ``query`` with the core's argument
        names (``method``, ``k``, ``kinds``, ``context_k``, ``min_score``, ``filters``) and
        return its results, in order."""
        raise NotImplementedError

    # -- helpers -----------------------------------------------------------------------------
    def _methods(self, index: Any) -> list[str]:
        return list(self.methods) if self.methods is not None else list(index.methods)

    @staticmethod
    def _core(index: Any, query: str, **args: Any) -> list[Any]:
        return index.retrieve(query, **args)

    @staticmethod
    def _raises(fn: Any, words: str) -> None:
        try:
            fn()
        except ValueError as exc:
            assert words in str(exc), f"ValueError without {words!r}: {exc}"
            return
        raise AssertionError(f"no ValueError ({words})")

    # -- the contract --------------------------------------------------------------------------
    def test_k_is_at_most_k_chunks(self, contract_index: Any) -> None:
        for method in self._methods(contract_index):
            for k in (1, 3):
                out = self.run(contract_index, QUERY, method=method, k=k, kinds=("chunk",))
                assert 0 < len(out) <= k, (method, k, len(out))
                assert {r.kind for r in out} == {"chunk"}, method

    def test_k_larger_than_the_corpus(self, contract_index: Any) -> None:
        n = len(contract_index.chunks)
        out = self.run(contract_index, QUERY, method="dense", k=n + 50, kinds=("chunk",))
        assert len(out) == n and len({r.id for r in out}) == n

    def test_results_are_the_cores_selection(self, contract_index: Any) -> None:
        for method in self._methods(contract_index):
            for args in (
                dict(k=2, kinds=("chunk",)),
                dict(k=2, kinds=None, context_k=3),
                dict(k=3, kinds=("entity", "community"), context_k=2),
            ):
                core = self._core(contract_index, QUERY, method=method, **args)
                out = self.run(contract_index, QUERY, method=method, **args)
                assert [(r.kind, r.id) for r in out] == [(h.kind, h.id) for h in core], (method, args)
                assert [round(r.score, 6) for r in out] == [round(float(h.score), 6) for h in core]

    def test_context_is_opt_in_capped_and_after_the_chunks(self, contract_index: Any) -> None:
        for method in self._methods(contract_index):
            out = self.run(contract_index, QUERY, method=method, k=2, kinds=None, context_k=3)
            kinds = [r.kind for r in out]
            n_chunks = kinds.count("chunk")
            assert 0 < n_chunks <= 2, method
            assert kinds[:n_chunks] == ["chunk"] * n_chunks, f"{method}: chunks first"
            context = out[n_chunks:]
            assert len(context) <= 3, method
            scores = [r.score for r in context]
            assert scores == sorted(scores, reverse=True), f"{method}: context best first"

    def test_scores_in_unit_interval_and_chunks_best_first(self, contract_index: Any) -> None:
        for method in self._methods(contract_index):
            out = self.run(contract_index, QUERY, method=method, k=4, kinds=None, context_k=5)
            assert all(0.0 <= r.score <= 1.0 for r in out), method
            chunk_scores = [r.score for r in out if r.kind == "chunk"]
            assert chunk_scores == sorted(chunk_scores, reverse=True), method

    def test_min_score_drops_lower_scores(self, contract_index: Any) -> None:
        if not self.supports_min_score:
            return
        for method in self._methods(contract_index):
            full = self.run(contract_index, QUERY, method=method, k=5, kinds=None, context_k=5)
            cut = sorted(r.score for r in full)[len(full) // 2]
            kept = self.run(contract_index, QUERY, method=method, k=5, kinds=None, context_k=5, min_score=cut)
            assert [r.id for r in kept] == [r.id for r in full if r.score >= cut], method

    def test_filters_apply_before_k_is_cut(self, contract_index: Any) -> None:
        topic = {d.id: d.metadata["topic"] for d in contract_documents()}
        for method in self._methods(contract_index):
            # the query is about computing; the filter keeps only radioactivity documents
            out = self.run(contract_index, QUERY, method=method, k=3, kinds=None, context_k=5,
                           filters={"topic": "radioactivity"})
            chunks = [r for r in out if r.kind == "chunk"]
            assert len(chunks) == 3, (method, len(chunks))
            for r in out:
                assert any(topic.get(d) == "radioactivity" for d in r.document_ids), (method, r)
            out = self.run(contract_index, QUERY, method=method, k=3, kinds=("chunk",),
                           filters={"year": {"$gte": 1900}})
            assert out and all(topic[r.document_ids[0]] != "computing" for r in out), method

    def test_chunks_carry_their_documents_metadata(self, contract_index: Any) -> None:
        docs = {d.id: d.metadata for d in contract_documents()}
        out = self.run(contract_index, QUERY, method="archrag", k=3, kinds=("chunk",))
        for r in out:
            assert len(r.document_ids) == 1 and r.document_ids[0] in docs
            for key, value in docs[r.document_ids[0]].items():
                assert r.metadata.get(key) == value, (r.id, key)

    def test_bad_arguments_raise_one_clear_error(self, contract_index: Any) -> None:
        self._raises(lambda: self.run(contract_index, QUERY, method="dense", k=0), "must be a positive int")
        self._raises(lambda: self.run(contract_index, QUERY, method="dense", k=2, kinds=None, context_k=0),
                     "context_k must be a positive int")
        self._raises(lambda: self.run(contract_index, QUERY, method="nope", k=2), "unknown method")
        self._raises(lambda: self.run(contract_index, QUERY, method="dense", k=2, filters={"year": {"$like": 1}}),
                     "$like")
        self._raises(lambda: self.run(contract_index, QUERY, method="dense", k=2, kinds=("nope",)),
                     "unknown hit kind")
