"""What every logger shares (kanx.loggers, where the loggers are described): the `logger` config
(LoggerConfig, logger_config, with the form of before 2026-12), the pack a logger opens for (Pack),
the methods kanx calls (RowLogger; Logger does nothing, to subclass), several loggers as one
(Loggers, open_logger), and the checks before any compute (check_loggers: the class, its keys, its
package installed and importing). The trackers are one module each: kanx.loggers.tensorboard,
kanx.loggers.mlflow, kanx.loggers.wandb."""

from __future__ import annotations

import difflib
import functools
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kanx.errors import ConfigError
from kanx.loggers.checksum import load_masked_crc32c

LOGGERS = ("none", "tensorboard", "mlflow")  # the names of `logger.name`, the config of before 2026-12
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
# The package each built-in logger needs, by where its class is defined: a `_target_` may name it
# there or as kanx.loggers re-exports it (conf/logger/), the same class either way.
_NEEDS = {"kanx.loggers.tensorboard.TensorBoardLogger": "tensorboard", "kanx.loggers.mlflow.MLflowLogger": "mlflow",
          "kanx.loggers.wandb.WandbLogger": "wandb"}
_METHODS = ("log", "flush", "close")


def check_loggers(cfg: LoggerConfig) -> None:
    """Refuse, before any compute (kanx.jobs), a logger that cannot open: its package not
    installed or broken (one line that says how to install it), its `_target_` not a logger class,
    or a key its class does not take. Imports what the run will."""
    for name, node in cfg.nodes().items():
        cls = _logger_class(name, node["_target_"])
        _check_keys(name, cls, {k for k in node if k != "_target_"})
        package = _NEEDS.get(f"{cls.__module__}.{cls.__qualname__}")
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
        loads.append(("its checksum of event files", load_masked_crc32c))
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


def import_extra(module: str, package: str):
    """Import an optional dependency, or say in one line how to install it."""
    import importlib

    check_installed(package)
    return importlib.import_module(module)
