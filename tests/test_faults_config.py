"""Config faults that used to replace or misfile finished runs (issue #34): boolean keys read
with bool() (overwrite=no replaced records), unknown keys outside train/model accepted (+betta
trained at the default beta), folder tags longer than a file name, duplicate sweep values
trained twice, and a Baseline recorded at the dataset's beta. In-process where it can be."""

import hashlib
import json

import pytest
from helpers import TOY, composed

from kanx.config import run_config_from, to_container
from kanx.errors import ConfigError
from kanx.runner import run_jobs

TOY_RUN = [*TOY, "train.epochs=2", "train.warmup=1", "train.fc_warmup=1"]
# Every boolean key a run reads, as a dotted path into the resolved config.
BOOLEAN_KEYS = ("overwrite", "train.grid_updates", "train.compile", "train.cuda_graph", "dataset.standardize_targets",
                "condition.edge_gates", "condition.forward", "condition.exits")


def _set(container: dict, dotted: str, value) -> dict:
    *path, key = dotted.split(".")
    node = container
    for p in path:
        node = node[p]
    node[key] = value
    return container


def _digests(root) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("record.json"))}


# ---------------------------------------------------------------- booleans


def test_hydra_hands_no_and_off_over_as_strings():
    """Why bool() was wrong: only true/false (any case) reach the config as booleans."""
    assert [composed(f"overwrite={v}").overwrite for v in ("true", "False", "no", "off", "maybe")] == [True, False, "no", "off", "maybe"]


@pytest.mark.parametrize("key", BOOLEAN_KEYS)
def test_every_boolean_key_takes_true_or_false_and_refuses_anything_else(key):
    base = to_container(composed("+condition=EFX"))
    del base["condition"]["name"]  # named by its flags, so a flag may change
    for value in (True, False):
        run = run_config_from(_set(json.loads(json.dumps(base)), key, value))
        read = {"overwrite": run.overwrite, "train.grid_updates": run.train.grid_updates, "train.compile": run.train.compile,
                "train.cuda_graph": run.train.cuda_graph, "dataset.standardize_targets": run.data.standardize_targets,
                **{f"condition.{k}": getattr(run.condition, k) for k in ("edge_gates", "forward", "exits")}}
        assert read[key] is value
    for bad in ("no", "off", "yes", "maybe", 0, 1, None):
        with pytest.raises(ConfigError) as e:
            run_config_from(_set(json.loads(json.dumps(base)), key, bad))
        assert str(e.value) == f"{key}={bad!r} must be true or false"


def test_overwrite_no_keeps_finished_records_byte_identical(tmp_path):
    """The issue's repro in process: a finished sweep, then the same with overwrite=no."""
    configs = [(composed("+condition=EFX", f"seed={s}", *TOY_RUN), tmp_path / f"seed={s}") for s in (0, 1)]
    run_jobs(configs)
    before = _digests(tmp_path)
    assert len(before) == 2
    with pytest.raises(ConfigError, match="overwrite='no' must be true or false"):
        run_jobs([(composed("+condition=EFX", f"seed={s}", "overwrite=no", *TOY_RUN), d) for s, (_, d) in zip((0, 1), configs, strict=True)])
    assert _digests(tmp_path) == before


def test_grid_updates_off_and_standardize_no_are_refused_not_read_as_true():
    for override, key in (("train.grid_updates=off", "train.grid_updates"), ("dataset.standardize_targets=no", "dataset.standardize_targets")):
        with pytest.raises(ConfigError, match=f"{key}='(off|no)' must be true or false"):
            run_config_from(composed(override))
    run = run_config_from(composed("train.grid_updates=false", "dataset.standardize_targets=FALSE"))
    assert run.train.grid_updates is False and run.data.standardize_targets is False


def test_the_beta_sweep_reads_condition_flags_as_booleans_too():
    from kanx.config import beta_sweep

    assert beta_sweep(False, False, [0.1]) == "0.0" and beta_sweep(True, False, [0.1]) == "0.1"
    with pytest.raises(ConfigError, match="condition.edge_gates='no' must be true or false"):
        beta_sweep("no", False, [0.1])
