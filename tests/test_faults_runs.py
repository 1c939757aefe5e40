"""Nothing finished is ever lost or replaced by accident (issue #34): a pack that cannot write
keeps the records it finished, a lock left by no live process expires, a single run is
prepared and stopped as a sweep is, a signal's checkpoint keeps the curve's rows, and an
empty done marker vouches for nothing."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import TOY, cli, wait_for

from kanx import records

ARGS = ["train.epochs=2", "train.warmup=1", "train.fc_warmup=1", *TOY]


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def started(pid: int) -> int:
    """The start time of process ``pid`` (clock ticks after boot, /proc/<pid>/stat field 22)."""
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        pytest.skip("no /proc")
    return int(stat.read_text().rsplit(")", 1)[1].split()[19])


# ---------------------------------------------------------------- locks


def test_a_lock_naming_no_live_process_is_taken_over_and_is_not_running(tmp_path):
    from kanx.status import run_state

    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        start = started(sleeper.pid)
        cases = {  # lock contents -> taken over (stale)?
            "empty, just written": ("", 0, False),  # its writer is between creating and filling it
            "empty, older than the refresh interval": ("", records.LOCK_REFRESH_S + 1, True),
            "garbled, older than the refresh interval": ('{"host": "x", "pi', records.LOCK_REFRESH_S + 1, True),
            "a live process": (json.dumps({"host": socket.gethostname(), "pid": sleeper.pid, "start": start}), 0,
                               False),
            "a reused pid": (json.dumps({"host": socket.gethostname(), "pid": sleeper.pid, "start": start - 1}), 0,
                             True),
        }
        for name, (text, seconds, stale) in cases.items():
            run_dir = tmp_path / name
            run_dir.mkdir()
            (run_dir / "lock").write_text(text)
            age(run_dir / "lock", seconds)
            assert (run_state(run_dir)[0] == "running") is not stale, name  # kanx.status judges it as try_lock does
            assert records.try_lock(run_dir) is stale, name
            if stale:
                assert json.loads((run_dir / "lock").read_text())["pid"] == os.getpid()
                records.unlock(run_dir)
    finally:
        sleeper.kill()
        sleeper.wait()
    dead = tmp_path / "dead"
    dead.mkdir()
    (dead / "lock").write_text(json.dumps({"host": socket.gethostname(), "pid": sleeper.pid, "start": start}))
    assert run_state(dead)[0] == "missing"  # status said running


def test_a_lock_says_which_process_took_it_and_when(tmp_path):
    assert records.try_lock(tmp_path)
    held = json.loads((tmp_path / "lock").read_text())
    assert held["host"] == socket.gethostname() and held["pid"] == os.getpid()
    assert held["start"] == started(os.getpid()) and abs(held["taken"] - time.time()) < 60
    assert records.lock_is_live(tmp_path)
    records.unlock(tmp_path)


def test_a_single_run_takes_over_an_empty_lock_left_long_ago(tmp_path):
    from helpers import train_run

    from kanx.plan import sweep_jobs

    ((_, run_dir),) = sweep_jobs("sin_xy2", "E", [f"results_root={tmp_path}", "seed=0", "beta=0.1", *ARGS])
    run_dir.mkdir(parents=True)
    (run_dir / "lock").write_text("")
    age(run_dir / "lock", records.LOCK_REFRESH_S + 1)
    train_run(run_dir, "+condition=E", f"results_root={tmp_path}", "seed=0", "beta=0.1", *ARGS)
    assert records.read_state(run_dir).status == "done" and not (run_dir / "lock").exists()


# ---------------------------------------------------------------- a single run is a sweep of one


@pytest.mark.slow
def test_a_single_run_into_an_unusable_results_root_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    p = cli("+condition=E", f"results_root={blocker / 'results'}", *ARGS, check=False)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr[-3000:]
    assert p.stderr.startswith(f"python -m kanx.train: error: {blocker} is not a folder, so the results in "
                               f"{blocker / 'results'}/"), p.stderr


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
@pytest.mark.slow
def test_a_signal_to_a_single_run_checkpoints_it_in_one_line(tmp_path, signame):
    args = ["-m", "kanx.train", "+condition=E", f"results_root={tmp_path}", "train.epochs=1500",
            "train.warmup=1", "train.fc_warmup=1", "train.checkpoint_every=0", "beta=0.1", "seed=0", *TOY]
    p = subprocess.Popen([sys.executable, *args], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                         env=os.environ | {"PYTHONUNBUFFERED": "1"})
    wait_for(tmp_path, "lock")
    time.sleep(2)
    sig = getattr(signal, signame)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert (p.returncode == 128 + sig
            and err.strip().splitlines()[-1] == f"{signame}: saved checkpoints of 1 run(s); stopping"), err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    (ckpt,) = tmp_path.rglob("checkpoint.pt")
    assert 0 < torch.load(ckpt, weights_only=True)["epoch"] < 1500 and not list(tmp_path.rglob("lock"))


# ---------------------------------------------------------------- a pack that cannot write


@pytest.fixture
def own_signals():
    """run_command installs the CLI's SIGTERM/SIGINT handlers: pytest's come back after the test."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def disk_full_from(model_number: int, monkeypatch, code: int) -> None:
    """From the ``model_number``-th model.pt written on, every fsync fails with ``code`` (the disk
    filled up, or turned read-only, there)."""
    import kanx.runner

    models, save = [], kanx.runner._save_torch

    def counting(path, obj):
        models.extend([path] if path.name == "model.pt" else [])
        return save(path, obj)

    def fsync(fd):
        if len(models) >= model_number:
            raise OSError(code, os.strerror(code))
        return real_fsync(fd)

    real_fsync = os.fsync
    monkeypatch.setattr(kanx.runner, "_save_torch", counting)
    monkeypatch.setattr(os, "fsync", fsync)


# ENOSPC, EROFS
@pytest.mark.parametrize("code,cause", [(28, "the disk is full"), (30, "the file system is read-only")])
def test_a_pack_that_cannot_write_keeps_its_finished_records_and_stops_in_one_line(
        tmp_path, monkeypatch, capsys, caplog, own_signals, code, cause):
    from kanx.plan import sweep_jobs
    from kanx.runner import run_command

    configs = sweep_jobs("sin_xy2", "EFX", [f"results_root={tmp_path}", "seed=0,1,2,3,4,5", "beta=0.1", *ARGS])
    with monkeypatch.context() as patch:
        disk_full_from(4, patch, code)  # seeds 0-2 are recorded, seed 3's model.pt hits the full disk
        with pytest.raises(SystemExit) as stop:
            run_command(configs, tmp_path, tmp_path)
    err = capsys.readouterr().err
    seed3 = configs[3][1]
    assert stop.value.code == 1 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"kanx: error: cannot write {seed3 / 'model.pt'}: {cause}"), err
    states = [records.read_state(run_dir) for _, run_dir in configs]
    # the finished records stay, no failed one was written
    assert [s.status for s in states] == ["done"] * 3 + ["new"] * 3
    assert all(s.record["status"] in ("ok", "collapsed") for s in states[:3])
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.rglob("lock"))
    stamps = {f: f.stat().st_mtime_ns for f in tmp_path.rglob("record.json")}
    with caplog.at_level("INFO", logger="kanx"):
        run_command(configs, tmp_path, tmp_path)  # room again: the same command trains the three others
    assert "3 of 6 runs already have records" in caplog.text
    assert all(records.read_state(run_dir).status == "done" for _, run_dir in configs)
    assert all(f.stat().st_mtime_ns == t for f, t in stamps.items())


def test_a_failing_pack_leaves_the_records_it_finished_alone(tmp_path, monkeypatch):
    """Any error after a member's record is written (here: while writing the next one's model)
    makes `failed` records of the others only."""
    import kanx.runner
    from kanx.plan import sweep_jobs
    from kanx.runner import run_jobs

    configs = sweep_jobs("sin_xy2", "E", [f"results_root={tmp_path}", "seed=0,1,2", "beta=0.1", *ARGS])
    save, models = kanx.runner._save_torch, []

    def third_fails(path, obj):
        models.extend([path] if path.name == "model.pt" else [])
        if len(models) == 3:
            raise RuntimeError("planted fault")
        return save(path, obj)

    monkeypatch.setattr(kanx.runner, "_save_torch", third_fails)
    recs = run_jobs(configs)
    assert [r["status"] for r in recs] == ["ok", "ok", "failed"] and "planted fault" in recs[2]["error"]


@pytest.mark.slow
def test_a_real_full_disk_keeps_the_finished_records(tmp_path):
    """The same on a 216 KiB tmpfs (where mounting is permitted: root): the runs' .hydra/ take about
    100 KiB, then model.pt files fill it."""
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=216k", "tmpfs", str(tiny)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        p = cli("+condition=EFX", "seed=0,1,2,3,4,5", "beta=0.1", f"results_root={tiny}", *ARGS, "-m", check=False)
        assert (p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1
                and "the disk is full" in p.stderr), p.stderr[-3000:]
        states = [records.read_state(d) for d in sorted(tiny.glob("sin_xy2/EFX/*/beta=*"))]
        assert len(states) == 6 and all(s.status in ("done", "new") for s in states), states
        assert 0 < sum(s.status == "done" for s in states) < 6 and all(
            s.record["status"] != "failed" for s in states if s.record)
    finally:
        subprocess.run(["umount", str(tiny)], check=True)


# ---------------------------------------------------------------- a signal's checkpoint and the curve


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])  # SIGINT: Ctrl-C
def test_a_signal_checkpoint_keeps_the_curve_up_to_its_epoch(tmp_path, monkeypatch, own_signals, signame):
    """Ctrl-C or SIGTERM at epoch 9, after the periodic checkpoint at 6: the resumed run's
    metrics.csv is the uninterrupted run's from epoch 1, row for row (training seconds aside),
    epochs 7 to 9 included (the issue's Ctrl-C at epoch 30, scaled down)."""
    import pandas as pd

    from kanx.plan import sweep_jobs
    from kanx.runner import run_command
    from kanx.trainer import Trainer

    def configs(root):
        return sweep_jobs("sin_xy2", "E", [f"results_root={root}", "seed=0", "beta=0.1", "train.epochs=12",
                                           "train.warmup=4", "train.fc_warmup=2",
                                           "train.log_every=1", "train.checkpoint_every=6", *TOY])

    run_epoch = Trainer.run_epoch

    def signalled(self):
        if self.epoch == 9:
            os.kill(os.getpid(), getattr(signal, signame))  # its handler checkpoints the pack as of epoch 9, then stops
        return run_epoch(self)

    stopped = configs(tmp_path / "stopped")
    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "run_epoch", signalled)
        with pytest.raises(SystemExit) as stop:
            run_command(stopped, tmp_path, tmp_path)
    assert stop.value.code == 128 + getattr(signal, signame)
    run_dir = stopped[0][1]
    assert torch.load(run_dir / "checkpoint.pt", weights_only=True)["epoch"] == 9
    # flushed with the signal's checkpoint
    assert list(pd.read_csv(run_dir / "metrics.csv")["epoch"]) == list(range(1, 10))
    run_command(stopped, tmp_path, tmp_path)
    straight = configs(tmp_path / "straight")
    run_command(straight, tmp_path, tmp_path)
    # finished: gzipped
    resumed, whole = (pd.read_csv(c[0][1] / "metrics.csv.gz").drop(columns="elapsed_s") for c in (stopped, straight))
    assert list(whole["epoch"]) == list(range(1, 13))
    assert resumed.to_dict("records") == whole.to_dict("records")  # resuming is bitwise


# ---------------------------------------------------------------- done markers


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A trained run's folder: record.json, model.pt, metrics.csv and its sealed done marker."""
    from helpers import train_run

    root = tmp_path_factory.mktemp("finished")
    return train_run(root / "sin_xy2" / "E" / "t" / "beta=0.1,seed=0", "+condition=E", f"results_root={root}",
                     "seed=0", "beta=0.1", *ARGS)


def unsealed_copy(finished: Path, run_dir: Path, status: str | None = None) -> Path:
    """A copy of a finished run with an empty done marker, as written before done markers held
    checksums (2026-11-26), an old modification time, and the record's status changed if given."""
    import shutil

    shutil.copytree(finished, run_dir)
    if status:
        record = json.loads((run_dir / "record.json").read_text())
        (run_dir / "record.json").write_text(json.dumps({**record, "status": status}))
    (run_dir / "done").write_bytes(b"")
    os.utime(run_dir / "done", ns=(10**18, 10**18))
    return run_dir


def test_seal_legacy_seals_empty_markers_as_the_records_are_now(finished, tmp_path, capsys):
    root = tmp_path / "results"
    ok = unsealed_copy(finished, root / "a" / "beta=0.1,seed=0")
    failed = unsealed_copy(finished, root / "a" / "beta=0.1,seed=1", status="failed")
    (ok.parent / "beta=0.1,seed=2").mkdir()
    (ok.parent / "beta=0.1,seed=2" / "record.json").write_text("{cut sh")
    (ok.parent / "beta=0.1,seed=2" / "done").write_bytes(b"")
    sealed = unsealed_copy(finished, root / "b" / "beta=0.1,seed=0")
    records.seal(sealed)  # sealed already: left as it is
    before = (sealed / "done").read_bytes()
    assert records.main(["seal-legacy", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"sealed 2 record(s) with an empty done marker under {root} (1 with model.pt); left 1 whose "
                          "record.json is not a JSON record"), out
    assert json.loads((ok / "done").read_text())["sha256"] == {n: records.sha256_of(ok / n)
                                                               for n in ("record.json", "model.pt", "metrics.csv.gz")}
    assert json.loads((failed / "done").read_text())["sha256"] == {n: records.sha256_of(failed / n)
                                                                   for n in ("record.json", "metrics.csv.gz")}
    assert (ok / "done").stat().st_mtime_ns == 10**18 and (sealed / "done").read_bytes() == before
    assert records.read_state(ok).status == "done" and records.read_state(failed).status == "failed"
    assert (ok.parent / "beta=0.1,seed=2" / "done").read_bytes() == b""
    records.main(["seal-legacy", str(root)])
    assert capsys.readouterr().out.startswith("sealed 0 record(s)")


def test_an_empty_done_marker_vouches_for_nothing(finished, tmp_path):
    from kanx.analyze.collect import load_runs

    root = tmp_path / "results"
    run_dir = unsealed_copy(finished, root / "sin_xy2" / "E" / "t" / "beta=0.1,seed=0")
    state = records.read_state(run_dir)
    assert (state.status == "new" and state.problem.startswith(f"{run_dir / 'done'} holds no checksums")
            and "\n" not in state.problem)
    with pytest.raises(ValueError, match="holds no checksums"):
        import kanx

        kanx.load_run(run_dir)
    runs = load_runs(root)  # the analysis leaves it out and says why
    assert (len(runs) == 0
            and "holds no checksums" in dict(runs.attrs["skipped"])["sin_xy2/E/t/beta=0.1,seed=0/record.json"])
    (run_dir / "done").write_text("{}")  # a marker that lists nothing vouches for nothing either
    assert records.read_state(run_dir).status == "new"
    records.seal_legacy(root)
    assert records.read_state(run_dir).status == "new"  # not empty: only a deliberate seal vouches for it now
    records.seal(run_dir)
    assert records.read_state(run_dir).status == "done" and len(load_runs(root)) == 1


def test_a_sweep_over_records_of_the_older_format_stops_before_training_and_asks(finished, tmp_path, caplog):
    """A rerun over records with an empty done marker (before 2026-11-26) logged a warning and
    replaced them; now it stops in one line naming both ways on, and replaces them only when asked."""
    from helpers import composed

    from kanx.errors import ConfigError
    from kanx.runner import run_jobs

    root = tmp_path / "results"
    legacy = unsealed_copy(finished, root / "sin_xy2" / "E" / "t" / "beta=0.1,seed=0")
    new = legacy.parent / "beta=0.1,seed=1"
    before = {p: p.read_bytes() for p in legacy.iterdir()}

    def configs(*extra):
        return [(composed("+condition=E", f"results_root={root}", f"seed={s}", "beta=0.1", *ARGS, *extra), d)
                for s, d in ((0, legacy), (1, new))]

    with pytest.raises(ConfigError) as e:
        run_jobs(configs())
    assert str(e.value) == (
        f"1 run folder(s) hold a record in the format before 2026-11-26, whose empty done marker vouches for nothing "
        f"(e.g. {legacy}): `python -m kanx.records seal-legacy {root}` seals such records as they are now (the sweep "
        "then skips them), or overwrite=true trains them again and replaces them")
    # nothing trained, nothing written
    assert {p: p.read_bytes() for p in legacy.iterdir()} == before and not new.exists()
    assert not list(root.rglob("manifest.json"))
    damaged = unsealed_copy(finished, tmp_path / "damaged")
    (damaged / "record.json").write_text("{cut sh")  # not a record seal-legacy seals: damaged, not old; it trains again
    run_jobs([(composed("+condition=E", f"results_root={root}", "seed=0", "beta=0.1", *ARGS), damaged)])
    assert records.read_state(damaged).status == "done"

    records.main(["seal-legacy", str(root)])  # the first way on: sealed as it is, then skipped
    sealed = (legacy / "record.json").read_bytes()
    run_jobs(configs())
    assert (legacy / "record.json").read_bytes() == sealed and records.read_state(new).status == "done"

    (legacy / "done").write_bytes(b"")  # the second: overwrite=true replaces it (and, as always, every finished run)
    with caplog.at_level("WARNING", logger="kanx"):
        recs = run_jobs(configs("overwrite=true"))
    assert records.read_state(legacy).status == "done" and (legacy / "record.json").read_bytes() != sealed
    assert all(r["status"] == "ok" for r in recs) and "holds no checksums" in caplog.text


def test_a_value_swept_three_times_is_one_run_named_in_one_line(tmp_path, caplog):
    """seed=0,0,0: the three jobs name one folder; prepare_jobs says so once, not once per copy."""
    import logging

    from helpers import TOY, composed

    from kanx.jobs import prepare_jobs

    run_dir = tmp_path / "seed=0"
    configs = [(composed("dataset=sin_xy2", "seed=0", *TOY, f"results_root={tmp_path}"), run_dir) for _ in range(3)]
    with caplog.at_level(logging.INFO):
        jobs = prepare_jobs(configs)
    assert len(jobs) == 1
    lines = [r.getMessage() for r in caplog.records if "trained once" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("2 job(s) name the run folder of an earlier job")
