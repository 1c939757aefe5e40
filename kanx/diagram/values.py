"""Numbers the drawing plots: the range of every trunk node over the run's training inputs,
and z * phi(x) of every edge over its source's range."""

from __future__ import annotations

import numpy as np
import torch

from kanx.kan.network import GatedKAN
from kanx.kan.structure import NodeKey, source_node, trained_inference_gates

CURVE_POINTS = 96
FROM_DATA = "training data"
FROM_GRID = "spline grid (training data unavailable)"


@torch.no_grad()
def node_ranges(model: GatedKAN, estimator: str,
                inputs: torch.Tensor | None) -> tuple[dict[NodeKey, tuple[float, float]], str]:
    """(lo, hi) of every trunk node x^(l)_i over ``inputs``, the training inputs as the model
    takes them (scaled, (N, n_0)), and where the ranges come from: "training data", or
    without inputs (None) the spline grid of the stage the node feeds."""
    ranges: dict[NodeKey, tuple[float, float]] = {}
    if inputs is not None:
        if inputs.ndim != 2 or inputs.shape[1] != model.width[0]:
            raise ValueError(f"inputs of shape {tuple(inputs.shape)}: the model takes (N, {model.width[0]})")
        gates = trained_inference_gates(model, estimator)
        for k, h in enumerate(model.stage_inputs(inputs.to(torch.float32).unsqueeze(0), gates)):
            lo, hi = h[0].amin(0), h[0].amax(0)
            for i in range(h.shape[-1]):
                ranges[source_node(model, k, i)] = (float(lo[i]), float(hi[i]))
    K = model.spec.spline_order
    for k, stage in enumerate(model.layers):
        for i in range(stage.in_features):
            node = source_node(model, k, i)
            if node not in ranges:
                ranges[node] = (float(stage.grid[0, i, K]), float(stage.grid[0, i, -K - 1]))
    return ranges, FROM_GRID if inputs is None else FROM_DATA


@torch.no_grad()
def edge_curves(model: GatedKAN, ranges: dict[NodeKey, tuple[float, float]], estimator: str = "threshold",
                n: int = CURVE_POINTS):
    """Per stage (xs (I, n), ys (I, O, n)): z * phi(x) of every edge over its source's range,
    phi(x) = scale_base silu(x) + scale_sp spline(x), z the inference gate."""
    gates = model.split_edges(trained_inference_gates(model, estimator))
    out = []
    for k, stage in enumerate(model.layers):
        lo_hi = np.array([ranges[source_node(model, k, i)] for i in range(stage.in_features)])
        lo, hi = lo_hi[:, 0], lo_hi[:, 1]
        hi = np.where(hi - lo < 1e-9, lo + 1e-3, hi)  # a constant node still gets an axis
        xs = torch.from_numpy(np.linspace(lo, hi, n).T.copy()).to(stage.coef.dtype)  # (I, n)
        spline = stage.edge_spline(xs.T.unsqueeze(0))[0]  # (n, I, O)
        silu = torch.nn.functional.silu(xs.T).unsqueeze(-1)  # (n, I, 1)
        phi = gates[k][0] * (stage.scale_base[0] * silu + stage.scale_sp[0] * spline)  # (n, I, O)
        out.append((xs.numpy(), phi.permute(1, 2, 0).numpy()))
    return out
