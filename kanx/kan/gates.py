"""Hard-concrete edge gates (egates) and the Gumbel-softmax exit gate (xgate).

Paper, Background "Differentiable l0 regularization" and "Differentiable categorical
selection"; inference rule from "Training and inference".
"""

from __future__ import annotations

import math

import torch

# Hard-concrete constants of the paper's Methods "Experimental details".
TAU = 2.0 / 3.0
GAMMA = -0.1
ZETA = 1.1
# Logit of an ablated (always-open) egate: "egate logits were fixed at alpha = 20".
ALPHA_OPEN = 20.0
# Uniform noise is kept off {0, 1} so the logit and Gumbel transforms stay finite.
_U_EPS = 1e-6


def sample_hard_concrete(alpha: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Stochastic gate z~ in [0, 1] (Eqs. for s, s-bar and z~ of Louizos et al.).

    s = sigmoid((log u - log(1 - u) + alpha) / tau), s_bar = s (zeta - gamma) + gamma,
    z~ = min(1, max(0, s_bar)). ``u`` ~ U(0, 1) with alpha's shape.
    """
    u = u.clamp(_U_EPS, 1.0 - _U_EPS)
    s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + alpha) / TAU)
    return (s * (ZETA - GAMMA) + GAMMA).clamp(0.0, 1.0)


def expected_open(alpha: torch.Tensor) -> torch.Tensor:
    """E[z~] of Eq. (expected-z): sigmoid(alpha - tau log(-gamma / zeta)).

    This is the probability that the gate is open, P(z~ > 0), not the mean of z~.
    """
    return torch.sigmoid(alpha - TAU * math.log(-GAMMA / ZETA))


def deterministic_gate(alpha: torch.Tensor, estimator: str = "threshold") -> torch.Tensor:
    """Gate value at inference.

    ``threshold`` (the paper's rule, "Training and inference"): z^ = 1[E[z~] > 1/2], binary.
    ``louizos``: Eq. (louizos-test-estimator), min(1, max(0, sigmoid(alpha)(zeta - gamma) + gamma)),
    which can leave fractional gates.
    """
    if estimator == "threshold":
        return (expected_open(alpha) > 0.5).to(alpha.dtype)
    if estimator == "louizos":
        return (torch.sigmoid(alpha) * (ZETA - GAMMA) + GAMMA).clamp(0.0, 1.0)
    raise ValueError(f"gate estimator {estimator!r} is not one of 'threshold', 'louizos'")


def gumbel_softmax(logits: torch.Tensor, u: torch.Tensor, tau: float | torch.Tensor) -> torch.Tensor:
    """eta = softmax((log pi + g) / tau), g = -log(-log u) ~ Gumbel(0, 1) (Eq. for eta).

    logits: (M, L) unnormalized exit logits; log pi = log_softmax(logits).
    """
    u = u.clamp(_U_EPS, 1.0 - _U_EPS)
    g = -torch.log(-torch.log(u))
    return torch.softmax((torch.log_softmax(logits, dim=-1) + g) / tau, dim=-1)
