"""The core's tests mirror its source tree (issue 43): every test file under tests/core sits beside
the module it tests, or is one of the exceptions listed here with its reason.

``tests/core/a/b/test_c.py`` mirrors ``packages/graphstrata/src/graphstrata/a/b/c.py`` or the
package ``graphstrata/a/b/c/__init__.py``. Only ``test_*.py`` files are test files: conftest files,
data folders (``tests/core/data``) and helper modules are not checked.

An exception is a file named by concern rather than by module: it tests a behaviour that crosses
modules (bounded work, reliability, limits), or a second concern of a module whose namesake test
already exists (test files are moved whole, never split or concatenated). An exception may sit
in the folder of the package it tests.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests" / "core"
SOURCE = ROOT / "packages" / "graphstrata" / "src" / "graphstrata"

# path under tests/core -> why it does not mirror one module
EXCEPTIONS: dict[str, str] = {
    "test_reproducible.py": "two builds of one corpus on other workers, threads and hash seeds give "
    "the same index: the whole build path (indexing/, index.py, hierarchy.py, runner.py)",
    "test_agrag_predicates.py": "an LLM triple's predicate end to end: extraction, AGRAG's facts, "
    "the fact filter and the answer prompt",
    "test_async_llm.py": "aretrieve/aanswer on the caller's event loop across api.py, methods/ "
    "and llm/",
    "test_bounded_query.py": "per-query work bounded by the seeds across BM25, methods/, filters "
    "and the persisted structures",
    "test_cli_consistency.py": "the CLI's shared conventions; a second concern of cli.py "
    "(test_cli.py is its namesake)",
    "test_cli_folders.py": "the CLI on real folders (skipped files, PDFs, encodings, update --from); "
    "a second concern of cli.py",
    "test_empty_and_pickle.py": "GraphStrata.empty and pickling by directory; a second concern of "
    "api.py (test_api.py is its namesake)",
    "test_knn_build.py": "k-NN edges from the C-HNSW graph (hierarchy.py) together with the "
    "parallel index builds of indexing/build.py and index.py",
    "test_lighthi_scale.py": "LightRAG and HiRAG at scale: codecs of structures/, bounded searches "
    "of methods/, query work that follows the seeds",
    "test_limits.py": "bounds on work (document, query, clause and extraction caps) across "
    "chunking, config, extraction and methods/temporal.py",
    "test_llm_build.py": "the LLM path end to end through GraphStrata and the CLI with a scripted "
    "model",
    "test_llm_import_and_cache_lock.py": "the CLI's --llm import (cli.py) and the locked response "
    "cache (llm/cache.py), issue 30 finding 6",
    "test_llm_query.py": "query-time LLM steps of LightRAG and AGRAG through a built index",
    "test_llm_stage_answers.py": "kept answers of the build-time LLM stages across indexing/, "
    "llm/records.py and the store",
    "test_loader_safety.py": "folder loading that cannot escape, hang or exhaust memory; a second "
    "concern of loaders.py (test_loaders.py is its namesake)",
    "test_query_threads.py": "query embedding on bounded threads across config, models.py and the "
    "methods that skip the query vector",
    "test_reliability.py": "hostile input, failed writes, trusted manifests and leftovers across "
    "loaders, store and api",
    "test_state_seed.py": "a state constructed whole (derived_seed) through LLM builds and updates; "
    "a second concern of state.py (test_state.py is its namesake)",
    "test_warm_up.py": "the load's warm-up queries, one per method, through GraphStrata.load",
    "methods/test_options.py": "every method's per-query options checked by Method.options; a second "
    "concern of methods/base.py (methods/test_base.py is its namesake)",
}


def _test_files() -> list[str]:
    return sorted(p.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py"))


def _mirrored(rel: str) -> bool:
    path = Path(rel)
    stem = path.stem.removeprefix("test_")
    folder = SOURCE / path.parent
    return (folder / f"{stem}.py").is_file() or (folder / stem / "__init__.py").is_file()


def test_every_core_test_file_mirrors_a_module_or_is_an_allowed_exception():
    stray = [rel for rel in _test_files() if rel not in EXCEPTIONS and not _mirrored(rel)]
    assert not stray, (
        "test files under tests/core that mirror no module of graphstrata/ (move each beside the "
        f"module it tests, or list it in EXCEPTIONS with its reason): {stray}"
    )


def test_every_exception_exists_does_not_mirror_a_module_and_gives_a_reason():
    files = set(_test_files())
    assert not sorted(set(EXCEPTIONS) - files), "EXCEPTIONS lists files that do not exist"
    assert not [rel for rel in EXCEPTIONS if _mirrored(rel)], (
        "EXCEPTIONS lists files that mirror a module: they need no exception"
    )
    assert all(reason.strip() for reason in EXCEPTIONS.values())
