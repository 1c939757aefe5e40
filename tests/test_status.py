"""`python -m kanx.status ROOT`: counts per sweep against the runs its manifest lists, and ETA."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import ROOT

from kanx.eta import eta_seconds
from kanx.manifest import write_manifests
from kanx.records import seal, write_record
from kanx.status import collect, main


def write_run(folder: Path, status: str | None = "ok", config: dict | None = None, epoch: int | None = None,
              lock: bool = False, steps_per_s: float = 50.0, n_train: int = 100, **fields) -> Path:
    """A run folder by hand: a finished record (status), a checkpoint at ``epoch``, a lock."""
    folder.mkdir(parents=True, exist_ok=True)
    if status is not None:
        record = {"schema_version": 1, "dataset": "concrete", "condition": "E", "status": status, "n_train": n_train,
                  "metrics": {}, "timing": {"steps_per_s": steps_per_s, "pack_size": 4},
                  "config": config or {}, **fields}
        (folder / "record.json").write_text(json.dumps(record))
        seal(folder)
    if epoch is not None:
        torch.save({"config_hash": "x", "epoch": epoch, "state": {}}, folder / "checkpoint.pt")
    if lock:
        (folder / "lock").write_text("")
    return folder


def config(condition: str, edge_gates: bool, betas=(0.0, 0.1), epochs: int = 100) -> dict:
    return {"condition": {"name": condition, "edge_gates": edge_gates, "forward": False, "exits": False},
            "dataset": {"name": "concrete", "betas": list(betas)},
            "train": {"epochs": epochs, "batch_size": 10, "pack_size": 70}}


def test_counts_against_the_manifest_and_eta_from_the_records(tmp_path, capsys):
    from test_status_launched import job

    sweep = tmp_path / "concrete" / "E" / "default"
    write_manifests([job(sweep, beta, seed) for beta in (0.0, 0.1) for seed in range(10)])  # what was launched
    cfg = config("E", True)
    write_run(sweep / "beta=0.0,seed=0", "ok", cfg, beta=0.0, seed=0)
    write_run(sweep / "beta=0.0,seed=1", "collapsed", cfg, beta=0.0, seed=1)
    write_run(sweep / "beta=0.1,seed=0", "diverged", cfg, beta=0.1, seed=0)
    write_run(sweep / "beta=0.1,seed=1", "failed", cfg, beta=0.1, seed=1, timing=None)
    write_run(sweep / "beta=0.1,seed=2", None, epoch=50)  # checkpointed, no record yet
    write_run(sweep / "beta=0.1,seed=3", None, epoch=70, lock=True)  # running
    write_run(sweep / "beta=0.1,seed=4", None)  # a folder with nothing in it yet: missing
    # Baseline: seeds only, at beta 0; launched before manifests, so it expects the runs on disk
    base = tmp_path / "concrete" / "Baseline" / "default"
    for seed in range(10):
        write_run(base / f"beta=0.0,seed={seed}", "ok", config("Baseline", False), beta=0.0,
                  seed=seed, condition="Baseline")

    sweeps = {s.path: s for s in collect(tmp_path)}
    assert list(sweeps) == ["concrete/Baseline/default", "concrete/E/default"]  # registry order
    assert (sweeps["concrete/Baseline/default"].counts["ok"] == 10
            and len(sweeps["concrete/Baseline/default"].runs) == 10)
    assert sweeps["concrete/Baseline/default"].expected_from == "runs on disk"
    e = sweeps["concrete/E/default"]
    assert e.expected_from == "manifest" and len(e.runs) == 20  # betas (0, 0.1) x seeds 0-9, as launched
    assert e.counts == {"ok": 1, "collapsed": 1, "diverged": 1, "failed": 1, "running": 1, "corrupt": 0,
                        "checkpointed": 1, "bad checkpoint": 0, "missing": 14}
    assert [r.epoch for r in e.runs if r.state in ("checkpointed", "running")] == [50, 70]
    # Left: failed + 14 missing from epoch 0 (one pack of 15), one from 50, one from 70; 10 batches an epoch,
    # at the median recorded rate of 50 pack steps/s.
    assert e.eta_s == pytest.approx((100 * 10 + 50 * 10 + 30 * 10) / 50.0)
    assert sweeps["concrete/Baseline/default"].eta_s == 0

    assert main([str(tmp_path), "--runs"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("concrete/E/default"))
    assert line.split() == ["concrete/E/default", "20", "1", "1", "1", "1", "1@70", "1@50", "14", "36s", "manifest"]
    assert "  beta=0.1 seed=2: checkpointed at epoch 50" in out and "  beta=0.1 seed=1: failed" in out
    assert "  beta=0 seed=2: missing" in out
    assert "runs on disk: 1 of 2 sweeps have no manifest.json" in out  # Baseline's, in one line


def test_eta_packs_runs_by_their_start_epoch():
    from kanx.status import Run

    runs = [Run(0.0, s, "missing") for s in range(5)] + [Run(0.1, 0, "checkpointed", 40), Run(0.1, 1, "ok")]
    # 5 runs: 3 packs of <= 2
    assert eta_seconds(runs, (100, 3, 2), 10.0) == pytest.approx((3 * 100 * 3 + 60 * 3) / 10.0)
    assert eta_seconds(runs, (100, 3, 2), None) is None
    assert eta_seconds([Run(0.0, 0, "ok")], None, None) == 0.0


def test_a_running_sweep_without_records_has_an_eta_from_its_own_stretch(tmp_path):
    """Before any record, the running process's pace (its checkpoints' last stretch: epochs and
    training seconds) gives the ETA; a stopped run's stretch (another device, maybe) does not."""
    from kanx.eta import running_rate
    from kanx.status import Run, read_checkpoint

    def stretch_checkpoint(folder, epochs, seconds, lock):
        write_run(folder, None, lock=lock)
        history = [{"device": "cuda (H100)", "git_commit": "a", "epochs": [0, epochs[0]]},  # older stretch: no seconds
                   {"device": "cpu", "git_commit": "b", "epochs": list(epochs), "train_s": seconds}]
        torch.save({"config_hash": "x", "epoch": epochs[1], "history": history, "state": {}}, folder / "checkpoint.pt")

    stretch_checkpoint(tmp_path / "a", (200, 300), 20.0, lock=True)
    stretch_checkpoint(tmp_path / "b", (200, 300), 1.0, lock=False)
    assert read_checkpoint(tmp_path / "a") == (300, (100, 20.0), None)
    runs = [Run(0.0, 0, "running", 300, tmp_path / "a", (100, 20.0)),
            Run(0.0, 1, "checkpointed", 300, tmp_path / "b", (100, 1.0)), Run(0.0, 2, "missing")]
    rate = running_rate(runs, (1000, 10, 70))  # 100 epochs x 10 batches in 20 s
    assert rate == pytest.approx(50.0)
    assert eta_seconds(runs, (1000, 10, 70), rate) == pytest.approx((700 * 10 + 1000 * 10) / 50.0)
    assert running_rate([Run(0.0, 1, "checkpointed", 300, None, (100, 1.0))], (1000, 10, 70)) is None
    write_run(tmp_path / "c", None, epoch=5, lock=True)  # a checkpoint from before stretches had seconds
    assert read_checkpoint(tmp_path / "c") == (5, None, None)


@pytest.mark.slow
def test_a_real_sweep_expected_from_its_manifest(tmp_path):
    """A tiny sweep through the CLI (seed=0,1,2 of beta 0, 0.1: 6 runs), then one run failed,
    one deleted, one turned into a checkpoint and one locked. The override
    dataset.standardize_targets=false is written by Hydra as ...=False in the jobs' folder,
    which holds the manifest, while multirun.yaml lands in the ...=false folder: no sweep there."""
    args = ["+condition=E", f"results_root={tmp_path}", "beta=0.0,0.1", "seed=0,1,2",
            "train.epochs=2", "train.warmup=1",
            "dataset.n_train=64", "dataset.n_test=32", "train.batch_size=32", "train.compile=false",
            "dataset.standardize_targets=false", "-m"]
    done = subprocess.run([sys.executable, "-m", "kanx.train", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=os.environ | {"PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    tag = ("dataset.n_test=32,dataset.n_train=64,dataset.standardize_targets=False,train.batch_size=32,"
           "train.compile=False,train.epochs=2,train.warmup=1")
    sweep = tmp_path / "sin_xy2" / "E" / tag.replace(",train.compile=False", "")
    assert len(list(sweep.glob("*/done"))) == 6, sorted(p.name for p in (tmp_path / "sin_xy2" / "E").iterdir())

    record = json.loads((sweep / "beta=0.1,seed=1" / "record.json").read_text())
    write_record(sweep / "beta=0.1,seed=1", {**record, "status": "failed"})
    shutil.rmtree(sweep / "beta=0.1,seed=2")
    for name in ("record.json", "done", "model.pt"):
        (sweep / "beta=0.0,seed=2" / name).unlink()
    torch.save({"config_hash": record["config_hash"], "epoch": 1, "state": {}},
               sweep / "beta=0.0,seed=2" / "checkpoint.pt")
    for name in ("record.json", "done", "model.pt"):
        (sweep / "beta=0.0,seed=1" / name).unlink()
    (sweep / "beta=0.0,seed=1" / "lock").write_text("")  # a run that holds its lock, before its first checkpoint

    sweeps = collect(tmp_path)
    assert [s.path for s in sweeps] == [sweep.relative_to(tmp_path).as_posix()]  # not the yaml-only ...=false folder
    s = sweeps[0]
    assert (s.dataset, s.condition, s.expected_from) == ("sin_xy2", "E", "manifest")
    assert s.counts == {"ok": 2, "collapsed": 0, "diverged": 0, "failed": 1, "running": 1, "corrupt": 0,
                        "checkpointed": 1, "bad checkpoint": 0, "missing": 1}
    assert s.eta_s is not None and s.eta_s > 0  # from the records' own step rate


def test_a_mixed_pack_before_any_record_has_an_eta_and_counts_once_in_the_total(tmp_path, monkeypatch):
    """A pack spanning two sweeps (E and Baseline), stopped at its epoch-6 checkpoint: its
    sweeps have no record and no multirun.yaml, only the manifest of what was launched, and the
    pack's time left comes from the checkpoints' pack facts; while it runs (lock held) each
    sweep's ETA is the pack's time left, and the total counts the pack once, not once per
    sweep."""
    from helpers import TOY, run_until_interrupted

    from kanx.eta import total_eta
    from kanx.plan import sweep_jobs

    args = [f"results_root={tmp_path}", "seed=0", "train.epochs=20", "train.warmup=4", "train.fc_warmup=2", *TOY]
    configs = (sweep_jobs("sin_xy2", "E", [*args, "beta=0.0,0.1"])
               + sweep_jobs("sin_xy2", "baseline", [*args, "beta=0.0"]))
    run_until_interrupted(configs, 8, monkeypatch, group="all")
    for _, run_dir in configs:
        assert (run_dir / "checkpoint.pt").exists() and not (run_dir / "record.json").exists()
        (run_dir / "lock").write_text("")  # as while the pack trains on

    sweeps = collect(tmp_path)
    assert sorted(s.condition for s in sweeps) == ["Baseline", "E"]
    batches = 128 // 32
    for s in sweeps:
        assert s.counts["running"] == len(s.runs) and s.expected_from == "manifest"
        assert s.eta_s is not None and s.eta_s > 0
        # the pack's own pace: 6 epochs in its stretch's seconds
        rate = (6 * batches) / next(r.stretch[1] for r in s.runs)
        assert s.eta_s == pytest.approx((20 - 6) * batches / rate, rel=1e-6)
    assert total_eta(sweeps) == pytest.approx(max(s.eta_s for s in sweeps), rel=1e-6)  # one pack, counted once
    assert total_eta(sweeps) < sum(s.eta_s for s in sweeps)


def test_a_running_run_before_its_first_checkpoint_has_an_eta_from_its_live_curve(tmp_path):
    """A run that holds its lock and has no checkpoint yet, nor any record in its sweep: the ETA
    comes from its live metrics.csv (the last row's epoch and elapsed_s, a row cut mid-append
    left out), at the manifest's protocol, instead of "?"; shown as running at that epoch."""
    from helpers import TOY

    from kanx.eta import duration
    from kanx.jobs import launch
    from kanx.plan import sweep_jobs
    from kanx.status import format_table

    configs = sweep_jobs("sin_xy2", "E", [f"results_root={tmp_path}", "seed=0", "beta=0.1", "train.epochs=100",
                                                   "train.warmup=4", *TOY])
    launch(configs, manifest=False).write_manifests()
    run_dir = configs[0][1]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "lock").write_text("")
    (run_dir / "metrics.csv").write_text("epoch,loss,elapsed_s\n10,0.5,2.0\n20,0.4,4.0\n30,0.3,6")  # 30: cut
    (sweep,) = collect(tmp_path)
    (run,) = sweep.runs
    assert (run.state, run.epoch, run.stretch) == ("running", 20, (20, 4.0))
    assert sweep.eta_s == pytest.approx((100 - 20) * 4.0 / 20)  # 80 epochs left at 5 epochs/s
    assert duration(sweep.eta_s) in format_table([sweep]) and "1@20" in format_table([sweep])
    (run_dir / "metrics.csv").write_text("epoch,loss,elapsed_s\n")  # no row yet: no pace to go by
    assert collect(tmp_path)[0].eta_s is None
