"""The learning objective: data loss over exits plus beta times the complexity L_C.

Paper section "Learning objective" and "Training and inference". Every function returns
one value per member (M,), so members of a pack never mix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kanx.kan.network import GatedKAN

COMPLEXITY_SCALES = ("mdl", "mdl_batch", "plain")


@dataclass(frozen=True)
class Costs:
    """Complexity costs c of Eq. (approx-model-complexity): per edge, per node, and the
    exit-gate cost c^x of Eq. (reachability-mdl-compact). The paper fixes c = 1."""

    edge: float = 1.0
    node: float = 1.0
    exit: float = 1.0


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

    C_l = sum_j E[z_{l+1,j}] (c_{l+1,j} + sum_i E[z_lij] c_lij) with no ngates (E[z_node] = 1);
    C^h_l = sum_ij E[z^h_lij] c^h_lij (heads have egates but no ngates). Without X the final
    layer is an ordinary trunk layer and carries its output-node costs (z_Lj = 1).
    """
    ez = model.split_edges(model.expected_gates())  # per stage (M, I_k, O_k)
    trunk, heads = [], []
    for k, z in enumerate(ez):
        t = model.trunk_out[k]
        if t:
            trunk.append(t * costs.node + costs.edge * z[..., :t].sum((-2, -1)))
        if model.head_out[k]:
            heads.append(costs.edge * z[..., t:].sum((-2, -1)))
    if not model.condition.exits:  # the final layer is trunk layer L-1, nodes included
        trunk.append(model.n_out * costs.node + heads.pop())
    M = model.M
    as_tensor = lambda xs: torch.stack(xs, -1) if xs else model.alpha.new_zeros(M, 0)  # noqa: E731
    return as_tensor(trunk), as_tensor(heads)


def complexity(model: GatedKAN, costs: Costs = Costs(), exit_tau: float | torch.Tensor | None = None) -> torch.Tensor:
    """L_C per member (M,).

    Without X, Eq. (approx-model-complexity): L_C = sum_{l=0}^{L-1} C_l.
    With X, Eq. (reachability-mdl-compact):
        L_C = sum_{l=0}^{L-2} (sum_{k>l} pi_k) C_l + sum_{l=0}^{L-1} pi_l C^h_l + c^x (L-1),
    the expected description length of the inference path under the exit distribution pi
    plus the cost of the exit gate's L-1 free parameters. In a mixed pack each member gets
    its own condition's formula. ``exit_tau``: pi = softmax(logits / exit_tau), the
    tempered reading of train.exit_pi (default None: pi = softmax(logits), the "categorical
    parameters" of "Training and inference").
    """
    trunk, heads = layer_complexities(model, costs)
    if not model.condition.exits:
        return trunk.sum(-1)
    pi = model.exit_probs(exit_tau)  # (M, L)
    reach = 1.0 - torch.cumsum(pi, dim=-1)[:, :-1]  # sum_{k>l} pi_k for l = 0..L-2
    with_exits = (reach * trunk).sum(-1) + (pi * heads).sum(-1) + costs.exit * (model.L - 1)
    if not model.mixed:
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
