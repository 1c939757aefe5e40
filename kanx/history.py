"""A run's training curve (metrics.csv, written by kanx.curves; metrics.csv.gz once the run
finished, kanx.records.curve_path finds either) read back: checked against the run's done
marker, parsed, and refused with one error that names the file and what is wrong.

Torch-free, so the analysis (``--curves``) and kanx.load_run(...).history read curves alike. A
finished run's done marker holds the curve's sha256 (kanx.records.seal); a marker written before
kanx checksummed curves does not list it, and its curve is read unchecked.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from pathlib import Path

from kanx.hashing import sha256_of
from kanx.records import atomic_write_bytes, curve_path, integrity_problem
from kanx.vocab import CURVES, DONE

__all__ = ["CurveError", "curve_path", "read_history", "vouch_for_rewritten_curve"]


class CurveError(ValueError):
    """A curve (metrics.csv or .gz) that cannot be used: changed or cut short since its run sealed it, or not a
    table of numbers with an epoch column. The message names the file."""


def read_history(run_dir: str | Path):
    """A run's training curve (metrics.csv, or metrics.csv.gz) as a pandas DataFrame (a row per
    logged epoch), None if the run has none; CurveError if it is there but unusable."""
    import pandas as pd

    run_dir = Path(run_dir)
    path = curve_path(run_dir)
    if path is None:
        return None
    problem = integrity_problem(run_dir, files=CURVES)
    if problem is not None:
        raise CurveError(problem)
    try:
        history = pd.read_csv(path, compression="gzip" if path.suffix == ".gz" else None)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError, EOFError, zlib.error) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CurveError(f"{path} is not a training curve kanx writes (a CSV table "
                         f"of numbers): {type(e).__name__}: {reason}") from None
    if "epoch" not in history.columns:
        raise CurveError(f"{path} is not a training curve kanx writes: it has no epoch column (columns: "
                         f"{', '.join(map(str, history.columns[:8]))})")
    text = [str(c) for c in history.columns if not pd.api.types.is_numeric_dtype(history[c])]
    if text:
        raise CurveError(f"{path} is not a training curve kanx writes: "
                         f"column {text[0]} holds text where numbers belong")
    return history


def vouch_for_rewritten_curve(run_dir: str | Path, was: Iterable[str]) -> bool:
    """After kanx rewrote a finished run's curve on purpose (scripts/offline_gpu/curves.py: the same run's
    rows from two stretches of its training), make its done marker vouch for the result (the
    run's curve now, plain or .gz, curve_path), where the marker vouched for one of the curves it
    was made from (``was``: their sha256). A marker that vouched for another file, or for no
    curve, is left as it is. Returns whether it changed the marker."""
    marker = Path(run_dir) / DONE
    now = curve_path(Path(run_dir))
    try:
        done = json.loads(marker.read_text())
        sums = done["sha256"]
        vouched = [name for name in CURVES if name in sums]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if now is None or not vouched or not {sums[name] for name in vouched} & set(was):
        return False
    for name in vouched:
        del sums[name]
    sums[now.name] = sha256_of(now)
    atomic_write_bytes(marker, json.dumps(done).encode())
    return True
