"""Evidence recall@k of retrieval methods on QA sets with gold evidence documents.

Question files are JSONL, one object per line with ``"question"`` and ``"evidence_ids"`` (the
shared data format of DESIGN.md). For each method the ranking of *distinct document ids* is
taken from the method's chunk ranking; recall@k of a question = |gold ∩ top-k documents| /
|gold|, averaged over questions with non-empty evidence (HippoRAG-style, k = 2, 5, 10).

With an LLM, :func:`evaluate_answers` scores each method's generated answers by exact match
and token F1 against ``answer`` / ``answer_aliases`` (SQuAD normalisation).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .generation.citations import strip_citations
from .loaders import jsonl_objects


def _check_methods(gs: Any, methods: Sequence[str]) -> None:
    """Raises ``ValueError`` naming the methods ``gs`` does not know (and those it does)."""
    unknown = [m for m in methods if m not in gs.methods]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; known: {', '.join(gs.methods)}")


def _questions(qs: Sequence[dict[str, Any]], desc: str, progress: bool) -> Iterable[dict[str, Any]]:
    """``qs``, through a tqdm bar named ``desc`` when ``progress``."""
    if not progress:
        return qs
    from tqdm.auto import tqdm

    return tqdm(qs, desc=desc, unit="q")


def load_questions(path: str | Path) -> list[dict[str, Any]]:
    """Read a question JSONL file.

    Raises:
        FileNotFoundError: no such file.
        ValueError: an empty file, a line that is not JSON or lacks ``question`` (line number
            in the message).
    """
    out = []
    for _, rec in jsonl_objects(Path(path), "question"):
        rec.setdefault("evidence_ids", [])
        out.append(rec)
    return out


def ranked_documents(hits: Sequence[Any]) -> list[str]:
    """Distinct document ids in order of first appearance among chunk hits."""
    seen: dict[str, None] = {}
    for h in hits:
        if h.kind == "chunk":
            for d in h.document_ids:
                seen.setdefault(d, None)
    return list(seen)


def recall_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """|gold ∩ ranked[:k]| / |gold| (``gold`` non-empty)."""
    g = set(gold)
    return len(g.intersection(ranked[:k])) / len(g)


def evaluate(
    gs,
    questions: Sequence[dict[str, Any]],
    methods: Sequence[str] = ("archrag",),
    ks: Sequence[int] = (2, 5, 10),
    chunk_factor: int = 3,
    progress: bool = False,
    options: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, float]]:
    """Evidence recall@k and latency per method.

    Args:
        gs: a :class:`~graphstrata.GraphStrata`.
        questions: records with ``question`` and ``evidence_ids``; those without evidence are
            skipped (e.g. unanswerable questions).
        methods: method names, reported in this order.
        ks: cut-offs (> 0).
        chunk_factor: chunks requested per document slot (``max(ks) · chunk_factor``), so
            documents split into several chunks still fill ``max(ks)`` distinct documents.
        progress: show a tqdm bar per method.
        options: method options given to every retrieval (an ablation such as
            ``{"propagate": False}``); every listed method must accept them.

    Returns:
        ``{method: {"recall@2": r, ..., "questions": n, "p50_ms": t, "p95_ms": t}}``;
        latencies in milliseconds of wall time per retrieval (query embedding included).

    Raises:
        ValueError: no question has evidence, a k ≤ 0, an unknown method, or an option a
            method does not know.
    """
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] <= 0:
        raise ValueError(f"every k must be > 0, got {list(ks)}")
    _check_methods(gs, methods)
    qs = [q for q in questions if q.get("evidence_ids")]
    if not qs:
        raise ValueError("no question has evidence_ids to score against")
    depth = max(ks) * chunk_factor
    report: dict[str, dict[str, float]] = {}
    for method in methods:
        sums = dict.fromkeys(ks, 0.0)
        times = []
        for q in _questions(qs, f"eval {method}", progress):
            t0 = time.perf_counter()
            hits = gs.retrieve(
                q["question"], method=method, k=depth, kinds=("chunk",), **(options or {})
            )
            times.append((time.perf_counter() - t0) * 1000.0)
            ranked = ranked_documents(hits)
            for k in ks:
                sums[k] += recall_at(ranked, q["evidence_ids"], k)
        row = {f"recall@{k}": round(sums[k] / len(qs), 4) for k in ks}
        row["questions"] = len(qs)
        row["p50_ms"] = round(float(np.percentile(times, 50)), 2)
        row["p95_ms"] = round(float(np.percentile(times, 95)), 2)
        report[method] = row
    return report


def format_table(report: dict[str, dict[str, float]]) -> str:
    """Plain-text table of an :func:`evaluate` report."""
    if not report:
        return ""
    cols = [c for c in next(iter(report.values())) if c.startswith("recall@")]
    head = ["method", *cols, "questions", "p50 ms"]
    rows = [
        [m, *(f"{r[c]:.3f}" for c in cols), str(r["questions"]), f"{r['p50_ms']:.1f}"]
        for m, r in report.items()
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, rows)])


# -- answers ------------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)


def normalize_answer(text: str) -> str:
    """SQuAD / HotpotQA answer normalisation: lower case, punctuation and the articles
    a/an/the removed, whitespace folded."""
    text = _PUNCT.sub(" ", str(text).lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer (any alias), else 0.0."""
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(g) for g in gold if str(g).strip()))


def token_f1(prediction: str, gold: Sequence[str]) -> float:
    """Best token-level F1 of the normalised prediction against any gold answer (SQuAD):
    ``2·P·R / (P + R)`` over the multiset of shared tokens; 0.0 with nothing shared."""
    p = normalize_answer(prediction).split()
    best = 0.0
    for g in gold:
        t = normalize_answer(g).split()
        if not p or not t:
            continue
        common = Counter(p) & Counter(t)
        n = sum(common.values())
        if n == 0:
            continue
        precision, recall = n / len(p), n / len(t)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def gold_answers(question: Mapping[str, Any]) -> list[str]:
    """``answer`` followed by ``answer_aliases`` (the shared data format), as strings."""
    out = [question.get("answer")] + list(question.get("answer_aliases") or [])
    return [str(a) for a in out if a is not None and str(a).strip()]


def evaluate_answers(
    gs,
    questions: Sequence[dict[str, Any]],
    methods: Sequence[str] = ("archrag",),
    k: int = 10,
    llm: Any = None,
    progress: bool = False,
    options: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Exact match and token F1 of each method's generated answers (:meth:`GraphStrata.answer`),
    scored without their citation markers (``[1]``).

    Args:
        gs: a :class:`~graphstrata.GraphStrata` (with an LLM attached, or ``llm`` given).
        questions: records with ``question`` and ``answer`` (+ optional ``answer_aliases``);
            those without an answer are skipped.
        methods: method names, reported in this order.
        k: chunk hits retrieved per question.
        llm: the LLM to answer with (``None``: the index's).
        progress: a tqdm bar per method.
        options: generation and method options given to every call.

    Returns:
        ``{method: {"em": mean, "f1": mean, "questions": n, "calls": n, "cached": n,
        "prompt_tokens": n, "completion_tokens": n, "tokens_estimated": bool, "p50_s": t}}``;
        ``p50_s`` is the median wall time of one answer in seconds.

    Raises:
        ValueError: no question has an answer, an unknown method, no LLM.
    """
    _check_methods(gs, methods)
    qs = [q for q in questions if gold_answers(q)]
    if not qs:
        raise ValueError("no question has an answer to score against")
    report: dict[str, dict[str, Any]] = {}
    for method in methods:
        em = f1 = 0.0
        totals = {"calls": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0}
        estimated = False
        times = []
        for q in _questions(qs, f"answers {method}", progress):
            t0 = time.perf_counter()
            ans = gs.answer(q["question"], method=method, llm=llm, k=k, **(options or {}))
            times.append(time.perf_counter() - t0)
            gold = gold_answers(q)
            text = strip_citations(ans.text)  # "[1]" markers cite passages: not part of the answer
            em += exact_match(text, gold)
            f1 += token_f1(text, gold)
            total = ans.usage.get("total", {})
            for key in totals:
                totals[key] += int(total.get(key, 0))
            estimated = estimated or bool(total.get("estimated"))
        report[method] = {
            "em": round(em / len(qs), 4),
            "f1": round(f1 / len(qs), 4),
            "questions": len(qs),
            **totals,
            "tokens_estimated": estimated,
            "p50_s": round(float(np.percentile(times, 50)), 3),
        }
    return report


def format_answer_table(report: dict[str, dict[str, Any]]) -> str:
    """Plain-text table of an :func:`evaluate_answers` report (tokens marked ``~`` when
    estimated)."""
    head = ["method", "EM", "F1", "questions", "calls", "tokens", "p50 s"]
    rows = []
    for m, r in report.items():
        tokens = r["prompt_tokens"] + r["completion_tokens"]
        rows.append(
            [m, f"{r['em']:.3f}", f"{r['f1']:.3f}", str(r["questions"]), str(r["calls"]),
             ("~" if r["tokens_estimated"] else "") + str(tokens), f"{r['p50_s']:.2f}"]
        )
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, rows)])
