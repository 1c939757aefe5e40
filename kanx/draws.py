"""Counter-based draws: every random number a member uses in training (its minibatch order,
its egate noise, its exit-gate Gumbel noise) is a pure function of what it is for,

    (member key, epoch, purpose, step, index)  ->  32 random bits,

computed as tensor operations for all members at once on the pack's device. Nothing is
carried from one draw to the next, so there is no generator state to save or restore: a
resumed run draws what it would have drawn, a member draws the same numbers alone or in a
pack of any make-up (its indices are those of its own condition's layout), and the numbers
are the same on a CPU and a GPU (integer arithmetic only; the conversion to a uniform is
exact in float32). Inside a CUDA graph the epoch is a device tensor, so the graph draws the
next epoch's numbers itself (kanx.graphs).

The mixing function is Wellons' ``lowbias32`` (xorshift-multiply, 2 rounds; "Prospecting for
hash functions", 2018), chained over the words of the counter, with a second chain so that
two counters share their 32 bits only by chance (2^-64), not whenever their prefixes differ
in the low bits of the index. Words are int32 tensors; products are formed in int64 from
16-bit halves (nothing overflows) and shifts are made logical by masking, so every backend
computes the same bits.

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

# What a draw is for: one stream per purpose, so adding one never moves another's numbers.
ORDER, EGATE, EXIT = 1, 2, 3


def member_keys(seeds: Sequence[int]) -> torch.Tensor:
    """(M, 2) int32: each member's two key words (32 bits each), from its seed alone."""
    words = np.array([np.random.SeedSequence(int(s)).spawn(2)[1].generate_state(2, np.uint32) for s in seeds], dtype=np.uint32)
    return torch.from_numpy(words.reshape(len(seeds), 2).view(np.int32).copy())


def _word(value) -> torch.Tensor | int:
    """A counter word as int32 bits (Python ints are taken mod 2^32)."""
    if isinstance(value, int):
        value &= 0xFFFFFFFF
        return value - (1 << 32) if value >= 1 << 31 else value
    return value.to(torch.int32)


def _shr(x: torch.Tensor, n: int) -> torch.Tensor:
    """Logical right shift of 32-bit words held as int32 (arithmetic shift, then the sign copies masked off)."""
    return (x >> n) & ((1 << (32 - n)) - 1)


def _mul(x: torch.Tensor, c: int) -> torch.Tensor:
    """x * c mod 2^32, exactly: in int64 from c's 16-bit halves (no product exceeds 2^48, so
    nothing overflows on any backend), the result's 32 bits back as int32."""
    x = x.to(torch.int64) & 0xFFFFFFFF
    low, high = x * (c & 0xFFFF), (x * (c >> 16)) & 0xFFFF
    return ((low + (high << 16)) & 0xFFFFFFFF).to(torch.int32)


def mix32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32: a bijection of 32-bit words with strong avalanche."""
    x = x ^ _shr(x, 16)
    x = _mul(x, _M1)
    x = x ^ _shr(x, 15)
    x = _mul(x, _M2)
    return x ^ _shr(x, 16)


def _chain(h: torch.Tensor, *words) -> torch.Tensor:
    for w in words:
        h = mix32(h ^ _word(w))
    return h


def bits(keys: torch.Tensor, epoch, purpose: int, step, index: torch.Tensor, member_shape: tuple[int, ...]) -> torch.Tensor:
    """32 random bits (int32) for every counter. ``keys`` (M, 2) is viewed as
    ``member_shape`` (the member axis placed to broadcast with ``step`` and ``index``);
    ``epoch`` is an int or a 0-d int64 tensor (a CUDA graph's epoch counter)."""
    k0, k1 = keys[:, 0], keys[:, 1]
    a = _chain(mix32(k0 ^ purpose), k1, epoch).view(member_shape)  # the member's stream for this epoch and purpose
    b = _chain(mix32(k1 ^ _word(_GOLDEN ^ purpose)), k0, epoch).view(member_shape)  # a second, independent word of it
    a, b = _chain(a, step), _chain(b, step)
    return mix32(mix32(a ^ index) ^ b)


def to_uniform(h: torch.Tensor) -> torch.Tensor:
    """float32 in (0, 1): the top 24 bits made odd, times 2^-24 (exact, symmetric about 1/2)."""
    return (_shr(h, 8) | 1).to(torch.float32) * 2.0**-24


def orders(keys: torch.Tensor, epoch, n: int) -> torch.Tensor:
    """(M, n) int64: each member's minibatch order for an epoch, a permutation of range(n)
    by sorting 32-bit random keys. A tie (about 1 in 8,600 epochs of 1,000 samples) keeps
    the two samples in index order (a stable sort), the same on every device."""
    index = torch.arange(n, dtype=torch.int32, device=keys.device).view(1, n)
    return torch.argsort(bits(keys, epoch, ORDER, 0, index, (keys.shape[0], 1)), dim=1, stable=True)


def noise(keys: torch.Tensor, epoch, purpose: int, n_steps: int, own_index: torch.Tensor) -> torch.Tensor:
    """(n_steps, M, width) float32 uniforms for an epoch's steps: member m's value in slot s
    is the draw of its own index ``own_index[m, s]`` (in its own condition's layout), or 1/2
    where ``own_index`` is -1 (a slot of the pack's layout the member lacks)."""
    steps = torch.arange(n_steps, dtype=torch.int32, device=keys.device).view(n_steps, 1, 1)
    h = bits(keys, epoch, purpose, steps, own_index.clamp(min=0).to(torch.int32).unsqueeze(0), (1, keys.shape[0], 1))
    u = to_uniform(h)
    return torch.where(own_index >= 0, u, torch.full_like(u, 0.5))
