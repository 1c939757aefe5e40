"""The training loop: schedules, packed vs one-at-a-time equivalence, divergence, resume."""

import math

import pytest
import torch
from helpers import toy_data, trained

from kanx.config import DataConfig, RunConfig, TrainConfig
from kanx.kan.network import Condition, KANSpec
from kanx.kan.objective import Costs
from kanx.trainer import Trainer, beta_active, fc_active, grid_update_epochs, tau_x


def make_runs(condition="EFX", seeds=(0, 1, 2), betas=(0.0, 0.05, 0.5), epochs=5, **train):
    t = TrainConfig(**{"epochs": epochs, "batch_size": 32, "compile": False, "warmup": 1,
                       "fc_warmup": 2, "grid_update_count": 2, "grid_update_every": 1} | train)
    return [RunConfig(DataConfig("sin_xy2", s), Condition.from_name(condition), KANSpec((2, 3, 3, 1)),
                      Costs(), "threshold", t, b, s)
            for s, b in zip(seeds, betas, strict=True)]


def test_schedules():
    assert not beta_active(199, 200) and beta_active(200, 200)
    assert not fc_active(99, 100) and fc_active(100, 100)
    assert tau_x(0, 100) == pytest.approx(5.0) and tau_x(99, 100) == pytest.approx(0.1)
    assert tau_x(50, 101) == pytest.approx(math.sqrt(5.0 * 0.1))
    # train.tau_x_epochs: then held
    assert tau_x(499, 500) == pytest.approx(0.1) and tau_x(4999, 500) == pytest.approx(0.1)
    t = TrainConfig(epochs=1000, batch_size=64, warmup=500, fc_warmup=100)
    assert grid_update_epochs(t, Condition.from_name("Baseline")) == set(range(0, 50, 5))
    assert grid_update_epochs(t, Condition.from_name("EFX")) == {s + i for s in (0, 100, 500) for i in range(0, 50, 5)}
    assert grid_update_epochs(TrainConfig(epochs=10, batch_size=1, grid_updates=False), Condition()) == set()
    # X, FX: beta from epoch 0
    literal = TrainConfig(epochs=1000, batch_size=64, warmup=500, fc_warmup=100, warmup_for="egates")
    assert grid_update_epochs(literal, Condition.from_name("FX")) == {s + i for s in (0, 100) for i in range(0, 50, 5)}
    assert grid_update_epochs(literal, Condition.from_name("EFX")) == grid_update_epochs(t, Condition.from_name("EFX"))


@pytest.mark.parametrize("warmup_for, x_beta_in_warmup", [("all", 0.0), ("egates", 0.5)])
def test_the_warmup_holds_beta_at_zero_for_the_conditions_it_applies_to(warmup_for, x_beta_in_warmup):
    runs = [RunConfig(DataConfig("sin_xy2", 0), Condition.from_name(c), KANSpec((2, 3, 3, 1)), Costs(), "threshold",
                      TrainConfig(epochs=5, batch_size=32, compile=False, warmup=2, warmup_for=warmup_for), b, 0)
            for c, b in (("X", 0.5), ("EX", 0.5), ("E", 0.1), ("Baseline", 0.0))]
    x, y = toy_data(len(runs))
    pack = Trainer(runs, x, y, x.shape[1], torch.device("cpu"))
    assert pack.betas_at(1) == [x_beta_in_warmup, 0.0, 0.0, 0.0]
    assert pack.betas_at(2) == [0.5, 0.5, 0.1, 0.0]


def test_packed_members_match_runs_trained_one_at_a_time():
    runs = make_runs()  # 5 epochs x 4 steps = 20 steps, FC switch and grid updates included
    x, y = toy_data(3)
    packed = trained(runs, x, y)
    assert packed.steps == 20
    for m, run in enumerate(runs):
        alone = trained([run], x[m : m + 1], y[m : m + 1])
        for (name, a), b in zip(packed.model.state_dict().items(), alone.model.state_dict().values(), strict=True):
            assert torch.allclose(a[m], b[0], rtol=1e-5, atol=1e-7), name


@pytest.mark.bitwise
@pytest.mark.parametrize("condition", ["Baseline", "F"])
def test_a_lone_run_trains_bitwise_like_its_packed_self(condition):
    # A lone run (M = 1) must not take a different BLAS path (gemv) from the packed one.
    # Elementwise transcendentals still round differently where a tensor's vectorized loop
    # ends (a position that depends on the pack's size): gated runs agree only to ~1e-8 per
    # step (test above; docs/journal/reproduction-notes.md).
    runs = make_runs(condition=condition)
    x, y = toy_data(3)
    packed, alone = trained(runs, x, y), trained(runs[:1], x[:1], y[:1])
    for (name, a), b in zip(packed.model.state_dict().items(), alone.model.state_dict().values(), strict=True):
        assert torch.equal(a[0], b[0]), name


def test_a_diverging_member_is_frozen_and_the_others_are_untouched():
    runs = make_runs(seeds=(0, 1), betas=(0.05, 0.05), epochs=3)
    x, y = toy_data(2)
    y_bad = y.clone()
    y_bad[1, 0, 0] = float("inf")
    good = trained(runs[:1], x[:1], y[:1])
    pack = trained(runs, x, y_bad)
    assert pack.alive.tolist() == [True, False]
    for (name, a), b in zip(pack.model.state_dict().items(), good.model.state_dict().values(), strict=True):
        assert torch.allclose(a[0], b[0], rtol=1e-5, atol=1e-7), name


def test_resuming_from_member_states_gives_the_same_model():
    runs = make_runs(epochs=6)
    x, y = toy_data(3)
    full = trained(runs, x, y)
    first = Trainer(runs, x, y, x.shape[1], torch.device("cpu"))
    while first.epoch < 3:
        first.run_epoch()
    states = [first.member_state(m) for m in range(3)]
    resumed = Trainer(runs, x, y, x.shape[1], torch.device("cpu"))
    resumed.load_member_states(states)
    resumed.train()
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_compile_auto_trains_the_first_epoch_eagerly_and_compiles_from_the_second():
    long = 10**5  # epochs enough for the compile to pay (kanx.compiling.pays_off); none of them run here
    runs = make_runs(epochs=long, compile="auto")
    x, y = toy_data(3)
    pack = Trainer(runs, x, y, x.shape[1], torch.device("cpu"))
    assert (pack.compile_from, pack.compiled, pack.optimizer.fused) == (1, False, False)
    assert not any(stage.compiled for stage in pack.model.stages)
    pack.epoch = 1  # as after the first epoch, or resumed past it
    pack._compile_when_due()
    assert pack.compiled and pack.optimizer.fused and all(stage.compiled for stage in pack.model.stages)
    eager = Trainer(make_runs(epochs=3, compile="auto"), x, y, x.shape[1], torch.device("cpu"))  # too short to pay
    eager.epoch = 2
    eager._compile_when_due()
    assert eager.compile_from is None and not eager.compiled


@pytest.mark.slow  # torch.compile (make test-full)
def test_a_pack_resumed_past_its_compile_switch_trains_as_the_uninterrupted_one():
    runs = make_runs(epochs=10**5, compile="auto")  # compiled from epoch 1
    x, y = toy_data(3)
    full = Trainer(runs, x, y, x.shape[1], torch.device("cpu"))
    while full.epoch < 4:
        full.run_epoch()
    first = Trainer(runs, x, y, x.shape[1], torch.device("cpu"))
    while first.epoch < 2:
        first.run_epoch()
    resumed = Trainer(runs, x, y, x.shape[1], torch.device("cpu"))
    resumed.load_member_states([first.member_state(m) for m in range(3)])
    while resumed.epoch < 4:
        resumed.run_epoch()
    assert full.compiled and resumed.compiled
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_the_trainer_keeps_its_state_at_the_last_epoch_boundary(tmp_path):
    from kanx.jobs import Job
    from kanx.runner import Checkpointer

    runs = make_runs(epochs=3)
    x, y = toy_data(3)
    seen = []
    pack = Trainer(runs, x, y, x.shape[1], torch.device("cpu"))
    assert pack.last_state is None  # nothing to checkpoint before the first epoch has ended
    pack.train(lambda t, progress: seen.append(t.last_state["epoch"]))
    assert seen == [1, 2, 3]
    jobs = [Job({}, run, tmp_path / str(m), f"hash{m}") for m, run in enumerate(runs)]
    for job in jobs:
        job.run_dir.mkdir()
    checkpointer = Checkpointer()
    assert checkpointer.save() == 0  # no pack in training
    checkpointer.watch(jobs, pack)
    assert checkpointer.save() == 3
    saved = torch.load(jobs[1].run_dir / "checkpoint.pt", weights_only=True)
    assert saved["epoch"] == 3 and saved["config_hash"] == "hash1"
    assert torch.equal(saved["state"]["model"]["stages.0.coef"], pack.member_state(1)["model"]["stages.0.coef"])


def test_a_member_checkpoint_holds_its_own_slice_not_the_pack():
    """torch.save writes a view's whole storage; a member's slice must be a copy, or each
    checkpoint file grows with the pack (a pack of 114 wrote 3 MB per member, 27 kB its own)."""
    runs = make_runs(epochs=1) * 4
    x, y = toy_data(len(runs))
    pack = trained(runs, x, y)
    state = pack.member_state(2)
    tensors = list(state["model"].values()) + [t for st in state["optimizer"].values() for t in st.values()]
    assert tensors and all(t.untyped_storage().nbytes() == t.numel() * t.element_size() for t in tensors)


def test_same_seed_same_numbers():
    x, y = toy_data(1)
    a = trained(make_runs(seeds=(3,), betas=(0.1,)), x, y)
    b = trained(make_runs(seeds=(3,), betas=(0.1,)), x, y)
    for pa, pb in zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)


def test_adam_matches_torch_adam():
    from kanx.optim import Adam

    torch.manual_seed(0)
    a, b = torch.nn.Parameter(torch.randn(3, 4)), torch.nn.Parameter(torch.randn(5))
    a2, b2 = torch.nn.Parameter(a.detach().clone()), torch.nn.Parameter(b.detach().clone())
    ours, ref = Adam([a, b], lr=1e-2), torch.optim.Adam([a2, b2], lr=1e-2)
    for _ in range(5):
        g1, g2 = torch.randn(3, 4), torch.randn(5)
        for (p, q), g in zip(((a, a2), (b, b2)), (g1, g2), strict=True):
            p.grad, q.grad = g.clone(), g.clone()
        ours.step()
        ref.step()
    assert torch.allclose(a, a2, atol=1e-7) and torch.allclose(b, b2, atol=1e-7)


@pytest.mark.slow  # torch.compile (make test-full)
def test_fused_adam_is_adam():
    """The compiled update (CPU, train.compile) does what the foreach one does, to rounding."""
    from kanx.optim import Adam

    torch.manual_seed(0)
    shapes = [(7, 3, 5), (7, 4), (7,)]
    eager = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    fused = [torch.nn.Parameter(p.detach().clone()) for p in eager]
    start = [p.detach().clone() for p in eager]
    ours, ref = Adam(fused, lr=1e-2, fused=True), Adam(eager, lr=1e-2)
    for _ in range(6):
        for p, q in zip(fused, eager, strict=True):
            g = torch.randn(p.shape)
            p.grad, q.grad = g.clone(), g.clone()
        ours.step()
        ref.step()
    for p, q, p0 in zip(fused, eager, start, strict=True):
        assert (p - p0).abs().mean() > 1e-3 and torch.allclose(p, q, rtol=0, atol=1e-6)
        assert torch.allclose(ours.state[p]["exp_avg_sq"], ref.state[q]["exp_avg_sq"], rtol=1e-6, atol=0)
    assert float(ours.state[fused[0]]["step"]) == 6


@pytest.mark.slow  # torch.compile (make test-full)
def test_the_compiled_step_trains_like_the_eager_one():
    """train.compile (the fused basis kernels and, on a CPU, the fused Adam) changes rounding only."""
    x, y = toy_data(3)
    eager = trained(make_runs(), x, y)
    compiled = trained(make_runs(compile=True), x, y)
    assert compiled.optimizer.fused
    for (name, a), b in zip(compiled.model.state_dict().items(), eager.model.state_dict().values(), strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), name


@pytest.mark.slow  # torch.compile (make test-full)
@pytest.mark.parametrize("exit_pi", ["softmax", "tempered"])
def test_a_compiled_mixed_pack_trains_like_the_eager_one(exit_pi):
    """The step's parameter terms (gates, exit weights, L_C: Trainer.parameter_terms) compiled as one
    function, in a mixed pack with node and input gates, change rounding only."""
    conditions = ("EFXNI", "Baseline", "X", "EF")

    def runs(compile):
        t = TrainConfig(epochs=4, batch_size=32, compile=compile, warmup=1, fc_warmup=2, grid_update_count=2,
                        grid_update_every=1, exit_pi=exit_pi)
        return [RunConfig(DataConfig("sin_xy2", s), Condition.from_name(c), KANSpec((2, 3, 3, 1)), Costs(),
                          "threshold", t, 0.05, s) for s, c in enumerate(conditions)]

    x, y = toy_data(len(conditions))
    eager, compiled = trained(runs(False), x, y), trained(runs(True), x, y)
    for (name, a), b in zip(compiled.model.state_dict().items(), eager.model.state_dict().values(), strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), name
