"""kanx's SLURM launcher for Hydra (`launcher=slurm`): one array task per pack, through submitit.

On the submitting machine it composes and checks every job of the multirun (bad input stops
here, before anything is submitted), leaves out the runs that already have a record or are
still queued from an earlier submission, groups the rest into packs exactly as the packing
launcher does, and submits one SLURM array: one task per pack (``pack=true``, the default)
or per run (``pack=false``). It then waits for the array and returns every run's record, or
with ``wait=false`` prints the job id and how to collect the results later.

Each array task runs a `PackTask`, a submitit checkpointable callable. On SLURM's
pre-timeout or preemption signal (USR2, sent ``signal_delay_s`` before the time limit or by
``scancel --signal=USR2``) submitit calls `PackTask.checkpoint`, which writes exact
checkpoints as of the last finished epoch (the task's `kanx.runner.Checkpointer`) and
requeues the task; the requeued task resumes from them, because the runner resumes any run
whose ``checkpoint.pt`` carries the same config hash. docs/SLURM.md has the whole story.
No ``from __future__ import annotations`` here: Hydra's plugin scan imports this module and
OmegaConf needs real annotations on the config dataclass.
"""

import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.kanx_launcher.packed_launcher import (
    log_beside_multirun,
    save_hydra_dirs,
    start_launch,
    write_multirun,
)
from kanx import records
from kanx.vocab import DEFAULT_GROUP

log = logging.getLogger("kanx")

# In a run directory: the SLURM task (``<array id>_<index>``) it was last submitted in, so a
# second submission of the same sweep leaves alone the runs that are still queued or running.
JOB_MARKER = ".slurm_job"


def check_search_waits(wait: bool, configs: Sequence) -> None:
    """A search sweeper (optimized_metric) reads each batch's values before it asks for the next, so
    its batches must be waited for. Raises ConfigError."""
    from kanx.errors import ConfigError

    if not wait and any(cfg.get("optimized_metric") is not None for cfg in configs):
        raise ConfigError("hydra.launcher.wait=false returns no values to a search (optimized_metric is set): "
                          "a search waits for each batch, set hydra.launcher.wait=true")


@dataclass
class SlurmLauncherConf:
    _target_: str = "hydra_plugins.kanx_launcher.slurm_launcher.SlurmLauncher"
    # (OmegaConf structured configs need Optional) None: the cluster's default
    partition: Optional[str] = None  # noqa: UP045
    account: Optional[str] = None  # noqa: UP045
    qos: Optional[str] = None  # noqa: UP045
    timeout_min: int = 60  # time limit of each array task (sbatch --time), minutes
    cpus_per_task: int = 1  # also torch's thread count inside the task
    mem_gb: Optional[float] = None  # noqa: UP045  None: the partition's default
    gpus_per_node: Optional[int] = None  # noqa: UP045
    array_parallelism: int = 256  # most array tasks running at once (sbatch --array=...%N)
    setup: list[str] = field(default_factory=list)  # shell lines run before the task, e.g. "module load cuda/12.1"
    max_num_timeout: int = 3  # requeues after reaching the time limit (preemptions are not counted)
    signal_delay_s: int = 120  # USR2 this long before the time limit: checkpoint and requeue
    pack: bool = True  # true: one task per pack; false: one task per run
    pack_size: Optional[int] = None  # noqa: UP045  most runs per pack; None: each job's train.pack_size
    # how packs mix the multirun's jobs (kanx.vocab.GROUPINGS): auto (resolved on the submitting machine) | sweep |
    # condition | all
    group: str = DEFAULT_GROUP
    wait: bool = True  # false: submit, print the job id and how to collect the results, return
    poll_s: float = 10.0  # seconds between checks while waiting
    # a task without a result counts as ended once out of the queue this long (not being requeued)
    end_settle_s: float = 30.0
    job_name: str = "kanx"
    submitit_folder: str = "${hydra.sweep.dir}/.submitit/%j"  # sbatch scripts, pickles and task logs
    # any other sbatch option, e.g. {constraint: a100}
    additional_parameters: dict[str, Any] = field(default_factory=dict)


ConfigStore.instance().store(group="hydra/launcher", name="kanx_slurm", node=SlurmLauncherConf, provider="kanx")


# ------------------------------------------------------------------ the array task


class PackTask:
    """One array task: train one pack (or one run) with kanx.runner and return its records.

    ``runs`` are (resolved config, absolute run directory) pairs, checked on the submitting
    machine. submitit calls `checkpoint` on USR2 and requeues the task with what it returns.
    """

    def __init__(self, runs: list[tuple[dict, str]]) -> None:
        self.runs = runs
        self.checkpointer = None  # kanx.runner.Checkpointer of the pack in training, while this task runs

    def __getstate__(self) -> dict:
        # submitit pickles the task to requeue it: its runs, not the pack in training.
        return {**self.__dict__, "checkpointer": None}

    def __call__(self) -> list[Optional[dict]]:  # noqa: UP045
        from kanx.runner import Checkpointer, run_jobs

        _task_logging()
        # SLURM counts restarts, whether submitit requeued the task or SLURM itself did (a
        # preemption in REQUEUE mode restarts the original pickle, not the checkpointed one).
        restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        if restarts == 0:
            self._invalidate_overwritten()
        else:
            self.runs = [({**c, "overwrite": False}, d) for c, d in self.runs]
        # SIGTERM comes from scancel, from preemption on clusters that send no USR2, and from
        # the time limit when USR2 was missed: saving is cheap, and a later submission resumes.
        self.checkpointer = Checkpointer()
        signal.signal(signal.SIGTERM, _save_then(signal.getsignal(signal.SIGTERM), self.checkpointer))
        log.info(f"array task: {len(self.runs)} run(s), attempt {restarts + 1}")
        # The submitter cut this pack (by its group); train it as one, whatever it mixes.
        return run_jobs(self.runs, pack_size=len(self.runs), group="all", checkpointer=self.checkpointer)

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Called by submitit on USR2: save the training pack's state, requeue this task."""
        import submitit

        n = self.checkpointer.save() if self.checkpointer is not None else 0
        log.warning(f"preemption/time-limit signal: saved exact checkpoints of {n} run(s); requeueing" if n
                    else "preemption/time-limit signal: no pack is mid-training (none started, or it is writing "
                         "records), nothing new to save; requeueing")
        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)

    def _invalidate_overwritten(self) -> None:
        """overwrite=true: drop each run's old record (and any checkpoint) once, when the task
        first starts; a requeued attempt then runs with overwrite off, so it resumes from its
        own checkpoints and keeps the records it has already written."""
        runs = []
        for container, run_dir in self.runs:
            if container.get("overwrite"):
                for name in (records.DONE, records.CHECKPOINT):
                    (Path(run_dir) / name).unlink(missing_ok=True)
                container = {**container, "overwrite": False}
            runs.append((container, run_dir))
        self.runs = runs


def _task_logging() -> None:
    if not log.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def _save_then(previous: Any, checkpointer: Any) -> Any:
    def handler(signum: int, frame: Any) -> None:
        try:
            n = checkpointer.save()
            if n:
                log.warning(f"{signal.Signals(signum).name}: saved exact checkpoints of {n} run(s)")
        except Exception as e:  # a signal handler must not raise into the training loop
            log.error(f"{signal.Signals(signum).name}: could not save checkpoints: {e}")
        if callable(previous):
            previous(signum, frame)

    return handler


# ------------------------------------------------------------------ submission


def _executor_class() -> type:
    """submitit's SlurmExecutor, except that a lone submission is an array of one task too,
    so ids (``<array id>_<index>``), log names and sacct rows look the same for every sweep."""
    from submitit import SlurmExecutor
    from submitit.core.utils import JobPaths
    from submitit.slurm.slurm import SlurmJob

    class ArrayExecutor(SlurmExecutor):
        def _internal_process_submissions(self, delayed_submissions):  # type: ignore[no-untyped-def]
            if len(delayed_submissions) != 1:
                return super()._internal_process_submissions(delayed_submissions)
            # submitit's array branch (SlurmExecutor._internal_process_submissions) for n = 1
            folder = JobPaths.get_first_id_independent_folder(self.folder)
            folder.mkdir(parents=True, exist_ok=True)
            pickle_path = folder / f"{uuid.uuid4().hex}.pkl"
            delayed_submissions[0].set_timeout(self.parameters.get("time", 5), self.max_num_timeout)
            delayed_submissions[0].dump(pickle_path)
            array_ex = SlurmExecutor(self.folder, self.max_num_timeout)
            array_ex.update_parameters(**self.parameters)
            array_ex.parameters["map_count"] = 1
            first = array_ex._submit_command(self._submitit_command_str)
            job = SlurmJob(folder=self.folder, job_id=f"{first.job_id}_0", tasks=list(range(first.num_tasks)))
            job.paths.move_temporary_file(pickle_path, "submitted_pickle")
            return [job]

    return ArrayExecutor


def queued_ids() -> Optional[set]:  # noqa: UP045
    """This user's jobs and array tasks in SLURM's queue (pending, running, requeued), one id
    per array task; None where squeue cannot be asked."""
    try:
        out = subprocess.run(["squeue", "--me", "-h", "-r", "-o", "%i"], capture_output=True, text=True,
                             timeout=120, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return set(out.split())


class TaskEnds:
    """Which array tasks have ended. A task being requeued (preemption, time limit) shows CANCELLED
    in sacct for a moment, and submitit takes CANCELLED as final and stops asking; squeue may
    not list it either until it is pending again (seen in CI). So a task counts as ended when its
    result is written, or when submitit takes it as done and it has stayed out of SLURM's queue
    for ``settle_s`` seconds (a requeued task is pending again within a few)."""

    def __init__(self, settle_s: float):
        self.settle_s = settle_s
        self.gone_since: dict[str, float] = {}

    def ended(self, sjob, queued: Optional[set], now: float) -> bool:  # noqa: UP045
        """``queued``: queued_ids(), None where squeue could not be asked; ``now``: time.monotonic()."""
        if not sjob.done() or (queued is not None and sjob.job_id in queued):
            self.gone_since.pop(sjob.job_id, None)
            return False
        if Path(sjob.paths.result_pickle).exists():
            return True
        return now - self.gone_since.setdefault(sjob.job_id, now) >= self.settle_s


def in_flight(run_dirs: Sequence[Path], queued: Optional[set]) -> dict:  # noqa: UP045
    """{run dir: SLURM task id} for runs whose last submission is still in the queue."""
    busy = {}
    for d in run_dirs:
        try:
            task = (Path(d) / JOB_MARKER).read_text().strip()
        except OSError:
            continue
        if queued is not None and task in queued:
            busy[Path(d)] = task
    return busy


def still_queued(todo: list) -> dict:
    """{run dir: SLURM task} of unfinished runs still queued from an earlier submission: kanx.jobs.launch
    holds them back (hold=), so that they are not submitted twice."""
    return in_flight([j.run_dir for j in todo], queued_ids())


def _check_tools() -> None:
    import shutil

    from kanx.errors import ConfigError

    for tool in ("sbatch", "srun", "squeue", "sacct"):
        if shutil.which(tool) is None:
            raise ConfigError(f"launcher=slurm needs SLURM's {tool} on PATH (run "
                              "on a SLURM login node, or use launcher=packed)")


def _reason(error: Exception) -> str:
    """One line from submitit's error: the exception a task raised (the last line of its
    traceback), or the last line SLURM wrote to the log of a task that produced no result."""
    text = str(error).strip()
    if "failed during processing with trace" in text:
        text = text.split("-" * 22)[1]  # submitit frames the traceback in lines of 22 dashes
    lines = [line.strip() for line in text.splitlines() if line.strip() and set(line.strip()) != {"-"}]
    return lines[-1] if lines else repr(error)


def _mem(gb: float) -> str:
    return f"{int(gb)}G" if float(gb).is_integer() else f"{int(gb * 1024)}M"


class SlurmLauncher(Launcher):
    validates_jobs = True  # composes and checks every job before submitting (see sweeper.py)

    def __init__(self, **params: Any) -> None:
        self.params = {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
                       for k, v in params.items()}
        self.config: Optional[DictConfig] = None  # noqa: UP045
        self.hydra_context: Optional[HydraContext] = None  # noqa: UP045
        self.task_function: Optional[TaskFunction] = None  # noqa: UP045

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    # ---------------------------------------------------------------- checks
    def _check_params(self) -> dict:
        """The sbatch parameters, after checking every launcher value. Raises ConfigError."""
        from kanx.errors import ConfigError

        p = self.params

        def need(ok: bool, key: str, what: str) -> None:
            if not ok:
                raise ConfigError(f"hydra.launcher.{key}={p.get(key)!r} {what}")

        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        need(is_int(p["timeout_min"]) and p["timeout_min"] >= 1, "timeout_min",
             "must be a whole number of minutes >= 1")
        need(is_int(p["cpus_per_task"]) and p["cpus_per_task"] >= 1, "cpus_per_task", "must be an integer >= 1")
        need(is_int(p["array_parallelism"]) and p["array_parallelism"] >= 1, "array_parallelism",
             "must be an integer >= 1")
        need(is_int(p["max_num_timeout"]) and p["max_num_timeout"] >= 0, "max_num_timeout", "must be an integer >= 0")
        need(is_int(p["signal_delay_s"]) and 0 <= p["signal_delay_s"] < 60 * p["timeout_min"], "signal_delay_s",
             f"must be an integer between 0 and the time limit ({60 * p['timeout_min']} s)")
        need(p["pack_size"] is None or (is_int(p["pack_size"]) and p["pack_size"] >= 1), "pack_size",
             "must be an integer >= 1 or null")
        need(p["mem_gb"] is None or (isinstance(p["mem_gb"], int | float) and p["mem_gb"] > 0),
             "mem_gb", "must be > 0 or null")
        need(p["gpus_per_node"] is None or (is_int(p["gpus_per_node"]) and p["gpus_per_node"] >= 0), "gpus_per_node",
             "must be an integer >= 0 or null")
        need(isinstance(p["setup"], list) and all(isinstance(s, str) for s in p["setup"]), "setup",
             "must be a list of shell lines")
        need(isinstance(p["additional_parameters"], dict), "additional_parameters",
             "must be a mapping of sbatch options")
        params = {
            "job_name": p["job_name"], "partition": p["partition"], "account": p["account"], "qos": p["qos"],
            "time": p["timeout_min"], "cpus_per_task": p["cpus_per_task"],
            "mem": None if p["mem_gb"] is None else _mem(p["mem_gb"]), "gpus_per_node": p["gpus_per_node"] or None,
            "array_parallelism": p["array_parallelism"], "signal_delay_s": p["signal_delay_s"],
            "setup": list(p["setup"]) or None, "additional_parameters": dict(p["additional_parameters"]) or None,
        }
        return {k: v for k, v in params.items() if v is not None}

    # ---------------------------------------------------------------- launch
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from hydra_plugins.kanx_launcher.sweeper import held_back_logs, replay
        from kanx.errors import ConfigError, fail

        jobs = start_launch(self, job_overrides, initial_job_idx)
        with held_back_logs() as held:  # logged once the sweep's log file exists
            try:
                sbatch = self._check_params()
                check_search_waits(self.params["wait"], [cfg for cfg, _, _ in jobs])
                plan = self._plan([(cfg, run_dir) for cfg, run_dir, _ in jobs], self.params["group"])
                _check_tools()
            except ConfigError as e:  # before anything is written: nothing to remove
                fail(e)
        write_multirun(self)
        log_beside_multirun(self, jobs)
        replay(held)
        try:
            plan.write_manifests()  # before submitting: kanx.status counts what was launched
            save_hydra_dirs(jobs)  # each run's .hydra/, as the basic launcher's
        except ConfigError as e:  # a manifest kanx cannot read: not replaced
            fail(e)
        except OSError as e:  # kanx.errors.StorageError: the results folder cannot be written
            fail(e, code=1)
        busy, packs = plan.held, plan.packs
        done = len(plan.jobs) - len(plan.todo) - len(busy)
        if done:
            log.info(f"{done} of {len(plan.jobs)} runs already have records; skipping them")
        if busy:
            log.warning(f"{len(busy)} run(s) are still queued or running from an earlier submission "
                        f"(SLURM {', '.join(sorted(set(busy.values()))[:5])}"
                        f"{', ...' if len(set(busy.values())) > 5 else ''}); not submitting them again")

        submitted = self._submit(packs, sbatch) if packs else []
        if not submitted and not busy:
            log.info("nothing to submit")
        if not self.params["wait"]:
            self._print_later(submitted, busy, jobs)
            return [self._job_return(cfg, run_dir, overrides, wait=False) for cfg, run_dir, overrides in jobs]
        failures = self._wait(submitted, busy)
        returns = [self._job_return(cfg, run_dir, overrides, wait=True, failures=failures)
                   for cfg, run_dir, overrides in jobs]
        missing = sum(r.status == JobStatus.FAILED for r in returns)
        log.info(f"{len(returns) - missing} of {len(returns)} runs have records")
        if missing:  # one line, not Hydra's traceback of the first failed JobReturn
            fail(f"{missing} of {len(returns)} runs have no record (see the task logs above); "
                 "re-run the same command to submit only those (they resume from their checkpoints)", code=1)
        return returns

    def _submit(self, packs: list, sbatch: dict) -> list:
        """Submit one array (a task per pack); returns [(submitit job, pack)]."""
        from kanx.errors import fail

        folder = Path(str(self.params["submitit_folder"])).absolute()
        try:
            executor = _executor_class()(folder=folder, max_num_timeout=self.params["max_num_timeout"])
            executor.update_parameters(**sbatch)
        except (RuntimeError, ValueError) as e:
            fail(f"invalid SLURM parameters: {e}")
        tasks = [PackTask([(job.container, str(job.run_dir.absolute())) for job in pack]) for pack in packs]
        try:
            sjobs = executor.submit_array(tasks)
        except Exception as e:  # sbatch refused: nothing was submitted
            fail(f"sbatch refused the array of {len(tasks)} task(s): {str(e).strip()}")
        for sjob, pack in zip(sjobs, packs, strict=True):
            for job in pack:
                records.atomic_write_bytes(job.run_dir / JOB_MARKER, f"{sjob.job_id}\n".encode())
        array_id = sjobs[0].job_id.split("_")[0]
        n_runs = sum(len(p) for p in packs)
        per = f"packs of up to {max(len(p) for p in packs)} runs" if self.params["pack"] else "one run each"
        logs = str(sjobs[0].paths.stdout).replace(f"{array_id}_0", f"{array_id}_*")
        log.info(f"submitted SLURM array {array_id}: {len(sjobs)} task(s) ({per}), {n_runs} run(s); logs: {logs}")
        return list(zip(sjobs, packs, strict=True))

    def _wait(self, submitted: list, busy: dict) -> dict:
        """Wait until every task has ended; {run dir: why it has no result} for failed tasks."""
        from submitit.slurm.slurm import SlurmJob

        sjobs = [s for s, _ in submitted]
        others = set(busy.values())
        if not sjobs and not others:
            return {}
        start = last_sacct = time.monotonic()
        last_note = ""
        ends = TaskEnds(self.params["end_settle_s"])
        try:
            while True:
                if time.monotonic() - last_sacct > 60:  # notice cancelled or killed tasks within a minute
                    SlurmJob.watcher.update()
                    last_sacct = time.monotonic()
                queued = queued_ids()
                now = time.monotonic()
                n_done = sum(ends.ended(s, queued, now) for s in sjobs)
                if others:
                    others &= queued or set()
                if n_done == len(sjobs) and not others:
                    break
                note = (f"waiting for SLURM: {n_done} of {len(sjobs)} task(s) ended"
                        + (f", {len(others)} earlier task(s) still queued" if others else ""))
                if note != last_note:
                    log.info(note)
                    last_note = note
                time.sleep(self.params["poll_s"])
        except KeyboardInterrupt:
            ids = sorted({s.job_id.split("_")[0] for s in sjobs} | {t.split("_")[0] for t in others})
            log.warning(f"stopped waiting; the array keeps running on the cluster (scancel {' '.join(ids)} stops it). "
                        "Re-run the same command later to collect the records (queued runs are not submitted twice).")
            sys.exit(130)
        log.info(f"all {len(sjobs)} task(s) ended after {time.monotonic() - start:.0f} s")
        failures = {}
        for sjob, pack in submitted:
            error = sjob.exception()
            if error is not None:
                why = (f"SLURM task {sjob.job_id} ended without a result "
                       f"({sjob.state}): {_reason(error)}; log: {sjob.paths.stdout}")
                log.error(why)
                for job in pack:
                    failures[job.run_dir] = why
        return failures

    def _job_return(self, cfg: DictConfig, run_dir: Path, overrides: list, wait: bool,
                    failures: Optional[dict] = None) -> JobReturn:  # noqa: UP045
        from kanx.objective import returned

        ret = JobReturn(overrides=overrides, cfg=cfg, hydra_cfg=cfg, working_dir=str(run_dir), task_name="kanx.train")
        record = records.read_state(run_dir).record
        ret.status = JobStatus.COMPLETED
        # None with wait=false for runs still to train; with optimized_metric, what a search sweeper reads
        ret.return_value = record if record is None else returned(cfg.get("optimized_metric"), record)
        if wait and record is None:
            why = (failures or {}).get(Path(run_dir), "its SLURM task ended without writing it")
            ret.status = JobStatus.FAILED
            ret.return_value = RuntimeError(f"no record in {run_dir}: {why}")
        return ret

    def _plan(self, configs: list, group: str):
        """kanx.jobs.launch as SLURM needs it: no machine check (the login node is not where the packs
        train), runs still queued held back, the manifests left to the caller. Raises ConfigError."""
        from kanx.jobs import launch

        return launch(configs, group, self.params["pack_size"], pack=self.params["pack"], check=False, manifest=False,
                      hold=still_queued)

    def submit_sweeps(self, configs: list, group: str) -> int:
        """Check and submit the jobs of many sweeps (kanx.plan, `make reproduce-tables
        LAUNCHER=slurm`) as one array, packs cut across the sweeps by ``group``; wait for it
        unless wait=false. Returns the number of runs left without a record (0 with
        wait=false). Raises ConfigError for a refused config, before anything is written."""
        from kanx.errors import ConfigError, fail
        from kanx.jobs import group_label

        plan = self._plan(configs, group)
        try:
            sbatch = self._check_params()
            _check_tools()
        except ConfigError as e:
            fail(e)
        try:
            plan.write_manifests()
        except OSError as e:
            fail(e, code=1)
        prepared, todo, busy, packs = plan.jobs, plan.todo, plan.held, plan.packs
        log.info(f"{len(prepared) - len(todo) - len(busy)} of {len(prepared)} runs already have records, {len(busy)} "
                 f"still queued; {len(todo)} to submit in {len(packs)} task(s) (group={group_label(group, todo)})")
        submitted = self._submit(packs, sbatch) if packs else []
        if not self.params["wait"]:
            ids = sorted({s.job_id.split("_")[0] for s, _ in submitted} | {t.split("_")[0] for t in busy.values()})
            print(f"kanx: SLURM job(s) {' '.join(ids) or '(none)'} submitted or still queued; not waiting "
                  "(hydra.launcher.wait=false)")
            return 0
        self._wait(submitted, busy)
        return sum(records.read_state(j.run_dir).record is None for j in prepared)

    def _print_later(self, submitted: list, busy: dict, jobs: list) -> None:
        """wait=false: the job ids, and how to follow them and analyse the results."""
        ids = sorted({s.job_id.split("_")[0] for s, _ in submitted} | {t.split("_")[0] for t in busy.values()}, key=int)
        roots = sorted({str(Path(str(cfg.results_root))) for cfg, _, _ in jobs})
        if not ids:
            print("kanx: nothing is queued: every run has a record")
            return
        print(f"kanx: SLURM job(s) {' '.join(ids)} submitted or still queued; not waiting (hydra.launcher.wait=false).")
        print(f"  follow:   squeue -j {','.join(ids)}   |   sacct -X -j {','.join(ids)}")
        print(f"  wait:     python scripts/slurm_wait.py {' '.join(roots)}")
        print(f"  analyse:  python -m kanx.analyze {roots[0]}")
        print("  Re-running this command submits only the runs that have no record and are not queued.")
