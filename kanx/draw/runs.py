"""A run folder or a kanx.TrainedRun drawn: the run loaded (kanx.load), its training inputs
rebuilt from its record (kanx.load.drawing_inputs), both handed to the engine, kanx.diagram."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from kanx import diagram
from kanx.diagram import MAX_PLOTS, Drawing
from kanx.kan.structure import NodeKey
from kanx.load import TrainedRun, drawing_inputs, load_run


def as_run(run_or_dir: TrainedRun | str | Path) -> TrainedRun:
    return load_run(run_or_dir) if isinstance(run_or_dir, str | Path) else run_or_dir


def node_ranges(run: TrainedRun) -> tuple[dict[NodeKey, tuple[float, float]], str]:
    """(lo, hi) of every trunk node x^(l)_i over the run's training inputs, and where the
    ranges come from: "training data", or the spline grid of the stage the node feeds when
    the data cannot be rebuilt (kanx.diagram.node_ranges)."""
    return diagram.node_ranges(run.model, run.gate_estimator, drawing_inputs(run))


def plan(run_or_dir: TrainedRun | str | Path) -> Drawing:
    """What draw_run() draws for a TrainedRun (or run directory): every edge and its role,
    node ranges, exit probabilities. No matplotlib."""
    run = as_run(run_or_dir)
    return diagram.plan(run, drawing_inputs(run))


def draw_run(run_or_dir: TrainedRun | str | Path, ax=None, show_closed: bool = False, title: bool | str = True,
             legend: bool = True, max_plots: int = MAX_PLOTS) -> tuple[Figure, Drawing]:
    """Draw a trained model: a run directory or a kanx.TrainedRun (whose draw() method draws
    the same and returns the Figure alone). Returns the Figure (a new one unless ``ax`` is
    given) and the Drawing (every edge's role, and notes such as a fallback to the spline
    grids' ranges). ``show_closed`` adds closed and non-contributing edges as faint lines;
    ``title`` is True (dataset, condition, beta, seed, test RMSE, contributing edges, depth,
    exit), False or a string. With more than ``max_plots`` contributing edges they are drawn
    as lines only."""
    run = as_run(run_or_dir)
    return diagram.draw(run, drawing_inputs(run), ax, show_closed, title, legend, max_plots)


def draw_grid(runs: Sequence[TrainedRun | str | Path], ncols: int = 4, show_closed: bool = False,
              title: str | None = None, inch_per_unit: float = 0.5,
              max_plots: int = MAX_PLOTS) -> tuple[Figure, list[Drawing]]:
    """Several runs in one figure (e.g. the eight conditions as 2 x 4), one panel each, at
    one common scale, with one legend. ``runs``: run directories or TrainedRuns. Returns the
    Figure and each panel's Drawing."""
    panels = [(run, drawing_inputs(run)) for run in map(as_run, runs)]
    return diagram.draw_panels(panels, ncols, show_closed, title, inch_per_unit, max_plots)
