"""Progress of a pack in training, for logs that are not a terminal (a log file, SLURM's output):
on a terminal the tqdm bar shows it, elsewhere a line every `train.progress_every_s` seconds of
wall time (Ticker), and one at each checkpoint, with the epoch, the mean loss of the members
still training, how many they are, and the time left at the pace since the process started.
"""

from __future__ import annotations

import time
from time import monotonic

import torch


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
    return f"{seconds / 60:.1f} min"


def progress_line(name: str, epoch: int, epochs: int, loss: torch.Tensor, alive: torch.Tensor,
                  resumed_at: tuple[int, float]) -> str:
    """``name``: epoch e/E, the mean loss of the ``alive`` members, how many, epochs/s since
    ``resumed_at`` (epoch, time.perf_counter()) and the time left at that pace."""
    done = epoch - resumed_at[0]
    rate = done / (time.perf_counter() - resumed_at[1]) if done else 0.0
    left = duration((epochs - epoch) / rate) if rate else "?"
    mean = loss[alive].mean().item() if alive.any() else float("nan")
    return (f"{name}: epoch {epoch}/{epochs}, mean loss {mean:.4g}, {int(alive.sum())} alive, "
            f"{rate:.2f} epochs/s, about {left} left")


class Ticker:
    """Says when a progress line is due: every ``every_s`` seconds of wall time (0: never), and
    only where the tqdm bar is off (``on``: stderr is no terminal)."""

    def __init__(self, every_s: float, on: bool):
        self.every_s, self.on = every_s, on and every_s > 0
        self.last = monotonic()

    def due(self) -> bool:
        if not self.on or monotonic() - self.last < self.every_s:
            return False
        self.reset()
        return True

    def reset(self) -> None:
        """A line was just written (a checkpoint's): the next is due a full interval later."""
        self.last = monotonic()
