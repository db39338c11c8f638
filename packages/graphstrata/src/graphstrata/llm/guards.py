"""Checks that an LLM's answer is about its input, not about the prompt: grounding, echoes of
the prompt's worked examples, output bounds, and the failure share that stops a build.

Small local models often answer an extraction prompt with the entities of its worked example
(SmolLM2-135M did in 11 of 13 answers), or a report prompt with the example report. Accepted
silently, such answers make a junk index. The stages that send prompts
(:mod:`graphstrata.indexing.llm_extract`, :mod:`graphstrata.indexing.reports`) therefore:

* keep an extracted entity (or a relation endpoint, or a triple's subject and object) only when
  its name occurs in the chunk it was extracted from (:class:`Grounding`: exact or fuzzy
  substring match with rapidfuzz's ``partial_ratio``); a rejected name that is one of the
  prompt's example names counts as an *echo*, any other as a *grounding* failure;
* reject a community report that copies the prompt's example report (:func:`is_echo`);
* bound each answer (:data:`MAX_ANSWER_CHARS` characters, :data:`MAX_ENTITIES_PER_CHUNK`
  entities, :data:`MAX_RELATIONS_PER_CHUNK` relations): the excess is dropped with one
  :class:`~graphstrata.llm.extraction_parsing.LLMOutputWarning` naming the cap;
* count each answer that gave nothing usable as a failure of its stage, by reason (``parse``,
  ``grounding``, ``echo``: :meth:`LLMClient.fail <graphstrata.llm.client.LLMClient.fail>`,
  shown in ``build_usage`` and ``stats()``), and stop with one :class:`LLMOutputError` when a
  stage's failure share passes ``client.max_failure_share`` (``config.llm_max_failure_share``,
  default :data:`DEFAULT_MAX_FAILURE_SHARE`). The error is raised before anything is
  persisted, so a failed build leaves no index (and an existing index unchanged).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

#: a name is grounded in a text when rapidfuzz's ``partial_ratio`` (0–100, on lower-cased,
#: punctuation-folded strings) reaches this score: tolerates inflection and small spelling
#: changes ("Babbage's engine" / "Babbage engine"), not invented names
GROUNDING_MIN_SCORE = 90.0
#: a report whose title or summary reaches this ``fuzz.ratio`` (0–100) against the prompt's
#: example report is a copy of it
ECHO_MIN_SCORE = 90.0
#: most characters of one answer that are parsed (the rest is dropped, with a warning)
MAX_ANSWER_CHARS = 60_000
#: most entity records kept from one chunk's answer
MAX_ENTITIES_PER_CHUNK = 200
#: most relation records (or triples) kept from one chunk's answer
MAX_RELATIONS_PER_CHUNK = 400
#: default largest share (0–1) of a stage's answers that may fail before the build stops
DEFAULT_MAX_FAILURE_SHARE = 0.5
#: failure reasons, in the order they are reported
FAILURE_REASONS = ("parse", "grounding", "echo")

__all__ = [
    "DEFAULT_MAX_FAILURE_SHARE",
    "ECHO_MIN_SCORE",
    "FAILURE_REASONS",
    "GROUNDING_MIN_SCORE",
    "MAX_ANSWER_CHARS",
    "MAX_ENTITIES_PER_CHUNK",
    "MAX_RELATIONS_PER_CHUNK",
    "Grounding",
    "LLMOutputError",
    "check_failure_share",
    "is_echo",
]


class LLMOutputError(ValueError):
    """A build stage's LLM answers failed the output checks too often.

    Attributes:
        model: the model id.
        stage: the ledger stage (``"extract"``, ``"extract:triples"``,
            ``"community_reports:layer_1"``, ...).
        failed: answers that gave nothing usable.
        answers: answers checked.
        reasons: ``{reason: failed answers}`` (reasons of :data:`FAILURE_REASONS`).
        threshold: the largest share allowed.
    """

    def __init__(
        self, model: str, stage: str, failed: int, answers: int, reasons: Mapping[str, int], threshold: float
    ) -> None:
        self.model, self.stage, self.failed, self.answers = model, stage, failed, answers
        self.reasons, self.threshold = dict(reasons), threshold
        why = ", ".join(f"{n} {_REASON_TEXT[r]}" for r in FAILURE_REASONS if (n := reasons.get(r, 0)))
        super().__init__(
            f"the LLM {model!r} failed stage {stage!r}: {failed} of {answers} answers "
            f"({failed / answers:.0%}) were unusable ({why}), more than the allowed "
            f"{threshold:.0%} (config llm_max_failure_share); nothing was persisted. A larger or "
            "instruction-tuned model is needed for this stage (or llm_extraction='statistical' / "
            "llm_community_reports=False to keep it offline)"
        )


_REASON_TEXT = {
    "parse": "unreadable",
    "grounding": "naming nothing found in their text",
    "echo": "copied from the prompt's example",
}


class Grounding:
    """Whether names occur in one text (a chunk, with its document title).

    Args:
        text: the text the names must come from.
        min_score: the ``partial_ratio`` a name needs (default :data:`GROUNDING_MIN_SCORE`).
    """

    def __init__(self, text: str, min_score: float = GROUNDING_MIN_SCORE) -> None:
        self.text = default_process(text or "")
        self.min_score = float(min_score)
        self._seen: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        """``True`` when ``name`` (case and punctuation folded) occurs in the text, exactly or
        with a ``partial_ratio`` of at least ``min_score``; ``False`` for an empty name."""
        n = default_process(name or "")
        if not n:
            return False
        hit = self._seen.get(n)
        if hit is None:
            hit = n in self.text or (
                len(n) <= len(self.text)
                and fuzz.partial_ratio(n, self.text, score_cutoff=self.min_score) >= self.min_score
            )
            self._seen[n] = hit
        return hit


def is_echo(text: str, examples: Iterable[str], min_score: float = ECHO_MIN_SCORE) -> bool:
    """Whether ``text`` is (nearly) one of ``examples``: ``fuzz.ratio`` of the folded strings
    at least ``min_score``. Empty texts are never echoes."""
    t = default_process(text or "")
    if not t:
        return False
    return any(fuzz.ratio(t, default_process(e), score_cutoff=min_score) >= min_score for e in examples if e)


def check_failure_share(
    model: str, stage: str, answers: int, reasons: Mapping[str, int], threshold: float
) -> None:
    """Raise :class:`LLMOutputError` when more than ``threshold`` (0–1) of a stage's
    ``answers`` failed (``reasons``: failed answers by reason); nothing for no answers.

    Raises:
        LLMOutputError: the share of failed answers is above ``threshold``.
    """
    failed = sum(reasons.values())
    if answers > 0 and failed / answers > threshold:
        raise LLMOutputError(model, stage, failed, answers, reasons, threshold)
