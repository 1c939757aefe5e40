"""The learning objective: data loss over exits plus beta times the complexity L_C.

Paper section "Learning objective" and "Training and inference". Every function returns
one value per member (M,), so members of a pack never mix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import torch

from kanx.kan.mechanisms import active_mechanisms
from kanx.kan.network import GatedKAN

COMPLEXITY_SCALES = ("mdl", "mdl_batch", "plain")


@dataclass(frozen=True)
class Costs:
    """Complexity costs c of Eq. (approx-model-complexity): per edge, per node, and the
    exit-gate cost c^x of Eq. (reachability-mdl-compact). The paper fixes c = 1.

    The complexity weights (issue #38) price parts of the model differently, as the paper's
    "Learning objective" allows: an edge's c_lij is ``edge`` times its kind's factor
    (``head`` for an exit head's column, the final layer's with X; ``trunk`` otherwise),
    times ``forward`` if its source arrives through a forward connection, times
    ``layers[l]`` for stage l, times ``inputs[i]`` if its source is input i. A node's c_lj
    is ``node``; an input's (with input gates) is ``node * inputs[i]``. ``layers`` and
    ``inputs`` are None for all ones, the paper's."""

    edge: float = 1.0
    node: float = 1.0
    exit: float = 1.0
    trunk: float = 1.0
    forward: float = 1.0
    head: float = 1.0
    layers: tuple[float, ...] | None = None
    inputs: tuple[float, ...] | None = None

    @property
    def weighted(self) -> bool:
        """Whether any edge's factor differs from 1 (else L_C takes the paper's plain sums)."""
        return ((self.trunk, self.forward, self.head) != (1.0, 1.0, 1.0)
                or any(v != 1.0 for v in (*(self.layers or ()), *(self.inputs or ()))))


def edge_weights(model: GatedKAN, costs: Costs) -> torch.Tensor:
    """c_lij / ``costs.edge`` for every edge (M, n_edges), from the member layout: the kind's
    factor (the final layer is a head with X, a trunk layer without, per member), the forward
    connection's, the stage's and the source input's (Costs)."""
    lay = model.members
    head = lay.edge_head.unsqueeze(0).expand(model.M, -1)  # (M, n_edges)
    if lay.mixed or not model.condition.exits:
        final = (lay.edge_stage == model.L - 1).unsqueeze(0)
        has_x = lay.has_exits.view(-1, 1) if lay.mixed else torch.zeros(1, 1, dtype=torch.bool, device=head.device)
        head = torch.where(final & ~has_x, torch.zeros_like(head), head)
    w = torch.where(head > 0, costs.head, costs.trunk) * torch.where(lay.fc_input > 0, costs.forward, 1.0)
    if costs.layers is not None:
        w = w * torch.tensor(costs.layers, dtype=w.dtype, device=w.device)[lay.edge_stage]
    if costs.inputs is not None:
        n0 = model.width[0]
        per_node = torch.ones(lay.n_nodes + 1, dtype=w.dtype, device=w.device)
        per_node[:n0] = torch.tensor(costs.inputs, dtype=w.dtype, device=w.device)
        w = w * per_node[lay.edge_src]
    return w


def exit_mse(outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """MSE_k = (1/n) sum_i ||y^(k)_i - y_i||^2, squared error summed over outputs and
    averaged over samples, as the paper writes it. outputs (M, E, B, P), y (M, B, P) -> (M, E)."""
    return (outputs - y.unsqueeze(1)).pow(2).sum(-1).mean(-1)


def data_loss(outputs: torch.Tensor, y: torch.Tensor, eta: torch.Tensor | None) -> torch.Tensor:
    """L_data = sum_k eta_k MSE_k with exits (eta a Gumbel-softmax sample, "Training and
    inference"); plain MSE without (eta None, one exit). -> (M,)"""
    mse = exit_mse(outputs, y)  # (M, E)
    if eta is None:
        return mse[:, 0]
    return (eta * mse).sum(-1)


def layer_complexities(model: GatedKAN, costs: Costs = Costs()) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-layer trunk complexities C_l (M, L-1) and exit-head complexities C^h_l (M, E).

    C_l = sum_j E[z_{l+1,j}] (c_{l+1,j} + sum_i E[z_lij] c_lij), Eq. (approx-model-complexity);
    without ngates E[z_{l+1,j}] = 1. C^h_l = sum_ij E[z^h_lij] c^h_lij (heads have egates but
    no ngates). Without X the final layer is an ordinary trunk layer and carries its
    output-node costs (z_Lj = 1). E[z_lij] is the edge's effective gate (GatedKAN.expected_gates):
    with N or I it carries its source node's E[z] too, and its target's, so that
    sum_j E[z_{l+1,j}] sum_i E[z_lij] c_lij is the sum over edges of c_lij times the
    effective gate's E[z]. The per-edge costs c_lij are edge_weights' (Costs).
    """
    ez = model.expected_gates()  # (M, n_edges), effective gates
    if costs.weighted:
        ez = ez * edge_weights(model, costs)
    nodes = model.expected_nodes() if model.condition.node_gates else None  # (M, n_nodes)
    trunk, heads = [], []
    for k, z in enumerate(model.split_edges(ez)):  # per stage (M, I_k, O_k)
        t = model.trunk_out[k]
        if t:
            node_term: float | torch.Tensor = t * costs.node
            if nodes is not None:  # sum_j c_{l+1,j} E[z_{l+1,j}] over the units of x^(k+1)
                first = sum(model.width[: k + 1])
                node_term = costs.node * nodes[:, first : first + t].sum(-1)
            trunk.append(node_term + costs.edge * z[..., :t].sum((-2, -1)))
        if model.head_out[k]:
            heads.append(costs.edge * z[..., t:].sum((-2, -1)))
    if not model.condition.exits:  # the final layer is trunk layer L-1, nodes included
        trunk.append(model.n_out * costs.node + heads.pop())
    M = model.M
    as_tensor = lambda xs: torch.stack(xs, -1) if xs else model.alpha.new_zeros(M, 0)  # noqa: E731
    return as_tensor(trunk), as_tensor(heads)


def input_complexity(model: GatedKAN, costs: Costs = Costs()) -> torch.Tensor:
    """sum_i c_0i E[z_0i] (M,): the input nodes' term, with input gates (I) only (0 without).
    Eq. (approx-model-complexity) sums node costs from layer 1 on; the inputs, gated, are
    priced as the nodes of layer 0 are, and every inference path uses them, so the term
    takes no exit probability."""
    if not model.condition.input_gates:
        return model.alpha.new_zeros(model.M)
    n0 = model.width[0]
    ez = model.expected_nodes()[:, :n0]  # (M, n_0)
    if costs.inputs is not None:
        ez = ez * torch.tensor(costs.inputs, dtype=ez.dtype, device=ez.device)
    term = costs.node * ez.sum(-1)
    return term * model.members.has_input_gates.to(term.dtype) if model.members.mixed else term


def complexity(model: GatedKAN, costs: Costs = Costs(), exit_tau: float | torch.Tensor | None = None) -> torch.Tensor:
    """L_C per member (M,).

    Without X, Eq. (approx-model-complexity): L_C = sum_{l=0}^{L-1} C_l.
    With X, Eq. (reachability-mdl-compact):
        L_C = sum_{l=0}^{L-2} (sum_{k>l} pi_k) C_l + sum_{l=0}^{L-1} pi_l C^h_l + c^x (L-1),
    the expected description length of the inference path under the exit distribution pi
    plus the cost of the exit gate's L-1 free parameters. In a mixed pack each member gets
    its own condition's formula. ``exit_tau``: pi = softmax(logits / exit_tau), the
    tempered reading of train.exit_pi (default None: pi = softmax(logits), the "categorical
    parameters" of "Training and inference"). With input gates (I), plus input_complexity;
    with a registered factor, plus its mechanism's cost (mechanism_complexity).
    """
    lc = _complexity(model, costs, exit_tau)
    lc = lc + input_complexity(model, costs) if model.condition.input_gates else lc
    return mechanism_complexity(model, costs, lc)


def mechanism_complexity(model: GatedKAN, costs: Costs, lc: torch.Tensor) -> torch.Tensor:
    """``lc`` (M,) plus the cost of every registered mechanism the pack has (Mechanism.cost, 0 for
    the members without its factor); ``lc`` itself when it has none."""
    for mechanism in active_mechanisms(model.condition):
        if mechanism.cost is not None:
            term = mechanism.cost(model, costs)
            lc = lc + model.members.keep(mechanism.flag, term, partial(torch.zeros_like, term))
    return lc


def _complexity(model: GatedKAN, costs: Costs, exit_tau: float | torch.Tensor | None) -> torch.Tensor:
    trunk, heads = layer_complexities(model, costs)
    if not model.condition.exits:
        return trunk.sum(-1)
    pi = model.exit_probs(exit_tau)  # (M, L)
    reach = 1.0 - torch.cumsum(pi, dim=-1)[:, :-1]  # sum_{k>l} pi_k for l = 0..L-2
    with_exits = (reach * trunk).sum(-1) + (pi * heads).sum(-1) + costs.exit * (model.L - 1)
    if not model.members.mixed:
        return with_exits
    # Members without X: the final layer is trunk layer L-1, nodes included (their other
    # heads are masked, so heads[:, -1] is the final layer's edges).
    plain = torch.cat([trunk, model.n_out * costs.node + heads[:, -1:]], dim=-1).sum(-1)
    return torch.where(model.members.has_exits, with_exits, plain)


def complexity_scale(mode: str, n_train: int, batch_size: int) -> float:
    """Factor in front of beta * L_C (default ``mdl_batch``, settled on Concrete in
    docs/CALIBRATION.md). The section "Learning objective" gives the BIC-style
    model description length (log n / n) L_C next to a data term (1/n) sum_i ||f - y||^2,
    and leaves open which n a minibatch implementation uses:

    - ``mdl``: n = n_train, the size of the training set;
    - ``mdl_batch``: n = the batch size, the n of the minibatch MSE it is added to;
    - ``plain``: 1, beta ||theta||_0 as in the L0 objective of the background section
      "Differentiable L0 Regularization", without the MDL factor.
    """
    if mode == "mdl":
        return math.log(n_train) / n_train
    if mode == "mdl_batch":
        return math.log(batch_size) / batch_size
    if mode == "plain":
        return 1.0
    raise ValueError(f"complexity scale {mode!r} is not one of {', '.join(COMPLEXITY_SCALES)}")


def total_loss(data: torch.Tensor, lc: torch.Tensor, beta: torch.Tensor, scale: float) -> torch.Tensor:
    """L = L_data + beta * scale * L_C per member (M,)."""
    return data + beta * scale * lc
