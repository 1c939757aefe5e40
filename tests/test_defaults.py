"""One owner per default (issue #35): each default is written once and every entry point reads it
from its owner; where conf/ must hold a copy to compose, these tests compare the two."""

import inspect

import pytest
import torch
from helpers import ROOT, composed

from kanx import vocab

# ---------------------------------------------------------------- pack grouping


def test_one_pack_grouping_default_for_every_entry_point(monkeypatch):
    from hydra_plugins.kanx_launcher.packed_launcher import PackedLauncher, PackedLauncherConf
    from hydra_plugins.kanx_launcher.slurm_launcher import SlurmLauncherConf
    from kanx import jobs, plan, runner

    assert vocab.DEFAULT_GROUP in vocab.GROUPINGS
    for f in (jobs.launch, jobs.make_packs, runner.run_jobs, runner.run_command, plan.run_plan, PackedLauncher):
        assert inspect.signature(f).parameters["group"].default == vocab.DEFAULT_GROUP, f
    assert PackedLauncherConf.group == SlurmLauncherConf.group == vocab.DEFAULT_GROUP
    # kanx-reproduce (make reproduce-tables) passes the same default on to kanx.plan
    from kanx import reproduce

    seen = []
    monkeypatch.setattr(reproduce, "run_packed", lambda a, results: seen.append(a.group) or 0)
    assert reproduce.main(["--datasets", "nguyen_f1", "--conditions", "E", "--no-analysis"]) == 0
    assert seen == [vocab.DEFAULT_GROUP]


def test_auto_is_condition_on_a_cpu_and_all_on_a_gpu(monkeypatch):
    from kanx.jobs import resolve_group

    assert [resolve_group(g, "cpu") for g in ("sweep", "condition", "all")] == ["sweep", "condition", "all"]
    assert resolve_group("auto", "cpu") == "condition"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_group("auto", "auto") == resolve_group("auto", "cuda") == "all"
    assert resolve_group("auto", "cpu") == "condition"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_group("auto", "auto") == "condition"
    with pytest.raises(ValueError, match="group='mixed' is not one of: auto, sweep, condition, all"):
        resolve_group("mixed", "cpu")


# ---------------------------------------------------------------- the device check


def test_one_device_check_and_one_message(monkeypatch):
    from kanx.checks import NO_CUDA, resolve_device
    from kanx.errors import ConfigError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto").type == resolve_device("cpu").type == "cpu"
    with pytest.raises(ConfigError) as e:
        resolve_device("cuda")
    assert str(e.value) == NO_CUDA


# ---------------------------------------------------------------- beta acts only with E or X


def test_condition_alone_says_where_beta_acts():
    from kanx.kan.network import Condition as ModelCondition

    assert ModelCondition is vocab.Condition
    acts = {name: vocab.Condition.from_name(name).beta_acts for name in vocab.CONDITIONS}
    assert acts == {name: "E" in name or "X" in name for name in vocab.CONDITIONS}
    assert vocab.UNGATED == tuple(n for n, a in acts.items() if not a) == ("Baseline", "F")
    assert vocab.GATED == tuple(n for n, a in acts.items() if a)


# ---------------------------------------------------------------- config defaults


def _same(a, b) -> bool:
    """Equal and of one type: 1 and 1.0 hash differently in a record's config."""
    return type(a) is type(b) and a == b


def test_conf_composes_every_default_from_the_dataclasses():
    """conf/ composed without a dataset: each key is the default of the dataclass field it feeds
    (Hydra's missing value where the field has none), and conf/ adds no key of its own."""
    from dataclasses import MISSING, fields

    from omegaconf import OmegaConf

    from kanx.config import GATE_ESTIMATOR, DataConfig, RunConfig, TrainConfig
    from kanx.kan.objective import Costs
    from kanx.kan.spec import KANSpec

    composed_ = OmegaConf.to_container(composed("~dataset"), resolve=False)
    expected = {"beta": RunConfig.beta, "seed": RunConfig.seed, "device": RunConfig.device,
                "overwrite": RunConfig.overwrite,
                "results_root": vocab.RESULTS_ROOT, "condition": {"name": vocab.BASELINE},
                # issue #50: what a job returns to a search sweeper, and the validation split (none)
                "optimized_metric": None, "dataset": {"val_fraction": DataConfig.val_fraction},
                "model": {"gate_estimator": GATE_ESTIMATOR, "edge_cost": Costs.edge, "node_cost": Costs.node,
                          "exit_cost": Costs.exit,
                          "trunk_cost": Costs.trunk, "forward_cost": Costs.forward, "head_cost": Costs.head,
                          "layer_costs": Costs.layers, "input_costs": Costs.inputs}}
    expected["logger"] = {}  # logger=none: no logger's node (conf/logger/none.yaml)
    for section, cls in (("condition", vocab.Condition), ("model", KANSpec), ("train", TrainConfig)):
        for f in fields(cls):
            if f.name != "grid_range":  # not a config key: the range inputs are scaled to
                expected.setdefault(section, {})[f.name] = "???" if f.default is MISSING else f.default
    assert composed_.keys() == expected.keys()
    for section in ("condition", "model", "train", "logger"):
        assert composed_[section].keys() == expected[section].keys(), section
        for key, value in expected[section].items():
            assert _same(composed_[section][key], value), (
                f"{section}.{key}: conf/ {composed_[section][key]!r}, dataclass {value!r}")
    for key in ("beta", "seed", "device", "overwrite", "results_root", "optimized_metric", "dataset"):
        assert _same(composed_[key], expected[key]), key


def test_conf_config_yaml_holds_no_copy_of_a_default():
    import yaml

    from kanx.confdir import conf_dir

    assert set(yaml.safe_load((conf_dir() / "config.yaml").read_text())) == {"defaults", "hydra"}
    assert "hydra" not in yaml.safe_load((conf_dir() / "launcher" / "slurm.yaml").read_text())


def test_the_launchers_compose_their_dataclass_defaults():
    from dataclasses import asdict

    from omegaconf import OmegaConf

    from hydra_plugins.kanx_launcher.packed_launcher import PackedLauncherConf
    from hydra_plugins.kanx_launcher.slurm_launcher import SlurmLauncherConf

    for launcher, cls in (("packed", PackedLauncherConf), ("slurm", SlurmLauncherConf)):
        node = OmegaConf.to_container(composed(f"launcher={launcher}", hydra=True).hydra.launcher, resolve=False)
        assert node == asdict(cls()), launcher


def test_a_key_left_out_of_a_config_reads_as_its_default():
    """run_config_from fills a key a config lacks from the same defaults conf/ composes (a key
    added after records existed at its value from before: identity.ADDED_LATER)."""
    from kanx.config import ADDED_LATER, config_defaults, run_config_from, to_container

    full = to_container(composed("dataset=concrete", "model.grid_refit_points=64", "train.log_every=3", "seed=4"))
    assert ADDED_LATER.keys() <= {f"{s}.{k}" for s, n in config_defaults().items() if isinstance(n, dict) for k in n}
    for section, node in config_defaults().items():
        for key in node if isinstance(node, dict) else [None]:
            default = node[key] if key else node
            dotted = f"{section}.{key}" if key else section
            # required, or derived (name: from the flags)
            if default == "???" or dotted in ("condition.name", "model.width"):
                continue
            lacking = {s: dict(v) if isinstance(v, dict) else v for s, v in full.items()}
            at_default = {s: dict(v) if isinstance(v, dict) else v for s, v in full.items()}
            if key:
                del lacking[section][key]
                at_default[section][key] = ADDED_LATER.get(dotted, default)
            else:
                del lacking[section]
                at_default[section] = default
            assert run_config_from(lacking) == run_config_from(at_default), dotted
    lacking = {s: dict(v) if isinstance(v, dict) else v for s, v in full.items()}
    del lacking["model"]["grid_refit_points"]  # a record from before the key: it refit on 256 points
    assert (run_config_from(lacking).model.grid_refit_points == 256
            and run_config_from(full).model.grid_refit_points == 64)


def test_a_required_key_left_out_names_itself():
    from kanx.config import run_config_from, to_container
    from kanx.errors import ConfigError

    full = to_container(composed("dataset=concrete"))
    del full["train"]["epochs"]
    with pytest.raises(ConfigError, match=r"^train.epochs has no value: set it on the "
                                          r"command line, e.g. train.epochs=...$"):
        run_config_from(full)


def test_the_config_checks_hold_no_inline_default():
    """No `.get(key, literal)` in kanx/config.py: a key's default comes from its owner."""
    import ast

    tree = ast.parse((ROOT / "kanx" / "config.py").read_text())
    fallbacks = [ast.unparse(n) for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr in ("get", "setdefault")
                 and len(n.args) == 2 and isinstance(n.args[1], ast.Constant)]
    assert not fallbacks, fallbacks


# ---------------------------------------------------------------- keys that do not define a run


def test_one_list_of_keys_left_out_of_the_hash_and_the_tag():
    from kanx.identity import NAMED_BY_PATH, NOT_RUN_DEFINING, TAG_EXCLUDED

    exclude = list(composed(hydra=True).hydra.job.config.override_dirname.exclude_keys)
    assert exclude == list(TAG_EXCLUDED) == [*NAMED_BY_PATH, *NOT_RUN_DEFINING]
    tag = composed("+condition=E", "dataset.betas=[0.1]", "train.pack_size=5", "device=cpu", "train.epochs=3",
                   hydra=True).hydra.job.override_dirname
    assert tag == "train.epochs=3"  # the beta list, like the other keys that define no run, names no folder


@pytest.mark.committed
def test_committed_gated_records_are_what_their_commands_compose_now():
    """The hash of a committed record's config is what its command composes today (one sweep per
    dataset, the gated conditions in turn; test_faults_config checks Baseline and F): moving the
    defaults changed no run's identity, so no record needs migrating."""
    import json

    from kanx.config import config_hash, to_container

    found = sorted(ROOT.glob("results/paper/*/*/default/beta=*,seed=*/record.json"))
    found = [f for f in found if f.parts[-4] in vocab.GATED]
    if not found:
        pytest.skip("no committed records")
    for i, dataset in enumerate(sorted({f.parts[-5] for f in found})):
        mine = [f for f in found if f.parts[-5] == dataset]
        record = json.loads(mine[i % len(mine)].read_text())
        overrides = [f"dataset={dataset}", f"+condition={record['condition']}", f"beta={record['beta']}",
                     f"seed={record['seed']}"]
        assert config_hash(to_container(composed(*overrides))) == record["config_hash"], overrides
