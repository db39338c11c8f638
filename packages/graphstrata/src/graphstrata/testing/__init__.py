"""Test doubles for code that builds indexes without the real embedder.

:class:`HashEmbedder` embeds a text as signed counts of its hashed words: deterministic, no
model, thousands of texts a second. It tests control flow, persistence, concurrency and crash
safety; it has no semantic quality and never backs a retrieval-quality claim.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..models import regex_token_spans

_WORD = re.compile(r"\w+")


class HashEmbedder:
    """Bag of hashed lower-cased words → ``dim`` signed counts, L2-normalised.

    Args:
        dim: output dimension (default 64).

    ``embed(texts)`` returns float32 ``(len(texts), dim)``; ``id`` is ``"test-hash-<dim>"``.
    """

    local = True  # computes here: a load's warm-up query may embed with it

    def __init__(self, dim: int = 64) -> None:
        self.dim = int(dim)
        self.id = f"test-hash-{self.dim}"

    def embed(self, texts):
        """float32 ``(len(texts), dim)``, rows L2-normalised (never a zero row)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in _WORD.findall(t.lower()):
                h = int.from_bytes(hashlib.md5(w.encode()).digest()[:4], "little")
                out[i, h % self.dim] += 1.0 if (h >> 16) & 1 else -1.0
            out[i, 0] += 1e-3  # never a zero vector
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def token_spans(self, text):
        """``[(start, end), ...]`` character offsets of the regex word tokens (chunking)."""
        return regex_token_spans(text)


class ScriptedLLM:
    """An :class:`~graphstrata.llm.LLM` that replays scripted outputs: tests parsing and
    control flow of the LLM path, never quality.

    Args:
        script: ``fn(prompt, system) -> str`` (full control), or a list of ``(marker, output)``
            pairs: the output of the first pair whose marker occurs in the prompt or system
            prompt (case-sensitive); a marker ``""`` matches everything.
        default: output when no pair matches (``""``).
        usage: report real-looking usage (``estimated=False``: prompt/completion lengths in
            words) instead of none.
        fail_first: raise :class:`~graphstrata.llm.TransientLLMError` on the first
            ``fail_first`` calls (tests retries).
        latency: seconds each call sleeps (a stand-in for a remote model's latency).
        log_dir: when given, each call appends a line to ``log_dir/calls-<pid>.log`` (calls per
            process, seen from outside: Ray workers).

    Picklable (Ray workers get a copy; its ``calls`` are the copy's own).

    Attributes:
        calls: every ``(prompt, system, json_mode)`` seen, in order (thread-safe append).
    """

    def __init__(
        self,
        script=(),
        default: str = "",
        usage: bool = False,
        fail_first: int = 0,
        id: str = "scripted",
        latency: float = 0.0,
        log_dir: str | os.PathLike | None = None,
    ):
        self.script = script
        self.default = default
        self.usage = usage
        self.fail_first = int(fail_first)
        self.id = id
        self.latency = float(latency)
        self.log_dir = None if log_dir is None else str(log_dir)
        self.calls: list[tuple[str, str | None, bool]] = []
        self._lock = threading.Lock()

    def __getstate__(self):  # picklable for Ray workers: the lock is made again there
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _output(self, prompt, system):
        if callable(self.script):
            return self.script(prompt, system)
        for marker, out in self.script:
            if marker in prompt or (system and marker in system):
                return out
        return self.default

    def complete(self, prompt, *, system=None, json_mode=False):
        from ..llm import LLMResponse, TransientLLMError, Usage, estimate_tokens

        with self._lock:
            self.calls.append((prompt, system, json_mode))
            n = len(self.calls)
        if self.log_dir is not None:  # one line per call in a file per process (Ray tests)
            with open(os.path.join(self.log_dir, f"calls-{os.getpid()}.log"), "a", encoding="utf-8") as f:
                f.write("1\n")
        if self.latency > 0:
            time.sleep(self.latency)
        if n <= self.fail_first:
            raise TransientLLMError(f"scripted transient failure {n}")
        text = self._output(prompt, system)
        if self.usage:
            return LLMResponse(text, Usage(len(((system or "") + prompt).split()), len(text.split()), False))
        return LLMResponse(text, Usage(estimate_tokens((system or "") + prompt), estimate_tokens(text), True))

    native_async = False  # acomplete only wraps the blocking complete (which may sleep)

    async def acomplete(self, prompt, *, system=None, json_mode=False):
        return self.complete(prompt, system=system, json_mode=json_mode)


def word_pieces(text: str) -> list[str]:
    """``text`` cut into pieces as a model streams it: each word with the whitespace after it
    (leading whitespace a piece of its own); the pieces join to ``text``."""
    return re.findall(r"^\s+|\S+\s*", text)


class StreamingScriptedLLM(ScriptedLLM):
    """A :class:`ScriptedLLM` that can also stream (``stream`` / ``astream``, the optional
    part of the :class:`~graphstrata.llm.LLM` protocol): the same scripted output, given in
    pieces (:func:`word_pieces`, or ``pieces(output)``), then the :class:`~graphstrata.llm.Usage`
    ``complete`` would report. Tests the streaming control flow, never quality.

    Args:
        pieces: how an output is cut (default :func:`word_pieces`).
        native_async: whether ``astream`` is awaited on the caller's loop (``True``) or the
            blocking ``stream`` is read in a worker thread (``False``, as ``ScriptedLLM``);
            see :func:`~graphstrata.llm.has_async_api`.
        **kwargs: as :class:`ScriptedLLM`.

    Attributes:
        streamed: the ``(prompt, system, json_mode)`` of the calls that streamed (also in
            ``calls``).
    """

    def __init__(self, script=(), pieces: Callable[[str], Sequence[str]] = word_pieces,
                 native_async: bool = False, **kwargs: Any):
        super().__init__(script, **kwargs)
        self.pieces = pieces
        self.native_async = native_async
        self.streamed: list[tuple[str, str | None, bool]] = []

    def stream(self, prompt, *, system=None, json_mode=False):
        out = self.complete(prompt, system=system, json_mode=json_mode)
        with self._lock:
            self.streamed.append((prompt, system, json_mode))
        yield from self.pieces(out.text)
        yield out.usage

    async def astream(self, prompt, *, system=None, json_mode=False):
        import asyncio

        for item in self.stream(prompt, system=system, json_mode=json_mode):
            await asyncio.sleep(0)  # a real stream gives the loop a turn between pieces
            yield item


_CAPITALISED = re.compile(r"\b[A-Z][a-z]{3,}\b")


def _h(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:6]


def _family(system: str | None, template: str) -> bool:
    """``system`` was made from ``template`` (answer system prompts are filled in)."""
    return bool(system) and system.startswith(template.split("{")[0][:60])


def answer_every_prompt(prompt: str, system: str | None) -> str:
    """A deterministic stand-in for every prompt family graphstrata sends (a
    :class:`ScriptedLLM` script): entity / relationship records made of the chunk's
    capitalised words (``person`` / ``geo``, ``co-mention`` relations; HiRAG's two-stage
    prompts answered in their own formats), ``NO`` to the gleaning check, JSON community reports (rating 6, one finding), summary-entity records, keywords,
    scored points, short answers. Tests control flow, caching and cost accounting, never
    quality.

    Raises:
        AssertionError: a prompt of a family it does not know.
    """
    from ..llm.prompts import agrag as agrag_triples
    from ..llm.prompts import (
        agrag_query,
        archrag,
        archrag_answer,
        hirag,
        hirag_answer,
        lightrag_query,
        naive,
    )
    from ..llm.prompts import hirag_extract as hx
    from ..llm.prompts import lightrag_extract as lx

    if system == lx.EXTRACT_SYSTEM:
        tail = prompt.rstrip()
        if tail.endswith(lx.CONTINUE_QUESTION):
            return "NO"
        if tail.endswith(lx.GLEANING_INSTRUCTION):
            return lx.COMPLETION_DELIMITER
        text = prompt.rsplit("Text: ", 1)[1].rsplit("Output:", 1)[0]
        names = list(dict.fromkeys(_CAPITALISED.findall(text)))[:6]
        recs = [
            f'("entity"<|>{n}<|>{"person" if i % 2 == 0 else "geo"}<|>{n} is named in the passage.)'
            for i, n in enumerate(names)
        ]
        recs += [
            f'("relationship"<|>{a}<|>{b}<|>{a} and {b} appear together.<|>co-mention<|>{3 + i % 5})'
            for i, (a, b) in enumerate(zip(names, names[1:], strict=False))
        ]
        return "##\n".join(recs) + "##\n" + lx.COMPLETION_DELIMITER
    if system in (hx.ENTITY_SYSTEM, hx.RELATION_SYSTEM):  # HiRAG's two-stage extraction
        return _hirag_two_stage(prompt, system, realistic=False)
    if system == lx.SUMMARY_SYSTEM:
        return "A merged description."
    if system == archrag.COMMUNITY_REPORT_SYSTEM:
        return "Here is the report:\n```json\n" + json.dumps(
            {
                "title": f"Community {_h(prompt)}",
                "summary": "These entities appear together in the sample pages.",
                "rating": 6,
                "rating_explanation": "moderate",
                "findings": [{"summary": "Co-mentions", "explanation": "They share passages."}],
            }
        ) + "\n```"
    if system == hirag.SUMMARY_ENTITY_SYSTEM:
        return f'("entity"<|>Theme {_h(prompt)}<|>normal_entity<|>A theme shared by the listed entities.)\n<|COMPLETE|>'
    if system == lightrag_query.KEYWORDS_SYSTEM:
        words = _CAPITALISED.findall(prompt.split("Question:")[-1]) or ["history"]
        return json.dumps({"high_level_keywords": ["history"], "low_level_keywords": words[:3]})
    if system == archrag_answer.FILTER_SYSTEM:
        return json.dumps({"points": [{"description": "A relevant point [Data: Entities (0)]", "score": 70}]})
    if system == archrag_answer.MERGE_SYSTEM:
        return "Toy merged answer."
    if system == agrag_query.FILTER_SYSTEM:
        return json.dumps({"fact": []})
    if system == agrag_triples.TRIPLES_SYSTEM:
        return "[]"
    answer_systems = (lightrag_query.ANSWER_SYSTEM, lightrag_query.MIX_ANSWER_SYSTEM,
                      hirag_answer.ANSWER_SYSTEM, naive.ANSWER_SYSTEM)
    if any(_family(system, t) for t in answer_systems):
        return "Toy answer."
    if _family(system, agrag_query.ANSWER_SYSTEM):
        return "Thought: the path says so.\nAnswer: Toy answer."
    raise AssertionError(f"unexpected prompt family: {system!r}")



_SENTENCE = re.compile(r"[^.!?]+[.!?]")


def _hirag_two_stage(prompt: str, system: str, realistic: bool) -> str:
    """Answers to HiRAG's two-stage extraction prompts (:mod:`graphstrata.llm.prompts.hirag_extract`):
    entity records of the chunk's capitalised words (``realistic``: up to 8, each described
    by a whole sentence of the chunk), relationship records between consecutive listed
    entities (``realistic``: up to 6, a sentence each), ``NO`` to a continue check, the
    completion marker alone to a gleaning instruction (``realistic``: one more entity)."""
    from ..llm.prompts import hirag_extract as hx

    tail = prompt.rstrip()
    if tail.endswith((hx.ENTITY_CONTINUE_QUESTION, hx.RELATION_CONTINUE_QUESTION)):
        return "NO"
    text = prompt.rsplit("Text: ", 1)[-1].rsplit("Output:", 1)[0]
    sentences = [x.strip() for x in _SENTENCE.findall(text)] or [text.strip()]
    names = list(dict.fromkeys(_CAPITALISED.findall(text))) or ["Passage"]
    if tail.endswith(hx.ENTITY_GLEANING_INSTRUCTION):
        extra = names[8:9] if realistic else []
        recs = [f'("entity"<|>{n}<|>organization<|>{sentences[-1]})' for n in extra]
        return "".join(r + "##\n" for r in recs) + hx.COMPLETION_DELIMITER
    if tail.endswith(hx.RELATION_GLEANING_INSTRUCTION):
        return hx.COMPLETION_DELIMITER
    if system == hx.ENTITY_SYSTEM:
        types = ("person", "location", "organization", "event")
        if realistic:
            recs = [f'("entity"<|>{n}<|>{types[i % 4]}<|>{sentences[i % len(sentences)]})' for i, n in enumerate(names[:8])]
        else:
            recs = [f'("entity"<|>{n}<|>{types[i % 2]}<|>{n} is named in the passage.)' for i, n in enumerate(names[:6])]
        return "##\n".join(recs) + "##\n" + hx.COMPLETION_DELIMITER
    listed = json.loads(prompt.rsplit("Entities: ", 1)[-1].split("\n", 1)[0])
    pairs = list(zip(listed, listed[1:], strict=False))[: 6 if realistic else 5]
    recs = [
        f'("relationship"<|>{a}<|>{b}<|>'
        + (sentences[(i + 1) % len(sentences)] if realistic else f"{a} and {b} appear together.")
        + f"<|>{3 + i % 5})"
        for i, (a, b) in enumerate(pairs)
    ]
    return "".join(r + "##\n" for r in recs) + hx.COMPLETION_DELIMITER
_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Tokens of ``text`` by a stand-in tokenizer: every word and every punctuation mark is
    one token (about ``chars / 4.3`` on English prose, near BPE tokenizers). Give it to a
    scripted model as its ``count_tokens`` to test the tokenizer path of cost accounting."""
    return len(_TOKEN.findall(text))


def answer_at_realistic_length(prompt: str, system: str | None) -> str:
    """:func:`answer_every_prompt`'s formats at the lengths a real model answers with, for
    cost estimates (``graphstrata index --dry-run``): per chunk up to 8 entities and 6
    relationships whose descriptions are whole sentences of the chunk (about 6 completion
    tokens a chunk token, about as long as the prompt), a gleaning pass adding two records, community reports with a three-sentence summary and four findings (about 450
    tokens), HiRAG summary entities of three records, HiRAG's two-stage extraction (up to 8
    entities, then up to 6 relations among them, a sentence each). Deterministic; tests cost
    accounting and control flow, never quality.

    Raises:
        AssertionError: a prompt of a family it does not know (as :func:`answer_every_prompt`).
    """
    from ..llm.prompts import archrag, hirag
    from ..llm.prompts import hirag_extract as hx
    from ..llm.prompts import lightrag_extract as lx

    if system in (hx.ENTITY_SYSTEM, hx.RELATION_SYSTEM):  # HiRAG's two-stage extraction
        return _hirag_two_stage(prompt, system, realistic=True)
    if system in (lx.EXTRACT_SYSTEM, getattr(lx, "EXTRACT_SYSTEM_SHORT", None)):
        tail = prompt.rstrip()
        text = prompt.rsplit("Text: ", 1)[-1].rsplit("Output:", 1)[0]
        sentences = [s.strip() for s in _SENTENCE.findall(text)] or [text.strip()]
        names = list(dict.fromkeys(_CAPITALISED.findall(text))) or ["Passage"]
        if tail.endswith(lx.CONTINUE_QUESTION):
            return "NO"
        if tail.endswith(lx.GLEANING_INSTRUCTION):
            extra = names[-2:]
            recs = [f'("entity"<|>{n}<|>organization<|>{sentences[-1]})' for n in extra]
            return "##\n".join(recs) + "##\n" + lx.COMPLETION_DELIMITER
        names = names[:8]
        recs = [
            f'("entity"<|>{n}<|>{("person", "geo", "organization", "event")[i % 4]}<|>'
            f"{sentences[i % len(sentences)]})"
            for i, n in enumerate(names)
        ]
        recs += [
            f'("relationship"<|>{a}<|>{b}<|>{sentences[(i + 1) % len(sentences)]}<|>'
            f"related, co-mention<|>{3 + i % 5})"
            for i, (a, b) in enumerate(zip(names, names[1:6], strict=False))
        ]
        return "##\n".join(recs) + "##\n" + lx.COMPLETION_DELIMITER
    if system == lx.SUMMARY_SYSTEM:
        return "A merged description of the entity that keeps every fact the passages state about it."
    if system == archrag.COMMUNITY_REPORT_SYSTEM:
        names = list(dict.fromkeys(_CAPITALISED.findall(prompt)))[:6] or ["Member"]
        who = ", ".join(names)
        return "```json\n" + json.dumps(
            {
                "title": f"{names[0]} and related entities {_h(prompt)}",
                "summary": (
                    f"This community gathers {who}. The entities are linked through shared "
                    "passages that describe their history, their roles and the places where they "
                    "appear. Together they form a coherent topic of the corpus."
                ),
                "rating": 6,
                "rating_explanation": "The community is of moderate importance to the corpus as a whole.",
                "findings": [
                    {
                        "summary": f"{n} is a central member",
                        "explanation": (
                            f"{n} is connected to several other members of the community through "
                            "relationships that the passages describe in some detail. These links "
                            "explain why the entity belongs to this group and how it relates to "
                            "the others [Data: Entities (1, 2); Relationships (3)]."
                        ),
                    }
                    for n in (names * 4)[:4]
                ],
            },
            indent=2,
        ) + "\n```"
    if system == hirag.SUMMARY_ENTITY_SYSTEM:
        names = list(dict.fromkeys(_CAPITALISED.findall(prompt)))[:3] or ["Theme"]
        recs = [
            f'("entity"<|>Theme of {n} {_h(prompt)}<|>normal_entity<|>A theme shared by the listed '
            f"entities, centred on {n} and the events, places and people the passages link to it.)"
            for n in names
        ]
        return "##\n".join(recs) + "\n<|COMPLETE|>"
    return answer_every_prompt(prompt, system)


class TokenizedLLM(ScriptedLLM):
    """A :class:`ScriptedLLM` with a tokenizer (:func:`count_tokens`, exposed as
    ``count_tokens`` as the framework adapters expose theirs) that reports its usage in that
    tokenizer's tokens: the dry run's estimate and a scripted build's ledger then count alike
    (``tests/core/test_dry_run_estimate.py``, ``bench/dry_run_calibration.py``)."""

    count_tokens = staticmethod(count_tokens)

    def complete(self, prompt: str, *, system: str | None = None, json_mode: bool = False) -> Any:
        from ..llm import LLMResponse, Usage

        out = super().complete(prompt, system=system, json_mode=json_mode)
        return LLMResponse(out.text, Usage(count_tokens((system or "") + prompt), count_tokens(out.text), False))


def answer_with_fallbacks(answer: Any, notes: Sequence[str]) -> Any:
    """``answer`` (a bound :meth:`GraphStrata.answer <graphstrata.GraphStrata.answer>`) whose
    :class:`~graphstrata.api.Answer` reports ``notes`` as its fallbacks: what the framework
    adapters' tests monkeypatch in to check they pass ``Answer.fallbacks`` through."""

    def wrapped(question: str, **kwargs: Any) -> Any:
        out = answer(question, **kwargs)
        out.fallbacks = list(notes)
        return out

    return wrapped


def index_fingerprint(engine: Any) -> dict[str, Any]:
    """What must be equal between two builds of the same input (local vs. distributed):
    chunk ids and texts, every entity and relation with its fields, community membership,
    titles and summaries per layer, and the float32 vectors (as bytes).

    Args:
        engine: a :class:`~graphstrata.GraphStrata` or an :class:`~graphstrata.state.EngineState`.
    """
    state = getattr(engine, "state", engine)
    kg = state.kg
    return {
        "chunks": [(c.id, c.text) for c in state.chunks],
        "entities": {
            e.id: (e.name, e.type, e.description, tuple(e.chunk_ids), e.weight) for e in kg.entities.values()
        },
        "relations": {
            key: (r.description, r.keywords, tuple(r.chunk_ids), r.weight) for key, r in kg.relations.items()
        },
        "communities": [
            [(c.id, tuple(c.members), c.title, c.summary, c.rating) for c in layer] for layer in state.communities
        ],
        "vectors": {name: np.ascontiguousarray(v).tobytes() for name, v in state.vectors.items()},
    }


class UpdateCalls:
    """Records the top-level ``insert`` / ``upsert`` / ``delete`` calls made on an index, for
    tests that an adapter makes exactly one core update per framework call.

    Args:
        engine: a :class:`~graphstrata.GraphStrata` (its three methods are wrapped in place).
        setattr_fn: how to replace them (pytest's ``monkeypatch.setattr``, so the test undoes
            it; plain :func:`setattr` otherwise).

    Attributes:
        calls: ``[(method_name, [document id, ...]), ...]`` in call order; calls the core makes
            to itself inside one of them (``upsert`` → ``insert``) are not counted.
    """

    def __init__(self, engine: Any, setattr_fn: Callable[[Any, str, Any], Any] = setattr) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self._depth = 0
        for name in ("insert", "upsert", "delete"):
            setattr_fn(engine, name, self._wrap(name, getattr(engine, name)))

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(docs: Any = (), *args: Any, **kwargs: Any) -> Any:
            docs = [docs] if isinstance(docs, str) else list(docs)
            if self._depth == 0:
                self.calls.append((name, [d if isinstance(d, str) else getattr(d, "id", d) for d in docs]))
            self._depth += 1
            try:
                return fn(docs, *args, **kwargs)
            finally:
                self._depth -= 1

        return call
