"""Run records: one durable, self-describing JSON file per run, written atomically, then a
``done`` marker. The only thing training and analysis share.

A run directory holds
    record.json      the record (schema below), written to a temporary file then renamed
    done             marker written last: a record without it is incomplete
    model.pt         final model state of the run (torch), for kanx.load_run
    checkpoint.pt    latest resumable state while the run is unfinished (removed at the end)
    metrics.csv      the training curve while the run trains (kanx.curves), and in a checkpointed run
    metrics.csv.gz   the training curve of a finished run (compress_curve; curve_path finds either)
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import math
import os
import platform
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kanx.atomic import _UMASK, atomic_write_bytes, atomic_write_together, cannot_write, remove_half_written  # noqa: F401  (the writer's names)
from kanx.errors import StorageError
from kanx.hashing import sha256_of
from kanx.vocab import CHECKPOINT, CURVES, DONE, LOCK, METRICS, METRICS_GZ, MODEL, RECORD, SCHEMA_VERSION, STATUSES  # noqa: F401  (the writer's names)


def finite_or_none(value):
    """JSON has no NaN or infinity: non-finite numbers are written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value


def curve_path(run_dir: Path) -> Path | None:
    """Where a run's training curve is, or None where it has none: the plain metrics.csv where
    there is one (the live file of a run in training or a checkpointed one: a stale .gz beside
    it is an earlier finish of a run trained again), else metrics.csv.gz (a finished run's). The
    one answer every reader and writer of curves asks."""
    for name in CURVES:
        path = Path(run_dir) / name
        if path.is_file():
            return path
    return None


def gzip_bytes(data: bytes) -> bytes:
    """``data`` gzipped with no time stamp or file name in the header: the same rows, the same bytes."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def compress_curve(run_dir: Path) -> Path | None:
    """Store a finishing run's curve compressed: metrics.csv -> metrics.csv.gz (written
    atomically), then the plain file removed. Call it before the run is sealed, so its done
    marker vouches for the .gz. A stop between the two leaves both, alike (readers take the
    plain one). Returns the curve's path (None: the run has none)."""
    run_dir = Path(run_dir)
    plain = run_dir / METRICS
    if not plain.is_file():
        return curve_path(run_dir)
    atomic_write_bytes(run_dir / METRICS_GZ, gzip_bytes(plain.read_bytes()))
    plain.unlink()
    return run_dir / METRICS_GZ


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
    curve = curve_path(run_dir)
    if curve is not None:
        sums[curve.name] = sha256_of(curve)
    atomic_write_bytes(run_dir / DONE, json.dumps({"sha256": sums}).encode())


def reseal_record(run_dir: Path, record_bytes: bytes) -> None:
    """Replace record.json of a sealed run with ``record_bytes`` and refresh only its checksum in
    the done marker: the marker keeps vouching for model.pt and the curve with the checksums it
    held, never with those of files as they are now (kanx.evaluate --add-missing checks them
    first). Both files are written together (atomic_write_together)."""
    run_dir = Path(run_dir)
    marker = json.loads((run_dir / DONE).read_text())
    marker["sha256"][RECORD] = hashlib.sha256(record_bytes).hexdigest()
    atomic_write_together([(run_dir / RECORD, record_bytes), (run_dir / DONE, json.dumps(marker).encode())])


def integrity_problem(run_dir: Path, files: tuple[str, ...] = (RECORD, MODEL)) -> str | None:
    """What is wrong with a finished run's ``files``, in one line, or None: a file whose sha256
    differs from the one its done marker holds, or one it lists that is missing. A done
    marker without the record's checksum (an empty one, from before checksums) vouches for
    nothing (unsealed); one from before it listed a file vouches for nothing of that file.

    A missing model.pt or curve (metrics.csv or metrics.csv.gz) is no problem: weights are not kept in git (``*.pt`` is
    ignored), so a clone of committed results holds records without weights, and the tables need
    only the records; load_run and kanx.draw say the weights are absent; curves are set aside
    while a time-boxed offline GPU run works on a copy (scripts/offline_gpu/stash.sh). A file that is there must match.

    The training curve is checked only when asked for (``files=CURVES``, as its readers do):
    a damaged curve costs the curve, never the run, whose record still counts and is not
    trained again."""
    try:
        text = (Path(run_dir) / DONE).read_text()
        sums = json.loads(text).get("sha256", {}) if text.strip() else {}
    except (OSError, ValueError, AttributeError):
        return f"{Path(run_dir) / DONE} is unreadable (not the checksums kanx writes)"
    if RECORD not in sums:
        return unsealed(run_dir)
    for name, expected in sums.items():
        if name not in files:
            continue
        path = Path(run_dir) / name
        if not path.is_file():
            if name in (MODEL, *CURVES):
                continue
            return f"{path} is missing (its done marker lists it)"
        if sha256_of(path) != expected:
            return f"{path} is corrupt: its sha256 differs from the one its done marker holds (changed or truncated since it was written)"
    return None


def unsealed(run_dir: Path) -> str:
    """Why a record whose done marker holds no checksum of it does not count, in one line."""
    return (f"{Path(run_dir) / DONE} holds no checksums (empty markers were written before 2026-11-26), so it vouches for nothing: "
            "`python -m kanx.records seal-legacy RESULTS_ROOT` seals such records as they are now")


def seal_legacy(root: Path) -> tuple[list[Path], list[Path]]:
    """Seal every record below ``root`` whose done marker is empty (written before done markers
    held checksums, 2026-11-26): the marker gets the checksums of record.json and, for a run
    that trained, of model.pt where it is there, as they are now, so the record keeps counting
    once empty markers vouch for nothing. A one-off migration (``python -m kanx.records
    seal-legacy ROOT``). A record.json that is not a JSON record is left unsealed, and the
    marker keeps its modification time (kanx.analyze.collect orders duplicates by it).
    Returns the run folders sealed and those left unsealed."""
    sealed, left = [], []
    for done in sorted(Path(root).rglob(DONE)):
        run_dir = done.parent
        if not done.is_file() or done.read_bytes().strip() or not (run_dir / RECORD).is_file():
            continue
        try:
            status = json.loads((run_dir / RECORD).read_text())["status"]
        except (OSError, ValueError, TypeError, KeyError):
            left.append(run_dir)
            continue
        stamp = done.stat()
        seal(run_dir, with_model=status != "failed")
        os.utime(run_dir / DONE, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        sealed.append(run_dir)
    return sealed, left


def compress_curves(root: Path) -> tuple[list[Path], list[tuple[Path, str]], list[Path]]:
    """Store the curves of the finished runs below ``root`` compressed, as runs now finish
    (``python -m kanx.records compress-curves ROOT``): each run with a done marker and a plain
    metrics.csv gets metrics.csv.gz, its marker the new file's checksum in place of the old one,
    and loses the plain file, in that order (a stop between leaves both, alike, and a second
    call finishes the run). Only where the marker vouches for the run: it holds the checksum of
    record.json and every file it lists verifies; any other run is left as it is. A marker
    written before curves were checksummed (it lists no curve) vouched for nothing of the curve,
    so it vouches for nothing of the .gz either: that curve is compressed and stays unchecked,
    as it was read before, and the marker is not touched. A marker keeps its modification time
    (kanx.analyze.collect orders duplicates by it). Idempotent. Returns the run folders
    converted (those of them whose marker lists no curve: ``unchecked``) and those left, with why."""
    converted, left, unchecked = [], [], []
    for done in sorted(Path(root).rglob(DONE)):
        run_dir = done.parent
        plain, gz = run_dir / METRICS, run_dir / METRICS_GZ
        if not done.is_file() or not (run_dir / RECORD).is_file() or not plain.is_file():
            continue  # not a finished run, or no plain curve (none, or compressed already)
        problem = integrity_problem(run_dir, files=(RECORD, MODEL, *CURVES))
        try:
            marker = json.loads(done.read_text())
            sums = marker["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            marker, sums = None, {}
        if problem is None and marker is not None and METRICS not in sums and METRICS_GZ in sums and gz.is_file():
            # converted before, stopped before the plain file went: it goes if it is the same curve
            if gzip.decompress(gz.read_bytes()) == plain.read_bytes():
                plain.unlink()
                converted.append(run_dir)
            else:
                left.append((run_dir, f"{plain} differs from the {gz.name} its done marker vouches for"))
            continue
        if problem is not None:
            left.append((run_dir, problem))
            continue
        data = plain.read_bytes()
        atomic_write_bytes(gz, gzip_bytes(data))
        if gzip.decompress(gz.read_bytes()) != data:  # read back before the only other copy goes
            gz.unlink()
            raise StorageError(0, "compressed curve reads back different", str(gz))
        if METRICS in sums:
            del sums[METRICS]
            sums[METRICS_GZ] = sha256_of(gz)
            stamp = done.stat()
            atomic_write_bytes(done, json.dumps(marker).encode())
            os.utime(done, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        else:
            unchecked.append(run_dir)
        plain.unlink()
        converted.append(run_dir)
    return converted, left, unchecked


def main(argv=None) -> int:
    """python -m kanx.records seal-legacy ROOT: seal the records below ROOT whose done marker is
    empty, as they are now (see ``seal_legacy``). python -m kanx.records compress-curves ROOT:
    store the curves of the finished runs below ROOT as metrics.csv.gz (see ``compress_curves``);
    exit status 1 where a run was left as it is (each is named)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m kanx.records", description=main.__doc__)
    p.add_argument("command", choices=["seal-legacy", "compress-curves"])
    p.add_argument("root", type=Path)
    a = p.parse_args(argv)
    if not a.root.is_dir():
        p.error(f"root {a.root} is not a folder")
    if a.command == "compress-curves":
        converted, left, unchecked = compress_curves(a.root)
        print(f"compressed the training curves of {len(converted)} finished run(s) under {a.root} (metrics.csv -> {METRICS_GZ})"
              + (f", {len(unchecked)} of them unchecked as before (their done marker predates curve checksums)" if unchecked else "")
              + (f"; left {len(left)} whose done marker does not vouch for them:" if left else ""))
        for run_dir, why in left:
            print(f"  {run_dir}: {why}")
        return 1 if left else 0
    sealed, not_json = seal_legacy(a.root)
    with_model = sum(MODEL in json.loads((d / DONE).read_text())["sha256"] for d in sealed)
    print(f"sealed {len(sealed)} record(s) with an empty done marker under {a.root} ({with_model} with model.pt)"
          + (f"; left {len(not_json)} whose record.json is not a JSON record, e.g. {not_json[0]}" if not_json else ""))
    return 0


def _alive(pid: int) -> bool:
    if pid <= 0:  # kill(0) and kill(-1) signal groups of processes, not one
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: a pid no OS has, in a lock written by hand
        return False
    except PermissionError:
        return True
    return True


def _process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot, field 22 of /proc/<pid>/stat): with
    the pid it names one process, not a later one given the same pid. None without /proc."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


# A lock that another host has not refreshed for this long is stale (its process was killed,
# e.g. a preempted SLURM task requeued on another node); the trainer refreshes its locks
# every LOCK_REFRESH_S.
LOCK_STALE_S, LOCK_REFRESH_S = 600.0, 60.0


def lock_is_live(run_dir: Path) -> bool:
    """Whether the run's lock may belong to a process still training it: the one judgement of
    try_lock (which takes over a lock that is not live) and kanx.status ("running").

    A lock names its host, pid, the process's start time and when it was taken. On this host it
    is live while that process runs: a pid now held by a process that started at another time
    was reused. A lock from another host (whose processes cannot be checked), or from before
    locks held a start time, is live while it is refreshed (LOCK_STALE_S). One that is empty or
    garbled was being written when its writer stopped, or this instant: live only for
    LOCK_REFRESH_S."""
    path = Path(run_dir) / LOCK
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return False
    except OSError:
        return True  # not this process's to judge, nor to remove
    try:
        holder = json.loads(path.read_text())
        host, pid = holder["host"], int(holder["pid"])
    except FileNotFoundError:
        return False
    except (OSError, ValueError, KeyError, TypeError, OverflowError):  # OverflowError: "pid": 1e400, read as infinity
        return age <= LOCK_REFRESH_S
    if host != socket.gethostname():
        return age <= LOCK_STALE_S
    if not _alive(pid):
        return False
    start = _process_start(pid)
    if holder.get("start") is None or start is None:
        return age <= LOCK_STALE_S
    return holder["start"] == start


def _mine(holder: dict) -> bool:
    return holder.get("host") == socket.gethostname() and holder.get("pid") == os.getpid()


# The run folders whose locks this process holds. Whatever way it ends short of SIGKILL, its
# locks go with it (release_held_locks, at exit): a pack that stops on a full disk while taking
# its locks leaves none of those it took, which another host would count as live for LOCK_STALE_S.
_HELD: set[Path] = set()


def _hold(run_dir: Path) -> None:
    if not _HELD:
        import atexit

        atexit.unregister(release_held_locks)  # registered once, however often the set empties
        atexit.register(release_held_locks)
    _HELD.add(run_dir)


def release_held_locks() -> None:
    """Remove every lock this process still holds (at its exit: a run it locked and did not
    get to train, or to unlock, on an error's way out)."""
    for run_dir in list(_HELD):
        unlock(run_dir)


def try_lock(run_dir: Path) -> bool:
    """Take the run's lock file (O_EXCL: one process wins), so two sweeps started at once
    never train the same run twice. A lock that is not live (lock_is_live), or this process's
    own, is taken over. Raises StorageError."""
    run_dir = Path(run_dir)
    path = run_dir / LOCK
    me = {"host": socket.gethostname(), "pid": os.getpid(), "start": _process_start(os.getpid()), "taken": round(time.time(), 3)}
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666 & ~_UMASK)
            except FileExistsError:
                try:
                    mine = _mine(json.loads(path.read_text()))
                except (OSError, ValueError, AttributeError):
                    mine = False
                if mine or not lock_is_live(run_dir):
                    path.unlink(missing_ok=True)
                    continue
                return False
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump(me, f)
            except OSError:
                with contextlib.suppress(OSError):  # an empty lock would hold the run for LOCK_REFRESH_S
                    path.unlink()
                raise
            _hold(run_dir)
            return True
    except OSError as e:
        raise cannot_write(path, e) from e
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
    _HELD.discard(Path(run_dir))
    path = Path(run_dir) / LOCK
    try:
        holder = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return
    if isinstance(holder, dict) and _mine(holder):
        with contextlib.suppress(OSError):  # on a file system turned read-only: it names a process that is gone once this one is
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

    return {"kanx": kanx.__version__, "python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__,
            "platform": platform.platform()}


@cache
def git_commit() -> str | None:
    """The commit of the kanx checkout that ran, with '-dirty' if it had local changes; for an
    installed wheel (no checkout to ask), the commit its version names (build_commit)."""
    import kanx

    root = Path(__file__).resolve().parents[1]
    if not ((root / ".git").exists() and (root / "pyproject.toml").is_file()):
        # Installed: site-packages may lie inside some other git repository (a project's .venv),
        # whose commit is not kanx's.
        return build_commit(kanx.__version__)
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return build_commit(kanx.__version__)


def build_commit(version: str) -> str | None:
    """The (short) commit in a setuptools-scm version's local part, '-dirty' for a build from a
    tree with uncommitted changes: '0.1.dev302+ge17e9df56.d20261127' -> 'e17e9df56-dirty'."""
    import re

    m = re.search(r"\+g([0-9a-f]{7,40})(\.d\d{8})?$", version)
    return m[1] + ("-dirty" if m[2] else "") if m else None


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


if __name__ == "__main__":
    raise SystemExit(main())
