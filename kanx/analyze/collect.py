"""Load run records into one tidy table: a row per `record.json` that has a `done` marker.

The analysis reads only records, never directory names: everything a row holds comes from
the JSON object. A record without a `done` marker beside it (a run killed mid-write) does not
count; it is listed in ``runs.attrs["skipped"]`` with the reason, as is any record that cannot
be read, and any record whose sha256 differs from the one its `done` marker holds (edited or cut
short after the run sealed it: the tables count only what a run wrote; ``kanx.records.seal``
is the deliberate way to vouch for a changed file).

One config per cell: a (dataset, condition, beta) cell pools only records of one config, its
*setup*: the resolved config without beta, seed and the keys that do not change a run's numbers
(``kanx.identity``). Where a cell's records disagree (a record of another config copied into a
sweep's folder, or two sweeps of different epochs in one results root: the analysis reads
records, not the folders' tags), the cell keeps the setup that covers the most seeds (ties: the
one whose newest `done` marker is newest, as for duplicates), and the records of any other
setup stay in the table with ``superseded=True``, left out of every statistic, and are listed
in ``runs.attrs["config_mixes"]`` with what differs. A mean over two protocols is no protocol's
result; the majority is the experiment the cell was meant to hold, and the rest is named so it
can be analyzed on its own.

Duplicates: two records for the same (dataset, condition, beta, seed) of that setup, e.g. a
failed run and its re-run in another sweep folder, would count one seed twice. The record
whose `done` marker is newest wins (ties: the later path); the others stay in the table with
``superseded=True`` and are left out of every statistic.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from kanx.confdir import is_quick_try
from kanx.identity import ABSENT, ADDED_LATER, differing_keys, run_defining
from kanx.manifest import read_manifest
from kanx.record import Record, canonical_beta
from kanx.records import integrity_problem
from kanx.vocab import DONE as DONE_NAME
from kanx.vocab import MANIFEST as MANIFEST_NAME
from kanx.vocab import RECORD as RECORD_NAME
from kanx.vocab import (
    RECORD_METRICS,
    RECORD_ROLLOUT,
    RECORD_SELECTED_INPUTS,
    RECORD_TIMING,
    SCHEMA_VERSION,
    condition_name_problem,
)

from .labels import ALL_CONDITIONS, USABLE_STATUSES, condition_rank, dataset_rank, family_of

METRICS, TIMING = RECORD_METRICS, RECORD_TIMING
RUN_COLUMNS: tuple[str, ...] = (
    "dataset",
    "family",
    "condition",
    "beta",
    "seed",
    "data_seed",
    "status",
    "status_reason",
    "usable",
    "superseded",
    *METRICS,
    *TIMING,
    "n_train",
    "n_test",
    "width",
    "target_unit",
    "git_commit",
    "config_hash",
    "error",
    "path",
)
# Integer-valued columns, nullable (pandas Int64) so a null stays null and 60 prints as 60.
INTEGER_COLUMNS: tuple[str, ...] = (
    "seed",
    "data_seed",
    "contributing_edges",
    "depth",
    "exit",
    "open_gates",
    "bias_terms",
    "steps",
    "n_train",
    "n_test",
)
KEY: tuple[str, ...] = ("dataset", "condition", "beta", "seed")
CELL: tuple[str, ...] = KEY[:-1]
# What may differ between the runs of one cell: the cell is a sweep over these.
PER_RUN_KEYS: tuple[str, ...] = ("beta", "seed")


def _number(value) -> float:
    """A metric as float; null (the runner's spelling of non-finite) becomes NaN."""
    if value is None:
        return math.nan
    return float(value)


def _width(record: dict) -> str | None:
    """The trained architecture [n_0, ..., n_L] as text (a hashable cell), None if unrecorded."""
    width = ((record.get("config") or {}).get("model") or {}).get("width")
    return None if not width else "[" + ", ".join(str(int(w)) for w in width) + "]"


class NotAtHorizon(ValueError):
    """A dynamical record that holds no multi-step RMSE at the rollout horizon asked for."""


def rollout_test_rmse(record: dict, horizon: int | str) -> float | None:
    """A dynamical record's multi-step test RMSE read at rollouts of ``horizon`` steps tiling
    the test segment (``"whole"``: one rollout over all of it): from its rollout curve
    (metrics.rollout_rmse, kanx.data.metrics), or its test_rmse where the record's own plan is
    that reading. Raises NotAtHorizon when it holds neither (records from before the curve:
    `python -m kanx.evaluate --add-missing` adds it where model.pt is kept)."""
    metrics = record.get("metrics") or {}
    n_test = record.get("n_test")
    steps = n_test if horizon == "whole" else int(horizon)
    curve = metrics.get(RECORD_ROLLOUT) or {}
    if str(steps) in curve:
        return curve[str(steps)]
    data = (record.get("config") or {}).get("dataset") or {}
    own = data.get("horizon") or n_test  # null: the whole segment
    if own == steps and data.get("n_rollouts") is None:
        return metrics.get("test_rmse")
    rungs = ", ".join(curve) or "none: the record predates the rollout curve"
    raise NotAtHorizon(f"no multi-step RMSE at rollouts of {steps} steps (its rollout curve has {rungs}; its own "
                       f"test_rmse is at {own} steps)")


Horizon = int | str  # steps of each rollout, or "whole"
Horizons = Horizon | Mapping[str, Horizon] | None


def horizon_for(dataset: str, rollout_horizon: Horizons) -> Horizon | None:
    """The rollout horizon a dataset is read at: one for all, one per dataset (a dataset not named
    is read as recorded), or None (as recorded)."""
    if isinstance(rollout_horizon, Mapping):
        return rollout_horizon.get(dataset)
    return rollout_horizon


def _row(record: dict, path: str, rollout_horizon: Horizons = None) -> dict:
    for key in ("dataset", "condition", "seed", "status"):
        if record.get(key) is None:
            raise ValueError(f"no {key!r}")
    if record.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise ValueError(f"schema_version {record.get('schema_version')!r} is not {SCHEMA_VERSION}")
    condition = str(record["condition"])
    if condition not in ALL_CONDITIONS:  # one of the paper's eight, or another factor set (kanx.vocab.Condition)
        raise ValueError(condition_name_problem(condition) or f"condition {condition!r} is not a condition")
    dataset = str(record["dataset"])
    metrics = record.get("metrics") or {}
    horizon = horizon_for(dataset, rollout_horizon)
    # A dynamical system's multi-step reading; a failed or diverged run has no metric to read.
    if horizon is not None and "test_rmse_one_step" in metrics and record["status"] in USABLE_STATUSES:
        metrics = {**metrics, "test_rmse": rollout_test_rmse(record, horizon)}
    timing = record.get("timing") or {}
    status = str(record["status"])
    return {
        "dataset": dataset,
        "family": str(record.get("family") or family_of(dataset)),
        "condition": condition,
        "beta": canonical_beta(record.get("beta"), condition),
        "seed": int(record["seed"]),
        "data_seed": record.get("data_seed"),
        "status": status,
        "status_reason": record.get("status_reason"),
        "usable": status in USABLE_STATUSES,
        "superseded": False,
        **{m: _number(metrics.get(m)) for m in METRICS},
        **{t: _number(timing.get(t)) for t in TIMING},
        "n_train": record.get("n_train"),
        "n_test": record.get("n_test"),
        "width": _width(record),
        "target_unit": record.get("target_unit"),
        "git_commit": record.get("git_commit"),
        "config_hash": record.get("config_hash"),
        "error": record.get("error"),
        "path": path,
    }


def find_records(root: str | Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Record files below ``root`` with a `done` marker, and (path, reason) for those without."""
    root = Path(root)
    done, skipped = [], []
    for path in sorted(root.rglob(RECORD_NAME)):
        if (path.parent / DONE_NAME).is_file():
            done.append(path)
        else:
            skipped.append((path.relative_to(root).as_posix(), "no done marker"))
    return done, skipped


def setup_of(record: dict) -> dict:
    """The record's config as far as it defines the cell's experiment: without beta and seed
    (what a cell sweeps) and the keys that do not change a run's numbers."""
    return run_defining(record.get("config") or {}, also_ignore=PER_RUN_KEYS)


def _shown(key: str, value) -> str:
    if value == ABSENT:  # setup_of drops a key added later at its neutral value: that value is what ran
        return json.dumps(ADDED_LATER[key]) if key in ADDED_LATER else "absent"
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def describe_differences(kept: dict, other: dict, at_most: int = 3) -> str:
    """What differs between two setups, kept value first: `train.epochs 4000 vs 2`."""
    diff = [f"{key} {_shown(key, x)} vs {_shown(key, y)}" for key, x, y in differing_keys(kept, other)]
    more = f"; {len(diff) - at_most} more" if len(diff) > at_most else ""
    return "; ".join(diff[:at_most]) + more if diff else "no run-defining key (only in keys kanx.identity ignores)"


def _one_setup_per_cell(runs: pd.DataFrame, setups: list[dict], mtimes: list[int]) -> tuple[pd.Series, list[dict]]:
    """Which rows are of another setup than their cell keeps (see the module docstring), and a
    description of each (cell, left-out setup)."""
    keys = pd.Series([json.dumps(s, sort_keys=True, default=str) for s in setups], index=runs.index)
    other = pd.Series(False, index=runs.index)
    mixes = []
    for cell, rows in runs.groupby(list(CELL), sort=False):
        mine = keys[rows.index]
        if mine.nunique() == 1:
            continue

        def rank(key: str, rows=rows, mine=mine) -> tuple:
            of = rows[mine == key]
            return of["seed"].nunique(), max(mtimes[i] for i in of.index), of["path"].max()

        kept = max(mine.unique(), key=rank)
        kept_rows = rows[mine == kept]
        for key in sorted(set(mine) - {kept}, key=rank, reverse=True):
            left = rows[mine == key]
            other[left.index] = True
            mixes.append({
                "dataset": cell[0], "condition": cell[1], "beta": cell[2],
                "kept": sorted(kept_rows["path"]), "left_out": sorted(left["path"]),
                "differs": describe_differences(setups[kept_rows.index[0]], setups[left.index[0]]),
            })
    return other, mixes


def _mark_superseded(runs: pd.DataFrame, mtimes: list[int], setups: list[dict]) -> tuple[pd.DataFrame, list[dict]]:
    """The runs with their `superseded` column, and the cells whose records mix setups."""
    other, mixes = _one_setup_per_cell(runs, setups, mtimes)
    runs = runs.assign(_mtime=mtimes)
    newest = runs[~other].sort_values(["_mtime", "path"]).groupby(list(KEY), sort=False).tail(1).index
    runs["superseded"] = ~runs.index.isin(newest)
    return runs.drop(columns="_mtime"), mixes


def sort_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Registry order: dataset, condition, beta, seed, then path."""
    order = runs.assign(
        _g=runs["dataset"].map(dataset_rank),
        _c=runs["condition"].map(condition_rank),
    )
    order = order.sort_values(["_g", "_c", "beta", "seed", "path"], kind="stable")
    return order.drop(columns=["_g", "_c"]).reset_index(drop=True)


def load_runs(root: str | Path, rollout_horizon: Horizons = None,
              datasets: Iterable[str] | None = None) -> pd.DataFrame:
    """A row per completed record below ``root`` (columns: `RUN_COLUMNS`).

    ``rollout_horizon``: read the dynamical systems' test_rmse at rollouts of that many steps
    (or ``"whole"``: the whole test segment) instead of as recorded (`rollout_test_rmse`), one
    horizon for all or a mapping dataset -> horizon (a dataset not in it: as recorded); a
    record without that reading is skipped and listed. ``datasets``: only their records.

    ``usable`` marks the runs that enter medians and log-ratios (status ok or collapsed).
    ``attrs["skipped"]`` lists (path, reason) for records that do not count;
    ``attrs["config_mixes"]`` the cells whose records are of more than one setup: per left-out
    setup a dict of dataset, condition, beta, kept (paths), left_out (paths) and differs (text);
    ``attrs["selected_inputs"]`` path -> the input names a record with input gates (I) keeps
    (its metrics.selected_inputs; kanx.analyze.inputs tabulates them); ``attrs["quick_tries"]``
    the paths of the records of `+debug=quick` runs (kanx.confdir.is_quick_try).
    """
    root = Path(root)
    paths, skipped = find_records(root)
    rows, mtimes, setups, launched = [], [], [], launched_in_manifests(root)
    quick: list[str] = []  # the records of `+debug=quick` runs: quick tries, not results
    selected: dict[str, tuple[str, ...]] = {}
    for path in paths:
        rel = path.relative_to(root).as_posix()
        if datasets is not None and _dataset_of(path) not in (*datasets, None):
            continue  # another dataset's record: not worth its integrity check (a hash of every file)
        problem = integrity_problem(path.parent)
        if problem is not None:
            skipped.append((rel, f"not counted: {problem.replace(str(path.parent), str(Path(rel).parent))}"))
            continue
        try:
            record = Record.read(path.parent).fields
            launched.append(_launched_cell(record))
            row, setup = _row(record, rel, rollout_horizon), setup_of(record)
        except NotAtHorizon as exc:
            skipped.append((rel, f"not counted: {exc}"))
            continue
        except (ValueError, TypeError, AttributeError) as exc:  # JSONDecodeError is a ValueError
            skipped.append((rel, f"unreadable record: {exc}"))
            continue
        rows.append(row)
        setups.append(setup)
        if is_quick_try(record.get("config") or {}):
            quick.append(rel)
        chosen = (record.get("metrics") or {}).get(RECORD_SELECTED_INPUTS)
        if isinstance(chosen, list):  # a condition with input gates (I): the inputs its model keeps
            selected[rel] = tuple(str(name) for name in chosen)
        mtimes.append((path.parent / DONE_NAME).stat().st_mtime_ns)
    runs = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    mixes: list[dict] = []
    if len(runs):
        runs, mixes = _mark_superseded(runs, mtimes, setups)
        mixes = sorted(mixes,
                       key=lambda m: (dataset_rank(m["dataset"]), condition_rank(m["condition"]), m["beta"]))
        runs = sort_runs(runs)
    runs = runs.astype({"usable": bool, "superseded": bool, "beta": float, **{c: "Int64" for c in INTEGER_COLUMNS}})
    launched_cells = tuple(sorted({c for c in launched if c is not None and (datasets is None or c[0] in datasets)}))
    # a tuple, not a frame, for launched: pandas compares attrs when it combines frames
    runs.attrs.update({key: shared(value) for key, value in (
        ("skipped", sorted(skipped)), ("config_mixes", mixes), ("rollout_horizon", rollout_horizon),
        ("selected_inputs", selected), ("launched", launched_cells), ("quick_tries", tuple(quick)))})
    return runs


class _Shared:
    """pandas deep-copies a frame's attrs on every operation that makes a new frame
    (``__finalize__``): with the thousands of skipped records and launched cells of a paper
    root, that copying took about half of an analysis. These values are never changed in place,
    so a frame and its slices may share them."""

    def __deepcopy__(self, memo):
        return self


class SharedList(_Shared, list):
    pass


class SharedTuple(_Shared, tuple):
    pass


class SharedDict(_Shared, dict):
    pass


def shared(value):
    """``value`` as a list, tuple or dict that a frame's copies share (see _Shared); others as they are."""
    for kind, wrapper in ((list, SharedList), (tuple, SharedTuple), (dict, SharedDict)):
        if isinstance(value, kind) and not isinstance(value, _Shared):
            return wrapper(value)
    return value


def _dataset_of(path: Path) -> str | None:
    """The dataset a record file names; None where it cannot be read (the caller's checks say why)."""
    try:
        return str(Record.read(path.parent).dataset)
    except (OSError, ValueError, AttributeError):
        return None


def _launched_cell(entry: dict) -> tuple[str, str, float] | None:
    """(dataset, condition, beta) a record or a manifest entry names; None if it names none."""
    try:
        condition = str(entry["condition"])
        return ((str(entry["dataset"]), condition, canonical_beta(entry.get("beta"), condition))
                if condition in ALL_CONDITIONS else None)
    except (KeyError, TypeError, ValueError):
        return None


def launched_in_manifests(root: Path) -> list[tuple[str, str, float] | None]:
    """The cells the sweep manifests below ``root`` list (kanx.manifest): what was launched,
    finished or not."""
    cells = []
    for path in sorted(root.rglob(MANIFEST_NAME)):
        manifest = read_manifest(path.parent)
        cells += [_launched_cell(entry) for entry in (manifest or {}).get("runs", {}).values()
                  if isinstance(entry, dict)]
    return cells


def active_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs every statistic starts from: one per (dataset, condition, beta, seed)."""
    return runs[~runs["superseded"]]


def metric_values(runs: pd.DataFrame, metric: str) -> pd.Series:
    """A metric for statistics: a usable run's null (non-finite) RMSE counts as +inf.

    A model whose test predictions are not finite (e.g. a multi-step rollout that blew up) is
    worse than any finite one, so it enters a median as the worst value rather than vanishing.
    Other null metrics stay NaN and are left out of that metric's median.
    """
    values = runs[metric].astype(float)
    if metric.startswith("test_rmse") or metric == "train_rmse":
        values = values.where(~(runs["usable"] & values.isna()), np.inf)
    return values
