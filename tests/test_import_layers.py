"""The import graph of spikec/, read with ast (no module is imported): no cycles, and each layer imports only
the layers below it (docs/development.md, "Layout")::

    nn -> ir -> ops -> core -> formats -> frontend, passes -> codings -> targets -> app

``nn`` (the reference modules) needs nothing of spikec; ``ir`` (graph, errors) needs nothing above it; ``ops``
(the op cards) describe IR nodes; ``core`` (interpreter, checker, pass manager, serialize, cost) runs them;
``formats`` (NIR files: read, write, interpret) serve both the frontend and the NIR target; the frontend and
the passes stand side by side; ``codings`` (TTFS) are a coding's ops and pass; targets emit; ``app`` drives.

Every import statement counts, including imports inside functions (a lazy import still ties the layers).
An import names the module it loads: ``from a.b import c`` is an edge to ``a.b.c`` when that is a module,
else to ``a.b``; the parent packages a submodule import runs first are not edges (a package's __init__
importing its own submodules, which import each other, is not a cycle).
"""
import ast
from pathlib import Path

SPIKEC = Path(__file__).resolve().parents[1] / "spikec"
# bottom to top; packages in one tuple stand side by side (they may import each other)
LAYERS = (("spikec.nn",), ("spikec.ir",), ("spikec.ops",), ("spikec.core",), ("spikec.formats",),
          ("spikec.frontend", "spikec.passes"), ("spikec.codings",), ("spikec.targets",), ("spikec.app",))

# Modules allowed to import a layer above their own, each with why: none; any new upward import fails the test.
KNOWN_UPWARD_IMPORTS: dict = {}


def module_names() -> dict[str, Path]:
    names = {}
    for path in SPIKEC.rglob("*.py"):
        parts = path.relative_to(SPIKEC.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _known(name: str, modules) -> str | None:
    """``name`` or its nearest enclosing module in spikec; None outside spikec."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, modules) -> set[str]:
    """The spikec modules ``name`` imports, anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package
                for _ in range(node.level - 1):
                    parent = parent.rpartition(".")[0]
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in modules else _known(base, modules))
    return found - {None, name}


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _within(name: str, layers) -> bool:
    return any(name == layer or name.startswith(layer + ".") for layer in layers)


def test_the_import_graph_sees_the_frontend():
    """Guards the reader itself: known edges are found, so an empty answer below means something."""
    graph = import_graph()
    assert "spikec.frontend.registry" in graph["spikec.frontend.torch_modules"]
    assert "spikec.frontend.snntorch" in graph["spikec.frontend.tracing"]
    assert "spikec.frontend.nir_file" in graph["spikec.app.loader"]  # an import inside a function


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_frontend_registry_imports_no_converter():
    registry = import_graph()["spikec.frontend.registry"]
    assert not [name for name in registry if _within(name, ("spikec.frontend",))]


def layer_of(name: str) -> int | None:
    """The index in ``LAYERS`` of the layer ``name`` belongs to; None for ``spikec`` itself (the API facade)."""
    for index, packages in enumerate(LAYERS):
        if _within(name, packages):
            return index
    return None


def test_every_module_is_in_a_layer():
    assert [name for name in import_graph() if name != "spikec" and layer_of(name) is None] == []


def test_the_layer_reader_sees_an_upward_import():
    """Guards the check below: an edge from ops to targets would be upward."""
    assert layer_of("spikec.ops.neurons") < layer_of("spikec.targets.lava") < layer_of("spikec.app.cli")
    assert layer_of("spikec.frontend.norse") == layer_of("spikec.passes.fold_batchnorm")


def test_no_layer_imports_a_layer_above_it():
    upward = {(name, target) for name, targets in import_graph().items() if layer_of(name) is not None
              for target in targets if layer_of(target) is not None and layer_of(target) > layer_of(name)}
    assert upward - KNOWN_UPWARD_IMPORTS.keys() == set(), "a module imports a layer built on it"
    assert KNOWN_UPWARD_IMPORTS.keys() - upward == set(), "a known exception is gone: remove it from the list"
