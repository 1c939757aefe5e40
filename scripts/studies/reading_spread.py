"""How far the paper's multi-step reading moves with the last bits of the arithmetic (#47, item 3).

A long free rollout of a chaotic map turns a last-bit difference into an unrelated trajectory,
so a seed's RMSE over a few long rollouts is a noisy statistic of those bits, and so, less, is
the seed-median a table prints. This measures that spread on the committed Baseline and F runs
(beta 0, every seed with model.pt) of Ikeda and Ecosystem, at every rung of the rollout ladder,
for two estimators of the rung's RMSE:

- tiling: the n_test // h rollouts of h steps that tile the test segment (what records hold,
  kanx.data.metrics.rollout_rmse; the native value is kanx.evaluate's scoring on this machine);
- windows: a rollout from every test state that allows h steps (n_test - h + 1 of them,
  kanx.data.metrics.overlapping_rollout_rmse); the whole segment is one window either way.

Perturbations of the native scoring (same weights, same data, one thread):

- ulp: the test states moved by one float32 ulp (the precision the model computes in; a float64
  ulp does not survive the model's cast to float32), up or down at random per coordinate,
  DRAWS draws (fixed seed), batched along the rollout axis;
- cpu: rescored in a subprocess under ATEN_CPU_CAPABILITY=default and =avx2 (the latter only on
  a host with more than AVX2), torch's vector kernels of other machines; and, for tiling, the
  value the record holds (scored on the machine the run trained on).

Prints markdown: per dataset and estimator, each condition's seed-median at every rung under
each perturbation and the spreads (max - min of the seed-median over the ulp draws and native;
over the CPUs; over all). --write puts the summary in kanx/analyze/paper/reading_spread.csv, which
the report prints beside the paper reading's RMSE; --raw keeps the per-run values in a JSON file
and reuses it when it exists (tables again without rescoring). One core: 21 CPU minutes for the
40 runs with 8 draws (50 minutes of wall time on a shared 2-core machine).

    python scripts/studies/reading_spread.py [RESULTS] [--draws 8] [--raw FILE.json] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from kanx.analyze.readings import SPREAD_FILE, paper_readings
from kanx.analyze.settle import DATASETS, ROWS, Settled, seed_list, settle_ladders
from kanx.data.dynamics import rollout_plan
from kanx.data.metrics import overlapping_rollout_rmse, rollout_rmse, rollout_rungs
from kanx.evaluate import _score_model, one_thread
from kanx.load import load_run, rebuild_dataset
from kanx.record import Record
from kanx.records import MODEL
from kanx.vocab import RECORD_ROLLOUT

ESTIMATORS = ("tiling", "windows")
CAPABILITIES = ("default", "avx2")
NATIVE, RECORD = "native", "record"


def run_dirs(results: Path, dataset: str, condition: str) -> list[Path]:
    """The condition's run folders with weights, in seed order."""
    runs = [p.parent for p in (results / dataset / condition).glob(f"*/*/{MODEL}")]
    return sorted(runs, key=lambda p: Record.read(p).fields["seed"])


def rung_name(h: int, n_test: int) -> str:
    return "whole" if h == n_test else str(h)


def ulp_nudged(x: torch.Tensor, draws: int, seed: int = 0) -> torch.Tensor:
    """``draws`` copies of x (N, q), each coordinate moved by one float32 ulp, up or down at
    random: (draws, N, q)."""
    g = torch.Generator().manual_seed(seed)
    x32 = x.to(torch.float32)
    ulp = (torch.nextafter(x32, torch.tensor(float("inf"))) - x32).to(x.dtype)
    signs = torch.randint(0, 2, (draws, *x.shape), generator=g).to(x.dtype) * 2 - 1
    return x + signs * ulp


def tiling_ladder(predict, x: torch.Tensor, y: torch.Tensor, name: str) -> dict[str, torch.Tensor]:
    """Tiling at every rung for members x (D, n_test, q): rung -> (D,)."""
    n_test = x.shape[1]
    plans = {rung_name(h, n_test): rollout_plan(name, n_test, h, None) for h in rollout_rungs(n_test)}
    return {rung: rollout_rmse(predict, x, y, *plan) for rung, plan in plans.items()}


def window_ladder(predict, x: torch.Tensor, y: torch.Tensor, whole: torch.Tensor) -> dict[str, torch.Tensor]:
    """Windows at every rung for members x (D, n_test, q): rung -> (D,); the whole segment is one
    window, the tiling's ``whole``."""
    n_test = x.shape[1]
    shorter = overlapping_rollout_rmse(predict, x, y, rollout_rungs(n_test)[:-1])
    return {**{rung_name(h, n_test): v for h, v in shorter.items()}, "whole": whole}


def measure(run_dir: Path, draws: int) -> list[dict]:
    """One run's values: native (for tiling kanx.evaluate's scoring), the record's, and each ulp
    draw's, for both estimators at every rung."""
    run = load_run(run_dir)
    ds = rebuild_dataset(run)
    key = {"dataset": ds.name, "condition": run.record["condition"], "seed": int(run.record["seed"])}
    rows = [{**key, "estimator": "tiling", "perturbation": RECORD, "rung": rung_name(int(h), ds.n_test), "value": v}
            for h, v in run.record["metrics"][RECORD_ROLLOUT].items()]
    # kanx.evaluate's own scoring (it also turns the compiled basis off for the rollouts below)
    scored = _score_model(run.model, run.scaling, run.gate_estimator, ds)[RECORD_ROLLOUT]
    q = ds.n_inputs

    def predict(x: torch.Tensor) -> torch.Tensor:  # members (D, N, q) as one batch of D * N states
        return torch.as_tensor(run.predict(x.reshape(-1, q))).reshape(*x.shape[:-1], -1)

    values: dict[str, dict[str, dict[str, torch.Tensor]]] = {}  # perturbation -> estimator -> rung -> (D,)
    with one_thread():
        tiling = {rung_name(int(h), ds.n_test): torch.tensor([v]) for h, v in scored.items()}
        windows = window_ladder(predict, ds.x_test[None], ds.y_test[None], tiling["whole"])
        values[NATIVE] = {"tiling": tiling, "windows": windows}
        if draws:
            x, y = ulp_nudged(ds.x_test, draws), ds.y_test.expand(draws, -1, -1)
            tiling = tiling_ladder(predict, x, y, ds.name)
            values["ulp"] = {"tiling": tiling, "windows": window_ladder(predict, x, y, tiling["whole"])}
    for perturbation, estimators in values.items():
        for estimator, ladder in estimators.items():
            for rung, members in ladder.items():
                names = [NATIVE] if perturbation == NATIVE else [f"ulp {k + 1}" for k in range(len(members))]
                rows += [{**key, "estimator": estimator, "perturbation": name, "rung": rung, "value": float(v)}
                         for name, v in zip(names, members, strict=True)]
    return rows


def all_runs(results: Path) -> list[Path]:
    return [r for d in DATASETS for c in ROWS for r in run_dirs(results, d, c)]


def measure_all(results: Path, draws: int, label: str) -> list[dict]:
    rows, start = [], time.perf_counter()
    runs = all_runs(results)
    for i, run_dir in enumerate(runs):
        rows += measure(run_dir, draws)
        elapsed = time.perf_counter() - start
        print(f"[{label}] {i + 1}/{len(runs)} {run_dir} ({elapsed:.0f} s)", file=sys.stderr, flush=True)
    return rows


def under_capability(results: Path, capability: str) -> list[dict]:
    """Native values rescored in a subprocess under ATEN_CPU_CAPABILITY (read at torch import)."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability}
    command = [sys.executable, __file__, str(results), "--worker"]
    out = subprocess.run(command, env=env, check=True, stdout=subprocess.PIPE, text=True)
    worker = json.loads(out.stdout)
    name = f"cpu {worker['capability'].lower()}"
    return [{**row, "perturbation": name} for row in worker["rows"] if row["perturbation"] == NATIVE]


def capabilities_below_native() -> list[str]:
    """The capabilities to rescore under: default always, avx2 where the host has more."""
    native = torch.backends.cpu.get_cpu_capability()
    return [c for c in CAPABILITIES if c == "default" or native.startswith("AVX512")]


def seed_medians(raw: pd.DataFrame) -> pd.DataFrame:
    """The seed-median per dataset, condition, estimator, rung and perturbation."""
    keys = ["dataset", "condition", "estimator", "rung", "perturbation"]
    return raw.groupby(keys, sort=False)["value"].median().unstack("perturbation")


def summary(raw: pd.DataFrame) -> pd.DataFrame:
    """A row per dataset, condition, estimator and rung: the native seed-median and its spreads."""
    medians = seed_medians(raw)
    ulp = [c for c in medians if c.startswith("ulp")]
    cpu = [c for c in medians if c.startswith("cpu") or c == RECORD]
    seeds = raw.groupby(["dataset", "condition"])["seed"].unique()
    table = medians[[NATIVE]].rename(columns={NATIVE: "native_median"})
    table["ulp_spread"] = medians[[NATIVE, *ulp]].max(axis=1) - medians[[NATIVE, *ulp]].min(axis=1)
    table["cpu_spread"] = medians[[NATIVE, *cpu]].max(axis=1) - medians[[NATIVE, *cpu]].min(axis=1)
    table["spread"] = medians.max(axis=1) - medians.min(axis=1)
    table = table.reset_index()
    pairs = zip(table["dataset"], table["condition"], strict=True)
    table.insert(2, "seeds", [seed_list(seeds[pair]) for pair in pairs])
    return table


def spread_markdown(raw: pd.DataFrame) -> str:
    """Per dataset and estimator: each condition's seed-median per rung under every perturbation."""
    medians, table = seed_medians(raw), summary(raw).set_index(["dataset", "condition", "estimator", "rung"])
    ulp = [c for c in medians if c.startswith("ulp")]
    cpu = [c for c in medians if c.startswith("cpu")]
    lines = []
    for (dataset, estimator), block in medians.groupby(level=["dataset", "estimator"], sort=False):
        has_record = RECORD in block and block[RECORD].notna().any()
        recorded = [RECORD] if has_record else []
        header = ["cond.", "rung", "native", f"ulp draws ({len(ulp)}): min", "max", *cpu, *recorded,
                  "ulp spread", "CPU spread", "all: spread"]
        lines += [f"### {dataset}, {estimator}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for (_, condition, _, rung), m in block.iterrows():
            s = table.loc[(dataset, condition, estimator, rung)]
            spreads = s[["ulp_spread", "cpu_spread", "spread"]]
            values = (m[NATIVE], m[ulp].min(), m[ulp].max(), *m[cpu], *m[recorded], *spreads)
            cells = [condition, rung, *(f"{v:.4f}" for v in values)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def settlings(raw: pd.DataFrame) -> dict[tuple[str, str, str], Settled]:
    """The settling rule (kanx.analyze.settle) on every (dataset, estimator, perturbation)'s ladders."""
    out = {}
    for (dataset, estimator, perturbation), rows in raw.groupby(["dataset", "estimator", "perturbation"], sort=False):
        curves = {c: {seed: dict(zip(r["rung"], r["value"], strict=True)) for seed, r in rows.groupby("seed")}
                  for c, rows in ((c, rows[rows["condition"] == c]) for c in ROWS)}
        out[(dataset, estimator, perturbation)] = settle_ladders(dataset, curves)
    return out


def settling_markdown(settled: dict[tuple[str, str, str], Settled]) -> str:
    """Per dataset and estimator: the rung settled on under every perturbation, and how close its
    rows come to the published medians (summed |log10 ratio|) natively and over the perturbations."""
    lines = ["| dataset | estimator | rung (native; every perturbation) | rows in range "
             "| summed abs log10 ratio: native (record) | min - max "
             "| Baseline native (min - max) | F native (min - max) |",
             "|---|---|---|---|---|---|---|---|"]
    keys = dict.fromkeys((d, e) for d, e, _ in settled)
    for dataset, estimator in keys:
        mine = {p: s for (d, e, p), s in settled.items() if (d, e) == (dataset, estimator)}
        native, record = mine[NATIVE], mine.get(RECORD)
        rungs = sorted({s.rung for s in mine.values()})
        distances = [s.best.distance for s in mine.values()]
        medians = {c: [s.best.medians[c] for s in mine.values()] for c in ROWS}
        recorded = f" ({record.best.distance:.4f})" if record else ""
        lines.append(f"| {dataset} | {estimator} | {native.rung}; {', '.join(rungs)} | {native.best.rows_in} | "
                     f"{native.best.distance:.4f}{recorded} | {min(distances):.4f} - {max(distances):.4f} | "
                     + " | ".join(f"{native.best.medians[c]:.4f} ({min(medians[c]):.4f} - {max(medians[c]):.4f})"
                                  for c in ROWS) + " |")
    return "\n".join(lines)


def verdict(settled: dict[tuple[str, str, str], Settled], dataset: str) -> str:
    """Whether the paper's reading of ``dataset`` would move to windows: only if, scored natively,
    their settled rung has at least as many Baseline and F rows in range and a summed |log10 ratio|
    no larger than the tiling's, natively and as recorded."""
    windows = settled[(dataset, "windows", NATIVE)]
    rivals = [settled[(dataset, "tiling", p)] for p in (NATIVE, RECORD) if (dataset, "tiling", p) in settled]
    if windows.rung == "whole" and all(t.rung == "whole" for t in rivals):
        return f"{dataset}: both settle at the whole segment, one rollout either way (one window): nothing to change"
    closer = all((windows.best.rows_in, -windows.best.distance) >= (t.best.rows_in, -t.best.distance) for t in rivals)
    against = ", ".join(f"{t.best.distance:.4f} at {t.rung}" for t in rivals)
    return (f"{dataset}: windows settle at {windows.rung} ({windows.best.rows_in} of {len(ROWS)} rows in range, "
            f"summed |log10 ratio| {windows.best.distance:.4f}) against the tiling's {against} (native, record): "
            + ("the paper's reading would move to windows (records need the new metric)" if closer
               else "the paper's reading stays the tiling"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="?", default="results/paper", type=Path)
    ap.add_argument("--draws", type=int, default=8, help="ulp draws per run (default: 8)")
    ap.add_argument("--raw", type=Path, help="JSON of the per-run values: read if it exists, else written")
    ap.add_argument("--write", action="store_true", help=f"write the summary into {SPREAD_FILE}")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # native values as JSON (under_capability)
    a = ap.parse_args(argv)
    if a.worker:
        rows = measure_all(a.results, 0, "worker")
        json.dump({"capability": torch.backends.cpu.get_cpu_capability(), "rows": rows}, sys.stdout)
        return 0
    if a.draws < 1:
        ap.error(f"--draws {a.draws}: give at least 1 ulp draw")
    start = time.perf_counter()
    if a.raw and a.raw.exists():
        rows = json.loads(a.raw.read_text())
    else:
        label = f"native + {a.draws} ulp draws, {torch.backends.cpu.get_cpu_capability()}"
        rows = measure_all(a.results, a.draws, label)
        for capability in capabilities_below_native():
            rows += under_capability(a.results, capability)
        if a.raw:
            a.raw.write_text(json.dumps(rows))
    raw = pd.DataFrame(rows)
    readings = paper_readings()
    print(f"Seed-medians of the rollout RMSE (raw units) under each perturbation; paper reading: "
          f"{', '.join(f'{d} {h}' for d, h in readings.items())}.\n")
    print(spread_markdown(raw))
    settled = settlings(raw)
    print("Settling (kanx.analyze.settle) on each estimator, natively and under every perturbation:\n")
    print(settling_markdown(settled))
    print("")
    for dataset in dict.fromkeys(raw["dataset"]):
        print(f"- {verdict(settled, dataset)}")
    if a.write:
        SPREAD_FILE.write_text(summary(raw).to_csv(index=False, float_format="%.6g", lineterminator="\n"))
        print(f"\nwrote {SPREAD_FILE}")
    print(f"\n{time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
