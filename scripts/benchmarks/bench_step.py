"""Where a packed training step spends its time, and this checkout's step against another commit's.

    python scripts/benchmarks/bench_step.py profile [--arch concrete|nguyen] [--M 70] [--threads 1]
    python scripts/benchmarks/bench_step.py ab REV [--arch ...] [--M 70] [--threads 1] [--repeats 9] [--seconds 2]

``profile`` runs one epoch of the packed EFX pack (bench.py's cells: random rows, grid updates
off, beta > 0) under torch.profiler, after warm-up, and splits its self CPU time by phase: the
gate draws, each stage's forward, the losses, L_C, every autograd node of the backward (its
kernels included), Adam and the epoch's draws; then the kernel launches (ATen ops and compiled
graphs) per step and the FLOPs of the step's contractions.

``ab`` builds the same pack from this checkout and from commit REV (bench.Baseline: ``git
archive`` of its kanx, imported beside this one) and times whole epochs of each alternately,
``--repeats`` times ``--seconds``, in the same process: on a busy machine only such interleaved
ratios mean anything. It prints each repeat's ratio (this / REV, steps/s) and their median and
spread.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import resource
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import torch


def _load_bench():
    """bench.py beside this script (its cells and its Baseline), loaded from its file: the import
    path stays as it is, so kanx is the installed one (tests/test_layout.py)."""
    spec = importlib.util.spec_from_file_location("bench", Path(__file__).resolve().parent / "bench.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench"] = module  # bench's dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


bench = _load_bench()

ARCHS = {"concrete": bench.ARCHS[0], "nguyen": bench.ARCHS[1]}


# ------------------------------------------------------------------ profile

PHASES = (  # (label, module attribute path, method): wrapped in record_function while profiling
    ("gates", "kanx.kan.network.GatedKAN", "sample_gates"),
    ("exit weights", "kanx.kan.network.GatedKAN", "exit_weights"),
    ("data loss", "kanx.trainer", "data_loss"),
    ("complexity L_C", "kanx.trainer", "complexity"),
    ("Adam", "kanx.optim.Adam", "step"),
    ("epoch draws", "kanx.trainer.Trainer", "epoch_draws"),
    ("shuffle", "kanx.trainer.Trainer", "shuffled"),
    ("zero_grad", "kanx.optim.Adam", "zero_grad"),
)


def _resolve(path: str):
    """A module, or a class in one, by its dotted path."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError:
        module, _, attr = path.rpartition(".")
        return getattr(importlib.import_module(module), attr)


@contextlib.contextmanager
def phases_marked():
    """Every PHASES method, and each stage's forward (by its input width), inside a record_function."""
    from kanx.kan import kernels
    from kanx.kan.layer import KANLayer

    saved = []

    def wrap(owner, name, label):
        fn = getattr(owner, name)

        def marked(*args, **kwargs):
            with torch.profiler.record_function(f"## {label}"):
                return fn(*args, **kwargs)

        saved.append((owner, name, fn))
        setattr(owner, name, marked)

    for label, path, name in PHASES:
        wrap(_resolve(path), name, label)
    forward = KANLayer.forward

    def stage_forward(self, x, gate):
        with torch.profiler.record_function(f"## forward stage I={self.in_features} O={self.out_features}"):
            return forward(self, x, gate)

    saved.append((KANLayer, "forward", forward))
    KANLayer.forward = stage_forward
    kernel = kernels._kernel

    def marked_kernel(compiled, name):
        fn = kernel(compiled, name)

        def run(*args, **kwargs):
            shape = "x".join(map(str, args[0].shape))
            with torch.profiler.record_function(f"## kernel {name} {shape}"):
                return fn(*args, **kwargs)

        return run

    saved.append((kernels, "_kernel", kernel))
    kernels._kernel = marked_kernel
    try:
        yield
    finally:
        for owner, name, fn in reversed(saved):
            setattr(owner, name, fn)


def phase_of(event) -> str:
    """The phase an event's self time belongs to: its innermost marked ancestor, or in the
    backward the autograd node that runs it (with the node's shapes: the stages differ)."""
    e = event
    while e is not None:
        if e.name.startswith("## kernel") or e.name == "aten::bmm":
            return e.name[3:] if e.name.startswith("## ") else f"bmm {e.input_shapes}"
        e = e.cpu_parent
    e = event
    while e is not None:
        if e.name.startswith("## ") and not e.name.startswith(("## Call", "## step ")):
            return e.name[3:]
        if e.name.startswith("autograd::engine::evaluate_function: "):
            return "backward " + e.name.split(": ", 1)[1]
        e = e.cpu_parent
    return "rest of the step (Python, loss sum, masks)"


def launches(events) -> tuple[int, int]:
    """(ATen ops called from Python or autograd, not inside another op; compiled-graph calls)."""
    aten = graphs = 0
    for e in events:
        if e.name.startswith("## Call CompiledFxGraph"):
            graphs += 1
        elif e.name.startswith("aten::"):
            parent = e.cpu_parent
            while parent is not None and not parent.name.startswith("aten::") and not parent.name.startswith("## Call"):
                parent = parent.cpu_parent
            aten += parent is None
    return aten, graphs


def contraction_flops(cell) -> float:
    """FLOPs of a step's contractions (2 per multiply-add): forward y, the features' gradient H
    and the weights' gradient, each sum_f sum_i over (M, B, O) of every stage (dense features)."""
    arch, M = cell.arch, cell.M
    total = 0.0
    for stage in cell.pack.model.layers:
        F = stage.G + stage.K + 1
        total += 3 * 2 * M * arch.batch * F * stage.in_features * stage.out_features
    return total


def step_of(event) -> int | None:
    """The index of the training step an event ran in (its ``## step k`` ancestor), None outside one."""
    e = event
    while e is not None:
        if e.name.startswith("## step "):
            return int(e.name.rsplit(" ", 1)[1])
        e = e.cpu_parent
    return None


@contextlib.contextmanager
def steps_marked():
    """Every Trainer.step inside a record_function ``## step k``, k counting from 0."""
    from kanx.trainer import Trainer

    step, count = Trainer.step, iter(range(10**9))

    def marked(self, *args, **kwargs):
        with torch.profiler.record_function(f"## step {next(count)}"):
            return step(self, *args, **kwargs)

    Trainer.step = marked
    try:
        yield
    finally:
        Trainer.step = step


def profile(arch, M: int, compile: bool, epochs: int, detail: Sequence[str] = ()) -> None:
    """Phases' self CPU time per step: the median over the steps of ``epochs`` epochs (full
    batches only), so that the steps another process slowed do not count."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    cell = bench.KanxCell(arch, M, compile, torch.device("cpu"))
    print(f"warm-up: {cell.warm_up()}")
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    rate, share = cell.measure(3.0)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    print(f"unprofiled: {rate:.1f} steps/s = {1e3 / rate:.2f} ms a step, {1e3 * share / rate:.2f} ms of CPU time "
          f"(cpu/wall {share:.2f}); page faults: {faults} in these 3 s")
    with phases_marked(), steps_marked(), torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(epochs):
            cell.pack.run_epoch()
    events = prof.events()
    n = cell.steps_per_epoch
    full = {k for k in range(n * epochs) if k % n != n - 1}  # the last step of an epoch is partial
    per_step: dict[str, dict[int, float]] = defaultdict(lambda: dict.fromkeys(full, 0.0))
    ops: dict[str, dict[int, float]] = defaultdict(lambda: dict.fromkeys(full, 0.0))
    for e in events:
        k = step_of(e)
        if k in full:
            per_step[phase_of(e)][k] += e.self_cpu_time_total
            op = "compiled graphs" if e.name.startswith("## Call CompiledFxGraph") else e.name
            ops[op][k] += e.self_cpu_time_total
    totals = [sum(p[k] for p in per_step.values()) for k in sorted(full)]
    median_step = statistics.median(totals) / 1e3
    print(f"\n{len(full)} full steps of {arch.name} M={M}, compile={'on' if compile else 'off'}, under the profiler: "
          f"median {median_step:.2f} ms, fastest {min(totals) / 1e3:.2f} ms a step (self CPU)")
    table("phase", per_step, median_step)
    for label in detail:
        inside: dict[str, dict[int, float]] = defaultdict(lambda: dict.fromkeys(full, 0.0))
        for e in events:
            k = step_of(e)
            if k in full and phase_of(e) == label:
                inside[f"{e.name} {e.input_shapes}"][k] += e.self_cpu_time_total
        table(f"inside {label}: op and shapes", inside, median_step, rows=12, min_share=0.0)
    table("op (self)", ops, median_step, rows=16)
    counts: dict[str, int] = defaultdict(int)
    for e in events:
        if step_of(e) in full and launches([e])[0]:
            counts[phase_of(e)] += 1
    print("\ntop-level ATen ops a step, by phase: " + ", ".join(
        f"{label} {n / len(full):.0f}" for label, n in sorted(counts.items(), key=lambda kv: -kv[1]) if n >= len(full)))
    aten, graphs = launches([e for e in events if step_of(e) in full])
    flops = contraction_flops(cell)
    print(f"\nlaunches a step: {aten / len(full):.0f} ATen ops at top level, {graphs / len(full):.1f} compiled graphs")
    print(f"contractions: {flops / 1e6:.1f} MFLOP a step; at {1e3 / rate:.2f} ms a step that is "
          f"{flops * rate / 1e9:.2f} GFLOP/s over the whole step")


def table(what: str, per_step: dict[str, dict[int, float]], median_step: float, rows: int = 40,
          min_share: float = 0.003) -> None:
    """Rows of per-step medians and minima (ms; the minimum is the least another process slowed it),
    largest median first, with the median's share of the median step."""
    medians = {label: statistics.median(v.values()) / 1e3 for label, v in per_step.items()}
    fastest = {label: min(v.values()) / 1e3 for label, v in per_step.items()}
    print(f"\n| {what} | ms a step (median) | fastest | share |\n|---|---|---|---|")
    for label, ms in sorted(medians.items(), key=lambda kv: -kv[1])[:rows]:
        if ms / median_step >= min_share:
            print(f"| {label} | {ms:.3f} | {fastest[label]:.3f} | {100 * ms / median_step:.1f}% |")
    print(f"| (sum) | {sum(medians.values()):.3f} | {sum(fastest.values()):.3f} | |")


# ------------------------------------------------------------------ A/B


def ab(arch, M: int, compile: bool, rev: str, repeats: int, seconds: float) -> None:
    """This checkout's pack against REV's, alternately in one process: the ratios of steps/s (wall)
    and of CPU seconds a step (the process's own time: less moved by other processes' load)."""
    baseline = bench.Baseline(rev)
    try:
        ours = bench.KanxCell(arch, M, compile, torch.device("cpu"))
        theirs = bench.KanxCell(arch, M, compile, torch.device("cpu"), baseline)
        for cell in (ours, theirs):
            print(f"warm-up {cell.impl}: {cell.warm_up()}", flush=True)
        wall, cpu = [], []
        for r in range(repeats):
            order = (ours, theirs) if r % 2 == 0 else (theirs, ours)
            got = {id(c): c.measure(seconds) for c in order}
            (a, a_share), (b, b_share) = got[id(ours)], got[id(theirs)]
            wall.append(a / b)
            cpu.append((b_share / b) / (a_share / a))  # REV's CPU seconds a step over this checkout's
            print(f"  repeat {r + 1}: this {a:.1f}, @{baseline.rev} {b:.1f} steps/s (wall ratio {wall[-1]:.3f}); "
                  f"CPU ms a step {1e3 * a_share / a:.2f} against {1e3 * b_share / b:.2f} (ratio {cpu[-1]:.3f})",
                  flush=True)
        print(f"\n{arch.name} M={M}, this over @{baseline.rev} (> 1: this is faster), {repeats} repeats:")
        for label, ratios in (("steps/s (wall)", wall), ("CPU time a step", cpu)):
            print(f"  {label}: median {statistics.median(ratios):.3f}, range {min(ratios):.3f} to {max(ratios):.3f}")
    finally:
        baseline.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("profile", "ab"))
    ap.add_argument("rev", nargs="?", help="ab: the commit to compare against")
    ap.add_argument("--arch", choices=sorted(ARCHS), default="concrete")
    ap.add_argument("--M", type=int, default=70)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--detail", nargs="*", default=[], metavar="PHASE",
                    help="profile: also split these phases (as the table names them) by op and shapes")
    ap.add_argument("--epochs", type=int, default=4, help="profile: epochs profiled")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch._dynamo.config.recompile_limit = 256
    arch = ARCHS[args.arch]
    t0 = time.perf_counter()
    if args.mode == "profile":
        profile(arch, args.M, args.compile, args.epochs, args.detail)
    else:
        if not args.rev:
            ap.error("ab needs the commit to compare against")
        ab(arch, args.M, args.compile, args.rev, args.repeats, args.seconds)
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
