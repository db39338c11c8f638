"""Command line: ``graphstrata index / update / query / eval / inspect / export / viz / serve``.

Every command is one process: it loads the index (and the embedder) and exits. For a
long-running process that keeps them loaded between queries, run ``graphstrata serve`` (the
MCP server).

``index`` and ``update`` read folders as real folders are: a file that cannot be read (binary,
not UTF-8, a PDF without pypdf, an unsupported type) is skipped and listed with the reason
(``--on-error skip``, the default) or stops the command (``--on-error fail``);
``--encoding`` names the codec of text files that are not UTF-8 (:mod:`graphstrata.sources`).
``update DIR --from FOLDER`` adds, replaces and deletes documents by file path and content
hash, re-embedding only what changed.

Every command exits 0 on success and 2 with one ``error: ...`` line on bad input (missing or
corrupt index, empty corpus, unknown method, k ≤ 0, ...); an error about a command-line
argument names it (``--option damping=abc: ...``, ``--chunk-overlap (20) must be ...``).

The same conventions hold in every command:

- ``--version`` prints the package version.
- ``--json [FILE]`` (query, eval, inspect): without FILE (or with ``-``) the output is JSON on
  stdout instead of text; with FILE the usual text goes to stdout and the JSON to FILE.
  ``eval --json OUT`` therefore means what it always meant.
- ``--llm MODULE:FACTORY`` (index, query, eval): ``FACTORY()`` from ``MODULE`` (the working
  directory is searched after the installed packages, so a stray ``sklearn.py`` there shadows
  nothing; errors name the file that was imported) returns the LLM — a :class:`graphstrata.llm.LLM`, a
  plain ``str -> str`` callable, or a framework model wrapped in its adapter
  (``LlamaIndexLLM(...)``, ``ChatModelLLM(...)``). Calls and tokens are printed (``~`` marks
  estimates, when the model reports no usage).
- Method names (``--method``) and method options (``--option KEY=VALUE``) are checked against
  :data:`graphstrata.methods.METHODS` before any index or model is loaded, so a typo fails at
  once instead of after the embedder's load.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

STDOUT = "-"


def _version() -> str:
    """The installed distribution's version (no import of the engine, so ``--version`` is
    instant), else the package's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("graphstrata")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        from . import __version__

        return __version__


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


def _count(minimum: int):
    """An argparse type: an integer ``>= minimum`` (argparse names the option in the error)."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from exc
        if n < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {n}")
        return n

    return parse


class _Option(NamedTuple):
    """One ``--option KEY=VALUE``: the parsed key and value, and the text as typed (for
    error messages)."""

    key: str
    value: Any
    text: str


def _option(text: str) -> _Option:
    """``KEY=VALUE`` → ``(key, value, text)``; the value is read as JSON (``0.3``, ``false``,
    ``null``) and kept as a string when it is not JSON."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return _Option(key.strip(), value, text)


class _UsageError(Exception):
    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    """Raises instead of exiting on a usage error, so :func:`_parse_args` can retry once."""

    def error(self, message: str):  # type: ignore[override]
        raise _UsageError(self, message)


def _add_json(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--json", nargs="?", const=STDOUT, default=None, metavar="FILE",
        help=f"{what} as JSON: on stdout instead of text, or (with FILE) written to FILE "
        "while the text goes to stdout",
    )


def _add_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                   help=help + "; VALUE is read as JSON (0.3, false, null), else as a string")


def _add_llm(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--llm", default=None, metavar="MODULE:FACTORY", help=help)


def _load_llm(spec: str | None) -> Any:
    """``--llm MODULE:FACTORY`` → ``FACTORY()``; ``None`` stays ``None``.

    The working directory is appended to ``sys.path`` (searched last), so ``MODULE`` may live
    there but a file in it named like an installed package (``sklearn.py``) is never imported
    in its place.

    Raises:
        ValueError: not ``MODULE:FACTORY``, the module does not import, no such factory, the
            factory fails, exits (``sys.exit``) or returns no LLM (each names ``--llm`` and the
            module's file).
    """
    if spec is None:
        return None
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--llm {spec}: expected MODULE:FACTORY (e.g. my_llms:make_llm)")
    import importlib

    cwd = str(Path.cwd())
    if "" not in sys.path and cwd not in sys.path:
        sys.path.append(cwd)  # last: installed packages win over stray files here
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:
        raise ValueError(f"--llm {spec}: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    where = getattr(module, "__file__", None) or "a built-in module"
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ValueError(f"--llm {spec}: {module_name!r} ({where}) has no callable {attr!r}")
    try:
        llm = factory()
    except SystemExit as exc:
        raise ValueError(
            f"--llm {spec}: {attr}() exited (SystemExit {exc.code!r}) instead of returning an LLM ({where})"
        ) from exc
    except Exception as exc:
        raise ValueError(f"--llm {spec}: {attr}() failed: {type(exc).__name__}: {exc} ({where})") from exc
    if llm is None:
        raise ValueError(f"--llm {spec}: {attr}() returned None, not an LLM ({where})")
    from .llm import as_llm

    try:
        as_llm(llm)
    except TypeError as exc:
        raise ValueError(f"--llm {spec} ({where}): {exc}") from exc
    return llm


def _usage_lines(usage: dict[str, Any], title: str) -> list[str]:
    """Text lines for a usage dict (``{"stages": ..., "total": ...}``); ``~`` marks estimates."""
    if not usage or not usage.get("stages"):
        return []

    def row(name: str, u: dict[str, Any]) -> str:
        mark = "~" if u.get("estimated") else " "
        extra = f"  cached {u['cached']}" if u.get("cached") else ""
        extra += f"  kept {u['kept']}" if u.get("kept") else ""  # answers the index kept
        extra += f"  skipped {u['skipped']}" if u.get("skipped") else ""
        return (f"  {name:<34} calls {u.get('calls', 0):6d}  prompt {mark}{u.get('prompt_tokens', 0):9d}  "
                f"completion {mark}{u.get('completion_tokens', 0):8d}{extra}")

    lines = [title]
    lines += [row(name, u) for name, u in usage["stages"].items()]
    lines.append(row("total", usage.get("total", {})))
    if usage.get("total", {}).get("estimated"):
        lines.append("  (~ = estimated as characters / 4: the LLM reported no token usage)")
    return lines


def _add_sources(p: argparse.ArgumentParser) -> None:
    p.add_argument("--on-error", choices=["skip", "fail"], default="skip",
                   help="a file that cannot be read (binary, not UTF-8, unsupported type, a PDF "
                   "without graphstrata[pdf]): skip it and list it with the reason (default), or stop")
    p.add_argument("--encoding", default=None, metavar="CODEC",
                   help="decode text files that are not UTF-8 with CODEC (e.g. latin-1, cp1252); "
                   "without it they are skipped")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="graphstrata", description="Graph-RAG indexing and retrieval.",
        epilog="Each command loads the index and exits; `graphstrata serve` is the long-running "
        "mode that keeps an index and its embedder loaded between queries.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    for add_command in (
        _index_command, _update_command, _query_command, _eval_command, _inspect_command,
        _export_command, _viz_command, _serve_command,
    ):
        add_command(sub)
    return p


def _index_command(sub: Any) -> None:
    """``graphstrata index``: index files or folders into a new index."""
    ix = sub.add_parser("index", help="index files or folders (.txt, .md, .jsonl, .pdf)")
    ix.add_argument("paths", nargs="+", help="files or folders")
    _add_sources(ix)
    ix.add_argument("--out", required=True, help="index directory to write (atomically)")
    ix.add_argument("--chunk-size", type=_count(1), default=None, help="tokens per chunk")
    ix.add_argument("--chunk-overlap", type=_count(0), default=None, help="tokens of overlap")
    ix.add_argument("--chunking", choices=["tokens", "sentence"], default=None,
                    help="cut chunks anywhere (tokens, the default) or on sentence boundaries")
    ix.add_argument("--quiet", action="store_true", help="no progress bars")
    ix.add_argument("--preset", choices=["default", "fast"], default="default",
                    help="embedder: MiniLM (default), or fast: a static embedder distilled from it, "
                    "about 200x faster on a CPU with lower recall (distilled once, then cached)")
    _add_llm(ix, "run the papers' LLM steps at index time (LLM extraction, community reports, HiRAG "
             "summary entities); responses are cached in OUT/llm-cache.sqlite")
    ix.add_argument("--llm-extraction", choices=["lightrag", "hirag", "agrag", "statistical"], default=None,
                    help="with --llm: LightRAG-style typed extraction (default), HiRAG's two-stage extraction "
                    "(entities, then relations among them), AGRAG's TF-IDF entities + "
                    "LLM triples, or the offline extraction (the LLM writes reports and answers only)")
    ix.add_argument("--dry-run", action="store_true",
                    help="print the LLM calls and estimated tokens the build would spend, and stop")
    ix.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                    help="run chunking, embedding, extraction and the LLM calls on a Ray cluster "
                    "(graphstrata[ray]): ADDRESS of an existing one (e.g. ray://head:10001 or auto); "
                    "none starts a local Ray")


def _update_command(sub: Any) -> None:
    """``graphstrata update``: bring an index up to date with a folder."""
    up = sub.add_parser("update", help="bring an index up to date with a folder: add, replace and "
                        "delete documents by file path and content hash (only changes are re-embedded)")
    up.add_argument("index_dir", help="an index written by graphstrata index")
    up.add_argument("--from", dest="source", required=True, metavar="FOLDER",
                    help="the folder (or file) the index was built from, as it is now")
    _add_sources(up)
    up.add_argument("--quiet", action="store_true", help="no progress display")
    _add_llm(up, "the LLM an LLM-built index was built with (its updates run the LLM steps)")


def _query_command(sub: Any) -> None:
    """``graphstrata query``: retrieve (or answer) for one question."""
    q = sub.add_parser("query", help="retrieve for one question (for many, keep an index loaded "
                       "with graphstrata serve)")
    q.add_argument("index_dir")
    q.add_argument("question")
    q.add_argument("--method", default="archrag")
    q.add_argument("-k", type=_positive, default=5, help="chunk hits to print (default 5)")
    _add_json(q, "the hits")
    q.add_argument("--context", nargs="?", type=_positive, const=5, default=None, metavar="N",
                   help="also print the method's graph context (entities, relations, communities, "
                   "paths) after the k chunks: at most N hits (default 5)")
    q.add_argument("--chunks-only", action="store_true",
                   help="only chunk hits (the default; kept for scripts that pass it)")
    q.add_argument("--explain", action="store_true",
                   help="why each hit came back: its reason printed under it (with --json, an "
                   "\"explain\" object in each hit)")
    _add_option(q, "method option, repeatable (e.g. --option propagate=false)")
    _add_llm(q, "answer with the method's own generation step (and run its LLM retrieval steps); "
             "prints the answer, the hits it used, and the calls and tokens spent")


def _eval_command(sub: Any) -> None:
    """``graphstrata eval``: evidence recall@k (and answer quality) on a question file."""
    ev = sub.add_parser("eval", help="evidence recall@k on a question file")
    ev.add_argument("index_dir")
    ev.add_argument("--questions", required=True, help="JSONL with question and evidence_ids")
    ev.add_argument("--method", action="append", dest="methods", help="repeatable")
    ev.add_argument("-k", type=_ks, default=[2, 5, 10], help="comma-separated cut-offs")
    _add_json(ev, "the report")
    ev.add_argument("--limit", type=_count(1), default=None, help="first N questions only")
    ev.add_argument("--quiet", action="store_true")
    ev.add_argument("--answers", action="store_true",
                    help="with --llm: exact match and token F1 of each method's generated answers "
                    "against the questions' answer / answer_aliases")
    _add_llm(ev, "the LLM for --answers and for LLM retrieval steps")
    _add_option(ev, "method option given to every method, repeatable (an ablation such as "
                "--option decompose=false)")


def _inspect_command(sub: Any) -> None:
    """``graphstrata inspect``: what an index holds."""
    ins = sub.add_parser("inspect", help="what an index holds: counts, community layers, top entities, build cost")
    ins.add_argument("index_dir")
    ins.add_argument("--top", type=_count(1), default=10, help="entities and community titles listed per layer")
    _add_json(ins, "the statistics and the manifest")


def _export_command(sub: Any) -> None:
    """``graphstrata export``: the graph as GraphML or node-link JSON."""
    ex = sub.add_parser("export", help="export the graph: entities, relations, communities and membership")
    ex.add_argument("index_dir")
    ex.add_argument("--format", choices=["graphml", "json"], default="graphml",
                    help="graphml (Gephi, yEd, Neo4j APOC) or node-link json")
    ex.add_argument("--out", required=True, help="file to write")


def _viz_command(sub: Any) -> None:
    """``graphstrata viz``: a picture of the community hierarchy."""
    vz = sub.add_parser("viz", help="picture of the community hierarchy: PNG sunburst or self-contained HTML explorer")
    vz.add_argument("index_dir")
    vz.add_argument("--out", required=True,
                    help="FILE.png (sunburst, matplotlib) or FILE.html (interactive, opens with no network)")
    vz.add_argument("--query", default=None, help="highlight what this query retrieves, layer by layer")
    vz.add_argument("--method", default="archrag", help="retrieval method for --query")
    vz.add_argument("-k", type=_positive, default=5, help="chunk hits for --query")
    _add_option(vz, "method option for --query, repeatable")


def _serve_command(sub: Any) -> None:
    """``graphstrata serve``: serve indexes over MCP and JSON HTTP."""
    from .serve.config import add_arguments as add_serve_arguments

    sv = sub.add_parser("serve", help="serve indexes to agents over MCP (stdio or streamable HTTP) and plain JSON HTTP")
    add_serve_arguments(sv)
    _add_llm(sv, "offer the answer tool (and LLM retrieval steps) with this LLM")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse ``argv``; on a usage error print usage and ``prog: error: ...`` and exit 2.

    ``--json`` takes an optional FILE, so in ``query --json DIR QUESTION`` argparse first reads
    DIR as the file; when that leaves a required argument missing, ``--json`` is read as
    having no FILE and the line is parsed again (the flag form of earlier versions).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    try:
        return parser.parse_args(argv)
    except _UsageError as first:
        if "--json" in argv:
            i = argv.index("--json")
            if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                try:
                    return parser.parse_args([*argv[:i], f"--json={STDOUT}", *argv[i + 1 :]])
                except _UsageError:
                    pass
        argparse.ArgumentParser.error(first.parser, first.message)
        raise  # pragma: no cover - error() exits


def _check_json_target(target: str | None) -> None:
    """Fail before any work when ``--json FILE`` cannot be written."""
    if target is None or target == STDOUT:
        return
    path = Path(target)
    if path.is_dir():
        raise ValueError(f"--json {target}: is a directory")
    if not path.parent.is_dir():
        raise ValueError(f"--json {target}: directory {path.parent} does not exist")


def _emit_json(data: Any, target: str) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if target == STDOUT:
        sys.stdout.write(text)
    else:
        Path(target).write_text(text, encoding="utf-8")


def _check_methods(methods: list[str], options: list[_Option], answer: bool = False) -> dict[str, Any]:
    """Check method names and ``--option`` values against the method classes, loading no
    index and no model; returns the options as a dict.

    Raises:
        ValueError: an unknown method (named with the known ones), or an option that a method
            does not have or whose value it refuses (the message starts with the
            ``--option KEY=VALUE`` as typed and carries the method's reason).
    """
    from .methods import METHODS  # the method classes only: no model, no index

    for name in methods:
        if name not in METHODS:
            raise ValueError(
                f"--method {name}: unknown method {name!r}; known methods: {', '.join(METHODS)}"
            )
    for opt in options:
        for name in methods:
            try:
                if answer:  # answer options (response_type, ...) are checked by the answer step
                    from .generation import generation_options

                    if opt.key in generation_options(name):
                        continue
                METHODS[name]().options({opt.key: opt.value})
            except ValueError as exc:
                raise ValueError(f"--option {opt.text}: {exc}") from exc
    return {opt.key: opt.value for opt in options}


_CONFIG_FLAGS = {"chunk_size": "--chunk-size", "chunk_overlap": "--chunk-overlap"}


def _index_config(args) -> dict[str, Any] | None:
    """The build config from the flags, validated here so an error names the flags."""
    config = {}
    if args.chunk_size is not None:
        config["chunk_size"] = args.chunk_size
    if args.chunk_overlap is not None:
        config["chunk_overlap"] = args.chunk_overlap
    if args.chunking is not None:
        config["chunking"] = args.chunking
    if not config:
        return None
    from pydantic import ValidationError

    from .config import GraphStrataConfig

    try:
        GraphStrataConfig(**config)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = str(err.get("msg", exc)).removeprefix("Value error, ")
        field = err["loc"][0] if err.get("loc") else None
        if field in _CONFIG_FLAGS:
            msg = f"{_CONFIG_FLAGS[field]} {config.get(field)}: {msg}"
        for name, flag in _CONFIG_FLAGS.items():
            msg = msg.replace(name, flag)
        raise ValueError(msg) from exc
    return config


def _cmd_index(args) -> int:
    config = _index_config(args)
    if args.llm_extraction:
        if not args.llm:
            raise ValueError("--llm-extraction needs --llm MODULE:FACTORY")
        config = {**(config or {}), "llm_extraction": args.llm_extraction}
    for p in args.paths:
        if not Path(p).exists():
            raise FileNotFoundError(f"{p}: no such file or directory")
    sources = _read_sources(args.paths, args)
    if args.dry_run:
        return _dry_run(args, config, sources.documents)
    llm = _load_llm(args.llm)
    from . import GraphStrata

    runner = None
    if args.ray is not None:
        from .ray_runner import RayRunner

        runner = RayRunner(address=args.ray or None)
    t0 = time.perf_counter()
    try:
        gs = GraphStrata.build(
            sources.documents, config=config, show_progress=not args.quiet, llm=llm,
            persist_dir=args.out if llm is not None else None, runner=runner, embedder=args.preset,
        )
    finally:
        if runner is not None:
            runner.close()
    if llm is None:
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
    for line in _usage_lines(gs.build_usage, "  LLM calls and tokens by stage"):
        print(line)
    _print_skipped(sources.skipped)
    return 0


def _read_sources(paths: list[str], args) -> Any:
    """The files under ``paths`` per ``--on-error`` / ``--encoding``
    (:func:`graphstrata.sources.load_sources`, which refuses symlinks out of a folder, FIFOs,
    devices and files over the default ``max_document_chars`` bytes before reading them).

    Raises:
        ValueError: ``--on-error fail`` and a file cannot be read; no file could be read (the
            reasons listed).
    """
    from .sources import load_sources

    sources = load_sources(paths, encoding=args.encoding, on_error=args.on_error)
    if not sources.documents:
        reasons = "; ".join(f"{s.path}: {s.reason}" for s in sources.skipped[:10])
        raise ValueError(
            "nothing to index: " + (f"every file was skipped ({reasons})" if reasons else
                                    "no .txt, .md, .rst, .jsonl or .pdf file")
        )
    return sources


def _print_skipped(skipped: list[Any]) -> None:
    """The summary of ``--on-error skip``: each skipped file and why."""
    if not skipped:
        return
    print(f"skipped {len(skipped)} file(s) (--on-error fail stops at the first instead):")
    for s in skipped:
        print(f"  {s.path}: {s.reason}")


def _cmd_update(args) -> int:
    """``update DIR --from FOLDER``: documents of new and changed files are inserted (an
    insert replaces an indexed id), documents of files gone from the folder deleted; files
    whose content hash is the indexed one are not read again."""
    from .sources import FILE_KEY, HASH_KEY, load_sources

    if not Path(args.source).exists():
        raise FileNotFoundError(f"--from {args.source}: no such file or directory")
    llm = _load_llm(args.llm)
    from . import GraphStrata

    # one command per process: a warm-up query per method would only add to it
    gs = GraphStrata.load(args.index_dir, llm=llm, warm_up=False)
    indexed = gs.documents
    by_file: dict[str, list[str]] = {}
    known: dict[str, str] = {}
    for doc_id, doc in indexed.items():
        key = doc.metadata.get(FILE_KEY)
        if isinstance(key, str):
            by_file.setdefault(key, []).append(doc_id)
            known[key] = str(doc.metadata.get(HASH_KEY))
    if not by_file:
        raise ValueError(
            f"{args.index_dir}: no document of this index was read from a file by graphstrata "
            "index (an index built from Python or before update existed): rebuild it with "
            "graphstrata index"
        )
    t0 = time.perf_counter()
    sources = load_sources([args.source], encoding=args.encoding, on_error=args.on_error, known=known,
                           max_document_chars=gs.config.max_document_chars)
    read_files = {d.metadata[FILE_KEY] for d in sources.documents}

    def same(old: Any, new: Any) -> bool:  # the content, whatever the file hash says
        strip = lambda m: {k: v for k, v in m.items() if k != HASH_KEY}  # noqa: E731
        return old is not None and old.text == new.text and strip(old.metadata) == strip(new.metadata)

    upserts = [d for d in sources.documents if not same(indexed.get(d.id), d)]
    new_ids = {d.id for d in sources.documents}
    deletes = [i for key, ids in by_file.items() if key not in sources.files for i in ids]
    deletes += [i for key in read_files & set(by_file) for i in by_file[key] if i not in new_ids]
    added = sum(1 for d in upserts if d.id not in indexed)
    if upserts:
        gs.insert(upserts, show_progress=not args.quiet)
    if deletes:
        gs.delete(sorted(set(deletes)), show_progress=not args.quiet)
    rows = gs.chunk_row
    changed = {d.id for d in upserts}
    chunks = sum(1 for c in gs.chunks if c.document_id in changed) if changed else 0
    print(f"updated {Path(args.index_dir).resolve()} from {args.source} "
          f"in {time.perf_counter() - t0:.1f} s")
    print(f"  added {added}  replaced {len(upserts) - added}  deleted {len(set(deletes))} documents; "
          f"re-embedded {chunks} chunks; {len(sources.unchanged)} file(s) unchanged")
    print(f"  documents {len(gs.documents)}  chunks {len(rows)}")
    _print_skipped(sources.skipped)
    return 0


def _dry_run(args, config: dict[str, Any] | None, documents: list[Any]) -> int:
    """``index --dry-run``: the calls and tokens a build with an LLM would spend."""
    from .config import as_config
    from .indexing import estimate_llm_cost
    from .models import default_embedder

    cfg = as_config(config)
    llm = _load_llm(args.llm)  # never called: its tokenizer counts the prompts when it has one
    est = estimate_llm_cost(documents, cfg, default_embedder(), llm=llm)
    print(f"dry run: no LLM called; {est['chunks']} chunks")
    for line in _usage_lines({"stages": est["stages"], "total": est["total"]}, "  estimated LLM calls and tokens"):
        print(line)
    print("  (projected stages depend on the graph the LLM will extract: rough estimates)")
    return 0


def _cmd_query(args) -> int:
    options = _check_methods([args.method], args.option, answer=args.llm is not None)
    if args.explain:
        options["explain"] = True
    _check_json_target(args.json)
    if not args.question.strip():
        raise ValueError("the question is empty")
    from . import GraphStrata

    llm = _load_llm(args.llm)
    gs = GraphStrata.load(args.index_dir, llm=llm, warm_up=False)  # one query per process
    if llm is not None:
        return _print_answer(gs.answer(args.question, method=args.method, k=args.k, **options), args)
    if args.context is not None and not args.chunks_only:
        hits = gs.retrieve(args.question, method=args.method, k=args.k, kinds=None,
                           context_k=args.context, **options)
    else:
        hits = gs.retrieve(args.question, method=args.method, k=args.k, kinds=("chunk",), **options)
    if args.json is not None:
        _emit_json([h.to_dict() for h in hits], args.json)
        if args.json == STDOUT:
            return 0
    for h in hits:
        where = f"L{h.layer}" if h.layer is not None else "  "
        docs = ",".join(h.document_ids[:3]) + ("…" if len(h.document_ids) > 3 else "")
        text = " ".join(h.text.split())
        print(f"{h.kind:<9} {where:<3} {h.score:6.3f}  [{docs}]  {text[:110]}")
        if h.explain:
            print(f"{'':<21}why: {h.explain['reason']}")
    return 0


def _print_answer(ans, args) -> int:
    if args.json is not None:
        _emit_json(ans.to_dict(), args.json)
        if args.json == STDOUT:
            return 0
    print(ans.text.strip())
    print()
    print(f"from {len(ans.hits)} hits:")
    for h in ans.hits:
        where = f"L{h.layer}" if h.layer is not None else "  "
        print(f"  {h.kind:<9} {where:<3} {h.score:6.3f}  {' '.join(h.text.split())[:100]}")
        if h.explain:
            print(f"{'':<23}why: {h.explain['reason']}")
    for line in _usage_lines(ans.usage, "LLM calls and tokens"):
        print(line)
    return 0


def _cmd_eval(args) -> int:
    methods = args.methods or ["archrag"]
    options = _check_methods(methods, args.option, answer=args.answers)
    _check_json_target(args.json)
    if args.answers and not args.llm:
        raise ValueError("--answers needs --llm MODULE:FACTORY")
    from .eval import evaluate, evaluate_answers, format_answer_table, format_table, load_questions

    questions = load_questions(args.questions)  # a bad question file fails before the load
    if args.limit:
        questions = questions[: args.limit]
    llm = _load_llm(args.llm)
    from . import GraphStrata

    gs = GraphStrata.load(args.index_dir, llm=llm)
    if args.answers:
        k = max(args.k)
        report = evaluate_answers(gs, questions, methods, k=k, progress=not args.quiet, options=options)
        if args.json != STDOUT:
            print(format_answer_table(report))
        if args.json is not None:
            _emit_json(report, args.json)
        return 0
    report = evaluate(gs, questions, methods, args.k, progress=not args.quiet, options=options)
    if args.json != STDOUT:
        print(format_table(report))
    if args.json is not None:
        _emit_json(report, args.json)
    return 0


def _cmd_inspect(args) -> int:
    _check_json_target(args.json)
    from .inspection import describe, read_records
    from .quality import records_quality

    records = read_records(args.index_dir)
    shown = dict(records.manifest)
    shown.pop("files", None)
    stats = describe(records, top=args.top)
    stats["quality"] = records_quality(records)
    if args.json is not None:
        _emit_json({**shown, "stats": stats}, args.json)  # the manifest's keys, as before, + stats
        if args.json == STDOUT:
            return 0
    embedder = shown.get("embedder", {})
    print(f"index {Path(args.index_dir).resolve()}")
    print(
        f"  version {shown['version']}  generation {shown.get('generation', '?')}  "
        f"schema {shown.get('schema_version', '?')}  created {shown.get('created', '?')}"
    )
    print(f"  embedder {embedder.get('id', '?')} (dim {embedder.get('dim', '?')})"
          + (f"  LLM {stats['llm']}" if stats["llm"] else "  no LLM (offline build)"))
    print("  " + "  ".join(f"{k} {stats[k]}" for k in ("documents", "chunks", "entities", "relations")))
    t = stats["tokens_per_chunk"]
    print(f"  tokens per chunk  min {t['min']}  median {t['median']:g}  max {t['max']}")
    print(f"  graph export  nodes {stats['graph']['nodes']}  edges {stats['graph']['edges']}")
    types = ", ".join(f"{k} {v}" for k, v in list(stats["entity_types"].items())[:8])
    print(f"  entity types  {types or '(none)'}")
    qa = stats["quality"]
    print(f"  graph quality  stray words {qa['stray_words']:.2%}  variants {qa['variants']:.2%}  "
          f"typed {qa['typed']:.2%}  labelled relations {qa['labelled_relations']:.2%}")
    if not stats["layers"]:
        print("  communities  (none)")
    for layer in stats["layers"]:
        m, e = layer["members"], layer["entities"]
        print(f"  layer {layer['layer']}: {layer['communities']} communities  members min {m['min']} "
              f"median {m['median']:g} max {m['max']}  entities min {e['min']} median {e['median']:g} max {e['max']}")
        for c in layer["top"]:
            print(f"      {c['id']:<10} {c['entities']:5d} entities  {' '.join(c['title'].split())[:80]}")
    print("  top entities by degree")
    for e in stats["top_entities"]:
        kind = f" [{e['type']}]" if e["type"] else ""
        print(f"      {e['degree']:5d}  {e['name'][:60]}{kind}  ({e['chunks']} chunks)")
    if stats["build_seconds"]:
        print("  build seconds by stage")
        for stage, sec in stats["build_seconds"].items():
            print(f"      {stage:<34} {sec:8.1f} s")
    for line in _usage_lines(stats["build_usage"], "  LLM calls and tokens by stage"):
        print("  " + line)
    d = stats["drift"]
    if d:
        print(
            f"  drift since the last full build ({d.get('built_documents', '?')} documents, frozen "
            f"statistics v{d.get('stats_version', 1)}): {d.get('updates', 0)} incremental updates, "
            f"+{d.get('documents_added', 0)} / -{d.get('documents_removed', 0)} documents "
            f"({100 * d['changed_documents_share']:.1f} % changed), +{d.get('entities_added', 0)} / "
            f"-{d.get('entities_removed', 0)} entities, {d.get('communities_reclustered', 0)} communities "
            f"re-clustered, {d.get('communities_resummarised', 0)} re-summarised"
        )
        if d["changed_documents_share"] > 0.5:
            print("  (more than half the corpus changed since the build: GraphStrata.rebuild() refits it)")
    return 0


def _cmd_export(args) -> int:
    out = Path(args.out)
    if out.is_dir():
        raise ValueError(f"--out {args.out}: is a directory")
    if not out.parent.is_dir():
        raise ValueError(f"--out {args.out}: directory {out.parent} does not exist")
    from .inspection import describe, export_graph, read_records

    records = read_records(args.index_dir)
    export_graph(records, out, args.format)
    g = describe(records)["graph"]
    print(f"wrote {out.resolve()} ({args.format}): {g['nodes']} nodes, {g['edges']} edges")
    return 0


def _cmd_viz(args) -> int:
    out = Path(args.out)
    suffix = out.suffix.lower()
    if suffix not in (".png", ".html", ".htm"):
        raise ValueError(f"--out {args.out}: must end with .png (sunburst) or .html (interactive page)")
    if out.is_dir():
        raise ValueError(f"--out {args.out}: is a directory")
    if not out.parent.is_dir():
        raise ValueError(f"--out {args.out}: directory {out.parent} does not exist")
    querying = args.query is not None
    if querying and not args.query.strip():
        raise ValueError("--query is empty")
    options = _check_methods([args.method], args.option) if querying else {}
    if suffix == ".png":
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ValueError("--out .png needs matplotlib: pip install 'graphstrata[viz]' (or write .html)") from None
    from . import GraphStrata
    from .viz import render_html, render_png

    gs = GraphStrata.load(args.index_dir, warm_up=False)
    hits = gs.retrieve(args.query, method=args.method, k=args.k, **options) if querying else None
    render = render_png if suffix == ".png" else render_html
    path = render(gs, out, query=args.query, query_hits=hits, method=args.method if querying else None)
    layers = gs.state.stats()["communities_per_layer"]
    print(f"wrote {path.resolve()}: {sum(layers)} communities in {len(layers)} layer(s), "
          f"{len(gs.state.kg.entities)} entities" + (f"; {len(hits)} hits of --query marked" if querying else ""))
    return 0


def _cmd_serve(args) -> int:
    from .serve import config_from_args, run

    config = config_from_args(args)  # bad arguments and tokens fail before any index loads
    run(config, llm=_load_llm(args.llm))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``graphstrata`` console script; returns the exit status."""
    args = _parse_args(argv)
    from .llm.cache import LLMCacheLockedError
    from .llm.client import LLMError
    from .store import ConcurrentWriteError

    handler = {
        "index": _cmd_index,
        "update": _cmd_update,
        "query": _cmd_query,
        "eval": _cmd_eval,
        "inspect": _cmd_inspect,
        "export": _cmd_export,
        "viz": _cmd_viz,
        "serve": _cmd_serve,
    }[args.command]
    try:
        return handler(args)
    except (ValueError, FileNotFoundError, FileExistsError, LLMError, LLMCacheLockedError,
            ConcurrentWriteError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
