"""One launch recipe (issue #49): prepare -> pending -> resume -> pack -> check -> manifest is
written once, in kanx.jobs.launch, and every launcher calls it instead of repeating its steps.
Read from the source (ast), so it runs in the fast tier."""

from __future__ import annotations

import ast

from helpers import ROOT

SOURCES = [p for d in ("kanx", "hydra_plugins", "scripts") for p in sorted((ROOT / d).rglob("*.py"))]


def _calls(tree: ast.AST, name: str, scope: str = ""):
    """The qualified names of the functions (module level: '') that call ``name``, once per call."""
    for node in ast.iter_child_nodes(tree):
        inner = f"{scope}.{node.name}".lstrip(".") if isinstance(node, ast.FunctionDef | ast.ClassDef) else scope
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name):
                yield scope
        yield from _calls(node, name, inner)


def callers(name: str) -> list[str]:
    """'path:function' for every call of ``name`` in kanx, hydra_plugins and scripts."""
    return sorted(f"{p.relative_to(ROOT)}:{scope}" for p in SOURCES for scope in _calls(ast.parse(p.read_text()), name))


def test_the_launch_steps_are_called_only_by_launch():
    assert callers("prepare_jobs") == ["kanx/jobs.py:launch"]
    assert callers("pending") == ["kanx/jobs.py:launch"]
    assert callers("resume") == ["kanx/jobs.py:launch"]
    assert callers("check_machine") == ["kanx/jobs.py:launch"]
    # the benchmark packs one launch's jobs each way it compares; nothing else cuts packs
    assert callers("make_packs") == ["kanx/jobs.py:launch"] + ["scripts/benchmarks/bench_paper.py:main"] * 2
    # the manifest step: in launch, or where a launcher that checks early writes its files (LaunchPlan's)
    assert callers("write_manifests") == [
        "hydra_plugins/kanx_launcher/slurm_launcher.py:SlurmLauncher.launch",
        "hydra_plugins/kanx_launcher/slurm_launcher.py:SlurmLauncher.submit_sweeps",
        "kanx/jobs.py:LaunchPlan.write_manifests", "kanx/jobs.py:launch", "kanx/runner.py:run_jobs"]


def test_every_launcher_calls_launch():
    assert callers("launch") == sorted([
        # the SLURM launcher, and reproduce --launcher slurm
        "hydra_plugins/kanx_launcher/slurm_launcher.py:SlurmLauncher._plan",
        # Hydra's Launcher.launch, not kanx.jobs.launch
        "hydra_plugins/kanx_launcher/sweeper.py:KanxSweeper._sweep_without_multirun_yaml",
        "kanx/plan.py:main",  # a kanx.plan worker
        "kanx/plan.py:one_pack",  # the benchmarks' one mixed pack
        "kanx/plan.py:run_plan",  # kanx.plan, reproduce's default launcher
        # a single run, Hydra's basic launcher (reproduce --launcher basic) and the packed launcher
        "kanx/runner.py:check_jobs",
        "scripts/benchmarks/bench_paper.py:main",
    ])
