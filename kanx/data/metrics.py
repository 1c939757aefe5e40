"""Test metrics in raw units for a pack of M models, one dataset per member.

RMSE = sqrt(mean over samples and output variables of the squared error). For the
dynamical systems the reported test RMSE is the multi-step RMSE (Sec. "Pareto analysis"):
the model runs free from a test state, its own predictions fed back as inputs, and is
scored against the true trajectory over every step and state variable.

The paper does not say how long its rollouts are, and the number depends on it: short
rollouts measure the model, long ones saturate at the attractor's spread for every model.
So a dynamical record keeps the whole error curve (`rollout_rmse`: the RMSE of rollouts of h
steps tiling the test segment, for every rung h of ROLLOUT_LADDER and the whole segment),
and the analysis can read any rung without retraining; `test_rmse` is the rung the
dataset's config names (`dataset.horizon`).

Tiling uses each test state once per rung, so a rung of a few long rollouts (n_test // h of
them) is a mean over few chaotic trajectories, and its value moves with the last bits of the
arithmetic (docs/CALIBRATION.md, "The reading's spread across machines").
`overlapping_rollout_rmse` is the estimator over every window of the segment that allows h
steps; records do not hold it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from kanx.data.dataset import Dataset
from kanx.data.dynamics import free_run, rollout_plan
from kanx.vocab import RECORD_ROLLOUT

Predict = Callable[[torch.Tensor], torch.Tensor]  # raw (M, N, q) -> raw (M, N, p)

# Rollout lengths (steps) of the error curve every dynamical record holds; the whole test
# segment (one rollout of n_test steps) is its last rung.
ROLLOUT_LADDER: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500)


def rollout_rungs(n_test: int) -> tuple[int, ...]:
    """The ladder's rungs shorter than the test segment, then the whole segment."""
    return (*(h for h in ROLLOUT_LADDER if h < n_test), n_test)


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
            raise ValueError(f"predict returned shape {tuple(out.shape)} for "
                             f"inputs {tuple(x.shape)}, expected {expected}")
        return out

    return call


def _check_same_kind(datasets: Sequence[Dataset]) -> Dataset:
    """The first dataset, after checking all members share sizes and rollout plan (a mixed
    pack's members may train on different datasets of one shape)."""
    if not datasets:
        raise ValueError("evaluate_members needs at least one dataset")
    first = datasets[0]

    def kind(d: Dataset):
        return (d.n_train, d.n_test, d.n_inputs, d.n_outputs, d.dynamical, d.horizon, d.rollout_starts, d.n_val,
                d.val_rollout_starts)

    if any(kind(d) != kind(first) for d in datasets):
        raise ValueError("evaluate_members needs datasets of one shape (same sizes and rollouts)")
    return first


@torch.no_grad()
def evaluate_members(datasets: Sequence[Dataset], predict: Predict) -> list[dict]:
    """Train and test RMSE of M models in raw units; member m is scored on datasets[m].

    predict maps raw inputs (M, N, q) to raw predictions (M, N, p). Returns one dict per
    member with "train_rmse" and "test_rmse"; for a dynamical dataset "test_rmse" is the
    multi-step rollout RMSE of the dataset's rollout plan, "test_rmse_one_step" is added, and
    "rollout_rmse" maps each rung h of `rollout_rungs` (as a string, JSON's key type) to the
    RMSE of the n_test // h rollouts of h steps that tile the test segment. Rollouts of all
    members run batched, one step at a time. A dataset with a validation split adds the same
    readings of it (`validation_metrics`: "val_rmse", and "val_rmse_one_step" for a dynamical one).
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
    out = [{key: float(values[m]) for key, values in metrics.items()} for m in range(len(datasets))]
    if first.dynamical:
        one_step = metrics["test_rmse"]
        multi_step = rollout_rmse(predict, x_test, y_test, first.horizon, first.rollout_starts)
        ladder = {h: rollout_rmse(predict, x_test, y_test, *rollout_plan(first.name, first.n_test, h, None))
                  for h in rollout_rungs(first.n_test)}
        for m, row in enumerate(out):
            row.update(test_rmse=float(multi_step[m]), test_rmse_one_step=float(one_step[m]),
                       **{RECORD_ROLLOUT: {str(h): float(values[m]) for h, values in ladder.items()}})
    if first.n_val:
        for row, val in zip(out, validation_metrics(datasets, predict), strict=True):
            row.update(val)
    return out


def validation_metrics(datasets: Sequence[Dataset], predict: Predict) -> list[dict]:
    """The validation split's readings, as the test split's: "val_rmse" (for a dynamical dataset the
    multi-step RMSE of rollouts tiling the validation segment, at the test's horizon or the whole
    segment where that is shorter) and, for a dynamical dataset, "val_rmse_one_step"."""
    first = datasets[0]
    x_val, y_val = (torch.stack([getattr(d, split) for d in datasets]) for split in ("x_val", "y_val"))
    one_step = rmse(predict(x_val), y_val)
    if not first.dynamical:
        return [{"val_rmse": float(v)} for v in one_step]
    multi_step = rollout_rmse(predict, x_val, y_val, first.val_horizon, first.val_rollout_starts)
    return [{"val_rmse": float(multi), "val_rmse_one_step": float(one)} for multi, one in zip(multi_step, one_step,
                                                                                               strict=True)]


def rollout_rmse(predict: Predict, x_test: torch.Tensor, y_test: torch.Tensor, horizon: int, starts) -> torch.Tensor:
    """Per-member RMSE of free rollouts of ``horizon`` steps from the test states ``starts``,
    against the true test trajectory (every step and state variable): (M,)."""
    starts = torch.tensor(starts)  # (R,)
    steps = starts[:, None] + torch.arange(horizon)  # (R, H): test index of each step's target
    return rmse(free_run(predict, x_test[:, starts], horizon), y_test[:, steps])


def overlapping_rollout_rmse(predict: Predict, x_test: torch.Tensor, y_test: torch.Tensor,
                             horizons: Sequence[int]) -> dict[int, torch.Tensor]:
    """Per-member RMSE of free rollouts of h steps from every test state that allows h steps (the
    n_test - h + 1 overlapping windows of the segment), for each h of ``horizons``: {h: (M,)}.

    The rollout of h steps from a state is the first h steps of any longer one from it, so one
    free run serves every horizon: it starts from every state the shortest horizon allows and
    drops, once a horizon is passed, the starts that no longer horizon has room for (whole
    segment: one rollout). Its last bits may differ from a separate run per horizon (batches of
    other sizes), not its value."""
    n_test = x_test.shape[1]
    horizons = sorted(set(horizons))
    if not horizons or horizons[0] < 1 or horizons[-1] > n_test:
        raise ValueError(f"horizons {horizons} must be whole numbers of steps from 1 to n_test={n_test}")
    predict = _checked(predict, y_test.shape[-1])
    states, steps = x_test, []
    for t in range(horizons[-1]):
        starts = n_test - next(h for h in horizons if h > t) + 1  # those with room for the next horizon
        states = predict(states[:, :starts]).to(x_test)
        steps.append(states)
    out = {}
    for h in horizons:
        windows = n_test - h + 1
        pred = torch.stack([step[:, :windows] for step in steps[:h]], dim=2)  # (M, windows, h, p)
        out[h] = rmse(pred, y_test[:, torch.arange(windows)[:, None] + torch.arange(h)])
    return out
