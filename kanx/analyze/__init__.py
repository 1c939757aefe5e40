"""Analysis of run records: tables, log-ratio figures, Pareto hypervolume and a report.

Reads only ``record.json`` files (never directory names, never the model); pure functions
over one tidy DataFrame of runs. ``python -m kanx.analyze RESULTS_ROOT`` writes the files.
"""

from .aggregate import expected_grid, log_ratio_summary, log_ratios, missing_cells, seed_medians
from .collect import load_runs
from .figures import log_ratio_figure
from .hypervolume import (
    condition_hypervolumes,
    hv_problem_table,
    hv_table,
    hypervolume,
    pareto_front,
)
from .published import (
    compare_hv,
    compare_published,
    hv_from_published,
    read_published,
    read_published_hv,
)
from .report import build_artifacts
from .tables import absolute_table

__all__ = [
    "absolute_table",
    "build_artifacts",
    "compare_hv",
    "compare_published",
    "condition_hypervolumes",
    "expected_grid",
    "hv_from_published",
    "hv_problem_table",
    "hv_table",
    "hypervolume",
    "load_runs",
    "log_ratio_figure",
    "log_ratio_summary",
    "log_ratios",
    "missing_cells",
    "pareto_front",
    "read_published",
    "read_published_hv",
    "seed_medians",
]
