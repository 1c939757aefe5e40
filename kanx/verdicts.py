"""What a recorded metric and the same metric recomputed from the run's weights say about each
other: identical, within floating-point tolerance, consistent with the last-bit spread of a
chaotic rollout, or different (kanx.evaluate prints these; docs/RECORDS.md, "Rescoring on
another machine", gives the measurements behind the numbers below).

- **identical**: the same float (a non-finite number is recorded as null).
- **within tolerance**: ``|recorded - recomputed| <= RTOL * |recomputed| + STOL * scale``, where
  scale is the standard deviation of the test targets. Another CPU's vector kernels (torch's
  ``ATEN_CPU_CAPABILITY``: AVX-512, AVX2, none), another summation order or another BLAS build
  move a float32 network's predictions by a few ulps of the sums it computes, and an RMSE by no
  more than its predictions (|RMSE(p) - RMSE(p')| <= RMSE(p - p')): measured up to 2e-8 of the
  targets' sd on Nguyen, Ikeda and Ecosystem (STOL leaves a margin of 50; against a small RMSE
  alone that is up to 7e-6 of it). Concrete's models move far more: their wide layers sum many
  large terms that cancel, and grid refits on tied inputs leave nearly repeated knots where the
  basis divides by tiny gaps; across CPUs their RMSEs moved by up to 1.8e-3 of the value (160
  records), so RTOL is 1%. scripts/studies/verdict_spread.py and kanx.evaluate under other
  capabilities measure these; docs/RECORDS.md has the tables.
- **consistent**: a rung of a dynamical system's rollout ladder whose rollouts amplify last-bit
  differences (Ikeda and Ecosystem are chaotic: a long rollout's RMSE is a noisy statistic of the
  last bits) is consistent when it lies within CONSISTENT_Z standard deviations of the RMSEs of
  the same rollouts started one float32 ulp apart (kanx.data.spread.ulp_ensemble), measured here
  on the same weights.
- **differs**: anything else, and any change of a count (edges, depth, exit, open gates) or of
  the selected inputs, which no rounding moves.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

IDENTICAL, WITHIN, CONSISTENT, DIFFERS = "identical", "within tolerance", "consistent", "differs"
VERDICTS = (IDENTICAL, WITHIN, CONSISTENT, DIFFERS)

RTOL = 1e-2  # of the recomputed value
STOL = 1e-6  # of the test targets' standard deviation
# How far (in standard deviations of the one-ulp ensemble) a chaotic rung may lie from the
# ensemble's mean. Measured across CPU capabilities on the committed dynamical records
# (scripts/studies/verdict_spread.py): docs/RECORDS.md.
CONSISTENT_Z = 8.0


@dataclass(frozen=True)
class Verdict:
    """One metric (a rung is ``rollout_rmse[200]``): recorded and recomputed values, the
    verdict, and for a chaotic rung the distance from the ensemble in its standard deviations."""

    name: str
    recorded: object
    recomputed: object
    verdict: str
    z: float | None = None
    scaled: float | None = None  # |recorded - recomputed| as a fraction of the tolerance
    rollout: bool = False  # computed by a rollout, whose rounding a chaotic system amplifies

    def describe(self) -> str:
        extra = f", {self.z:+.1f} sd from the one-ulp ensemble" if self.z is not None else ""
        extra += f", {self.scaled:.2g} times the tolerance" if self.scaled is not None and self.z is None else ""
        return f"{self.name} {self.recorded!r} -> {self.recomputed!r}{extra}"


def tolerance(recomputed: float, scale: float) -> float:
    """How far a recorded RMSE may lie from the recomputed one: RTOL of it plus STOL of the targets' sd."""
    return RTOL * abs(recomputed) + STOL * scale


def scaled_difference(recorded, recomputed, scale: float) -> float | None:
    """|recorded - recomputed| as a fraction of the tolerance, for two finite numbers, else None."""
    if (_nonfinite(recorded) or _nonfinite(recomputed) or not isinstance(recomputed, float)
        or isinstance(recorded, bool)):
        return None
    if not isinstance(recorded, int | float) or tolerance(recomputed, scale) == 0:
        return None
    return abs(recorded - recomputed) / tolerance(recomputed, scale)


def _nonfinite(value) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def exact_or_tolerance(recorded, recomputed, scale: float = 0.0) -> str:
    """IDENTICAL, WITHIN or DIFFERS for one value (no ensemble); ``scale``: the targets' standard
    deviation, for an RMSE (0 for a count)."""
    if _nonfinite(recomputed) or _nonfinite(recorded):
        return IDENTICAL if _nonfinite(recomputed) and _nonfinite(recorded) else DIFFERS
    if recorded == recomputed:
        return IDENTICAL
    if isinstance(recomputed, float) and isinstance(recorded, int | float) and not isinstance(recorded, bool):
        return WITHIN if abs(recorded - recomputed) <= tolerance(recomputed, scale) else DIFFERS
    return DIFFERS


def consistency(recorded: float, draws, scale: float = 0.0) -> tuple[str, float]:
    """CONSISTENT or DIFFERS for a chaotic rung, and its distance from the draws' mean in their
    standard deviations (0 draws' spread: only within tolerance of their mean counts)."""
    draws = [float(d) for d in draws if math.isfinite(float(d))]
    if len(draws) < 2:
        return DIFFERS, math.nan
    mean, sd = statistics.fmean(draws), statistics.stdev(draws)
    if sd == 0.0:
        return (CONSISTENT if exact_or_tolerance(recorded, mean, scale) != DIFFERS else DIFFERS), 0.0
    z = (recorded - mean) / sd
    return (CONSISTENT if abs(z) <= CONSISTENT_Z else DIFFERS), z


def judge(recorded: Mapping[str, Any], recomputed: Mapping[str, Any],
          ensemble: Callable[[], Mapping[str, object]] | None = None,
          chaotic: Callable[[str], str | None] = lambda name: None,
          scale: float = 0.0) -> tuple[list[Verdict], list[str]]:
    """Every recomputed metric against the record: the verdicts and the names the record lacks.
    ``chaotic(name)`` names the rollout plan (a key of ``ensemble()``) of a metric that a rollout
    computes, or None; ``ensemble()`` (called at most once, only when a rollout metric is neither
    identical nor within tolerance) maps each plan to its one-ulp draws. ``scale``: the standard
    deviation of the test targets (exact_or_tolerance)."""
    verdicts: list[Verdict] = []
    missing: list[str] = []
    pending: list[tuple[str, Any, Any, str]] = []
    for name, value in recomputed.items():
        if name not in recorded:
            missing.append(name)
            continue
        pairs = ([(f"{name}[{k}]", recorded[name].get(k, _MISSING) if isinstance(recorded[name], dict) else _MISSING, v)
                  for k, v in value.items()] if isinstance(value, dict) else [(name, recorded[name], value)])
        for label, held, now in pairs:
            if held is _MISSING:
                missing.append(label)
                continue
            verdict = exact_or_tolerance(held, now, scale if isinstance(now, float) else 0.0)
            plan = chaotic(label)
            if verdict == DIFFERS and plan is not None and not _nonfinite(held) and not _nonfinite(now):
                pending.append((label, held, now, plan))
            else:
                verdicts.append(Verdict(label, held, now, verdict, scaled=scaled_difference(held, now, scale),
                                        rollout=plan is not None))
    if pending:
        draws = ensemble() if ensemble is not None else {}
        for label, held, now, plan in pending:
            verdict, z = consistency(held, draws.get(plan, ()), scale)
            verdicts.append(Verdict(label, held, now, verdict, z, rollout=True))
    return verdicts, missing


_MISSING = object()
