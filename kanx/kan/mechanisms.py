"""What a registered factor adds to the model: its parameters, a factor on every edge's gate,
and its term of L_C, as one ``Mechanism`` (docs/ARCHITECTURE.md "Adding a mechanism").

The built-in factors' equations are written out where the paper's are: E, F, X, N and I in
kanx.kan.network and kanx.kan.objective, their bookkeeping in kanx.kan.members. A factor
registered in the vocabulary since (kanx.vocab.register_factor) needs none of those edits: the
network makes its parameters and multiplies its gates in, the member layout gives each member
its own row of them (only members whose condition has the factor hold them, so checkpoints and
mixed packs work as for the built-in ones), and L_C adds its cost, all through this registry.
What the record says about the structure it leaves is kanx.kan.structure's RECORD_RULES.

A mechanism draws no noise: its parameters start from fixed values and its gates are a
function of them (one with noise of its own would need slots in MemberLayout.noise_slots).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from kanx.vocab import FACTOR_FIELDS

if TYPE_CHECKING:
    from kanx.kan.members import MemberLayout
    from kanx.kan.network import GatedKAN
    from kanx.kan.objective import Costs
    from kanx.kan.spec import Condition, KANSpec

# The ``how`` of Mechanism.gate besides an estimator's name (kanx.config.GATE_ESTIMATORS, the
# deterministic gates of inference): a training step's gates, and their expectation (L_C's).
TRAIN, EXPECTED = "train", "expected"


@dataclass(frozen=True)
class Mechanism:
    """What the factor whose Condition field is ``flag`` adds to a GatedKAN, for the members
    whose condition has it.

    ``parameters(layout, spec, dtype)``: name -> initial value (M, ...) of each of its
    parameters, ``names`` (the member layout knows them before a model exists); a member's own
    part is its row, the same layout in every condition, and the values are fixed (drawn from
    no stream: no member's draws move).
    ``gate(model, how)``: a factor (M, n_edges) on every edge's gate, or None for a mechanism
    that gates nothing; ``how`` is TRAIN (a step's gates), EXPECTED (E[z], what L_C prices) or
    the estimator of the deterministic gates of inference ("threshold", "louizos"), which the
    structure, the drawing and the formula read: 0 there closes the edge.
    ``cost(model, costs)``: its term of L_C (M,), or None. Members without the factor get 1 and
    0 for these, whatever the functions say."""

    flag: str
    names: tuple[str, ...]
    parameters: Callable[[MemberLayout, KANSpec, torch.dtype], dict[str, torch.Tensor]]
    gate: Callable[[GatedKAN, str], torch.Tensor] | None = None
    cost: Callable[[GatedKAN, Costs], torch.Tensor] | None = None


# Registered mechanisms by flag, in registration order.
MECHANISMS: dict[str, Mechanism] = {}


def register_mechanism(mechanism: Mechanism) -> None:
    """Add the model's side of a factor registered in the vocabulary. Raises ValueError for a flag
    that is no factor's, or that has a mechanism already."""
    if mechanism.flag not in FACTOR_FIELDS.values() or mechanism.flag in MECHANISMS:
        raise ValueError(f"mechanism flag {mechanism.flag!r} must be a factor's field without a mechanism yet "
                         f"(kanx.vocab.register_factor first; fields: {', '.join(FACTOR_FIELDS.values())})")
    MECHANISMS[mechanism.flag] = mechanism


def unregister_mechanism(flag: str) -> None:
    """Take back what register_mechanism added."""
    del MECHANISMS[flag]


def active_mechanisms(condition: Condition) -> list[Mechanism]:
    """The mechanisms of the factors ``condition`` has (a pack's: those of its superset)."""
    return [m for m in MECHANISMS.values() if getattr(condition, m.flag, False)]


def owner(name: str) -> Mechanism | None:
    """The mechanism whose parameter ``name`` is, if any."""
    return next((m for m in MECHANISMS.values() if name in m.names), None)
