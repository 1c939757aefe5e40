"""`python -m kanx.evaluate RESULTS_ROOT`: score finished runs again from their weights.

    python -m kanx.evaluate results/paper                  # recompute, compare with the records
    python -m kanx.evaluate results/paper --add-missing    # ... and write metrics a record lacks

A record's test metrics (train and test RMSE; for the dynamical systems the one-step RMSE, the
multi-step RMSE and the rollout error curve, kanx.data.metrics) and its structure (contributing
edges, depth, exit, open gates) are computed once, when the run ends. This command recomputes
them from what the run folder holds (record.json with its config, model.pt, and the data the
config names, rebuilt from its seed or read from KANX_DATA_DIR) without training, and says for
every run whether they agree with the record. A metric the record does not hold yet (for
example the rollout curve of a run recorded before it existed) is reported as missing, and
`--add-missing` writes it into the record and re-seals the run (kanx.records.seal); a value the
record holds is never changed.

Exit status: 0 when every run with weights agrees, 1 when one differs or cannot be scored, 2 on
bad arguments. Runs without model.pt are counted and skipped.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from kanx import records, vocab
from kanx.cli import pipe_safe, prog
from kanx.errors import fail


@dataclass
class Rescored:
    """One run scored again: the recomputed metrics, those that differ from the record
    (name -> (recorded, recomputed)) and those the record lacks."""

    run_dir: Path
    metrics: dict
    differ: dict = field(default_factory=dict)
    missing: list = field(default_factory=list)


@torch.no_grad()
def score(saved: dict, dataset) -> dict:
    """The metrics of one trained run: errors (kanx.data.evaluate_members) and structure
    (kanx.kan.structure), of the model in ``saved`` (kanx.load.read_model_file's dict) on
    ``dataset``. The runner records these at the end of training and this command recomputes
    them, both from model.pt, through this one function: alone (M = 1, the run's own layout),
    on the CPU, with the eager basis and one thread (`one_thread`), so the numbers do not depend
    on the pack the run trained in, the device, the compiled kernels or how many threads the
    caller runs, and agree bit for bit on one machine."""
    from kanx.load import model_from_file

    return _score_model(model_from_file(saved), saved["scaling"], saved["gate_estimator"], dataset)


@contextmanager
def one_thread():
    """Run the block on one intra-op thread, then restore the caller's count. A CPU matrix product
    splits its sums by thread, so the same weights scored on two threads and on one differ in the
    last bits of float32, and a chaotic rollout grows that to 1e-5 relative (a 2-thread
    `kanx.evaluate` of runs scored inside 1-thread trainings disagreed in every Ikeda cell)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@one_thread()
def _score_model(model, scaling, estimator: str, dataset) -> dict:
    from kanx.data import evaluate_members
    from kanx.kan.structure import model_structure, model_used_inputs

    model.use_compiled_basis(False)

    def predict_raw(x_raw: torch.Tensor) -> torch.Tensor:
        return scaling.y_inverse(model.predict(scaling.x(x_raw).to(torch.float32), estimator).to(x_raw.dtype))

    (metrics,) = evaluate_members([dataset], predict_raw)
    (structure,) = model_structure(model, estimator)
    scores = {**metrics, **{k: structure.as_dict()[k] for k in vocab.RECORD_STRUCTURE}}
    if model.condition.input_gates:  # with I: the inputs a contributing edge leaves, by name
        (used,) = model_used_inputs(model, estimator)
        scores[vocab.RECORD_SELECTED_INPUTS] = [dataset.input_names[i] for i in used]
    return scores


@torch.no_grad()
def rescore(run_dir: Path) -> dict:
    """The metrics of the finished run in ``run_dir``, recomputed from its model.pt (read once,
    by load_run, into the same one-member model `score` builds) and its rebuilt data."""
    from kanx.load import load_run, rebuild_dataset

    run = load_run(run_dir)
    return _score_model(run.model, run.scaling, run.gate_estimator, rebuild_dataset(run))


def _same(recorded, recomputed) -> bool:
    if isinstance(recomputed, float) and not math.isfinite(recomputed):
        return recorded is None  # the record writes a non-finite number as null
    return recorded == recomputed


def compare(run_dir: Path, metrics: dict, recorded: dict) -> Rescored:
    out = Rescored(run_dir, metrics)
    for name, value in metrics.items():
        if name not in recorded:
            out.missing.append(name)
        elif isinstance(value, dict):
            for rung, v in value.items():
                if rung not in recorded[name]:
                    out.missing.append(f"{name}[{rung}]")
                elif not _same(recorded[name][rung], v):
                    out.differ[f"{name}[{rung}]"] = (recorded[name][rung], v)
        elif not _same(recorded[name], value):
            out.differ[name] = (recorded[name], value)
    return out


def add_missing(result: Rescored) -> None:
    """Write the metrics the record lacks into it and re-seal the run; nothing it holds changes."""
    path = result.run_dir / records.RECORD
    record = json.loads(path.read_text())
    held = record.setdefault("metrics", {})
    for name, value in result.metrics.items():
        if isinstance(value, dict):
            held[name] = {**value, **held.get(name, {})}
        else:
            held.setdefault(name, value)
    records.atomic_write_bytes(path, json.dumps(records.finite_or_none(record), indent=1).encode())
    records.seal(result.run_dir)


def finished_runs(root: Path) -> list[Path]:
    """Run folders under root with a record and its done marker, in path order."""
    return sorted(p.parent for p in root.rglob(records.RECORD) if (p.parent / records.DONE).exists())


def _describe(result: Rescored) -> str:
    if result.differ:
        shown = ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in list(result.differ.items())[:4])
        return f"differs: {shown}" + (f" (+{len(result.differ) - 4} more)" if len(result.differ) > 4 else "")
    return "agrees" + (f"; missing from the record: {', '.join(result.missing)}" if result.missing else "")


@pipe_safe
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog("kanx.evaluate"), description=__doc__.split("\n\n", 1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("root", type=Path, help="a results root, or one run folder")
    parser.add_argument("--add-missing", action="store_true", help="write metrics a record lacks into it (re-sealing the run)")
    parser.add_argument("--quiet", action="store_true", help="print only runs that differ or fail, and the summary")
    args = parser.parse_args(argv)
    if not args.root.exists():
        fail(f"{args.root} does not exist: give a results root (e.g. results/paper) or a run folder")
    runs = finished_runs(args.root)
    counts = {"agree": 0, "differ": 0, "error": 0, "no weights": 0, "completed": 0}
    for run_dir in runs:
        if not (run_dir / records.MODEL).exists():
            counts["no weights"] += 1
            continue
        try:
            state = records.read_state(run_dir)
            if state.record is None or state.record.get("status") == "failed":
                continue
            result = compare(run_dir, rescore(run_dir), state.record.get("metrics", {}))
        except Exception as e:  # one run that cannot be scored is reported, the others still are
            counts["error"] += 1
            print(f"{run_dir}: cannot be scored: {type(e).__name__}: {e}")
            continue
        counts["differ" if result.differ else "agree"] += 1
        if result.missing and not result.differ and args.add_missing:
            add_missing(result)
            counts["completed"] += 1
        if result.differ or not args.quiet:
            print(f"{run_dir}: {_describe(result)}")
    print(f"{len(runs)} finished run(s): {counts['agree']} agree, {counts['differ']} differ, {counts['error']} cannot be scored, "
          f"{counts['no weights']} without {records.MODEL}" + (f"; {counts['completed']} record(s) completed" if args.add_missing else ""))
    return 1 if counts["differ"] or counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
