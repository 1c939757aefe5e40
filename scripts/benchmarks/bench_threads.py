"""Thread benchmark: a fixed number of packed steps at fixed intra-op thread counts and at
`train.threads=auto` (kanx.threads), on the machine as it is and with other cores kept busy.

    python scripts/benchmarks/bench_threads.py [--steps 200] [--counts 1 2] [--sizes 1 10 70] [--busy 1]
                                               [--compile/--no-compile] [--scenarios idle busy]

Packs: Concrete EFX (width [13, 13, 13, 1], batch 64, 824 random rows) at M = 1, 10 and 70, and
the mixed pack: 70 Concrete members cycling through the paper's eight conditions (what
`make reproduce-tables` trains on a GPU; group=all), as kanx.trainer.Trainer packs, each trained
for whole epochs until --steps optimizer steps after warm-up epochs (the compile happens there).

Inductor writes the thread count into the kernels it compiles, and dynamo does not recompile when
the count changes, so every thread setting runs in its own process (this script with --child):
one process per (scenario, setting), timing every pack in turn. `auto` is kanx's own choice for
each pack (kanx.threads.for_pack), made as the runner makes it: OMP_NUM_THREADS is removed from
the children's environment, so that auto decides.

Scenarios: `idle` measures the machine as it is (the load average is printed; other processes
make it less than idle); `busy` first starts --busy processes that spin on a core each (the
"other core busy" of issue #53), and stops them after. The table gives seconds for the steps per
setting, auto's chosen count, and auto's time over the best fixed count of the same scenario and
pack (1.00: auto chose as well as the best; 14 would be the collapse of two threads beside a busy
core). Times are of one process each, not repeated: compare within a run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WIDTH, BATCH, ROWS = (13, 13, 13, 1), 64, 824
MIXED = "mixed"
SPIN = "import time\nwhile True:\n    pass\n"


def pack_names(sizes: list[int]) -> list[str]:
    return [*(f"EFX M={m}" for m in sizes), f"{MIXED} M=70"]


def build(name: str, compile: bool):
    """The Trainer of one pack (random rows, grid updates off, beta > 0 so L_C is in the loss)."""
    import torch

    from kanx.config import DataConfig, RunConfig, TrainConfig
    from kanx.kan.network import Condition, KANSpec
    from kanx.kan.objective import Costs
    from kanx.trainer import Trainer
    from kanx.vocab import CONDITIONS

    mixed = name.startswith(MIXED)
    M = int(name.rsplit("=", 1)[1])
    train = TrainConfig(epochs=10**9, batch_size=BATCH, warmup=0, fc_warmup=0, grid_updates=False, compile=compile)
    runs = []
    for s in range(M):
        condition = Condition.from_name(CONDITIONS[s % len(CONDITIONS)] if mixed else "EFX")
        beta = 0.01 if condition.beta_acts else 0.0
        runs.append(RunConfig(DataConfig("concrete", s), condition, KANSpec(WIDTH), Costs(), "threshold", train, beta,
                              s))
    g = torch.Generator().manual_seed(0)
    x = torch.rand(M, ROWS, WIDTH[0], generator=g) * 2 - 1
    y = torch.randn(M, ROWS, WIDTH[-1], generator=g)
    return Trainer(runs, x, y, ROWS, torch.device("cpu"))


def child(setting: str, names: list[str], steps: int, compile: bool) -> None:
    """Time every pack at one thread setting, in this process; one JSON line per pack."""
    import torch

    from kanx import threads

    for name in names:
        trainer = build(name, compile)
        if setting == threads.AUTO:
            parameters = sum(p.numel() for p in trainer.model.parameters())
            choice = threads.for_pack(threads.AUTO, parameters, BATCH)
        else:
            choice = threads.ThreadChoice(int(setting), "fixed")
        threads.use(choice)
        t0 = time.perf_counter()
        for _ in range(2):  # the first epochs compile
            trainer.run_epoch()
        warm = time.perf_counter() - t0
        epochs = math.ceil(steps / trainer.batches_per_epoch)
        t0 = time.perf_counter()
        for _ in range(epochs):
            trainer.run_epoch()
        seconds = time.perf_counter() - t0
        print(json.dumps({"pack": name, "setting": setting, "threads": torch.get_num_threads(), "why": choice.why,
                          "steps": epochs * trainer.batches_per_epoch, "seconds": seconds, "warm_s": warm}),
              flush=True)


def run_setting(setting: str, names: list[str], steps: int, compile: bool) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", setting, "--steps", str(steps),
               "--packs", *names, "--compile" if compile else "--no-compile"]
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the {setting} process failed:\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def spinners(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n)]


def table(rows: list[dict], counts: list[int], scenarios: list[str], names: list[str]) -> list[str]:
    """The markdown table: each setting's seconds, auto's count against the fastest fixed count,
    and auto's seconds over the fastest fixed count's (auto runs in its own process, so on a busy
    machine the ratio carries that process's luck even where auto chose the same count)."""
    head = ["scenario", "pack", *(f"{c} thread(s) s" for c in counts), "auto s", "auto's count", "best fixed count",
            "auto / best fixed"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    worst, missed = 0.0, 0
    for scenario in scenarios:
        for name in names:
            got = {r["setting"]: r for r in rows if r["scenario"] == scenario and r["pack"] == name}
            best_count = min(counts, key=lambda c: got[str(c)]["seconds"])
            best = got[str(best_count)]["seconds"]
            auto = got["auto"]
            ratio = auto["seconds"] / best
            worst = max(worst, ratio)
            missed += auto["threads"] != best_count
            lines.append(f"| {scenario} | {name} | " + " | ".join(f"{got[str(c)]['seconds']:.2f}" for c in counts)
                         + f" | {auto['seconds']:.2f} | {auto['threads']} | {best_count} | {ratio:.2f} |")
    lines.append(f"\nauto chose the fastest fixed count in {len(scenarios) * len(names) - missed} of "
                 f"{len(scenarios) * len(names)} cases; worst auto / best fixed: {worst:.2f} (within 10%: "
                 f"{'yes' if worst <= 1.10 else 'no'})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200, help="timed optimizer steps per pack (default 200)")
    ap.add_argument("--counts", type=int, nargs="+", default=[1, 2], help="fixed thread counts (default 1 2)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 70], help="EFX pack sizes (default 1 10 70)")
    ap.add_argument("--no-mixed", action="store_true", help="leave out the mixed pack")
    ap.add_argument("--busy", type=int, default=1, help="spinning processes in the busy scenario (default 1)")
    ap.add_argument("--scenarios", nargs="+", choices=("idle", "busy"), default=["idle", "busy"])
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                    help="the compiled kernels, as a real run (default on; the first process compiles every shape "
                         "for each count, then inductor's cache serves the others)")
    ap.add_argument("--child", metavar="SETTING", help=argparse.SUPPRESS)
    ap.add_argument("--packs", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child, a.packs, a.steps, a.compile)
        return 0

    from kanx import threads

    names = pack_names(a.sizes)[: len(a.sizes) if a.no_mixed else None]
    cores = threads.Cores.of_this_process(os.environ)
    print(f"machine: {os.cpu_count()} logical CPUs, {cores.usable} usable (affinity {len(cores.cpus)}, cgroup quota "
          f"{cores.quota}, SLURM {cores.slurm}); load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if "OMP_NUM_THREADS" in os.environ:
        print(f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} is set here and removed for the timed processes")
    print(f"{a.steps} steps per pack, compile={'on' if a.compile else 'off'}, fixed counts {a.counts}", flush=True)
    rows: list[dict] = []
    t_start = time.perf_counter()
    for scenario in a.scenarios:
        spin = spinners(a.busy) if scenario == "busy" else []
        try:
            time.sleep(1.0 if spin else 0.0)  # the spinners on their cores before auto samples the load
            for setting in [*map(str, a.counts), threads.AUTO]:
                for r in run_setting(setting, names, a.steps, a.compile):
                    rows.append({**r, "scenario": scenario})
                    why = f"; {r['why']}" if setting == threads.AUTO else ""
                    print(f"  {scenario:<5} {setting:>4}: {r['pack']:<12} {r['threads']} thread(s) "
                          f"{r['seconds']:7.2f} s (warm-up {r['warm_s']:.1f} s){why}", flush=True)
        finally:
            for p in spin:
                p.kill()
                p.wait()
    print(f"\nload average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; "
          f"total {time.perf_counter() - t_start:.0f} s\n")
    print("\n".join(table(rows, a.counts, a.scenarios, names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
