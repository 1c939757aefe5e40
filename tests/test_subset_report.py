"""A report on part of an experiment (one sweep) reports on what was launched there."""

from __future__ import annotations

import json

from kanx.analyze import build_artifacts, hv_table, load_runs, seed_medians
from kanx.analyze.__main__ import main
from kanx.analyze.tables import hv_markdown
from kanx.records import seal


def write_run(sweep, condition: str, beta, seed: int, rmse: float = 5.0, edges: int = 50,
              dataset: str = "concrete") -> None:
    folder = sweep / f"beta={beta},seed={seed}"
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(json.dumps({
        "schema_version": 1, "dataset": dataset, "family": dataset, "condition": condition,
        "beta": beta, "seed": seed,
        "status": "ok", "metrics": {"test_rmse": rmse, "contributing_edges": edges, "depth": 2}}))
    seal(folder)


def write_manifest(sweep, condition: str, cells, dataset: str = "concrete") -> None:
    runs = {f"beta={b},seed={s}": {"beta": b, "seed": s, "dataset": dataset, "condition": condition,
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


def _body_rows(markdown: str) -> list[str]:
    """The first cell of each body row of a markdown table (header and rule left out)."""
    rows = [line for line in markdown.splitlines() if line.startswith("|")][2:]
    return [row.split("|")[1].strip() for row in rows]


def test_a_two_condition_csv_sweep_reports_those_two_conditions_only(tmp_path):
    """Issue #51 item 2: a CSV dataset swept with Baseline and E only gets two HV rows (md and tex),
    the log-ratio axis holds E (Baseline is its reference) and the Pareto legend two entries; the
    cell launched without a record is still listed as missing."""
    root = tmp_path / "results"
    for seed in (0, 1):
        write_run(root / "mydata" / "Baseline" / "default", "Baseline", None, seed, rmse=5.0, edges=60,
                  dataset="mydata")
        for beta, rmse, edges in ((0.01, 4.0, 30), (0.1, 4.5, 20)):
            write_run(root / "mydata" / "E" / "default", "E", beta, seed, rmse=rmse + seed, edges=edges + seed,
                      dataset="mydata")
    write_manifest(root / "mydata" / "E" / "default", "E", [(b, s) for b in (0.01, 0.1, 1.0) for s in (0, 1)],
                   dataset="mydata")
    art = build_artifacts(load_runs(root), formats=("png",))

    assert _body_rows(hv_markdown(hv_table(seed_medians(load_runs(root))))) == ["Baseline", "E"]
    hv_md = art.texts["tables/hypervolume.md"]
    assert _body_rows(hv_md) == ["Baseline", "E"] and "missing" not in hv_md
    tex_rows = [line.split(" & ")[0] for line in art.texts["tables/hypervolume.tex"].splitlines()
                if line.endswith(r"\\") and not line.startswith("Condition")]
    assert tex_rows == ["Baseline", "E"]

    axes = [ax for ax in art.figures["figures/log_ratios"].axes if ax.get_visible()]
    assert axes and all([t.get_text() for t in ax.get_xticklabels()] == ["E"] for ax in axes)
    betas = [t.get_text() for legend in art.figures["figures/log_ratios"].legends for t in legend.get_texts()]
    assert betas == ["β = 0.01", "β = 0.1"]  # the betas with records; 1.0 was launched, not run

    pareto = art.figures["figures/pareto_mydata"].legends[0]
    assert [t.get_text().split()[0] for t in pareto.get_texts()] == ["Baseline", "E"]
    assert not any("no runs" in t.get_text() for t in pareto.get_texts())

    missing = art.report.split("## Missing cells", 1)[1].split("\n## ", 1)[0]
    assert missing.count("**missing**") == 1 and "| mydata  | E     | 1   | **missing** |" in missing


def _two_condition_runs(root, dataset: str):
    for seed in (0, 1):
        write_run(root / dataset / "Baseline" / "default", "Baseline", None, seed, rmse=5.0, edges=60, dataset=dataset)
        write_run(root / dataset / "E" / "default", "E", 0.01, seed, rmse=4.0 + seed, edges=30, dataset=dataset)
    return load_runs(root)


def test_a_two_condition_sweep_of_a_paper_dataset_sets_its_hv_beside_the_papers(tmp_path):
    """The HV table beside the paper's lists the paper's gated conditions; those not launched read missing."""
    art = build_artifacts(_two_condition_runs(tmp_path / "results", "concrete"), formats=("png",))
    assert _body_rows(art.texts["tables/hypervolume.md"]) == ["Baseline", "E"]
    beside = art.texts["tables/hypervolume_vs_paper.md"]
    assert _body_rows(beside) == ["X", "FX", "E", "EF", "EX", "EFX"]  # the paper's table, all its rows
    assert "| X         |            missing / 0.396 |" in beside


def test_a_two_condition_sweep_of_a_dynamical_system_gets_kanxs_reading(tmp_path):
    """kanx's reading of the dynamical systems (readings.py) lists what was launched too."""
    runs = _two_condition_runs(tmp_path / "results", "ikeda")
    art = build_artifacts(runs, formats=("png",), paper=False, short_runs=runs)
    assert _body_rows(art.texts["tables/short/hypervolume.md"]) == ["E"]  # the gated conditions launched
    axes = [ax for ax in art.figures["figures/short/log_ratios"].axes if ax.get_visible()]
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["E"]
