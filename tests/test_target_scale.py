"""scripts/studies/target_scale.py (issue #52): edge departures against the published cells, and
the seed-medians of a study's arms beside the published range."""

import math
from pathlib import Path

import pandas as pd
import pytest
from helpers import load_script


@pytest.fixture(scope="module")
def script():
    return load_script("studies/target_scale.py")


def cells(rows):
    return pd.DataFrame(rows, columns=["condition", "beta", "edges_median"])


def test_edge_departure_averages_log_ratios_over_the_gated_cells_both_tables_have(script):
    ours = cells([("Baseline", None, 27), ("E", 0.0, 27), ("E", 0.001, 26), ("E", 0.1, 24), ("E", 0.5, 3)])
    published = cells([("Baseline", None, 27), ("E", 0.0, 26), ("E", 0.001, 13), ("E", 0.1, 6)])
    value, n = script.edge_departure(ours, published, "E")
    assert n == 2  # beta 0 and the cell only one table has are left out
    assert value == pytest.approx((math.log(2) + math.log(4)) / 2)


def test_edge_departure_is_negative_when_kanx_prunes_harder_and_nan_without_common_cells(script):
    ours = cells([("EF", 0.01, 5)])
    value, n = script.edge_departure(ours, cells([("EF", 0.01, 10)]), "EF")
    assert n == 1 and value == pytest.approx(math.log(0.5))
    value, n = script.edge_departure(ours, cells([("EF", 0.05, 10)]), "EF")
    assert n == 0 and math.isnan(value)


def test_arm_of_is_the_override_folder(script):
    path = Path("root/ecosystem/F/dataset.standardize_targets=False/beta=0.0,seed=3/record.json")
    assert script.arm_of(path) == "dataset.standardize_targets=False"


def test_arm_medians_reads_the_published_range_at_its_printed_precision(script):
    records = pd.DataFrame({"arm": "a", "condition": ["F", "F", "F"], "beta": 0.0, "seed": [0, 1, 2],
                            "paper reading": [0.11597, 0.2, 0.10], "one step": 1e-4, "edges": 54, "depth": 3})
    published = pd.DataFrame({"condition": ["F"], "beta": [None], "rmse_median": [0.1429], "rmse_min": [0.1160],
                              "rmse_max": [0.1920], "edges_median": [54], "depth_median": [3]})
    published.attrs["decimals"] = {"rmse_median": 4}  # as kanx.analyze.published.paper_published reads the file
    row = script.arm_medians(records, published).iloc[0]
    assert row["seeds"] == 3 and row["reading"] == pytest.approx(0.11597)
    assert row["in range"]  # 0.11597 prints as 0.1160, the published minimum
    low = script.arm_medians(records.assign(**{"paper reading": [0.1159, 0.2, 0.1]}), published).iloc[0]
    assert not low["in range"]


def test_edges_at_interpolates_in_log_log_inside_the_gated_range_only(script):
    curve = pd.Series({0.0: 54.0, 0.01: 19.0, 0.1: 10.0})
    assert script.edges_at(curve, 0.01) == pytest.approx(19.0)
    # halfway in log beta between 0.01 and 0.1: the geometric mean of the edges
    assert script.edges_at(curve, 10 ** -1.5) == pytest.approx(math.sqrt(19.0 * 10.0))
    assert math.isnan(script.edges_at(curve, 0.005))  # beta 0 is no anchor: no extrapolation
    assert math.isnan(script.edges_at(curve, 0.2))
