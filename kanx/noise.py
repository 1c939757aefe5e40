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

from kanx.compiling import static

# lowbias32's multipliers, and the golden ratio's odd constant for the second chain
_M1, _M2, _GOLDEN = 0x7FEB352D, 0x846CA68B, 0x9E3779B9
MASK = 0xFFFFFFFF

# What a draw is for: one stream per purpose, so adding one never moves another's numbers.
ORDER, EGATE, EXIT = 1, 2, 3
# Feistel rounds of a minibatch order (orders): four make a keyed permutation indistinguishable
# from a random one (Luby and Rackoff, 1988) when the round words are random.
ORDER_ROUNDS = 4


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


def prefixes(epoch_streams: tuple[torch.Tensor, torch.Tensor], word,
             member_shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """The two chains of a counter up to the index: the epoch's streams (the member axis viewed
    as ``member_shape``) mixed with a ``word`` (step and purpose, broadcastable), one value per
    member and word (few). _finish combines them with every index into 32 random bits; two
    chains, so two counters share their bits only by chance (2^-64)."""
    a, b = (mix32(s.view(member_shape) ^ word) for s in epoch_streams)
    return a, b


def _finish(a: torch.Tensor, b: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return mix32(mix32(a ^ index) ^ b)


def to_uniform(h: torch.Tensor) -> torch.Tensor:
    """float32 in (0, 1): the top 24 bits made odd, times 2^-24 (exact, symmetric about 1/2)."""
    return ((h >> 8) | 1).to(torch.float32) * 2.0**-24


def orders(epoch_streams: tuple[torch.Tensor, torch.Tensor], n: int, kernel=None) -> torch.Tensor:
    """(M, n) int64: each member's minibatch order for an epoch, a permutation of range(n).

    A keyed bijection of [0, 2^k), k = 2h the least even number with 2^k >= n (order_images),
    keeping the images of 0, 1, ..., 2^k - 1 that fall below n, in that order (compact): what
    cycle-walking gives, without a data-dependent loop. No sort: sorting 32-bit keys cost 78 ms
    of the 624-member Nguyen epoch on one CPU thread."""
    return compact(order_images(epoch_streams, n, kernel), n)


def order_images(epoch_streams: tuple[torch.Tensor, torch.Tensor], n: int, kernel=None) -> torch.Tensor:
    """(M, 2^k) int64: a Feistel network of ORDER_ROUNDS rounds on two h-bit halves applied to
    range(2^k), round r mixing in a table of 2^h words drawn from the counter (epoch, step r,
    ORDER): the chains up to the index per member and round here, then 2^h hashes per member and
    round, a gather and an xor per element (``kernel``: _feistel, or its compiled twin)."""
    a = epoch_streams[0]
    M, h = a.shape[0], max(1, (max(n - 1, 1).bit_length() + 1) // 2)
    # round r as the step: one word each
    rounds = (torch.arange(ORDER_ROUNDS, device=a.device).view(-1, 1, 1) << 2) | ORDER
    round_a, round_b = prefixes(epoch_streams, rounds, (1, M, 1))
    return (kernel or _feistel)(round_a, round_b, h)


def _feistel(round_a: torch.Tensor, round_b: torch.Tensor, h: int) -> torch.Tensor:
    """The round tables (rounds, M, 2^h) from the rounds' chains (rounds, M, 1), then the Feistel
    rounds on every x in range(2^(2h)), per member: the per-element part of a minibatch order."""
    tables = _finish(round_a, round_b, torch.arange(1 << h, device=round_a.device).view(1, 1, -1)) & ((1 << h) - 1)
    x = torch.arange(1 << (2 * h), device=tables.device).expand(tables.shape[1], -1)
    left, right = x >> h, x & ((1 << h) - 1)
    for table in tables:
        left, right = right, left ^ torch.gather(table, 1, right)
    return (left << h) | right


def compact(images: torch.Tensor, n: int) -> torch.Tensor:
    """(M, n): each row's values below n, in row order. A bijection of [0, 2^k) holds each of
    range(n) once, so every row keeps exactly n; static shapes (a CUDA graph can hold it)."""
    if images.shape[1] == n:
        return images
    keep = images < n
    slot = torch.where(keep, torch.cumsum(keep, dim=1) - 1, n)  # the rest go to a spare column, dropped
    out = torch.zeros(images.shape[0], n + 1, dtype=images.dtype, device=images.device)
    return out.scatter_(1, slot, images)[:, :n]


def noise(epoch_streams: tuple[torch.Tensor, torch.Tensor], purpose: int, n_steps: int, own_index: torch.Tensor,
          kernel=None) -> torch.Tensor:
    """(n_steps, M, width) float32 uniforms for an epoch's steps: member m's value in slot s
    is the draw of its own index ``own_index[m, s]`` (in its own condition's layout), or 1/2
    where ``own_index`` is -1 (a slot of the pack's layout the member lacks). ``kernel``: the
    chains and the per-element part, _uniforms or its compiled twin."""
    # step and purpose in one word
    words = (torch.arange(n_steps, device=own_index.device).view(n_steps, 1, 1) << 2) | purpose
    return (kernel or _uniforms)(epoch_streams[0], epoch_streams[1], words, own_index.unsqueeze(0))


def _uniforms(stream_a: torch.Tensor, stream_b: torch.Tensor, words: torch.Tensor,
              own_index: torch.Tensor) -> torch.Tensor:
    a, b = prefixes((stream_a, stream_b), words, (1, stream_a.shape[0], 1))
    u = to_uniform(_finish(a, b, own_index.clamp(min=0)))
    return torch.where(own_index >= 0, u, 0.5)


def epoch_draws(member_streams: tuple[torch.Tensor, torch.Tensor], epoch, n: int, n_batches: int,
                slots: dict[int, torch.Tensor], compiled: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Every member's minibatch order (M, n) and noise (n_batches, M, sum of the slots' widths)
    for an epoch: ``slots`` maps each purpose to the members' own indices (noise).

    ``compiled``: the per-element parts (the Feistel rounds, the uniforms) run as torch.compile
    loops, one pass over the values instead of a few dozen tensor operations; the per-member
    parts stay eager. The same integers, so the same draws. For a CPU pack that trains with the
    compiled basis; a GPU's draws run inside the epoch's CUDA graph instead."""
    at = at_epoch(member_streams, epoch)
    feistel, uniforms = ((static(_feistel, fullgraph=True), static(_uniforms, fullgraph=True)) if compiled
                         else (_feistel, _uniforms))
    return orders(at, n, feistel), torch.cat([noise(at, purpose, n_batches, own, uniforms)
                                              for purpose, own in slots.items()], dim=-1)
