"""How long the runs left below a results root will take (kanx.status's ETA column and total).

The steps left (epochs left x batches per epoch, one pack of up to train.pack_size runs at a
time, a checkpointed run from its epoch) at the median pack step rate of the sweep's records
(timing.steps_per_s; else of the same dataset and condition elsewhere in the root; else, for a
sweep still running, the rate of the stretch its checkpoints' last segment says the running
process has trained so far), sweeps one after another; a pack spanning several sweeps counts
once in the total. Failed runs count as left: the next invocation retries them.

It reads what kanx.status collected (runs with a state, an epoch, their checkpoint's last
stretch and pack facts; sweeps with their records) and reads no file itself.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

LEFT = ("failed", "running", "corrupt", "checkpointed", "bad checkpoint", "missing")  # what the next invocation trains


def _rate(records: Iterable[dict]) -> float | None:
    """The median pack step rate of finished runs (timing.steps_per_s), None without one."""
    rates = [r["timing"]["steps_per_s"] for r in records
             if isinstance((r.get("timing") or {}).get("steps_per_s"), int | float) and r["timing"]["steps_per_s"] > 0]
    return statistics.median(rates) if rates else None


def running_rate(runs: list, protocol: tuple[int, int, int] | None) -> float | None:
    """The median pack step rate of the running runs' current stretches (epochs x batches per
    epoch / seconds), from their checkpoints; None without one that says. Only running runs:
    a stopped run's last stretch may have been on another device."""
    if protocol is None:
        return None
    batches = protocol[1]
    rates = [r.stretch[0] * batches / r.stretch[1] for r in runs if r.state == "running" and r.stretch
             and r.stretch[0] > 0 and r.stretch[1] > 0]
    return statistics.median(rates) if rates else None


def eta_seconds(runs: list, protocol: tuple[int, int, int] | None, rate: float | None) -> float | None:
    """Seconds to train the runs left: packs of up to pack_size runs that start at the same
    epoch (as kanx.jobs packs them), each (epochs - start) x batches steps at ``rate``."""
    left = [r for r in runs if r.state in LEFT]
    if not left:
        return 0.0
    if protocol is None or rate is None:
        return None
    epochs, batches, pack_size = protocol
    starts: dict[int, int] = {}
    for r in left:
        # the runner resumes a corrupt run from its checkpoint
        start = r.epoch if r.state in ("checkpointed", "running", "corrupt") and r.epoch is not None else 0
        starts[start] = starts.get(start, 0) + 1
    steps = sum(math.ceil(n / pack_size) * max(epochs - e, 0) * batches for e, n in starts.items())
    return steps / rate


def estimate(sweep, found: list, protocol: tuple[int, int, int] | None) -> None:
    """Set ``sweep``'s ETA (eta_s), the seconds of each named pack it is in (pack_eta_s) and of
    its other runs (other_eta_s); ``found``: every sweep of the root, for a step rate from the
    same dataset and condition under another tag."""
    rate = _rate(sweep.records)
    if rate is None:  # the same dataset and condition elsewhere (another tag)
        rate = _rate(r for s in found if (s.dataset, s.condition) == (sweep.dataset, sweep.condition)
                     for r in s.records)
    if rate is None:  # still running, no record yet: the running process's own pace
        rate = running_rate(sweep.runs, protocol)
    sweep.eta_s = eta_seconds(sweep.runs, protocol, rate)
    in_packs = [r for r in sweep.runs if r.state in ("checkpointed", "running") and r.pack and r.epoch is not None]
    packed = {id(r) for r in in_packs}
    sweep.other_eta_s = eta_seconds([r for r in sweep.runs if id(r) not in packed], protocol, rate)
    steps: dict[str, int] = {}  # each named pack once: (its epochs - the furthest epoch its checkpoints hold) x batches
    for r in in_packs:
        steps[r.pack["id"]] = min(steps.get(r.pack["id"], math.inf),
                                  max(r.pack["epochs"] - r.epoch, 0) * r.pack["batches"])
    sweep.pack_eta_s = {pack_id: None if rate is None else n / rate for pack_id, n in steps.items()}


def total_eta(sweeps: list) -> float | None:
    """Seconds to train every run left, packs one after another: each sweep's runs outside a named
    pack, plus every named pack once however many sweeps it spans (the slowest estimate of it; a
    sweep without a step rate leaves the estimate to the others). None while some run has none."""
    if any(s.other_eta_s is None for s in sweeps):
        return None
    packs: dict[str, list[float]] = {}
    for s in sweeps:
        for pack_id, seconds in s.pack_eta_s.items():
            estimates = packs.setdefault(pack_id, [])
            if seconds is not None:
                estimates.append(seconds)
    if not all(packs.values()):
        return None
    return sum(s.other_eta_s for s in sweeps) + sum(max(estimates) for estimates in packs.values())


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 1:
        return "-" if seconds == 0 else "<1s"
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"
