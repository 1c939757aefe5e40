"""Hydra's basic sweeper without its duplicate composition pass, and the check that a single
run's folder can be written.

BasicSweeper composes every job once to validate it, then the launcher composes it again.
kanx's launchers (packed, slurm) compose and check every job before any training, so with
them the sweeper's pass only costs time (~0.25 s a job: 17 s for a 70-job sweep). With any
other launcher (e.g. launcher=basic) the sweeper validates as usual.
"""

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


class KanxSweeper(BasicSweeper):
    def sweep(self, arguments):
        """First check that the sweep folder can be written (BasicSweeper writes its
        multirun.yaml there): one line naming the folder, not a traceback."""
        from pathlib import Path

        from kanx.checks import check_writable
        from kanx.errors import ConfigError, fail

        try:
            check_writable([Path(str(self.config.hydra.sweep.dir))])
        except ConfigError as e:
            fail(e)
        return super().sweep(arguments)

    def validate_batch_is_legal(self, batch) -> None:
        if getattr(self.launcher, "validates_jobs", False):
            return  # the launcher composes and checks every job before any compute
        super().validate_batch_is_legal(batch)


class SingleRunCheck(Callback):
    """A single run (no -m) is a sweep of one (kanx.runner.run_command), but Hydra makes its folder
    and writes .hydra/ there before kanx sees the config: check first that the folder can be
    written, as KanxSweeper.sweep does for a sweep's. (conf/config.yaml: hydra.callbacks)"""

    def on_run_start(self, config, **kwargs) -> None:
        from pathlib import Path

        from kanx.checks import check_writable
        from kanx.errors import ConfigError, fail

        try:
            check_writable([Path(str(config.hydra.run.dir))])
        except ConfigError as e:
            fail(e)
