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

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from kanx.kan.gates import ALPHA_OPEN, deterministic_gate, expected_open, gumbel_softmax, sample_hard_concrete
from kanx.kan.layer import KANLayer
from kanx.kan.spec import Condition, KANSpec, member_generators
from kanx.kan.shapes import stage_shapes

__all__ = ["Condition", "GatedKAN", "KANLayer", "KANSpec", "member_generators"]


class GatedKAN(nn.Module):
    """M independent gated multi-exit KANs (see module docstring).

    forward(x (M, B, n_0), gates) -> (M, E, B, n_L): the outputs of every exit, E = L with
    X and E = 1 (the final layer) without.

    ``condition`` is one Condition for every member, or one per member (a *mixed* pack).
    A mixed model is built on the superset of the members' conditions (``self.condition``:
    E if any member has E, ...), so a pack with no F member computes no forward-connection
    edges. Each member sees only its own condition's edges, as the paper's ablations say:
    forward-connection rows and exit-head columns it lacks are masked (gate 0), its egate
    logits are frozen open (alpha = 20, no gradient) without E, and without X its exit is
    the final layer with no Gumbel noise. Member m's own-condition parameters sit in a
    block of the superset's (``member_state_dict``), initialized from its own seed exactly
    as a model of its condition alone, so it follows the same trajectory packed or alone.
    """

    def __init__(self, spec: KANSpec, condition: Condition | Sequence[Condition], seeds: Sequence[int], dtype=torch.float32):
        super().__init__()
        width = tuple(int(w) for w in spec.width)
        if len(width) < 2:
            raise ValueError(f"model width {list(width)} needs at least an input and an output size")
        conditions = [condition] * len(seeds) if isinstance(condition, Condition) else list(condition)
        if len(conditions) != len(seeds):
            raise ValueError(f"{len(conditions)} conditions for {len(seeds)} members")
        condition = Condition(any(c.edge_gates for c in conditions), any(c.forward for c in conditions), any(c.exits for c in conditions))
        self.spec, self.condition, self.conditions, self.width = spec, condition, conditions, width
        self.mixed = any(c != condition for c in conditions)
        self.M, self.L, self.n_out = len(seeds), len(width) - 1, width[-1]
        self.fc_enabled = condition.forward  # switched off during the FC warmup by the trainer
        M, L = self.M, self.L

        stages, self.trunk_out, self.head_out = [], [], []
        for n_in, trunk, head in stage_shapes(width, condition.forward, condition.exits):
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

        alpha = torch.full((M, self.n_edges), float(spec.gate_init_alpha if condition.edge_gates else ALPHA_OPEN), dtype=dtype)
        if self.mixed:
            # Per-member views of the superset: which edges exist for whom, who has E and X.
            own = torch.zeros(M, self.n_edges, dtype=dtype)
            for m, c in enumerate(conditions):
                own[m, self.flat_index(c)] = 1.0
            self.register_buffer("own_edges", own, persistent=False)
            self.register_buffer("has_e", torch.tensor([c.edge_gates for c in conditions]), persistent=False)
            self.register_buffer("has_x", torch.tensor([c.exits for c in conditions]), persistent=False)
            alpha[~self.has_e] = ALPHA_OPEN
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
        if not self.mixed:
            gens = member_generators(seeds, stream=0)
            for stage in self.stages:
                stage.reset_parameters(self.spec, gens)
            return
        # Each condition's members are initialized by a model of that condition alone, then
        # placed in their blocks: the same draws, in the same order, as when trained alone.
        for c in dict.fromkeys(self.conditions):
            members = [m for m, mc in enumerate(self.conditions) if mc == c]
            alone = GatedKAN(self.spec, c, [seeds[m] for m in members], dtype=self.alpha.dtype)
            for i, m in enumerate(members):
                self.load_member_state_dict(m, {k: v[i] for k, v in alone.state_dict().items()})

    def use_compiled_basis(self, flag: bool = True) -> None:
        """Training steps use the fused (torch.compile) basis kernel; see kernels._kernel."""
        for stage in self.stages:
            stage.compiled = flag

    @property
    def n_exits(self) -> int:
        return self.L if self.condition.exits else 1

    # ----------------------------------------------------------------- members' own layouts
    def stage_block(self, k: int, c: Condition) -> tuple[slice, slice]:
        """(rows, columns) of stage k that a member of condition c uses: its inputs are the
        last ones (without F, only x^(k)), its outputs the first ([trunk | head] without the
        heads it lacks)."""
        n_in = self.edge_shapes[k][0]
        own_in, trunk, head = stage_shapes(self.width, c.forward, c.exits)[k]
        return slice(n_in - own_in, n_in), slice(0, trunk + head)

    def flat_index(self, c: Condition) -> torch.Tensor:
        """Positions in the flat (n_edges,) layout of a condition-c model's edges, in its own
        order (computed once per condition: checkpoints ask for it per member)."""
        cache = self.__dict__.setdefault("_flat_index_cache", {})
        if c not in cache:
            cache[c] = self._flat_index(c)
        return cache[c]

    def _flat_index(self, c: Condition) -> torch.Tensor:
        parts, offset = [], 0
        for k, (n_in, n_out) in enumerate(self.edge_shapes):
            rows, cols = self.stage_block(k, c)
            grid = torch.arange(n_in * n_out).reshape(n_in, n_out)[rows, cols]
            parts.append(offset + grid.reshape(-1))
            offset += n_in * n_out
        return torch.cat(parts)

    def _member_index(self, name: str, m: int) -> tuple:
        c = self.conditions[m]
        if name.startswith("stages."):
            rows, cols = self.stage_block(int(name.split(".")[1]), c)
            return (m, rows) if name.endswith(".grid") else (m, rows, cols)
        if name == "alpha":
            return (m, self.flat_index(c).to(self.alpha.device))
        return (m,)

    def member_names(self, m: int, params_only: bool = False) -> list[str]:
        """Names in member m's own-condition model (state dict, or parameters in order)."""
        c = self.conditions[m]
        names = [n for n, _ in (self.named_parameters() if params_only else self.state_dict().items())]
        keep = lambda n: (n != "exit_logits" or c.exits) and (n != "alpha" or c.edge_gates or not params_only)  # noqa: E731
        return [n for n in names if keep(n)]

    def member_tensor(self, name: str, value: torch.Tensor, m: int) -> torch.Tensor:
        """Member m's own-layout slice of a superset tensor ``value`` (a parameter, buffer,
        or optimizer moment of parameter ``name``)."""
        return value[self._member_index(name, m)]

    def set_member_tensor(self, name: str, target: torch.Tensor, m: int, own: torch.Tensor) -> None:
        target[self._member_index(name, m)] = own.to(target.device, target.dtype)

    def member_state_dict(self, m: int) -> dict:
        """Member m's state as a model of its own condition with M = 1 would hold it (no M axis)."""
        state = self.state_dict()
        return {n: self.member_tensor(n, state[n], m).detach().clone() for n in self.member_names(m)}

    @torch.no_grad()
    def load_member_state_dict(self, m: int, own: dict) -> None:
        state = self.state_dict()
        for n in self.member_names(m):
            self.set_member_tensor(n, state[n], m, own[n])

    # ----------------------------------------------------------------- gates
    def edge_mask(self) -> torch.Tensor:
        """1 where an edge exists now: (n_edges,), or (M, n_edges) in a mixed model, where a
        member's edges are its own condition's. Forward-connection edges are 0 while FCs are
        off (FC warmup); parameter shapes never change."""
        fc_off = self.condition.forward and not self.fc_enabled
        if self.mixed:
            return self.own_edges * (1.0 - self.fc_input) if fc_off else self.own_edges
        return 1.0 - self.fc_input if fc_off else torch.ones_like(self.fc_input)

    @contextmanager
    def forward_connections(self, on: bool) -> Iterator[GatedKAN]:
        """Evaluate with forward connections on or off, then give back the setting the
        trainer chose for the epoch: the trainer owns fc_enabled (the FC warmup), and the
        readers of a model (structure, drawing, formula) must not leave it changed."""
        before = self.fc_enabled
        self.fc_enabled = on
        try:
            yield self
        finally:
            self.fc_enabled = before

    def _alpha(self) -> torch.Tensor:
        """Egate logits, frozen (no gradient) for the members without E."""
        if self.mixed and self.condition.edge_gates:
            return torch.where(self.has_e.unsqueeze(-1), self.alpha, self.alpha.detach())
        return self.alpha

    def sample_gates(self, u: torch.Tensor | None) -> torch.Tensor:
        """Training gates (M, n_edges): hard-concrete samples from uniform noise u with E;
        exactly 1 without E (alpha = 20 gives z~ = 1 for every u the sampler allows)."""
        if not self.condition.edge_gates:
            return self.edge_mask().expand(self.M, -1)
        z = sample_hard_concrete(self._alpha(), u)
        if self.mixed:
            z = torch.where(self.has_e.unsqueeze(-1), z, torch.ones_like(z))
        return z * self.edge_mask()

    def inference_gates(self, estimator: str = "threshold") -> torch.Tensor:
        """Deterministic gates (M, n_edges) with FCs as they are now."""
        return deterministic_gate(self.alpha, estimator) * self.edge_mask()

    def expected_gates(self) -> torch.Tensor:
        """E[z~] per edge (M, n_edges), Eq. (expected-z); 0 for edges that do not exist now."""
        return expected_open(self._alpha()) * self.edge_mask()

    def split_edges(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """(M, n_edges) -> per stage (M, I_k, O_k)."""
        sizes = [i * o for i, o in self.edge_shapes]
        return [t.reshape(t.shape[0], i, o) for t, (i, o) in zip(flat.split(sizes, dim=-1), self.edge_shapes, strict=True)]

    def _last_exit(self) -> torch.Tensor:
        """One-hot pi (M, L) on the final layer: the exit of the members without X."""
        out = torch.zeros(self.M, self.L, dtype=self.alpha.dtype, device=self.alpha.device)
        out[:, -1] = 1.0
        return out

    def exit_probs(self, tau: float | torch.Tensor | None = None) -> torch.Tensor:
        """pi (M, E): softmax of the exit logits with X (of logits / tau when ``tau`` is
        given: train.exit_pi=tempered); [1] (the final layer) without."""
        if not self.condition.exits:
            return torch.ones(self.M, 1, dtype=self.alpha.dtype, device=self.alpha.device)
        pi = torch.softmax(self.exit_logits if tau is None else self.exit_logits / tau, dim=-1)
        return torch.where(self.has_x.unsqueeze(-1), pi, self._last_exit()) if self.mixed else pi

    def exit_weights(self, u: torch.Tensor, tau: float) -> torch.Tensor | None:
        """The training weights eta (M, L) of the exits: a Gumbel-softmax sample with X
        ("Training and inference"); the final layer alone for members without X; None
        when no member has X."""
        if not self.condition.exits:
            return None
        eta = gumbel_softmax(self.exit_logits, u, tau)
        return torch.where(self.has_x.unsqueeze(-1), eta, self._last_exit()) if self.mixed else eta

    def selected_exit(self) -> torch.Tensor:
        """k^ = argmax_k pi_k (M,), as an index into 0..L-1 (L-1 without X)."""
        if not self.condition.exits:
            return torch.full((self.M,), self.L - 1, dtype=torch.long, device=self.alpha.device)
        k = self.exit_logits.argmax(dim=-1)
        return torch.where(self.has_x, k, torch.full_like(k, self.L - 1)) if self.mixed else k

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
            stage.update_grid(h, self.spec.grid_eps, members, self.spec.grid_refit_rtol, self.spec.grid_refit_points)
            if self.trunk_out[k]:
                trunk.append(stage(h, z[k])[..., : self.trunk_out[k]])

    @torch.no_grad()
    def predict(self, x: torch.Tensor, estimator: str = "threshold") -> torch.Tensor:
        """Inference (M, B, n_0) -> (M, B, n_L): deterministic gates, the selected exit."""
        out = self.forward(x, self.inference_gates(estimator))  # (M, E, B, P)
        k = self.selected_exit() if self.condition.exits else torch.zeros(self.M, dtype=torch.long, device=x.device)
        return out[torch.arange(self.M, device=x.device), k]
