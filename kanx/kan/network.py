"""GatedKAN: a KAN with edge gates (E), forward connections (F), exit heads (X), node gates
on hidden units (N) and input gates (I), every parameter batched over a leading member axis M.

Paper section "Gated multi-exit architecture". Conditions are ablations of EFX
(Results, opening): without E the egate logits are frozen at alpha = 20 (always open);
without F the forward connections are removed; without X the exit heads are removed and
only the final layer exists.

N and I go beyond the paper (issue #38), as its section "Gated multi-exit architecture"
describes them: an ngate z_{l+1,j} on every hidden unit (Eq. gated-layer-update), and, as
its footnote leaves to future work, a gate on every input variable (variable selection).
Both are hard-concrete gates on nodes (``node_alpha``, one per node of x^(0), ..., x^(L-1):
inputs with I, hidden units with N; the outputs are never gated), and an edge's effective
gate is its own times its source and target nodes' gates, so a closed node closes every
edge into and out of it, trunk, forward connection and exit head alike. The target node's
factor is Eq. (gated-layer-update)'s z_{l+1,j}; the source node's makes a closed unit (or
input) silent downstream, where phi(0) != 0 would otherwise leave its edges as constants.

Layout. A network of width [n_0, ..., n_L] has L *stages*. Stage k reads
x_cat^(k) = [x^(0), ..., x^(k)] with F, or x^(k) without, and holds
  - the trunk layer k -> x^(k+1) (n_{k+1} outputs), for k < L-1, and
  - the exit head k -> y^(k) (n_L outputs), for k < L-1 with X;
  - stage L-1 is the final trunk layer, which is exit L-1.
Trunk layer k and exit head k read the same inputs, so they are one KANLayer whose output
columns are [trunk | head]: pykan keeps one grid per input, and grid updates depend only
on the input samples, so the merge changes nothing but the number of small ops. The stages'
shapes are kanx.kan.shapes.stage_shapes; which edges, parameters and noise belong to which
member of a pack is the member layout's business (kanx.kan.members, ``GatedKAN.members``),
so this module holds the equations only.

A factor registered since (kanx.vocab.register_factor) brings its equations as a Mechanism
(kanx.kan.mechanisms): its parameters are made here and its gates multiply each edge's, in
training, in expectation and at inference alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import cast

import torch
from torch import nn

from kanx.kan.gates import ALPHA_OPEN, deterministic_gate, expected_open, gumbel_softmax, sample_hard_concrete
from kanx.kan.layer import KANLayer
from kanx.kan.mechanisms import EXPECTED, TRAIN, active_mechanisms
from kanx.kan.members import MemberLayout, StepNoise
from kanx.kan.spec import Condition, KANSpec, member_generators

__all__ = ["Condition", "GatedKAN", "KANLayer", "KANSpec", "MemberLayout", "member_generators"]


class GatedKAN(nn.Module):
    """M independent gated multi-exit KANs (see module docstring).

    forward(x (M, B, n_0), gates) -> (M, E, B, n_L): the outputs of every exit, E = L with
    X and E = 1 (the final layer) without.

    ``condition`` is one Condition for every member, or one per member (a *mixed* pack).
    A mixed model is built on the superset of the members' conditions (``self.condition``:
    E if any member has E, ...), so a pack with no F member computes no forward-connection
    edges. Each member sees only its own condition's edges; ``self.members`` (a
    MemberLayout, kanx.kan.members) says which are whose: forward-connection rows and
    exit-head columns a member lacks are masked (gate 0), its egate logits are frozen open
    (alpha = 20, no gradient) without E, and without X its exit is the final layer with no
    Gumbel noise. Member m's own-condition parameters sit in a block of the superset's
    (``MemberLayout.member_state_dict``), initialized from its own seed exactly as a model of its
    condition alone, so it follows the same trajectory packed or alone.

    The network's shape (width, condition, M, L, n_out, trunk_out, head_out, edge_shapes,
    n_edges) is read from its member layout; whose state is what (the pack's conditions,
    member state, noise slots) is the layout's alone.
    """

    # Parameters, or buffers (alpha without E); exit_logits only with X, node_alpha only with N or I.
    alpha: torch.Tensor
    exit_logits: torch.Tensor
    node_alpha: torch.Tensor

    def __init__(self, spec: KANSpec, condition: Condition | Sequence[Condition],
                 seeds: Sequence[int], dtype=torch.float32):
        super().__init__()
        conditions = [condition] * len(seeds) if isinstance(condition, Condition) else list(condition)
        self.members = members = MemberLayout(spec.width, conditions, dtype)
        if len(conditions) != len(seeds):
            raise ValueError(f"{len(conditions)} conditions for {len(seeds)} members")
        self.spec = spec
        self.fc_enabled = self.condition.forward  # switched off during the FC warmup by the trainer
        self.stages = nn.ModuleList(KANLayer(self.M, n_in, n_out, spec, dtype) for n_in, n_out in self.edge_shapes)

        alpha = torch.full((self.M, self.n_edges),
                           float(spec.gate_init_alpha if self.condition.edge_gates else ALPHA_OPEN), dtype=dtype)
        if members.mixed:
            alpha[~members.has_edge_gates] = ALPHA_OPEN
        if self.condition.edge_gates:
            self.alpha = nn.Parameter(alpha)  # (M, n_edges), all stages flattened
        else:
            self.register_buffer("alpha", alpha)  # frozen open, no gradient
        if self.condition.exits:
            self.exit_logits = nn.Parameter(torch.zeros(self.M, self.L, dtype=dtype))  # uniform pi at start
        if self.condition.node_gated:  # N or I: one logit per node (M, n_nodes), open where unused
            own = members.node_own > 0
            self.node_alpha = nn.Parameter(torch.where(own, float(spec.gate_init_alpha), ALPHA_OPEN).to(dtype))
        for mechanism in active_mechanisms(self.condition):  # a registered factor's parameters
            values = mechanism.parameters(members, spec, dtype)
            if set(values) != set(mechanism.names):  # the member layout tells whose they are by these names
                raise ValueError(f"mechanism {mechanism.flag!r} made parameters {sorted(values)}, "
                                 f"not its names {list(mechanism.names)}")
            for name, value in values.items():
                self.register_parameter(name, nn.Parameter(value))
        members.initialize(self, seeds)

    # ----------------------------------------------------------------- shape
    @property
    def width(self) -> tuple[int, ...]:
        return self.members.width

    @property
    def condition(self) -> Condition:
        """The network's condition: in a mixed pack, the superset of the members'."""
        return self.members.condition

    @property
    def M(self) -> int:
        return self.members.M

    @property
    def L(self) -> int:
        return self.members.L

    @property
    def n_out(self) -> int:
        return self.members.n_out

    @property
    def trunk_out(self) -> list[int]:
        return self.members.trunk_out

    @property
    def head_out(self) -> list[int]:
        return self.members.head_out

    @property
    def edge_shapes(self) -> list[tuple[int, int]]:
        return self.members.edge_shapes

    @property
    def n_edges(self) -> int:
        return self.members.n_edges

    @property
    def layers(self) -> list[KANLayer]:
        """The stages as KANLayers (nn.ModuleList's items are typed as plain Modules)."""
        return cast("list[KANLayer]", list(self.stages))

    # ----------------------------------------------------------------- set-up
    @torch.no_grad()
    def reset_parameters(self, seeds: Sequence[int]) -> None:
        """pykan's initialization of every stage, member m drawing from seeds[m] as a model of
        the network's condition (a mixed pack's members: MemberLayout.initialize)."""
        gens = member_generators(seeds, stream=0)
        for stage in self.layers:
            stage.reset_parameters(self.spec, gens)

    def use_compiled_basis(self, flag: bool = True) -> None:
        """Training steps use the fused (torch.compile) basis kernel; see kernels._kernel."""
        for stage in self.layers:
            stage.compiled = flag

    @property
    def n_exits(self) -> int:
        return self.L if self.condition.exits else 1

    # ----------------------------------------------------------------- gates
    def edge_mask(self) -> torch.Tensor:
        """1 where an edge exists now: (n_edges,), or (M, n_edges) in a mixed model, where a
        member's edges are its own condition's. Forward-connection edges are 0 while FCs are
        off (FC warmup); parameter shapes never change."""
        return self.members.edge_mask(self.fc_enabled)

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
        if not self.condition.edge_gates:
            return self.alpha
        return self.members.keep("edge_gates", self.alpha, self.alpha.detach)

    def _own_nodes(self, z: torch.Tensor) -> torch.Tensor:
        """Node gate values (M, n_nodes) where a member gates the node, 1 elsewhere (no gradient
        reaches the logits of nodes a member does not gate)."""
        return torch.where(self.members.node_own > 0, z, torch.ones_like(z))

    def sample_gates(self, u_edges: torch.Tensor | None, u_nodes: torch.Tensor | None = None) -> torch.Tensor:
        """Training gates z~ (M, n_edges): hard-concrete samples from uniform noise ``u_edges``
        (M, n_edges) with E (Background "Differentiable l0 regularization"); exactly 1 without E
        (alpha = 20 gives z~ = 1 for every u the sampler allows). With N or I, each edge's gate
        times its nodes' gates (node_factor), sampled from ``u_nodes`` (M, n_nodes)."""
        if not self.condition.edge_gates:
            z = self.edge_mask().expand(self.M, -1)
        else:
            assert u_edges is not None, "a network with edge gates samples them from noise"
            z = sample_hard_concrete(self._alpha(), u_edges)
            z = self.members.keep("edge_gates", z, lambda: torch.ones_like(z))
            z = z * self.edge_mask()
        if self.condition.node_gated:
            assert u_nodes is not None, "a network with node gates samples them from noise"
            z = z * self.members.node_factor(self._own_nodes(sample_hard_concrete(self.node_alpha, u_nodes)))
        return self._mechanism_gates(z, TRAIN)

    def node_inference_gates(self, estimator: str = "threshold") -> torch.Tensor:
        """Deterministic node gates (M, n_nodes): 1 where a member gates no node (nor without N and I)."""
        if not self.condition.node_gated:
            return torch.ones(self.M, self.members.n_nodes, dtype=self.alpha.dtype, device=self.alpha.device)
        return self._own_nodes(deterministic_gate(self.node_alpha, estimator))

    def inference_gates(self, estimator: str = "threshold") -> torch.Tensor:
        """Deterministic gates (M, n_edges) with FCs as they are now: z^ = 1[E[z~] > 1/2]
        ("Training and inference"), or Eq. (louizos-test-estimator); with N or I, times the
        deterministic gates of each edge's nodes."""
        z = deterministic_gate(self.alpha, estimator) * self.edge_mask()
        if self.condition.node_gated:
            z = z * self.members.node_factor(self.node_inference_gates(estimator))
        return self._mechanism_gates(z, estimator)

    def expected_nodes(self) -> torch.Tensor:
        """E[z~] per node (M, n_nodes), Eq. (expected-z); 1 where a member gates no node."""
        if not self.condition.node_gated:
            return torch.ones(self.M, self.members.n_nodes, dtype=self.alpha.dtype, device=self.alpha.device)
        return self._own_nodes(expected_open(self.node_alpha))

    def expected_gates(self) -> torch.Tensor:
        """E[z~] per edge (M, n_edges), Eq. (expected-z); 0 for edges that do not exist now. With
        N or I, the effective gate's: E[z_lij] E[z_src] E[z_dst] (the gates are independent)."""
        z = expected_open(self._alpha()) * self.edge_mask()
        if self.condition.node_gated:
            z = z * self.members.node_factor(self.expected_nodes())
        return self._mechanism_gates(z, EXPECTED)

    def _mechanism_gates(self, z: torch.Tensor, how: str) -> torch.Tensor:
        """Edge gates ``z`` (M, n_edges) times the gates of every registered mechanism the pack
        has (Mechanism.gate, 1 for the members without its factor); ``z`` itself when it has none."""
        for mechanism in active_mechanisms(self.condition):
            if mechanism.gate is not None:
                g = mechanism.gate(self, how)
                z = z * self.members.keep(mechanism.flag, g, partial(torch.ones_like, g))
        return z

    def split_edges(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """(M, n_edges) -> per stage (M, I_k, O_k)."""
        return self.members.split_edges(flat)

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
        return self.members.keep("exits", pi, self._last_exit)

    def exit_weights(self, u: torch.Tensor, tau: float | torch.Tensor) -> torch.Tensor | None:
        """The training weights eta (M, L) of the exits: a Gumbel-softmax sample with X
        (Background "Differentiable categorical selection"); the final layer alone for members
        without X; None when no member has X."""
        if not self.condition.exits:
            return None
        eta = gumbel_softmax(self.exit_logits, u, tau)
        return self.members.keep("exits", eta, self._last_exit)

    def selected_exit(self) -> torch.Tensor:
        """k^ = argmax_k pi_k (M,), as an index into 0..L-1 (L-1 without X)."""
        if not self.condition.exits:
            return torch.full((self.M,), self.L - 1, dtype=torch.long, device=self.alpha.device)
        k = self.exit_logits.argmax(dim=-1)
        return self.members.keep("exits", k, lambda: torch.full_like(k, self.L - 1))

    # ----------------------------------------------------------------- forward
    def _stage_input(self, trunk: list[torch.Tensor]) -> torch.Tensor:
        """x_cat^(k) = [x^(0), ..., x^(k)] with forward connections, x^(k) without (M, B, I_k),
        from the trunk so far [x^(0), ..., x^(k)]."""
        return torch.cat(trunk, dim=-1) if self.condition.forward else trunk[-1]

    def forward(self, x: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
        """x = x^(0) (M, B, n_0), egates z (M, n_edges) -> the outputs y^(k) of every exit (M, E, B, n_L).

        Stage k is the gated layer of Eq. (gated-layer-update) (the egates given, node gates
        folded in: GatedKAN.sample_gates) on x_cat^(k): its columns are the next trunk layer
        x^(k+1) and exit head k's output y^(k). Without F and X this is the composition of Eq.
        (kan-full-composition), with y^(L-1) the output."""
        self._check_shapes(x, gates)
        outputs, trunk = [], [x]
        for k, (stage, z) in enumerate(zip(self.stages, self.split_edges(gates), strict=True)):
            y = stage(self._stage_input(trunk), z)  # (M, B, trunk_k + head_k): [x^(k+1) | y^(k)]
            if self.trunk_out[k]:
                trunk.append(y[..., : self.trunk_out[k]])
            if self.head_out[k]:
                outputs.append(y[..., self.trunk_out[k] :])
        return torch.stack(outputs, dim=1)

    def _check_shapes(self, x: torch.Tensor, gates: torch.Tensor) -> None:
        """x (M, B, n_0) and gates (M, n_edges), or an AssertionError naming the shape that is not:
        a wrong shape would otherwise broadcast, or fail deep in a stage with no word of why."""
        M, n0 = self.M, self.width[0]
        assert x.dim() == 3 and x.shape[0] == M and x.shape[2] == n0, \
            f"inputs {tuple(x.shape)} are not (M={M}, B, n_0={n0})"
        assert gates.shape == (M, self.n_edges), f"gates {tuple(gates.shape)} are not (M={M}, n_edges={self.n_edges})"

    def sample(self, x: torch.Tensor, noise: StepNoise,
               tau: float | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One stochastic pass of training ("Training and inference"): egates z~ sampled from
        the step's gate noise, the outputs of every exit through them, and the exit weights
        eta, a Gumbel-softmax sample at temperature tau from its exit noise.

        x (M, B, n_0), ``noise``: the step's uniforms by purpose (MemberLayout.split_noise)
        -> (outputs (M, E, B, n_L), eta (M, L) or None without X)."""
        gates = self.sample_gates(noise.edges, noise.nodes)
        return self(x, gates), self.exit_weights(noise.exits, tau)

    def stage_inputs(self, x: torch.Tensor, gates: torch.Tensor) -> list[torch.Tensor]:
        """The input x_cat^(k) (M, N, I_k) that every stage sees (kanx.draw plots edges over these ranges)."""
        inputs, trunk = [], [x]
        for k, (stage, z) in enumerate(zip(self.stages, self.split_edges(gates), strict=True)):
            h = self._stage_input(trunk)
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
        for k, stage in enumerate(self.layers):
            h = self._stage_input(trunk)
            stage.update_grid(h, self.spec.grid_eps, members, self.spec.grid_refit_rtol, self.spec.grid_refit_points)
            if self.trunk_out[k]:
                trunk.append(stage(h, z[k])[..., : self.trunk_out[k]])

    @torch.no_grad()
    def predict(self, x: torch.Tensor, estimator: str = "threshold") -> torch.Tensor:
        """Inference (M, B, n_0) -> (M, B, n_L): deterministic gates, the selected exit."""
        out = self.forward(x, self.inference_gates(estimator))  # (M, E, B, P)
        k = self.selected_exit() if self.condition.exits else torch.zeros(self.M, dtype=torch.long, device=x.device)
        return out[torch.arange(self.M, device=x.device), k]
