"""kanx.evaluate: a finished run scored again from its weights gives the metrics its record holds."""

import json
from pathlib import Path

import pytest
from helpers import TOY, train_run

from kanx import records
from kanx.evaluate import main as evaluate


def ikeda_run(tmp_path):
    return train_run(tmp_path / "run", "dataset=ikeda", "+condition=EFX", "beta=0.01", "seed=1", *TOY, "train.epochs=3", "train.warmup=1",
                     "train.fc_warmup=1", f"results_root={tmp_path}")


def test_a_dynamical_run_scored_from_its_weights_agrees_exactly_and_a_lost_metric_is_written_back(tmp_path, capsys):
    run_dir = ikeda_run(tmp_path)
    recorded = json.loads((run_dir / records.RECORD).read_text())["metrics"]
    assert evaluate([str(run_dir)]) == 0
    assert "1 agree, 0 differ" in capsys.readouterr().out

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
    assert "differs: test_rmse" in out and "rollout_rmse[10]" in out and "0 agree, 1 differ" in out
    assert json.loads((run_dir / records.RECORD).read_text()) == record  # nothing it holds is changed


@pytest.mark.slow  # trains long (make test-full)
def test_runs_of_a_mixed_pack_score_alone_as_their_records_say(tmp_path, capsys):
    """The record's metrics come from model.pt scored alone, so neither the pack's make-up
    (here three conditions, the pack's superset layout) nor its size changes them."""
    from helpers import composed

    from kanx.runner import run_jobs

    configs = [(composed("dataset=ikeda", f"+condition={c}", f"beta={b}", f"seed={s}", *TOY, "train.epochs=4", "train.warmup=1",
                         "train.fc_warmup=1", f"results_root={tmp_path}"), tmp_path / f"{c}-{s}")
               for c, b in (("baseline", 0.0), ("EFX", 0.01), ("X", 0.01)) for s in (0, 1)]
    run_jobs(configs, group="all")
    assert {json.loads((d / records.RECORD).read_text())["timing"]["pack_size"] for _, d in configs} == {6}
    assert evaluate([str(tmp_path)]) == 0
    assert "6 agree, 0 differ" in capsys.readouterr().out


def test_scoring_runs_on_one_thread_whatever_the_caller_runs(tmp_path, capsys, monkeypatch):
    """The record is scored inside a training that may run one thread per pack, and kanx.evaluate
    runs with the machine's default; both score on one thread, so they agree bit for bit."""
    import torch

    import kanx.data

    run_dir = ikeda_run(tmp_path)
    seen, real = [], kanx.data.evaluate_members
    monkeypatch.setattr(kanx.data, "evaluate_members", lambda *a, **k: (seen.append(torch.get_num_threads()), real(*a, **k))[1])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert evaluate([str(run_dir)]) == 0
        assert torch.get_num_threads() == 2  # the caller's count is restored
    finally:
        torch.set_num_threads(before)
    assert seen == [1]
    assert "1 agree, 0 differ" in capsys.readouterr().out


RESULTS = Path(__file__).resolve().parents[1] / "results" / "paper"


@pytest.mark.parametrize("run", ["ikeda/X/default/beta=0.01,seed=1", "ikeda/EFX/default/beta=0.1,seed=2"])
def test_committed_ikeda_runs_score_from_their_weights_as_their_records_say(run, capsys):
    """The full-protocol records under results/paper were scored inside their trainings; their
    model.pt, rebuilt data and kanx.evaluate give the same metrics bit for bit (every Ikeda run:
    the long test below)."""
    assert evaluate([str(RESULTS / run)]) == 0, capsys.readouterr().out
    assert "1 agree, 0 differ" in capsys.readouterr().out


@pytest.mark.slow  # one seed of every committed Ikeda cell, about 3 s a run
def test_every_committed_ikeda_cell_scores_from_its_weights_as_its_records_say(capsys):
    runs = sorted((RESULTS / "ikeda").glob("*/default/beta=*,seed=0"))
    assert len(runs) == 38  # 8 conditions, their betas
    differ = [run for run in runs if evaluate([str(run), "--quiet"]) != 0]
    assert not differ, capsys.readouterr().out
