"""One owner per default (issue #35): each default is written once and every entry point reads it
from its owner; where conf/ must hold a copy to compose, these tests compare the two."""

import importlib.util
import inspect

import pytest
import torch
from helpers import ROOT

from kanx import vocab

# ---------------------------------------------------------------- pack grouping


def test_one_pack_grouping_default_for_every_entry_point(monkeypatch):
    from hydra_plugins.kanx_launcher.packed_launcher import PackedLauncher, PackedLauncherConf
    from hydra_plugins.kanx_launcher.slurm_launcher import SlurmLauncherConf
    from kanx import plan, runner

    assert vocab.DEFAULT_GROUP in vocab.GROUPINGS
    for f in (runner.make_packs, runner.run_jobs, runner.run_command, plan.run_plan, PackedLauncher):
        assert inspect.signature(f).parameters["group"].default == vocab.DEFAULT_GROUP, f
    assert PackedLauncherConf.group == SlurmLauncherConf.group == vocab.DEFAULT_GROUP
    # scripts/reproduce.py (make reproduce-tables) passes the same default on to kanx.plan
    spec = importlib.util.spec_from_file_location("reproduce", ROOT / "scripts" / "reproduce.py")
    reproduce = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reproduce)
    seen = []
    monkeypatch.setattr(reproduce, "run_packed", lambda a, results: seen.append(a.group) or 0)
    assert reproduce.main(["--datasets", "nguyen_f1", "--conditions", "E", "--no-analysis"]) == 0
    assert seen == [vocab.DEFAULT_GROUP]


def test_auto_is_condition_on_a_cpu_and_all_on_a_gpu(monkeypatch):
    from kanx.runner import resolve_group

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
