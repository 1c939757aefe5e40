"""Where a run's test error comes from: its worst test samples, their share of the squared
error, and whether the inputs of each stage lie inside what the stage saw in training.

    python scripts/studies/worst_test_points.py RUN_DIR [--top 3]

RUN_DIR is a finished run's folder with its weights (model.pt; weights are not kept in git, so
this runs where the run was trained). A run whose test RMSE is far from its cell's median with
a normal train RMSE usually owes it to a few samples; this says which, and at which stage the
network left the range of activations it was trained on (there the splines extrapolate).
"""

from __future__ import annotations

import argparse
import sys

import torch

from kanx.load import load_run, rebuild_dataset


def beyond(train: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """How far each row of x (N, D) lies outside the per-column range of train (n, D): (N,)."""
    lo, hi = train.min(0).values, train.max(0).values
    return torch.maximum(lo - x, x - hi).clamp(min=0).max(dim=1).values


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("--top", type=int, default=3, help="worst test samples to show (default 3)")
    a = p.parse_args(argv)
    run = load_run(a.run_dir)
    ds = rebuild_dataset(run)
    pred = run.predict(ds.x_test).reshape(-1)
    err = (pred - ds.y_test.reshape(-1).to(pred.dtype)).abs()
    sq = err.pow(2)
    worst = torch.topk(err, min(a.top, len(err))).indices
    unit = run.record.get("target_unit") or ""
    print(f"{a.run_dir}: test RMSE {sq.mean().sqrt():.4g} {unit} over {len(err)} samples "
          f"(record: {run.record['metrics'].get('test_rmse'):.4g}); train RMSE "
          f"{run.record['metrics'].get('train_rmse'):.4g}")
    scaled = lambda x: run.scaling.x(x.to(torch.float64)).unsqueeze(0).to(torch.float32)  # noqa: E731
    with torch.no_grad():
        gates = run.model.inference_gates(run.gate_estimator)
        train_in = [h[0] for h in run.model.stage_inputs(scaled(ds.x_train), gates)]
        test_in = [h[0] for h in run.model.stage_inputs(scaled(ds.x_test), gates)]
    outside = [beyond(tr, te) for tr, te in zip(train_in, test_in, strict=True)]  # per stage, every test sample
    for rank, i in enumerate(worst.tolist(), 1):
        rest = torch.cat([sq[:i], sq[i + 1 :]]).mean().sqrt()
        stages = ", ".join(f"{o[i].item():.3g}" for o in outside)
        print(f"#{rank}: sample {i}, target {ds.y_test.reshape(-1)[i]:.4g}, predicted {pred[i]:.4g}: "
              f"{sq[i] / sq.sum():.0%} of the squared error (RMSE without it {rest:.4g}); "
              f"beyond the training range of each stage's inputs (scaled units, stage 0 = the data): {stages}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
