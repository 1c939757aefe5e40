"""One KAN layer batched over a leading member axis M: the B-spline activations of every
edge, gated (Eq. gated-layer-update), as one batched matmul per layer.

Paper, Background "Kolmogorov-Arnold Networks" and section "Gated multi-exit architecture".
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from kanx.kan.kernels import kan_matmul
from kanx.kan.spec import KANSpec
from kanx.kan.spline import adaptive_grid, fit_coefficients, spline_values, uniform_grid


class KANLayer(nn.Module):
    """M independent KAN layers of I inputs and O outputs (Eq. kan-layer-update-j with
    the egates of Eq. gated-layer-update; no ngates in the factorial).

    y[m,b,o] = sum_i z[m,i,o] * (scale_base * silu(x_i) + scale_sp * sum_c coef_c B_c(x_i))
    """

    grid: torch.Tensor  # (M, I, T) knots, a buffer

    def __init__(self, M: int, in_features: int, out_features: int, spec: KANSpec, dtype=torch.float32):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.G, self.K = spec.grid_size, spec.spline_order
        self.compiled = False  # fused basis kernel (torch.compile) for training steps
        C = self.G + self.K
        lo, hi = spec.grid_range
        self.register_buffer("grid", uniform_grid(M, in_features, self.G, self.K, lo, hi).to(dtype))  # (M, I, T)
        # coef is (M, I, O, C) to every reader, stored as (M, C, I, O): the layout the gated-weight
        # fold writes (forward) and reads its gradient in (backward), so both run contiguous.
        self.coef = nn.Parameter(torch.zeros(M, C, in_features, out_features, dtype=dtype).permute(0, 2, 3, 1))
        self.scale_base = nn.Parameter(torch.zeros(M, in_features, out_features, dtype=dtype))
        self.scale_sp = nn.Parameter(torch.full((M, in_features, out_features), in_features**-0.5, dtype=dtype))

    @torch.no_grad()
    def reset_parameters(self, spec: KANSpec, generators: Sequence[torch.Generator]) -> None:
        """pykan's initialization, member m drawing from generators[m]:
        coef fits noise (U[0,1) - 1/2) * noise_scale / G at the G+1 interior knots by the
        minimum-norm least-squares solution; scale_base = mu/sqrt(I) + sigma U(-1,1)/sqrt(I);
        scale_sp = 1/sqrt(I)."""
        M, I, O = self.scale_base.shape
        draws, base = [], []
        for g in generators:
            knot_values = torch.rand(self.G + 1, I, O, generator=g, dtype=torch.float64)
            draws.append((knot_values - 0.5) * spec.noise_scale / self.G)
            base.append(torch.rand(I, O, generator=g, dtype=torch.float64) * 2 - 1)
        noise = torch.stack(draws)  # (M, G+1, I, O): values at the knots
        knots = self.grid[..., self.K : -self.K].to(torch.float64).permute(0, 2, 1)  # (M, G+1, I)
        coef = fit_coefficients(knots, noise, self.grid, self.K)
        self.coef.copy_(coef)
        self.scale_base.copy_(spec.scale_base_mu * I**-0.5 + spec.scale_base_sigma * torch.stack(base) * I**-0.5)
        self.scale_sp.fill_(I**-0.5)

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        """x: (M, B, I), gate: (M, I, O) -> (M, B, O).

        The gated weights are folded into one (M, 1+C, I, O) array [z w_b, z w_s c_1, ..., z w_s c_C]
        so the layer is one batched matmul over the [silu(x), B(x)] features (kernels.kan_matmul:
        the features from the K+1 B-splines that are nonzero at each input, the input gradient
        from their K+1 derivatives).
        """
        M, I, O = self.scale_base.shape
        assert x.dim() == 3 and x.shape[0] == M and x.shape[2] == I, \
            f"inputs {tuple(x.shape)} are not (M={M}, B, I={I})"
        assert gate.shape == (M, I, O), f"gates {tuple(gate.shape)} are not (M={M}, I={I}, O={O})"
        # (M, 1+C, I, O)
        w = torch.cat([(gate * self.scale_base).unsqueeze(1),
                       (gate * self.scale_sp).unsqueeze(1) * self.coef.permute(0, 3, 1, 2)], dim=1)
        return kan_matmul(x, self.grid, w, self.K, self.compiled and torch.is_grad_enabled())

    def edge_spline(self, x: torch.Tensor) -> torch.Tensor:
        """The spline part sum_c coef_c B_c(x) of every edge: (M, N, I) -> (M, N, I, O)."""
        return spline_values(x, self.grid, self.coef, self.K)

    @torch.no_grad()
    def update_grid(
        self, x: torch.Tensor, grid_eps: float, members: torch.Tensor | None = None,
        rtol: float | None = None, points: int | None = None,
    ) -> None:
        """Re-place the knots from samples x (M, N, I) and refit coef so each edge's spline
        is preserved on the samples (pykan's update_grid_from_samples). Only ``members``
        (bool (M,), default all) change: a diverged member's NaNs must not reach the solver.

        With tied samples (discrete inputs such as Concrete's age, or the many zeros of its
        admixtures) several adaptive knots coincide up to grid_eps, and the basis functions
        between them see almost no samples. Plain least squares (``rtol`` None, as pykan)
        then puts coefficients of 1e3 and more on them: the spline still passes through the
        samples but swings wildly between them, where later activations can land.
        ``rtol`` (model.grid_refit_rtol) drops those near-null directions instead.

        The knots always come from all N samples. The refit uses all of them too (``points``
        None, as pykan), or ``points`` evenly spaced order statistics per input when N is larger
        (model.grid_refit_points; docs/CALIBRATION.md has the evidence for the default)."""
        keep = torch.ones(x.shape[0], dtype=torch.bool, device=x.device) if members is None else members.to(x.device)
        x = torch.where(keep.view(-1, 1, 1), x, torch.zeros_like(x))
        x_sorted = torch.sort(x, dim=1).values.to(torch.float64)  # (M, N, I)
        new_grid = adaptive_grid(x_sorted, self.G, self.K, grid_eps)  # (M, I, T), from all N samples
        if points is not None and x_sorted.shape[1] > points:
            # Order statistics spread over the sample range as the full set is, but they
            # weight the range evenly by rank, not by the full set's multiplicities.
            idx = torch.linspace(0, x_sorted.shape[1] - 1, points, device=x.device).round().long()
            x_sorted = x_sorted[:, idx]
        coef = torch.where(keep.view(-1, 1, 1, 1), self.coef, torch.zeros_like(self.coef)).to(torch.float64)
        old = spline_values(x_sorted, self.grid.to(torch.float64), coef, self.K)
        new_coef = fit_coefficients(x_sorted, old, new_grid, self.K, rtol)
        self.coef.copy_(torch.where(keep.view(-1, 1, 1, 1), new_coef.to(self.coef.dtype), self.coef))
        self.grid.copy_(torch.where(keep.view(-1, 1, 1), new_grid.to(self.grid.dtype), self.grid))
