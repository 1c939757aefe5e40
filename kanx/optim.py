"""Adam, as torch.optim.Adam with its defaults (no weight decay, no AMSGrad), in a few
foreach ops.

torch.optim.Adam is the same arithmetic, but constructing it imports torch._dynamo
(~3 s of every process's start-up); at the toy scale of smoke sweeps and tests, start-up is
most of the cost. Adam is elementwise, so members of a pack never mix here either.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from kanx.compiling import static


def _update(params, grads, m, v, b1: float, b2: float, eps: float, step_size: torch.Tensor,
            bias2_sqrt: torch.Tensor) -> None:
    """Adam's update of every parameter, written per tensor so that torch.compile makes one pass
    over (p, g, m, v) of each instead of the seven foreach passes of ``Adam.step``."""
    for p, g, m_, v_ in zip(params, grads, m, v, strict=True):
        m_.lerp_(g, 1 - b1)
        v_.mul_(b2).addcmul_(g, g, value=1 - b2)
        p.sub_(m_ / v_.sqrt().div_(bias2_sqrt).add_(eps) * step_size)  # = addcdiv_(m, denom, value=-step_size)


class Adam:
    """m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;
    p <- p - lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps)   (Kingma & Ba; PyTorch's form).

    ``fused``: the update compiled into one pass per parameter (CPU, with train.compile): the
    same operations, rounded as inductor's kernels round them (to about 1e-7 of the eager form);
    on a CPU the seven foreach passes were about 6% of a packed Concrete EFX step."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float = 1e-3, betas=(0.9, 0.999),
                 eps: float = 1e-8, fused: bool = False):
        self.param_groups = [{"params": list(params), "lr": lr, "betas": betas, "eps": eps}]
        self.state: dict = {}
        self.fused = fused
        self.capturable = False  # make_capturable: static gradients, and step() is step_capturable()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """No gradients before a backward; once capturable, the static ones zeroed in place."""
        for p in self.param_groups[0]["params"]:
            if self.capturable:
                p.grad.zero_()
            else:
                p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        if self.capturable:
            return self.step_capturable()
        group = self.param_groups[0]
        (b1, b2), lr, eps = group["betas"], group["lr"], group["eps"]
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        for p in params:
            if p not in self.state:
                self.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                                 "exp_avg_sq": torch.zeros_like(p)}
        states = [self.state[p] for p in params]
        grads = [p.grad for p in params]
        m, v = [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
        for s in states:
            s["step"] += 1
        t = float(states[0]["step"])
        if self.fused:
            # 0-d float32 tensors, not Python floats: a float argument would recompile every step
            # (the eager ops round their Python scalars to float32 alike)
            step_size = torch.tensor(lr / (1 - b1**t), dtype=torch.float32)
            static(_update)(params, grads, m, v, b1, b2, eps, step_size,
                            torch.tensor(math.sqrt(1 - b2**t), dtype=torch.float32))
            return
        torch._foreach_lerp_(m, grads, 1 - b1)
        torch._foreach_mul_(v, b2)
        torch._foreach_addcmul_(v, grads, grads, 1 - b2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, math.sqrt(1 - b2**t))
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(params, m, denom, -lr / (1 - b1**t))

    # ------------------------------------------------------------- CUDA-graph form
    @torch.no_grad()
    def make_capturable(self, device: torch.device) -> None:
        """State for every parameter, with one step counter on the device shared by all
        (they always step together), and static gradients that every step accumulates into
        (zero_grad zeroes them), so a step makes no host sync and a CUDA graph can replay it.
        From here on `step` is `step_capturable`."""
        group = self.param_groups[0]
        steps = [s["step"] for s in self.state.values()]
        shared = (steps[0].detach().clone() if steps else torch.tensor(0.0)).to(device, torch.float64)
        for p in group["params"]:
            st = self.state.setdefault(p, {"exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)})
            st["step"] = shared
            p.grad = torch.zeros_like(p)
        self._shared_step = shared
        self.capturable = True

    def state_tensors(self) -> list[torch.Tensor]:
        """Every tensor a step writes: the parameters, the moments and, once capturable, the
        shared step counter (what a CUDA graph's warm-up must leave as it found it)."""
        tensors = [p.data for p in self.param_groups[0]["params"]]
        tensors += [s[k] for s in self.state.values() for k in ("exp_avg", "exp_avg_sq")]
        return tensors + ([self._shared_step] if self.capturable else [])

    @torch.no_grad()
    def step_capturable(self) -> None:
        """The same update as `step`, with the bias corrections computed on the device in
        float64 and rounded to float32, as `step` rounds its Python floats."""
        group = self.param_groups[0]
        (b1, b2), lr, eps = group["betas"], group["lr"], group["eps"]
        params = [p for p in group["params"] if p.grad is not None]
        states = [self.state[p] for p in params]
        grads = [p.grad for p in params]
        m, v = [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
        t = self._shared_step
        t += 1
        torch._foreach_lerp_(m, grads, 1 - b1)
        torch._foreach_mul_(v, b2)
        torch._foreach_addcmul_(v, grads, grads, 1 - b2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, torch.sqrt(1 - b2**t).float())
        torch._foreach_add_(denom, eps)
        update = torch._foreach_div(m, denom)
        torch._foreach_mul_(update, (lr / (1 - b1**t)).float())
        torch._foreach_sub_(params, update)
