"""Training curves: each run's metrics.csv, a row every `train.log_every` epochs.

Columns (a member's own condition decides which exist):
    epoch        epochs finished
    loss         mean training loss of the epoch (L_data + beta (log n / n) L_C where L_C acts)
    data_loss    mean L_data of the epoch (the exit-weighted MSE with X)
    lc           L_C at the epoch's end (Eq. approx-model-complexity, or reachability-mdl-compact with X)
    beta         the beta in force (0 during the warmup, and for Baseline and F)
    open_gates   open edges at the epoch's end (deterministic gates; every existing edge without E)
    exit         the selected exit (argmax pi)
    pi_0..pi_L-1 the exit distribution (with X)
    tau_x        the exit-gate temperature of the epoch (with X)
    lr           the learning rate
    elapsed_s    training seconds so far
The file is rewritten atomically at every checkpoint (periodic, or a signal's, kanx.runner.Checkpointer)
and at the end, and a resumed run keeps the rows it had, so it always covers epochs 1 .. (last
checkpoint or the end). It stays plain while the run trains; once the run finishes, kanx.runner
stores it as metrics.csv.gz (kanx.records.compress_curve) before sealing the record. Everything
here reads either (kanx.records.curve_path says which a run has).
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from pathlib import Path

import torch

from kanx import history, records, vocab
from kanx.hashing import sha256_of
from kanx.kan.objective import complexity
from kanx.trainer import Progress, Trainer

METRICS, METRICS_GZ = vocab.METRICS, vocab.METRICS_GZ


def default_every(epochs: int) -> int:
    """About 200 rows over a run: smooth curves at the paper's epochs, negligible cost."""
    return max(1, epochs // 200)


class Curves:
    def __init__(self, run_dirs: list[Path], every: int, resume_epoch: int = 0):
        self.run_dirs, self.every = [Path(d) for d in run_dirs], every
        self.rows: list[list[dict]] = [_rows_before(records.curve_path(d), resume_epoch) if resume_epoch else [] for d in self.run_dirs]

    @torch.no_grad()
    def add(self, trainer: Trainer, progress: Progress) -> None:
        """Rows for every member after an epoch, at the cadence (and after the last epoch)."""
        if trainer.epoch % self.every and trainer.epoch != trainer.train_cfg.epochs:
            return
        model, cfg = trainer.model, trainer.train_cfg
        tau = trainer.tau_at(progress.epoch)
        lc = complexity(model, trainer.costs, trainer.exit_tau(tau)).cpu()
        open_gates = (model.inference_gates(trainer.estimator) > 0).sum(-1).cpu()  # existing edges only
        pi, exits = model.exit_probs().cpu(), model.selected_exit().cpu()
        beta = trainer.betas_at(progress.epoch)
        data = progress.data_loss.cpu() if progress.data_loss is not None else torch.full((trainer.M,), float("nan"))
        loss = progress.loss.cpu()
        for m, condition in enumerate(trainer.conditions):
            row = {"epoch": trainer.epoch, "loss": float(loss[m]), "data_loss": float(data[m]), "lc": float(lc[m]), "beta": beta[m],
                   "open_gates": int(open_gates[m]), "exit": int(exits[m])}
            if condition.exits:
                row |= {f"pi_{k}": float(pi[m, k]) for k in range(model.L)} | {"tau_x": tau}
            row |= {"lr": cfg.lr, "elapsed_s": round(trainer.train_seconds, 3)}
            self.rows[m].append(row)

    def flush(self, upto: int | None = None) -> None:
        """Write every member's rows (up to epoch ``upto``: a checkpoint's), as the plain, live file."""
        for run_dir, rows in zip(self.run_dirs, self.rows, strict=True):
            rows = [r for r in rows if upto is None or r["epoch"] <= upto]
            if rows:
                _write_rows(run_dir / METRICS, rows)


def _read_rows(path: Path | None) -> list[dict]:
    """The rows of a curve (metrics.csv or metrics.csv.gz), numbers as numbers ([] where there is none)."""
    if path is None or not Path(path).exists():
        return []
    with (gzip.open(path, "rt", newline="") if Path(path).name.endswith(".gz") else open(path, newline="")) as f:
        return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]


def _write_rows(path: Path, rows: list[dict]) -> None:
    """The rows as a curve at ``path``, gzipped where its name ends in .gz (metrics.csv.gz)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    data = buf.getvalue().encode()
    records.atomic_write_bytes(path, records.gzip_bytes(data) if Path(path).name.endswith(".gz") else data)


def _put(run_dir: Path, name: str, rows: list[dict]) -> None:
    """Make ``rows`` the run's curve, as ``name`` (metrics.csv or metrics.csv.gz): written first,
    then the other form removed, so the run never holds neither."""
    _write_rows(Path(run_dir) / name, rows)
    for other in vocab.CURVES:
        if other != name:
            (Path(run_dir) / other).unlink(missing_ok=True)


def _rows_before(path: Path | None, epoch: int) -> list[dict]:
    """The rows of an existing curve up to ``epoch`` (a resumed run's history)."""
    return [r for r in _read_rows(path) if r["epoch"] <= epoch]


def splice(earlier: Path, later: Path) -> int:
    """Extend the curve at ``earlier`` by the curve at ``later`` of the same run, written by a
    process that resumed it without ``earlier`` at hand (a time-boxed run on an offline GPU node,
    whose copied tree leaves the curves behind): ``earlier``'s rows before ``later``'s first epoch, then all of ``later``'s, as a resume
    with both present would have written them. Where ``earlier`` already reaches ``later``'s last
    epoch (the run went further here meanwhile, or finished), it is left as it is. A finished run's
    done marker that vouched for either curve vouches for the spliced one. Returns the number of
    rows written (0: left as it is).

    Either may be plain or gzipped (metrics.csv.gz: the run finished there). The spliced curve
    takes ``later``'s form, the newer state of the run, in ``earlier``'s folder, and the other form
    there goes (a checkpointed run's metrics.csv here, finished there: metrics.csv.gz)."""
    earlier, later = Path(earlier), Path(later)
    spliced = _joined(_read_rows(earlier), _read_rows(later))
    if spliced is None:
        return 0
    was = {sha256_of(p) for p in (earlier, later) if p.is_file()}
    _put(earlier.parent, later.name, spliced)
    # A run the window finished was sealed with the curve of its last stretch only: the whole
    # curve replaces it on purpose, so its done marker must vouch for it, or the curve reads as damaged.
    history.vouch_for_rewritten_curve(earlier.parent, was)
    return len(spliced)


def _joined(have: list[dict], rows: list[dict]) -> list[dict] | None:
    """A run's earlier rows (``have``) followed by the rows a later stretch wrote (``rows``); None
    where the later rows add nothing (there are none, or ``have`` already goes as far)."""
    if not rows or (have and have[-1]["epoch"] >= rows[-1]["epoch"]):
        return None
    return [r for r in have if r["epoch"] < rows[0]["epoch"]] + rows


def put_back(stashed: Path, run_dir: Path) -> bool:
    """scripts/offline_gpu/stash.sh back: a curve set aside (``stashed``, plain or .gz) returns to its run
    folder. Where the run has a curve again (it resumed meanwhile without the set-aside rows),
    the two are spliced (``splice``: the set-aside rows, then those written since; where the
    set-aside curve goes as far, it is the whole curve) and the run's done marker vouches for
    the result where it vouched for either. Returns whether it spliced."""
    stashed, run_dir = Path(stashed), Path(run_dir)
    here = records.curve_path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if here is None:
        os.replace(stashed, run_dir / stashed.name)
        return False
    was = {sha256_of(stashed), sha256_of(here)}
    spliced = _joined(_read_rows(stashed), _read_rows(here))
    if spliced is not None:
        _put(run_dir, here.name, spliced)
        stashed.unlink()
    else:
        os.replace(stashed, run_dir / stashed.name)
        for other in vocab.CURVES:
            if other != stashed.name:
                (run_dir / other).unlink(missing_ok=True)
    history.vouch_for_rewritten_curve(run_dir, was)  # a run that finished meanwhile sealed the rows written since only
    return True


def _number(text: str):
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def read_history(run_dir: str | Path):
    """A run's curve (metrics.csv or metrics.csv.gz) as a pandas DataFrame (None if the run has
    none; kanx.history.CurveError if it is damaged)."""
    return history.read_history(run_dir)


def main(argv=None) -> int:
    """python -m kanx.curves splice LATER_ROOT [ROOT]: splice every curve under LATER_ROOT
    (metrics.csv or metrics.csv.gz) onto the curve of the same run folder under ROOT (default:
    the current directory); see ``splice``."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m kanx.curves", description=main.__doc__)
    p.add_argument("command", choices=["splice"])
    p.add_argument("later_root", type=Path)
    p.add_argument("root", type=Path, nargs="?", default=Path("."))
    a = p.parse_args(argv)
    if not a.later_root.is_dir():
        p.error(f"later_root {a.later_root} is not a folder")
    n = kept = 0
    folders = sorted({p.parent for name in vocab.CURVES for p in a.later_root.rglob(name) if p.is_file()})
    for folder in folders:
        later = records.curve_path(folder)
        target_dir = a.root / folder.relative_to(a.later_root)
        target_dir.mkdir(parents=True, exist_ok=True)
        if splice(records.curve_path(target_dir) or target_dir / later.name, later):
            n += 1
        else:
            kept += 1
    print(f"spliced {n} training curves from {a.later_root} into {a.root}; {kept} here already went as far, kept")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
