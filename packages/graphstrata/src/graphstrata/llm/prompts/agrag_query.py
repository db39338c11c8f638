"""AGRAG's query-time prompts: the LLM fact filter and the answer over the reasoning paths and
passages (``seed-agrag.md`` §2.2, §3).

Our wording; the output formats are the spec's: the filter answers ``{"fact": [[subject,
relation, object], ...]}`` (at most ``max_facts``, ``{"fact": []}`` when none helps) and each
returned fact is snapped to the closest candidate (``difflib``, cutoff 0, as the authors'
code does), so a paraphrased fact still maps to a real one; the answer reasons after
``Thought:`` and ends with ``Answer:``, the text after which is the answer.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from typing import Any

from ..base import LLMRequest
from ..parsing import StrippedText, as_text, extract_json

#: the default answer format: AGRAG's QA prompt asks for a concise, definitive answer (§3)
DEFAULT_RESPONSE_TYPE = "A concise, definitive answer: a few words or one sentence"

FILTER_SYSTEM = (
    "You pick, from a list of candidate facts, the ones that help answer a question. "
    "You never invent or change facts. Reply with one JSON object and nothing else: "
    "no explanation, no code fence."
)

FILTER_PROMPT = """Question: {query}

Candidate facts, each as [subject, relation, object] followed by the sentence it comes from:
{facts}

Keep the facts that help answer the question, at most {max_facts}, most useful first, copied exactly as \
[subject, relation, object]. If none helps, keep none.
Output format: {{"fact": [["subject", "relation", "object"]]}} or {{"fact": []}}
Output:"""

ANSWER_SYSTEM = """You answer questions by reading a reasoning subgraph and text passages. The subgraph lists \
triples (subject [SEP] relation [SEP] object), joined by [SEP_REC], that link the question's entities; the \
passages hold the evidence.

Reason step by step after "Thought: ", using only the subgraph and the passages. Then write "Answer: " \
followed by the answer, citing the passages it rests on by their number in square brackets, such as [3]. If \
they do not contain it, answer that you don't know.

Answer length and format: {response_type}"""

ANSWER_PROMPT = """{context}

Question: {query}
Thought: """

_ANSWER_RE = re.compile(r"answer\s*:", re.IGNORECASE)


def filter_request(
    query: str, triples: Sequence[tuple[str, str, str]], sentences: Sequence[str], max_facts: int
) -> LLMRequest:
    """The fact-filter request (JSON mode; stage ``"query:fact_filter"``).

    Args:
        query: the question.
        triples: the candidate facts ``(subject, relation, object)``, best first.
        sentences: each candidate's evidence sentence (same order; ``""`` = none).
        max_facts: most facts the model may keep (the spec's 4).
    """
    lines = []
    for i, (triple, sentence) in enumerate(zip(triples, sentences, strict=True), 1):
        line = f"{i}. {json.dumps(list(triple), ensure_ascii=False)}"
        if sentence:
            line += f" — {' '.join(sentence.split())}"
        lines.append(line)
    prompt = FILTER_PROMPT.format(query=query.strip(), facts="\n".join(lines), max_facts=max_facts)
    return LLMRequest(prompt, FILTER_SYSTEM, json_mode=True)


def _key(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        value = " ".join(as_text(v) for v in value)
    return " ".join(as_text(value).lower().split())


def parse_fact_filter(text: str, triples: Sequence[tuple[str, str, str]]) -> list[int] | None:
    """The candidates the model kept, as indices into ``triples`` in the model's order, or
    ``None`` when the output holds no readable answer.

    Forgiving: the list is read from the ``"fact"`` (or ``"facts"``) key of the first JSON
    object, or from a bare JSON list. Each item — a ``[s, p, o]`` list or a string — snaps to
    the closest candidate by ``difflib`` similarity of the lower-cased text (cutoff 0, spec
    §2.2); an integer ``i`` in ``1..len(triples)`` names candidate ``i``. Repeats are dropped.
    ``[]`` (the model kept nothing) is a readable answer.
    """
    value = extract_json(text)
    if isinstance(value, dict):
        items = next((value[k] for k in ("fact", "facts", "Fact", "Facts") if k in value), None)
    else:
        items = value
    if not isinstance(items, list):
        return None
    keys = [_key(t) for t in triples]
    out: list[int] = []
    for item in items:
        idx = None
        if isinstance(item, int) and not isinstance(item, bool):
            idx = item - 1 if 1 <= item <= len(triples) else None
        elif isinstance(item, (list, tuple, str)) and keys:
            key = _key(item)
            if key:
                best = difflib.get_close_matches(key, keys, n=1, cutoff=0.0)
                idx = keys.index(best[0]) if best else None
        if idx is not None and idx not in out:
            out.append(idx)
    return out


def answer_request(query: str, context: str, response_type: str = DEFAULT_RESPONSE_TYPE) -> LLMRequest:
    """The answer request (§3): instructions in the system message; the reasoning paths and
    passages (``context``), the question and ``"Thought: "`` in the user message."""
    return LLMRequest(
        ANSWER_PROMPT.format(context=context, query=query.strip()),
        ANSWER_SYSTEM.format(response_type=response_type),
    )


def parse_answer(text: str) -> str:
    """The answer in a model's output: the text after the first ``Answer:`` (any case),
    stripped; the whole output, stripped, when there is none or nothing follows it (spec §3).
    The same as :class:`AnswerText` reading ``text`` in one piece."""
    reader = AnswerText()
    return reader.feed(text) + reader.end()


class AnswerText:
    """:func:`parse_answer` read as the output streams: :meth:`feed` each piece, then
    :meth:`end`; the concatenation of what they return equals ``parse_answer(output)``
    however the output is cut into pieces.

    Nothing is shown before ``Answer:`` has arrived (the reasoning after ``Thought:`` is not
    the answer); after it, the text streams stripped as :class:`~graphstrata.llm.parsing.StrippedText`
    does. When the output ends without the marker, or with nothing after it, :meth:`end`
    returns the whole output stripped (nothing was shown before that).
    """

    def __init__(self) -> None:
        self._raw: list[str] = []
        self._answer: StrippedText | None = None

    def feed(self, delta: str) -> str:
        """The answer text of ``delta`` that can be shown now (``""`` when none)."""
        self._raw.append(delta)
        if self._answer is not None:
            return self._answer.feed(delta)
        text = "".join(self._raw)
        m = _ANSWER_RE.search(text)  # a marker found in a prefix is the first of the whole output
        if m is None:
            return ""
        self._answer = StrippedText()
        return self._answer.feed(text[m.end():])

    def end(self) -> str:
        """What is left to show once the output is complete (see the class docstring)."""
        if self._answer is not None and self._answer.started:
            return self._answer.end()
        return "".join(self._raw).strip()
