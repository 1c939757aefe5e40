"""Experiment trackers for the training curves: the rows kanx.curves appends to each run's
metrics.csv, written also where people watch runs (the `logger=` config group, conf/logger/).

A logger's only input is the curve rows: ``log(rows)`` gets one row a member, in the pack's
order, each the dict of a metrics.csv line (``epoch`` and the columns of kanx.curves), on the
log cadence (`train.log_every`). One tracker run per kanx run (a pack member).

    none         nothing beyond metrics.csv (the default)
    tensorboard  event files in each run folder's tensorboard/ (`tensorboard --logdir <results_root>`);
                 a resumed run's events after its checkpoint are purged, as SummaryWriter's
                 purge_step; a fresh start removes the folder's earlier event files
    mlflow       one MLflow run per kanx run, in the experiment `logger.experiment`, at
                 `logger.tracking_uri` (null: a local SQLite store, <results_root>/mlflow.db; MLflow 3
                 keeps its ./mlruns file store in maintenance mode only); a resumed run continues
                 its MLflow run (the newest with its run folder's tag), a fresh start makes a new one

TensorBoard and MLflow are optional extras (`pip install kanx[tensorboard]`, `kanx[mlflow]`),
imported only when their logger is chosen (check_installed imports what the run will). A logger
never decides what a run is: its config keys are not run-defining (kanx.identity.NOT_RUN_DEFINING).
"""

from __future__ import annotations

import functools
import os
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kanx.errors import ConfigError

LOGGERS = ("none", "tensorboard", "mlflow")
TENSORBOARD_DIR = "tensorboard"  # in each run folder
MLFLOW_DB = "mlflow.db"  # the default MLflow store (SQLite), under results_root
RUN_DIR_TAG = "kanx.run_dir"  # an MLflow run's tag naming its kanx run folder (resolved)


@dataclass(frozen=True)
class LoggerConfig:
    """Where the curve rows go besides metrics.csv (`logger=tensorboard`, `logger=mlflow`)."""

    name: str = "none"  # LOGGERS
    tracking_uri: str | None = None  # mlflow: null: sqlite:///<results_root>/mlflow.db
    experiment: str = "kanx"  # mlflow: the experiment the runs go to


class RowLogger(Protocol):
    def log(self, rows: Sequence[dict]) -> None:
        """One curve row a member (the pack's order), of one epoch."""

    def flush(self) -> None:
        """Everything logged so far on disk (a checkpoint's)."""

    def close(self, finished: bool = True) -> None:
        """Training ended (``finished``: to the last epoch; else stopped, e.g. by a signal)."""


class NoLogger:
    def log(self, rows: Sequence[dict]) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self, finished: bool = True) -> None:
        pass


def open_logger(cfg: LoggerConfig, run_dirs: Sequence[Path], tags: Sequence[dict], resume_epoch: int = 0,
                results_root: str | Path = ".") -> RowLogger:
    """The logger ``cfg`` names for a pack whose members write to ``run_dirs``; ``tags`` (one
    dict a member: dataset, condition, beta, seed) name each tracker run; ``resume_epoch``: the
    epoch the pack resumes from (0: a fresh start)."""
    if cfg.name == "none":
        return NoLogger()
    if cfg.name == "tensorboard":
        return TensorBoardLogger(run_dirs, resume_epoch)
    if cfg.name == "mlflow":
        return MLflowLogger(run_dirs, tags, cfg.tracking_uri or f"sqlite:///{Path(results_root).resolve() / MLFLOW_DB}",
                            cfg.experiment, resume_epoch)
    raise ConfigError(f"logger={cfg.name!r} is not one of: {', '.join(LOGGERS)}")


# What each logger imports when it opens (TensorBoardLogger, MLflowLogger): check_installed
# imports the same, so an install that is there but broken is refused before compute too.
IMPORTS = {"tensorboard": ("tensorboard.compat.proto.event_pb2", "tensorboard.compat.proto.summary_pb2"),
           "mlflow": ("mlflow", "mlflow.tracking", "mlflow.entities")}


def check_installed(cfg: LoggerConfig) -> None:
    """Refuse a logger whose package is not installed, or does not import, before any compute
    (kanx.jobs), in one line that says how to install it. The logger's modules are imported
    here, as the run imports them; `logger=none` imports nothing."""
    import importlib
    import importlib.util

    if cfg.name == "none":
        return
    if importlib.util.find_spec(cfg.name) is None:
        raise ConfigError(f"logger={cfg.name} needs the {cfg.name} package: pip install 'kanx[{cfg.name}]'")
    loads: list[tuple[str, Callable[[], object]]] = [(module, functools.partial(importlib.import_module, module))
                                                     for module in IMPORTS.get(cfg.name, (cfg.name,))]
    if cfg.name == "tensorboard":
        loads.append(("its checksum of event files", _masked_crc32c))
    for what, load in loads:
        try:
            load()
        except Exception as e:  # installed but broken: a dependency missing or of another version (protobuf's)
            why = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
            raise ConfigError(f"logger={cfg.name}: the installed {cfg.name} does not import ({what}: {type(e).__name__}"
                              f"{': ' + why if why else ''}): reinstall it, "
                              f"pip install --force-reinstall 'kanx[{cfg.name}]'") from None


def _extra(module: str, extra: str):
    """Import an optional dependency, or say in one line how to install it."""
    import importlib

    check_installed(LoggerConfig(name=extra))
    return importlib.import_module(module)


class TensorBoardLogger:
    """TensorBoard event files, one a run and process, written synchronously (no writer thread a
    member, no file held open: a pack has hundreds): each ``log`` appends one event a member
    holding all of a row's scalars, tagged by column, at step = epoch."""

    def __init__(self, run_dirs: Sequence[Path], resume_epoch: int = 0):
        _extra("tensorboard", "tensorboard")
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._event, self._summary, self._crc = Event, Summary, _masked_crc32c()
        name = f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{os.getpid()}.kanx"
        self.paths = [Path(d) / TENSORBOARD_DIR / name for d in run_dirs]
        first = Event(wall_time=time.time(), file_version="brain.Event:2")
        # A resumed run: TensorBoard drops the earlier events from the checkpoint's next epoch on
        # (those a stopped process logged after its last checkpoint), as SummaryWriter(purge_step=).
        purge = (Event(wall_time=time.time(), step=resume_epoch + 1, session_log=SessionLog(status=SessionLog.START))
                 if resume_epoch else None)
        for path in self.paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not resume_epoch:  # a fresh start (overwrite=true, a lost checkpoint): the run's earlier events go
                for old in path.parent.glob("events.out.tfevents.*"):
                    old.unlink()
            self._write(path, [e for e in (first, purge) if e is not None])

    def _write(self, path: Path, events: list) -> None:
        """Append ``events`` as TFRecords: length, its masked CRC-32C, data, the data's."""
        records = []
        for event in events:
            data = event.SerializeToString()
            header = struct.pack("<Q", len(data))
            records += [header, struct.pack("<I", self._crc(header)), data, struct.pack("<I", self._crc(data))]
        with open(path, "ab") as f:
            f.write(b"".join(records))

    def log(self, rows: Sequence[dict]) -> None:
        now = time.time()
        for path, row in zip(self.paths, rows, strict=True):
            values = [self._summary.Value(tag=k, simple_value=float(v)) for k, v in row.items() if k != "epoch"]
            self._write(path, [self._event(wall_time=now, step=int(row["epoch"]), summary=self._summary(value=values))])

    def flush(self) -> None:
        pass  # every log is written (not fsynced: the curve of record is metrics.csv)

    def close(self, finished: bool = True) -> None:
        pass


def _masked_crc32c():
    """TFRecord's masked CRC-32C: google-crc32c's C code where installed (the tensorboard extra
    brings it), else tensorboard's own, in Python (about 0.2 ms an event: 0.1 s a row for a pack
    of 500, against 1 us)."""
    try:
        import google_crc32c
    except ImportError:
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

        return masked_crc32c

    def masked(data: bytes) -> int:
        crc = google_crc32c.value(data)
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    return masked


class MLflowLogger:
    """One MLflow run a kanx run, through MlflowClient (no global active run: a pack logs to
    hundreds at once); metrics at step = epoch, the member's tags (dataset, condition, beta,
    seed) as params."""

    def __init__(self, run_dirs: Sequence[Path], tags: Sequence[dict], tracking_uri: str,
                 experiment: str, resume_epoch: int = 0):
        mlflow = _extra("mlflow", "mlflow")
        self.client = mlflow.tracking.MlflowClient(tracking_uri)
        self._metric = mlflow.entities.Metric
        found = self.client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else self.client.create_experiment(experiment)
        self.run_ids = []
        for run_dir, member in zip(run_dirs, tags, strict=True):
            key = str(Path(run_dir).resolve())
            earlier = resume_epoch and self.client.search_runs([experiment_id],
                                                               filter_string=f"tags.`{RUN_DIR_TAG}` = '{key}'",
                                                               order_by=["attributes.start_time DESC"], max_results=1)
            if earlier:  # a resumed run continues its MLflow run (a fresh start makes a new one)
                run_id = earlier[0].info.run_id
                self.client.update_run(run_id, status="RUNNING")
            else:
                run = self.client.create_run(experiment_id, run_name=Path(run_dir).name, tags={RUN_DIR_TAG: key})
                run_id = run.info.run_id
                for k, v in member.items():
                    self.client.log_param(run_id, k, v)
            self.run_ids.append(run_id)

    def log(self, rows: Sequence[dict]) -> None:
        now = int(time.time() * 1000)
        for run_id, row in zip(self.run_ids, rows, strict=True):
            step = int(row["epoch"])
            self.client.log_batch(run_id, metrics=[self._metric(k, float(v), now, step)
                                                   for k, v in row.items() if k != "epoch"])

    def flush(self) -> None:
        pass  # log_batch is synchronous

    def close(self, finished: bool = True) -> None:
        for run_id in self.run_ids:
            self.client.set_terminated(run_id, status="FINISHED" if finished else "KILLED")
