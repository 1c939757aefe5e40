"""One launch recipe (issue #49): prepare -> pending -> resume -> pack -> check -> manifest is
written once, in kanx.jobs.launch, and every launcher calls it instead of repeating its steps.
Read from the source (ast), so it runs in the fast tier."""

from __future__ import annotations

import ast

from helpers import ROOT, TOY

SOURCES = [p for d in ("kanx", "hydra_plugins", "scripts") for p in sorted((ROOT / d).rglob("*.py"))]


def _calls(tree: ast.AST, name: str, scope: str = ""):
    """The qualified names of the functions (module level: '') that call ``name``, once per call."""
    for node in ast.iter_child_nodes(tree):
        inner = f"{scope}.{node.name}".lstrip(".") if isinstance(node, ast.FunctionDef | ast.ClassDef) else scope
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name):
                yield scope
        yield from _calls(node, name, inner)


def callers(name: str) -> list[str]:
    """'path:function' for every call of ``name`` in kanx, hydra_plugins and scripts."""
    return sorted(f"{p.relative_to(ROOT)}:{scope}" for p in SOURCES for scope in _calls(ast.parse(p.read_text()), name))


def test_the_launch_steps_are_called_only_by_launch():
    assert callers("prepare_jobs") == ["kanx/jobs.py:launch"]
    assert callers("pending") == ["kanx/jobs.py:launch"]
    assert callers("resume") == ["kanx/jobs.py:launch"]
    assert callers("check_machine") == ["kanx/jobs.py:launch"]
    # the benchmark packs one launch's jobs each way it compares; nothing else cuts packs
    assert callers("make_packs") == ["kanx/jobs.py:launch"] + ["scripts/benchmarks/bench_paper.py:main"] * 2
    # the manifest step: in launch, or where a launcher that checks early writes its files (LaunchPlan's)
    assert callers("write_manifests") == [
        "hydra_plugins/kanx_launcher/slurm_launcher.py:SlurmLauncher.launch",
        "hydra_plugins/kanx_launcher/slurm_launcher.py:SlurmLauncher.submit_sweeps",
        "kanx/jobs.py:LaunchPlan.write_manifests", "kanx/jobs.py:launch", "kanx/runner.py:run_jobs"]


def test_every_launcher_calls_launch():
    assert callers("launch") == sorted([
        # the SLURM launcher, and reproduce --launcher slurm
        "hydra_plugins/kanx_launcher/slurm_launcher.py:SlurmLauncher._plan",
        # Hydra's Launcher.launch, not kanx.jobs.launch
        "hydra_plugins/kanx_launcher/sweeper.py:KanxSweeper.sweep",
        # the manifests of Hydra's basic launcher's jobs, before the first of them starts
        "hydra_plugins/kanx_launcher/sweeper.py:write_manifests_of",
        "kanx/plan.py:main",  # a kanx.plan worker
        "kanx/plan.py:one_pack",  # the benchmarks' one mixed pack
        "kanx/plan.py:run_plan",  # kanx.plan, reproduce's default launcher
        # a single run, Hydra's basic launcher (reproduce --launcher basic) and the packed launcher
        "kanx/runner.py:check_jobs",
        "scripts/benchmarks/bench_paper.py:main",
    ])


def test_reproduce_on_slurm_holds_back_runs_still_queued(tmp_path, monkeypatch, capsys):
    """SlurmLauncher.submit_sweeps (reproduce --launcher slurm) through kanx.jobs.launch: a run whose
    last submission is still queued is neither submitted again nor counted as recorded; the
    others are packed, and every run is in the manifest."""
    import dataclasses

    from hydra_plugins.kanx_launcher import slurm_launcher as sl
    from kanx.manifest import read_manifest
    from kanx.plan import sweep_jobs

    tiny = [*TOY, "train.epochs=2", "train.warmup=1", "train.fc_warmup=1"]
    configs = sweep_jobs("sin_xy2", "E", [f"results_root={tmp_path}", "seed=0,1,2", "beta=0.1", *tiny])
    queued = configs[1][1]
    queued.mkdir(parents=True)
    (queued / sl.JOB_MARKER).write_text("7_1\n")
    monkeypatch.setattr(sl, "queued_ids", lambda: {"7_1"})
    monkeypatch.setattr(sl, "_check_tools", lambda: None)
    submitted: list = []
    monkeypatch.setattr(sl.SlurmLauncher, "_submit", lambda self, packs, sbatch: submitted.append(packs) or [])
    params = {k: v for k, v in dataclasses.asdict(sl.SlurmLauncherConf()).items() if k != "_target_"}
    launcher = sl.SlurmLauncher(**{**params, "wait": False, "submitit_folder": str(tmp_path / ".submitit")})

    assert launcher.submit_sweeps(configs, "all") == 0
    (packs,) = submitted
    assert [[j.run_dir for j in pack] for pack in packs] == [[configs[0][1], configs[2][1]]]
    assert "submitted or still queued" in capsys.readouterr().out
    assert len(read_manifest(configs[0][1].parent)["runs"]) == 3


def _params_for(overrides: list[str]) -> dict:
    """hydra.sweeper.params as the command line composes them with these plain overrides."""
    from hydra import compose

    from kanx.confdir import initialize_conf
    from kanx.resolvers import register_resolvers

    register_resolvers()
    with initialize_conf():
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
        return {str(k): str(v) for k, v in cfg.hydra.sweeper.params.items()}


def _betas_by(batches, key: str) -> dict:
    """{value of ``key`` in a job: the betas of its jobs}, from job_batches' batches."""
    out: dict = {}
    for job in (j for batch in batches for j in batch):
        d = dict(o.lstrip("+").split("=", 1) for o in job)
        out.setdefault(d[key], set()).add(float(d["beta"]))
    return out


def test_a_sweep_over_conditions_gives_each_condition_its_own_betas():
    """`+condition=baseline,EFX -m` sweeps EFX over the dataset's betas and Baseline at beta 0 only:
    the beta list is resolved per condition, not once for the config without the sweep (which is the
    Baseline's: every EFX job then trained at beta 0)."""
    from hydra_plugins.kanx_launcher.sweeper import job_batches

    args = ["+condition=baseline,EFX", "dataset.betas=[0.02,0.2]", "seed=0,1"]
    batches = job_batches(args, _params_for([]), _params_for, None)
    assert _betas_by(batches, "condition") == {"baseline": {0.0}, "EFX": {0.02, 0.2}}
    assert sum(map(len, batches)) == 2 + 4
    # the command line still wins over the parameters
    given = job_batches(["+condition=E,EFX", "beta=0.1", "seed=0"], _params_for([]), _params_for, None)
    assert _betas_by(given, "condition") == {"E": {0.1}, "EFX": {0.1}}


def test_a_sweep_over_datasets_gives_each_dataset_its_own_betas():
    from hydra_plugins.kanx_launcher.sweeper import job_batches
    from kanx.confdir import conf_dir

    def betas(dataset):
        import yaml

        return set(yaml.safe_load((conf_dir() / "dataset" / f"{dataset}.yaml").read_text())["dataset"]["betas"])

    args = ["+condition=EFX", "dataset=concrete,ikeda", "seed=0"]
    batches = job_batches(args, _params_for(["+condition=EFX"]), _params_for, 3)
    assert _betas_by(batches, "dataset") == {"concrete": betas("concrete"), "ikeda": betas("ikeda")}
    assert all(len(b) <= 3 for b in batches)
    # no swept condition or dataset: the parameters as Hydra resolved them, untouched
    plain = job_batches(["+condition=EFX", "seed=0,1"], {"beta": "0.5,0.7", "seed": "range(0,10)"}, None, None)
    assert _betas_by(plain, "condition") == {"EFX": {0.5, 0.7}}
