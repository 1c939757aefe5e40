"""What makes two runs the same run: their resolved configs without the keys that do not change a
run's numbers. Torch-free and plain (json, hashlib), so the runner (a record of another config in a
run's folder is refused), the analysis (a cell pools only records of one config) and anything else
that compares records read one set of rules.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from kanx.loggers.base import BUILT_IN
from kanx.vocab import FACTOR_REGISTRY

# Keys that do not change a run's numbers: left out of its identity hash, and out of its
# sweep folder's tag (TAG_EXCLUDED): `logger=tensorboard` (the group), the keys of conf/logger/'s
# loggers (logger.mlflow.experiment, ...) and those of kanx 0.1.0 (logger.name, ...) too.
NOT_RUN_DEFINING = ("device", "overwrite", "results_root", "train.checkpoint_every", "train.pack_size", "train.compile",
                    "train.threads", "train.cuda_graph", "train.log_every", "train.progress_every_s",
                    "dataset.data_dir", "dataset.betas",
                    "logger", "logger.name", "logger.tracking_uri", "logger.experiment",
                    *(f"logger.{name}{key}" for name, keys in BUILT_IN.items()
                      for key in ("", *(f".{k}" for k in keys))),
                    "optimized_metric")  # what a job returns to a search sweeper, not what it trains
# Override keys a run's path names outside the tag <results_root>/<dataset>/<condition>/<tag>/beta=..,seed=..:
# the dataset and condition (group and name; a csv table's path through its stem), beta and seed,
# and the launcher group, which sets no key of the config.
NAMED_BY_PATH = ("dataset", "dataset.name", "dataset.path", "condition", "beta", "seed", "launcher")
# Hydra's hydra.job.config.override_dirname.exclude_keys (kanx.config.config_defaults): the tag
# holds the overrides that define a run and that its path does not already name.
TAG_EXCLUDED = (*NAMED_BY_PATH, *NOT_RUN_DEFINING)
# Keys added after records existed, with the value that reproduces the behaviour from before
# them: left out of the hash while they hold it, so older records keep their identity.
# model.grid_refit_points: records from before it refit on 256 order statistics (the default
# then; docs/CALIBRATION.md "Grid refit on all samples"), so a config without it means 256.
# Every factor beyond the paper's E, F and X (kanx.vocab.Factor.in_paper: N and I of issue #38, and
# any registered since) is one too, at False: _AddedLater reads them from the vocabulary.
_KEYS_ADDED_LATER = {"model.grid_refit_rtol": None, "model.grid_refit_points": 256, "train.warmup_for": "all",
                     "train.exit_pi": "softmax", "train.tau_x_epochs": None,
                     # issue #38: the complexity weights at the paper's (all ones)
                     "model.trunk_cost": 1.0, "model.forward_cost": 1.0, "model.head_cost": 1.0,
                     "model.layer_costs": None, "model.input_costs": None,
                     # issue #50: no validation split, the paper's protocol (all training rows train)
                     "dataset.val_fraction": 0.0}


class _AddedLater(Mapping):
    """ADDED_LATER: _KEYS_ADDED_LATER and condition.<field>: False for every factor added after the
    paper, read from the vocabulary at each use (a factor registered later counts too)."""

    def _keys(self) -> dict:
        later = {f"condition.{f.field}": False for f in FACTOR_REGISTRY.values() if not f.in_paper}
        return {**_KEYS_ADDED_LATER, **later}

    def __getitem__(self, key):
        return self._keys()[key]

    def __iter__(self):
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())


ADDED_LATER: Mapping = _AddedLater()
ABSENT = "<absent>"

_ANY = object()


def _pop_key(c: dict, dotted: str, only_if=_ANY) -> None:
    """Remove `a` or `a.b` from c, if present (and, with only_if, holding that value)."""
    *path, key = dotted.split(".")
    node = c.get(path[0], {}) if path else c
    if isinstance(node, dict) and key in node and (only_if is _ANY or node[key] == only_if):
        del node[key]


def run_defining(container: dict, also_ignore: tuple[str, ...] = ()) -> dict:
    """A copy of a resolved config with only the keys that define a run (and without
    ``also_ignore``, dotted keys: the analysis drops beta and seed to compare a cell's runs)."""
    c = json.loads(json.dumps(container, default=str))
    c.pop("hydra", None)
    for dotted in (*NOT_RUN_DEFINING, *also_ignore):
        _pop_key(c, dotted)
    for dotted, neutral in ADDED_LATER.items():
        _pop_key(c, dotted, only_if=neutral)
    return c


def differing_keys(a: dict, b: dict, prefix: str = "") -> list[tuple[str, object, object]]:
    """(dotted key, value in a, value in b) for every run-defining key whose values differ
    (``ABSENT`` where one config lacks the key)."""
    out = []
    for key in sorted(set(a) | set(b)):
        dotted = f"{prefix}{key}"
        if dotted in NOT_RUN_DEFINING or key == "hydra":
            continue
        x, y = a.get(key, ABSENT), b.get(key, ABSENT)
        if dotted in ADDED_LATER and {x, y} <= {ABSENT, ADDED_LATER[dotted]}:
            continue  # a key added later, at the value that reproduces the behaviour before it
        if isinstance(x, dict) and isinstance(y, dict):
            out += differing_keys(x, y, f"{dotted}.")
        elif x != y:
            out.append((dotted, x, y))
    return out


def config_differences(a: dict, b: dict, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two resolved configs (run-defining keys only),
    as the runner words them: a record's config ``a`` there, the job's ``b`` now."""
    return [f"{dotted}: {x!r} there, {y!r} now" for dotted, x, y in differing_keys(a, b, prefix)]


def config_hash(container: dict) -> str:
    """Identity of a run: a hash of its resolved config without the keys that do not
    change its numbers (device, paths, checkpoint cadence, pack size)."""
    return hashlib.sha256(json.dumps(run_defining(container), sort_keys=True).encode()).hexdigest()[:16]
