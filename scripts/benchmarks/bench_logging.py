"""What watching a pack costs: first the appends of a logged epoch alone (the pack's live files
kept open, as kanx does, against opened for every row, as it did before); then the packed epoch
time with the training curves off (the reference), with their rows made but not written, with
rows appended to every run's live metrics.csv without the held-out error column (`live`), with it
(`held_out`: kanx.curves.HeldOut, the default since #51), and with
`logger=tensorboard` and `logger=mlflow` on top (kanx.loggers; MLflow's local SQLite store, where
mlflow is installed), each as a ratio to the reference timed in the same process. Opening a
logger (a tracker run a member, with its config as hyperparameters) is left out of the epoch
times and reported apart, as is sending a finished pack's results (log_results and close: what
the runner does once the records are written). Nothing is written outside a temporary folder.

    python scripts/benchmarks/bench_logging.py [--device cuda] [--cuda-graph] [--datasets nguyen_f1 ...] [--seeds 0,1,2]
        [--conditions EFX ...] [--members 70] [--epochs 200] [--log-every 50] [--repeats 3]
        [--modes reference rows live held_out tensorboard mlflow]

The ratios are to the first mode timed (reference, unless --modes leaves it out).
The pack is what `python -m kanx.reproduce --group all` would train for these datasets and seeds
(Nguyen F1 to F8, seeds 0 to 2, the eight conditions: 624 members); --members N keeps N of them,
evenly spread over the pack's order (every dataset and condition, as a mixed pack of
train.pack_size=70 has them). --log-every is the cadence
(the default train.log_every of a 10,000-epoch run is 50); the modes take turns, --repeats
times, and the median of each is reported. "per row" is the time of one logged epoch's
Curves.add for the whole pack (timed directly: the end-to-end ratio is noisy on a shared
machine), and "at cadence" that time spread over the cadence, against the reference epoch.
The held-out column's own cost is printed last: held_out against live, paired repeat by repeat
(median, and the spread from the lowest to the highest repeat), and its per-row time over the cadence.

    # docs/BENCHMARK.md's "Trackers": Concrete EFX M=70 and a mixed Nguyen pack of 70, at their default cadence
    python scripts/benchmarks/bench_logging.py --datasets concrete --conditions EFX --seeds 0,1,2,3,4,5,6,7,8,9 \
        --log-every 25 --epochs 25 --modes live held_out --repeats 3
    python scripts/benchmarks/bench_logging.py --members 70 --log-every 50 --epochs 50 --modes live held_out --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

MODES = ("reference", "rows", "live", "held_out", "tensorboard", "mlflow")
LOGGED = ("tensorboard", "mlflow")  # the modes with a tracker on top of the live files


def appends_alone(tmp: Path, members: int, repeats: int, rows: int = 20) -> None:
    """The appends of a logged epoch alone, for ``members`` live files: kept open for the pack's
    training (kanx.curves.Curves, since 2026-11-28) against opened for every row (before), the
    two taking turns; prints the median milliseconds per logged epoch of each."""
    import kanx.curves

    budget = kanx.curves._open_budget
    times: dict[str, list[float]] = {"kept open": [], "opened per row": []}
    for i in range(repeats):
        for mode in times:
            dirs = [tmp / mode.replace(" ", "_") / str(i) / str(m) for m in range(members)]
            for d in dirs:
                d.mkdir(parents=True)
            kanx.curves._open_budget = budget if mode == "kept open" else (lambda: 0)
            curves = kanx.curves.Curves(dirs, 1, 0)
            for epoch in range(1, rows + 1):
                row = {"epoch": epoch, "loss": 0.5 / epoch, "data_loss": 0.4 / epoch, "lc": 12.5, "beta": 0.01,
                       "open_gates": 40, "exit": 2}
                t0 = time.perf_counter()
                for m in range(members):
                    curves.columns[m] = curves._append(m, row)
                times[mode].append(time.perf_counter() - t0)
            curves.close()
    kanx.curves._open_budget = budget
    kept, per_row = (statistics.median(times[k]) * 1e3 for k in times)
    print(f"appends alone, {members} live files: kept open {kept:.2f} ms per logged epoch, opened per row "
          f"{per_row:.2f} ms (per row / kept open {per_row / kept:.1f})", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--cuda-graph", action="store_true",
                    help="train.cuda_graph=true (whole-epoch graphs; the host acts at the cadence only)")
    ap.add_argument("--compile", action="store_true",
                    help="train.compile=true (the default of a real run; its warm-up is left out of the timing)")
    ap.add_argument("--datasets", nargs="+", default=[f"nguyen_f{i}" for i in range(1, 9)])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--conditions", nargs="+", default=None, metavar="NAME", help="default: all eight")
    ap.add_argument("--members", type=int, default=None, help="keep this many of the pack's members, evenly spread")
    ap.add_argument("--epochs", type=int, default=200, help="epochs timed per mode and repeat")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--modes", nargs="+", default=None, choices=MODES,
                    help="default: all, mlflow only where it is installed")
    a = ap.parse_args(argv)
    os.environ.setdefault("KANX_DATA_DIR", str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    import importlib.util

    import kanx.curves
    from kanx.curves import HeldOut
    from kanx.loggers.base import Pack, logger_config, open_logger
    from kanx.plan import one_pack
    from kanx.runner import pack_data
    from kanx.trainer import Trainer, describe_device
    from kanx.vocab import PAPER_CONDITIONS

    modes = a.modes or [m for m in MODES if m != "mlflow" or importlib.util.find_spec("mlflow")]
    conditions = a.conditions or list(PAPER_CONDITIONS)
    device = torch.device(a.device)
    tmp = Path(tempfile.mkdtemp(prefix="bench_logging."))
    extra = [f"results_root={tmp}", f"device={a.device}", f"train.compile={str(a.compile).lower()}",
             f"train.cuda_graph={str(a.cuda_graph).lower()}",
             f"seed={a.seeds}", f"train.epochs={a.epochs}", f"train.warmup={a.epochs // 4}",
             f"train.fc_warmup={a.epochs // 10}", "train.checkpoint_every=0"]
    pack = one_pack(a.datasets, conditions, extra)
    if a.members:
        pack = [pack[i * len(pack) // a.members] for i in range(min(a.members, len(pack)))]
    runs = [j.run for j in pack]
    datasets, scalings, x, y = pack_data(runs)
    print(f"device: {describe_device(device)}; torch {torch.__version__}; pack of {len(pack)} "
          f"({'+'.join(a.datasets)}, seeds {a.seeds}); {a.epochs} epochs a timing, a row "
          f"every {a.log_every}; cuda_graph={a.cuda_graph} compile={a.compile}", flush=True)

    append = kanx.curves._append

    opened: dict[str, list[float]] = {mode: [] for mode in LOGGED}
    finished: dict[str, list[float]] = {mode: [] for mode in LOGGED}
    record = {"status": "ok", "metrics": {"test_rmse": 0.01, "train_rmse": 0.009, "contributing_edges": 7, "depth": 2,
                                          "exit": 2, "open_gates": 9, "bias_terms": 1}}

    tags = tuple({"dataset": j.run.data.name, "condition": j.run.condition.name, "beta": j.run.beta,
                  "seed": j.run.seed, "config_hash": j.config_hash} for j in pack)  # as kanx.curves.pack_curves

    def timed(mode: str, i: int) -> tuple[float, list[float]]:
        trainer = Trainer(runs, x, y, datasets[0].n_train, device)
        dirs = [tmp / mode / str(i) / str(m) for m in range(len(pack))]
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
            (d / "record.json").write_text(json.dumps(record))  # what MLflow keeps as an artifact
        curves = None
        if mode != "reference":
            t0 = time.perf_counter()
            logger = open_logger(logger_config({"name": mode if mode in LOGGED else "none"}),
                                 Pack(tuple(dirs), tags, tuple(j.container for j in pack),
                                      0, tmp / mode / str(i)))
            if mode in LOGGED:
                opened[mode].append(time.perf_counter() - t0)
            held_out = HeldOut(datasets, scalings, device, trainer.estimator) if mode != "live" else None
            curves = kanx.curves.Curves(dirs, a.log_every, 0, logger, held_out)
        kanx.curves._append = (lambda path, columns, row, out=None: list(row)) if mode == "rows" else append
        adds: list[float] = []

        def on_epoch(trainer, progress):
            if trainer.epoch % a.log_every == 0 or trainer.epoch == a.epochs:
                t0 = time.perf_counter()
                curves.add(trainer, progress)
                adds.append(time.perf_counter() - t0)

        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        trainer.train(on_epoch if curves else None, host_every=(a.log_every,))
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        if curves:
            curves.close(results=True)
            t0 = time.perf_counter()
            for m in range(len(dirs)):
                curves.log_results(m, record)
            if mode in LOGGED:
                finished[mode].append(time.perf_counter() - t0)
        return seconds, adds

    appends_alone(tmp / "appends", len(pack), a.repeats)
    timed(modes[0], -1)  # warm-up: allocator, compile, graph capture
    times, adds = {mode: [] for mode in modes}, {mode: [] for mode in modes}
    for i in range(a.repeats):
        for mode in modes:
            seconds, add = timed(mode, i)
            times[mode].append(seconds)
            adds[mode] += add
    kanx.curves._append = append
    ref = statistics.median(times[modes[0]])  # the reference, or without it the first mode asked for
    rows_logged = a.epochs // a.log_every
    print(f"{'mode':<12} {'s/epoch':>10} {'ratio':>7} {'per row (ms)':>13} {'at cadence':>11}")
    for mode in modes:
        t = statistics.median(times[mode])
        per_row = statistics.median(adds[mode]) if adds[mode] else 0.0
        print(f"{mode:<12} {t / a.epochs:>10.5f} {t / ref:>7.3f} {per_row * 1e3:>13.2f} "
              f"{1 + per_row / (a.log_every * ref / a.epochs):>11.4f}")
    if "live" in modes:
        size = sum(p.stat().st_size for p in (tmp / "live" / "0").rglob("metrics.csv"))
        print(f"live metrics.csv of the pack: {size / 1e3:.0f} kB after {rows_logged} rows a member")
    if "live" in modes and "held_out" in modes:
        held_out_cost(times, adds, a.epochs, a.log_every)
    for mode in LOGGED:
        if opened[mode]:
            print(f"{mode}: opening the pack's {len(pack)} tracker runs {statistics.median(opened[mode]):.2f} s, "
                  f"their results and close {statistics.median(finished[mode]):.2f} s (medians, outside the epochs)")
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def held_out_cost(times: dict[str, list[float]], adds: dict[str, list[float]], epochs: int, every: int) -> None:
    """The held-out column's cost: the timed epochs with it against without it (``live``), paired
    repeat by repeat (a busy machine drifts between repeats, less within one), as the median ratio
    and its spread; and its time per logged row spread over the cadence, against a live epoch."""
    ratios = sorted(h / lv for h, lv in zip(times["held_out"], times["live"], strict=True))
    row = statistics.median(adds["held_out"]) - statistics.median(adds["live"])
    epoch = statistics.median(times["live"]) / epochs
    print(f"held-out column: epochs with it / without it {statistics.median(ratios):.4f} (median of "
          f"{len(ratios)} paired repeats, spread {ratios[0]:.4f} .. {ratios[-1]:.4f}); its time a row "
          f"{row * 1e3:.2f} ms, {row / (every * epoch) * 100:.2f}% of training at a row every {every} epochs")


if __name__ == "__main__":
    raise SystemExit(main())
