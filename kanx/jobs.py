"""Job preparation, packing and cost: what every launcher calls between composing its jobs and
training or submitting them. `launch` is the one recipe, and the only caller of `prepare_jobs`
outside the tests (tests/test_launch.py counts the call sites):

    jobs = prepare_jobs(configs)       # convert and check every job, read what its folder holds
    todo = resume(pending(jobs))       # the unfinished ones, then where each resumes from
    packs = make_packs(todo, pack_size, group)
    check_machine(packs)               # writable folders, memory
    write_manifests(jobs)              # kanx.status counts what was launched

`pending` only filters (it reads nothing and changes no job); `resume` attaches the state of a
partial run's checkpoint (kanx.checkpoint) to its job. Packs are cut by `group`
(vocab.GROUPINGS, `resolve_group`) and ordered and balanced over workers by their cost
(`pack_cost`, `assign`, `shortest_first`). Callers: kanx.runner.run_jobs (a single run, Hydra's
basic and kanx's packing launcher, a SLURM array task), kanx.plan (make reproduce-tables, its
workers, the benchmarks), the SLURM launcher's submitter and the benchmarks.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path

from kanx import records
from kanx.checkpoint import BadCheckpoint, Checkpoint
from kanx.checks import resolve_device
from kanx.compiling import compiled_from
from kanx.config import (
    RunConfig,
    check_against_data,
    check_beta,
    check_results_root,
    check_width,
    config_differences,
    config_hash,
    run_config_from,
    to_container,
)
from kanx.errors import ConfigError
from kanx.loggers.base import check_loggers
from kanx.objective import check as check_objective
from kanx.objective import sweeper_directions
from kanx.record import Record
from kanx.vocab import CONDITIONS, DEFAULT_GROUP, GROUPINGS, RESULTS_ROOT

log = logging.getLogger("kanx")


@dataclass
class Job:
    """One run: its resolved config, typed config, identity and directory."""

    container: dict
    run: RunConfig
    run_dir: Path
    config_hash: str
    data_hash: str | None = None  # kanx.data.data_hash of its dataset: compared apart from config_hash
    n_train: int = 0  # the rows it trains on (train.compile=auto weighs its steps: kanx.compiling.compiled_from)
    state: records.RunState = field(default_factory=lambda: records.RunState("new"))
    resume_epoch: int = 0
    # The stretches trained before the checkpoint it resumes from: [{"device", "git_commit", "epochs": [from, to],
    # "train_s": seconds (stretches written since 2026-11-27)}]
    history: list = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.run.data.name} {self.run.condition.name} beta={self.run.beta:g} seed={self.run.seed}"


_DATA_CACHE: dict = {}


def load_data(run: RunConfig):
    """The run's dataset (cached per process: a sweep's jobs share draws by data seed)."""
    from kanx.data import load_dataset

    key = (run.data.name, run.data.data_seed, run.data.val_fraction,
           tuple(sorted((k, repr(v)) for k, v in run.data.options.items())))
    if key not in _DATA_CACHE:
        _DATA_CACHE[key] = load_dataset(run.data.name, data_seed=run.data.data_seed, val_fraction=run.data.val_fraction,
                                        **run.data.options)
    return _DATA_CACHE[key]


def prepare_jobs(configs: Sequence[tuple[object, Path]]) -> list[Job]:
    """Convert and check every job before any training: bad values, data files, widths, and
    records left by a different config or different data in the same directory. Raises
    ConfigError."""
    from kanx.data import data_hash

    jobs: list[Job] = []
    by_dir: dict[Path, Job] = {}
    legacy: list[Job] = []
    duplicates: list[Job] = []
    for cfg, run_dir in configs:
        # a composed DictConfig
        container = to_container(cfg) if not isinstance(cfg, dict) else cfg  # type: ignore[arg-type]
        container.pop("hydra", None)
        check_results_root(container.get("results_root", RESULTS_ROOT))
        run = run_config_from(container)
        check_beta(run)
        check_loggers(run.logger)  # logger=tensorboard without it: refused before training, not by each pack
        resolve_device(run.device)  # device=cuda without one: refused here, before any compute
        ds = load_data(run)
        check_against_data(run, ds.n_train)
        check_objective(container.get("optimized_metric"), ds.dynamical, bool(ds.n_val), sweeper_directions(cfg))
        run = check_width(run, ds.x_train.shape[1], ds.y_train.shape[1])
        container.setdefault("model", {})["width"] = list(run.model.width)
        job = Job(container, run, Path(run_dir), config_hash(container), data_hash(ds), n_train=ds.n_train)
        # A value swept twice (seed=0,0; beta=0.1,0.10) names one folder: one run, trained once.
        first = by_dir.setdefault(job.run_dir.resolve(), job)
        if first is not job:
            if (first.config_hash, first.data_hash) != (job.config_hash, job.data_hash):
                diff = config_differences(first.container, job.container) or [
                    f"dataset data hash: {first.data_hash}, then {job.data_hash}"]
                raise ConfigError(f"two jobs would write {job.run_dir} with different configs ({'; '.join(diff[:3])}): "
                                  "a key that tells them apart must be one the folder name shows")
            duplicates.append(job)
            continue
        job.state = records.read_state(job.run_dir)
        if is_legacy(job) and not run.overwrite:
            legacy.append(job)
        elif job.state.problem:
            log.warning(f"{job.state.problem}; the run trains again")
        if job.state.status in ("done", "failed") and not run.overwrite:
            _check_record(job, ds)
        jobs.append(job)
    if legacy:
        _refuse_legacy(legacy)
    if duplicates:
        log.info(f"{len(duplicates)} job(s) name the run folder of an earlier job (a value swept twice, e.g. "
                 f"seed=0,0): each such run is trained once, e.g. {duplicates[0].run_dir}")
    return jobs


def is_legacy(job: Job) -> bool:
    """Whether the job's folder holds a record in the format before 2026-11-26: an empty done
    marker, which vouches for nothing (kanx.records.unsealed), beside a record that
    `kanx.records seal-legacy` would seal (a JSON record with a status). A record.json that is
    not one is damaged, not old: that run trains again, as any run whose record is not trusted."""
    if job.state.problem is None:
        return False
    try:
        if (job.run_dir / records.DONE).read_bytes().strip():
            return False
        return "status" in Record.read(job.run_dir).fields
    except (OSError, ValueError, TypeError):
        return False


def _refuse_legacy(legacy: Sequence[Job]) -> None:
    """Older records are not replaced without asking: a rerun over them stops before training."""
    root = legacy[0].container.get("results_root") or legacy[0].run_dir.parent
    first = legacy[0].run_dir
    raise ConfigError(f"{len(legacy)} run folder(s) hold a record in the format before 2026-11-26, whose empty done "
                      f"marker vouches for nothing (e.g. {first}): `python -m kanx.records seal-legacy {root}` "
                      "seals such records as they are now (the sweep then skips them), or overwrite=true trains them "
                      "again and replaces them")


def _check_record(job: Job, ds) -> None:
    """A finished record in the job's directory must be of this config and these data."""
    record = job.state.record or {}
    if job.state.config_hash != job.config_hash:
        diff = config_differences(record.get("config") or {}, job.container)
        _refuse(job, "a different config", diff or [f"hash {job.state.config_hash} there, {job.config_hash} now"])
    recorded = record.get("data_hash")
    if recorded is None:
        # Written before records held a data hash: a file with a reference checksum must
        # still be the reference copy; generated data were the same generator's.
        reference = ds.provenance.get("reference_sha256")
        if reference and not str(ds.provenance.get("sha256", "")).startswith(reference[:16]):
            _refuse(job, "different data", [f"dataset data hash: {reference[:16]} there (the reference copy; the "
                                            f"record predates data hashes), {job.data_hash} now "
                                            f"({ds.provenance.get('file')})"])
    elif recorded != job.data_hash:
        where = f" ({ds.provenance['file']})" if "file" in ds.provenance else ""
        _refuse(job, "different data", [f"dataset data hash: {recorded} there, {job.data_hash} now{where}"])


def _refuse(job: Job, what: str, diff: list[str]) -> None:
    raise ConfigError(f"{job.run_dir} holds a record of {what} "
                      f"({'; '.join(diff[:3])}{'; ...' if len(diff) > 3 else ''}): use another results_root, or "
                      "overwrite=true to replace it")


@dataclass
class LaunchPlan:
    """What `launch` made of a launcher's configs: every job (checked, one per run folder), those
    left to train (each with the epoch it resumes from), and their packs."""

    jobs: list[Job]
    todo: list[Job]
    packs: list[list[Job]]
    held: dict = field(default_factory=dict)  # {run dir: why}: unfinished runs the launcher holds back (hold=)

    def write_manifests(self) -> list[Path]:
        """The manifest step, for a launcher that writes it later than it checks (launch's
        manifest=False): a refused config must leave nothing on disk, the manifest goes beside
        the sweep's own files."""
        from kanx.manifest import write_manifests

        return write_manifests(self.jobs)


def launch(configs: Sequence[tuple[object, Path]], group: str = DEFAULT_GROUP, pack_size: int | None = None, *,
           pack: bool = True, check: bool = True, manifest: bool = True,
           hold: Callable[[list[Job]], dict] | None = None) -> LaunchPlan:
    """The launch recipe every launcher follows: prepare (convert and check every job), pending
    (set finished runs aside), resume (where each partial run starts), ``hold`` (runs the launcher
    leaves out, e.g. still queued on SLURM: {run dir: why}), pack (by ``group`` and ``pack_size``;
    ``pack=False``: a pack per run), check the machine (``check``: a launcher that trains here,
    not one that submits) and write the manifests (``manifest``; False: the launcher calls
    LaunchPlan.write_manifests when it writes its own files). Raises ConfigError."""
    jobs = prepare_jobs(configs)
    todo = resume(pending(jobs))
    held = hold(todo) if hold is not None else {}
    todo = [j for j in todo if j.run_dir not in held]
    packs = make_packs(todo, pack_size, group) if pack else [[j] for j in todo]
    if check:
        check_machine(packs)
    plan = LaunchPlan(jobs, todo, packs, held)
    if manifest:
        plan.write_manifests()
    return plan


def pending(jobs: Sequence[Job]) -> list[Job]:
    """Jobs left to train: not finished with this config (failed runs are retried). Reads
    nothing and changes no job: `resume` then says where each starts."""
    return [job for job in jobs if not (job.state.status == "done" and not job.run.overwrite)]


def resume(jobs: Sequence[Job]) -> list[Job]:
    """Attach to each partial run (not overwritten) the epoch and training history of its
    checkpoint, when the checkpoint is of the job's config and data; any other run starts
    from epoch 0 (a checkpoint that cannot be read: with a warning). Returns ``jobs``."""
    for job in jobs:
        if job.state.status == "partial" and not job.run.overwrite:
            ckpt = load_checkpoint(job.run_dir)
            if ckpt is not None and ckpt.belongs_to(job.config_hash, job.data_hash):
                job.resume_epoch = ckpt.epoch
                job.history = ckpt.stretches()
    return list(jobs)


def load_checkpoint(run_dir: Path) -> Checkpoint | None:
    """The run's checkpoint, or None (with a warning) when it cannot be read: the run then starts again."""
    try:
        return Checkpoint.read(run_dir)
    except BadCheckpoint as e:  # a damaged (or pickled-object) checkpoint means: start this run again
        log.warning(f"{Path(run_dir) / records.CHECKPOINT} cannot be loaded as "
                    f"tensors and plain data ({e.cause}); the run starts again")
        return None


_CONDITION_ORDER = {name: i for i, name in enumerate(CONDITIONS)}


def _check_group(group: str) -> None:
    if group not in GROUPINGS:
        raise ValueError(f"group={group!r} is not one of: {', '.join(GROUPINGS)}")


def resolve_group(group: str, device: str) -> str:
    """The grouping (vocab.GROUPINGS) that ``group`` means for runs on ``device``. ``auto``: on
    a GPU a step costs its kernel launches whatever the pack holds, so mix everything (``all``);
    on a CPU a step costs its arithmetic, and a member in a pack of a larger condition pays for
    edges it does not have, so mix datasets only (``condition``; docs/BENCHMARK.md)."""
    _check_group(group)
    if group != "auto":
        return group
    return "all" if resolve_device(device).type == "cuda" else "condition"


def group_label(group: str, jobs: Sequence[Job]) -> str:
    """``group`` as a log line names it: ``auto`` with what it means for these jobs (auto=condition)."""
    if group != "auto":
        return group
    return "=".join(["auto", *sorted({resolve_group(group, j.run.device) for j in jobs})])


def make_packs(jobs: Sequence[Job], pack_size: int | None = None, group: str = DEFAULT_GROUP) -> list[list[Job]]:
    """Group jobs that can train together (RunConfig.pack_key, the same resume epoch and,
    by ``group`` (resolve_group, per job's device), the same dataset and condition) into packs
    of at most ``pack_size`` (default: the jobs' train.pack_size). Within a group, jobs are
    ordered by condition and dataset, so a pack cut from it mixes as few conditions as it can."""
    _check_group(group)

    def key(j: Job) -> tuple:
        shared = (repr(j.run.pack_key()), j.resume_epoch)
        mix = resolve_group(group, j.run.device)
        if mix == "all":
            return shared
        return ((*shared, j.run.condition.name) if mix == "condition"
                else (*shared, j.run.condition.name, j.run.data.name))

    def order(j: Job) -> tuple:
        return (key(j), _CONDITION_ORDER.get(j.run.condition.name, 99), j.run.data.name)

    packs = []
    for _, group_jobs in groupby(sorted(jobs, key=order), key=key):
        members = list(group_jobs)
        size = pack_size or members[0].run.train.pack_size
        packs += [members[i : i + size] for i in range(0, len(members), size)]
    return packs


def check_machine(packs: Sequence[Sequence[Job]]) -> None:
    """Before any training: every run folder writable, and every pack within the free
    memory (kanx.checks). Raises ConfigError."""
    from kanx.checks import check_memory, check_writable

    check_writable([j.run_dir for pack in packs for j in pack])
    check_memory(packs)


def steps_left(pack) -> int:
    """The optimizer steps a pack has left: (epochs - resume epoch) x batches per epoch of the
    rows its runs train on (Job.n_train: the data's, a validation split left out)."""
    t = pack[0].run.train
    return (t.epochs - pack[0].resume_epoch) * math.ceil(pack[0].n_train / t.batch_size)


def pack_cost(pack) -> float:
    """Rough relative cost of training a pack: its optimizer steps, times a per-step cost
    that grows with the members (sub-linearly on a CPU, see docs/BENCHMARK.md)."""
    return steps_left(pack) * (1 + len(pack) / 10)


def assign(packs: Sequence, workers: int) -> list[list]:
    """Longest pack first to the least loaded worker (balanced loads); each worker's list
    then runs shortest first (``shortest_first``)."""
    loads = [0.0] * workers
    out: list[list] = [[] for _ in range(workers)]
    for pack in sorted(packs, key=pack_cost, reverse=True):
        w = loads.index(min(loads))
        out[w].append(pack)
        loads[w] += pack_cost(pack)
    return [shortest_first(w) for w in out if w]


def shortest_first(packs: Sequence) -> list:
    """The packs in the order one worker trains them: least cost left first. The worker's
    total time is the same in any order, but this one finishes packs (and writes their
    records) soonest, so a run cut short (a GPU window, a SLURM time limit) keeps the most,
    and packs resumed from a checkpoint finish before new ones begin. Ties keep their order."""
    return sorted(packs, key=pack_cost)


def starting(pack, prefix: str) -> str:
    """The line printed as a pack starts: what it trains, and, when the basis is compiled, which
    epoch takes long (torch.compile's warm-up is about a minute on a CPU, during which nothing
    else is printed; the README's quick try used to sit silent for 108 s)."""
    t = pack[0].run.train
    names = (f"{'+'.join(dict.fromkeys(j.run.data.name for j in pack))}: "
             f"{','.join(dict.fromkeys(j.run.condition.name for j in pack))}")
    epochs = f"epochs {pack[0].resume_epoch}-{t.epochs}" if pack[0].resume_epoch else f"{t.epochs} epochs"
    line = f"{prefix} training a pack of {len(pack)} ({names}), {epochs}"
    first = compiled_from(t, pack[0].n_train, resolve_device(pack[0].run.device).type)
    if first is not None:
        at = max(first, pack[0].resume_epoch)  # a pack resumed past it compiles at once
        when = "the first epoch compiles" if at == pack[0].resume_epoch else f"epoch {at + 1} compiles"
        line += (f"; {when} the B-spline basis (torch.compile: about a minute the first time, seconds once "
                 "inductor's cache holds it; train.compile=false or +debug=quick skips it)")
    return line
