"""Training on a CUDA device: the same trainer as on the CPU, deterministic, resumable, and
close to the CPU's numbers. Skipped where torch sees no GPU (CI, this project's own
machine); run them on a GPU host with `pytest tests/test_cuda.py`."""

import json

import pytest
import torch
from helpers import TOY, cli, graphed, records, toy_data, trained
from test_trainer import make_runs

from kanx.trainer import Trainer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
CUDA = torch.device("cuda")


def states(pack):
    return {k: v.detach().cpu() for k, v in pack.model.state_dict().items()}


@pytest.mark.parametrize("condition", ["Baseline", "EFX"])
def test_same_seed_same_numbers_on_cuda(condition):
    runs = make_runs(condition=condition)
    x, y = toy_data(3)
    a, b = states(trained(runs, x, y, CUDA)), states(trained(runs, x, y, CUDA))
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_cuda_follows_the_cpu_trajectory():
    # 20 Adam steps with FC switch-on and grid updates: float32 on two devices rounds
    # differently, so this is a closeness test; the gates see the same noise (kanx.noise).
    runs = make_runs(condition="EFX")
    x, y = toy_data(3)
    cpu, gpu = trained(runs, x, y, torch.device("cpu")), trained(runs, x, y, CUDA)
    c, g = states(cpu), states(gpu)
    worst = max(((c[k] - g[k]).abs().max().item(), k) for k in c if c[k].is_floating_point() and c[k].numel())
    print(f"largest |cpu - cuda| after {cpu.steps} steps: {worst[0]:.2e} ({worst[1]})")
    for name in c:
        assert torch.allclose(c[name], g[name], rtol=1e-3, atol=1e-4), name
    assert torch.allclose(cpu.predict(x).cpu(), gpu.predict(x).cpu(), rtol=1e-3, atol=1e-4)


def test_resuming_on_cuda_gives_the_same_model():
    runs = make_runs(epochs=6)
    x, y = toy_data(3)
    full = states(trained(runs, x, y, CUDA))
    first = trained(runs, x, y, CUDA, epochs=3)
    resumed = Trainer(runs, x, y, x.shape[1], CUDA)
    resumed.load_member_states([first.member_state(m) for m in range(3)])
    resumed.train()
    for name, value in states(resumed).items():
        assert torch.equal(value, full[name]), name


def test_a_diverging_member_is_frozen_on_cuda():
    runs = make_runs(seeds=(0, 1), betas=(0.05, 0.05), epochs=3)
    x, y = toy_data(2)
    y[1, 0, 0] = float("inf")
    assert trained(runs, x, y, CUDA).alive.tolist() == [True, False]


def test_a_cli_sweep_on_cuda_matches_the_cpu_sweep(tmp_path):
    args = ["+condition=EFX", "train.epochs=3", "train.warmup=1", "train.fc_warmup=1", "beta=0.0,0.1", "seed=0,1", *TOY,
            "-m"]
    cli(f"results_root={tmp_path / 'cuda'}", "device=cuda", *args)
    cli(f"results_root={tmp_path / 'cpu'}", "device=cpu", *args)
    on_cuda, on_cpu = records(tmp_path / "cuda"), records(tmp_path / "cpu")
    assert len(on_cuda) == len(on_cpu) == 4
    for g, c in zip(on_cuda, on_cpu, strict=True):
        assert (g["beta"], g["seed"], g["status"]) == (c["beta"], c["seed"], c["status"])
        assert g["metrics"]["test_rmse"] == pytest.approx(c["metrics"]["test_rmse"], rel=1e-3), (
            json.dumps([g["metrics"], c["metrics"]]))
        assert (g["metrics"]["contributing_edges"], g["metrics"]["depth"]) == (
            c["metrics"]["contributing_edges"], c["metrics"]["depth"])
        assert g["timing"]["device"].startswith("cuda (") and c["timing"]["device"] == "cpu"


# ------------------------------------------------------------------ CUDA graphs (train.cuda_graph)


@pytest.mark.parametrize("condition", ["Baseline", "EFX", "mixed"])
def test_graph_replay_follows_the_eager_cuda_step(condition):
    from test_mixed_packs import mixed_runs

    runs = mixed_runs() if condition == "mixed" else make_runs(condition=condition)
    x, y = toy_data(len(runs), N=120)  # a partial last batch: a second graph
    eager, graph = trained(runs, x, y, CUDA), trained(graphed(runs), x, y, CUDA)
    # FC off and on
    assert graph.epoch_graph.capture and len(graph.epoch_graph.graphs) == (2 if condition != "Baseline" else 1)
    for m in range(len(runs)):
        a, b = eager.member_model_state(m), graph.member_model_state(m)
        for name in a:
            assert torch.allclose(a[name], b[name], rtol=1e-4, atol=1e-5), (
                m, name, (a[name] - b[name]).abs().max().item())


def test_graph_replay_is_deterministic_and_resumes_bitwise():
    runs = graphed(make_runs(epochs=6))
    x, y = toy_data(3)
    full, again = states(trained(runs, x, y, CUDA)), states(trained(runs, x, y, CUDA))
    first = trained(runs, x, y, CUDA, epochs=3)
    resumed = Trainer(runs, x, y, x.shape[1], CUDA)
    resumed.load_member_states([first.member_state(m) for m in range(3)])
    resumed.train()
    for name, value in states(resumed).items():
        assert torch.equal(value, full[name]) and torch.equal(again[name], full[name]), name


def test_graph_replay_freezes_a_diverging_member():
    runs = graphed(make_runs(seeds=(0, 1), betas=(0.05, 0.05), epochs=3))
    x, y = toy_data(2)
    y[1, 0, 0] = float("inf")
    assert trained(runs, x, y, CUDA).alive.tolist() == [True, False]


# ------------------------------------------------------------------ counter-based draws (kanx.noise)


@pytest.mark.parametrize("epoch", [0, 1, 9_999, 2**31 + 5])
def test_draws_on_cuda_are_the_cpu_draws(epoch):
    from kanx import noise

    keys = noise.member_keys([0, 1, 7, 123456789])
    own = torch.tensor([[0, 1, 2, -1], [3, -1, 0, 1], [0, 1, 2, 3], [-1, -1, -1, -1]])
    on_cpu = noise.at_epoch(noise.streams(keys), epoch)
    on_gpu = noise.at_epoch(noise.streams(keys.to(CUDA)), torch.tensor(epoch, device=CUDA))
    for purpose in (noise.EGATE, noise.EXIT):
        assert torch.equal(noise.noise(on_cpu, purpose, 8, own), noise.noise(on_gpu, purpose, 8, own.to(CUDA)).cpu())
    assert torch.equal(noise.orders(on_cpu, 1000), noise.orders(on_gpu, 1000).cpu())


def test_a_packs_draws_on_cuda_are_its_draws_on_the_cpu():
    from test_mixed_packs import mixed_runs

    runs = mixed_runs()
    x, y = toy_data(len(runs), N=120)
    cpu, gpu = Trainer(runs, x, y, 120, torch.device("cpu")), Trainer(runs, x, y, 120, CUDA)
    for a, b in zip(cpu.epoch_draws(3, 4), gpu.epoch_draws(3, 4), strict=True):
        assert torch.equal(a, b.cpu())


def test_chunked_graph_training_does_not_depend_on_where_chunks_end():
    runs = graphed(make_runs(epochs=8))
    x, y = toy_data(3)
    whole = Trainer(runs, x, y, x.shape[1], CUDA)
    whole.train()
    cut = Trainer(runs, x, y, x.shape[1], CUDA)
    cut.train(host_every=(3,))
    assert torch.equal(whole.alive, cut.alive)
    for name, value in states(cut).items():
        assert torch.equal(value, states(whole)[name]), name
