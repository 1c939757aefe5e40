"""Checks of the machine before any compute: is the device there, can the results be
written, and does a pack fit in memory. Each fails with a one-line ConfigError instead of an
error hours later (a record that cannot be written) or a machine brought down by swapping."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kanx.atomic import on_read_only_file_system
from kanx.errors import ConfigError
from kanx.kan.shapes import stage_shapes

if TYPE_CHECKING:
    import torch

NO_CUDA = "device=cuda but torch finds no CUDA device: use device=cpu or device=auto"


def resolve_device(device: str) -> torch.device:
    """The torch device a ``device`` setting (auto | cpu | cuda) trains on: auto is the GPU
    where torch finds one, else the CPU; cuda without one is refused (ConfigError, NO_CUDA).
    The one CUDA check: the job checks, the trainer, the pack grouping and the scripts ask it."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError(NO_CUDA)
    return torch.device(device)


def check_writable(run_dirs: Sequence[Path]) -> None:
    """Each run folder that exists, else its nearest existing parent (the results folder,
    which training creates below), must be a folder this process can write to."""
    checked: set[Path] = set()
    for run_dir in run_dirs:
        folder = Path(run_dir).absolute()
        while not folder.exists() and folder.parent != folder:
            folder = folder.parent
        if folder in checked:
            continue
        checked.add(folder)
        if not folder.is_dir():
            raise ConfigError(f"{folder} is not a folder, so the results in {run_dir} cannot be written: choose "
                              "another results_root")
        if on_read_only_file_system(folder):
            raise ConfigError(f"{folder} is on a read-only file system, so the results in {run_dir} cannot be written: "
                              "choose a results_root on a writable one")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ConfigError(f"{folder} is not writable by this user, so the results in {run_dir} cannot be written: "
                              "fix its permissions or choose another results_root")


# Float32 copies of each parameter a training step holds: the parameter, its gradient, Adam's
# two moments, and the gated weights the layer folds per step with their gradient.
_PARAM_COPIES = 6
# Per sample and layer input: silu(x), the C basis values and the Cox-de Boor recursion's
# G + 2K intermediates, kept for the backward pass with their gradients (a rough upper bound).
_ACTIVATION_COPIES = 3
_BYTES = 4  # float32


def pack_bytes(runs: Sequence) -> int:
    """A rough upper bound of the memory a pack of these runs (kanx.config.RunConfig, one
    pack_key) takes in training: parameters, gradients and Adam state, and the activations
    of a batch, for every member."""
    r = runs[0]
    forward, exits = any(x.condition.forward for x in runs), any(x.condition.exits for x in runs)  # the superset model
    G, K = r.model.grid_size, r.model.spline_order
    sizes = [(i, trunk + head) for i, trunk, head in stage_shapes(r.model.width, forward, exits)]
    params = sum(i * o * (G + K + 3) for i, o in sizes)  # coef (C = G + K), scale_base, scale_sp, gate logit
    batch = r.train.batch_size
    activations = batch * sum(i * (1 + (G + K) + (G + 2 * K)) + o for i, o in sizes)
    return len(runs) * _BYTES * (_PARAM_COPIES * params + _ACTIVATION_COPIES * activations)


def available_bytes(device: str) -> int | None:
    """Free memory of the device the packs train on: the GPU's, else the machine's
    (psutil if installed, else /proc/meminfo); None when it cannot be told."""
    import torch

    if resolve_device(device).type == "cuda":
        return int(torch.cuda.mem_get_info()[0])
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_memory(packs: Sequence[Sequence], available: int | None = None) -> None:
    """Refuse a pack (a list of kanx.jobs.Job) whose memory bound exceeds what is free,
    naming what to lower. Skipped when the free memory is unknown."""
    free_by_device: dict[str, int | None] = {}
    for pack in packs:
        runs = [j.run for j in pack]
        device = runs[0].device
        if device not in free_by_device:  # asked once per device, not per pack
            free_by_device[device] = available_bytes(device) if available is None else available
        free = free_by_device[device]
        need = pack_bytes(runs)
        if free is None or need <= free:
            continue
        width = list(runs[0].model.width)
        lower = (f"lower train.pack_size (now {runs[0].train.pack_size}; "
                 f"this pack has {len(runs)} runs) or model.width={width}"
                 if len(runs) > 1 else f"lower model.width={width} or train.batch_size={runs[0].train.batch_size}")
        raise ConfigError(f"a pack of {len(runs)} run(s) of {runs[0].data.name} needs about {_size(need)} (parameters, "
                          f"Adam state, activations of batch {runs[0].train.batch_size} x width {max(width)}), more "
                          f"than the {_size(free)} available: {lower}")


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
