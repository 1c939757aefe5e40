"""`python -m kanx.train`: train one run, or a whole sweep with -m.

    python -m kanx.train                                   # sin(x + y^2), baseline, one run
    python -m kanx.train +condition=EFX dataset=concrete -m  # 7 betas x 10 seeds, packed
    kanx-train +condition=EFX dataset=concrete -m            # the same, as the installed console script

Hydra composes conf/config.yaml (kanx.confdir: the checkout's conf/, or the installed
kanx.conf), the dataset (the paper's hyperparameters) and the condition; `-m` sweeps
hydra.sweeper.params (beta list, seeds 0-9) through the launcher (`launcher=packed` by
default, `basic`, or `slurm`). This module only converts config and hands the jobs to
kanx.runner; everything else is plain functions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from kanx.cli import pipe_safe, version_line
from kanx.confdir import conf_dir
from kanx.errors import ConfigError, fail
from kanx.resolvers import register_resolvers


def run(cfg: DictConfig) -> dict | float | tuple | None:
    """Hydra task function: one job, in its own output directory (a single run, or a job of
    launcher=basic), trained as kanx's launchers train a sweep (kanx.runner.run_command).
    Returns its record, or with optimized_metric the value(s) a search sweeper reads (kanx.objective)."""
    from kanx.objective import returned
    from kanx.runner import run_command

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    return returned(cfg.get("optimized_metric"), run_command([(cfg, run_dir)], run_dir, cfg.get("results_root"))[0])


def _beta_sweep_or_fail(*args) -> str:
    """The beta_sweep resolver for the command line: Hydra resolves the sweep parameters
    while it builds its sweeper, where a ConfigError would print as a long traceback."""
    from kanx.resolvers import beta_sweep

    try:
        return beta_sweep(*args)
    except ConfigError as e:
        fail(e)


# Hydra's paths that print and exit: a pipe closed early there is the reader's choice (pipe_safe).
# Not a training run's: a sweep whose stdout goes away stops with an error rather than exit 0.
HELP_OPTIONS = ("-h", "--help", "--hydra-help", "--version")


def _compose_and_run() -> int:
    from omegaconf import OmegaConf

    if "--version" in sys.argv[1:]:  # kanx's version, not Hydra's (which its own --version prints)
        print(version_line())
        return 0
    register_resolvers()
    OmegaConf.register_new_resolver("kanx.beta_sweep", _beta_sweep_or_fail, replace=True)
    hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")(run)()
    return 0


def main() -> int:
    if any(arg in HELP_OPTIONS for arg in sys.argv[1:]):
        return pipe_safe(_compose_and_run)()
    return _compose_and_run()


if __name__ == "__main__":
    sys.exit(main())
