"""A report on part of an experiment (one sweep) reports on what was launched there."""

from __future__ import annotations

import json

from kanx.analyze.__main__ import main
from kanx.records import seal


def write_run(sweep, condition: str, beta, seed: int, rmse: float = 5.0, edges: int = 50) -> None:
    folder = sweep / f"beta={beta},seed={seed}"
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(json.dumps({
        "schema_version": 1, "dataset": "concrete", "family": "concrete", "condition": condition,
        "beta": beta, "seed": seed,
        "status": "ok", "metrics": {"test_rmse": rmse, "contributing_edges": edges, "depth": 2}}))
    seal(folder)


def write_manifest(sweep, condition: str, cells) -> None:
    runs = {f"beta={b},seed={s}": {"beta": b, "seed": s, "dataset": "concrete", "condition": condition,
                                   "config_hash": "x"} for b, s in cells}
    (sweep / "manifest.json").write_text(json.dumps({"format": 1, "runs": runs, "protocol": {}, "launches": []}))


def test_one_sweep_reports_its_own_missing_cells_and_no_empty_panels(tmp_path):
    sweep = tmp_path / "results" / "concrete" / "EFX" / "default"
    for seed in (0, 1):
        write_run(sweep, "EFX", 0.01, seed)
    write_manifest(sweep, "EFX", [(0.01, 0), (0.01, 1), (0.1, 0), (0.1, 1)])  # beta 0.1 launched, not finished
    assert main([str(tmp_path / "results"), "--out", str(tmp_path / "out"), "--formats", "png"]) == 0
    report = (tmp_path / "out" / "report.md").read_text()
    missing = report.split("## Missing cells", 1)[1].split("\n## ", 1)[0]
    assert "| Concrete | EFX   | 0.1 | **missing** |" in missing
    assert missing.count("**missing**") == 1  # not the seven conditions that were never launched
    assert "No figure: no condition here has a Baseline run" in report
    assert not (tmp_path / "out" / "figures" / "log_ratios.png").exists()
    absolute = report.split("## Absolute results", 1)[1].split("\n## ", 1)[0]
    assert "| EFX " in absolute and "| EX " not in absolute and "| Baseline |" not in absolute


def test_a_baseline_beside_the_sweep_gives_its_panel(tmp_path):
    root = tmp_path / "results"
    for seed in (0, 1):
        write_run(root / "concrete" / "EFX" / "default", "EFX", 0.01, seed, rmse=4.0)
        write_run(root / "concrete" / "Baseline" / "default", "Baseline", 0.0, seed)
    assert main([str(root), "--out", str(tmp_path / "out"), "--formats", "png"]) == 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "No figure" not in report and (tmp_path / "out" / "figures" / "log_ratios.png").is_file()
    assert "**missing**" not in report.split("## Missing cells", 1)[1].split("\n## ", 1)[0]
