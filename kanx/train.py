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

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from kanx.confdir import conf_dir
from kanx.config import register_resolvers
from kanx.errors import ConfigError, fail


def run(cfg: DictConfig) -> dict | None:
    """Hydra task function: one job, in its own output directory (a single run, or a job of
    launcher=basic), trained as kanx's launchers train a sweep (kanx.runner.run_command)."""
    from kanx.runner import run_command

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    return run_command([(cfg, run_dir)], run_dir, cfg.get("results_root"))[0]


def _beta_sweep_or_fail(*args) -> str:
    """The beta_sweep resolver for the command line: Hydra resolves the sweep parameters
    while it builds its sweeper, where a ConfigError would print as a long traceback."""
    from kanx.config import beta_sweep

    try:
        return beta_sweep(*args)
    except ConfigError as e:
        fail(e)


def main() -> None:
    from omegaconf import OmegaConf

    register_resolvers()
    OmegaConf.register_new_resolver("kanx.beta_sweep", _beta_sweep_or_fail, replace=True)
    hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")(run)()


if __name__ == "__main__":
    main()
