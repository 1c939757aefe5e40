"""The dynamical systems' two readings: the paper's (the tables' default) and kanx's (as trained)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from kanx.analyze import readings
from kanx.analyze.__main__ import main
from kanx.analyze.published import paper_published
from kanx.analyze.readings import READINGS_FILE, hidden_losses, paper_readings
from kanx.analyze.settle import DATASETS, readings_csv, seeds_text, settle_ladders, settle_records
from kanx.records import seal

LADDER = (1, 2, 5, 10, 20, 50, 100, 200, 500)
RESULTS = Path(__file__).resolve().parents[1] / "results" / "paper"


def write_dynamical(root, condition: str, beta, seed: int, short: float, long: float, edges: int = 48) -> None:
    """An Ikeda record trained at 10-step rollouts whose curve reads ``short`` at 10 steps and
    ``long`` at 200 (the paper's rung)."""
    curve = {str(h): (short if h <= 10 else long) for h in LADDER} | {"1600": long}
    record = {"schema_version": 1, "dataset": "ikeda", "family": "ikeda", "condition": condition,
              "beta": beta, "seed": seed,
              "status": "ok", "n_test": 1600, "git_commit": "abc",
              "config": {"dataset": {"horizon": 10, "n_rollouts": None}},
              "metrics": {"test_rmse": short, "test_rmse_one_step": short / 10, "rollout_rmse": curve,
                          "contributing_edges": edges, "depth": 4}}
    folder = root / "ikeda" / condition / f"beta={beta},seed={seed}"
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(json.dumps(record))
    seal(folder)


@pytest.fixture
def ikeda_root(tmp_path):
    root = tmp_path / "results"
    for seed in range(3):
        write_dynamical(root, "Baseline", None, seed, short=0.10, long=0.86)
        write_dynamical(root, "E", 0.01, seed, short=0.40, long=0.87, edges=20)  # 4x worse short, the same long
    return root


@pytest.fixture(scope="module")
def committed():
    """The committed records' settling (record.json of the Baseline and F runs only)."""
    return [settle_records(RESULTS, d) for d in DATASETS]


def test_the_paper_reading_is_what_the_committed_records_settle_on(committed):
    assert paper_readings() == {s.dataset: s.horizon for s in committed}, (
        "kanx/analyze/paper/readings.csv is stale: run python scripts/studies/settle_rollout.py results/paper --write")
    assert [s.seeds for s in committed] == [{"Baseline": list(range(10)), "F": list(range(10))}] * 2
    assert all(paper_published(d) is not None for d in paper_readings())


def test_readings_csv_is_the_settling_script_output_with_its_seeds(committed):
    assert READINGS_FILE.read_text() == readings_csv(committed), (
        "kanx/analyze/paper/readings.csv is not what the committed records give: run "
        "python scripts/studies/settle_rollout.py results/paper --write")
    assert pd.read_csv(READINGS_FILE)["seeds"].tolist() == ["0-9", "0-9"]


def ladders(values: dict[str, float], seeds=range(3)) -> dict[int, dict[str, float]]:
    return {s: dict(values) for s in seeds}


def test_settling_prefers_rows_in_range_then_the_smaller_distance():
    # Ikeda's published Baseline 0.8622 [0.8365, 0.8799], F 0.8663 [0.8567, 0.8789].
    rows = {"Baseline": ladders({"100": 0.8622, "200": 0.8400, "whole": 0.8700}),
            "F": ladders({"100": 0.9000, "200": 0.8600, "whole": 0.8663})}
    settled = settle_ladders("ikeda", rows)
    assert [s.rows_in for s in settled.scores] == [1, 2, 2]
    assert settled.rung == "whole" and settled.horizon == "whole"  # both in range at 200 and whole; whole is closer
    rows["F"] = ladders({"100": 0.9000, "200": 0.8600, "whole": 0.9000})
    assert settle_ladders("ikeda", rows).horizon == 200  # whole loses F's range
    uneven = {"Baseline": ladders({"1": 1.0}, [0, 1, 2, 5]), "F": ladders({"1": 1.0})}
    assert seeds_text(settle_ladders("ikeda", uneven)) == "Baseline 0-2 5; F 0-2"


def test_settling_refuses_a_seed_recorded_twice_and_a_row_without_ladders(tmp_path):
    for sweep in ("a", "b"):  # two sweep folders of one root, each with seed 0
        write_dynamical(tmp_path / sweep, "Baseline", None, 0, short=0.1, long=0.86)
        (tmp_path / "root" / "ikeda" / "Baseline").mkdir(parents=True, exist_ok=True)
        (tmp_path / sweep / "ikeda" / "Baseline").rename(tmp_path / "root" / "ikeda" / "Baseline" / sweep)
    with pytest.raises(ValueError, match="seed 0 is recorded twice"):
        settle_records(tmp_path / "root", "ikeda")
    with pytest.raises(ValueError, match="no F record with the rollout ladder"):
        settle_ladders("ikeda", {"Baseline": ladders({"1": 1.0}), "F": {}})


def test_the_tables_read_the_paper_rung_by_default_and_the_trained_horizon_on_request(ikeda_root, tmp_path):
    assert main([str(ikeda_root), "--out", str(tmp_path / "paper"), "--formats", "png"]) == 0
    assert main([str(ikeda_root), "--out", str(tmp_path / "mine"), "--formats", "png",
                 "--rollout-horizon", "recorded"]) == 0
    paper = pd.read_csv(tmp_path / "paper" / "tables" / "seed_medians.csv").set_index("condition")
    mine = pd.read_csv(tmp_path / "mine" / "tables" / "seed_medians.csv").set_index("condition")
    assert (paper.loc["Baseline", "rmse_median"] == pytest.approx(0.86)
            and paper.loc["E", "rmse_median"] == pytest.approx(0.87))
    assert (mine.loc["Baseline", "rmse_median"] == pytest.approx(0.10)
            and mine.loc["E", "rmse_median"] == pytest.approx(0.40))

    report = (tmp_path / "paper" / "report.md").read_text()
    assert "at the paper's reading (the default, `--rollout-horizon paper`): Ikeda at rollouts of 200 steps" in report
    assert "## kanx's reading of the dynamical systems: short rollouts" in report
    assert (tmp_path / "paper" / "figures" / "short" / "log_ratios.png").is_file()
    short = (tmp_path / "paper" / "tables" / "short" / "absolute_ikeda.csv").read_text()
    assert "0.4" in short and "0.87" not in short
    hv = pd.read_csv(tmp_path / "paper" / "tables" / "short" / "hypervolume.csv").set_index("condition")
    assert hv.loc["E", "ikeda_paper"] == pytest.approx(1.0) and hv.loc["E", "ikeda_kanx"] == pytest.approx(1.0)
    # E's RMSE is 4x the Baseline's at 10 steps and within 0.005 in log10 at 200: the report names it.
    assert "**What the paper's reading hides**: 1 cell loses accuracy" in report
    assert "Ikeda E β = 0.01 (-0.60 vs -0.01)" in report
    # Asked for kanx's reading, the tables are it, and no second section repeats them.
    assert "## kanx's reading of the dynamical systems" not in (tmp_path / "mine" / "report.md").read_text()


def test_a_run_without_dynamical_records_gets_no_second_reading(tmp_path):
    folder = tmp_path / "results" / "concrete" / "Baseline" / "s0"
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(json.dumps({
        "schema_version": 1, "dataset": "concrete", "family": "concrete", "condition": "Baseline", "beta": None,
        "seed": 0, "status": "ok", "metrics": {"test_rmse": 5.0, "contributing_edges": 351, "depth": 3}}))
    seal(folder)
    assert main([str(tmp_path / "results"), "--out", str(tmp_path / "out"), "--formats", "png"]) == 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "kanx's reading" not in report and "paper's reading" not in report


def test_hidden_losses_are_worse_short_and_level_long():
    rows = pd.DataFrame({"panel": ["ikeda"] * 3, "condition": ["E", "EF", "X"], "beta": [0.01] * 3,
                         "mean_short": [-0.3, -0.3, -0.05], "mean_paper": [0.01, -0.2, 0.0]})
    # EF's loss shows at the paper's reading too; X loses too little
    assert hidden_losses(rows)["condition"].tolist() == ["E"]


def write_spreads(path, rows) -> None:
    columns = ["dataset", "condition", "seeds", "estimator", "rung", "native_median", "ulp_spread", "cpu_spread",
               "spread"]
    table = pd.DataFrame(rows, columns=columns)
    table.to_csv(path, index=False)


def test_the_paper_tables_say_how_far_the_reading_moves_across_cpus(ikeda_root, tmp_path, monkeypatch):
    spreads = tmp_path / "reading_spread.csv"
    write_spreads(spreads, [("ikeda", "Baseline", "0-9", "tiling", "200", 0.86, 0.010, 0.012, 0.012),
                            ("ikeda", "F", "0-9", "tiling", "200", 0.86, 0.004, 0.002, 0.0041),
                            ("ikeda", "Baseline", "0-9", "windows", "200", 0.86, 0.001, 0.001, 0.001),
                            ("ikeda", "Baseline", "0-9", "tiling", "500", 0.88, 0.02, 0.02, 0.02)])
    monkeypatch.setattr(readings, "SPREAD_FILE", spreads)
    assert main([str(ikeda_root), "--out", str(tmp_path / "paper"), "--formats", "png"]) == 0
    report = (tmp_path / "paper" / "report.md").read_text()
    said = "seed-median moves with the last bits of the arithmetic by Baseline ±0.006, F ±0.002 (measured on"
    absolute = report.split("## Absolute results", 1)[1].split("\n## ", 1)[0]
    beside = report.split("### Ikeda beside the paper", 1)[1].split("\n### ", 1)[0]
    assert said in absolute and said in beside and "(rollouts of 200 steps)" in absolute
    assert said in (tmp_path / "paper" / "tables" / "absolute_ikeda.md").read_text()
    # Read at a rung without a measured spread, or without the file, the tables say nothing of it.
    assert main([str(ikeda_root), "--out", str(tmp_path / "ten"), "--formats", "png", "--rollout-horizon", "10"]) == 0
    assert "Across CPUs" not in (tmp_path / "ten" / "report.md").read_text()
    monkeypatch.setattr(readings, "SPREAD_FILE", tmp_path / "absent.csv")
    assert main([str(ikeda_root), "--out", str(tmp_path / "none"), "--formats", "png"]) == 0
    assert "Across CPUs" not in (tmp_path / "none" / "report.md").read_text()


def test_the_committed_spread_covers_the_paper_reading_of_both_rows():
    spreads = readings.reading_spreads()
    assert spreads is not None, f"{readings.SPREAD_FILE} is missing: python scripts/studies/reading_spread.py --write"
    for dataset, horizon in paper_readings().items():
        rows = spreads[(spreads["dataset"] == dataset) & (spreads["estimator"] == "tiling")]
        rows = rows[rows["rung"] == str(horizon)]
        assert sorted(rows["condition"]) == ["Baseline", "F"] and (rows["spread"] >= 0).all(), (dataset, horizon)
        assert set(rows["seeds"]) == {"0-9"}


def test_the_records_note_names_each_datasets_reading_once():
    from kanx.analyze.report import _rollout_note

    line, _ = _rollout_note({"ikeda": 200, "ecosystem": "whole"}, ["ikeda", "ecosystem"])
    assert ("Ikeda at rollouts of 200 steps tiling the test segment; Ecosystem at one rollout over the whole test "
            "segment, from each record's rollout curve") in line


def test_the_report_names_the_departures_of_its_families_only():
    """kanx/analyze/paper/departures.csv: each remaining departure with its cause or what was tried, and
    the section of docs/CALIBRATION.md that holds the evidence; a report lists its families' only."""
    import re

    from helpers import ROOT

    from kanx.analyze.labels import family_label
    from kanx.analyze.published import PAPER_DEPARTURES_FILE, departures_markdown

    rows = pd.read_csv(PAPER_DEPARTURES_FILE, dtype=str)
    sections = set(re.findall(r"^## (.+)$", (ROOT / "docs" / "CALIBRATION.md").read_text(), re.M))
    assert set(rows["section"]) <= sections  # each names a section that exists
    concrete = departures_markdown(["concrete"], family_label)
    assert concrete.startswith("- **Concrete.**") and "Ecosystem" not in concrete
    every = departures_markdown(["nguyen", "ikeda", "ecosystem", "concrete", "superconductor"], family_label)
    assert every.count("\n- ") + 1 == len(rows)
    assert departures_markdown(["my_table"], family_label) is None
