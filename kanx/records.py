"""Run records and everything around them, under one name: kanx.records re-exports the record
(kanx.record: `Record`, read_state), its sealing (kanx.sealing: the done marker's checksums) and
the run locks (kanx.locks), and holds the versions and commit a record names, and the command
line of two one-off migrations:

    python -m kanx.records seal-legacy ROOT       seal records whose done marker is empty
    python -m kanx.records compress-curves ROOT   store finished runs' curves as metrics.csv.gz

A run directory's files: kanx.record's docstring.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from functools import cache
from pathlib import Path

from kanx.atomic import (  # noqa: F401  (the writer's names)
    _UMASK,
    atomic_write_bytes,
    atomic_write_together,
    cannot_write,
    remove_half_written,
)
from kanx.hashing import sha256_of  # noqa: F401  (the writer's names)
from kanx.locks import (  # noqa: F401  (re-exported)
    LOCK_REFRESH_S,
    LOCK_STALE_S,
    lock_is_live,
    refresh_locks,
    release_held_locks,
    try_lock,
    unlock,
)
from kanx.record import Record, RunState, finite_or_none, read_state, write_record  # noqa: F401  (re-exported)
from kanx.sealing import (  # noqa: F401  (re-exported)
    compress_curve,
    compress_curves,
    curve_path,
    gzip_bytes,
    integrity_problem,
    reseal_record,
    seal,
    unsealed,
)
from kanx.vocab import (  # noqa: F401  (the writer's names)
    CHECKPOINT,
    CURVES,
    DONE,
    LOCK,
    METRICS,
    METRICS_GZ,
    MODEL,
    RECORD,
    SCHEMA_VERSION,
    STATUSES,
)


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
            status = Record.read(run_dir).fields["status"]
        except (OSError, ValueError, TypeError, KeyError):
            left.append(run_dir)
            continue
        stamp = done.stat()
        seal(run_dir, with_model=status != "failed")
        os.utime(run_dir / DONE, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        sealed.append(run_dir)
    return sealed, left


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
        print(f"compressed the training curves of {len(converted)} finished "
              f"run(s) under {a.root} (metrics.csv -> {METRICS_GZ})"
              + (f", {len(unchecked)} of them unchecked as before (their done marker predates curve checksums)"
                 if unchecked else "")
              + (f"; left {len(left)} whose done marker does not vouch for them:" if left else ""))
        for run_dir, why in left:
            print(f"  {run_dir}: {why}")
        return 1 if left else 0
    sealed, not_json = seal_legacy(a.root)
    with_model = sum(MODEL in json.loads((d / DONE).read_text())["sha256"] for d in sealed)
    print(f"sealed {len(sealed)} record(s) with an empty done marker under {a.root} ({with_model} with model.pt)"
          + (f"; left {len(not_json)} whose record.json is not a JSON record, e.g. {not_json[0]}" if not_json else ""))
    return 0


@cache
def versions() -> dict:
    import numpy
    import torch

    import kanx

    return {"kanx": kanx.__version__, "python": platform.python_version(), "torch": torch.__version__,
            "numpy": numpy.__version__, "platform": platform.platform()}


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
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True,
                               text=True, timeout=10).stdout.strip()
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
