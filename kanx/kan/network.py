"""GatedKAN: a KAN with edge gates (E), forward connections (F) and exit heads (X),
every parameter batched over a leading member axis M.

Paper section "Gated multi-exit architecture". Conditions are ablations of EFX
(Results, opening): without E the egate logits are frozen at alpha = 20 (always open);
without F the forward connections are removed; without X the exit heads are removed and
only the final layer exists.

Layout. A network of width [n_0, ..., n_L] has L *stages*. Stage k reads
x_cat^(k) = [x^(0), ..., x^(k)] with F, or x^(k) without, and holds
  - the trunk layer k -> x^(k+1) (n_{k+1} outputs), for k < L-1, and
  - the exit head k -> y^(k) (n_L outputs), for k < L-1 with X;
  - stage L-1 is the final trunk layer, which is exit L-1.
Trunk layer k and exit head k read the same inputs, so they are one KANLayer whose output
columns are [trunk | head]: pykan keeps one grid per input, and grid updates depend only
on the input samples, so the merge changes nothing but the number of small ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from kanx.kan import gates as G_
from kanx.kan.spline import adaptive_grid, fit_coefficients, spline_features, spline_values, uniform_grid


@dataclass(frozen=True)
class Condition:
    """One cell of the 2x2x2 factorial: which of E, F, X are present."""

    edge_gates: bool = False
    forward: bool = False
    exits: bool = False

    NAMES = ("Baseline", "F", "X", "FX", "E", "EF", "EX", "EFX")  # the paper's row order

    @property
    def name(self) -> str:
        flags = "E" * self.edge_gates + "F" * self.forward + "X" * self.exits
        return flags or "Baseline"

    @classmethod
    def from_name(cls, name: str) -> Condition:
        if name not in cls.NAMES:
            raise ValueError(f"condition {name!r} is not one of {', '.join(cls.NAMES)}")
        return cls(edge_gates="E" in name, forward="F" in name, exits="X" in name)


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


class KANLayer(nn.Module):
    """M independent KAN layers of I inputs and O outputs (Eq. kan-layer-update-j with
    the egates of Eq. gated-layer-update; no ngates in the factorial).

    y[m,b,o] = sum_i z[m,i,o] * (scale_base * silu(x_i) + scale_sp * sum_c coef_c B_c(x_i))
    """

    REFIT_POINTS = 256  # samples per input used to refit coefficients after a grid update

    def __init__(self, M: int, in_features: int, out_features: int, spec: KANSpec, dtype=torch.float32):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.G, self.K = spec.grid_size, spec.spline_order
        self.compiled = False  # fused basis kernel (torch.compile) for training steps
        C = self.G + self.K
        lo, hi = spec.grid_range
        self.register_buffer("grid", uniform_grid(M, in_features, self.G, self.K, lo, hi).to(dtype))  # (M, I, T)
        self.coef = nn.Parameter(torch.zeros(M, in_features, out_features, C, dtype=dtype))  # (M, I, O, C)
        self.scale_base = nn.Parameter(torch.zeros(M, in_features, out_features, dtype=dtype))
        self.scale_sp = nn.Parameter(torch.full((M, in_features, out_features), in_features**-0.5, dtype=dtype))

    @torch.no_grad()
    def reset_parameters(self, spec: KANSpec, generators: Sequence[torch.Generator]) -> None:
        """pykan's initialization, member m drawing from generators[m]:
        coef fits noise (U[0,1) - 1/2) * noise_scale / G at the G+1 interior knots by the
        minimum-norm least-squares solution; scale_base = mu/sqrt(I) + sigma U(-1,1)/sqrt(I);
        scale_sp = 1/sqrt(I)."""
        M, I, O = self.scale_base.shape
        noise, base = [], []
        for g in generators:
            noise.append((torch.rand(self.G + 1, I, O, generator=g, dtype=torch.float64) - 0.5) * spec.noise_scale / self.G)
            base.append(torch.rand(I, O, generator=g, dtype=torch.float64) * 2 - 1)
        noise = torch.stack(noise)  # (M, G+1, I, O): values at the knots
        knots = self.grid[..., self.K : -self.K].to(torch.float64).permute(0, 2, 1)  # (M, G+1, I)
        coef = fit_coefficients(knots, noise, self.grid, self.K)
        self.coef.copy_(coef)
        self.scale_base.copy_(spec.scale_base_mu * I**-0.5 + spec.scale_base_sigma * torch.stack(base) * I**-0.5)
        self.scale_sp.fill_(I**-0.5)

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        """x: (M, B, I), gate: (M, I, O) -> (M, B, O).

        The gated weights are folded into one (M, I*(1+C), O) matrix so the layer is one
        batched matmul over [silu(x), B(x)] features.
        """
        M, B, I = x.shape
        feats = spline_features(x, self.grid, self.K, self.compiled and torch.is_grad_enabled())  # (M, B, I, 1+C)
        w = torch.cat([(gate * self.scale_base).unsqueeze(-1), (gate * self.scale_sp).unsqueeze(-1) * self.coef], dim=-1)
        w = w.permute(0, 1, 3, 2).reshape(M, -1, self.out_features)  # (M, I*(1+C), O)
        feats = feats.reshape(M, B, -1)
        if M == 1 and self.out_features == 1:
            # A lone matrix-vector product takes BLAS's gemv path, which rounds differently
            # from the batched kernel a pack uses; doubling it keeps the two alike.
            return torch.bmm(torch.cat([feats, feats]), torch.cat([w, w]))[:1]
        return torch.bmm(feats, w)  # (M, B, O)

    def edge_spline(self, x: torch.Tensor) -> torch.Tensor:
        """The spline part sum_c coef_c B_c(x) of every edge: (M, N, I) -> (M, N, I, O)."""
        return spline_values(x, self.grid, self.coef, self.K)

    @torch.no_grad()
    def update_grid(self, x: torch.Tensor, grid_eps: float, members: torch.Tensor | None = None, rtol: float | None = None) -> None:
        """Re-place the knots from samples x (M, N, I) and refit coef so each edge's spline
        is preserved on the samples (pykan's update_grid_from_samples). Only ``members``
        (bool (M,), default all) change: a diverged member's NaNs must not reach the solver.

        With tied samples (discrete inputs such as Concrete's age, or the many zeros of its
        admixtures) several adaptive knots coincide up to grid_eps, and the basis functions
        between them see almost no samples. Plain least squares (``rtol`` None, as pykan)
        then puts coefficients of 1e3 and more on them: the spline still passes through the
        samples but swings wildly between them, where later activations can land.
        ``rtol`` (model.grid_refit_rtol) drops those near-null directions instead."""
        keep = torch.ones(x.shape[0], dtype=torch.bool, device=x.device) if members is None else members.to(x.device)
        x = torch.where(keep.view(-1, 1, 1), x, torch.zeros_like(x))
        x_sorted = torch.sort(x, dim=1).values.to(torch.float64)  # (M, N, I)
        new_grid = adaptive_grid(x_sorted, self.G, self.K, grid_eps)  # (M, I, T), from all N samples
        if x_sorted.shape[1] > self.REFIT_POINTS:
            # The refit only has to pin C = G + K coefficients: evenly spaced order
            # statistics cover the sample range as the full set does, at a fraction of the
            # cost of evaluating two (M, N, I, T) bases in float64.
            idx = torch.linspace(0, x_sorted.shape[1] - 1, self.REFIT_POINTS, device=x.device).round().long()
            x_sorted = x_sorted[:, idx]
        coef = torch.where(keep.view(-1, 1, 1, 1), self.coef, torch.zeros_like(self.coef)).to(torch.float64)
        old = spline_values(x_sorted, self.grid.to(torch.float64), coef, self.K)
        new_coef = fit_coefficients(x_sorted, old, new_grid, self.K, rtol)
        self.coef.copy_(torch.where(keep.view(-1, 1, 1, 1), new_coef.to(self.coef.dtype), self.coef))
        self.grid.copy_(torch.where(keep.view(-1, 1, 1), new_grid.to(self.grid.dtype), self.grid))


class GatedKAN(nn.Module):
    """M independent gated multi-exit KANs of one condition (see module docstring).

    forward(x (M, B, n_0), gates) -> (M, E, B, n_L): the outputs of every exit, E = L with
    X and E = 1 (the final layer) without.
    """

    def __init__(self, spec: KANSpec, condition: Condition, seeds: Sequence[int], dtype=torch.float32):
        super().__init__()
        width = tuple(int(w) for w in spec.width)
        if len(width) < 2:
            raise ValueError(f"model width {list(width)} needs at least an input and an output size")
        self.spec, self.condition, self.width = spec, condition, width
        self.M, self.L, self.n_out = len(seeds), len(width) - 1, width[-1]
        self.fc_enabled = condition.forward  # switched off during the FC warmup by the trainer
        M, L = self.M, self.L

        stages, self.trunk_out, self.head_out = [], [], []
        for k in range(L):
            n_in = sum(width[: k + 1]) if condition.forward else width[k]
            trunk = width[k + 1] if k < L - 1 else 0
            head = self.n_out if (k == L - 1 or condition.exits) else 0
            stages.append(KANLayer(M, n_in, trunk + head, spec, dtype))
            self.trunk_out.append(trunk)
            self.head_out.append(head)
        self.stages = nn.ModuleList(stages)
        self.edge_shapes = [(s.in_features, s.out_features) for s in self.stages]
        self.n_edges = sum(i * o for i, o in self.edge_shapes)

        # Inputs that arrive through forward connections: all but the stage's own x^(k).
        fc_masks = []
        for k, (n_in, _) in enumerate(self.edge_shapes):
            m = torch.zeros(n_in, dtype=dtype)
            m[: n_in - width[k]] = 1.0
            fc_masks.append(m)
        self.register_buffer("fc_input", torch.cat([m.repeat_interleave(o) for m, (_, o) in zip(fc_masks, self.edge_shapes, strict=True)]), persistent=False)

        alpha = torch.full((M, self.n_edges), float(spec.gate_init_alpha if condition.edge_gates else G_.ALPHA_OPEN), dtype=dtype)
        if condition.edge_gates:
            self.alpha = nn.Parameter(alpha)  # (M, n_edges), all stages flattened
        else:
            self.register_buffer("alpha", alpha)  # frozen open, no gradient
        if condition.exits:
            self.exit_logits = nn.Parameter(torch.zeros(M, L, dtype=dtype))  # uniform pi at start
        self.reset_parameters(seeds)

    # ----------------------------------------------------------------- set-up
    @torch.no_grad()
    def reset_parameters(self, seeds: Sequence[int]) -> None:
        gens = member_generators(seeds, stream=0)
        for stage in self.stages:
            stage.reset_parameters(self.spec, gens)

    def use_compiled_basis(self, flag: bool = True) -> None:
        """Training steps use the fused (torch.compile) basis kernel; see spline._feature_kernel."""
        for stage in self.stages:
            stage.compiled = flag

    @property
    def n_exits(self) -> int:
        return self.L if self.condition.exits else 1

    # ----------------------------------------------------------------- gates
    def edge_mask(self) -> torch.Tensor:
        """(n_edges,) 1 where an edge exists now: forward-connection edges are 0 while FCs
        are off (FC warmup); parameter shapes never change."""
        if not self.condition.forward or self.fc_enabled:
            return torch.ones_like(self.fc_input)
        return 1.0 - self.fc_input

    def sample_gates(self, u: torch.Tensor | None) -> torch.Tensor:
        """Training gates (M, n_edges): hard-concrete samples from uniform noise u with E;
        exactly 1 without E (alpha = 20 gives z~ = 1 for every u the sampler allows)."""
        if not self.condition.edge_gates:
            return self.edge_mask().expand(self.M, -1)
        return G_.sample_hard_concrete(self.alpha, u) * self.edge_mask()

    def inference_gates(self, estimator: str = "threshold") -> torch.Tensor:
        """Deterministic gates (M, n_edges) with FCs as they are now."""
        return G_.deterministic_gate(self.alpha, estimator) * self.edge_mask()

    def expected_gates(self) -> torch.Tensor:
        """E[z~] per edge (M, n_edges), Eq. (expected-z); 0 for edges that do not exist now."""
        return G_.expected_open(self.alpha) * self.edge_mask()

    def split_edges(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """(M, n_edges) -> per stage (M, I_k, O_k)."""
        sizes = [i * o for i, o in self.edge_shapes]
        return [t.reshape(t.shape[0], i, o) for t, (i, o) in zip(flat.split(sizes, dim=-1), self.edge_shapes, strict=True)]

    def exit_probs(self) -> torch.Tensor:
        """pi (M, E): softmax of the exit logits with X; [1] (the final layer) without."""
        if not self.condition.exits:
            return torch.ones(self.M, 1, dtype=self.alpha.dtype, device=self.alpha.device)
        return torch.softmax(self.exit_logits, dim=-1)

    def selected_exit(self) -> torch.Tensor:
        """k^ = argmax_k pi_k (M,), as an index into 0..L-1 (L-1 without X)."""
        if not self.condition.exits:
            return torch.full((self.M,), self.L - 1, dtype=torch.long, device=self.alpha.device)
        return self.exit_logits.argmax(dim=-1)

    # ----------------------------------------------------------------- forward
    def forward(self, x: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
        """x: (M, B, n_0), gates: (M, n_edges) -> outputs of every exit (M, E, B, n_L)."""
        outputs, trunk = [], [x]
        for k, (stage, z) in enumerate(zip(self.stages, self.split_edges(gates), strict=True)):
            h = torch.cat(trunk, dim=-1) if self.condition.forward else trunk[-1]  # (M, B, I_k)
            y = stage(h, z)  # (M, B, trunk_k + head_k)
            if self.trunk_out[k]:
                trunk.append(y[..., : self.trunk_out[k]])
            if self.head_out[k]:
                outputs.append(y[..., self.trunk_out[k] :])
        return torch.stack(outputs, dim=1)

    def stage_inputs(self, x: torch.Tensor, gates: torch.Tensor) -> list[torch.Tensor]:
        """The input x_cat^(k) (M, N, I_k) that every stage sees (kanx.draw plots edges over these ranges)."""
        inputs, trunk = [], [x]
        for k, (stage, z) in enumerate(zip(self.stages, self.split_edges(gates), strict=True)):
            h = torch.cat(trunk, dim=-1) if self.condition.forward else trunk[-1]
            inputs.append(h)
            if self.trunk_out[k]:
                trunk.append(stage(h, z)[..., : self.trunk_out[k]])
        return inputs

    @torch.no_grad()
    def update_grid(self, x: torch.Tensor, members: torch.Tensor | None = None) -> None:
        """Grid update from samples x (M, N, n_0), stage by stage in order: each stage sees
        inputs that already pass through the updated stages before it (as pykan's MultKAN).
        Gates are the deterministic ones, so the update draws no noise. ``members``: bool
        (M,) of the members to update (default all)."""
        z = self.split_edges(self.inference_gates())
        trunk = [x]
        for k, stage in enumerate(self.stages):
            h = torch.cat(trunk, dim=-1) if self.condition.forward else trunk[-1]
            stage.update_grid(h, self.spec.grid_eps, members, self.spec.grid_refit_rtol)
            if self.trunk_out[k]:
                trunk.append(stage(h, z[k])[..., : self.trunk_out[k]])

    @torch.no_grad()
    def predict(self, x: torch.Tensor, estimator: str = "threshold") -> torch.Tensor:
        """Inference (M, B, n_0) -> (M, B, n_L): deterministic gates, the selected exit."""
        out = self.forward(x, self.inference_gates(estimator))  # (M, E, B, P)
        k = self.selected_exit() if self.condition.exits else torch.zeros(self.M, dtype=torch.long, device=x.device)
        return out[torch.arange(self.M, device=x.device), k]
