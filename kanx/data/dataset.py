"""The record every dataset loader returns: one train/test split in raw units."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from kanx.vocab import family_of


def as_tensor(values: np.ndarray) -> torch.Tensor:
    """A float64 2-D tensor that owns a copy of `values` (no view into a trajectory)."""
    array = np.array(values, dtype=np.float64, copy=True)
    return torch.from_numpy(array.reshape(len(array), -1))


@dataclass(frozen=True, eq=False)
class Dataset:
    """A train/test split in raw units, ready for `fit_scaling` and `evaluate_members`.

    Shapes: x_train (n_train, q), y_train (n_train, p), x_test (n_test, q), y_test (n_test, p),
    all float64. For a dynamical system (`dynamical=True`) the rows are consecutive one-step
    pairs of a single trajectory, x_{n} -> x_{n+1}, with the test segment right after the
    training one; `test_rmse` is then the multi-step RMSE of free-running rollouts of
    `horizon` steps started at the test states `rollout_starts`.

    x_val, y_val (n_val rows, none by default): a validation split carved from the training
    data (`carve_validation`, dataset.val_fraction), scored beside the test split so that a
    search never reads the test set; for a dynamical system it is the end of the training
    segment, rolled out from `val_rollout_starts`.
    """

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    target_unit: str
    data_seed: int
    dynamical: bool = False
    horizon: int | None = None  # rollout length in steps (dynamical only)
    rollout_starts: tuple[int, ...] = ()  # test indices where rollouts start (dynamical only)
    options: dict[str, Any] = field(default_factory=dict)  # resolved options, for the run record
    provenance: dict[str, Any] = field(default_factory=dict)  # file and checksum, or initial condition
    x_val: torch.Tensor | None = None
    y_val: torch.Tensor | None = None
    val_rollout_starts: tuple[int, ...] = ()  # validation indices where rollouts start (dynamical only)

    def __post_init__(self) -> None:
        for split in ("x_train", "y_train", "x_test", "y_test"):
            t = getattr(self, split)
            if t.dtype != torch.float64 or t.dim() != 2:
                raise ValueError(f"Dataset.{split} must be a 2-D float64 tensor, got {t.dtype} {tuple(t.shape)}")
        if len(self.x_train) != len(self.y_train) or len(self.x_test) != len(self.y_test):
            raise ValueError("Dataset inputs and targets must have the same number of rows")
        if self.x_train.shape[1] != len(self.input_names) or self.x_test.shape[1] != len(self.input_names):
            raise ValueError(f"Dataset inputs must have {len(self.input_names)} columns ({self.input_names})")
        if self.y_train.shape[1] != len(self.output_names) or self.y_test.shape[1] != len(self.output_names):
            raise ValueError(f"Dataset targets must have {len(self.output_names)} columns ({self.output_names})")
        if self.dynamical:
            # A rollout feeds predictions back as inputs, so the map must be state -> state.
            if self.n_inputs != self.n_outputs or self.horizon is None or not self.rollout_starts:
                raise ValueError("a dynamical Dataset needs q == p, a horizon and rollout starts")
            if min(self.rollout_starts) < 0 or max(self.rollout_starts) + self.horizon > self.n_test:
                raise ValueError("every rollout must fit inside the test segment")

    @property
    def family(self) -> str:
        """"nguyen" for nguyen_f1 ... nguyen_f10, else the dataset's name."""
        return family_of(self.name)

    @property
    def n_train(self) -> int:
        return len(self.x_train)

    @property
    def n_test(self) -> int:
        return len(self.x_test)

    @property
    def n_val(self) -> int:
        return 0 if self.x_val is None else len(self.x_val)

    @property
    def val_horizon(self) -> int | None:
        """The validation rollouts' length: the test's, or the whole segment where that is shorter."""
        return None if self.horizon is None else min(self.horizon, self.n_val)

    @property
    def n_inputs(self) -> int:
        return self.x_train.shape[1]

    @property
    def n_outputs(self) -> int:
        return self.y_train.shape[1]


def make_dataset(
    name: str,
    data_seed: int,
    train: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    input_names: Sequence[str],
    output_names: Sequence[str],
    target_unit: str = "",
    **extra: Any,
) -> Dataset:
    """Build a Dataset from numpy (inputs, targets) pairs; `extra` sets the optional fields."""
    return Dataset(
        name=name,
        x_train=as_tensor(train[0]),
        y_train=as_tensor(train[1]),
        x_test=as_tensor(test[0]),
        y_test=as_tensor(test[1]),
        input_names=tuple(input_names),
        output_names=tuple(output_names),
        target_unit=target_unit,
        data_seed=data_seed,
        **extra,
    )

