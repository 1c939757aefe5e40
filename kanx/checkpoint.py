"""A run's checkpoint.pt: the one type that reads it (Checkpoint.read), and its writer.

The runner writes one per member of a pack in training, all at once (write_together;
kanx.runner.Checkpointer: every
``train.checkpoint_every`` epochs, and on SIGTERM, SIGINT or SLURM's USR2) and resumes a run
from it (kanx.jobs.resume); kanx.status reads its epoch, last stretch and pack facts. The file
is a dict of tensors and plain data, loaded with ``weights_only=True`` (unpickling anything
else could run code), with the keys config_hash, data_hash, epoch, history, pack and state in
that order. Checkpoints of older writers lack some keys (data_hash, history, pack): they read
as None. The format is unchanged from the runner's dict, so a checkpoint carried between
machines resumes on either side.

Imports torch only to read or write one (kanx.status imports this module, and is torch-free
until it reads a checkpoint).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kanx import records
from kanx.vocab import CHECKPOINT


def write_together(checkpoints: Sequence[tuple[Checkpoint, Path]]) -> None:
    """Write the checkpoint.pt of one run or several (a pack's, at one epoch) so that a process killed
    while writing leaves them all at the old epoch or all at the new one, never split (then they
    resume as one pack): kanx.records.atomic_write_together. A StorageError when one cannot be written."""
    records.atomic_write_together([(Path(run_dir) / CHECKPOINT, torch_bytes(c.to_dict()))
                                   for c, run_dir in checkpoints])


class BadCheckpoint(Exception):
    """A checkpoint.pt that cannot be read: ``why`` says what is wrong, ``cause`` is the name
    of the exception that loading it raised."""

    def __init__(self, why: str, cause: str) -> None:
        super().__init__(why)
        self.why, self.cause = why, cause


# How a file torch.save wrote begins: a zip archive (since torch 1.6), or a pickle (the legacy
# format, protocol 2 and up: the PROTO opcode).
TORCH_MAGIC = (b"PK\x03\x04", b"\x80")


def _head(path: Path, size: int = 16) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""


def torch_bytes(obj) -> bytes:
    """What torch.save writes for ``obj``."""
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@dataclass
class Checkpoint:
    """One run's state as of a finished epoch, and what it belongs to.

    ``state``: the member's trainer state (kanx.trainer.Trainer.member_slice); ``history``: the
    stretches trained up to ``epoch``, [{"device", "git_commit", "epochs": [from, to],
    "train_s": seconds (stretches written since 2026-11-27)}]; ``pack``: the facts kanx.status
    times a pack by ({"id", "epochs", "batches", "members"}, since 2026-11-27 06:30 UTC).
    """

    epoch: int
    state: dict | None = None
    config_hash: str | None = None
    data_hash: str | None = None  # None: written before checkpoints held one
    history: list | None = None  # None: written before histories were kept
    pack: dict | None = None

    def to_dict(self) -> dict:
        """The dict torch.save writes, keys in the order the runner has always written them."""
        return {"config_hash": self.config_hash, "data_hash": self.data_hash, "epoch": self.epoch,
                "history": self.history, "pack": self.pack, "state": self.state}

    @classmethod
    def read(cls, run_dir: Path) -> Checkpoint:
        """RUN_DIR/checkpoint.pt, loaded as tensors and plain data only. Raises BadCheckpoint,
        saying why, for a file that is missing, truncated, foreign or holds pickled objects."""
        import pickle

        import torch

        path = Path(run_dir) / CHECKPOINT
        try:
            raw = torch.load(path, map_location="cpu", weights_only=True)
            epoch = int(raw["epoch"])
        except Exception as e:
            head = _head(path)
            if head and not head.startswith(TORCH_MAGIC):  # text, or another file: torch stumbles on its first bytes
                raise BadCheckpoint(f"is not a torch file (it begins {head!r}): not a checkpoint kanx writes",
                                    type(e).__name__) from e
            if isinstance(e, pickle.UnpicklingError):
                raise BadCheckpoint("holds pickled Python objects other than tensors and plain data, which kanx does "
                                    "not load (unpickling can run code)", type(e).__name__) from e
            first = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
            raise BadCheckpoint(f"cannot be loaded ({type(e).__name__}{': ' + first if first else ''}): truncated, "
                                "or not a checkpoint kanx writes", type(e).__name__) from e
        return cls(epoch=epoch, state=raw.get("state"), config_hash=raw.get("config_hash"),
                   data_hash=raw.get("data_hash"), history=raw.get("history"), pack=raw.get("pack"))

    def belongs_to(self, config_hash: str, data_hash: str | None) -> bool:
        """Written by a run of this config and these data (a checkpoint that predates data
        hashes: of this config)."""
        return self.config_hash == config_hash and (self.data_hash is None or self.data_hash == data_hash)

    def stretches(self) -> list:
        """The stretches trained up to its epoch; one of unknown device and commit for a
        checkpoint written before histories were kept, which says only where it stopped."""
        return list(self.history or [{"device": None, "git_commit": None, "epochs": [0, self.epoch]}])

    def last_stretch(self) -> tuple[int, float] | None:
        """(epochs, training seconds) of its last stretch, where it says (since 2026-11-27)."""
        try:
            last = self.history[-1]  # type: ignore[index]
            return int(last["epochs"][1]) - int(last["epochs"][0]), float(last["train_s"])
        except Exception:
            return None

    def pack_facts(self) -> dict | None:
        """Its pack's id, epochs, batches per epoch and members, where it says."""
        try:
            p = self.pack
            return {"id": str(p["id"]), "epochs": int(p["epochs"]), "batches": int(p["batches"]),  # type: ignore[index]
                    "members": int(p["members"])}  # type: ignore[index]
        except Exception:
            return None
