"""The validation split (dataset.val_fraction): rows carved from a dataset's training data, never
from its test set, so that tuning (optimized_metric, conf/hparams_search) reads no test row."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from kanx.data.dataset import Dataset
from kanx.data.dynamics import rollout_plan
from kanx.errors import ConfigError

# Mixed into the validation split's random draw, so that it is not the draw of the data or of the
# train/test split made from the same data seed.
_VAL_STREAM = 0x7A1


def validation_rows(n_train: int, fraction: float) -> int:
    """How many of ``n_train`` training rows a validation split of ``fraction`` takes (0 for 0)."""
    return round(n_train * fraction) if fraction else 0


def carve_validation(ds: Dataset, fraction: float) -> Dataset:
    """``ds`` with a validation split of ``fraction`` of its training rows, taken from the training
    data only (the test split is untouched): for a dynamical system the last rows of the training
    segment, in time order, rolled out as the test segment is (its horizon, tiling the segment);
    otherwise rows drawn from the data seed, the training rows keeping their order. Raises
    ConfigError where either part would be empty."""
    n_val = validation_rows(ds.n_train, fraction)
    if not 1 <= n_val < ds.n_train:
        raise ConfigError(f"dataset.val_fraction={fraction!r} leaves {n_val} of {ds.n_train} training rows for "
                          f"validation; choose a fraction that leaves at least one row in each, e.g. 0.2")
    if ds.dynamical:
        keep, val = torch.arange(ds.n_train - n_val), torch.arange(ds.n_train - n_val, ds.n_train)
        # the test's horizon, or the whole validation segment where that is shorter
        _, starts = rollout_plan(ds.name, n_val, min(ds.horizon or n_val, n_val), None)
    else:
        order = np.random.default_rng([ds.data_seed, _VAL_STREAM]).permutation(ds.n_train)
        val, keep = torch.from_numpy(np.sort(order[:n_val])), torch.from_numpy(np.sort(order[n_val:]))
        starts = ()
    return replace(ds, x_train=ds.x_train[keep].clone(), y_train=ds.y_train[keep].clone(),
                   x_val=ds.x_train[val].clone(), y_val=ds.y_train[val].clone(),
                   val_rollout_starts=starts, options={**ds.options, "val_fraction": fraction})
