"""`optimized_metric`: what a job returns to a search sweeper (hydra-optuna-sweeper, or any
that reads Hydra's job returns) instead of its record, as in lightning-hydra-template.

    optimized_metric: val_rmse                             # one objective: a float
    optimized_metric: [val_rmse, contributing_edges]       # several: a tuple, in this order
    optimized_metric: ["val_rmse:min", "exit:max"]         # with directions (min by default)

The names are the record's metrics (docs/RECORDS.md) that a run of its dataset carries: checked
before any training (`check`), so that a search never trains for a value it cannot return. Every
launcher writes the same records either way; only the value handed back to the sweeper changes.
A run without usable numbers (diverged, failed, a metric that came out non-finite) returns NaN
for every objective, which Optuna records as a failed trial rather than stopping the search.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from kanx.errors import ConfigError
from kanx.vocab import RECORD_STRUCTURE

DIRECTIONS = {"min": "minimize", "max": "maximize"}
# Statuses whose metrics are a trained model's readings (a collapsed run's are: no edge left).
SCORED = ("ok", "collapsed")


def metrics_of(dynamical: bool, validation: bool) -> tuple[str, ...]:
    """The numeric metrics a record of such a run carries (kanx.data.evaluate_members, kanx.kan.structure)."""
    errors = ("test_rmse", "train_rmse", *(("test_rmse_one_step",) if dynamical else ()))
    val = ("val_rmse", *(("val_rmse_one_step",) if dynamical else ())) if validation else ()
    return (*errors, *val, *RECORD_STRUCTURE)


def parse(spec) -> list[tuple[str, str]] | None:
    """(metric, "minimize" | "maximize") for each objective of an optimized_metric value, or None
    for none (the job returns its record). Raises ConfigError for a value that is no such list."""
    if spec is None:
        return None
    items = [spec] if isinstance(spec, str) else list(spec) if isinstance(spec, Sequence) else None
    if not items or not all(isinstance(i, str) for i in items):
        raise ConfigError(f"optimized_metric={spec!r} must be a metric name or a list of them, each with an optional "
                          "direction, e.g. optimized_metric=val_rmse or "
                          "optimized_metric='[val_rmse,contributing_edges:min]'")
    out = []
    for item in items:
        metric, _, direction = item.partition(":")
        if direction and direction not in DIRECTIONS:
            raise ConfigError(f"optimized_metric {item!r}: direction {direction!r} is not one of: "
                              f"{', '.join(DIRECTIONS)} (min when left out)")
        out.append((metric.strip(), DIRECTIONS[direction or "min"]))
    names = [m for m, _ in out]
    if len(set(names)) < len(names):
        raise ConfigError(f"optimized_metric={spec!r} names a metric twice; name each once")
    return out


def check(spec, dynamical: bool, validation: bool, sweeper_directions=None) -> None:
    """Before any training: every objective names a metric that records of this run carry, and the
    directions agree with the sweeper's (hydra.sweeper.direction, where the sweeper has one).
    Raises ConfigError naming the bad value and what is allowed."""
    objectives = parse(spec)
    if objectives is None:
        return
    allowed = metrics_of(dynamical, validation)
    for metric, _ in objectives:
        if metric in allowed:
            continue
        if metric.startswith("val_") and not validation and metric in metrics_of(dynamical, True):
            raise ConfigError(f"optimized_metric {metric!r} needs a validation split: set dataset.val_fraction, "
                              "e.g. dataset.val_fraction=0.2")
        raise ConfigError(f"optimized_metric {metric!r} is not a metric these records carry; choose from: "
                          f"{', '.join(allowed)}")
    if sweeper_directions is not None:
        check_directions(objectives, sweeper_directions)


def check_directions(objectives: list[tuple[str, str]], sweeper_directions) -> None:
    """The sweeper's direction(s) (a name or a list of them) are the objectives', in order."""
    given = [sweeper_directions] if isinstance(sweeper_directions, str) else list(sweeper_directions)
    given = [str(getattr(d, "name", d)) for d in given]
    wanted = [d for _, d in objectives]
    if given != wanted:
        shown = ", ".join(f"{m}:{d[:3]}" for m, d in objectives)
        raise ConfigError(f"hydra.sweeper.direction={given} does not match optimized_metric ({shown}); set "
                          f"hydra.sweeper.direction=[{','.join(wanted)}]")


def sweeper_directions(cfg):
    """The direction(s) of the search sweeper that launched a job (hydra.sweeper.direction in a
    launcher's composed config, as hydra-optuna-sweeper has it), or None where there is none."""
    hydra = cfg.get("hydra") if hasattr(cfg, "get") else None
    sweeper = hydra.get("sweeper") if hydra is not None and hasattr(hydra, "get") else None
    direction = sweeper.get("direction") if sweeper is not None and hasattr(sweeper, "get") else None
    if direction is None or isinstance(direction, str) or hasattr(direction, "name"):  # one, or an Enum's
        return getattr(direction, "name", direction)
    return list(direction)


def returned(spec, record: Mapping | None):
    """What a job hands back to the sweeper: its record without an optimized_metric; otherwise the
    metric's value (a float), or a tuple of them for several, NaN where the run has no usable
    value (a failed or diverged run, no record, a metric recorded as null)."""
    objectives = parse(spec)
    if objectives is None:
        return record
    record = record or {}
    metrics = record.get("metrics") or {}
    scored = record.get("status") in SCORED

    def value(metric: str) -> float:
        v = metrics.get(metric) if scored else None
        return float(v) if isinstance(v, int | float) and math.isfinite(v) else math.nan

    values = tuple(value(m) for m, _ in objectives)
    return values[0] if len(values) == 1 else values
