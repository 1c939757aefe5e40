"""Which rung of the rollout ladder is the paper's multi-step RMSE of a dynamical system, settled
on the Baseline and F rows only (the calibration rule: gated rows are for checking, never for
choosing), and the package data file that holds the answer (``paper/readings.csv``).

For each dataset: the Baseline and F records (beta 0) with the rollout ladder
(metrics.rollout_rmse: RMSE over rollouts of h steps tiling the test segment, and the whole
segment), each condition's median over seeds at every rung, beside the paper's median
[min, max]: inside the range at the paper's printed precision or not, and log10(reproduced /
published median). The rung to take has the most rows inside their ranges, then the smallest
summed |log10 ratio| (a row that misses its range at every rung, as a condition kanx trains
better than the paper did, weighs only through its distance).

`scripts/studies/settle_rollout.py` prints the evidence and, with --write, writes readings.csv
from it; tests/test_readings.py fails when the committed records settle elsewhere than the
file says. Only record.json of the Baseline and F runs is read.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kanx.record import Record
from kanx.records import DONE, RECORD
from kanx.vocab import RECORD_ROLLOUT

from .published import paper_published
from .readings import READINGS_FILE

ROWS = ("Baseline", "F")
DATASETS = ("ikeda", "ecosystem")  # the dynamical systems, whose RMSE is read off the ladder
RULE = "most rows in the published range, then the smallest summed |log10 ratio|"

Ladder = Mapping[str, float]  # rung ("1", ..., "500", "whole") -> RMSE


@dataclass
class RungScore:
    """One rung: per row its seed-median and whether it is inside the published range."""

    rung: str
    medians: dict[str, float]
    inside: dict[str, bool]
    distance: float  # summed |log10(median / published median)| over the rows

    @property
    def rows_in(self) -> int:
        return sum(self.inside.values())


@dataclass
class Settled:
    """A dataset's settled reading and the table it was settled from."""

    dataset: str
    rung: str
    scores: list[RungScore]
    seeds: dict[str, list[int]]  # row -> the seeds its medians are over
    published: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # row -> (median, min, max)
    decimals: int = 4

    @property
    def best(self) -> RungScore:
        return next(s for s in self.scores if s.rung == self.rung)

    @property
    def horizon(self) -> int | str:
        """The rung as paper_readings gives it: steps, or "whole"."""
        return self.rung if self.rung == "whole" else int(self.rung)


def record_ladders(results: Path, dataset: str, condition: str) -> dict[int, dict[str, float]]:
    """Seed -> rollout ladder of a condition's finished ok records under ``results`` (a rung of
    the whole segment keyed "whole"); a seed recorded twice is an error naming both folders."""
    out: dict[int, dict[str, float]] = {}
    where: dict[int, Path] = {}
    for path in sorted((results / dataset / condition).glob(f"*/*/{RECORD}")):
        if not (path.parent / DONE).exists():
            continue
        record = Record.read(path.parent).fields
        curve = (record.get("metrics") or {}).get(RECORD_ROLLOUT)
        if record.get("status") != "ok" or not curve:
            continue
        seed = int(record["seed"])
        if seed in out:
            raise ValueError(f"{dataset} {condition} seed {seed} is recorded twice ({where[seed]}, {path.parent}): "
                             "settle from a root with one record per seed")
        where[seed] = path.parent
        out[seed] = {("whole" if int(h) == record["n_test"] else h): v for h, v in curve.items()}
    return out


def inside(value: float, low: float, high: float, decimals: int) -> bool:
    return round(low, decimals) <= round(value, decimals) <= round(high, decimals)


def settle_ladders(dataset: str, ladders: Mapping[str, Mapping[int, Ladder]]) -> Settled:
    """The settled rung of ``dataset`` from row -> seed -> ladder (Baseline and F), against the
    paper's published table. Raises ValueError when a row has no ladder or the paper no table."""
    published = paper_published(dataset)
    if published is None:
        raise ValueError(f"{dataset}: the paper has no table for it, so no reading to settle")
    missing = [row for row in ROWS if not ladders.get(row)]
    if missing:
        raise ValueError(f"{dataset}: no {' or '.join(missing)} record with the rollout ladder")
    decimals = int(published.attrs["decimals"]["rmse_median"])
    paper = {}
    for row in ROWS:
        line = published.loc[published["condition"] == row].iloc[0]
        paper[row] = (float(line["rmse_median"]), float(line["rmse_min"]), float(line["rmse_max"]))
    first = next(iter(ladders[ROWS[0]].values()))
    rungs = [h for h in first if all(h in ladder for row in ROWS for ladder in ladders[row].values())]
    scores = []
    for h in rungs:
        medians = {row: statistics.median(ladder[h] for ladder in ladders[row].values()) for row in ROWS}
        scores.append(RungScore(h, medians, {row: inside(medians[row], *paper[row][1:], decimals) for row in ROWS},
                                sum(abs(math.log10(medians[row] / paper[row][0])) for row in ROWS)))
    best = min(scores, key=lambda s: (-s.rows_in, s.distance))
    return Settled(dataset, best.rung, scores, {row: sorted(ladders[row]) for row in ROWS}, paper, decimals)


def settle_records(results: Path, dataset: str) -> Settled:
    """The settled rung of ``dataset`` from the Baseline and F records under ``results``."""
    return settle_ladders(dataset, {row: record_ladders(results, dataset, row) for row in ROWS})


def seed_list(seeds: Sequence[int]) -> str:
    """Seeds as runs of consecutive numbers: [0, 1, 2, 5] -> "0-2 5"."""
    runs: list[list[int]] = []
    for s in sorted(seeds):
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return " ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)


def seeds_text(settled: Settled) -> str:
    """The seeds of the settling, once when both rows share them: "0-9", else per row."""
    lists = {row: seed_list(settled.seeds[row]) for row in ROWS}
    if len(set(lists.values())) == 1:
        return lists[ROWS[0]]
    return "; ".join(f"{row} {text}" for row, text in lists.items())


def settled_markdown(settled: Settled) -> str:
    """The evidence of one dataset: a row per rung, and the verdict."""
    d = settled.decimals
    columns = " | ".join(f"{row} median | {row} published | in range" for row in ROWS)
    lines = [f"### {settled.dataset}: Baseline and F (beta 0), seeds {seeds_text(settled)}", "",
             f"| rung (steps) | {columns} | sum abs log10 ratio |", "|---|" + "---|---|---|" * len(ROWS) + "---|"]
    for s in settled.scores:
        cells = []
        for row in ROWS:
            median, low, high = settled.published[row]
            verdict = "yes" if s.inside[row] else "no"
            cells.append(f"{s.medians[row]:.{d}f} | {median:.{d}f} [{low:.{d}f}, {high:.{d}f}] | {verdict}")
        lines.append(f"| {s.rung} | " + " | ".join(cells) + f" | {s.distance:.3f} |")
    lines += ["", f"{settled.dataset}: the paper's reading is the rung **{settled.rung}** "
                  f"({settled.best.rows_in} of {len(ROWS)} rows in range there)"]
    return "\n".join(lines)


def evidence(settled: Settled) -> str:
    """readings.csv's evidence cell: where the rule and the table are, and what it found."""
    best = settled.best
    medians = ", ".join(f"{row} {best.medians[row]:.{settled.decimals}f}" for row in ROWS)
    return (f"docs/CALIBRATION.md, the paper's multi-step reading: Baseline and F, beta 0, seeds {seeds_text(settled)} "
            f"(scripts/studies/settle_rollout.py --write: {RULE}): {best.rows_in} of {len(ROWS)} rows in range, "
            f"summed |log10 ratio| {best.distance:.3f} ({medians})")


def readings_csv(settled: Sequence[Settled]) -> str:
    """The text of paper/readings.csv for these settlings (one row per dataset)."""
    import pandas as pd

    table = pd.DataFrame({"dataset": [s.dataset for s in settled], "rollout_horizon": [s.rung for s in settled],
                          "seeds": [seeds_text(s) for s in settled], "evidence": [evidence(s) for s in settled]})
    return table.to_csv(index=False, lineterminator="\n")


def write_readings(settled: Sequence[Settled], path: Path = READINGS_FILE) -> Path:
    path.write_text(readings_csv(settled))
    return path
