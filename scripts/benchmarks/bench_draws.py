"""Time an epoch's random draws for a large mixed pack: the per-member generator loop kanx used
before counter-based draws (each member's torch.Generator drawing its minibatch order and its
noise in turn, on the host) against kanx.noise (every member at once, as tensor operations on
the pack's device), eager and as one torch.compile kernel (what a CPU pack with train.compile
uses). All are measured in this run, interleaved; prints milliseconds per epoch and the
ratios; nothing is written.

    python scripts/benchmarks/bench_draws.py [--device cpu|cuda] [--datasets nguyen_f1 ...] [--seeds 0,1,2]
        [--repeats 20]

The pack is what `kanx-reproduce --group all` would train for these datasets and seeds (Nguyen
F1 to F8, seeds 0 to 2: 624 members, 8 batches an epoch).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch


def generator_draws(generators, n: int, n_batches: int, widths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference: before counter-based draws, Trainer._epoch_noise drew each member's order
    and noise from its own generator, one member after the other, on the host."""
    perms, noise = [], torch.full((n_batches, len(generators), max(widths)), 0.5)
    for m, g in enumerate(generators):
        perms.append(torch.randperm(n, generator=g))
        noise[:, m, : widths[m]] = torch.rand(n_batches, widths[m], generator=g)
    return torch.stack(perms), noise


def timed(call, repeats: int, device: torch.device) -> float:
    """Best of ``repeats`` calls, in milliseconds (the device synchronized)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--datasets", nargs="+", default=[f"nguyen_f{i}" for i in range(1, 9)])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    os.environ.setdefault("KANX_DATA_DIR", str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    from kanx.kan.spec import member_generators
    from kanx.plan import one_pack
    from kanx.runner import pack_data
    from kanx.trainer import Trainer, describe_device
    from kanx.vocab import PAPER_CONDITIONS

    device = torch.device(a.device)
    with tempfile.TemporaryDirectory() as tmp:
        extra = [f"results_root={tmp}", f"device={a.device}", "train.compile=false", f"seed={a.seeds}"]
        pack = one_pack(a.datasets, list(PAPER_CONDITIONS), extra)
    runs = [j.run for j in pack]
    datasets, _, x, y = pack_data(runs)
    trainer = Trainer(runs, x, y, datasets[0].n_train, device)
    n, n_batches = x.shape[1], trainer.batches_per_epoch
    own = trainer.model.members
    widths = [int((own.egate_index[m] >= 0).sum() + (own.exit_index[m] >= 0).sum()) for m in range(trainer.M)]
    generators = member_generators([r.seed for r in runs], stream=1)
    print(f"device: {describe_device(device)}; torch {torch.__version__}, {torch.get_num_threads()} threads; pack of "
          f"{len(pack)} ({'+'.join(a.datasets)}, seeds {a.seeds}), N = {n}, {n_batches} batches an epoch, "
          f"{sum(widths) * n_batches:,} noise values", flush=True)
    from kanx import noise

    slots = trainer.model.members.noise_slots()

    def kanx_draws(compiled: bool):
        return lambda: noise.epoch_draws(trainer.streams, epoch, n, n_batches, slots, compiled)

    epoch = 0
    compile_s = time.perf_counter()
    kanx_draws(True)()  # torch.compile's first call, not timed
    compile_s = time.perf_counter() - compile_s
    best = {"before": float("inf"), "eager": float("inf"), "compiled": float("inf")}
    for _ in range(3):  # interleaved rounds: a load change on the host hits both sides alike
        best["before"] = min(best["before"], timed(lambda: generator_draws(generators, n, n_batches, widths),
                                                   a.repeats, torch.device("cpu")))
        best["eager"] = min(best["eager"], timed(kanx_draws(False), a.repeats, device))
        best["compiled"] = min(best["compiled"], timed(kanx_draws(True), a.repeats, device))
    print(f"  per-member generators on the host (before): {best['before']:.2f} ms per epoch")
    print(f"  kanx.noise on {device.type}, eager (after):      {best['eager']:.2f} ms per epoch")
    print(f"  kanx.noise on {device.type}, compiled (after):   {best['compiled']:.2f} ms per epoch (first call, "
          f"compiling: {compile_s:.0f} s)")
    print(f"draws for an epoch of {len(pack)} members: eager / before = {best['eager'] / best['before']:.3f}, "
          f"compiled / before = {best['compiled'] / best['before']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
