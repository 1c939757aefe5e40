"""Tuning with Optuna (issue #50): the validation split, optimized_metric, the kanx_optuna sweeper
and its presets (conf/hparams_search). The searches through the CLI start processes and need the
extra kanx[optuna]: they are slow, and skip without it."""

import json
import math
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import torch
from helpers import ROOT, TOY, cli, composed, records, train_run

from kanx.config import config_hash, to_container
from kanx.errors import ConfigError
from kanx.objective import check, check_directions, parse, returned
from kanx.runner import check_jobs

# ------------------------------------------------------------------ the validation split


def test_the_validation_split_of_a_dynamical_system_is_the_end_of_its_training_segment():
    from kanx.data import load_dataset

    whole = load_dataset("ikeda", data_seed=0, n_train=200, n_test=50, horizon=10)
    split = load_dataset("ikeda", data_seed=0, n_train=200, n_test=50, horizon=10, val_fraction=0.2)
    assert (split.n_train, split.n_val) == (160, 40)
    assert torch.equal(split.x_train, whole.x_train[:160]) and torch.equal(split.x_val, whole.x_train[160:])
    assert torch.equal(split.y_val, whole.y_train[160:])
    assert torch.equal(split.x_test, whole.x_test) and torch.equal(split.y_test, whole.y_test)  # not from the test set
    assert split.val_horizon == 10 and split.val_rollout_starts == (0, 10, 20, 30)


def test_the_validation_split_of_a_function_is_drawn_from_its_training_rows_only():
    from kanx.data import load_dataset

    whole = load_dataset("nguyen_f1", data_seed=3, n_train=100, n_test=20)
    split = load_dataset("nguyen_f1", data_seed=3, n_train=100, n_test=20, val_fraction=0.25)
    assert (split.n_train, split.n_val) == (75, 25)
    assert torch.equal(split.x_test, whole.x_test)
    rows = {tuple(r.tolist()) for r in whole.x_train}
    assert {tuple(r.tolist()) for r in torch.cat([split.x_train, split.x_val])} == rows
    assert not torch.equal(split.x_val, whole.x_train[75:])  # drawn, not the last rows
    again = load_dataset("nguyen_f1", data_seed=3, n_train=100, n_test=20, val_fraction=0.25)
    assert torch.equal(again.x_val, split.x_val)  # seeded


def test_no_validation_split_keeps_the_data_and_the_config_hash():
    from kanx.data import data_hash, load_dataset

    assert data_hash(load_dataset("nguyen_f1", data_seed=0)) == data_hash(
        load_dataset("nguyen_f1", data_seed=0, val_fraction=0.0))
    assert data_hash(load_dataset("nguyen_f1", data_seed=0)) != data_hash(
        load_dataset("nguyen_f1", data_seed=0, val_fraction=0.2))
    paper = config_hash(to_container(composed("+condition=EFX", "dataset=nguyen_f1")))
    assert paper == "ec8611879f5952dd"  # tests/test_factors.py: the paper's hash
    assert config_hash(to_container(composed("+condition=EFX", "dataset=nguyen_f1", "dataset.val_fraction=0.0",
                                             "optimized_metric=test_rmse"))) == paper
    assert config_hash(to_container(composed("+condition=EFX", "dataset=nguyen_f1",
                                             "dataset.val_fraction=0.2"))) != paper


@pytest.mark.parametrize("fraction", [-0.1, 1.0, "a"])
def test_a_validation_fraction_outside_0_to_1_is_refused_before_training(tmp_path, fraction):
    with pytest.raises(ConfigError, match=r"dataset.val_fraction=.* must be a number from 0"):
        check_jobs([(composed(f"dataset.val_fraction={fraction}", *TOY), tmp_path)])


def test_a_validation_split_too_small_to_hold_a_row_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="leaves 0 of 128 training rows for validation"):
        check_jobs([(composed("dataset.val_fraction=0.001", *TOY), tmp_path)])


def test_records_carry_validation_metrics_only_with_a_validation_split(tmp_path):
    from kanx.evaluate import rescore

    common = ("+condition=EX", "beta=0.1", *TOY, "train.epochs=2", "train.warmup=1")
    plain = json.loads((train_run(tmp_path / "plain", *common) / "record.json").read_text())
    assert not any(k.startswith("val_") for k in plain["metrics"])
    run_dir = train_run(tmp_path / "val", *common, "dataset.val_fraction=0.25")
    record = json.loads((run_dir / "record.json").read_text())
    assert record["n_train"] == 96 and record["metrics"]["val_rmse"] > 0
    assert record["metrics"]["test_rmse"] != plain["metrics"]["test_rmse"]  # trained on fewer rows
    assert rescore(run_dir)["val_rmse"] == record["metrics"]["val_rmse"]  # kanx.evaluate rebuilds the same split
    ikeda = train_run(tmp_path / "ikeda", "dataset=ikeda", "dataset.n_train=100", "dataset.n_test=40",
                      "dataset.val_fraction=0.2", "+condition=EX", "beta=0.1", "train.epochs=2", "train.warmup=1",
                      "train.batch_size=32", "train.compile=false")
    metrics = json.loads((ikeda / "record.json").read_text())["metrics"]
    assert {"val_rmse", "val_rmse_one_step", "test_rmse", "test_rmse_one_step"} <= set(metrics)


# ------------------------------------------------------------------ optimized_metric


def test_optimized_metric_names_and_directions():
    assert parse(None) is None
    assert parse("val_rmse") == [("val_rmse", "minimize")]
    assert parse(["val_rmse", "exit:max", "depth:min"]) == [("val_rmse", "minimize"), ("exit", "maximize"),
                                                           ("depth", "minimize")]
    with pytest.raises(ConfigError, match="direction 'up' is not one of: min, max"):
        parse("val_rmse:up")
    with pytest.raises(ConfigError, match="names a metric twice"):
        parse(["val_rmse", "val_rmse:max"])
    with pytest.raises(ConfigError, match="must be a metric name or a list of them"):
        parse(3)


def test_a_metric_that_records_lack_is_named_with_the_allowed_ones():
    with pytest.raises(ConfigError, match=r"'val_rmse' needs a validation split: set dataset.val_fraction"):
        check("val_rmse", dynamical=False, validation=False)
    with pytest.raises(ConfigError, match=r"'test_rmse_one_step' is not a metric these records carry; choose from: "
                                          r"test_rmse, train_rmse, val_rmse, contributing_edges"):
        check("test_rmse_one_step", dynamical=False, validation=True)
    check(["val_rmse_one_step", "contributing_edges"], dynamical=True, validation=True)


def test_the_sweepers_directions_must_be_the_objectives(tmp_path):
    check_directions([("val_rmse", "minimize"), ("exit", "maximize")], ["minimize", "maximize"])
    with pytest.raises(ConfigError, match=r"hydra.sweeper.direction=\['minimize'\] does not match optimized_metric "
                                          r"\(val_rmse:min, exit:max\)"):
        check_directions([("val_rmse", "minimize"), ("exit", "maximize")], "minimize")


def test_a_bad_optimized_metric_stops_before_any_training(tmp_path):
    with pytest.raises(ConfigError, match="'nope' is not a metric these records carry"):
        check_jobs([(composed("optimized_metric=nope", *TOY), tmp_path / "a")])
    with pytest.raises(ConfigError, match="needs a validation split"):
        check_jobs([(composed("optimized_metric=[val_rmse,contributing_edges]", *TOY), tmp_path / "b")])
    assert not list(tmp_path.rglob("record.json"))
    check_jobs([(composed("optimized_metric=[val_rmse,contributing_edges]", "dataset.val_fraction=0.2", *TOY),
                 tmp_path / "c")])


def test_what_a_job_returns_to_a_sweeper():
    record = {"status": "ok", "metrics": {"val_rmse": 0.25, "contributing_edges": 7, "test_rmse": None}}
    assert returned(None, record) is record  # no search: the record, as before
    assert returned("val_rmse", record) == 0.25
    assert returned(["val_rmse", "contributing_edges"], record) == (0.25, 7.0)
    assert math.isnan(returned("test_rmse", record))  # recorded as null: not finite
    diverged = {**record, "status": "diverged"}
    assert all(math.isnan(v) for v in returned(["val_rmse", "contributing_edges"], diverged))
    assert math.isnan(returned("val_rmse", None))
    collapsed = {"status": "collapsed", "metrics": {"val_rmse": 1.5, "contributing_edges": 0}}
    assert returned(["val_rmse", "contributing_edges"], collapsed) == (1.5, 0.0)  # a model, with no edge left


# ------------------------------------------------------------------ the sweeper


def test_a_search_on_slurm_waits_for_each_batch():
    from hydra_plugins.kanx_launcher.slurm_launcher import check_search_waits

    search = composed("optimized_metric=test_rmse", *TOY)
    check_search_waits(True, [search])
    check_search_waits(False, [composed(*TOY)])  # a grid may leave the array to run
    with pytest.raises(ConfigError, match="hydra.launcher.wait=false returns no values to a search"):
        check_search_waits(False, [search])



def test_the_grid_is_still_the_default_and_the_presets_choose_kanx_optuna():
    assert composed(hydra=True).hydra.sweeper._target_.endswith("sweeper.KanxSweeper")
    cfg = composed("+condition=EFX", "dataset=concrete", "hparams_search=beta_pareto", hydra=True)
    assert cfg.hydra.sweeper._target_.endswith("KanxOptunaSweeper") or cfg.hydra.sweeper._target_.endswith(
        "OptunaMissing")
    assert list(cfg.optimized_metric) == ["val_rmse", "contributing_edges"] and cfg.dataset.val_fraction == 0.2
    lr = composed("+condition=EFX", "dataset=concrete", "hparams_search=beta_lr_gates", hydra=True)
    assert {"beta", "seed", "train.lr", "model.gate_init_alpha"} == set(lr.hydra.sweeper.params)


def test_kanx_optuna_refuses_a_search_without_objectives_or_with_other_directions(capsys):
    from hydra_plugins.kanx_launcher.optuna_sweeper import check_objectives

    preset = ("+condition=EFX", "dataset=concrete", "hparams_search=beta_pareto")
    check_objectives(composed(*preset, hydra=True))
    with pytest.raises(SystemExit) as stop:
        check_objectives(composed(*preset, "optimized_metric=null", hydra=True))
    assert stop.value.code == 2 and "a search needs optimized_metric" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        check_objectives(composed(*preset, "hydra.sweeper.direction=[minimize,maximize]", hydra=True))
    assert "does not match optimized_metric (val_rmse:min, contributing_edges:min)" in capsys.readouterr().err


def test_a_stopped_searchs_running_trials_are_asked_again_and_finished_ones_count():
    optuna = pytest.importorskip("optuna")
    from hydra_plugins.kanx_launcher.optuna_sweeper import trials_left

    study = optuna.create_study(directions=["minimize", "minimize"])
    for beta in (0.1, 0.2):
        trial = study.ask()
        trial.suggest_float("beta", 1e-4, 1.0, log=True)
        study.tell(trial, [beta, 1.0])
    stopped = study.ask()
    stopped.suggest_float("beta", 1e-4, 1.0, log=True)
    assert trials_left(study, 4) == 2
    assert study.trials[stopped.number].state == optuna.trial.TrialState.FAIL
    again = study.ask()
    assert again.suggest_float("beta", 1e-4, 1.0, log=True) == stopped.params["beta"]  # its runs resume
    study.tell(again, [0.3, 1.0])
    # resumed again later: the stopped trial counts once, through the twin that finished it
    assert trials_left(study, 4) == 1
    assert trials_left(study, 3) == 0  # finished: nothing more trains


def test_a_resumed_search_does_not_ask_the_parameters_its_first_process_asked_again():
    optuna = pytest.importorskip("optuna")
    from hydra_plugins.kanx_launcher.optuna_sweeper import resumed_sampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    config = {"_target_": "optuna.samplers.NSGAIISampler", "seed": 0, "population_size": 2}

    def nsga2():
        return optuna.samplers.NSGAIISampler(seed=0, population_size=2)  # as the preset's config makes it

    def asked(study, n):
        betas = []
        for _ in range(n):
            trial = study.ask()
            betas.append(trial.suggest_float("beta", 1e-4, 1.0, log=True))
            study.tell(trial, [betas[-1], 1 / betas[-1]])
        return betas

    def first_process():
        study = optuna.create_study(directions=["minimize", "minimize"], sampler=nsga2())
        return study, asked(study, 4)  # two generations

    study, before = first_process()
    study.sampler = nsga2()  # what a new process made of the config before: the same draws again
    assert set(asked(study, 4)) == set(before)
    study, before = first_process()
    study.sampler = resumed_sampler(nsga2(), config, len(study.trials))
    assert not set(asked(study, 4)) & set(before)
    # a fresh study, or an unseeded sampler, as configured
    fresh = nsga2()
    assert resumed_sampler(fresh, config, 0) is fresh and resumed_sampler(fresh, {**config, "seed": None}, 4) is fresh


# ------------------------------------------------------------------ through the CLI (slow)

SEARCH = ["+condition=EFX", "+debug=quick", "hparams_search=beta_pareto", "hydra.sweeper.n_trials=4",
          "hydra.sweeper.n_jobs=2", "hydra.sweeper.sampler.population_size=2", *TOY]


def _study(root):
    """(trial state, [objective values], beta) of each trial of the one study under root."""
    (db,) = (root / "search").glob("*.db")
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT t.trial_id, t.state, p.param_value FROM trials t "
                           "JOIN trial_params p ON p.trial_id = t.trial_id AND p.param_name = 'beta'").fetchall()
        values = {}
        for trial_id, objective, value in con.execute("SELECT trial_id, objective, value FROM trial_values"):
            values.setdefault(trial_id, {})[objective] = value
    return [(state, [values[i][k] for k in sorted(values[i])] if i in values else None, beta)
            for i, state, beta in rows]


def _run_values(root):
    return {r["beta"]: [r["metrics"]["val_rmse"], r["metrics"]["contributing_edges"]] for r in records(root)}


@pytest.mark.slow
def test_a_tiny_multi_objective_search_through_the_cli(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    p = cli(*SEARCH, f"results_root={tmp_path}", "-m")
    log = p.stdout + p.stderr
    recs = records(tmp_path)
    assert len(recs) == 4 and all(r["timing"]["pack_size"] == 2 for r in recs)  # each batch of 2: one pack
    assert log.count("training a pack of 2") == 2
    trials = _study(tmp_path)
    assert [state for state, _, _ in trials] == ["COMPLETE"] * 4
    assert {beta: values for _, values, beta in trials} == _run_values(tmp_path)  # the study's values: the records'
    assert list(tmp_path.rglob("optimization_results.yaml"))
    # every trial an ordinary run: kanx.status reads them
    status = subprocess.run([sys.executable, "-m", "kanx.status", str(tmp_path)], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert status.returncode == 0, status.stderr
    # The same command again: the study has its 4 trials, so nothing trains.
    stamps = {f: f.stat().st_mtime_ns for f in tmp_path.rglob("record.json")}
    cli(*SEARCH, f"results_root={tmp_path}", "-m")
    assert stamps == {f: f.stat().st_mtime_ns for f in tmp_path.rglob("record.json")}
    assert len(_study(tmp_path)) == 4


@pytest.mark.slow
def test_an_interrupted_search_resumes_with_the_same_command_without_retraining(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    command = [*SEARCH, "train.epochs=400", f"results_root={tmp_path}", "-m"]
    proc = subprocess.Popen([sys.executable, "-m", "kanx.train", *command], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and len(list(tmp_path.rglob("beta=*"))) < 3:
        time.sleep(0.05)  # the second batch's run folders: the first batch is told to the study
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    assert proc.returncode != 0, "the signal should land in the second batch"
    first = {f: f.read_bytes() for f in tmp_path.rglob("record.json")}
    assert len(first) == 2
    cli(*command, timeout=900)
    assert {f: f.read_bytes() for f in first} == first  # the finished trials were not retrained
    recs = records(tmp_path)
    assert len(recs) == 4
    trials = _study(tmp_path)
    complete = {beta: values for state, values, beta in trials if state == "COMPLETE"}
    assert len(complete) == 4 and complete == _run_values(tmp_path)
    assert all(state in ("COMPLETE", "FAIL") for state, _, _ in trials)  # none left running
    # the stopped trials were asked again: their runs resumed, rather than new ones leaving them half-trained
    assert len(list(tmp_path.rglob("beta=*"))) == 4 and not list(tmp_path.rglob("checkpoint.pt"))
