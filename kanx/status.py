"""`python -m kanx.status RESULTS_ROOT` (or `kanx-status`): where every sweep below a results
root stands, and how long the rest will take.

    python -m kanx.status outputs/paper          # one line per sweep, then the total
    python -m kanx.status outputs/paper --runs   # ... and every run that is not finished

A sweep is a folder <dataset>/<condition>/<tag> of run folders `beta=..,seed=..`. Each run
counts once, as the first of these that fits:

    ok, collapsed, diverged, failed   its record (with its `done` marker) says so
    running                           its folder holds the `lock` of a live process (kanx.records.lock_is_live)
    corrupt                           a record with a `done` marker, but unreadable or changed since
                                      (its checksum differs): not counted, trained again
    checkpointed                      a checkpoint.pt (shown with the epochs it holds: 3@500)
    bad checkpoint                    a checkpoint.pt that cannot be loaded (truncated, not a torch
                                      file, pickled objects): the run starts again from epoch 0
    missing                           expected, but nothing usable on disk

`--runs` says why a run is corrupt or its checkpoint bad; the table shows those two columns only
where some run has them.

Expected runs: what was launched. Every launch (a single run, a `-m` sweep on any launcher,
`make reproduce-tables`) lists its runs in the sweep folder's `manifest.json` before training
(kanx.manifest), so a single run expects 1 and a smoke pipeline the runs it launched; run
folders found on disk count too. A sweep folder without a manifest (results written before
manifests, such as results/paper) expects only the runs on disk, and the status says so in one
line: nothing there says what was launched, so nothing is guessed.

ETA: the steps left at the recorded pack step rate, sweeps one after another (kanx.eta says how);
before any record, at the pace of the running process (its checkpoints' last stretch, or before
its first checkpoint its live metrics.csv: the last row's epoch and elapsed_s).
Failed runs count as left: the next invocation retries them.

Reads only files; imports torch only to read a checkpoint (its epoch, last stretch and pack).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kanx.checkpoint import BadCheckpoint, Checkpoint
from kanx.cli import ArgumentParser, pipe_safe, prog
from kanx.errors import report
from kanx.eta import LEFT, duration, estimate, total_eta
from kanx.manifest import expected_runs, read_manifest
from kanx.record import canonical_beta
from kanx.records import lock_is_live, read_state
from kanx.vocab import (  # UNGATED: no beta sweep, seeds only at beta 0
    CHECKPOINT,
    LOCK,
    MANIFEST,
    METRICS,
    RECORD,
    UNGATED,
)

STATES = ("ok", "collapsed", "diverged", "failed", "running", "corrupt", "checkpointed", "bad checkpoint", "missing")
RARE = ("corrupt", "bad checkpoint")  # columns of the table only where some run is in them
_RUN_DIR = re.compile(r"beta=(?P<beta>[^,/]+),seed=(?P<seed>\d+)")


@dataclass
class Run:
    beta: float
    seed: int
    state: str
    epoch: int | None = None  # of the checkpoint, where there is one
    path: Path | None = None
    stretch: tuple[int, float] | None = None  # (epochs, seconds) of the checkpoint's last stretch, where it says
    pack: dict | None = None  # the checkpoint's pack facts (id, epochs, batches, members), where it says
    why: str | None = None  # what is wrong, for a corrupt record or a bad checkpoint


@dataclass
class Sweep:
    path: str  # relative to the root
    dataset: str
    condition: str
    tag: str
    runs: list[Run]
    expected_from: str  # "manifest" (what was launched) or "runs on disk" (a folder without one)
    eta_s: float | None = None
    # pack id -> seconds left, for runs whose checkpoints name their pack
    pack_eta_s: dict = field(default_factory=dict, repr=False)
    other_eta_s: float | None = field(default=None, repr=False)  # seconds left for the rest of its runs
    counts: dict = field(default_factory=dict)
    records: list = field(default_factory=list, repr=False)  # the finished runs' records
    manifest: dict | None = field(default=None, repr=False)  # what was launched into it (kanx.manifest)

    def __post_init__(self) -> None:
        self.counts = {s: sum(r.state == s for r in self.runs) for s in STATES}

    @property
    def left(self) -> int:
        return sum(self.counts[s] for s in LEFT)


# ---------------------------------------------------------------------------- reading


def load_checkpoint(run_dir: Path) -> tuple[Checkpoint | None, str | None]:
    """The checkpoint as the runner loads it (kanx.checkpoint: tensors and plain data only, an
    integer epoch), or None and why not: the runner then starts the run again."""
    try:
        return Checkpoint.read(run_dir), None
    except BadCheckpoint as e:
        return None, e.why


def read_checkpoint(run_dir: Path) -> tuple[int | None, tuple[int, float] | None, dict | None]:
    """The epoch a checkpoint holds, (epochs, training seconds) of its last stretch, and its pack
    facts (id, epochs, batches, members), where the checkpoint says (stretch seconds since
    2026-11-27, pack facts since 2026-11-27 06:30 UTC); None for what cannot be read."""
    ckpt, _ = load_checkpoint(run_dir)
    return _checkpoint_facts(ckpt) if ckpt is not None else (None, None, None)


def _checkpoint_facts(ckpt: Checkpoint) -> tuple[int, tuple[int, float] | None, dict | None]:
    return ckpt.epoch, ckpt.last_stretch(), ckpt.pack_facts()


def run_state(run_dir: Path) -> tuple[str, int | None, dict | None, tuple[int, float] | None, dict | None, str | None]:
    """(state, checkpoint epoch, record, the checkpoint's last stretch and pack facts (``read_checkpoint``),
    why a record is corrupt or a checkpoint bad) of one run folder."""
    state = read_state(run_dir)
    if state.status in ("done", "failed"):
        return str(state.record.get("status", "ok")), None, state.record, None, None, None
    has_checkpoint = (run_dir / CHECKPOINT).exists()
    ckpt, bad = load_checkpoint(run_dir) if has_checkpoint else (None, None)
    epoch, stretch, pack = _checkpoint_facts(ckpt) if ckpt is not None else (None, None, None)
    if lock_is_live(run_dir):
        if stretch is None:  # no checkpoint yet: the live curve says how far, and in how long
            stretch = live_progress(run_dir)
            epoch = stretch[0] if stretch else epoch
        return "running", epoch, None, stretch, pack, None
    if state.problem:  # read_state found a record it does not trust: not finished, however it looks
        return "corrupt", epoch, None, stretch, pack, state.problem
    if has_checkpoint:
        if bad:
            return "bad checkpoint", None, None, None, None, f"{run_dir / CHECKPOINT} {bad}"
        return "checkpointed", epoch, None, stretch, pack, None
    return "missing", None, None, None, None, None


def live_progress(run_dir: Path) -> tuple[int, float] | None:
    """(epochs, training seconds) of a running run's last curve row (its live metrics.csv: epoch,
    elapsed_s), for an ETA before its first checkpoint; None where it has no such row yet."""
    try:
        with open(run_dir / METRICS, newline="") as f:
            lines = f.read().splitlines(keepends=True)
    except (OSError, UnicodeDecodeError):
        return None
    complete = [line for line in lines if line.endswith("\n")]  # a row cut by a writer mid-append is left out
    if len(complete) < 2:
        return None
    header, last = next(csv.reader(complete[:1])), next(csv.reader(complete[-1:]))
    row = dict(zip(header, last, strict=False))
    try:
        epochs, seconds = int(row["epoch"]), float(row["elapsed_s"])
    except (KeyError, ValueError):
        return None
    return (epochs, seconds) if epochs > 0 and seconds > 0 else None


def find_sweeps(root: Path) -> dict[Path, list[Path]]:
    """Sweep folder -> its run folders (a folder named beta=..,seed=.., or holding a record,
    checkpoint or lock); folders holding a manifest are sweeps even before any run."""
    sweeps: dict[Path, list[Path]] = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if MANIFEST in files:
            sweeps.setdefault(here, [])
        if here != root and (_RUN_DIR.fullmatch(here.name) or {RECORD, CHECKPOINT, LOCK} & set(files)):
            sweeps.setdefault(here.parent, []).append(here)
            dirs[:] = []  # a run folder holds no sweep (only .hydra and its files)
        dirs.sort()
    return sweeps


# ---------------------------------------------------------------------------- ETA


def _protocol(records: list[dict], runs: Iterable[Run] = (),
              manifest: dict | None = None) -> tuple[int, int, int] | None:
    """(epochs, batches per epoch, pack size) from a record's config, else from the manifest,
    else from a checkpoint's pack facts."""
    for record in records:
        train = (record.get("config") or {}).get("train") or {}
        try:
            return (int(train["epochs"]), math.ceil(int(record["n_train"]) / int(train["batch_size"])),
                    int(train["pack_size"]))
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            continue
    try:
        p = manifest["protocol"]
        return int(p["epochs"]), int(p["batches"]), int(p["pack_size"])
    except (KeyError, TypeError, ValueError):
        pass
    for run in runs:
        if run.pack:
            return run.pack["epochs"], run.pack["batches"], run.pack["members"]
    return None


# ---------------------------------------------------------------------------- the status


def collect(root: str | Path) -> list[Sweep]:
    """Every sweep below ``root`` with its runs' states and ETA, in registry order."""
    from kanx.analyze.labels import CONDITIONS, dataset_rank

    root = Path(root)
    found = []
    for sweep_dir, run_dirs in find_sweeps(root).items():
        runs, records = [], []
        for run_dir in sorted(run_dirs):
            state, epoch, record, stretch, pack, why = run_state(run_dir)
            if record is not None:
                records.append(record)
                beta, seed = record.get("beta"), record.get("seed")
            else:
                m = _RUN_DIR.fullmatch(run_dir.name)
                beta, seed = (m["beta"], m["seed"]) if m else (None, None)
            try:
                runs.append(Run(canonical_beta(beta or 0.0), int(seed), state, epoch, run_dir, stretch, pack, why))
            except (TypeError, ValueError):
                continue  # a folder that names no run
        rel = sweep_dir.relative_to(root).as_posix() if sweep_dir != root else "."
        parts = rel.split("/")
        dataset = str(records[0]["dataset"]) if records else (parts[-3] if len(parts) >= 3 else "?")
        condition = str(records[0]["condition"]) if records else (parts[-2] if len(parts) >= 2 else "?")
        manifest = read_manifest(sweep_dir)
        if not records and manifest and manifest["runs"]:  # launched, nothing finished yet: the manifest names them
            first = next(iter(manifest["runs"].values()))
            dataset, condition = str(first.get("dataset", dataset)), str(first.get("condition", condition))
        expected = expected_runs(manifest) if manifest is not None else set()
        if condition in UNGATED:
            expected = {(0.0, s) for _, s in expected}
        on_disk = {(r.beta, r.seed) for r in runs}
        runs += [Run(b, s, "missing") for b, s in sorted(expected - on_disk)]
        runs.sort(key=lambda r: (r.beta, r.seed))
        found.append(Sweep(rel, dataset, condition, sweep_dir.name, runs, "manifest" if expected else "runs on disk",
                           records=records, manifest=manifest))

    for sweep in found:
        estimate(sweep, found, _protocol(sweep.records, sweep.runs, sweep.manifest))
    rank = {c: i for i, c in enumerate(CONDITIONS)}
    return sorted(found, key=lambda s: (dataset_rank(s.dataset), rank.get(s.condition, len(rank)), s.condition, s.path))


def _checkpointed(runs: list[Run], state: str) -> str:
    mine = [r for r in runs if r.state == state]
    if not mine:
        return "0"
    epochs = sorted({r.epoch for r in mine if r.epoch is not None})
    if not epochs:
        return str(len(mine))
    at = str(epochs[0]) if len(epochs) == 1 else f"{epochs[0]}-{epochs[-1]}"
    return f"{len(mine)}@{at}"


def format_table(sweeps: list[Sweep]) -> str:
    total = {k: sum(s.counts[k] for s in sweeps) for k in STATES}
    # a corrupt record or bad checkpoint must not hide in "missing"
    shown = [k for k in STATES if k not in RARE or total[k]]
    header = ["sweep", "expected", *shown, "ETA", "expected from"]
    rows = []
    for s in sweeps:
        cells = {k: _checkpointed(s.runs, k) if k in ("running", "checkpointed") else str(s.counts[k]) for k in shown}
        rows.append([s.path, str(len(s.runs)), *cells.values(), duration(s.eta_s), s.expected_from])
    eta = total_eta(sweeps)
    unknown = sum(s.eta_s is None for s in sweeps)
    rows.append(["all", str(sum(len(s.runs) for s in sweeps)), *(str(total[k]) for k in shown), duration(eta), ""])
    notes = ["running / checkpointed: n@epoch (the epochs their checkpoints hold; before a running run's first "
             "checkpoint, its live metrics.csv's)",
             "ETA: the runs left (failed ones are retried) at the recorded pack step rate "
             "(or, before any record, the running process's own), sweeps one after another; "
             "a pack shared by several sweeps (mixed packs) counts once in the total"]
    if total["corrupt"] or total["bad checkpoint"]:
        notes.append("corrupt: a record not trusted (unreadable, or changed since its done marker), trained again; "
                     "bad checkpoint: one that cannot be loaded, the run starts again (--runs says why)")
    unlisted = sum(s.expected_from == "runs on disk" for s in sweeps)
    if unlisted:
        notes.append(f"runs on disk: {unlisted} of {len(sweeps)} sweeps have no manifest.json kanx can read (launched "
                     "before kanx listed its launches, or damaged): nothing says what was launched there, so they "
                     "expect only the run folders on disk")
    if unknown:
        notes.append(f"?: {unknown} sweep{'s' * (unknown > 1)} with runs left but no record with a step rate yet "
                     "(timing.steps_per_s) nor a running process whose checkpoints say its pace")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(v.ljust(w) if i in (0, len(header) - 1) else v.rjust(w)  # noqa: E731
                               for i, (v, w) in enumerate(zip(r, widths, strict=True))).rstrip()
    return "\n".join([line(header), *(line(r) for r in rows[:-1]), "-" * len(line(header)), line(rows[-1]), "", *notes])


def format_runs(sweeps: list[Sweep], root: Path) -> str:
    """Every run that is not finished, by sweep."""
    lines = []
    for s in sweeps:
        left = [r for r in s.runs if r.state in LEFT]
        if not left:
            continue
        lines.append(f"{s.path}:")
        for r in left:
            at = f" at epoch {r.epoch}" if r.epoch is not None else ""
            why = f" ({r.why})" if r.why else ""
            lines.append(f"  beta={r.beta:g} seed={r.seed}: {r.state}{at}{why}")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    # The module's docstring is the manual: its first paragraph as the description, the rest after the options.
    head, rest = __doc__.split("\n\n", 1)
    parser = ArgumentParser(prog=prog("kanx.status"), description=" ".join(head.split()), epilog=rest,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path, metavar="RESULTS_ROOT", help="the results_root of the sweeps (e.g. outputs)")
    parser.add_argument("--runs", action="store_true", help="also list every run that is not finished")
    parser.add_argument("--json", action="store_true", help="print the status as JSON instead of a table")
    return parser.parse_args(argv)


@pipe_safe
def main(argv=None) -> int:
    args = parse_args(argv)

    if not args.root.is_dir():
        return report("kanx.status", f"{args.root} is not a folder")
    sweeps = collect(args.root)
    if not sweeps:
        print(f"no sweeps below {args.root} (no beta=..,seed=.. run folder, record, checkpoint or manifest.json)")
        return 1
    if args.json:
        out = [{"sweep": s.path, "dataset": s.dataset, "condition": s.condition, "tag": s.tag, "expected": len(s.runs),
                "expected_from": s.expected_from, **s.counts, "eta_s": s.eta_s,
                "runs": [{"beta": r.beta, "seed": r.seed, "state": r.state, "epoch": r.epoch, "why": r.why}
                         for r in s.runs]} for s in sweeps]
        print(json.dumps(out, indent=1))
        return 0
    print(format_table(sweeps))
    if args.runs:
        text = format_runs(sweeps, args.root)
        print("\n" + (text or "every run is finished"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
