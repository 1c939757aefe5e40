"""Where the configs are: the one answer every entry point composes from.

`python -m kanx.train` / `kanx-train`, kanx.plan (make reproduce-tables), the scripts and the
tests all ask `conf_dir()`. In a checkout (an editable install, the tests, `make`) it is the
top-level conf/, the one place the YAML is edited. An installed wheel has no checkout: there
pyproject.toml has shipped the same folder as the package data `kanx.conf`, which lies beside
this module (site-packages/kanx/conf), so no second copy is kept in git.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKOUT_CONF = HERE.parent / "conf"  # the checkout's conf/, beside pyproject.toml
INSTALLED_CONF = HERE / "conf"  # the package data kanx.conf of an installed wheel


def conf_dir() -> Path:
    """The config folder: the checkout's conf/ when kanx runs from a checkout, else the
    installed kanx.conf."""
    # pyproject.toml too, so that a stray top-level `conf` beside an installed kanx in
    # site-packages is not mistaken for a checkout.
    if (CHECKOUT_CONF / "config.yaml").is_file() and (HERE.parent / "pyproject.toml").is_file():
        return CHECKOUT_CONF
    if (INSTALLED_CONF / "config.yaml").is_file():
        return INSTALLED_CONF
    raise FileNotFoundError(f"kanx: no configs: neither {CHECKOUT_CONF} (a checkout) nor {INSTALLED_CONF} (an "
                            "installed wheel) holds config.yaml")


@contextmanager
def initialize_conf():
    """Hydra's compose API on conf_dir(): `with initialize_conf(): compose("config", ...)`."""
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        yield


# The preset `+debug=quick` (conf/debug/quick.yaml): a try of the pipeline, not the paper's protocol.
QUICK_TRY = "+debug=quick"


@functools.cache
def quick_try_settings() -> dict:
    """The settings `+debug=quick` puts in a run's config (conf/debug/quick.yaml, global package)."""
    import yaml

    return yaml.safe_load((conf_dir() / "debug" / "quick.yaml").read_text()) or {}


def _holds(config: Mapping, settings: Mapping) -> bool:
    return all(isinstance(config, Mapping) and key in config
               and (_holds(config[key], value) if isinstance(value, Mapping) else config[key] == value)
               for key, value in settings.items())


def is_quick_try(config: Mapping) -> bool:
    """Whether a run's config (a record's "config") holds every setting of `+debug=quick`: its
    numbers are a quick try's, not a result (kanx.runner's result line, kanx.analyze's report say so).
    A setting the command line changed after the preset (`+debug=quick train.epochs=50`) makes
    the run another protocol, not a quick try."""
    return _holds(config, quick_try_settings())
