"""How much a dynamical system's rollout error moves when its start states move by one ulp.

A free rollout of a chaotic map (Ikeda, Ecosystem) amplifies a last-bit difference in one step
until, past the map's predictability horizon, the rolled-out trajectory is unrelated to the one
computed without it. The rung-h RMSE of the record's rollout ladder (kanx.data.metrics) is then
one draw of a noisy statistic of those last bits: another CPU's vector kernels (torch's
``ATEN_CPU_CAPABILITY``), another summation order or another library version give another draw.

`ulp_ensemble` measures that noise on this machine, for one model: it runs each rung's rollouts
(and a validation split's, whose val_rmse is a rollout's RMSE too) again from start states
nudged by one unit in the last place, in K random directions, all K batched along the rollout
axis (one free run per rung, so about the cost of scoring once), and
returns the K RMSEs of every rung. kanx.evaluate compares a recorded rung with them
(docs/RECORDS.md, "Rescoring on another machine"); scripts/studies/reading_spread.py measures
the spread of the paper's reading with them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch

from kanx.data.dataset import Dataset
from kanx.data.dynamics import free_run, rollout_plan
from kanx.data.metrics import Predict, rmse, rollout_rungs
from kanx.vocab import RECORD_ROLLOUT

DEFAULT_DRAWS = 32  # enough draws that their standard deviation is known to about 13% (kanx.verdicts.CONSISTENT_Z)


class Plan(NamedTuple):
    """One rollout metric's rollouts: their length, their start indices, and the split they run
    on ("test", or "val" for a validation split's: kanx.data.metrics.validation_metrics). A plain
    (horizon, starts) pair is a test plan."""

    horizon: int
    starts: tuple[int, ...]
    split: str = "test"


def nudge(states: torch.Tensor, generator: torch.Generator, precision: torch.dtype = torch.float32) -> torch.Tensor:
    """``states`` with each component moved by one ulp of ``precision`` up or down at random. The
    ulp is the model's (its weights and activations are float32), not the data's: a float64
    state moved by one float64 ulp is the same state once the model casts it to float32."""
    up = torch.randint(0, 2, states.shape, generator=generator, device=states.device).bool()
    low = states.to(precision)
    toward = torch.where(up, torch.full_like(low, float("inf")), torch.full_like(low, float("-inf")))
    return states + (torch.nextafter(low, toward).to(states.dtype) - low.to(states.dtype))


def nudged_copies(states: torch.Tensor, draws: int, generator: torch.Generator) -> torch.Tensor:
    """``draws`` copies of ``states`` (..., R, q) along a new axis before R, each nudged (`nudge`)
    on its own: (..., draws, R, q)."""
    return nudge(states.unsqueeze(-3).expand(*states.shape[:-2], draws, *states.shape[-2:]), generator)


def record_plans(dataset: Dataset) -> dict[str, Plan]:
    """Every rollout metric a dynamical record holds, by its label in kanx.verdicts
    (``test_rmse``, ``rollout_rmse[h]``, and ``val_rmse`` with a validation split) -> its
    rollout plan, as kanx.data.metrics.evaluate_members computes it. The validation rollouts
    amplify the last bits as the test's do, so their metric gets the same ensemble."""
    plans = {f"{RECORD_ROLLOUT}[{h}]": Plan(*rollout_plan(dataset.name, dataset.n_test, h, None))
             for h in rollout_rungs(dataset.n_test)}
    assert dataset.horizon is not None  # a dynamical dataset's (kanx.data.Dataset checks it)
    plans = {"test_rmse": Plan(dataset.horizon, tuple(dataset.rollout_starts)), **plans}
    if dataset.n_val and dataset.val_horizon is not None:  # drawn after the test plans, whose draws stay as they were
        plans["val_rmse"] = Plan(dataset.val_horizon, tuple(dataset.val_rollout_starts), "val")
    return plans


@torch.no_grad()
def ulp_ensemble(dataset: Dataset, predict: Predict,
                 plans: Mapping[str, Plan | tuple[int, Sequence[int]]] | None = None,
                 draws: int = DEFAULT_DRAWS, seed: int = 0, every_step: bool = True) -> dict[str, torch.Tensor]:
    """Label -> the (draws,) RMSEs of that plan's rollouts started from one-ulp nudges of its
    states (its split's: test or validation), for one model (``predict``: raw (1, N, q) -> raw
    (1, N, p)). ``plans``: label -> Plan, or a (horizon, starts) pair of the test split; default
    every rollout metric of the record (`record_plans`).
    ``every_step``: nudge every step's prediction too, as another CPU's rounding differs at every
    step, not only at the start (the default: chosen by measurement, docs/RECORDS.md)."""
    if not dataset.dynamical:
        raise ValueError(f"dataset {dataset.name!r} is not a dynamical system: it has no rollouts to nudge")
    generator = torch.Generator().manual_seed(seed)
    if every_step:
        model = predict

        def predict(x: torch.Tensor) -> torch.Tensor:
            return nudge(model(x), generator)

    out = {}
    for label, plan in (plans or record_plans(dataset)).items():
        horizon, start_list, split = Plan(*plan)
        x, y = (getattr(dataset, f"{part}_{split}").unsqueeze(0) for part in ("x", "y"))  # (1, N, q), (1, N, p)
        starts = torch.tensor(start_list)
        nudged = nudged_copies(x[:, starts], draws, generator)  # (1, K, R, q)
        run = free_run(predict, nudged.flatten(1, 2), horizon)  # (1, K*R, H, p)
        target = y[:, starts[:, None] + torch.arange(horizon)]  # (1, R, H, p)
        run = run.unflatten(1, (draws, len(starts))).squeeze(0)  # (K, R, H, p)
        out[label] = rmse(run, target.expand_as(run))
    return out
