"""`python -m kanx.evaluate PATH`: check every run under PATH against its weights.

    python -m kanx.evaluate results/paper                  # every run folder under the root
    python -m kanx.evaluate results/paper/ikeda/X/default/beta=0.01,seed=1   # one run
    python -m kanx.evaluate results/paper --add-missing    # ... and write metrics a record lacks
    python -m kanx.evaluate results/paper results/studies --sample 100   # 100 runs, spread over the datasets
    python -m kanx.evaluate results/paper --jobs 2         # two run folders at a time, in two processes

A record's test metrics (train and test RMSE; for the dynamical systems the one-step RMSE, the
multi-step RMSE and the rollout error curve, kanx.data.metrics), with a validation split
(dataset.val_fraction, rebuilt from the config) the same readings of it (val_rmse, and for the
dynamical systems val_rmse_one_step), and its structure (contributing edges, depth, exit, open
gates) are computed once, when the run ends. This command recomputes
them from what the run folder holds (record.json with its config, model.pt, and the data the
config names, rebuilt from its seed or read from KANX_DATA_DIR) without training, and gives
every metric a verdict (kanx.verdicts): identical; within floating-point tolerance; for a rung
of a chaotic rollout (the validation rollouts' val_rmse among them), consistent with the spread
of the same rollouts started one ulp apart; or differs. docs/RECORDS.md, "Rescoring on another
machine", says what each verdict promises.

Every run folder under PATH is accounted for, as one of:
  agrees            every metric identical, within tolerance or consistent
  differs           a metric that no rounding explains (other weights, data or code)
  corrupt           a file differs from the checksum its done marker holds, or is unreadable
  unsealed          no done marker, or an empty one (before 2026-11-26: kanx.records seal-legacy)
  no weights        a sealed record without model.pt: nothing to rescore it from
  cannot be scored  rescoring raised (the reason is printed)
  failed            a recorded failure: the record holds no metrics, and says why
A metric the record does not hold yet (for example the rollout curve of a run recorded before it
existed) is reported as missing; `--add-missing` writes it into the record of a run that agrees,
after checking every file against its done marker, and refreshes only the record's checksum.

Exit status: 0 when every run agrees (or is a recorded failure); 1 when one differs, is corrupt,
or was not verified (unsealed, no weights, cannot be scored; `--allow-unverified` lets these
pass, and only differs and corrupt fail); 2 on bad arguments or a PATH that holds no run.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from kanx import records, vocab
from kanx.cli import ArgumentParser, at_least, pipe_safe, prog
from kanx.errors import StorageError, fail
from kanx.record import Record
from kanx.verdicts import CONSISTENT, DIFFERS, IDENTICAL, VERDICTS, WITHIN, Verdict, judge

MODULE = "kanx.evaluate"
MODULE = "kanx.evaluate"
AGREES, DIFFERS_RUN, CORRUPT, UNSEALED, NO_WEIGHTS, UNSCORED, FAILED = (
    "agrees", "differs", "corrupt", "unsealed", "no weights", "cannot be scored", "failed")
OUTCOMES = (AGREES, DIFFERS_RUN, CORRUPT, UNSEALED, NO_WEIGHTS, UNSCORED, FAILED)
UNVERIFIED = (UNSEALED, NO_WEIGHTS, UNSCORED)  # not checked; --allow-unverified lets them pass
REAL_DIFFERENCES = (DIFFERS_RUN, CORRUPT)  # always exit 1

# What makes a folder a run's: any file a run writes into its own folder (a sweep folder holds
# manifest.json, multirun.yaml and train.log, none of these).
RUN_FILES = (records.RECORD, records.DONE, records.MODEL, records.CHECKPOINT, *records.CURVES)


@dataclass
class Checked:
    """One run folder accounted for: its outcome, why (one line, for all but agrees), the
    verdict of every metric scored, and the metrics its record lacks."""

    run_dir: Path
    outcome: str
    why: str = ""
    verdicts: list[Verdict] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    device: str | None = None  # the device it trained on (record.timing.device)

    def counts(self) -> Counter:
        return Counter(v.verdict for v in self.verdicts)

    def describe(self) -> str:
        if self.outcome == DIFFERS_RUN:
            shown = [v.describe() for v in self.verdicts if v.verdict == DIFFERS]
            more = f" (+{len(shown) - 4} more)" if len(shown) > 4 else ""
            return f"differs: {', '.join(shown[:4])}{more}"
        if self.outcome != AGREES:
            return f"{self.outcome}: {self.why}"
        counts = self.counts()
        text = "agrees (" + ", ".join(f"{counts[v]} {v}" for v in VERDICTS[:3] if counts[v]) + ")"
        return text + (f"; missing from the record: {', '.join(self.missing)}" if self.missing else "")


@torch.no_grad()
def score(saved: dict, dataset) -> dict:
    """The metrics of one trained run: errors (kanx.data.evaluate_members) and structure
    (kanx.kan.structure), of the model in ``saved`` (kanx.load.read_model_file's dict) on
    ``dataset``. The runner records these at the end of training and this command recomputes
    them, both from model.pt, through this one function: alone (M = 1, the run's own layout),
    on the CPU, with the eager basis and one thread (`one_thread`), so the numbers do not depend
    on the pack the run trained in, the device it trained on, the compiled kernels or how many
    threads the caller runs, and agree bit for bit on one machine."""
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


def _predictor(model, scaling, estimator: str):
    """Raw inputs (M, N, q) -> raw predictions (M, N, p) of the model, with the eager basis."""
    model.use_compiled_basis(False)

    def predict_raw(x_raw: torch.Tensor) -> torch.Tensor:
        return scaling.y_inverse(model.predict(scaling.x(x_raw).to(torch.float32), estimator).to(x_raw.dtype))

    return predict_raw


@one_thread()
def _score_model(model, scaling, estimator: str, dataset) -> dict:
    from kanx.data import evaluate_members
    from kanx.kan.structure import model_structure, record_metrics

    (metrics,) = evaluate_members([dataset], _predictor(model, scaling, estimator))
    (structure,) = model_structure(model, estimator)
    scores = {**metrics, **{k: structure.as_dict()[k] for k in vocab.RECORD_STRUCTURE}}
    return {**scores, **record_metrics(model, estimator, dataset)}  # what its factors add (with I: selected_inputs)


@torch.no_grad()
def rescore(run_dir: Path) -> dict:
    """The metrics of the finished run in ``run_dir``, recomputed from its model.pt (read once,
    by load_run, into the same one-member model `score` builds) and its rebuilt data."""
    return _rescored(run_dir)[0]


def _rescored(run_dir: Path):
    """rescore's metrics, and what a verdict needs beside them: which metrics a rollout computes
    (label -> plan label), the one-ulp ensemble (computed on call) and the targets' scale."""
    from kanx.data.spread import record_plans, ulp_ensemble
    from kanx.load import load_run, rebuild_dataset

    run = load_run(run_dir)
    dataset = rebuild_dataset(run)
    metrics = _score_model(run.model, run.scaling, run.gate_estimator, dataset)
    plans = record_plans(dataset) if dataset.dynamical else {}

    @one_thread()
    def ensemble() -> dict:
        return {k: v.tolist() for k, v in ulp_ensemble(
            dataset, _predictor(run.model, run.scaling, run.gate_estimator), plans).items()}

    return metrics, (lambda label: label if label in plans else None), ensemble, target_scale(dataset)


def target_scale(dataset) -> float:
    """The standard deviation of the test targets, in raw units: the scale of kanx.verdicts' tolerance."""
    return float(dataset.y_test.double().std())


def check(run_dir: Path) -> Checked:
    """Account for one run folder (see the module's docstring for the outcomes)."""
    if not (run_dir / records.DONE).exists():
        where = "holds a checkpoint: unfinished" if (run_dir / records.CHECKPOINT).exists() else "has no done marker"
        return Checked(run_dir, UNSEALED, f"{where}, so nothing vouches for its files")
    if not (run_dir / records.RECORD).exists():
        return Checked(run_dir, CORRUPT, f"{run_dir / records.RECORD} is missing (its done marker is there)")
    problem = records.integrity_problem(run_dir, files=(records.RECORD, records.MODEL, *records.CURVES))
    if problem is not None:
        return Checked(run_dir, UNSEALED if problem == records.unsealed(run_dir) else CORRUPT, problem)
    try:
        record = Record.read(run_dir).fields
        status, recorded = record["status"], record.get("metrics") or {}
    except (OSError, ValueError, TypeError, KeyError) as e:
        return Checked(run_dir, CORRUPT, f"{run_dir / records.RECORD} is not a kanx record ({type(e).__name__}: {e})")
    device = str((record.get("timing") or {}).get("device") or "unknown").split(":")[0]
    if status == "failed":
        return Checked(run_dir, FAILED, f"a recorded failure: {record.get('error') or 'no metrics'}", device=device)
    if not (run_dir / records.MODEL).exists():
        return Checked(run_dir, NO_WEIGHTS, f"no {records.MODEL} to rescore it from (the record is sealed)",
                       device=device)
    try:
        metrics, chaotic, ensemble, scale = _rescored(run_dir)
        verdicts, missing = judge(recorded, metrics, ensemble, chaotic, scale)
    except Exception as e:  # one run that cannot be scored is reported, the others still are
        return Checked(run_dir, UNSCORED, f"{type(e).__name__}: {' '.join(str(e).split())}", device=device)
    outcome = DIFFERS_RUN if any(v.verdict == DIFFERS for v in verdicts) else AGREES
    return Checked(run_dir, outcome, verdicts=verdicts, missing=missing, metrics=metrics, device=device)


def checked_in_order(folders: list[Path], jobs: int) -> Iterator[Checked]:
    """`check` of each folder, in the folders' order. With jobs > 1 the folders are scored in
    that many spawned processes (a forked one would inherit torch's thread pool); each scores on
    one thread, as `check` does in this process, and the ulp ensembles are seeded per run, so the
    verdicts do not depend on the job count."""
    if jobs == 1 or len(folders) < 2:
        yield from map(check, folders)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(folders)), mp_context=spawn) as pool:
        yield from pool.map(check, folders, chunksize=4)


def add_missing(result: Checked) -> None:
    """Write the metrics the record lacks into it, then refresh only the record's checksum in
    the done marker. Every other file was checked against the marker (`check`), and is checked
    again here, just before: a file changed since is reported, and nothing is written."""
    run_dir = result.run_dir
    problem = records.integrity_problem(run_dir, files=(records.RECORD, records.MODEL, *records.CURVES))
    if problem is not None:
        raise ValueError(problem)
    record = Record.read(run_dir).fields
    held = record.setdefault("metrics", {})
    for name, value in result.metrics.items():
        if isinstance(value, dict):
            held[name] = {**value, **held.get(name, {})}
        else:
            held.setdefault(name, value)
    records.reseal_record(run_dir, Record(record).to_bytes())


def run_folders(path: Path) -> list[Path]:
    """``path`` itself if it is a run's folder, else every run folder below it, in path order."""
    if any((path / name).exists() for name in RUN_FILES):
        return [path]
    found = {p.parent for name in RUN_FILES for p in path.rglob(name)}
    return sorted(found)


def dataset_of(run_dir: Path) -> str:
    """The dataset a run folder belongs to: <root>/<dataset>/<condition>/<tag>/<beta,seed>."""
    return run_dir.parents[2].name if len(run_dir.parents) > 2 else str(run_dir)


def sample(folders: list[Path], n: int, seed: int) -> list[Path]:
    """``n`` of ``folders`` spread evenly over their datasets: each dataset's folders in an order
    shuffled by ``seed``, taken in turn from the datasets in name order; in path order."""
    rng = random.Random(seed)
    groups: dict[str, list[Path]] = {}
    for folder in folders:
        groups.setdefault(dataset_of(folder), []).append(folder)
    queues = []
    for name in sorted(groups):
        group = groups[name][:]
        rng.shuffle(group)
        queues.append(group)
    drawn: list[Path] = []
    while len(drawn) < n and any(queues):
        for queue in queues:
            if queue and len(drawn) < n:
                drawn.append(queue.pop())
    return sorted(drawn)


def summary(checked: list[Checked]) -> str:
    outcomes = Counter(c.outcome for c in checked)
    verdicts = sum((c.counts() for c in checked if c.outcome == AGREES), Counter())
    metric_text = ", ".join(f"{verdicts[v]} {v}" for v in (IDENTICAL, WITHIN, CONSISTENT))
    largest = max((v.scaled for c in checked if c.outcome == AGREES for v in c.verdicts
                   if v.verdict == WITHIN and v.scaled and not v.rollout), default=None)
    if largest is not None:  # a chaotic rollout's difference is a draw, inside the tolerance by chance
        metric_text += f"; the largest difference within tolerance is {largest:.2g} of it, rollout metrics aside"
    parts = [f"{outcomes[AGREES]} agree (metrics: {metric_text})"]
    parts += [f"{outcomes[o]} {'differ' if o == DIFFERS_RUN else o}" for o in OUTCOMES[1:]
              if outcomes[o] or o in (DIFFERS_RUN, *UNVERIFIED)]
    return f"{len(checked)} run folder(s): " + ", ".join(parts)


def devices_line(checked: list[Checked]) -> str | None:
    """Where the checked runs trained, and why that does not change what their metrics promise."""
    devices = Counter(c.device for c in checked if c.device is not None)
    if not devices:
        return None
    where = ", ".join(f"{n} on {d}" for d, n in sorted(devices.items()))
    return (f"trained: {where}. A record's metrics are scored from its model.pt alone, on the CPU, after training on "
            "any device, so every run gets the same verdicts (docs/RECORDS.md, \"Rescoring on another machine\")")


def _parser() -> ArgumentParser:
    doc = __doc__ or ""
    parser = ArgumentParser(prog=prog(MODULE), description=doc.split("\n\n", 1)[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc.split("\n\n", 1)[1])
    parser.add_argument("roots", type=Path, nargs="+", metavar="root",
                        help="a results root, or one run folder (several may be given)")
    parser.add_argument("--add-missing", action="store_true",
                        help="write metrics a record lacks into it (refreshing its checksum)")
    parser.add_argument("--allow-unverified", action="store_true",
                        help="exit 0 although some runs could not be checked (unsealed, no weights, cannot be scored)")
    parser.add_argument("--quiet", action="store_true", help="print only runs that do not agree, and the summary")
    parser.add_argument("--sample", type=at_least(1), metavar="N",
                        help="check N of the run folders with weights, spread evenly over their datasets "
                             "(drawn by --sample-seed)")
    parser.add_argument("--sample-seed", type=int, default=0, metavar="S", help="the draw of --sample (default 0)")
    parser.add_argument("--jobs", type=at_least(1), default=1, metavar="N",
                        help="score N run folders at once, in N processes of one thread each; the same verdicts "
                             "and output as one (default 1)")
    return parser


def _folders_of(root: Path) -> list[Path]:
    """Every run folder ``root`` holds; a one-line error, before any scoring, where it holds none."""
    if not root.exists():
        fail(f"{root} does not exist: give a results root (e.g. results/paper) or a run folder", module=MODULE)
    if not root.is_dir():
        fail(f"{root} is a file: give a results root (e.g. results/paper) or a run folder", module=MODULE)
    folders = run_folders(root)
    if not folders:
        fail(f"{root} holds no run (no folder with {records.RECORD}, {records.DONE} or {records.MODEL} below it)",
             module=MODULE)
    return folders


@pipe_safe
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    folders: list[Path] = []
    for root in args.roots:
        folders += _folders_of(root)
    folders = sorted(set(folders))
    if args.sample is not None:
        weighted = [f for f in folders if (f / records.MODEL).is_file()]
        left = len(folders) - len(weighted)
        folders = sample(weighted, args.sample, args.sample_seed)
        print(f"checking {len(folders)} of the {len(weighted)} run folder(s) with weights, drawn with seed "
              f"{args.sample_seed} from {len({dataset_of(f) for f in folders})} dataset(s)"
              + (f"; {left} without {records.MODEL} not drawn (without --sample they are named)" if left else ""))
    checked, completed, not_completed = [], 0, 0
    for result in checked_in_order(folders, args.jobs):
        run_dir = result.run_dir
        checked.append(result)
        if args.add_missing and result.outcome == AGREES and result.missing:
            try:
                add_missing(result)
                completed += 1
            except (ValueError, StorageError, OSError) as e:
                not_completed += 1
                print(f"{run_dir}: missing metrics not written: {e}")
                continue
        if result.outcome != AGREES or not args.quiet:
            print(f"{run_dir}: {result.describe()}")
    print(summary(checked) + (f"; {completed} record(s) completed" if args.add_missing else "")
          + (f", {not_completed} could not be" if not_completed else ""))
    if (devices := devices_line(checked)) is not None:
        print(devices)
    outcomes = {c.outcome for c in checked}
    failing = REAL_DIFFERENCES if args.allow_unverified else (*REAL_DIFFERENCES, *UNVERIFIED)
    return 1 if outcomes & set(failing) or not_completed else 0


if __name__ == "__main__":
    sys.exit(main())
