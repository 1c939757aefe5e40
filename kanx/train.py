"""`python -m kanx.train`: train one run, or a whole sweep with -m.

    python -m kanx.train                                   # sin(x + y^2), baseline, one run
    python -m kanx.train +condition=EFX dataset=concrete -m  # 7 betas x 10 seeds, packed
    kanx-train +condition=EFX dataset=concrete -m            # the same, as the installed console script

Hydra composes conf/config.yaml (kanx.confdir: the checkout's conf/, or the installed kanx.conf), the dataset (the paper's hyperparameters) and the
condition; `-m` sweeps hydra.sweeper.params (beta list, seeds 0-9) through the launcher
(`launcher=packed` by default, `basic`, or `slurm`). This module only converts config and
hands the jobs to kanx.runner; everything else is plain functions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from kanx.confdir import conf_dir
from kanx.config import register_resolvers
from kanx.errors import ConfigError


def run(cfg: DictConfig) -> dict | None:
    """Hydra task function: one job, in its own output directory."""
    from kanx.runner import run_jobs

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        record = run_jobs([(cfg, run_dir)])[0]
    except ConfigError as e:
        discard_if_empty(run_dir, cfg.get("results_root"))
        fail(e)
    if record and record.get("status") == "failed":
        fail(f"the run failed; {run_dir / 'record.json'} holds the error", code=1)
    return record


def fail(error: Exception | str, code: int = 2) -> None:
    """Stop with one line on stderr: exit 2 for bad input (nothing trained), 1 for runs that
    failed (their records say why)."""
    print(f"kanx: error: {error}", file=sys.stderr)
    sys.exit(code)


# What Hydra writes into a job or sweep folder before kanx sees the config: a folder that
# holds nothing else was made by a command that stopped on bad input.
_HYDRA_FILES = frozenset({".hydra", "multirun.yaml", "train.log"})


def discard_if_empty(folder: Path, results_root=None) -> None:
    """Remove a folder that holds only Hydra's files, then its parents left empty, up to
    (not including) results_root: a rejected override leaves no folder named after it."""
    import shutil

    folder = Path(folder)
    if not folder.is_dir() or not {p.name for p in folder.iterdir()} <= _HYDRA_FILES:
        return
    shutil.rmtree(folder, ignore_errors=True)
    root = Path(str(results_root)).resolve() if results_root is not None else None
    for parent in folder.resolve().parents:
        if root is None or parent == root or root not in parent.parents or any(parent.iterdir()):
            break
        parent.rmdir()


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
