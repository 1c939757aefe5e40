"""What composing conf/ needs from kanx, registered with OmegaConf and Hydra before Hydra
composes (register_resolvers): the resolvers conf/'s YAML calls (the beta a condition sweeps or
runs at, the parts of a run's folder, a csv's name, the command as typed), the defaults node
`kanx_defaults` (kanx.config.config_defaults) and the generated `+condition=` options of the
factor sets beyond the paper's eight.

The checks of a composed config are kanx.config's; a resolver raises only where conf/ itself is
wrong (an empty beta list), since an error inside an interpolation reads as a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from omegaconf import OmegaConf

from kanx.cli import prog
from kanx.config import as_bool, config_defaults
from kanx.errors import ConfigError
from kanx.identity import TAG_EXCLUDED
from kanx.vocab import (
    CONDITIONS,
    FACTOR_FIELDS,
    Condition,
    all_conditions,
    condition_from_node,
    folder_name,
    folder_tag,
    run_folder,
)


def register_resolvers() -> None:
    """What composing conf/ needs, registered before Hydra composes; idempotent: the resolvers its
    YAML uses, and the node `kanx_defaults` (config_defaults, with Hydra's exclude_keys for the
    sweep folder's tag: identity.TAG_EXCLUDED) in Hydra's ConfigStore."""
    from hydra.core.config_store import ConfigStore

    OmegaConf.register_new_resolver("kanx.beta_sweep", beta_sweep, replace=True)
    OmegaConf.register_new_resolver("kanx.beta_if_gated", beta_if_gated, replace=True)
    # The parts of a run's folder (conf/config.yaml: hydra.sweep): each one folder name (vocab.folder_name)
    OmegaConf.register_new_resolver("kanx.tag", folder_tag, replace=True)
    OmegaConf.register_new_resolver("kanx.folder", folder_name, replace=True)
    OmegaConf.register_new_resolver("kanx.run_folder", run_folder, replace=True)
    # csv: the name from the file
    OmegaConf.register_new_resolver("kanx.stem", lambda path: Path(str(path)).stem or "csv", replace=True)
    # conf/hydra/help: the command as typed
    OmegaConf.register_new_resolver("kanx.command", lambda: prog("kanx.train"), replace=True)
    tag = {"hydra": {"job": {"config": {"override_dirname": {"exclude_keys": list(TAG_EXCLUDED)}}}}}
    store = ConfigStore.instance()
    store.store(name="kanx_defaults", node={**config_defaults(), **tag}, provider="kanx")
    # `+condition=<factors>` for every set with N or I: generated options of the group beside the
    # paper's eight files in conf/condition/ (condition_node).
    for name in all_conditions():
        if name not in CONDITIONS:
            store.store(group="condition", name=name, node=condition_node(name), provider="kanx")


def condition_node(name: str) -> dict:
    """The `condition` node of a condition name: its name and one flag per factor (what
    conf/condition/<name>.yaml holds for the paper's eight)."""
    c = Condition.from_name(name)
    return {"name": c.name, **{field: getattr(c, field) for field in FACTOR_FIELDS.values()}}


# The flags the beta resolvers took one by one before they took the condition node, in that order:
# a dataset YAML written then (`${kanx.beta_if_gated:${condition.edge_gates},${condition.exits},BETA,
# ${condition.node_gates},${condition.input_gates}}`) still resolves. Frozen: a new factor is in the node.
_POSITIONAL_FLAGS = ("edge_gates", "exits", "node_gates", "input_gates")


def _condition_and_value(condition, value, more: tuple) -> tuple[Mapping, object]:
    """The resolvers' arguments as (the condition node, the value after it): ``condition`` is the
    node (${condition}); or, as before, the E and X flags, the value, then the N and I flags."""
    if isinstance(condition, Mapping):
        return condition, value
    flags = (condition, value, *more[1:])
    return dict(zip(_POSITIONAL_FLAGS[: len(flags)], flags, strict=False)), more[0] if more else None


def _beta_acts(condition: Mapping) -> bool:
    """Condition.beta_acts of a condition node as the resolvers get it (a flag other than true is off)."""
    return condition_from_node(condition).beta_acts


def beta_sweep(condition, betas, *more) -> str:
    """The beta values a condition sweeps with -m, as a Hydra sweep string, from the condition
    node (conf/config.yaml: ${kanx.beta_sweep:${condition},${dataset.betas}}).

    Beta acts through L_C only where it has something to act on: the gates of a factor that says
    so (vocab.beta_factors: E, X, N, I). Baseline and F sweep seeds only, at beta 0.
    """
    condition, betas = _condition_and_value(condition, betas, more)
    for key in FACTOR_FIELDS.values():
        if key in condition:
            as_bool(condition[key], f"condition.{key}")
    if not _beta_acts(condition):
        return "0.0"
    values = list(betas)
    if not values:
        raise ConfigError("dataset.betas is empty: give at least one beta, e.g. dataset.betas=[0.0,0.01]")
    return ",".join(repr(float(b)) for b in values)


def beta_if_gated(condition, beta, *more):
    """A dataset's beta for a single run (conf/dataset/*.yaml: ${kanx.beta_if_gated:${condition},BETA}):
    ``beta`` where it acts, else 0.0, so a Baseline or F run is recorded (and filed) at the beta
    it trains at."""
    # Flags other than true/false are refused by run_config_from in one line; raising here,
    # inside an interpolation, would be a traceback.
    condition, beta = _condition_and_value(condition, beta, more)
    return beta if _beta_acts(condition) else 0.0
