"""Time one grid update of a large mixed pack with each least-squares path of
kanx.kan.spline.fit_coefficients: the plain pinv of every tall N x C system, and the same
systems reduced by QR to C x C first (the default on CUDA). Prints seconds per update and the
ratio; nothing is written.

    python scripts/benchmarks/bench_grid_update.py [--device cuda] [--datasets nguyen_f1 ...] [--seeds 0,1,2]
        [--conditions EFX ...] [--host]

The pack is what `python -m kanx.reproduce --group all` would train for these datasets and seeds
(Nguyen F1 to F8, seeds 0 to 2: 624 members); each path is timed on a fresh copy of it.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from pathlib import Path

import torch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--datasets", nargs="+", default=[f"nguyen_f{i}" for i in range(1, 9)])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--conditions", nargs="+", default=None, metavar="NAME", help="default: all eight")
    ap.add_argument("--host", action="store_true", help="also time the per-epoch host work that grows with M: "
                    "Trainer.epoch_draws (every member's order and noise) and full_state")
    a = ap.parse_args(argv)
    os.environ.setdefault("KANX_DATA_DIR", str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    import kanx.kan.layer as layer
    from kanx.kan.spline import fit_coefficients
    from kanx.plan import one_pack
    from kanx.runner import pack_data
    from kanx.trainer import Trainer, describe_device
    from kanx.vocab import PAPER_CONDITIONS

    conditions = a.conditions or list(PAPER_CONDITIONS)

    device = torch.device(a.device)
    with tempfile.TemporaryDirectory() as tmp:
        extra = [f"results_root={tmp}", f"device={a.device}", "train.compile=false", f"seed={a.seeds}"]
        pack = one_pack(a.datasets, conditions, extra)
    runs = [j.run for j in pack]
    datasets, _, x, y = pack_data(runs)
    print(f"device: {describe_device(device)}; torch {torch.__version__}; pack of {len(pack)} ({'+'.join(a.datasets)}, "
          f"seeds {a.seeds}), N = {x.shape[1]} samples", flush=True)
    if a.host:
        trainer = Trainer(runs, x, y, datasets[0].n_train, device)
        trainer.epoch_draws(0, trainer.batches_per_epoch)
        for name, call in (("epoch_draws", lambda: trainer.epoch_draws(0, trainer.batches_per_epoch)),
                           ("full_state", trainer.full_state)):
            t0 = time.perf_counter()
            for _ in range(20):
                call()
            print(f"  {name}: {(time.perf_counter() - t0) / 20 * 1e3:.1f} ms per epoch (mean of 20)", flush=True)
    seconds = {}
    for reduce_tall in (True, False):
        trainer = Trainer(runs, x, y, datasets[0].n_train, device)
        layer.fit_coefficients = functools.partial(fit_coefficients, reduce_tall=reduce_tall)
        trainer.model.update_grid(trainer.x, trainer.alive)  # warm-up (solver handles, allocations)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        trainer.model.update_grid(trainer.x, trainer.alive)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds[reduce_tall] = time.perf_counter() - t0
        print(f"  {'QR-reduced' if reduce_tall else 'plain pinv'}: {seconds[reduce_tall]:.3f} s per grid update",
              flush=True)
    layer.fit_coefficients = fit_coefficients
    print(f"grid update of {len(pack)} members on {describe_device(device)}: plain pinv {seconds[False]:.3f} s, "
          f"QR-reduced {seconds[True]:.3f} s ({seconds[False] / seconds[True]:.1f} x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
