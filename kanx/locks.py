"""Run locks: a process takes a run's lock file before it trains the run, so two sweeps started
at once never train the same run twice, and judges whether another's lock is live (its process
still running, on this host or, refreshed, on another). Split out of kanx.records (issue #49),
which re-exports every name.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path

from kanx.atomic import _UMASK, cannot_write
from kanx.vocab import LOCK


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
    me = {"host": socket.gethostname(), "pid": os.getpid(), "start": _process_start(os.getpid()),
          "taken": round(time.time(), 3)}
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
        # on a file system turned read-only: it names a process that is gone once this one is
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
