"""kanx.analyze reads records of every factor-set condition (issue #38), not only the paper's
eight: conditions with N (node gates) or I (input gates) such as EFXI and EN get rows after the
paper's eight in the absolute tables, the log-ratios against the Baseline, the HV table and the
figures; published values stay the paper's eight's; and records of other factor sets leave every
number of the paper's eight as it is without them (the golden report, tests/test_analyze.py,
holds the paper's eight only and stays byte for byte)."""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path

import pandas as pd
import pytest

from kanx.analyze import (
    absolute_table,
    build_artifacts,
    compare_published,
    hv_table,
    load_runs,
    log_ratio_summary,
    log_ratios,
    seed_medians,
)
from kanx.analyze.figures import plotted
from kanx.analyze.inputs import selected_inputs
from kanx.analyze.labels import ALL_CONDITIONS, CONDITIONS, with_others
from kanx.analyze.published import paper_published
from kanx.analyze.tables import absolute_markdown, hv_markdown
from kanx.records import seal

RECORDS = Path(__file__).resolve().parent / "fixtures" / "records"

# (condition, beta) -> per seed (test RMSE, contributing edges, selected inputs or None)
CELLS = {
    ("Baseline", None): [(6.0, 100, None), (7.0, 100, None), (8.0, 100, None)],
    ("E", 0.01): [(5.0, 40, None), (6.0, 41, None), (7.0, 42, None)],
    ("EFXI", 0.01): [(4.0, 20, ["cement", "water"]), (5.0, 22, ["cement"]), (6.0, 24, ["cement", "water", "age"])],
    ("EN", 0.01): [(5.5, 30, None), (6.5, 31, None), (7.5, 32, None)],
}


def write(root: Path, dataset: str, condition: str, beta, seed: int, rmse: float, edges: int, selected=None) -> None:
    metrics = {"test_rmse": rmse, "contributing_edges": edges, "depth": 2}
    if selected is not None:
        metrics["selected_inputs"] = selected
    record = {"schema_version": 1, "dataset": dataset, "family": "nguyen" if dataset.startswith("nguyen") else dataset,
              "condition": condition, "beta": beta, "seed": seed, "status": "ok",
              "metrics": metrics, "git_commit": "abc"}
    folder = root / dataset / condition / "t" / f"beta={beta},seed={seed}"
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(json.dumps(record))
    seal(folder)


@pytest.fixture(scope="module")
def factor_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("factors")
    for (condition, beta), seeds in CELLS.items():
        for seed, (rmse, edges, selected) in enumerate(seeds):
            write(root, "concrete", condition, beta, seed, rmse, edges, selected)
    return root


@pytest.fixture(scope="module")
def factor_runs(factor_root) -> pd.DataFrame:
    return load_runs(factor_root)


def test_the_canonical_order_is_the_papers_eight_then_the_vocabs():
    assert ALL_CONDITIONS[:8] == CONDITIONS and len(ALL_CONDITIONS) == 32 and ALL_CONDITIONS[-1] == "EFXNI"
    assert with_others({"EFXI", "EN", "E"}) == [*CONDITIONS, "EN", "EFXI"]


def test_records_of_factor_sets_are_read_and_ordered(factor_runs):
    assert factor_runs.attrs["skipped"] == []
    assert list(dict.fromkeys(factor_runs["condition"])) == ["Baseline", "E", "EN", "EFXI"]


def test_a_name_that_is_no_factor_set_is_still_unreadable(tmp_path):
    write(tmp_path, "concrete", "E", 0.01, 0, 5.0, 40)
    write(tmp_path, "concrete", "XE", 0.01, 0, 5.0, 40)
    write(tmp_path, "concrete", "EQ", 0.01, 0, 5.0, 40)
    runs = load_runs(tmp_path)
    assert runs["condition"].tolist() == ["E"]
    reasons = dict(runs.attrs["skipped"])
    assert ("must name each factor once, in the order EFXNI: 'EX'"
            in reasons["concrete/XE/t/beta=0.01,seed=0/record.json"])
    assert "unknown factor(s) 'Q'" in reasons["concrete/EQ/t/beta=0.01,seed=0/record.json"]


def test_absolute_table_holds_the_factor_sets_with_their_medians(factor_runs):
    medians = seed_medians(factor_runs)
    m = medians.set_index(["condition", "beta"])
    for (condition, beta), seeds in CELLS.items():
        cell = m.loc[(condition, beta or 0.0)]
        assert cell["rmse_median"] == statistics.median(s[0] for s in seeds)
        assert cell["edges_median"] == statistics.median(s[1] for s in seeds)
        assert (cell["n_used"], cell["n_total"]) == (3, 3)
    text = absolute_markdown(absolute_table(medians, "concrete"))
    lines = [line for line in text.splitlines() if line.startswith("| ") and "Cond." not in line]
    assert [line.split("|")[1].strip() for line in lines] == ["Baseline", "E", "EN", "EFXI"]
    assert "| EN       | 0.01 | *6.50 [5.50, 7.50]*     | 31 [30, 32]    | 2 [2, 2] | 3/3 |" in text
    assert "| EFXI     | 0.01 | ***5.00 [4.00, 6.00]*** | 22 [20, 24]    | 2 [2, 2] | 3/3 |" in text  # best RMSE: bold


def test_log_ratios_pair_the_factor_sets_with_the_baseline(factor_runs):
    summary = log_ratio_summary(log_ratios(factor_runs, "test_rmse")).set_index("condition")
    assert summary.index.tolist() == ["E", "EN", "EFXI"]
    base = [s[0] for s in CELLS[("Baseline", None)]]
    for condition in ("EN", "EFXI"):
        mine = [s[0] for s in CELLS[(condition, 0.01)]]
        expected = statistics.mean(math.log10(b / v) for b, v in zip(base, mine, strict=True))
        assert summary.loc[condition, "mean"] == pytest.approx(expected)
        assert summary.loc[condition, "n_pairs"] == 3
    assert plotted(summary.reset_index()) == ("E", "EN", "EFXI")  # what was run, not the paper's seven


def test_hv_table_rows_of_the_factor_sets_on_the_papers_scale(factor_runs):
    table = hv_table(seed_medians(factor_runs))
    assert table.index.tolist() == ["Baseline", "E", "EN", "EFXI"]  # what was run, not the paper's eight
    assert table.loc["E", "concrete"] == 1.0  # the best gated condition of the paper's eight normalizes
    assert table.loc["EFXI", "concrete"] > 1.0 > table.loc["EN", "concrete"] > 0
    assert table.loc["EFXI", "mean"] == table.loc["EFXI", "concrete"]
    text = hv_markdown(table)
    assert text.splitlines()[-2].startswith("| EN ") and text.splitlines()[-1].startswith("| EFXI ")


def test_selected_inputs_are_counted_per_cell(factor_runs):
    table = selected_inputs(factor_runs)
    assert table[["condition", "input", "n_selected", "n_runs"]].values.tolist() == [
        ["EFXI", "cement", 3, 3], ["EFXI", "water", 2, 3], ["EFXI", "age", 1, 3]]


def test_the_report_lists_the_factor_sets_and_the_paper_columns_stay_the_papers(factor_runs):
    art = build_artifacts(factor_runs, formats=())
    report = art.report
    assert "| Concrete | EFXI  | 0.01 |" in report and "| Concrete | EN    | 0.01 |" in report  # log-ratios
    assert "| EFXI  | 0.01 |    3 |    3/3 |   2/3 | 1/3 |" in report  # selected inputs
    assert "Rows after EFX (factor sets with N or I)" in art.texts["tables/hypervolume.md"]
    assert ("EFXI" not in art.texts["tables/published_concrete.csv"]
            and "EFXI" not in art.texts["tables/hypervolume_vs_paper.csv"])
    assert "EFXI" in art.texts["tables/absolute_concrete.tex"] and "EFXI" in art.texts["tables/hypervolume.csv"]
    ax = art.figures["figures/log_ratios"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()][-2:] == ["EN", "EFXI"]


def test_records_of_factor_sets_leave_the_papers_numbers_as_they_are(tmp_path):
    """The golden records plus EFXI and EN records (at a beta of their own on Concrete): every
    seed-median, HV and published comparison of the paper's eight is unchanged."""
    shutil.copytree(RECORDS, tmp_path / "records")
    root = tmp_path / "records"
    before = load_runs(RECORDS)
    for seed in range(3):
        write(root, "concrete", "EFXI", 0.2, seed, 3.0 + seed, 30 + seed, ["cement"])
        write(root, "concrete", "EN", 0.01, seed, 4.0 + seed, 60 + seed)
        write(root, "nguyen_f1", "EFXNI", 0.01, seed, 0.01 * (seed + 1), 3)
    after = load_runs(root)
    m0, m1 = seed_medians(before), seed_medians(after)
    paper = m1[m1["condition"].isin(CONDITIONS)].reset_index(drop=True)
    pd.testing.assert_frame_equal(paper, m0)
    assert set(m1.loc[~m1["condition"].isin(CONDITIONS), "condition"]) == {"EFXI", "EN", "EFXNI"}
    assert m1.loc[m1["condition"] == "EFXI", "beta"].tolist() == [0.2]  # no paper beta added, none added to the paper's
    hv0, hv1 = hv_table(m0), hv_table(m1)
    pd.testing.assert_frame_equal(hv1.loc[list(CONDITIONS)], hv0)
    assert hv1.index.tolist()[8:] == ["EN", "EFXI", "EFXNI"]
    published = paper_published("concrete")
    pd.testing.assert_frame_equal(compare_published(m1, published, "concrete"),
                                  compare_published(m0, published, "concrete"))
