"""Shapes that differ only in the pack size M: one compile with M dynamic against one per M.

    python scripts/benchmarks/bench_dynamic_m.py [--sizes 70 10 1] [--inputs 39] [--batch 64] [--repeats 5]

kanx compiles its kernels for static shapes (kanx.compiling.static: dynamic=False), so a sweep
whose packs differ only in M (the last pack of a sweep, a resumed pack, a mixed plan's packs)
compiles each M afresh. The alternative is one compile with the member axis marked dynamic
(torch._dynamo.mark_dynamic on dim 0); M = 1 is still its own compile (dynamo specializes
sizes 0 and 1). This script compiles the basis layer's forward kernel (kanx.kan.kernels._forward:
the local basis and the dense features, the largest compiled kernel of a step) both ways in one
process, checks both against the eager kernel bit for bit, and times them in interleaved repeats
(medians): the first call of each M (the compile, or none where the dynamic one is reused) and
the microseconds per call. Adopt the dynamic member axis only where it costs no time per call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch


def inputs(M: int, I: int, B: int, G: int = 10, K: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(M)
    x = torch.rand(M, I, B, generator=g) * 2 - 1
    h = 2 / G
    grid = (torch.arange(G + 2 * K + 1, dtype=torch.float32) * h - 1 - K * h).expand(M, I, -1).contiguous()
    return x, grid


def per_call(fn, x, grid, K: int, seconds: float) -> float:
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn(x, grid, K, True)
        calls += 1
    return (time.perf_counter() - t0) / calls


def main(argv: list[str] | None = None) -> int:
    from kanx.compiling import keep_cache
    from kanx.kan.kernels import _forward

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[70, 10, 1], help="pack sizes M (default 70 10 1)")
    ap.add_argument("--inputs", type=int, default=39, help="the layer's inputs I (default 39: Concrete EFX's last)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0, help="timed seconds per repeat and variant")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    keep_cache()
    torch._dynamo.config.recompile_limit = 256
    K = 3
    variants = {"static": torch.compile(_forward, dynamic=False), "dynamic M": torch.compile(_forward, dynamic=None)}
    first: dict[tuple[str, int], float] = {}
    for M in a.sizes:
        x, grid = inputs(M, a.inputs, a.batch)
        reference = _forward(x, grid, K, True)
        for name, fn in variants.items():
            if name == "dynamic M":
                torch._dynamo.mark_dynamic(x, 0)
                torch._dynamo.mark_dynamic(grid, 0)
            t0 = time.perf_counter()
            got = fn(x, grid, K, True)
            first[name, M] = time.perf_counter() - t0
            same = all(torch.equal(g, r) for g, r in zip(got, reference, strict=True) if g is not None)
            print(f"{name:<9} M={M:<3} first call {first[name, M]:6.2f} s; equal to eager: {same}", flush=True)
    times: dict[tuple[str, int], list[float]] = {key: [] for key in first}
    for _ in range(a.repeats):
        for M in a.sizes:
            x, grid = inputs(M, a.inputs, a.batch)
            for name, fn in variants.items():
                if name == "dynamic M":
                    torch._dynamo.mark_dynamic(x, 0)
                    torch._dynamo.mark_dynamic(grid, 0)
                times[name, M].append(per_call(fn, x, grid, K, a.seconds))
    print("\n| M | static us/call | dynamic M us/call | dynamic / static | first call static s | dynamic s |")
    print("|---|---|---|---|---|---|")
    for M in a.sizes:
        s, d = (statistics.median(times[name, M]) * 1e6 for name in variants)
        print(f"| {M} | {s:.1f} | {d:.1f} | {d / s:.2f} | {first['static', M]:.2f} | {first['dynamic M', M]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
