"""scripts/studies/reading_spread.py: the spread of the dynamical readings under last-bit perturbations."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import load_script

from kanx.data import dynamics, load_dataset


@pytest.fixture(scope="module")
def spread():
    return load_script("studies/reading_spread.py")


def test_ulp_draws_move_every_coordinate_one_float32_ulp_up_or_down(spread):
    x = torch.tensor([[0.5, -1.25], [3.0e-3, 7.0]], dtype=torch.float64) + 1e-12
    nudged = spread.ulp_nudged(x, draws=64)
    x32 = x.to(torch.float32)
    ulp = (torch.nextafter(x32, torch.tensor(float("inf"))) - x32).to(torch.float64)
    assert nudged.shape == (64, 2, 2)
    assert torch.equal((nudged - x).abs(), ulp.expand(64, -1, -1))
    assert ((nudged > x).any(0) & (nudged < x).any(0)).all()  # both directions drawn for every coordinate
    assert torch.equal(nudged, spread.ulp_nudged(x, draws=64))  # a fixed seed: the same draws every time


def test_each_member_of_a_batch_of_draws_reads_its_own_ladder(spread):
    ds = load_dataset("ikeda", data_seed=0, n_test=120)
    truth = lambda x: torch.from_numpy(dynamics.ikeda_map(x.numpy())) * 1.0001  # noqa: E731
    x = torch.stack([ds.x_test, spread.ulp_nudged(ds.x_test, 1)[0]])
    y = ds.y_test.expand(2, -1, -1)
    tiling = spread.tiling_ladder(truth, x, y, "ikeda")
    windows = spread.window_ladder(truth, x, y, tiling["whole"])
    assert list(tiling) == list(windows) == ["1", "2", "5", "10", "20", "50", "100", "whole"]
    for member in range(2):
        alone = spread.tiling_ladder(truth, x[member:member + 1], y[:1], "ikeda")
        expected = {r: float(v[0]) for r, v in alone.items()}
        assert {r: float(v[member]) for r, v in tiling.items()} == pytest.approx(expected)
    assert torch.equal(windows["whole"], tiling["whole"])  # the whole segment is one window


def raw_values(tiling_200: dict, windows_200: dict) -> pd.DataFrame:
    """Three seeds of Ikeda Baseline and F: the given seed value at rung 200 per perturbation
    (every seed the same), 0.9 at the whole segment."""
    rows = []
    for estimator, values in (("tiling", tiling_200), ("windows", windows_200)):
        for condition in ("Baseline", "F"):
            for perturbation, v in values.items():
                for seed in range(3):
                    for rung, value in (("200", v[condition]), ("whole", 0.9)):
                        rows.append({"dataset": "ikeda", "condition": condition, "seed": seed, "estimator": estimator,
                                     "perturbation": perturbation, "rung": rung, "value": value})
    return pd.DataFrame(rows)


def test_spreads_are_ranges_of_the_seed_median_and_the_verdict_follows_the_rule(spread):
    tiling = {"native": {"Baseline": 0.8650, "F": 0.8640}, "ulp 1": {"Baseline": 0.8550, "F": 0.8660},
              "cpu default": {"Baseline": 0.8700, "F": 0.8640}, "record": {"Baseline": 0.8622, "F": 0.8626}}
    windows = {"native": {"Baseline": 0.8640, "F": 0.8618}, "ulp 1": {"Baseline": 0.8645, "F": 0.8620}}
    raw = raw_values(tiling, windows)
    table = spread.summary(raw).set_index(["condition", "estimator", "rung"])
    row = table.loc[("Baseline", "tiling", "200")]
    assert row["seeds"] == "0-2" and row["native_median"] == pytest.approx(0.8650)
    assert row["ulp_spread"] == pytest.approx(0.0100)
    assert row["cpu_spread"] == pytest.approx(0.0078)  # the record counts as a CPU
    assert row["spread"] == pytest.approx(0.0150)
    assert table.loc[("F", "windows", "200"), "spread"] == pytest.approx(0.0002)
    settled = spread.settlings(raw)
    assert "the paper's reading stays the tiling" in spread.verdict(settled, "ikeda")  # the record's 0.8622 is closer
    windows["native"] = {"Baseline": 0.8622, "F": 0.8663}  # the published medians themselves
    assert "would move to windows" in spread.verdict(spread.settlings(raw_values(tiling, windows)), "ikeda")
    text = spread.spread_markdown(raw)
    assert "### ikeda, tiling" in text and "| Baseline | 200 | 0.8650 | 0.8550 | 0.8550 | 0.8700 | 0.8622 |" in text
    assert np.isfinite(table["spread"]).all()


def test_a_capability_worker_contributes_its_native_values_only(spread, monkeypatch):
    """The worker measures like the main pass (the record's values among its rows); only its own
    scoring may count as that CPU's, or each seed's median would mix in the record."""
    rows = [{"seed": 0, "estimator": "tiling", "rung": "200", "perturbation": p, "value": v}
            for p, v in (("record", 0.86), ("native", 0.87))]
    worker = json.dumps({"capability": "DEFAULT", "rows": rows})
    monkeypatch.setattr(spread.subprocess, "run", lambda *a, **k: SimpleNamespace(stdout=worker))
    assert spread.under_capability(Path("results/paper"), "default") == [{**rows[1], "perturbation": "cpu default"}]
