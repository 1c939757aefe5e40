"""torch.compile as kanx uses it, in one place: the fused basis kernels (kanx.kan.kernels), the
fused Adam update (kanx.optim) and the draws' per-element loops (kanx.noise); where inductor keeps
what it compiled (``keep_cache``), and whether and from which epoch a run compiles
(train.compile=auto: ``pays_off``, ``compiled_from``)."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kanx.config import TrainConfig

AUTO = "auto"
# inductor's own setting for its cache folder, which holds the FX graph cache and the AOTAutograd
# cache (both on by default in torch 2.13) and, on a GPU, Triton's kernels: without it the cache
# is under /tmp (torchinductor_<user>), which a reboot or a fresh container empties.
CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
# train.compile=auto compiles a run whose steps save at least what compiling costs it:
#   steps >= WARM_COMPILE_S / SAVED_PER_STEP_S = COMPILE_PAYS_AFTER_STEPS (about 3,800),
# with the compile of `make run`'s shapes from a warm cache (kanx keeps inductor's cache: keep_cache)
# and the seconds a step of the smallest pack (M = 1, sin(x + y^2), width [2, 2, 1, 1]) saves
# compiled against eager in the main phase of a run (forward connections on, beta on), both
# measured by scripts/benchmarks/bench_compile.py (docs/BENCHMARK.md, "Compiling: the main phase";
# 2 cores, one thread, a loaded machine, 2026-11-29). Larger packs save more a step (3.3 ms at M = 1
# to 97 ms for a Concrete pack of 70: bench_compile_saving.py), so the rule compiles no run a warm
# compile does not pay for. The cold compile (about 2 minutes a shape here) is paid once per shape
# and kept, so the rule does not weigh it: a quick try (a few hundred steps) trains eagerly, `make
# run` (48,000 steps) and every paper run (tens of thousands of steps) compile.
WARM_COMPILE_S = 11.5
SAVED_PER_STEP_S = 0.0030
COMPILE_PAYS_AFTER_STEPS = math.ceil(WARM_COMPILE_S / SAVED_PER_STEP_S)


def cache_dir(environ: MutableMapping[str, str] | None = None) -> Path:
    """Where kanx keeps inductor's cache unless TORCHINDUCTOR_CACHE_DIR says otherwise:
    $XDG_CACHE_HOME/kanx/inductor, by default ~/.cache/kanx/inductor (beside the datasets'
    cache, kanx.data.tabular)."""
    environ = os.environ if environ is None else environ
    return Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kanx" / "inductor"


def keep_cache(environ: MutableMapping[str, str] | None = None) -> str:
    """Point inductor's cache at ``cache_dir`` unless the user set TORCHINDUCTOR_CACHE_DIR, before
    anything compiles (inductor reads it at each compile): a second run, in another process or
    after a reboot, then loads its kernels in seconds instead of compiling them for a minute.
    Returns the folder in force."""
    environ = os.environ if environ is None else environ
    return environ.setdefault(CACHE_ENV, str(cache_dir(environ)))


def pays_off(steps: int) -> bool:
    """Whether a run of ``steps`` optimizer steps earns its compile back (train.compile=auto)."""
    return steps >= COMPILE_PAYS_AFTER_STEPS


# train.compile=auto on a CPU trains a run's first epoch eagerly and compiles from the second: the
# first epoch, and its progress, come within seconds of the launch instead of after the compile (a
# warm cache's 11 s for `make run`, a cold one's minutes), at the price of one epoch's saving (about
# 0.06 s of `make run`, 0.6 s of a Concrete pack of 70; docs/BENCHMARK.md). On a GPU, auto compiles
# from the first epoch: the epoch's graph (kanx.epoch_graph) is captured around the compiled code.
EAGER_EPOCHS = 1


def run_steps(train: TrainConfig, n_train: int) -> int:
    """A run's optimizer steps: its epochs x the minibatches of its ``n_train`` rows."""
    return train.epochs * math.ceil(n_train / train.batch_size)


def compiled_from(train: TrainConfig, n_train: int, device_type: str = "cpu") -> int | None:
    """The epoch from which a run on ``n_train`` rows trains with compiled kernels, or None where
    it trains eagerly throughout: train.compile=true from the first (epoch 0), false never, and
    auto (a) never where its steps do not earn the compile back (``pays_off``), (b) on a CPU
    from epoch EAGER_EPOCHS, (c) on a GPU from the first. The epoch depends on the config alone,
    so a run's numbers do too: eager and compiled kernels round a few results differently (the
    parameter terms and Adam's update, to about 1e-7), and where the switch falls is part of
    what a run computed."""
    if train.compile is True:
        return 0
    if train.compile is False or not pays_off(run_steps(train, n_train)):
        return None
    if device_type != "cpu":
        return 0
    return EAGER_EPOCHS if train.epochs > EAGER_EPOCHS else None


@functools.cache
def static(fn, fullgraph: bool = False):
    """``fn`` compiled for static shapes, once per function: one compile per shape it meets,
    cached on disk by inductor (keep_cache). A process trains several packs, each with its own
    shapes (a 4-stage pack with a partial last batch already needs 8 compiles of a basis kernel),
    and past dynamo's default limit of 8 recompiles a function silently falls back to eager (about
    3x slower), so the limit is raised to 256. The kernels are compiled for the thread count in
    force (inductor writes it into them), and dynamo does not recompile when it changes."""
    import torch  # here: the rest of this module is read by torch-free code (kanx.jobs)

    keep_cache()
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 256)
    return torch.compile(fn, dynamic=False, fullgraph=fullgraph)
