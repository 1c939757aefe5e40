"""Sealing a finished run: its ``done`` marker holds the sha256 of record.json, model.pt and the
training curve, and a file that differs from it is found (integrity_problem) instead of being
trusted. Also where a run's curve is (curve_path) and how a finished run's curve is stored
(compress_curve; compress_curves for runs finished before curves were stored gzipped).
Split out of kanx.records (issue #49), which re-exports every name.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path

from kanx.atomic import atomic_write_bytes, atomic_write_together
from kanx.errors import StorageError
from kanx.hashing import sha256_of
from kanx.vocab import CURVES, DONE, METRICS, METRICS_GZ, MODEL, RECORD


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
            return (f"{path} is corrupt: its sha256 differs from the one its done marker holds "
                    "(changed or truncated since it was written)")
    return None


def unsealed(run_dir: Path) -> str:
    """Why a record whose done marker holds no checksum of it does not count, in one line."""
    return (f"{Path(run_dir) / DONE} holds no checksums (empty markers were written before 2026-11-26), "
            "so it vouches for nothing: "
            "`python -m kanx.records seal-legacy RESULTS_ROOT` seals such records as they are now")


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
