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

The sweep parameters (hydra.sweeper.params: the beta list and the seeds) are resolved for each
condition and dataset that the command line sweeps (job_batches): the beta list depends on both
(kanx.resolvers.beta_sweep: a condition without gates sweeps beta 0 only; each dataset has its own
list), and Hydra resolves them once, for the config without the sweep, which would give every
condition of `+condition=baseline,EFX` the Baseline's beta 0 and every dataset the default's list.
"""

import itertools
import logging
from collections.abc import Callable, Iterator, Sequence
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


# The config groups that hydra.sweeper.params read (conf/config.yaml: beta from the condition and
# the dataset's betas): a sweep over one of them resolves the params for each of its values.
PARAMS_READ = ("condition", "dataset")


def job_batches(arguments: Sequence[str], params: dict, params_for: Callable[[list[str]], dict],
                max_batch_size: int | None, config_loader=None) -> list[list[list[str]]]:
    """Every job's overrides, in batches, as BasicSweeper.split_arguments makes them from the sweep
    parameters (``params``, resolved for the config without the sweep) and the command line; where
    the command line sweeps a PARAMS_READ group, the parameters are resolved for each combination
    of its values (``params_for``: hydra.sweeper.params composed with a list of plain overrides),
    jobs in the order of those combinations. The command line wins over the parameters, as in Hydra.
    ``config_loader``: Hydra's, for sweeps that list a group's options (glob)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create(config_loader=config_loader)
    parsed = parser.parse_overrides(list(arguments))
    swept = [o for o in parsed if o.is_sweep_override() and o.key_or_group in PARAMS_READ]
    plain = [o.input_line for o in parsed if not o.is_sweep_override()]
    rest = [o.input_line for o in parsed if o not in swept]
    choices = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] for o in swept]
    jobs: list[list[str]] = []
    for combo in itertools.product(*choices):
        resolved = params_for([*plain, *combo]) if combo else params
        jobs += BasicSweeper.split_arguments(
            parser.parse_overrides([*(f"{k}={v}" for k, v in resolved.items()), *combo, *rest]), None)[0]
    if max_batch_size is None or not jobs:
        return [jobs]  # one batch, as split_arguments makes it (an empty sweep: the launcher says so)
    return list(BasicSweeper.split_overrides_to_chunks(jobs, max_batch_size))


class KanxSweeper(BasicSweeper):
    def sweep(self, arguments):
        """First check that results_root names a folder and that the sweep folder can be written
        (one line, not a traceback). With a launcher that checks every job (packed, slurm), the
        launcher writes multirun.yaml once the jobs are accepted and composes each job to
        validate it; with any other, the sweeper writes multirun.yaml first and validates each
        batch, as BasicSweeper (Hydra 1.3) does."""
        from pathlib import Path

        from omegaconf import OmegaConf

        from kanx.runner import make_folder

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        check_folder(self.config, sweep_dir)
        self.overrides = job_batches(arguments, dict(self.params), self._params_for, self.max_batch_size,
                                     self.hydra_context.config_loader)
        checks_jobs = getattr(self.launcher, "validates_jobs", False)
        if not checks_jobs:
            make_folder(sweep_dir)  # where it cannot be made (results_root=/proc/x): one line, exit 1
            OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        returns, initial_job_idx = [], 0
        while not self.is_done():
            batch = self.get_job_batch()
            if not checks_jobs:
                self.validate_batch_is_legal(batch)
            results = self.launcher.launch(batch, initial_job_idx=initial_job_idx)
            for r in results:
                _ = r.return_value  # raises where a job failed, as BasicSweeper does
            initial_job_idx += len(batch)
            returns.append(results)
        return returns

    def _params_for(self, overrides: list[str]) -> dict:
        """hydra.sweeper.params composed with these overrides (one combination of the swept
        conditions and datasets), resolved."""
        from hydra.types import RunMode

        config = self.hydra_context.config_loader.load_configuration(
            config_name=self.config.hydra.job.config_name, overrides=overrides, run_mode=RunMode.MULTIRUN)
        return {str(k): str(v) for k, v in config.hydra.sweeper.params.items()}

    def validate_batch_is_legal(self, batch) -> None:
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
