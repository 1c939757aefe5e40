"""Run every sweep of the paper, then the analysis (what `make reproduce-tables` calls).

    kanx-reproduce [--scale full|smoke] [--datasets concrete ikeda ...] [--conditions EFX EFXI ...]
                   [--results DIR] [--launcher packed|basic|slurm] [--dry-run]

(or `python -m kanx.reproduce`, from an installed kanx or the root of a checkout.)

Each (dataset, condition) sweep is what `python -m kanx.train +condition=C dataset=D -m`
would run, with the dataset's beta list and seeds 0-9 from conf/. With the packing launcher
(the default) every sweep is composed in this process (kanx.plan) and packs are cut across
sweeps by `--group`: `all` mixes conditions and datasets that share the protocol,
`condition` mixes datasets only, `sweep` keeps one sweep per pack, and `auto` (the default)
is `all` on a GPU and `condition` on a CPU (kanx.jobs.resolve_group). `--jobs n` trains the
packs in n worker processes; `--launcher slurm` submits them as one SLURM array, a task per
pack. With `--launcher basic` each sweep is its own `python -m kanx.train ... -m` process.
Records already present are skipped, so re-running fills holes. `--scale smoke` runs the
same pipeline at toy scale (2 epochs, 2 seeds, every beta, short rollouts) into its own
results folder. `--conditions` takes the paper's eight (the default) or any other factor
set of E, F, X, N, I (EFXI, EFXN, ...: the studies of scripts/studies/).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kanx.cli import ArgumentParser, at_least, prog
from kanx.errors import report
from kanx.vocab import (
    BASELINE,
    DEFAULT_GROUP,
    DYNAMICAL,
    GROUPINGS,
    PAPER_CONDITIONS,
    PAPER_DATASETS,
    condition_name_problem,
    condition_option,
)

DATASETS = list(PAPER_DATASETS)
CONDITIONS = list(PAPER_CONDITIONS)


def smoke_overrides(dataset: str) -> list[str]:
    args = ["train.epochs=2", "train.warmup=1", "train.fc_warmup=1", "train.compile=false", "seed=0,1"]
    if dataset in DYNAMICAL:
        args.append("dataset.horizon=50")
    return args


def sweep_command(dataset: str, condition: str, scale: str, results: str, launcher: str, extra: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "kanx.train", f"+condition={condition}", f"dataset={dataset}", f"launcher={launcher}",
           f"results_root={results}"]
    if scale == "smoke":
        cmd += smoke_overrides(dataset)
    return cmd + extra + ["-m"]


def train_in_turn(sweeps: Sequence[Sequence[str]], who: str) -> int:
    """Each sweep (the overrides of one ``python -m kanx.train OVERRIDES -m``) in its own process,
    one after another, each command echoed; stops at the first that fails, naming it on stderr
    as ``who`` (a study script's name). Returns 0 or 1. Records resume, so the same call finishes
    an interrupted study and trains nothing finished."""
    for overrides in sweeps:
        cmd = [sys.executable, "-m", "kanx.train", *overrides, "-m"]
        print("+", shlex.join(cmd[1:]), flush=True)
        if subprocess.call(cmd) != 0:
            print(f"{who}: error: sweep failed: {shlex.join(cmd[1:])}", file=sys.stderr)
            return 1
    return 0


def run_sweep(cmd: list[str], env: dict, log_dir: Path | None) -> int:
    """One sweep; with sweeps running side by side, its output goes to LOG_DIR/<dataset>_<condition>.log."""
    if log_dir is None:
        return subprocess.call(cmd, env=env)
    log_dir.mkdir(parents=True, exist_ok=True)
    condition, dataset = (arg.split("=", 1)[1] for arg in cmd[3:5])  # +condition=C dataset=D
    with open(log_dir / f"{dataset}_{condition}.log", "a") as log:
        return subprocess.call(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


def run_packed(a, results: str) -> int:
    """Every sweep composed here, packs cut across them (kanx.plan), trained here or, with
    --launcher slurm, submitted as one SLURM array (one task per pack)."""
    import logging

    from kanx.errors import ConfigError, StorageError
    from kanx.plan import run_plan, sweeps_jobs

    logging.basicConfig(level=logging.INFO, format="%(message)s")

    def overrides(d: str) -> list[str]:
        return ((smoke_overrides(d) if a.scale == "smoke" else [])
                + [f"results_root={results}", f"launcher={a.launcher}"] + a.overrides)

    try:
        configs = sweeps_jobs(a.datasets, a.conditions, overrides)
        if a.launcher == "slurm":
            return submit_to_slurm(configs, a.group, a.pack_size, results)  # auto: per run, from its device
        failed = run_plan(configs, group=a.group, pack_size=a.pack_size, workers=a.jobs,
                          plan_dir=Path(results) / "logs")
    except ConfigError as e:
        return report("kanx.reproduce", e)
    except StorageError as e:
        return report("kanx.reproduce", f"{e}; training stopped: the runs recorded so far keep their records, "
                      "re-run to train the others", code=1)
    if failed:
        return report("kanx.reproduce", f"{failed} pack(s) or worker(s) failed; their runs hold `failed` records; "
                      "fix and re-run to fill the holes", code=1)
    return 0


def submit_to_slurm(configs, group: str, pack_size: int | None, results: str) -> int:
    """One SLURM array for every sweep: a task per pack, packs cut across the sweeps. The
    launcher's settings are the composed hydra.launcher.* (conf/launcher/slurm.yaml, the
    command line); its submitit folder is RESULTS/.submitit."""
    from omegaconf import OmegaConf

    from hydra_plugins.kanx_launcher.slurm_launcher import SlurmLauncher

    params = OmegaConf.to_container(configs[0][0].hydra.launcher, resolve=True)
    params.pop("_target_", None)
    params["submitit_folder"] = str(Path(results).absolute() / ".submitit" / "%j")
    if pack_size:
        params["pack_size"] = pack_size
    missing = SlurmLauncher(**params).submit_sweeps(configs, group)
    if missing:
        return report("kanx.reproduce", f"{missing} run(s) have no record (see the task logs above); "
                      "re-run to submit only those", code=1)
    return 0


def parser() -> ArgumentParser:
    # prog: as typed, kanx-reproduce or python -m kanx.reproduce
    p = ArgumentParser(prog=prog("kanx.reproduce"), description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", choices=["full", "smoke"], default="full",
                   help="full (the default): the paper's protocol; smoke: the same pipeline at toy scale (2 epochs, "
                        "2 seeds, short rollouts), into its own results folder")
    p.add_argument("--datasets", nargs="+", default=DATASETS, metavar="NAME",
                   help=f"datasets to sweep (default: the paper's {len(DATASETS)}: {' '.join(DATASETS)})")
    p.add_argument("--conditions", nargs="+", default=CONDITIONS, metavar="NAME",
                   help="conditions to sweep, in either case: the paper's eight (the default) or any other factor "
                        "set of E, F, X, N, I (EFXI, EN, ...)")
    p.add_argument("--results", default=None, help="results root (default outputs/paper, or outputs/smoke)")
    p.add_argument("--launcher", default="packed", choices=["packed", "basic", "slurm"],
                   help="packed (the default): every sweep composed here, packs cut across sweeps; basic: each sweep "
                        "its own `python -m kanx.train ... -m` process; slurm: the packs as one SLURM array")
    p.add_argument("--jobs", type=at_least(1), default=1,
                   help="packs (packed launcher) or sweeps (basic, slurm) trained at once, one thread each")
    p.add_argument("--group", choices=GROUPINGS, default=DEFAULT_GROUP,
                   help="packed launcher: how far packs mix sweeps (default auto: "
                        "all on a GPU, condition on a CPU, docs/BENCHMARK.md)")
    p.add_argument("--pack-size", type=at_least(1), default=None,
                   help="packed launcher: most runs per pack (default: train.pack_size)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the commands only, one a line, as they can be pasted into a shell")
    p.add_argument("--analysis", action=argparse.BooleanOptionalAction, default=True,
                   help="run the analysis after the sweeps (default on; --no-analysis: train only, e.g. in a "
                        "time-boxed job on an offline GPU node)")
    p.add_argument("overrides", nargs="*", help="extra Hydra overrides for every sweep (e.g. "
                                                "hydra.launcher.partition=gpu)")
    return p


def show(cmd: list[str], dry_run: bool) -> None:
    """A command as a shell line (interpreter and quoting included): bare under --dry-run, so the
    lines can be pasted or saved as a script; `+ `-prefixed as a trace before it runs."""
    print(shlex.join(cmd) if dry_run else f"+ {shlex.join(cmd)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = parser()
    a = p.parse_intermixed_args(argv)  # options may follow the overrides
    for d in a.datasets:
        if d not in DATASETS + ["sin_xy2"]:
            p.error(f"dataset {d!r} is not one of: {', '.join(DATASETS)}")
    # baseline, efx: case aside
    names = [BASELINE if c.lower() == BASELINE.lower() else c.upper() for c in a.conditions]
    for name in names:  # the paper's eight or any other factor set (EFXI, EN, ...)
        if condition_name_problem(name):
            p.error(f"--conditions: {condition_name_problem(name)}")
    a.conditions = [condition_option(name) for name in names]  # the config group's name
    results = a.results or ("outputs/smoke" if a.scale == "smoke" else "outputs/paper")

    commands = [sweep_command(d, c, a.scale, results, a.launcher, a.overrides)
                for d in a.datasets for c in a.conditions]
    for cmd in commands:
        show(cmd, a.dry_run)
    if a.launcher in ("packed", "slurm") and not a.dry_run:
        rc = run_packed(a, results)
        if rc:
            return rc
        if a.launcher == "slurm" and "hydra.launcher.wait=false" in a.overrides:
            print(f"reproduce: submitted; once the array has ended: python -m kanx.analyze {results}")
            return 0
    elif not a.dry_run:
        # Several sweeps at once pay off at toy scale, where process start-up dominates.
        env = os.environ | ({"OMP_NUM_THREADS": "1"} if a.jobs > 1 else {})
        with ThreadPoolExecutor(max_workers=a.jobs) as pool:
            codes = list(pool.map(lambda cmd: run_sweep(cmd, env, Path(results) / "logs" if a.jobs > 1 else None),
                                  commands))
        failed = [" ".join(cmd[3:5]) for cmd, rc in zip(commands, codes, strict=True) if rc != 0]
        if failed:
            logs = f" (logs: {Path(results) / 'logs'})" if a.jobs > 1 else ""
            return report("kanx.reproduce", f"{len(failed)} sweep(s) failed: {'; '.join(failed)}; "
                          f"fix and re-run to fill the holes{logs}", code=1)
    analyze = [sys.executable, "-m", "kanx.analyze", results, "--curves"]  # curves per cell, its seeds overlaid
    if not a.analysis:
        return 0
    show(analyze, a.dry_run)
    if a.dry_run:
        return 0
    return subprocess.call(analyze)  # which names the report it wrote


if __name__ == "__main__":
    sys.exit(main())
