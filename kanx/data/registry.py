"""The dataset registry and `load_dataset`: names, options and their defaults in one table.

Defaults follow the hyperparameter table (n_train / n_test per dataset) and the text of
Secs. "Forecasting dynamical systems" and "Real-world data". Every random draw (sample
points, initial conditions, splits) comes from `data_seed`.
"""

from __future__ import annotations

import hashlib
import json
import numbers
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kanx.data import dynamics, synthetic, tabular
from kanx.data.dataset import Dataset, family_of
from kanx.data.validation import carve_validation
from kanx.errors import ConfigError


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset: its builder and the options it takes, with their defaults."""

    name: str
    build: Callable[..., Dataset]  # build(name, data_seed, **options)
    defaults: Mapping[str, Any]
    summary: str

    @property
    def family(self) -> str:
        return family_of(self.name)


_SIZES = {"n_train": 1024, "n_test": 256}
# The function datasets' own option: k distractor inputs, uniform noise the target ignores (issue #38).
_FUNCTION_OPTIONS = {**_SIZES, "distractors": 0}
_ROLLOUT = {"horizon": None, "n_rollouts": None}  # None, None: one rollout over the whole test segment


def _function_specs() -> dict[str, DatasetSpec]:
    return {
        name: DatasetSpec(name, synthetic.make_function_dataset, _FUNCTION_OPTIONS,
                          f"{p.formula}, uniform on {p.domain}")
        for name, p in synthetic.PROBLEMS.items()
    }


DATASETS: dict[str, DatasetSpec] = {
    **_function_specs(),  # sin_xy2, nguyen_f1 ... nguyen_f10
    "ikeda": DatasetSpec(
        "ikeda", dynamics.make_ikeda,
        {"n_train": 6400, "n_test": 1600, "transient": 3000, **_ROLLOUT},
        "Ikeda map (mu = 0.9), one-step pairs in time order",
    ),
    "ecosystem": DatasetSpec(
        "ecosystem", dynamics.make_ecosystem,
        {"n_train": 3000, "n_test": 750, "transient": 3000, "dt": 0.5, "extinction_threshold": 0.5,
         "max_draws": 50, **_ROLLOUT},
        "three-species food chain (K = 0.98), RK4 h = 0.1 sampled every dt, one-step pairs",
    ),
    "concrete": DatasetSpec(
        "concrete", tabular.make_concrete, {"n_train": 824, "n_test": 206, "data_dir": None},
        "UCI concrete compressive strength (MPa), 8 raw + 5 derived inputs",
    ),
    "superconductor": DatasetSpec(
        "superconductor", tabular.make_superconductor, {"n_train": 1000, "n_test": 1000, "data_dir": None},
        "UCI superconductor critical temperature (K), 5 inputs",
    ),
    "csv": DatasetSpec(
        "csv", tabular.make_csv,
        {"path": None, "target": None, "features": None, "test_fraction": 0.2, "n_train": None, "n_test": None},
        "your own numeric CSV table: path=FILE target=COLUMN, named by dataset.name (default: the file's stem)",
    ),
}

# Accepted by every dataset so that one config key serves all; only the real-data
# loaders read it (it is dropped for the others).
SHARED_OPTIONS = ("data_dir",)


# ----------------------------------------------------------------------- option checks
def _int(minimum: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
            raise ValueError(f"an integer >= {minimum}")
        return int(value)

    return check


def _real(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != value:
        raise ValueError("a number")
    return float(value)


def _positive(value: Any) -> float:
    if _real(value) <= 0:
        raise ValueError("a number > 0")
    return float(value)


def _fraction(value: Any) -> float:
    if not 0 < _real(value) < 1:
        raise ValueError("a number strictly between 0 and 1")
    return float(value)


def _path(value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise ValueError("a file or folder path")
    return str(value)


def _columns(value: Any) -> str | list[str]:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) and v for v in value):
        if len(set(value)) < len(value):
            raise ValueError("column names without repeats")
        return list(value)
    raise ValueError("a column name or a non-empty list of column names")


def _column_list(value: Any) -> list[str]:
    columns = _columns(value)
    return [columns] if isinstance(columns, str) else columns


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "n_train": _int(1),
    "n_test": _int(1),
    "distractors": _int(0),
    "transient": _int(0),
    "horizon": _int(1),
    "n_rollouts": _int(1),
    "max_draws": _int(1),
    "dt": _positive,
    "extinction_threshold": _real,
    "test_fraction": _fraction,
    "data_dir": _path,
    "path": _path,
    "target": _columns,
    "features": _column_list,
}


def resolve_options(spec: DatasetSpec, options: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's defaults updated with `options`, each value checked.

    None is accepted exactly where the default is None (it means "not set").
    """
    allowed = [*spec.defaults, *(o for o in SHARED_OPTIONS if o not in spec.defaults)]
    unknown = [k for k in options if k not in allowed]
    if unknown:
        raise ConfigError(f"dataset {spec.name!r} has no option {', '.join(map(repr, unknown))}; its options are: "
                          f"{', '.join(allowed)}")
    resolved = dict(spec.defaults)
    for key, value in options.items():
        if key not in spec.defaults:  # a shared option this dataset does not read
            continue
        if value is None and spec.defaults[key] is None or _empty_data_dir_variable(key, value):
            resolved[key] = None
            continue
        try:
            resolved[key] = _CHECKS[key](value)
        except ValueError as expected:
            example = f"; the default is {key}={spec.defaults[key]!r}" if spec.defaults[key] is not None else ""
            raise ConfigError(f"dataset {spec.name!r}: option {key}={value!r} is "
                              f"invalid, expected {expected}{example}") from None
    return resolved


def _empty_data_dir_variable(key: str, value: Any) -> bool:
    """Whether ``value`` is an empty KANX_DATA_DIR passed through by conf/dataset/*.yaml
    (${oc.env:KANX_DATA_DIR,null} gives '' for a variable set to nothing, as the Makefile did
    without ../shared): not set, as kanx.data.tabular.search_dirs reads the variable itself."""
    return key == "data_dir" and value == "" and os.environ.get("KANX_DATA_DIR") == ""


def _check_seed(data_seed: Any) -> int:
    if isinstance(data_seed, bool) or not isinstance(data_seed, numbers.Integral) or data_seed < 0:
        raise ConfigError(f"data_seed={data_seed!r} must be a non-negative integer (by default the run's seed)")
    return int(data_seed)


# A dataset's name becomes a folder of the results root and a row of the tables.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def check_name(name: Any, loader: str) -> str:
    """The name a `loader` (e.g. csv) dataset is stored and reported under: a plain folder
    name that is not another registered dataset's."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"dataset name {name!r} is not a plain name (letters, digits, _ . + -, no spaces or "
                          "slashes); give one with dataset.name=NAME, e.g. dataset.name=mydata")
    if name != loader and name in DATASETS:
        raise ConfigError(f"dataset name {name!r} is a registered dataset; name your {loader} table something else, "
                          f"e.g. dataset.name=my_{name}")
    return name


def check_val_fraction(value: Any) -> float:
    """dataset.val_fraction: a number from 0 (no validation split, the paper's protocol) up to, not
    including, 1. Raises ConfigError."""
    try:
        fraction = _real(value)
    except ValueError:
        fraction = -1.0
    if not 0 <= fraction < 1:
        raise ConfigError(f"dataset.val_fraction={value!r} must be a number from 0 (no validation split) up to, "
                          "not including, 1, e.g. 0.2")
    return fraction


def load_dataset(name: str, *, data_seed: int, loader: str | None = None, val_fraction: float = 0.0,
                 **options: Any) -> Dataset:
    """Build the registered dataset `name` (or, with `loader`, the registered dataset
    `loader` under the name `name`: a CSV table called "mydata") from `data_seed` and its
    options; with `val_fraction`, a validation split carved from its training data
    (dataset.carve_validation).

    Raises ConfigError for an unknown name, an unknown or invalid option, and DataError
    for a data file that is missing or fails its checks.
    """
    spec = DATASETS.get(name if loader is None else loader)
    if spec is None:
        raise ConfigError(f"unknown dataset {loader or name!r}; choose one of: {', '.join(DATASETS)}")
    if loader is not None:
        name = check_name(name, loader)
    seed = _check_seed(data_seed)
    fraction = check_val_fraction(val_fraction)
    resolved = resolve_options(spec, options)
    ds = spec.build(name, seed, **resolved)
    if ds.dynamical:
        resolved["horizon"] = ds.horizon  # None resolved to the actual rollout length
    ds = replace(ds, options=resolved)
    return carve_validation(ds, fraction) if fraction else ds


# Part of every generated dataset's identity: raise it when a generator draws different data
# for the same options and seed (a changed formula, integrator or sampling order), so that
# records of the old draws are not taken for the new ones.
GENERATOR_VERSION = "kanx.data generators v1"


# Options added after records existed, with the value that generates the data of before: left
# out of the data hash at that value, so every committed record keeps its data_hash.
OPTIONS_ADDED_LATER = {"distractors": 0}
_NONE = object()


def data_hash(ds: Dataset) -> str:
    """The identity of a dataset's content, 16 hex digits: a data file's sha256 (tabular
    and CSV data), else a hash of what generated it (GENERATOR_VERSION, the generator's
    parameters in ds.provenance, the options and the data seed)."""
    if "sha256" in ds.provenance:
        if ds.options.get("val_fraction"):  # the file's rows, split otherwise for training
            split = f"{ds.provenance['sha256']} val_fraction={ds.options['val_fraction']!r} data_seed={ds.data_seed}"
            return hashlib.sha256(split.encode()).hexdigest()[:16]
        return str(ds.provenance["sha256"])[:16]
    options = {k: v for k, v in ds.options.items() if OPTIONS_ADDED_LATER.get(k, _NONE) != v}
    made = {"generator": GENERATOR_VERSION, "name": ds.name, "provenance": ds.provenance, "options": options,
            "data_seed": ds.data_seed}
    return hashlib.sha256(json.dumps(made, sort_keys=True, default=str).encode()).hexdigest()[:16]
