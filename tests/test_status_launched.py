"""kanx.status counts what was launched (issue #37): every launch path lists its runs in the
sweep folder's manifest.json before training, so a single run expects 1 and a smoke pipeline
the runs it launched; the table and --json say the same; a closed pipe is no error."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import ROOT, TOY, cli

from kanx.manifest import read_manifest, write_manifests
from kanx.status import collect, format_table, main

QUICK = ["train.epochs=2", "train.warmup=1", "train.fc_warmup=1", *TOY]


def status_json(root: Path, capsys) -> list[dict]:
    assert main([str(root), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def totals(sweeps: list[dict]) -> dict:
    return {k: sum(s[k] for s in sweeps) for k in ("expected", "ok", "collapsed", "missing", "failed")}


@pytest.mark.slow
def test_status_after_a_single_run_expects_one_and_finds_it_ok(tmp_path, capsys):
    cli(f"results_root={tmp_path}", *QUICK)
    (sweep,) = status_json(tmp_path, capsys)
    assert (sweep["expected"], sweep["ok"], sweep["missing"], sweep["expected_from"]) == (1, 1, 0, "manifest")


@pytest.mark.slow
def test_status_after_a_packed_sweep_over_conditions_expects_what_was_launched(tmp_path, capsys):
    """Swept over +condition, the sweep's multirun.yaml says nothing about either folder: the
    manifests do (before them: 10 seeds x the dataset's betas each)."""
    cli("+condition=X,FX", f"results_root={tmp_path}", "beta=0.0,0.1", "seed=0,1", "hydra.launcher.group=all", *QUICK,
        "-m")
    sweeps = status_json(tmp_path, capsys)
    assert sorted(s["condition"] for s in sweeps) == ["FX", "X"]
    assert all((s["expected"], s["ok"] + s["collapsed"], s["missing"]) == (4, 4, 0) for s in sweeps), sweeps


@pytest.mark.slow
def test_the_smoke_pipeline_expects_what_it_launched_and_misses_nothing(tmp_path, capsys):
    """`make reproduce-tables SCALE=smoke DATASETS=nguyen_f1` (two of its conditions): 2 seeds,
    not the 10 a record's config sweeps, and no multirun.yaml."""
    p = subprocess.run([sys.executable, "-m", "kanx.reproduce", "--scale", "smoke", "--datasets", "nguyen_f1",
                        "--conditions", "E", "F",
                        "--results", str(tmp_path), "--no-analysis"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env=os.environ | {"PYTHONUNBUFFERED": "1"})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    launched = int(p.stdout.split("plan: ", 1)[1].split(" runs", 1)[0])
    sweeps = status_json(tmp_path, capsys)
    # E: 4 betas x 2 seeds; F: beta 0 x 2 seeds
    assert {s["condition"]: s["expected"] for s in sweeps} == {"E": 8, "F": 2}
    assert totals(sweeps)["expected"] == launched == 10 and totals(sweeps)["missing"] == 0
    assert {s["expected_from"] for s in sweeps} == {"manifest"}


@pytest.mark.slow
def test_the_table_and_json_give_the_same_counts(tmp_path, capsys):
    cli("+condition=E", f"results_root={tmp_path}", "beta=0.0,0.1", "seed=0,1", *QUICK, "-m")
    run = next(tmp_path.rglob("beta=0.1,seed=1"))
    for name in ("record.json", "done", "model.pt"):
        (run / name).unlink()  # one run left: missing
    sweeps = status_json(tmp_path, capsys)
    table = format_table(collect(tmp_path)).splitlines()
    header, row = table[0].split(), table[1].split()
    counts = header[1 : header.index("ETA")]  # expected, ok, ..., missing: one word each in this table
    assert row[0] == sweeps[0]["sweep"] and row[-1] == sweeps[0]["expected_from"]
    assert dict(zip(counts, row[1 : len(counts) + 1], strict=True)) == {k: str(sweeps[0][k]) for k in counts}
    assert (sweeps[0]["expected"], sweeps[0]["missing"]) == (4, 1)


@pytest.mark.slow
def test_a_reader_that_closes_the_pipe_early_gets_no_traceback(tmp_path):
    """`kanx-status --json | head -1`: the reader's end is closed before status writes."""
    cli(f"results_root={tmp_path}", *QUICK)
    p = subprocess.Popen([sys.executable, "-m", "kanx.status", str(tmp_path), "--json"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0 and "Traceback" not in err and "BrokenPipe" not in err, err
    shell = subprocess.run(f"{sys.executable} -m kanx.status {ROOT / 'results' / 'paper'} --json | head -1", shell=True,
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert shell.stdout == "[\n" and shell.stderr == "", shell.stderr


# ---------------------------------------------------------------- the manifest itself


def job(folder: Path, beta: float, seed: int, config_hash: str = "h") -> SimpleNamespace:
    """What write_manifests reads of a kanx.jobs.Job."""
    run = SimpleNamespace(beta=beta, seed=seed, data=SimpleNamespace(name="concrete"),
                          condition=SimpleNamespace(name="E"),
                          train=SimpleNamespace(epochs=100, batch_size=10, pack_size=70))
    return SimpleNamespace(run=run, run_dir=folder / f"beta={beta},seed={seed}", config_hash=config_hash,
                           container={"dataset": {"n_train": 95}})


def test_a_second_launch_adds_its_runs_and_the_same_launch_again_changes_nothing(tmp_path):
    sweep = tmp_path / "concrete" / "E" / "default"
    assert write_manifests([job(sweep, 0.1, 0), job(sweep, 0.1, 1)]) == [sweep / "manifest.json"]
    assert write_manifests([job(sweep, 0.1, 2)]) == [sweep / "manifest.json"]
    before = (sweep / "manifest.json").read_bytes()
    assert write_manifests([job(sweep, 0.1, 1)]) == []  # nothing new (a SLURM task of a submitted sweep)
    assert (sweep / "manifest.json").read_bytes() == before
    manifest = read_manifest(sweep)
    assert sorted(manifest["runs"]) == ["beta=0.1,seed=0", "beta=0.1,seed=1", "beta=0.1,seed=2"]
    assert manifest["protocol"] == {"epochs": 100, "batches": 10, "pack_size": 70} and len(manifest["launches"]) == 2
    (s,) = collect(tmp_path)
    assert (len(s.runs), s.counts["missing"], s.expected_from, s.dataset,
            s.condition) == (3, 3, "manifest", "concrete", "E")
    assert s.eta_s is None  # no step rate yet, but the protocol is known


@pytest.mark.committed
def test_a_results_root_without_manifests_expects_the_runs_on_disk_and_says_so_in_one_line(tmp_path, capsys):
    """Nothing says what was launched into a folder without a manifest (or with a damaged one):
    the status guesses no grid (a record's beta list x seeds 0-9 was one, 70 runs expected where
    10 were launched), it counts the runs on disk and says so."""
    sweep = tmp_path / "concrete" / "E" / "default"
    sweep.mkdir(parents=True)
    (sweep / "manifest.json").write_text("{not json")
    assert read_manifest(sweep) is None
    (s,) = collect(tmp_path)
    assert len(s.runs) == 0 and s.expected_from == "runs on disk"
    paper = ROOT / "results" / "paper" / "nguyen_f1"  # committed without manifests
    sweeps = collect(paper)
    assert sweeps and {s.expected_from for s in sweeps} == {"runs on disk"}
    # finished runs only: none missing
    assert all(len(s.runs) == s.counts["ok"] + s.counts["collapsed"] > 0 for s in sweeps)
    assert main([str(paper)]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("runs on disk:")]
    assert notes == [f"runs on disk: {len(sweeps)} of {len(sweeps)} sweeps have no manifest.json kanx can read "
                     "(launched before kanx listed its launches, or damaged): nothing says what was launched there, "
                     "so they expect only the run folders on disk"]


@pytest.mark.slow
def test_a_basic_sweep_lists_every_job_before_the_first_starts(tmp_path, capsys):
    """launcher=basic runs one job at a time: its sweeper writes the manifest of the whole sweep
    first (one launch of 4 runs, not one per job as each started), so the status expects the
    sweep's runs from its first job on."""
    cli("+condition=E", f"results_root={tmp_path}", "beta=0.0,0.1", "seed=0,1", "launcher=basic", *QUICK, "-m")
    (manifest,) = (read_manifest(p.parent) for p in tmp_path.rglob("manifest.json"))
    assert len(manifest["runs"]) == 4 and [launch["runs"] for launch in manifest["launches"]] == [4]
    (sweep,) = status_json(tmp_path, capsys)
    assert (sweep["expected"], sweep["ok"] + sweep["collapsed"], sweep["expected_from"]) == (4, 4, "manifest")


@pytest.mark.parametrize(("argv0", "usage"), [("/venv/bin/kanx-status", "usage: kanx-status"),
                                              ("/src/kanx/status.py", "usage: python -m kanx.status")])
def test_the_status_usage_line_names_the_command_as_typed(monkeypatch, capsys, argv0, usage):
    monkeypatch.setattr(sys, "argv", [argv0, "--help"])
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith(usage)
    description = out.split("\n\n")[1]
    assert description.rstrip().endswith("how long the rest will take."), description  # not cut mid-sentence
