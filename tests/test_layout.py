"""The layering rules of docs/design/architecture.md hold in the tree.

Read from the source with ``ast`` (nothing is imported): no module-level import cycle
inside the package, no private name imported across modules, the storage layer never
imports the node layer or a node kind, only arrayds/nodes/commit.py writes manifests,
and no function is longer than ``MAX_FUNCTION_LINES`` without a reason listed here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "arrayds"

MAX_FUNCTION_LINES = 150
LONG_FUNCTIONS: dict[str, str] = {}
"""``module:function`` -> why it may be longer than MAX_FUNCTION_LINES."""

PRIVATE_IMPORTS: dict[str, str] = {}
"""``module -> module:name`` -> why the private name crosses a module boundary."""


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    is_package = MODULES[module].name == "__init__.py"
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, top_level_only: bool) -> list[tuple[str, list[str]]]:
    """(imported module, names) of ``module``'s imports inside the package."""
    tree = ast.parse(MODULES[module].read_text())
    body = tree.body if top_level_only else list(ast.walk(tree))
    out = []
    for node in body:
        if isinstance(node, ast.If) and top_level_only:
            continue  # TYPE_CHECKING blocks
        if isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            if not target.startswith("arrayds"):
                continue
            names = [a.name for a in node.names]
            # "from . import x" imports the module arrayds.x
            subs = [n for n in names if f"{target}.{n}" in MODULES]
            for n in subs:
                out.append((f"{target}.{n}", []))
            # the engine (arrayds._native) is an extension module, not a package import
            rest = [n for n in names if n not in subs and n != "_native"]
            if rest:
                out.append((target, rest))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.startswith("arrayds")]
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles a depth-first walk of ``graph`` meets (each as a closed path)."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t) :] + [t])
            elif t not in state:
                visit(t, [*stack, t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return cycles


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_module_level_import_cycle():
    graph = {
        m: {t for t, _ in _imports(m, top_level_only=True) if t in MODULES and t != m}
        for m in MODULES
    }
    cycles = _cycles(graph)
    assert not cycles, "module-level import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_private_names_imported_across_modules():
    found = []
    for m in MODULES:
        for target, names in _imports(m, top_level_only=False):
            for n in names:
                if n.startswith("_") and not n.startswith("__") and n != "_native":
                    key = f"{m} -> {target}:{n}"
                    if key not in PRIVATE_IMPORTS:
                        found.append(key)
    assert not found, "private names imported across modules:\n" + "\n".join(sorted(found))
    assert len(PRIVATE_IMPORTS) <= 2


@pytest.mark.parametrize("module", ["arrayds.abc.store", "arrayds.storage", "arrayds.errors"])
def test_storage_knows_nothing_of_nodes(module):
    """Nor of ArrayRecord files or shards (arrayds.files.arrayrecord, arrayds.nodes.shards)."""
    prefixes = [m for m in MODULES if m == module or m.startswith(module + ".")]
    bad = []
    for m in prefixes:
        for target, _names in _imports(m, top_level_only=False):
            if target.startswith(
                ("arrayds.nodes", "arrayds.kinds.array.manifest", "arrayds.kinds.array.handle")
            ) or (
                target
                in ("arrayds.records", "arrayds.ragged", "arrayds.dataset", "arrayds.nodes.shards")
            ):
                bad.append(f"{m} -> {target}")
    assert not bad, bad


def test_only_the_commit_module_writes_manifests():
    """``put_if_match`` (the compare-and-swap that makes a manifest visible) is called
    only by arrayds/nodes/commit.py; no module calls a manifest writer of the store."""
    bad = []
    for m, path in MODULES.items():
        if m.startswith("arrayds.storage") or m in ("arrayds.abc.store", "arrayds.nodes.commit"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in (
                "put_if_match",
                "write_manifest",
                "read_manifest",
                "read_manifest_bytes",
                "has_manifest",
            ):
                bad.append(f"{m}:{node.lineno} .{node.attr}")
    assert not bad, bad


def test_functions_are_short():
    long = []
    for m, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                key = f"{m}:{node.name}"
                if n > MAX_FUNCTION_LINES and key not in LONG_FUNCTIONS:
                    long.append(f"{key} ({n} lines)")
    assert not long, "functions over the limit:\n" + "\n".join(long)
