"""Every kanx module imports on its own, and kanx.draw and kanx.analyze do not depend on
each other both ways (issue #14): analysis may call the drawing (at call time, so that it
stays torch-free), the drawing imports nothing from the analysis. The import contracts (issue
#35): the model code (kanx.kan) never imports Hydra or OmegaConf, however indirectly, and the
analysis (kanx.analyze) never imports torch, Hydra or OmegaConf when it is imported. Read from
the source (ast), so they run in the fast tier."""

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
    draw = {m for m in graph if in_package(m, "kanx.draw")}
    analyze = {m for m in graph if in_package(m, "kanx.analyze")}
    assert draw and analyze
    from_draw = {m: c for m, c in reachable(graph, draw).items() if m in analyze}
    from_analyze = {m: c for m, c in reachable(graph, analyze).items() if m in draw}
    assert not (from_draw and from_analyze), (
        f"cycle: {' -> '.join(next(iter(from_draw.values())))} and {' -> '.join(next(iter(from_analyze.values())))}")
    assert not from_draw, f"kanx.draw reaches the analysis: {[' -> '.join(c) for c in from_draw.values()]}"


def code_graph() -> dict[str, set[str]]:
    """import_graph() with function-level imports counted, except in a package's __init__,
    which counts with its import-time imports only (kanx's lazy ``load_run`` imports kanx.load
    when that attribute is asked for; every module would otherwise reach kanx.load through kanx)."""
    return {m: imports_of(m, path, path.name == "__init__.py") for m, path in MODULES.items()}


def cycle_between(graph: dict[str, set[str]], a: str, b: str) -> str | None:
    """The import chains a -> ... -> b and b -> ... -> a, if both exist."""
    there, back = reachable(graph, {a}).get(b), reachable(graph, {b}).get(a)
    return f"{' -> '.join(there)} and {' -> '.join(back)}" if there and back else None


@pytest.mark.parametrize("a, b", [("kanx.formula", "kanx.load"), ("kanx.symbolic", "kanx.load"), ("kanx.kan.network", "kanx.kan.structure")])
def test_no_import_cycle(a, b):
    # kanx.formula (the command) reads a run with kanx.load, which builds the formula with
    # kanx.symbolic (at call time); kanx.symbolic imports neither. The model (kanx.kan.network)
    # needs no structure metrics; kanx.kan.shapes holds the stage shapes both use.
    cycle = cycle_between(code_graph(), a, b)
    assert cycle is None, f"import cycle: {cycle}"


def test_the_cycle_check_finds_a_cycle():
    graph = code_graph()
    assert "kanx.load" in graph["kanx.formula"] and "kanx.symbolic" in graph["kanx.load"]  # the allowed directions
    graph["kanx.symbolic"] = graph["kanx.symbolic"] | {"kanx.load"}  # as a `from kanx.load import ...` inside a function
    assert cycle_between(graph, "kanx.symbolic", "kanx.load") == "kanx.symbolic -> kanx.load and kanx.load -> kanx.symbolic"
    graph["kanx.load"] = graph["kanx.load"] | {"kanx.formula"}  # as TrainedRun.formula did before issue #35
    assert cycle_between(graph, "kanx.formula", "kanx.load") == "kanx.formula -> kanx.load and kanx.load -> kanx.formula"


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
    graph = {m: imports_of(m, path, module_level or (path.name == "__init__.py" and m not in start)) for m, path in MODULES.items()}
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

