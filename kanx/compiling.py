"""torch.compile as kanx uses it, in one place: the fused basis kernels (kanx.kan.kernels), the
fused Adam update (kanx.optim) and the draws' per-element loops (kanx.noise)."""

from __future__ import annotations

import functools

import torch


@functools.cache
def static(fn, fullgraph: bool = False):
    """``fn`` compiled for static shapes, once per function: one compile per shape it meets,
    cached on disk by inductor. A process trains several packs, each with its own shapes (a
    4-stage pack with a partial last batch already needs 8 compiles of a basis kernel), and past
    dynamo's default limit of 8 recompiles a function silently falls back to eager (about 3x
    slower), so the limit is raised to 256."""
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 256)
    return torch.compile(fn, dynamic=False, fullgraph=fullgraph)
