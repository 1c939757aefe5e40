"""Speed benchmark: kanx packed training against pykan 0.2.8 in speed mode, in one run.

    python scripts/benchmarks/bench.py [--quick] [--threads N] [--compile/--no-compile] [--device cpu|cuda] [--profile]
    make bench                        (installs the bench extra, then runs this)

Workloads (issue "Packed training ... and a benchmark against pykan"):
  - Concrete EFX: width [13, 13, 13, 1], batch 64, 824 rows;
  - Nguyen EFX:   width [1, 5, 5, 5, 1], batch 128, 1024 rows;
  rows are random (x ~ U(-1, 1), y ~ N(0, 1)), G = 10, K = 3.

kanx trains M = 1, 10 and 70 members as one pack (a Trainer) (condition EFX, warmup = 0 and
fc_warmup = 0 so forward connections are on and beta > 0 puts L_C in the loss from the
first step, grid updates off). One kanx step is one minibatch Adam step of all M members;
its model-steps/s is M times its steps/s. Timing covers whole epochs (Trainer.run_epoch), so
the per-epoch work (reshuffle, gate noise, divergence check) is included.

pykan-speed is ``MultKAN(width, grid=10, k=3, auto_save=False).speed()`` as in
``../shared/reference/kan-implementations.md`` section 6: one step = zero_grad + forward +
MSE + backward + Adam(lr 1e-3) on a minibatch of a reshuffled set (the last batch of an
epoch is partial), on the same rows and batch size as kanx. Grid updates are not timed.

Protocol: every cell is warmed up first (torch.compile happens there; epochs run until
an epoch's time settles), then the cells are measured in interleaved repeats, each repeat
30 warm-up steps (kanx: whole epochs, at most about 1 s of them) and then about --seconds
of timed steps; the table reports the median of the repeats. Each repeat also records
the process's CPU seconds per wall second: one far below the thread count was slowed by
other processes on the host and is measured again (bounded, see MAX_TRIES). The ratio
column is a row's model-steps/s over the median pykan-speed steps/s of the same
architecture measured in this run. The last line is the headline.

--device cuda runs both sides on the GPU (pykan as ``MultKAN(..., device='cuda')``): timed
steps end with a device synchronize, and the cpu/wall contention check is off, since a
GPU run's CPU share says nothing about the host's other load.

--profile prints torch.profiler's top ops for one epoch (13 steps) of packed Concrete
EFX at M = 70 after warm-up, instead of the benchmark.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import torch

PYKAN_VERSION = "0.2.8"
INSTALL_HINT = ("pykan is not installed: run `make bench` (installs the bench extra, pip install -e '.[bench]'), "
                "or pip install pykan==0.2.8 sympy scikit-learn pyyaml tqdm")


@dataclass(frozen=True)
class Arch:
    name: str
    width: tuple[int, ...]
    batch: int
    rows: int

    @property
    def label(self) -> str:
        return "-".join(map(str, self.width))


ARCHS = (
    Arch("Concrete EFX", (13, 13, 13, 1), batch=64, rows=824),
    Arch("Nguyen EFX", (1, 5, 5, 5, 1), batch=128, rows=1024),
)
PACK_SIZES = (1, 10, 70)
BETAS = (0.001, 0.01, 0.1)  # cycled over members; all > 0, so L_C is in every member's loss
GRAPH_CHUNK = 50  # epochs between host reads with --cuda-graph: the curve cadence of a 10,000-epoch run
WARM_STEPS = 30  # untimed steps before each timed repeat (as the reference) ...
WARM_MAX_SECONDS = 1.0  # ... or whole kanx epochs for at least this long, whichever ends first
QUIET_SHARE = 0.9  # a repeat is uncontended when the process got >= 90% of its threads' CPU time
MAX_TRIES = 3  # measurements of one repeat at most, while contended ...
RETRY_BUDGET_S = 420.0  # ... and while the run is younger than this (make bench stays < 10 min)


def random_rows(arch: Arch, M: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(M, arch.rows, arch.width[0], generator=g) * 2 - 1
    y = torch.randn(M, arch.rows, arch.width[-1], generator=g)
    return x, y


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so a timer read after it counts that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(call, steps_per_call: int, seconds: float, device: torch.device) -> tuple[float, float]:
    """(steps/s, CPU seconds per wall second) of repeated call()s for about ``seconds``."""
    synchronize(device)
    steps, t0, c0 = 0, time.perf_counter(), time.process_time()
    while True:
        call()
        steps += steps_per_call
        if time.perf_counter() - t0 >= seconds:
            synchronize(device)
            elapsed = time.perf_counter() - t0
            return steps / elapsed, (time.process_time() - c0) / elapsed


# ------------------------------------------------------------------ the cells


class Baseline:
    """kanx as of another commit, importable beside this checkout's kanx in one process.

    ``git archive REV kanx`` is unpacked into a temporary folder. Its package is loaded from
    there (its submodules then resolve through the package's own __path__) and its modules kept
    aside; ``active()`` swaps them into sys.modules for the duration of a call (building a
    Trainer, running epochs), so lazy imports inside kanx resolve to the same commit, and puts
    this checkout's modules back afterwards.
    """

    def __init__(self, rev: str):
        repo = Path(__file__).resolve().parents[2]
        self.rev = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", rev], check=True,
                                  capture_output=True, text=True).stdout.strip()
        self.dir = tempfile.mkdtemp(prefix=f"kanx-{self.rev}-")
        archive = subprocess.run(["git", "-C", str(repo), "archive", self.rev, "kanx"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", self.dir], input=archive, check=True)
        # kanx/_version.py is written at install time and git-ignored: without one of its own, REV's
        # kanx would find an editable install's (another checkout's module, which check() refuses).
        (Path(self.dir) / "kanx" / "_version.py").write_text(f"version = '0+g{self.rev}'\n")
        # The trainer was kanx/training.py's Pack before 44a8b8b. Its name is looked up in the archive:
        # an editable install finds any kanx.* module missing from REV in this checkout, and the
        # cell would silently mix the two commits' code.
        self.trainer_module = "kanx.trainer" if (Path(self.dir) / "kanx" / "trainer.py").exists() else "kanx.training"
        self.modules: dict = {}
        with self.active():
            importlib.import_module(self.trainer_module)
            self.check()

    def check(self) -> None:
        """Every kanx module loaded while REV is active comes from REV's folder."""
        strays = [m.__file__ for k, m in sys.modules.items() if (k == "kanx" or k.startswith("kanx."))
                  and getattr(m, "__file__", None)
                  and not Path(m.__file__).is_relative_to(self.dir)]
        assert not strays, f"baseline {self.rev} loaded modules of this checkout: {strays}"

    @staticmethod
    def _take() -> dict:
        return {k: sys.modules.pop(k) for k in list(sys.modules) if k == "kanx" or k.startswith("kanx.")}

    def _load_package(self) -> None:
        """REV's kanx package into sys.modules, from its folder (not from sys.path, which leads to this checkout's)."""
        init = Path(self.dir) / "kanx" / "__init__.py"
        spec = importlib.util.spec_from_file_location("kanx", init, submodule_search_locations=[str(init.parent)])
        package = importlib.util.module_from_spec(spec)
        sys.modules["kanx"] = package
        spec.loader.exec_module(package)

    @contextlib.contextmanager
    def active(self):
        ours = self._take()
        sys.modules.update(self.modules)
        try:
            if "kanx" not in sys.modules:
                self._load_package()
            yield
        finally:
            self.modules = self._take()
            sys.modules.update(ours)

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class KanxCell:
    """A kanx Trainer of M EFX members, kept alive across repeats."""

    def __init__(self, arch: Arch, M: int, compile: bool, device: torch.device, baseline: Baseline | None = None,
                 cuda_graph: bool = False):
        self.baseline, self.cuda_graph = baseline, cuda_graph
        with self.context():
            self._build(arch, M, compile, device)
        self.impl = (("kanx packed" if compile else "kanx packed (eager)") + (" graph" if cuda_graph else "")
                     + (f" @{baseline.rev}" if baseline else ""))

    def context(self):
        """This checkout's kanx, or the baseline commit's while it runs."""
        return self.baseline.active() if self.baseline else contextlib.nullcontext()

    def _build(self, arch: Arch, M: int, compile: bool, device: torch.device) -> None:
        from kanx.config import DataConfig, RunConfig, TrainConfig
        from kanx.kan.network import Condition, KANSpec
        from kanx.kan.objective import Costs

        module = importlib.import_module(self.baseline.trainer_module if self.baseline else "kanx.trainer")
        Trainer = getattr(module, "Trainer", None) or module.Pack
        self.arch, self.M, self.compiled, self.device = arch, M, compile, device
        train = TrainConfig(epochs=10**9, batch_size=arch.batch, warmup=0, fc_warmup=0,
                            grid_updates=False, compile=compile, **({"cuda_graph": True} if self.cuda_graph else {}))
        runs = [
            RunConfig(DataConfig(arch.name, s), Condition.from_name("EFX"), KANSpec(arch.width),
                      Costs(), "threshold", train, BETAS[s % len(BETAS)], s, device=device.type)
            for s in range(M)
        ]
        x, y = random_rows(arch, M)
        self.pack = Trainer(runs, x, y, arch.rows, device)
        if self.baseline:
            self.baseline.check()
        self.steps_per_epoch = math.ceil(arch.rows / arch.batch)

    def warm_up(self, max_seconds: float = 180.0) -> str:
        with self.context():
            done = self._warm_up(max_seconds)
            if self.baseline:  # the epochs' lazy imports too
                self.baseline.check()
            return done

    def _warm_up(self, max_seconds: float) -> str:
        """Epochs until an epoch's time settles (the first ones compile)."""
        start, times = time.perf_counter(), []
        while True:
            t0 = time.perf_counter()
            self.pack.run_epoch()
            synchronize(self.device)
            times.append(time.perf_counter() - t0)
            settled = len(times) >= 4 and abs(times[-1] - times[-2]) <= 0.15 * times[-2]
            if settled or time.perf_counter() - start > max_seconds or len(times) >= 200:
                return (f"{len(times)} epochs in {time.perf_counter() - start:.1f} s (first {times[0]:.2f} s, last "
                        f"{times[-1] * 1e3:.0f} ms)")

    def measure(self, seconds: float) -> tuple[float, float]:
        with self.context():
            return self._measure(seconds)

    def _measure(self, seconds: float) -> tuple[float, float]:
        steps, t0 = 0, time.perf_counter()
        while steps < WARM_STEPS and (steps == 0 or time.perf_counter() - t0 < WARM_MAX_SECONDS):
            self.pack.run_epoch()
            steps += self.steps_per_epoch
        if self.cuda_graph:  # whole-epoch graphs, read back by the host once per chunk (as a run's curve cadence does)
            return timed(lambda: self.pack.run_epochs(GRAPH_CHUNK), self.steps_per_epoch * GRAPH_CHUNK, seconds,
                         self.device)
        return timed(self.pack.run_epoch, self.steps_per_epoch, seconds, self.device)


class PykanCell:
    """pykan 0.2.8 MultKAN in speed mode with Adam(lr 1e-3), reshuffled minibatches."""

    impl, M = "pykan-speed", 1

    def __init__(self, arch: Arch, device: torch.device):
        from kan import MultKAN

        self.arch, self.device = arch, device
        self.model = MultKAN(width=list(arch.width), grid=10, k=3, auto_save=False, device=device).speed()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        x, y = random_rows(arch, 1)
        self.x, self.y = x[0].to(device), y[0].to(device)
        self.g = torch.Generator().manual_seed(0)
        self.batches: list[torch.Tensor] = []

    def step(self) -> None:
        if not self.batches:
            self.batches = list(torch.randperm(self.arch.rows, generator=self.g).split(self.arch.batch))[::-1]
        idx = self.batches.pop().to(self.device)
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(self.x[idx]), self.y[idx])
        loss.backward()
        self.opt.step()

    def warm_up(self) -> str:
        t0 = time.perf_counter()
        for _ in range(WARM_STEPS):
            self.step()
        synchronize(self.device)
        return f"{WARM_STEPS} steps in {time.perf_counter() - t0:.1f} s"

    def measure(self, seconds: float) -> tuple[float, float]:
        for _ in range(WARM_STEPS):
            self.step()
        return timed(self.step, 1, seconds, self.device)


# ------------------------------------------------------------------ report


def machine_lines(threads: int, device: torch.device) -> list[str]:
    from kanx.trainer import describe_device

    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    return [
        f"machine: {model}, {os.cpu_count()} logical CPUs; torch {torch.__version__}, pykan "
        f"{metadata.version('pykan')}, Python {platform.python_version()}; torch threads {threads}",
        f"load average at start (1/5/15 min): {load}",
        f"device: {describe_device(device)}",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 repeats of 1 s instead of 5 of 3 s")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                    help="kanx's torch.compile-fused basis (default on)")
    ap.add_argument("--eager-row", action=argparse.BooleanOptionalAction, default=True,
                    help="with --compile, also time eager kanx at M=70 (default on)")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved repeats per cell (default 5, --quick 3)")
    ap.add_argument("--seconds", type=float, default=None, help="timed seconds per repeat (default 3, --quick 1)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where both sides train (default cpu)")
    ap.add_argument("--profile", action="store_true", help="profile one epoch of packed Concrete EFX M=70 instead")
    ap.add_argument("--baseline-commit", metavar="REV", default=None,
                    help="also time kanx of commit REV (git archive) at M=70, interleaved with this checkout's, and "
                         "print the kanx-vs-kanx ratio")
    ap.add_argument("--pack-sizes", type=int, nargs="+", default=list(PACK_SIZES), metavar="M",
                    help=f"kanx pack sizes (default {' '.join(map(str, PACK_SIZES))})")
    ap.add_argument("--cuda-graph", action="store_true",
                    help="kanx with train.cuda_graph (whole-epoch graphs; CUDA only)")
    args = ap.parse_args(argv)

    try:
        version = metadata.version("pykan")
        import kan  # noqa: F401
    except (metadata.PackageNotFoundError, ImportError) as e:
        print(f"{INSTALL_HINT}\n({e})", file=sys.stderr)
        return 1
    if version != PYKAN_VERSION:
        print(f"warning: pykan {version} installed, the reference is pykan {PYKAN_VERSION}", file=sys.stderr)

    from kanx.checks import resolve_device
    from kanx.errors import ConfigError

    try:
        device = resolve_device(args.device)
    except ConfigError as e:
        print(f"--device {args.device}: {e}", file=sys.stderr)
        return 1
    torch.set_num_threads(args.threads)
    # One process times every (layer, batch, M) shape; a training process sees a handful.
    # Raise dynamo's per-function recompile limit so no shape falls back to eager here.
    torch._dynamo.config.recompile_limit = 256
    repeats = args.repeats or (3 if args.quick else 5)
    seconds = args.seconds or (1.0 if args.quick else 3.0)

    if args.profile:
        return profile(args.compile, args.threads, device)

    for line in machine_lines(args.threads, device):
        print(line)
    print(f"protocol: {repeats} interleaved repeats per cell, each {WARM_STEPS} warm-up steps + ~{seconds:g} s timed; "
          f"kanx compile={'on' if args.compile else 'off'}")
    sys.stdout.flush()

    baseline = Baseline(args.baseline_commit) if args.baseline_commit else None
    if baseline:
        print(f"baseline: kanx at {baseline.rev} (git archive into "
              f"{baseline.dir}), timed in the same repeats as this checkout's")
    cells = []
    for arch in ARCHS:
        cells.append(PykanCell(arch, device))
        cells.extend(KanxCell(arch, M, args.compile, device, cuda_graph=args.cuda_graph) for M in args.pack_sizes)
        if args.compile and args.eager_row:
            cells.append(KanxCell(arch, PACK_SIZES[-1], False, device))
        if baseline:
            cells.append(KanxCell(arch, PACK_SIZES[-1], args.compile, device, baseline))

    t_start = time.perf_counter()
    print("\nwarm-up:")
    for c in cells:
        print(f"  {c.impl:<20} {c.arch.name:<13} M={c.M:<3} {c.warm_up()}", flush=True)

    # A repeat in which the process got less than QUIET_SHARE of its threads' CPU time was
    # slowed by other processes on the host: it is measured again (up to MAX_TRIES times,
    # while the run is within RETRY_BUDGET_S); a value that stays contended is kept, marked *.
    quiet = QUIET_SHARE * args.threads if device.type == "cpu" else 0.0
    rates: dict[int, list[float]] = {id(c): [] for c in cells}
    cpu: dict[int, list[float]] = {id(c): [] for c in cells}
    retried = 0
    for r in range(repeats):
        # rotate the start, so no cell always follows the same one
        order = cells[r % len(cells) :] + cells[: r % len(cells)]
        for c in order:
            for attempt in range(MAX_TRIES):
                rate, share = c.measure(seconds)
                if share >= quiet or attempt == MAX_TRIES - 1 or time.perf_counter() - t_start > RETRY_BUDGET_S:
                    break
                retried += 1
            rates[id(c)].append(rate)
            cpu[id(c)].append(share)
        print(f"  repeat {r + 1}/{repeats} done ({time.perf_counter() - t_start:.0f} s, 1-min load "
              f"{os.getloadavg()[0]:.2f})", flush=True)

    contended = sum(v < quiet for c in cells for v in cpu[id(c)])
    print(f"\nsteps/s of every repeat; cpu/wall = the process's CPU seconds per wall second (at most {args.threads}), "
          f"* below {quiet:.2f}: other processes took the CPU.")
    print(f"{retried} contended repeats were measured again; {contended} of the {repeats * len(cells)} values kept are "
          "still contended (*).")
    for c in cells:
        marks = ["*" if v < quiet else " " for v in cpu[id(c)]]
        print(f"  {c.impl:<20} {c.arch.name:<13} M={c.M:<3} "
              + " ".join(f"{v:7.1f}{m}" for v, m in zip(rates[id(c)], marks, strict=True))
              + "   cpu/wall " + " ".join(f"{v:.2f}" for v in cpu[id(c)]))

    print("\n| impl | arch | batch | M | steps/s | model-steps/s | ratio to pykan-speed |")
    print("|---|---|---|---|---|---|---|")
    headline = None
    for arch in ARCHS:
        row_cells = [c for c in cells if c.arch is arch]
        base = statistics.median(rates[id(row_cells[0])])
        for c in row_cells:
            sps = statistics.median(rates[id(c)])
            msps = sps * c.M
            ratio = msps / base
            print(f"| {c.impl} | {arch.name} {arch.label} | {arch.batch} "
                  f"| {c.M} | {sps:.1f} | {msps:.0f} | {ratio:.1f}x |")
            if (arch is ARCHS[0] and isinstance(c, KanxCell) and c.M == 70 and c.compiled == args.compile
                and c.baseline is None):
                headline = ratio
    print(f"\nload average at end (1/5/15 min): {' '.join(f'{v:.2f}' for v in os.getloadavg())}; total "
          f"{time.perf_counter() - t_start:.0f} s")
    if headline is not None:
        print(f"headline ({args.device}): packed M=70 Concrete EFX "
              f"model-steps/s / pykan-speed steps/s = {headline:.1f}x")
    if baseline:
        for arch in ARCHS:
            ours, theirs = (next(c for c in cells if isinstance(c, KanxCell) and c.arch is arch
                                 and c.M == PACK_SIZES[-1]
                                 and c.compiled == args.compile and (c.baseline is None) == mine)
                            for mine in (True, False))
            a, b = statistics.median(rates[id(ours)]), statistics.median(rates[id(theirs)])
            print(f"kanx vs kanx @{baseline.rev} ({arch.name}, M={PACK_SIZES[-1]}, "
                  f"compile={'on' if args.compile else 'off'}): {a:.1f} / {b:.1f} steps/s = {a / b:.2f}x")
        baseline.cleanup()
    return 0


def profile(compile: bool, threads: int, device: torch.device) -> int:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    cell = KanxCell(ARCHS[0], PACK_SIZES[-1], compile, device)
    for line in machine_lines(threads, device):
        print(line)
    print(f"warm-up: {cell.warm_up()}")
    rate, share = cell.measure(3.0)
    print(f"unprofiled: {rate:.1f} steps/s = {1e3 / rate:.1f} ms per step (cpu/wall {share:.2f})")
    if device.type == "cpu" and share < QUIET_SHARE * threads:
        print(f"warning: cpu/wall {share:.2f} < {QUIET_SHARE * threads:.2f}: other processes took the CPU, "
              "so this profile is not representative; rerun on a quiet host")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch_profile(activities=activities, record_shapes=True) as prof:
        cell.pack.run_epoch()
        synchronize(device)
    n, sort_key = cell.steps_per_epoch, "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    title = (f"one epoch ({n} steps: {n - 1} of batch {ARCHS[0].batch}, 1 partial) of packed Concrete EFX, M=70, "
             f"compile={'on' if compile else 'off'}")
    print(f"\nprofile of {title}, by op:")
    print(prof.key_averages().table(sort_by=sort_key, row_limit=20, max_name_column_width=50))
    print("\nthe same, by op and input shapes (stages: I = 13, 26, 39 inputs; 1 + C = 14 features per input):")
    print(prof.key_averages(group_by_input_shape=True).table(sort_by=sort_key, row_limit=20, max_name_column_width=50,
                                                             max_shapes_column_width=60))
    return 0


if __name__ == "__main__":
    sys.exit(main())
