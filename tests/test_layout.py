"""The layering rules of docs/design/architecture.md hold in the tree.

Read from the source with ``ast`` (nothing is imported): no import cycle inside the
package, imports inside functions counted (``TYPE_CHECKING`` blocks excepted); every
import points to the module's own layer or one below (:data:`LAYERS`); no private name
imported across modules and no private attribute of another module's object used; the
storage layer never imports the node layer or a node kind; only
arrayds/nodes/commit.py writes manifests; and no function is longer than
``MAX_FUNCTION_LINES`` without a reason listed here.
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


def _type_checking_lines(tree: ast.Module) -> set[int]:
    """The lines of ``if TYPE_CHECKING:`` blocks (imports for annotations only)."""
    lines: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            lines.update(range(n.lineno, (n.end_lineno or n.lineno) + 1))
    return lines


def _imports(module: str, top_level_only: bool) -> list[tuple[str, list[str]]]:
    """(imported module, names) of ``module``'s imports inside the package (with
    ``top_level_only=False``: those inside functions too, not those of
    ``TYPE_CHECKING`` blocks)."""
    tree = ast.parse(MODULES[module].read_text())
    skip = _type_checking_lines(tree)
    body = tree.body if top_level_only else list(ast.walk(tree))
    body = [n for n in body if getattr(n, "lineno", 0) not in skip]
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


def _graph() -> dict[str, set[str]]:
    """module -> the package modules it imports, inside functions too."""
    return {
        m: {t for t, _ in _imports(m, top_level_only=False) if t in MODULES and t != m}
        for m in MODULES
    }


def test_no_import_cycle():
    """Counting imports inside functions: an import deferred into a function to dodge
    a cycle is still a cycle."""
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


LAYERS: list[tuple[str, ...]] = [
    ("arrayds.errors",),
    ("arrayds.abc", "arrayds.storage"),
    ("arrayds.files",),
    ("arrayds.nodes",),
    ("arrayds.dask", "arrayds.progress", "arrayds.html_repr"),
    ("arrayds.kinds",),
    (
        "arrayds.api",
        "arrayds.dataset",
        "arrayds.records",
        "arrayds.ragged",
        "arrayds.serializers",
        "arrayds.xarray",
        "arrayds.beam",
        "arrayds.zarr",
        "arrayds.sampler",
        "arrayds.ingest",
        "arrayds.tools",
        "arrayds.convert",
        "arrayds.verify",
    ),
    ("arrayds.cli",),
]
"""The layers, lowest first (docs/design/architecture.md): the errors; storage (keys
and bytes); ArrayRecord files; the node layer (what every kind shares); helpers that
know no kind (dask graphs, progress bars, HTML reprs); the node kinds; the entry points,
integrations and tools; the command line. The package itself (``arrayds``, its public
names) sits on top of all."""


def _layer(module: str) -> int:
    if module == "arrayds":
        return len(LAYERS)
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{module} is in no layer of LAYERS")


def test_every_module_has_a_layer():
    for m in MODULES:
        _layer(m)


def test_imports_point_to_the_same_layer_or_below():
    up = [
        f"{m} (layer {_layer(m)}) -> {t} (layer {_layer(t)})"
        for m, targets in _graph().items()
        for t in sorted(targets)
        if _layer(t) > _layer(m)
    ]
    assert not up, "imports up the layers:\n" + "\n".join(up)


def _own_names(tree: ast.Module) -> set[str]:
    """Every name a module defines or assigns: functions, classes, attributes its
    classes set (``self._a = ...``), ``__slots__`` entries."""
    names: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif (
            isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name)
            and n.value.id in ("self", "cls")
        ):
            names.add(n.attr)
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                names.update(x.id for x in ast.walk(t) if isinstance(x, ast.Name))
                if isinstance(t, ast.Name) and t.id == "__slots__":
                    names.update(c.value for c in ast.walk(n.value) if isinstance(c, ast.Constant))
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
    return names


PRIVATE_ATTRIBUTES: dict[str, str] = {
    "arrayds.storage.fsspec:._strip_protocol": "fsspec's AbstractFileSystem._strip_protocol "
    "(no public equivalent gives the key of a path in the file system's own cache "
    "'dircache'); run by tests/s3 at the pinned fsspec and by the floors' fsspec 2023.6",
    "arrayds.storage.gcs:._location": "gcsfs' GCSFileSystem._location, the service endpoint "
    "its own requests use (no public attribute); run by tests/gcs against "
    "fake-gcs-server at the pinned gcsfs, the minimum is pyproject's gcsfs>=2024.12",
}
"""``module:.attribute`` -> why a module uses a private attribute it does not define."""


def test_no_private_attribute_of_another_module_is_used():
    """``obj._x`` only where the module defines ``_x`` itself (``self``/``cls`` of a
    subclass may use what its base class defines)."""
    found = []
    for m, path in MODULES.items():
        tree = ast.parse(path.read_text())
        own = _own_names(tree)
        for n in ast.walk(tree):
            if not isinstance(n, ast.Attribute) or not n.attr.startswith("_"):
                continue
            if n.attr.startswith("__") or n.attr in own:
                continue
            if isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
                continue
            key = f"{m}:.{n.attr}"
            if key not in PRIVATE_ATTRIBUTES:
                found.append(f"{key} (line {n.lineno}, on {ast.unparse(n.value)})")
    assert not found, "private attributes of other modules used:\n" + "\n".join(found)


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


def test_the_architecture_map_names_every_module():
    """docs/design/architecture.md is the map of the package: every module is on it,
    named by its path below its folder (``kinds/array/handle.py``) or, at the top, its
    file name."""
    text = (ROOT.parent / "docs" / "design" / "architecture.md").read_text()
    missing = []
    for path in MODULES.values():
        rel = path.relative_to(ROOT).as_posix()
        if path.name == "__init__.py" and rel != "__init__.py":
            continue  # a package: its folder's modules are listed
        folder, _, name = rel.rpartition("/")
        named = f"`{rel}`" in text or (folder and f"`{folder}/` (" in text and f"`{name}`" in text)
        if not named and f"{folder.split('/')[-1]}/{name}" not in text:
            missing.append(rel)
    assert not missing, "modules missing from docs/design/architecture.md: " + ", ".join(missing)
