"""Tables a user hands to a trained run: a pandas DataFrame is read by its column names.

A NumPy array, a tensor or a list is positional: its columns are the run's inputs in the run's
order. A DataFrame names its columns, so its order is not trusted: the columns are selected by
the run's input names, and a column that is missing, extra or repeated is refused. Matching by
position would give other predictions for a frame with columns (y, x) than for (x, y),
silently. A Series is one sample, read by its index labels as a DataFrame's row would be.
pandas is not imported here: an object can only be a DataFrame if pandas is already loaded.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np


def is_frame(x) -> bool:
    """x is a pandas DataFrame."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(x, pd.DataFrame)


def _is_series(x) -> bool:
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(x, pd.Series)


def _listed(labels) -> str:
    return ", ".join(map(str, labels))


def _mismatch(labels: Sequence, names: Sequence[str]) -> str:
    """What keeps `labels` from being exactly `names` in some order; '' when nothing does."""
    missing = [n for n in names if n not in labels]
    extra = [c for c in labels if c not in names]
    repeated = sorted({str(c) for c in labels if list(labels).count(c) > 1})
    found = {"missing": missing, "extra": extra, "repeated": repeated}
    return "; ".join(f"{word} {_listed(labels)}" for word, labels in found.items() if labels)


def by_name(x, names: Sequence[str], what: str, of: str = "inputs"):
    """x's values with a DataFrame's columns (a Series' index labels) taken in the order
    `names`, as float64 NumPy: (N, len(names)) for a DataFrame, (len(names),) for a Series.
    Anything else is returned as it is (positional). Raises a one-line ValueError, beginning
    with `what`, for a missing, extra or repeated name, or when `names` is empty."""
    series = _is_series(x)
    if not (series or is_frame(x)):
        return x
    kind, axis = ("Series", "index labels") if series else ("DataFrame", "columns")
    labels = list(x.index if series else x.columns)
    if not names:
        raise ValueError(f"{what}: the run names no {of}, so a {kind}'s {axis} ({_listed(labels)}) cannot be matched "
                         "to them; pass a NumPy array with the columns in the training order")
    wrong = _mismatch(labels, names)
    if wrong:
        raise ValueError(f"{what}: the {kind}'s {axis} ({_listed(labels)}) must be the run's {of} ({_listed(names)}), "
                         f"in any order; {wrong}")
    return np.array(x[list(names)] if series else x.loc[:, list(names)], dtype=np.float64, order="C")  # a writable copy
