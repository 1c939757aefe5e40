"""Draw a trained gated KAN as in the paper's Fig. 1.

    python -m kanx.draw RUN_DIR [--out FILE_STEM] [--formats png,pdf,svg] [--show-closed]
    fig = kanx.draw.draw_run(run_dir_or_trained_run)          # notebooks
    kanx.analyze.select.draw_median_models(records_root, dataset, out_dir)  # median-seed model per condition

What is drawn (paper, "Gated multi-exit architecture" and Methods "Evaluation measures"):
nodes by layer, inputs at the bottom (labelled with the dataset's input names), each exit's
output(s) with the output names; every *contributing* edge as a small plot of what it adds
to its destination, z * phi(x) (inference gate included), over the range its source node
took on the run's training inputs. Which edges contribute comes from the same
backward-forward trace that counts them (kanx.kan.structure.edge_roles): edges on
input-output paths are solid; bias terms (connected to an output but off every path) are
dashed and labelled "bias" (one label per merged component); closed and non-contributing
edges are hidden, or faint lines with ``show_closed``. Forward-connection edges are
orange, exit heads blue, with the exit gate's probabilities pi at each exit and the
selected exit (argmax pi) ringed.

Node ranges come from running the model on the training inputs, rebuilt from the record
(dataset name, data seed and options); if the data cannot be loaded, or no longer matches
the scaling saved with the model, each edge is drawn over its spline grid's range instead
and the drawing says so.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Circle

from kanx.kan.network import GatedKAN
from kanx.kan.structure import EdgeRoles, NodeKey, dest_node, model_edge_roles, source_node
from kanx.load import load_run, rebuild_dataset

FORMATS = ("png", "pdf", "svg")

COLORS = {
    "trunk": "#2b2b2b",
    "forward": "#e66100",  # forward connections: orange, as in the paper's Fig. 1
    "exit": "#1f5fbf",  # exit heads and the exit gate: blue
    "bias": "#7b3294",
    "faint": "#b8b8b8",
}

# Layout, in data units (axes are drawn with equal aspect).
BOX_W, BOX_H = 0.9, 0.62  # an edge's activation plot
SLOT = BOX_W + 0.22  # smallest distance between two plots of one layer
ROW = 2.35  # distance between node rows
NODE_R = 0.13
DUMMY_W = 0.3  # room a forward connection takes where it crosses a band
NODE_CLEAR = 0.4  # ... and its least distance from a node whose row it crosses
LABEL_CHAR = 0.15  # width of one character of an input label
MAX_PLOTS = 60  # more contributing edges than this: lines only
INCH_PER_UNIT = 0.62  # standalone figure scale
TITLE_IN, MIN_WIDTH_IN = 0.62, 5.4  # standalone figure: room for the title, narrowest width
LEGEND_H = 0.8  # data units below the inputs kept for the legend
CURVE_POINTS = 96



@dataclass(frozen=True)
class EdgeInfo:
    """One edge of the network and what the trace says of it."""

    stage: int
    i: int  # input index of the stage (x_cat order with forward connections)
    o: int  # column of the stage ([trunk | head])
    src: NodeKey
    dst: NodeKey
    role: str  # "path", "bias" or "hidden" (closed, or open but not contributing)
    component: int  # bias term index (0, 1, ...), -1 unless role == "bias"
    forward: bool  # reads an earlier layer through a forward connection
    head: bool  # belongs to an exit head (the final layer with X; see _edge_table)

    @property
    def gid(self) -> str:
        """Identifier of the artists drawn for this edge (Artist.get_gid, the SVG id), with
        a suffix per artist: ":in" / ":out" (the line to / from its plot), ":plot", ":line"
        (a line without a plot)."""
        return f"kanx-edge:{self.stage}:{self.i}:{self.o}:{self.role}"


@dataclass
class Drawing:
    """What draw_run() drew, kept on the figure as ``fig.kanx_drawing``."""

    edges: list[EdgeInfo]
    roles: EdgeRoles
    node_ranges: dict[NodeKey, tuple[float, float]]
    range_source: str  # "training data" or "spline grid (...)"
    pi: np.ndarray | None  # exit gate probabilities (X only)
    selected_exit: int
    record_contributing_edges: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def drawn(self) -> list[EdgeInfo]:
        return [e for e in self.edges if e.role != "hidden"]

    @property
    def hidden(self) -> list[EdgeInfo]:
        return [e for e in self.edges if e.role == "hidden"]

    @property
    def contributing_edges(self) -> int:
        """Path edges plus bias components, as drawn: the paper's contributing edges."""
        path = sum(e.role == "path" for e in self.edges)
        return path + len({e.component for e in self.edges if e.role == "bias"})


# ------------------------------------------------------------------ the network's graph


def _edge_table(model: GatedKAN, roles: EdgeRoles) -> list[EdgeInfo]:
    """Every edge of the (single-member) model with its role. "head" marks exit heads, the
    final layer included, when the model has exit gates (X); without X the final layer
    is the plain output layer."""
    edges = []
    for k, (n_in, n_out) in enumerate(model.edge_shapes):
        for i in range(n_in):
            for o in range(n_out):
                role = "path" if roles.path[k][i, o] else "bias" if roles.bias[k][i, o] else "hidden"
                src = source_node(model, k, i)
                dst = dest_node(model, k, o)
                edges.append(EdgeInfo(k, i, o, src, dst, role, int(roles.bias_component[k][i, o]),
                                      forward=src[1] < k, head=dst[0] == "y" and model.condition.exits))
    return edges


# ------------------------------------------------------------------ node value ranges


def _training_inputs(run) -> torch.Tensor:
    """The run's training inputs, model-scaled (N, n_0), rebuilt from the record
    (kanx.load.rebuild_dataset). Raises on anything that keeps them from being the data the
    model was trained on."""
    ds = rebuild_dataset(run)
    if ds.n_inputs != run.model.width[0]:
        raise ValueError(f"dataset has {ds.n_inputs} inputs, the model {run.model.width[0]}")
    return run.scaling.x(ds.x_train)


@torch.no_grad()
def node_ranges(run) -> tuple[dict[NodeKey, tuple[float, float]], str]:
    """(lo, hi) of every trunk node x^(l)_i over the training inputs, and where the ranges
    come from: "training data", or the spline grid of the stage the node feeds when the
    data cannot be rebuilt."""
    model = run.model
    gates = _inference_gates(model, run.gate_estimator)
    ranges: dict[NodeKey, tuple[float, float]] = {}
    try:
        x = _training_inputs(run).to(torch.float32).unsqueeze(0)
        for k, h in enumerate(model.stage_inputs(x, gates)):
            lo, hi = h[0].amin(0), h[0].amax(0)
            for i in range(h.shape[-1]):
                ranges[source_node(model, k, i)] = (float(lo[i]), float(hi[i]))
        source = "training data"
    except Exception as e:  # whatever the failure, fall back to the grid
        warnings.warn(f"kanx.draw: cannot rebuild the training data ({type(e).__name__}: {e}); drawing edges over their grid range", stacklevel=2)
        source = "spline grid (training data unavailable)"
    K = model.spec.spline_order
    for k, stage in enumerate(model.stages):
        for i in range(stage.in_features):
            node = source_node(model, k, i)
            if node not in ranges:
                ranges[node] = (float(stage.grid[0, i, K]), float(stage.grid[0, i, -K - 1]))
    return ranges, source


def _inference_gates(model: GatedKAN, estimator: str) -> torch.Tensor:
    fc = model.fc_enabled
    model.fc_enabled = model.condition.forward  # as at the end of training
    try:
        return model.inference_gates(estimator)
    finally:
        model.fc_enabled = fc


@torch.no_grad()
def edge_curves(model: GatedKAN, ranges: dict[NodeKey, tuple[float, float]], estimator: str = "threshold", n: int = CURVE_POINTS):
    """Per stage (xs (I, n), ys (I, O, n)): z * phi(x) of every edge over its source's range,
    phi(x) = scale_base silu(x) + scale_sp spline(x), z the inference gate."""
    gates = model.split_edges(_inference_gates(model, estimator))
    out = []
    for k, stage in enumerate(model.stages):
        lo_hi = np.array([ranges[source_node(model, k, i)] for i in range(stage.in_features)])
        lo, hi = lo_hi[:, 0], lo_hi[:, 1]
        hi = np.where(hi - lo < 1e-9, lo + 1e-3, hi)  # a constant node still gets an axis
        xs = torch.from_numpy(np.linspace(lo, hi, n).T.copy()).to(stage.coef.dtype)  # (I, n)
        spline = stage.edge_spline(xs.T.unsqueeze(0))[0]  # (n, I, O)
        silu = torch.nn.functional.silu(xs.T).unsqueeze(-1)  # (n, I, 1)
        phi = gates[k][0] * (stage.scale_base[0] * silu + stage.scale_sp[0] * spline)  # (n, I, O)
        out.append((xs.numpy(), phi.permute(1, 2, 0).numpy()))
    return out


# ------------------------------------------------------------------ layout


def _spread(ideal: Sequence[float], widths: Sequence[float], margin: float) -> list[float]:
    """The centres closest (least squares) to the sorted ``ideal`` ones that keep their
    order and leave ``margin`` between neighbours of the given widths (isotonic
    regression by pool-adjacent-violators on the offsets)."""
    if not ideal:
        return []
    offsets = [0.0]
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        offsets.append(offsets[-1] + (a + b) / 2 + margin)
    blocks: list[list[float]] = []  # [sum, count]
    for p, c in zip(ideal, offsets, strict=True):
        blocks.append([p - c, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, n = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += n
    fit = [s / n for s, n in blocks for _ in range(int(n))]
    return [v + c for v, c in zip(fit, offsets, strict=True)]


@dataclass
class Layout:
    nodes: dict[NodeKey, tuple[float, float]]
    boxes: dict[EdgeInfo, tuple[float, float]]  # centre of each shown edge's plot
    waypoints: dict[EdgeInfo, list[tuple[float, float]]]  # where a forward connection crosses lower bands

    def extent(self) -> tuple[float, float]:
        xs = [p[0] for p in self.nodes.values()] + [b[0] for b in self.boxes.values()]
        return min(xs), max(xs)

    def route(self, e: EdgeInfo) -> list[tuple[float, float]]:
        """Points of the line from e's source node to the bottom of its plot: straight,
        except that a forward connection passes each band it crosses vertically through its
        slot there, and each node row it crosses at least NODE_CLEAR away from the nodes."""
        (xa, ya), (bx, by) = self.nodes[e.src], self.boxes[e]
        points = [(xa, ya + NODE_R)]
        for x, yb in self.waypoints[e]:
            points += [(x, yb - BOX_H / 2), (x, yb + BOX_H / 2)]
        points.append((bx, by - BOX_H / 2))
        out = [points[0]]
        for (x0, y0), (x1, y1) in zip(points[:-1], points[1:], strict=True):
            rows = sorted({y for _, y in self.nodes.values() if y0 < y < y1})
            for y in rows:
                x = x0 + (y - y0) / (y1 - y0) * (x1 - x0)
                for xn, yn in self.nodes.values():
                    if yn == y and abs(x - xn) < NODE_CLEAR:
                        x = xn + NODE_CLEAR * (1 if x >= xn else -1)
                out.append((x, y))
            out.append((x1, y1))
        return out


def _layout(model: GatedKAN, shown: list[EdgeInfo]) -> Layout:
    """Node positions, plot centres and forward-connection waypoints.

    Rows: x^(0) at the bottom, x^(l) in row l, exit k's outputs in row k+1 (right of the
    trunk; the final exit centred). Each stage's plots sit in one band between its rows,
    near where the straight edge would cross the band, spread so that none overlap. A
    forward connection from row j to band k > j also takes a narrow slot in the bands
    j .. k-1 it crosses (a dummy vertex, as in layered graph drawing), so it runs between
    the plots of those bands, not through them. Bands are placed from the top down, so a
    slot's ideal position is on the line to the (already placed) point above it."""
    L, width = model.L, model.width
    per_band = [sum(e.stage == k for e in shown) + sum(e.src[1] <= k < e.stage for e in shown) * 0.3 for k in range(L)]
    widest = max([*per_band, 1])
    node_gap = max(1.25, widest * SLOT / max(max(width[:L]), 1))
    pos: dict[NodeKey, tuple[float, float]] = {}
    right = 0.0
    for layer in range(L):
        n = width[layer]
        for i in range(n):
            pos[("x", layer, i)] = ((i - (n - 1) / 2) * node_gap, layer * ROW)
        right = max(right, (n - 1) / 2 * node_gap)
    exit_gap = max(node_gap, 1.6)
    for k in range(L):
        if not model.head_out[k]:
            continue
        n = model.n_out
        for p in range(n):
            x = (p - (n - 1) / 2) * node_gap if k == L - 1 else right + exit_gap + p * node_gap * 0.8
            pos[("y", k, p)] = (x, (k + 1) * ROW)

    boxes: dict[EdgeInfo, tuple[float, float]] = {}
    waypoints: dict[EdgeInfo, list[tuple[float, float]]] = {e: [] for e in shown}
    for k in reversed(range(L)):
        y_band = (k + 0.5) * ROW
        items = []  # ((ideal x, tie-breakers), width, edge, is_box)
        for e in shown:
            if e.stage == k:
                above, is_box = pos[e.dst], True
            elif e.src[1] <= k < e.stage:
                above, is_box = (waypoints[e][0] if waypoints[e] else boxes[e]), False
            else:
                continue
            (xs, ys), (xa, ya) = pos[e.src], above
            t = (y_band - ys) / (ya - ys)
            items.append(((xs + t * (xa - xs), xa, xs), BOX_W if is_box else DUMMY_W, e, is_box))
        items.sort(key=lambda it: it[0])
        xs_new = _spread([it[0][0] for it in items], [it[1] for it in items], SLOT - BOX_W)
        for (_, _, e, is_box), x in zip(items, xs_new, strict=True):
            if is_box:
                boxes[e] = (x, y_band)
            else:
                waypoints[e].insert(0, (x, y_band))
    return Layout(pos, boxes, waypoints)


# ------------------------------------------------------------------ drawing


def _edge_color(e: EdgeInfo) -> str:
    return COLORS["forward"] if e.forward else COLORS["exit"] if e.head else COLORS["trunk"]


def _as_run(run_or_dir):
    if isinstance(run_or_dir, str | Path):
        return load_run(run_or_dir)
    return run_or_dir


def plan(run) -> Drawing:
    """What draw_run() draws for a TrainedRun (or run directory): every edge and its role,
    node ranges, exit probabilities. No matplotlib."""
    run = _as_run(run)
    model = run.model
    roles = model_edge_roles(model, run.gate_estimator)[0]
    ranges, source = node_ranges(run)
    pi = model.exit_probs()[0].detach().numpy() if model.condition.exits else None
    metrics = run.record.get("metrics") or {}
    d = Drawing(_edge_table(model, roles), roles, ranges, source, pi, int(model.selected_exit()[0]), metrics.get("contributing_edges"))
    if d.record_contributing_edges is not None and d.record_contributing_edges != d.contributing_edges:
        d.notes.append(f"record says {d.record_contributing_edges} contributing edges, the model's trace {d.contributing_edges}")
    return d


def _title(run, d: Drawing) -> tuple[str, str]:
    rec, metrics = run.record, run.record.get("metrics") or {}
    beta = rec.get("beta")
    head = f"{rec.get('dataset', '?')}  {rec.get('condition', run.model.condition.name)}"
    gated = run.model.condition.edge_gates or run.model.condition.exits  # beta acts only through gates
    head += f"   β={beta:g}" if gated and isinstance(beta, int | float) else ""
    head += f", seed {rec['seed']}" if rec.get("seed") is not None else ""
    n_path = sum(e.role == "path" for e in d.edges)
    n_bias = d.contributing_edges - n_path
    parts = []
    if isinstance(metrics.get("test_rmse"), int | float):
        parts.append(f"test RMSE {metrics['test_rmse']:.3g}")
    parts.append(f"{d.contributing_edges} contributing edges" + (f" ({n_path} on paths + {n_bias} bias)" if n_bias else ""))
    parts.append(f"depth {d.roles.depth}")
    if run.model.condition.exits:
        parts.append(f"exit {d.selected_exit}")
    return head, " · ".join(parts)


@dataclass
class _Prepared:
    """A run ready to render: its plan, layout and data limits."""

    run: object
    d: Drawing
    lay: Layout
    limits: tuple[float, float, float, float]  # x0, x1, y0, y1
    plots: bool  # activation plots drawn (False: too many edges, lines only)
    label_rotation: float  # input labels, degrees

    @property
    def size(self) -> tuple[float, float]:
        x0, x1, y0, y1 = self.limits
        return x1 - x0, y1 - y0


def _input_names(run) -> list[str]:
    return [run.input_names[i] if i < len(run.input_names) else f"x{i}" for i in range(run.model.width[0])]


def _prepare(run_or_dir, legend: bool, max_plots: int) -> _Prepared:
    run = _as_run(run_or_dir)
    d = plan(run)
    model = run.model
    plots = len(d.drawn) <= max_plots
    if not plots:
        d.notes.append(f"{len(d.drawn)} contributing edges: activation plots left out (max_plots={max_plots})")
    lay = _layout(model, d.drawn if plots else [])
    left, right = lay.extent()
    side = [lay.nodes[("y", k, p)][0] for k in range(model.L) if model.head_out[k] and model.condition.exits for p in range(model.n_out)]
    x0, x1 = left - BOX_W / 2 - 0.5, max(right + BOX_W / 2 + 0.6, max(side, default=right) + 2.3)
    # Input labels that would run into each other are turned.
    names = _input_names(run)
    xs = sorted(lay.nodes[("x", 0, i)][0] for i in range(model.width[0]))
    gap = min((b - a for a, b in zip(xs[:-1], xs[1:], strict=True)), default=np.inf)
    rotation = 40.0 if max(map(len, names)) * LABEL_CHAR > 0.9 * gap else 0.0
    below = 0.95 + (max(map(len, names)) * LABEL_CHAR * 0.8 * np.sin(np.radians(rotation)) if rotation else 0.0)
    y0, y1 = -(below + LEGEND_H * legend), model.L * ROW + 0.75
    return _Prepared(run, d, lay, (x0 - (1.0 if rotation else 0.0), x1, y0, y1), plots, rotation)


def draw_run(run_or_dir, ax=None, show_closed: bool = False, title: bool | str = True, legend: bool = True, max_plots: int = MAX_PLOTS) -> Figure:
    """Draw a trained model: a run directory or a kanx.TrainedRun. Returns the Figure (a new
    one unless ``ax`` is given). ``show_closed`` adds closed and non-contributing edges as
    faint lines; ``title`` is True (dataset, condition, beta, seed, test RMSE, contributing
    edges, depth, exit), False or a string. ``fig.kanx_drawing`` holds the Drawing (every
    edge's role). With more than ``max_plots`` contributing edges they are drawn as lines
    only."""
    prep = _prepare(run_or_dir, legend, max_plots)
    if ax is None:
        w, h = (v * INCH_PER_UNIT for v in prep.size)
        top = TITLE_IN if title else 0.1
        fig = Figure(figsize=(max(w, MIN_WIDTH_IN), h + top))
        ax = fig.add_axes((0.0, 0.0, 1.0, h / (h + top)))
    _render(prep, ax, show_closed, title, legend)
    ax.figure.kanx_drawing = prep.d
    return ax.figure


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
            ax.plot([xa, xb], [ya, yb], color=_edge_color(e), alpha=0.22, lw=0.6 * scale, ls=":", zorder=1, gid=e.gid + ":line")

    # Contributing edges: source -> plot -> destination, then the plot.
    bias_labels = len({e.component for e in shown if e.role == "bias"}) > 1
    for e in shown if not prep.plots else []:
        (xa, ya), (xb, yb) = pos[e.src], pos[e.dst]
        ax.plot([xa, xb], [ya, yb], color=_edge_color(e), lw=0.7 * scale, ls="--" if e.role == "bias" else "-", zorder=2, gid=e.gid + ":line")
    for e in shown if prep.plots else []:
        (xb, yb), (bx, by) = pos[e.dst], boxes[e]
        color, ls, lw = _edge_color(e), ("--" if e.role == "bias" else "-"), 1.1 * scale
        ax.plot(*zip(*lay.route(e), strict=True), color=color, lw=lw, ls=ls, zorder=2, gid=e.gid + ":in")
        ax.plot([bx, xb], [by + BOX_H / 2, yb - NODE_R], color=color, lw=lw, ls=ls, zorder=2, gid=e.gid + ":out")
        _edge_plot(ax, e, (bx, by), curves, d, color, scale, fs)
        if e.role == "bias":
            label = f"bias {e.component + 1}" if bias_labels else "bias"
            ax.text(bx + BOX_W / 2 + 0.05, by + BOX_H / 2, label, color=COLORS["bias"], fontsize=fs(7), ha="left", va="top", style="italic", zorder=4)

    # Nodes.
    X = model.condition.exits
    for key, (x, y) in pos.items():
        is_exit = key[0] == "y"
        selected = is_exit and key[1] == d.selected_exit
        on = key in used or (key[0] == "x" and key[1] == 0) or selected
        face = (COLORS["exit"] if X else COLORS["trunk"]) if is_exit else (COLORS["trunk"] if on else "white")
        ax.add_patch(Circle((x, y), NODE_R, facecolor=face, edgecolor=face if is_exit else COLORS["trunk"], lw=0.9 * scale,
                            alpha=1.0 if on else 0.35, zorder=5))
        if selected and X:
            ax.add_patch(Circle((x, y), NODE_R * 2.0, facecolor="none", edgecolor=COLORS["exit"], lw=1.6 * scale, zorder=5))
        if key[0] == "x" and key[1] == 0:
            turned = prep.label_rotation != 0
            ax.text(x, y - NODE_R - 0.12, names[key[2]], ha="right" if turned else "center", va="top", fontsize=fs(9 if turned else 11),
                    rotation=prep.label_rotation, rotation_mode="anchor", zorder=6)
        elif is_exit:
            name = run.output_names[key[2]] if key[2] < len(run.output_names) else f"y{key[2]}"
            final = key[1] == model.L - 1
            text = f"{name}, exit {key[1]}\nπ = {float(d.pi[key[1]]):.2f}" + ("\nselected" if selected else "") if X else name
            beside = X or not final  # exit labels (with pi) to the right
            tx, ty, ha, va = (x + NODE_R * 2.3, y, "left", "center") if beside else (x, y + NODE_R + 0.14, "center", "bottom")
            ax.text(tx, ty, text, ha=ha, va=va, fontsize=fs(8.5 if X else 10), zorder=6, color=COLORS["exit"] if X else "black",
                    alpha=1.0 if (selected or not X) else 0.6, fontweight="bold" if selected and X else "normal")

    if title:
        ax.set_title(title if isinstance(title, str) else "\n".join(_title(run, d)), fontsize=fs(9.5), loc="center")
    notes = ([] if d.range_source == "training data" else [f"edge plots over the {d.range_source}"]) + d.notes
    if notes:
        ax.text(0.0, 1.0, "\n".join(notes), transform=ax.transAxes, fontsize=fs(6.5), color="firebrick", ha="left", va="top")
    if legend:
        ax.legend(handles=_legend_handles([(model, d)], show_closed), loc="lower center", ncol=3, fontsize=fs(7.5), frameon=False,
                  handlelength=1.8, borderaxespad=0.0, columnspacing=1.2)


def _edge_plot(ax, e: EdgeInfo, centre: tuple[float, float], curves, d: Drawing, color: str, scale: float, fs) -> None:
    """The small plot of z * phi(x) over the source's training range."""
    bx, by = centre
    xs, ys = curves[e.stage][0][e.i], curves[e.stage][1][e.i, e.o]
    inset = ax.inset_axes([bx - BOX_W / 2, by - BOX_H / 2, BOX_W, BOX_H], transform=ax.transData, zorder=3)
    inset.set_gid(e.gid + ":plot")
    src_lo, src_hi = d.node_ranges[e.src]
    if not (np.isfinite(xs).all() and np.isfinite(ys).all()):  # a diverged model
        inset.text(0.5, 0.5, "non-finite", transform=inset.transAxes, ha="center", va="center", fontsize=fs(6.5), color="firebrick")
    elif src_hi - src_lo < 1e-12:  # a constant source (every bias term): the edge adds a constant
        value = float(ys[0])
        inset.axhline(value, color=color, lw=1.3 * scale)
        inset.set_ylim(value - 1.0, value + 1.0)
        inset.text(0.5, 0.12, f"{value:+.3g}", transform=inset.transAxes, ha="center", va="bottom", fontsize=fs(7.5), color=color)
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


# ------------------------------------------------------------------ files


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


def _short_title(run, d: Drawing) -> str:
    rec, metrics = run.record, run.record.get("metrics") or {}
    head = rec.get("condition", run.model.condition.name)
    if (run.model.condition.edge_gates or run.model.condition.exits) and isinstance(rec.get("beta"), int | float):
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


def draw_grid(runs: Sequence, ncols: int = 4, show_closed: bool = False, title: str | None = None, inch_per_unit: float = 0.5,
              max_plots: int = MAX_PLOTS) -> Figure:
    """Several runs in one figure (e.g. the eight conditions as 2 x 4), one panel each, at
    one common scale, with one legend. ``runs``: run directories or TrainedRuns."""
    preps = [_prepare(r, legend=False, max_plots=max_plots) for r in runs]
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
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9.5, frameon=False, bbox_to_anchor=(0.5, 0.05 / H))
    fig.kanx_drawings = [p.d for p in preps]
    return fig


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kanx.draw", description="Draw a trained gated KAN (the paper's Fig. 1 style).")
    p.add_argument("run_dir", help="a finished run's directory (record.json, done, model.pt)")
    p.add_argument("--out", help="output file stem (default: RUN_DIR/drawing)")
    p.add_argument("--formats", default=",".join(FORMATS), help="comma-separated, from png,pdf,svg (default: all three)")
    p.add_argument("--show-closed", action="store_true", help="also draw closed and non-contributing edges, faintly")
    p.add_argument("--dpi", type=int, default=150, help="PNG resolution (default 150)")
    args = p.parse_args(argv)
    formats = [f.strip().lower() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        p.error(f"--formats {args.formats!r}: choose from {','.join(FORMATS)}")
    try:
        run = _as_run(args.run_dir)
    except (FileNotFoundError, ValueError) as e:  # no run there, or a corrupt or truncated file: one line naming it
        print(f"kanx.draw: error: {e}", file=sys.stderr)
        return 2
    fig = draw_run(run, show_closed=args.show_closed)
    for note in fig.kanx_drawing.notes:
        print(f"kanx.draw: warning: {note}", file=sys.stderr)
    for path in save(fig, args.out or Path(args.run_dir) / "drawing", formats, args.dpi):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
