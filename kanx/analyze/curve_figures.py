"""Training-curve figures from the runs' metrics.csv (written by kanx.curves during training):
one per (dataset, condition, beta) cell with its seeds overlaid, and on request one per run.

Panels, each where the file has its column: training loss, data loss, the held-out error
(kanx.curves.HeldOut: the validation split's, else the test split's, one-step for a dynamical
system), L_C, open gates, the exit gate's pi and its temperature tau_x. A dotted line marks the
epoch where beta comes into force (the end of the warmup). Only CSV is read here (no torch), like
the rest of the analysis.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from kanx.history import CurveError, read_history
from kanx.records import curve_path

from .labels import group_label
from .tables import format_beta

# (column, panel title, log-scaled y); "pi" stands for the columns pi_0 .. pi_{L-1}.
PANELS: tuple[tuple[str, str, bool], ...] = (
    ("loss", "training loss", True),
    ("data_loss", "data loss", True),
    # the held-out error: a run has one of these (kanx.curves.held_out_column), runs from before #51 none
    ("val_rmse", "validation RMSE", True),
    ("val_rmse_one_step", "validation RMSE (one step)", True),
    ("test_rmse", "test RMSE", True),
    ("test_rmse_one_step", "test RMSE (one step)", True),
    ("lc", "$L_C$", False),
    ("open_gates", "open gates (edges)", False),
    ("pi", "exit gate $\\pi$", False),
    ("tau_x", "exit temperature $\\tau_x$", True),
)
CURVES_DIR = "figures/curves"
# In CURVES_DIR: stem -> signature of each figure drawn there, so that an unchanged one is not drawn again.
DRAWN_INDEX = "drawn.json"


@dataclass(frozen=True)
class CurveFigure:
    """A figure to save at ``stem``.png: a cell's seeds overlaid (seed None) or one run. ``draw``
    builds it (drawing is what costs); ``signature`` fingerprints what it shows (its title, its
    curves, the code and matplotlib that draw it), so an unchanged figure need not be drawn again."""

    stem: str
    dataset: str
    condition: str
    beta: float
    seed: int | None
    draw: Callable[[], Figure]
    signature: str


@cache
def _drawing_code() -> bytes:
    import matplotlib

    return Path(__file__).read_bytes() + matplotlib.__version__.encode()


def signature(title: str, histories: Mapping[int, pd.DataFrame]) -> str:
    """A figure's fingerprint: its title, each curve's seed, columns and values, the drawing code."""
    digest = hashlib.sha256(_drawing_code())
    digest.update(title.encode())
    for seed, h in sorted(histories.items()):
        digest.update(f"|{seed}|{','.join(map(str, h.columns))}|".encode())
        digest.update(pd.util.hash_pandas_object(h, index=True).to_numpy().tobytes())
    return digest.hexdigest()


def drawable_history(run_dir: Path) -> pd.DataFrame | None:
    """A run's curve to draw (kanx.history.read_history: metrics.csv, or metrics.csv.gz once finished), or
    None where there is none (runs from before the curves) or it has no rows; kanx.history.CurveError where it
    is damaged or has nothing to draw."""
    history = read_history(run_dir)
    if history is None or not len(history):
        return None
    if not any(has_panel(history, column) for column, _, _ in PANELS):
        raise CurveError(f"{curve_path(Path(run_dir))} has none of the columns drawn "
                         f"({', '.join(c for c, _, _ in PANELS)})")
    return history


def pi_columns(history: pd.DataFrame) -> list[str]:
    return sorted((c for c in history.columns if c.startswith("pi_")), key=lambda c: int(c.split("_")[1]))


def has_panel(history: pd.DataFrame, column: str) -> bool:
    if column == "pi":
        return bool(pi_columns(history))
    return column in history.columns and history[column].notna().any()


def beta_onset(history: pd.DataFrame) -> float | None:
    """The last logged epoch before beta comes into force: the warmup's end where every epoch
    is logged (rows are epochs finished); 0 without a warmup; None where beta stays 0
    (Baseline and F)."""
    if "beta" not in history.columns:
        return None
    on = (history["beta"] > 0).to_numpy()
    if not on.any():
        return None
    first = int(on.argmax())
    return float(history["epoch"].iloc[first - 1]) if first else 0.0


def _layout(panels: list[tuple[str, str, bool]], title: str) -> tuple[Figure, list]:
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig = Figure(figsize=(3.6 * cols, 2.7 * rows + 0.5))
    # Fixed margins: constrained layout would triple the time to save, and a sweep has thousands.
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.1, top=0.86, wspace=0.3, hspace=0.5)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    for ax, (_, label, _) in zip(axes, panels, strict=False):
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("epoch", fontsize=9)
        ax.tick_params(labelsize=8)
    fig.suptitle(title, fontsize=11)
    return fig, list(axes[: len(panels)])


def _finish(ax, log: bool, onsets: list[float]) -> None:
    """Log scale where asked, every plotted value is positive and they span a decade (a
    narrower range reads better on a linear axis); the beta onsets marked."""
    values = np.concatenate([line.get_ydata() for line in ax.get_lines()]) if ax.get_lines() else np.array([])
    values = values[np.isfinite(values)]
    if log and len(values) and (values > 0).all() and values.max() >= 10 * values.min():
        ax.set_yscale("log")
    if ax.get_title().startswith("open gates"):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # a count of edges
    for epoch in sorted(set(onsets)):
        ax.axvline(epoch, color="0.5", ls=":", lw=0.9, zorder=0)


def run_figure(history: pd.DataFrame, title: str) -> Figure:
    """Every panel of one run; the pi panel has a line per exit."""
    panels = [p for p in PANELS if has_panel(history, p[0])]
    fig, axes = _layout(panels, title)
    onset = beta_onset(history)
    for ax, (column, _, log) in zip(axes, panels, strict=True):
        if column == "pi":
            for k, c in enumerate(pi_columns(history)):
                ax.plot(history["epoch"], history[c], lw=1.2, label=f"exit {k}")
            ax.set_ylim(-0.02, 1.02)
            ax.legend(fontsize=7, loc="best")
        else:
            ax.plot(history["epoch"], history[column], lw=1.2, color="C0",
                    drawstyle="steps-post" if column == "open_gates" else "default")
        _finish(ax, log, [onset] if onset is not None else [])
    return fig


def _selected_pi(history: pd.DataFrame) -> pd.Series | None:
    """pi of the exit the run selects at the end; None where the curve logs no such exit."""
    final = history["exit"].iloc[-1] if "exit" in history.columns else np.nan
    column = f"pi_{int(final)}" if np.isfinite(final) else None
    return history[column] if column in history.columns else None


def cell_figure(histories: Mapping[int, pd.DataFrame], title: str) -> Figure:
    """The seeds of one cell overlaid, a colour per seed; the pi panel shows each seed's pi of
    the exit it selects at the end (how sure its exit gate becomes)."""
    panels = [p for p in PANELS if any(has_panel(h, p[0]) for h in histories.values())]
    fig, axes = _layout(panels, title)
    cmap = colormaps["tab10"]
    onsets = [o for o in map(beta_onset, histories.values()) if o is not None]
    for ax, (column, _, log) in zip(axes, panels, strict=True):
        for i, (seed, h) in enumerate(sorted(histories.items())):
            if not has_panel(h, column):
                continue
            y = h[column] if column != "pi" else _selected_pi(h)
            if y is None:
                continue
            ax.plot(h["epoch"], y, lw=1.0, alpha=0.85, color=cmap(i % 10), label=f"seed {seed}",
                    drawstyle="steps-post" if column == "open_gates" else "default")
        if column == "pi":
            ax.set_ylim(-0.02, 1.02)
        _finish(ax, log, onsets)
    axes[0].legend(fontsize=7, loc="best", ncols=2 if len(histories) > 5 else 1)
    return fig


def _stem(dataset: str, condition: str, beta: float, seed: int | None = None) -> str:
    leaf = f"beta={format_beta(beta)}" + ("" if seed is None else f",seed={seed}")
    return f"{CURVES_DIR}/{dataset}/{condition}/{leaf}"


def _cell_histories(cell: pd.DataFrame, root: Path, skipped: list[tuple[str, str]]) -> dict[int, pd.DataFrame]:
    """seed -> curve of a cell's runs that have one; a damaged curve goes to ``skipped`` as (run
    folder, why), so one bad file costs its own figure, not the whole analysis."""
    histories = {}
    for r in cell.itertuples():
        folder = Path(r.path).parent
        try:
            h = drawable_history(root / folder)
        except CurveError as e:
            skipped.append((folder.as_posix(), str(e).replace(str(root / folder), folder.as_posix())))
            continue
        if h is not None:
            histories[int(r.seed)] = h
    return histories


def curve_figures(runs: pd.DataFrame, root: Path, per_run: bool = False,
                  skipped: list[tuple[str, str]] | None = None) -> Iterator[CurveFigure]:
    """For every (dataset, condition, beta) cell with curves: its seeds overlaid, then, with
    ``per_run``, each of its runs. A generator, so the caller can save and drop one figure at
    a time. Damaged curves are left out and appended to ``skipped`` (run folder, why)."""
    skipped = [] if skipped is None else skipped
    used = runs[~runs["superseded"]]
    for (dataset, condition, beta), cell in used.groupby(["dataset", "condition", "beta"], sort=False):
        histories = _cell_histories(cell, root, skipped)
        if not histories:
            continue
        name = f"{group_label(dataset)}, {condition}, β = {format_beta(beta)}"
        title = f"{name}: seeds {', '.join(map(str, sorted(histories)))}"
        yield CurveFigure(_stem(dataset, condition, beta), dataset, condition, beta, None,
                          partial(cell_figure, histories, title),
                          signature(title, histories))
        for seed, h in sorted(histories.items()) if per_run else ():
            title = f"{name}, seed {seed}"
            yield CurveFigure(_stem(dataset, condition, beta, seed), dataset, condition, beta, seed,
                              partial(run_figure, h, title), signature(title, {seed: h}))
