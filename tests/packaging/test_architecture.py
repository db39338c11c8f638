"""The shape of the code (issue 27): no import cycle among modules, no private name imported
from another module.

Every ``.py`` file of the five packages is parsed (nothing is imported). An edge ``a → b`` is
any ``import`` statement in ``a`` that names module ``b``, at module level or inside a function
— an import inside a function closes a circle as surely as one at the top, it only delays it.
Imports under ``if TYPE_CHECKING:`` are left out (they never run). ``from pkg import name``
is an edge to ``pkg.name`` when that is a module, else to ``pkg`` itself; importing
``pkg.sub`` is not counted as importing ``pkg`` (Python runs ``pkg/__init__`` first, but a
package's ``__init__`` re-exporting its modules is not a circle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ROOTS = [
    ROOT / "packages" / "graphstrata" / "src",
    ROOT / "packages" / "langchain-graphstrata",
    ROOT / "packages" / "llama-index-retrievers-graphstrata",
    ROOT / "packages" / "llama-index-graph-rag-graphstrata",
    ROOT / "packages" / "llama-index-node-parser-graphstrata",
    ROOT / "packages" / "llama-index-extractors-graphstrata",
    ROOT / "packages" / "llama-index-embeddings-graphstrata",
]
TOP_LEVEL = ("graphstrata", "langchain_graphstrata", "llama_index")


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for base in PACKAGE_ROOTS:
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            parts = list(rel.parts)
            if parts[0] not in TOP_LEVEL or "tests" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


class _Imports(ast.NodeVisitor):
    """Collects ``(target module, imported name or None, line)`` outside TYPE_CHECKING blocks."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.found: list[tuple[str, str | None, int]] = []

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name == "TYPE_CHECKING":
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((alias.name, None, node.lineno))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        target = _resolve(self.module, node)
        for alias in node.names:
            self.found.append((target, alias.name, node.lineno))


def _edges() -> tuple[dict[str, set[str]], list[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    private: list[str] = []
    for module, path in MODULES.items():
        visitor = _Imports(module)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for target, name, line in visitor.found:
            sub = f"{target}.{name}" if name else None
            if sub in MODULES:
                if sub != module:
                    graph[module].add(sub)
                continue
            if target in MODULES and target != module:
                graph[module].add(target)
                if name and name.startswith("_") and not name.startswith("__"):
                    private.append(f"{module}:{line} imports {name} from {target}")
    return graph, private


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_parser_sees_every_package() -> None:
    assert "graphstrata.api" in MODULES and "langchain_graphstrata.retrievers" in MODULES
    assert "llama_index.retrievers.graphstrata.base" in MODULES
    graph, _ = _edges()
    assert "graphstrata.state" in graph["graphstrata.api"]


def test_cycle_detection_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle_among_modules() -> None:
    graph, _ = _edges()
    cycles = _cycles(graph)
    if cycles:
        pytest.fail("import cycles (function-local imports included):\n" + "\n".join(" ↔ ".join(c) for c in cycles))


def test_no_private_name_imported_from_another_module() -> None:
    _, private = _edges()
    assert not private, "\n".join(private)


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _imports_of(package: str, forbidden: tuple[str, ...]) -> list[str]:
    graph, _ = _edges()
    return sorted(
        f"{module} imports {target}"
        for module, targets in graph.items() if _under(module, package)
        for target in targets if any(_under(target, f) for f in forbidden)
    )


def test_methods_never_import_indexing() -> None:
    """Methods read a state and the structures built for it (issue 43): an index-time stage is
    never imported by query code, at module level or inside a function."""
    found = _imports_of("graphstrata.methods", ("graphstrata.indexing",))
    assert not found, "\n".join(found)


def test_store_imports_neither_methods_nor_indexing() -> None:
    """Persistence registers the derived structures by importing ``graphstrata.structures``
    (issue 43), not the methods that read them nor the stages that build a state."""
    found = _imports_of("graphstrata.store", ("graphstrata.methods", "graphstrata.indexing"))
    assert not found, "\n".join(found)


def test_no_method_module_registers_a_derived_structure() -> None:
    """What is built at index time lives in ``graphstrata.structures`` (issue 43): no module
    under methods/ defines, calls or imports ``register_derived``."""
    found = []
    for module, path in MODULES.items():
        if not _under(module, "graphstrata.methods"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            name = None
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = node.name
            elif isinstance(node, ast.ImportFrom):
                name = next((a.name for a in node.names if a.name == "register_derived"), None)
            if name == "register_derived":
                found.append(f"{module}:{node.lineno}")
    assert not found, "register_derived under methods/: " + ", ".join(found)


def _layout_block() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Layout", 1)[1]
    return section.split("```", 2)[1].strip("\n").splitlines()


def test_readme_layout_matches_the_tree() -> None:
    """Every path the README's Layout names exists, and every module and package of the core
    is named there."""
    core = ROOT / "packages" / "graphstrata" / "src" / "graphstrata"
    named: set[str] = set()
    for line in _layout_block():
        nested = line.startswith("  ")
        for token in line.split():
            if not (token.endswith("/") or token.endswith(".py")):
                continue
            path = (core / token) if nested else (ROOT / token)
            assert path.exists(), f"README Layout names {token!r}, which does not exist ({path})"
            if nested:
                named.add(token.rstrip("/"))
    modules = {p.name for p in core.glob("*.py") if p.name != "__init__.py"}
    modules |= {p.name for p in core.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    missing = sorted(m for m in modules if m.removesuffix(".py") not in {n.removesuffix(".py") for n in named}
                     and m not in named)
    assert not missing, f"core modules missing from the README Layout: {missing}"
