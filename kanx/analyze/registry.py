"""Fixed vocabularies of the analysis: conditions, datasets, display names, run statuses.

Every table and figure takes its row and column order from here, never from the order
in which records happen to be found on disk.
"""

from __future__ import annotations

import re

# The paper's row order (2x2x2 factorial; Baseline = no egates, no FCs, no xgates).
CONDITIONS: tuple[str, ...] = ("Baseline", "F", "X", "FX", "E", "EF", "EX", "EFX")
# Conditions without a gate, hence without a beta sweep: one cell at beta = 0, no hypervolume.
UNGATED: tuple[str, ...] = ("Baseline", "F")
GATED: tuple[str, ...] = tuple(c for c in CONDITIONS if c not in UNGATED)
BASELINE = "Baseline"

# Dataset registry order; a Nguyen problem is its own table, the family is one panel/column.
NGUYEN_PROBLEMS: tuple[str, ...] = tuple(f"nguyen_f{k}" for k in range(1, 11))
DATASETS: tuple[str, ...] = (
    "sin_xy2",
    *NGUYEN_PROBLEMS,
    "ikeda",
    "ecosystem",
    "concrete",
    "superconductor",
    "csv",
)
FAMILIES: tuple[str, ...] = (
    "sin_xy2",
    "nguyen",
    "ikeda",
    "ecosystem",
    "concrete",
    "superconductor",
    "csv",
)
DYNAMICAL: tuple[str, ...] = ("ikeda", "ecosystem")

FAMILY_NAMES: dict[str, str] = {
    "sin_xy2": "sin(x+y²)",
    "nguyen": "Nguyen",
    "ikeda": "Ikeda",
    "ecosystem": "Ecosystem",
    "concrete": "Concrete",
    "superconductor": "Supercond.",
    "csv": "CSV",
}
FAMILY_NAMES_LATEX: dict[str, str] = {**FAMILY_NAMES, "sin_xy2": r"$\sin(x+y^2)$"}

# Run statuses written by the runner, and which of them enter medians and log-ratios.
STATUSES: tuple[str, ...] = ("ok", "collapsed", "diverged", "failed")
# A collapsed model (no contributing edge left) is a real, if constant, predictor with 0 edges
# and depth 0, so it counts. Diverged and failed runs have no trustworthy metrics: they are
# kept in the run table and counted in every cell, but left out of medians and log-ratios.
USABLE_STATUSES: tuple[str, ...] = ("ok", "collapsed")

_NGUYEN = re.compile(r"nguyen_f(\d+)$")


def family_of(dataset: str) -> str:
    """`nguyen` for the Nguyen problems, else the dataset name."""
    return "nguyen" if _NGUYEN.match(dataset) else dataset


def group_label(group: str) -> str:
    """Display name of a table group: a dataset, or a single Nguyen problem ("Nguyen F3")."""
    m = _NGUYEN.match(group)
    if m:
        return f"Nguyen F{m.group(1)}"
    return FAMILY_NAMES.get(group, group)


def problem_label(group: str) -> str:
    """Short label of a Nguyen problem ("F3"); other groups keep their display name."""
    m = _NGUYEN.match(group)
    return f"F{m.group(1)}" if m else group_label(group)


def family_label(family: str, latex: bool = False) -> str:
    names = FAMILY_NAMES_LATEX if latex else FAMILY_NAMES
    return names.get(family, family)


def dataset_rank(name: str) -> tuple[int, int, str]:
    """Sort key for datasets or groups: registry order, unknown names last and alphabetical.

    Nguyen problems sort by number (F2 before F10), also past F10.
    """
    m = _NGUYEN.match(name)
    if m:
        return (1, int(m.group(1)), name)
    if name in DATASETS:
        return (DATASETS.index(name) + 100, 0, name)
    return (1000, 0, name)


def family_rank(name: str) -> tuple[int, str]:
    return (FAMILIES.index(name), name) if name in FAMILIES else (len(FAMILIES), name)


def sort_datasets(names) -> list[str]:
    return sorted(set(names), key=dataset_rank)


def sort_families(names) -> list[str]:
    return sorted(set(names), key=family_rank)
