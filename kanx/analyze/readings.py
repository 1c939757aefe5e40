"""Two readings of the dynamical systems' multi-step test RMSE (Ikeda, Ecosystem).

The paper reports one multi-step RMSE per run without saying how long its free rollouts were;
kanx records the error over rollouts of 1, 2, 5, ..., 500 steps and the whole test segment
(`kanx.data.metrics`, the record's ``rollout_rmse``), so any reading comes from the same records.

- **The paper's reading** (`paper_readings`, package data ``paper/readings.csv``): the rung that
  reproduces the paper's Baseline and F rows, settled per dataset on those rows only
  (docs/CALIBRATION.md). The paper's tables use it, so they compare like with like.
- **kanx's reading**: the horizon each record was trained with (``dataset.horizon``: 10 steps on
  Ikeda, 50 on Ecosystem), the longest at which every Baseline seed stays well below the
  free-run saturation. Long rollouts of a chaotic map saturate near sqrt(2 var) whatever the
  model, so the paper's reading hides accuracy that a condition loses; this reading shows it.
  `short_reading_section` sets it beside the paper's in the report.

Either reading of a long rollout is a statistic of chaotic trajectories, so its last digits
depend on the CPU's arithmetic: `spread_note` says, under the paper's tables, how far the
Baseline's and F's seed-medians move across machines (package data ``paper/reading_spread.csv``,
measured by scripts/studies/reading_spread.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from .aggregate import log_ratio_summary, log_ratios, paired_panels, seed_medians
from .figures import log_ratio_figure
from .hypervolume import hv_table
from .labels import GATED, family_label, group_label, sort_datasets, sort_families
from .tables import (
    CSV_FLOAT,
    absolute_caption,
    absolute_csv,
    absolute_markdown,
    absolute_table,
    format_beta,
    markdown_table,
)

READINGS_FILE = Path(__file__).with_name("paper") / "readings.csv"
SPREAD_FILE = Path(__file__).with_name("paper") / "reading_spread.csv"  # scripts/studies/reading_spread.py --write

# A condition "loses accuracy the paper's number cannot show" when its mean log10 RMSE ratio to
# the Baseline is below -LOSS at kanx's reading (RMSE at least 26% above the Baseline's) while at
# the paper's reading it is within +-HIDDEN of 0 (within 12%).
LOSS, HIDDEN = 0.1, 0.05

SHORT_TEXT = """\
The paper's tables above read the multi-step test RMSE of Ikeda and Ecosystem at the paper's \
reading: long free rollouts, which on these systems approach the saturation of a free run \
(about sqrt(2 var) of the target), whatever the model. kanx's reading is the horizon each run \
was configured with (`dataset.horizon`), short enough that every Baseline seed stays well below \
saturation (docs/CALIBRATION.md); it is the better measure of a model. Same records, same runs: \
only the rung of the rollout curve differs (`python -m kanx.analyze ROOT --rollout-horizon recorded`)."""


def paper_readings() -> dict[str, int | str]:
    """Dataset -> the rollout horizon (steps, or "whole") at which the paper's multi-step RMSE is
    read, as settled on the Baseline and F rows (``paper/readings.csv``)."""
    table = pd.read_csv(READINGS_FILE, dtype={"rollout_horizon": str})
    return {str(d): (h if h == "whole" else int(h))
            for d, h in zip(table["dataset"], table["rollout_horizon"], strict=True)}


def reading_spreads() -> pd.DataFrame | None:
    """The measured spread of the dynamical readings across machines (``paper/reading_spread.csv``,
    scripts/studies/reading_spread.py): per dataset, condition (Baseline, F), estimator and rung,
    the native seed-median and the range of the seed-median under last-bit perturbations. None
    without the file."""
    if not SPREAD_FILE.is_file():
        return None
    return pd.read_csv(SPREAD_FILE, dtype={"rung": str, "seeds": str})


def _plus_minus(half: float) -> str:
    """±half to one significant digit, or "±<0.0001" below the tables' fourth decimal."""
    if half < 0.00005:
        return "±<0.0001"
    rounded = float(f"{half:.1g}")
    return f"±{rounded:.{max(0, -math.floor(math.log10(rounded)))}f}"


def spread_note(dataset: str, horizon) -> str | None:
    """A sentence for a table of ``dataset``'s RMSE read at ``horizon`` (steps or "whole"): how far
    the Baseline's and F's seed-medians move across machines (half the measured range, tiling
    estimator), so a reader knows which digits are the CPU's. None where nothing was measured."""
    spreads = reading_spreads()
    if spreads is None or horizon is None:
        return None
    mine = (spreads["dataset"] == dataset) & (spreads["estimator"] == "tiling") & (spreads["rung"] == str(horizon))
    if not mine.any():
        return None
    each = ", ".join(f"{r.condition} {_plus_minus(r.spread / 2)}" for r in spreads[mine].itertuples())
    return (f"Across CPUs: this RMSE ({horizon_label(horizon)}) comes from chaotic rollouts, and its seed-median moves "
            f"with the last bits of the arithmetic by {each} (measured on the committed runs: docs/CALIBRATION.md, "
            "\"The reading's spread across machines\"); digits below that are the CPU's, not the model's.")


def horizon_label(horizon) -> str:
    if horizon is None:
        return "as recorded"
    return "one rollout over the whole test segment" if horizon == "whole" else f"rollouts of {horizon} steps"


def _ratio_rows(paper: pd.DataFrame, short: pd.DataFrame) -> pd.DataFrame:
    """Per (family, condition, beta) of kanx's reading, in its order: the mean log10 RMSE ratio to
    the Baseline at both readings (the paper's: NaN where its records lack that rung)."""
    keys = ["panel", "condition", "beta"]
    both = short[[*keys, "mean", "sem", "n_pairs"]].merge(paper[[*keys, "mean", "sem", "n_pairs"]], on=keys, how="left",
                                                          suffixes=("_short", "_paper"))
    return both.reset_index(drop=True)


def hidden_losses(rows: pd.DataFrame) -> pd.DataFrame:
    """The (family, condition, beta) cells that lose accuracy at kanx's reading that the paper's
    reading does not show (see LOSS, HIDDEN)."""
    hidden = (rows["mean_short"] < -LOSS) & (rows["mean_paper"].abs() <= HIDDEN)
    return rows[hidden.fillna(False)]


def _fmt(mean: float, sem: float) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    err = "" if sem is None or math.isnan(sem) else f" ± {sem:.3f}"
    return f"{mean:+.3f}{err}".replace("-0.000", "+0.000")


def short_reading_section(paper_runs: pd.DataFrame, short_runs: pd.DataFrame, formats: Sequence[str],
                          texts: dict, figures: dict,
                          figure_lines: Callable[..., list[str]], links: Callable[..., str]) -> list[str]:
    """The report section of kanx's reading (``short_runs``: the dynamical records read as
    recorded) beside the paper's (``paper_runs``): absolute tables, the HV column, the log-ratio
    panel, and which conditions lose accuracy that the paper's reading hides. Writes into
    ``texts`` and ``figures``; returns the report's lines (none without dynamical records)."""
    short_runs = short_runs[~short_runs["superseded"]] if "superseded" in short_runs else short_runs
    if short_runs.empty:
        return []
    medians = seed_medians(short_runs)
    datasets = sort_datasets(medians["dataset"])
    families = sort_families(medians["family"])
    lines = ["## kanx's reading of the dynamical systems: short rollouts", "", SHORT_TEXT, ""]

    # The HV column: both readings side by side, per family.
    mine = paper_runs[paper_runs["family"].isin(families)]
    hv_paper, hv_short = hv_table(seed_medians(mine)) if len(mine) else None, hv_table(medians)
    columns = {f"{f}_{r}": (f, table) for f in families for r, table in (("paper", hv_paper), ("kanx", hv_short))}
    gated = [c for c in GATED if any(table is not None and c in table.index for table in (hv_paper, hv_short))]
    both = pd.DataFrame({name: [math.nan if table is None or f not in table or c not in table.index
                                else float(table.loc[c, f]) for c in gated]
                         for name, (f, table) in columns.items()}, index=pd.Index(gated, name="condition"))
    rows = [[c, *("–" if math.isnan(v) else f"{v:.3f}" for v in both.loc[c])] for c in gated]
    header = ["Condition", *(f"{family_label(f)}: {r}" for f in families
                             for r in ("paper's reading", "kanx's reading"))]
    texts["tables/short/hypervolume.md"] = markdown_table(header, rows, "l" + "r" * (2 * len(families)))
    texts["tables/short/hypervolume.csv"] = both.to_csv(float_format=CSV_FLOAT, lineterminator="\n")
    lines += ["Normalized hypervolume at both readings (each normalized by the best condition of its own reading):", "",
              texts["tables/short/hypervolume.md"], links("tables/short/hypervolume", ("md", "csv")), ""]

    # The log-ratio panel and what the paper's reading hides.
    split = {m: log_ratio_summary(log_ratios(short_runs, m), by="family") for m in ("test_rmse", "contributing_edges")}
    paper_rmse = (log_ratio_summary(log_ratios(mine, "test_rmse"), by="family") if len(mine)
                  else split["test_rmse"].iloc[0:0])
    stem = "figures/short/log_ratios"
    panels = paired_panels(split, families)
    if panels:
        figures[stem] = log_ratio_figure(split["test_rmse"], split["contributing_edges"], panels, family_label,
                                         max_cols=len(panels), title="kanx's reading (short rollouts)",
                                         conditions=medians["condition"])
    both = _ratio_rows(paper_rmse, split["test_rmse"])
    texts["tables/short/log_ratios.csv"] = both.to_csv(index=False, float_format=CSV_FLOAT, lineterminator="\n")
    table = [[family_label(r.panel), r.condition, format_beta(r.beta), _fmt(r.mean_paper, r.sem_paper),
              _fmt(r.mean_short, r.sem_short)]
             for r in both.itertuples(index=False)]
    texts["tables/short/log_ratios.md"] = markdown_table(
        ["Family", "Cond.", "β", "log10 RMSE ratio, paper's reading", "log10 RMSE ratio, kanx's reading"], table,
        "lllrr")
    lines += ["Log-ratios to the Baseline at kanx's reading (as in the section on accuracy and size above; edges do "
              "not depend on the reading):", "",
              *(figure_lines(stem,
                             "Log-ratios of test RMSE (A) and contributing edges (B) vs. baseline, kanx's reading",
                             formats, links("tables/short/log_ratios", ("md", "csv"))) if panels else
                ["No figure: no condition has a Baseline run of the same seed to pair with.", ""]),
              "The RMSE log-ratio at both readings (mean ± SEM over seed "
              "pairs; negative: higher RMSE than the Baseline):", "",
              texts["tables/short/log_ratios.md"], ""]
    hidden = hidden_losses(both)
    if hidden.empty:
        lines += [f"No cell loses accuracy at kanx's reading (log10 ratio below −{LOSS}) while the paper's reading "
                  f"shows it within ±{HIDDEN} of the Baseline.", ""]
    else:
        cells = "; ".join(f"{family_label(r.panel)} {r.condition} β = {format_beta(r.beta)} ({r.mean_short:+.2f} vs "
                          f"{r.mean_paper:+.2f})"
                          for r in hidden.itertuples(index=False))
        lines += [f"**What the paper's reading hides**: {len(hidden)} "
                  f"{'cells lose' if len(hidden) > 1 else 'cell loses'} accuracy at kanx's reading (log10 RMSE ratio "
                  f"below −{LOSS}, an RMSE at least {10 ** LOSS - 1:.0%} above the Baseline's) while the paper's "
                  f"reading puts {'them' if len(hidden) > 1 else 'it'} within ±{HIDDEN} of the Baseline: {cells}.", ""]

    # The absolute tables at kanx's reading.
    for dataset in datasets:
        table = absolute_table(medians, dataset)
        stem = f"tables/short/absolute_{dataset}"
        caption, markdown = absolute_caption(table, dataset), absolute_markdown(table)
        texts[f"{stem}.md"] = f"{caption}\n\n{markdown}"
        texts[f"{stem}.csv"] = absolute_csv(table)
        lines += [f"### {group_label(dataset)}, kanx's reading", "", caption, "", markdown, links(stem, ("md", "csv")),
                  ""]
    return lines
