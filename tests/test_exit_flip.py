"""scripts/studies/exit_flip.py (issue #52, pattern 3): each run's exit story read from its
training curve, and the complexity term's pull on exit 0's logit at the lowest pi_0."""

import json
import math

import pandas as pd
import pytest
from helpers import load_script

from kanx.sealing import seal


@pytest.fixture(scope="module")
def script():
    return load_script("studies/exit_flip.py")


def write_run(root, condition, beta, seed, rows):
    """A finished run folder with a curve of (epoch, beta, pi_0, pi_1, exit, lc) rows."""
    run = root / "concrete" / condition / "default" / f"beta={beta},seed={seed}"
    run.mkdir(parents=True)
    curve = pd.DataFrame(rows, columns=["epoch", "beta", "pi_0", "pi_1", "exit", "lc"])
    curve.assign(tau_x=1.0, data_loss=0.01, loss=curve["lc"] / 100).to_csv(run / "metrics.csv", index=False)
    record = {"n_train": 824, "config": {"train": {"complexity_scale": "mdl_batch", "batch_size": 64}}}
    (run / "record.json").write_text(json.dumps(record))
    seal(run, with_model=False)  # a finished run, as kanx.history reads only those
    return run


def late_flip(beta):
    """Exit 1 held from the start; beta comes on at 500; pi_0 falls to 1e-9 at 2000, then exit 0."""
    return [(0, 0.0, 0.3, 0.7, 1, 100.0), (500, beta, 1e-5, 1.0, 1, 197.0), (2000, beta, 1e-9, 1.0, 1, 197.0),
            (3000, beta, 1e-4, 1.0, 1, 197.0), (3500, beta, 1.0, 1e-7, 0, 15.0)]


def test_flip_of_reads_the_final_exit_its_last_change_and_the_lowest_pi0_after_onset(script, tmp_path):
    run = write_run(tmp_path, "X", 0.5, 0, late_flip(0.5))
    story = script.flip_of(run)
    assert (story["exit"], story["last_change"], story["pi0_min_epoch"]) == (0, 3500, 2000)
    assert story["pi_0"] == pytest.approx(1e-9)
    assert story["dl"] == {0: 15.0, 1: 197.0}  # L_C where one exit held all of pi
    assert story["scale"] == pytest.approx(math.log(64) / 64)  # mdl_batch: log n / n at the batch size


def test_the_pull_on_exit_0s_logit_is_beta_s_pi0_times_the_description_length_it_saves(script, tmp_path):
    run = write_run(tmp_path, "X", 0.5, 0, late_flip(0.5))
    story = pd.Series({k: v for k, v in script.flip_of(run).items() if k != "dl"})
    expected = 0.5 * math.log(64) / 64 * 1e-9 * (197.0 - 15.0)
    assert script.gradient_at_low(story, {0: 15.0, 1: 197.0}) == pytest.approx(expected)
    assert math.isnan(script.gradient_at_low(story, {1: 197.0}))  # DL(0) never seen: no reading


def test_flips_tabulates_each_seed_and_reads_exit_0s_length_from_a_seed_that_held_it(script, tmp_path):
    write_run(tmp_path, "X", 0.5, 0, late_flip(0.5))
    stays = [(0, 0.0, 0.3, 0.7, 1, 100.0), (500, 0.5, 1e-5, 1.0, 1, 197.0), (2500, 0.5, 1e-10, 1.0, 1, 197.0)]
    write_run(tmp_path, "X", 0.5, 1, stays)
    table = script.flips(tmp_path, "concrete", conditions=("X",))
    assert table.to_dict("records") == [{
        "condition": "X", "beta": 0.5, "seeds": 2, "exit@last change, per seed": "0@3500 1@0",
        "lowest pi_0 after onset": "5.5e-10", "at epoch": 2250,
        "gradient on logit_0 there / eps": f"{0.5 * math.log(64) / 64 * 5.5e-10 * 182 / 1e-8:.2g}",
        "objective at lowest pi_0 -> at the end, flipped seeds": "1.97 -> 0.15 (1 seeds)"}]  # loss = lc / 100 here
