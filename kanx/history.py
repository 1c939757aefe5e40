"""A run's training curve (metrics.csv, written by kanx.curves) read back: checked against the
run's done marker, parsed, and refused with one error that names the file and what is wrong.

Torch-free, so the analysis (``--curves``) and kanx.load_run(...).history read curves alike. A
finished run's done marker holds the curve's sha256 (kanx.records.seal); a marker written before
kanx checksummed curves does not list it, and its curve is read unchecked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from kanx.hashing import sha256_of
from kanx.records import atomic_write_bytes, integrity_problem
from kanx.vocab import DONE, METRICS


class CurveError(ValueError):
    """A metrics.csv that cannot be used: changed or cut short since its run sealed it, or not a
    table of numbers with an epoch column. The message names the file."""


def read_history(run_dir: str | Path):
    """A run's metrics.csv as a pandas DataFrame (a row per logged epoch), None if the run has
    none; CurveError if it is there but unusable."""
    import pandas as pd

    run_dir = Path(run_dir)
    path = run_dir / METRICS
    if not path.is_file():
        return None
    problem = integrity_problem(run_dir, files=(METRICS,))
    if problem is not None:
        raise CurveError(problem)
    try:
        history = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CurveError(f"{path} is not a training curve kanx writes (a CSV table of numbers): {type(e).__name__}: {reason}") from None
    if "epoch" not in history.columns:
        raise CurveError(f"{path} is not a training curve kanx writes: it has no epoch column (columns: {', '.join(map(str, history.columns[:8]))})")
    text = [str(c) for c in history.columns if not pd.api.types.is_numeric_dtype(history[c])]
    if text:
        raise CurveError(f"{path} is not a training curve kanx writes: column {text[0]} holds text where numbers belong")
    return history


def vouch_for_rewritten_curve(run_dir: str | Path, was: Iterable[str]) -> bool:
    """After kanx rewrote a finished run's metrics.csv on purpose (kanx.curves.splice: the same
    run's rows from two stretches of its training), make its done marker vouch for the result,
    where the marker vouched for one of the curves it was made from (``was``: their sha256). A
    marker that vouched for another file, or for no curve, is left as it is. Returns whether it
    changed the marker."""
    marker = Path(run_dir) / DONE
    try:
        done = json.loads(marker.read_text())
        sums = done["sha256"]
        vouched = sums[METRICS]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if vouched not in set(was):
        return False
    sums[METRICS] = sha256_of(Path(run_dir) / METRICS)
    atomic_write_bytes(marker, json.dumps(done).encode())
    return True
