"""What a compiled step saves against an eager one, by the pack's work: the figures behind
train.compile=auto's rule (kanx.compiling.SAVED_PER_STEP_S).

    python scripts/benchmarks/bench_compile_saving.py [--threads 1] [--pack-sizes 1 10 70] [--repeats 5] [--seconds 2]

For each workload (bench.py's Concrete EFX and Nguyen EFX, and `make run`'s z = sin(x + y^2) EFX,
width [2, 2, 1, 1], batch 64, 1,024 rows) and pack size M, a pack is built compiled and eager
(bench.KanxCell: random rows, grid updates off, beta > 0), each warmed up, then timed in
interleaved repeats of about --seconds each, in one process: the load of the moment falls on
both alike. The table gives each pair's milliseconds a step, the time compiling saves a step and
the pack's work a step (kanx.threads.pack_work: the pack's parameters times the batch size),
then the least saving of any pack (the one train.compile=auto's rule assumes).

The first compiled epoch includes the compile: from inductor's cache (TORCHINDUCTOR_CACHE_DIR, by
default kanx's ~/.cache/kanx/inductor), cold the first time a shape is met with this thread
count, warm after; its seconds are printed with each warm-up. bench_compile.py times the compile
in fresh processes, as a run meets it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import torch


def _load_bench():
    """bench.py beside this script (its cells), loaded from its file (tests/test_layout.py)."""
    spec = importlib.util.spec_from_file_location("bench", Path(__file__).resolve().parent / "bench.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench"] = module
    spec.loader.exec_module(module)
    return module


bench = _load_bench()
MAKE_RUN = bench.Arch("make run EFX", (2, 2, 1, 1), batch=64, rows=1024)
WORKLOADS = {"make-run": MAKE_RUN, "concrete": bench.ARCHS[0], "nguyen": bench.ARCHS[1]}


def pack_work(cell) -> float:
    from kanx.threads import pack_work as work

    return work(sum(p.numel() for p in cell.pack.model.parameters()), cell.arch.batch)


def measure_pair(arch, M: int, repeats: int, seconds: float, device: torch.device) -> dict:
    """ms a step compiled and eager, interleaved, and the pack's work."""
    cells = {}
    for compiled in (True, False):
        t0 = time.perf_counter()
        cells[compiled] = bench.KanxCell(arch, M, compiled, device)
        done = cells[compiled].warm_up()
        print(f"  {arch.name} M={M} {'compiled' if compiled else 'eager'}: built and warmed up in "
              f"{time.perf_counter() - t0:.1f} s ({done})", flush=True)
    ms = {True: [], False: []}
    for _ in range(repeats):
        for compiled in (True, False):
            steps_per_s, _ = cells[compiled].measure(seconds)
            ms[compiled].append(1e3 / steps_per_s)
    savings = [e - c for c, e in zip(ms[True], ms[False], strict=True)]
    return {"arch": arch.name, "M": M, "compiled_ms": statistics.median(ms[True]),
            "eager_ms": statistics.median(ms[False]), "saved_ms": statistics.median(savings),
            "spread_ms": (min(savings), max(savings)), "work": pack_work(cells[True])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    ap.add_argument("--pack-sizes", type=int, nargs="+", default=[1, 10, 70], metavar="M")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    device = torch.device("cpu")
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"torch {torch.__version__}, {a.threads} thread(s); load average {load}")
    rows = [measure_pair(WORKLOADS[w], M, a.repeats, a.seconds, device) for w in a.workloads for M in a.pack_sizes]
    print("\n| workload | M | work (parameters x batch) | compiled ms/step | eager ms/step | saved ms/step (min-max) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        low, high = r["spread_ms"]
        print(f"| {r['arch']} | {r['M']} | {r['work']:.3g} | {r['compiled_ms']:.2f} | {r['eager_ms']:.2f} | "
              f"{r['saved_ms']:.2f} ({low:.2f} to {high:.2f}) |")
    least = min(rows, key=lambda r: r["saved_ms"])
    print(f"\nthe least a pack saved a step: {least['saved_ms']:.2f} ms ({least['arch']}, M={least['M']}); "
          "train.compile=auto's rule assumes the smallest pack's saving for every pack "
          "(kanx.compiling.SAVED_PER_STEP_S): it compiles no run that a warm compile does not pay for, and may "
          "leave a short run of a large pack eager where compiling would have paid")
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
