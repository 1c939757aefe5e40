"""Run records: one durable, self-describing JSON file per run, written atomically, then a
``done`` marker. The only thing training and analysis share.

A run directory holds
    record.json      the record (schema below), written to a temporary file then renamed
    done             marker written last: a record without it is incomplete
    model.pt         final model state of the run (torch), for kanx.load_run
    checkpoint.pt    latest resumable state while the run is unfinished (removed at the end)
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kanx.hashing import sha256_of
from kanx.vocab import CHECKPOINT, DONE, LOCK, METRICS, MODEL, RECORD, SCHEMA_VERSION, STATUSES  # noqa: F401  (the writer's names)


def finite_or_none(value):
    """JSON has no NaN or infinity: non-finite numbers are written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over ``path``:
    a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; records are for the whole group to read
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_half_written(run_dir: Path) -> None:
    """Delete the temporaries ``atomic_write_bytes`` leaves in a run's folder when its process is
    killed between writing and renaming (``.<name>.<random>.tmp``). Call it only while holding
    the run's lock: then no live process is writing them."""
    for tmp in Path(run_dir).glob(".*.tmp"):
        tmp.unlink(missing_ok=True)


def write_record(run_dir: Path, record: dict) -> Path:
    """Write record.json atomically, then the done marker, which holds the sha256 of the
    record and (for a run that trained) of model.pt: a file changed or cut short on a
    shared file system is then found (read_state) instead of being trusted."""
    run_dir = Path(run_dir)
    (run_dir / DONE).unlink(missing_ok=True)
    atomic_write_bytes(run_dir / RECORD, json.dumps(finite_or_none(record), indent=1, sort_keys=False).encode())
    seal(run_dir, with_model=record.get("status") != "failed")
    return run_dir / RECORD


def seal(run_dir: Path, with_model: bool = True) -> None:
    """Write the done marker with the checksums of record.json, model.pt and the training curve
    metrics.csv as they are now (also after a deliberate edit, such as hand-set gates saved back
    to model.pt)."""
    run_dir = Path(run_dir)
    sums = {RECORD: sha256_of(run_dir / RECORD)}
    if with_model and (run_dir / MODEL).exists():
        sums[MODEL] = sha256_of(run_dir / MODEL)
    if (run_dir / METRICS).exists():
        sums[METRICS] = sha256_of(run_dir / METRICS)
    atomic_write_bytes(run_dir / DONE, json.dumps({"sha256": sums}).encode())


def integrity_problem(run_dir: Path, files: tuple[str, ...] = (RECORD, MODEL)) -> str | None:
    """What is wrong with a finished run's ``files``, in one line, or None: a file whose sha256
    differs from the one its done marker holds, or one it lists that is missing. A done
    marker from before checksums (empty), or from before it listed a file, vouches for nothing
    of it and is accepted.

    A missing model.pt or metrics.csv is no problem: weights are not kept in git (``*.pt`` is
    ignored), so a clone of committed results holds records without weights, and the tables need
    only the records; load_run and kanx.draw say the weights are absent; curves are set aside
    while a GPU window runs (scripts/gpu_stash.sh). A file that is there must match.

    The training curve is checked only when asked for (``files=(METRICS,)``, as its readers do):
    a damaged curve costs the curve, never the run, whose record still counts and is not
    trained again."""
    try:
        text = (Path(run_dir) / DONE).read_text()
        sums = json.loads(text).get("sha256", {}) if text.strip() else {}
    except (OSError, ValueError, AttributeError):
        return f"{Path(run_dir) / DONE} is unreadable (not the checksums kanx writes)"
    for name, expected in sums.items():
        if name not in files:
            continue
        path = Path(run_dir) / name
        if not path.is_file():
            if name in (MODEL, METRICS):
                continue
            return f"{path} is missing (its done marker lists it)"
        if sha256_of(path) != expected:
            return f"{path} is corrupt: its sha256 differs from the one its done marker holds (changed or truncated since it was written)"
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# A lock that another host has not refreshed for this long is stale (its process was killed,
# e.g. a preempted SLURM task requeued on another node); the trainer refreshes its locks
# every LOCK_REFRESH_S.
LOCK_STALE_S, LOCK_REFRESH_S = 600.0, 60.0


def try_lock(run_dir: Path) -> bool:
    """Take the run's lock file (O_EXCL: one process wins), so two sweeps started at once
    never train the same run twice. A lock left by a dead process on this host is taken
    over at once; one from another host (whose process cannot be checked) once it has not
    been refreshed for LOCK_STALE_S."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path, me = run_dir / LOCK, {"host": socket.gethostname(), "pid": os.getpid()}
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666 & ~_UMASK)
        except FileExistsError:
            try:
                holder = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                return False  # being written this instant, or not ours to judge
            if holder.get("host") == me["host"]:
                stale = holder.get("pid") == me["pid"] or not _alive(int(holder.get("pid", -1)))
            else:
                stale = time.time() - path.stat().st_mtime > LOCK_STALE_S
            if stale:  # (or this process's own): take it over
                path.unlink(missing_ok=True)
                continue
            return False
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        return True
    return False


def refresh_locks(run_dirs) -> None:
    """Mark this process's locks as alive (their modification time)."""
    for run_dir in run_dirs:
        try:
            os.utime(Path(run_dir) / LOCK)
        except OSError:
            pass


def unlock(run_dir: Path) -> None:
    """Remove the run's lock if this process holds it."""
    path = Path(run_dir) / LOCK
    try:
        holder = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return
    if holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
        path.unlink(missing_ok=True)


@dataclass(frozen=True)
class RunState:
    """What is on disk for a run directory."""

    status: str  # "new", "done" (a complete record), "failed" (a complete failed record), "partial" (checkpoint only)
    config_hash: str | None = None
    record: dict | None = None
    problem: str | None = None  # why a finished-looking run is not trusted (one line); it trains again


def read_state(run_dir: Path) -> RunState:
    run_dir = Path(run_dir)
    if (run_dir / DONE).exists() and (run_dir / RECORD).exists():
        problem = integrity_problem(run_dir)
        if problem is None:
            try:
                record = json.loads((run_dir / RECORD).read_text())
                status = "failed" if record.get("status") == "failed" else "done"
                return RunState(status, record.get("config_hash"), record)
            except (OSError, ValueError, AttributeError):
                problem = f"{run_dir / RECORD} is unreadable (not a JSON record)"
        return RunState("partial" if (run_dir / CHECKPOINT).exists() else "new", problem=problem)  # redone
    if (run_dir / CHECKPOINT).exists():
        return RunState("partial")
    return RunState("new")


@cache
def versions() -> dict:
    import numpy
    import torch

    import kanx

    return {"kanx": kanx.__version__, "python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__, "platform": platform.platform()}


@cache
def git_commit() -> str | None:
    """The commit of the kanx checkout that ran, with '-dirty' if it had local changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


# What Hydra writes into a job or sweep folder before kanx sees the config: a folder that
# holds nothing else was made by a command that stopped on bad input.
_HYDRA_FILES = frozenset({".hydra", "multirun.yaml", "train.log"})


def discard_if_empty(folder: Path, results_root=None) -> None:
    """Remove a folder that holds only Hydra's files, then its parents left empty, up to
    (not including) results_root: a rejected override leaves no folder named after it."""
    folder = Path(folder)
    if not folder.is_dir() or not {p.name for p in folder.iterdir()} <= _HYDRA_FILES:
        return
    shutil.rmtree(folder, ignore_errors=True)
    root = Path(str(results_root)).resolve() if results_root is not None else None
    for parent in folder.resolve().parents:
        if root is None or parent == root or root not in parent.parents or any(parent.iterdir()):
            break
        parent.rmdir()
