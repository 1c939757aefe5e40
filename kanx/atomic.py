"""Files written whole or not at all: a reader sees the old file or the new one, never half.

Every file kanx writes into a run folder (record, done marker, curves, model, checkpoint) and
every manifest goes through here; kanx.records re-exports the names for its callers.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kanx.errors import StorageError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def cannot_write(path: Path, error: OSError) -> StorageError:
    """``error`` (raised writing ``path``) as the one-line StorageError, naming ``path``: the
    OSError of a full disk names no file. A permission error on a read-only file system is
    named as that (EROFS), not as a permission to fix."""
    if error.errno in (errno.EACCES, errno.EPERM) and on_read_only_file_system(Path(path)):
        return StorageError(errno.EROFS, os.strerror(errno.EROFS), str(path))
    return StorageError(error.errno, error.strerror, str(path))


def on_read_only_file_system(path: Path) -> bool:
    """Whether ``path``, or its nearest folder that exists, is on a file system mounted
    read-only (which os.access and some writes report as a permission it lacks)."""
    path = Path(path).absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (Windows)
        return False


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over ``path``:
    a reader sees the old file or the new one, never half of one. Raises StorageError."""
    atomic_write_together([(path, data)])


def atomic_write_together(files: Sequence[tuple[Path, bytes]]) -> None:
    """``atomic_write_bytes`` for several files at once: every temporary is written and synced
    before the first rename, so a process killed while writing leaves all the old files or (bar
    the microseconds of the renames) all the new ones; a pack's checkpoints stay at one epoch."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, data in files:
            staged.append((_stage(path, data), path))
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException as e:
        for tmp, _ in staged:
            # on a file system turned read-only it stays; the next lock holder removes it
            with contextlib.suppress(OSError):
                Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise cannot_write(path, e) from e
        raise


def _stage(path: Path, data: bytes) -> str:
    """Write ``data`` to a synced temporary beside ``path``; returns the temporary's name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; records are for the whole group to read
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def remove_half_written(run_dir: Path) -> None:
    """Delete the temporaries ``atomic_write_bytes`` leaves in a run's folder when its process is
    killed between writing and renaming (``.<name>.<random>.tmp``). Call it only while holding
    the run's lock: then no live process is writing them."""
    for tmp in Path(run_dir).glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
