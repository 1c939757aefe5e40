"""Search against the grid (issue #50, item 6): on Concrete, Nguyen F7 and Ikeda, at the paper's
protocol, the front that an Optuna search of beta finds (EFX, `hparams_search=beta_pareto`) set
against the paper's grid (its beta list x 10 seeds, results/paper) at the same number of trained
runs, by the hypervolume of each side's (test RMSE, contributing edges) front.

    python scripts/studies/search_vs_grid.py run   [--root DIR] [--paper results/paper] [--datasets D ...]
                                                   [--scale full|tiny] [--no-table] [OVERRIDE ...]
    python scripts/studies/search_vs_grid.py table [--root DIR] [--paper results/paper] [--datasets D ...]

`run` launches, per dataset, `python -m kanx.train +condition=EFX dataset=D hparams_search=beta_pareto
results_root=ROOT hydra.sweeper.n_trials=N -m`, N the number of the grid's EFX records of D
under --paper (70, 40 and 60). The sweeper keeps its study under ROOT/search and resumes it, so
`run` again finishes a stopped search and trains nothing for a finished one. `--scale tiny`
checks the pipeline in a couple of minutes (`+debug=quick`, fewer training rows, 4 trials in
batches of 2) into outputs/studies-smoke/search_vs_grid; further overrides go to every search.

`table` (and `run` at its end) reads both sides' records and writes ROOT/study.md and the
figures ROOT/figures/search_vs_grid_<dataset>.png (Ikeda's at its configured horizon too,
..._ikeda_configured.png). Both sides are read alike: every trained run is a candidate model, so
each side's points are all its usable runs (status ok or collapsed, a finite test RMSE and edge
count), the grid's 70 (40, 60) runs over its betas and seeds, not the seed-medians per beta the
report's hypervolume uses; each side's front is the points no other of its points beats in both.
The dynamical systems' test RMSE is read at the paper's rollout horizon
(kanx/analyze/paper/readings.csv: Ikeda 200 steps), as the report reads it, and again at the
horizon the dataset's config names (Ikeda 10 steps), the one the search optimized. One reference
point per dataset: 1.1 x the largest test RMSE and the largest edge count over both sides'
points (kanx.analyze.hypervolume.REF_SCALE); the HV is given as a share of the box between the
origin and that point, and the search's as a multiple of the grid's.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from kanx.cli import ArgumentParser, prog
from kanx.errors import ConfigError, StorageError, report

SCRIPT = "scripts/studies/search_vs_grid.py"
DATASETS = ("concrete", "nguyen_f7", "ikeda")
CONDITION = "EFX"
PRESET = "hparams_search=beta_pareto"
GRID_TAG = "default"  # the paper's sweep folder: the grid of conf/'s betas x seeds
ROOTS = {"full": Path("results/studies/search_vs_grid"), "tiny": Path("outputs/studies-smoke/search_vs_grid")}
# A pipeline check, not a result: 20 epochs, fewer training rows where the dataset is generated
# (Concrete is a file), 4 trials in 2 generations of 2, each generation one pack.
TINY = ["+debug=quick", "hydra.sweeper.n_trials=4", "hydra.sweeper.n_jobs=2", "hydra.sweeper.sampler.population_size=2"]
TINY_ROWS = {"nguyen_f7": ["dataset.n_train=256"], "ikeda": ["dataset.n_train=256"]}
SIDES = ("search", "grid")
POINT_COLUMNS = ["side", "beta", "seed", "test_rmse", "contributing_edges", "path"]


# ------------------------------------------------------------------ run


def grid_runs(paper: Path, dataset: str) -> int:
    """How many runs the paper's grid of ``dataset`` trained: its EFX records under ``paper``."""
    return len(list((paper / dataset / CONDITION / GRID_TAG).glob("*/record.json")))


def search_command(dataset: str, root: Path, n_trials: int | None, scale: str, extra: Sequence[str]) -> list[str]:
    """The search of one dataset: the preset, the study's root, and as many trials as the grid's runs."""
    sizes = [*TINY, *TINY_ROWS.get(dataset, [])] if scale == "tiny" else [f"hydra.sweeper.n_trials={n_trials}"]
    return [sys.executable, "-m", "kanx.train", f"+condition={CONDITION}", f"dataset={dataset}", PRESET,
            f"results_root={root}", *sizes, *extra, "-m"]


def check_search(command: Sequence[str], dataset: str, root: Path) -> None:
    """Compose a search's config as `kanx.train` will, and check it as its jobs are checked
    (kanx.runner.check_jobs), before anything trains: ConfigError for a key the config lacks, an
    override Hydra cannot parse or a value kanx refuses. The trials' values (sweep overrides) are
    left to the search."""
    from hydra import compose
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from kanx.confdir import initialize_conf
    from kanx.resolvers import register_resolvers
    from kanx.runner import check_jobs

    overrides = [o.input_line for o in OverridesParser.create().parse_overrides(list(command[3:-1]))
                 if not o.is_sweep_override()]
    try:
        register_resolvers()
        with initialize_conf():
            config = compose("config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(f"+condition={CONDITION} dataset={dataset}: {e}") from e
    check_jobs([(config, root / dataset)])


def run(datasets: Sequence[str], root: Path, paper: Path, scale: str, extra: Sequence[str]) -> int:
    """Each dataset's search in turn (a failed one does not stop the next), every one checked
    before the first trains; the number of failed searches."""
    counts = {d: grid_runs(paper, d) for d in datasets}
    if scale == "full" and (empty := [d for d, n in counts.items() if not n]):
        raise ConfigError(f"--paper {paper} holds no {CONDITION} record of {', '.join(empty)} (looked in "
                          f"<paper>/<dataset>/{CONDITION}/{GRID_TAG}): the search's trials are the grid's runs, so "
                          "give the paper's results root")
    for dataset in datasets:
        check_search(search_command(dataset, root, counts[dataset], scale, extra), dataset, root)
    failed = 0
    for dataset in datasets:
        command = search_command(dataset, root, counts[dataset], scale, extra)
        print(f"{dataset}: {' '.join(command[1:])}", flush=True)
        failed += subprocess.call(command) != 0
    return failed


# ------------------------------------------------------------------ table


def side_runs(root: Path, dataset: str, side: str, horizon: int | str | None) -> pd.DataFrame:
    """One side's EFX runs of ``dataset`` (kanx.analyze.collect.load_runs), a dynamical system's
    test RMSE read at rollouts of ``horizon`` steps (None: as recorded, the dataset's configured
    horizon): the search's are every sweep under ROOT, the grid's the paper's sweep folder."""
    from kanx.analyze.collect import active_runs, load_runs

    where = root / dataset / CONDITION
    if side == "grid":
        where = where / GRID_TAG
    if not where.is_dir():
        return pd.DataFrame(columns=["status", "usable", *POINT_COLUMNS[1:]])
    runs = active_runs(load_runs(where, rollout_horizon=None if horizon is None else {dataset: horizon},
                                 datasets=[dataset]))
    runs = runs[runs["dataset"] == dataset]
    return runs.assign(path=[(where / p).as_posix() for p in runs["path"]])


def points(runs: pd.DataFrame, side: str) -> pd.DataFrame:
    """The candidate models of one side: its usable runs with a finite test RMSE and edge count."""
    usable = runs[runs["usable"].astype(bool)] if len(runs) else runs
    values = usable[["test_rmse", "contributing_edges"]].astype(float)
    usable = usable[np.isfinite(values.to_numpy()).all(axis=1)] if len(usable) else usable
    out = usable.assign(side=side)[POINT_COLUMNS] if len(usable) else pd.DataFrame(columns=POINT_COLUMNS)
    return out.astype({"test_rmse": float, "contributing_edges": float})


def front(pts: pd.DataFrame) -> pd.DataFrame:
    """The points no other point beats in both test RMSE and edges, by edges then RMSE."""
    from kanx.analyze.hypervolume import pareto_front

    if pts.empty:
        return pts
    mask = pareto_front(pts[["test_rmse", "contributing_edges"]].to_numpy(float))
    return pts[mask].sort_values(["contributing_edges", "test_rmse"], kind="stable")


def reference_point(*sides: pd.DataFrame) -> np.ndarray:
    """REF_SCALE x the largest test RMSE and edge count over every point of both sides."""
    from kanx.analyze.hypervolume import REF_SCALE

    allpts = pd.concat([s for s in sides if len(s)]) if any(len(s) for s in sides) else None
    if allpts is None:
        return np.full(2, math.nan)
    return REF_SCALE * allpts[["test_rmse", "contributing_edges"]].to_numpy(float).max(axis=0)


def box_share(pts: pd.DataFrame, ref: np.ndarray) -> float:
    """The hypervolume of the points' front against ``ref``, as a share of the box [0, ref]."""
    from kanx.analyze.hypervolume import hypervolume

    if pts.empty or not np.isfinite(ref).all() or not (ref > 0).all():
        return math.nan
    return hypervolume(pts[["test_rmse", "contributing_edges"]].to_numpy(float), ref) / float(np.prod(ref))


def budget_rows(search: pd.DataFrame, grid: pd.DataFrame) -> list[tuple[float, float, float]]:
    """Where each side is better: for every edge count on either front, the lowest test RMSE each
    side reaches within that many edges (NaN: none of its points is that small)."""
    fronts = [front(search), front(grid)]
    budgets = sorted({float(e) for f in fronts for e in f["contributing_edges"]})

    def best(pts: pd.DataFrame, budget: float) -> float:
        within = pts.loc[pts["contributing_edges"] <= budget, "test_rmse"]
        return float(within.min()) if len(within) else math.nan

    return [(b, best(search, b), best(grid, b)) for b in budgets]


def better(search_rmse: float, grid_rmse: float) -> str:
    if math.isnan(search_rmse) and math.isnan(grid_rmse):
        return "neither"
    if math.isnan(grid_rmse) or search_rmse < grid_rmse:
        return "search"
    if math.isnan(search_rmse) or grid_rmse < search_rmse:
        return "grid"
    return "tie"


def summary_row(dataset: str, runs: dict[str, pd.DataFrame], pts: dict[str, pd.DataFrame],
                ref: np.ndarray) -> list[str]:
    from kanx.analyze.tables import DASH_MD

    shares = {side: box_share(pts[side], ref) for side in SIDES}
    ratio = shares["search"] / shares["grid"] if shares["grid"] > 0 else math.nan
    cells = [dataset]
    for side in SIDES:
        cells += [f"{len(runs[side])}", f"{len(pts[side])}", f"{len(front(pts[side]))}",
                  DASH_MD if math.isnan(shares[side]) else f"{shares[side]:.4f}"]
    cells += [DASH_MD if math.isnan(ratio) else f"{ratio:.3f}",
              DASH_MD if not np.isfinite(ref).all() else f"({ref[0]:.4g}, {ref[1]:.4g})"]
    return cells


def budget_markdown(search: pd.DataFrame, grid: pd.DataFrame) -> str:
    from kanx.analyze.tables import DASH_MD, markdown_table

    def shown(v: float) -> str:
        return DASH_MD if math.isnan(v) else f"{v:.4g}"

    rows = [[f"{int(b)}", shown(s), shown(g), better(s, g)] for b, s, g in budget_rows(search, grid)]
    return markdown_table(["edges at most", "search: best test RMSE", "grid: best test RMSE", "better"], rows,
                          "rrrl")


def figure(name: str, pts: dict[str, pd.DataFrame], shares: dict[str, float], unit: str | None = None):
    """Test RMSE against contributing edges: every point of both sides, faint, and each side's
    front as a staircase; the legend gives each side's runs and HV."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.2, 4.4), layout="constrained")
    ax = fig.subplots()
    for side, color, marker in (("grid", "tab:blue", "s"), ("search", "tab:orange", "o")):
        p, f = pts[side], front(pts[side])
        share = shares[side]
        label = f"{side}: {len(p)} runs, HV {share:.4f}" if math.isfinite(share) else f"{side}: no usable run"
        ax.scatter(p["contributing_edges"], p["test_rmse"], s=14, color=color, alpha=0.3, marker=marker, lw=0)
        ax.step(f["contributing_edges"], f["test_rmse"], where="post", color=color, lw=1.4, label=label)
        ax.scatter(f["contributing_edges"], f["test_rmse"], s=34, color=color, marker=marker, edgecolors="black",
                   linewidths=0.5, zorder=3)
    rmse = pd.concat([pts[s]["test_rmse"] for s in SIDES])
    if len(rmse) and rmse.min() > 0 and rmse.max() / rmse.min() > 5:
        ax.set_yscale("log")
    ax.set_xlabel("contributing edges")
    ax.set_ylabel(f"test RMSE ({unit})" if unit else "test RMSE")
    ax.grid(color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    ax.set_title(f"{name}\nEFX: Optuna search (NSGA-II) against the paper's grid", fontsize=10)
    ax.legend(frameon=False, fontsize=9, title="side: runs, HV (share of the reference box)", title_fontsize=9)
    return fig


class Reading(NamedTuple):
    """How a dataset's test RMSE is read: ``horizon`` rollout steps for a dynamical system (None:
    as recorded), named in the tables by ``label`` and in the figure's file by ``suffix``."""

    horizon: int | str | None
    label: str
    suffix: str


def readings(dataset: str) -> list[Reading]:
    """The paper's reading (kanx/analyze/paper/readings.csv: a dynamical system at the paper's
    rollout horizon, as the report reads it), and for a dynamical system also the horizon the
    dataset's config names, the one the search's validation rollouts optimized: past the
    predictability horizon a model that predicts a constant (a collapsed run, 0 edges, which a
    search of beta up to 1 reaches) has a lower rollout RMSE than one that follows the map."""
    from kanx.analyze.readings import paper_readings

    horizon = paper_readings().get(dataset)
    if horizon is None:
        return [Reading(None, "", "")]
    steps = "whole test segment" if horizon == "whole" else f"{horizon} steps"
    return [Reading(horizon, f"{steps} (paper)", ""),
            Reading(None, f"{configured_horizon(dataset)} steps (dataset.horizon)", "_configured")]


def configured_horizon(dataset: str) -> int:
    """The rollout horizon conf/dataset/<dataset>.yaml names: the test RMSE a record holds."""
    from omegaconf import OmegaConf

    from kanx.confdir import conf_dir

    return int(OmegaConf.load(conf_dir() / "dataset" / f"{dataset}.yaml").dataset.horizon)


def target_unit(runs: dict[str, pd.DataFrame]) -> str | None:
    """The unit of the test RMSE, as the records name it (None where none does)."""
    units = [u for r in runs.values() if "target_unit" in r for u in r["target_unit"] if isinstance(u, str) and u]
    return units[0] if units else None


def reading_section(dataset: str, reading: Reading, root: Path, paper: Path) -> tuple[list[str], list[str]]:
    """One dataset at one reading: its summary row, and its section (figure and budget table),
    writing the figure under ROOT/figures."""
    runs = {"search": side_runs(root, dataset, "search", reading.horizon),
            "grid": side_runs(paper, dataset, "grid", reading.horizon)}
    pts = {side: points(runs[side], side) for side in SIDES}
    ref = reference_point(pts["search"], pts["grid"])
    name = f"{dataset}, {reading.label}" if reading.label else dataset
    shares = {side: box_share(pts[side], ref) for side in SIDES}
    out = root / "figures" / f"search_vs_grid_{dataset}{reading.suffix}.png"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        figure(name, pts, shares, target_unit(runs)).savefig(out, dpi=120)
    except OSError as e:
        from kanx.atomic import cannot_write

        raise cannot_write(out, e) from e
    section = [f"## {name}", "", f"![{name}](figures/{out.name})", "",
               "The lowest test RMSE each side reaches within an edge budget, at every edge count on either front:",
               "", budget_markdown(pts["search"], pts["grid"]), ""]
    return summary_row(name, runs, pts, ref), section


def table(datasets: Sequence[str], root: Path, paper: Path) -> str:
    """The study's tables (markdown), writing the figures under ROOT/figures as it goes."""
    from kanx.analyze.tables import markdown_table

    summary, sections = [], []
    for dataset in datasets:
        for reading in readings(dataset):
            row, section = reading_section(dataset, reading, root, paper)
            summary.append(row)
            sections += section
    header = ["dataset", "search runs", "search points", "search front", "search HV", "grid runs", "grid points",
              "grid front", "grid HV", "HV search / grid", "reference point (test RMSE, edges)"]
    lines = [
        "# Search against the grid: EFX, Optuna's NSGA-II search of beta against the paper's beta list x 10 seeds",
        "",
        f"Search records under {root} (`{PRESET}`), the grid's under {paper}/<dataset>/{CONDITION}/{GRID_TAG}.",
        "",
        markdown_table(header, summary, "l" + "r" * (len(header) - 1)),
        "",
        "- runs: the records each side trained (any status); points: the usable ones (ok or collapsed) with a "
        "finite test RMSE and edge count, each a candidate model; front: the points no other point of the same "
        "side beats in both.",
        "- HV: the hypervolume of a side's (test RMSE, contributing edges) front against the dataset's one "
        "reference point, 1.1 x the largest test RMSE and edge count over both sides' points, as a share of the "
        "box from the origin to that point. The grid's points are its every run (betas x seeds), not seed-medians: "
        "at the same number of trained runs, each run is a model one could keep.",
        "- The search reads validation error only (`optimized_metric: [val_rmse, contributing_edges]`), on a "
        "validation split of 20% of the training data (`dataset.val_fraction=0.2`), so its models trained on 80% "
        "of the rows the grid's trained on; the test set it never saw scores both sides here. Its trials all use "
        "seed 0 (one data draw and split), the grid's seeds 0-9.",
        "- A dynamical system is read twice: at the paper's rollout horizon (kanx/analyze/paper/readings.csv), as "
        "the report reads it, and at the horizon the dataset's config names, the one the search's validation "
        "rollouts optimized. Past the predictability horizon a collapsed model (0 edges, a constant) has a lower "
        "rollout RMSE than one that follows the map, so at the paper's reading a 0-edge point can dominate a "
        "whole front.",
        "",
        *sections,
    ]
    return "\n".join(lines).rstrip("\n")


def main(argv: list[str] | None = None) -> int:
    head, rest = __doc__.split("\n\n", 1)
    p = ArgumentParser(prog=prog(SCRIPT), description=head, epilog=rest,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("run", "table"))
    p.add_argument("--root", type=Path, default=None,
                   help="the search's results root (default results/studies/search_vs_grid, "
                        "outputs/studies-smoke/search_vs_grid with --scale tiny)")
    p.add_argument("--paper", type=Path, default=Path("results/paper"),
                   help="the paper's records, the grid (default results/paper)")
    p.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS),
                   help="the datasets (default all three)")
    p.add_argument("--scale", choices=tuple(ROOTS), default="full",
                   help="tiny: a pipeline check (+debug=quick, 4 trials) in a couple of minutes")
    p.add_argument("--no-table", action="store_true", help="run: train only (e.g. in a time-boxed job), no table")
    p.add_argument("overrides", nargs="*", help="more Hydra overrides for every search (run)")
    a = p.parse_intermixed_args(argv)
    root = a.root or ROOTS[a.scale]
    if a.command == "table" and a.overrides:
        return report(SCRIPT, f"table takes no overrides ({' '.join(a.overrides)}): they are for run")
    if a.command == "table" and not root.is_dir():
        return report(SCRIPT, f"--root {root} is not a folder: give the search's results root")
    if not a.paper.is_dir():  # checked before training, not after it
        return report(SCRIPT, f"--paper {a.paper} is not a folder: give the paper's results root (default "
                      "results/paper)")
    try:
        if a.command == "run":
            failed = run(a.datasets, root, a.paper, a.scale, a.overrides)
            if failed or a.no_table:
                return 1 if failed else 0
        text = table(a.datasets, root, a.paper)
        from kanx.analyze.studies import write_study_table

        write_study_table(root, text)
    except ConfigError as e:
        return report(SCRIPT, e)
    except StorageError as e:  # the searches' records so far are kept: `run` again resumes them
        return report(SCRIPT, e, code=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
