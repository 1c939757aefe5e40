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

import torch
from torch import nn

from kanx.kan import gates as G_
from kanx.kan.layer import KANLayer
from kanx.kan.spec import Condition, KANSpec, member_generators

__all__ = ["Condition", "GatedKAN", "KANLayer", "KANSpec", "member_generators"]


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
