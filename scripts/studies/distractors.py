"""Variable selection with a known answer (issue #38): Nguyen F9 and F10 with k distractor
inputs (independent uniform noise on the true inputs' range, `dataset.distractors=k`), trained
with input gates (EFXI) and without (EFX); how often exactly the true inputs x, y are kept,
per beta, and at what test RMSE and size.

    python scripts/studies/distractors.py run   [--k 3] [--seeds 10] [--root results/studies/distractors] [--quick]
        [--no-table] [OVERRIDE ...]
    python scripts/studies/distractors.py table [--k 3] [--root results/studies/distractors]

`run` trains the sweeps (`python -m kanx.train +condition=C dataset=D +dataset.distractors=k
model.width=[2+k,5,5,5,1] -m`, the dataset's beta list and protocol, seeds 0..N-1) in one plan
(kanx.plan: packs cut across the sweeps); `--quick` adds `+debug=quick` (20 epochs, a smoke
test), and further overrides (`train.epochs=50`, `beta=0.01`) go to every sweep. A finished run
is skipped, so `run` resumes. `table` (and `run` at its end) prints the table and writes it to
ROOT/study.md; it reads the finished records under the root: the inputs a
run keeps are its record's `selected_inputs` with I, and for a run without I the inputs a
contributing edge leaves, read from its model.pt the same way (kanx.kan.structure.used_inputs).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from statistics import median

from kanx import vocab
from kanx.cli import ArgumentParser, at_least, prog
from kanx.errors import ConfigError, StorageError, report
from kanx.kan.structure import model_used_inputs
from kanx.load import load_run
from kanx.record import Record

DATASETS = ("nguyen_f9", "nguyen_f10")
CONDITIONS = ("EFX", "EFXI")
TRUE_INPUTS = frozenset({"x", "y"})  # both problems' variables (kanx.data.synthetic)
SCRIPT = "scripts/studies/distractors.py"


def sweep_overrides(k: int, root: Path, seeds: int, quick: bool, extra: list[str]) -> list[str]:
    """The overrides of every sweep of the study: k distractors, the width they need, the root."""
    return [f"+dataset.distractors={k}", f"model.width=[{2 + k},5,5,5,1]", f"results_root={root}",
            f"seed=range(0,{seeds})", *(["+debug=quick"] if quick else []), *extra]


def run(k: int, root: Path, seeds: int, quick: bool, extra: list[str]) -> int:
    from kanx.plan import run_plan, sweeps_jobs

    configs = sweeps_jobs(DATASETS, CONDITIONS, sweep_overrides(k, root, seeds, quick, extra))
    return run_plan(configs)


def kept_inputs(run_dir: Path, record: dict) -> list[str]:
    """The names of the inputs a contributing edge leaves: the record's with I, else model.pt's."""
    held = record.get("metrics", {}).get(vocab.RECORD_SELECTED_INPUTS)
    if held is not None:
        return list(held)
    trained = load_run(run_dir)
    (used,) = model_used_inputs(trained.model, trained.gate_estimator)
    return [trained.input_names[i] for i in used]


def finished(root: Path, k: int):
    """(run_dir, record) of every finished run of the study under root with k distractors."""
    for path in sorted(root.rglob(vocab.RECORD)):
        if not (path.parent / vocab.DONE).exists():
            continue
        record = Record.read(path.parent).fields
        dataset = record.get("config", {}).get("dataset", {})
        if (record.get("dataset") in DATASETS and dataset.get("distractors", 0) == k
            and record.get("status") in vocab.USABLE_STATUSES):
            yield path.parent, record


def table(root: Path, k: int) -> str:
    """The recovery table: per dataset, condition and beta, the runs, the share keeping exactly
    x and y, and the median test RMSE and contributing edges (markdown)."""
    cells: dict[tuple, list] = defaultdict(list)
    for run_dir, record in finished(root, k):
        kept = frozenset(kept_inputs(run_dir, record))
        m = record["metrics"]
        cells[(record["dataset"], record["condition"], record["beta"])].append(
            (kept == TRUE_INPUTS, m["test_rmse"], m["contributing_edges"], kept))
    lines = [f"Distractor study: k = {k} distractor inputs (root {root})", "",
             "| dataset | condition | beta | runs | exactly x, y kept | "
             "median test RMSE | median edges | distractors kept (mean) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    def order(kv):
        (dataset, condition, beta), _ = kv
        return DATASETS.index(dataset), CONDITIONS.index(condition) if condition in CONDITIONS else 99, beta

    for (dataset, condition, beta), runs in sorted(cells.items(), key=order):
        exact = sum(r[0] for r in runs)
        noise = sum(len(r[3] - TRUE_INPUTS) for r in runs) / len(runs)
        lines.append(f"| {dataset} | {condition} | {beta:g} | {len(runs)} | {exact}/{len(runs)} "
                     f"({exact / len(runs):.0%}) | {median(r[1] for r in runs):.4g} | "
                     f"{median(r[2] for r in runs):g} | {noise:.2f} |")
    if not cells:
        lines.append("| (no finished runs) | | | | | | | |")
    return "\n".join(lines)


def write_table(root: Path, k: int) -> str:
    """The recovery table, also written to ROOT/study.md (as factor_study.py's tables) when the
    root exists, so the committed study carries the table its records give."""
    from kanx.analyze.studies import write_study_table

    text = table(root, k)
    if root.is_dir():
        write_study_table(root, text)
    return text


def main(argv: list[str] | None = None) -> int:
    head, rest = __doc__.split("\n\n", 1)
    p = ArgumentParser(prog=prog(SCRIPT), description=head, epilog=rest,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("run", "table"))
    p.add_argument("--k", type=at_least(0), default=3, help="distractor inputs (default 3)")
    p.add_argument("--root", type=Path, default=None,
                   help="results root of the study (default results/studies/distractors, "
                        "outputs/studies-smoke/distractors with --quick)")
    p.add_argument("--seeds", type=at_least(1), default=10, help="seeds 0..N-1 (default 10)")
    p.add_argument("--quick", action="store_true", help="+debug=quick: a 20-epoch smoke test")
    p.add_argument("--no-table", action="store_true", help="run: train only (e.g. in a time-boxed GPU job), no table")
    p.add_argument("overrides", nargs="*", help="more Hydra overrides for every sweep")
    a = p.parse_intermixed_args(argv)
    # toy runs stay apart
    a.root = a.root or Path("outputs/studies-smoke/distractors" if a.quick else "results/studies/distractors")
    if a.command == "table" and not a.root.is_dir():
        return report(SCRIPT, f"--root {a.root} is not a folder: give the study's results root")
    if a.command == "table" and a.overrides:
        return report(SCRIPT, f"table takes no overrides ({' '.join(a.overrides)}): they are for run")
    try:
        failed = run(a.k, a.root, a.seeds, a.quick, a.overrides) if a.command == "run" else 0
        if a.command == "table" or not a.no_table:
            print(write_table(a.root, a.k))
    except ConfigError as e:
        return report(SCRIPT, e)
    except StorageError as e:  # the runs recorded so far keep their records: `run` again trains the others
        return report(SCRIPT, e, code=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
