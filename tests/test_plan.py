"""kanx.plan: sweeps composed in-process give the command line's configs and run directories,
and packs cut across sweeps train every run once, in one process or in workers."""

import json

import pytest
from helpers import TOY, cli, records

from kanx.jobs import assign, make_packs, pending, prepare_jobs, resume
from kanx.plan import run_plan, sweep_jobs

TINY = [*TOY, "train.epochs=2", "train.warmup=1", "train.fc_warmup=1", "seed=0,1"]


def test_sweep_jobs_are_the_command_lines_jobs(tmp_path):
    jobs = sweep_jobs("concrete", "EFX", [f"results_root={tmp_path}"])
    assert len(jobs) == 70
    assert {(float(c.beta), int(c.seed)) for c, _ in jobs} == {
        (b, s) for b in (0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5) for s in range(10)}
    cfg, run_dir = jobs[0]
    assert run_dir == tmp_path / "concrete" / "EFX" / "default" / f"beta={cfg.beta},seed={cfg.seed}"
    base = sweep_jobs("concrete", "baseline", [f"results_root={tmp_path}", "train.epochs=2", "seed=3,4"])
    assert [(c.beta, c.seed) for c, _ in base] == [(0.0, 3), (0.0, 4)]
    assert base[0][1] == tmp_path / "concrete" / "Baseline" / "train.epochs=2" / "beta=0.0,seed=3"


@pytest.mark.slow
def test_a_plan_across_sweeps_trains_what_the_cli_trains(tmp_path):
    cli("+condition=E", "beta=0.0,0.1", f"results_root={tmp_path / 'cli'}", *TINY, "-m")
    cli("+condition=X", "beta=0.0,0.1", f"results_root={tmp_path / 'cli'}", *TINY, "-m")
    configs = [j for c in ("E", "X") for j in sweep_jobs("sin_xy2", c,
                                                         [f"results_root={tmp_path / 'plan'}", "beta=0.0,0.1", *TINY])]
    assert len(make_packs(resume(pending(prepare_jobs(configs))), group="all")) == 1
    assert run_plan(configs, group="all", workers=2, plan_dir=tmp_path / "logs") == 0
    by_cli = {(r["condition"], r["beta"], r["seed"]): r for r in records(tmp_path / "cli")}
    by_plan = {(r["condition"], r["beta"], r["seed"]): r for r in records(tmp_path / "plan")}
    assert by_cli.keys() == by_plan.keys() and len(by_plan) == 8
    for key, r in by_plan.items():
        assert r["config_hash"] == by_cli[key]["config_hash"] and r["timing"]["pack_size"] == 8
        for metric, value in by_cli[key]["metrics"].items():
            assert r["metrics"][metric] == pytest.approx(value, rel=1e-5, abs=1e-6), (key, metric)
    worker_plans = [json.loads(p.read_text()) for p in sorted((tmp_path / "logs").glob("plan-worker*.json"))]
    assert sum(len(pack) for plan in worker_plans for pack in plan) == 8
    # Typing it again trains nothing.
    assert run_plan(sweep_jobs("sin_xy2", "E", [f"results_root={tmp_path / 'plan'}", "beta=0.0,0.1", *TINY]),
                    workers=2) == 0
    assert len(pending(prepare_jobs(configs))) == 0


class _Job:
    """What kanx.jobs.pack_cost reads of a job: epochs, batch size, n_train and the resume epoch."""

    def __init__(self, epochs: int, resume_epoch: int = 0):
        self.run = type("Run", (), {"train": type("T", (), {"epochs": epochs, "batch_size": 1})()})()
        self.n_train, self.resume_epoch = 1, resume_epoch


def test_assign_balances_the_longest_packs_first_and_runs_each_workers_shortest_first():
    packs = [[_Job(e)] for e in (100, 60, 50, 40, 10)]
    workers = assign(packs, 2)
    # Balanced longest first ({100, 40} and {60, 50, 10}), each worker then shortest first.
    assert [[p[0].run.train.epochs for p in w] for w in workers] == [[40, 100], [10, 50, 60]]


def test_a_resumed_pack_runs_before_a_new_one_of_its_worker():
    new, resumed = [_Job(1000)], [_Job(1000, resume_epoch=600)]
    assert assign([new, resumed], 1) == [[resumed, new]]


@pytest.mark.slow  # three 400-epoch trainings; tests/test_faults.py covers SIGTERM in-process in the fast suite
def test_sigterm_checkpoints_a_worker_and_the_rerun_resumes(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    import torch

    def configs(root):
        args = [f"results_root={root}", "beta=0.1", "seed=0", *TOY, "train.epochs=400", "train.warmup=1",
                "train.fc_warmup=1", "train.checkpoint_every=0", "train.log_every=10"]
        return sweep_jobs("sin_xy2", "EFX", args)

    jobs = pending(prepare_jobs(configs(tmp_path / "a")))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([[{"config": j.container, "run_dir": str(j.run_dir)} for j in jobs]]))
    worker = subprocess.Popen([sys.executable, "-m", "kanx.plan", str(plan)], stderr=subprocess.PIPE, text=True)
    curve = jobs[0].run_dir / "metrics.csv"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (curve.is_file() and len(curve.read_text().splitlines()) >= 2):
        # its first row (epoch 10): training is under way, with 390 epochs (over a second on any CPU) left
        time.sleep(0.05)
    worker.send_signal(signal.SIGTERM)
    _, err = worker.communicate(timeout=120)
    assert worker.returncode == 128 + signal.SIGTERM, err
    assert "SIGTERM: saved checkpoints of 1 run(s)" in err
    ckpt = torch.load(jobs[0].run_dir / "checkpoint.pt", weights_only=True)
    assert 10 <= ckpt["epoch"] < 400
    assert run_plan(configs(tmp_path / "a")) == 0  # resumes from the checkpoint
    assert run_plan(configs(tmp_path / "b")) == 0  # uninterrupted
    (a,), (b,) = records(tmp_path / "a"), records(tmp_path / "b")
    assert a["metrics"] == b["metrics"]


@pytest.mark.slow
def test_reproduce_takes_condition_names_in_either_spelling_and_refuses_others_in_one_line(capsys):
    import subprocess
    import sys

    from helpers import ROOT

    script = [sys.executable, "-m", "kanx.reproduce", "--dry-run", "--launcher", "basic", "--datasets", "nguyen_f1"]
    ok = subprocess.run([*script, "--conditions", "Baseline", "efx", "EFXI"], capture_output=True, text=True, cwd=ROOT)
    assert (ok.returncode == 0 and "+condition=baseline " in ok.stdout
            and "+condition=EFX " in ok.stdout), (ok.stdout + ok.stderr)
    assert "+condition=EFXI " in ok.stdout  # a factor set beyond the paper's eight (issue #38)
    bad = subprocess.run([*script, "--conditions", "EFZ"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--conditions: condition 'EFZ' has unknown factor(s) 'Z'" in bad.stderr
    assert "Traceback" not in bad.stderr
