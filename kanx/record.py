"""A run's record: one durable, self-describing JSON file per run (record.json), written
atomically, then sealed by its ``done`` marker (kanx.sealing). The only thing training and
analysis share, and `Record` the only code that builds or parses it (tests/test_record.py
checks that no other module reads record.json itself).

A run directory holds
    record.json      the record (schema: docs/RECORDS.md), written to a temporary file then renamed
    done             marker written last: a record without it is incomplete
    model.pt         final model state of the run (torch), for kanx.load_run
    checkpoint.pt    latest resumable state while the run is unfinished (removed at the end)
    metrics.csv      the training curve while the run trains (kanx.curves), and in a checkpointed run
    metrics.csv.gz   the training curve of a finished run (compress_curve; curve_path finds either)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from kanx.atomic import atomic_write_bytes
from kanx.sealing import integrity_problem, seal
from kanx.vocab import CHECKPOINT, DONE, RECORD, SCHEMA_VERSION, UNGATED


def finite_or_none(value):
    """JSON has no NaN or infinity: non-finite numbers are written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value


def canonical_beta(beta, condition: str | None = None) -> float:
    """Beta as written by any writer (0.1, '0.1', 0.10 from a record, a manifest, a folder name or
    a table) as one float, rounded to 12 significant digits, so that they compare equal. A
    missing beta is 0 for an ungated condition (Baseline, F: no beta sweep) and refused for any
    other (ValueError)."""
    if beta is None:
        if condition in UNGATED:
            return 0.0
        raise ValueError(f"condition {condition} needs a beta")
    return float(f"{float(beta):.12g}")


@dataclass
class Record:
    """One run's record.json. ``fields`` is the JSON object, its keys in the order they are written
    (a record's bytes, and so its checksum, depend on it); a record from an older schema, or
    one edited by hand, keeps every key it has. The properties name what launchers, checks and
    the analysis ask of any record; the analysis reads the rest from ``fields``."""

    fields: dict

    @classmethod
    def new(cls, *, dataset: str, family: str, condition: str, beta: float | None, seed: int, data_seed: int,
            status: str, n_train: int, n_test: int, timing: dict, versions: dict, git_commit: str | None,
            config_hash: str, data_hash: str | None, config: dict) -> Record:
        """A run's record as training begins to write it: no metrics yet, no error."""
        return cls({
            "schema_version": SCHEMA_VERSION,
            "dataset": dataset,
            "family": family,
            "condition": condition,
            "beta": beta,
            "seed": seed,
            "data_seed": data_seed,
            "status": status,
            "n_train": n_train,
            "n_test": n_test,
            "metrics": {},
            "timing": timing,
            "versions": versions,
            "git_commit": git_commit,
            "config_hash": config_hash,
            "data_hash": data_hash,  # the data's identity, checked apart from the config's (kanx.jobs._check_record)
            "config": config,
            "error": None,
        })

    def failed(self, error: str) -> Record:
        """This record of a run whose pack raised: the traceback in ``error``."""
        return Record({**self.fields, "error": error})

    def trained(self, metrics: dict, status_reason: str | None, target_unit: str | None, device: str,
                segments: list | None = None) -> Record:
        """This record of a run that trained to its end: its metrics (model.pt's, scored alone), why
        its status is not ok, the unit of its target, the device and, for a resumed run, every
        stretch it was trained in (``segments``)."""
        timing = {**self.fields["timing"], "device": device}
        if segments is not None:
            timing["segments"] = segments
        return Record({**self.fields, "metrics": metrics, "timing": timing, "status_reason": status_reason,
                       "target_unit": target_unit})

    @property
    def status(self) -> str | None:
        return self.fields.get("status")

    @property
    def dataset(self) -> str | None:
        return self.fields.get("dataset")

    @property
    def metrics(self) -> dict:
        return self.fields.get("metrics") or {}

    @property
    def config(self) -> dict | None:
        return self.fields.get("config")

    @property
    def config_hash(self) -> str | None:
        return self.fields.get("config_hash")

    @property
    def data_hash(self) -> str | None:
        return self.fields.get("data_hash")

    def to_bytes(self) -> bytes:
        """record.json's bytes: the fields in their order, one space of indent, non-finite numbers as null."""
        return json.dumps(finite_or_none(self.fields), indent=1, sort_keys=False).encode()

    @classmethod
    def parse(cls, text: str | bytes) -> Record:
        """A record from record.json's text. Raises ValueError where it is not a JSON object."""
        fields = json.loads(text)
        if not isinstance(fields, dict):
            raise ValueError(f"{RECORD} holds a JSON {type(fields).__name__}, not an object")
        return cls(fields)

    @classmethod
    def read(cls, run_dir: Path) -> Record:
        """The record in ``run_dir``, as it is on disk: whether its done marker vouches for it is
        read_state's or kanx.sealing.integrity_problem's to say. Raises OSError, ValueError."""
        return cls.parse((Path(run_dir) / RECORD).read_text())

    def write(self, run_dir: Path) -> Path:
        """Write record.json atomically, then the done marker, which holds the sha256 of the
        record and (for a run that trained) of model.pt: a file changed or cut short on a
        shared file system is then found (read_state) instead of being trusted."""
        run_dir = Path(run_dir)
        (run_dir / DONE).unlink(missing_ok=True)
        atomic_write_bytes(run_dir / RECORD, self.to_bytes())
        seal(run_dir, with_model=self.status != "failed")
        return run_dir / RECORD


def write_record(run_dir: Path, record: dict) -> Path:
    """Record(record).write(run_dir): a record given as its fields."""
    return Record(record).write(run_dir)


@dataclass(frozen=True)
class RunState:
    """What is on disk for a run directory."""

    status: str  # "new", "done" (a complete record), "failed" (a complete failed record), "partial" (checkpoint only)
    config_hash: str | None = None
    record: dict | None = None  # the record's fields (Record.fields)
    problem: str | None = None  # why a finished-looking run is not trusted (one line); it trains again


def read_state(run_dir: Path) -> RunState:
    run_dir = Path(run_dir)
    if (run_dir / DONE).exists() and (run_dir / RECORD).exists():
        problem = integrity_problem(run_dir)
        if problem is None:
            try:
                record = Record.read(run_dir)
                status = "failed" if record.status == "failed" else "done"
                return RunState(status, record.config_hash, record.fields)
            except (OSError, ValueError, AttributeError):
                problem = f"{run_dir / RECORD} is unreadable (not a JSON record)"
        return RunState("partial" if (run_dir / CHECKPOINT).exists() else "new", problem=problem)  # redone
    if (run_dir / CHECKPOINT).exists():
        return RunState("partial")
    return RunState("new")
