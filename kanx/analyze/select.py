"""The representative (median-seed) run of each condition, and drawing those runs.

median_runs() is analysis over run records only (no torch); draw_median_models() hands the
runs it picks to kanx.draw. The dependency runs one way: kanx.analyze may use kanx.draw (at
call time, so that importing the analysis never imports torch), kanx.draw imports nothing
from kanx.analyze.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

from kanx.record import canonical_beta

from .collect import active_runs, load_runs
from .labels import ALL_CONDITIONS, UNGATED


def median_runs(records_root: str | Path, dataset: str, beta: float | None = None) -> dict[str, Path]:
    """The run directory of the median-seed model of every condition of ``dataset`` below
    ``records_root``, in the paper's condition order (conditions without a usable run are
    left out, with a warning when ``beta`` was asked for).

    Per condition: the runs with status "ok" (not superseded) at one beta; of those, the
    run whose test RMSE is the median (the lower median for an even number of seeds, so it
    is a real run; ties by seed). Beta: ``beta`` if given, otherwise the median of the
    betas the condition has ok runs at (the lower median for an even count, so it is a
    swept value). An ungated condition (Baseline, F), on which beta has no effect, uses the
    lowest beta it was run at (normally its only one).
    """
    root = Path(records_root)
    runs = active_runs(load_runs(root))
    runs = runs[(runs["dataset"] == dataset) & (runs["status"] == "ok") & runs["test_rmse"].notna()]
    chosen = {}
    for condition in ALL_CONDITIONS:  # the paper's eight, then other factor sets with runs
        rows = runs[runs["condition"] == condition]
        if rows.empty:
            continue
        betas = sorted(rows["beta"].unique())
        if condition in UNGATED:
            b = betas[0]
        elif beta is None:
            b = betas[(len(betas) - 1) // 2]
        else:
            b = canonical_beta(beta, condition)
        at = rows[rows["beta"] == b].sort_values(["test_rmse", "seed"], kind="stable")
        if at.empty:
            warnings.warn(f"kanx.draw: {dataset} {condition} has no ok run at beta={b:g}; left out", stacklevel=2)
            continue
        chosen[condition] = (root / at.iloc[(len(at) - 1) // 2]["path"]).parent
    return chosen


def draw_median_models(records_root: str | Path, dataset: str, out_dir: str | Path, beta: float | None = None,
                       formats: Sequence[str] = ("png",), combined: bool = False,
                       show_closed: bool = False) -> list[Path]:
    """Draw the median-seed model of every condition of ``dataset`` found below
    ``records_root`` (chosen by median_runs(), which says how seed and beta are picked);
    returns the files written: out_dir/<dataset>_<condition>.<fmt> in the paper's condition
    order, then, with ``combined``, all of them in one figure, out_dir/<dataset>_median_models.<fmt>."""
    # At call time: kanx.draw and kanx.load import torch, which the analysis must not.
    from kanx.draw import draw_grid, draw_run, save
    from kanx.load import load_run

    out_dir = Path(out_dir)
    written, drawn = [], []
    for condition, run_dir in median_runs(records_root, dataset, beta).items():
        run = load_run(run_dir)
        fig, _ = draw_run(run, show_closed=show_closed)
        written += save(fig, out_dir / f"{dataset}_{condition}", formats)
        drawn.append(run)
    if combined and drawn:
        fig, _ = draw_grid(drawn, ncols=min(4, len(drawn)), show_closed=show_closed,
                           title=f"{dataset}: median-seed model per condition")
        written += save(fig, out_dir / f"{dataset}_median_models", formats)
    return written
