"""Adding a mechanism (issue #49 item 4; docs/ARCHITECTURE.md "Adding a mechanism"): a toy
factor T, stage gates (one gate per stage of every member, multiplying each edge of its stage,
its cost the sum of the gates), registered in the places the doc names and nowhere else. With
it a condition composes (`+condition=ET`), sweeps beta, trains in a pack of any make-up, and
shows in the record; the paper's conditions hash as before. The fixture counts the modules its
registration changed, so a factor that needed one more edit would fail here."""

import json
import re
import sys
import types

import pytest
import torch
from helpers import TOY, composed, toy_data, train_run, trained
from test_mixed_packs import assert_same_member

from kanx import vocab
from kanx.confdir import conf_dir
from kanx.config import DataConfig, RunConfig, TrainConfig, config_hash, run_config_from, to_container
from kanx.errors import ConfigError
from kanx.kan import mechanisms, structure
from kanx.kan.mechanisms import EXPECTED, TRAIN, Mechanism
from kanx.kan.network import Condition, GatedKAN, KANSpec
from kanx.kan.objective import Costs, complexity
from kanx.kan.structure import RecordRule, model_structure, record_metrics
from kanx.resolvers import beta_sweep

STAGE_GATES = vocab.Factor("T", "stage_gates", "stage gates", beta_acts=True)
OPEN = 2.0  # a stage gate's logit at the start: sigmoid(2) = 0.88, open
CLOSED = -30.0
# The places docs/ARCHITECTURE.md "Adding a mechanism" names: the factor in the vocabulary, its
# parameters and cost in the model, its structure rule; its config group (+condition=<set>) is
# generated from the vocabulary, so conf/ is not edited.
PLACES = {"kanx.vocab", "kanx.kan.mechanisms", "kanx.kan.structure"}


def stage_logits(layout, spec, dtype) -> dict[str, torch.Tensor]:
    """One logit per stage and member, open: the same for every member, drawn from no stream."""
    return {"stage_logits": torch.full((layout.M, layout.L), OPEN, dtype=dtype)}


def stage_gate(model, how: str) -> torch.Tensor:
    """Every edge's factor (M, n_edges): its stage's gate, sigmoid(logit) in training and in
    expectation, 1[sigmoid > 1/2] at inference."""
    p = torch.sigmoid(model.stage_logits)
    z = p if how in (TRAIN, EXPECTED) else (p > 0.5).to(p.dtype)
    return z[:, model.members.edge_stage]


def stage_cost(model, costs: Costs) -> torch.Tensor:
    """The toy's term of L_C (M,): c_node times the sum of its stages' gates."""
    return costs.node * torch.sigmoid(model.stage_logits).sum(-1)


def open_stages(model, estimator: str, dataset) -> int:
    """What the record says of the toy: how many stages it leaves open."""
    return int((model.stage_logits[0] > 0).sum())


# ---------------------------------------------------------------- counting what registering changes
def _state(obj) -> object:
    """What a change to a module-level object shows in: a class's attributes, a container's items."""
    if isinstance(obj, type):
        return tuple(sorted((k, id(v)) for k, v in vars(obj).items()))
    if isinstance(obj, dict):
        return tuple((k, id(v)) for k, v in obj.items())
    if isinstance(obj, list | tuple):
        return tuple(id(v) for v in obj)
    if isinstance(obj, set | frozenset):
        return tuple(sorted(id(v) for v in obj))
    return id(obj)


def snapshot() -> dict[tuple[str, str], object]:
    """Every loaded kanx module's module-level names -> their state, and conf/'s files."""
    out: dict[tuple[str, str], object] = {}
    for name, module in list(sys.modules.items()):
        if name == "kanx" or name.startswith("kanx."):
            for attr, obj in list(vars(module).items()):
                if not attr.startswith("__") and not isinstance(obj, types.ModuleType):
                    out[(name, attr)] = _state(obj)
    conf = conf_dir()
    out[("conf/", "files")] = tuple(sorted((p.relative_to(conf).as_posix(), p.stat().st_mtime_ns)
                                           for p in conf.rglob("*")))
    return out


def _owner(module: str, attr: str) -> str:
    """The module that defines ``module.attr`` (a name another module imported counts where it is
    defined): a class's or function's own, else the module whose source assigns it at top level."""
    if module == "conf/":
        return module
    obj = getattr(sys.modules[module], attr)
    if isinstance(obj, type | types.FunctionType):
        return obj.__module__
    holders = [n for n, m in list(sys.modules.items()) if n.startswith("kanx") and getattr(m, attr, None) is obj]
    defined = re.compile(rf"^{re.escape(attr)}\b[^=\n]*=", re.M)
    return next((n for n in holders if defined.search(open(sys.modules[n].__file__).read())), module)


def touched(before: dict, after: dict) -> set[str]:
    """The modules (and conf/) whose own module-level state differs between two snapshots."""
    return {_owner(module, attr) for (module, attr) in before.keys() | after.keys()
            if before.get((module, attr)) != after.get((module, attr))}


def _drop_generated_options(letter: str) -> None:
    """Hydra's ConfigStore keeps the +condition options register_resolvers generated with the toy."""
    from hydra.core.config_store import ConfigStore

    group = ConfigStore.instance().repo.get("condition", {})
    for option in [o for o in group if letter in o.removesuffix(".yaml")]:
        del group[option]


@pytest.fixture
def toy_factor():
    """The toy factor registered in every place it needs, and taken back after the test; yields
    the modules its registration changed."""
    before = snapshot()
    vocab.register_factor(STAGE_GATES)
    mechanisms.register_mechanism(Mechanism("stage_gates", ("stage_logits",), stage_logits, stage_gate, stage_cost))
    structure.register_record_rule(RecordRule("stage_gates", "open_stages", open_stages))
    places = touched(before, snapshot())
    try:
        yield places
    finally:
        structure.unregister_record_rule("open_stages")
        mechanisms.unregister_mechanism("stage_gates")
        vocab.unregister_factor("T")
        _drop_generated_options("T")


def test_the_toy_factor_touches_four_places_or_fewer(toy_factor):
    assert toy_factor == PLACES and len(toy_factor) <= 4


def test_the_count_sees_an_edit_anywhere_else(monkeypatch):
    """The count is not given: a factor that had to patch one more module (the hash rules, say)
    would count it."""
    import kanx.identity

    before = snapshot()
    monkeypatch.setitem(kanx.identity._KEYS_ADDED_LATER, "condition.stage_gates", False)
    assert touched(before, snapshot()) == {"kanx.identity"}
    monkeypatch.undo()
    assert touched(before, snapshot()) == set()


def test_taken_back_the_toy_leaves_the_vocabulary_as_it_was(toy_factor):
    assert vocab.factor_letters() == "EFXNIT" and Condition.from_name("ET").stage_gates
    assert len(vocab.all_conditions()) == 2 ** 6
    with pytest.raises(ValueError, match="factor letter 'T'"):
        vocab.register_factor(STAGE_GATES)


def test_the_vocabulary_has_only_the_built_in_factors_without_the_fixture():
    from dataclasses import fields

    assert vocab.factor_letters() == vocab.FACTORS and "T" not in vocab.FACTORS
    built_in = [f.field for f in vocab.BUILT_IN_FACTORS]
    assert [f.name for f in fields(Condition)] == built_in == list(vocab.FACTOR_FIELDS.values())
    assert not hasattr(Condition(), "stage_gates") and not mechanisms.MECHANISMS
    assert list(structure.RECORD_RULES) == ["selected_inputs"]


# ---------------------------------------------------------------- names, configs, hashes
def test_a_condition_with_the_toy_composes_and_names_itself(toy_factor):
    c = Condition.from_name("ET")
    assert c == Condition(edge_gates=True, stage_gates=True) and c.name == "ET" and c.beta_acts
    assert c != Condition.from_name("E") and hash(c) != hash(Condition.from_name("E"))
    assert Condition.from_name("T").beta_acts and not Condition.from_name("F").beta_acts
    assert "in the order EFXNIT: 'ET'" in vocab.condition_name_problem("TE")
    run = run_config_from(composed("+condition=ET", "dataset=nguyen_f1"))
    assert run.condition == c
    assert run_config_from(composed("+condition=EFX", "dataset=nguyen_f1")).condition == Condition.from_name("EFX")
    with pytest.raises(ConfigError, match="condition.stage_gates='maybe' must be true or false"):
        run_config_from(composed("+condition=ET", "dataset=nguyen_f1", "condition.stage_gates=maybe"))
    with pytest.raises(ConfigError, match="condition name 'E' does not match its flags"):
        run_config_from(composed("+condition=E", "dataset=nguyen_f1", "condition.stage_gates=true"))


def test_beta_sweeps_where_the_toy_acts(toy_factor):
    betas = "0.0,0.001,0.005,0.01,0.05,0.1,0.5"  # conf/dataset/concrete.yaml
    assert composed("+condition=T", "dataset=concrete", hydra=True).hydra.sweeper.params.beta == betas
    assert composed("+condition=FT", "dataset=concrete", hydra=True).hydra.sweeper.params.beta == betas
    assert composed("+condition=F", "dataset=concrete", hydra=True).hydra.sweeper.params.beta == "0.0"
    assert composed("+condition=T").beta == 0.2 and composed("+condition=F").beta == 0.0  # sin_xy2's single-run beta
    assert beta_sweep({"stage_gates": True}, [0.1]) == "0.1"
    with pytest.raises(ConfigError, match="condition.stage_gates='maybe' must be true or false"):
        beta_sweep({"edge_gates": False, "stage_gates": "maybe"}, [0.1])


def test_the_papers_config_hashes_do_not_move(toy_factor):
    efx = to_container(composed("+condition=EFX", "dataset=nguyen_f1"))
    assert efx["condition"]["stage_gates"] is False  # in the config, at its default
    # the hashes of test_factors (before issue #38), with the toy registered
    assert config_hash(efx) == "ec8611879f5952dd"
    assert config_hash(to_container(composed("+condition=baseline", "dataset=nguyen_f1"))) == "ea6ea05047c13ef6"
    assert config_hash(to_container(composed("+condition=EFXT", "dataset=nguyen_f1"))) != config_hash(efx)


# ---------------------------------------------------------------- the model
SPEC = KANSpec((2, 3, 3, 1))


def test_the_toy_is_in_the_gates_and_in_l_c(toy_factor):
    model = GatedKAN(SPEC, Condition.from_name("T"), seeds=[0])
    s = torch.sigmoid(torch.tensor(OPEN)).item()
    assert torch.allclose(model.expected_gates(), torch.full((1, model.n_edges), s))
    # no X: L_C = sum of the layers' node costs (3 + 3 + 1) and edges (6 + 9 + 3, each at s), plus the 3 stage gates
    assert torch.allclose(complexity(model, Costs()), torch.tensor([7 + 21 * s]))
    with torch.no_grad():
        model.stage_logits[0, 1] = CLOSED
    z = model.split_edges(model.inference_gates())
    assert float(z[1].sum()) == 0 and float(z[0].sum()) == 6  # stage 1 shut, stage 0 open
    shut = model_structure(model)[0]
    assert shut.path_edges == 0 and shut.depth == 0  # no input reaches the output (the last stage is a bias term)
    assert record_metrics(model, "threshold", None) == {"open_stages": 2}
    assert record_metrics(GatedKAN(SPEC, Condition.from_name("E"), seeds=[0]), "threshold", None) == {}


def _run(condition: str, seed: int, beta: float) -> RunConfig:
    t = TrainConfig(epochs=4, batch_size=32, warmup=1, fc_warmup=2, grid_update_count=2, grid_update_every=1,
                    compile=False)
    c = Condition.from_name(condition)
    return RunConfig(DataConfig("sin_xy2", seed), c, SPEC, Costs(), "threshold", t, beta, seed)


def test_a_mixed_pack_with_the_toy_follows_each_members_lone_trajectory(toy_factor):
    names = ("ET", "EFX", "T", "Baseline")
    runs = [_run(c, seed, 0.5 if Condition.from_name(c).beta_acts else 0.0) for seed, c in enumerate(names)]
    x, y = toy_data(len(runs))
    mixed = trained(runs, x, y)
    assert mixed.model.members.mixed and mixed.condition.name == "EFXT"
    for m, r in enumerate(runs):
        alone = trained([r], x[m : m + 1], y[m : m + 1])
        assert_same_member(mixed, m, alone, r.condition.name)
        assert ("stage_logits" in alone.member_model_state(0)) == r.condition.stage_gates
    assert not torch.equal(mixed.model.stage_logits[0], torch.full((3,), OPEN))  # it learns


def test_a_run_with_the_toy_trains_and_shows_in_its_record(toy_factor, tmp_path):
    import kanx

    run_dir = train_run(tmp_path / "sin_xy2" / "ET" / "beta=0.1,seed=0", "+condition=ET", "beta=0.1", "seed=0",
                        f"results_root={tmp_path}", "train.epochs=3", "train.warmup=1", "train.fc_warmup=1", *TOY)
    record = json.loads((run_dir / "record.json").read_text())
    assert record["condition"] == "ET" and record["beta"] == 0.1
    assert record["config"]["condition"]["stage_gates"] is True
    assert record["metrics"]["open_stages"] == 3 and list(record["metrics"])[-1] == "open_stages"
    trained_run = kanx.load_run(run_dir)
    assert trained_run.model.condition.stage_gates and trained_run.model.stage_logits.shape == (1, 3)
    assert not torch.equal(trained_run.model.stage_logits, torch.full((1, 3), OPEN))  # trained, model.pt holds it


def test_a_registration_that_would_not_work_is_refused(toy_factor):
    with pytest.raises(ValueError, match="mechanism flag 'stage_gate' must be a factor's field"):
        mechanisms.register_mechanism(Mechanism("stage_gate", (), stage_logits))
    with pytest.raises(ValueError, match="record metric 'depth' is taken"):
        structure.register_record_rule(RecordRule("stage_gates", "depth", open_stages))
    with pytest.raises(ValueError, match="factor field 'exits' must be a new name"):
        vocab.register_factor(vocab.Factor("Q", "exits", "more exits", beta_acts=True))
    mechanisms.unregister_mechanism("stage_gates")
    try:  # parameters under names the member layout does not know would be held by every member
        mechanisms.register_mechanism(Mechanism("stage_gates", ("logits",), stage_logits, stage_gate, stage_cost))
        with pytest.raises(ValueError, match=r"made parameters \['stage_logits'\], not its names \['logits'\]"):
            GatedKAN(SPEC, Condition.from_name("T"), seeds=[0])
    finally:
        mechanisms.unregister_mechanism("stage_gates")
        mechanisms.register_mechanism(Mechanism("stage_gates", ("stage_logits",), stage_logits, stage_gate, stage_cost))
