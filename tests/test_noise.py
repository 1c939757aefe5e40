"""Counter-based draws (kanx.noise): a member's minibatch orders and noise are a function of
its seed and what they are for, the same alone and in packs of any make-up, exact 32-bit
arithmetic on every backend. tests/test_cuda.py checks that a GPU draws the same numbers."""

import numpy as np
import pytest
import torch
from helpers import toy_data
from test_mixed_packs import mixed_runs

from kanx import noise
from kanx.trainer import Trainer


def lowbias32(x: int) -> int:
    """The reference: Wellons' lowbias32 on Python integers."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def test_the_mix_is_lowbias32_bit_for_bit_over_the_whole_word():
    words = np.random.default_rng(0).integers(0, 2**32, 5000, dtype=np.int64)
    words[:4] = [0, 1, 2**31, 2**32 - 1]
    got = noise.mix32(torch.from_numpy(words))
    assert got.tolist() == [lowbias32(int(w)) for w in words]


def epoch(seeds, e):
    return noise.at_epoch(noise.streams(noise.member_keys(seeds)), e)


def test_uniforms_lie_inside_the_unit_interval_and_look_uniform():
    u = noise.noise(epoch(range(50), 0), noise.EGATE, 8, torch.arange(100).expand(50, 100))
    assert u.dtype == torch.float32 and 0 < u.min() and u.max() < 1
    counts = torch.histc(u, bins=20, min=0, max=1)
    expected = u.numel() / 20
    assert ((counts - expected) ** 2 / expected).sum() < 60  # chi-square, 19 degrees of freedom: p < 1e-5 to fail


def test_orders_are_permutations_that_change_with_seed_and_epoch():
    for n in (1, 2, 3, 5, 17, 64, 300, 1000, 1024, 1025, 3000):  # powers of 4 need no compaction, the others do
        order = noise.orders(epoch(range(3), 7), n)
        assert torch.equal(order.sort(1).values, torch.arange(n).expand(3, n)), n
    a, b = noise.orders(epoch([0, 1], 0), 300), noise.orders(epoch([0, 1], 1), 300)
    assert not torch.equal(a[0], a[1]) and not torch.equal(a[0], b[0])
    assert torch.equal(a, noise.orders(epoch([0, 1], 0), 300))  # a function of its counter, nothing else


def test_orders_put_every_sample_in_every_batch_alike_and_split_neighbours_as_chance_does():
    """A Feistel network of few rounds on small halves could keep structure (neighbours in one
    batch, a sample held to some batches); over 400 member-epochs of 1,000 samples in 8 batches
    neither shows beyond chance."""
    n, n_batches = 1000, 8
    orders = torch.cat([noise.orders(epoch(range(20), e), n) for e in range(20)])  # (400, n)
    batch_of = torch.empty_like(orders)
    batch_of.scatter_(1, orders, (torch.arange(n) * n_batches // n).expand_as(orders))  # sample -> its batch
    counts = torch.stack([(batch_of == b).sum(0) for b in range(n_batches)]).double()  # (batches, samples)
    expected = orders.shape[0] / n_batches
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 7 * n + 5 * (2 * 7 * n) ** 0.5  # 7,000 degrees of freedom: 5 sigma
    pairs = batch_of[:, :-1] == batch_of[:, 1:]  # samples i and i + 1 in one batch
    together = pairs.double().mean()
    # 5 sigma, tripled: pairs share epochs
    assert abs(together - 1 / n_batches) < 15 * (1 / n_batches / pairs.numel()) ** 0.5


def test_purposes_epochs_and_steps_draw_apart():
    own = torch.arange(64).view(1, 64)
    e0 = noise.noise(epoch([3], 0), noise.EGATE, 2, own)
    assert not torch.equal(e0[0], e0[1])
    assert not torch.equal(e0, noise.noise(epoch([3], 0), noise.EXIT, 2, own))
    assert not torch.equal(e0, noise.noise(epoch([3], 1), noise.EGATE, 2, own))
    assert not torch.equal(e0, noise.noise(epoch([4], 0), noise.EGATE, 2, own))


def test_a_member_draws_the_same_alone_and_in_packs_of_other_make_ups():
    runs = mixed_runs()
    x, y = toy_data(len(runs), N=120)
    packs = [Trainer(runs, x, y, 120, torch.device("cpu")),
             Trainer(runs[::-1], x.flip(0), y.flip(0), 120, torch.device("cpu"))]
    for m, run in enumerate(runs):
        alone = Trainer([run], x[m : m + 1], y[m : m + 1], 120, torch.device("cpu"))
        want_order, want_noise = alone.epoch_draws(5, 4)
        want = own_noise(alone, 0, want_noise)
        for pack, at in ((packs[0], m), (packs[1], len(runs) - 1 - m)):
            order, noise = pack.epoch_draws(5, 4)
            assert torch.equal(order[at], want_order[0])
            for got, expected in zip(own_noise(pack, at, noise), want, strict=True):
                assert torch.equal(got, expected), (run.condition.name, m)


def own_noise(pack: Trainer, m: int, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Member m's egate and exit noise in its own layout's order, from a pack's noise vector."""
    n_gate = pack.model.members.egate_index.shape[1]
    egate, exits = noise[:, m, :n_gate], noise[:, m, n_gate:]
    own = pack.model.members.egate_index[m]
    egate = egate[:, own >= 0][:, own[own >= 0].argsort()]
    return egate, exits[:, pack.model.members.exit_index[m] >= 0]


def test_slots_a_member_lacks_hold_one_half():
    runs = mixed_runs()
    x, y = toy_data(len(runs), N=120)
    pack = Trainer(runs, x, y, 120, torch.device("cpu"))
    _, noise = pack.epoch_draws(0, 4)
    lacking = torch.cat([pack.model.members.egate_index, pack.model.members.exit_index], dim=1) < 0
    assert lacking.any() and (noise[:, lacking] == 0.5).all()


@pytest.mark.slow  # torch.compile's first call (make test-full)
def test_compiled_draws_are_the_eager_draws_bit_for_bit():
    own = {noise.EGATE: torch.tensor([[0, 1, 2, -1], [3, 0, -1, -1]]), noise.EXIT: torch.tensor([[0, 1], [1, -1]])}
    keys = noise.streams(noise.member_keys([4, 9]))
    for e, n in ((0, 300), (3, 256)):
        eager = noise.epoch_draws(keys, e, n, 5, own)
        compiled = noise.epoch_draws(keys, e, n, 5, own, compiled=True)
        assert all(torch.equal(a, b) for a, b in zip(eager, compiled, strict=True))
