"""Faults the readers of finished runs must survive (issue #34, "Nothing finished is ever lost or
replaced by accident"): the analysis, kanx.load_run(...).history and kanx.status.

- A cell of the analysis pools only records of one config: a record of another config in a
  sweep's folder, or two sweeps of different epochs in one results root, are not averaged; the
  cell keeps the config that covers the most seeds and the rest is named on stdout and in
  report.md with what differs.
- A training curve (metrics.csv) is covered by its run's done marker; a damaged one is skipped by
  `analyze --curves` and listed, and `.history` raises one error naming the file, never a raw
  pandas or codec error. The run's record still counts.
- kanx.status shows a record it does not trust as `corrupt` and a checkpoint it cannot load as
  `bad checkpoint`, and `--runs` says why, instead of `missing` and `checkpointed`.

Records are written by hand (no training): each test builds the few files it needs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import ROOT

from kanx import records
from kanx.analyze import load_runs, seed_medians
from kanx.analyze.__main__ import main as analyze
from kanx.records import integrity_problem, write_record
from kanx.status import collect
from kanx.status import main as status
from kanx.vocab import DONE, METRICS

CURVE = "epoch,loss,data_loss,lc,beta,open_gates,exit,lr,elapsed_s\n" + "".join(
    f"{e},{1 / e:.4f},{1 / e:.4f},3.0,{0.01 if e > 2 else 0.0},7,2,0.001,{e / 10}\n" for e in range(1, 11))


def record(seed: int, epochs: int = 4000, rmse: float = 5.0, beta: float = 0.01, condition: str = "E",
           **config_changes) -> dict:
    """A finished record of Concrete as the runner writes it, its config included (the keys that
    matter here; ``config_changes``: dotted keys set in the config)."""
    config = {"beta": beta, "seed": seed, "device": "cpu", "overwrite": False, "results_root": "outputs",
              "condition": {"name": condition, "edge_gates": True, "forward": False, "exits": False},
              "train": {"epochs": epochs, "batch_size": 10, "pack_size": 70, "compile": True},
              "dataset": {"name": "concrete", "n_train": 100, "data_dir": "/data", "betas": [0.0, beta]}}
    for dotted, value in config_changes.items():
        node, *path, key = [config, *dotted.split("__")]
        for part in path:
            node = node[part]
        node[key] = value
    return {"schema_version": 1, "dataset": "concrete", "family": "concrete", "condition": condition,
            "beta": beta, "seed": seed,
            "status": "ok", "n_train": 100, "metrics": {"test_rmse": rmse, "contributing_edges": 40, "depth": 2},
            "timing": {"steps_per_s": 50.0}, "git_commit": "abc", "config": config}


def write_run(root: Path, rel: str, rec: dict, marker_ns: int | None = None, curve: str | bytes | None = None) -> Path:
    """A run folder as a finished run leaves it (record, curve, then the done marker with their
    checksums), its marker dated ``marker_ns`` (which record is newest)."""
    folder = root / rel
    folder.mkdir(parents=True, exist_ok=True)
    if curve is not None:
        (folder / METRICS).write_bytes(curve.encode() if isinstance(curve, str) else curve)
    write_record(folder, rec)
    if marker_ns is not None:
        os.utime(folder / DONE, ns=(marker_ns, marker_ns))
    return folder


def cell(runs) -> dict:
    medians = seed_medians(runs, complete=False)
    row = medians[(medians["condition"] == "E") & (medians["beta"] == 0.01)].iloc[0]
    return {"n_total": int(row["n_total"]), "rmse": float(row["rmse_median"])}


# --- cause 1: one config per cell ----------------------------------------------------------


def test_a_record_of_another_config_in_a_sweep_folder_is_left_out_and_reported(tmp_path, capsys):
    root, out = tmp_path / "results", tmp_path / "out"
    for seed in range(3):
        write_run(root, f"concrete/E/default/beta=0.01,seed={seed}", record(seed))
    # copied in from a smoke test
    write_run(root, "concrete/E/default/beta=0.01,seed=3", record(3, epochs=2, rmse=50.0))
    assert analyze([str(root), "--out", str(out), "--formats", "png"]) == 0
    stdout = capsys.readouterr().out

    assert cell(load_runs(root)) == {"n_total": 3, "rmse": 5.0}
    assert "warning: 1 cell holds records of more than one config" in stdout, stdout
    assert "train.epochs 4000 vs 2" in stdout and "concrete/E/default/beta=0.01,seed=3" in stdout
    report = (out / "report.md").read_text()
    assert "**Records of another config** (1 record in 1 cell," in report
    assert ("Concrete, E, β = 0.01: train.epochs 4000 vs 2; kept 3 (in `concrete/E/default/`), left out 1: "
            "`concrete/E/default/beta=0.01,seed=3`") in report


def test_two_sweeps_of_different_epochs_in_one_root_are_not_pooled(tmp_path, capsys):
    """Seeds 0-4 at 4000 epochs, then seeds 0-1 of a 2-epoch sweep (its own tag, newer markers):
    the newest-record rule alone made the cell seeds 0-1 of one and 2-4 of the other."""
    root = tmp_path / "results"
    for seed in range(5):
        write_run(root, f"concrete/E/default/beta=0.01,seed={seed}", record(seed), marker_ns=10**18)
    for seed in range(2):
        write_run(root, f"concrete/E/train.epochs=2/beta=0.01,seed={seed}", record(seed, epochs=2, rmse=50.0),
                  marker_ns=2 * 10**18)
    runs = load_runs(root)
    used = runs.loc[~runs["superseded"], "path"].tolist()
    assert len(used) == 5 and all(p.startswith("concrete/E/default/") for p in used), used
    (mix,) = runs.attrs["config_mixes"]
    assert mix["differs"] == "train.epochs 4000 vs 2" and len(mix["left_out"]) == 2

    # As many seeds each: the config with the newest done marker is kept, for the whole cell.
    for seed in range(2, 5):
        write_run(root, f"concrete/E/train.epochs=2/beta=0.01,seed={seed}", record(seed, epochs=2, rmse=50.0),
                  marker_ns=2 * 10**18)
    runs = load_runs(root)
    assert cell(runs) == {"n_total": 5, "rmse": 50.0}
    assert all(p.startswith("concrete/E/train.epochs=2/") for p in runs.loc[~runs["superseded"], "path"])
    assert analyze([str(root), "--out", str(tmp_path / "out"), "--formats", "png"]) == 0
    assert "train.epochs 2 vs 4000; kept 5 (in concrete/E/train.epochs=2/), left out 5" in capsys.readouterr().out


def test_records_that_differ_only_in_keys_that_do_not_define_a_run_pool_silently(tmp_path, capsys):
    """(A guard, true before the change too: the check must not split what is one experiment.)"""
    root = tmp_path / "results"
    write_run(root, "concrete/E/default/beta=0.01,seed=0", record(0))
    write_run(root, "concrete/E/default/beta=0.01,seed=1",
              record(1, device="cuda", results_root="elsewhere", train__pack_size=300,
                                                                    train__compile=False, dataset__data_dir="/other"))
    runs = load_runs(root)
    assert runs.attrs.get("config_mixes", []) == [] and cell(runs)["n_total"] == 2
    assert analyze([str(root), "--out", str(tmp_path / "out"), "--formats", "png"]) == 0
    assert "warning" not in capsys.readouterr().out


# --- cause 2: damaged training curves --------------------------------------------------------

DAMAGED = {
    "empty": b"",  # pandas: EmptyDataError
    "not text": bytes(range(128, 256)) * 8,  # UnicodeDecodeError
    "no curve columns": b"a,b\n1,2\n",  # nothing to draw: ZeroDivisionError in the figure layout
    "cut short": CURVE.encode()[:150],  # parses, but is not what the run sealed
}


def damage(folder: Path, kind: str) -> None:
    """Replace a sealed run's curve by a damaged one, as a shared file system or a hand can."""
    (folder / METRICS).write_bytes(DAMAGED[kind])


def test_the_done_marker_covers_the_curve_and_an_older_marker_stays_valid(tmp_path):
    folder = write_run(tmp_path, "run", record(0), curve=CURVE)
    assert METRICS in json.loads((folder / DONE).read_text())["sha256"]
    assert integrity_problem(folder, files=(METRICS,)) is None
    damage(folder, "cut short")
    problem = integrity_problem(folder, files=(METRICS,))
    assert problem and "metrics.csv is corrupt" in problem
    assert integrity_problem(folder) is None  # the record and the run stay good: a damaged curve costs only the curve
    (folder / METRICS).unlink()
    assert integrity_problem(folder, files=(METRICS,)) is None  # curves set aside (offline_gpu/stash.sh) are no fault

    older = write_run(tmp_path, "older", record(1), curve=CURVE)
    marker = json.loads((older / DONE).read_text())
    del marker["sha256"][METRICS]  # a marker written before curves were checksummed
    (older / DONE).write_text(json.dumps(marker))
    damage(older, "cut short")
    assert integrity_problem(older, files=(METRICS,)) is None and integrity_problem(older) is None


@pytest.mark.parametrize("kind", list(DAMAGED))
def test_analyze_curves_skips_a_damaged_curve_and_lists_it(tmp_path, capsys, kind):
    root, out = tmp_path / "results", tmp_path / "out"
    write_run(root, "concrete/E/default/beta=0.01,seed=0", record(0), curve=CURVE)
    bad = write_run(root, "concrete/E/default/beta=0.01,seed=1", record(1), curve=CURVE)
    damage(bad, kind)
    assert analyze([str(root), "--out", str(out), "--formats", "png", "--curves", "all"]) == 0
    stdout = capsys.readouterr().out
    assert "2 records read, 0 skipped" in stdout  # the run still counts
    assert ("warning: 1 damaged training curve not drawn" in stdout
            and "  concrete/E/default/beta=0.01,seed=1: " in stdout), stdout
    report = (out / "report.md").read_text()
    assert "Damaged training curves, not drawn (1;" in report and "- `concrete/E/default/beta=0.01,seed=1`: " in report
    drawn = sorted(p.relative_to(out / "figures" / "curves").as_posix()
                   for p in (out / "figures" / "curves").rglob("*.png"))
    assert drawn == ["concrete/E/beta=0.01,seed=0.png", "concrete/E/beta=0.01.png"]


@pytest.mark.parametrize("kind", list(DAMAGED))
def test_history_of_a_damaged_curve_raises_one_error_naming_the_file(tmp_path, kind):
    from kanx.load import TrainedRun

    folder = write_run(tmp_path, "run", record(0), curve=CURVE)
    run = TrainedRun(record={}, config={}, model=None, scaling=None, run_dir=folder)
    assert run.history["epoch"].tolist() == list(range(1, 11))
    damage(folder, kind)
    with pytest.raises(Exception) as caught:
        run.history  # noqa: B018
    assert type(caught.value).__name__ == "CurveError" and isinstance(caught.value, ValueError), repr(caught.value)
    assert str(folder / METRICS) in str(caught.value)


def test_a_spliced_curve_of_a_finished_run_stays_vouched_for(tmp_path):
    """offline_gpu/unpack.sh: a GPU job finished the run from its checkpoint and sealed the rows it wrote
    (epochs 6-10); here the earlier rows (1-5) come back from .stash/, then the job's rows are
    spliced on. The spliced curve is the run's whole curve, and its marker must say so."""
    from helpers import load_script

    from kanx.history import read_history

    splice = load_script("offline_gpu/curves.py").splice

    lines = CURVE.splitlines(keepends=True)
    folder = write_run(tmp_path, "results/run", record(0), curve=lines[0] + "".join(lines[6:]))
    returned = tmp_path / "returned" / "run" / METRICS
    returned.parent.mkdir(parents=True)
    returned.write_text(lines[0] + "".join(lines[6:]))
    (folder / METRICS).write_text("".join(lines[:6]))  # the set-aside rows, back from .stash/
    assert splice(folder / METRICS, returned) == 10
    assert read_history(folder)["epoch"].tolist() == list(range(1, 11))
    assert METRICS in json.loads((folder / DONE).read_text())["sha256"]
    assert integrity_problem(folder, files=(METRICS,)) is None and integrity_problem(folder) is None


@pytest.mark.offline_gpu
def test_stash_back_splices_the_curve_of_a_run_finished_meanwhile_and_keeps_it_vouched_for(tmp_path):
    """scripts/offline_gpu/stash.sh back: the curve was set aside (rows 1-5) while the run resumed here and
    finished, sealing the rows it wrote (6-10); the restored curve is both, vouched for."""
    repo, run = tmp_path / "repo", "results/paper/concrete/E/default/beta=0.01,seed=0"
    (repo / "scripts" / "offline_gpu").mkdir(parents=True)
    for script in ("stash.sh", "curves.py"):
        shutil.copy(ROOT / "scripts" / "offline_gpu" / script, repo / "scripts" / "offline_gpu")
    lines = CURVE.splitlines(keepends=True)
    (repo / run).mkdir(parents=True)
    (repo / run / METRICS).write_text("".join(lines[:6]))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    (repo / ".gitignore").write_text("/.stash/\n")
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "t"]):
        subprocess.run([*git, *command], cwd=repo, check=True)
    env = os.environ | {"PYTHON": sys.executable,
                        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    assert subprocess.run(["bash", "scripts/offline_gpu/stash.sh", "out"], cwd=repo,
                          capture_output=True, env=env).returncode == 0
    write_run(repo, run, record(0), curve=lines[0] + "".join(lines[6:]))  # resumed here from epoch 5 and finished
    back = subprocess.run(["bash", "scripts/offline_gpu/stash.sh", "back"], cwd=repo, capture_output=True, text=True,
                          env=env)
    assert back.returncode == 0 and "spliced 1 training curves" in back.stdout, back.stdout + back.stderr
    assert integrity_problem(repo / run, files=(METRICS,)) is None and integrity_problem(repo / run) is None
    assert ([int(line.split(",")[0]) for line in (repo / run / METRICS).read_text().splitlines()[1:]]
            == list(range(1, 11)))


# --- cause 3: kanx.status on corrupt records and bad checkpoints ------------------------------


def status_record(seed: int) -> dict:
    rec = record(seed, beta=0.1)
    rec["config"]["dataset"]["betas"] = [0.1]
    return rec


def states(root: Path) -> dict[int, tuple[str, str | None]]:
    (sweep,) = collect(root)
    return {r.seed: (r.state, getattr(r, "why", None)) for r in sweep.runs if r.seed < 4}


def test_status_shows_a_corrupt_record_as_corrupt_and_says_why(tmp_path, capsys):
    sweep = tmp_path / "concrete" / "E" / "default"
    write_run(sweep, "beta=0.1,seed=0", status_record(0))
    edited = write_run(sweep, "beta=0.1,seed=1", status_record(1))
    (edited / "record.json").write_text(
        (edited / "record.json").read_text().replace('"test_rmse": 5.0', '"test_rmse": 0.5'))
    garbled = sweep / "beta=0.1,seed=2"
    garbled.mkdir()
    (garbled / "record.json").write_text('{"schema_version": 1, "dataset": "conc')  # cut short, then sealed as it is
    records.seal(garbled, with_model=False)
    # a damaged curve: the run is still ok
    damage(write_run(sweep, "beta=0.1,seed=3", status_record(3), curve=CURVE), "not text")

    found = states(tmp_path)
    assert {seed: state for seed, (state, _) in found.items()} == {0: "ok", 1: "corrupt", 2: "corrupt", 3: "ok"}
    assert "sha256 differs" in found[1][1] and "not a JSON record" in found[2][1]

    assert status([str(tmp_path), "--runs"]) == 0
    text = capsys.readouterr().out
    assert "corrupt" in text.splitlines()[0]  # its own column, where some run is corrupt
    assert f"  beta=0.1 seed=1: corrupt ({edited / 'record.json'} is corrupt: its sha256 differs" in text, text
    assert status([str(tmp_path), "--json"]) == 0
    (out,) = json.loads(capsys.readouterr().out)
    assert out["corrupt"] == 2 and out["ok"] == 2
    assert [r["state"] for r in out["runs"] if r["seed"] in (1, 2)] == ["corrupt", "corrupt"]


class NotPlainData:
    """A pickled object in a checkpoint: kanx loads tensors and plain data only."""


def test_status_shows_an_unloadable_checkpoint_as_bad_and_says_why(tmp_path, capsys):
    sweep = tmp_path / "concrete" / "E" / "default"
    write_run(sweep, "beta=0.1,seed=0", status_record(0))
    for seed in (1, 2, 3):
        (sweep / f"beta=0.1,seed={seed}").mkdir(parents=True)
    good = sweep / "beta=0.1,seed=1" / "checkpoint.pt"
    torch.save({"config_hash": "x", "epoch": 50, "state": {"w": torch.zeros(100)}}, good)
    cut = sweep / "beta=0.1,seed=2" / "checkpoint.pt"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    torch.save({"config_hash": "x", "epoch": 70, "extra": NotPlainData()}, sweep / "beta=0.1,seed=3" / "checkpoint.pt")

    found = states(tmp_path)
    assert {seed: state for seed, (state, _) in found.items()} == {0: "ok", 1: "checkpointed",
                                                                   2: "bad checkpoint", 3: "bad checkpoint"}
    assert "cannot be loaded" in found[2][1] and "pickled Python objects" in found[3][1]
    (s,) = collect(tmp_path)
    assert [r.epoch for r in s.runs if r.seed in (1, 2, 3)] == [50, None, None]

    assert status([str(tmp_path), "--runs"]) == 0
    text = capsys.readouterr().out
    assert "bad checkpoint" in text.splitlines()[0]
    assert f"  beta=0.1 seed=2: bad checkpoint ({cut} cannot be loaded" in text, text
    assert "  beta=0.1 seed=1: checkpointed at epoch 50" in text
