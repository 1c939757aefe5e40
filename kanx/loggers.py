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
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import inspect
import json
import math
import os
import socket
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kanx.errors import ConfigError

LOGGERS = ("none", "tensorboard", "mlflow")  # the names of `logger.name`, the config of before 2026-12
TENSORBOARD_DIR = "tensorboard"  # in each run folder
MLFLOW_DB = "mlflow.db"  # the default MLflow store (SQLite), under results_root
MLFLOW_ARTIFACTS = "mlartifacts"  # the default store's artifacts, under results_root
RUN_DIR_TAG = "kanx.run_dir"  # an MLflow run's tag naming its kanx run folder (resolved)
STATUS_TAG = "kanx.status"  # an MLflow run's tag holding its record's status
FINAL = "final/"  # the prefix of a run's results among its curves' scalars and metrics (TensorBoard, MLflow)
# The loggers of conf/logger/ and the keys of their nodes: none of them names a run (kanx.identity
# keeps them out of the identity hash and the sweep folder's tag).
BUILT_IN = {"tensorboard": ("_target_",), "mlflow": ("_target_", "tracking_uri", "experiment", "artifact_location"),
            "wandb": ("_target_", "project", "entity", "group", "mode")}
_LEGACY_KEYS = frozenset({"name", "tracking_uri", "experiment"})


@dataclass(frozen=True)
class LoggerConfig:
    """The loggers a run's rows and results go to (`logger=`): each one's name and its config node
    (`_target_` and its keys) as canonical JSON, so that the config hashes (RunConfig.pack_key)."""

    loggers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, nodes: Mapping[str, Mapping]) -> LoggerConfig:
        return cls(tuple((name, json.dumps(dict(node), sort_keys=True)) for name, node in nodes.items()))

    def nodes(self) -> dict[str, dict]:
        """Name -> config node, in the config's order."""
        return {name: json.loads(node) for name, node in self.loggers}


def logger_config(node: Mapping | None) -> LoggerConfig:
    """The `logger` node of a config as a LoggerConfig: a mapping of names to logger nodes, each
    with a `_target_`; or, as configs and records of before 2026-12 hold it, `name` (LOGGERS) with
    `tracking_uri` and `experiment`. Raises ConfigError naming the bad value."""
    node = dict(node or {})
    if "name" in node and not isinstance(node["name"], Mapping) and set(node) <= _LEGACY_KEYS:
        return _legacy(node)
    for name, value in node.items():
        if not isinstance(value, Mapping) or not isinstance(value.get("_target_"), str) or not value["_target_"]:
            raise ConfigError(f"logger.{name}={value!r} is not a logger's config: a node with _target_ (a class with "
                              "kanx.loggers.Logger's methods) and its keys, as in conf/logger/tensorboard.yaml")
    return LoggerConfig.of(node)


def _legacy(node: dict) -> LoggerConfig:
    """`logger.name`, `logger.tracking_uri`, `logger.experiment` (before 2026-12) as the node of conf/logger/."""
    name, uri, experiment = node["name"], node.get("tracking_uri"), node.get("experiment", "kanx")
    if name not in LOGGERS:
        raise ConfigError(f"logger.name={name!r} is not one of: {', '.join(LOGGERS)}")
    if uri is not None and not isinstance(uri, str):
        raise ConfigError(f"logger.tracking_uri={uri!r} must be null (sqlite:///<results_root>/mlflow.db) or a URI")
    if not isinstance(experiment, str) or not experiment:
        raise ConfigError(f"logger.experiment={experiment!r} must be a name")
    if name == "none":
        return LoggerConfig()
    if name == "tensorboard":
        return LoggerConfig.of({"tensorboard": {"_target_": "kanx.loggers.TensorBoardLogger"}})
    return LoggerConfig.of({"mlflow": {"_target_": "kanx.loggers.MLflowLogger", "tracking_uri": uri,
                                       "experiment": experiment}})


@dataclass(frozen=True)
class Pack:
    """What a logger is opened for: a pack's members (one tracker run each), in the pack's order."""

    run_dirs: tuple[Path, ...]
    tags: tuple[dict, ...] = ()  # dataset, condition, beta, seed, config_hash a member
    configs: tuple[dict, ...] = ()  # each member's resolved config (what its record.json holds)
    resume_epoch: int = 0  # the epoch the pack resumes from (0: a fresh start)
    results_root: Path = field(default=Path("."))

    def __post_init__(self) -> None:
        n = len(self.run_dirs)
        object.__setattr__(self, "run_dirs", tuple(Path(d) for d in self.run_dirs))
        object.__setattr__(self, "tags", tuple(self.tags) or ({},) * n)
        object.__setattr__(self, "configs", tuple(self.configs) or ({},) * n)
        object.__setattr__(self, "results_root", Path(self.results_root))

    def hparams(self, m: int) -> dict[str, bool | int | float | str]:
        """Member m's hyperparameters: its resolved config without `logger` and `hydra`, flattened to
        dotted keys (lists as JSON text, null as "null"), then its tags (dataset, condition, beta,
        seed, config_hash) under their own names."""
        config = {k: v for k, v in self.configs[m].items() if k not in ("logger", "hydra")}
        return {**flatten(config), **{k: _hparam(v) for k, v in self.tags[m].items()}}


def flatten(node: Mapping, prefix: str = "") -> dict[str, bool | int | float | str]:
    """A nested config as one level of dotted keys, each value a bool, number or text."""
    out: dict[str, bool | int | float | str] = {}
    for key, value in node.items():
        if isinstance(value, Mapping) and value:
            out |= flatten(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = _hparam(value)
    return out


def _hparam(value) -> bool | int | float | str:
    if isinstance(value, bool | int | float | str):
        return value
    return json.dumps(value, default=str)


def final_results(record: Mapping) -> dict[str, float | str]:
    """What loggers get of a finished run (log_results): its status, and every number of its
    record's metrics (booleans, text, lists and nulls left out), whatever the record holds."""
    metrics = record.get("metrics") or {}
    numbers = {k: float(v) for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    return {"status": str(record.get("status")), **numbers}


class RowLogger(Protocol):
    def log(self, rows: Sequence[dict]) -> None:
        """One curve row a member (the pack's order), of one epoch."""

    def flush(self) -> None:
        """Everything logged so far on disk (a checkpoint's)."""

    def log_results(self, m: int, results: dict) -> None:
        """Member m's results (final_results), once its record is written."""

    def close(self, finished: bool = True) -> None:
        """The pack is over (``finished``: trained to the last epoch and scored; else stopped, e.g. by a signal)."""


class Logger:
    """A logger that does nothing: the base of a logger of one's own (override what it needs)."""

    def __init__(self, pack: Pack | None = None):
        self.pack = pack

    def log(self, rows: Sequence[dict]) -> None:
        pass

    def flush(self) -> None:
        pass

    def log_results(self, m: int, results: dict) -> None:
        pass

    def close(self, finished: bool = True) -> None:
        pass


NoLogger = Logger  # `logger=none`


class Loggers:
    """Several loggers as one: each call goes to every one, in the config's order."""

    def __init__(self, loggers: Sequence[RowLogger]):
        self.loggers = list(loggers)

    def log(self, rows: Sequence[dict]) -> None:
        for logger in self.loggers:
            logger.log(rows)

    def flush(self) -> None:
        for logger in self.loggers:
            logger.flush()

    def log_results(self, m: int, results: dict) -> None:
        for logger in self.loggers:
            if callable(getattr(logger, "log_results", None)):
                logger.log_results(m, results)

    def close(self, finished: bool = True) -> None:
        """Close every one, also when one of them raises (the first error is raised after)."""
        errors = []
        for logger in self.loggers:
            try:
                logger.close(finished)
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0]


def open_logger(cfg: LoggerConfig, pack: Pack) -> RowLogger:
    """The loggers ``cfg`` names, opened for ``pack`` (one Loggers; a Logger that does nothing for none)."""
    from hydra.utils import instantiate

    opened: list[RowLogger] = []
    try:
        for _, node in cfg.nodes().items():
            # the pack is handed to the class, not to Hydra: its configs hold loggers' nodes too
            opened.append(instantiate(node, _partial_=True, _recursive_=False)(pack=pack))
    except BaseException:
        Loggers(opened).close(finished=False)
        raise
    return Loggers(opened) if opened else Logger(pack)


# What each built-in logger imports when it opens: check_loggers imports the same, so an install
# that is there but broken is refused before compute too. Keyed by the package to install.
IMPORTS = {"tensorboard": ("tensorboard.compat.proto.event_pb2", "tensorboard.compat.proto.summary_pb2",
                           "tensorboard.plugins.hparams.plugin_data_pb2", "tensorboard.plugins.hparams.metadata"),
           "mlflow": ("mlflow", "mlflow.tracking", "mlflow.entities"),
           "wandb": ("wandb",)}
INSTALL = {"tensorboard": "pip install 'kanx[tensorboard]'", "mlflow": "pip install 'kanx[mlflow]'",
           "wandb": "pip install 'wandb>=0.19.10'"}
_NEEDS = {"kanx.loggers.TensorBoardLogger": "tensorboard", "kanx.loggers.MLflowLogger": "mlflow",
          "kanx.loggers.WandbLogger": "wandb"}
_METHODS = ("log", "flush", "close")


def check_loggers(cfg: LoggerConfig) -> None:
    """Refuse, before any compute (kanx.jobs), a logger that cannot open: its package not
    installed or broken (one line that says how to install it), its `_target_` not a logger class,
    or a key its class does not take. Imports what the run will."""
    for name, node in cfg.nodes().items():
        cls = _logger_class(name, node["_target_"])
        _check_keys(name, cls, {k for k in node if k != "_target_"})
        package = _NEEDS.get(node["_target_"])
        if package is not None:
            check_installed(package, name)


def check_installed(package: str, name: str | None = None) -> None:
    """Refuse a logger whose package is not installed, or does not import, in one line that says
    how to install it (``name``: the logger's name in the config, the package's by default)."""
    import importlib
    import importlib.util

    name = name or package
    if importlib.util.find_spec(package) is None:
        install = INSTALL.get(package, f"pip install {package}")
        raise ConfigError(f"logger={name} needs the {package} package: {install}")
    loads: list[tuple[str, Callable[[], object]]] = [(module, functools.partial(importlib.import_module, module))
                                                     for module in IMPORTS.get(package, (package,))]
    if package == "tensorboard":
        loads.append(("its checksum of event files", _masked_crc32c))
    for what, load in loads:
        try:
            load()
        except Exception as e:  # installed but broken: a dependency missing or of another version (protobuf's)
            why = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
            install = INSTALL.get(package, f"pip install {package}").replace("install", "install --force-reinstall", 1)
            raise ConfigError(f"logger={name}: the installed {package} does not import ({what}: {type(e).__name__}"
                              f"{': ' + why if why else ''}): reinstall it, {install}") from None


def _logger_class(name: str, target: str) -> type:
    from hydra.utils import get_class

    try:
        cls = get_class(target)
    except Exception as e:
        why = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        raise ConfigError(f"logger.{name}._target_={target!r} is not a class kanx can import ({why})") from None
    missing = [m for m in _METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise ConfigError(f"logger.{name}._target_={target!r} is no logger: it lacks {', '.join(missing)} "
                          "(subclass kanx.loggers.Logger)")
    return cls


def _check_keys(name: str, cls: type, keys: set[str]) -> None:
    """The node's keys must be parameters of the class (besides ``pack``), its required ones given."""
    params = inspect.signature(cls).parameters
    if "pack" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        raise ConfigError(f"logger.{name}: {cls.__module__}.{cls.__qualname__} takes no pack= (a logger's "
                          "constructor gets the pack it logs: kanx.loggers.Pack)")
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    own = [k for k, p in params.items() if k != "pack" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(keys - set(own))
    if unknown:
        hints = [f"logger.{name}.{k}" + (f" (did you mean logger.{name}.{m[0]}?)"
                                         if (m := difflib.get_close_matches(k, own, n=1)) else "") for k in unknown]
        raise ConfigError(f"unknown key(s) {', '.join(hints)}; logger.{name}.* takes: {', '.join(['_target_', *own])}")
    required = [k for k in own if params[k].default is inspect.Parameter.empty and k not in keys]
    if required:
        raise ConfigError(f"logger.{name} has no value for {', '.join(required)}: set it, e.g. "
                          f"+logger.{name}.{required[0]}=...")


def _extra(module: str, package: str):
    """Import an optional dependency, or say in one line how to install it."""
    import importlib

    check_installed(package)
    return importlib.import_module(module)


class TensorBoardLogger(Logger):
    """TensorBoard event files, one a run and process, written synchronously (no writer thread a
    member, no file held open: a pack has hundreds): each ``log`` appends one event a member
    holding all of a row's scalars, tagged by column, at step = epoch. The member's config goes in
    as HParams (the hparams plugin's session start) when the run opens, its results (final/<key>
    scalars at its last epoch, and the session's end: success unless it diverged) when it ends."""

    def __init__(self, pack: Pack):
        super().__init__(pack)
        _extra("tensorboard", "tensorboard")
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._event, self._summary, self._crc = Event, Summary, _masked_crc32c()
        name = f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{os.getpid()}.kanx"
        self.paths = [d / TENSORBOARD_DIR / name for d in pack.run_dirs]
        self.steps = [pack.resume_epoch] * len(self.paths)  # each member's last epoch logged: its results' step
        first = Event(wall_time=time.time(), file_version="brain.Event:2")
        # A resumed run: TensorBoard drops the earlier events from the checkpoint's next epoch on
        # (those a stopped process logged after its last checkpoint), as SummaryWriter(purge_step=).
        resume = pack.resume_epoch
        purge = Event(wall_time=time.time(), step=resume + 1, session_log=SessionLog(status=SessionLog.START))
        for m, path in enumerate(self.paths):
            path.parent.mkdir(parents=True, exist_ok=True)
            if not resume:  # a fresh start (overwrite=true, a lost checkpoint): the run's earlier events go
                for old in path.parent.glob("events.out.tfevents.*"):
                    old.unlink()
            self._write(path, [first, *([purge] if resume else []), self._hparams_event(pack.hparams(m))])

    def _hparams_event(self, hparams: dict):
        """The hparams plugin's session start: the member's config (what SummaryWriter.add_hparams writes)."""
        from tensorboard.plugins.hparams import metadata, plugin_data_pb2

        info = plugin_data_pb2.SessionStartInfo(start_time_secs=time.time())
        for key, value in hparams.items():
            if isinstance(value, bool):
                info.hparams[key].bool_value = value
            elif isinstance(value, int | float):
                info.hparams[key].number_value = value
            else:
                info.hparams[key].string_value = value
        return self._plugin_event(metadata.SESSION_START_INFO_TAG,
                                  plugin_data_pb2.HParamsPluginData(session_start_info=info), 0)

    def _plugin_event(self, tag: str, data, step: int):
        from tensorboard.plugins.hparams import metadata

        data.version = metadata.PLUGIN_DATA_VERSION
        value = self._summary.Value(tag=tag, metadata=metadata.create_summary_metadata(data))
        return self._event(wall_time=time.time(), step=step, summary=self._summary(value=[value]))

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
        for m, (path, row) in enumerate(zip(self.paths, rows, strict=True)):
            values = [self._summary.Value(tag=k, simple_value=float(v)) for k, v in row.items() if k != "epoch"]
            self.steps[m] = int(row["epoch"])
            self._write(path, [self._event(wall_time=now, step=self.steps[m], summary=self._summary(value=values))])

    def log_results(self, m: int, results: dict) -> None:
        from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

        step = self.steps[m]
        values = [self._summary.Value(tag=f"{FINAL}{k}", simple_value=v) for k, v in results.items()
                  if isinstance(v, float) and math.isfinite(v)]
        status = api_pb2.STATUS_FAILURE if results.get("status") in ("diverged", "failed") else api_pb2.STATUS_SUCCESS
        end = plugin_data_pb2.SessionEndInfo(status=status, end_time_secs=time.time())
        self._write(self.paths[m], [self._event(wall_time=time.time(), step=step, summary=self._summary(value=values)),
                                    self._plugin_event(metadata.SESSION_END_INFO_TAG,
                                                       plugin_data_pb2.HParamsPluginData(session_end_info=end), step)])


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


class MLflowLogger(Logger):
    """One MLflow run a kanx run, through MlflowClient (no global active run: a pack logs to
    hundreds at once); metrics at step = epoch; the member's config as params (Pack.hparams,
    flattened); its results as final/<key> metrics, its status as the tag kanx.status and its
    record.json as an artifact."""

    def __init__(self, pack: Pack, tracking_uri: str | None = None, experiment: str = "kanx",
                 artifact_location: str | None = None):
        super().__init__(pack)
        mlflow = _extra("mlflow", "mlflow")
        root = pack.results_root.resolve()
        if tracking_uri is None:  # the local store and its artifacts under results_root, not the launch folder
            tracking_uri = f"sqlite:///{root / MLFLOW_DB}"
            artifact_location = artifact_location or (root / MLFLOW_ARTIFACTS).as_uri()
        self.client = mlflow.tracking.MlflowClient(tracking_uri)
        self._metric, self._param = mlflow.entities.Metric, mlflow.entities.Param
        found = self.client.get_experiment_by_name(experiment)
        experiment_id = (found.experiment_id if found
                         else self.client.create_experiment(experiment, artifact_location=artifact_location))
        self.run_ids, self.ended, self.run_dirs = [], [False] * len(pack.run_dirs), pack.run_dirs
        self.steps = [pack.resume_epoch] * len(pack.run_dirs)  # each member's last epoch logged: its results' step
        for m, run_dir in enumerate(pack.run_dirs):
            key = str(run_dir.resolve())
            earlier = pack.resume_epoch and self.client.search_runs(
                [experiment_id], filter_string=f"tags.`{RUN_DIR_TAG}` = '{key}'",
                order_by=["attributes.start_time DESC"], max_results=1)
            if earlier:  # a resumed run continues its MLflow run (a fresh start makes a new one)
                run_id = earlier[0].info.run_id
                self.client.update_run(run_id, status="RUNNING")
            else:
                run = self.client.create_run(experiment_id, run_name=run_dir.name, tags={RUN_DIR_TAG: key})
                run_id = run.info.run_id
                self._log_params(run_id, pack.hparams(m))
            self.run_ids.append(run_id)

    def _log_params(self, run_id: str, hparams: dict) -> None:
        """The params in batches of MLflow's limits: 100 a call, values cut to its longest (6,000 characters)."""
        from mlflow.utils import validation

        longest = getattr(validation, "MAX_PARAM_VAL_LENGTH", 6000)
        batch = getattr(validation, "MAX_PARAMS_TAGS_PER_BATCH", 100)
        params = [self._param(k, str(v) if len(str(v)) <= longest else str(v)[: longest - 3] + "...")
                  for k, v in hparams.items()]
        for i in range(0, len(params), batch):
            self.client.log_batch(run_id, params=params[i: i + batch])

    def log(self, rows: Sequence[dict]) -> None:
        now = int(time.time() * 1000)
        for m, (run_id, row) in enumerate(zip(self.run_ids, rows, strict=True)):
            step = self.steps[m] = int(row["epoch"])
            self.client.log_batch(run_id, metrics=[self._metric(k, float(v), now, step)
                                                   for k, v in row.items() if k != "epoch"])

    def log_results(self, m: int, results: dict) -> None:
        run_id, now = self.run_ids[m], int(time.time() * 1000)
        numbers = {k: v for k, v in results.items() if isinstance(v, float) and math.isfinite(v)}
        self.client.log_batch(run_id, metrics=[self._metric(f"{FINAL}{k}", v, now, self.steps[m])
                                               for k, v in numbers.items()])
        self.client.set_tag(run_id, STATUS_TAG, str(results.get("status")))
        record = self.run_dirs[m] / "record.json"
        if record.is_file():
            self.client.log_artifact(run_id, str(record))
        self.client.set_terminated(run_id, status="FAILED" if results.get("status") == "failed" else "FINISHED")
        self.ended[m] = True

    def close(self, finished: bool = True) -> None:
        for run_id, ended in zip(self.run_ids, self.ended, strict=True):
            if not ended:
                self.client.set_terminated(run_id, status="FINISHED" if finished else "KILLED")


class WandbLogger(Logger):
    """An example of a logger kanx does not need (conf/logger/wandb.yaml): one W&B run a kanx run,
    in ``project`` (``entity``, ``group``: W&B's), its config the member's (Pack.hparams), the
    curve rows at step = epoch, the results in its summary. ``mode``: W&B's (null: WANDB_MODE's,
    online by default; `offline` keeps each run in its run folder's wandb/, `wandb sync` sends it).
    A resumed kanx run continues its W&B run (its id kept in wandb/kanx-run-id). W&B starts a
    service process and a run object per member: for packs of a few runs, not hundreds."""

    ID_FILE = "kanx-run-id"

    def __init__(self, pack: Pack, project: str = "kanx", entity: str | None = None, group: str | None = None,
                 mode: str | None = None):
        super().__init__(pack)
        wandb = _extra("wandb", "wandb")
        self.runs = []
        try:
            for m, run_dir in enumerate(pack.run_dirs):
                folder = run_dir / "wandb"
                folder.mkdir(parents=True, exist_ok=True)
                self.runs.append(wandb.init(project=project, entity=entity, group=group or run_dir.parent.name,
                                            name=run_dir.name, config=pack.hparams(m), dir=str(run_dir),
                                            id=self._run_id(folder, bool(pack.resume_epoch)), resume="allow",
                                            mode=mode, reinit="create_new"))
        except BaseException:
            self.close(finished=False)
            raise

    def _run_id(self, folder: Path, resume: bool) -> str:
        """The W&B run id of the kanx run: the one it had where it resumes, else a new one."""
        path = folder / self.ID_FILE
        if resume and path.is_file():
            return path.read_text().strip()
        run_id = hashlib.sha1(f"{folder.resolve()}:{time.time_ns()}".encode()).hexdigest()[:16]
        path.write_text(run_id + "\n")
        return run_id

    def log(self, rows: Sequence[dict]) -> None:
        for run, row in zip(self.runs, rows, strict=True):
            run.log({k: v for k, v in row.items() if k != "epoch"}, step=int(row["epoch"]))

    def log_results(self, m: int, results: dict) -> None:
        self.runs[m].summary.update(results)

    def close(self, finished: bool = True) -> None:
        for run in self.runs:
            run.finish(exit_code=0 if finished else 1)
        self.runs = []

