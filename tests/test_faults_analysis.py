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

import os
from pathlib import Path

from kanx.analyze import load_runs, seed_medians
from kanx.analyze.__main__ import main as analyze
from kanx.records import write_record
from kanx.vocab import DONE, METRICS

CURVE = "epoch,loss,data_loss,lc,beta,open_gates,exit,lr,elapsed_s\n" + "".join(
    f"{e},{1 / e:.4f},{1 / e:.4f},3.0,{0.01 if e > 2 else 0.0},7,2,0.001,{e / 10}\n" for e in range(1, 11))


def record(seed: int, epochs: int = 4000, rmse: float = 5.0, beta: float = 0.01, condition: str = "E", **config_changes) -> dict:
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
    return {"schema_version": 1, "dataset": "concrete", "family": "concrete", "condition": condition, "beta": beta, "seed": seed,
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
    write_run(root, "concrete/E/default/beta=0.01,seed=3", record(3, epochs=2, rmse=50.0))  # copied in from a smoke test
    assert analyze([str(root), "--out", str(out), "--formats", "png"]) == 0
    stdout = capsys.readouterr().out

    assert cell(load_runs(root)) == {"n_total": 3, "rmse": 5.0}
    assert "warning: 1 cell holds records of more than one config" in stdout, stdout
    assert "train.epochs 4000 vs 2" in stdout and "concrete/E/default/beta=0.01,seed=3" in stdout
    report = (out / "report.md").read_text()
    assert "**Records of another config** (1 record in 1 cell," in report
    assert "Concrete, E, β = 0.01: train.epochs 4000 vs 2; kept 3 (in `concrete/E/default/`), left out 1: `concrete/E/default/beta=0.01,seed=3`" in report


def test_two_sweeps_of_different_epochs_in_one_root_are_not_pooled(tmp_path, capsys):
    """Seeds 0-4 at 4000 epochs, then seeds 0-1 of a 2-epoch sweep (its own tag, newer markers):
    the newest-record rule alone made the cell seeds 0-1 of one and 2-4 of the other."""
    root = tmp_path / "results"
    for seed in range(5):
        write_run(root, f"concrete/E/default/beta=0.01,seed={seed}", record(seed), marker_ns=10**18)
    for seed in range(2):
        write_run(root, f"concrete/E/train.epochs=2/beta=0.01,seed={seed}", record(seed, epochs=2, rmse=50.0), marker_ns=2 * 10**18)
    runs = load_runs(root)
    used = runs.loc[~runs["superseded"], "path"].tolist()
    assert len(used) == 5 and all(p.startswith("concrete/E/default/") for p in used), used
    (mix,) = runs.attrs["config_mixes"]
    assert mix["differs"] == "train.epochs 4000 vs 2" and len(mix["left_out"]) == 2

    # As many seeds each: the config with the newest done marker is kept, for the whole cell.
    for seed in range(2, 5):
        write_run(root, f"concrete/E/train.epochs=2/beta=0.01,seed={seed}", record(seed, epochs=2, rmse=50.0), marker_ns=2 * 10**18)
    runs = load_runs(root)
    assert cell(runs) == {"n_total": 5, "rmse": 50.0}
    assert all(p.startswith("concrete/E/train.epochs=2/") for p in runs.loc[~runs["superseded"], "path"])
    assert analyze([str(root), "--out", str(tmp_path / "out"), "--formats", "png"]) == 0
    assert "train.epochs 2 vs 4000; kept 5 (in concrete/E/train.epochs=2/), left out 5" in capsys.readouterr().out


def test_records_that_differ_only_in_keys_that_do_not_define_a_run_pool_silently(tmp_path, capsys):
    """(A guard, true before the change too: the check must not split what is one experiment.)"""
    root = tmp_path / "results"
    write_run(root, "concrete/E/default/beta=0.01,seed=0", record(0))
    write_run(root, "concrete/E/default/beta=0.01,seed=1", record(1, device="cuda", results_root="elsewhere", train__pack_size=300,
                                                                    train__compile=False, dataset__data_dir="/other"))
    runs = load_runs(root)
    assert runs.attrs.get("config_mixes", []) == [] and cell(runs)["n_total"] == 2
    assert analyze([str(root), "--out", str(tmp_path / "out"), "--formats", "png"]) == 0
    assert "warning" not in capsys.readouterr().out
