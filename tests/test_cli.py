"""The train entry point end to end: real sweeps through the CLI, records, skip and resume,
bad input, determinism. Runs on sin(x + y^2) at toy sizes."""

import json
import signal
import subprocess
import sys
import time

import pytest
from helpers import ROOT, TOY, cli, composed, records

from kanx.checks import resolve_device
from kanx.config import config_hash
from kanx.errors import ConfigError
from kanx.runner import run_jobs
from kanx.trainer import describe_device


def test_small_real_sweep_through_the_cli(tmp_path):
    args = [f"results_root={tmp_path}", "train.epochs=3", "train.warmup=1", "train.fc_warmup=1",
            "beta=0.0,0.1", "seed=0,1", *TOY, "-m"]
    for condition in ("E", "EFX"):
        cli(f"+condition={condition}", *args)
    recs = records(tmp_path)
    assert len(recs) == 8
    assert {(r["condition"], r["beta"], r["seed"]) for r in recs} == {
        (c, b, s) for c in ("E", "EFX") for b in (0.0, 0.1) for s in (0, 1)}
    for r in recs:
        assert r["status"] in ("ok", "collapsed") and r["schema_version"] == 1
        assert r["metrics"]["test_rmse"] > 0 and r["metrics"]["depth"] >= 0
        assert r["n_train"] == 128 and r["timing"]["steps"] == 12 and r["timing"]["pack_size"] == 4
        assert r["config"]["condition"]["name"] == r["condition"]
        assert r["timing"]["device"] == describe_device(resolve_device("auto"))
    # Typing the same command again trains nothing.
    stamps = {f: f.stat().st_mtime_ns for f in tmp_path.rglob("record.json")}
    p = cli("+condition=EFX", *args)
    assert "4 of 4 runs already have records" in p.stdout + p.stderr
    assert stamps == {f: f.stat().st_mtime_ns for f in tmp_path.rglob("record.json")}


@pytest.mark.slow
def test_a_sweep_over_conditions_leaves_no_folder_for_the_default_condition(tmp_path):
    """Hydra writes multirun.yaml into the primary config's sweep folder, which is Baseline's
    when +condition is swept: no run lands there, so no empty Baseline sweep is left."""
    cli("+condition=X,FX", f"results_root={tmp_path}", "train.epochs=2", "train.warmup=1",
        "train.fc_warmup=1", "beta=0.1", "seed=0", "hydra.launcher.group=all", *TOY, "-m")
    assert sorted(r["condition"] for r in records(tmp_path)) == ["FX", "X"]
    assert sorted(p.name for p in (tmp_path / "sin_xy2").iterdir()) == ["FX", "X"]


def test_baseline_and_f_sweep_seeds_only():
    assert composed("+condition=F", "dataset=concrete", hydra=True).hydra.sweeper.params.beta == "0.0"
    assert (composed("+condition=X", "dataset=concrete", hydra=True).hydra.sweeper.params.beta
            == "0.0,0.001,0.005,0.01,0.05,0.1,0.5")
    assert composed("dataset=ikeda", hydra=True).hydra.sweeper.params.beta == "0.0"  # no condition: the baseline
    assert composed("+condition=E", hydra=True).hydra.sweeper.params.seed == "range(0,10)"
    assert composed("+condition=EFX").condition.name == "EFX"


@pytest.mark.slow
def test_a_killed_sweep_resumes_with_one_valid_record_per_run(tmp_path):
    args = ["+condition=E", f"results_root={tmp_path}", "train.epochs=40", "train.warmup=1", "beta=0.0,0.1",
            "seed=0,1,2", "train.pack_size=1", *TOY, "-m"]
    proc = subprocess.Popen([sys.executable, "-m", "kanx.train", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and len(list(tmp_path.rglob("done"))) < 2:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    n_before = len(list(tmp_path.rglob("done")))
    assert 2 <= n_before < 6, "the kill should land mid-sweep"
    cli(*args)
    recs = records(tmp_path)
    assert len(recs) == 6 and len({(r["beta"], r["seed"]) for r in recs}) == 6
    assert all(r["status"] == "ok" for r in recs)
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.rglob("checkpoint.pt"))


@pytest.mark.slow
def test_resuming_from_a_checkpoint_gives_the_same_numbers(tmp_path):
    common = ["+condition=EFX", "train.epochs=30", "train.warmup=4", "train.fc_warmup=2", "train.checkpoint_every=2",
              "beta=0.05", "seed=3", *TOY]
    cli(*common, f"results_root={tmp_path / 'straight'}")
    proc = subprocess.Popen([sys.executable, "-m", "kanx.train", *common, f"results_root={tmp_path / 'killed'}"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    ckpts = []
    while time.time() < deadline and not ckpts and proc.poll() is None:
        ckpts = list((tmp_path / "killed").rglob("checkpoint.pt"))
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert ckpts, "no checkpoint appeared before the run ended"
    assert not list((tmp_path / "killed").rglob("done"))
    p = cli(*common, f"results_root={tmp_path / 'killed'}")
    assert "resuming 1 run(s) from epoch" in p.stdout + p.stderr
    a, b = records(tmp_path / "straight")[0], records(tmp_path / "killed")[0]
    assert a["metrics"] == b["metrics"]


def test_same_config_and_seed_give_identical_metrics(tmp_path):
    cfg = composed("+condition=EFX", "train.epochs=4", "train.warmup=1", "train.fc_warmup=1",
                   "beta=0.1", "seed=5", *TOY)
    a = run_jobs([(cfg, tmp_path / "a")])[0]
    b = run_jobs([(cfg, tmp_path / "b")])[0]
    assert a["metrics"] == b["metrics"] and a["config_hash"] == b["config_hash"]


def test_a_key_added_later_keeps_older_records_identity_at_its_neutral_value():
    from omegaconf import OmegaConf

    now = OmegaConf.to_container(composed("+condition=E"), resolve=True)
    before = json.loads(json.dumps(now))
    del before["model"]["grid_refit_rtol"]  # a record written before the key existed
    assert config_hash(now) == config_hash(before)
    now["model"]["grid_refit_rtol"] = 1e-4
    assert config_hash(now) != config_hash(before)


def test_a_different_config_in_the_same_folder_stops_with_a_message(tmp_path):
    run_jobs([(composed("train.epochs=2", "train.warmup=1", *TOY), tmp_path)])
    with pytest.raises(ConfigError, match="different config"):
        run_jobs([(composed("train.epochs=3", "train.warmup=1", *TOY), tmp_path)])
    rec = run_jobs([(composed("train.epochs=3", "train.warmup=1", "overwrite=true", *TOY), tmp_path)])[0]
    assert rec["config"]["train"]["epochs"] == 3


BAD = [
    (["beta=-0.1"], "beta=-0.1 must be >= 0"),
    (["train.epochs=10", "train.warmup=20"], "train.warmup=20 must be between 0 and train.epochs=10"),
    (["train.batch_size=0"], "train.batch_size=0 must be >= 1"),
    (["train.lr=0"], "train.lr=0.0 must be > 0"),
    (["model.grid_size=0"], "model.grid_size=0 must be >= 1"),
    (["model.spline_order=0"], "model.spline_order=0 must be >= 1"),
    (["model.width=[3,4,1]"], "starts with 3, but dataset 'sin_xy2' has 2 inputs"),
    (["model.width=[2,4,2]"], "ends with 2, but dataset 'sin_xy2' has 1 outputs"),
    (["dataset.name=nope"], "dataset='nope' is not one of"),
    (["condition.name=EFX"], "does not match its flags"),
    (["dataset=concrete", "dataset.data_dir=/nonexistent"], "/nonexistent"),
    (["model.grid_refit_rtol=0"], "model.grid_refit_rtol=0 must be null or a number between 0 and 1"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD)
def test_bad_input_fails_before_any_compute_and_leaves_no_record(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        run_jobs([(composed(*overrides), tmp_path / "run")])
    assert not (tmp_path / "run").exists()


def test_a_corrupt_data_file_fails_with_its_name(tmp_path):
    src = ROOT.parent / "shared" / "data" / "concrete.csv"
    if not src.exists():
        pytest.skip("../shared/data is not here")
    (tmp_path / "concrete.csv").write_text("\n".join(src.read_text().splitlines()[:100]))
    with pytest.raises(ConfigError, match="concrete.csv"):
        run_jobs([(composed("dataset=concrete", f"dataset.data_dir={tmp_path}"), tmp_path / "run")])
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["dataset=nope"], "Could not find 'dataset/nope'"),
    (["+condition=EXF"], "Could not find 'condition/EXF'"),
    (["train.epochs=-1"], "python -m kanx.train: error: train.epochs=-1 must be >= 1"),
    (["+condition=E", "seed=range(0,0)", "-m"], "python -m kanx.train: error: the sweep has no jobs"),
])
@pytest.mark.slow
def test_the_cli_reports_bad_input_in_one_line(tmp_path, args, message):
    p = cli(f"results_root={tmp_path}", *args, check=False)
    assert p.returncode != 0
    assert message in p.stderr
    assert not list(tmp_path.rglob("record.json"))


@pytest.mark.slow
def test_packed_and_unpacked_runs_give_the_same_metrics(tmp_path):
    args = ["+condition=EFX", "train.epochs=6", "train.warmup=2", "train.fc_warmup=1", "beta=0.0,0.2", "seed=0,1", *TOY]
    cli(*args, f"results_root={tmp_path / 'packed'}", "-m")
    cli(*args, f"results_root={tmp_path / 'basic'}", "launcher=basic", "-m")
    packed = {(r["beta"], r["seed"]): r for r in records(tmp_path / "packed")}
    basic = {(r["beta"], r["seed"]): r for r in records(tmp_path / "basic")}
    assert packed.keys() == basic.keys() and len(packed) == 4
    for key, p in packed.items():
        b = basic[key]
        assert p["timing"]["pack_size"] == 4 and b["timing"]["pack_size"] == 1
        for m in ("test_rmse", "train_rmse"):
            assert p["metrics"][m] == pytest.approx(b["metrics"][m], rel=1e-4), (key, m)
        for m in ("contributing_edges", "depth", "exit"):
            assert p["metrics"][m] == b["metrics"][m], (key, m)
