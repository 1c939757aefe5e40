"""From job configs to records: check every job, skip finished ones, group the rest into
packs (kanx.jobs), train each pack and write one record per run.

Used by every launcher: a single run (`python -m kanx.train`), Hydra's basic launcher (one
job at a time), kanx's packing launcher, the SLURM launcher (one pack per array task) and
kanx.plan (make reproduce-tables), which trains its packs with `train_pack`. The signal
handlers that checkpoint the pack in training (`stop_on_signals`, `Checkpointer`) live here
too; the checkpoint file itself is kanx.checkpoint's.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import math
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm.auto import tqdm

from kanx import records, threads, vocab
from kanx.checkpoint import Checkpoint, torch_bytes, write_together
from kanx.checks import resolve_device
from kanx.confdir import QUICK_TRY, is_quick_try
from kanx.config import RunConfig
from kanx.curves import Curves, HeldOut, pack_curves
from kanx.errors import ConfigError, StorageError
from kanx.evaluate import score
from kanx.jobs import Job, LaunchPlan, launch, load_data, starting
from kanx.load import model_file, read_model_file
from kanx.progress import Ticker, progress_line
from kanx.record import Record
from kanx.trainer import Trainer, describe_device
from kanx.vocab import DEFAULT_GROUP

log = logging.getLogger("kanx")
# Read the checkout's commit now, when this process's code is loaded: a record written hours
# later must not name a commit made while it trained.
records.git_commit()


Checked = LaunchPlan  # every job, and the packs of those left to train


def check_jobs(configs: Sequence[tuple[object, Path]], pack_size: int | None = None,
               group: str = DEFAULT_GROUP) -> Checked:
    """Every check run_jobs makes before it writes anything (a launcher makes them before it
    writes the sweep's own files, so that a refused config leaves nothing on disk): every job
    converted and checked, the finished ones set aside, the others packed, the machine checked
    (kanx.jobs.launch, the manifests left to run_jobs). Raises ConfigError."""
    plan = launch(configs, group, pack_size, manifest=False)
    if len(plan.todo) < len(plan.jobs):
        log.info(f"{len(plan.jobs) - len(plan.todo)} of {len(plan.jobs)} runs already have records; skipping them")
    return plan


def run_jobs(configs: Sequence[tuple[object, Path]], pack_size: int | None = None, group: str = DEFAULT_GROUP,
             checkpointer: Checkpointer | None = None, checked: Checked | None = None) -> list[dict | None]:
    """Run every job (skipping finished ones) and return the records of all of them.
    ``checkpointer``: the signal handler's, pointed at each pack while it trains; ``checked``:
    what check_jobs returned for these configs, if the caller has checked them already."""
    plan = checked if checked is not None else check_jobs(configs, pack_size, group)
    plan.write_manifests()  # before any training: kanx.status counts what was launched
    packs = plan.packs
    for i, pack in enumerate(packs, 1):
        # within seconds of launch, not after the first (compiled) epoch
        log.info(starting(pack, f"[{i}/{len(packs)}]"))
        train_pack(pack, checkpointer)
    return [records.read_state(Path(run_dir)).record for _, run_dir in configs]  # one per config, duplicates included


def check_or_fail(configs: Sequence[tuple[object, Path]], pack_size: int | None = None,
                  group: str = DEFAULT_GROUP) -> Checked:
    """check_jobs for a command line, before it writes anything: bad input stops it with one line, exit 2."""
    from kanx.errors import fail

    try:
        return check_jobs(configs, pack_size, group)
    except ConfigError as e:
        fail(e)
        raise  # fail exits; this line only tells type checkers so


def make_folder(folder: Path) -> None:
    """Create a folder the results go to, once the config is accepted: one that cannot be
    created (results_root=/proc/x, a read-only file system) stops the command with one line, exit 1."""
    from kanx.errors import fail

    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        cause = StorageError(e.errno, e.strerror, e.filename or str(folder))
        fail(f"{cause}, so the results in {folder} cannot be written: choose another results_root", code=1)


def run_command(configs: Sequence[tuple[object, Path]], folder: Path, results_root=None, pack_size: int | None = None,
                group: str = DEFAULT_GROUP, checked: Checked | None = None) -> list[dict | None]:
    """What `python -m kanx.train` does with its jobs, for a single run (a sweep of one) as for a
    sweep: SIGTERM or SIGINT checkpoint the pack in training and stop in one line
    (stop_on_signals); every job and the machine are checked before any compute
    (run_jobs, or the caller's check_jobs: ``checked``); then it trains. It stops with one
    line: exit 2 for bad input, removing ``folder``
    if it holds only what Hydra wrote there, and 1 for runs that failed or results that cannot
    be written. Returns the records."""
    from kanx.errors import fail

    checkpointer = stop_on_signals()
    try:
        recs = run_jobs(configs, pack_size=pack_size, group=group, checkpointer=checkpointer, checked=checked)
    except ConfigError as e:
        records.discard_if_empty(folder, results_root)
        fail(e)
    except StorageError as e:
        fail(f"{e}; training stopped: the runs recorded so far keep their records, the same command trains the others",
             code=1)
    failed = [Path(run_dir) / records.RECORD for (_, run_dir), rec in zip(configs, recs, strict=True)
              if rec and rec.get("status") == "failed"]
    if len(configs) == 1 and failed:
        fail(f"the run failed; {failed[0]} holds the error", code=1)
    if failed:  # recorded (a re-run retries them), but a script must see it
        fail(f"{len(failed)} of {len(configs)} run(s) failed; their record.json holds the error, e.g. "
             f"{failed[0].parent}", code=1)
    return recs


# ------------------------------------------------------------------ one pack


def _save_torch(path: Path, obj) -> None:
    records.atomic_write_bytes(path, torch_bytes(obj))


def _lock_pending(jobs: Sequence[Job]) -> list[Job]:
    """The jobs this process may train now: their lock taken, and still unfinished (another
    process may have finished one since this one looked). A failure part way (a full disk)
    releases the locks taken so far at once, not only when the process exits."""
    mine: list[Job] = []
    try:
        for job in jobs:
            if not records.try_lock(job.run_dir):
                log.info(f"{job.label}: another process is training it ({job.run_dir / records.LOCK}); skipping")
                continue
            mine.append(job)
            records.remove_half_written(job.run_dir)  # a killed writer's; the lock says none is alive
            state = records.read_state(job.run_dir)
            if state.status == "done" and state.config_hash == job.config_hash and not job.run.overwrite:
                records.unlock(mine.pop().run_dir)
    except BaseException:
        for job in mine:
            records.unlock(job.run_dir)
        raise
    return mine


def train_pack(jobs: Sequence[Job], checkpointer: Checkpointer | None = None) -> None:
    """Train one pack and write its records. An exception becomes a `failed` record for each
    of its runs not finished yet (retried on the next invocation), never a crash of the sweep;
    a run whose record is written is finished, and no later failure of its pack rewrites it.
    Results that cannot be written (StorageError: a full disk, a read-only file system) stop
    training instead: the runs not finished get no record (it could not be written either)
    and train on the next invocation, from their checkpoints. Each run's lock is held while
    it trains."""
    start = time.perf_counter()
    jobs = _lock_pending(jobs)
    if not jobs:
        return
    finished: list[Path] = []
    try:
        with contextlib.ExitStack() as pending:  # what a pack stopped part way leaves open: its loggers' runs
            _train_pack(jobs, start, checkpointer, finished, pending)
    except (KeyboardInterrupt, StorageError):
        raise
    except Exception:
        tb = traceback.format_exc()
        left = [job for job in jobs if job.run_dir not in finished]
        log.error(f"pack of {len(jobs)} run(s) "
                  f"failed{f' after {len(finished)} were recorded' if finished else ''}:\n{tb}")
        for job in left:
            _base_record(job, "failed", time.perf_counter() - start, 0).failed(tb).write(job.run_dir)
    finally:
        for job in jobs:
            records.unlock(job.run_dir)


class Checkpointer:
    """Checkpoints the pack in training on demand, as of its last finished epoch.

    Whoever handles the stop signals (stop_on_signals, the SLURM task) owns one
    and hands it to run_jobs or train_pack, which point it at each pack while it trains; the
    state it saves is the trainer's own (Trainer.last_state), and every checkpoint, a signal's
    too, makes the pack's curves durable up to the same epoch (their rows are appended as they
    are made): a resumed run keeps only the rows up to its checkpoint's epoch (kanx.curves).
    """

    def __init__(self) -> None:
        self.jobs: Sequence[Job] = ()
        self.trainer: Trainer | None = None
        self.curves: Curves | None = None
        self.state: dict | None = None

    def watch(self, jobs: Sequence[Job], trainer: Trainer | None, curves: Curves | None = None) -> None:
        """Point it at a pack in training (or at none: ``()``, None). With ``curves``, it saves the
        state of the last epoch whose rows the curves hold (``caught_up``), not the trainer's newest."""
        self.jobs, self.trainer, self.curves, self.state = jobs, trainer, curves, None

    def caught_up(self) -> None:
        """The curves hold the rows of the trainer's last epoch: its state is the one to save."""
        self.state = self.trainer.last_state if self.trainer is not None else None

    def save(self) -> int:
        """Write the checkpoints of the pack in training. Returns the number of runs
        checkpointed (0 if none is training, or it has not finished an epoch yet)."""
        if self.curves is not None:
            state = self.state
        else:
            state = self.trainer.last_state if self.trainer is not None else None
        if not self.jobs or state is None or self.trainer is None:
            return 0
        _write_checkpoints(self.jobs, self.trainer, state)
        if self.curves is not None:
            self.curves.flush()
        return len(self.jobs)


def stop_on_signals() -> Checkpointer:
    """SIGTERM or SIGINT: write the checkpoint of the pack being trained, as of its last
    finished epoch, and stop (a re-run resumes from it), instead of losing the epochs
    since the last periodic checkpoint. Returns the Checkpointer to train the packs with."""
    checkpointer = Checkpointer()

    def handler(signum, frame):
        try:
            n = checkpointer.save()
        except StorageError as e:
            print(f"{signal.Signals(signum).name}: no checkpoint saved ({e}); stopping", file=sys.stderr, flush=True)
            raise SystemExit(128 + signum) from None
        print(f"{signal.Signals(signum).name}: saved checkpoints of {n} run(s); stopping", file=sys.stderr, flush=True)
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)
    return checkpointer


def _write_checkpoints(jobs: Sequence[Job], trainer: Trainer, state: dict) -> None:
    where, pack = _where(trainer.device), _pack_facts(jobs, trainer)
    write_together([(Checkpoint(epoch=state["epoch"], state=trainer.member_slice(state, m), config_hash=job.config_hash,
                                data_hash=job.data_hash,
                                history=_segments(job, where, state["epoch"], state["train_seconds"]
                                                  - trainer.resumed_train_seconds),
                                pack=pack), job.run_dir) for m, job in enumerate(jobs)])


def _pack_facts(jobs: Sequence[Job], trainer: Trainer) -> dict:
    """What kanx.status needs to time a pack before any of its runs has a record (the manifests
    list runs, not packs): which pack (an id shared by its members' checkpoints, so
    a pack spanning several sweeps is counted once), its epochs, batches per epoch and size."""
    names = "\n".join(sorted(str(job.run_dir.resolve()) for job in jobs))
    return {"id": hashlib.sha1(names.encode()).hexdigest()[:12], "epochs": trainer.train_cfg.epochs,
            "batches": trainer.batches_per_epoch, "members": len(jobs)}


def _where(device: torch.device) -> dict:
    """This process's device and commit, as a stretch of training names them (once per pack)."""
    return {"device": describe_device(device), "git_commit": records.git_commit()}


def _segments(job: Job, where: dict, epoch: int, seconds: float) -> list[dict]:
    """Where, by which commit and in how many training seconds each stretch of the run was
    trained, this one (``seconds`` so far) up to ``epoch`` included: a run resumed on another
    device or at another commit says so in its record, and kanx.status reads a running pack's
    step rate off its last stretch."""
    return [*job.history, {**where, "epochs": [job.resume_epoch, epoch], "train_s": round(seconds, 3)}]


def pack_data(runs: Sequence[RunConfig]) -> tuple[list, list, torch.Tensor, torch.Tensor]:
    """Each member's dataset and scaling (fitted on its training data), and the stacked
    model-scaled training data x (M, N, n_0), y (M, N, n_L) a Trainer trains on."""
    from kanx.data import fit_scaling

    datasets = [load_data(r) for r in runs]
    scalings = [fit_scaling(ds, r.data.input_scaling, r.data.standardize_targets)
                for ds, r in zip(datasets, runs, strict=True)]
    x = torch.stack([s.x(ds.x_train) for s, ds in zip(scalings, datasets, strict=True)])
    y = torch.stack([s.y(ds.y_train) for s, ds in zip(scalings, datasets, strict=True)])
    return datasets, scalings, x, y


def _train_pack(jobs: Sequence[Job], start: float, checkpointer: Checkpointer | None, finished: list[Path],
                pending: contextlib.ExitStack) -> None:
    """Train the pack, then write each run's model and record; ``finished`` gets each run's folder
    once its record is written; ``pending`` ends the loggers' runs where the pack stops part way."""
    runs = [j.run for j in jobs]
    device = resolve_device(runs[0].device)
    datasets, scalings, x, y = pack_data(runs)
    trainer = Trainer(runs, x, y, datasets[0].n_train, device)
    n_threads = threads.use_for(trainer)  # before the first epoch compiles: inductor writes the count into its kernels
    if jobs[0].resume_epoch:
        trainer.load_member_states([Checkpoint.read(j.run_dir).state for j in jobs])
        log.info(f"resuming {len(jobs)} run(s) from epoch {trainer.epoch}")

    cfg = runs[0].train
    # metrics.csv, appended on the log cadence with each member's held-out error, and the `logger=` trackers
    curves = pack_curves(jobs, trainer, HeldOut(datasets, scalings, device, trainer.estimator))
    pending.callback(curves.end)
    name = (f"{'+'.join(dict.fromkeys(r.data.name for r in runs))} "
            f"{'+'.join(dict.fromkeys(r.condition.name for r in runs))} x{len(jobs)}")
    bar = tqdm(total=cfg.epochs, initial=trainer.epoch, desc=name, disable=None, leave=False, dynamic_ncols=True)
    every = max(1, cfg.epochs // 100)
    resumed_at = (trainer.epoch, time.perf_counter())
    refreshed = [time.monotonic()]
    ticker = Ticker(cfg.progress_every_s, on=bool(bar.disable))  # off a terminal: a line now and then, no bar
    checkpointer = checkpointer or Checkpointer()  # the periodic checkpoints' too, signals or not
    checkpointer.watch(jobs, trainer, curves)

    def on_epoch(trainer: Trainer, progress) -> None:
        bar.update(1)
        curves.add(trainer, progress)
        checkpointer.caught_up()
        if time.monotonic() - refreshed[0] > records.LOCK_REFRESH_S:
            records.refresh_locks(j.run_dir for j in jobs)
            refreshed[0] = time.monotonic()
        if progress.epoch % every == 0 or trainer.epoch == cfg.epochs:
            open_gates = (trainer.model.inference_gates(trainer.estimator) > 0).sum(-1).float().mean().item()
            loss = progress.loss[progress.alive].mean().item() if progress.alive.any() else float("nan")
            bar.set_postfix(loss=f"{loss:.4g}", open_gates=f"{open_gates:.0f}")
        if cfg.checkpoint_every and trainer.epoch % cfg.checkpoint_every == 0 and trainer.epoch < cfg.epochs:
            checkpointer.save()
            log.info(progress_line(name, trainer.epoch, cfg.epochs, progress.loss, progress.alive, resumed_at)
                     + "; checkpoint written")
            ticker.reset()
        elif ticker.due():
            log.info(progress_line(name, trainer.epoch, cfg.epochs, progress.loss, progress.alive, resumed_at))

    try:
        trainer.train(on_epoch, host_every=(curves.every, cfg.checkpoint_every))
    finally:
        checkpointer.watch((), None)
        curves.close(finished=trainer.epoch >= cfg.epochs, results=True)
        bar.close()

    wall = time.perf_counter() - start
    where = _where(device)
    scoring = time.perf_counter()
    log.info(f"{name}: trained; scoring {len(jobs)} run(s) (each model.pt on its data)")
    for m, job in enumerate(jobs):
        # The record's metrics are those of model.pt, scored alone (kanx.evaluate.score): the
        # numbers do not depend on the pack, and kanx.evaluate reproduces them bit for bit on this
        # machine (elsewhere within its verdicts' tolerance, kanx.verdicts).
        saved = model_file(trainer.member_model_state(m), runs[m].model, runs[m].condition, runs[m].seed, scalings[m],
                           runs[m].gate_estimator, datasets[m].input_names, datasets[m].output_names)
        scores = score(read_model_file(io.BytesIO(torch_bytes(saved))), datasets[m])  # model.pt's bytes, read back
        metrics = {k: v for k, v in scores.items() if k not in vocab.RECORD_STRUCTURE}
        structure = {k: scores[k] for k in vocab.RECORD_STRUCTURE}
        status, reason = _status(bool(trainer.alive[m]), metrics, structure)
        # resumed: every stretch, the last one (this process's) included
        seconds = trainer.train_seconds - trainer.resumed_train_seconds
        segments = _segments(job, where, trainer.epoch, seconds) if job.history else None
        base = _base_record(job, status, wall, trainer.steps, pack_size=len(jobs), train_seconds=trainer.train_seconds,
                            threads=n_threads, compiled=trainer.compiled)
        rec = base.trained(scores, reason, datasets[m].target_unit, where["device"], segments)
        # the old marker's checksums no longer hold once model.pt is replaced
        (job.run_dir / records.DONE).unlink(missing_ok=True)
        _save_torch(job.run_dir / records.MODEL, saved)
        records.compress_curve(job.run_dir)  # a finished run's curve is kept gzipped; the marker vouches for the .gz
        rec.write(job.run_dir)
        finished.append(job.run_dir)
        curves.log_results(m, rec.fields)
        with contextlib.suppress(OSError):  # on a file system turned read-only: beside a sealed record it is never read
            (job.run_dir / records.CHECKPOINT).unlink(missing_ok=True)
        unit = f" {datasets[m].target_unit}" if datasets[m].target_unit else ""
        quick = f" ({QUICK_TRY}: a quick try, not a result)" if is_quick_try(job.container) else ""
        log.info(f"[{status}] {job.label}{quick}: test_rmse={metrics['test_rmse']:.4g}{unit} "
                 f"edges={structure['contributing_edges']} depth={structure['depth']} exit={structure['exit']} -> "
                 f"{job.run_dir / records.RECORD}")
    log.info(f"{name}: scored {len(jobs)} run(s) in {time.perf_counter() - scoring:.1f} s")


def _status(alive: bool, metrics: dict, structure: dict) -> tuple[str, str | None]:
    if not alive:
        return "diverged", "training loss became non-finite"
    if not all(math.isfinite(v) for v in metrics.values() if isinstance(v, float)):
        return "diverged", "test predictions became non-finite"
    if structure["contributing_edges"] == 0:
        return "collapsed", "no contributing edge left"
    return "ok", None


def _base_record(job: Job, status: str, wall: float, steps: int, pack_size: int = 1,
                 train_seconds: float | None = None, threads: int | None = None,
                 compiled: bool | None = None) -> Record:
    run, ds = job.run, load_data(job.run)
    timing = {"wall_s": wall, "train_s": train_seconds, "steps": steps,
              "steps_per_s": steps / train_seconds if train_seconds else None, "pack_size": pack_size}
    if threads is not None:  # how it trained (records since issue #53): intra-op threads, compiled kernels or eager
        timing.update(threads=threads, compiled=compiled)
    return Record.new(dataset=run.data.name, family=ds.family, condition=run.condition.name,
                      beta=run.beta, seed=run.seed,
                      data_seed=run.data.data_seed, status=status, n_train=ds.n_train, n_test=ds.n_test, timing=timing,
                      versions=records.versions(), git_commit=records.git_commit(), config_hash=job.config_hash,
                      data_hash=job.data_hash, config=job.container)
