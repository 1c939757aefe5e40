"""kanx.evaluate: a finished run scored again from its weights gives the metrics its record holds."""

import json
from pathlib import Path

import pytest
from helpers import TOY, train_run

from kanx import records
from kanx.evaluate import main as evaluate


def ikeda_run(tmp_path):
    return train_run(tmp_path / "run", "dataset=ikeda", "+condition=EFX", "beta=0.01", "seed=1", *TOY,
                     "train.epochs=3", "train.warmup=1", "train.fc_warmup=1", f"results_root={tmp_path}")


def test_a_dynamical_run_scored_from_its_weights_agrees_exactly_and_a_lost_metric_is_written_back(tmp_path, capsys):
    run_dir = ikeda_run(tmp_path)
    recorded = json.loads((run_dir / records.RECORD).read_text())["metrics"]
    assert evaluate([str(run_dir)]) == 0
    assert "1 agree (metrics: " in capsys.readouterr().out

    # A record from before the rollout curve: the curve is missing, the rest agrees; --add-missing restores it.
    record = json.loads((run_dir / records.RECORD).read_text())
    del record["metrics"]["rollout_rmse"]
    (run_dir / records.RECORD).write_text(json.dumps(record))
    records.seal(run_dir)
    assert evaluate([str(tmp_path)]) == 0
    assert "missing from the record: rollout_rmse" in capsys.readouterr().out
    assert evaluate([str(tmp_path), "--add-missing"]) == 0
    assert json.loads((run_dir / records.RECORD).read_text())["metrics"] == recorded
    assert records.integrity_problem(run_dir) is None


def test_a_record_that_disagrees_with_its_weights_is_reported_and_fails(tmp_path, capsys):
    run_dir = ikeda_run(tmp_path)
    record = json.loads((run_dir / records.RECORD).read_text())
    record["metrics"]["test_rmse"] *= 1.5
    record["metrics"]["rollout_rmse"]["10"] = 0.0
    (run_dir / records.RECORD).write_text(json.dumps(record))
    records.seal(run_dir)
    assert evaluate([str(tmp_path), "--add-missing"]) == 1
    out = capsys.readouterr().out
    assert ("differs: test_rmse" in out and "rollout_rmse[10]" in out and "0 agree (metrics: " in out
            and "1 differ" in out)
    assert json.loads((run_dir / records.RECORD).read_text()) == record  # nothing it holds is changed


@pytest.mark.slow  # trains long (make test-full)
def test_runs_of_a_mixed_pack_score_alone_as_their_records_say(tmp_path, capsys):
    """The record's metrics come from model.pt scored alone, so neither the pack's make-up
    (here three conditions, the pack's superset layout) nor its size changes them."""
    from helpers import composed

    from kanx.runner import run_jobs

    configs = [(composed("dataset=ikeda", f"+condition={c}", f"beta={b}", f"seed={s}", *TOY,
                         "train.epochs=4", "train.warmup=1",
                         "train.fc_warmup=1", f"results_root={tmp_path}"), tmp_path / f"{c}-{s}")
               for c, b in (("baseline", 0.0), ("EFX", 0.01), ("X", 0.01)) for s in (0, 1)]
    run_jobs(configs, group="all")
    assert {json.loads((d / records.RECORD).read_text())["timing"]["pack_size"] for _, d in configs} == {6}
    assert evaluate([str(tmp_path)]) == 0
    assert "6 agree (metrics: " in capsys.readouterr().out


def test_scoring_runs_on_one_thread_whatever_the_caller_runs(tmp_path, capsys, monkeypatch):
    """The record is scored inside a training that may run one thread per pack, and kanx.evaluate
    runs with the machine's default; both score on one thread, so they agree bit for bit."""
    import torch

    import kanx.data

    run_dir = ikeda_run(tmp_path)
    seen, real = [], kanx.data.evaluate_members
    monkeypatch.setattr(kanx.data, "evaluate_members",
                        lambda *a, **k: (seen.append(torch.get_num_threads()), real(*a, **k))[1])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert evaluate([str(run_dir)]) == 0
        assert torch.get_num_threads() == 2  # the caller's count is restored
    finally:
        torch.set_num_threads(before)
    assert seen == [1]
    assert "1 agree (metrics: " in capsys.readouterr().out


RESULTS = Path(__file__).resolve().parents[1] / "results" / "paper"


@pytest.mark.committed
@pytest.mark.parametrize("run", ["ikeda/X/default/beta=0.01,seed=1", "ikeda/EFX/default/beta=0.1,seed=2"])
def test_committed_ikeda_runs_score_from_their_weights_as_their_records_say(run, capsys):
    """The full-protocol records under results/paper were scored inside their trainings, on
    another machine; their model.pt, rebuilt data and kanx.evaluate agree on this one: the
    one-step metrics and structure identically or within tolerance, the long rollouts, which
    the chaos of the Ikeda map turns into a statistic of the CPU's last bits, consistent with
    the one-ulp ensemble (a run of each condition: the slow test below)."""
    assert evaluate([str(RESULTS / run)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "1 agree (metrics: " in out and "0 differ" in out


@pytest.mark.slow  # one run of each committed Ikeda condition, about 15 s a run
@pytest.mark.committed
def test_a_committed_ikeda_run_of_each_condition_scores_from_its_weights_as_its_record_says(capsys):
    """Seed 0 of each condition, at a beta that moves along the conditions' sweeps so that the
    8 runs span the betas (all 38 cells: `python -m kanx.evaluate results/paper/ikeda`)."""
    cells = sorted((RESULTS / "ikeda").glob("*/default/beta=*,seed=0"))
    assert len(cells) == 38  # 8 conditions, their betas
    by_condition: dict[str, list[Path]] = {}
    for cell in cells:
        by_condition.setdefault(cell.parts[-3], []).append(cell)
    runs = [sweep[i % len(sweep)] for i, sweep in enumerate(by_condition[c] for c in sorted(by_condition))]
    assert len(runs) == 8 and len({r.name for r in runs}) >= 4
    differ = [run for run in runs if evaluate([str(run), "--quiet"]) != 0]
    assert not differ, capsys.readouterr().out


# ---------------------------------------------------------------- every run folder accounted for
def toy_sweep(tmp_path, seeds=6):
    """``seeds`` finished tiny Baseline runs of sin_xy2 (one pack), their run folders in seed order."""
    from helpers import composed

    from kanx.runner import run_jobs

    configs = [(composed("dataset=sin_xy2", f"seed={s}", *TOY, "train.epochs=3", "train.warmup=1",
                         f"results_root={tmp_path}"), tmp_path / f"seed={s}")
               for s in range(seeds)]
    run_jobs(configs)
    return [d for _, d in configs]


def flip_byte(path: Path, at: int = -20) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_every_run_folder_is_accounted_for_and_unverified_ones_fail(tmp_path, capsys):
    """The six-run tamper probe: two intact runs, an edited record, a flipped byte in model.pt,
    an emptied done marker and a wrong checksum in done. The four are named, and the exit is 1."""
    runs = toy_sweep(tmp_path)
    record = json.loads((runs[2] / records.RECORD).read_text())
    record["metrics"]["test_rmse"] = 0.001
    (runs[2] / records.RECORD).write_text(json.dumps(record))
    flip_byte(runs[3] / records.MODEL)
    (runs[4] / records.DONE).write_text("")
    marker = json.loads((runs[5] / records.DONE).read_text())
    marker["sha256"][records.MODEL] = "0" * 64
    (runs[5] / records.DONE).write_text(json.dumps(marker))

    assert evaluate([str(tmp_path), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert f"{runs[2]}: corrupt: {runs[2] / records.RECORD} is corrupt" in out
    assert f"{runs[3]}: corrupt: {runs[3] / records.MODEL} is corrupt" in out
    assert f"{runs[4]}: unsealed: " in out and "seal-legacy" in out
    assert f"{runs[5]}: corrupt: {runs[5] / records.MODEL} is corrupt" in out
    assert "6 run folder(s): 2 agree (metrics: " in out and "3 corrupt, 1 unsealed" in out
    # --allow-unverified lets an unchecked run pass, never a corrupt one.
    assert evaluate([str(runs[4]), "--allow-unverified"]) == 0
    assert evaluate([str(runs[5]), "--allow-unverified"]) == 1


@pytest.mark.slow  # spawns scoring processes
def test_jobs_score_in_several_processes_with_the_same_output_and_exit(tmp_path, capsys):
    """--jobs 2 prints what --jobs 1 prints, line for line and in the same order, and fails the
    same tampered runs: an edited record and a flipped byte in model.pt among intact runs."""
    runs = toy_sweep(tmp_path, seeds=5)
    record = json.loads((runs[1] / records.RECORD).read_text())
    record["metrics"]["test_rmse"] = 0.001
    (runs[1] / records.RECORD).write_text(json.dumps(record))
    flip_byte(runs[3] / records.MODEL)
    outputs = []
    for jobs in ("1", "2"):
        assert evaluate([str(tmp_path), "--jobs", jobs]) == 1
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert "5 run folder(s): 3 agree (metrics: " in outputs[1] and "2 corrupt" in outputs[1]


def test_runs_without_weights_or_a_done_marker_are_named_and_fail_unless_allowed(tmp_path, capsys):
    runs = toy_sweep(tmp_path, seeds=3)
    (runs[1] / records.MODEL).unlink()
    (runs[2] / records.DONE).unlink()
    assert evaluate([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{runs[1]}: no weights: " in out and f"{runs[2]}: unsealed: has no done marker" in out
    assert "3 run folder(s): 1 agree (metrics: " in out and "1 unsealed, 1 no weights" in out
    assert evaluate([str(tmp_path), "--allow-unverified"]) == 0


@pytest.mark.parametrize("what", ["file", "empty folder"])
def test_a_path_that_holds_no_run_is_an_error(tmp_path, capsys, what):
    path = tmp_path / "x"
    path.write_text("x") if what == "file" else path.mkdir()
    with pytest.raises(SystemExit) as stop:
        evaluate([str(path)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(path) in err


def test_a_coefficient_changed_by_a_thousandth_is_caught_and_resealed_weights_that_move_a_metric_differ(
        tmp_path, capsys):
    """One coefficient moved by 1e-3: the done marker's checksum catches it (the RMSE moves by
    about 1e-8 relative, below float32 rounding, so no number could). Weights changed and sealed
    again, by someone who meant to: the numbers catch what moves a metric past rounding."""
    import torch

    run_dir, resealed = toy_sweep(tmp_path, seeds=2)
    for folder in (run_dir, resealed):
        saved = torch.load(folder / records.MODEL, weights_only=True)
        if folder == run_dir:
            coef = saved["model"][next(k for k in saved["model"] if k.endswith("coef"))]
            coef[torch.unravel_index(coef.abs().argmax(), coef.shape)] += 1e-3
        else:  # every layer's base and spline weights half as large again
            for k in saved["model"]:
                if k.endswith(("scale_base", "scale_sp")):
                    saved["model"][k] *= 1.5
        torch.save(saved, folder / records.MODEL)
    records.seal(resealed)
    assert evaluate([str(run_dir)]) == 1
    assert f"{run_dir}: corrupt: {run_dir / records.MODEL} is corrupt: its sha256 differs" in capsys.readouterr().out
    assert evaluate([str(resealed)]) == 1
    out = capsys.readouterr().out
    assert f"{resealed}: differs: " in out and "1 differ" in out


def test_add_missing_refuses_a_changed_curve_and_seals_nothing(tmp_path, capsys):
    """A record that lacks a metric and whose curve was edited: --add-missing names the curve,
    writes nothing and leaves the marker as it was."""
    import gzip

    run_dir = ikeda_run(tmp_path)
    record = json.loads((run_dir / records.RECORD).read_text())
    del record["metrics"]["rollout_rmse"]
    (run_dir / records.RECORD).write_text(json.dumps(record))
    records.seal(run_dir)
    curve = records.curve_path(run_dir)
    rows = gzip.decompress(curve.read_bytes()).decode().splitlines()
    header = rows[0].split(",")
    loss = header.index("loss")
    edited = [rows[0]] + [",".join("123.0" if i == loss else v for i, v in enumerate(r.split(","))) for r in rows[1:]]
    curve.write_bytes(records.gzip_bytes(("\n".join(edited) + "\n").encode()))
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}

    assert evaluate([str(run_dir), "--add-missing"]) == 1
    out = capsys.readouterr().out
    assert f"{curve} is corrupt" in out and "0 record(s) completed" in out
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


def test_add_missing_refreshes_only_the_records_checksum(tmp_path, capsys):
    run_dir = ikeda_run(tmp_path)
    record = json.loads((run_dir / records.RECORD).read_text())
    del record["metrics"]["rollout_rmse"]
    (run_dir / records.RECORD).write_text(json.dumps(record))
    records.seal(run_dir)
    marker = json.loads((run_dir / records.DONE).read_text())["sha256"]
    assert evaluate([str(run_dir), "--add-missing"]) == 0
    after = json.loads((run_dir / records.DONE).read_text())["sha256"]
    assert after[records.RECORD] != marker[records.RECORD]
    assert ({k: v for k, v in after.items() if k != records.RECORD}
            == {k: v for k, v in marker.items() if k != records.RECORD})
    assert records.integrity_problem(run_dir, files=(records.RECORD, records.MODEL, *records.CURVES)) is None
    assert "1 record(s) completed" in capsys.readouterr().out


def test_add_missing_on_a_read_only_file_system_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    import errno

    from kanx.errors import StorageError

    run_dir = ikeda_run(tmp_path)
    record = json.loads((run_dir / records.RECORD).read_text())
    del record["metrics"]["rollout_rmse"]
    (run_dir / records.RECORD).write_text(json.dumps(record))
    records.seal(run_dir)

    def read_only(*_):
        raise StorageError(errno.EROFS, "Read-only file system", str(run_dir / records.RECORD))

    from kanx import sealing

    monkeypatch.setattr(sealing, "atomic_write_together", read_only)  # what reseal_record writes with
    assert evaluate([str(run_dir), "--add-missing"]) == 1
    out = capsys.readouterr().out
    assert "missing metrics not written: cannot write" in out and "read-only" in out


# ---------------------------------------------------------------- verdicts (kanx.verdicts)
def test_verdicts_on_hand_made_values():
    from kanx.verdicts import CONSISTENT, CONSISTENT_Z, DIFFERS, IDENTICAL, WITHIN, judge

    draws = [0.80 + 0.01 * k for k in range(-5, 6)]  # mean 0.80, sd about 0.033
    recorded = {"train_rmse": 0.5, "test_rmse": 0.1, "depth": 2, "rollout_rmse": {"1": 0.01, "200": 0.87, "500": 0.5}}
    recomputed = {"train_rmse": 0.5, "test_rmse": 0.1 * (1 + 1e-7), "depth": 3,
                  "rollout_rmse": {"1": 0.011, "200": 0.80, "500": 0.80, "1000": 0.9}, "edges": 4}
    calls = []

    def ensemble():
        calls.append(1)
        return {"rollout_rmse[200]": draws, "rollout_rmse[500]": draws}

    verdicts, missing = judge(recorded, recomputed, ensemble,
                              lambda label: label if label.startswith("rollout_rmse[") else None)
    got = {v.name: v.verdict for v in verdicts}
    assert got == {"train_rmse": IDENTICAL, "test_rmse": WITHIN, "depth": DIFFERS, "rollout_rmse[1]": DIFFERS,
                   "rollout_rmse[200]": CONSISTENT, "rollout_rmse[500]": DIFFERS}
    assert missing == ["rollout_rmse[1000]", "edges"] and calls == [1]
    assert 0.5 < 0.80 - CONSISTENT_Z * 0.033  # 0.5 is outside the band, 0.87 inside


def test_a_validation_rollout_is_judged_against_its_own_ensemble_as_the_tests_are(tmp_path, capsys, monkeypatch):
    """With a validation split a dynamical record's val_rmse is a rollout's RMSE (over the end of
    the training segment), whose last bits another machine moves as it moves test_rmse's: it gets
    the one-ulp ensemble of its own rollouts. The tolerance is set to nothing here, so that a value
    off the recomputed one goes to the ensemble as a real machine's would past the tolerance.
    Weights changed and sealed again still differ."""
    import statistics

    import torch

    import kanx.verdicts
    from kanx.evaluate import AGREES, DIFFERS_RUN, _rescored, check
    from kanx.verdicts import CONSISTENT, DIFFERS, IDENTICAL

    # Baseline: at 3 epochs EFX's gates close every edge, and no weight would move its output
    run_dir = train_run(tmp_path / "run", "dataset=ikeda", "dataset.val_fraction=0.25", "seed=1", *TOY,
                        "train.epochs=3", "train.warmup=1", "train.fc_warmup=1", f"results_root={tmp_path}")
    recorded = json.loads((run_dir / records.RECORD).read_text())
    verdicts = {v.name: v.verdict for v in check(run_dir).verdicts}
    assert verdicts["val_rmse"] == verdicts["val_rmse_one_step"] == IDENTICAL  # the split is rebuilt, and rescored
    _, chaotic, ensemble, _ = _rescored(run_dir)
    assert chaotic("val_rmse") == "val_rmse" and chaotic("val_rmse_one_step") is None  # one step: the tolerance
    draws = ensemble()["val_rmse"]
    mean, sd = statistics.fmean(draws), statistics.stdev(draws)
    assert sd > 0

    def rewrite(**metrics):
        (run_dir / records.RECORD).write_text(json.dumps({**recorded, "metrics": {**recorded["metrics"], **metrics}}))
        records.seal(run_dir)

    monkeypatch.setattr(kanx.verdicts, "RTOL", 0.0)
    monkeypatch.setattr(kanx.verdicts, "STOL", 0.0)
    rewrite(val_rmse=mean + 3 * sd)
    result = check(run_dir)
    assert result.outcome == AGREES and {v.name: v.verdict for v in result.verdicts}["val_rmse"] == CONSISTENT
    rewrite(val_rmse=mean + 3 * sd, val_rmse_one_step=recorded["metrics"]["val_rmse_one_step"] * (1 + 1e-6))
    result = check(run_dir)
    assert result.outcome == DIFFERS_RUN
    assert [v.name for v in result.verdicts if v.verdict == DIFFERS] == ["val_rmse_one_step"]
    monkeypatch.undo()

    rewrite()
    saved = torch.load(run_dir / records.MODEL, weights_only=True)
    last = [k for k in saved["model"] if k.endswith("coef")][-1]
    saved["model"][last] += 0.5  # the output layer's splines shifted: val_rmse 0.54 -> 0.74
    torch.save(saved, run_dir / records.MODEL)
    records.seal(run_dir)
    result = check(run_dir)
    val = next(v for v in result.verdicts if v.name == "val_rmse")
    assert result.outcome == DIFFERS_RUN and val.verdict == DIFFERS and val.z is not None  # judged by its ensemble


def test_the_largest_accepted_difference_leaves_rollout_metrics_aside():
    """A chaotic rung's difference is a draw that may land anywhere inside the tolerance, so the
    summary's largest accepted difference is taken over the metrics no rollout computes."""
    from kanx.evaluate import AGREES, Checked, summary
    from kanx.verdicts import judge

    recorded = {"test_rmse": 1.0, "rollout_rmse": {"1": 0.1, "200": 0.8}}
    recomputed = {"test_rmse": 1.001, "rollout_rmse": {"1": 0.1, "200": 0.8079}}
    verdicts, _ = judge(recorded, recomputed, None, lambda label: label if label.startswith("rollout") else None)
    assert [(v.name, v.verdict, v.rollout) for v in verdicts] == [
        ("test_rmse", "within tolerance", False), ("rollout_rmse[1]", "identical", True),
        ("rollout_rmse[200]", "within tolerance", True)]
    line = summary([Checked(Path("run"), AGREES, verdicts=verdicts)])
    assert "the largest difference within tolerance is 0.1 of it, rollout metrics aside" in line
    rollout_only = [v for v in verdicts if v.rollout]
    assert "largest" not in summary([Checked(Path("run"), AGREES, verdicts=rollout_only)])


def test_no_ensemble_is_computed_when_every_rollout_metric_agrees_within_tolerance():
    from kanx.verdicts import judge

    def ensemble():
        raise AssertionError("not needed")

    verdicts, _ = judge({"rollout_rmse": {"200": 0.8}}, {"rollout_rmse": {"200": 0.8}}, ensemble, lambda label: label)
    assert [v.verdict for v in verdicts] == ["identical"]


def test_the_ulp_ensemble_of_a_chaotic_map_spreads_past_its_horizon_and_not_before():
    """The Ikeda map, off by 1e-3, as the model: rollouts started one float32 ulp apart agree to
    float32 rounding over a step and spread to a sizeable fraction of the RMSE over the whole segment."""
    import statistics

    import numpy as np
    import torch

    from kanx.data import load_dataset
    from kanx.data.dynamics import ikeda_map
    from kanx.data.spread import record_plans, ulp_ensemble

    ds = load_dataset("ikeda", data_seed=0, n_test=400)

    def predict(x):
        return torch.from_numpy(ikeda_map(x.numpy().astype(np.float32)) + np.float32(1e-3)).to(x.dtype)

    plans = record_plans(ds)
    draws = ulp_ensemble(ds, predict, {k: plans[k] for k in ("rollout_rmse[1]", "rollout_rmse[400]")}, draws=8)
    short, whole = (statistics.pstdev(draws[k].tolist()) / statistics.fmean(draws[k].tolist())
                    for k in ("rollout_rmse[1]", "rollout_rmse[400]"))
    assert short < 1e-4 and whole > 1e-2


# ---------------------------------------------------------------- several roots, a sample
def test_a_sample_spreads_evenly_over_the_datasets_and_is_the_same_for_the_same_seed():
    from kanx.evaluate import dataset_of, sample

    folders = [Path(f"R/{d}/E/default/beta=0.1,seed={s}") for d, n in (("a", 10), ("b", 3), ("c", 6)) for s in range(n)]
    drawn = sample(folders, 7, seed=0)
    assert len(drawn) == 7 and drawn == sorted(drawn) and set(drawn) <= set(folders)
    assert sorted(dataset_of(f) for f in drawn) == ["a", "a", "a", "b", "b", "c", "c"]
    assert sample(folders, 7, seed=0) == drawn and sample(folders, 7, seed=1) != drawn
    assert sample(folders, 100, seed=0) == sorted(folders)


def test_several_roots_are_checked_together_and_a_bad_one_stops_before_scoring(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    toy_sweep(a, seeds=2)
    (toy_sweep(b, seeds=2)[0] / records.MODEL).unlink()
    assert evaluate([str(a), str(b), "--sample", "3", "--sample-seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "checking 3 of the 3 run folder(s) with weights, drawn with seed 5" in out
    assert "1 without model.pt not drawn" in out and "3 run folder(s): 3 agree" in out
    with pytest.raises(SystemExit) as stop:
        evaluate([str(a), str(tmp_path / "nowhere")])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert "nowhere does not exist" in err and "agree" not in out
