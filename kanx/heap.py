"""glibc's malloc told to keep the memory a CPU training step frees, for the next step.

A packed step on a CPU allocates and frees the same few large tensors every step (a layer's dense
features and their gradient: 6.5 MB each for the 26-input layer of a Concrete EFX pack of 70). By
default glibc serves such blocks by mmap, or from the top of its heap, and hands them back to the
kernel when they are freed (above M_MMAP_THRESHOLD and M_TRIM_THRESHOLD, which it adjusts as it
goes); the next step then touches fresh pages, one page fault per 4 KiB. Measured on the Concrete
pack: about 2,000 faults a step, a fifth of the step's CPU time (docs/BENCHMARK.md, "Where the time
goes"). Raising both thresholds keeps those blocks in the heap, where the next step's tensors of the
same sizes reuse them: no faults, the same numbers (only where the bytes live changes).

The price is that a process keeps the most heap it ever used until it exits, which for a training
process is its working set anyway.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Mapping

# mallopt's parameters (glibc's malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
# Blocks below the mmap threshold come from the heap, and freed heap below the trim threshold
# stays there. The first is above any tensor a pack of the paper allocates on a CPU (the features
# of a pack of 624 are under 100 MB); a glibc that refuses it (older ones cap the mmap threshold at
# 32 MiB on 64-bit machines) gets the second.
THRESHOLDS = (1 << 30, 32 << 20)
# A user's own malloc settings are kept (glibc reads them at start-up).
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
                 "GLIBC_TUNABLES")


def keep_freed_memory(environ: Mapping[str, str] | None = None,
                      mallopt: Callable[[int, int], bool] | None = None) -> int | None:
    """Raise glibc's mmap and trim thresholds (the first of THRESHOLDS it takes), unless the user
    set malloc's options (USER_SETTINGS) or the C library has no mallopt (not glibc: nothing to
    do). Returns the threshold set, or None. Calling it again sets the same again."""
    environ = os.environ if environ is None else environ
    mallopt = _mallopt if mallopt is None else mallopt
    if any(k in environ for k in USER_SETTINGS):
        return None
    for threshold in THRESHOLDS:
        if mallopt(M_MMAP_THRESHOLD, threshold):
            return threshold if mallopt(M_TRIM_THRESHOLD, threshold) else None
    return None


def _mallopt(param: int, value: int) -> bool:
    """The C library's mallopt(param, value): True where it took the value; False where it refused,
    or has no mallopt (not glibc)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(param, value) == 1
