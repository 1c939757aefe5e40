"""The static-buffer training step (train.cuda_graph) against the ordinary one. On a CPU it
runs eagerly on the same buffers the CUDA graph replays; tests/test_cuda.py checks the
replay itself on a GPU."""

from dataclasses import replace

import torch
from helpers import toy_data
from helpers import trained as train_pack
from test_mixed_packs import mixed_runs

from kanx.trainer import Trainer


def graphed(runs):
    return [replace(r, train=replace(r.train, cuda_graph=True)) for r in runs]


def assert_close(a: Trainer, b: Trainer) -> None:
    assert a.steps == b.steps and a.alive.tolist() == b.alive.tolist()
    for m in range(a.M):
        sa, sb = a.model.member_state_dict(m), b.model.member_state_dict(m)
        for name in sa:
            assert torch.allclose(sa[name], sb[name], rtol=1e-5, atol=1e-6, equal_nan=True), (m, name, (sa[name] - sb[name]).abs().max())


def test_static_steps_follow_the_ordinary_step_in_a_mixed_pack():
    # 6 epochs of 4 steps: FC switch, beta onset, grid updates; a partial last batch (N = 120).
    runs = mixed_runs()
    x, y = toy_data(len(runs), N=120)
    plain, static = train_pack(runs, x, y), train_pack(graphed(runs), x, y)
    assert static.static_steps is not None and not static.static_steps.capture
    assert set(static.static_steps.buffers) == {32, 24}
    assert_close(static, plain)


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
