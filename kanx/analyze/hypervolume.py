"""3-D Pareto hypervolume of (RMSE, contributing edges, depth), all minimized (paper, Methods).

Rules, per dataset (each Nguyen problem separately):
  * a condition's points are its seed-medians, one per beta (cells with a non-finite median,
    e.g. no usable run, are left out);
  * the reference point is 1.1 x the per-objective maximum over the seed-medians of *all*
    conditions of the dataset, Baseline and F included;
  * a condition's HV is normalized by the largest HV among the gated conditions of the dataset
    (Baseline and F have no beta sweep and get no HV in the table: a dash);
  * Nguyen: normalized per problem, then averaged over the problems; the Mean column averages
    the family columns. A missing value is never averaged away: the average is missing too.
  * the conditions are those the seed-medians of the dataset's family hold (labels.present_conditions):
    the cells the records or manifests name, so a sweep of Baseline and E gets those two rows, not eight;
  * other factor sets than the paper's eight (with N or I; labels.OTHER_CONDITIONS) get rows
    after them, wherever the seed-medians given hold any of their cells, on the same scale: the
    reference point and the normalizing best HV are those of the paper's eight (of all
    conditions only for a dataset without a finite point or HV of theirs), so a value above 1
    beats every gated condition of the paper's eight, and the paper's rows are the same with or
    without them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd
from pymoo.indicators.hv import HV

from .labels import CONDITIONS, GATED, dataset_rank, is_gated, present_conditions, sort_datasets, sort_families

OBJECTIVES: tuple[str, ...] = ("rmse_median", "edges_median", "depth_median")
REF_SCALE = 1.1


def pareto_front(points) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``points`` (n, k), all objectives minimized.

    A row is dominated if another row is <= in every objective and < in at least one; equal
    rows do not dominate each other, so both stay.
    """
    p = np.asarray(points, dtype=float)
    if p.size == 0:
        return np.zeros(len(p), dtype=bool)
    p = p.reshape(len(p), -1)
    le = (p[:, None, :] <= p[None, :, :]).all(axis=2)  # le[j, i]: row j <= row i everywhere
    lt = (p[:, None, :] < p[None, :, :]).any(axis=2)
    dominated = (le & lt).any(axis=0)
    return ~dominated


def hypervolume(points, ref) -> float:
    """Volume dominated by ``points`` (n, k) and bounded by ``ref`` (k,), minimization (pymoo).

    Rows with a non-finite value are dropped; a row not strictly better than ``ref`` in every
    objective adds nothing. No rows: 0.
    """
    ref = np.asarray(ref, dtype=float)
    p = np.asarray(points, dtype=float).reshape(-1, len(ref))
    p = p[np.isfinite(p).all(axis=1) & (p < ref).all(axis=1)]
    if len(p) == 0:
        return 0.0
    return float(HV(ref_point=ref)(p[pareto_front(p)]))


def reference_point(medians: pd.DataFrame, scale: float = REF_SCALE) -> np.ndarray:
    """``scale`` x the per-objective maximum over the finite seed-medians given."""
    p = medians[list(OBJECTIVES)].to_numpy(float)
    p = p[np.isfinite(p).all(axis=1)]
    if len(p) == 0:
        return np.full(len(OBJECTIVES), math.nan)
    return scale * p.max(axis=0)


def condition_hypervolumes(medians: pd.DataFrame, scale: float = REF_SCALE) -> pd.DataFrame:
    """Raw and normalized HV per (dataset, condition), with the reference point used.

    ``hv`` is NaN where a condition has no finite point (missing); ``hv_norm`` is NaN for the
    ungated conditions and wherever the dataset has no positive gated HV.
    """
    rows = []
    for dataset in sort_datasets(medians["dataset"]):
        mine = medians[medians["dataset"] == dataset]
        # the family's conditions, so a problem without a cell of one reads missing, never averaged away
        conditions = present_conditions(medians.loc[medians["family"] == mine["family"].iloc[0], "condition"])
        ref = reference_point(mine[mine["condition"].isin(CONDITIONS)], scale)
        if not np.isfinite(ref).all():  # none of the paper's eight has a finite point here
            ref = reference_point(mine, scale)
        hvs = {}
        for condition in conditions:
            p = mine.loc[mine["condition"] == condition, list(OBJECTIVES)].to_numpy(float)
            p = p[np.isfinite(p).all(axis=1)]
            front = int(pareto_front(p).sum()) if len(p) else 0
            hv = hypervolume(p, ref) if len(p) and np.isfinite(ref).all() else math.nan
            hvs[condition] = (hv, len(p), front)
        best = max((hv for c, (hv, _, _) in hvs.items() if c in GATED and math.isfinite(hv)), default=math.nan)
        if not best > 0:  # no gated condition of the paper's eight has an HV here: the best of the others
            best = max((hv for c, (hv, _, _) in hvs.items() if is_gated(c) and math.isfinite(hv)), default=math.nan)
        for condition, (hv, n_points, n_front) in hvs.items():
            norm = hv / best if is_gated(condition) and best > 0 else math.nan
            rows.append(
                {
                    "dataset": dataset,
                    "family": mine["family"].iloc[0],
                    "condition": condition,
                    "hv": hv,
                    "hv_norm": norm,
                    "n_points": n_points,
                    "n_front": n_front,
                    "ref_rmse": ref[0],
                    "ref_edges": ref[1],
                    "ref_depth": ref[2],
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "dataset",
            "family",
            "condition",
            "hv",
            "hv_norm",
            "n_points",
            "n_front",
            "ref_rmse",
            "ref_edges",
            "ref_depth",
        ],
    )


def _mean_or_missing(values: Iterable[float]) -> float:
    v = list(values)
    return float(np.mean(v)) if v and all(math.isfinite(x) for x in v) else math.nan


def hv_table(medians: pd.DataFrame, scale: float = REF_SCALE) -> pd.DataFrame:
    """Normalized HV, rows = the conditions with cells (the paper's eight, then other factor sets, as
    far as the seed-medians hold them), columns = families present + ``mean``.

    A family with several datasets (Nguyen) gets the mean of its per-problem normalized HVs.
    Ungated rows are all NaN (shown as dashes); a gated NaN means missing.
    """
    detail = condition_hypervolumes(medians, scale)
    conditions = present_conditions(detail["condition"])
    table = pd.DataFrame(index=pd.Index(conditions, name="condition"))
    for family in sort_families(detail["family"]):
        fam = detail[detail["family"] == family]
        table[family] = [_mean_or_missing(fam.loc[fam["condition"] == c, "hv_norm"]) if is_gated(c) else math.nan
                         for c in conditions]
    table["mean"] = [_mean_or_missing(table.loc[c]) if is_gated(c) else math.nan for c in conditions]
    return table


def hv_problem_table(medians: pd.DataFrame, family: str = "nguyen", scale: float = REF_SCALE) -> pd.DataFrame:
    """Normalized HV of each dataset (problem) of ``family``; ``mean`` is that family's column."""
    detail = condition_hypervolumes(medians[medians["family"] == family], scale)
    conditions = present_conditions(detail["condition"])
    table = pd.DataFrame(index=pd.Index(conditions, name="condition"))
    for dataset in sorted(detail["dataset"].unique(), key=dataset_rank):
        mine = detail[detail["dataset"] == dataset].set_index("condition")
        table[dataset] = mine["hv_norm"].reindex(conditions).to_numpy()
    table["mean"] = [_mean_or_missing(table.loc[c]) if is_gated(c) else math.nan for c in conditions]
    return table
