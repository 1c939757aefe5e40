"""How the multi-step test RMSE of a dynamical dataset depends on the rollout protocol.

    python scripts/studies/rollout_probe.py RUN_DIR|ROOT ... [--max-horizon 60] [--out DIR]

For each finished run (Ikeda or Ecosystem) this rebuilds its test segment and free-runs the
trained model from *every* test state that leaves room for --max-horizon steps, then prints

  - the error along the rollout: RMSE after h steps (mean over starts), raw and standardized
    (each state variable divided by its training std), for a few h;
  - the saturation level of a free rollout of a chaotic system, sqrt(2 var) (the RMSE of two
    independent points on the attractor), from the test segment;
  - the test RMSE each protocol would record: one rollout over the whole test segment (the
    protocol of the records before this probe) and n_test // H rollouts of H steps tiling it.

A ROOT argument stands for every finished run under it. With --out DIR it writes
protocols.csv (one row per run and protocol), curve.csv (RMSE after h steps per run) and
curve.png (the standardized curves, one line per run); scripts/studies/calibrate.py reads the CSVs.
models (model.pt) are not committed, so the CSVs are the committed evidence.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from kanx.data.dynamics import free_run
from kanx.load import load_run, rebuild_dataset

HORIZONS = (1, 2, 5, 10, 20, 50)


def squared_errors(run, ds, starts: np.ndarray, horizon: int) -> np.ndarray:
    """(R, H, p) squared errors of free rollouts of `horizon` steps from test states `starts`."""
    predict = lambda x: run.predict(x.reshape(-1, x.shape[-1])).reshape(x.shape)  # noqa: E731
    x0 = ds.x_test[torch.as_tensor(starts)].unsqueeze(0).to(torch.float64)  # (1, R, q)
    with torch.no_grad():
        path = free_run(predict, x0, horizon)[0].numpy()  # (R, H, q)
    target = ds.y_test.numpy()[starts[:, None] + np.arange(horizon)]  # (R, H, p)
    return (path - target) ** 2


def probe(run_dir: Path, max_horizon: int) -> dict:
    run = load_run(run_dir)
    ds = rebuild_dataset(run)
    n_test = ds.y_test.shape[0]
    std = ds.y_train.numpy().std(axis=0)
    every = np.arange(n_test - max_horizon + 1)
    se = squared_errors(run, ds, every, max_horizon)  # (R, H, p)
    curve_raw = np.sqrt(se.mean(axis=(0, 2)))
    curve_std = np.sqrt((se / std**2).mean(axis=(0, 2)))
    y = ds.y_test.numpy()
    saturation_raw = float(np.sqrt(2 * y.var(axis=0).mean()))
    saturation_std = float(np.sqrt(2 * (y.var(axis=0) / std**2).mean()))
    whole = squared_errors(run, ds, np.array([0]), n_test)
    protocols = {"whole segment (1 rollout)": (float(np.sqrt(whole.mean())), float(np.sqrt((whole / std**2).mean())))}
    for h in (5, 10, 20, 50):
        tiles = np.arange(n_test // h) * h
        sq = squared_errors(run, ds, tiles, h)
        protocols[f"{n_test // h} rollouts of {h}"] = (float(np.sqrt(sq.mean())), float(np.sqrt((sq / std**2).mean())))
    return {
        "run": run_dir, "record": run.record, "curve_raw": curve_raw, "curve_std": curve_std,
        "saturation": (saturation_raw, saturation_std), "protocols": protocols,
    }


def run_dirs(paths) -> list[Path]:
    """The finished runs named: a folder with a model.pt, or every one below a folder."""
    out = []
    for p in paths:
        out += [p] if (p / "model.pt").exists() else sorted(m.parent for m in p.rglob("model.pt"))
    return out


def write_tables(results: list[dict], out: Path) -> None:
    import pandas as pd

    rows, curves = [], []
    for r in results:
        rec = r["record"]
        who = {"dataset": rec.get("dataset"), "condition": rec.get("condition"), "beta": rec.get("beta"),
               "seed": rec.get("seed"), "one_step_rmse": rec["metrics"].get("test_rmse_one_step")}
        sat_raw, sat_std = r["saturation"]
        for name, (raw, std) in r["protocols"].items():
            rows.append({**who, "protocol": name, "rmse_raw": raw, "rmse_std": std, "saturation_std": sat_std,
                         "saturation_raw": sat_raw})
        curves += [{**who, "h": h + 1, "rmse_raw": raw, "rmse_std": std}
                   for h, (raw, std) in enumerate(zip(r["curve_raw"], r["curve_std"], strict=True))]
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / "protocols.csv", index=False, float_format="%.6g")
    pd.DataFrame(curves).to_csv(out / "curve.csv", index=False, float_format="%.6g")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--max-horizon", type=int, default=60)
    ap.add_argument("--out", type=Path, default=None, help="write protocols.csv, curve.csv and curve.png here")
    args = ap.parse_args(argv)
    results = [probe(d, args.max_horizon) for d in run_dirs(args.runs)]
    if args.out:
        write_tables(results, args.out)
    for r in results:
        rec = r["record"]
        print(f"\n{r['run']}  ({rec.get('condition')}, beta {rec.get('beta')}, seed {rec.get('seed')}; "
              f"recorded test_rmse {rec['metrics'].get('test_rmse'):.4g}, one-step "
              f"{rec['metrics'].get('test_rmse_one_step'):.3g})")
        sat_raw, sat_std = r["saturation"]
        print(f"  saturation sqrt(2 var): raw {sat_raw:.4g}, standardized {sat_std:.4g}")
        print("  RMSE after h steps (mean over every start):  " + "  ".join(
            f"h={h}: {r['curve_raw'][h - 1]:.3g} raw / {r['curve_std'][h - 1]:.3g} std" for h in HORIZONS
            if h <= args.max_horizon))
        for name, (raw, std) in r["protocols"].items():
            print(f"  {name:28s} raw {raw:.4g}   standardized {std:.4g}   ({std / sat_std:.0%} of saturation)")
    if args.out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        datasets = sorted({r["record"].get("dataset") for r in results})
        fig, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 4), squeeze=False)
        h = np.arange(1, args.max_horizon + 1)
        for ax, name in zip(axes[0], datasets, strict=True):
            mine = [r for r in results if r["record"].get("dataset") == name]
            for r in mine:
                rec = r["record"]
                ax.semilogy(h, r["curve_std"], lw=1,
                            label=f"{rec.get('condition')} beta={rec.get('beta')} seed={rec.get('seed')}")
            ax.axhline(mine[0]["saturation"][1], color="k", ls="--", lw=1, label="saturation sqrt(2 var)")
            ax.set_title(name)
            ax.set_xlabel("steps h of free rollout")
            ax.set_ylabel("RMSE after h steps (standardized, mean over starts)")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.out / "curve.png", dpi=120)
        print(f"\nwrote {args.out}/protocols.csv, curve.csv, curve.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
