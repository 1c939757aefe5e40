"""Issue #52: are the targets the paper trains on standardized, on the synthetic and dynamical
datasets? kanx standardizes every dataset's targets (settled on Concrete, docs/CALIBRATION.md),
so beta * L_C weighs against an MSE in units of the targets' variance. Trained on raw targets,
the same beta prunes 1 / var(y) times harder: about 52 times on Ecosystem (var 0.019), 36 on
Nguyen F5, 2.6 on Ikeda, and about 2 times more weakly on Nguyen F3 and F4 (var 1.8 and 2.1).

    python scripts/studies/target_scale.py run [--results results/calibration/ecosystem-protocol]
    python scripts/studies/target_scale.py departures [--results results/paper]
    python scripts/studies/target_scale.py shifted [--results results/paper]
    python scripts/studies/target_scale.py arms [--results results/calibration/ecosystem-protocol]

`run` trains the study's arms on Ecosystem (Baseline and F on raw targets to choose, seeds 0-4;
E, EX, EF and EFX at beta 0.005 and 0.1 to check, seeds 0-2; one training process at a time);
`departures` prints, from the committed analysis tables, each dataset's target variance beside
how far its gated cells' edge medians lie from the published ones; `shifted` reads kanx's own
edge curves at beta / var(y) (what raw targets would amount to) against the published cells;
`arms` prints the study's
seed-medians at the paper's reading beside the committed records of the same seeds and the
published values.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from kanx.analyze.published import as_printed, paper_published
from kanx.reproduce import train_in_turn

ROOT = Path(__file__).resolve().parents[2]
TABLES = "analysis/tables/absolute_{}.csv"
DATASETS = (*(f"nguyen_f{i}" for i in range(1, 11)), "ikeda", "ecosystem")
SEEDS = "0,1,2,3,4"
RAW = "dataset.standardize_targets=false"
# (conditions, betas or None for beta 0, seeds, extra overrides): the choice is made on Baseline
# and F; the gated pack only checks it (3 seeds: one core's time, about 30 min a pack of 12).
ARMS = (
    ("baseline,F", None, SEEDS, (RAW,)),
    ("E,EX", "0.005,0.1", "0,1,2", (RAW,)),
    ("EF,EFX", "0.005,0.1", "0,1,2", (RAW,)),
)


def train(results: Path) -> int:
    """Every arm, one training process after another (records resume if interrupted)."""
    return train_in_turn([["dataset=ecosystem", f"+condition={conditions}",
                           *([f"beta={betas}"] if betas is not None else []), f"seed={seeds}",
                           f"results_root={results}", *overrides, "hydra.launcher.group=all"]
                          for conditions, betas, seeds, overrides in ARMS], "target_scale.py")


def target_variance(dataset: str, data_seed: int = 0) -> float:
    """Mean over outputs of the raw training targets' variance (what raw targets scale the MSE by)."""
    from kanx.data.registry import load_dataset

    y = np.asarray(load_dataset(dataset, data_seed=data_seed).y_train)
    return float(y.var(axis=0).mean())


def edge_departure(ours: pd.DataFrame, published: pd.DataFrame, condition: str) -> tuple[float, int]:
    """Mean log(edges median / published edges median) over the condition's beta > 0 cells that
    both tables have, and the number of such cells. Positive: kanx keeps more edges."""
    def cells(table: pd.DataFrame) -> pd.Series:
        rows = table[(table["condition"] == condition) & (table["beta"].fillna(0) > 0)]
        return rows.set_index(rows["beta"].round(6))["edges_median"]

    a, b = cells(ours), cells(published)
    common = a.index.intersection(b.index)
    if common.empty:
        return math.nan, 0
    return float(np.mean([math.log(max(a[k], 1) / b[k]) for k in common])), len(common)


def departures(results: Path, datasets: Iterable[str] = DATASETS, conditions=("E", "EF")) -> pd.DataFrame:
    """One row per dataset: target variance and the mean log edge ratio of each condition."""
    rows = []
    for name in datasets:
        ours = pd.read_csv(results / TABLES.format(name))
        published = paper_published(name)
        row: dict = {"dataset": name, "var(y)": target_variance(name)}
        for condition in conditions:
            row[f"{condition} mean log edge ratio"], row[f"{condition} cells"] = edge_departure(
                ours, published, condition)
        rows.append(row)
    return pd.DataFrame(rows).sort_values("var(y)").reset_index(drop=True)


def edges_at(curve: pd.Series, beta: float) -> float:
    """Edges of a (beta > 0 -> edges median) curve at `beta`, interpolated linearly in log-log;
    NaN outside the curve's beta range (no extrapolation)."""
    curve = curve[curve.index > 0].sort_index()
    if curve.empty or not curve.index[0] <= beta <= curve.index[-1]:
        return math.nan
    logs = np.log(curve.index.to_numpy(dtype=float))
    return float(np.exp(np.interp(math.log(beta), logs, np.log(curve.clip(lower=1).to_numpy(dtype=float)))))


def shifted(results: Path, datasets: Iterable[str] = DATASETS, conditions=("E", "EF")) -> pd.DataFrame:
    """Per published gated cell: kanx's edges at the same beta, and at beta / var(y), the beta
    that raw targets would amount to with kanx's standardized ones (read off kanx's own curve,
    so only cells whose shifted beta lies inside kanx's beta range)."""
    rows = []
    for name in datasets:
        var = target_variance(name)
        ours = pd.read_csv(results / TABLES.format(name))
        published = paper_published(name)
        for condition in conditions:
            mine = ours[ours["condition"] == condition]
            curve = mine.set_index(mine["beta"].round(6))["edges_median"]
            for _, p in published[(published["condition"] == condition) & (published["beta"] > 0)].iterrows():
                same, raw = edges_at(curve, p["beta"]), edges_at(curve, p["beta"] / var)
                if math.isnan(same) or math.isnan(raw):
                    continue
                rows.append({"dataset": name, "condition": condition, "beta": p["beta"], "var(y)": var,
                             "beta / var(y)": p["beta"] / var, "paper": p["edges_median"], "kanx": same,
                             "kanx at beta / var(y)": raw,
                             "abs log ratio": abs(math.log(same / p["edges_median"])),
                             "abs log ratio shifted": abs(math.log(raw / p["edges_median"]))})
    return pd.DataFrame(rows)


def arm_of(record_path: Path) -> str:
    """The override folder of a record (…/<dataset>/<condition>/<arm>/beta=…,seed=…/record.json)."""
    return record_path.parent.parent.name


def arm_records(results: Path, dataset: str = "ecosystem", seeds: Iterable[int] | None = None) -> pd.DataFrame:
    """One row per finished record: arm, condition, beta, seed, the paper's reading (the rung of
    kanx/analyze/paper/readings.csv for a dynamical dataset, else the test RMSE), one-step RMSE,
    edges and depth."""
    from kanx.analyze.readings import paper_readings
    from kanx.record import Record

    rung = paper_readings().get(dataset)
    keep = None if seeds is None else set(seeds)
    rows = []
    for path in sorted((results / dataset).glob("*/*/*/record.json")):
        record = Record.read(path.parent)
        r, metrics = record.fields, record.metrics
        if record.status != "ok" or (keep is not None and r["seed"] not in keep):
            continue
        key = str(r["n_test"]) if rung == "whole" else str(rung)
        reading = metrics["test_rmse"] if rung is None else metrics["rollout_rmse"][key]
        rows.append({"arm": arm_of(path), "condition": r["condition"], "beta": float(r["beta"]), "seed": r["seed"],
                     "paper reading": reading, "one step": metrics.get("test_rmse_one_step", metrics["test_rmse"]),
                     "edges": metrics["contributing_edges"], "depth": metrics["depth"]})
    return pd.DataFrame(rows)


def arm_medians(records: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """Seed-medians per (arm, condition, beta) beside the published median [min, max]."""
    out = records.groupby(["arm", "condition", "beta"]).agg(
        seeds=("seed", "size"), reading=("paper reading", "median"), one_step=("one step", "median"),
        edges=("edges", "median"), depth=("depth", "median")).reset_index()
    pub = published.assign(beta=published["beta"].fillna(0.0))
    out = out.merge(pub[["condition", "beta", "rmse_median", "rmse_min", "rmse_max", "edges_median", "depth_median"]],
                    on=["condition", "beta"], how="left")
    shown = as_printed(out["reading"], published.attrs.get("decimals", {}), "rmse")  # as the fidelity table reads it
    out["in range"] = (shown >= out["rmse_min"]) & (shown <= out["rmse_max"])
    return out.rename(columns={"rmse_median": "paper", "rmse_min": "paper min", "rmse_max": "paper max",
                               "edges_median": "paper edges", "depth_median": "paper depth"})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("run", "departures", "shifted", "arms"))
    ap.add_argument("--results", type=Path, default=None,
                    help="results root (run, arms: results/calibration/ecosystem-protocol; departures: results/paper)")
    ap.add_argument("--dataset", default="ecosystem", choices=DATASETS, help="arms: the dataset to tabulate")
    ap.add_argument("--reference", type=Path, default=ROOT / "results" / "paper",
                    help="arms: the committed records set beside the study's (same seeds)")
    a = ap.parse_args(argv)
    study = ROOT / "results" / "calibration" / "ecosystem-protocol"
    if a.what == "run":
        return train(a.results or study)
    if a.what == "departures":
        table = departures(a.results or ROOT / "results" / "paper")
        print(table.to_markdown(index=False, floatfmt=".3g"))
        for condition in ("E", "EF"):
            rho = table[["var(y)", f"{condition} mean log edge ratio"]].corr(method="spearman").iloc[0, 1]
            print(f"\n{condition}: Spearman rank correlation of var(y) and the mean log edge ratio: {rho:.2f}")
        return 0
    if a.what == "shifted":
        table = shifted(a.results or ROOT / "results" / "paper")
        print(table.to_markdown(index=False, floatfmt=".3g"))
        summary = table.groupby(["dataset", "condition"])[["abs log ratio", "abs log ratio shifted"]].mean()
        print("\n" + summary.assign(cells=table.groupby(["dataset", "condition"]).size()).to_markdown(floatfmt=".3f"))
        both = table[["abs log ratio", "abs log ratio shifted"]].mean()
        print(f"\nall {len(table)} cells: mean abs log edge ratio {both.iloc[0]:.3f} as run, "
              f"{both.iloc[1]:.3f} read at beta / var(y)")
        return 0
    seeds = [int(s) for s in SEEDS.split(",")]
    ours = arm_records(a.results or study, a.dataset, seeds=seeds)
    reference = arm_records(a.reference, a.dataset, seeds=seeds)
    if ours.empty:
        print(f"target_scale.py: no finished records under {a.results or study}", file=sys.stderr)
        return 1
    reference = reference[reference.set_index(["condition", "beta"]).index.isin(
        ours.set_index(["condition", "beta"]).index)]
    published = paper_published(a.dataset)
    print(arm_medians(pd.concat([reference, ours]), published).to_markdown(index=False, floatfmt=".4g"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
