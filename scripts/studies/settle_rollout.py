"""Which rung of the rollout ladder is the paper's multi-step RMSE? Settled on the Baseline and
F rows only (the calibration rule: gated rows are for checking, never for choosing), by
kanx.analyze.settle (the rule is in its docstring): prints the evidence as markdown and, with
--write, writes it into kanx/analyze/paper/readings.csv (the rung, the seeds and the evidence of
each dataset), the file the report's paper reading comes from. tests/test_readings.py fails when
the committed records settle elsewhere than that file says.

    python scripts/studies/settle_rollout.py [RESULTS] [--datasets ikeda ecosystem] [--write]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kanx.analyze.readings import READINGS_FILE
from kanx.analyze.settle import DATASETS, settle_records, settled_markdown, write_readings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="?", default="results/paper", type=Path)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    ap.add_argument("--write", action="store_true", help=f"write the settled rungs into {READINGS_FILE}")
    a = ap.parse_args(argv)
    if not a.results.is_dir():
        ap.error(f"{a.results} is not a folder: give a results root holding ikeda/ and ecosystem/ (e.g. results/paper)")
    if a.write and set(a.datasets) != set(DATASETS):
        ap.error(f"--write writes every dataset's reading: leave out --datasets (or give {' '.join(DATASETS)})")
    try:
        settled = [settle_records(a.results, d) for d in a.datasets]
    except ValueError as e:
        print(f"settle_rollout.py: {e}", file=sys.stderr)
        return 1
    for s in settled:
        print(f"\n{settled_markdown(s)}")
    if a.write:
        print(f"\nwrote {write_readings(settled)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
