"""Experiment trackers: where a run's training curve and results go besides its folder (the
`logger=` config group, conf/logger/), so that runs can be watched and compared where people
already compare runs.

A logger is a class built from its config node, once per pack: hydra.utils.instantiate of the
node's `_target_` with ``pack`` (a Pack: the members' run folders, tags and resolved configs, the
epoch the pack resumes from, results_root) and the node's other keys. kanx then calls

    log(rows)                one curve row a member (the pack's order), each the dict of a metrics.csv
                             line (``epoch`` and the columns of kanx.curves), on the log cadence
    flush()                  everything logged so far on disk (at each checkpoint)
    log_results(m, results)  member m's results once its record is written (final_results: its
                             status and every number of its record's metrics: test errors,
                             contributing edges, depth, exit, validation errors where the record has them)
    close(finished)          the pack is over (``finished``: trained to the end and scored; else stopped)

`Logger` has them all, doing nothing, to subclass. One tracker run per kanx run (a pack member),
with the member's resolved config as its hyperparameters (Pack.hparams: flattened, dotted keys).
Each file of conf/logger/ puts its node under its own name, so several merge into one `logger`
node: `logger=[tensorboard,mlflow]` (Hydra's list of a group's options) or `logger=many`.

    none         nothing beyond metrics.csv (the default)
    tensorboard  event files in each run folder's tensorboard/ (`tensorboard --logdir <results_root>`):
                 the curves as scalars, the config as HParams, the results as final/<key> scalars; a
                 resumed run's events after its checkpoint are purged, as SummaryWriter's purge_step;
                 a fresh start removes the folder's earlier event files
    mlflow       one MLflow run per kanx run, in the experiment `logger.mlflow.experiment`, at
                 `logger.mlflow.tracking_uri` (null: a local SQLite store, <results_root>/mlflow.db; MLflow 3
                 keeps its ./mlruns file store in maintenance mode only), its artifacts (record.json)
                 under <results_root>/mlartifacts; a resumed run continues its MLflow run (the newest
                 with its run folder's tag), a fresh start makes a new one
    wandb        an example of a logger kanx does not need: one W&B run per kanx run (WandbLogger;
                 WANDB_MODE=offline keeps them in each run folder's wandb/)

TensorBoard, MLflow and W&B are optional (`pip install kanx[tensorboard]`, `kanx[mlflow]`,
`wandb`), imported only when their logger is chosen (check_loggers imports what the run will,
before any compute). A logger never decides what a run is: its config keys are not
run-defining (kanx.identity.NOT_RUN_DEFINING). The config of before 2026-12 (`logger.name`,
`logger.tracking_uri`, `logger.experiment`, as older records hold it) still reads (logger_config).

The package: kanx.loggers.base holds what every logger shares (the config, Pack, Logger, Loggers,
open_logger, and check_loggers before any compute); each tracker is one module of its own
(kanx.loggers.tensorboard, .mlflow, .wandb), with kanx.loggers.checksum for TensorBoard's event
files. Every name is re-exported here, so `_target_: kanx.loggers.TensorBoardLogger` (conf/logger/,
records' configs) and `kanx.loggers.Logger` keep working.
"""

from kanx.loggers.base import (
    BUILT_IN,
    FINAL,
    IMPORTS,
    INSTALL,
    LOGGERS,
    Logger,
    LoggerConfig,
    Loggers,
    NoLogger,
    Pack,
    RowLogger,
    check_installed,
    check_loggers,
    final_results,
    flatten,
    logger_config,
    open_logger,
)
from kanx.loggers.mlflow import MLFLOW_ARTIFACTS, MLFLOW_DB, RUN_DIR_TAG, STATUS_TAG, MLflowLogger
from kanx.loggers.tensorboard import TENSORBOARD_DIR, TensorBoardLogger
from kanx.loggers.wandb import WandbLogger

__all__ = ["BUILT_IN", "FINAL", "IMPORTS", "INSTALL", "LOGGERS", "MLFLOW_ARTIFACTS", "MLFLOW_DB", "RUN_DIR_TAG",
           "STATUS_TAG", "TENSORBOARD_DIR", "Logger", "LoggerConfig", "Loggers", "MLflowLogger", "NoLogger", "Pack",
           "RowLogger", "TensorBoardLogger", "WandbLogger", "check_installed", "check_loggers", "final_results",
           "flatten", "logger_config", "open_logger"]
