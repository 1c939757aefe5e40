"""metrics.csv: training curves written during a run, kept across a resume, stored gzipped
(metrics.csv.gz) once the run finished, read back by kanx.load_run(...).history."""

import gzip
import json

import pandas as pd
import pytest
from helpers import TOY, run_until_interrupted

import kanx
from kanx.plan import run_plan, sweep_jobs

ARGS = ["train.epochs=12", "train.warmup=4", "train.fc_warmup=2", "train.log_every=2", *TOY]


def run_dirs(root, condition, seeds="0", betas="0.0,0.1"):
    return sweep_jobs("sin_xy2", condition, [f"results_root={root}", f"seed={seeds}", f"beta={betas}", *ARGS])


def test_metrics_csv_has_the_curves_of_every_member(tmp_path):
    configs = run_dirs(tmp_path, "EFX") + run_dirs(tmp_path, "baseline", betas="0.0")
    assert run_plan(configs, group="all") == 0  # one mixed pack of EFX and Baseline members
    efx = kanx.load_run(configs[1][1]).history  # beta 0.1
    assert list(efx["epoch"]) == [2, 4, 6, 8, 10, 12]
    assert {"loss", "data_loss", "lc", "beta", "open_gates", "exit", "pi_0", "pi_1", "pi_2", "tau_x", "lr",
            "elapsed_s"} <= set(efx.columns)
    assert (efx["beta"] == [0.0, 0.0, 0.1, 0.1, 0.1, 0.1]).all()  # warmup: beta off for epochs 0-3
    assert ((efx["pi_0"] + efx["pi_1"] + efx["pi_2"]).round(5) == 1).all()
    assert (efx["loss"] >= efx["data_loss"] - 1e-7).all() and efx["tau_x"].is_monotonic_decreasing
    base = pd.read_csv(configs[2][1] / "metrics.csv.gz")
    assert "pi_0" not in base.columns and (base["beta"] == 0).all() and (base["loss"] == base["data_loss"]).all()
    run = kanx.load_run(configs[2][1])
    assert base["open_gates"].iloc[-1] == run.model.n_edges  # every edge is open without E
    assert run.history is not None and run.record["status"] == "ok"


def test_a_resumed_run_keeps_its_earlier_rows(tmp_path, monkeypatch):
    from kanx.runner import run_jobs

    configs = run_dirs(tmp_path, "E", betas="0.1")
    run_until_interrupted(configs, 8, monkeypatch)
    run_dir = configs[0][1]
    # appended live, past the checkpoint at 6
    assert list(pd.read_csv(run_dir / "metrics.csv")["epoch"]) == [2, 4, 6, 8]
    assert not (run_dir / "metrics.csv.gz").exists()  # unfinished: the live file stays plain
    import kanx.curves

    started, start = [], kanx.curves._start

    def spy(run_dir, epoch):
        columns = start(run_dir, epoch)
        started.append((epoch, list(pd.read_csv(run_dir / "metrics.csv")["epoch"])))
        return columns

    with monkeypatch.context() as patch:
        patch.setattr(kanx.curves, "_start", spy)
        run_jobs(configs)
    assert started == [(6, [2, 4, 6])]  # the resume drops the row after its checkpoint (epoch 8), then trains it again
    resumed = pd.read_csv(run_dir / "metrics.csv.gz")
    assert list(resumed["epoch"]) == [2, 4, 6, 8, 10, 12]
    assert run_plan(run_dirs(tmp_path / "straight", "E", betas="0.1")) == 0
    straight = pd.read_csv(next((tmp_path / "straight").rglob("metrics.csv.gz")))
    pd.testing.assert_frame_equal(resumed.drop(columns="elapsed_s"), straight.drop(columns="elapsed_s"))


@pytest.mark.slow  # trains long (make test-full)
def test_analyze_curves_draws_every_cell_and_run_and_lists_them(tmp_path):
    """`python -m kanx.analyze ROOT --curves` on a tiny sweep: a PNG per (dataset, condition,
    beta) cell with its seeds overlaid (`--curves all`: and one per run), each linked from
    report.md; the panels follow the columns each condition has (exit pi and tau_x only with X)."""
    import re

    from kanx.analyze.__main__ import main
    from kanx.analyze.collect import load_runs
    from kanx.analyze.curve_figures import beta_onset, curve_figures, drawable_history

    configs = (run_dirs(tmp_path, "EFX", seeds="0,1", betas="0.1")
               + run_dirs(tmp_path, "baseline", seeds="0,1", betas="0.0"))
    assert run_plan(configs, group="all") == 0
    curves = tmp_path / "figures" / "curves" / "sin_xy2"
    assert main([str(tmp_path), "--curves", "--formats", "png"]) == 0
    assert {p.relative_to(curves).as_posix() for p in curves.rglob("*.png")} == {
        "EFX/beta=0.1.png", "Baseline/beta=0.png"}
    assert main([str(tmp_path), "--curves", "all", "--formats", "png"]) == 0
    expected = {f"{c}/beta={b}{s}.png" for c, b in (("EFX", "0.1"), ("Baseline", "0"))
                for s in ("", ",seed=0", ",seed=1")}
    assert {p.relative_to(curves).as_posix() for p in curves.rglob("*.png")} == expected
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000 for p in curves.rglob("*.png"))
    report = (tmp_path / "report.md").read_text()
    links = [link for link in re.findall(r"\]\(([^)]+)\)", report) if link.startswith("figures/curves/")]
    assert sorted(links) == sorted(f"figures/curves/sin_xy2/{e}" for e in expected)

    figures = curve_figures(load_runs(tmp_path), tmp_path, per_run=True)
    titles = {(c.condition, c.seed): [ax.get_title() for ax in c.draw().axes if ax.get_visible()] for c in figures}
    assert titles[("EFX", None)] == titles[("EFX", 0)] == [
        "training loss", "data loss", "test RMSE", "$L_C$", "open gates (edges)", "exit gate $\\pi$",
        "exit temperature $\\tau_x$"]
    assert titles[("Baseline", 1)] == ["training loss", "data loss", "test RMSE", "$L_C$", "open gates (edges)"]
    assert beta_onset(drawable_history(configs[0][1])) == 4  # the warmup (rows every 2 epochs)
    assert beta_onset(drawable_history(configs[-1][1])) is None  # Baseline: beta stays 0

    # A second analysis draws only what changed: a deleted PNG, and the cell of a curve changed
    # since its done marker (left out as damaged, so the cell shows seed 1 alone).
    (curves / "Baseline" / "beta=0,seed=1.png").unlink()
    curve = configs[0][1] / "metrics.csv.gz"
    changed = pd.read_csv(curve)
    changed.loc[changed.index[-1], "loss"] *= 2
    changed.to_csv(curve, index=False)
    mtimes = {p: p.stat().st_mtime_ns for p in curves.rglob("*.png")}
    assert main([str(tmp_path), "--curves", "all", "--formats", "png"]) == 0
    redrawn = {p.relative_to(curves).as_posix() for p in curves.rglob("*.png") if p.stat().st_mtime_ns != mtimes.get(p)}
    assert redrawn == {"Baseline/beta=0,seed=1.png", "EFX/beta=0.1.png"}, redrawn
    assert "Damaged training curves, not drawn (1;" in (tmp_path / "report.md").read_text()


def test_a_curve_resumed_elsewhere_splices_onto_the_earlier_rows(tmp_path, monkeypatch):
    """A GPU job resumes runs without their metrics.csv (scripts/offline_gpu/stash.sh leaves the curves
    behind) and returns rows from its resume on; `python scripts/offline_gpu/curves.py splice` puts
    them after the earlier rows here, giving the curve of an uninterrupted run."""
    import shutil

    from helpers import load_script

    from kanx.runner import run_jobs

    curves_main = load_script("offline_gpu/curves.py").main

    configs = run_dirs(tmp_path / "here", "E", betas="0.1")
    run_until_interrupted(configs, 8, monkeypatch)
    run_dir = configs[0][1]
    earlier = run_dir / "metrics.csv"
    kept = tmp_path / "kept.csv"
    shutil.move(earlier, kept)  # the window's tree has no curve for this run
    run_jobs(configs)  # finishes there: its curve is stored gzipped
    finished = run_dir / "metrics.csv.gz"
    window_rows = pd.read_csv(finished)
    assert list(window_rows["epoch"]) == [8, 10, 12]  # only what the resumed process trained
    later_root = tmp_path / "returned"
    (later_root / run_dir.relative_to(tmp_path / "here")).mkdir(parents=True)
    returned = later_root / run_dir.relative_to(tmp_path / "here") / "metrics.csv.gz"
    shutil.move(finished, returned)
    shutil.move(kept, earlier)  # the checkpointed run's plain curve here
    assert curves_main(["splice", str(later_root), str(tmp_path / "here")]) == 0
    assert not earlier.exists()  # spliced into the finished run's form, the plain one gone
    spliced = kanx.load_run(run_dir).history  # the done marker vouches for the spliced curve
    assert run_plan(run_dirs(tmp_path / "straight", "E", betas="0.1")) == 0
    straight = pd.read_csv(next((tmp_path / "straight").rglob("metrics.csv.gz")))
    pd.testing.assert_frame_equal(spliced.drop(columns="elapsed_s"), straight.drop(columns="elapsed_s"))
    # A curve that already goes past the returned one's last epoch (the run went on here) is kept.
    lines = gzip.decompress(returned.read_bytes()).decode().splitlines(keepends=True)
    returned.write_bytes(gzip.compress("".join(lines[:3]).encode()))  # header, epochs 8 and 10
    assert curves_main(["splice", str(later_root), str(tmp_path / "here")]) == 0
    pd.testing.assert_frame_equal(kanx.load_run(run_dir).history, spliced)


def rows_of(text):
    return [line.split(",") for line in text.strip().splitlines()]


def test_a_finished_run_keeps_only_a_gzipped_curve_that_reads_back_as_written(tmp_path, monkeypatch):
    """The rows a run appends to its plain metrics.csv while it trains are the rows of the
    finished run's metrics.csv.gz, its only curve, which its done marker vouches for; gzip's
    header holds no time stamp, so the same rows give the same bytes."""
    from kanx.records import curve_path, gzip_bytes, integrity_problem
    from kanx.runner import run_jobs
    from kanx.vocab import CURVES

    configs = run_dirs(tmp_path, "E", betas="0.1")
    run_dir = configs[0][1]
    written = []
    import kanx.curves as curves_module

    append = curves_module._append

    def spy(path, columns, row, out=None):  # every row during training: what the run wrote, as it wrote it
        written.append((path.name, dict(row)))
        return append(path, columns, row, out)

    monkeypatch.setattr(curves_module, "_append", spy)
    run_jobs(configs)
    assert {name for name, _ in written} == {"metrics.csv"}  # live curve: plain
    assert sorted(p.name for p in run_dir.iterdir() if p.name in CURVES) == ["metrics.csv.gz"]
    assert curve_path(run_dir) == run_dir / "metrics.csv.gz"
    history = kanx.load_run(run_dir).history
    assert history.to_dict("records") == [row for _, row in written] and list(history["epoch"]) == [2, 4, 6, 8, 10, 12]
    marker = json.loads((run_dir / "done").read_text())["sha256"]
    assert "metrics.csv.gz" in marker and "metrics.csv" not in marker
    assert integrity_problem(run_dir, files=CURVES) is None
    gz = (run_dir / "metrics.csv.gz").read_bytes()
    assert gz[4:8] == b"\0\0\0\0" and gzip_bytes(gzip.decompress(gz)) == gz  # mtime 0: deterministic bytes


def test_an_interrupted_run_keeps_a_plain_curve_and_resumes_from_either_form(tmp_path, monkeypatch):
    """A checkpointed, unfinished run's curve is the plain metrics.csv; a resume reads its rows
    from it, or from a metrics.csv.gz where the process stopped between storing the curve
    compressed and sealing the record, and the finished run's curve is the same either way."""
    from kanx.records import gzip_bytes
    from kanx.runner import run_jobs

    for name, compress in (("plain", False), ("gz", True)):
        configs = run_dirs(tmp_path / name, "E", betas="0.1")
        run_until_interrupted(configs, 8, monkeypatch)
        run_dir = configs[0][1]
        assert (run_dir / "metrics.csv").is_file() and not (run_dir / "metrics.csv.gz").exists()
        assert (run_dir / "checkpoint.pt").is_file() and not (run_dir / "done").exists()
        if compress:
            (run_dir / "metrics.csv.gz").write_bytes(gzip_bytes((run_dir / "metrics.csv").read_bytes()))
            (run_dir / "metrics.csv").unlink()
        run_jobs(configs)
        assert not (run_dir / "metrics.csv").exists()
        assert list(kanx.load_run(run_dir).history["epoch"]) == [2, 4, 6, 8, 10, 12]
    a, b = (kanx.load_run(next((tmp_path / n).rglob("done")).parent).history for n in ("plain", "gz"))
    pd.testing.assert_frame_equal(a.drop(columns="elapsed_s"), b.drop(columns="elapsed_s"))


def legacy_run(root, name, rows="epoch,loss\n2,1.0\n4,0.5\n"):
    """A finished run as committed before curves were compressed: record.json, plain
    metrics.csv, and a done marker holding both checksums."""
    from kanx.records import seal

    run_dir = root / name
    run_dir.mkdir(parents=True)
    (run_dir / "record.json").write_text(json.dumps({"status": "ok", "dataset": name}))
    (run_dir / "metrics.csv").write_text(rows)
    seal(run_dir, with_model=False)
    return run_dir


def test_compress_curves_converts_finished_runs_once_and_leaves_those_its_marker_does_not_vouch_for(tmp_path, capsys):
    """`python -m kanx.records compress-curves ROOT`: each finished run's metrics.csv becomes
    metrics.csv.gz, its done marker (modification time kept) vouches for the new file; again, it
    changes nothing; a run whose curve or record does not match its marker is left as it is and
    named; a marker from before curves were checksummed vouches for the .gz no more than it did
    for the plain curve (compressed, unchecked as before); a checkpointed, unfinished run keeps
    its plain curve."""
    import os

    from kanx.history import read_history
    from kanx.records import compress_curves, integrity_problem, main, read_state
    from kanx.vocab import CURVES

    good = legacy_run(tmp_path, "good")
    os.utime(good / "done", ns=(1, 1_000_000_000))
    changed = legacy_run(tmp_path, "changed")
    (changed / "metrics.csv").write_text("epoch,loss\n2,1.0\n")  # cut short since sealed
    unlisted = legacy_run(tmp_path, "unlisted")
    sums = json.loads((unlisted / "done").read_text())["sha256"]
    (unlisted / "done").write_text(json.dumps({"sha256": {k: v for k, v in sums.items() if k != "metrics.csv"}}))
    training = tmp_path / "training"
    training.mkdir()
    (training / "metrics.csv").write_text("epoch,loss\n2,1.0\n")
    before = {d: (d / "metrics.csv").read_bytes() for d in (changed, training)}
    expected, unlisted_marker = read_history(good), (unlisted / "done").read_bytes()

    assert main(["compress-curves", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert ("compressed the training curves of 2 finished run(s)" in out and "1 of them unchecked as before" in out
            and "left 1" in out)
    assert f"{changed}:" in out and "metrics.csv is corrupt" in out
    assert (unlisted / "done").read_bytes() == unlisted_marker and not (unlisted / "metrics.csv").exists()
    assert read_history(unlisted)["epoch"].tolist() == [2, 4]
    assert sorted(p.name for p in good.iterdir() if p.name in CURVES) == ["metrics.csv.gz"]
    marker = json.loads((good / "done").read_text())["sha256"]
    assert set(marker) == {"record.json", "metrics.csv.gz"}
    assert integrity_problem(good, files=("record.json", *CURVES)) is None and read_state(good).status == "done"
    assert (good / "done").stat().st_mtime_ns == 1_000_000_000
    pd.testing.assert_frame_equal(read_history(good), expected)
    for d, data in before.items():  # left as they were
        assert (d / "metrics.csv").read_bytes() == data and not (d / "metrics.csv.gz").exists()

    gz, done = (good / "metrics.csv.gz").read_bytes(), (good / "done").read_bytes()
    converted, left, _ = compress_curves(tmp_path)
    assert converted == [] and [d for d, _ in left] == [changed]
    assert (good / "metrics.csv.gz").read_bytes() == gz and (good / "done").read_bytes() == done  # idempotent

    # A conversion stopped after the marker was rewritten, before the plain file went: finished.
    (good / "metrics.csv").write_bytes(gzip.decompress(gz))
    assert compress_curves(tmp_path)[0] == [good] and not (good / "metrics.csv").exists()
    # ... and stopped after the .gz was written, before the marker: the plain file still verifies.
    stopped = legacy_run(tmp_path, "stopped")
    (stopped / "metrics.csv.gz").write_bytes(b"half")
    assert compress_curves(tmp_path)[0] == [stopped] and integrity_problem(stopped, files=CURVES) is None
    assert read_history(stopped)["epoch"].tolist() == [2, 4]


# ---------------------------------------------------------------- watching a run: live rows, trackers


def test_metrics_csv_grows_on_the_log_cadence_while_the_run_trains(tmp_path, monkeypatch):
    """No checkpoint falls inside these 12 epochs (train.checkpoint_every=500), yet after every
    epoch the run folder's metrics.csv holds the rows up to it, one every train.log_every=2."""
    from kanx.trainer import Trainer

    configs = run_dirs(tmp_path, "E", betas="0.1")
    live, seen, train = configs[0][1] / "metrics.csv", [], Trainer.train

    def watched(self, on_epoch=None, host_every=()):
        def after(trainer, progress):
            on_epoch(trainer, progress)
            seen.append((trainer.epoch, list(pd.read_csv(live)["epoch"]) if live.exists() else []))
        return train(self, after, host_every)

    monkeypatch.setattr(Trainer, "train", watched)
    assert run_plan(configs) == 0
    assert seen == [(e, list(range(2, e + 1, 2))) for e in range(1, 13)]
    assert not (configs[0][1] / "checkpoint.pt").exists()


def tracked(root, logger, betas="0.0,0.1"):
    """The jobs of run_dirs(root, "E", betas=betas) with `logger=LOGGER`."""
    return sweep_jobs("sin_xy2", "E", [f"results_root={root}", "seed=0", f"beta={betas}", f"logger={logger}", *ARGS])


def test_logger_tensorboard_writes_each_runs_rows_as_event_files_tensorboard_reads(tmp_path):
    """`logger=tensorboard`: each run folder's tensorboard/ holds the rows of its metrics.csv as
    scalars (step = epoch) that TensorBoard's own reader finds; the logger is no part of a run's
    identity (same folders, same config hash as without it)."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    configs = tracked(tmp_path, "tensorboard")
    assert [d for _, d in configs] == [d for _, d in run_dirs(tmp_path, "E")]
    assert run_plan(configs) == 0
    for _, run_dir in configs:
        events = EventAccumulator(str(run_dir / "tensorboard")).Reload()
        curve = kanx.load_run(run_dir).history
        rows = {tag for tag in events.Tags()["scalars"] if not tag.startswith("final/")}  # final/: the results
        assert rows == set(curve.columns) - {"epoch"}
        for column in ("loss", "lc", "open_gates", "beta"):
            scalars = events.Scalars(column)
            assert [s.step for s in scalars] == list(curve["epoch"])
            assert [s.value for s in scalars] == pytest.approx(list(curve[column]), rel=1e-6)
    from kanx.config import config_hash, to_container

    record = json.loads((configs[0][1] / "record.json").read_text())
    assert record["config"]["logger"] == {"tensorboard": {"_target_": "kanx.loggers.TensorBoardLogger"}}
    assert record["config_hash"] == config_hash(to_container(run_dirs(tmp_path, "E")[0][0]))


def test_logger_tensorboard_purges_what_a_stopped_process_logged_after_its_checkpoint(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    from helpers import run_until_interrupted
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from kanx.runner import run_jobs

    configs = tracked(tmp_path, "tensorboard", betas="0.1")
    run_until_interrupted(configs, 8, monkeypatch)  # checkpoint at 6, rows logged up to 8
    run_jobs(configs)
    events = EventAccumulator(str(configs[0][1] / "tensorboard")).Reload()
    assert [s.step for s in events.Scalars("loss")] == [2, 4, 6, 8, 10, 12]  # epoch 8 once: the resumed process's


def test_logger_mlflow_makes_one_run_per_member_in_a_local_store(tmp_path):
    """`logger=mlflow`: an MLflow run per kanx run, in <results_root>/mlflow.db, its metrics the
    rows of metrics.csv (step = epoch), finished with the run."""
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")

    configs = tracked(tmp_path, "mlflow")
    assert run_plan(configs) == 0
    client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("kanx")
    runs = {r.data.tags["kanx.run_dir"]: r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {str(d.resolve()) for _, d in configs}
    for _, run_dir in configs:
        run, curve = runs[str(run_dir.resolve())], kanx.load_run(run_dir).history
        assert run.info.status == "FINISHED" and run.data.params["condition"] == "E"
        history = client.get_metric_history(run.info.run_id, "loss")
        assert [m.step for m in history] == list(curve["epoch"])
        assert [m.value for m in history] == pytest.approx(list(curve["loss"]))


def test_a_cut_last_line_is_dropped_and_a_row_with_new_columns_rewrites_the_curve(tmp_path):
    """The live file's appends (kanx.curves._append): a process killed mid-write leaves a cut
    last line, which reading drops; a row with columns the file lacks (a run resumed by a kanx
    that logs more) rewrites it with both, the older rows without the new column."""
    from kanx.curves import _append, read_rows

    path = tmp_path / "metrics.csv"
    columns = _append(path, None, {"epoch": 2, "loss": 1.0})
    columns = _append(path, columns, {"epoch": 4, "loss": 0.5})
    assert path.read_text() == "epoch,loss\n2,1.0\n4,0.5\n"
    with open(path, "a") as f:
        f.write("6,0.2")  # killed before the newline: 0.2 may be 0.25 cut short
    assert read_rows(path) == [{"epoch": 2, "loss": 1.0}, {"epoch": 4, "loss": 0.5}]
    path.write_text("epoch,loss\n2,1.0\n4,0.5\n")
    assert _append(path, columns, {"epoch": 6, "loss": 0.2, "tau_x": 1.5}) == ["epoch", "loss", "tau_x"]
    assert path.read_text().splitlines()[0] == "epoch,loss,tau_x"
    assert read_rows(path) == [{"epoch": 2, "loss": 1.0}, {"epoch": 4, "loss": 0.5},
                               {"epoch": 6, "loss": 0.2, "tau_x": 1.5}]


def test_logger_mlflow_continues_a_resumed_runs_mlflow_run(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from helpers import run_until_interrupted

    from kanx.runner import run_jobs

    configs = tracked(tmp_path, "mlflow", betas="0.1")
    run_until_interrupted(configs, 8, monkeypatch)  # checkpoint at 6, rows logged up to 8
    run_jobs(configs)
    client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("kanx").experiment_id])
    assert run.info.status == "FINISHED"
    # the stopped process's epoch 8 stays beside the resumed one's (MLflow keeps every point)
    assert [m.step for m in client.get_metric_history(run.info.run_id, "loss")] == [2, 4, 6, 8, 8, 10, 12]


def test_live_files_kept_open_or_opened_per_row_hold_the_same_rows_through_a_change_of_columns(tmp_path, monkeypatch):
    """A pack keeps its members' live files open (as many as the file limit allows; the rest
    are opened per row): both give the same file, also when a row with new columns rewrites it
    (the open handle is replaced, not written into the old file), and flush and close work on both."""
    import kanx.curves as curves_module
    from kanx.curves import Curves, read_rows

    monkeypatch.setattr(curves_module, "_open_budget", lambda: 1)  # member 0 kept open, member 1 opened per row
    dirs = [tmp_path / "kept", tmp_path / "per_row"]
    for d in dirs:
        d.mkdir()
    curves = Curves(dirs, every=2, resume_epoch=0)
    rows = [{"epoch": 2, "loss": 1.0}, {"epoch": 4, "loss": 0.5}, {"epoch": 6, "loss": 0.25, "tau_x": 1.5},
            {"epoch": 8, "loss": 0.125, "tau_x": 1.0}]
    for row in rows:
        for m in range(2):
            curves.columns[m] = curves._append(m, row)
        assert [read_rows(d / "metrics.csv") for d in dirs] == [
            [{k: v for k, v in r.items()} for r in rows[: rows.index(row) + 1]]] * 2
    assert list(curves._files) == [0]
    curves.flush()
    curves.close()
    assert not curves._files
    assert (dirs[0] / "metrics.csv").read_bytes() == (dirs[1] / "metrics.csv").read_bytes()


# ---------------------------------------------------------------- the held-out error column

HELD_OUT = ("val_rmse", "test_rmse", "val_rmse_one_step", "test_rmse_one_step")


def last_rows(configs) -> list[tuple[dict, dict]]:
    """(last curve row, record metrics) of each run."""
    return [(kanx.load_run(d).history.iloc[-1].to_dict(), kanx.load_run(d).record["metrics"]) for _, d in configs]


@pytest.mark.parametrize(("dataset", "extra", "column"), [
    ("sin_xy2", [], "test_rmse"),
    ("sin_xy2", ["dataset.val_fraction=0.25"], "val_rmse"),
    ("ikeda", ["dataset.val_fraction=0.2"], "val_rmse_one_step"),
    ("ikeda", [], "test_rmse_one_step"),
])
def test_each_row_has_the_held_out_error_and_the_last_is_the_records(tmp_path, dataset, extra, column):
    """One held-out column a run: the validation split's where it has one (and then no test
    column: tuning must not read the test set), else the test split's, one-step for a dynamical
    system; the last row (the last epoch's) holds the record's number of that name, in the data's
    units through the record's inference gates (the record scores model.pt alone on one thread)."""
    configs = sweep_jobs(dataset, "EX", [f"results_root={tmp_path}", "seed=0", "beta=0.0,0.1", *ARGS, *extra])
    assert run_plan(configs) == 0
    for row, metrics in last_rows(configs):
        assert row["epoch"] == 12 and [c for c in HELD_OUT if c in row] == [column]
        assert row[column] == pytest.approx(metrics[column], rel=1e-5)
    curve = kanx.load_run(configs[1][1]).history[column]  # beta 0.1
    # the model's error as it trains (Ikeda's gates start closed, alpha -2: 12 epochs open none, its error stays put)
    assert curve.notna().all() and (curve.nunique() > 1 or dataset == "ikeda")


def test_a_mixed_pack_scores_each_member_on_its_own_data(tmp_path):
    """Nguyen F1 and F2 in one pack: each member's held-out column is its own dataset's error
    (the record scores each model.pt alone on its own data), not its neighbour's."""
    small = ["dataset.n_train=128", "dataset.n_test=64", "train.batch_size=32", "train.compile=false",
             "train.epochs=6", "train.warmup=2", "train.fc_warmup=1", "train.log_every=3", "model.width=[1,3,3,1]",
             "train.grid_update_count=2", "train.grid_update_every=1"]
    configs = [c for d in ("nguyen_f1", "nguyen_f2")
               for c in sweep_jobs(d, "E", [f"results_root={tmp_path}", "seed=0", "beta=0.01", *small])]
    assert run_plan(configs, group="all") == 0
    (f1, f1_metrics), (f2, f2_metrics) = last_rows(configs)
    assert kanx.load_run(configs[0][1]).record["timing"]["pack_size"] == 2
    assert f1["test_rmse"] == pytest.approx(f1_metrics["test_rmse"], rel=1e-5)
    assert f2["test_rmse"] == pytest.approx(f2_metrics["test_rmse"], rel=1e-5)
    assert abs(f1["test_rmse"] - f2["test_rmse"]) > 1e-3 * f1["test_rmse"]  # two datasets, two errors


@pytest.mark.parametrize("graph", [False, True])
def test_the_held_out_column_changes_no_training(tmp_path, monkeypatch, graph):
    """A mixed pack (EFX and Baseline) trained with the column and without it (the runner given no
    HeldOut) ends with the same weights bit for bit, the same records and the same other columns;
    with train.cuda_graph (its CPU path here) the host interrupts the epochs at the same chunks."""
    import torch

    import kanx.runner
    from kanx.epoch_graph import EpochGraph

    chunks: dict[str, list] = {"on": [], "off": []}
    run = EpochGraph.run

    def off(*args, **kwargs):
        return None

    def trained(name):
        def spied(self, first, n, alive):
            chunks[name].append((first, n))
            return run(self, first, n, alive)

        with monkeypatch.context() as patch:
            patch.setattr(EpochGraph, "run", spied)
            if name == "off":
                patch.setattr(kanx.runner, "HeldOut", off)
            configs = [c for cond, betas in (("EFX", "0.0,0.1"), ("baseline", "0.0"))
                       for c in sweep_jobs("sin_xy2", cond, [f"results_root={tmp_path / name}", "seed=0,1",
                                                             f"beta={betas}", f"train.cuda_graph={graph}", *ARGS])]
            assert run_plan(configs, group="all") == 0
        return [kanx.load_run(d) for _, d in configs]

    on, without = trained("on"), trained("off")
    assert chunks["on"] == chunks["off"] and bool(chunks["on"]) == graph
    for a, b in zip(on, without, strict=True):
        assert a.record["metrics"] == b.record["metrics"] and a.record["config_hash"] == b.record["config_hash"]
        state_a, state_b = a.model.state_dict(), b.model.state_dict()
        assert state_a.keys() == state_b.keys() and all(torch.equal(state_a[k], state_b[k]) for k in state_a)
        assert "test_rmse" in a.history.columns and not set(HELD_OUT) & set(b.history.columns)
        pd.testing.assert_frame_equal(a.history.drop(columns=["test_rmse", "elapsed_s"]),
                                      b.history.drop(columns="elapsed_s"))


def test_the_curve_figures_draw_the_held_out_column_a_run_has_and_tolerate_none():
    """A panel for the held-out column a curve has (its name says which split, one-step or not);
    none for a curve from before the column, drawn as before."""
    from kanx.analyze.curve_figures import cell_figure, run_figure

    rows = pd.DataFrame({"epoch": [2, 4, 6], "loss": [1.0, 0.5, 0.2], "data_loss": [1.0, 0.5, 0.2],
                         "lc": [3.0, 2.0, 2.0], "beta": [0.0, 0.1, 0.1], "open_gates": [9, 7, 5]})

    def titles(figure):
        return [ax.get_title() for ax in figure.axes if ax.get_visible()]

    assert titles(run_figure(rows, "old")) == ["training loss", "data loss", "$L_C$", "open gates (edges)"]
    for column, title in (("val_rmse", "validation RMSE"), ("test_rmse_one_step", "test RMSE (one step)")):
        with_column = rows.assign(**{column: [0.9, 0.4, 0.3]})
        assert titles(run_figure(with_column, "new")) == ["training loss", "data loss", title, "$L_C$",
                                                          "open gates (edges)"]
        line = run_figure(with_column, "new").axes[2].get_lines()[0]  # then the beta onset's dotted line
        assert list(line.get_ydata()) == [0.9, 0.4, 0.3]
        assert titles(cell_figure({0: rows, 1: with_column}, "cell"))[2] == title
