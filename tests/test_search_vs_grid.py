"""The study of issue #50, item 6 (scripts/studies/search_vs_grid.py): an Optuna search of beta
against the paper's grid, each side's (test RMSE, edges) front scored by its hypervolume against
one reference point per dataset; every trained run is a candidate model on both sides."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import ROOT, SHARED_DATA, load_script

from kanx.records import seal

SCRIPT = "studies/search_vs_grid.py"


def write_run(folder, beta, rmse, edges, status="ok", dataset="concrete"):
    folder.mkdir(parents=True)
    record = {"schema_version": 1, "dataset": dataset, "family": dataset, "condition": "EFX", "beta": beta,
              "seed": 0, "status": status, "target_unit": "MPa",
              "metrics": {"test_rmse": rmse, "contributing_edges": edges, "depth": 2}}
    (folder / "record.json").write_text(json.dumps(record))
    seal(folder)


@pytest.fixture
def sides(tmp_path):
    """A grid of two runs, (5, 10 edges) and (4, 20), and a search of three: (6, 5), (3, 30) and a
    diverged run (no point)."""
    paper, search = tmp_path / "paper", tmp_path / "search"
    for beta, rmse, edges in ((0.1, 5.0, 10), (0.01, 4.0, 20)):
        write_run(paper / "concrete" / "EFX" / "default" / f"beta={beta},seed=0", beta, rmse, edges)
    tag = search / "concrete" / "EFX" / "hparams_search=beta_pareto"
    write_run(tag / "beta=0.3,seed=0", 0.3, 6.0, 5)
    write_run(tag / "beta=0.002,seed=0", 0.002, 3.0, 30)
    write_run(tag / "beta=0.0001,seed=0", 0.0001, None, 40, status="diverged")
    return paper, search


def test_both_fronts_are_scored_against_one_reference_point_and_the_budgets_say_who_is_better(sides, capsys):
    paper, search = sides
    module = load_script(SCRIPT)
    assert module.main(["table", "--root", str(search), "--paper", str(paper), "--datasets", "concrete"]) == 0
    text = (search / "study.md").read_text()
    assert text == capsys.readouterr().out
    # reference 1.1 x (6, 30) = (6.6, 33), box 217.8; grid: 1.6 x 23 + 1 x 13 = 49.8, search: 0.6 x 28 + 3 x 3 = 25.8
    row = next(line for line in text.splitlines() if line.startswith("| concrete"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:] == ["3", "2", "2", f"{25.8 / 217.8:.4f}", "2", "2", "2", f"{49.8 / 217.8:.4f}",
                         f"{25.8 / 49.8:.3f}", "(6.6, 33)"], row
    budgets = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
               if line.startswith("|") and line.split("|")[1].strip().isdigit() and len(line.split("|")) == 6]
    assert budgets == [["5", "6", "–", "search"], ["10", "6", "5", "grid"], ["20", "6", "4", "grid"],
                       ["30", "3", "4", "search"]]
    assert (search / "figures" / "search_vs_grid_concrete.png").stat().st_size > 0


def test_a_dynamical_system_is_read_at_the_papers_horizon_and_at_its_configured_one():
    module = load_script(SCRIPT)
    paper, configured = module.readings("ikeda")
    assert (paper.horizon, configured.horizon) == (200, None)  # kanx/analyze/paper/readings.csv; as recorded
    assert configured.label == "10 steps (dataset.horizon)"
    assert [r.horizon for r in module.readings("concrete")] == [None]


def test_the_searches_train_as_many_trials_as_the_grids_runs_and_an_empty_grid_stops_before_training(
        sides, tmp_path, capsys):
    paper, search = sides
    module = load_script(SCRIPT)
    command = module.search_command("concrete", search, module.grid_runs(paper, "concrete"), "full", ["x=1"])
    assert command[1:] == ["-m", "kanx.train", "+condition=EFX", "dataset=concrete", "hparams_search=beta_pareto",
                           f"results_root={search}", "hydra.sweeper.n_trials=2", "x=1", "-m"]
    assert module.main(["run", "--root", str(tmp_path / "new"), "--paper", str(paper)]) == 2
    err = capsys.readouterr().err
    assert "holds no EFX record of nguyen_f7, ikeda" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "new").exists()


@pytest.mark.slow  # three searches through the CLI, about two minutes
@pytest.mark.committed  # the grid is the committed paper records
def test_the_study_runs_end_to_end_at_tiny_scale_and_resumes_without_training(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    command = [sys.executable, str(ROOT / "scripts" / SCRIPT), "run", "--scale", "tiny", "--root", str(tmp_path)]
    p = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    text = (tmp_path / "study.md").read_text()
    for dataset, grid in (("concrete", 70), ("nguyen_f7", 40), ("ikeda, 200 steps (paper)", 60),
                          ("ikeda, 10 steps (dataset.horizon)", 60)):
        row = next(line for line in text.splitlines() if line.startswith(f"| {dataset} "))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == "4" and cells[5] == str(grid), row  # 4 trials; the grid's committed runs
    assert len(list((tmp_path / "search").glob("*.db"))) == 3
    assert {f.name for f in (tmp_path / "figures").iterdir()} == {
        "search_vs_grid_concrete.png", "search_vs_grid_nguyen_f7.png", "search_vs_grid_ikeda.png",
        "search_vs_grid_ikeda_configured.png"}
    stamps = {f: f.stat().st_mtime_ns for f in tmp_path.rglob("record.json")}
    assert len(stamps) == 12
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert stamps == {f: f.stat().st_mtime_ns for f in tmp_path.rglob("record.json")}  # finished: nothing trains


@pytest.mark.committed  # the grid's run counts are the committed paper records'
@pytest.mark.skipif(not (SHARED_DATA / "concrete.csv").is_file(), reason=f"no concrete.csv in {SHARED_DATA}")
def test_run_checks_every_search_then_launches_them_in_turn(tmp_path, monkeypatch):
    monkeypatch.setenv("KANX_DATA_DIR", str(SHARED_DATA))  # the check loads Concrete's table, as the search will
    module = load_script(SCRIPT)
    launched = []
    monkeypatch.setattr(module.subprocess, "call", lambda command: launched.append(command) or 0)
    assert module.main(["run", "--scale", "tiny", "--root", str(tmp_path), "--no-table"]) == 0
    assert [c[4] for c in launched] == ["dataset=concrete", "dataset=nguyen_f7", "dataset=ikeda"]
    assert all("+debug=quick" in c and "hydra.sweeper.n_trials=4" in c and c[-1] == "-m" for c in launched)
    assert "dataset.n_train=256" in launched[2] and not list(tmp_path.rglob("record.json"))
    monkeypatch.setattr(module.subprocess, "call", lambda command: launched.append(command) or 1)
    assert module.main(["run", "--root", str(tmp_path), "--datasets", "ikeda", "--no-table"]) == 1  # a failed search
    assert "hydra.sweeper.n_trials=60" in launched[-1]  # the grid's committed runs
