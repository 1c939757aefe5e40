"""Tests of kanx.analyze: hypervolume math and rules, status handling, tables, golden report.

The golden test compares the analysis of the committed records in ``tests/fixtures/records``
with the committed outputs in ``tests/fixtures/expected``, byte for byte. After a deliberate
change to the records or the output format, regenerate both and check the diff by eye:

    python tests/fixtures/make_records.py --expected
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import ROOT

from kanx.analyze import (
    absolute_table,
    build_artifacts,
    compare_hv,
    compare_published,
    condition_hypervolumes,
    expected_grid,
    hv_from_published,
    hv_problem_table,
    hv_table,
    hypervolume,
    load_runs,
    log_ratio_figure,
    log_ratio_summary,
    log_ratios,
    pareto_front,
    read_published,
    read_published_hv,
    seed_medians,
)
from kanx.analyze.__main__ import main
from kanx.analyze.aggregate import architecture_edges, ungated_structure_check
from kanx.analyze.figures import pareto_figure, pareto_runs
from kanx.analyze.labels import CONDITIONS, GATED, family_label, latex_escape
from kanx.analyze.published import PAPER_HV
from kanx.analyze.tables import absolute_markdown, hv_csv, hv_latex, hv_markdown
from kanx.records import seal

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDS = FIXTURES / "records"
EXPECTED = FIXTURES / "expected"
PUBLISHED = FIXTURES / "concrete_published.csv"  # copy of shared/calibration/concrete_published.csv


# --- hypervolume ------------------------------------------------------------------------


def grid_hypervolume(points, ref) -> float:
    """Exact HV by brute force: split space at every coordinate, sum the dominated cells."""
    points = np.asarray(points, dtype=float)
    ref = np.asarray(ref, dtype=float)
    axes = [np.unique(np.append(points[:, k][points[:, k] < ref[k]], ref[k])) for k in range(len(ref))]
    total = 0.0
    for idx in itertools.product(*(range(len(a) - 1) for a in axes)):
        lower = np.array([axes[k][i] for k, i in enumerate(idx)])
        if (points <= lower).all(axis=1).any():
            total += np.prod([axes[k][i + 1] - axes[k][i] for k, i in enumerate(idx)])
    return float(total)


def test_hypervolume_hand_computed_3d():
    # Boxes to ref (4, 4, 4): A 3*3*1 = 9, B 2*1*3 = 6, C 1*2*2 = 4; pairwise overlaps 2, 2, 2;
    # triple overlap [3,4]^3 = 1. Union = 9 + 6 + 4 - 6 + 1 = 14.
    a, b, c = (1, 1, 3), (2, 3, 1), (3, 2, 2)
    assert hypervolume([a], (4, 4, 4)) == pytest.approx(9)
    assert hypervolume([a, b], (4, 4, 4)) == pytest.approx(13)
    assert hypervolume([a, b, c], (4, 4, 4)) == pytest.approx(14)
    # A dominated point, a point beyond the reference and a non-finite one change nothing.
    assert hypervolume([a, b, c, (2, 2, 3), (5, 0, 0), (np.inf, 0, 0)], (4, 4, 4)) == pytest.approx(14)
    assert hypervolume([], (4, 4, 4)) == 0.0


def test_hypervolume_matches_brute_force_on_random_fronts():
    rng = np.random.default_rng(7)
    for trial in range(25):
        n = int(rng.integers(1, 9))
        points = rng.integers(0, 6, size=(n, 3)).astype(float) if trial % 2 else rng.random((n, 3))
        ref = points.max(axis=0) * 1.1 + 0.05
        assert hypervolume(points, ref) == pytest.approx(grid_hypervolume(points, ref), rel=1e-12)


def test_pareto_front():
    points = [(1, 5, 1), (2, 2, 2), (3, 3, 3), (1, 5, 1), (0, 9, 9)]
    assert pareto_front(points).tolist() == [True, True, False, True, True]


def medians_frame(rows) -> pd.DataFrame:
    """Seed-median rows (dataset, condition, beta, rmse, edges, depth) as seed_medians gives."""
    df = pd.DataFrame(rows, columns=["dataset", "condition", "beta", "rmse_median", "edges_median", "depth_median"])
    df["family"] = df["dataset"].map(lambda d: "nguyen" if d.startswith("nguyen_") else d)
    return df


def toy_problem(dataset: str, scale: float, skip: tuple[str, ...] = ()):
    """All 8 conditions; the Baseline holds the largest RMSE and F the most edges."""
    rows = [(dataset, "Baseline", 0.0, 3.0 * scale, 100, 3), (dataset, "F", 0.0, 2.0 * scale, 160, 3)]
    for i, condition in enumerate(GATED):
        if condition in skip:
            continue
        rows += [
            (dataset, condition, 0.001, (1.5 + 0.1 * i) * scale, 80 - 5 * i, 3),
            (dataset, condition, 0.01, (2.0 + 0.05 * i) * scale, 40 - 4 * i, 2 - (i % 2)),
        ]
    return rows


def test_reference_point_is_over_all_conditions_including_baseline_and_f():
    medians = medians_frame(toy_problem("concrete", 1.0))
    detail = condition_hypervolumes(medians)
    ref = detail[["ref_rmse", "ref_edges", "ref_depth"]].iloc[0].to_numpy()
    np.testing.assert_allclose(ref, [1.1 * 3.0, 1.1 * 160, 1.1 * 3])  # Baseline RMSE, F edges
    ex = medians[medians["condition"] == "EX"][["rmse_median", "edges_median", "depth_median"]]
    raw = detail.set_index("condition")["hv"]
    assert raw["EX"] == pytest.approx(grid_hypervolume(ex.to_numpy(float), ref))


def test_normalization_by_best_gated_condition_and_dashes_for_ungated():
    medians = medians_frame(toy_problem("concrete", 1.0))
    detail = condition_hypervolumes(medians).set_index("condition")
    gated = detail.loc[list(GATED), "hv"]
    np.testing.assert_allclose(detail.loc[list(GATED), "hv_norm"], gated / gated.max())
    assert detail.loc[["Baseline", "F"], "hv_norm"].isna().all()
    assert detail.loc[["Baseline", "F"], "hv"].gt(0).all()  # computed, just not shown
    table = hv_table(medians)
    assert table.loc[list(GATED), "concrete"].max() == pytest.approx(1.0)
    md = hv_markdown(table)
    assert re.search(r"^\| Baseline +\| +– +\| +– +\|$", md, re.M)
    assert r"\textbf{1.000}" in hv_latex(table)
    assert hv_csv(table).splitlines()[1] == "Baseline,,"


def test_nguyen_normalized_per_problem_then_averaged():
    # Problem F2's RMSEs are 1000x F1's: pooled raw HVs would be dominated by F2.
    medians = medians_frame(toy_problem("nguyen_f1", 1.0) + toy_problem("nguyen_f2", 1000.0))
    medians.loc[(medians["dataset"] == "nguyen_f2") & (medians["condition"] == "EX"), "edges_median"] += 30
    per_problem = {}
    for dataset in ("nguyen_f1", "nguyen_f2"):
        mine = medians[medians["dataset"] == dataset]
        ref = 1.1 * mine[["rmse_median", "edges_median", "depth_median"]].to_numpy(float).max(axis=0)
        hv = {
            c: grid_hypervolume(
                mine.loc[mine["condition"] == c, ["rmse_median", "edges_median", "depth_median"]].to_numpy(float),
                ref,
            )
            for c in GATED
        }
        per_problem[dataset] = {c: v / max(hv.values()) for c, v in hv.items()}
    table = hv_table(medians)
    problems = hv_problem_table(medians)
    for c in GATED:
        expected = (per_problem["nguyen_f1"][c] + per_problem["nguyen_f2"][c]) / 2
        assert table.loc[c, "nguyen"] == pytest.approx(expected)
        assert problems.loc[c, "nguyen_f2"] == pytest.approx(per_problem["nguyen_f2"][c])
        assert problems.loc[c, "mean"] == pytest.approx(expected)
    assert list(table.columns) == ["nguyen", "mean"]
    assert table.loc[["Baseline", "F"]].isna().all().all()


def test_hv_mean_column_and_missing_values_are_not_averaged_away():
    rows = toy_problem("nguyen_f1", 1.0) + toy_problem("nguyen_f2", 2.0, skip=("EF",)) + toy_problem("ikeda", 0.1)
    table = hv_table(medians_frame(rows))
    assert list(table.columns) == ["nguyen", "ikeda", "mean"]
    assert math.isnan(table.loc["EF", "nguyen"]) and math.isnan(table.loc["EF", "mean"])
    assert table.loc["EX", "mean"] == pytest.approx((table.loc["EX", "nguyen"] + table.loc["EX", "ikeda"]) / 2)
    md = hv_markdown(table)
    assert re.search(r"^\| EF +\| +missing +\| +[0-9.]+ +\| +missing +\|$", md, re.M)
    assert [c.strip() for c in md.splitlines()[0].strip("|").split("|")] == ["Condition", "Nguyen", "Ikeda", "Mean"]


# --- loading and statuses -----------------------------------------------------------------


def write_record(root: Path, rel: str, done: bool = True, **fields) -> Path:
    record = {
        "schema_version": 1,
        "dataset": "concrete",
        "family": "concrete",
        "condition": "E",
        "beta": 0.01,
        "seed": 0,
        "status": "ok",
        "metrics": {"test_rmse": 5.0, "contributing_edges": 50, "depth": 2},
        "git_commit": "abc",
    }
    record.update(fields)
    folder = root / rel
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(json.dumps(record))
    if done:
        seal(folder)
    return folder


def test_load_runs_skips_records_without_done_and_unreadable_ones(tmp_path):
    write_record(tmp_path, "a")
    write_record(tmp_path, "b", done=False, seed=1)
    write_record(tmp_path, "c", condition="Z", seed=2)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "record.json").write_text("{not json")
    seal(tmp_path / "d")
    write_record(tmp_path, "e", condition="Baseline", beta=None, seed=3)
    runs = load_runs(tmp_path)
    assert len(runs) == 2
    assert runs["condition"].tolist() == ["Baseline", "E"]
    assert runs.loc[runs["condition"] == "Baseline", "beta"].tolist() == [0.0]  # null beta of Baseline
    skipped = dict(runs.attrs["skipped"])
    assert skipped["b/record.json"] == "no done marker"
    assert skipped["c/record.json"].startswith("unreadable record: condition 'Z'")
    assert skipped["d/record.json"].startswith("unreadable record")


def test_a_record_changed_after_its_run_sealed_it_does_not_count(tmp_path):
    """The tables count what a run wrote: a record edited after its done marker vouched for it
    (here a better RMSE typed in) is skipped with the reason, until it is sealed again."""
    from kanx.records import seal

    kept, edited = write_record(tmp_path, "a"), write_record(tmp_path, "b", seed=1)
    for folder in (kept, edited):
        seal(folder)  # the done marker now holds the record's sha256, as a run writes it
    record = json.loads((edited / "record.json").read_text())
    record["metrics"]["test_rmse"] = 0.5
    (edited / "record.json").write_text(json.dumps(record))
    runs = load_runs(tmp_path)
    assert runs["seed"].tolist() == [0]
    (reason,) = [why for path, why in runs.attrs["skipped"] if path == "b/record.json"]
    assert reason.startswith("not counted: b/record.json is corrupt: its sha256 differs"), reason
    seal(edited)  # a deliberate change, vouched for
    assert sorted(load_runs(tmp_path)["seed"].tolist()) == [0, 1]


def test_duplicate_records_newest_done_marker_wins(tmp_path):
    old = write_record(tmp_path, "sweep1/run", status="failed", metrics={})
    new = write_record(tmp_path, "sweep0/run")  # sorts first, but its marker is newer
    os.utime(old / "done", ns=(1_000_000_000, 1_000_000_000))
    os.utime(new / "done", ns=(2_000_000_000, 2_000_000_000))
    runs = load_runs(tmp_path)
    assert runs.set_index("path")["superseded"].to_dict() == {"sweep0/run/record.json": False,
                                                              "sweep1/run/record.json": True}
    medians = seed_medians(runs, complete=False)
    assert medians[["n_used", "n_total", "n_failed"]].iloc[0].tolist() == [1, 1, 0]


@pytest.fixture(scope="module")
def fixture_runs() -> pd.DataFrame:
    return load_runs(RECORDS)


@pytest.fixture(scope="module")
def fixture_medians(fixture_runs) -> pd.DataFrame:
    return seed_medians(fixture_runs)


def test_fixture_statuses_are_kept_and_counted(fixture_runs, fixture_medians):
    runs = fixture_runs
    assert len(runs) == 164 and runs.attrs["skipped"] == [
        ("concrete/EFX/beta=0.001,seed=2/record.json", "no done marker")]
    assert runs["status"].value_counts().to_dict() == {"ok": 161, "collapsed": 1, "diverged": 1, "failed": 1}
    m = fixture_medians.set_index(["dataset", "condition", "beta"])
    assert m.loc[("concrete", "E", 0.01), ["n_used", "n_total", "n_diverged"]].tolist() == [2, 3, 1]
    assert m.loc[("ikeda", "Baseline", 0.0), ["n_used", "n_total", "n_failed"]].tolist() == [2, 3, 1]
    collapsed = m.loc[("nguyen_f1", "EFX", 0.01)]
    assert collapsed["n_collapsed"] == 1 and collapsed["edges_min"] == 0 and collapsed["rmse_max"] == 0.9
    assert m.loc[("ikeda", "X", 0.01), "rmse_max"] == np.inf  # ok run, rollout RMSE not finite
    assert m.loc[("concrete", "EX", 0.01), "n_total"] == 0  # the missing cell is kept
    assert m.loc[("concrete", "EFX", 0.001), "n_total"] == 2  # the record without done is not


def test_seed_medians_match_an_independent_computation_from_the_json():
    cells: dict[tuple, list[dict]] = {}
    for path in RECORDS.rglob("record.json"):
        if not (path.parent / "done").exists():
            continue
        r = json.loads(path.read_text())
        cells.setdefault((r["dataset"], r["condition"], float(r["beta"] or 0.0)), []).append(r)
    medians = seed_medians(load_runs(RECORDS)).set_index(["dataset", "condition", "beta"])
    for key, records in cells.items():
        usable = [r["metrics"] for r in records if r["status"] in ("ok", "collapsed")]
        rmse = [math.inf if m["test_rmse"] is None else m["test_rmse"] for m in usable]
        row = medians.loc[key]
        assert (row["n_used"], row["n_total"]) == (len(usable), len(records))
        assert row["rmse_median"] == statistics.median(rmse)
        assert row["edges_median"] == statistics.median(m["contributing_edges"] for m in usable)
        assert (row["depth_min"], row["depth_max"]) == (min(m["depth"] for m in usable),
                                                        max(m["depth"] for m in usable))
    assert len(medians) == len(cells) + 1  # + the missing cell


def test_expected_grid_uses_the_family_union_of_gated_betas(fixture_runs):
    runs = fixture_runs[~((fixture_runs["dataset"] == "nguyen_f2") & (fixture_runs["beta"] == 0.01))]
    grid = expected_grid(runs)
    f2 = grid[grid["dataset"] == "nguyen_f2"]
    assert len(f2) == 2 + 6 * 2  # beta 0.01 is still expected for F2 (seen in F1)
    medians = seed_medians(runs)
    assert (medians.loc[(medians["dataset"] == "nguyen_f2") & (medians["beta"] == 0.01), "n_total"] == 0).all()


def test_log_ratios_pairing_and_sem(fixture_runs):
    ratios = log_ratios(fixture_runs, "test_rmse")
    r = ratios.set_index(["dataset", "condition", "beta", "seed"])
    base = fixture_runs[(fixture_runs["condition"] == "Baseline")].set_index(["dataset", "seed"])["test_rmse"]
    run = fixture_runs.set_index(["dataset", "condition", "beta", "seed"])["test_rmse"]
    key = ("concrete", "EF", 0.001, 1)
    assert r.loc[key, "log_ratio"] == pytest.approx(math.log10(base[("concrete", 1)] / run[key]))
    assert r.loc[("ikeda", "F", 0.0, 2), "pairing"] == "baseline not usable"  # failed baseline seed
    assert r.loc[("concrete", "E", 0.01, 1), "pairing"] == "run not usable"  # diverged
    assert r.loc[("ikeda", "X", 0.01, 0), "pairing"] == "non-finite"  # RMSE inf
    edges = log_ratios(fixture_runs, "contributing_edges").set_index(["dataset", "condition", "beta", "seed"])
    assert edges.loc[("nguyen_f1", "EFX", 0.01, 0), "pairing"] == "non-finite"  # collapsed: 0 edges
    assert r.loc[("nguyen_f1", "EFX", 0.01, 0), "pairing"] == "paired"  # its RMSE is real

    summary = log_ratio_summary(ratios, by="family").set_index(["panel", "condition", "beta"])
    pooled = ratios[(ratios["family"] == "nguyen") & (ratios["condition"] == "EF") & (ratios["beta"] == 0.001)]
    values = pooled["log_ratio"].to_numpy()
    cell = summary.loc[("nguyen", "EF", 0.001)]
    assert cell["n_pairs"] == 6 and cell["mean"] == pytest.approx(values.mean())
    assert cell["sem"] == pytest.approx(values.std(ddof=1) / math.sqrt(6))
    one = summary.loc[("ikeda", "X", 0.01)]
    assert (one["n_pairs"], one["n_runs"]) == (1, 3) and math.isnan(one["sem"])
    assert list(summary.index.get_level_values(0).unique()) == ["nguyen", "ikeda", "concrete"]


def test_absolute_table_marks(fixture_medians):
    table = absolute_table(fixture_medians, "concrete")
    assert table["condition"].tolist()[:4] == ["Baseline", "F", "X", "X"]
    flagged = table.set_index(["condition", "beta"])
    assert flagged.loc[("EF", 0.001), "rmse_bold"] and flagged["rmse_bold"].sum() == 1
    assert flagged.loc[("F", 0.0), "rmse_italic"] and not flagged.loc[("X", 0.01), "rmse_italic"]
    assert not flagged.loc[("Baseline", 0.0), "rmse_italic"]
    md = absolute_markdown(table)
    assert "| EF       | 0.001 | ***4.43 [4.21, 4.60]*** |" in md
    assert "|          | 0.01  | missing                 | missing        | missing  | 0/0 |" in md

    # all runs of a cell diverged: n/a, with its count
    runs = load_runs(RECORDS)
    runs.loc[(runs["dataset"] == "concrete") & (runs["condition"] == "E") & (runs["beta"] == 0.01),
             ["status", "usable"]] = [
        "diverged",
        False,
    ]
    md = absolute_markdown(absolute_table(seed_medians(runs), "concrete"))
    assert "|          | 0.01  | n/a                     | n/a            | n/a      | 0/3 |" in md


def test_log_ratio_figure_is_readable(fixture_runs):
    ratios = log_ratios(fixture_runs, "test_rmse"), log_ratios(fixture_runs, "contributing_edges")
    rmse, edges = (log_ratio_summary(r) for r in ratios)
    fig = log_ratio_figure(rmse, edges, ["nguyen", "ikeda", "concrete"], family_label)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 6
    assert [ax.get_title() for ax in axes[:3]] == ["Nguyen", "Ikeda", "Concrete"]
    assert "RMSE" in axes[0].get_ylabel() and "edges" in axes[3].get_ylabel()
    assert [t.get_text() for t in axes[0].get_xticklabels()] == list(CONDITIONS[1:])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["β = 0", "β = 0.001", "β = 0.01"]
    assert any(line.get_ydata()[0] == 0 for line in axes[0].get_lines())  # the zero line


def test_pareto_runs_are_the_non_dominated_runs_of_each_condition(fixture_runs):
    front = pareto_runs(fixture_runs, "concrete")
    runs = fixture_runs[(fixture_runs["dataset"] == "concrete") & fixture_runs["usable"]]
    for condition in CONDITIONS:
        mine = runs[runs["condition"] == condition]
        points = list(zip(mine["test_rmse"], mine["contributing_edges"], mine["path"], strict=True))
        expected = {p for r, e, p in points
                    if not any(r2 <= r and e2 <= e and (r2 < r or e2 < e) for r2, e2, _ in points)}
        assert set(front.loc[front["condition"] == condition, "path"]) == expected, condition
    assert front["contributing_edges"].gt(0).all() and front["condition"].tolist()[:2] == ["Baseline", "F"]
    # the collapsed run (0 edges, RMSE 0.9) is on its condition's front; ikeda X's non-finite RMSE is not
    f1 = pareto_runs(fixture_runs, "nguyen_f1")
    assert (f1.loc[f1["contributing_edges"] == 0, ["condition", "test_rmse", "depth"]].values.tolist()
            == [["EFX", 0.9, 0]])
    assert np.isfinite(pareto_runs(fixture_runs, "ikeda")["test_rmse"].astype(float)).all()


def test_pareto_figure_legend_holds_the_normalized_hv(fixture_runs, fixture_medians):
    detail = condition_hypervolumes(fixture_medians)
    for dataset in ("concrete", "nguyen_f1"):
        hv = detail[detail["dataset"] == dataset].set_index("condition")["hv_norm"].to_dict()
        fig = pareto_figure(pareto_runs(fixture_runs, dataset), hv, dataset, unit="MPa")
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        assert labels[0] == "Baseline HV –" and labels[1] == "F        HV –"
        assert labels[2:] == [f"{c:<8} HV {hv[c]:.3f}" for c in GATED]
        assert max(hv[c] for c in GATED) == 1.0 and "HV 1.000" in labels[-1]
        depths = [t.get_text() for t in fig.legends[1].get_texts()]
        ax = fig.axes[0]
        assert ax.get_xlabel() == "contributing edges" and ax.get_ylabel() == "test RMSE (MPa)"
        if dataset == "nguyen_f1":  # the collapsed run sits on the top edge, not at 0.9
            assert depths[0] == "depth 0" and ax.get_ylim()[1] < 0.1
            assert any("RMSE off scale: EFX 0.9" in t.get_text() for t in ax.texts)
        else:
            assert depths == ["depth 1", "depth 2", "depth 3"]


# --- published values ---------------------------------------------------------------------


def test_hv_from_published_medians_reproduces_the_papers_hv():
    published = read_published(PUBLISHED)
    assert len(published) == 44 and published.loc[published["condition"] == "Baseline", "beta"].item() == 0.0
    recomputed = hv_from_published(published)
    paper = PAPER_HV["concrete"]
    for condition in ("X", "FX", "E", "EX", "EFX"):
        assert recomputed[condition] == pytest.approx(paper[condition], abs=0.01)
    # Known: the paper's own rounded EF medians give 0.816, not its published 0.935.
    assert recomputed["EF"] == pytest.approx(0.816, abs=0.001)


def test_compare_hv_and_published_hv_file(tmp_path):
    path = tmp_path / "hv.csv"
    path.write_text("condition,hv\nEX,0.9\nEFX,1.0\n")
    published = read_published_hv(path)
    assert published == {"EX": 0.9, "EFX": 1.0}
    table = compare_hv({"EX": 0.96, "EFX": 1.0, "E": 0.2}, published, tol=0.05).set_index("condition")
    assert table.loc["EX", "diff"] == pytest.approx(0.06) and not table.loc["EX", "within_tol"]
    assert table.loc["EFX", "within_tol"] and math.isnan(table.loc["E", "published"])
    (tmp_path / "bad.csv").write_text("cond,value\nEX,1\n")
    with pytest.raises(ValueError, match="condition,hv"):
        read_published_hv(tmp_path / "bad.csv")


def test_compare_published_side_by_side(fixture_medians):
    published = read_published(PUBLISHED)
    table = compare_published(fixture_medians, published, "concrete").set_index(["condition", "beta"])
    row = table.loc[("X", 0.001)]
    assert row["rmse_published"] == 5.25 and row["rmse_diff"] == pytest.approx(row["rmse_reproduced"] - 5.25)
    assert row["rmse_in_range"] is True  # 5.214 in [4.81, 6.75]
    assert row["edges_in_range"] is False  # 183 outside [182, 182]
    assert math.isnan(table.loc[("EX", 0.01), "rmse_reproduced"])  # missing here, published there
    assert pd.isna(table.loc[("EX", 0.01), "rmse_in_range"])
    assert table.index.get_level_values(0).unique().tolist() == list(CONDITIONS)


def test_a_single_median_is_read_against_the_published_range_as_the_fidelity_table_reads_it():
    from kanx.analyze.published import in_published_range, paper_published

    published = paper_published("concrete")  # RMSE printed with 2 decimals: X at 0.001 is [4.81, 6.75]
    assert in_published_range(published, "X", 0.001, "rmse", 4.806)  # prints as 4.81
    assert not in_published_range(published, "X", 0.001, "rmse", 4.804)
    assert not in_published_range(published, "X", 0.001, "edges", 183.0)  # [182, 182]
    assert in_published_range(published, "Baseline", 0.0, "depth", 3.0)
    assert in_published_range(published, "X", 0.123, "rmse", 5.0) is None  # no such published cell
    assert in_published_range(published, "X", 0.001, "rmse", math.nan) is None
    medians = pd.DataFrame({"dataset": "concrete", "condition": ["X"], "beta": [0.001], "n_used": 3, "n_total": 3,
                            "rmse_median": [4.806], "rmse_min": 0.0, "rmse_max": 0.0, "edges_median": [183.0],
                            "edges_min": 0.0, "edges_max": 0.0, "depth_median": [2.0], "depth_min": 0.0,
                            "depth_max": 0.0})
    row = compare_published(medians, published, "concrete").set_index(["condition", "beta"]).loc[("X", 0.001)]
    assert (row["rmse_in_range"], row["edges_in_range"]) == (True, False)  # the same reading, vectorized


# --- golden report and CLI ----------------------------------------------------------------


def text_outputs(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.suffix in (".md", ".csv", ".tex")}


@pytest.mark.committed
def test_golden_report(tmp_path):
    args = [str(RECORDS), "--out", str(tmp_path), "--formats", "png"]
    assert main([*args, "--published", str(PUBLISHED), "--published-dataset", "concrete"]) == 0
    assert text_outputs(tmp_path) == text_outputs(EXPECTED)
    for rel in sorted(text_outputs(EXPECTED)):
        assert (tmp_path / rel).read_text() == (EXPECTED / rel).read_text(), f"{rel} differs from the golden file"
    assert (tmp_path / "figures" / "log_ratios.png").stat().st_size > 10_000
    assert (tmp_path / "figures" / "log_ratios_nguyen.png").stat().st_size > 10_000
    for dataset in ("nguyen_f1", "nguyen_f2", "ikeda", "concrete"):
        assert (tmp_path / "figures" / f"pareto_{dataset}.png").stat().st_size > 10_000
        assert f"](figures/pareto_{dataset}.png)" in (tmp_path / "report.md").read_text()


def test_report_lists_every_condition_per_dataset_and_marks_missing():
    report = (EXPECTED / "report.md").read_text()
    absolute = report.split("## Absolute results", 1)[1].split("\n## ", 1)[0]
    sections = re.split(r"^### ", absolute, flags=re.M)[1:]
    assert [s.split("\n")[0] for s in sections] == ["Nguyen F1", "Nguyen F2", "Ikeda", "Concrete"]
    beside = re.findall(r"^### (.*) beside the paper$", report, flags=re.M)
    assert beside == ["Nguyen F1", "Nguyen F2", "Ikeda", "Concrete"]
    for section in sections:
        for condition in CONDITIONS:
            assert re.search(rf"^\| {condition} +\|", section, re.M), (condition, section[:20])
    assert "| Concrete | EX    | 0.01 | **missing** |" in report
    assert "- `concrete/EFX/beta=0.001,seed=2/record.json`: no done marker" in report
    assert "- `f00dfeed`: 122 runs" in report and "- `c0ffee00`: 42 runs" in report


@pytest.mark.slow
def test_cli_writes_report_with_working_links(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "kanx.analyze", str(RECORDS), "--out", str(out), "--formats", "png,pdf"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"report: {out / 'report.md'}" in done.stdout
    report = (out / "report.md").read_text()
    links = re.findall(r"\]\(([^)]+)\)", report)
    assert {"figures/log_ratios.png", "figures/log_ratios.pdf", "tables/hypervolume.tex"} <= set(links)
    for link in links:
        assert (out / link).is_file(), link
    assert "Comparison with published values" not in report


def test_cli_rejects_an_empty_root(tmp_path, capsys):
    assert main([str(tmp_path)]) == 1
    assert "no completed record.json" in capsys.readouterr().err


@pytest.mark.slow
def test_analysis_imports_no_torch_hydra_or_omegaconf():
    code = "import sys, kanx.analyze.__main__; print(sorted({'torch', 'hydra', 'omegaconf'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(("width", "condition", "edges", "depth"), [
    ("[13, 13, 13, 1]", "Baseline", 13 * 13 * 2 + 13, 3),
    ("[1, 5, 5, 5, 1]", "F", 5 + 6 * 5 + 11 * 5 + 16, 4),  # layer l sees the input and every earlier layer
    ("[2, 4, 4, 4, 2]", "Baseline", 8 + 16 + 16 + 8, 4),
])
def test_architecture_edges_count_every_trunk_and_forward_edge(width, condition, edges, depth):
    assert architecture_edges(width, condition) == (edges, depth)


def test_ungated_runs_whose_structure_differs_from_the_architecture_are_flagged(tmp_path):
    config = {"model": {"width": [1, 5, 5, 5, 1]}}
    for seed, edges in enumerate((60, 60, 59)):  # seed 2 lost an edge: impossible without gates
        write_record(tmp_path, f"nguyen_f1/Baseline/s{seed}", dataset="nguyen_f1",
                     family="nguyen", condition="Baseline",
                     beta=0.0, seed=seed, config=config,
                     metrics={"test_rmse": 0.1, "contributing_edges": edges, "depth": 4})
    write_record(tmp_path, "nguyen_f1/F/s0", dataset="nguyen_f1", family="nguyen", condition="F", beta=0.0, seed=0,
                 config=config, metrics={"test_rmse": 0.1, "contributing_edges": 106, "depth": 4})
    check = ungated_structure_check(load_runs(tmp_path)).set_index("condition")
    assert check.loc["Baseline", "n_differ"] == 1 and check.loc["F", "n_differ"] == 0
    report = build_artifacts(load_runs(tmp_path), formats=()).report
    assert "1 DIFFER" in report and "cell(s) have runs whose structure differs" in report


# --- beside the paper -----------------------------------------------------------------------


def paper_cells(tmp_path: Path) -> pd.DataFrame:
    """Concrete Baseline and F at the paper's medians, EFX at beta 0.01 outside its range, and a
    user's dataset the paper does not have."""
    for seed in range(3):
        for condition, beta, rmse, edges, depth in (("Baseline", None, 4.91, 351, 3), ("F", None, 4.82, 546, 3),
                                                    ("EFX", 0.01, 9.99, 64, 2)):
            write_record(tmp_path, f"concrete/{condition}/s{seed}", condition=condition, beta=beta, seed=seed,
                         metrics={"test_rmse": rmse, "contributing_edges": edges, "depth": depth})
        write_record(tmp_path, f"mydata/EFX/s{seed}", dataset="mydata", family="mydata", condition="EFX", beta=0.01,
                     seed=seed)
    return load_runs(tmp_path)


def test_the_paper_is_set_beside_every_dataset_it_has_and_a_users_dataset_gets_no_columns(tmp_path):
    art = build_artifacts(paper_cells(tmp_path), formats=())
    table = pd.read_csv(io_text(art.texts["tables/published_concrete.csv"]))
    efx = table[(table["condition"] == "EFX") & (table["beta"] == 0.01)].iloc[0]
    assert (efx["rmse_reproduced"], efx["rmse_published"], efx["rmse_in_range"]) == (9.99, 4.87, False)
    assert efx["edges_in_range"] and efx["depth_in_range"]
    assert "tables/published_mydata.csv" not in art.texts and "### mydata beside the paper" not in art.report
    fidelity = pd.read_csv(io_text(art.texts["tables/fidelity.csv"]))
    assert list(fidelity["dataset"]) == ["concrete", "*", "*"]  # the dataset, its family, all; mydata has no row
    row = fidelity.iloc[0]
    assert (row["cells"], row["rmse_in"], row["edges_in"], row["depth_in"], row["ungated_cells"],
            row["ungated_exact"]) == (3, 2, 3, 3, 2, 2)
    assert "| **Concrete** |     3 |     2/3 (67%) |" in art.texts["tables/fidelity.md"]
    assert ("**9.99**" in art.texts["tables/published_concrete.md"]
            and "4.87 [4.64, 5.79]" in art.texts["tables/published_concrete.md"])
    assert "## Beside the paper" not in build_artifacts(paper_cells(tmp_path / "again"), formats=(), paper=False).report


def test_a_median_is_compared_at_the_precision_the_paper_prints():
    published = pd.DataFrame([{"condition": "X", "beta": 0.1, "rmse_median": 0.0001,
                               "rmse_min": 0.0001, "rmse_max": 0.0003,
                               **{f"{p}_{s}": 1.0 for p in ("edges", "depth") for s in ("median", "min", "max")}}])
    medians = published.rename(columns=lambda c: c).assign(dataset="nguyen_f1", n_used=10,
                                                           n_total=10, rmse_median=0.00007)
    # 7e-05 < 0.0001 at full precision
    assert not compare_published(medians, published, "nguyen_f1")["rmse_in_range"].iloc[0]
    published.attrs["decimals"] = {"rmse_median": 4}
    assert compare_published(medians, published, "nguyen_f1")["rmse_in_range"].iloc[0]  # the paper prints it as 0.0001


def test_the_hv_table_stands_beside_the_papers_with_its_mean_and_ranking():
    from kanx.analyze.published import hv_side_by_side, paper_hv

    published = paper_hv()
    mine = published.rename(columns={"mean": "x"}).drop(columns="x").reindex(CONDITIONS)
    mine.loc["EX", "concrete"] = 0.5
    mine["mean"] = mine.mean(axis=1)
    side = hv_side_by_side(mine, published).set_index("condition")
    assert side.attrs["all_families"] and side.loc["EX", "concrete_diff"] == pytest.approx(0.5 - 0.999)
    assert side.loc["EFX", "mean_published"] == 0.949  # the paper's Mean as printed
    assert side.loc["EX", "rank_published"] == 1 and side.loc["EX", "rank_reproduced"] > 1
    only_two = hv_side_by_side(mine[["ikeda", "concrete"]].assign(mean=0.0), published).set_index("condition")
    assert (not only_two.attrs["all_families"]
            and only_two.loc["X", "mean_published"] == pytest.approx((0.996 + 0.396) / 2))


def io_text(text: str):
    import io

    return io.StringIO(text)


def test_the_rollout_horizon_reads_any_rung_of_the_curve_from_the_same_records(tmp_path):
    curve = {"1": 0.001, "10": 0.1, "500": 0.8, "1600": 0.86}
    config = {"dataset": {"horizon": 10, "n_rollouts": None}}
    base = {"dataset": "ikeda", "family": "ikeda", "condition": "Baseline", "beta": 0.0,
            "n_test": 1600, "config": config}
    write_record(tmp_path, "ikeda/with_curve", seed=0, **base,
                 metrics={"test_rmse": 0.1, "test_rmse_one_step": 0.001, "rollout_rmse": curve,
                          "contributing_edges": 48, "depth": 4})
    write_record(tmp_path, "ikeda/before_curve", seed=1, **base,
                 metrics={"test_rmse": 0.2, "test_rmse_one_step": 0.002, "contributing_edges": 48, "depth": 4})
    as_recorded = load_runs(tmp_path).set_index("seed")["test_rmse"]
    assert as_recorded.to_dict() == {0: 0.1, 1: 0.2}
    # its own plan
    assert load_runs(tmp_path, rollout_horizon=10).set_index("seed")["test_rmse"].to_dict() == {0: 0.1, 1: 0.2}
    whole = load_runs(tmp_path, rollout_horizon="whole")
    assert whole["test_rmse"].tolist() == [0.86]
    (skipped_path, why), = whole.attrs["skipped"]
    assert skipped_path == "ikeda/before_curve/record.json" and "no multi-step RMSE at rollouts of 1600 steps" in why
    assert load_runs(tmp_path, rollout_horizon=500)["test_rmse"].tolist() == [0.8]
    report = build_artifacts(whole, formats=()).report
    assert "read at one rollout over the whole test segment (`--rollout-horizon whole`)" in report


def test_latex_tables_escape_a_users_dataset_name(tmp_path):
    for seed in range(2):
        for condition, beta in (("Baseline", None), ("EFX", 0.01)):
            write_record(tmp_path, f"my_data/{condition}/s{seed}", dataset="my_data", family="my_data",
                         condition=condition, beta=beta, seed=seed)
    art = build_artifacts(load_runs(tmp_path), formats=())
    hv = art.texts["tables/hypervolume.tex"]
    assert r"my\_data" in hv and "my_data &" not in hv.replace("% ", "%")
    assert r"\%" in latex_escape("5%")
    assert (latex_escape(r"a_b&c$d#e{f}~^\\")
            == r"a\_b\&c\$d\#e\{f\}\textasciitilde{}\textasciicircum{}\textbackslash{}\textbackslash{}")
    assert family_label("sin_xy2", latex=True) == r"$\sin(x+y^2)$"  # the shipped names stay written LaTeX
