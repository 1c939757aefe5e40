"""Counter-based draws: every random number a member uses in training (its minibatch order,
its egate noise, its exit-gate Gumbel noise) is a pure function of what it is for,

    (member key, epoch, purpose, step, index)  ->  32 random bits,

computed as tensor operations for all members at once on the pack's device. Nothing is
carried from one draw to the next, so there is no generator state to save or restore: a
resumed run draws what it would have drawn, a member draws the same numbers alone or in a
pack of any make-up (its indices are those of its own condition's layout), and the numbers
are the same on a CPU and a GPU (integer arithmetic only; the conversion to a uniform is
exact in float32). Inside a CUDA graph the epoch is a device tensor, so the graph draws the
next epoch's numbers itself (kanx.epoch_graph).

The mixing function is Wellons' ``lowbias32`` (xorshift-multiply, 2 rounds; "Prospecting for
hash functions", 2018), chained over the words of the counter (key, epoch, step and purpose,
index), with a second chain so that two counters share their 32 bits only by chance (2^-64),
not whenever their prefixes differ in the low bits of the index. Words are 32-bit values in
int64 tensors and products are formed from 16-bit halves, so nothing overflows and every
backend computes the same bits. The member's part is computed once per pack, the epoch's
once per epoch, so an epoch costs a few dozen tensor operations whatever the pack's size.

The member key is two 32-bit words from numpy's SeedSequence(seed), child 1 (child 0 seeds
the initialization, kanx.kan.spec.member_generators), so it depends on the member's seed
alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

# lowbias32's multipliers, and the golden ratio's odd constant for the second chain
_M1, _M2, _GOLDEN = 0x7FEB352D, 0x846CA68B, 0x9E3779B9
MASK = 0xFFFFFFFF

# What a draw is for: one stream per purpose, so adding one never moves another's numbers.
ORDER, EGATE, EXIT = 1, 2, 3


def member_keys(seeds: Sequence[int]) -> torch.Tensor:
    """(M, 2) int64: each member's two key words (32 bits each), from its seed alone."""
    words = [np.random.SeedSequence(int(s)).spawn(2)[1].generate_state(2, np.uint32) for s in seeds]
    return torch.tensor(np.array(words, dtype=np.int64).reshape(len(seeds), 2))


def _mul(x: torch.Tensor, c: int) -> torch.Tensor:
    """x * c mod 2^32 for 32-bit words x, exactly: from c's 16-bit halves, so no product
    exceeds 2^48 and nothing overflows on any backend."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & MASK


def mix32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 on 32-bit words held in int64: a bijection with strong avalanche."""
    x = x ^ (x >> 16)
    x = _mul(x, _M1)
    x = x ^ (x >> 15)
    x = _mul(x, _M2)
    return x ^ (x >> 16)


def streams(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each member's two 32-bit streams (M,), (M,) from its key words: the part of every
    counter that depends on the member alone (computed once per pack)."""
    k0, k1 = keys[:, 0], keys[:, 1]
    return mix32(mix32(k0) ^ k1), mix32(mix32(k1 ^ _GOLDEN) ^ k0)


def at_epoch(member_streams: tuple[torch.Tensor, torch.Tensor], epoch) -> tuple[torch.Tensor, torch.Tensor]:
    """The streams of an epoch; ``epoch`` an int or a 0-d int64 tensor (a CUDA graph's counter)."""
    a, b = member_streams
    epoch = epoch & MASK
    return mix32(a ^ epoch), mix32(b ^ epoch)


def bits(epoch_streams: tuple[torch.Tensor, torch.Tensor], word, index: torch.Tensor, member_shape: tuple[int, ...]) -> torch.Tensor:
    """32 random bits (int64 in [0, 2^32)) for every counter: the epoch's streams (the member
    axis viewed as ``member_shape``), a ``word`` (step and purpose, broadcastable) and an
    ``index``. Two chains, so two counters share their bits only by chance (2^-64)."""
    a, b = (mix32(s.view(member_shape) ^ word) for s in epoch_streams)
    return mix32(mix32(a ^ index) ^ b)


def to_uniform(h: torch.Tensor) -> torch.Tensor:
    """float32 in (0, 1): the top 24 bits made odd, times 2^-24 (exact, symmetric about 1/2)."""
    return ((h >> 8) | 1).to(torch.float32) * 2.0**-24


def orders(epoch_streams: tuple[torch.Tensor, torch.Tensor], n: int) -> torch.Tensor:
    """(M, n) int64: each member's minibatch order for an epoch, a permutation of range(n)
    by sorting 32-bit random keys. A tie (about 1 in 8,600 epochs of 1,000 samples) keeps
    the two samples in index order (a stable sort), the same on every device."""
    a = epoch_streams[0]
    index = torch.arange(n, device=a.device).view(1, n)
    return torch.argsort(bits(epoch_streams, ORDER, index, (a.shape[0], 1)), dim=1, stable=True)


def noise(epoch_streams: tuple[torch.Tensor, torch.Tensor], purpose: int, n_steps: int, own_index: torch.Tensor) -> torch.Tensor:
    """(n_steps, M, width) float32 uniforms for an epoch's steps: member m's value in slot s
    is the draw of its own index ``own_index[m, s]`` (in its own condition's layout), or 1/2
    where ``own_index`` is -1 (a slot of the pack's layout the member lacks)."""
    M = own_index.shape[0]
    words = (torch.arange(n_steps, device=own_index.device).view(n_steps, 1, 1) << 2) | purpose  # step and purpose in one word
    u = to_uniform(bits(epoch_streams, words, own_index.clamp(min=0).unsqueeze(0), (1, M, 1)))
    return torch.where(own_index >= 0, u, torch.full_like(u, 0.5))
