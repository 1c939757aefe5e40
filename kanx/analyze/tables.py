"""Tables in the paper's layouts, as numeric DataFrames plus Markdown, LaTeX and CSV text.

`absolute_table` and `hv_table` (in `hypervolume`) return numbers; the ``*_markdown``,
``*_latex`` and ``*_csv`` functions only format them. Cell conventions everywhere:
``missing`` = an expected cell without any record; ``n/a`` = records exist but none is
usable (all diverged or failed; see the n column); a dash = does not apply (no beta for
Baseline and F, no hypervolume for them either).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .aggregate import METRIC_PREFIX
from .labels import (
    ALL_CONDITIONS,
    BASELINE,
    CONDITIONS,
    UNGATED,
    family_label,
    group_label,
    latex_escape,
    problem_label,
)

MISSING = "missing"
NOT_AVAILABLE = "n/a"
DASH_MD = "–"
DASH_TEX = "--"
CSV_FLOAT = "%.6g"


@dataclass(frozen=True)
class Cell:
    text: str
    italic: bool = False
    bold: bool = False

    def markdown(self) -> str:
        marks = ("*" if self.italic else "") + ("**" if self.bold else "")
        return f"{marks}{self.text}{marks[::-1]}" if marks else self.text

    def latex(self) -> str:
        text = latex_escape(self.text)
        text = DASH_TEX if text == DASH_MD else text
        if self.italic:
            text = rf"\textit{{{text}}}"
        if self.bold:
            text = rf"\textbf{{{text}}}"
        return text


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Cell | str]], align: str) -> str:
    """A GitHub pipe table with padded columns; ``align`` has one of 'l'/'r' per column."""
    text = [[c.markdown() if isinstance(c, Cell) else c for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in text]) for i, h in enumerate(header)]
    widths = [max(w, 3) for w in widths]

    def line(cells):
        padded = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(cells, widths, align, strict=True)]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if a == "r" else (":" + "-" * (w + 1))
                          for w, a in zip(widths, align, strict=True)) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in text)]) + "\n"


def latex_table(
    header: Sequence[str],
    blocks: Sequence[Sequence[Sequence[Cell | str]]],
    align: str,
    caption: str,
) -> str:
    """A booktabs tabular (no float environment, for ``\\input``); blocks split by midrules."""
    out = [
        f"% {caption}",
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        " & ".join(header) + r" \\",
    ]
    for block in blocks:
        out.append(r"\midrule")
        for row in block:
            out.append(" & ".join(c.latex() if isinstance(c, Cell) else c for c in row) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(out) + "\n"


# --- numbers ---------------------------------------------------------------------------


def rmse_decimals(values) -> int | None:
    """Decimals that give the smallest positive finite value 3 significant digits (0..6).

    None: values too small for fixed decimals; use 3 significant digits each.
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if len(v) == 0:
        return 2
    decimals = 2 - math.floor(math.log10(v.min()))
    return max(decimals, 0) if decimals <= 6 else None


def format_number(x: float, decimals: int | None) -> str:
    if math.isnan(x):
        return NOT_AVAILABLE
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.3g}" if decimals is None else f"{x:.{decimals}f}"


def format_count(x: float) -> str:
    """Edges and depth: integers as integers, a median between two integers with one decimal."""
    if math.isnan(x):
        return NOT_AVAILABLE
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"


def format_beta(beta: float) -> str:
    return f"{beta:g}"


def triple(median: float, lo: float, hi: float, fmt) -> str:
    return f"{fmt(median)} [{fmt(lo)}, {fmt(hi)}]"


# --- absolute results, one table per dataset or Nguyen problem ---------------------------


def absolute_table(medians: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """The cells of one dataset in the paper's row order, with the RMSE marks.

    ``rmse_italic``: median RMSE strictly below the Baseline's (beta 0) median.
    ``rmse_bold``: the lowest median RMSE of the table (all ties).
    """
    table = medians[medians["dataset"] == dataset].reset_index(drop=True)
    rmse = table["rmse_median"].astype(float)
    base = table.loc[(table["condition"] == BASELINE) & (table["beta"] == 0.0), "rmse_median"]
    base = float(base.iloc[0]) if len(base) else math.nan
    finite = rmse[np.isfinite(rmse)]
    best = finite.min() if len(finite) else math.nan
    table["rmse_italic"] = (table["condition"] != BASELINE) & (rmse < base)
    table["rmse_bold"] = rmse == best
    return table


def _absolute_cells(row, decimals) -> list[Cell]:
    if row.n_total == 0:
        return [Cell(MISSING)] * 3 + [Cell("0/0")]
    rmse = Cell(
        triple(row.rmse_median, row.rmse_min, row.rmse_max, lambda x: format_number(x, decimals))
        if row.n_used else NOT_AVAILABLE, italic=bool(row.rmse_italic),
        bold=bool(row.rmse_bold),
    )
    cells = [rmse]
    for prefix in ("edges", "depth"):
        values = [getattr(row, f"{prefix}_{s}") for s in ("median", "min", "max")]
        cells.append(Cell(triple(*values, format_count) if row.n_used else NOT_AVAILABLE))
    return cells + [Cell(f"{row.n_used}/{row.n_total}")]


def _absolute_blocks(table: pd.DataFrame, decimals, dash: str) -> list[list[list[Cell]]]:
    blocks = []
    for condition in ALL_CONDITIONS:  # those with cells: the paper's eight, then other factor sets
        rows = table[table["condition"] == condition]
        block = []
        for i, row in enumerate(rows.itertuples(index=False)):
            beta = dash if condition in UNGATED and row.beta == 0.0 else format_beta(row.beta)
            block.append([Cell(condition if i == 0 else ""), Cell(beta), *_absolute_cells(row, decimals)])
        if block:
            blocks.append(block)
    return blocks


def absolute_caption(table: pd.DataFrame, dataset: str) -> str:
    units = [u for u in table["target_unit"].dropna() if u]  # synthetic targets have none ("")
    unit = f" ({units[0]})" if units else ""
    return (
        f"{group_label(dataset)}: test RMSE{unit}, contributing edges and compositional depth, "
        "median [min, max] across seeds over the usable (ok or collapsed) runs; "
        "n = usable/total runs of the cell. Italic: median RMSE below the Baseline's; "
        "bold: best median RMSE."
    )


def absolute_markdown(table: pd.DataFrame, decimals: int | None | str = "auto") -> str:
    decimals = rmse_decimals(table["rmse_median"]) if decimals == "auto" else decimals
    rows = [r for b in _absolute_blocks(table, decimals, DASH_MD) for r in b]
    header = ["Cond.", "β", "RMSE", "Cont. Edges", "Depth", "n"]
    return markdown_table(header, rows, "llllll")


def absolute_latex(table: pd.DataFrame, dataset: str, decimals: int | None | str = "auto") -> str:
    decimals = rmse_decimals(table["rmse_median"]) if decimals == "auto" else decimals
    header = ["Cond.", r"$\beta$", "RMSE", r"Cont.\ Edges", "Depth", "$n$"]
    blocks = _absolute_blocks(table, decimals, DASH_MD)
    return latex_table(header, blocks, "llllll", absolute_caption(table, dataset))


ABSOLUTE_CSV_COLUMNS: tuple[str, ...] = (
    "condition",
    "beta",
    *(f"{p}_{s}" for p in METRIC_PREFIX.values() for s in ("median", "min", "max")),
    "n_used",
    "n_total",
    "n_ok",
    "n_collapsed",
    "n_diverged",
    "n_failed",
)


def absolute_csv(table: pd.DataFrame) -> str:
    """The published-values CSV format (beta empty for Baseline and F) plus the run counts.

    A missing cell has n_total = 0 and empty statistics.
    """
    out = table[list(ABSOLUTE_CSV_COLUMNS)].astype({"beta": object})
    out.loc[out["condition"].isin(UNGATED) & (table["beta"] == 0.0), "beta"] = None
    return out.to_csv(index=False, float_format=CSV_FLOAT, lineterminator="\n")


# --- runs per cell ------------------------------------------------------------------------


def cell_counts_markdown(medians: pd.DataFrame, dataset: str) -> str:
    """Rows = the conditions the dataset's cells name, columns = betas; usable/total runs,
    ``missing``, or a dash."""
    mine = medians[medians["dataset"] == dataset]
    betas = sorted(mine["beta"].unique())
    rows = []
    for condition in (c for c in ALL_CONDITIONS if c in set(mine["condition"])):
        row = [condition]
        for beta in betas:
            cell = mine[(mine["condition"] == condition) & (mine["beta"] == beta)]
            if cell.empty:
                row.append(DASH_MD)
            elif cell["n_total"].iloc[0] == 0:
                row.append(f"**{MISSING}**")
            else:
                row.append(f"{cell['n_used'].iloc[0]}/{cell['n_total'].iloc[0]}")
        rows.append(row)
    header = ["Cond.", *(f"β={format_beta(b)}" for b in betas)]
    return markdown_table(header, rows, "l" + "r" * len(betas))


# --- normalized hypervolume ---------------------------------------------------------------


def _hv_label(column: str, latex: bool, problems: bool) -> str:
    if column == "mean":
        return "Mean"
    if problems:
        return latex_escape(problem_label(column)) if latex else problem_label(column)
    return family_label(column, latex)


def _hv_cells(table: pd.DataFrame) -> list[list[Cell]]:
    best = {c: table[c].max() for c in table.columns}
    rows = []
    for condition in table.index:  # hv_table's rows: the conditions with cells, in canonical order
        row = [Cell(condition)]
        for column in table.columns:
            value = table.loc[condition, column]
            if condition in UNGATED:
                row.append(Cell(DASH_MD))
            elif math.isnan(value):
                row.append(Cell(MISSING))
            else:
                row.append(Cell(f"{value:.3f}", bold=bool(value == best[column])))
        rows.append(row)
    return rows


def hv_caption(problems: bool = False, others: bool = False) -> str:
    """``others``: the table has rows of other factor sets than the paper's eight (OTHERS_HV_TEXT)."""
    what = "each Nguyen problem" if problems else "each dataset"
    return (
        "Normalized hypervolume of the Pareto front of RMSE vs. contributing edges vs. compositional "
        f"depth (seed-medians per beta; reference point 1.1 x the per-objective maximum over all "
        f"conditions; normalized by the best condition of {what}). Higher is better; bold: best in "
        "column; dashes: ungated conditions (Baseline and F: no beta sweep)."
        + ("" if problems else " Nguyen values are normalized per problem, then averaged.")
        + (" " + OTHERS_HV_TEXT if others else "")
    )


OTHERS_HV_TEXT = ("Rows after EFX (factor sets with N or I): on the same scale, the reference point and the "
                  "normalizing best condition being those of the paper's eight, so a value above 1 beats every gated "
                  "condition of the paper's eight and the paper's rows keep the values they have without them.")


def has_others(table: pd.DataFrame) -> bool:
    """Whether an hv_table has rows of other factor sets than the paper's eight."""
    return any(c not in CONDITIONS for c in table.index)


def hv_markdown(table: pd.DataFrame, problems: bool = False) -> str:
    header = ["Condition", *(_hv_label(c, False, problems) for c in table.columns)]
    return markdown_table(header, _hv_cells(table), "l" + "r" * len(table.columns))


def hv_latex(table: pd.DataFrame, problems: bool = False) -> str:
    header = ["Condition", *(_hv_label(c, True, problems) for c in table.columns)]
    rows = _hv_cells(table)
    return latex_table(header, [rows], "l" + "c" * len(table.columns), hv_caption(problems, has_others(table)))


def hv_csv(table: pd.DataFrame) -> str:
    """Registry names as columns; empty for ungated conditions, ``missing`` where missing."""
    out = table.astype(object)
    for condition in table.index:
        for column in table.columns:
            value = table.loc[condition, column]
            if condition in UNGATED:
                out.loc[condition, column] = ""
            elif math.isnan(value):
                out.loc[condition, column] = MISSING
            else:
                out.loc[condition, column] = CSV_FLOAT % value
    return out.to_csv(lineterminator="\n")


# --- log-ratio summaries ------------------------------------------------------------------


def log_ratio_markdown(rmse: pd.DataFrame, edges: pd.DataFrame, panel_label) -> str:
    """Both panels of the log-ratio figure as numbers: mean ± SEM (pairs/runs)."""

    def by_key(summary):
        return {(r.panel, r.condition, r.beta): r for r in summary.itertuples(index=False)}

    rmse_rows, edge_rows = by_key(rmse), by_key(edges)
    order = list(rmse_rows) + [k for k in edge_rows if k not in rmse_rows]

    def cell(row):
        if row is None or row.n_pairs == 0 or math.isnan(row.mean):
            return f"{NOT_AVAILABLE} (0/{0 if row is None else int(row.n_runs)})"
        err = "" if math.isnan(row.sem) else f" ± {row.sem:.3f}"
        mean = f"{row.mean:+.3f}".replace("-0.000", "+0.000")
        return f"{mean}{err} ({int(row.n_pairs)}/{int(row.n_runs)})"

    rows = [
        [
            panel_label(p),
            c,
            format_beta(b),
            cell(rmse_rows.get((p, c, b))),
            cell(edge_rows.get((p, c, b))),
        ]
        for p, c, b in order
    ]
    header = ["Panel", "Cond.", "β", "log10 RMSE ratio", "log10 edges ratio"]
    return markdown_table(header, rows, "lllrr")
