"""Fixed vocabularies of the analysis: conditions, datasets, display names, run statuses.

Every table and figure takes its row and column order from here, never from the order
in which records happen to be found on disk.
"""

from __future__ import annotations

import re

# The shared names (one owner, kanx.vocab); a Nguyen problem is its own table, the family is
# one panel/column. Ungated conditions have one cell at beta = 0 and no hypervolume.
from kanx.vocab import (  # noqa: F401  (re-exported for the analysis modules)
    BASELINE,
    CONDITIONS,
    DATASETS,
    DYNAMICAL,
    FAMILIES,
    GATED,
    NGUYEN_PROBLEMS,
    STATUSES,
    UNGATED,
    USABLE_STATUSES,
    all_conditions,
    family_of,
)

# Every condition the analysis reads, in its canonical order (kanx.vocab.all_conditions): the
# paper's eight in its row order, then the factor sets with N or I (issue #38) by size, then in
# the order of kanx.vocab.FACTORS (I, N, EI, EN, FI, ..., EFXNI). Tables and figures list the
# paper's eight as before and after them the other conditions that have records (or were
# launched); a root with the paper's eight only reads exactly as before. Every other factor set
# is gated (beta acts on its N or I gates): UNGATED stays Baseline and F.
ALL_CONDITIONS: tuple[str, ...] = all_conditions()
OTHER_CONDITIONS: tuple[str, ...] = ALL_CONDITIONS[len(CONDITIONS):]


def condition_rank(condition: str) -> int:
    """Sort key of a condition: its place in ALL_CONDITIONS."""
    return ALL_CONDITIONS.index(condition)


def with_others(present) -> list[str]:
    """The paper's eight conditions, then the other conditions among ``present``, in canonical order."""
    present = set(present)
    return [*CONDITIONS, *(c for c in OTHER_CONDITIONS if c in present)]


def present_conditions(present) -> list[str]:
    """The conditions among ``present`` in canonical order (ALL_CONDITIONS): what a table or figure lists
    of a root's seed-medians, which hold the cells the records or manifests name (aggregate.expected_grid),
    so a sweep of two conditions shows two, not the paper's eight with six of them empty."""
    present = set(present)
    return [c for c in ALL_CONDITIONS if c in present]


def is_gated(condition: str) -> bool:
    """Whether beta acts on ``condition`` (all but Baseline and F): it has a beta sweep and an HV."""
    return condition not in UNGATED

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

_NGUYEN = re.compile(r"nguyen_f(\d+)$")


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


_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                   "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """Plain text as LaTeX source: a user's dataset name such as my_data must not break \\input."""
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in text)


def family_label(family: str, latex: bool = False) -> str:
    """Display name of a family (or a dataset of one's own); in LaTeX, written LaTeX for the
    shipped families and escaped text for any other."""
    if latex:
        return FAMILY_NAMES_LATEX.get(family) or latex_escape(FAMILY_NAMES.get(family, family))
    return FAMILY_NAMES.get(family, family)


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
