"""Where each member of a pack sits in the pack's network: the member layout of a GatedKAN.

A pack of M members is one batched GatedKAN built on the *superset* of the members'
conditions (E if any member has E, ...). Each member sees only its own condition's network,
as the paper's ablations say (Results, opening): forward-connection rows and exit-head
columns it lacks are masked, its egate logits are frozen open without E, and without X its
exit is the final layer with no Gumbel noise. This module holds that bookkeeping, apart
from the model's equations (kanx.kan.network):

  - the superset's shape: stages, edges, the flat edge layout of the gates;
  - which edges exist for whom (``edge_mask``) and which members have a mechanism (``keep``);
  - where a member's own-condition parameters sit in the superset's (``member_index``:
    checkpoints hold every member in its own condition's layout, so it resumes in a pack of
    any make-up);
  - which draw of the counter-based noise (kanx.noise) each member puts in each slot of
    the pack's noise vector (``noise_slots``), so that it draws the same numbers packed or
    alone;
  - the node gates (N on hidden units, I on inputs): which nodes each member gates
    (``node_own``), and the source and target node of every edge (``edge_src``,
    ``edge_dst``), so that an edge's effective gate is its own times its nodes'.

It also owns the members' state: each member's initialization as a model of its own
condition (``initialize``), its own-layout slice of the pack's parameters and Adam moments
(``member_state_dict``, ``checkpoint_part``) and their loading (``load_checkpoint_parts``),
and the split of a step's noise vector by purpose (``split_noise``, a StepNoise): the model
(kanx.kan.network) takes its noise already split and knows no member's slice.

The model and the trainer ask this layout; neither computes a member's slice itself. A
registered factor's parameters (kanx.kan.mechanisms) need nothing here: a member's own part is
its row, held only where its condition has the factor. A mechanism with noise of its own would
add its noise slots here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch import nn

from kanx import noise
from kanx.kan import mechanisms
from kanx.kan.shapes import stage_shapes
from kanx.kan.spec import Condition
from kanx.vocab import FACTOR_FIELDS

if TYPE_CHECKING:
    from kanx.kan.network import GatedKAN

# Mechanisms whose members are told apart by a per-member flag (Condition's field names), as are
# the registered ones (kanx.kan.mechanisms); forward connections are told apart by the edge
# masks instead.
FLAGGED = ("edge_gates", "exits", "node_gates", "input_gates")
# A node gate's draw is the egate purpose's (kanx.noise.EGATE) at this index plus the node's id:
# above every edge index, so a member's egate draws are the same with or without node gates.
NODE_DRAW_BASE = 1 << 24
# Adam's moments, sliced per member like the parameter they belong to.
MOMENTS = ("exp_avg", "exp_avg_sq")


class StepNoise(NamedTuple):
    """A step's uniforms by purpose, in the slots of the pack's layout: ``edges`` (M, n_edges)
    with E, ``nodes`` (M, n_nodes) with N or I (None without), ``exits`` (M, L), width 0 without X."""

    edges: torch.Tensor | None
    nodes: torch.Tensor | None
    exits: torch.Tensor


class MemberLayout(nn.Module):
    """The member layout of a pack of ``conditions`` (one per member) on a network of
    ``width``. Its tensors (masks, flags, noise slots) are non-persistent buffers: they move
    with the model and are never saved (a checkpoint rebuilds them from the conditions).

    Attributes: ``width``; ``conditions`` (per member) and ``condition`` (their superset);
    ``mixed`` (the members' conditions differ); ``M``, ``L`` (stages), ``n_out``;
    ``trunk_out``, ``head_out`` (outputs of each stage's trunk and exit head) and
    ``edge_shapes`` (I_k, O_k) of the superset's stages; ``n_edges`` (all stages flattened);
    ``n_nodes`` (the nodes a gate may sit on: x^(0), ..., x^(L-1), numbered as in
    kanx.kan.structure, inputs first).
    """

    # Buffers (typed here: nn.Module's attribute lookup would say Tensor | Module). own_edges and
    # has_<flag> exist only in a mixed pack, node_own only where the superset has N or I.
    fc_input: torch.Tensor
    own_edges: torch.Tensor
    has_edge_gates: torch.Tensor
    has_exits: torch.Tensor
    has_node_gates: torch.Tensor
    has_input_gates: torch.Tensor
    edge_src: torch.Tensor
    edge_dst: torch.Tensor
    edge_stage: torch.Tensor
    edge_head: torch.Tensor
    node_own: torch.Tensor
    egate_index: torch.Tensor
    exit_index: torch.Tensor
    n_nodes: int

    def __init__(self, width: Sequence[int], conditions: Sequence[Condition], dtype=torch.float32):
        super().__init__()
        width = tuple(int(w) for w in width)
        if len(width) < 2:
            raise ValueError(f"model width {list(width)} needs at least an input and an output size")
        conditions = list(conditions)
        condition = Condition(**{f: any(getattr(c, f) for c in conditions) for f in FACTOR_FIELDS.values()})
        self.width, self.conditions, self.condition = width, conditions, condition
        self.mixed = any(c != condition for c in conditions)
        self.M, self.L, self.n_out = len(conditions), len(width) - 1, width[-1]
        shapes = stage_shapes(width, condition.forward, condition.exits)
        self.trunk_out = [trunk for _, trunk, _ in shapes]
        self.head_out = [head for _, _, head in shapes]
        self.edge_shapes = [(n_in, trunk + head) for n_in, trunk, head in shapes]
        self.n_edges = sum(i * o for i, o in self.edge_shapes)

        # Inputs that arrive through forward connections: all but the stage's own x^(k).
        fc_masks = []
        for k, (n_in, _) in enumerate(self.edge_shapes):
            fc = torch.zeros(n_in, dtype=dtype)
            fc[: n_in - width[k]] = 1.0
            fc_masks.append(fc)
        fc_input = torch.cat([fc.repeat_interleave(o) for fc, (_, o) in zip(fc_masks, self.edge_shapes, strict=True)])
        self.register_buffer("fc_input", fc_input, persistent=False)
        if self.mixed:
            # Which edges exist for whom, and who has E and X.
            own = torch.zeros(self.M, self.n_edges, dtype=dtype)
            for m, c in enumerate(conditions):
                own[m, self.flat_index(c)] = 1.0
            self.register_buffer("own_edges", own, persistent=False)
            for flag in (*FLAGGED, *mechanisms.MECHANISMS):
                self.register_buffer(f"has_{flag}", torch.tensor([getattr(c, flag) for c in conditions]),
                                     persistent=False)
        self._node_layout(dtype)
        egate, exits = self._own_noise_indices()
        self.register_buffer("egate_index", egate, persistent=False)
        self.register_buffer("exit_index", exits, persistent=False)

    # ----------------------------------------------------------------- edges
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
            parts, offset = [], 0
            for k, (n_in, n_out) in enumerate(self.edge_shapes):
                rows, cols = self.stage_block(k, c)
                grid = torch.arange(n_in * n_out).reshape(n_in, n_out)[rows, cols]
                parts.append(offset + grid.reshape(-1))
                offset += n_in * n_out
            cache[c] = torch.cat(parts)
        return cache[c]

    def split_edges(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """(M, n_edges) -> per stage (M, I_k, O_k)."""
        sizes = [i * o for i, o in self.edge_shapes]
        return [t.reshape(t.shape[0], i, o) for t, (i, o) in zip(flat.split(sizes, dim=-1),
                                                                 self.edge_shapes, strict=True)]

    def edge_mask(self, fc_enabled: bool) -> torch.Tensor:
        """1 where an edge exists now: (n_edges,), or (M, n_edges) in a mixed pack, where a
        member's edges are its own condition's. Forward-connection edges are 0 while FCs are
        off (``fc_enabled`` False: the FC warmup); parameter shapes never change."""
        fc_off = self.condition.forward and not fc_enabled
        if self.mixed:
            return self.own_edges * (1.0 - self.fc_input) if fc_off else self.own_edges
        return 1.0 - self.fc_input if fc_off else torch.ones_like(self.fc_input)

    def keep(self, flag: str, value: torch.Tensor, otherwise: Callable[[], torch.Tensor]) -> torch.Tensor:
        """``value`` (M, ...) for the members whose condition has the mechanism ``flag`` (one of
        FLAGGED), ``otherwise()`` for the others: ``value`` itself unless the pack is mixed
        (``otherwise`` is then never called)."""
        if not self.mixed:
            return value
        has = getattr(self, f"has_{flag}")
        return torch.where(has.view(-1, *[1] * (value.dim() - 1)), value, otherwise())

    # ----------------------------------------------------------------- nodes
    def _node_layout(self, dtype) -> None:
        """Node ids: x^(l)_j is offsets[l] + j for l < L (the outputs are never gated). Buffers:
        edge_src, edge_dst (n_edges,) the source and target node of every edge (n_nodes: an
        exit's output), and, where the superset has N or I, node_own (M, n_nodes): 1 where
        the member gates the node (inputs with I, hidden units with N)."""
        width, L = self.width, self.L
        offsets = [sum(width[:l]) for l in range(L + 1)]
        self.n_nodes = offsets[L]
        src, dst = [], []
        for k, (n_in, n_out) in enumerate(self.edge_shapes):
            first = 0 if self.condition.forward else offsets[k]  # stage k reads [x^(0..k)] or x^(k)
            rows = torch.arange(first, first + n_in)
            cols = torch.full((n_out,), self.n_nodes)
            cols[: self.trunk_out[k]] = offsets[k + 1] + torch.arange(self.trunk_out[k])
            src.append(rows.repeat_interleave(n_out))
            dst.append(cols.repeat(n_in))
        self.register_buffer("edge_src", torch.cat(src), persistent=False)
        self.register_buffer("edge_dst", torch.cat(dst), persistent=False)
        self.register_buffer("edge_stage",
                             torch.cat([torch.full((i * o,), k) for k, (i, o) in enumerate(self.edge_shapes)]),
                             persistent=False)
        # 1 for an exit head's column (the final layer's included): C^h of Eq. (reachability-mdl-compact)
        self.register_buffer("edge_head", (self.edge_dst == self.n_nodes).to(dtype), persistent=False)
        if self.condition.node_gated:
            own = torch.zeros(self.M, self.n_nodes, dtype=dtype)
            for m, c in enumerate(self.conditions):
                own[m, : width[0]] = float(c.input_gates)
                own[m, width[0] :] = float(c.node_gates)
            self.register_buffer("node_own", own, persistent=False)

    def node_factor(self, node_z: torch.Tensor) -> torch.Tensor:
        """Node gates (M, n_nodes) -> the factor every edge's gate takes from them (M, n_edges):
        its source node's gate times its target node's (1 for an exit's output), so that a
        closed node closes every edge into and out of it."""
        z = torch.cat([node_z, node_z.new_ones(node_z.shape[0], 1)], dim=-1)  # (M, n_nodes + 1)
        return z[:, self.edge_src] * z[:, self.edge_dst]

    # ----------------------------------------------------------------- members' own state
    def member_index(self, name: str, m: int) -> tuple:
        """The index of member m's own-layout slice in the superset tensor of state entry
        ``name`` (a parameter, buffer, or an optimizer moment of parameter ``name``)."""
        c = self.conditions[m]
        if name.startswith("stages."):
            rows, cols = self.stage_block(int(name.split(".")[1]), c)
            return (m, rows) if name.endswith(".grid") else (m, rows, cols)
        if name == "alpha":
            return (m, self.flat_index(c).to(self.fc_input.device))
        return (m,)  # exit_logits, node_alpha, a mechanism's parameters: the same layout for every condition

    def owns(self, name: str, m: int, params_only: bool = False) -> bool:
        """Whether member m's own-condition model holds state entry ``name`` (with
        ``params_only``, as a parameter): exit logits only with X; egate logits always, but as
        a parameter only with E (without E they are a frozen buffer); node-gate logits only with
        N or I; a registered mechanism's parameters only with its factor."""
        c = self.conditions[m]
        mechanism = mechanisms.owner(name)
        if mechanism is not None:
            return getattr(c, mechanism.flag)
        return ((name != "exit_logits" or c.exits) and (name != "alpha" or c.edge_gates or not params_only)
                and (name != "node_alpha" or c.node_gated))

    def member_names(self, names: Sequence[str], m: int, params_only: bool = False) -> list[str]:
        """Those of ``names`` (a state dict's, or the parameters' in order with ``params_only``)
        that member m's own-condition model holds, in the same order."""
        return [n for n in names if self.owns(n, m, params_only)]

    def member_state_dict(self, state: Mapping[str, torch.Tensor], m: int) -> dict[str, torch.Tensor]:
        """Member m's part of the pack's ``state`` (a state dict) as a model of its own condition
        with M = 1 would hold it (no M axis)."""
        return {n: self.member_tensor(n, state[n], m).detach().clone() for n in self.member_names(list(state), m)}

    @torch.no_grad()
    def load_member_state_dict(self, state: Mapping[str, torch.Tensor], m: int,
                               own: Mapping[str, torch.Tensor]) -> None:
        """Write member m's own-condition state ``own`` into its slices of the pack's ``state``
        (a state dict, whose tensors are the model's)."""
        for n in self.member_names(list(state), m):
            self.set_member_tensor(n, state[n], m, own[n])

    @torch.no_grad()
    def initialize(self, model: GatedKAN, seeds: Sequence[int]) -> None:
        """Draw every member's parameters from its own seed as a model of its own condition alone
        would: the model's own initialization unless the pack is mixed; else each condition's
        members are initialized by a model of that condition alone, then placed in their blocks
        (the same draws, in the same order, as when trained alone)."""
        if not self.mixed:
            model.reset_parameters(seeds)
            return
        for c in dict.fromkeys(self.conditions):
            members = [m for m, mc in enumerate(self.conditions) if mc == c]
            alone = type(model)(model.spec, c, [seeds[m] for m in members], dtype=model.alpha.dtype)
            for i, m in enumerate(members):
                self.load_member_state_dict(model.state_dict(), m, {k: v[i] for k, v in alone.state_dict().items()})

    def checkpoint_part(self, model_state: Mapping[str, torch.Tensor], param_names: Sequence[str],
                        optimizer_state: Mapping[int, Mapping[str, torch.Tensor]], m: int) -> dict[str, Any]:
        """Member m's ``model`` and ``optimizer`` parts of a checkpoint, from the pack's state dict
        and Adam state (keyed by the position of the parameter in ``param_names``), in the layout of
        a model of its own condition (so it resumes in a pack of any make-up); its ``optimizer`` is
        keyed by the position of the parameter in that model. Every tensor a CPU copy of its own."""
        optimizer = {}
        for j, name in enumerate(self.member_names(param_names, m, params_only=True)):
            st = optimizer_state.get(param_names.index(name))
            if st:
                moments = {k: _own_copy(self.member_tensor(name, st[k], m)) for k in MOMENTS}
                optimizer[j] = {"step": _own_copy(st["step"]), **moments}
        names = self.member_names(list(model_state), m)
        model = {name: _own_copy(self.member_tensor(name, model_state[name], m)) for name in names}
        return {"model": model, "optimizer": optimizer}

    def load_checkpoint_parts(self, model: nn.Module, optimizer_state: dict, params: Sequence[torch.Tensor],
                              parts: Sequence[Mapping[str, Any]]) -> None:
        """Load every member's ``model`` and ``optimizer`` parts (checkpoint_part, one per member,
        taken at the same step) into the pack's ``model`` and its Adam state ``optimizer_state``
        over ``params`` (the optimizer's parameters, the model's in order)."""
        state = model.state_dict()
        for m, part in enumerate(parts):
            self.load_member_state_dict(state, m, part["model"])
        steps = [st["step"] for part in parts for st in part["optimizer"].values()]
        if not steps:
            return
        for p in params:  # Adam's step count is the pack's number of steps, the same for every parameter
            optimizer_state[p] = {"step": steps[0].clone(), **{k: torch.zeros_like(p) for k in MOMENTS}}
        named = dict(model.named_parameters())
        for m, part in enumerate(parts):
            for j, name in enumerate(self.member_names(list(named), m, params_only=True)):
                if j in part["optimizer"]:
                    st = optimizer_state[named[name]]
                    for k in MOMENTS:
                        self.set_member_tensor(name, st[k], m, part["optimizer"][j][k])

    def member_tensor(self, name: str, value: torch.Tensor, m: int) -> torch.Tensor:
        """Member m's own-layout slice of a superset tensor ``value`` of state entry ``name``."""
        return value[self.member_index(name, m)]

    def set_member_tensor(self, name: str, target: torch.Tensor, m: int, own: torch.Tensor) -> None:
        """Write member m's own-layout tensor ``own`` into its slice of ``target``."""
        target[self.member_index(name, m)] = own.to(target.device, target.dtype)

    # ----------------------------------------------------------------- training noise
    def _own_noise_indices(self) -> tuple[torch.Tensor, torch.Tensor]:
        """For every slot of the pack's noise vectors (egate noise per edge, then node-gate
        noise per node, exit noise per layer), the index of the draw each member puts there:
        its own index in its own condition's layout (a node's: NODE_DRAW_BASE + its id), or
        -1 where it lacks the slot (it gets 1/2). A member's draws so never depend on what
        other members need. (M, n_edges or 0 + n_nodes or 0) and (M, L or 0)."""
        n_gate = self.n_edges if self.condition.edge_gates else 0
        n_node = self.n_nodes if self.condition.node_gated else 0
        egate = torch.full((self.M, n_gate + n_node), -1, dtype=torch.long)
        exits = torch.full((self.M, self.L if self.condition.exits else 0), -1, dtype=torch.long)
        for m, c in enumerate(self.conditions):
            if c.edge_gates:
                slots = self.flat_index(c)
                egate[m, slots] = torch.arange(len(slots))
            if n_node:
                ids = torch.arange(self.n_nodes)
                egate[m, n_gate:] = torch.where(self.node_own[m] > 0, NODE_DRAW_BASE + ids, -1)
            if c.exits:
                exits[m] = torch.arange(self.L)
        return egate, exits

    def split_gate_noise(self, u: torch.Tensor | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The egate purpose's slots (M, n_gate + n_node) -> (edge noise or None without E, node
        noise or None without N and I)."""
        if u is None:
            return None, None
        n_gate = self.n_edges if self.condition.edge_gates else 0
        return (u[:, :n_gate] if n_gate else None), (u[:, n_gate:] if self.condition.node_gated else None)

    def noise_slots(self) -> dict[int, torch.Tensor]:
        """The own indices of every purpose of the training noise (kanx.noise), in the order
        their slots sit side by side in a step's noise vector (M, n_noise)."""
        return {noise.EGATE: self.egate_index, noise.EXIT: self.exit_index}

    def split_noise(self, u: torch.Tensor) -> StepNoise:
        """A step's noise vector (M, n_noise) -> its slots by purpose, as the model takes them."""
        parts, start = {}, 0
        for purpose, index in self.noise_slots().items():
            parts[purpose] = u[:, start : start + index.shape[1]]
            start += index.shape[1]
        gated = self.condition.edge_gates or self.condition.node_gated
        edges, nodes = self.split_gate_noise(parts[noise.EGATE] if gated else None)
        return StepNoise(edges, nodes, parts[noise.EXIT])


def _own_copy(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor with storage of its own. A slice of a pack tensor is a view, and
    torch.save writes a view's whole storage: every member's checkpoint held the whole pack."""
    return t.detach().to("cpu", copy=True)
