"""How far do a dynamical run's metrics move on another CPU, and does the one-ulp ensemble cover it?

kanx.evaluate calls a recorded metric "within tolerance" when it is within kanx.verdicts.RTOL of
the value recomputed here, and a chaotic rollout rung "consistent" when it lies within
CONSISTENT_Z standard deviations of the same rollouts started one float32 ulp apart. This script
measures both on committed runs: it rescores each run natively and under other CPU capabilities
(torch's ATEN_CPU_CAPABILITY and MKL's MKL_ENABLE_INSTRUCTIONS, read at start, so one
subprocess each), computes the one-ulp
ensemble natively, and prints, per capability, the largest relative difference of the metrics
that no rollout amplifies, and the distribution of |z| of every rollout metric against the
ensemble (the recorded value counts as one more machine: it was scored on another CPU). A
difference is measured as kanx.verdicts' tolerance measures it: against the value plus the
standard deviation of the test targets.

    python scripts/studies/verdict_spread.py results/paper/ikeda results/paper/ecosystem \\
        --per-dataset 12 --cache /tmp/scores.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

from kanx import records
from kanx.record import Record
from kanx.verdicts import RTOL, STOL, exact_or_tolerance

# Another CPU, as this one can play it: torch's own kernels (ATEN_CPU_CAPABILITY) and MKL's
# (MKL_ENABLE_INSTRUCTIONS) capped alike, to the x86 baseline and to AVX2 (make test-portable's legs).
CAPABILITIES = {"default+SSE4_2": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
                "avx2+AVX2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}}


def sample(roots: list[Path], per_dataset: int, seed: int) -> list[Path]:
    """``per_dataset`` finished runs with weights from each root, drawn at random (fixed seed)."""
    rng = random.Random(seed)
    out = []
    for root in roots:
        runs = sorted(p.parent for p in root.rglob(records.MODEL) if (p.parent / records.DONE).exists())
        out += sorted(rng.sample(runs, min(per_dataset, len(runs))))
    return out


def score_only(runs: list[str]) -> None:
    from kanx.evaluate import rescore

    print(json.dumps({run: rescore(Path(run)) for run in runs}))


def flat(metrics: dict) -> dict:
    return {(f"{k}[{h}]" if isinstance(v, dict) else k): x for k, v in metrics.items()
            for h, x in (v.items() if isinstance(v, dict) else [(None, v)])}


def root_of(run: str, roots: list[Path]) -> str:
    return next(str(root) for root in roots if Path(run).is_relative_to(root))


def quantile(ordered: list[float], q: float) -> str:
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.2f}" if ordered else "–"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("roots", nargs="*", type=Path, default=[Path("results/paper/ikeda"),
                                                            Path("results/paper/ecosystem")])
    ap.add_argument("--per-dataset", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, help="keep the other capabilities' scores in this JSON file, and reuse them")
    ap.add_argument("--score-only", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.score_only:
        score_only(a.score_only)
        return 0
    if a.per_dataset < 1:
        ap.error(f"--per-dataset {a.per_dataset}: give at least 1")
    runs = [str(r) for r in sample(a.roots, a.per_dataset, a.seed)]
    if not runs:
        ap.error(f"no finished run with {records.MODEL} under {', '.join(map(str, a.roots))}")
    machines = {"recorded": {r: Record.read(Path(r)).fields["metrics"] for r in runs}}
    cache = json.loads(a.cache.read_text()) if a.cache and a.cache.exists() else {}
    for cap, variables in CAPABILITIES.items():
        todo = [r for r in runs if r not in cache.get(cap, {})]
        if todo:
            env = {**os.environ, **variables, "OMP_NUM_THREADS": "1"}
            out = subprocess.run([sys.executable, __file__, "--score-only", *todo], env=env, check=True,
                                 capture_output=True, text=True)
            cache.setdefault(cap, {}).update(json.loads(out.stdout))
        machines[cap] = cache[cap]
    if a.cache:
        a.cache.write_text(json.dumps(cache))

    import torch

    from kanx.data.spread import ulp_ensemble
    from kanx.evaluate import _predictor, _rescored, one_thread
    from kanx.load import load_run, rebuild_dataset

    methods = {"start states only": False, "start states and every step": True}
    rows = {(m, name): {"rel": [], "z": []} for m in methods for name in machines}
    for run in runs:
        native, chaotic, _, scale = _rescored(Path(run))
        loaded = load_run(run)
        dataset = rebuild_dataset(loaded)
        with one_thread():
            draws = {m: {k: v.tolist()
                         for k, v in ulp_ensemble(dataset,
                                                  _predictor(loaded.model, loaded.scaling, loaded.gate_estimator),
                                                                 every_step=every).items()} if dataset.dynamical else {}
                     for m, every in methods.items()}
        native = flat(native)
        for m in methods:
            for name, metrics in machines.items():
                for label, value in flat(metrics[run]).items():
                    if label not in native or value is None or not isinstance(value, float):
                        continue
                    plan = chaotic(label)
                    row = rows[(m, name)]
                    if plan is None:
                        row["rel"].append((root_of(run, a.roots),
                                           abs(value - native[label]) / (abs(native[label]) + scale)))
                    elif exact_or_tolerance(value, native[label], scale) == "differs":
                        d = draws[m][plan]
                        sd = statistics.stdev(d)
                        row["z"].append(abs(value - statistics.fmean(d)) / sd if sd else math.inf)
    print(f"{len(runs)} runs ({', '.join(str(r) for r in a.roots)}), one-ulp ensembles of 32 natively "
          f"(torch {torch.backends.cpu.get_cpu_capability()}); RTOL = {RTOL:g}, STOL = {STOL:g}\n")
    print("| ensemble nudges | scored on | largest difference of an unamplified metric, relative to its value + the "
          "targets' sd | rollout metrics past tolerance | median abs z | 99th pct abs z | largest abs z |")
    print("|---|---|---|---|---|---|---|")
    for (m, name), row in rows.items():
        z = sorted(row["z"])
        print(f"| {m} | {name} | {max((r for _, r in row['rel']), default=0.0):.2e} | {len(z)} | {quantile(z, 0.5)} | "
              f"{quantile(z, 0.99)} | {quantile(z, 1.0)} |")
    print("\nThe largest difference of an unamplified metric, relative to its value + the targets' sd, by root:\n")
    others = [name for name in machines]
    print("| root | " + " | ".join(others) + " |")
    print("|---|" + "---|" * len(others))
    for root in a.roots:
        cells = [max((r for where, r in rows[(next(iter(methods)), name)]["rel"] if where == str(root)), default=0.0)
                 for name in others]
        print(f"| {root} | " + " | ".join(f"{c:.2e}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
