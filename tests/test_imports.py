"""The package's import graph has no circle: every module can be read before the ones that import it."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "optuna_wpca"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, known: set[str], *, inside_functions: bool = False) -> set[str]:
    """The package's modules that ``name`` imports when it is loaded (module level; ``TYPE_CHECKING``
    blocks never run), and with ``inside_functions`` also the ones its functions import when called."""
    found = set()
    for statement in ast.parse(path.read_text()).body:
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test):
            continue
        for node in (ast.walk(statement) if inside_functions else _load_time_nodes(statement)):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in known)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    package = package[: len(package) - node.level + 1]
                    base = ".".join(package + ([node.module] if node.module else []))
                for alias in node.names:
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return (found & known) - {name}


def _load_time_nodes(node: ast.AST):
    """``node`` and what it holds, except function bodies (they run when called)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        return
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _load_time_nodes(child)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
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


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_circle():
    modules = _modules()
    graph = {name: _imports(name, path, set(modules)) for name, path in modules.items()}
    # The graph is the real one: known edges are in it.
    assert "optuna_wpca._record" in graph["optuna_wpca.distill._top_trials"]
    assert "optuna_wpca.spaces._base" in graph["optuna_wpca.spaces._wpca"]
    assert circles(graph) == []


def test_no_circle_either_through_imports_inside_functions():
    # A function-level import breaks a circle only at load time; the modules still depend on each
    # other, so the layering is checked with them too.
    modules = _modules()
    graph = {name: _imports(name, path, set(modules), inside_functions=True) for name, path in modules.items()}
    assert "optuna_wpca.pick" in graph["optuna_wpca._model_card"]  # imported inside a function: counted
    assert circles(graph) == []
