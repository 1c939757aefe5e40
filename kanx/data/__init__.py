"""Datasets of the paper's experiments, their scalings, and raw-unit metrics.

    ds = load_dataset("ikeda", data_seed=0)           # a Dataset (float64 tensors, raw units)
    scaling = fit_scaling(ds, "minmax", True)        # fitted on the training split only
    metrics = evaluate_members([ds], predict_raw)    # [{"train_rmse", "test_rmse", ...}]

Registered names, in the paper's order: sin_xy2, nguyen_f1 ... nguyen_f10, ikeda, ecosystem,
concrete, superconductor, and csv (your own table). See `registry.DATASETS` for the options
of each and their defaults.
"""

from kanx.data.dataset import Dataset
from kanx.data.metrics import evaluate_members
from kanx.data.registry import DATASETS, data_hash, load_dataset
from kanx.data.scaling import Scaling, fit_scaling, stack_scalings

__all__ = ["DATASETS", "Dataset", "data_hash", "Scaling", "evaluate_members", "fit_scaling",
           "load_dataset", "stack_scalings"]
