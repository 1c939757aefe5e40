"""The shape of a gated multi-exit KAN of a given width: what each stage reads and writes.

Paper section "Gated multi-exit architecture". A network of width [n_0, ..., n_L] has L
stages; stage k reads x_cat^(k) = [x^(0), ..., x^(k)] with forward connections (F), or
x^(k) without, and writes the trunk x^(k+1) (none for the last stage) and, on the last
stage or with exits (X), an exit head y^(k) of n_L outputs. Plain Python, so that the
torch-free readers (kanx.analyze, kanx.checks) and the model (kanx.kan.network,
kanx.kan.members) share one definition.
"""

from __future__ import annotations

from collections.abc import Sequence


def stage_shapes(width: Sequence[int], forward: bool, exits: bool) -> list[tuple[int, int, int]]:
    """(inputs, trunk outputs, head outputs) of each stage k of a GatedKAN of this width: with
    forward connections stage k reads [x^(0), ..., x^(k)], else x^(k); it writes x^(k+1)
    (none for the last stage) and, on the last stage or with exits, an exit head."""
    L, n_out = len(width) - 1, width[-1]
    return [(sum(width[: k + 1]) if forward else width[k], width[k + 1] if k < L - 1 else 0,
             n_out if (k == L - 1 or exits) else 0) for k in range(L)]
