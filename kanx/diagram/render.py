"""Matplotlib: one run (draw), several in one figure (draw_panels), and the files (save)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Circle

from kanx.kan.network import GatedKAN

from .graph import Drawing, EdgeInfo, Run, plan
from .layout import BOX_H, BOX_W, NODE_R, ROW, Layout, _layout
from .values import edge_curves

FORMATS = ("png", "pdf", "svg")

COLORS = {
    "trunk": "#2b2b2b",
    "forward": "#e66100",  # forward connections: orange, as in the paper's Fig. 1
    "exit": "#1f5fbf",  # exit heads and the exit gate: blue
    "bias": "#7b3294",
    "faint": "#b8b8b8",
}

LABEL_CHAR = 0.15  # width of one character of an input label
MAX_PLOTS = 60  # more contributing edges than this: lines only
INCH_PER_UNIT = 0.62  # standalone figure scale
TITLE_IN, MIN_WIDTH_IN = 0.62, 5.4  # standalone figure: room for the title, narrowest width
LEGEND_H = 0.8  # data units below the inputs kept for the legend


def _edge_color(e: EdgeInfo) -> str:
    return COLORS["forward"] if e.forward else COLORS["exit"] if e.head else COLORS["trunk"]


def _title(run: Run, d: Drawing) -> tuple[str, str]:
    rec, metrics = run.record, run.record.get("metrics") or {}
    beta = rec.get("beta")
    head = f"{rec.get('dataset', '?')}  {rec.get('condition', run.model.condition.name)}"
    head += f"   β={beta:g}" if run.model.condition.beta_acts and isinstance(beta, int | float) else ""
    head += f", seed {rec['seed']}" if rec.get("seed") is not None else ""
    n_path = sum(e.role == "path" for e in d.edges)
    n_bias = d.contributing_edges - n_path
    parts = []
    if isinstance(metrics.get("test_rmse"), int | float):
        parts.append(f"test RMSE {metrics['test_rmse']:.3g}")
    parts.append(f"{d.contributing_edges} contributing edges"
                 + (f" ({n_path} on paths + {n_bias} bias)" if n_bias else ""))
    parts.append(f"depth {d.roles.depth}")
    if run.model.condition.exits:
        parts.append(f"exit {d.selected_exit}")
    return head, " · ".join(parts)


@dataclass
class _Prepared:
    """A run ready to render: its plan, layout and data limits."""

    run: Run
    d: Drawing
    lay: Layout
    limits: tuple[float, float, float, float]  # x0, x1, y0, y1
    plots: bool  # activation plots drawn (False: too many edges, lines only)
    label_rotation: float  # input labels, degrees

    @property
    def size(self) -> tuple[float, float]:
        x0, x1, y0, y1 = self.limits
        return x1 - x0, y1 - y0


def _input_names(run: Run) -> list[str]:
    return [run.input_names[i] if i < len(run.input_names) else f"x{i}" for i in range(run.model.width[0])]


def _prepare(run: Run, inputs: torch.Tensor | None, legend: bool, max_plots: int) -> _Prepared:
    d = plan(run, inputs)
    model = run.model
    plots = len(d.drawn) <= max_plots
    if not plots:
        d.notes.append(f"{len(d.drawn)} contributing edges: activation plots left out (max_plots={max_plots})")
    lay = _layout(model, d.drawn if plots else [])
    left, right = lay.extent()
    side = [lay.nodes[("y", k, p)][0] for k in range(model.L) if model.head_out[k] and model.condition.exits
            for p in range(model.n_out)]
    x0, x1 = left - BOX_W / 2 - 0.5, max(right + BOX_W / 2 + 0.6, max(side, default=right) + 2.3)
    # Input labels that would run into each other are turned.
    names = _input_names(run)
    xs = sorted(lay.nodes[("x", 0, i)][0] for i in range(model.width[0]))
    gap = min((b - a for a, b in zip(xs[:-1], xs[1:], strict=True)), default=np.inf)
    rotation = 40.0 if max(map(len, names)) * LABEL_CHAR > 0.9 * gap else 0.0
    below = 0.95 + (max(map(len, names)) * LABEL_CHAR * 0.8 * np.sin(np.radians(rotation)) if rotation else 0.0)
    y0, y1 = -(below + LEGEND_H * legend), model.L * ROW + 0.75
    return _Prepared(run, d, lay, (x0 - (1.0 if rotation else 0.0), x1, y0, y1), plots, rotation)


def draw(run: Run, inputs: torch.Tensor | None, ax=None, show_closed: bool = False, title: bool | str = True,
         legend: bool = True, max_plots: int = MAX_PLOTS) -> tuple[Figure, Drawing]:
    """Draw a trained run (a kanx.TrainedRun, or anything with what Run names), each edge
    over the range its source takes on ``inputs``, the run's training inputs as the model
    takes them (scaled, (N, n_0); None: over the spline grids, and the drawing says so).
    Returns the Figure (a new one unless ``ax`` is given) and the Drawing (every edge's
    role, and notes such as a fallback to the spline grids' ranges). ``show_closed`` adds
    closed and non-contributing edges as faint lines; ``title`` is True (dataset,
    condition, beta, seed, test RMSE, contributing edges, depth, exit), False or a string.
    With more than ``max_plots`` contributing edges they are drawn as lines only."""
    prep = _prepare(run, inputs, legend, max_plots)
    if ax is None:
        w, h = (v * INCH_PER_UNIT for v in prep.size)
        top = TITLE_IN if title else 0.1
        fig = Figure(figsize=(max(w, MIN_WIDTH_IN), h + top))
        ax = fig.add_axes((0.0, 0.0, 1.0, h / (h + top)))
    _render(prep, ax, show_closed, title, legend)
    return ax.figure, prep.d


def _render(prep: _Prepared, ax, show_closed: bool, title: bool | str, legend: bool, font_scale: float = 1.0) -> None:
    run, d, lay = prep.run, prep.d, prep.lay
    model, pos, boxes = run.model, lay.nodes, lay.boxes
    x0, x1, y0, y1 = prep.limits
    fig = ax.figure
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    ax.set_axis_off()
    bbox = ax.get_position()
    fw, fh = fig.get_size_inches()
    scale = min(bbox.width * fw / (x1 - x0), bbox.height * fh / (y1 - y0)) / INCH_PER_UNIT  # 1 in a standalone figure
    fs = lambda size: max(4.0, size * scale * font_scale)  # noqa: E731
    shown, names = d.drawn, _input_names(run)
    used = {e.src for e in shown} | {e.dst for e in shown}
    curves = edge_curves(model, d.node_ranges, run.gate_estimator)

    # Hidden edges: faint straight lines, under everything else.
    if show_closed:
        for e in d.hidden:
            (xa, ya), (xb, yb) = pos[e.src], pos[e.dst]
            ax.plot([xa, xb], [ya, yb], color=_edge_color(e), alpha=0.22, lw=0.6 * scale, ls=":",
                    zorder=1, gid=e.gid + ":line")

    # Contributing edges: source -> plot -> destination, then the plot.
    bias_labels = len({e.component for e in shown if e.role == "bias"}) > 1
    for e in shown if not prep.plots else []:
        (xa, ya), (xb, yb) = pos[e.src], pos[e.dst]
        ax.plot([xa, xb], [ya, yb], color=_edge_color(e), lw=0.7 * scale, ls="--" if e.role == "bias" else "-",
                zorder=2, gid=e.gid + ":line")
    for e in shown if prep.plots else []:
        (xb, yb), (bx, by) = pos[e.dst], boxes[e]
        color, ls, lw = _edge_color(e), ("--" if e.role == "bias" else "-"), 1.1 * scale
        ax.plot(*zip(*lay.route(e), strict=True), color=color, lw=lw, ls=ls, zorder=2, gid=e.gid + ":in")
        ax.plot([bx, xb], [by + BOX_H / 2, yb - NODE_R], color=color, lw=lw, ls=ls, zorder=2, gid=e.gid + ":out")
        _edge_plot(ax, e, (bx, by), curves, d, color, scale, fs)
        if e.role == "bias":
            label = f"bias {e.component + 1}" if bias_labels else "bias"
            ax.text(bx + BOX_W / 2 + 0.05, by + BOX_H / 2, label, color=COLORS["bias"], fontsize=fs(7), ha="left",
                    va="top", style="italic", zorder=4)

    # Nodes.
    X = model.condition.exits
    for key, (x, y) in pos.items():
        is_exit = key[0] == "y"
        selected = is_exit and key[1] == d.selected_exit
        on = key in used or (key[0] == "x" and key[1] == 0) or selected
        face = (COLORS["exit"] if X else COLORS["trunk"]) if is_exit else (COLORS["trunk"] if on else "white")
        ax.add_patch(Circle((x, y), NODE_R, facecolor=face, edgecolor=face if is_exit else COLORS["trunk"],
                            lw=0.9 * scale, alpha=1.0 if on else 0.35, zorder=5))
        if selected and X:
            ax.add_patch(Circle((x, y), NODE_R * 2.0, facecolor="none", edgecolor=COLORS["exit"],
                                lw=1.6 * scale, zorder=5))
        if key[0] == "x" and key[1] == 0:
            turned = prep.label_rotation != 0
            ax.text(x, y - NODE_R - 0.12, names[key[2]], ha="right" if turned else "center", va="top",
                    fontsize=fs(9 if turned else 11), rotation=prep.label_rotation, rotation_mode="anchor", zorder=6)
        elif is_exit:
            name = run.output_names[key[2]] if key[2] < len(run.output_names) else f"y{key[2]}"
            final = key[1] == model.L - 1
            text = (f"{name}, exit {key[1]}\nπ = {_pi(d, key[1]):.2f}" + ("\nselected" if selected else "") if X
                    else name)
            beside = X or not final  # exit labels (with pi) to the right
            tx, ty, ha, va = ((x + NODE_R * 2.3, y, "left", "center") if beside
                              else (x, y + NODE_R + 0.14, "center", "bottom"))
            ax.text(tx, ty, text, ha=ha, va=va, fontsize=fs(8.5 if X else 10), zorder=6,
                    color=COLORS["exit"] if X else "black",
                    alpha=1.0 if (selected or not X) else 0.6, fontweight="bold" if selected and X else "normal")

    if title:
        ax.set_title(title if isinstance(title, str) else "\n".join(_title(run, d)), fontsize=fs(9.5), loc="center")
    notes = ([] if d.range_source == "training data" else [f"edge plots over the {d.range_source}"]) + d.notes
    if notes:
        ax.text(0.0, 1.0, "\n".join(notes), transform=ax.transAxes, fontsize=fs(6.5), color="firebrick", ha="left",
                va="top")
    if legend:
        ax.legend(handles=_legend_handles([(model, d)], show_closed), loc="lower center", ncol=3,
                  fontsize=fs(7.5), frameon=False, handlelength=1.8, borderaxespad=0.0, columnspacing=1.2)


def _pi(d: Drawing, exit_k: int) -> float:
    """The exit gate's probability of exit ``exit_k`` (a model with exit gates only)."""
    assert d.pi is not None, "exit probabilities of a model without exit gates (X)"
    return float(d.pi[exit_k])


def _edge_plot(ax, e: EdgeInfo, centre: tuple[float, float], curves, d: Drawing, color: str, scale: float, fs) -> None:
    """The small plot of z * phi(x) over the source's training range."""
    bx, by = centre
    xs, ys = curves[e.stage][0][e.i], curves[e.stage][1][e.i, e.o]
    inset = ax.inset_axes([bx - BOX_W / 2, by - BOX_H / 2, BOX_W, BOX_H], transform=ax.transData, zorder=3)
    inset.set_gid(e.gid + ":plot")
    src_lo, src_hi = d.node_ranges[e.src]
    if not (np.isfinite(xs).all() and np.isfinite(ys).all()):  # a diverged model
        inset.text(0.5, 0.5, "non-finite", transform=inset.transAxes, ha="center", va="center",
                   fontsize=fs(6.5), color="firebrick")
    elif src_hi - src_lo < 1e-12:  # a constant source (every bias term): the edge adds a constant
        value = float(ys[0])
        inset.axhline(value, color=color, lw=1.3 * scale)
        inset.set_ylim(value - 1.0, value + 1.0)
        inset.text(0.5, 0.12, f"{value:+.3g}", transform=inset.transAxes, ha="center", va="bottom",
                   fontsize=fs(7.5), color=color)
    else:
        inset.plot(xs, ys, color=color, lw=1.3 * scale)
        lo, hi = float(ys.min()), float(ys.max())
        pad = max(hi - lo, 1e-6) * 0.15
        inset.set_ylim(lo - pad, hi + pad)
        inset.set_xlim(xs[0], xs[-1])
        if lo - pad < 0 < hi + pad:
            inset.axhline(0.0, color=COLORS["faint"], lw=0.5 * scale, zorder=0)
    inset.set_xticks([])
    inset.set_yticks([])
    for spine in inset.spines.values():
        spine.set_edgecolor(COLORS["bias"] if e.role == "bias" else color)
        spine.set_linewidth(0.9 * scale)
        spine.set_linestyle("--" if e.role == "bias" else "-")


def _legend_handles(drawn: Sequence[tuple[GatedKAN, Drawing]], show_closed: bool) -> list[Line2D]:
    """Legend entries for what these drawings contain."""
    handles = [Line2D([], [], color=COLORS["trunk"], lw=1.2, label="edge: z·φ(x)")]
    if any(e.forward and (e.role != "hidden" or show_closed) for _, d in drawn for e in d.edges):
        handles.append(Line2D([], [], color=COLORS["forward"], lw=1.2, label="forward connection"))
    if any(m.condition.exits for m, _ in drawn):
        handles.append(Line2D([], [], color=COLORS["exit"], lw=1.2, marker="o", ms=4, label="exit head (π: exit gate)"))
    if any(e.role == "bias" for _, d in drawn for e in d.edges):
        handles.append(Line2D([], [], color=COLORS["bias"], lw=1.2, ls="--", label="bias term"))
    if show_closed and any(d.hidden for _, d in drawn):
        handles.append(Line2D([], [], color=COLORS["faint"], lw=0.8, ls=":", label="closed / not contributing"))
    return handles


def save(fig: Figure, stem: str | Path, formats: Sequence[str] = FORMATS, dpi: int = 150) -> list[Path]:
    """Write the figure as stem.<format> for each format; returns the paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = stem.parent / f"{stem.name}.{fmt}"
        fig.savefig(path, dpi=dpi, format=fmt, facecolor="white")
        paths.append(path)
    return paths


def _short_title(run: Run, d: Drawing) -> str:
    rec, metrics = run.record, run.record.get("metrics") or {}
    head = rec.get("condition", run.model.condition.name)
    if run.model.condition.beta_acts and isinstance(rec.get("beta"), int | float):
        head += f"   β={rec['beta']:g}"
    if rec.get("seed") is not None:
        head += f", seed {rec['seed']}"
    parts = [f"RMSE {metrics['test_rmse']:.3g}"] if isinstance(metrics.get("test_rmse"), int | float) else []
    n_bias = d.contributing_edges - sum(e.role == "path" for e in d.edges)
    parts.append(f"{d.contributing_edges} edges" + (f" ({n_bias} bias)" if n_bias else ""))
    parts.append(f"depth {d.roles.depth}")
    if run.model.condition.exits:
        parts.append(f"exit {d.selected_exit}")
    return head + "\n" + " · ".join(parts)


def draw_panels(panels: Sequence[tuple[Run, torch.Tensor | None]], ncols: int = 4, show_closed: bool = False,
                title: str | None = None, inch_per_unit: float = 0.5,
                max_plots: int = MAX_PLOTS) -> tuple[Figure, list[Drawing]]:
    """Several runs in one figure (e.g. the eight conditions as 2 x 4), one panel each, at
    one common scale, with one legend. ``panels``: (run, its training inputs) as draw()
    takes them. Returns the Figure and each panel's Drawing."""
    preps = [_prepare(run, inputs, legend=False, max_plots=max_plots) for run, inputs in panels]
    nrows = -(-len(preps) // ncols)
    pw = max(p.size[0] for p in preps) * inch_per_unit
    ph = max(p.size[1] for p in preps) * inch_per_unit
    head, foot, gap = (0.45 if title else 0.0), 0.4, 0.55  # inches: suptitle, legend, panel title
    W, H = pw * ncols, (ph + gap) * nrows + head + foot
    fig = Figure(figsize=(W, H))
    for j, prep in enumerate(preps):
        r, c = divmod(j, ncols)
        bottom = foot + (nrows - 1 - r) * (ph + gap)
        ax = fig.add_axes((c * pw / W, bottom / H, pw / W, ph / H))
        _render(prep, ax, show_closed, _short_title(prep.run, prep.d), legend=False, font_scale=1.2)
    if title:
        fig.suptitle(title, y=1 - 0.12 / H, va="top", fontsize=13)
    handles = _legend_handles([(p.run.model, p.d) for p in preps], show_closed)
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9.5, frameon=False,
               bbox_to_anchor=(0.5, 0.05 / H))
    return fig, [p.d for p in preps]
