"""The whole-epoch graph path (train.cuda_graph) against the ordinary one. On a CPU its epochs
run eagerly on the same buffers the CUDA graph replays, in the same chunks; tests/test_cuda.py
checks the replay itself on a GPU."""

import pytest
import torch
from helpers import graphed, toy_data
from helpers import trained as train_pack
from test_mixed_packs import mixed_runs

from kanx.trainer import Trainer


def assert_close(a: Trainer, b: Trainer) -> None:
    assert a.steps == b.steps and a.alive.tolist() == b.alive.tolist()
    for m in range(a.M):
        sa, sb = a.member_model_state(m), b.member_model_state(m)
        for name in sa:
            assert torch.allclose(sa[name], sb[name], rtol=1e-5, atol=1e-6, equal_nan=True), (
                m, name, (sa[name] - sb[name]).abs().max())


@pytest.mark.slow  # trains long (make test-full)
def test_epoch_graphs_follow_the_ordinary_epochs_in_a_mixed_pack():
    # 6 epochs of 4 steps: FC switch, beta onset, grid updates; a partial last batch (N = 120).
    runs = mixed_runs()
    x, y = toy_data(len(runs), N=120)
    plain, static = train_pack(runs, x, y), train_pack(graphed(runs), x, y)
    assert static.epoch_graph is not None and not static.epoch_graph.capture
    assert_close(static, plain)


@pytest.mark.slow  # trains long (make test-full)
def test_chunks_report_every_epoch_and_end_where_the_caller_reads_the_model():
    runs = graphed(mixed_runs())
    x, y = toy_data(len(runs), N=120)
    pack, plain = Trainer(runs, x, y, x.shape[1], torch.device("cpu")), train_pack(mixed_runs(), x, y)
    seen = []
    pack.train(lambda t, p: seen.append((t.epoch, p.epoch, t.last_state["epoch"] if t.last_state else None)),
               host_every=(4,))
    assert [e for e, _, _ in seen] == list(range(1, 7)) and [p for _, p, _ in seen] == list(range(6))
    # last_state is never ahead of the epochs the callback has seen
    assert all(s is None or s <= e for e, _, s in seen) and seen[3][2] == 4 and seen[5][2] == 6
    assert_close(pack, plain)


def test_static_steps_freeze_a_diverging_member_and_resume():
    runs = mixed_runs()[4:7]
    x, y = toy_data(3)
    y[1, 0, 0] = float("inf")
    plain, static = train_pack(runs, x, y), train_pack(graphed(runs), x, y)
    assert static.alive.tolist() == [True, False, True]
    assert_close(static, plain)
    first = train_pack(graphed(runs), x, y, epochs=3)
    resumed = Trainer(graphed(runs), x, y, x.shape[1], torch.device("cpu"))
    resumed.load_member_states([first.member_state(m) for m in range(3)])
    resumed.train()
    assert_close(resumed, plain)
