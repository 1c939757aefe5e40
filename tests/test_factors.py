"""Conditions as factor sets (E, F, X, N, I), input gates, node gates and complexity weights
(issue #38): names and composition, a gate closed by hand, L_C against a hand computation of
the paper's formula, and mixed packs that hold the new factors."""

import math

import numpy as np
import pytest
import torch
from helpers import composed, toy_data, trained
from test_mixed_packs import assert_same_member

from kanx.config import DataConfig, RunConfig, TrainConfig, config_hash, run_config_from, to_container
from kanx.data.dataset import make_dataset
from kanx.data.scaling import fit_scaling
from kanx.errors import ConfigError
from kanx.evaluate import _score_model
from kanx.kan.gates import GAMMA, TAU, ZETA
from kanx.kan.network import Condition, GatedKAN, KANSpec
from kanx.kan.objective import Costs, complexity
from kanx.kan.structure import model_edge_roles, model_hidden_units_kept, model_structure, model_used_inputs
from kanx.vocab import CONDITIONS, FACTORS, all_conditions, condition_name_problem

CLOSED = -30.0  # a logit whose gate is shut: E[z] = sigmoid(-30 + 1.6) ~ 5e-13


# ---------------------------------------------------------------- names and configs
def test_every_factor_set_has_one_name_and_the_paper_keeps_its_eight():
    names = all_conditions()
    assert names[:8] == CONDITIONS and len(names) == len(set(names)) == 2 ** len(FACTORS)
    for name in names:
        assert Condition.from_name(name).name == name
    assert Condition.from_name("EFX") == Condition(True, True, True)  # N and I default off
    assert Condition.from_name("EFXI").input_gates and not Condition.from_name("EFXI").node_gates
    for bad, says in (("EQ", "unknown factor(s) 'Q'"), ("XE", "in the order EFXNI: 'EX'"), ("EE", "'E'"),
                      ("", "not a condition")):
        assert says in condition_name_problem(bad), bad
        with pytest.raises(ValueError, match="condition"):
            Condition.from_name(bad)
    assert (Condition.from_name("N").beta_acts and Condition.from_name("I").beta_acts
            and not Condition.from_name("F").beta_acts)


@pytest.mark.parametrize("option", ["EFXI", "EN", "EFXNI", "I", "FN"])
def test_factor_sets_compose_with_plus_condition(option):
    run = run_config_from(composed(f"+condition={option}", "dataset=nguyen_f9"))
    assert run.condition == Condition.from_name(option) and run.condition.name == option


def test_the_paper_conditions_hash_as_before_and_new_keys_change_the_hash():
    # the hashes of these configs at the commit before issue #38 (git show daca6f96)
    assert config_hash(to_container(composed("+condition=EFX", "dataset=nguyen_f1"))) == "ec8611879f5952dd"
    assert config_hash(to_container(composed("+condition=baseline", "dataset=nguyen_f1"))) == "ea6ea05047c13ef6"
    efx = config_hash(to_container(composed("+condition=EFX", "dataset=nguyen_f1")))
    assert config_hash(to_container(composed("+condition=EFXI", "dataset=nguyen_f1"))) != efx
    assert config_hash(to_container(composed("+condition=EFX", "dataset=nguyen_f1", "model.head_cost=2.0"))) != efx


def test_a_condition_name_that_does_not_match_its_flags_or_a_bad_cost_list_is_refused():
    with pytest.raises(ConfigError, match="does not match its flags"):
        run_config_from(composed("+condition=EFX", "dataset=nguyen_f1", "condition.input_gates=true"))
    with pytest.raises(ConfigError, match="model.layer_costs"):
        run_config_from(composed("+condition=EFXI", "dataset=nguyen_f1", "model.layer_costs=[1,2]"))
    with pytest.raises(ConfigError, match="model.input_costs"):
        run_config_from(composed("+condition=EFXI", "dataset=nguyen_f1", "model.input_costs=[1,2]"))
    costs = run_config_from(composed("+condition=EFXI", "dataset=nguyen_f1", "model.input_costs=[3]",
                                     "model.forward_cost=2")).costs
    assert costs.inputs == (3.0,) and costs.forward == 2.0 and costs.weighted


# ---------------------------------------------------------------- gates closed by hand
SPEC = KANSpec((3, 4, 3, 1))


def test_an_input_gate_closed_by_hand_removes_its_input_from_predictions_trace_and_selected_inputs():
    model = GatedKAN(SPEC, Condition.from_name("EFXI"), seeds=[0])
    with torch.no_grad():
        model.exit_logits[0, -1] = 5.0  # the final exit: every input reaches it through the trunk and the FCs
        model.node_alpha[0, 1] = CLOSED
    x = torch.rand(1, 64, 3) * 2 - 1
    moved = x.clone()
    moved[..., 1] = torch.rand(64) * 2 - 1
    assert torch.equal(model.predict(x), model.predict(moved))  # input 1 no longer matters
    gates = model.split_edges(model.inference_gates())
    assert all(float(g[0, 1].abs().sum()) == 0 for g in gates)  # every edge out of x_1 (trunk and FCs) is shut
    assert model_used_inputs(model) == [[0, 2]]
    ds = make_dataset("toy", 0, (np.random.rand(32, 3), np.random.rand(32, 1)),
                      (np.random.rand(16, 3), np.random.rand(16, 1)), ("a", "b", "c"), ("y",))
    scores = _score_model(model, fit_scaling(ds), "threshold", ds)
    assert scores["selected_inputs"] == ["a", "c"]
    open_model = GatedKAN(SPEC, Condition.from_name("EFXI"), seeds=[0])
    with torch.no_grad():
        open_model.exit_logits[0, -1] = 5.0
    assert _score_model(open_model, fit_scaling(ds), "threshold", ds)["selected_inputs"] == ["a", "b", "c"]
    assert model_structure(model)[0].contributing_edges < model_structure(open_model)[0].contributing_edges
    # without I the record has no selected_inputs (the paper's records are unchanged)
    assert "selected_inputs" not in _score_model(GatedKAN(SPEC, Condition.from_name("EFX"), seeds=[0]),
                                                 fit_scaling(ds), "threshold", ds)


def test_a_node_gate_closed_by_hand_removes_every_edge_into_and_out_of_it():
    model = GatedKAN(SPEC, Condition.from_name("EN"), seeds=[0])
    ref = GatedKAN(SPEC, Condition.from_name("EN"), seeds=[0])
    unit = 2  # x^(1)_2: node id n_0 + 2
    with torch.no_grad():
        model.node_alpha[0, SPEC.width[0] + unit] = CLOSED
    into, out_of = model.split_edges(model.inference_gates())[:2]
    assert float(into[0, :, unit].sum()) == 0 and float(out_of[0, unit, :].sum()) == 0
    assert float(into[0].sum()) == 3 * 4 - 3 and float(out_of[0].sum()) == 4 * 3 - 3  # the others stay open
    roles = model_edge_roles(model)[0]
    assert not roles.path[0][:, unit].any() and not roles.path[1][unit].any()
    assert model_structure(model)[0].contributing_edges == model_structure(ref)[0].contributing_edges - 3 - 3
    assert model_hidden_units_kept(ref) == [4 + 3] and model_hidden_units_kept(model) == [3 + 3]  # x^(1): 4, x^(2): 3
    # the trunk's output no longer depends on what reaches the closed unit: closing it equals
    # zeroing its incoming and outgoing edges' gates by hand
    x = torch.rand(1, 32, 3) * 2 - 1
    gates = ref.inference_gates().clone()
    ez = ref.split_edges(gates)
    ez[0][0, :, unit] = 0
    ez[1][0, unit, :] = 0
    assert torch.equal(model.predict(x), ref(x, torch.cat([e.reshape(1, -1) for e in ez], -1))[:, 0])


# ---------------------------------------------------------------- L_C by hand
def _ez(alpha: float) -> float:
    return 1.0 / (1.0 + math.exp(-(alpha - TAU * math.log(-GAMMA / ZETA))))  # Eq. (expected-z)


@pytest.mark.parametrize("name", ["FXNI", "EFXNI", "ENI", "EFXI"])
def test_complexity_equals_a_hand_computation_of_the_papers_formula_with_non_unit_costs(name):
    """Eq. (reachability-mdl-compact) (with X) or (approx-model-complexity) (without), with
    C_l = sum_j E[z_{l+1,j}] (c_{l+1,j} + sum_i E[z_lij] c_lij), computed edge by edge from the
    logits: an edge's E[z] is its own times its source node's (N, I), c_lij = edge * kind *
    forward * layer * input, plus the inputs' node terms c_0i E[z_0i]."""
    spec = KANSpec((2, 2, 1))  # L = 2: stage 0 (trunk 2 + head 1), stage 1 (final layer)
    c = Condition.from_name(name)
    costs = Costs(edge=1.5, node=0.7, exit=2.0, trunk=1.2, forward=3.0, head=0.5, layers=(1.0, 2.5), inputs=(4.0, 0.25))
    model = GatedKAN(spec, c, seeds=[0])
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        if c.edge_gates:
            model.alpha.copy_(torch.randn(model.alpha.shape, generator=g))
        model.node_alpha.copy_(torch.randn(model.node_alpha.shape, generator=g))
        if c.exits:
            model.exit_logits.copy_(torch.randn(model.exit_logits.shape, generator=g))
    a = model.alpha[0].tolist()
    na = model.node_alpha[0].tolist()
    # x0_0, x0_1, x1_0, x1_1
    node_ez = [(_ez(na[i]) if (c.input_gates if i < 2 else c.node_gates) else 1.0) for i in range(4)]
    edge_ez = lambda e: _ez(a[e]) if c.edge_gates else 1.0  # noqa: E731

    # stage 0 reads x^(0) (2 rows), writes [x^(1)_0, x^(1)_1 | y^(0)] with X, [x^(1)] without
    cols0 = 3 if c.exits else 2
    C0, Ch0 = 0.0, 0.0
    for j in range(2):  # trunk units x^(1)_j
        inner = sum(edge_ez(i * cols0 + j) * node_ez[i] * costs.edge * costs.trunk * costs.layers[0] * costs.inputs[i]
                    for i in range(2))
        C0 += node_ez[2 + j] * (costs.node + inner)
    if c.exits:
        Ch0 = sum(edge_ez(i * cols0 + 2) * node_ez[i] * costs.edge * costs.head * costs.layers[0] * costs.inputs[i]
                  for i in range(2))
    # stage 1 reads [x^(0), x^(1)] with F (4 rows), x^(1) without; writes the output
    base = 2 * cols0
    rows = [0, 1, 2, 3] if c.forward else [2, 3]
    kind = costs.head if c.exits else costs.trunk
    C1 = 0.0
    for r, node in enumerate(rows):
        fc = costs.forward if node < 2 else 1.0
        inp = costs.inputs[node] if node < 2 else 1.0
        C1 += edge_ez(base + r) * node_ez[node] * costs.edge * kind * fc * costs.layers[1] * inp
    inputs = sum(costs.node * costs.inputs[i] * node_ez[i] for i in range(2)) if c.input_gates else 0.0
    if c.exits:
        pi = torch.softmax(model.exit_logits[0].detach(), -1).tolist()
        expected = pi[1] * C0 + pi[0] * Ch0 + pi[1] * C1 + costs.exit * 1 + inputs
    else:
        expected = C0 + (1 * costs.node + C1) + inputs  # the final layer carries its output node (z = 1)
    assert float(complexity(model, costs)[0].detach()) == pytest.approx(expected, rel=1e-5)


def test_default_costs_leave_the_papers_complexity_untouched():
    model = GatedKAN(SPEC, Condition.from_name("EFX"), seeds=[0, 1])
    assert torch.equal(complexity(model, Costs()), complexity(model, Costs(trunk=1.0, layers=(1.0, 1.0, 1.0))))
    assert not Costs().weighted


# ---------------------------------------------------------------- mixed packs
def run(condition: str, seed: int, beta: float, costs: Costs | None = None) -> RunConfig:
    t = TrainConfig(epochs=6, batch_size=32, warmup=2, fc_warmup=3, grid_update_count=2,
                    grid_update_every=1, compile=False)
    return RunConfig(DataConfig("sin_xy2", seed), Condition.from_name(condition), KANSpec((2, 3, 3, 1)),
                     costs or Costs(), "threshold", t, beta, seed)


@pytest.mark.parametrize("costs", [Costs(), Costs(node=0.5, forward=2.0, head=0.5, layers=(1.0, 2.0, 1.0),
                                                  inputs=(3.0, 1.0))], ids=["paper", "weighted"])
def test_a_mixed_pack_with_the_new_factors_follows_each_members_lone_trajectory(costs):
    names = ("EFXI", "EN", "EFX", "Baseline", "FX", "EFXNI", "I", "E")
    runs = [run(c, seed, 0.2, costs) if Condition.from_name(c).beta_acts else run(c, seed, 0.0, costs)
            for seed, c in enumerate(names)]
    x, y = toy_data(len(runs))
    mixed = trained(runs, x, y)
    assert mixed.model.members.mixed and mixed.condition.name == "EFXNI"
    x_test, _ = toy_data(len(runs), N=64, seed=1)
    pred, structures = mixed.predict(x_test), mixed.structures()
    for m, r in enumerate(runs):
        alone = trained([r], x[m : m + 1], y[m : m + 1])
        assert_same_member(mixed, m, alone, r.condition.name)
        assert torch.allclose(pred[m], alone.predict(x_test[m : m + 1])[0], rtol=1e-5, atol=1e-6), r.condition.name
        assert structures[m] == alone.structures()[0], r.condition.name
        assert ("node_alpha" in alone.member_model_state(0)) == r.condition.node_gated


def test_node_gates_learn_and_paper_members_keep_no_node_state():
    runs = [run("EFXI", 0, 0.5), run("EFX", 1, 0.5)]
    x, y = toy_data(2)
    pack = trained(runs, x, y)
    own = pack.model.members.node_own
    assert own[0, :2].tolist() == [1.0, 1.0] and own[0, 2:].sum() == 0 and own[1].sum() == 0
    start = GatedKAN(KANSpec((2, 3, 3, 1)), Condition.from_name("EFXI"), seeds=[0]).node_alpha[0]
    moved = pack.model.node_alpha[0]
    assert not torch.equal(moved[:2], start[:2]) and torch.equal(moved[2:], start[2:])  # only the gated nodes learn
    assert "node_alpha" in pack.member_model_state(0) and "node_alpha" not in pack.member_model_state(1)


# ---------------------------------------------------------------- the distractor study (smoke scale)
def test_distractor_inputs_leave_the_true_inputs_and_targets_as_they_were():
    from kanx.data import load_dataset

    plain, with_k = load_dataset("nguyen_f10", data_seed=4), load_dataset("nguyen_f10", data_seed=4, distractors=3)
    assert with_k.input_names == ("x", "y", "d1", "d2", "d3")
    assert torch.equal(plain.x_train, with_k.x_train[:, :2]) and torch.equal(plain.y_test, with_k.y_test)
    noise = with_k.x_train[:, 2:]
    assert float(noise.min()) >= -math.pi and float(noise.max()) <= math.pi and float(noise.std()) > 1.0
    with pytest.raises(ConfigError, match="distractors"):
        load_dataset("nguyen_f9", data_seed=0, distractors=-1)


def test_the_distractor_study_composes_its_sweeps_and_tabulates_recovery(tmp_path):
    import importlib.util
    import json
    from pathlib import Path

    from kanx.plan import sweep_jobs

    path = Path(__file__).resolve().parents[1] / "scripts" / "studies" / "distractors.py"
    spec = importlib.util.spec_from_file_location("distractors", path)
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    jobs = sweep_jobs("nguyen_f9", "EFXI", study.sweep_overrides(3, tmp_path, 2, True, ["beta=0.01"]))
    assert len(jobs) == 2
    run = run_config_from(jobs[0][0])
    assert run.model.width[0] == 5 and run.data.options["distractors"] == 3 and run.condition.input_gates
    for seed, kept in enumerate((["x", "y"], ["x", "y", "d2"])):
        d = tmp_path / "nguyen_f9" / "EFXI" / "t" / f"beta=0.01,seed={seed}"
        d.mkdir(parents=True)
        record = {"dataset": "nguyen_f9", "condition": "EFXI", "beta": 0.01, "status": "ok",
                  "config": {"dataset": {"distractors": 3}},
                  "metrics": {"test_rmse": 0.1 * (seed + 1), "contributing_edges": 4 + seed, "selected_inputs": kept}}
        (d / "record.json").write_text(json.dumps(record))
        (d / "done").write_text("")
    text = study.write_table(tmp_path, 3)
    assert "| nguyen_f9 | EFXI | 0.01 | 2 | 1/2 (50%) | 0.15 | 4.5 | 0.50 |" in text, text
    assert (tmp_path / "study.md").read_text() == text + "\n"


def test_the_formula_export_leaves_out_a_closed_input_and_a_closed_node():
    from kanx.symbolic import contributing_edges

    x = torch.rand(64, 3) * 2 - 1
    model = GatedKAN(SPEC, Condition.from_name("EFXNI"), seeds=[0])
    with torch.no_grad():
        model.exit_logits[0, -1] = 5.0
        model.node_alpha[0, 0] = CLOSED  # input x_0
        model.node_alpha[0, SPEC.width[0] + 1] = CLOSED  # unit x^(1)_1
    edges, *_ = contributing_edges(model, x)
    nodes = {e.src for e in edges} | {e.dst for e in edges}
    assert edges and ("x", 0, 0) not in nodes and ("x", 1, 1) not in nodes and ("x", 0, 1) in nodes


@pytest.mark.committed
def test_the_distractors_option_leaves_the_data_hash_of_every_committed_record():
    from kanx.data import data_hash, load_dataset

    # data_hash of nguyen_f1 and nguyen_f9, data seed 0, at the commit before issue #38
    hashes = [data_hash(load_dataset(n, data_seed=0)) for n in ("nguyen_f1", "nguyen_f9", "sin_xy2")]
    assert hashes == ["b86c25b8d54c5d83", "96f33c2c2efdb121", "5176a1fe8d1afbc0"]
    assert data_hash(load_dataset("nguyen_f1", data_seed=0)) == data_hash(
        load_dataset("nguyen_f1", data_seed=0, distractors=0))
    assert data_hash(load_dataset("nguyen_f9", data_seed=0)) != data_hash(
        load_dataset("nguyen_f9", data_seed=0, distractors=3))
