"""Training curves: each run's metrics.csv, a row every `train.log_every` epochs.

Columns (a member's own condition decides which exist):
    epoch        epochs finished
    loss         mean training loss of the epoch (L_data + beta (log n / n) L_C where L_C acts)
    data_loss    mean L_data of the epoch (the exit-weighted MSE with X)
    val_rmse     the held-out error of the model as it is at the row's epoch (HeldOut): the RMSE, in
                 the data's units and through the record's inference gates, on the validation split
                 (dataset.val_fraction); test_rmse where the run has none. A dynamical system's is
                 the one-step error, val_rmse_one_step or test_rmse_one_step (no rollouts at the
                 cadence). Its last row's value is the record's metric of that name, within float
                 rounding (the record scores model.pt alone, on the CPU, with one thread)
    lc           L_C at the epoch's end (Eq. approx-model-complexity, or reachability-mdl-compact with X)
    beta         the beta in force (0 during the warmup, and for Baseline and F)
    open_gates   open edges at the epoch's end (deterministic gates; every existing edge without E),
                 counted over the whole network, every exit head's included: the record's
                 open_gates (kanx.kan.structure) counts only those on the selected exit's path
    exit         the selected exit (argmax pi)
    pi_0..pi_L-1 the exit distribution (with X)
    tau_x        the exit-gate temperature of the epoch (with X)
    lr           the learning rate
    elapsed_s    training seconds so far
The rows are appended to the live file as they are made, on the log cadence, so a run in
training can be watched (`tail -f`, pandas); every checkpoint (periodic, or a signal's,
kanx.runner.Checkpointer) makes them durable (fsync), and a resumed run starts from the rows up to
its checkpoint's epoch, the ones after it (written before a hard kill) dropped, so the curve always
covers epochs 1 .. (last checkpoint or the end). The loggers (kanx.loggers: TensorBoard, MLflow, the
`logger=` config group) get the same rows, and each run's results once its record is written. The
file stays plain while the run trains; once the run finishes, kanx.runner stores it as
metrics.csv.gz (kanx.records.compress_curve) before sealing the record. Everything here reads
either (kanx.records.curve_path says which a run has).
"""

from __future__ import annotations

import csv
import gzip
import io
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import torch

from kanx import records, vocab
from kanx.data.metrics import rmse
from kanx.data.scaling import stack_scalings
from kanx.kan.objective import complexity
from kanx.loggers.base import Logger, Pack, RowLogger, final_results, open_logger
from kanx.trainer import Progress, Trainer

if TYPE_CHECKING:
    from kanx.data import Dataset, Scaling
    from kanx.kan.network import GatedKAN

METRICS, METRICS_GZ = vocab.METRICS, vocab.METRICS_GZ
log = logging.getLogger("kanx")
# Members times held-out rows one prediction of HeldOut takes at most: its activations are those of
# a batch this many rows long, so a large pack on a large split (Superconductor) stays within memory.
HELD_OUT_ROWS = 1 << 16


def default_every(epochs: int) -> int:
    """About 200 rows over a run: smooth curves at the paper's epochs, negligible cost."""
    return max(1, epochs // 200)


def held_out_split(ds: Dataset) -> str:
    """The split a run's curve scores: the validation split where the run has one, and then only
    it (a curve watched while tuning must not show the test set; the record holds test_rmse
    beside val_rmse for the end), else the test split."""
    return "val" if ds.n_val else "test"


def held_out_column(ds: Dataset) -> str:
    """The name of a run's held-out column: the record metric it reproduces on held_out_split. A
    dynamical system's is the one-step error (the record's test_rmse is its multi-step rollout error)."""
    split = held_out_split(ds)
    return f"{split}_rmse_one_step" if ds.dynamical else f"{split}_rmse"


class HeldOut:
    """Every member's held-out error, as its record will read it: member m's split of datasets[m]
    (held_out_column), scaled with scalings[m] as kanx.evaluate scores model.pt (float64 scaling,
    float32 model, RMSE in float64 and the data's units), predicted by the pack's model with its
    inference gates (GatedKAN.predict: deterministic gates, the selected exit, forward connections as
    the epoch had them). Prediction draws no noise, sets no mode and runs eagerly under no_grad (the
    fused basis is for training steps), so the training it watches is unchanged bit for bit."""

    def __init__(self, datasets: Sequence[Dataset], scalings: Sequence[Scaling], device: torch.device,
                 estimator: str):
        self.columns = [held_out_column(ds) for ds in datasets]
        split = held_out_split(datasets[0])  # a pack shares its data sizes (RunConfig.pack_key)
        self.x = torch.stack([s.x(getattr(ds, f"x_{split}")).to(torch.float32)
                              for s, ds in zip(scalings, datasets, strict=True)]).to(device)
        self.y = torch.stack([getattr(ds, f"y_{split}") for ds in datasets])  # raw, float64, on the CPU
        self.scaling, self.estimator = stack_scalings(scalings), estimator

    @torch.no_grad()
    def errors(self, model: GatedKAN) -> list[float]:
        """Each member's RMSE on its held-out rows now (M,), NaN where its predictions are not finite."""
        rows = max(1, HELD_OUT_ROWS // self.x.shape[0])
        pred = torch.cat([model.predict(x, self.estimator).cpu() for x in self.x.split(rows, dim=1)], dim=1)
        return rmse(self.scaling.y_inverse(pred.to(self.y.dtype)), self.y).tolist()


class Curves:
    """The curves of a pack's runs: each member's rows appended to its run's live metrics.csv on
    the cadence (one small write a member), and handed to ``logger`` (kanx.loggers), which gets
    each member's results too (log_results) and stays open until it has them all, or ``end``.
    With ``held_out``, each row has its member's held-out error too."""

    def __init__(self, run_dirs: list[Path], every: int, resume_epoch: int = 0, logger: RowLogger | None = None,
                 held_out: HeldOut | None = None):
        self.run_dirs, self.every, self.logger = [Path(d) for d in run_dirs], every, logger or Logger()
        self.held_out = held_out
        self._awaiting: set[int] | None = set(range(len(self.run_dirs)))  # members whose results the logger awaits
        self.columns: list[list[str] | None] = [_start(d, resume_epoch) for d in self.run_dirs]
        # Each member's live file stays open for appending while the pack trains (as many as the
        # process's file limit allows comfortably; the rest are opened per row): opening hundreds
        # of files per logged epoch cost far more than writing their lines.
        self._files: dict[int, TextIO] = {}
        self._max_open = _open_budget()

    @torch.no_grad()
    def add(self, trainer: Trainer, progress: Progress) -> None:
        """Rows for every member after an epoch, at the cadence (and after the last epoch),
        appended to each run's metrics.csv and logged."""
        if trainer.epoch % self.every and trainer.epoch != trainer.train_cfg.epochs:
            return
        model, cfg = trainer.model, trainer.train_cfg
        tau = trainer.tau_at(progress.epoch)
        lc = complexity(model, trainer.costs, trainer.exit_tau(tau)).cpu()
        open_gates = (model.inference_gates(trainer.estimator) > 0).sum(-1).cpu()  # existing edges only
        pi, exits = model.exit_probs().cpu(), model.selected_exit().cpu()
        beta = trainer.betas_at(progress.epoch)
        data = progress.data_loss.cpu() if progress.data_loss is not None else torch.full((trainer.M,), float("nan"))
        held_out = self._held_out_cells(model)
        # as Python numbers at once: indexing M tensors element by element costs more than the writes
        loss, data, lc = progress.loss.cpu().tolist(), data.tolist(), lc.tolist()
        open_gates, exits, pi = open_gates.tolist(), exits.tolist(), pi.tolist()
        rows = []
        for m, condition in enumerate(trainer.conditions):
            row = {"epoch": trainer.epoch, "loss": float(loss[m]), "data_loss": float(data[m]), **held_out[m],
                   "lc": float(lc[m]), "beta": beta[m], "open_gates": int(open_gates[m]), "exit": int(exits[m])}
            if condition.exits:
                row |= {f"pi_{k}": float(pi[m][k]) for k in range(model.L)} | {"tau_x": tau}
            row |= {"lr": cfg.lr, "elapsed_s": round(trainer.train_seconds, 3)}
            self.columns[m] = self._append(m, row)
            rows.append(row)
        self.logger.log(rows)

    def _held_out_cells(self, model: GatedKAN) -> list[dict[str, float]]:
        """Each member's held-out column and its error now ({} each without ``held_out``)."""
        if self.held_out is None:
            return [{} for _ in self.run_dirs]
        return [{column: error} for column, error in zip(self.held_out.columns, self.held_out.errors(model),
                                                          strict=True)]

    def _append(self, m: int, row: dict) -> list[str]:
        """Append ``row`` to member m's live file through its open handle (_append)."""
        path, columns = self.run_dirs[m] / METRICS, self.columns[m]
        # _append rewrites the file: a handle would point at the old one
        if columns is not None and list(row) != columns:
            self._close_file(m)
            return _append(path, columns, row)
        out = self._files.get(m)
        if out is None and len(self._files) < self._max_open:
            try:
                out = self._files[m] = open(path, "a", newline="")
            except OSError as e:
                raise records.cannot_write(path, e) from e
        return _append(path, columns, row, out)

    def _close_file(self, m: int) -> None:
        out = self._files.pop(m, None)
        if out is not None:
            try:
                out.close()
            except OSError as e:
                raise records.cannot_write(self.run_dirs[m] / METRICS, e) from e

    def flush(self) -> None:
        """Make the rows written so far durable (a checkpoint's: a resume keeps the rows up to its
        epoch, so they must survive whatever the checkpoint survives)."""
        for m, run_dir in enumerate(self.run_dirs):
            path = run_dir / METRICS
            try:
                if m in self._files:
                    os.fsync(self._files[m].fileno())
                elif path.is_file():
                    with open(path, "rb+") as f:
                        os.fsync(f.fileno())
            except OSError as e:
                raise records.cannot_write(path, e) from e
        self.logger.flush()

    def close(self, finished: bool = True, results: bool = False) -> None:
        """The training is over (``finished``, or stopped): the live files are closed, and the logger's
        runs end now, or, with ``results`` (a finished pack whose records follow), once each member's
        results are in (log_results), or at ``end``."""
        try:
            for m in list(self._files):
                self._close_file(m)
        finally:
            if not (finished and results):
                self.end(finished)

    def log_results(self, m: int, record: dict) -> None:
        """Member m's record is written: its results (kanx.loggers.final_results) go to the logger,
        whose runs end once every member's have."""
        if self._awaiting is None:
            return
        try:
            self.logger.log_results(m, final_results(record))
        except Exception as e:  # the run is trained and recorded: a tracker's hiccup fails no run
            why = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
            log.warning(f"{self.run_dirs[m]}: its results did not reach the logger ({type(e).__name__}"
                        f"{': ' + why if why else ''}); its record.json holds them")
        self._awaiting.discard(m)
        if not self._awaiting:
            self.end(finished=True)

    def end(self, finished: bool = False) -> None:
        """End the logger's runs, if they have not ended (a pack stopped before every record was written:
        not ``finished``)."""
        if self._awaiting is not None:
            self._awaiting = None
            self.logger.close(finished)


def pack_curves(jobs, trainer: Trainer, held_out: HeldOut | None = None) -> Curves:
    """The curves of a pack's runs (kanx.jobs.Job), from the trainer's epoch (a resume's
    checkpoint epoch) on, with the loggers of their config (`logger=`: kanx.loggers) and, with
    ``held_out``, each member's held-out error."""
    runs, cfg = [j.run for j in jobs], trainer.train_cfg
    tags = [{"dataset": r.data.name, "condition": r.condition.name, "beta": r.beta, "seed": r.seed,
             "config_hash": j.config_hash}
            for r, j in zip(runs, jobs, strict=True)]
    run_dirs = [j.run_dir for j in jobs]
    pack = Pack(tuple(run_dirs), tuple(tags), tuple(j.container for j in jobs), trainer.epoch,
                Path(jobs[0].container.get("results_root", ".")))
    logger = open_logger(runs[0].logger, pack)
    return Curves(run_dirs, cfg.log_every or default_every(cfg.epochs), trainer.epoch, logger, held_out)


def _start(run_dir: Path, resume_epoch: int) -> list[str] | None:
    """A run's live metrics.csv as its training (re)starts: the rows up to ``resume_epoch`` of
    its curve (either form), none on a fresh start. Returns its columns (None: no file yet)."""
    kept = _rows_before(records.curve_path(run_dir), resume_epoch) if resume_epoch else []
    live = run_dir / METRICS
    if not kept:
        live.unlink(missing_ok=True)
        return None
    write_rows(live, kept)
    return list(kept[0])


def _append(path: Path, columns: list[str] | None, row: dict, out: TextIO | None = None) -> list[str]:
    """Append ``row`` to the curve at ``path`` whose header is ``columns`` (None: no file yet, it
    is made with a header), through ``out`` (the file open for appending) or a file opened here.
    One write of one line, flushed, so a reader sees whole rows (a process killed mid-write leaves
    at most a cut last line, which readers drop). A row with other columns than the file's (a run
    resumed by a kanx that logs more) rewrites the file with both sets (through ``path``: a
    caller's open handle is stale after it). Returns the file's columns. Raises StorageError."""
    if columns is not None and list(row) != columns:
        rows = read_rows(path) + [row]
        write_rows(path, rows, columns=list(dict.fromkeys(k for r in rows for k in r)))
        return list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(row), lineterminator="\n")
    if columns is None:
        writer.writeheader()
    writer.writerow(row)
    try:
        if out is not None:
            out.write(buf.getvalue())
            out.flush()
        else:
            with open(path, "a", newline="") as f:
                f.write(buf.getvalue())
    except OSError as e:
        raise records.cannot_write(path, e) from e
    return list(row)


def _open_budget() -> int:
    """How many live files a pack keeps open: a quarter of the process's file limit, at most 1,024."""
    try:
        import resource
    except ImportError:  # not on Windows
        return 256
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(0, min(1024, (soft if soft != resource.RLIM_INFINITY else 4096) // 4))


def read_rows(path: Path | None) -> list[dict]:
    """The rows of a curve (metrics.csv or metrics.csv.gz), numbers as numbers ([] where there is none)."""
    if path is None or not Path(path).exists():
        return []
    with (gzip.open(path, "rt", newline="") if Path(path).name.endswith(".gz") else open(path, newline="")) as f:
        text = f.read()
    if not text.endswith("\n"):  # a process killed mid-append (_append): its cut last line goes
        text = text[: text.rfind("\n") + 1]
    # an empty field is a column the row's writer did not have (_append's rewrite): left out
    return [{k: _number(v) for k, v in row.items() if v != ""} for row in csv.DictReader(io.StringIO(text, newline=""))
            if None not in row.values()]


def write_rows(path: Path, rows: list[dict], columns: list[str] | None = None) -> None:
    """The rows as a curve at ``path`` (with ``columns``: those, a row's missing ones empty),
    gzipped where its name ends in .gz (metrics.csv.gz)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns or list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    data = buf.getvalue().encode()
    records.atomic_write_bytes(path, records.gzip_bytes(data) if Path(path).name.endswith(".gz") else data)


def _rows_before(path: Path | None, epoch: int) -> list[dict]:
    """The rows of an existing curve up to ``epoch`` (a resumed run's history)."""
    return [r for r in read_rows(path) if r["epoch"] <= epoch]


def _number(text: str):
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value
