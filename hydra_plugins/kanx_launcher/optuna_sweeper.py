"""`hydra/sweeper=kanx_optuna`: hydra-optuna-sweeper (`pip install 'kanx[optuna]'`) with a study
that lives under results_root and that the same command resumes.

It is Hydra's Optuna sweeper (every setting of `hydra/sweeper=optuna`: sampler, direction,
n_trials, n_jobs, params) with three differences:

- storage: by default a SQLite file, <results_root>/search/<study_name>.db (its folder made
  here), the study named after the sweep folder: dataset, condition and tag;
- n_trials counts the study's trials, not this invocation's: a search stopped part way (Ctrl-C,
  a SLURM time limit, a crash) finishes with the same command, and one already finished trains
  nothing more;
- a trial left running by a stopped search is marked failed and its parameters asked again, so
  its runs resume from their checkpoints; a finished trial is never retrained (its record exists,
  and the runner skips it);
- a resumed study's seeded sampler is seeded past the trials the study has (resumed_sampler), so
  it does not ask the earlier process's parameters again.

Each trial is an ordinary kanx run with its record (docs/USAGE.md, "Searching beta"); what it
returns to the study is `optimized_metric` (kanx.objective). kanx's launchers train each batch of
n_jobs trials as packs. One search process per study at a time: a second one would take the
first one's running trials for stopped ones.
"""

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from hydra.core.config_store import ConfigStore

log = logging.getLogger("kanx")

try:
    from hydra_plugins.hydra_optuna_sweeper.config import OptunaSweeperConf
    from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper
except ImportError:  # the extra is not installed: no kanx_optuna (conf/hparams_search says how to get it)
    OptunaSweeper = None

SQLITE = "sqlite:///"
# The study's default name and file: the sweep folder's parts (conf/config.yaml: hydra.sweep.dir).
STUDY_NAME = ("${kanx.folder:${dataset.name}},${kanx.folder:${condition.name}},"
              "${kanx.tag:${hydra.job.override_dirname}}")
STORAGE = SQLITE + "${results_root}/search/${kanx.folder:${hydra.sweeper.study_name}}.db"


def sqlite_file(storage) -> Optional[Path]:  # noqa: UP045
    """The file of a SQLite storage URL (sqlite:///relative or sqlite:////absolute), else None."""
    text = str(storage) if storage is not None else ""
    return Path(text[len(SQLITE):]) if text.startswith(SQLITE) and len(text) > len(SQLITE) else None


def trials_left(study, n_trials: int) -> int:
    """The trials this invocation asks for: n_trials less those the study has finished. A trial
    still marked running is one a stopped search left (one search process per study): marked
    failed, and its parameters asked again (enqueued), so that its runs resume from their
    checkpoints instead of new ones training."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    stopped = [t for t in trials if t.state == TrialState.RUNNING]
    for trial in stopped:
        study.tell(trial.number, state=TrialState.FAIL)
        study.enqueue_trial(dict(trial.params))
    finished = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL) for t in trials
                   if t.state != TrialState.RUNNING and not asked_again(t, trials))
    if stopped:
        log.info(f"{len(stopped)} trial(s) of a stopped search are asked again (their runs resume)")
    if finished:
        log.info(f"the study has {finished} finished trial(s) of n_trials={n_trials}")
    return max(0, n_trials - finished)


def asked_again(trial, trials) -> bool:
    """Whether ``trial`` failed and a later trial asked its parameters again (a stopped search's
    trial, enqueued by trials_left): the later one stands for it, so it does not count among the
    study's trials a second time (the Ikeda search, stopped twice, had counted its 10 stopped
    trials and their 10 twins both)."""
    from optuna.trial import TrialState

    return trial.state == TrialState.FAIL and any(
        t.number > trial.number and t.params == trial.params for t in trials)


def resumed_sampler(sampler, sampler_config, trials_before: int):
    """The sampler a resumed search asks with: where the study already has ``trials_before``
    trials and the sampler is seeded (``seed`` in its config), the same sampler seeded with seed +
    trials_before. A seeded sampler made afresh in a new process starts its random stream over,
    and NSGA-II then asked the first process's parameters again: an Ikeda search restarted twice
    asked 20 of its 60 trials with betas it had already trained, which found their records and
    counted as trials without training anything. The new seed depends on the study alone, so a
    search stopped at the same trial resumes with the same draws. Otherwise ``sampler`` as it is."""
    seed = sampler_config.get("seed") if sampler_config is not None else None
    if not trials_before or not isinstance(seed, int) or isinstance(seed, bool):
        return sampler
    from hydra.utils import instantiate

    log.info(f"the study has {trials_before} trial(s): its sampler is seeded with {seed} + {trials_before}, so it "
             "draws past what the earlier process drew")
    return instantiate(sampler_config, seed=seed + trials_before)


def check_objectives(config) -> None:
    """optimized_metric is set and its directions are the sweeper's, before the study is opened
    (kanx.objective; the launcher checks the metric names against each job's data). Stops with
    one line, exit 2."""
    from omegaconf import OmegaConf

    from kanx.errors import ConfigError, fail
    from kanx.objective import check_directions, parse, sweeper_directions

    try:
        spec = config.get("optimized_metric")
        objectives = parse(OmegaConf.to_container(spec) if OmegaConf.is_config(spec) else spec)
        if objectives is None:
            raise ConfigError("a search needs optimized_metric, the record's metric(s) it optimizes, e.g. "
                              "optimized_metric=val_rmse dataset.val_fraction=0.2 (conf/hparams_search/ has presets)")
        check_directions(objectives, sweeper_directions(config))
    except ConfigError as e:
        fail(e)


if OptunaSweeper is not None:

    @dataclass
    class KanxOptunaSweeperConf(OptunaSweeperConf):
        _target_: str = "hydra_plugins.kanx_launcher.optuna_sweeper.KanxOptunaSweeper"
        # No sampler group in the defaults: a preset names its sampler in full (hydra.sweeper.sampler._target_,
        # conf/hparams_search/), as a config cannot override a group that the sweeper's own defaults add.
        # None: Optuna's default, TPE for one objective and NSGA-II for several.
        defaults: list = field(default_factory=list)
        sampler: Any = None
        storage: Optional[Any] = STORAGE  # noqa: UP045
        study_name: Optional[str] = STUDY_NAME  # noqa: UP045

    ConfigStore.instance().store(group="hydra/sweeper", name="kanx_optuna", node=KanxOptunaSweeperConf,
                                 provider="kanx")

    class KanxOptunaSweeper(OptunaSweeper):
        def sweep(self, arguments):
            import optuna

            from hydra_plugins.kanx_launcher.sweeper import check_folder
            from kanx.runner import make_folder

            impl = self.sweeper
            check_folder(impl.config, Path(str(impl.config.hydra.sweep.dir)))  # results_root names a folder, writable
            check_objectives(impl.config)
            file = sqlite_file(impl.storage)
            if file is not None:
                make_folder(file.parent)  # SQLite makes the file, not its folder
            if impl.storage is not None:
                study = optuna.create_study(study_name=impl.study_name, storage=impl.storage,
                                            directions=impl._get_directions(), load_if_exists=True)
                trials_before = len(study.get_trials(deepcopy=False))
                impl.n_trials = trials_left(study, impl.n_trials)
                impl.sampler = resumed_sampler(impl.sampler, impl.config.hydra.sweeper.get("sampler"), trials_before)
            make_folder(Path(str(impl.config.hydra.sweep.dir)))  # optimization_results.yaml's, even with no trial left
            return impl.sweep(arguments)

else:

    from hydra.plugins.sweeper import Sweeper

    class OptunaMissing(Sweeper):
        """kanx_optuna without hydra-optuna-sweeper: one line that says what to install (exit 2, before
        anything is written), not Hydra's "Could not find 'hydra/sweeper/kanx_optuna'"."""

        def __init__(self, **_settings) -> None:
            from kanx.errors import fail

            fail("hparams_search and hydra/sweeper=kanx_optuna need hydra-optuna-sweeper: pip install 'kanx[optuna]'")

        def setup(self, **_kwargs) -> None:  # never reached: __init__ stops the command
            pass

        def sweep(self, arguments):  # never reached
            return None

    ConfigStore.instance().store(group="hydra/sweeper", name="kanx_optuna",
                                 node={"_target_": "hydra_plugins.kanx_launcher.optuna_sweeper.OptunaMissing",
                                       "_recursive_": False},  # its sampler is optuna's, absent too
                                 provider="kanx")

