"""Typed run configuration: the one conversion from the composed Hydra config, with every
input check, done before any compute is spent.

Data flows one way: conf/*.yaml -> (Hydra) -> DictConfig -> RunConfig -> training -> record.
Model code (kanx.kan) never sees Hydra or OmegaConf; this module is the boundary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

from kanx.cli import prog
from kanx.errors import ConfigError
from kanx.identity import ADDED_LATER, config_differences, config_hash  # noqa: F401  (the runner's names; the rules are torch-free there)
from kanx.kan.network import Condition, KANSpec
from kanx.kan.objective import COMPLEXITY_SCALES, Costs
from kanx.vocab import folder_tag

DEVICES = ("auto", "cpu", "cuda")
INPUT_SCALINGS = ("minmax", "standardize", "none")
GATE_ESTIMATORS = ("threshold", "louizos")
# Keys of the `dataset` node that configure kanx rather than the dataset loader.
_DATASET_META = {"name", "betas", "data_seed", "input_scaling", "standardize_targets"}
# Readings of the exit gate left open by the text (issue #18; docs/CALIBRATION.md "The exit
# gate without egates"): which conditions have beta = 0 during the warmup, and the pi of L_C.
WARMUP_FOR = ("all", "egates")
EXIT_PI = ("softmax", "tempered")


@dataclass(frozen=True)
class TrainConfig:
    """Training protocol of the paper's Methods "Experimental details"."""

    epochs: int
    batch_size: int
    lr: float = 1e-3
    warmup: int = 0
    fc_warmup: int = 100
    grid_updates: bool = True
    grid_update_count: int = 10
    grid_update_every: int = 5
    tau_x_start: float = 5.0
    tau_x_end: float = 0.1
    complexity_scale: str = "mdl_batch"
    warmup_for: str = "all"  # WARMUP_FOR: members with beta = 0 in the warmup (all where beta acts, or egated ones only)
    exit_pi: str = "softmax"  # EXIT_PI: pi in L_C, softmax(logits) or softmax(logits / tau_x)
    tau_x_epochs: int | None = None  # tau_x reaches tau_x_end after this many epochs (None: at the last epoch)
    checkpoint_every: int = 500
    pack_size: int = 70
    compile: bool = True
    cuda_graph: bool = False
    log_every: int = 0  # metrics.csv cadence in epochs; 0: about 200 rows a run


# The defaults a key missing from a composed config falls back to (conf/config.yaml sets them
# all; tests/test_vocab.py checks the two agree).
_TRAIN_DEFAULTS = {f.name: f.default for f in fields(TrainConfig)}


@dataclass(frozen=True)
class DataConfig:
    name: str
    data_seed: int
    input_scaling: str = "minmax"
    standardize_targets: bool = True
    options: dict = field(default_factory=dict)  # passed to kanx.data.load_dataset


@dataclass(frozen=True)
class RunConfig:
    """Everything one run (dataset, condition, beta, seed) needs."""

    data: DataConfig
    condition: Condition
    model: KANSpec
    costs: Costs
    gate_estimator: str
    train: TrainConfig
    beta: float
    seed: int
    device: str = "auto"
    overwrite: bool = False

    def pack_key(self) -> tuple:
        """Runs with equal keys can train as one pack: they share the training protocol and
        the shapes (architecture, data sizes, batch size, epochs, warmups, costs, device) and
        may differ in condition, beta, seed and dataset (kanx.trainer.Trainer)."""
        return (replace(self.data, name="", data_seed=0), self.model, self.costs, self.gate_estimator, replace(self.train, pack_size=0, checkpoint_every=0, log_every=0), self.device)


def register_resolvers() -> None:
    """Resolvers the YAML in conf/ uses; idempotent."""
    OmegaConf.register_new_resolver("kanx.beta_sweep", beta_sweep, replace=True)
    OmegaConf.register_new_resolver("kanx.beta_if_gated", beta_if_gated, replace=True)
    OmegaConf.register_new_resolver("kanx.tag", folder_tag, replace=True)
    OmegaConf.register_new_resolver("kanx.stem", lambda path: Path(str(path)).stem or "csv", replace=True)  # csv: the name from the file
    OmegaConf.register_new_resolver("kanx.command", lambda: prog("kanx.train"), replace=True)  # conf/hydra/help: the command as typed


def beta_sweep(edge_gates: bool, exits: bool, betas) -> str:
    """The beta values a condition sweeps with -m, as a Hydra sweep string.

    Beta acts through L_C only where it has something to act on: the egates (E) or the
    exit gate (X). Baseline and F sweep seeds only, at beta 0.
    """
    if not Condition(edge_gates=_bool(edge_gates, "condition.edge_gates"), exits=_bool(exits, "condition.exits")).beta_acts:
        return "0.0"
    values = list(betas)
    if not values:
        raise ConfigError("dataset.betas is empty: give at least one beta, e.g. dataset.betas=[0.0,0.01]")
    return ",".join(repr(float(b)) for b in values)


def beta_if_gated(edge_gates, exits, beta):
    """A dataset's beta for a single run (conf/dataset/*.yaml): ``beta`` where it acts, else 0.0,
    so a Baseline or F run is recorded (and filed) at the beta it trains at."""
    # Flags other than true/false are refused by run_config_from in one line; raising here,
    # inside an interpolation, would be a traceback.
    return beta if Condition(edge_gates=edge_gates is True, exits=exits is True).beta_acts else 0.0


def check_beta(run: RunConfig) -> None:
    """A new run's beta must be one it trains at: a nonzero beta without E or X is a condition
    left out by mistake, not a Baseline (records read back are not checked: older ones hold it)."""
    if run.beta and not run.condition.beta_acts:
        raise ConfigError(f"beta={run.beta} has no effect on condition {run.condition.name}: beta acts only through edge gates (E) or the "
                          f"exit gate (X); leave beta out (Baseline and F run at beta 0.0) or add the condition, e.g. +condition=EFX")


# The keys each section may hold: any other (a typo added with +, such as +betta=0.01,
# +condition.edge_gate=true or +train.epoch=3) would be accepted silently, train the default and
# only land in the folder name. dataset.* takes its loader's options (kanx.data.DATASETS) too.
_ROOT_KEYS = frozenset({"beta", "seed", "device", "overwrite", "results_root", "dataset", "condition", "model", "train"})
_CONDITION_KEYS = frozenset({"name", "edge_gates", "forward", "exits"})
_TRAIN_KEYS = frozenset(f.name for f in fields(TrainConfig))
_MODEL_KEYS = frozenset({"width", "grid_size", "spline_order", "gate_init_alpha", "noise_scale", "scale_base_mu", "scale_base_sigma",
                         "grid_eps", "grid_refit_rtol", "grid_refit_points", "gate_estimator", "edge_cost", "node_cost", "exit_cost"})


def _check_known(node: dict, known: frozenset, section: str = "") -> None:
    unknown = sorted(set(node) - known)
    if unknown:
        import difflib

        at = f"{section}." if section else ""
        hints = [f"{at}{k}" + (f" (did you mean {at}{m[0]}?)" if (m := difflib.get_close_matches(k, sorted(known), n=1)) else "") for k in unknown]
        raise ConfigError(f"unknown key(s) {', '.join(hints)}; {f'{section}.*' if section else 'the top level'} takes: {', '.join(sorted(known))}")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _bool(value, key: str) -> bool:
    """A boolean key's value. Only real booleans (YAML's true/false in any case, which Hydra
    parses): bool('no') is True, so overwrite=no would replace finished records."""
    if not isinstance(value, bool):
        raise ConfigError(f"{key}={value!r} must be true or false")
    return value


def _int(value, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key}={value!r} must be an integer")
    return value


def _num(value, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{key}={value!r} must be a number")
    if not math.isfinite(value):
        raise ConfigError(f"{key}={value!r} must be a finite number")
    return float(value)


def _refit_rtol(value) -> float | None:
    if value is None:
        return None
    rtol = _num(value, "model.grid_refit_rtol")
    _require(0 < rtol < 1, f"model.grid_refit_rtol={value!r} must be null or a number between 0 and 1 (exclusive), e.g. 1.0e-4")
    return rtol


def _refit_points(value, grid_size: int, order: int) -> int | None:
    if value is None:
        return None
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= grid_size + order
    _require(ok, f"model.grid_refit_points={value!r} must be null (all samples, as pykan) or an integer of at least "
                 f"grid_size + spline_order = {grid_size + order} (the coefficients the refit pins), e.g. 256")
    return value


def _choice(value, key: str, allowed: tuple) -> str:
    _require(value in allowed, f"{key}={value!r} is not one of: {', '.join(allowed)}")
    return value


def to_container(cfg: DictConfig) -> dict:
    """The resolved run config as plain data (the hydra node left out)."""
    try:
        out = {}
        for key in cfg:
            if key == "hydra":
                continue
            node = cfg[key]
            out[key] = OmegaConf.to_container(node, resolve=True, throw_on_missing=True) if isinstance(node, DictConfig | ListConfig) else node
        return out
    except MissingMandatoryValue as e:
        key = e.full_key or "?"
        raise ConfigError(f"{key} has no value: set it on the command line, e.g. {key}=...") from None


def run_config_from(cfg: DictConfig | dict) -> RunConfig:
    """Convert and check a composed config. Raises ConfigError naming the bad value."""
    c = to_container(cfg) if isinstance(cfg, DictConfig) else dict(cfg)
    c.pop("hydra", None)
    _check_known(c, _ROOT_KEYS)
    d, m, t, cond = c["dataset"], c["model"], c["train"], c.get("condition") or {}
    _check_known(cond, _CONDITION_KEYS, "condition")
    _check_known(t, _TRAIN_KEYS, "train")
    _check_known(m, _MODEL_KEYS, "model")

    from kanx.data import DATASETS  # the registry names; the data package imports torch
    from kanx.data.registry import SHARED_OPTIONS

    loader = d.get("loader", d.get("name"))  # loader: a named csv table
    _require(loader in DATASETS, f"dataset={d.get('name')!r} is not one of: {', '.join(DATASETS)}")
    _check_known(d, frozenset({*_DATASET_META, "loader", *SHARED_OPTIONS, *DATASETS[loader].defaults}), "dataset")
    flags = Condition(*(_bool(cond.get(k, False), f"condition.{k}") for k in ("edge_gates", "forward", "exits")))
    name = cond.get("name", flags.name)
    _require(name in Condition.NAMES, f"condition={name!r} is not one of: {', '.join(Condition.NAMES)}")
    _require(name == flags.name, f"condition name {name!r} does not match its flags (E={flags.edge_gates}, F={flags.forward}, X={flags.exits}, i.e. {flags.name})")

    beta = _num(c.get("beta"), "beta")
    _require(beta >= 0, f"beta={beta} must be >= 0")
    seed = _int(c.get("seed"), "seed")
    _require(seed >= 0, f"seed={seed} must be >= 0")
    device = _choice(c.get("device", "auto"), "device", DEVICES)

    epochs = _int(t["epochs"], "train.epochs")
    _require(epochs >= 1, f"train.epochs={epochs} must be >= 1")
    warmup, fc_warmup = _int(t["warmup"], "train.warmup"), _int(t["fc_warmup"], "train.fc_warmup")
    _require(0 <= warmup <= epochs, f"train.warmup={warmup} must be between 0 and train.epochs={epochs}")
    _require(fc_warmup >= 0, f"train.fc_warmup={fc_warmup} must be >= 0")
    if flags.forward:  # the FC warmup only exists with forward connections
        _require(fc_warmup <= epochs, f"train.fc_warmup={fc_warmup} must be between 0 and train.epochs={epochs} (forward connections would never switch on)")
    batch_size = _int(t["batch_size"], "train.batch_size")
    _require(batch_size >= 1, f"train.batch_size={batch_size} must be >= 1")
    lr = _num(t["lr"], "train.lr")
    _require(lr > 0, f"train.lr={lr} must be > 0")
    train = TrainConfig(
        epochs=epochs, batch_size=batch_size, lr=lr, warmup=warmup, fc_warmup=fc_warmup,
        grid_updates=_bool(t.get("grid_updates", _TRAIN_DEFAULTS["grid_updates"]), "train.grid_updates"),
        grid_update_count=_int(t.get("grid_update_count", _TRAIN_DEFAULTS["grid_update_count"]), "train.grid_update_count"),
        grid_update_every=_int(t.get("grid_update_every", _TRAIN_DEFAULTS["grid_update_every"]), "train.grid_update_every"),
        tau_x_start=_num(t.get("tau_x_start", _TRAIN_DEFAULTS["tau_x_start"]), "train.tau_x_start"),
        tau_x_end=_num(t.get("tau_x_end", _TRAIN_DEFAULTS["tau_x_end"]), "train.tau_x_end"),
        complexity_scale=_choice(t.get("complexity_scale", _TRAIN_DEFAULTS["complexity_scale"]), "train.complexity_scale", COMPLEXITY_SCALES),
        warmup_for=_choice(t.get("warmup_for", ADDED_LATER["train.warmup_for"]), "train.warmup_for", WARMUP_FOR),
        exit_pi=_choice(t.get("exit_pi", ADDED_LATER["train.exit_pi"]), "train.exit_pi", EXIT_PI),
        tau_x_epochs=None if t.get("tau_x_epochs") is None else _int(t["tau_x_epochs"], "train.tau_x_epochs"),
        checkpoint_every=_int(t.get("checkpoint_every", _TRAIN_DEFAULTS["checkpoint_every"]), "train.checkpoint_every"),
        pack_size=_int(t.get("pack_size", _TRAIN_DEFAULTS["pack_size"]), "train.pack_size"),
        compile=_bool(t.get("compile", _TRAIN_DEFAULTS["compile"]), "train.compile"),
        cuda_graph=_bool(t.get("cuda_graph", _TRAIN_DEFAULTS["cuda_graph"]), "train.cuda_graph"),
        log_every=_int(t.get("log_every", _TRAIN_DEFAULTS["log_every"]), "train.log_every"),
    )
    _require(train.grid_update_count >= 0 and train.grid_update_every >= 1, "train.grid_update_count must be >= 0 and train.grid_update_every >= 1")
    _require(train.tau_x_start > 0 and train.tau_x_end > 0, f"train.tau_x_start={train.tau_x_start} and train.tau_x_end={train.tau_x_end} must be > 0")
    _require(train.tau_x_epochs is None or train.tau_x_epochs >= 1, f"train.tau_x_epochs={train.tau_x_epochs} must be >= 1, or null (anneal over all epochs)")
    _require(train.pack_size >= 1, f"train.pack_size={train.pack_size} must be >= 1")
    _require(train.log_every >= 0, f"train.log_every={train.log_every} must be >= 0 (0: about 200 rows a run)")
    _require(train.checkpoint_every >= 0, f"train.checkpoint_every={train.checkpoint_every} must be >= 0 (0: no checkpoints)")

    grid_size, order = _int(m["grid_size"], "model.grid_size"), _int(m["spline_order"], "model.spline_order")
    _require(grid_size >= 1, f"model.grid_size={grid_size} must be >= 1")
    _require(order >= 1, f"model.spline_order={order} must be >= 1")
    width = m.get("width")
    if width is not None:
        _require(isinstance(width, list) and len(width) >= 2 and all(isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in width),
                 f"model.width={width!r} must be a list of at least two positive integers, e.g. [2,5,5,1]")
    spec = KANSpec(
        width=tuple(width) if width is not None else (),
        grid_size=grid_size, spline_order=order,
        gate_init_alpha=_num(m.get("gate_init_alpha", -1.0), "model.gate_init_alpha"),
        noise_scale=_num(m.get("noise_scale", 0.3), "model.noise_scale"),
        scale_base_mu=_num(m.get("scale_base_mu", 0.0), "model.scale_base_mu"),
        scale_base_sigma=_num(m.get("scale_base_sigma", 1.0), "model.scale_base_sigma"),
        grid_eps=_num(m.get("grid_eps", 0.02), "model.grid_eps"),
        grid_refit_rtol=_refit_rtol(m.get("grid_refit_rtol")),
        grid_refit_points=_refit_points(m.get("grid_refit_points", ADDED_LATER["model.grid_refit_points"]), grid_size, order),
    )
    costs = Costs(_num(m.get("edge_cost", 1.0), "model.edge_cost"), _num(m.get("node_cost", 1.0), "model.node_cost"), _num(m.get("exit_cost", 1.0), "model.exit_cost"))
    _require(min(costs.edge, costs.node, costs.exit) >= 0, f"complexity costs must be >= 0, got {costs}")

    data_seed = d.get("data_seed")
    data = DataConfig(
        name=d["name"],
        data_seed=seed if data_seed is None else _int(data_seed, "dataset.data_seed"),
        input_scaling=_choice(d.get("input_scaling", "minmax"), "dataset.input_scaling", INPUT_SCALINGS),
        standardize_targets=_bool(d.get("standardize_targets", True), "dataset.standardize_targets"),
        options={k: v for k, v in d.items() if k not in _DATASET_META and v is not None},
    )
    return RunConfig(data=data, condition=flags, model=spec, costs=costs,
                     gate_estimator=_choice(m.get("gate_estimator", "threshold"), "model.gate_estimator", GATE_ESTIMATORS),
                     train=train, beta=beta, seed=seed, device=device, overwrite=_bool(c.get("overwrite", False), "overwrite"))


def check_against_data(run: RunConfig, n_train: int) -> None:
    """Checks that need the dataset's size: under train.complexity_scale=mdl_batch the factor
    is log(n)/n with n the batch actually drawn, min(batch_size, n_train), and n = 1 would
    remove the complexity term (log 1 = 0)."""
    if run.train.complexity_scale == "mdl_batch" and min(run.train.batch_size, n_train) < 2:
        raise ConfigError(f"train.batch_size={run.train.batch_size} with {n_train} training rows makes batches of 1, and "
                          "train.complexity_scale=mdl_batch then multiplies L_C by log(1)/1 = 0: use train.batch_size >= 2")


def check_width(run: RunConfig, n_inputs: int, n_outputs: int) -> RunConfig:
    """Fill a null width as [n_in, 5, 5, n_out]; otherwise its ends must match the data."""
    if not run.model.width:
        return replace(run, model=replace(run.model, width=(n_inputs, 5, 5, n_outputs)))
    w = list(run.model.width)
    _require(w[0] == n_inputs, f"model.width={w} starts with {w[0]}, but dataset {run.data.name!r} has {n_inputs} inputs")
    _require(w[-1] == n_outputs, f"model.width={w} ends with {w[-1]}, but dataset {run.data.name!r} has {n_outputs} outputs")
    return run
