"""How many intra-op threads torch trains a pack with: `train.threads` (an integer, or auto).

torch's default is one thread per core of the machine. ``auto`` counts the cores this process may
use (its CPU affinity, its cgroup's CPU quota, SLURM_CPUS_PER_TASK) and gives a pack no more
threads than its work per step keeps busy. OMP_NUM_THREADS, when set (by the user, or by
kanx.plan and kanx.reproduce for their one-thread workers), wins over auto.

The count changes a run's numbers in their last bits (a reduction split over two threads adds in
another order), so ``auto`` depends only on what stays put on one machine (the cores a process
may use, the pack), never on the load of the moment: the same config and seed on the same
machine give the same numbers, busy or idle. The count is recorded (timing.threads) and is not
part of a run's identity (kanx.identity.NOT_RUN_DEFINING).

The load is dealt with by how long OpenMP's threads spin at a barrier instead (short_spins): with
libgomp's default of 300,000 spins, Concrete EFX M = 70 on 2 threads of a 2-core machine with one
core busy took 6 times as long as on one thread (21 times under auto's run), and a busier machine
made a pack of 10 35 times slower; with 10,000 spins, 2.7 times, as fast as the default on an idle
machine; passive waits (no spinning) cost 2.3 times on an idle machine (docs/BENCHMARK.md,
"Threads and compiling"). Torch-free but for ``use`` (and ``use_for``, which calls it), so the
choice is tested without threads.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

AUTO = "auto"
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")
# Parameter-samples a step (pack parameters x batch size) that keep one more thread busy; below,
# the OpenMP barriers of every small kernel cost more than the second thread gains. Provisional:
# scripts/benchmarks/bench_threads.py measures the knee on a quiet machine (docs/BENCHMARK.md).
WORK_PER_THREAD = 4_000_000


@dataclass(frozen=True)
class ThreadChoice:
    """The intra-op thread count of a pack, and where it came from (one phrase, for the log)."""

    count: int
    why: str


def check_setting(value, key: str = "train.threads") -> int | str:
    """train.threads as given: ``auto`` or an integer >= 1. Raises ValueError naming the bad value."""
    if value == AUTO or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(f"{key}={value!r} must be auto (kanx chooses from the cores and the pack) or an integer >= 1")


def omp_setting(environ: Mapping[str, str]) -> int | None:
    """OMP_NUM_THREADS as a count, where it is set to one (OpenMP reads only its first number)."""
    first = environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) >= 1 else None


def affinity_cores() -> list[int]:
    """The CPUs this process may run on (every CPU where the platform cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _cgroup_paths(proc_cgroup: Path) -> dict[str, str]:
    """This process's cgroup path per hierarchy from /proc/self/cgroup: '' for v2's unified one,
    else each v1 controller ('cpu', 'cpuacct', ...)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                out[controller] = parts[2].lstrip("/")
    return out


def _cgroup_folders(root: Path, proc_cgroup: Path, controller: str) -> list[Path]:
    """Where a controller's files may be, most specific first: the process's own cgroup, then the
    hierarchy's root (what a container whose cgroup namespace starts at its own cgroup sees).
    v1 mounts the cpu controller as cpu, cpu,cpuacct or cpuacct,cpu."""
    mounts = [root] if controller == "" else [root / name for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu")]
    path = _cgroup_paths(proc_cgroup).get(controller, "")
    return [*(mount / path for mount in mounts if path), *mounts]


def cgroup_cores(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_SELF_CGROUP) -> float | None:
    """The CPU quota of this process's cgroup in cores (quota / period), or None without one:
    cgroup v2's cpu.max ("max 100000" is none), else v1's cpu.cfs_quota_us (-1 is none)."""
    for folder in _cgroup_folders(root, proc_cgroup, ""):
        try:
            quota, period = (folder / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        except (OSError, ValueError):
            continue
    for folder in _cgroup_folders(root, proc_cgroup, "cpu"):
        try:
            quota_us = int((folder / "cpu.cfs_quota_us").read_text())
            period_us = int((folder / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
        return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us
    return None


def slurm_cores(environ: Mapping[str, str]) -> int | None:
    """SLURM_CPUS_PER_TASK, where SLURM set it."""
    value = environ.get("SLURM_CPUS_PER_TASK", "")
    return int(value) if value.isdigit() and int(value) >= 1 else None


def usable_cores(cpus: list[int], quota: float | None, slurm: int | None) -> int:
    """The cores this process may use: its CPUs, fewer under a cgroup quota (rounded up: a quota
    of 1.5 cores runs two threads at three quarters each) or SLURM's count."""
    limits = [len(cpus), *([math.ceil(quota)] if quota else []), *([slurm] if slurm else [])]
    return max(1, min(limits))


def threads_for_work(work: float) -> int:
    """The threads a pack's step keeps busy: one per WORK_PER_THREAD parameter-samples (at least one)."""
    return max(1, math.floor(work / WORK_PER_THREAD))


@dataclass(frozen=True)
class Cores:
    """What limits the threads of this process: its CPUs, its cgroup's quota and SLURM's count."""

    cpus: list[int]
    quota: float | None = None
    slurm: int | None = None

    @classmethod
    def of_this_process(cls, environ: Mapping[str, str]) -> Cores:
        return cls(affinity_cores(), cgroup_cores(), slurm_cores(environ))

    @property
    def usable(self) -> int:
        return usable_cores(self.cpus, self.quota, self.slurm)


def choose(setting: int | str, work: float, environ: Mapping[str, str] | None = None,
           cores: Cores | None = None) -> ThreadChoice:
    """The thread count of a pack whose step does ``work`` parameter-samples (pack_work): an
    integer setting as given; OMP_NUM_THREADS where set; else the fewer of the pack's need
    (threads_for_work) and the usable cores. ``environ`` and ``cores`` default to this process's."""
    environ = os.environ if environ is None else environ
    if setting != AUTO:
        return ThreadChoice(int(setting), f"train.threads={setting}")
    omp = omp_setting(environ)
    if omp is not None:
        return ThreadChoice(omp, f"OMP_NUM_THREADS={omp}")
    cores = Cores.of_this_process(environ) if cores is None else cores
    usable, need = cores.usable, threads_for_work(work)
    return ThreadChoice(min(need, usable), f"auto: {usable} usable core(s), the pack's step keeps {need} busy")


# OpenMP's environment that says how its threads wait; a user's own choice of either is kept.
WAIT_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
# Spins at a barrier before a thread sleeps (libgomp's default: 300,000): as fast as the default on
# an idle machine, and far less lost where another process holds a core (module docstring).
SPIN_COUNT = "10000"


def short_spins(environ=None, loaded=None) -> bool:
    """Set GOMP_SPINCOUNT=SPIN_COUNT for this process and the workers it starts, before torch loads
    OpenMP (which reads it once), unless the user set a wait policy or a spin count, or torch is
    already loaded. Returns whether it was set. With long spins, a thread whose core another
    process holds keeps its partner spinning at every barrier of the pack's many small kernels."""
    import sys

    environ = os.environ if environ is None else environ
    loaded = sys.modules if loaded is None else loaded
    if "torch" in loaded or any(k in environ for k in WAIT_SETTINGS):
        return False
    environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    return True


def pack_work(parameters: int, batch_size: int) -> float:
    """A step's work as choose() measures it: the pack's parameters times the batch size (each
    coefficient of each member is read for each sample of its batch)."""
    return float(parameters) * batch_size


def for_pack(setting: int | str, parameters: int, batch_size: int) -> ThreadChoice:
    """The thread count of a pack with this many parameters (all members) and batch size."""
    return choose(setting, pack_work(parameters, batch_size))


def use_for(trainer) -> int:
    """Choose and set the thread count of a kanx.trainer.Trainer's pack (train.threads); logs the
    choice and returns the count."""
    import logging

    cfg = trainer.train_cfg
    choice = for_pack(cfg.threads, sum(p.numel() for p in trainer.model.parameters()), cfg.batch_size)
    logging.getLogger("kanx").info(f"{choice.count} intra-op thread(s) ({choice.why})")
    return use(choice)


def use(choice: ThreadChoice) -> int:
    """Set torch's intra-op thread count to the choice; returns it. Kernels compiled before keep
    the count they were compiled with (inductor writes it into the C++), so a process trains its
    packs of one shape on the count of the first (kanx.compiling)."""
    import torch

    if torch.get_num_threads() != choice.count:
        torch.set_num_threads(choice.count)
    return choice.count
