"""Every kanx module imports on its own, and kanx.draw and kanx.analyze do not depend on
each other both ways (issue #14): analysis may call the drawing (at call time, so that it
stays torch-free), the drawing imports nothing from the analysis. The import contracts (issue
#35): the model code (kanx.kan) never imports Hydra or OmegaConf, however indirectly, and the
analysis (kanx.analyze) never imports torch, Hydra or OmegaConf when it is imported. The drawing
engine (kanx.diagram) reaches nothing the model does not, and importing kanx.load imports neither
matplotlib nor sympy (issue #51). Read from the source (ast), so they run in the fast tier."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

PACKAGE = ROOT / "kanx"


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return name.removesuffix(".__init__")


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _import_nodes(node: ast.AST):
    """Every import statement below ``node``, module level and inside functions alike,
    except those under ``if TYPE_CHECKING:`` (never executed)."""
    for child in ast.iter_child_nodes(node):
        for c in child.orelse if _is_type_checking(child) else [child]:
            if isinstance(c, ast.Import | ast.ImportFrom):
                yield c
            yield from _import_nodes(c)


def _module_level_nodes(tree: ast.Module):
    """The import statements that run when the module is imported: at its top level and in the
    blocks there (if, try), not inside functions or classes, nor under ``if TYPE_CHECKING:``."""
    for child in tree.body if isinstance(tree, ast.Module) else ast.iter_child_nodes(tree):
        for c in child.orelse if _is_type_checking(child) else [child]:
            if isinstance(c, ast.Import | ast.ImportFrom):
                yield c
            elif isinstance(c, ast.If | ast.Try | ast.With):
                yield from _module_level_nodes(c)


@functools.cache
def _targets(name: str, path: Path, module_level: bool = False) -> tuple[str, ...]:
    """Every dotted name that module ``name`` imports (``module_level``: only at import time)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in _module_level_nodes(tree) if module_level else _import_nodes(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        else:
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            found += [target, *(f"{target}.{a.name}" for a in node.names)]
    return tuple(found)


def imports_of(name: str, path: Path, module_level: bool = False) -> set[str]:
    """The kanx modules that module ``name`` imports anywhere in its code (function-level
    imports included: they run, only later; ``module_level``: only those that run when it is
    imported), with the packages above them."""
    found = set()
    for t in _targets(name, path, module_level):  # importing a.b.c runs a and a.b first
        parts = t.split(".")
        found |= {m for m in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if m in MODULES}
    return found - {name}


def third_party_of(name: str, path: Path, module_level: bool = False) -> set[str]:
    """The top-level packages outside kanx that module ``name`` imports (e.g. torch, hydra)."""
    return {t.split(".")[0] for t in _targets(name, path, module_level)} - {"kanx", "__future__"}


def import_graph(module_level: bool = False) -> dict[str, set[str]]:
    return {name: imports_of(name, path, module_level) for name, path in MODULES.items()}


def reachable(graph: dict[str, set[str]], start: set[str]) -> dict[str, list[str]]:
    """Every module reachable from ``start``, with one import chain leading to it."""
    chains = {s: [s] for s in start}
    todo = list(start)
    while todo:
        m = todo.pop()
        for n in sorted(graph[m]):
            if n not in chains:
                chains[n] = [*chains[m], n]
                todo.append(n)
    return chains


def in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.slow
def test_every_module_imports_in_a_fresh_interpreter():
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    done = subprocess.run([sys.executable, "-c", code, *MODULES], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_import_graph_sees_function_level_and_relative_imports():
    graph = import_graph()
    assert "kanx.draw" in graph["kanx.analyze.select"]  # inside draw_median_models
    assert "kanx.analyze.collect" in graph["kanx.analyze.select"]  # from .collect import ...
    assert "kanx.load" in graph["kanx"]  # from kanx import load, inside __getattr__
    assert "kanx.kan.network" not in graph["kanx.kan.structure"]  # under TYPE_CHECKING only
    assert "kanx.kan.structure" not in graph["kanx.kan.network"]  # the model needs no structure metrics (no circle)


def test_no_import_cycle_between_draw_and_analyze():
    graph = import_graph()
    # Every module below kanx imports the package first, but kanx's lazy names (load_run,
    # load_runs: kanx.__getattr__) import their modules when asked for, not then: the package
    # itself brings only what it imports at import time (nothing of the analysis or the drawing).
    graph["kanx"] = import_graph(module_level=True)["kanx"]
    draw = {m for m in graph if in_package(m, "kanx.draw")}
    analyze = {m for m in graph if in_package(m, "kanx.analyze")}
    assert draw and analyze
    from_draw = {m: c for m, c in reachable(graph, draw).items() if m in analyze}
    from_analyze = {m: c for m, c in reachable(graph, analyze).items() if m in draw}
    assert not (from_draw and from_analyze), (
        f"cycle: {' -> '.join(next(iter(from_draw.values())))} and {' -> '.join(next(iter(from_analyze.values())))}")
    assert not from_draw, f"kanx.draw reaches the analysis: {[' -> '.join(c) for c in from_draw.values()]}"


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: each set of two or more modules that reach each other
    (Tarjan's strongly connected components), sorted. An import of a package above (a.b
    imports a, which may import a.b back, as kanx's lazy ``load_run`` does) is not counted: it
    runs first, whatever the module asks for."""
    graph = {m: {n for n in deps if not in_package(m, n)} for m, deps in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


# Circles not broken yet: none (issue #35 broke kanx.plan <-> kanx.runner, and kanx.formula <->
# kanx.load by moving the expression code to kanx.symbolic). Keep it empty.
KNOWN_CIRCLES: list[list[str]] = []


def test_circles_finds_a_circle_through_function_level_imports():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "p": set(), "p.q": {"p"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_no_import_circle_among_kanx_modules():
    # Function-level imports count: a circle hidden in a function still ties both modules
    # together (issue #35: kanx.plan and kanx.runner imported each other that way).
    found = circles(import_graph())
    assert found == KNOWN_CIRCLES, f"import circles: {found}"


def test_the_drawing_engine_reaches_nothing_the_model_does_not():
    # kanx.diagram draws from the model and the inputs its caller hands it; kanx.draw and
    # TrainedRun.draw (kanx.load) import it, so it must reach neither: a run folder is read by them.
    graph = import_graph()
    graph["kanx"] = import_graph(module_level=True)["kanx"]  # kanx's lazy names import kanx.load when asked for
    model = reachable(graph, {m for m in graph if in_package(m, "kanx.kan")})
    chains = reachable(graph, {m for m in graph if in_package(m, "kanx.diagram")})
    beyond = [" -> ".join(c) for m, c in sorted(chains.items()) if m not in model and not in_package(m, "kanx.diagram")]
    assert not beyond, f"kanx.diagram reaches beyond the model: {beyond}"


def test_loading_a_run_imports_neither_matplotlib_nor_sympy():
    # `import kanx.load` stays light for a notebook: TrainedRun.draw and TrainedRun.formula
    # import the drawing (matplotlib) and the symbolic export (sympy) when they are called.
    chains = forbidden_imports("kanx.load", {"matplotlib", "sympy"}, module_level=True)
    assert not chains, "loading a run imports:\n" + "\n".join(chains)


def test_the_launch_path_imports_one_way():
    # kanx.jobs (job preparation, packing, cost) and kanx.checkpoint sit below the runner,
    # which sits below kanx.plan; none of them reaches back up.
    chains = reachable(import_graph(), {"kanx.jobs", "kanx.checkpoint", "kanx.runner"})
    assert "kanx.plan" not in chains, " -> ".join(chains.get("kanx.plan", []))
    assert "kanx.runner" not in reachable(import_graph(), {"kanx.jobs", "kanx.checkpoint"})
    assert "kanx.jobs" not in reachable(import_graph(), {"kanx.checkpoint"})


def test_no_launcher_imports_the_entry_module():
    # kanx.train is Hydra's entry point; what the launchers share with it (fail,
    # discard_if_empty) lives in kanx.errors and kanx.records.
    for path in sorted((ROOT / "hydra_plugins").rglob("*.py")):
        assert "kanx.train" not in imports_of(module_name(path), path), path


def forbidden_imports(package: str, forbidden: set[str], module_level: bool) -> list[str]:
    """The import chains from a module of ``package`` to one that imports a ``forbidden``
    package; ``module_level``: through the imports that run at import time only, while the
    modules of ``package`` itself may not import a forbidden package anywhere in their code.
    A package above (kanx, run first by importing any kanx module) counts with its import-time
    imports only: kanx's lazy ``load_run`` imports kanx.load when that attribute is asked for."""
    start = {m for m in MODULES if in_package(m, package)}
    assert start, package
    graph = {m: imports_of(m, path, module_level or (path.name == "__init__.py" and m not in start))
             for m, path in MODULES.items()}
    chains = []
    for m, chain in sorted(reachable(graph, start).items()):
        path = MODULES[m]
        bad = forbidden & third_party_of(m, path, m not in start and (module_level or path.name == "__init__.py"))
        chains += [f"{' -> '.join(chain)} -> {b}" for b in sorted(bad)]
    return chains


def test_model_code_never_imports_hydra_or_omegaconf():
    # The model takes typed config (kanx.kan.spec); Hydra's config stays at the boundary
    # (kanx.config), however deep or late the import.
    chains = forbidden_imports("kanx.kan", {"hydra", "omegaconf"}, module_level=False)
    assert not chains, "model code reaches Hydra:\n" + "\n".join(chains)


def test_analysis_never_imports_torch_hydra_or_omegaconf():
    # The analysis runs where torch is absent; it may call the drawing and loading of a run
    # (kanx.analyze.select) at call time, inside the function that needs them.
    chains = forbidden_imports("kanx.analyze", {"torch", "hydra", "omegaconf"}, module_level=True)
    assert not chains, "the analysis imports torch, Hydra or OmegaConf:\n" + "\n".join(chains)

