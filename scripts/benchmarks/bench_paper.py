"""Whole-paper cost estimate: time a few hundred steps of every pack `make reproduce-tables`
(full scale) would train, on this device, and add grid updates and evaluation.

    python scripts/benchmarks/bench_paper.py [--steps 200] [--device cpu|cuda] [--threads N]
                                  [--group all] [--pack-size N] [--datasets ...]
    make bench-paper

Every sweep of the paper (14 datasets x 8 conditions, the betas and seeds of conf/) is
composed as `make reproduce-tables` composes it (kanx.plan), then cut into packs as each
`--group` says (default both: `condition`, datasets of one protocol mixed; `all`, conditions
mixed too; at `--pack-size`, default train.pack_size), and one (dataset, condition) sweep per
pack (`group=sweep`, the packing before mixed packs).
Packs of the same make-up (protocol, member count, condition superset) cost the same, so
one of each is timed: a warm-up epoch (torch.compile happens there), then whole epochs
until `--steps` optimizer steps, one grid update, and the evaluation of every member (for
the dynamical systems, the multi-step rollouts). A pack's estimate is
    epochs x batches / (steps/s) + (grid-update epochs) x (one update) + evaluation.
The estimate adds the packs' estimates (one process; `make reproduce-tables JOBS=n` runs n
at once). Nothing is written under results/. The last line is the headline: the faster
mixed packing against per-sweep packs.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch

from kanx.vocab import PAPER_DATASETS

DATASETS = list(PAPER_DATASETS)


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"


def make_up(pack) -> tuple:
    """What a pack's cost depends on: protocol and shapes, member count, condition superset."""
    conditions = [j.run.condition for j in pack]
    superset = tuple(any(getattr(c, flag) for c in conditions) for flag in ("edge_gates", "forward", "exits"))
    return (repr(pack[0].run.pack_key()), len(pack), superset, len(set(conditions)) > 1)


def time_pack(pack, steps: int, device: torch.device) -> dict:
    """Seconds per step, per grid update and for the evaluation of one pack."""
    from kanx.data import evaluate_members, stack_scalings
    from kanx.runner import pack_data
    from kanx.trainer import Trainer

    runs = [j.run for j in pack]
    datasets, scalings, x, y = pack_data(runs)
    t0 = time.perf_counter()
    p = Trainer(runs, x, y, datasets[0].n_train, device)
    init = time.perf_counter() - t0
    cfg = runs[0].train
    # Past every warmup and its grid-update burst, so forward connections are on, L_C is in
    # the loss, and no grid update falls inside the timed epochs, as for most epochs.
    p.epoch = max(cfg.warmup, cfg.fc_warmup) + cfg.grid_update_count * cfg.grid_update_every
    p.run_epoch()  # warm-up (compile)
    sync(device)
    done, t0 = 0, time.perf_counter()
    before = p.steps
    p.run_epochs(-(-steps // p.batches_per_epoch))  # with train.cuda_graph, one chunk of whole-epoch graphs
    done = p.steps - before
    sync(device)
    per_step = (time.perf_counter() - t0) / done
    t0 = time.perf_counter()
    p.model.update_grid(p.x, p.alive)
    sync(device)
    grid = time.perf_counter() - t0
    stacked = stack_scalings(scalings)
    t0 = time.perf_counter()
    evaluate_members(datasets, lambda xr: stacked.y_inverse(p.predict(stacked.x(xr)).to(xr.dtype).cpu()))
    sync(device)
    return {"per_step": per_step, "grid": grid, "eval": time.perf_counter() - t0, "init": init}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def pack_seconds(pack, t: dict) -> float:
    from kanx.jobs import steps_left
    from kanx.trainer import member_grid_updates

    grid_epochs = len(member_grid_updates(pack[0].run.train, [j.run.condition for j in pack]))
    return steps_left(pack) * t["per_step"] + grid_epochs * t["grid"] + t["eval"] + t["init"]


def estimate(packs, timings: dict) -> float:
    return sum(pack_seconds(p, timings[make_up(p)]) for p in packs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200, help="timed optimizer steps per pack make-up (default 200)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--group", nargs="+", default=["condition", "all"], choices=["condition", "all"],
                    help="the mixed packings to estimate (default both)")
    ap.add_argument("--pack-size", type=int, default=None, help="most runs per mixed pack (default: train.pack_size)")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True, help="train.compile (default on)")
    ap.add_argument("--cuda-graph", action=argparse.BooleanOptionalAction, default=False,
                    help="train.cuda_graph (CUDA only; default off)")
    ap.add_argument("--datasets", nargs="+", default=DATASETS, metavar="NAME")
    ap.add_argument("--per-sweep", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the per-sweep packing the headline compares with (default on; off halves a "
                         "time-boxed GPU job's share)")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch._dynamo.config.recompile_limit = 1024  # one compile per (stage, batch, M) shape
    os.environ.setdefault("KANX_DATA_DIR", str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    from kanx.jobs import launch, make_packs
    from kanx.plan import sweeps_jobs
    from kanx.trainer import describe_device

    device = torch.device(a.device)
    start = time.perf_counter()
    overrides = [f"device={a.device}", f"train.compile={str(a.compile).lower()}",
                 f"train.cuda_graph={str(a.cuda_graph).lower()}"]
    with tempfile.TemporaryDirectory() as tmp:
        configs = sweeps_jobs(a.datasets, overrides=[f"results_root={tmp}", *overrides])  # every condition of the paper
        jobs = launch(configs, pack=False, check=False, manifest=False).jobs  # packed below, each way compared
    size = a.pack_size or "train.pack_size"
    plans = {f"group={g}, pack size {size}": make_packs(jobs, a.pack_size, g) for g in a.group}
    if a.per_sweep:
        plans["per-sweep (group=sweep)"] = make_packs(jobs, None, "sweep")
    print(f"device: {describe_device(device)}; torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"{os.cpu_count()} logical CPUs, {platform.processor() or platform.machine()}")
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{len(jobs)} runs composed in {time.perf_counter() - start:.0f} s; timing {a.steps} steps per pack make-up, "
          f"compile={'on' if a.compile else 'off'}, cuda_graph={'on' if a.cuda_graph else 'off'}")
    for name, packs in plans.items():
        print(f"  {name}: {len(packs)} packs, sizes {dict(sorted(Counter(len(p) for p in packs).items()))}")

    timings: dict = {}
    todo = {make_up(p): p for packs in plans.values() for p in packs}
    for i, (key, pack) in enumerate(todo.items(), 1):
        timings[key] = t = time_pack(pack, a.steps, device)
        names = "+".join(dict.fromkeys(j.run.data.name for j in pack))
        conds = "+".join(dict.fromkeys(j.run.condition.name for j in pack))
        print(f"  [{i}/{len(todo)}] {names} {conds} M={len(pack)}: {1 / t['per_step']:.1f} steps/s, grid update "
              f"{t['grid'] * 1e3:.0f} ms, eval {t['eval']:.2f} s -> pack {duration(pack_seconds(pack, t))}", flush=True)

    print(f"\nload average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; benchmark took "
          f"{duration(time.perf_counter() - start)}")
    mixed_plans = [(name, packs) for name, packs in plans.items() if not name.startswith("per-sweep")]
    per_family: dict = {}
    for label, packs in plans.items():
        for p in packs:
            family = "nguyen" if p[0].run.data.name.startswith("nguyen") else p[0].run.data.name
            per_family.setdefault(family, {}).setdefault(label, 0.0)
            per_family[family][label] += pack_seconds(p, timings[make_up(p)])
    print("| family | " + " | ".join(plans) + " |")
    print("|---|" + "---|" * len(plans))
    for family, row in per_family.items():
        print(f"| {family} | " + " | ".join(duration(row.get(label, 0.0)) for label in plans) + " |")
    best_name, best = min(((name, estimate(packs, timings)) for name, packs in mixed_plans), key=lambda nt: nt[1])
    for name, packs in mixed_plans:
        print(f"  {name}: est. {duration(estimate(packs, timings))}")
    scope = "whole paper" if set(a.datasets) == set(DATASETS) else f"paper subset {'+'.join(a.datasets)}"
    versus = ""
    if a.per_sweep:
        t_sweep = estimate(plans["per-sweep (group=sweep)"], timings)
        versus = f"; {duration(t_sweep)} with per-sweep packs ({t_sweep / best:.2f} x)"
    print(f"{scope} ({len(jobs)} runs): est. {duration(best)} on {describe_device(device)} with mixed packs "
          f"({best_name}){versus}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
