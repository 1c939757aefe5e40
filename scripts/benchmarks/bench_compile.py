"""Compile benchmark: what torch.compile costs a run in a fresh process, with inductor's cache
cold (an empty folder) and warm (the folder the cold run filled), against the eager basis; and the
rule of train.compile=auto (kanx.compiling.pays_off) those figures give.

    python scripts/benchmarks/bench_compile.py [--epochs 50] [--threads auto] [--full] [-- OVERRIDES...]

Each timing is one `python -m kanx.train OVERRIDES` process (default overrides `+condition=EFX`:
`make run`'s z = sin(x + y^2) EFX run) with a fresh results_root under /tmp and
TORCHINDUCTOR_CACHE_DIR set to a fresh folder of this run (the user's own cache is neither read
nor filled). The warmups are set to one epoch: the first epoch is `make run`'s beginning
(forward connections off, beta 0), the others its main phase (forward connections on, beta on),
where it spends 2,800 of its 3,000 epochs. (Until 2026-11-29 the warmups covered every epoch, so
the steps timed were the beginning's, which compiling hardly speeds: docs/BENCHMARK.md.)

  cold 1+E                  1 + E epochs on an empty cache: every graph the runs below meet
  warm 1, eager 1           one epoch: the process's wall time ~ the time `make run` takes to
                            reach its first epoch (imports, data, cache or nothing, one epoch,
                            the scoring)
  warm / eager 1+E, 1+2E    the seconds per step compiled and eager: the last E epochs' by difference

From them: the cold and the warm compile (the record's train_s over what the same epochs take at
the compiled step's speed), the seconds a step saves compiled, and the steps a run needs to earn
each compile back (kanx.compiling's WARM_COMPILE_S and SAVED_PER_STEP_S hold the warm figures).
--full also times the whole command (`make run`: its 3000 epochs) as a user runs it, with
train.compile=auto on a cold and then a warm cache (the acceptance's "second run"), and eagerly:
its wall time and when its first epoch ended (from its progress lines, one an epoch).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

DEFAULT_OVERRIDES = ["+condition=EFX"]


# A progress line's epoch and its log timestamp ([2026-11-29 15:15:08,342][kanx][INFO] - name: epoch 1/3000, ...)
PROGRESS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[kanx\]\[INFO\] - .*: epoch (\d+)/\d+, ")


def first_epoch_at(log: str, launched: float) -> float | None:
    """Seconds from the launch (time.time()) to the first progress line of epoch 1, from the log."""
    for line in log.splitlines():
        m = PROGRESS.match(line)
        if m and int(m.group(2)) == 1:
            return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() - launched
    return None


def run(overrides: list[str], results: Path, cache: Path, compile: bool | str, epochs: int | None,
        threads: str) -> dict:
    """One `python -m kanx.train` process: its wall seconds, its records' timing and, for the
    whole command, when its first epoch ended (a progress line every epoch). The short runs
    (``epochs``) keep make run's warmups at one epoch: the first is its beginning (forward
    connections off, beta 0), the rest its main phase, where it spends 2,800 of its 3,000 epochs
    and a step costs most."""
    short = [f"train.epochs={epochs}", "train.warmup=1", "train.fc_warmup=1"] if epochs else []
    command = [sys.executable, "-m", "kanx.train", *overrides, f"results_root={results}", *short,
               f"train.compile={str(compile).lower()}", f"train.threads={threads}", "train.progress_every_s=0.001",
               f"hydra.run.dir={results}/hydra", f"hydra.sweep.dir={results}/hydra"]
    env = os.environ | {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
    launched, t0 = time.time(), time.perf_counter()
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    from kanx.record import Record

    timings = [Record.read(p.parent).fields["timing"] for p in sorted(results.rglob("record.json"))]
    return {"wall_s": wall, "train_s": max(t["train_s"] for t in timings), "steps": timings[0]["steps"],
            "threads": timings[0].get("threads"), "runs": len(timings),
            "first_epoch_s": first_epoch_at(out.stdout + out.stderr, launched)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=50, help="E, the epochs timed after the first (default 50)")
    ap.add_argument("--threads", default="auto", help="train.threads of every run (default auto)")
    ap.add_argument("--full", action="store_true", help="also time the whole command, cold and warm")
    ap.add_argument("overrides", nargs="*", help=f"kanx.train overrides (default {' '.join(DEFAULT_OVERRIDES)})")
    a = ap.parse_args(argv)
    overrides = a.overrides or DEFAULT_OVERRIDES
    print(f"overrides: {' '.join(overrides)}; train.threads={a.threads}; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    got: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="kanx-bench-compile-") as tmp:
        cache = Path(tmp) / "inductor"
        e1, e2 = 1 + a.epochs, 1 + 2 * a.epochs
        # The cold run covers the epochs the warm ones train: a graph first met in epoch 1 (dynamo
        # recompiles once when a float argument, such as tau_x, changes) is then in the cache too.
        plan = [(f"cold 1+{a.epochs}", True, e1), ("warm 1", True, 1), ("eager 1", False, 1),
                (f"warm 1+{a.epochs}", True, e1), (f"eager 1+{a.epochs}", False, e1),
                (f"warm 1+2x{a.epochs}", True, e2), (f"eager 1+2x{a.epochs}", False, e2)]
        if a.full:  # the whole command on a cache of its own, cold, then warm, as a user runs it; and eager
            plan += [("full, cold", "auto", None), ("full, warm", "auto", None), ("full, eager", False, None)]
        for i, (name, compile, epochs) in enumerate(plan):
            if name.startswith("cold") or name == "full, cold":
                cache = Path(tmp) / f"inductor-{i}"  # a folder nothing compiled into yet
            got[name] = r = run(overrides, Path(tmp) / f"results-{i}", cache, compile, epochs, a.threads)
            print(f"  {name:<16} wall {r['wall_s']:7.1f} s, train_s {r['train_s']:7.2f} s, {r['steps']} steps, "
                  f"{r['threads']} thread(s), {r['runs']} run(s)", flush=True)

    short, long = f"1+{a.epochs}", f"1+2x{a.epochs}"
    steps = got[f"warm {long}"]["steps"] - got[f"warm {short}"]["steps"]
    compiled = (got[f"warm {long}"]["train_s"] - got[f"warm {short}"]["train_s"]) / steps
    eager = (got[f"eager {long}"]["train_s"] - got[f"eager {short}"]["train_s"]) / steps
    saved = eager - compiled
    print(f"\nseconds per step, from the last {a.epochs} epochs: compiled {compiled * 1e3:.2f} ms, eager "
          f"{eager * 1e3:.2f} ms, saved {saved * 1e3:.2f} ms")
    # what the compiled run would take without its compile: the eager run less what its steps save
    steady = got[f"eager {short}"]["train_s"] - got[f"warm {short}"]["steps"] * saved
    for kind in ("cold", "warm"):
        cost = got[f"{kind} {short}"]["train_s"] - steady
        pays = f"{cost / saved:.0f} steps" if saved > 0 else "never (compiled is not faster here)"
        print(f"{kind} compile: {cost:.1f} s; earned back after {pays}")
    print(f"first epoch reached (a 1-epoch run's wall time): warm cache {got['warm 1']['wall_s']:.1f} s, eager "
          f"{got['eager 1']['wall_s']:.1f} s (the cold run's {a.epochs + 1} epochs: "
          f"{got[f'cold {short}']['wall_s']:.1f} s)")
    if a.full:
        print("the whole command (train.compile=auto, and eager): first epoch ended / wall s")
        for name in ("full, cold", "full, warm", "full, eager"):
            r = got[name]
            first = f"{r['first_epoch_s']:.1f}" if r["first_epoch_s"] is not None else "?"
            print(f"  {name:<12} {first} / {r['wall_s']:.0f} s (train_s {r['train_s']:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
