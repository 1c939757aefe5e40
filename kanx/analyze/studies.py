"""Studies beyond the paper (issue #38): runs of other factor sets (input gates I, node gates N)
under a study's own results root, read beside the paper's factorial of the same datasets.

The paper's records give the comparison condition (EFX) and the scale of the hypervolume: the
reference point and the best gated HV of a dataset are those of the paper's eight conditions
(kanx.analyze.hypervolume), so a study condition's normalized HV reads on the report's scale,
above 1 where it beats every gated condition of the paper. Dynamical systems are read at the
paper's rollout horizon (kanx/analyze/paper/readings.csv), as in the report.

    runs = runs_beside_paper(study_root, paper_root, datasets)
    text = cells_markdown(runs, dataset, ("EFX", "EFXN"), extra={"units": per_run_units})

Torch-free: what needs a model (hidden units kept, read from model.pt) comes in as ``extra``,
a value per run path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .aggregate import seed_medians
from .collect import active_runs, load_runs, shared
from .hypervolume import condition_hypervolumes
from .labels import CONDITIONS, condition_rank, dataset_rank
from .readings import paper_readings
from .tables import DASH_MD, format_beta, format_count, format_number, markdown_table, rmse_decimals

STUDY_TABLE = "study.md"  # a study root's tables, as its script's `table` last wrote them


def write_study_table(root: str | Path, text: str) -> Path:
    """Write a study's tables to ROOT/study.md (creating ROOT), so the committed study carries the
    tables its records give; returns the path. Raises StorageError."""
    from kanx.atomic import cannot_write

    path = Path(root) / STUDY_TABLE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    except OSError as e:
        raise cannot_write(path, e) from e
    return path


def runs_beside_paper(study_root: str | Path, paper_root: str | Path, datasets: Iterable[str]) -> pd.DataFrame:
    """The study's records of ``datasets`` (any condition) and the paper's (its eight conditions
    only, so a study condition comes from the study's root alone), one run table as load_runs
    gives it. A (dataset, condition) the study's root holds replaces the paper's: a study may
    retrain a paper condition (with its weights, say). ``path`` is each record's path with its
    root in front, so a run's folder is ``Path(path).parent`` and the two roots' records never
    share a key."""
    datasets, horizons = list(datasets), paper_readings()
    study = load_runs(Path(study_root), rollout_horizon=horizons, datasets=datasets)
    retrained = set(zip(study["dataset"], study["condition"], strict=True))
    paper = load_runs(Path(paper_root), rollout_horizon=horizons, datasets=datasets)
    kept = [c in CONDITIONS and (d, c) not in retrained
            for d, c in zip(paper["dataset"], paper["condition"], strict=True)]
    paper = paper[np.asarray(kept, dtype=bool)]
    parts, launched, skipped = [], set(), []
    selected: dict[str, tuple[str, ...]] = {}
    for root, runs in ((Path(paper_root), paper), (Path(study_root), study)):
        parts.append(runs.assign(path=[(root / p).as_posix() for p in runs["path"]]))
        selected |= {(root / p).as_posix(): names for p, names in runs.attrs.get("selected_inputs", {}).items()}
        skipped += [((root / p).as_posix(), why) for p, why in runs.attrs.get("skipped", [])]
    launched = ({c for c in paper.attrs.get("launched", ()) if c[1] in CONDITIONS and c[:2] not in retrained}
                | set(study.attrs.get("launched", ())))
    runs = pd.concat(parts, ignore_index=True) if any(len(p) for p in parts) else parts[0]
    runs.attrs.update({key: shared(value) for key, value in (
        ("selected_inputs", selected), ("launched", tuple(sorted(launched))), ("skipped", sorted(skipped)),
        ("rollout_horizon", horizons))})
    return runs


def normalized_hv(runs: pd.DataFrame, conditions: Sequence[str]) -> pd.DataFrame:
    """Normalized HV per dataset (rows) and condition (columns, ``conditions``), on the paper's
    scale (module docstring); NaN where a condition has no cell with a usable run."""
    medians = seed_medians(runs, complete=False)
    detail = condition_hypervolumes(medians)
    table = detail.pivot(index="dataset", columns="condition", values="hv_norm")
    table = table.reindex(index=sorted(table.index, key=dataset_rank), columns=list(conditions))
    return table


def hv_markdown(runs: pd.DataFrame, conditions: Sequence[str]) -> str:
    """normalized_hv as a markdown table: a row per dataset, a column per condition."""
    table = normalized_hv(runs, conditions)
    rows = [[dataset, *(DASH_MD if pd.isna(v) else f"{v:.3f}" for v in table.loc[dataset])] for dataset in table.index]
    return markdown_table(["Dataset", *conditions], rows, "l" + "r" * len(conditions))


def per_cell_medians(runs: pd.DataFrame, values: Mapping[str, float]) -> pd.Series:
    """The median over a cell's usable runs of a value given per run path (e.g. hidden units
    kept), indexed by (dataset, condition, beta); runs without a value are left out."""
    act = active_runs(runs)
    act = act[act["usable"] & act["path"].isin(list(values))]
    return act.assign(_v=act["path"].map(values).astype(float)).groupby(["dataset", "condition", "beta"])["_v"].median()


def cells_markdown(runs: pd.DataFrame, dataset: str, conditions: Sequence[str],
                   extra: Mapping[str, Mapping[str, float]] | None = None) -> str:
    """One dataset's cells of ``conditions``: usable runs / runs, the seed-medians of test RMSE,
    contributing edges and depth, and the medians of each ``extra`` column (name -> value per run
    path; a dash where no run of the cell has one)."""
    medians = seed_medians(runs[runs["dataset"] == dataset], complete=False)
    medians = medians[medians["condition"].isin(conditions)]
    if medians.empty:
        return f"No finished run of {' or '.join(conditions)}.\n"
    medians = medians.assign(_c=medians["condition"].map(condition_rank)).sort_values(["_c", "beta"], kind="stable")
    more_medians = [per_cell_medians(runs, values) for values in (extra or {}).values()]
    decimals = rmse_decimals(medians["rmse_median"])
    rows = []
    for _, cell in medians.iterrows():
        key = (dataset, cell["condition"], cell["beta"])
        more = [format_count(float(s[key])) if key in s.index else DASH_MD for s in more_medians]
        rows.append([cell["condition"], format_beta(cell["beta"]), f"{cell['n_used']}/{cell['n_total']}",
                     format_number(cell["rmse_median"], decimals),
                     format_count(cell["edges_median"]), format_count(cell["depth_median"]), *more])
    header = ["Cond.", "β", "runs", "test RMSE", "edges", "depth", *(extra or {})]
    return markdown_table(header, rows, "llr" + "r" * (len(header) - 3))
