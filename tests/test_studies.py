"""The studies beyond the paper (issue #38) read a study's root beside the paper's records:
the paper's eight conditions from the paper's root only, the study's condition from its own,
the hypervolume on the paper's scale, and the inputs an EFXI cell keeps."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from helpers import ROOT

from kanx.analyze.studies import cells_markdown, normalized_hv, runs_beside_paper
from kanx.records import seal


def write_run(root, condition: str, beta, seed: int, rmse: float, edges: int, kept: list[str] | None = None) -> str:
    folder = root / "concrete" / condition / "default" / f"beta={beta},seed={seed}"
    folder.mkdir(parents=True)
    metrics = {"test_rmse": rmse, "contributing_edges": edges, "depth": 2,
               **({"selected_inputs": kept} if kept is not None else {})}
    (folder / "record.json").write_text(json.dumps({"schema_version": 1, "dataset": "concrete",
                                                    "family": "concrete", "condition": condition,
                                                    "beta": beta, "seed": seed, "status": "ok", "metrics": metrics}))
    seal(folder)
    return (folder / "record.json").as_posix()


@pytest.fixture
def roots(tmp_path):
    paper, study = tmp_path / "paper", tmp_path / "study"
    for seed in (0, 1):
        write_run(paper, "Baseline", 0.0, seed, rmse=5.0, edges=50)
        write_run(paper, "EFX", 0.01, seed, rmse=4.0, edges=20)
        write_run(study, "EFXI", 0.01, seed, rmse=3.0, edges=10, kept=["cement", "age"][: 2 - seed])
    # another factor set under the paper's root: not the study's
    write_run(paper, "EFXI", 0.1, 0, rmse=1.0, edges=1, kept=["age"])
    return paper, study


def test_a_study_is_read_beside_the_paper_on_the_papers_hypervolume_scale(roots):
    paper, study = roots
    runs = runs_beside_paper(study, paper, ["concrete"])
    assert sorted(set(runs["condition"])) == ["Baseline", "EFX", "EFXI"]
    assert set(runs.loc[runs["condition"] == "EFXI", "beta"]) == {0.01}  # the paper root's EFXI record is left out
    assert all(p.startswith((paper.as_posix(), study.as_posix())) for p in runs["path"])
    # reference point 1.1 x the paper's maxima (5.5, 55, 2.2): EFX 1.5 * 35 * 0.2 = 10.5, EFXI 2.5 * 45 * 0.2 = 22.5
    hv = normalized_hv(runs, ("EFX", "EFXI"))
    assert hv.loc["concrete", "EFX"] == pytest.approx(1.0) and hv.loc["concrete", "EFXI"] == pytest.approx(22.5 / 10.5)
    efxi = sorted(p for p in runs["path"] if "/EFXI/" in p)
    table = cells_markdown(runs, "concrete", ("EFX", "EFXI"), {"hidden units": {efxi[0]: 3, efxi[1]: 6}})
    assert "| EFXI  | 0.01 |  2/2 |      3.00 |    10 |     2 |          4.5 |" in table, table
    assert "| EFX   | 0.01 |  2/2 |      4.00 |    20 |     2 |            – |" in table, table  # no weights: a dash


def test_a_paper_condition_the_study_retrained_replaces_the_papers(roots, tmp_path):
    paper, study = roots
    write_run(study, "EFX", 0.01, 0, rmse=3.5, edges=30)
    runs = runs_beside_paper(study, paper, ["concrete"])
    efx = runs[runs["condition"] == "EFX"]
    assert len(efx) == 1 and efx["path"].iloc[0].startswith(study.as_posix()) and float(efx["test_rmse"].iloc[0]) == 3.5
    assert len(runs[runs["condition"] == "Baseline"]) == 2  # the rest is still the paper's
    alone = runs_beside_paper(study, tmp_path / "no-paper-here", ["concrete"])
    assert sorted(set(alone["condition"])) == ["EFX", "EFXI"]


def test_the_input_study_tabulates_the_inputs_each_cell_keeps(roots, capsys, monkeypatch):
    paper, study = roots
    path = ROOT / "scripts" / "studies" / "factor_study.py"
    spec = importlib.util.spec_from_file_location("factor_study", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "factor_study", module)  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    assert module.main(["table", "inputs", "--root", str(study), "--paper", str(paper)]) == 0
    text = (study / "study.md").read_text()
    assert text == capsys.readouterr().out
    assert "| EFXI  | 0.01 |    2 |    2/2 | 1/2 |" in text, text  # cement kept by both seeds, age by one
    assert "| concrete | 1.000 | 2.143 |" in text, text
    assert "## superconductor\n\nNo finished run of EFX or EFXI.\n" in text  # a dataset without records says so
