"""Which inputs the runs of a condition with input gates (I) keep: a record of such a condition
names the inputs a contributing edge leaves (metrics.selected_inputs, kanx.vocab's
RECORD_SELECTED_INPUTS; ``load_runs`` keeps them in ``attrs["selected_inputs"]``). Per
(dataset, condition, beta): of the usable runs, how many keep each input. Inputs are listed in
the order they first appear in the dataset's records (conditions in canonical order, then beta
and seed), so a dataset's own inputs usually come before its distractors.
"""

from __future__ import annotations

import pandas as pd

from .collect import active_runs
from .labels import group_label
from .tables import CSV_FLOAT, DASH_MD, format_beta, markdown_table

COLUMNS: tuple[str, ...] = ("dataset", "condition", "beta", "input", "n_selected", "n_runs")


def selected_inputs(runs: pd.DataFrame) -> pd.DataFrame:
    """Long format (``COLUMNS``): per (dataset, condition, beta) cell with a selection recorded
    and each input the dataset's records name, how many of the cell's usable runs keep it
    (``n_selected``) out of ``n_runs``. Empty without any record of a condition with I."""
    chosen = runs.attrs.get("selected_inputs") or {}
    act = active_runs(runs)
    act = act[act["usable"] & act["path"].isin(list(chosen))]
    rows = []
    for dataset, mine in act.groupby("dataset", sort=False):  # the run table's order
        names = list(dict.fromkeys(name for path in mine["path"] for name in chosen[path]))
        for (condition, beta), cell in mine.groupby(["condition", "beta"], sort=False):
            kept = [chosen[path] for path in cell["path"]]
            rows += [(dataset, condition, beta, name, sum(name in k for k in kept), len(kept)) for name in names]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def selected_inputs_markdown(table: pd.DataFrame, dataset: str) -> str:
    """One dataset's cells as rows, its inputs as columns: runs keeping the input / usable runs."""
    mine = table[table["dataset"] == dataset]
    names = list(dict.fromkeys(mine["input"]))
    rows = []
    for (condition, beta), cell in mine.groupby(["condition", "beta"], sort=False):
        counts = dict(zip(cell["input"], cell["n_selected"], strict=True))
        n = int(cell["n_runs"].iloc[0])
        rows.append([condition, format_beta(beta), str(n),
                     *(f"{counts[name]}/{n}" if n else DASH_MD for name in names)])
    return markdown_table(["Cond.", "β", "runs", *names], rows, "llr" + "r" * len(names))


SELECTED_TEXT = """\
The conditions with input gates (I) select inputs: a record names the inputs a contributing edge \
leaves (`metrics.selected_inputs`). Per cell, the usable runs that keep each input / the usable runs \
with a selection recorded."""


def selected_inputs_section(runs: pd.DataFrame, texts: dict[str, str]) -> list[str]:
    """The report's section (nothing without a record of a condition with I); adds its CSV to ``texts``."""
    table = selected_inputs(runs)
    if table.empty:
        return []
    texts["tables/selected_inputs.csv"] = table.to_csv(index=False, float_format=CSV_FLOAT, lineterminator="\n")
    lines = ["## Selected inputs", "", SELECTED_TEXT, ""]
    for dataset in dict.fromkeys(table["dataset"]):
        lines += [f"**{group_label(dataset)}**", "", selected_inputs_markdown(table, dataset)]
    return [*lines, "Numbers: [csv](tables/selected_inputs.csv)", ""]
