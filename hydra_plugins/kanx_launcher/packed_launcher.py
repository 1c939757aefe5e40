"""kanx's packing launcher for Hydra (`launcher=packed`, the default for -m).

It composes every job of a multirun, checks them all before any compute, then trains the
jobs that differ only in beta and seed as one batched model (a pack of up to
``pack_size`` members), writing each member's record exactly as an unpacked run would.
``group`` says how far packs mix a multirun's jobs (kanx.vocab.GROUPINGS): ``sweep`` one
(dataset, condition) per pack, ``condition`` the datasets of one protocol together (e.g.
`dataset=nguyen_f1,nguyen_f2`), ``all`` the conditions too, and ``auto`` (the default) ``all``
on a GPU and ``condition`` on a CPU (kanx.jobs.resolve_group).
Hydra finds launchers only in the ``hydra_plugins`` namespace package, hence this folder.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

from kanx.vocab import DEFAULT_GROUP

log = logging.getLogger("kanx")


@dataclass
class PackedLauncherConf:
    _target_: str = "hydra_plugins.kanx_launcher.packed_launcher.PackedLauncher"
    # (OmegaConf structured configs need Optional) None: each job's train.pack_size
    pack_size: Optional[int] = None  # noqa: UP045
    # auto: all on a GPU, condition on a CPU | sweep: one (dataset, condition) per pack |
    # condition: mix datasets of one protocol | all: mix conditions too
    group: str = DEFAULT_GROUP


ConfigStore.instance().store(group="hydra/launcher", name="kanx_packed", node=PackedLauncherConf, provider="kanx")


def compose_jobs(launcher: Launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
    """Each job's composed config, its output directory and its overrides."""
    from kanx.plan import split_members, with_members

    parser = OverridesParser.create()
    composed: dict = {}
    jobs = []
    for idx, overrides in enumerate(job_overrides):
        member, rest = split_members(parser.parse_overrides(list(overrides)))
        if rest not in composed:
            composed[rest] = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(overrides))
        cfg = with_members(composed[rest], member)
        with open_dict(cfg):
            cfg.hydra.job.id = cfg.hydra.job.num = initial_job_idx + idx
            cfg.hydra.overrides.task = list(overrides)
        HydraConfig.instance().set_config(cfg)  # resolves ${hydra:...} in the job's dirs
        run_dir = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
        jobs.append((cfg, run_dir, list(overrides)))
    return jobs


def log_beside_multirun(launcher: Launcher, jobs: list) -> Path:
    """Log the sweep as a single run logs (Hydra's hydra.job_logging: the same line format on the
    console, and the same lines in a file), the file being <job name>.log beside multirun.yaml in
    the sweep folder; a sweep over +condition, whose primary folder holds no run and is removed,
    keeps it in its first job's sweep folder. Returns the file."""
    from omegaconf import OmegaConf

    hydra = launcher.config.hydra
    folder = Path(str(hydra.sweep.dir))
    if not folder.is_dir() and jobs:
        folder = Path(jobs[0][1]).parent
    path = folder / f"{hydra.job.name}.log"
    conf = OmegaConf.to_container(hydra.job_logging, resolve=False) if hydra.get("job_logging") is not None else None
    if conf and conf.get("handlers"):
        for handler in conf["handlers"].values():
            if "filename" in handler:  # a single run's ${hydra.runtime.output_dir}/${hydra.job.name}.log
                handler["filename"] = str(path)
        folder.mkdir(parents=True, exist_ok=True)
        configure_log(OmegaConf.create(conf), hydra.verbose)
    return path


def save_hydra_dirs(jobs: list) -> list[Path]:
    """Each job's .hydra/ in its run folder (config.yaml, hydra.yaml, overrides.yaml), as Hydra's
    basic launcher writes it at a job's start (hydra.core.utils.run_job): what composed the run,
    beside its record, however it was launched. Returns the run folders (none where
    hydra.output_subdir is null, which turns them off)."""
    from hydra.core.utils import _save_config
    from omegaconf import OmegaConf, read_write

    written = []
    for cfg, run_dir, _ in jobs:
        if cfg.hydra.output_subdir is None:
            continue
        with read_write(cfg.hydra.runtime), open_dict(cfg.hydra.runtime):
            cfg.hydra.runtime.output_dir = str(Path(run_dir).absolute())
        task_cfg = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
        out = Path(run_dir) / str(cfg.hydra.output_subdir)
        _save_config(task_cfg, "config.yaml", out)
        _save_config(OmegaConf.masked_copy(cfg, "hydra"), "hydra.yaml", out)
        _save_config(cfg.hydra.overrides.task, "overrides.yaml", out)
        written.append(Path(run_dir))
    return written


def write_multirun(launcher: Launcher) -> Path:
    """Hydra's multirun.yaml in the sweep folder, as its basic sweeper writes it, once every job
    is accepted (kanx's sweeper leaves it to the launcher: sweeper.py). A folder that cannot be
    written stops the command with one line, exit 1. Returns the sweep folder."""
    from omegaconf import OmegaConf

    from kanx.errors import StorageError, fail
    from kanx.runner import make_folder

    folder = Path(str(launcher.config.hydra.sweep.dir))
    make_folder(folder)
    try:
        OmegaConf.save(launcher.config, folder / "multirun.yaml")
    except OSError as e:
        fail(StorageError(e.errno, e.strerror, e.filename or str(folder / "multirun.yaml")), code=1)
    return folder


def start_launch(launcher: Launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
    """What every kanx launcher does first: Hydra's globals and logging, kanx's resolvers,
    refuse an empty sweep, then compose every job (keeping Hydra's singletons as they were)."""
    from kanx.errors import fail
    from kanx.resolvers import register_resolvers

    setup_globals()
    register_resolvers()
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    if not job_overrides:
        fail("the sweep has no jobs: a swept list (seed, beta, ...) is empty; give at least one value, e.g. seed=0,1")
    state = Singleton.get_state()
    jobs = compose_jobs(launcher, job_overrides, initial_job_idx)
    Singleton.set_state(state)
    return jobs


class PackedLauncher(Launcher):
    validates_jobs = True  # composes and checks every job before any compute (see sweeper.py)

    def __init__(self, pack_size: int | None = None, group: str = DEFAULT_GROUP) -> None:
        self.pack_size, self.group = pack_size, group
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from hydra_plugins.kanx_launcher.sweeper import held_back_logs, replay
        from kanx.errors import fail
        from kanx.objective import returned
        from kanx.records import discard_if_empty
        from kanx.runner import check_or_fail, run_command

        jobs = start_launch(self, job_overrides, initial_job_idx)
        configs = [(cfg, run_dir) for cfg, run_dir, _ in jobs]
        with held_back_logs() as held:  # logged once the sweep's log file exists
            checked = check_or_fail(configs, self.pack_size, self.group)  # bad input: one line, and nothing written
        primary = write_multirun(self)
        # Swept over +condition, the primary config's sweep folder (Baseline's) holds only
        # Hydra's multirun.yaml, and no job runs in its condition. (A folder that differs from
        # its jobs' only in how Hydra spells a value, ...=false beside ...=False, holds their
        # multirun.yaml: kept.)
        if not any(Path(run_dir).resolve().is_relative_to(primary.parent.resolve()) for _, run_dir, _ in jobs):
            discard_if_empty(primary, self.config.get("results_root"))
        folder = log_beside_multirun(self, jobs).parent  # what bad input removes again, if nothing else is there
        replay(held)
        log.info(f"Launching {len(jobs)} jobs as packs (up to {self.pack_size or 'train.pack_size'} members each)")
        root = self.config.get("results_root")
        try:
            run_dirs = save_hydra_dirs(jobs)
        except OSError as e:  # a full disk or a read-only file system: one line, as the runner's
            fail(f"cannot write a run's .hydra/: {e}", code=1)
        # Ctrl-C or SIGTERM checkpoint the pack in training; bad input and failed runs stop in one line
        try:
            records = run_command(configs, folder, root, pack_size=self.pack_size, group=self.group, checked=checked)
        except SystemExit as e:
            if e.code == 2:  # bad input: the run folders that hold only .hydra/ go again, then the sweep's
                for run_dir in run_dirs:
                    discard_if_empty(run_dir, root)
                discard_if_empty(folder, root)
            raise
        returns = []
        for (cfg, run_dir, overrides), record in zip(jobs, records, strict=True):
            ret = JobReturn(overrides=overrides, cfg=cfg, hydra_cfg=cfg, working_dir=str(run_dir),
                            task_name="kanx.train")
            ret.status = JobStatus.COMPLETED
            ret.return_value = returned(cfg.get("optimized_metric"), record)  # a search sweeper's value, or the record
            returns.append(ret)
        return returns
