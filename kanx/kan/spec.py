"""What a GatedKAN is made of: the factorial condition (kanx.vocab.Condition, re-exported
here), the architecture hyperparameters, and the per-member random streams.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from kanx.vocab import Condition  # noqa: F401  (the model's name for it; kanx.vocab owns it)


@dataclass(frozen=True)
class KANSpec:
    """Architecture and initialization hyperparameters (pykan's names and defaults
    where pykan has one; G = 10 and K = 3 as in the paper's Methods)."""

    width: tuple[int, ...]
    grid_size: int = 10
    spline_order: int = 3
    gate_init_alpha: float = -1.0
    noise_scale: float = 0.3
    scale_base_mu: float = 0.0
    scale_base_sigma: float = 1.0
    grid_eps: float = 0.02
    grid_refit_rtol: float | None = None  # None: pykan's plain least-squares refit (see KANLayer.update_grid)
    grid_refit_points: int | None = None  # samples per input in the refit; None: all (pykan)
    grid_range: tuple[float, float] = (-1.0, 1.0)


def member_generators(seeds: Sequence[int], stream: int) -> list[torch.Generator]:
    """One torch.Generator per member for a named stream (0 init, 1 training noise).

    Streams are children of numpy's SeedSequence(seed), so a member's draws depend only on
    its own seed, never on its position in a pack.
    """
    gens = []
    for seed in seeds:
        child = np.random.SeedSequence(int(seed)).spawn(stream + 1)[stream]
        gens.append(torch.Generator().manual_seed(int(child.generate_state(1, np.uint64)[0] >> 1)))
    return gens
