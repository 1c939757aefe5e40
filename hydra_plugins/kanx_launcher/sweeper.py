"""Hydra's basic sweeper without its duplicate composition pass, the check that a single run's
config is accepted before Hydra writes its folder, and the kanx log lines held back meanwhile.

BasicSweeper composes every job once to validate it, then the launcher composes it again.
kanx's launchers (packed, slurm) compose and check every job before any compute, so with
them the sweeper's pass only costs time (~0.25 s a job: 17 s for a 70-job sweep). With any
other launcher (e.g. launcher=basic) the sweeper validates as usual.

Nothing is written before the config is accepted: BasicSweeper writes multirun.yaml into the
sweep folder before any job is composed, and Hydra makes a single run's folder (.hydra/,
train.log) before kanx sees its config. With kanx's launchers the launcher writes multirun.yaml
once it has checked every job (packed_launcher.write_multirun); a single run is checked by
SingleRunCheck first.

Every launch lists its runs in the sweep folders' manifests before training (kanx.manifest), and
kanx.status expects what they list. kanx's launchers write them for the whole sweep; a launcher
that runs one job at a time (launcher=basic) would add each job only as it starts, so the
sweeper writes the manifests of a batch of jobs before its first job (write_manifests_of).
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.experimental.callback import Callback


@dataclass
class KanxSweeperConf:
    _target_: str = "hydra_plugins.kanx_launcher.sweeper.KanxSweeper"
    max_batch_size: Optional[int] = None  # noqa: UP045  (structured configs need Optional)
    params: Optional[Any] = None  # noqa: UP045


ConfigStore.instance().store(group="hydra/sweeper", name="kanx_basic", node=KanxSweeperConf, provider="kanx")


def check_folder(config, folder) -> None:
    """Before anything is written: results_root names a folder (an empty one would put the
    records at the file system's root) and ``folder``, where the results go, can be written.
    Stops with one line, exit 2."""
    from pathlib import Path

    from kanx.checks import check_writable
    from kanx.config import check_results_root
    from kanx.errors import ConfigError, fail

    try:
        check_results_root(config.get("results_root"))
        check_writable([Path(str(folder))])
    except ConfigError as e:
        fail(e)


class _Held(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def held_back_logs() -> Iterator[list]:
    """The kanx logger's lines, held back while the jobs are checked (before the sweep's log file
    exists): the caller replays them (replay) once logging writes where it should. Where the
    checks stop the command, they are replayed before it stops, so no warning is lost."""
    logger = logging.getLogger("kanx")
    held, propagate = _Held(), logger.propagate
    logger.addHandler(held)
    logger.propagate = False
    try:
        yield held.records
    except BaseException:
        logger.removeHandler(held)
        logger.propagate = propagate
        replay(held.records)
        raise
    finally:
        logger.removeHandler(held)
        logger.propagate = propagate


def replay(records: list) -> None:
    """Log the held-back lines now, through the handlers configured since."""
    for record in records:
        logging.getLogger(record.name).handle(record)
    records.clear()


class KanxSweeper(BasicSweeper):
    def sweep(self, arguments):
        """First check that results_root names a folder and that the sweep folder can be written
        (one line, not a traceback). With a launcher that checks every job (packed, slurm), the
        launcher writes multirun.yaml once the jobs are accepted; with any other, BasicSweeper
        writes it first, as always."""
        from pathlib import Path

        from kanx.runner import make_folder

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        check_folder(self.config, sweep_dir)
        if not getattr(self.launcher, "validates_jobs", False):
            make_folder(sweep_dir)  # where it cannot be made (results_root=/proc/x): one line, exit 1
            return super().sweep(arguments)
        return self._sweep_without_multirun_yaml(arguments)

    def _sweep_without_multirun_yaml(self, arguments) -> list:
        """BasicSweeper.sweep (Hydra 1.3) without its first step, writing multirun.yaml, and
        without composing each job to validate it (validate_batch_is_legal): the launcher does both."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        params_conf = self._parse_config()
        params_conf.extend(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        self.overrides = self.split_arguments(parser.parse_overrides(params_conf), self.max_batch_size)
        returns, initial_job_idx = [], 0
        while not self.is_done():
            batch = self.get_job_batch()
            results = self.launcher.launch(batch, initial_job_idx=initial_job_idx)
            for r in results:
                _ = r.return_value  # raises where a job failed, as BasicSweeper does
            initial_job_idx += len(batch)
            returns.append(results)
        return returns

    def validate_batch_is_legal(self, batch) -> None:
        if getattr(self.launcher, "validates_jobs", False):
            return  # the launcher composes and checks every job before any compute
        super().validate_batch_is_legal(batch)
        write_manifests_of(self, batch)


def write_manifests_of(sweeper, batch) -> None:
    """The manifests of a batch of jobs that the launcher runs one at a time (launcher=basic),
    before its first job: kanx.jobs.launch without packs or the machine's check, which each job
    makes when it starts. A job kanx refuses (or a manifest it cannot read) stops the sweep here,
    in one line, exit 2, before any job trained."""
    from hydra.core.singleton import Singleton
    from hydra.core.utils import setup_globals

    from hydra_plugins.kanx_launcher.packed_launcher import compose_jobs
    from kanx.errors import ConfigError, fail
    from kanx.jobs import launch

    setup_globals()  # ${hydra:...} in the jobs' folders
    state = Singleton.get_state()
    try:
        configs = [(cfg, run_dir) for cfg, run_dir, _ in compose_jobs(sweeper, batch, 0)]
    finally:
        Singleton.set_state(state)  # the launcher sets each job's HydraConfig itself
    try:
        launch(configs, pack=False, check=False)
    except ConfigError as e:
        fail(e)


class SingleRunCheck(Callback):
    """A single run (no -m) is a sweep of one (kanx.runner.run_command), but Hydra makes its folder
    and writes .hydra/ and train.log there before kanx sees the config: check the run first, as
    the launchers check a sweep's jobs (kanx.runner.check_jobs: a refused config leaves nothing
    on disk), then make its folder (one line, exit 1, where it cannot be made).
    (conf/config.yaml: hydra.callbacks)"""

    def on_run_start(self, config, **kwargs) -> None:
        from pathlib import Path

        from kanx.runner import check_or_fail, make_folder

        run_dir = Path(str(config.hydra.run.dir))
        check_folder(config, run_dir)
        with held_back_logs():  # the task function checks again, and logs, once Hydra's job logging is set up
            check_or_fail([(config, run_dir)])
        make_folder(run_dir)
