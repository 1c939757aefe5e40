"""From many sweeps to one list of jobs, so packs can be cut across sweeps.

`python -m kanx.train +condition=C dataset=D -m` composes one sweep. `make reproduce-tables`
runs 112 of them; trained sweep by sweep, the paper is 112 packs. Here every sweep of an
invocation is composed in this process with Hydra's compose API (once per sweep; the
members' beta and seed are set on copies, as the packing launcher does), giving the same
resolved configs and run directories as the command line would, and kanx.jobs.make_packs
then cuts packs across them (``group``). The jobs are trained by `run_plan`, in this
process or split over worker processes.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kanx import records
from kanx.confdir import initialize_conf
from kanx.jobs import assign, group_label, launch, shortest_first, starting
from kanx.resolvers import register_resolvers
from kanx.vocab import DEFAULT_GROUP, PAPER_CONDITIONS, PAPER_DATASETS

if TYPE_CHECKING:  # kanx.runner loads the trainer: imported when a plan trains, not when it composes
    from kanx.runner import Checkpointer

log = logging.getLogger("kanx")
# Keys that vary between the members of a pack: jobs that differ only in these share one
# composed config, copied and set per job (composing each job costs ~0.25 s).
MEMBER_KEYS = ("beta", "seed")


def split_members(parsed: Sequence) -> tuple[list, tuple[str, ...]]:
    """A job's parsed overrides as (member overrides, the other overrides' text): jobs with
    the same other overrides share one composed config."""
    member = [o for o in parsed if o.key_or_group in MEMBER_KEYS and o.package is None and not o.is_add()]
    return member, tuple(o.input_line for o in parsed if o not in member)


def with_members(cfg, member: Sequence):
    """A copy of a composed config with the member overrides' values set."""
    from omegaconf import open_dict

    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        for o in member:
            cfg[o.key_or_group] = o.value()
    return cfg


def sweep_jobs(dataset: str, condition: str, overrides: Sequence[str] = ()) -> list[tuple[object, Path]]:
    """(composed config, run directory) of every job of
    `python -m kanx.train +condition=CONDITION dataset=DATASET OVERRIDES -m`. Raises ConfigError
    for what Hydra cannot compose (a key the config lacks, an override it cannot parse)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from kanx.errors import ConfigError

    try:
        return _sweep_jobs(dataset, condition, overrides)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(f"+condition={condition} dataset={dataset}: {e}") from e


def _sweep_jobs(dataset: str, condition: str, overrides: Sequence[str]) -> list[tuple[object, Path]]:
    from hydra import compose
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    register_resolvers()
    parser = OverridesParser.create()
    base = [f"+condition={condition}", f"dataset={dataset}", *overrides]
    fixed = [o.input_line for o in parser.parse_overrides(base) if not o.is_sweep_override()]
    jobs = []
    with initialize_conf():
        primary = compose("config", overrides=fixed, return_hydra_config=True)
        given = {o.key_or_group for o in parser.parse_overrides(base)}
        params = [f"{k}={primary.hydra.sweeper.params[k]}" for k in primary.hydra.sweeper.params if k not in given]
        composed: dict = {}
        for batch in BasicSweeper.split_arguments(parser.parse_overrides(base + params), None):
            for job in batch:
                member, rest = split_members(parser.parse_overrides(job))
                if rest not in composed:
                    composed[rest] = _shared_part(compose("config", overrides=list(rest), return_hydra_config=True))
                config, sweep_dir, subdir = composed[rest]
                cfg = with_members(config, member)
                jobs.append((cfg, sweep_dir / _resolve_in(cfg, subdir)))
    return jobs


def sweeps_jobs(datasets: Sequence[str] = PAPER_DATASETS, conditions: Sequence[str] = PAPER_CONDITIONS,
                overrides: Sequence[str] | Callable[[str], Sequence[str]] = ()) -> list[tuple[object, Path]]:
    """(composed config, run directory) of every job of the (dataset, condition) sweeps, dataset
    by dataset: by default the paper's, as `make reproduce-tables` runs them (vocab.PAPER_DATASETS
    and PAPER_CONDITIONS, the betas and seeds of conf/). ``overrides``: for every sweep, or a
    function giving a dataset's."""
    return [job for d in datasets for c in conditions
            for job in sweep_jobs(d, c, overrides(d) if callable(overrides) else overrides)]


def one_pack(datasets: Sequence[str], conditions: Sequence[str], overrides: Sequence[str] = ()) -> list:
    """Every job of these sweeps as one mixed pack (group=all, no size bound): what the
    benchmarks time as the pack `make reproduce-tables` would train together."""
    configs = sweeps_jobs(datasets, conditions, overrides)
    return launch(configs, "all", len(configs), check=False, manifest=False).packs[0]


def _shared_part(full) -> tuple[object, Path, str]:
    """What the jobs of one composed config share, worked out once (copying the whole hydra
    node and resolving the run directory per job was half of composing the paper): the config
    with only ``hydra.launcher`` (resolved) left of its hydra node, the sweep directory (beta
    and seed, the member keys, are left out of its tag) and the run subdirectory's template."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf, open_dict

    HydraConfig.instance().set_config(full)  # resolves ${hydra:...} in the sweep directory
    sweep_dir = Path(str(full.hydra.sweep.dir))
    subdir = OmegaConf.to_container(full.hydra.sweep, resolve=False)["subdir"]
    launcher = OmegaConf.to_container(full.hydra.launcher, resolve=True)  # what --launcher slurm submits with
    config = OmegaConf.masked_copy(full, [k for k in full if k != "hydra"])
    with open_dict(config):
        config["hydra"] = {"launcher": launcher}
    return config, sweep_dir, subdir


def _resolve_in(cfg, template: str) -> str:
    """A template such as 'beta=${beta},seed=${seed}' resolved against a job's config."""
    from omegaconf import open_dict

    with open_dict(cfg):
        cfg["_kanx_subdir"] = template
        value = str(cfg["_kanx_subdir"])
        del cfg["_kanx_subdir"]
    return value


def run_plan(configs: Sequence[tuple[object, Path]], group: str = DEFAULT_GROUP, pack_size: int | None = None,
             workers: int = 1, plan_dir: Path | None = None) -> int:
    """Check every job, skip finished ones, cut packs across all of them and train them,
    in this process (workers = 1) or in ``workers`` processes of one thread each. Returns
    the number of packs that failed (their runs hold `failed` records)."""
    from kanx.runner import stop_on_signals, train_pack

    plan = launch(configs, group, pack_size)  # the manifests before any training: kanx.status counts what was launched
    jobs, todo, packs = plan.jobs, plan.todo, plan.packs
    print(f"plan: {len(jobs)} runs, {len(jobs) - len(todo)} already recorded; {len(todo)} to train in {len(packs)} "
          f"pack(s) (group={group_label(group, todo)})", flush=True)
    if not packs:
        return 0
    if workers <= 1:
        checkpointer = stop_on_signals()
        failed = 0
        for i, pack in enumerate(shortest_first(packs), 1):
            failed += _train_and_report(train_pack, pack, f"[{i}/{len(packs)}]", checkpointer)
        return failed
    plan_dir = Path(plan_dir or ".")
    plan_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    for w, mine in enumerate(assign(packs, workers)):
        path = plan_dir / f"plan-worker{w}.json"
        path.write_text(json.dumps([[{"config": j.container, "run_dir": str(j.run_dir)} for j in pack]
                                    for pack in mine]))
        env = os.environ | {"OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, "-m", "kanx.plan", str(path)], env=env))

    stopped: list[int] = []

    def forward(signum, frame):  # the workers checkpoint and stop; wait for them below
        stopped.append(signum)
        for p in procs:
            p.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    codes = [p.wait() for p in procs]
    if stopped:  # not a failure: the packs are checkpointed, a re-run resumes them
        print(f"plan: stopped by {signal.Signals(stopped[0]).name}; the workers "
              "checkpointed their packs; re-run to resume", file=sys.stderr, flush=True)
        raise SystemExit(128 + stopped[0])
    return sum(code != 0 for code in codes)


def _train_and_report(train_pack, pack, prefix: str, checkpointer: Checkpointer) -> int:
    print(starting(pack, prefix), flush=True)
    start = time.perf_counter()

    train_pack(pack, checkpointer)
    states = [records.read_state(j.run_dir) for j in pack]
    failed = sum(s.record is not None and s.record.get("status") == "failed" for s in states)
    names = (f"{'+'.join(dict.fromkeys(j.run.data.name for j in pack))}: "
             f"{','.join(dict.fromkeys(j.run.condition.name for j in pack))}")
    print(f"{prefix} pack of {len(pack)} ({names}) finished in {(time.perf_counter() - start) / 60:.1f} min"
          + (f"; {failed} failed" if failed else ""), flush=True)
    return int(failed > 0)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m kanx.plan PLAN.json`: train the packs a run_plan worker was given."""
    from kanx.errors import StorageError, error_line
    from kanx.runner import stop_on_signals, train_pack

    (path,) = argv if argv is not None else sys.argv[1:]
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    checkpointer = stop_on_signals()
    planned = json.loads(Path(path).read_text())
    failed = 0
    for i, pack in enumerate(planned, 1):
        # the pack as run_plan cut it: its unfinished runs, not packed again, nor manifests written twice
        todo = launch([(p["config"], Path(p["run_dir"])) for p in pack], pack=False, check=False, manifest=False).todo
        try:
            if todo:
                failed += _train_and_report(train_pack, todo, f"[{Path(path).stem} {i}/{len(planned)}]", checkpointer)
        except StorageError as e:
            print(error_line(f"{e}; this worker stopped"), file=sys.stderr, flush=True)
            return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
