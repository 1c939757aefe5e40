"""Which rung of the rollout ladder is the paper's multi-step RMSE? Settled on the Baseline and
F rows only (the calibration rule: gated rows are for checking, never for choosing).

For each dynamical dataset, reads the Baseline and F records (beta 0) under RESULTS that hold
the rollout ladder (metrics.rollout_rmse: RMSE over rollouts of h steps tiling the test
segment, and the whole segment), takes each condition's median over seeds at every rung, and
sets it beside the paper's median [min, max] (kanx/analyze/paper/<dataset>_published.csv):
inside the range at the paper's printed precision or not, and log10(reproduced / published
median). The rung to take has the most rows inside their ranges, then the smallest summed
|log ratio| (a row that misses its range at every rung, as a condition kanx trains better
than the paper did, so weighs only through its distance). Prints markdown; writes nothing.

    python scripts/studies/settle_rollout.py [RESULTS] [--datasets ikeda ecosystem]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # kanx from this checkout

from kanx.analyze.published import paper_published  # noqa: E402
from kanx.vocab import RECORD_ROLLOUT  # noqa: E402

ROWS = ("Baseline", "F")


def ladders(results: Path, dataset: str, condition: str) -> list[dict[str, float]]:
    """The rollout ladders of a condition's finished beta-0 records (one per seed)."""
    out = []
    for path in sorted((results / dataset / condition).glob("*/*/record.json")):
        record = json.loads(path.read_text())
        curve = (record.get("metrics") or {}).get(RECORD_ROLLOUT)
        if record.get("status") == "ok" and curve:
            out.append({("whole" if int(h) == record["n_test"] else h): v for h, v in curve.items()})
    return out


def inside(value: float, low: float, high: float, decimals: int) -> bool:
    return round(low, decimals) <= round(value, decimals) <= round(high, decimals)


def settle(results: Path, dataset: str) -> str | None:
    published = paper_published(dataset)
    if published is None:
        print(f"{dataset}: the paper has no table for it")
        return None
    decimals = published.attrs["decimals"]["rmse_median"]
    curves = {c: ladders(results, dataset, c) for c in ROWS}
    if not all(curves.values()):
        print(f"{dataset}: no Baseline or F record with the rollout ladder under {results}")
        return None
    rungs = [h for h in curves[ROWS[0]][0] if all(h in ladder for c in ROWS for ladder in curves[c])]
    print(f"\n### {dataset}: Baseline and F (beta 0), seeds {', '.join(str(len(curves[c])) for c in ROWS)} per row\n")
    print("| rung (steps) | " + " | ".join(f"{c} median | {c} published | in range" for c in ROWS) + " | sum abs log10 ratio |")
    print("|---|" + "---|---|---|" * len(ROWS) + "---|")
    scored = []
    for h in rungs:
        cells, in_range, distance = [], 0, 0.0
        for c in ROWS:
            median = statistics.median(ladder[h] for ladder in curves[c])
            row = published[published["condition"] == c].iloc[0]
            ok = inside(median, row["rmse_min"], row["rmse_max"], decimals)
            in_range += ok
            distance += abs(math.log10(median / row["rmse_median"]))
            spread = f"[{row['rmse_min']:.{decimals}f}, {row['rmse_max']:.{decimals}f}]"
            cells.append(f"{median:.{decimals}f} | {row['rmse_median']:.{decimals}f} {spread} | {'yes' if ok else 'no'}")
        scored.append((-in_range, distance, h))
        print(f"| {h} | " + " | ".join(cells) + f" | {distance:.3f} |")
    rows_in, _, best = min(scored)
    print(f"\n{dataset}: the paper's reading is the rung **{best}** ({-rows_in} of {len(ROWS)} rows in range there)")
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="?", default="results/paper", type=Path)
    ap.add_argument("--datasets", nargs="+", default=["ikeda", "ecosystem"])
    a = ap.parse_args(argv)
    settled = [settle(a.results, d) for d in a.datasets]
    return 0 if all(settled) else 1


if __name__ == "__main__":
    sys.exit(main())
