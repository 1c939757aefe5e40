"""The names kanx's stages share, each defined once: conditions, datasets and families, run
statuses, and the files and schema version of a run directory.

Torch-free and free of kanx imports, so the config checks, the trainer, the record writer,
the analysis, the status command and the scripts all read the same facts from here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, make_dataclass
from itertools import combinations

# ---------------------------------------------------------------- conditions
# The paper's 2x2x2 factorial in its row order (Baseline = no egates, no FCs, no xgates).
CONDITIONS: tuple[str, ...] = ("Baseline", "F", "X", "FX", "E", "EF", "EX", "EFX")
BASELINE = "Baseline"


# The factors a condition is a set of, in the order a condition's name spells them: the paper's
# three (E edge gates, F forward connections, X exit gates) and the two its discussion leaves to
# future work (N node gates on hidden units, I input gates; issue #38). A condition's name is
# its factors in this order ("EFXI", "EN"), or BASELINE for none. A new factor is one more
# Factor (docs/ARCHITECTURE.md "Adding a mechanism"): an entry of BUILT_IN_FACTORS, or
# register_factor from a module of its own; everything that reads conditions asks the registry.
@dataclass(frozen=True)
class Factor:
    """One factor a condition may have: a mechanism of the model, switched on by one flag.

    ``letter`` spells it in a condition's name; ``field`` is its flag (Condition's field, the
    config key condition.<field>, default false); ``meaning`` names it in messages. ``beta_acts``:
    it has gates that beta prices through L_C, so a condition with it has a beta sweep.
    ``in_paper``: one of the paper's 2x2x2 factorial, a key of every record's config; any other
    was added later, so a config with it off hashes as one that lacks the key (kanx.identity)."""

    letter: str
    field: str
    meaning: str
    beta_acts: bool
    in_paper: bool = False


BUILT_IN_FACTORS: tuple[Factor, ...] = (
    Factor("E", "edge_gates", "edge gates", beta_acts=True, in_paper=True),
    Factor("F", "forward", "forward connections", beta_acts=False, in_paper=True),
    Factor("X", "exits", "exit gates", beta_acts=True, in_paper=True),
    Factor("N", "node_gates", "node gates", beta_acts=True),
    Factor("I", "input_gates", "input gates", beta_acts=True),
)
# The built-in factors' letters in name order; factor_letters() adds the registered ones.
FACTORS = "".join(f.letter for f in BUILT_IN_FACTORS)
# Every factor, built-in then registered, by letter in name order; FACTOR_FIELDS the same as
# letter -> Condition field. Both change in place (register_factor), so a module that imported
# them reads the factors registered since.
FACTOR_REGISTRY: dict[str, Factor] = {f.letter: f for f in BUILT_IN_FACTORS}
FACTOR_FIELDS: dict[str, str] = {f.letter: f.field for f in BUILT_IN_FACTORS}


def factor_letters() -> str:
    """Every factor's letter, in the order a condition's name spells them."""
    return "".join(FACTOR_REGISTRY)


@dataclass(frozen=True)
class Condition:
    """A set of factors (FACTOR_REGISTRY): which mechanisms a model has. The paper's 2x2x2
    factorial is the eight sets of E, F, X; N and I extend it. The one place that says what a
    condition's flags mean (its name, whether beta acts); everything else asks it.

    N and I are independent of E: a node or input gate is a hard-concrete gate of its own
    (kanx.kan.network), so "N", "I" or "FXI" are conditions too. The fields are one flag per
    factor in name order: the built-in ones declared here, a registered one's added by
    register_factor."""

    edge_gates: bool = False
    forward: bool = False
    exits: bool = False
    node_gates: bool = False
    input_gates: bool = False

    NAMES = CONDITIONS  # the paper's row order

    @property
    def name(self) -> str:
        flags = "".join(f for f, key in FACTOR_FIELDS.items() if getattr(self, key))
        return flags or BASELINE

    @property
    def beta_acts(self) -> bool:
        """Beta acts through L_C only where it has gates to act on: those of a factor that says
        so (Factor.beta_acts: E, X, N and I of the built-in ones)."""
        return any(f.beta_acts and getattr(self, f.field) for f in FACTOR_REGISTRY.values())

    @property
    def node_gated(self) -> bool:
        """Whether the model has node gates of any kind (N on hidden units, I on inputs)."""
        return self.node_gates or self.input_gates

    @classmethod
    def from_name(cls, name: str) -> Condition:
        """The condition a name spells: BASELINE, or distinct factors in their registry order."""
        if name == BASELINE:
            return cls()
        problem = condition_name_problem(name)
        if problem:
            raise ValueError(problem)
        return cls(**{key: f in name for f, key in FACTOR_FIELDS.items()})


def register_factor(factor: Factor) -> None:
    """Add a factor after those there are (last in a condition's name): Condition gains its flag
    (default False), and whatever reads the vocabulary sees it: names, the config's
    condition node, the hash rules (kanx.identity: off, it hashes as absent), the beta resolvers.
    Raises ValueError for a letter or field already taken, or a factor of the paper."""
    problem = _factor_problem(factor)
    if problem:
        raise ValueError(problem)
    FACTOR_REGISTRY[factor.letter] = factor
    FACTOR_FIELDS[factor.letter] = factor.field
    _fit_condition_fields()


def unregister_factor(letter: str) -> None:
    """Take back a factor register_factor added (a test's toy factor, say); the built-in ones stay."""
    if letter in FACTORS or letter not in FACTOR_REGISTRY:
        registered = factor_letters()[len(FACTORS):] or "none"
        raise ValueError(f"factor {letter!r} was not registered: registered are {registered}")
    del FACTOR_REGISTRY[letter], FACTOR_FIELDS[letter]
    _fit_condition_fields()


def _factor_problem(factor: Factor) -> str | None:
    if len(factor.letter) != 1 or not factor.letter.isupper() or factor.letter in FACTOR_REGISTRY:
        return (f"factor letter {factor.letter!r} must be a capital "
                f"letter that no factor has (taken: {factor_letters()})")
    if not factor.field.isidentifier() or factor.field.startswith("_") or hasattr(Condition, factor.field):
        return f"factor field {factor.field!r} must be a new name for Condition's flag, e.g. stage_gates"
    if factor.in_paper:
        return f"factor {factor.letter!r} cannot be one of the paper's: their flags are in every record's config"
    return None


_DECLARED = tuple(f.name for f in fields(Condition))  # the built-in factors' fields, declared above


def _fit_condition_fields() -> None:
    """Condition's dataclass fields made one flag per factor again, in FACTOR_FIELDS' order: a
    registered factor's field, its default (False) and the generated __init__, __eq__, __hash__
    and __repr__ that take it, from a dataclass made for the purpose. The class stays the same
    object (every module imported it); its frozen __setattr__ already refuses every name."""
    keys = list(FACTOR_FIELDS.values())
    fresh = make_dataclass("Condition", [(key, bool, False) for key in keys], frozen=True)
    for attr in ("__init__", "__eq__", "__hash__", "__repr__", "__match_args__", "__dataclass_fields__"):
        setattr(Condition, attr, vars(fresh)[attr])
    for key in set(vars(Condition)) - set(keys):
        if key not in _DECLARED and isinstance(vars(Condition)[key], bool):
            delattr(Condition, key)  # an unregistered factor's default
    for key in keys:
        setattr(Condition, key, False)


if _DECLARED != tuple(FACTOR_FIELDS.values()):  # a built-in factor without a declared field gets one here
    _fit_condition_fields()


def condition_name_problem(name) -> str | None:
    """Why ``name`` is not a condition's name (None when it is): one line naming the bad value
    and what is allowed."""
    if name == BASELINE:
        return None
    letters = factor_letters()
    if not isinstance(name, str) or not name:
        return f"condition {name!r} is not a condition: give {BASELINE} or factors from {letters}, e.g. EFX or EFXI"
    bad = sorted(set(name) - set(letters))
    if bad:
        meanings = ", ".join(f"{f.letter} {f.meaning}" for f in FACTOR_REGISTRY.values())
        return (f"condition {name!r} has unknown factor(s) {', '.join(map(repr, bad))}: a condition is {BASELINE} or a "
                f"set of factors from {letters} ({meanings}), e.g. EFXI")
    canonical = "".join(f for f in letters if f in name)
    if name != canonical:
        return f"condition {name!r} must name each factor once, in the order {letters}: {canonical!r}"
    return None


def all_conditions() -> tuple[str, ...]:
    """Every condition's name: the paper's eight in their row order, then the other factor sets
    (by size, then in the factors' order)."""
    letters = factor_letters()
    sets = ["".join(c) for n in range(1, len(letters) + 1) for c in combinations(letters, n)]
    return (*CONDITIONS, *(s for s in sets if s not in CONDITIONS))


def beta_factors() -> str:
    """The factors beta acts through, in words: "edge gates (E), exit gates (X), ... or input gates (I)"."""
    named = [f"{f.meaning} ({f.letter})" for f in FACTOR_REGISTRY.values() if f.beta_acts]
    return ", ".join(named[:-1]) + f" or {named[-1]}" if len(named) > 1 else named[0]


def condition_from_node(node) -> Condition:
    """The condition of a config's `condition` node (a mapping of flags; a factor it lacks is off),
    a flag other than true counting as off; kanx.config checks the flags themselves."""
    return Condition(**{key: node.get(key) is True for key in FACTOR_FIELDS.values()})


# Conditions where beta does not act (Condition.beta_acts), hence without a beta sweep: seeds
# only, at beta 0 (Baseline and F); the others are the gated ones.
UNGATED: tuple[str, ...] = tuple(c for c in CONDITIONS if not Condition.from_name(c).beta_acts)
GATED: tuple[str, ...] = tuple(c for c in CONDITIONS if Condition.from_name(c).beta_acts)


def condition_option(name: str) -> str:
    """The `+condition=` value of a condition name (conf/condition/<value>.yaml for the paper's
    eight, kanx.resolvers.register_resolvers' generated options for the others)."""
    return "baseline" if name == BASELINE else name


# The paper's conditions as `+condition=` options: with PAPER_DATASETS, the sweeps of `make
# reproduce-tables` and the benchmarks (kanx.plan.sweeps_jobs; betas and seeds from conf/).
PAPER_CONDITIONS: tuple[str, ...] = tuple(condition_option(c) for c in CONDITIONS)


# ---------------------------------------------------------------- packs
# How far a launch's packs may mix its jobs (kanx.jobs.make_packs): "sweep" keeps one
# (dataset, condition) per pack, as a Hydra sweep; "condition" mixes datasets that share the
# protocol (Nguyen F1-F8, say); "all" mixes conditions too, on the superset architecture.
# "auto", the one default (the launchers, kanx.plan, kanx.reproduce), is resolved per
# run by kanx.jobs.resolve_group: "all" where the run trains on a GPU, "condition" on a CPU.
GROUPINGS: tuple[str, ...] = ("auto", "sweep", "condition", "all")
DEFAULT_GROUP = "auto"


# ---------------------------------------------------------------- datasets and families
NGUYEN_PROBLEMS: tuple[str, ...] = tuple(f"nguyen_f{k}" for k in range(1, 11))
# The paper's benchmark datasets (what `make reproduce-tables` runs), in report order.
PAPER_DATASETS: tuple[str, ...] = (*NGUYEN_PROBLEMS, "ikeda", "ecosystem", "concrete", "superconductor")
# Every dataset kanx ships, in report order: the README's toy, the paper's, and own CSV tables.
DATASETS: tuple[str, ...] = ("sin_xy2", *PAPER_DATASETS, "csv")
FAMILIES: tuple[str, ...] = ("sin_xy2", "nguyen", "ikeda", "ecosystem", "concrete", "superconductor", "csv")
DYNAMICAL: tuple[str, ...] = ("ikeda", "ecosystem")  # test RMSE is the multi-step rollout RMSE


def family_of(dataset: str) -> str:
    """The group a dataset is reported under: the ten Nguyen problems pool as "nguyen"."""
    return "nguyen" if dataset.startswith("nguyen_f") else dataset


# ---------------------------------------------------------------- runs and records
# results_root's default: records go to <results_root>/<dataset>/<condition>/<tag>/beta=..,seed=..
RESULTS_ROOT = "outputs"
# Run statuses, in report order. A collapsed model (no contributing edge left) is a real, if
# constant, predictor with 0 edges and depth 0, so it counts; diverged and failed runs have no
# trustworthy metrics and stay out of medians and log-ratios.
STATUSES: tuple[str, ...] = ("ok", "collapsed", "diverged", "failed")
USABLE_STATUSES: tuple[str, ...] = ("ok", "collapsed")

SCHEMA_VERSION = 1
# A run directory: the record, the marker written after it, the trained model, and the latest
# resumable state while the run is unfinished.
RECORD, DONE, MODEL, CHECKPOINT = "record.json", "done", "model.pt", "checkpoint.pt"
LOCK = "lock"  # held (host and pid inside) while a process trains the run
# A sweep folder <dataset>/<condition>/<tag>: the runs every launch into it expects (kanx.manifest).
MANIFEST = "manifest.json"
METRICS = "metrics.csv"  # training curves (kanx.curves writes them, kanx.analyze --curves draws them)
# A finished run's curve, gzipped (mtime 0: the same rows give the same bytes); the plain file is
# the live one while a run trains and in a checkpointed, unfinished run. kanx.records.curve_path
# says which of the two a run has.
METRICS_GZ = METRICS + ".gz"
CURVES: tuple[str, ...] = (METRICS, METRICS_GZ)

# The record's fields (record.json, schema SCHEMA_VERSION), written by kanx.runner and read by
# kanx.analyze.collect; tests/test_vocab.py checks a real record against them.
RECORD_FIELDS: tuple[str, ...] = (
    "schema_version", "dataset", "family", "condition", "beta", "seed", "data_seed", "status", "status_reason",
    "n_train", "n_test", "metrics", "timing", "versions", "git_commit", "config_hash", "data_hash", "config",
    "error", "target_unit",
)
# record["metrics"]: test_rmse_one_step only for the dynamical systems (its multi-step rollouts
# are test_rmse), and with it RECORD_ROLLOUT, the rollout error curve {"h": RMSE} of
# kanx.data.metrics; the structure of the trained model (kanx.kan.structure) follows the errors.
RECORD_ERRORS: tuple[str, ...] = ("test_rmse", "train_rmse", "test_rmse_one_step")
RECORD_ROLLOUT = "rollout_rmse"
RECORD_STRUCTURE: tuple[str, ...] = ("contributing_edges", "depth", "exit", "open_gates", "bias_terms")
RECORD_METRICS: tuple[str, ...] = (*RECORD_ERRORS, *RECORD_STRUCTURE)
# record["metrics"] of a condition with input gates (I) only: the names (the dataset's own
# columns) of the inputs a contributing edge leaves (kanx.kan.structure.used_inputs).
RECORD_SELECTED_INPUTS = "selected_inputs"
# A sweep folder <dataset>/<condition>/<tag>: the tag is the overrides that change a run, as
# Hydra writes them (hydra.job.override_dirname), or "default". A file name may be 255 bytes
# on common file systems; a longer tag (20 named CSV features) keeps its first TAG_PREFIX_BYTES
# and a hash of the whole, and the record's config holds every value.
TAG_MAX_BYTES, TAG_PREFIX_BYTES = 255, 128
# Every part of a run's path below results_root is built from values a user gives (a dataset's
# name, a CSV column named in an override, a beta): one that could leave its place ("/", ".."),
# break the file system (NUL) or mislead a reader (a newline, a bidirectional override, a
# character drawn as a slash) is shown with "_" for each such character and told apart by a
# hash of the value (folder_name). Ordinary names, every one that worked before, stay as they are.
_SLASH_LIKE = frozenset("\u2044\u2215\u29f5\u29f8\u29f9\u2571\u2572\ufe68\uff0f\uff3c")
# control and format characters (NUL, newline, bidi overrides), surrogates, line and paragraph separators
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_NOT_A_NAME = ("", ".", "..")


def _unsafe(ch: str) -> bool:
    import unicodedata  # here, not at the top: this module imports nothing

    return ch == "/" or ch in _SLASH_LIKE or unicodedata.category(ch) in _HIDDEN


def folder_name(value) -> str:
    """The folder name that holds ``value`` (str() of it) as one part of a path: the value itself
    when it is a plain name of at most TAG_MAX_BYTES; a longer plain one keeps its first
    TAG_PREFIX_BYTES and a hash of the whole ("...1bc009ca1754"); any other (empty, "." or "..",
    or with a character _unsafe names) is shown with "_" in place of those characters (of every
    character of "." and ".."), cut to TAG_PREFIX_BYTES where the whole would not fit, and a
    hash of the value ("~1bc009ca1754"), so that it stays one folder below its parent and two
    values never share one."""
    import hashlib  # here, not at the top: this module imports nothing

    text = str(value)
    raw = text.encode("utf-8", "surrogatepass")
    plain = text not in _NOT_A_NAME and not any(_unsafe(ch) for ch in text)
    if plain and len(raw) <= TAG_MAX_BYTES:
        return text
    digest = hashlib.sha256(raw).hexdigest()[:12]
    if plain:
        return f"{raw[:TAG_PREFIX_BYTES].decode(errors='ignore')}...{digest}"
    shown = "".join("_" if _unsafe(ch) or text in _NOT_A_NAME else ch for ch in text).encode()
    if len(shown) + 1 + len(digest) > TAG_MAX_BYTES:
        shown = shown[:TAG_PREFIX_BYTES]
    return f"{shown.decode(errors='ignore')}~{digest}"


def folder_tag(overrides: str | None) -> str:
    """The <tag> folder name of a sweep's overrides (folder_name), "default" for none. A logger's
    keys (logger.<name>.<key>, of a logger of one's own too) name no run: they are left out, as
    Hydra's exclude_keys leaves out those it can list (kanx.identity.TAG_EXCLUDED)."""
    overrides = _without_logger_keys(overrides) if overrides and "logger." in overrides else overrides
    return folder_name(overrides) if overrides else "default"


def _without_logger_keys(overrides: str) -> str:
    """Hydra's override_dirname (key=value items joined by ",", a value may hold commas) without
    the items whose key is below `logger`."""
    import re  # here, not at the top: this module imports nothing

    items = re.split(r",(?=[+~]{0,2}[A-Za-z_][\w.@/-]*=)", overrides)
    return ",".join(item for item in items if not item.lstrip("+~").startswith("logger."))


def run_folder(beta, seed) -> str:
    """The folder name of a run in its sweep folder: beta=<beta>,seed=<seed> (folder_name)."""
    return folder_name(f"beta={beta},seed={seed}")


# record["timing"]: what the analysis reads of it (the writer adds train_s, pack_size, device).
RECORD_TIMING: tuple[str, ...] = ("wall_s", "steps", "steps_per_s")
