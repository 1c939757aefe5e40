"""Reproduced vs. published values: absolute results and normalized hypervolume.

Published absolute results use the CSV format of ``shared/calibration/concrete_published.csv``::

    condition,beta,rmse_median,rmse_min,rmse_max,edges_median,edges_min,edges_max,depth_median,depth_min,depth_max

one row per (condition, beta), ``beta`` empty for Baseline and F. Published normalized HVs are
a CSV ``condition,hv`` (one row per gated condition; a header line is required), or a mapping
passed in code.

The paper's own tables ship with kanx as package data (``kanx/analyze/paper/``: the appendix
tables of absolute results for all 14 datasets and the HV table, transcribed from the paper):
`paper_published` and `paper_hv` read them, `PAPER_HV` is the HV table by family. Each value
keeps the precision the paper printed, and a reproduced median is compared at that precision
(`printed_decimals`): Nguyen's RMSE is printed to 4 decimals, so a reproduced 7e-05 reads 0.0001.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from kanx.cli import one_line
from kanx.errors import ConfigError
from kanx.record import canonical_beta

from .aggregate import METRIC_PREFIX
from .hypervolume import REF_SCALE, condition_hypervolumes
from .labels import CONDITIONS, GATED, UNGATED
from .tables import (
    CSV_FLOAT,
    DASH_MD,
    MISSING,
    format_beta,
    format_count,
    markdown_table,
    rmse_decimals,
)

PAPER_DIR = Path(__file__).with_name("paper")
PAPER_HV_FILE = PAPER_DIR / "hypervolume_published.csv"
# Default tolerance on |reproduced - published| normalized HV. The paper's own rounded medians
# recompute to its HVs within 0.01 for five of six Concrete conditions (EF is off by 0.12), so
# 0.05 separates protocol errors from seed noise without hiding real disagreement.
HV_TOLERANCE = 0.05

STAT_COLUMNS: tuple[str, ...] = tuple(f"{p}_{s}" for p in METRIC_PREFIX.values() for s in ("median", "min", "max"))


def _csv(path: str | Path) -> pd.DataFrame:
    """A CSV table the user gave; ConfigError, in one line naming it, where it cannot be read."""
    try:
        return pd.read_csv(path)
    except OSError as e:
        raise ConfigError(f"{path} cannot be read: {e.strerror or e}") from None
    except ValueError as e:  # pandas' EmptyDataError and ParserError, a UnicodeDecodeError
        raise ConfigError(f"{path} is not a CSV table: {one_line(e)}") from None


def read_published(path: str | Path) -> pd.DataFrame:
    """Published absolute results; beta of Baseline/F becomes 0 like in the run table. Raises
    ConfigError for a file that is not such a table."""
    table = _csv(path)
    missing = {"condition", "beta", *STAT_COLUMNS} - set(table.columns)
    if missing:
        header = ",".join(["condition", "beta", *STAT_COLUMNS])
        raise ConfigError(f"{path}: missing columns {', '.join(sorted(missing))} "
                          f"(a table of published results has the header {header})")
    unknown = set(table["condition"]) - set(CONDITIONS)
    if unknown:
        raise ConfigError(f"{path}: unknown conditions {', '.join(sorted(map(str, unknown)))} "
                          f"(known: {', '.join(CONDITIONS)})")
    try:
        table["beta"] = [canonical_beta(None if pd.isna(b) else b, c)
                         for c, b in zip(table["condition"], table["beta"], strict=True)]
        return table[["condition", "beta", *STAT_COLUMNS]].astype({c: float for c in STAT_COLUMNS})
    except ValueError as e:
        raise ConfigError(f"{path}: {one_line(e)}") from None


def printed_decimals(path: str | Path) -> dict[str, int]:
    """Per statistic column, the most decimals the file prints (the paper's precision)."""
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    return {c: max((len(v.split(".", 1)[1]) if "." in v else 0) for v in raw[c]) for c in STAT_COLUMNS}


def paper_published(dataset: str) -> pd.DataFrame | None:
    """The paper's absolute results for ``dataset`` (None for a dataset the paper has not),
    with ``attrs["decimals"]`` the precision of each statistic as printed."""
    path = PAPER_DIR / f"{dataset}_published.csv"
    if not path.is_file():
        return None
    table = read_published(path)
    table.attrs["decimals"] = printed_decimals(path)
    return table


PAPER_DEPARTURES_FILE = PAPER_DIR / "departures.csv"


def departures_markdown(families, family_label) -> str | None:
    """The departures from the paper that remain in ``families`` and what explains each (or what was
    tested), as a Markdown list: kanx/analyze/paper/departures.csv, each row naming the section of
    docs/CALIBRATION.md that holds its evidence. None when no family of the report has one."""
    rows = pd.read_csv(PAPER_DEPARTURES_FILE, dtype=str)
    rows = rows[rows["family"].isin(set(families))]
    if rows.empty:
        return None
    return "\n".join(f"- **{family_label(r.family)}.** {r.departure} {r.cause} (docs/CALIBRATION.md, "
                     f"\"{r.section}\".)" for r in rows.itertuples())


def paper_hv() -> pd.DataFrame:
    """The paper's HV table: a row per gated condition, a column per family and "mean"."""
    return pd.read_csv(PAPER_HV_FILE).set_index("condition")


def _paper_hv_by_family() -> dict[str, dict[str, float]]:
    table = paper_hv().drop(columns="mean")
    return {family: {c: float(v) for c, v in table[family].items()} for family in table.columns}


# Normalized 3-D HV as published, by family (the paper's HV table).
PAPER_HV: dict[str, dict[str, float]] = _paper_hv_by_family()


def read_published_hv(path: str | Path) -> dict[str, float]:
    """A CSV ``condition,hv`` of published normalized hypervolumes. Raises ConfigError for a
    file that is not such a table."""
    table = _csv(path)
    if list(table.columns[:2]) != ["condition", "hv"]:
        raise ConfigError(f"{path}: expected the header 'condition,hv'")
    unknown = set(table["condition"]) - set(GATED)
    if unknown:
        raise ConfigError(f"{path}: not gated conditions: {', '.join(sorted(map(str, unknown)))}")
    try:
        return dict(zip(table["condition"], table["hv"].astype(float), strict=True))
    except ValueError as e:
        raise ConfigError(f"{path}: {one_line(e)}") from None


def _order(table: pd.DataFrame) -> pd.DataFrame:
    table = table.assign(_c=table["condition"].map(CONDITIONS.index))
    return table.sort_values(["_c", "beta"], kind="stable").drop(columns="_c").reset_index(drop=True)


def compare_published(medians: pd.DataFrame, published: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """Side by side per (condition, beta): reproduced median, published median, difference
    (reproduced - published) and whether the reproduced median lies in the published
    [min, max] (NaN where either side is missing), the reproduced median rounded first to the
    precision the published values print (``published.attrs["decimals"]``, if given). The
    paper's eight conditions only: other factor sets have no published values.
    """
    decimals = published.attrs.get("decimals", {})
    mine = medians.loc[medians["dataset"] == dataset, ["condition", "beta", "n_used", "n_total", *STAT_COLUMNS]]
    mine = mine[mine["condition"].isin(CONDITIONS)]  # published values exist for the paper's eight only
    both = mine.merge(published, on=["condition", "beta"], how="outer", suffixes=("", "_pub"))
    out = both[["condition", "beta"]].copy()
    out["n_used"] = both["n_used"].fillna(0).astype(int)
    out["n_total"] = both["n_total"].fillna(0).astype(int)
    for p in METRIC_PREFIX.values():
        rep, pub = both[f"{p}_median"], both[f"{p}_median_pub"]
        out[f"{p}_reproduced"] = rep
        out[f"{p}_published"] = pub
        out[f"{p}_diff"] = rep - pub
        shown = as_printed(rep, decimals, p)
        inside = (shown >= both[f"{p}_min_pub"]) & (shown <= both[f"{p}_max_pub"])
        out[f"{p}_in_range"] = inside.astype(object).where(rep.notna() & pub.notna(), np.nan)
    return _order(out)


def as_printed(value, decimals: Mapping[str, int], measure: str):
    """``value`` (a number or a Series of ``measure``: rmse, edges or depth) rounded to the
    decimals the paper prints that measure's median with (``decimals``: a published table's
    ``attrs["decimals"]``), as it is where they are not known: how a reproduced median is read
    against a published range."""
    places = decimals.get(f"{measure}_median")
    return value if places is None else np.round(value, places)


def in_published_range(published: pd.DataFrame, condition: str, beta: float, measure: str,
                       value: float) -> bool | None:
    """Whether a seed-median ``value`` of ``measure`` (rmse, edges or depth) lies in the published
    [min, max] of the cell (condition, beta), read at the paper's printed precision as the
    fidelity table reads it (compare_published); None where the paper has no such cell or the
    value is not a number. ``published``: a table of paper_published, beta 0 for Baseline and F."""
    cell = published[(published["condition"] == condition) & (published["beta"] == beta)]
    if cell.empty or value is None or math.isnan(value):
        return None
    shown = as_printed(value, published.attrs.get("decimals", {}), measure)
    return bool(cell.iloc[0][f"{measure}_min"] <= shown <= cell.iloc[0][f"{measure}_max"])


def hv_from_published(published: pd.DataFrame, scale: float = REF_SCALE) -> dict[str, float]:
    """Normalized HV recomputed from the published medians with this package's rules."""
    medians = published.assign(dataset="published", family="published")
    detail = condition_hypervolumes(medians, scale)
    return {c: float(v) for c, v in zip(detail["condition"], detail["hv_norm"], strict=True) if c in GATED}


def compare_hv(
    reproduced: Mapping[str, float],
    published: Mapping[str, float],
    tol: float = HV_TOLERANCE,
    recomputed: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Normalized HV per gated condition: reproduced vs published, |diff| <= ``tol``.

    ``recomputed`` (e.g. `hv_from_published`) adds the same check for the paper's own medians.
    """
    rows = []
    for c in GATED:
        rep, pub = reproduced.get(c, math.nan), published.get(c, math.nan)
        row = {"condition": c, "reproduced": rep, "published": pub, "diff": rep - pub}
        row["within_tol"] = abs(row["diff"]) <= tol if math.isfinite(row["diff"]) else np.nan
        if recomputed is not None:
            rec = recomputed.get(c, math.nan)
            row |= {"from_published_medians": rec, "from_published_diff": rec - pub}
            row["from_published_within_tol"] = abs(rec - pub) <= tol if math.isfinite(rec - pub) else np.nan
        rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["tol"] = tol
    return table


# --- rendering -----------------------------------------------------------------------------


def _yes_no(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH_MD
    return "yes" if value else "no"


def _num(x: float, fmt) -> str:
    return MISSING if x is None or math.isnan(x) else fmt(x)


def comparison_markdown(table: pd.DataFrame, published: pd.DataFrame | None = None) -> str:
    """Per (condition, beta): the reproduced median, the published median with its [min, max]
    over seeds (from ``published``, when given), Δ, and whether the reproduced median lies in
    that range; a reproduced median outside it is bold."""
    decimals = rmse_decimals(pd.concat([table["rmse_reproduced"], table["rmse_published"]])) or 3
    ranges = published.set_index(["condition", "beta"]) if published is not None else None

    def rmse(x):
        return f"{x:.{decimals}f}"

    def signed(fmt):
        return lambda x: ("+" if x > 0 else "") + fmt(x)

    header = ["Cond.", "β", "n"]
    fmts = {"rmse": rmse, "edges": format_count, "depth": format_count}
    publ = "publ. [min, max]" if ranges is not None else "publ."
    for name in ("RMSE", "Edges", "Depth"):
        header += [f"{name} repr.", publ, "Δ", "in range"]
    rows = []
    for r in table.itertuples(index=False):
        beta = DASH_MD if r.condition in UNGATED and r.beta == 0.0 else format_beta(r.beta)
        row = [r.condition, beta, f"{r.n_used}/{r.n_total}"]
        for p, fmt in fmts.items():
            d, inside, value = getattr(r, f"{p}_diff"), getattr(r, f"{p}_in_range"), getattr(r, f"{p}_published")
            shown = _num(value, fmt)
            if ranges is not None and (r.condition, r.beta) in ranges.index and not math.isnan(value):
                lo, hi = ranges.loc[(r.condition, r.beta), [f"{p}_min", f"{p}_max"]]
                shown += f" [{fmt(lo)}, {fmt(hi)}]"
            reproduced = _num(getattr(r, f"{p}_reproduced"), fmt)
            row += [
                f"**{reproduced}**" if inside is False else reproduced,
                shown,
                DASH_MD if math.isnan(d) else signed(fmt)(d),
                _yes_no(inside),
            ]
        rows.append(row)
    return markdown_table(header, rows, "lll" + "rrrl" * 3)


def comparison_csv(table: pd.DataFrame) -> str:
    out = table.astype({"beta": object})
    out.loc[out["condition"].isin(UNGATED) & (table["beta"] == 0.0), "beta"] = None
    return out.to_csv(index=False, float_format=CSV_FLOAT, lineterminator="\n")


def hv_comparison_markdown(table: pd.DataFrame) -> str:
    def num(x):
        return MISSING if math.isnan(x) else f"{x:.3f}"

    def diff(x):
        return DASH_MD if math.isnan(x) else f"{x:+.3f}".replace("+0.000", "0.000").replace("-0.000", "0.000")

    header = [
        "Condition",
        "reproduced",
        "published",
        "Δ",
        f"within ±{table.attrs.get('tol', HV_TOLERANCE):g}",
    ]
    recomputed = "from_published_medians" in table.columns
    if recomputed:
        header += ["from publ. medians", "Δ", "ok"]
    rows = []
    for r in table.itertuples(index=False):
        row = [
            r.condition,
            num(r.reproduced),
            num(r.published),
            diff(r.diff),
            _yes_no(r.within_tol),
        ]
        if recomputed:
            row += [
                num(r.from_published_medians),
                diff(r.from_published_diff),
                _yes_no(r.from_published_within_tol),
            ]
        rows.append(row)
    return markdown_table(header, rows, "lrrrl" + ("rrl" if recomputed else ""))


def hv_comparison_csv(table: pd.DataFrame) -> str:
    return table.to_csv(index=False, float_format=CSV_FLOAT, lineterminator="\n")


# --- fidelity: how close the reproduction comes, per dataset and family ----------------------

MEASURES: tuple[str, ...] = ("rmse", "edges", "depth")
MEASURE_NAMES = {"rmse": "RMSE", "edges": "Edges", "depth": "Depth"}


def _fidelity_row(cmp: pd.DataFrame) -> dict:
    both = cmp[cmp["rmse_reproduced"].notna() & cmp["rmse_published"].notna()]
    row = {"cells": len(both)}
    for p in MEASURES:
        row[f"{p}_in"] = int((both[f"{p}_in_range"] == True).sum())  # noqa: E712 (object column of True/False/NaN)
    ungated = both[both["condition"].isin(UNGATED)]
    exact = ((ungated["edges_reproduced"] == ungated["edges_published"])
             & (ungated["depth_reproduced"] == ungated["depth_published"]))
    row["ungated_cells"], row["ungated_exact"] = len(ungated), int(exact.sum())
    return row


def fidelity_table(comparisons: Mapping[str, pd.DataFrame], families: Mapping[str, str]) -> pd.DataFrame:
    """Per dataset, then per family (rows with ``dataset`` = ``*``) and over all (``family`` =
    ``*``): the cells with both a reproduced and a published median, how many of them lie in
    the published [min, max] per measure, and of the ungated cells (Baseline, F) how many have
    the published contributing edges and depth exactly."""
    per = pd.DataFrame([{"family": families[d], "dataset": d, **_fidelity_row(c)} for d, c in comparisons.items()])
    if per.empty:
        return per
    counts = [c for c in per.columns if c not in ("family", "dataset")]
    by_family = per.groupby("family", sort=False)[counts].sum().reset_index().assign(dataset="*")
    total = per[counts].sum().to_frame().T.assign(family="*", dataset="*")
    return pd.concat([per, by_family, total], ignore_index=True)[["family", "dataset", *counts]]


def _share(k: int, n: int) -> str:
    return DASH_MD if n == 0 else f"{k}/{n} ({100 * k / n:.0f}%)"


def fidelity_markdown(table: pd.DataFrame, label) -> str:
    """The fidelity table: a row per dataset of a family with several, a row per family, and
    the total; ``label`` names a dataset or family."""
    header = ["Dataset", "Cells", *(f"{MEASURE_NAMES[p]} in range" for p in MEASURES), "All measures",
              "Ungated structure exact"]
    rows = []
    several = table[table["dataset"] != "*"].groupby("family")["dataset"].count()
    for r in table.itertuples(index=False):
        if r.dataset != "*" and several.get(r.family, 0) < 2:
            continue  # a one-dataset family: its family row says it all
        name = "**all**" if r.family == "*" else (f"**{label(r.family)}**" if r.dataset == "*"
                                                  else f"  {label(r.dataset)}")
        rows.append([name, str(r.cells), *(_share(getattr(r, f"{p}_in"), r.cells) for p in MEASURES),
                     _share(sum(getattr(r, f"{p}_in") for p in MEASURES), 3 * r.cells),
                     _share(r.ungated_exact, r.ungated_cells)])
    return markdown_table(header, rows, "lr" + "r" * len(MEASURES) + "rr")


def hv_side_by_side(reproduced: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """The HV table beside the paper's: per gated condition and family present in both,
    reproduced, published and Δ; the mean over those families on both sides; and each side's
    ranking of the conditions by that mean (1 = best). ``reproduced``: kanx's hv_table;
    ``published``: paper_hv()."""
    families = [f for f in reproduced.columns if f != "mean" and f in published.columns]
    rows = []
    for c in GATED:
        row: dict = {"condition": c}
        for f in families:
            rep = float(reproduced.loc[c, f]) if c in reproduced.index else math.nan  # not launched here
            pubv = float(published.loc[c, f]) if c in published.index else math.nan
            row |= {f"{f}_reproduced": rep, f"{f}_published": pubv, f"{f}_diff": rep - pubv}
        for side in ("reproduced", "published"):
            values = [row[f"{f}_{side}"] for f in families]
            row[f"mean_{side}"] = (float(np.mean(values)) if families
                                   and all(math.isfinite(v) for v in values) else math.nan)
        if set(families) == set(published.columns) - {"mean"} and "mean" in published.columns:
            row["mean_published"] = float(published.loc[c, "mean"])  # as printed (the mean of the unrounded values)
        row["mean_diff"] = row["mean_reproduced"] - row["mean_published"]
        rows.append(row)
    table = pd.DataFrame(rows)
    for side in ("reproduced", "published"):
        table[f"rank_{side}"] = table[f"mean_{side}"].rank(ascending=False, method="min").astype("Int64")
    table.attrs["families"] = families
    table.attrs["all_families"] = set(families) == set(published.columns) - {"mean"}
    return table


def hv_side_by_side_markdown(table: pd.DataFrame, label) -> str:
    """Each cell: reproduced / published (Δ); the best reproduced value of a column in bold."""
    families = table.attrs["families"]

    def cell(rep, pubv, best) -> str:
        if math.isnan(rep) and math.isnan(pubv):
            return MISSING
        mine = MISSING if math.isnan(rep) else f"{rep:.3f}"
        mine = f"**{mine}**" if math.isfinite(rep) and rep == best else mine
        delta = "" if math.isnan(rep - pubv) else f" ({rep - pubv:+.3f})"
        return f"{mine} / {_num(pubv, lambda x: f'{x:.3f}')}{delta}"

    header = ["Condition", *(label(f) for f in families), "Mean", "Rank repr.", "Rank publ."]
    rows = []
    for r in table.to_dict("records"):
        row = [r["condition"]]
        for f in [*families, "mean"]:
            row.append(cell(r[f"{f}_reproduced"], r[f"{f}_published"], table[f"{f}_reproduced"].max()))
        row += [str(r["rank_reproduced"]) if not pd.isna(r["rank_reproduced"]) else DASH_MD, str(r["rank_published"])]
        rows.append(row)
    return markdown_table(header, rows, "l" + "r" * (len(families) + 3))
