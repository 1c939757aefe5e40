"""Typed run configuration: the one conversion from the composed Hydra config, with every
input check, done before any compute is spent.

Data flows one way: conf/*.yaml -> (Hydra) -> DictConfig -> RunConfig -> training -> record.
Model code (kanx.kan) never sees Hydra or OmegaConf; this module is the boundary.

Every default has one owner: the dataclasses (TrainConfig and RunConfig here, KANSpec, Costs,
Condition). config_defaults() writes them out as the node conf/config.yaml composes first
(`kanx_defaults`, registered with Hydra by kanx.resolvers.register_resolvers), and run_config_from fills a key
a config lacks from the same node, so neither conf/ nor the checks hold a second copy.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, field, fields, replace

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

from kanx.errors import ConfigError
from kanx.identity import ADDED_LATER, TAG_EXCLUDED, config_differences, config_hash  # noqa: F401  (the runner's names; the rules are torch-free there)
from kanx.kan.objective import COMPLEXITY_SCALES, Costs
from kanx.kan.spec import KANSpec
from kanx.loggers.base import LoggerConfig, logger_config
from kanx.vocab import (
    FACTOR_FIELDS,
    RESULTS_ROOT,
    Condition,
    beta_factors,
    condition_name_problem,
)

DEVICES = ("auto", "cpu", "cuda")
INPUT_SCALINGS = ("minmax", "standardize", "none")
GATE_ESTIMATORS = ("threshold", "louizos")
# model.gate_estimator's default: the paper's inference gate, E[z] > 1/2 (RunConfig.gate_estimator
# precedes fields without a default, so the dataclass cannot hold it).
GATE_ESTIMATOR = "threshold"
# Keys of the `dataset` node that configure kanx rather than the dataset loader.
_DATASET_META = {"name", "betas", "data_seed", "input_scaling", "standardize_targets", "val_fraction"}
# Readings of the exit gate left open by the text (issue #18; docs/CALIBRATION.md "The exit
# gate without egates"): which conditions have beta = 0 during the warmup, and the pi of L_C.
WARMUP_FOR = ("all", "egates")
EXIT_PI = ("softmax", "tempered")


@dataclass(frozen=True)
class TrainConfig:
    """Training protocol of the paper's Methods "Experimental details"."""

    epochs: int  # set by the dataset
    batch_size: int  # set by the dataset
    lr: float = 1e-3
    warmup: int = 0  # epochs with beta = 0 (gates present and sampled)
    fc_warmup: int = 100  # epochs with forward connections off
    grid_updates: bool = True
    grid_update_count: int = 10
    grid_update_every: int = 5
    tau_x_start: float = 5.0  # exit-gate temperature, annealed exponentially
    tau_x_end: float = 0.1
    # Epochs over which tau_x anneals, then stays at tau_x_end (None: the whole training; the text gives no rate).
    tau_x_epochs: int | None = None
    # COMPLEXITY_SCALES: MSE + beta (log n / n) L_C with n the batch size (docs/CALIBRATION.md) | mdl: n = n_train |
    # plain: MSE + beta L_C
    complexity_scale: str = "mdl_batch"
    # WARMUP_FOR: beta = 0 in the warmup for all (every condition where beta acts) | egates (the
    # Methods' sentence literally: X, FX feel beta from epoch 0)
    warmup_for: str = "all"
    # EXIT_PI: pi in L_C (Eq. reachability-mdl-compact): softmax of the exit logits | tempered: softmax(logits / tau_x),
    # as the Gumbel sample
    exit_pi: str = "softmax"
    checkpoint_every: int = 500  # epochs between checkpoints (0: none)
    pack_size: int = 70  # most members trained together in one batched model
    # fuse the B-spline basis with torch.compile (needs a C++ compiler): true, false (eager), or auto: only where the
    # run's steps earn the compile back (kanx.compiling.pays_off), on a CPU from the second epoch (compiled_from)
    compile: bool | str = "auto"
    # intra-op threads: auto (kanx.threads: OMP_NUM_THREADS if set, else the usable cores left free and the pack's
    # size) or a count
    threads: int | str = "auto"
    # replay training as CUDA graphs on a GPU (kanx/epoch_graph.py); elsewhere the same static-buffer step runs eagerly
    cuda_graph: bool = False
    log_every: int = 0  # metrics.csv (training curves) every this many epochs; 0: about 200 rows a run
    # off a terminal (a log file, SLURM's output), a progress line every this many seconds of wall time (0: none)
    progress_every_s: float = 60.0


@dataclass(frozen=True)
class DataConfig:
    name: str
    data_seed: int
    input_scaling: str = "minmax"
    standardize_targets: bool = True
    options: dict = field(default_factory=dict)  # passed to kanx.data.load_dataset
    # a validation split carved from the training data (kanx.data.carve_validation); 0: none, the paper's protocol
    val_fraction: float = 0.0


@dataclass(frozen=True)
class RunConfig:
    """Everything one run (dataset, condition, beta, seed) needs."""

    data: DataConfig
    condition: Condition
    model: KANSpec
    costs: Costs
    gate_estimator: str
    train: TrainConfig
    beta: float = 0.0  # complexity strength; swept with -m (hydra.sweeper.params.beta)
    seed: int = 0  # model init, minibatch order, gate and Gumbel noise; data too unless dataset.data_seed is set
    device: str = "auto"  # DEVICES
    # re-run a run whose record exists (otherwise it is skipped; one of the format before 2026-11-26 stops a sweep)
    overwrite: bool = False
    logger: LoggerConfig = LoggerConfig()  # where the curve rows go besides metrics.csv (`logger=`; kanx.loggers)

    def pack_key(self) -> tuple:
        """Runs with equal keys can train as one pack: they share the training protocol and
        the shapes (architecture, data sizes, batch size, epochs, warmups, costs, device) and
        may differ in condition, beta, seed and dataset (kanx.trainer.Trainer)."""
        return (replace(self.data, name="", data_seed=0), self.model, self.costs, self.gate_estimator,
                replace(self.train, pack_size=0, checkpoint_every=0, log_every=0, progress_every_s=0.0), self.device,
                self.logger)


def _field_defaults(cls, leave_out: tuple[str, ...] = ()) -> dict:
    """A dataclass's fields in order with their defaults; "???" (Hydra's missing value) where it has none."""
    out = {}
    for f in fields(cls):
        if f.name not in leave_out:
            out[f.name] = (f.default if f.default is not MISSING else f.default_factory()
                           if f.default_factory is not MISSING else "???")
    return out


def config_defaults() -> dict:
    """Every default of the composed config, each from its owner, in conf/'s key order: the node
    `kanx_defaults` that conf/config.yaml composes first. "???": a key the dataset sets. The
    dataset section has none here: each conf/dataset/*.yaml states its own (the paper's table)."""
    run, costs = _field_defaults(RunConfig), Costs()
    return {
        **{key: run[key] for key in ("beta", "seed", "device", "overwrite")},
        "results_root": RESULTS_ROOT,
        # what a job returns to a search sweeper: null, its record; else metric values (kanx.objective)
        "optimized_metric": None,
        "dataset": {"val_fraction": DataConfig.val_fraction},
        "condition": {"name": Condition().name, **_field_defaults(Condition)},
        # grid_range is no config key: the range the inputs are scaled to (dataset.input_scaling)
        "model": {**_field_defaults(KANSpec, leave_out=("grid_range",)), "gate_estimator": GATE_ESTIMATOR,
                  "edge_cost": costs.edge, "node_cost": costs.node, "exit_cost": costs.exit,
                  # complexity weights (issue #38): factors on c_lij by an edge's kind and layer, per input
                  "trunk_cost": costs.trunk, "forward_cost": costs.forward, "head_cost": costs.head,
                  "layer_costs": costs.layers, "input_costs": costs.inputs},
        "train": _field_defaults(TrainConfig),
        "logger": {},  # the loggers' nodes, by name (conf/logger/, kanx.loggers.logger_config)
    }


def check_beta(run: RunConfig) -> None:
    """A new run's beta must be one it trains at: a nonzero beta without a factor that beta acts
    through is a condition left out by mistake, not a Baseline (records read back are not
    checked: older ones hold it)."""
    if run.beta and not run.condition.beta_acts:
        raise ConfigError(f"beta={run.beta} has no effect on condition {run.condition.name}: beta acts only through "
                          f"{beta_factors()}; leave beta out (Baseline and F run at beta 0.0) or add the condition, "
                          "e.g. +condition=EFX")


# The keys each section may hold, those config_defaults names: any other (a typo added with +,
# such as +betta=0.01, +condition.edge_gate=true or +train.epoch=3) would be accepted silently,
# train the default and only land in the folder name. dataset.* takes kanx's keys (_DATASET_META)
# and its loader's options (kanx.data.DATASETS).
_KEYS = config_defaults()
_ROOT_KEYS = frozenset({*_KEYS, "dataset"})
_TRAIN_KEYS, _MODEL_KEYS = (frozenset(_KEYS[section]) for section in ("train", "model"))


def _condition_keys() -> frozenset:
    """condition.*'s keys: its name and every factor's flag, those registered since import too."""
    return frozenset({"name", *FACTOR_FIELDS.values()})


# Config groups whose options set keys elsewhere, so that `+<group>.<key>=...` sets no key a run
# reads: where their settings go instead.
_GROUP_SETTINGS = {
    "launcher": "launcher=packed|basic|slurm picks the launcher; its settings are hydra.launcher.<key> "
                "(e.g. hydra.launcher.pack_size=10; `kanx-train --cfg hydra -p hydra.launcher` lists them)",
}


def _check_known(node: dict, known: frozenset, section: str = "") -> None:
    unknown = sorted(set(node) - known)
    for key in unknown:
        if not section and key in _GROUP_SETTINGS:
            given = ", ".join(f"{key}.{k}" for k in node[key]) if isinstance(node[key], dict) else key
            raise ConfigError(f"{given} is no key of the run: {_GROUP_SETTINGS[key]}")
    if unknown:
        import difflib

        at = f"{section}." if section else ""
        hints = [f"{at}{k}" + (f" (did you mean {at}{m[0]}?)" if (m := difflib.get_close_matches(k, sorted(known), n=1))
                               else "") for k in unknown]
        raise ConfigError(f"unknown key(s) {', '.join(hints)}; {f'{section}.*' if section else 'the top level'} takes: "
                          f"{', '.join(sorted(known))}")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def as_bool(value, key: str) -> bool:
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
    _require(0 < rtol < 1, f"model.grid_refit_rtol={value!r} must be null or a number between 0 and 1 (exclusive), "
                           "e.g. 1.0e-4")
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
            out[key] = (OmegaConf.to_container(node, resolve=True, throw_on_missing=True)
                        if isinstance(node, DictConfig | ListConfig) else node)
        return out
    except MissingMandatoryValue as e:
        key = e.full_key or "?"
        raise ConfigError(f"{key} has no value: set it on the command line, e.g. {key}=...") from None


# Keys whose default is derived from other keys, not filled: a condition's name from its flags.
_DERIVED = frozenset({"condition.name"})


def with_defaults(c: dict) -> dict:
    """A copy of a config with every key it lacks at its default: config_defaults(), and the
    dataset's scaling from DataConfig; a key added after records existed takes the value that
    reproduces the behaviour from before it (identity.ADDED_LATER), so a record's config reads
    back as it trained. Keys without a default ("???") and derived keys stay absent."""
    defaults = config_defaults()
    defaults["dataset"] = {k: v for k, v in _field_defaults(DataConfig, leave_out=("options",)).items() if v != "???"}
    out = {key: dict(value) if isinstance(value, dict) else value for key, value in c.items()}
    for section, default in defaults.items():
        if not isinstance(default, dict):
            out.setdefault(section, default)
            continue
        node = out[section] = dict(out.get(section) or {})
        for key, value in default.items():
            dotted = f"{section}.{key}"
            if key not in node and value != "???" and dotted not in _DERIVED:
                node[key] = ADDED_LATER.get(dotted, value)
    return out


def _given(node: dict, key: str, section: str):
    """A key without a default (the dataset sets it): its value, or one line saying it has none."""
    if key not in node or node[key] == "???":
        raise ConfigError(f"{section}.{key} has no value: set it on the command line, e.g. {section}.{key}=...")
    return node[key]


_SECTIONS = ("dataset", "condition", "model", "train", "logger")


def _check_sections(c: dict) -> None:
    """Each section a group of keys: `train=5` replaces the whole section, not one key of it."""
    for section in _SECTIONS:
        value = c.get(section)
        if value is not None and not isinstance(value, dict):
            example = next(iter(_KEYS.get(section) or {"name": None}))
            raise ConfigError(f"{section}={value!r} replaces the whole {section} section: set one of its keys instead, "
                              f"e.g. {section}.{example}=...")


def check_results_root(value) -> str:
    """results_root as a folder's path: an empty one (what results_root=$UNSET_VAR gives) would
    put the records at the file system's root (/<dataset>/...), so it is refused, as is one that is
    no path at all. Raises ConfigError."""
    text = "" if value is None or isinstance(value, bool | dict | list) else str(value)
    if not text.strip() or "\0" in text:
        raise ConfigError(f"results_root={value!r} must name a folder, e.g. results_root={RESULTS_ROOT} (empty, as an "
                          "unset variable gives, it would put the records at the file system's root)")
    return text


def run_config_from(cfg: DictConfig | dict) -> RunConfig:
    """Convert and check a composed config (a key it lacks is at its default: with_defaults).
    Raises ConfigError naming the bad value."""
    c = to_container(cfg) if isinstance(cfg, DictConfig) else dict(cfg)
    c.pop("hydra", None)
    _check_sections(c)
    _check_known(c, _ROOT_KEYS)
    _check_known(c.get("condition") or {}, _condition_keys(), "condition")
    _check_known(c.get("train") or {}, _TRAIN_KEYS, "train")
    _check_known(c.get("model") or {}, _MODEL_KEYS, "model")
    c = with_defaults(c)
    d, m, t, cond, lg = c["dataset"], c["model"], c["train"], c["condition"], c["logger"]

    from kanx.data import DATASETS  # the registry names; the data package imports torch
    from kanx.data.registry import SHARED_OPTIONS, check_val_fraction

    loader = d.get("loader", d.get("name"))  # loader: a named csv table
    _require(loader in DATASETS, f"dataset={d.get('name')!r} is not one of: {', '.join(DATASETS)}")
    _check_known(d, frozenset({*_DATASET_META, "loader", *SHARED_OPTIONS, *DATASETS[loader].defaults}), "dataset")
    flags = Condition(**{k: as_bool(cond[k], f"condition.{k}") for k in FACTOR_FIELDS.values()})
    name = cond.get("name", flags.name)  # a config without a name: the flags' own
    _require(condition_name_problem(name) is None, f"condition={name!r} is not a condition: "
                                                   f"{condition_name_problem(name)}")
    shown = ", ".join(f"{f}={getattr(flags, k)}" for f, k in FACTOR_FIELDS.items())
    _require(name == flags.name, f"condition name {name!r} does not match its flags ({shown}, i.e. {flags.name})")

    beta = _num(c["beta"], "beta")
    _require(beta >= 0, f"beta={beta} must be >= 0")
    seed = _int(c["seed"], "seed")
    _require(seed >= 0, f"seed={seed} must be >= 0")
    device = _choice(c["device"], "device", DEVICES)

    epochs = _int(_given(t, "epochs", "train"), "train.epochs")
    _require(epochs >= 1, f"train.epochs={epochs} must be >= 1")
    warmup, fc_warmup = _int(t["warmup"], "train.warmup"), _int(t["fc_warmup"], "train.fc_warmup")
    _require(0 <= warmup <= epochs, f"train.warmup={warmup} must be between 0 and train.epochs={epochs}")
    _require(fc_warmup >= 0, f"train.fc_warmup={fc_warmup} must be >= 0")
    if flags.forward:  # the FC warmup only exists with forward connections
        _require(fc_warmup <= epochs, f"train.fc_warmup={fc_warmup} must be between 0 and train.epochs={epochs} "
                                      "(forward connections would never switch on)")
    batch_size = _int(_given(t, "batch_size", "train"), "train.batch_size")
    _require(batch_size >= 1, f"train.batch_size={batch_size} must be >= 1")
    lr = _num(t["lr"], "train.lr")
    _require(lr > 0, f"train.lr={lr} must be > 0")
    train = TrainConfig(
        epochs=epochs, batch_size=batch_size, lr=lr, warmup=warmup, fc_warmup=fc_warmup,
        grid_updates=as_bool(t["grid_updates"], "train.grid_updates"),
        grid_update_count=_int(t["grid_update_count"], "train.grid_update_count"),
        grid_update_every=_int(t["grid_update_every"], "train.grid_update_every"),
        tau_x_start=_num(t["tau_x_start"], "train.tau_x_start"),
        tau_x_end=_num(t["tau_x_end"], "train.tau_x_end"),
        tau_x_epochs=None if t["tau_x_epochs"] is None else _int(t["tau_x_epochs"], "train.tau_x_epochs"),
        complexity_scale=_choice(t["complexity_scale"], "train.complexity_scale", COMPLEXITY_SCALES),
        warmup_for=_choice(t["warmup_for"], "train.warmup_for", WARMUP_FOR),
        exit_pi=_choice(t["exit_pi"], "train.exit_pi", EXIT_PI),
        checkpoint_every=_int(t["checkpoint_every"], "train.checkpoint_every"),
        pack_size=_int(t["pack_size"], "train.pack_size"),
        compile=_compile_setting(t["compile"]),
        threads=_threads_setting(t["threads"]),
        cuda_graph=as_bool(t["cuda_graph"], "train.cuda_graph"),
        log_every=_int(t["log_every"], "train.log_every"),
        progress_every_s=_num(t["progress_every_s"], "train.progress_every_s"),
    )
    _require(train.grid_update_count >= 0 and train.grid_update_every >= 1,
             "train.grid_update_count must be >= 0 and train.grid_update_every >= 1")
    _require(train.tau_x_start > 0 and train.tau_x_end > 0,
             f"train.tau_x_start={train.tau_x_start} and train.tau_x_end={train.tau_x_end} must be > 0")
    _require(train.tau_x_epochs is None or train.tau_x_epochs >= 1,
             f"train.tau_x_epochs={train.tau_x_epochs} must be >= 1, or null (anneal over all epochs)")
    _require(train.pack_size >= 1, f"train.pack_size={train.pack_size} must be >= 1")
    _require(train.log_every >= 0, f"train.log_every={train.log_every} must be >= 0 (0: about 200 rows a run)")
    _require(train.progress_every_s >= 0,
             f"train.progress_every_s={train.progress_every_s} must be >= 0 (0: no progress lines)")
    _require(train.checkpoint_every >= 0,
             f"train.checkpoint_every={train.checkpoint_every} must be >= 0 (0: no checkpoints)")

    grid_size, order = _int(m["grid_size"], "model.grid_size"), _int(m["spline_order"], "model.spline_order")
    _require(grid_size >= 1, f"model.grid_size={grid_size} must be >= 1")
    _require(order >= 1, f"model.spline_order={order} must be >= 1")
    width = m.get("width")  # null (or absent): [n_in, 5, 5, n_out] from the data (check_width)
    if width is not None:
        _require(isinstance(width, list) and len(width) >= 2
                 and all(isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in width),
                 f"model.width={width!r} must be a list of at least two positive integers, e.g. [2,5,5,1]")
    spec = KANSpec(
        width=tuple(width) if width is not None else (),
        grid_size=grid_size, spline_order=order,
        gate_init_alpha=_num(m["gate_init_alpha"], "model.gate_init_alpha"),
        noise_scale=_num(m["noise_scale"], "model.noise_scale"),
        scale_base_mu=_num(m["scale_base_mu"], "model.scale_base_mu"),
        scale_base_sigma=_num(m["scale_base_sigma"], "model.scale_base_sigma"),
        grid_eps=_num(m["grid_eps"], "model.grid_eps"),
        grid_refit_rtol=_refit_rtol(m["grid_refit_rtol"]),
        grid_refit_points=_refit_points(m["grid_refit_points"], grid_size, order),
    )
    costs = Costs(_num(m["edge_cost"], "model.edge_cost"), _num(m["node_cost"], "model.node_cost"),
                  _num(m["exit_cost"], "model.exit_cost"),
                  trunk=_num(m["trunk_cost"], "model.trunk_cost"),
                  forward=_num(m["forward_cost"], "model.forward_cost"), head=_num(m["head_cost"], "model.head_cost"),
                  layers=_cost_list(m["layer_costs"], "model.layer_costs", len(width) - 1 if width is not None
                                    else None, "stages (len(model.width) - 1)"),
                  inputs=_cost_list(m["input_costs"], "model.input_costs", width[0] if width is not None else None,
                                    "inputs (model.width[0])"))
    _require(min(costs.edge, costs.node, costs.exit, costs.trunk, costs.forward, costs.head, *(costs.layers or ()),
                 *(costs.inputs or ())) >= 0,
             f"complexity costs must be >= 0, got {costs}")

    data_seed = d.get("data_seed")  # null (or absent): the run's seed
    data = DataConfig(
        name=d["name"],
        data_seed=seed if data_seed is None else _int(data_seed, "dataset.data_seed"),
        input_scaling=_choice(d["input_scaling"], "dataset.input_scaling", INPUT_SCALINGS),
        standardize_targets=as_bool(d["standardize_targets"], "dataset.standardize_targets"),
        options={k: v for k, v in d.items() if k not in _DATASET_META and v is not None},
        val_fraction=check_val_fraction(d["val_fraction"]),
    )
    return RunConfig(data=data, condition=flags, model=spec, costs=costs,
                     gate_estimator=_choice(m["gate_estimator"], "model.gate_estimator", GATE_ESTIMATORS),
                     train=train, beta=beta, seed=seed, device=device, overwrite=as_bool(c["overwrite"], "overwrite"),
                     logger=logger_config(lg))


def _compile_setting(value) -> bool | str:
    _require(isinstance(value, bool) or value == "auto",
             f"train.compile={value!r} must be true, false or auto (compile where the run is long enough to earn it)")
    return value


def _threads_setting(value) -> int | str:
    from kanx.threads import check_setting

    try:
        return check_setting(value)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _cost_list(value, key: str, n: int | None, what: str) -> tuple[float, ...] | None:
    """A list of per-stage or per-input cost factors: null (all 1), or one number each."""
    if value is None:
        return None
    _require(isinstance(value, list) and len(value) >= 1, f"{key}={value!r} must be null (all 1) or a list of numbers, "
                                                          f"one per {what}")
    _require(n is None or len(value) == n, f"{key}={value!r} has {len(value)} entries, but the model has {n} {what}")
    return tuple(_num(v, key) for v in value)


def check_against_data(run: RunConfig, n_train: int) -> None:
    """Checks that need the dataset's size: under train.complexity_scale=mdl_batch the factor
    is log(n)/n with n the batch actually drawn, min(batch_size, n_train), and n = 1 would
    remove the complexity term (log 1 = 0)."""
    if run.train.complexity_scale == "mdl_batch" and min(run.train.batch_size, n_train) < 2:
        raise ConfigError(f"train.batch_size={run.train.batch_size} with {n_train} training rows makes batches of 1, "
                          "and train.complexity_scale=mdl_batch then multiplies L_C by log(1)/1 = 0: use "
                          "train.batch_size >= 2")


def check_width(run: RunConfig, n_inputs: int, n_outputs: int) -> RunConfig:
    """Fill a null width as [n_in, 5, 5, n_out]; otherwise its ends must match the data. The
    per-stage and per-input cost factors (model.layer_costs, model.input_costs) must match it."""
    if not run.model.width:
        run = replace(run, model=replace(run.model, width=(n_inputs, 5, 5, n_outputs)))
    w = list(run.model.width)
    _require(w[0] == n_inputs,
             f"model.width={w} starts with {w[0]}, but dataset {run.data.name!r} has {n_inputs} inputs")
    _require(w[-1] == n_outputs,
             f"model.width={w} ends with {w[-1]}, but dataset {run.data.name!r} has {n_outputs} outputs")
    layers, inputs = run.costs.layers, run.costs.inputs
    _require(layers is None or len(layers) == len(w) - 1, f"model.layer_costs={list(layers or ())} needs one factor "
                                                          f"per stage: {len(w) - 1} for model.width={w}")
    _require(inputs is None or len(inputs) == n_inputs, f"model.input_costs={list(inputs or ())} needs one factor per "
                                                        f"input: {n_inputs} for dataset {run.data.name!r}")
    return run
