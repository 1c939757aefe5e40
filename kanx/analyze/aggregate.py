"""Seed-medians per cell and per-seed log-ratios against the baseline, from the run table.

A *cell* is one (dataset, condition, beta); a dataset here is a registry name, so each
Nguyen problem is its own dataset and the Nguyen *family* pools them.

Treatment of run statuses (the same everywhere):
  * ``ok`` and ``collapsed`` runs are *usable*: they enter medians and log-ratios. A collapsed
    model has 0 contributing edges and depth 0 and predicts a constant; its RMSE is real.
  * ``diverged`` and ``failed`` runs are counted (``n_total``, ``n_diverged``, ``n_failed``)
    but left out of medians and log-ratios; each cell shows ``n_used/n_total``.
  * A usable run with a null (non-finite) RMSE counts as RMSE = +inf (see `metric_values`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from kanx.kan.shapes import stage_shapes  # plain Python and numpy only: the kanx.kan package imports no torch
from kanx.kan.structure import trace

from .collect import active_runs, metric_values
from .labels import (
    BASELINE,
    GATED,
    OTHER_CONDITIONS,
    STATUSES,
    UNGATED,
    condition_rank,
    dataset_rank,
    family_rank,
    with_others,
)

# Short metric names used in column prefixes (and in the published CSV format).
METRIC_PREFIX: dict[str, str] = {
    "test_rmse": "rmse",
    "contributing_edges": "edges",
    "depth": "depth",
}
STATUS_COUNTS: tuple[str, ...] = ("n_ok", "n_collapsed", "n_diverged", "n_failed")
MEDIAN_COLUMNS: tuple[str, ...] = (
    "dataset",
    "family",
    "condition",
    "beta",
    "n_used",
    "n_total",
    *STATUS_COUNTS,
    *(f"{p}_{s}" for p in METRIC_PREFIX.values() for s in ("median", "min", "max")),
    "target_unit",
)


def expected_grid(runs: pd.DataFrame, launched: Sequence[tuple[str, str, float]] | None = None) -> pd.DataFrame:
    """Every (dataset, condition, beta) cell the records imply, seen or not.

    Conditions: with ``launched`` (the cells that sweep manifests and records below the root
    name, `load_runs`' ``attrs["launched"]``), those a dataset's family launched, so analysing
    one sweep reports on that sweep; without it, all eight. Baseline and F: beta 0. Gated
    conditions: the union of the betas of the gated conditions over the whole family (so a
    beta that one Nguyen problem lacks is still expected there). Betas seen in a cell are
    always kept, even where unexpected (e.g. a Baseline at beta 0.1).

    Other factor sets (with N or I, labels.OTHER_CONDITIONS), after the paper's eight: those
    the family has records of (or launched), each at the betas it was run (or launched) at in
    the family. They add no beta to the paper's eight, so the paper's grid is the same with or
    without them.
    """
    runs = active_runs(runs)
    if launched is not None:
        launched = pd.DataFrame(list(launched), columns=["dataset", "condition", "beta"])
    rows = []
    for dataset in sorted(runs["dataset"].unique(), key=dataset_rank):
        mine = runs[runs["dataset"] == dataset]
        family = mine["family"].iloc[0]
        in_family = runs[runs["family"] == family]
        fam = in_family[in_family["condition"].isin(GATED)]
        gated_betas = set(fam["beta"])
        conditions = with_others(in_family["condition"])
        named_betas = in_family.groupby("condition")["beta"].agg(set).to_dict()
        if launched is not None:
            ours = launched[launched["dataset"].isin(in_family["dataset"])]
            gated_betas |= set(ours.loc[ours["condition"].isin(GATED), "beta"])
            named = set(ours["condition"]) | set(mine["condition"])
            conditions = [c for c in with_others(named | set(in_family["condition"]))
                          if c in named or c in OTHER_CONDITIONS]
            for condition, betas in ours.groupby("condition")["beta"]:
                named_betas[condition] = named_betas.get(condition, set()) | set(betas)
        for condition in conditions:
            seen = set(mine.loc[mine["condition"] == condition, "beta"])
            expected = ({0.0} if condition in UNGATED else gated_betas if condition in GATED
                        else named_betas.get(condition, set()))
            rows += [(dataset, family, condition, beta) for beta in sorted(seen | expected)]
    return pd.DataFrame(rows, columns=["dataset", "family", "condition", "beta"])


def seed_medians(runs: pd.DataFrame, complete: bool = True) -> pd.DataFrame:
    """Median, min and max over seeds of RMSE, contributing edges and depth per cell.

    Statistics use the usable runs only (NaN values left out); counts cover all runs of the
    cell. With ``complete=True`` every cell of `expected_grid` appears, a missing one with
    ``n_total == 0`` and NaN statistics, so no cell is silently dropped.
    """
    launched = runs.attrs.get("launched")
    runs = active_runs(runs)
    keys = ["dataset", "condition", "beta"]
    values = runs[keys + ["status", "usable"]].assign(**{prefix: metric_values(runs, metric)
                                                         for metric, prefix in METRIC_PREFIX.items()})
    prefixes = list(METRIC_PREFIX.values())
    stats = values[values["usable"]].groupby(keys)[prefixes].agg(["median", "min", "max"])
    stats.columns = [f"{p}_{s}" for p, s in stats.columns]
    counts = values.groupby(keys)["status"].value_counts().unstack(fill_value=0)
    counts = counts.reindex(columns=list(STATUSES), fill_value=0).add_prefix("n_")
    counts["n_total"] = counts.sum(axis=1)
    counts["n_used"] = values.groupby(keys)["usable"].sum()
    cells = (expected_grid(runs, launched) if complete
             else runs[["dataset", "family", "condition", "beta"]].drop_duplicates())
    table = cells.merge(counts.reset_index(), on=keys, how="left").merge(stats.reset_index(), on=keys, how="left")
    count_columns = ["n_used", "n_total", *STATUS_COUNTS]
    table[count_columns] = table[count_columns].fillna(0).astype(int)
    table["target_unit"] = table["dataset"].map(runs.groupby("dataset")["target_unit"].first())
    return _sorted_cells(table[list(MEDIAN_COLUMNS)])


def _sorted_cells(table: pd.DataFrame) -> pd.DataFrame:
    key = table.assign(_d=table["dataset"].map(dataset_rank), _c=table["condition"].map(condition_rank))
    key = key.sort_values(["_d", "_c", "beta"], kind="stable")
    return key.drop(columns=["_d", "_c"]).reset_index(drop=True)


def missing_cells(medians: pd.DataFrame) -> pd.DataFrame:
    """The expected cells without any record."""
    return medians.loc[medians["n_total"] == 0, ["dataset", "family", "condition", "beta"]]


# --- log-ratios -------------------------------------------------------------------------

PAIRED = "paired"


def log_ratios(runs: pd.DataFrame, metric: str = "test_rmse") -> pd.DataFrame:
    """Per-seed log10(baseline / condition) of ``metric``; positive = better than baseline.

    Seed s of a condition is paired with seed s of the Baseline (beta 0) of the same dataset
    (Nguyen problem). Every non-baseline run gets a row; ``pairing`` says why a row has no
    log-ratio: ``run not usable`` / ``baseline not usable`` (diverged or failed),
    ``no baseline`` (that seed's Baseline run is missing), ``non-finite`` (a zero or infinite
    value on either side, e.g. 0 edges of a collapsed run). Such rows are counted, never
    imputed.
    """
    runs = active_runs(runs)
    values = metric_values(runs, metric)
    base_mask = (runs["condition"] == BASELINE) & (runs["beta"] == 0.0)
    base = runs.loc[base_mask]
    base_keys = list(zip(base["dataset"], base["seed"], strict=True))
    base_value = dict(zip(base_keys, values[base.index], strict=True))
    base_usable = dict(zip(base_keys, base["usable"], strict=True))
    rows = []
    for i, run in runs.loc[runs["condition"] != BASELINE].iterrows():
        key = (run["dataset"], run["seed"])
        value, b = values[i], base_value.get(key, math.nan)
        ratio = math.nan
        if not run["usable"]:
            pairing = "run not usable"
        elif key not in base_value:
            pairing = "no baseline"
        elif not base_usable[key]:
            pairing = "baseline not usable"
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = float(np.log10(b / value)) if value > 0 else math.inf
            pairing = PAIRED if math.isfinite(ratio) else "non-finite"
            ratio = ratio if math.isfinite(ratio) else math.nan
        rows.append(
            {
                "dataset": run["dataset"],
                "family": run["family"],
                "condition": run["condition"],
                "beta": run["beta"],
                "seed": run["seed"],
                "metric": metric,
                "value": value,
                "baseline": b,
                "log_ratio": ratio,
                "pairing": pairing,
            }
        )
    columns = [
        "dataset",
        "family",
        "condition",
        "beta",
        "seed",
        "metric",
        "value",
        "baseline",
        "log_ratio",
        "pairing",
    ]
    return pd.DataFrame(rows, columns=columns)


def paired_panels(summaries: Mapping[str, pd.DataFrame], panels: Sequence[str]) -> list[str]:
    """The panels (of `log_ratio_summary` tables) with at least one seed pair in any of them, in
    the order given: a panel without one would be drawn empty."""
    paired = {p for summary in summaries.values() for p in summary.loc[summary["n_pairs"] > 0, "panel"]}
    return [p for p in panels if p in paired]


def log_ratio_summary(ratios: pd.DataFrame, by: str = "family") -> pd.DataFrame:
    """Mean and SEM of the per-seed log-ratios per (panel, condition, beta).

    ``by="family"`` pools the Nguyen problems (all their pairs in one sample); ``by="dataset"``
    keeps one panel per problem. SEM = sample std (ddof=1) / sqrt(n_pairs); NaN when
    n_pairs < 2 (no error bar). ``n_runs`` counts all non-baseline runs of the cell,
    ``n_pairs`` those with a finite log-ratio.
    """
    rows = []
    for (panel, condition, beta), g in ratios.groupby([by, "condition", "beta"], sort=False):
        r = g["log_ratio"].dropna().to_numpy(float)
        n = len(r)
        rows.append(
            {
                "panel": panel,
                "metric": g["metric"].iloc[0],
                "condition": condition,
                "beta": beta,
                "mean": float(r.mean()) if n else math.nan,
                "sem": float(r.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan,
                "n_pairs": n,
                "n_runs": len(g),
            }
        )
    table = pd.DataFrame(rows, columns=["panel", "metric", "condition", "beta", "mean", "sem", "n_pairs", "n_runs"])
    rank = dataset_rank if by == "dataset" else family_rank
    table = table.assign(_p=table["panel"].map(rank), _c=table["condition"].map(condition_rank))
    table = table.sort_values(["_p", "_c", "beta"], kind="stable").drop(columns=["_p", "_c"])
    return table.reset_index(drop=True)


def architecture_edges(width: str, condition: str) -> tuple[int, int]:
    """(contributing edges, depth) of the whole architecture ``width`` ("[n_0, ..., n_L]")
    with every edge open and the final exit: what an ungated condition must report (Baseline:
    every trunk edge; F: every trunk and forward-connection edge)."""
    w, forward = json.loads(width), "F" in condition
    masks = [np.ones((n_in, trunk + head), dtype=bool) for n_in, trunk, head in stage_shapes(w, forward, exits=False)]
    s = trace(w, forward, masks)
    return s.contributing_edges, s.depth


def ungated_structure_check(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, ungated condition): the runs whose contributing edges or depth differ from
    the architecture's (issue: Baseline and F must match it exactly on every dataset). Columns
    dataset, condition, width, n_runs, edges_expected, depth_expected, n_differ; one row per
    cell with usable runs and a recorded width."""
    act = active_runs(runs)
    act = act[act["usable"] & act["condition"].isin(UNGATED) & act["width"].notna()]
    rows = []
    for (dataset, condition, width), g in act.groupby(["dataset", "condition", "width"], sort=False):
        edges, depth = architecture_edges(width, condition)
        differ = (g["contributing_edges"] != edges) | (g["depth"] != depth)
        rows.append({"dataset": dataset, "condition": condition, "width": width, "n_runs": len(g),
                     "edges_expected": edges, "depth_expected": depth, "n_differ": int(differ.sum())})
    cols = ["dataset", "condition", "width", "n_runs", "edges_expected", "depth_expected", "n_differ"]
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(["dataset", "condition"], key=lambda c: c.map(dataset_rank) if c.name == "dataset"
                           else c).reset_index(drop=True)
