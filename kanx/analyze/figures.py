"""Log-ratio figures: accuracy (A) and size (B) of each condition relative to the baseline;
Pareto figures: the non-dominated runs of each condition in (test RMSE, contributing edges).

Builders return `matplotlib.figure.Figure` objects (rendered by Agg, no pyplot state); only
the command saves them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import LogFormatter

from .collect import active_runs
from .hypervolume import pareto_front
from .labels import (
    ALL_CONDITIONS,
    BASELINE,
    CONDITIONS,
    OTHER_CONDITIONS,
    condition_rank,
    is_gated,
    present_conditions,
)
from .tables import format_beta

PLOTTED = tuple(c for c in CONDITIONS if c != BASELINE)  # Baseline vs itself is 0 by definition


def plotted(*summaries: pd.DataFrame, also: Iterable[str] = ()) -> tuple[str, ...]:
    """The conditions on a log-ratio figure's x axis: those the summaries hold and ``also`` names
    (e.g. the launched ones of the seed-medians), in canonical order (labels.present_conditions),
    the Baseline left out."""
    present = set(also).union(*(set(s["condition"]) for s in summaries))
    return tuple(c for c in present_conditions(present) if c != BASELINE)
ROWS = (
    ("A", "log10(RMSE$_{base}$ / RMSE)\n> 0: lower RMSE than baseline"),
    ("B", "log10(edges$_{base}$ / edges)\n> 0: fewer edges than baseline"),
)


def beta_colors(betas: Sequence[float]) -> dict[float, tuple]:
    """One colour per beta, dark (beta 0) to light (largest), the same in every panel."""
    cmap = colormaps["viridis"]
    betas = sorted(set(betas))
    positions = np.linspace(0.0, 0.85, len(betas)) if len(betas) > 1 else [0.0]
    return {b: cmap(p) for b, p in zip(betas, positions, strict=True)}


def _draw_panel(ax, summary: pd.DataFrame, colors: dict[float, tuple], conditions: Sequence[str] = PLOTTED) -> None:
    betas = sorted(colors)
    width = 0.8 / len(betas)
    conditions = list(conditions)
    for x in range(len(conditions) - 1):
        ax.axvline(x + 0.5, color="0.92", lw=0.8, zorder=0)
    ax.axhline(0.0, color="0.3", lw=0.9, ls="--", zorder=1)
    shown = summary[summary["condition"].isin(conditions) & (summary["n_pairs"] > 0)]
    for beta, points in shown.groupby("beta"):
        x = points["condition"].map(conditions.index) + (betas.index(beta) - (len(betas) - 1) / 2) * width
        sem = points["sem"].fillna(0.0)  # no bar with fewer than two pairs
        ax.errorbar(
            x,
            points["mean"],
            yerr=sem,
            fmt="o",
            ms=4.5,
            color=colors[beta],
            capsize=2.5,
            lw=1.2,
            zorder=3,
        )
    if not (summary["n_pairs"] > 0).any():
        ax.text(
            0.5,
            0.5,
            "no seed paired\nwith a baseline",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="0.4",
        )
    ax.set_xticks(range(len(conditions)), conditions)
    if any(c not in CONDITIONS for c in conditions):  # other factor sets too: longer names, more of them
        ax.tick_params(axis="x", labelrotation=90)
    ax.set_xlim(-0.6, len(conditions) - 0.4)
    ax.tick_params(axis="x", length=0)
    ax.grid(axis="y", color="0.9", lw=0.6)
    ax.set_axisbelow(True)


def log_ratio_figure(
    rmse: pd.DataFrame,
    edges: pd.DataFrame,
    panels: Sequence[str],
    panel_label: Callable[[str], str],
    max_cols: int = 5,
    title: str | None = None,
    conditions: Iterable[str] = (),
) -> Figure:
    """Panel A (RMSE) above panel B (edges), one column per panel; wraps after ``max_cols``.

    ``rmse``/``edges`` are `log_ratio_summary` tables; points are means of the per-seed
    log-ratios, bars +-1 SEM (none where fewer than two pairs). The x axis lists the conditions
    the summaries hold and ``conditions`` adds (those launched without a record yet, `plotted`).
    """
    betas = set(rmse["beta"]) | set(edges["beta"])
    colors = beta_colors(betas or {0.0})
    conditions = plotted(rmse, edges, also=conditions)
    chunks = [list(panels[i : i + max_cols]) for i in range(0, len(panels), max_cols)] or [[]]
    ncols = max(1, min(max_cols, len(panels)))
    fig = Figure(figsize=(3.3 * ncols + 0.8, 2.9 * 2 * len(chunks) + 0.6), layout="constrained")
    axes = fig.subplots(2 * len(chunks), ncols, squeeze=False)
    for c, chunk in enumerate(chunks):
        for r, (letter, ylabel) in enumerate(ROWS):
            summary = (rmse, edges)[r]
            for j in range(ncols):
                ax = axes[2 * c + r, j]
                if j >= len(chunk):
                    ax.set_visible(False)
                    continue
                _draw_panel(ax, summary[summary["panel"] == chunk[j]], colors, conditions)
                if r == 0:
                    ax.set_title(panel_label(chunk[j]), fontsize=11, weight="bold")
                if j == 0:
                    ax.set_ylabel(ylabel)
                    ax.text(
                        -0.28,
                        1.04,
                        letter,
                        transform=ax.transAxes,
                        fontsize=14,
                        weight="bold",
                        va="bottom",
                    )
    handles = [Line2D([], [], marker="o", ls="", color=colors[b], label=f"β = {format_beta(b)}")
               for b in sorted(colors)]
    # About three legend entries fit per panel column; more wrap onto further rows.
    fig.legend(handles=handles, loc="outside upper center", ncol=min(len(handles), 3 * ncols),
               frameon=False, fontsize=9)
    if title:
        fig.suptitle(title, fontsize=12)
    return fig


# --- Pareto fronts ------------------------------------------------------------------------

# One colour per condition, the same in every Pareto figure; the ungated ones (no beta sweep)
# are grey and dashed.
CONDITION_COLORS: dict[str, str] = {
    "Baseline": "0.15",
    "F": "0.55",
    "X": "tab:blue",
    "FX": "tab:cyan",
    "E": "tab:orange",
    "EF": "tab:red",
    "EX": "tab:green",
    "EFX": "tab:purple",
}


def condition_color(condition: str):
    """CONDITION_COLORS, and for another factor set a colour of its own (tab20b, by its place in
    labels.OTHER_CONDITIONS), the same in every figure."""
    if condition in CONDITION_COLORS:
        return CONDITION_COLORS[condition]
    return colormaps["tab20b"](OTHER_CONDITIONS.index(condition) % 20)


DEPTH_MARKERS: tuple[str, ...] = ("X", "o", "s", "^", "D", "v", "P", "*", "h")  # depth 0 (collapsed), 1, 2, ...
PARETO_COLUMNS: tuple[str, ...] = ("dataset", "condition", "beta", "seed", "test_rmse", "contributing_edges", "depth",
                                   "path")


def depth_marker(depth: int) -> str:
    return DEPTH_MARKERS[min(int(depth), len(DEPTH_MARKERS) - 1)]


def pareto_runs(runs: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """The runs of ``dataset`` that no other run of their condition beats in both test RMSE
    and contributing edges (`hypervolume.pareto_front`, both minimized), any beta and seed.

    Usable, not superseded runs with a finite RMSE, edge count and depth only (a rollout
    RMSE that is not finite cannot be placed on the axes). Sorted by condition, then edges.
    """
    mine = active_runs(runs)
    mine = mine[(mine["dataset"] == dataset) & mine["usable"]]
    values = mine[["test_rmse", "contributing_edges", "depth"]].astype(float)
    mine = mine[np.isfinite(values).all(axis=1)]
    fronts = []
    for condition in ALL_CONDITIONS:
        points = mine[mine["condition"] == condition]
        if len(points):
            fronts.append(points[pareto_front(points[["test_rmse", "contributing_edges"]].to_numpy(float))])
    if not fronts:
        return pd.DataFrame(columns=list(PARETO_COLUMNS))
    front = pd.concat(fronts)[list(PARETO_COLUMNS)]
    order = front.assign(_c=front["condition"].map(condition_rank))
    return order.sort_values(["_c", "contributing_edges", "test_rmse", "beta", "seed"],
                             kind="stable").drop(columns="_c").reset_index(drop=True)


def _hv_text(condition: str, hv_norm: Mapping[str, float]) -> str:
    value = hv_norm.get(condition, math.nan)
    if not is_gated(condition):
        return "HV –"
    return f"HV {value:.3f}" if math.isfinite(value) else "HV missing"


def pareto_figure(front: pd.DataFrame, hv_norm: Mapping[str, float], title: str, unit: str | None = None) -> Figure:
    """Test RMSE against contributing edges for the non-dominated runs of each condition
    (`pareto_runs`): one staircase per condition, each run's marker its depth; the legend
    gives each condition's normalized 3-D hypervolume (``hv_norm``, from
    `hypervolume.condition_hypervolumes`: seed-medians of RMSE, edges and depth). The legend lists
    the conditions with runs in ``front`` or an entry in ``hv_norm``, no other."""
    fig = Figure(figsize=(7.6, 4.6), layout="constrained")
    ax = fig.subplots()
    handles = []
    # Collapsed runs (0 edges) predict a constant: an RMSE far above the rest would squash
    # every other front into a line, so they sit on the top edge, their RMSE written there.
    rmse = front["test_rmse"].astype(float)
    zero = front["contributing_edges"].astype(float) == 0
    rest = rmse[~zero]
    off_scale = front[zero & (rmse > 2 * rest.max())] if len(rest) else front.iloc[:0]
    # the conditions with runs here or an entry in hv_norm (the cells of the dataset's seed-medians)
    for condition in present_conditions(set(front["condition"]) | set(hv_norm)):
        points = front[front["condition"] == condition]
        color = condition_color(condition)
        style = "-" if is_gated(condition) else "--"
        label = f"{condition:<8} {_hv_text(condition, hv_norm)}" + ("" if len(points) else " (no runs)")
        handles.append(Line2D([], [], color=color, ls=style, lw=1.6, label=label))
        if points.empty:
            continue
        x, y = points["contributing_edges"].to_numpy(float), points["test_rmse"].to_numpy(float)
        ax.step(x, y, where="post", color=color, ls=style, lw=1.3, alpha=0.8, zorder=2)
        for depth, group in points.groupby("depth"):
            ax.scatter(group["contributing_edges"].astype(float), group["test_rmse"].astype(float),
                       marker=depth_marker(depth), s=46, color=color, edgecolors="black", linewidths=0.5, zorder=3)
    if not front.empty:
        y = rmse.drop(off_scale.index)
        log = y.min() > 0 and y.max() / y.min() > 5
        if log:
            ax.set_yscale("log")
            # plain numbers (3, 4, 6, 10), not 6x10^0; minor ticks labelled while under 2 decades
            for set_formatter in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
                set_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
        if len(off_scale):
            lo, hi = y.min(), y.max()
            top = hi * (hi / lo) ** 0.12 if log else hi + 0.12 * max(hi - lo, 0.05 * hi)
            ax.set_ylim(lo / (hi / lo) ** 0.06 if log else lo - 0.06 * max(hi - lo, 0.05 * hi), top)
            for condition, group in off_scale.groupby("condition", sort=False):
                ax.scatter([0.0], [top], marker=depth_marker(group["depth"].min()), s=46,
                           color=condition_color(condition), edgecolors="black",
                           linewidths=0.5, zorder=4, clip_on=False)
            text = ", ".join(f"{c} {v:.3g}"
                             for c, v in off_scale.groupby("condition", sort=False)["test_rmse"].max().items())
            ax.annotate(f"0 edges, RMSE off scale: {text}", (0.0, top), xytext=(8, -12), textcoords="offset points",
                        fontsize=8, color="0.3", va="top")
    else:
        ax.text(0.5, 0.5, "no usable run", ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xlim(left=-0.02 * max(1.0, float(front["contributing_edges"].max()) if not front.empty else 1.0))
    ax.set_xlabel("contributing edges")
    ax.set_ylabel(f"test RMSE ({unit})" if unit else "test RMSE")
    ax.grid(color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    ax.set_title(title, fontsize=11)
    fig.legend(handles=handles, loc="outside right upper", frameon=False, title="condition, normalized HV",
               title_fontsize=9, prop={"family": "monospace", "size": 9}, alignment="left")
    depths = sorted({int(d) for d in front["depth"]}) if not front.empty else []
    if depths:
        fig.legend(handles=[Line2D([], [], marker=depth_marker(d), ls="", color="0.6", markeredgecolor="black",
                                   markeredgewidth=0.5, ms=7, label=f"depth {d}") for d in depths],
                   loc="outside right lower", frameon=False, fontsize=9, title="marker",
                   title_fontsize=9, alignment="left")
    return fig
