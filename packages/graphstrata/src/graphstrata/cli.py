"""Command line: ``graphstrata index / query / eval / inspect``.

Every command exits 0 on success and 2 with one ``error: ...`` line on bad input (missing or
corrupt index, empty corpus, unknown method, k ≤ 0, ...).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _ks(text: str) -> list[int]:
    try:
        ks = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc
    if not ks or min(ks) <= 0:
        raise argparse.ArgumentTypeError(f"every k must be > 0, got {text!r}")
    return ks


def _positive(text: str) -> int:
    try:
        k = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from exc
    if k <= 0:
        raise argparse.ArgumentTypeError(f"k must be > 0, got {k}")
    return k


def _option(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` → ``(key, value)``; the value is read as JSON (``0.3``, ``false``,
    ``null``) and kept as a string when it is not JSON."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip(), value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="graphstrata", description="Graph-RAG indexing and retrieval.")
    sub = p.add_subparsers(dest="command", required=True)

    ix = sub.add_parser("index", help="index files or folders (.txt, .md, .jsonl)")
    ix.add_argument("paths", nargs="+", help="files or folders")
    ix.add_argument("--out", required=True, help="index directory to write (atomically)")
    ix.add_argument("--chunk-size", type=int, default=None, help="tokens per chunk")
    ix.add_argument("--chunk-overlap", type=int, default=None, help="tokens of overlap")
    ix.add_argument("--quiet", action="store_true", help="no progress bars")

    q = sub.add_parser("query", help="retrieve for one question")
    q.add_argument("index_dir")
    q.add_argument("question")
    q.add_argument("--method", default="archrag")
    q.add_argument("-k", type=_positive, default=5)
    q.add_argument("--json", action="store_true", help="print hits as JSON")
    q.add_argument("--chunks-only", action="store_true", help="print only chunk hits")
    q.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                   help="method option, repeatable (e.g. --option propagate=false)")

    ev = sub.add_parser("eval", help="evidence recall@k on a question file")
    ev.add_argument("index_dir")
    ev.add_argument("--questions", required=True, help="JSONL with question and evidence_ids")
    ev.add_argument("--method", action="append", dest="methods", help="repeatable")
    ev.add_argument("-k", type=_ks, default=[2, 5, 10], help="comma-separated cut-offs")
    ev.add_argument("--json", dest="json_out", help="write the report as JSON to this file")
    ev.add_argument("--limit", type=_positive, default=None, help="first N questions only")
    ev.add_argument("--quiet", action="store_true")
    ev.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                    help="method option given to every method, repeatable (an ablation such "
                    "as --option decompose=false)")

    ins = sub.add_parser("inspect", help="print an index's counts and manifest")
    ins.add_argument("index_dir")
    return p


def _cmd_index(args) -> int:
    from . import GraphStrata

    config = {}
    if args.chunk_size is not None:
        config["chunk_size"] = args.chunk_size
    if args.chunk_overlap is not None:
        config["chunk_overlap"] = args.chunk_overlap
    t0 = time.perf_counter()
    gs = GraphStrata.build(paths=args.paths, config=config or None, show_progress=not args.quiet)
    gs.persist(args.out)
    total = time.perf_counter() - t0
    s = gs.stats()
    print(f"indexed into {Path(args.out).resolve()}")
    print(
        f"  documents {s['documents']}  chunks {s['chunks']}  entities {s['entities']}  "
        f"relations {s['relations']}"
    )
    layers = "  ".join(f"L{i}: {n}" for i, n in enumerate(s["communities_per_layer"], 1))
    print(f"  communities per layer  {layers or '(none)'}")
    for stage, sec in gs.build_seconds.items():
        print(f"  {stage:<28} {sec:8.1f} s")
    print(f"  {'total':<28} {total:8.1f} s")
    return 0


def _cmd_query(args) -> int:
    from . import GraphStrata

    gs = GraphStrata.load(args.index_dir)
    kinds = ("chunk",) if args.chunks_only else None
    hits = gs.retrieve(
        args.question, method=args.method, k=args.k, kinds=kinds, **dict(args.option)
    )
    if args.json:
        print(json.dumps([h.to_dict() for h in hits], indent=2, ensure_ascii=False))
        return 0
    for h in hits:
        where = f"L{h.layer}" if h.layer is not None else "  "
        docs = ",".join(h.document_ids[:3]) + ("…" if len(h.document_ids) > 3 else "")
        text = " ".join(h.text.split())
        print(f"{h.kind:<9} {where:<3} {h.score:6.3f}  [{docs}]  {text[:110]}")
    return 0


def _cmd_eval(args) -> int:
    from . import GraphStrata
    from .eval import evaluate, format_table, load_questions

    gs = GraphStrata.load(args.index_dir)
    questions = load_questions(args.questions)
    if args.limit:
        questions = questions[: args.limit]
    methods = args.methods or ["archrag"]
    report = evaluate(
        gs, questions, methods, args.k, progress=not args.quiet, options=dict(args.option)
    )
    print(format_table(report))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def _cmd_inspect(args) -> int:
    from .store import read_manifest

    manifest = read_manifest(args.index_dir)
    shown = {k: v for k, v in manifest.items() if k not in ("files", "version_dir")}
    shown["version"] = manifest["version_dir"].name
    print(json.dumps(shown, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``graphstrata`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    handler = {
        "index": _cmd_index,
        "query": _cmd_query,
        "eval": _cmd_eval,
        "inspect": _cmd_inspect,
    }[args.command]
    try:
        return handler(args)
    except (ValueError, FileNotFoundError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
