"""Affine input and target scalings, fitted on training data only.

Inputs go to the spline grid's range: B-spline activations are defined on a grid over
[-1, 1] (Sec. "Kolmogorov-Arnold Networks", G = 10 intervals), so `minmax` maps each
training column's [min, max] onto [-1, 1]. Test points outside the training range land
slightly outside [-1, 1], as they would for any model fitted on the training data.
`standardize` (zero mean, unit std per column) is the default for the real tabular datasets
(Concrete, Superconductor, csv): on Concrete it brings beta's pruning closer to the published
values than min-max (docs/CALIBRATION.md); the first grid update re-places the first layer's
knots on the data either way.

Targets are standardized (zero mean, unit std on the training set) by default, so that the
MSE term of the objective has the same scale across datasets whatever their units; RMSE is
always reported in the original units via `y_inverse`. `standardize_targets=False` trains
on raw targets instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kanx.data.dataset import Dataset
from kanx.errors import ConfigError

INPUT_SCALINGS = ("minmax", "standardize", "none")


@dataclass(frozen=True, eq=False)
class Scaling:
    """x_scaled = (x - x_shift) / x_scale and y_scaled = (y - y_shift) / y_scale.

    Parameters have shape (q,) / (p,) for one dataset, or (M, 1, q) / (M, 1, p) after
    `stack_scalings`; they broadcast over the leading axes of the tensors they scale and
    follow those tensors' dtype and device.
    """

    x_shift: torch.Tensor
    x_scale: torch.Tensor
    y_shift: torch.Tensor
    y_scale: torch.Tensor
    input_scaling: str
    standardize_targets: bool

    def x(self, x_raw: torch.Tensor) -> torch.Tensor:
        return (x_raw - self.x_shift.to(x_raw)) / self.x_scale.to(x_raw)

    def y(self, y_raw: torch.Tensor) -> torch.Tensor:
        return (y_raw - self.y_shift.to(y_raw)) / self.y_scale.to(y_raw)

    def y_inverse(self, y_scaled: torch.Tensor) -> torch.Tensor:
        return y_scaled * self.y_scale.to(y_scaled) + self.y_shift.to(y_scaled)


def _shift_scale(values: torch.Tensor, method: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-column (shift, scale) of a (n, d) training block."""
    if method == "minmax":
        low, high = values.amin(0), values.amax(0)
        shift, scale = (high + low) / 2, (high - low) / 2
    elif method == "standardize":
        shift, scale = values.mean(0), values.std(0, correction=0)
    else:  # "none"
        shift, scale = torch.zeros_like(values[0]), torch.ones_like(values[0])
    # A constant training column has no spread to divide by: it maps to 0 instead.
    return shift, torch.where(scale > 0, scale, torch.ones_like(scale))


def fit_scaling(ds: Dataset, input_scaling: str = "minmax", standardize_targets: bool = True) -> Scaling:
    """Fit the scaling on ds's training split only (test statistics never leak in).

    input_scaling: "minmax" (train min/max -> [-1, 1]), "standardize" (zero mean, unit
    population std) or "none". standardize_targets: zero mean, unit std targets, else raw.
    """
    if input_scaling not in INPUT_SCALINGS:
        raise ConfigError(
            f"input_scaling={input_scaling!r} is not one of: {', '.join(INPUT_SCALINGS)}; "
            f"use minmax (the spline grid's range [-1, 1]) unless you have a reason not to"
        )
    x_shift, x_scale = _shift_scale(ds.x_train, input_scaling)
    y_shift, y_scale = _shift_scale(ds.y_train, "standardize" if standardize_targets else "none")
    return Scaling(x_shift, x_scale, y_shift, y_scale, input_scaling, bool(standardize_targets))


def stack_scalings(scalings: Sequence[Scaling]) -> Scaling:
    """One Scaling for M members: applied to (M, N, q) tensors, member m uses scalings[m].

    The method labels are the first member's (the members of a pack share them).
    """
    if not scalings:
        raise ValueError("stack_scalings needs at least one Scaling")

    def stack(attr: str) -> torch.Tensor:
        return torch.stack([getattr(s, attr) for s in scalings])[:, None, :]  # (M, 1, d)

    first = scalings[0]
    return Scaling(
        stack("x_shift"), stack("x_scale"), stack("y_shift"), stack("y_scale"),
        first.input_scaling, first.standardize_targets,
    )
