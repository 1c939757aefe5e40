"""Load a finished run: its record, its config and its trained model, ready to predict, draw and
export as a formula."""

from __future__ import annotations

import pickle
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

import numpy as np
import torch

from kanx import records
from kanx.errors import ConfigError
from kanx.kan.network import Condition, GatedKAN, KANSpec
from kanx.tables import by_name

# model.pt holds tensors and plain data only, so it loads with torch.load(weights_only=True):
# a results folder on a shared file system must not be able to run code in whoever opens it.
# Format 1 (before 2026-11-26) pickled kanx's KANSpec, Condition and Scaling; read_model_file
# still reads it, with those three classes allow-listed for the restricted unpickler.
MODEL_FORMAT = 2
_SCALING_FIELDS = ("x_shift", "x_scale", "y_shift", "y_scale", "input_scaling", "standardize_targets")


def model_file(state: dict, spec: KANSpec, condition: Condition, seed: int, scaling, gate_estimator: str,
               input_names, output_names) -> dict:
    """What model.pt holds for one run (state: the member's own-condition state dict)."""
    return {
        "format": MODEL_FORMAT,
        "model": {k: v.detach().cpu() for k, v in state.items()},
        "spec": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(spec).items()},
        "condition": condition.name,
        "seed": int(seed),
        "scaling": {f: getattr(scaling, f) for f in _SCALING_FIELDS},
        "gate_estimator": gate_estimator,
        "input_names": list(input_names),
        "output_names": list(output_names),
    }


def read_model_file(path: Path | IO[bytes]) -> dict:
    """model.pt as written by model_file, with spec, condition and scaling rebuilt.

    Always torch.load(weights_only=True): tensors and plain data, plus (for format-1 files
    written before 2026-11-26) kanx's own plain dataclasses KANSpec, Condition and Scaling,
    which the restricted unpickler may only construct, never call anything else. A file
    that needs any other object is refused: unpickling it could run code."""
    from kanx.data.scaling import Scaling

    try:
        with torch.serialization.safe_globals([KANSpec, Condition, Scaling]):
            saved = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise ValueError(f"{path} holds pickled Python objects other than tensors, plain data and "
                         "kanx's KANSpec, Condition and Scaling, which kanx does not load "
                         "(unpickling can run code): re-run the run with overwrite=true") from None
    except (RuntimeError, EOFError, OSError) as e:
        raise ValueError(f"{path} is unreadable or truncated ({type(e).__name__}: "
                         f"{e}); re-run the run with overwrite=true") from None
    if saved.get("format", 1) == 1:
        return saved  # objects already
    from kanx.config import ADDED_LATER

    spec = dict(saved["spec"])
    spec["width"], spec["grid_range"] = tuple(spec["width"]), tuple(spec["grid_range"])
    spec.setdefault("grid_refit_points", ADDED_LATER["model.grid_refit_points"])  # saved before the option existed
    return {**saved, "spec": KANSpec(**spec), "condition": Condition.from_name(saved["condition"]),
            "scaling": Scaling(**saved["scaling"])}


def model_from_file(saved: dict) -> GatedKAN:
    """The one-member model (M = 1, its own condition's layout) that read_model_file's dict holds."""
    model = GatedKAN(saved["spec"], saved["condition"], seeds=[saved["seed"]])
    model.load_state_dict({k: v.unsqueeze(0) for k, v in saved["model"].items()})
    model.eval()
    return model


@dataclass
class TrainedRun:
    record: dict
    config: dict
    model: GatedKAN  # a single member (M = 1)
    scaling: object  # kanx.data.Scaling fitted on the run's training data
    gate_estimator: str = "threshold"
    input_names: tuple = ()
    output_names: tuple = ()
    run_dir: Path | None = None

    @property
    def history(self):
        """The run's training curves (metrics.csv, or metrics.csv.gz once finished;
        kanx.curves) as a DataFrame; None without one, kanx.history.CurveError (a
        ValueError) naming the file if it is damaged."""
        from kanx.history import read_history

        return read_history(self.run_dir) if self.run_dir is not None else None

    @torch.no_grad()
    def predict(self, x):
        """Predictions in the data's original units for raw inputs x: (N, n_inputs), or one
        sample (n_inputs,), as a tensor, NumPy array or list (columns in the run's input
        order), or a pandas DataFrame (a Series: one sample) whose columns are read by name
        (kanx.tables.by_name: a missing, extra or repeated column is refused). Returns
        (N, n_outputs), or (n_outputs,) for one sample: a tensor for a tensor, else NumPy."""
        x = by_name(x, self.input_names, "predict")
        as_numpy = not isinstance(x, torch.Tensor)
        # ascontiguousarray: torch takes no NumPy view that runs backwards (x[:, ::-1])
        x = torch.as_tensor(np.ascontiguousarray(x, dtype=np.float64) if as_numpy else x, dtype=torch.float64)
        one = x.ndim == 1
        if one:
            x = x.unsqueeze(0)
        n_inputs = len(self.input_names) or None
        if x.ndim != 2 or (n_inputs and x.shape[1] != n_inputs):
            raise ValueError(f"predict takes samples of {n_inputs or 'the model'}'s inputs "
                             f"({', '.join(self.input_names)}) as (N, n_inputs) or (n_inputs,); got shape "
                             f"{tuple(x.shape[1:] if one else x.shape)}")
        scaled = self.scaling.x(x).unsqueeze(0).to(torch.float32)  # (1, N, n_0)
        out = self.scaling.y_inverse(self.model.predict(scaled, self.gate_estimator)[0].to(torch.float64))
        out = out[0] if one else out
        return out.numpy() if as_numpy else out

    def formula(self, **options):
        """The run's symbolic formula (formula_of_run; options: tolerance, simplicity,
        primitives)."""
        return formula_of_run(self, **options)

    def draw(self, ax=None, **options):
        """Draw the network as in the paper's Fig. 1, the picture kanx.draw.draw_run(run) draws,
        and return the matplotlib Figure, as draw_run does (its first value): a new one, which
        a notebook shows inline, or with ``ax`` given the figure of ``ax``, drawn on ``ax``.
        Options: show_closed, title, legend, max_plots (kanx.diagram.draw). Each edge is drawn
        over the range its source takes on the rebuilt training inputs (drawing_inputs), or
        over its spline grid, with a warning, if they cannot be rebuilt."""
        from kanx.diagram import draw  # matplotlib: imported when a drawing is asked for

        return draw(self, drawing_inputs(self), ax=ax, **options)[0]


def load_run(run_dir: str | Path) -> TrainedRun:
    """The record, the resolved config and the trained model of a finished run."""
    run_dir = Path(run_dir)
    state = records.read_state(run_dir)
    if state.problem:
        raise ValueError(f"{state.problem}; re-run the run to replace it")
    if state.record is None:
        raise FileNotFoundError(f"{run_dir} holds no finished run (expected "
                                f"{records.RECORD}, {records.DONE} and {records.MODEL})")
    if not (run_dir / records.MODEL).exists():
        raise FileNotFoundError(f"{run_dir} holds a finished record but no weights ({records.MODEL}): weights are not "
                                "kept in git; train the run again here with overwrite=true to get them")
    saved = read_model_file(run_dir / records.MODEL)
    model = model_from_file(saved)
    return TrainedRun(state.record, state.record["config"], model, saved["scaling"], saved["gate_estimator"],
                      saved["input_names"], saved["output_names"], run_dir)


def rebuild_dataset(run: TrainedRun):
    """The run's dataset, rebuilt from its record (data seed and options; a data_dir that has
    moved falls back to KANX_DATA_DIR and the cache). Raises ValueError if it does not match
    the scaling saved with the model, i.e. it is not the data the model was trained on."""
    from kanx.config import run_config_from
    from kanx.data import DATASETS, fit_scaling, load_dataset

    data = run_config_from(run.config).data
    options = dict(data.options)
    spec = DATASETS.get(options.get("loader", data.name))
    if spec is not None and "features" in spec.defaults and options.get("features") is None and run.input_names:
        # A user's table (dataset csv) without a features list takes every numeric column in the file's
        # order: read the model's inputs by name, so a file whose columns moved or grew rebuilds the same inputs.
        options["features"] = list(run.input_names)
    data_seed = run.record.get("data_seed")
    data_seed = data.data_seed if data_seed is None else int(data_seed)
    try:
        ds = load_dataset(data.name, data_seed=data_seed, val_fraction=data.val_fraction, **options)
    except Exception:
        if options.get("data_dir") is None:
            raise
        options.pop("data_dir")  # the folder may have moved: try KANX_DATA_DIR and the cache
        ds = load_dataset(data.name, data_seed=data_seed, val_fraction=data.val_fraction, **options)
    if run.input_names and tuple(ds.input_names) != tuple(run.input_names):
        raise ValueError(f"the rebuilt data's inputs ({', '.join(ds.input_names)}) are not the model's "
                         f"({', '.join(run.input_names)})")
    refit = fit_scaling(ds, run.scaling.input_scaling, run.scaling.standardize_targets)
    for attr in ("x_shift", "x_scale", "y_shift", "y_scale"):
        if not torch.allclose(getattr(refit, attr), getattr(run.scaling, attr).to(torch.float64)):
            raise ValueError("the rebuilt data do not match the scaling saved with the model")
    return ds


def training_inputs(run: TrainedRun) -> torch.Tensor:
    """The run's training inputs as its model takes them (scaled, (N, n_0)), rebuilt from the
    record (rebuild_dataset). Raises on anything that keeps them from being the data the model
    was trained on."""
    ds = rebuild_dataset(run)
    if ds.n_inputs != run.model.width[0]:
        raise ValueError(f"dataset has {ds.n_inputs} inputs, the model {run.model.width[0]}")
    return run.scaling.x(ds.x_train)


def drawing_inputs(run: TrainedRun) -> torch.Tensor | None:
    """training_inputs for a drawing (TrainedRun.draw, kanx.draw), which can do without them:
    None, with a warning that names why, if they cannot be rebuilt; each edge is then drawn
    over its spline grid's range."""
    try:
        return training_inputs(run)
    except Exception as e:  # whatever the failure, the drawing falls back to the grid
        warnings.warn(f"kanx.draw: cannot rebuild the training data ({type(e).__name__}: "
                      f"{e}); drawing edges over their grid range", stacklevel=3)
        return None


def load_finished_run(run_dir):
    """kanx.load.load_run for the commands that read a finished run: every way a run folder
    can be unusable (nothing there, unfinished, weights absent, a file corrupt, truncated or
    not what kanx writes) is a ConfigError whose one line names the folder or the file."""
    try:
        return load_run(run_dir)
    except (OSError, ValueError) as e:  # load_run's own messages, naming the file
        raise ConfigError(str(e)) from None
    # a model.pt or record of another shape (another network's weights)
    except (RuntimeError, KeyError, TypeError, AttributeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ConfigError(f"{run_dir}: its record.json and model.pt do not load as a kanx run ({type(e).__name__}: "
                          f"{first}); re-run the run with overwrite=true") from None


def formula_of_run(run: TrainedRun, **options):
    """kanx.symbolic.export() of a TrainedRun on its rebuilt training and test data (a
    kanx.symbolic.Formula; options: tolerance, simplicity, primitives, full_simplify), the
    options checked before the data are rebuilt. kanx.symbolic imports nothing from here:
    it is imported when a formula is asked for (sympy is slow to import)."""
    from kanx.symbolic import export
    from kanx.symbolic_fit import DEFAULT_PRIMITIVES, SIMPLICITY, check_options

    check_options(options.get("primitives", DEFAULT_PRIMITIVES), options.get("simplicity", SIMPLICITY),
                  options.get("tolerance"))
    ds = rebuild_dataset(run)
    f = export(run.model, run.scaling, ds.x_train, ds.y_train, ds.x_test, ds.y_test, run.input_names or ds.input_names,
               run.output_names or ds.output_names, run.gate_estimator, **options)
    rec = (run.record.get("metrics") or {}).get("test_rmse")
    f.metrics["record_test_rmse"] = rec
    if ds.dynamical:
        f.metrics["note"] = "one-step test RMSE (the record's test_rmse is the rollout RMSE)"
    return f
