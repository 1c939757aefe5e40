"""How many intra-op threads torch trains a pack with: `train.threads` (an integer, or auto).

torch's default is one thread per core of the machine. The packs kanx trains are small, so on a
machine where another process holds a core an OpenMP thread waits for that core at every
barrier: a toy training on 2 threads of a 2-core machine with one core busy took 14 times as long
as on one thread. ``auto`` therefore counts the cores this process may use (its CPU affinity,
its cgroup's CPU quota, SLURM_CPUS_PER_TASK), takes away those other processes keep busy now
(sampled from /proc/stat), and gives a pack no more threads than its work per step keeps busy.
OMP_NUM_THREADS, when set (by the user, or by kanx.plan and kanx.reproduce for their one-thread
workers), wins over auto.

The count changes a run's numbers in their last bits (a reduction split over two threads adds in
another order), as the device does, so it is recorded (timing.threads) and not part of a run's
identity (kanx.identity.NOT_RUN_DEFINING); the same count on the same machine gives the same
numbers. Torch-free but for ``use`` (and ``use_for``, which calls it), so the choice is tested
without threads or a busy machine.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

AUTO = "auto"
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")
PROC_STAT = Path("/proc/stat")
# /proc/stat's time columns, from the fourth on: idle and iowait are a core's idle time; steal
# (the eighth) is time a hypervisor gave another guest, which is as unavailable as a busy core.
_IDLE_COLUMNS = (3, 4)
BUSY_SAMPLE_S = 0.2  # how long the busy cores are sampled (once per pack)
# A core counts as free when less than this share of it is busy: a process waking now and then
# (a shell, a logger) leaves it free; one training beside this one does not.
BUSY_SLACK = 0.3
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


def cpu_times(stat: Path = PROC_STAT) -> dict[int, tuple[int, int]]:
    """Each CPU's (busy, total) time so far from /proc/stat, in clock ticks; {} where unreadable."""
    out: dict[int, tuple[int, int]] = {}
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        name, *columns = line.split()
        if not (name.startswith("cpu") and name[3:].isdigit()):
            continue
        ticks = [int(c) for c in columns[:8]]
        idle = sum(ticks[i] for i in _IDLE_COLUMNS if i < len(ticks))
        out[int(name[3:])] = (sum(ticks) - idle, sum(ticks))
    return out


def busy_between(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], cpus: list[int]) -> float:
    """How many of ``cpus`` other processes kept busy between two cpu_times() (this one sleeps
    in between): the sum of each CPU's busy share."""
    busy = 0.0
    for cpu in cpus:
        if cpu in before and cpu in after:
            spent, total = (a - b for a, b in zip(after[cpu], before[cpu], strict=True))
            busy += spent / total if total > 0 else 0.0
    return busy


def busy_cores(cpus: list[int], seconds: float = BUSY_SAMPLE_S, stat: Path = PROC_STAT) -> float:
    """The cores among ``cpus`` that other processes keep busy now, sampled over ``seconds``
    (0 where /proc/stat is not there: the machine's load average cannot tell whose it is)."""
    before = cpu_times(stat)
    if not before:
        return 0.0
    time.sleep(seconds)
    return busy_between(before, cpu_times(stat), cpus)


def free_cores(cpus: int, usable: int, busy: float) -> int:
    """The threads that fit beside other processes' work: of ``cpus`` CPUs this process may run on,
    ``busy`` are kept busy by others; at most ``usable`` (a quota or SLURM's count may allow fewer
    than the CPUs), at least one."""
    return max(1, min(usable, math.floor(cpus - busy + 1 - BUSY_SLACK)))


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


def choose(setting: int | str, work: float, environ: Mapping[str, str] | None = None, cores: Cores | None = None,
           sample_busy: Callable[[list[int]], float] = busy_cores) -> ThreadChoice:
    """The thread count of a pack whose step does ``work`` parameter-samples (pack_work): an
    integer setting as given; OMP_NUM_THREADS where set; else the fewest of the pack's need
    (threads_for_work) and the usable cores that other processes leave free (``sample_busy``
    of the process's CPUs). ``environ`` and ``cores`` default to this process's."""
    environ = os.environ if environ is None else environ
    if setting != AUTO:
        return ThreadChoice(int(setting), f"train.threads={setting}")
    omp = omp_setting(environ)
    if omp is not None:
        return ThreadChoice(omp, f"OMP_NUM_THREADS={omp}")
    cores = Cores.of_this_process(environ) if cores is None else cores
    usable, need = cores.usable, threads_for_work(work)
    if need == 1 or usable == 1:  # nothing to sample: one thread either way
        return ThreadChoice(1, f"auto: {usable} usable core(s), the pack's step keeps {need} busy")
    busy = sample_busy(cores.cpus)
    return ThreadChoice(min(need, free_cores(len(cores.cpus), usable, busy)),
                        f"auto: {usable} usable core(s), {busy:.1f} kept busy by other processes, the pack's step "
                        f"keeps {need} busy")


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
