"""Incremental insert / delete against full builds on HotpotQA (issue 16's "must show"; offline).

Corpus ../shared/data/hotpotqa (``corpus.jsonl``, ``questions.jsonl``). The documents used (all,
or a ``--docs N`` slice, see below) are taken in corpus file order and split by position:
half A = documents 0, 2, 4, ..., half B = documents 1, 3, 5, ... (the file is sorted by
hashed id, so this is a deterministic pseudo-random split, unrelated to the questions).

Steps (one "pass"):

1. full build of A+B in corpus file order (timed) — recall of every method of ``gs.methods``;
2. build of A only (timed) — recall on the questions whose evidence is entirely in A, and the
   top-``--k`` chunk ids of ``dense`` and ``bm25`` for each of them;
3. insert B into the A index in batches (each timed): ``--singles`` batches of 1 document,
   then ``--tens`` batches of 10, then the rest in batches of ``--batch`` (100), in file order;
   then recall of every method of this incrementally built index against the full build
   (targets: |delta recall@5| <= 0.02 for graph methods);
4. delete B from it in one ``gs.delete(ids_of_B)`` call (timed); then, on the questions whose
   evidence lies entirely in A: dense and bm25 top-k chunk ids and their order identical to
   the A-only build, graph-method recall@5 within 0.01 of it.

Recall is evidence recall as bench/bench_quality.py computes it (:func:`graphstrata.eval.evaluate`,
ks 2/5/10; recall@5 reported) on the questions whose evidence documents are all in the index.

Two timings (``--embedder-cache on``, the default, prints both):

* **end to end** ("cold"): every path pays its own model forward passes (an insert embeds
  what the library asks it to embed: today new chunks, all entity names, community texts);
* **graph work only** ("cached"): the same pass again, the embedder wrapped in a cache filled
  during the cold pass (keyed by text), so neither the full build nor the inserts run the model;
  the figures are then the graph/index work alone. The number of texts the model still had to
  embed during that pass is printed (0 when the library is deterministic).

An untimed warm-up (a 20-document build, an insert, a delete) runs first, so one-off costs
(lazy imports, the model's first forward pass) are charged to no timed step. Recall is
measured once, on the cold pass (the cached pass reuses the very same vectors).
``--embedder-cache off`` runs the cold pass only.

Targets printed with met / NOT met: inserting all of B takes < 30 % of the full build; a
one-document insert < 2 s (judged on the median of the ``--singles`` inserts, max beside it);
graph-method recall@5 within 0.02 of the full build; after the delete, dense/bm25 top-k
identical to the A-only build and graph-method recall@5 within 0.01 of it.

    .venv/bin/python bench/bench_incremental.py                     # whole corpus, MiniLM (slow)
    .venv/bin/python bench/bench_incremental.py --docs 200 --embedder hash   # quick smoke run
    .venv/bin/python bench/bench_incremental.py --docs 300 --json .bench_out/incremental.json

``--docs N`` (slice): the evidence documents of the questions, question by question in file
order, as long as both of a question's documents still fit in N, then the next documents of the
corpus in file order; so a small slice still has questions to score. ``--slice head`` takes the
first N documents of the file instead (few questions then have all their evidence inside).
``--embedder hash`` uses :class:`graphstrata.testing.HashEmbedder` (no model, no semantic
quality: for control flow and timing of the graph work only).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from machine import cpu_name

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GRAPHSTRATA_DATA", ROOT.parent / "shared" / "data"))
BASELINES = ("dense", "bm25", "hybrid")
KS = (2, 5, 10)  # as bench_quality.py (the chunk depth of evaluate() depends on max(ks))

# targets of issue 16
INSERT_HALF_FRACTION = 0.30
ONE_DOC_SECONDS = 2.0
RECALL_TOLERANCE = 0.02
DELETE_RECALL_TOLERANCE = 0.01


class CachingEmbedder:
    """An :class:`graphstrata.models.Embedder` that remembers every vector by its text.

    Same ``id`` and ``dim`` as the wrapped embedder; ``embed(texts)`` returns float32
    ``(len(texts), dim)``. While ``serve`` is false (recording) every call runs the wrapped
    model and stores the rows; while ``serve`` is true, texts already stored are answered from
    the cache and only the others reach the model. ``forward_texts`` counts the texts the model
    embedded. ``token_spans`` (the chunking tokenizer, no forward pass) is delegated.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.id = inner.id
        self.dim = int(inner.dim)
        self.cache: dict[str, Any] = {}
        self.serve = False
        self.forward_texts = 0

    def _forward(self, texts: list[str]) -> Any:
        import numpy as np

        vecs = np.asarray(self.inner.embed(texts), dtype=np.float32)
        self.forward_texts += len(texts)
        for t, v in zip(texts, vecs, strict=True):
            self.cache[t] = v
        return vecs

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if not self.serve:
            return self._forward(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            self._forward(missing)
        return np.stack([self.cache[t] for t in texts]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Any:
        return self.embed([text])[0]

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return self.inner.token_spans(text)


# -- data ---------------------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def select_documents(corpus: list[dict[str, Any]], questions: list[dict[str, Any]],
                     n: int | None, how: str) -> list[dict[str, Any]]:
    """The documents to use, in corpus file order (see the module docstring, ``--docs``)."""
    if n is None or n >= len(corpus):
        return list(corpus)
    if how == "head":
        return corpus[:n]
    by_id = {d["id"]: d for d in corpus}
    chosen: dict[str, None] = {}
    for q in questions:
        ev = [e for e in dict.fromkeys(q.get("evidence_ids") or []) if e in by_id]
        new = [e for e in ev if e not in chosen]
        if ev and len(chosen) + len(new) <= n:
            chosen.update(dict.fromkeys(new))
    for d in corpus:
        if len(chosen) >= n:
            break
        chosen.setdefault(d["id"], None)
    return [d for d in corpus if d["id"] in chosen]


def batches(items: list[Any], singles: int, tens: int, rest: int) -> list[list[Any]]:
    """``singles`` batches of 1, ``tens`` of 10, then batches of ``rest`` (fewer when short)."""
    out, i = [], 0
    for size, count in ((1, singles), (10, tens)):
        for _ in range(count):
            if i >= len(items):
                return out
            out.append(items[i : i + size])
            i += size
    while i < len(items):
        out.append(items[i : i + rest])
        i += rest
    return out


# -- measuring ----------------------------------------------------------------------------------


def timed(fn: Any) -> tuple[Any, float]:
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def embed_seconds(stages: dict[str, float]) -> float:
    return sum(s for name, s in stages.items() if name.startswith("embedding"))


def top_ids(gs: Any, questions: list[dict[str, Any]], method: str, k: int) -> list[list[str]]:
    return [[h.id for h in gs.retrieve(q["question"], method=method, k=k, kinds=("chunk",))]
            for q in questions]


def stats_of(xs: Sequence[float]) -> dict[str, float]:
    import numpy as np

    a = np.asarray(xs, dtype=float)
    return {"n": len(a), "mean": float(a.mean()), "p50": float(np.percentile(a, 50)),
            "max": float(a.max()), "total": float(a.sum())}


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def run_pass(docs_a, docs_b, plan, config, embedder, evaluate_fn=None, log=print):
    """Full build, A build, batched inserts of B, delete of B; timings (and, with
    ``evaluate_fn(stage, gs)``, whatever it measures at each stage: 'full', 'a', 'inc', 'del')."""
    from graphstrata import GraphStrata

    out: dict[str, Any] = {}
    gs, secs = timed(lambda: GraphStrata.build([*docs_a, *docs_b], config=config, embedder=embedder))
    out["full_build_s"] = secs
    out["full_build_stages"] = gs.build_seconds
    log(f"  full build of {len(docs_a) + len(docs_b)} documents: {secs:.2f} s")
    if evaluate_fn:
        evaluate_fn("full", gs)
    del gs
    gs, secs = timed(lambda: GraphStrata.build(docs_a, config=config, embedder=embedder))
    out["a_build_s"] = secs
    out["a_build_stages"] = gs.build_seconds
    log(f"  build of A ({len(docs_a)} documents): {secs:.2f} s")
    if evaluate_fn:
        evaluate_fn("a", gs)
    inserts = []
    for i, batch in enumerate(plan, 1):
        ids, secs = timed(lambda batch=batch: gs.insert(batch))
        if len(ids) != len(batch):
            raise RuntimeError(f"insert of {len(batch)} documents returned {len(ids)} ids")
        stages = gs.build_seconds
        inserts.append({"docs": len(batch), "seconds": secs, "embed_s": embed_seconds(stages),
                        "stages": stages})
        log(f"  insert {i}/{len(plan)}: {len(batch)} document(s) in {secs:.2f} s "
            f"({secs / len(batch):.3f} s/doc)")
    out["inserts"] = inserts
    if evaluate_fn:
        evaluate_fn("inc", gs)
    ids_b = [d["id"] for d in docs_b]
    removed, secs = timed(lambda: gs.delete(ids_b))
    if removed != len(ids_b):
        raise RuntimeError(f"delete of {len(ids_b)} documents removed {removed}")
    out["delete_s"] = secs
    out["delete_stages"] = gs.build_seconds
    log(f"  delete of B ({len(ids_b)} documents, one call): {secs:.2f} s")
    if evaluate_fn:
        evaluate_fn("del", gs)
    return out


def insert_summary(p: dict[str, Any]) -> dict[str, Any]:
    """Seconds per document by batch size, and the totals against the full build."""
    by_size: dict[int, list[float]] = {}
    for r in p["inserts"]:
        by_size.setdefault(r["docs"], []).append(r["seconds"] / r["docs"])
    total = sum(r["seconds"] for r in p["inserts"])
    singles = by_size.get(1, [])
    return {
        "per_doc_by_batch_size": {size: stats_of(v) for size, v in sorted(by_size.items())},
        "insert_total_s": total,
        "insert_fraction_of_full_build": total / p["full_build_s"],
        "one_doc_p50_s": stats_of(singles)["p50"] if singles else None,
        "one_doc_max_s": stats_of(singles)["max"] if singles else None,
    }


def print_timings(label: str, p: dict[str, Any], s: dict[str, Any]) -> None:
    print(f"\n## timings, {label}")
    print(f"full build {p['full_build_s']:.2f} s (embedding stages "
          f"{embed_seconds(p['full_build_stages']):.2f} s); A build {p['a_build_s']:.2f} s; "
          f"delete of B (one call) {p['delete_s']:.2f} s = "
          f"{100 * p['delete_s'] / p['a_build_s']:.0f} % of the A build")
    head = f"{'batch size':>10} {'batches':>7} {'mean s/doc':>11} {'p50 s/doc':>10} {'max s/doc':>10}"
    print(head)
    print("-" * len(head))
    for size, st in s["per_doc_by_batch_size"].items():
        print(f"{size:>10} {st['n']:>7} {st['mean']:>11.3f} {st['p50']:>10.3f} {st['max']:>10.3f}")
    frac = s["insert_fraction_of_full_build"]
    print(f"insert all of B: {s['insert_total_s']:.2f} s = {100 * frac:.1f} % of the full build "
          f"(target < {100 * INSERT_HALF_FRACTION:.0f} %): {verdict(frac < INSERT_HALF_FRACTION)}")
    if s["one_doc_p50_s"] is not None:
        print(f"one-document insert: p50 {s['one_doc_p50_s']:.2f} s, max {s['one_doc_max_s']:.2f} s "
              f"(target < {ONE_DOC_SECONDS:.0f} s on the p50): "
              f"{verdict(s['one_doc_p50_s'] < ONE_DOC_SECONDS)}")


# -- main ---------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(DATA / "hotpotqa"), help="folder with corpus.jsonl, questions.jsonl")
    ap.add_argument("--docs", type=int, default=None, help="use a slice of N documents (see --slice)")
    ap.add_argument("--slice", choices=("evidence", "head"), default="evidence",
                    help="evidence: questions' evidence documents first; head: first N of the file")
    ap.add_argument("--limit", type=int, default=None, help="first N questions (of those scorable)")
    ap.add_argument("--singles", type=int, default=10, help="batches of 1 document (first)")
    ap.add_argument("--tens", type=int, default=10, help="batches of 10 documents (next)")
    ap.add_argument("--batch", type=int, default=100, help="size of the remaining batches")
    ap.add_argument("--k", type=int, default=10, help="top-k chunk ids compared after the delete")
    ap.add_argument("--methods", default=None, help="comma-separated; default: every method")
    ap.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    ap.add_argument("--embedder-cache", choices=("on", "off"), default="on",
                    help="on: also time a second pass with a pre-warmed embedding cache")
    ap.add_argument("--config", default=None, help="GraphStrataConfig fields as a JSON object")
    ap.add_argument("--json", default=None, help="write the results to this file")
    args = ap.parse_args()

    from graphstrata.eval import evaluate, load_questions

    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    print(f"# graphstrata incremental insert/delete benchmark — {time.strftime('%Y-%m-%d %H:%M')} — "
          f"{platform.node()}: {cpu_name()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, "
          f"GRAPHSTRATA_NUM_THREADS={os.environ.get('GRAPHSTRATA_NUM_THREADS')}")

    corpus_dir = Path(args.corpus)
    corpus = read_jsonl(corpus_dir / "corpus.jsonl")
    all_questions = load_questions(corpus_dir / "questions.jsonl")
    docs = select_documents(corpus, all_questions, args.docs, args.slice)
    docs_a, docs_b = docs[0::2], docs[1::2]
    in_a = {d["id"] for d in docs_a}
    in_all = in_a | {d["id"] for d in docs_b}
    questions = [q for q in all_questions if q["evidence_ids"] and set(q["evidence_ids"]) <= in_all]
    if args.limit:
        questions = questions[: args.limit]
    questions_a = [q for q in questions if set(q["evidence_ids"]) <= in_a]
    plan = batches(docs_b, args.singles, args.tens, args.batch)
    config = json.loads(args.config) if args.config else None

    if args.embedder == "hash":
        from graphstrata.testing import HashEmbedder

        inner = HashEmbedder()
    else:
        from graphstrata.models import default_embedder

        inner = default_embedder()
    embedder = CachingEmbedder(inner)  # recording: every call runs the model (cold timings)
    print(f"corpus {corpus_dir.name}: {len(docs)} of {len(corpus)} documents"
          f"{f' (--docs {args.docs}, --slice {args.slice})' if args.docs else ''}; "
          f"A = {len(docs_a)} (even positions in file order), B = {len(docs_b)} (odd); "
          f"embedder {inner.id}; {len(questions)} questions with all evidence in A+B, "
          f"{len(questions_a)} with all evidence in A")
    sizes = [len(b) for b in plan]
    print(f"insert plan: {sizes.count(1)} × 1, {sizes.count(10)} × 10, then "
          f"{len(sizes) - sizes.count(1) - sizes.count(10)} batch(es) of ≤ {args.batch} "
          f"({len(plan)} inserts in all)")

    measured: dict[str, Any] = {}

    def measure(stage: str, gs: Any) -> None:
        methods = args.methods.split(",") if args.methods else list(gs.methods)
        s = gs.stats()
        measured.setdefault("stats", {})[stage] = {
            k: s[k] for k in ("documents", "chunks", "entities", "relations", "communities_per_layer")
            if k in s}
        if stage in ("full", "inc") and questions:
            log(f"  recall of {len(methods)} methods on {len(questions)} questions ({stage})")
            measured[stage] = evaluate(gs, questions, methods, KS)
        if stage in ("a", "del") and questions_a:
            log(f"  recall and top-{args.k} on {len(questions_a)} A-questions ({stage})")
            measured[f"{stage}_recall"] = evaluate(gs, questions_a, methods, KS)
            measured[f"{stage}_top"] = {m: top_ids(gs, questions_a, m, args.k)
                                        for m in ("dense", "bm25") if m in methods}

    # untimed warm-up: lazy imports, native libraries and the model's first forward pass would
    # otherwise be charged to the first timed build
    from graphstrata import GraphStrata

    warm = GraphStrata.build(docs_a[:20], config=config, embedder=embedder)
    warm.insert(docs_b[:2])
    warm.delete([docs_b[0]["id"]])
    del warm

    log("pass 1: end to end (every path runs the embedding model)")
    embedder.forward_texts = 0
    cold = run_pass(docs_a, docs_b, plan, config, embedder, measure, log)
    cold_summary = insert_summary(cold)
    passes = {"end_to_end": {"pass": cold, "summary": cold_summary}}
    if args.embedder_cache == "on":
        log("pass 2: graph work only (embedding cache pre-warmed by pass 1)")
        embedder.serve = True
        embedder.forward_texts = 0
        cached = run_pass(docs_a, docs_b, plan, config, embedder, None, log)
        passes["graph_only"] = {"pass": cached, "summary": insert_summary(cached),
                                "model_forward_texts": embedder.forward_texts}

    print_timings("end to end (model forward passes included)", cold, cold_summary)
    if "graph_only" in passes:
        g = passes["graph_only"]
        print_timings("graph work only (embedding cache pre-warmed: no model forward passes)",
                      g["pass"], g["summary"])
        if g["model_forward_texts"]:
            print(f"warning: {g['model_forward_texts']} texts still reached the model in this "
                  "pass (not in the cache): these figures include their forward passes")

    checks: dict[str, Any] = {}
    st = measured.get("stats", {})
    for stage, label in (("full", "full build"), ("a", "A build"), ("inc", "incremental"),
                         ("del", "after delete")):
        if stage in st:
            s = st[stage]
            print(f"{label}: {s.get('documents')} documents, {s.get('chunks')} chunks, "
                  f"{s.get('entities')} entities, {s.get('relations')} relations, "
                  f"layers {s.get('communities_per_layer')}")
    if "full" in measured and "inc" in measured:
        print(f"\n## recall@5, incremental index vs full build ({len(questions)} questions)")
        head = f"{'method':<10} {'full':>7} {'incr.':>7} {'delta':>7}  target |delta| <= {RECALL_TOLERANCE}"
        print(head)
        print("-" * len(head))
        rows = {}
        for m, r in measured["full"].items():
            full, inc = r["recall@5"], measured["inc"][m]["recall@5"]
            ok = abs(inc - full) <= RECALL_TOLERANCE + 1e-9
            rows[m] = {"full": full, "incremental": inc, "delta": inc - full, "met": ok}
            tag = verdict(ok) + (" (baseline)" if m in BASELINES else "")
            print(f"{m:<10} {full:>7.3f} {inc:>7.3f} {inc - full:>+7.3f}  {tag}")
        graph_ok = all(v["met"] for m, v in rows.items() if m not in BASELINES)
        print(f"graph methods within {RECALL_TOLERANCE}: {verdict(graph_ok)}")
        checks["recall_incremental_vs_full"] = {"rows": rows, "graph_methods_met": graph_ok}
    if "a_recall" in measured and "del_recall" in measured:
        print(f"\n## after deleting B vs the A-only build ({len(questions_a)} questions with all "
              f"evidence in A)")
        same = {}
        for m in measured["a_top"]:
            a, d = measured["a_top"][m], measured["del_top"][m]
            ident = sum(x == y for x, y in zip(a, d, strict=True))
            same_set = sum(set(x) == set(y) for x, y in zip(a, d, strict=True))
            same[m] = {"identical": ident, "same_set": same_set, "total": len(a)}
            print(f"{m} top-{args.k} chunk ids, same order: {ident}/{len(a)} "
                  f"(same set: {same_set}/{len(a)}): {verdict(ident == len(a))}")
        head = f"{'method':<10} {'A build':>8} {'deleted':>8} {'delta':>7}  target |delta| <= {DELETE_RECALL_TOLERANCE}"
        print(head)
        print("-" * len(head))
        rows = {}
        for m, r in measured["a_recall"].items():
            a, d = r["recall@5"], measured["del_recall"][m]["recall@5"]
            ok = abs(d - a) <= DELETE_RECALL_TOLERANCE + 1e-9
            rows[m] = {"a_build": a, "after_delete": d, "delta": d - a, "met": ok}
            tag = verdict(ok) + (" (baseline)" if m in BASELINES else "")
            print(f"{m:<10} {a:>8.3f} {d:>8.3f} {d - a:>+7.3f}  {tag}")
        graph_ok = all(v["met"] for m, v in rows.items() if m not in BASELINES)
        print(f"graph methods within {DELETE_RECALL_TOLERANCE}: {verdict(graph_ok)}")
        checks["delete_vs_a_build"] = {"top_k": same, "rows": rows, "graph_methods_met": graph_ok}
    elif not questions_a:
        print("\nno question has all its evidence in A: the delete comparison is skipped")

    if args.json:
        result = {
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": {"node": platform.node(), "cpu": cpu_name(), "cores": os.cpu_count(),
                        "python": platform.python_version()},
            "args": vars(args),
            "embedder": inner.id,
            "documents": {"all": len(docs), "a": len(docs_a), "b": len(docs_b)},
            "questions": {"all": len(questions), "a": len(questions_a)},
            "insert_plan": sizes,
            "passes": passes,
            "stats": measured.get("stats", {}),
            "recall": {k: measured[k] for k in ("full", "inc", "a_recall", "del_recall") if k in measured},
            "checks": checks,
        }
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2, default=str))
        print(f"\nresults written to {path}")


if __name__ == "__main__":
    main()
