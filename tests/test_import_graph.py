"""The import graph of tagger/ and serve/, read from the source (``ast``, nothing imported): no module imports
itself through others (a cycle is named, module by module), and each folder of tagger/ imports only the layers
below it (docs/architecture.md draws them). Imports inside functions count as much as those at the top of a
module: they run as soon as the function does."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("tagger", "serve")

# lowest first; a module imports only from lower layers, or from its own folder. The cross-cutting modules (layer 0)
# import nothing above them and may import each other.
LAYERS: list[tuple[str, ...]] = [
    ("tagger.errors", "tagger.fileio", "tagger.limits", "tagger.tokenize", "tagger.schemes", "tagger.metrics"),
    ("tagger.data",),
    ("tagger.models",),
    ("tagger.inference",),
    ("tagger.artifacts",),
    ("tagger.training",),
    ("tagger.api",),
    ("tagger", "tagger.cli", "tagger.train", "tagger.commands", "tagger.report", "serve"),
]


def project_modules() -> dict[str, Path]:
    """Dotted name -> file of every module of PACKAGES (a package is its ``__init__.py``)."""
    out = {}
    for top in PACKAGES:
        for f in (REPO / top).rglob("*.py"):
            parts = f.relative_to(REPO).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules that ``name`` imports anywhere in its source: ``from a.b import c`` counts ``a.b.c`` where
    that is a module, else ``a.b``; relative imports are resolved against the module's package."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found |= {sub} if sub in known else ({base} if base in known else set())
    return found - {name}


@functools.cache
def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module, as ``[a, b, ..., a]``."""
    order, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(v: str) -> None:  # Tarjan's algorithm
        order[v] = low[v] = len(order)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                components.append(set(component))

    for v in sorted(graph):
        if v not in order:
            visit(v)
    return [_cycle_through(graph, component) for component in components]


def _cycle_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A path from the component's first module back to itself, inside the component (breadth first: a shortest one)."""
    start = min(component)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for w in sorted(graph[path[-1]] & component):
            if w == start:
                return path + [start]
            if w not in seen:
                seen.add(w)
                paths.append(path + [w])
    raise AssertionError(f"no cycle through {start}")  # unreachable for a strongly connected component


def layer_of(module: str) -> tuple[int, str]:
    """(layer index, the layer entry the module belongs to): the longest entry that is the module or a package of it."""
    matches = [(len(entry), i, entry) for i, layer in enumerate(LAYERS) for entry in layer
               if module == entry or module.startswith(entry + ".")]
    assert matches, f"{module} is in no layer of LAYERS"
    _, i, entry = max(matches)
    return i, entry


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    assert "tagger.artifacts.packaged" in graph["tagger.artifacts.runs"]  # imported in runs.load only
    assert "tagger.inference.backends" in graph["serve.service"]
    assert "tagger.api" in graph["tagger"]  # tagger.load's import


def test_no_import_cycle():
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_a_cycle_is_named():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]


def test_each_module_imports_only_lower_layers():
    upward = []
    for module, imported in sorted(import_graph().items()):
        layer, entry = layer_of(module)
        for m in sorted(imported):
            their_layer, their_entry = layer_of(m)
            if their_entry != entry and their_layer >= layer and not their_layer == layer == 0:
                upward.append(f"{module} (layer {layer}) -> {m} (layer {their_layer})")
    assert upward == [], "imports that do not go down the layers: " + "; ".join(upward)
