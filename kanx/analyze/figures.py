"""Log-ratio figures: accuracy (A) and size (B) of each condition relative to the baseline.

Builders return `matplotlib.figure.Figure` objects (rendered by Agg, no pyplot state); only
the command saves them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .registry import BASELINE, CONDITIONS
from .tables import format_beta

PLOTTED = tuple(c for c in CONDITIONS if c != BASELINE)  # Baseline vs itself is 0 by definition
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


def _draw_panel(ax, summary: pd.DataFrame, colors: dict[float, tuple]) -> None:
    betas = sorted(colors)
    width = 0.8 / len(betas)
    for x in range(len(PLOTTED) - 1):
        ax.axvline(x + 0.5, color="0.92", lw=0.8, zorder=0)
    ax.axhline(0.0, color="0.3", lw=0.9, ls="--", zorder=1)
    shown = summary[summary["condition"].isin(PLOTTED) & (summary["n_pairs"] > 0)]
    for beta, points in shown.groupby("beta"):
        x = points["condition"].map(PLOTTED.index) + (betas.index(beta) - (len(betas) - 1) / 2) * width
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
    ax.set_xticks(range(len(PLOTTED)), PLOTTED)
    ax.set_xlim(-0.6, len(PLOTTED) - 0.4)
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
) -> Figure:
    """Panel A (RMSE) above panel B (edges), one column per panel; wraps after ``max_cols``.

    ``rmse``/``edges`` are `log_ratio_summary` tables; points are means of the per-seed
    log-ratios, bars +-1 SEM (none where fewer than two pairs).
    """
    betas = set(rmse["beta"]) | set(edges["beta"])
    colors = beta_colors(betas or {0.0})
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
                _draw_panel(ax, summary[summary["panel"] == chunk[j]], colors)
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
    handles = [Line2D([], [], marker="o", ls="", color=colors[b], label=f"β = {format_beta(b)}") for b in sorted(colors)]
    # About three legend entries fit per panel column; more wrap onto further rows.
    fig.legend(handles=handles, loc="outside upper center", ncol=min(len(handles), 3 * ncols), frameon=False, fontsize=9)
    if title:
        fig.suptitle(title, fontsize=12)
    return fig
