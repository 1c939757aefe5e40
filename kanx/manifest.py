"""The sweep manifest: what was launched into a sweep folder, so kanx.status counts what a
command expects instead of guessing it.

Every launch path (a single run, a packed or basic `-m` sweep, a SLURM sweep,
`make reproduce-tables`) checks its jobs and then, before any training, calls
``write_manifests``: each sweep folder <dataset>/<condition>/<tag> its runs go to gets a
`manifest.json` listing them (folder name, beta, seed, dataset, condition, config hash),
the protocol kanx.status times them with (epochs, batches per epoch, pack size) and the
commands that added runs. A later launch into the same folder adds its runs to the list
(a second `seed=2,3` after `seed=0,1` expects four); a launch that adds nothing (the same
command again, a SLURM task of a submitted sweep) leaves the file as it is; one that cannot be
read stops the launch in one line that names it, and is never replaced. Written
atomically (kanx.records.atomic_write_bytes): a reader sees the old list or the new one.

Torch-free: kanx.status reads it.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from kanx.errors import ConfigError
from kanx.record import canonical_beta
from kanx.vocab import MANIFEST

FORMAT = 1
KEEP_LAUNCHES = 20  # the newest commands kept: enough to see how a folder was filled, never a growing log


def read_manifest(sweep_dir: Path) -> dict | None:
    """The manifest of a sweep folder, or None where there is none or it cannot be used (a
    damaged file is ignored: kanx.status then expects only the runs on disk, and says so)."""
    try:
        data = json.loads((Path(sweep_dir) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
        return None
    return data


def expected_runs(manifest: dict) -> set[tuple[float, int]]:
    """(beta, seed) of every run a manifest lists, beta as kanx.status compares it."""
    out = set()
    for entry in manifest["runs"].values():
        try:
            out.add((canonical_beta(entry["beta"]), int(entry["seed"])))
        except (KeyError, TypeError, ValueError):
            continue  # an entry it cannot read names no run
    return out


def write_manifests(jobs: Iterable) -> list[Path]:
    """Add checked jobs (kanx.jobs.Job) to the manifests of their sweep folders. Returns the
    manifests written (those that gained or changed a run). Raises StorageError, and
    ConfigError for a manifest that cannot be read (it is not replaced)."""
    by_folder: dict[Path, list] = {}
    for job in jobs:
        by_folder.setdefault(Path(job.run_dir).parent, []).append(job)
    return [path for folder, mine in by_folder.items() if (path := _add(folder, mine)) is not None]


def _manifest_to_extend(folder: Path) -> dict:
    """The manifest a launch adds to ({} where there is none yet). One that cannot be read is
    refused, never replaced: it holds what earlier launches expect. Raises ConfigError naming
    it (a file that is not a manifest) or StorageError (one that cannot be read)."""
    from kanx.atomic import cannot_write

    path = Path(folder) / MANIFEST
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise cannot_write(path, e) from e
    try:
        data = json.loads(text)
        wrong = _shape_problem(data)
    except ValueError as e:
        wrong = f"not JSON: {e}"
    if wrong:
        raise ConfigError(f"{path} is not a manifest kanx wrote ({wrong}): move it away and launch again, "
                          "and kanx writes a new one")
    return data


def _shape_problem(data) -> str | None:
    """What keeps ``data`` from being a manifest a launch can add to, or None."""
    if not isinstance(data, dict):
        return "the file is not a JSON object"
    for key, kind, name in (("runs", dict, "object"), ("launches", list, "list")):
        if data.get(key) is not None and not isinstance(data[key], kind):
            return f"its {key!r} is not a JSON {name}"
    return None


def _add(folder: Path, jobs: list) -> Path | None:
    from kanx.records import atomic_write_bytes

    old = _manifest_to_extend(folder)
    runs = dict(old.get("runs") or {})
    new = {Path(job.run_dir).name: _entry(job) for job in jobs}
    if all(runs.get(name) == entry for name, entry in new.items()):
        return None  # nothing new: keep the file (and its launch list) as it is
    runs.update(new)
    launches = [*(old.get("launches") or []), {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                               "command": _command(), "runs": len(new)}]
    manifest = {"format": FORMAT, "runs": dict(sorted(runs.items())), "protocol": _protocol(jobs[0]),
                "launches": launches[-KEEP_LAUNCHES:]}
    path = folder / MANIFEST
    atomic_write_bytes(path, (json.dumps(manifest, indent=1) + "\n").encode())
    return path


def _entry(job) -> dict:
    return {"beta": job.run.beta, "seed": job.run.seed, "dataset": job.run.data.name,
            "condition": job.run.condition.name, "config_hash": job.config_hash}


def _protocol(job) -> dict:
    """What kanx.status needs to time the folder's runs before any has a record."""
    t, n_train = job.run.train, (job.container.get("dataset") or {}).get("n_train")
    batches = math.ceil(n_train / t.batch_size) if isinstance(n_train, int) and n_train > 0 else None
    return {"epochs": t.epochs, "batches": batches, "pack_size": t.pack_size}


def _command() -> str:
    """The command line of this process, as the user could type it again."""
    if not sys.argv or not sys.argv[0]:
        return ""
    first, rest = Path(sys.argv[0]), [shlex.quote(a) for a in sys.argv[1:]]
    if first.name.startswith("kanx-"):  # a console script, by its name
        return shlex.join([first.name, *sys.argv[1:]])
    if first.suffix == ".py" and first.parent.name == "kanx":  # python -m kanx.train puts the module's file there
        return " ".join([f"python -m kanx.{first.stem}", *rest])
    if first.suffix == ".py":  # python scripts/studies/factor_study.py
        return " ".join(["python", shlex.quote(sys.argv[0]), *rest])
    return shlex.join(sys.argv)

