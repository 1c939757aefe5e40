"""Mixed packs: members that differ in condition (and dataset) train as one batched model
on the superset architecture, each following the trajectory of the same run trained alone."""

import pytest
import torch
from helpers import toy_data, trained

from kanx.config import DataConfig, RunConfig, TrainConfig
from kanx.kan.network import Condition, GatedKAN, KANSpec
from kanx.kan.objective import Costs
from kanx.kan.structure import model_structure
from kanx.trainer import Trainer

CONDITIONS = ("Baseline", "F", "X", "FX", "E", "EF", "EX", "EFX")
SPEC = KANSpec((2, 3, 3, 1))


def run(condition: str, seed: int, beta: float, epochs: int = 6) -> RunConfig:
    # warmup 2 and fc_warmup 3: beta onset, FC switch and their grid-update bursts fall at
    # different epochs for different conditions, so each member needs its own schedule.
    t = TrainConfig(epochs=epochs, batch_size=32, warmup=2, fc_warmup=3, grid_update_count=2,
                    grid_update_every=1, compile=False)
    return RunConfig(DataConfig("sin_xy2", seed), Condition.from_name(condition), SPEC, Costs(),
                     "threshold", t, beta, seed)


def assert_same_member(mixed: Trainer, m: int, alone: Trainer, what: str) -> None:
    own = mixed.member_model_state(m)
    ref = alone.member_model_state(0)
    assert own.keys() == ref.keys(), what
    for name in ref:
        assert torch.allclose(own[name], ref[name], rtol=1e-5, atol=1e-6), (
            f"{what}: {name} differs by {(own[name] - ref[name]).abs().max():.3g}")


def mixed_runs():
    betas = (0.0, 0.0, 0.05, 0.05, 0.1, 0.1, 0.5, 0.05)
    return [run(c, seed, b) for seed, (c, b) in enumerate(zip(CONDITIONS, betas, strict=True))]


@pytest.mark.slow  # trains long (make test-full)
def test_all_eight_conditions_in_one_pack_follow_their_lone_trajectories():
    runs = mixed_runs()
    x, y = toy_data(len(runs))
    mixed = trained(runs, x, y)
    assert mixed.model.members.mixed and mixed.condition.name == "EFX"
    x_test, _ = toy_data(len(runs), N=64, seed=1)
    mixed_pred = mixed.predict(x_test)
    structures = mixed.structures()
    for m, r in enumerate(runs):
        alone = trained([r], x[m : m + 1], y[m : m + 1])
        assert not alone.model.members.mixed and alone.condition == r.condition
        assert_same_member(mixed, m, alone, r.condition.name)
        assert torch.allclose(mixed_pred[m], alone.predict(x_test[m : m + 1])[0], rtol=1e-5, atol=1e-6), (
            r.condition.name)
        assert structures[m] == alone.structures()[0], r.condition.name


def test_a_one_condition_pack_is_built_exactly_as_before():
    runs = [run("EX", s, 0.1) for s in range(3)]
    model = Trainer(runs, *toy_data(3), 128, torch.device("cpu")).model
    assert not model.members.mixed and model.n_edges == 2 * (3 + 1) + 3 * (3 + 1) + 3 * 1  # no FC edges
    assert not hasattr(model.members, "own_edges") and not hasattr(model.members, "has_exits")


def test_the_member_layout_says_what_is_whose_and_adds_nothing_to_the_state():
    # kanx.kan.members: each member's edges, flags and noise slots are those of its condition alone
    conditions = [Condition.from_name(c) for c in CONDITIONS]
    model = GatedKAN(SPEC, conditions, seeds=list(range(8)))
    own = model.members
    assert not any(k.startswith("members.") for k in model.state_dict())
    for m, c in enumerate(conditions):
        alone = GatedKAN(SPEC, c, seeds=[m])
        assert int(own.own_edges[m].sum()) == alone.n_edges
        assert model.members.member_state_dict(model.state_dict(), m).keys() == alone.state_dict().keys()
        assert int((own.egate_index[m] >= 0).sum()) == (alone.n_edges if c.edge_gates else 0)
        assert int((own.exit_index[m] >= 0).sum()) == (alone.L if c.exits else 0)
        assert (bool(own.has_edge_gates[m]), bool(own.has_exits[m])) == (c.edge_gates, c.exits)


@pytest.mark.slow  # trains long (make test-full)
def test_member_checkpoints_are_in_their_own_layout_and_resume_in_any_pack():
    """A member checkpointed in a mixed pack resumes alone (and vice versa) exactly."""
    runs = mixed_runs()
    x, y = toy_data(len(runs))
    first = trained(runs, x, y, epochs=3)
    states = [first.member_state(m) for m in range(len(runs))]
    for m, r in enumerate(runs):
        alone = GatedKAN(SPEC, r.condition, [r.seed])
        assert states[m]["model"].keys() == alone.state_dict().keys()
        assert all(states[m]["model"][k].shape == v[0].shape for k, v in alone.state_dict().items())
    full = trained(runs, x, y)
    # Resume the EFX and E members alone and the rest as a mixed pack of six.
    pick = [7, 4]
    rest = [m for m in range(len(runs)) if m not in pick]
    for members in (pick[:1], pick[1:], rest):
        resumed = Trainer([runs[m] for m in members], x[members], y[members], 128, torch.device("cpu"))
        resumed.load_member_states([states[m] for m in members])
        resumed.train()
        for i, m in enumerate(members):
            own, ref = resumed.member_model_state(i), full.member_model_state(m)
            for name in ref:
                assert torch.allclose(own[name], ref[name], rtol=1e-5, atol=1e-6), (runs[m].condition.name, name)


def test_members_without_gates_keep_them_frozen_open():
    runs = mixed_runs()
    mixed = trained(runs, *toy_data(len(runs)))
    for m, r in enumerate(runs):
        state = mixed.member_model_state(m)
        if not r.condition.edge_gates:
            assert torch.all(state["alpha"] == 20.0), r.condition.name
        if not r.condition.exits:
            assert "exit_logits" not in state
    structures = model_structure(mixed.model)
    assert ([s.exit for s, r in zip(structures, runs, strict=True) if not r.condition.exits]
            == [SPEC.width.__len__() - 2] * 4)


@pytest.mark.parametrize("group", [pytest.param("condition", marks=pytest.mark.slow), "all"])  # one in the fast tier
def test_two_nguyen_datasets_in_one_pack_match_their_own_sweeps(tmp_path, group):
    """Through the runner: Nguyen F1 and F2 (same shapes and protocol) packed together give
    the records of the same runs packed per dataset."""
    from hydra import compose

    from kanx.confdir import initialize_conf
    from kanx.jobs import make_packs, pending, prepare_jobs, resume
    from kanx.resolvers import register_resolvers
    from kanx.runner import run_jobs

    register_resolvers()
    small = ["dataset.n_train=128", "dataset.n_test=64", "train.batch_size=32", "train.compile=false", "train.epochs=4",
             "train.warmup=2", "train.fc_warmup=1",
             "model.width=[1,3,3,1]", "train.grid_update_count=2", "train.grid_update_every=1"]

    def configs(root, conditions=("E", "FX")):
        out = []
        with initialize_conf():
            for d in ("nguyen_f1", "nguyen_f2"):
                for c in conditions:
                    for seed, beta in ((0, 0.01), (1, 0.1)):
                        cfg = compose("config", overrides=[f"+condition={c}", f"dataset={d}",
                                                           f"seed={seed}", f"beta={beta}", *small])
                        out.append((cfg, root / d / c / f"beta={beta},seed={seed}"))
        return out

    together = configs(tmp_path / "together")
    packs = make_packs(resume(pending(prepare_jobs(together))), group=group)
    assert len(packs) == (2 if group == "condition" else 1)
    assert all(len({j.run.data.name for j in p}) == 2 for p in packs)
    mixed_records = run_jobs(together, group=group)
    sweep_records = run_jobs(configs(tmp_path / "apart"), group="sweep")
    assert len(mixed_records) == len(sweep_records) == 8
    for a, b in zip(mixed_records, sweep_records, strict=True):
        assert (a["dataset"], a["condition"], a["seed"]) == (b["dataset"], b["condition"], b["seed"])
        assert a["config_hash"] == b["config_hash"]
        assert a["timing"]["pack_size"] == (8 if group == "all" else 4) and b["timing"]["pack_size"] == 2
        for key, value in b["metrics"].items():
            assert a["metrics"][key] == pytest.approx(value, rel=1e-5, abs=1e-6), (a["dataset"], a["condition"], key)
