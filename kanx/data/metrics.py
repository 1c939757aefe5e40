"""Test metrics in raw units for a pack of M models, one dataset per member.

RMSE = sqrt(mean over samples and output variables of the squared error). For the
dynamical systems the reported test RMSE is the multi-step RMSE (Sec. "Pareto analysis"):
the model runs free from a test state, its own predictions fed back as inputs, and is
scored against the true trajectory over every step and state variable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from kanx.data.dataset import Dataset
from kanx.data.dynamics import free_run

Predict = Callable[[torch.Tensor], torch.Tensor]  # raw (M, N, q) -> raw (M, N, p)


def rmse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-member RMSE over all but the first axis: (M, ...) -> (M,).

    NaN for a member whose predictions (or squared errors) are not all finite.
    """
    pred = pred.to(target)
    value = (pred - target).square().flatten(1).mean(1).sqrt()
    finite = torch.isfinite(pred).flatten(1).all(1) & torch.isfinite(value)
    return torch.where(finite, value, torch.full_like(value, float("nan")))


def _checked(predict: Predict, n_outputs: int) -> Predict:
    """predict, with its output shape checked against (M, N, p)."""

    def call(x: torch.Tensor) -> torch.Tensor:
        out = predict(x)
        expected = (*x.shape[:-1], n_outputs)
        if tuple(out.shape) != expected:
            raise ValueError(f"predict returned shape {tuple(out.shape)} for inputs {tuple(x.shape)}, expected {expected}")
        return out

    return call


def _check_same_kind(datasets: Sequence[Dataset]) -> Dataset:
    """The first dataset, after checking all members share sizes and rollout plan (a mixed
    pack's members may train on different datasets of one shape)."""
    if not datasets:
        raise ValueError("evaluate_members needs at least one dataset")
    first = datasets[0]

    def kind(d: Dataset):
        return (d.n_train, d.n_test, d.n_inputs, d.n_outputs, d.dynamical, d.horizon, d.rollout_starts)

    if any(kind(d) != kind(first) for d in datasets):
        raise ValueError("evaluate_members needs datasets of one shape (same sizes and rollouts)")
    return first


@torch.no_grad()
def evaluate_members(datasets: Sequence[Dataset], predict: Predict) -> list[dict[str, float]]:
    """Train and test RMSE of M models in raw units; member m is scored on datasets[m].

    predict maps raw inputs (M, N, q) to raw predictions (M, N, p). Returns one dict per
    member with "train_rmse" and "test_rmse"; for a dynamical dataset "test_rmse" is the
    multi-step rollout RMSE and "test_rmse_one_step" is added. Rollouts of all members run
    batched, one step at a time.
    """
    first = _check_same_kind(datasets)
    predict = _checked(predict, first.n_outputs)

    def stacked(split: str) -> torch.Tensor:
        return torch.stack([getattr(d, split) for d in datasets])  # (M, N, q or p)

    x_test, y_test = stacked("x_test"), stacked("y_test")
    metrics = {
        "train_rmse": rmse(predict(stacked("x_train")), stacked("y_train")),
        "test_rmse": rmse(predict(x_test), y_test),
    }
    if first.dynamical:
        starts = torch.tensor(first.rollout_starts)  # (R,)
        steps = starts[:, None] + torch.arange(first.horizon)  # (R, H): test index of each step's target
        metrics["test_rmse_one_step"] = metrics["test_rmse"]
        metrics["test_rmse"] = rmse(free_run(predict, x_test[:, starts], first.horizon), y_test[:, steps])
    return [{key: float(values[m]) for key, values in metrics.items()} for m in range(len(datasets))]
