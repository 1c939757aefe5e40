"""Faults a shared cluster brings: files in a results folder that are not what kanx wrote."""

import pickle
from pathlib import Path

import pytest
import torch
from helpers import SHARED_DATA, TOY, cli, records, wait_for

import kanx

ARGS = ["train.epochs=2", "train.warmup=1", "train.fc_warmup=1", "beta=0.1", "seed=0", *TOY]


class Planted:
    """A pickle that, when loaded, creates a file: stands for any code a pickle can run."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def edited_copy(finished: Path, run_dir: Path, edit) -> Path:
    """A copy of a finished run, ``edit(run_dir)`` applied, then sealed as it is now
    (kanx.records.seal, the deliberate way to vouch for a changed file): the loader, not the
    checksums, must then refuse what the edit planted."""
    from kanx.records import seal

    run_dir.mkdir()
    for name in ("record.json", "model.pt"):
        (run_dir / name).write_bytes((finished / name).read_bytes())
    edit(run_dir)
    seal(run_dir)
    return run_dir


def plant(path: Path, marker: Path) -> None:
    with open(path, "wb") as f:
        pickle.dump({"model": Planted(marker)}, f)


@pytest.fixture(scope="module")
def finished(finished_efx):
    return finished_efx


def test_a_planted_model_pickle_is_refused_not_run(finished, tmp_path):
    marker = tmp_path / "pwned"
    # sealed: the file gets unpickled
    run_dir = edited_copy(finished, tmp_path / "run", lambda d: plant(d / "model.pt", marker))
    with pytest.raises(ValueError, match="pickled Python objects"):
        kanx.load_run(run_dir)
    assert not marker.exists()


@pytest.mark.slow
def test_a_planted_checkpoint_pickle_is_not_run_and_the_run_starts_again(tmp_path):
    from kanx.plan import sweep_jobs

    root = tmp_path / "results"
    ((_, run_dir),) = sweep_jobs("sin_xy2", "EFX", [f"results_root={root}", *ARGS])
    run_dir.mkdir(parents=True)
    marker = tmp_path / "pwned"
    plant(run_dir / "checkpoint.pt", marker)
    p = cli("+condition=EFX", f"results_root={root}", *ARGS)
    assert not marker.exists()
    assert "cannot be loaded as tensors and plain data" in p.stderr + p.stdout
    (rec,) = records(root)
    assert rec["status"] == "ok" and not (run_dir / "checkpoint.pt").exists()


def test_model_files_hold_plain_data_and_a_truncated_one_is_named(finished, tmp_path):
    saved = torch.load(finished / "model.pt", weights_only=True)  # raises if anything is pickled
    assert saved["format"] == 2 and saved["condition"] == "EFX"
    run = kanx.load_run(finished)
    assert run.model.condition.name == "EFX" and run.scaling.input_scaling == "minmax"
    run_dir = edited_copy(finished, tmp_path / "run",
                          lambda d: (d / "model.pt").write_bytes((finished / "model.pt").read_bytes()[:200]))
    with pytest.raises(ValueError, match=r"model\.pt is unreadable or truncated"):
        kanx.load_run(run_dir)


@pytest.mark.slow
def test_a_failed_pack_is_recorded_and_the_sweep_exits_nonzero(tmp_path):
    """A pack that raises mid-training (here: a planted error in the trainer, standing for an
    out-of-memory or a device fault) writes `failed` records and the sweep exits 1."""
    import subprocess
    import sys

    code = ("import sys, kanx.trainer as t\n"
            "def boom(self): raise RuntimeError('planted fault')\n"
            "t.Trainer.run_epoch = boom\n"
            "import runpy\n"
            f"sys.argv = ['kanx.train', '+condition=E', 'results_root={tmp_path}', 'seed=0,1', "
            + ", ".join(repr(a) for a in ARGS if a != "seed=0") + ", '-m']\n"
            "runpy.run_module('kanx.train', run_name='__main__', alter_sys=True)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr[-2000:]
    assert "2 of 2 run(s) failed" in p.stderr
    recs = records(tmp_path)
    assert [r["status"] for r in recs] == ["failed", "failed"] and "planted fault" in recs[0]["error"]


@pytest.mark.slow
def test_bad_numbers_and_devices_stop_before_compute(tmp_path):
    import torch

    for override, message in (("beta=inf", "beta=inf must be a finite number"),
                              ("train.lr=nan", "train.lr=nan must be a finite number"),
                              ("train.batch_size=1", "makes batches of 1")):
        p = cli("+condition=E", f"results_root={tmp_path}", *ARGS, override, check=False)
        assert p.returncode == 2 and message in p.stderr, p.stderr
    if not torch.cuda.is_available():
        p = cli("+condition=E", f"results_root={tmp_path}", *ARGS, "device=cuda", check=False)
        assert p.returncode == 2 and "device=cuda but torch finds no CUDA device" in p.stderr
    assert not list(tmp_path.rglob("record.json"))


@pytest.mark.slow
def test_two_identical_sweeps_at_once_train_each_run_once(tmp_path):
    import os
    import subprocess
    import sys

    args = ["-m", "kanx.train", "+condition=E", f"results_root={tmp_path}", "train.epochs=150",
            "train.warmup=1", "train.fc_warmup=1", "beta=0.0,0.1", "seed=0,1", *TOY, "-m"]
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    procs = [subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    trained = sum(out.count("[ok] ") + out.count("[collapsed] ") for out in outs)
    assert trained == 4, outs  # each of the 4 runs trained by one of the two processes
    assert len(records(tmp_path)) == 4 and not list(tmp_path.rglob("lock"))


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    import json
    import os
    import socket
    import subprocess
    import time

    from kanx.records import LOCK_STALE_S, try_lock, unlock

    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / "lock").write_text(json.dumps({"host": socket.gethostname(), "pid": dead.pid}))
    assert try_lock(tmp_path)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "lock").write_text(json.dumps({"host": "another-host", "pid": 1}))
    assert not try_lock(tmp_path / "other")  # another host's live lock: left alone
    old = time.time() - LOCK_STALE_S - 1
    os.utime(tmp_path / "other" / "lock", (old, old))
    assert try_lock(tmp_path / "other")  # not refreshed for LOCK_STALE_S: taken over
    unlock(tmp_path)
    assert not (tmp_path / "lock").exists()


def test_an_old_format_model_loads_without_unpickling_anything_else(finished, tmp_path):
    """A format-1 model.pt (kanx's KANSpec, Condition and Scaling pickled, as written before)
    still loads, through the restricted unpickler with those three classes allow-listed."""
    from kanx.load import read_model_file

    new = read_model_file(finished / "model.pt")
    old = {k: v for k, v in new.items() if k != "format"}  # KANSpec, Condition, Scaling objects
    run_dir = edited_copy(finished, tmp_path / "old", lambda d: torch.save(old, d / "model.pt"))
    with pytest.raises(pickle.UnpicklingError):  # not plain data: the default restricted load refuses it
        torch.load(run_dir / "model.pt", weights_only=True)
    run = kanx.load_run(run_dir)
    assert run.model.condition.name == "EFX" and run.scaling.input_scaling == "minmax"


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
@pytest.mark.slow
def test_sigterm_to_a_cli_sweep_checkpoints_and_the_same_command_resumes(tmp_path, signame):
    import os
    import signal
    import subprocess
    import sys
    import time

    args = ["-m", "kanx.train", "+condition=E", f"results_root={tmp_path}", "train.epochs=1500",
            "train.warmup=1", "train.fc_warmup=1", "train.checkpoint_every=0", "beta=0.1", "seed=0", *TOY, "-m"]
    p = subprocess.Popen([sys.executable, *args], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                         env=os.environ | {"PYTHONUNBUFFERED": "1"})
    wait_for(tmp_path, "lock")  # training has started
    time.sleep(2)  # some epochs (1,500 take far longer)
    sig = getattr(signal, signame)  # SIGINT: Ctrl-C
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 128 + sig and f"{signame}: saved checkpoints of 1 run(s)" in err, err[-2000:]
    (ckpt,) = tmp_path.rglob("checkpoint.pt")
    assert 0 < torch.load(ckpt, weights_only=True)["epoch"] < 1500 and not list(tmp_path.rglob("lock"))
    stopped_at = torch.load(ckpt, weights_only=True)["epoch"]
    again = cli(*args[2:-1], "-m")
    assert "resuming 1 run(s) from epoch" in again.stdout + again.stderr
    (rec,) = records(tmp_path)
    assert rec["status"] in ("ok", "collapsed") and not ckpt.exists()
    # The record says it was trained in two stretches, where and by which commit.
    first, second = rec["timing"]["segments"]
    assert first["epochs"] == [0, stopped_at] and second["epochs"] == [stopped_at, 1500]
    assert first["device"] == second["device"] == "cpu" and first["git_commit"] == rec["git_commit"]
    # ... and how long each took: the stretches' seconds add up to the run's training seconds.
    assert first["train_s"] > 0 and second["train_s"] > 0
    assert first["train_s"] + second["train_s"] == pytest.approx(rec["timing"]["train_s"], abs=0.01)


@pytest.mark.slow
def test_sigterm_to_a_plan_with_workers_is_a_stop_not_a_failure(tmp_path):
    # `kanx-reproduce --jobs n` in a time-boxed GPU job or a batch job: the workers checkpoint their packs,
    # and the plan says it was stopped (exit 128 + signal), not that packs failed.
    import os
    import signal
    import subprocess
    import sys
    import time

    code = (
        "import sys; from kanx.plan import run_plan, sweep_jobs; "
        f"args = ['results_root={tmp_path}', 'beta=0.1', 'seed=0,1', {', '.join(repr(a) for a in TOY)}, "
        "'train.epochs=1500', 'train.warmup=1', 'train.fc_warmup=1', 'train.checkpoint_every=0']; "
        "sys.exit(run_plan(sweep_jobs('sin_xy2', 'EFX', args), group='sweep', pack_size=1, workers=2, "
        "plan_dir=sys.argv[1]))"
    )
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "logs")], stderr=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, text=True, env=os.environ | {"PYTHONUNBUFFERED": "1"})
    deadline = time.time() + 120
    while len(list(tmp_path.rglob("lock"))) < 2 and time.time() < deadline:  # both workers training
        time.sleep(0.2)
    time.sleep(2)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "plan: stopped by SIGTERM" in err and err.count("SIGTERM: saved checkpoints of 1 run(s)") == 2, err[-2000:]
    assert len(list(tmp_path.rglob("checkpoint.pt"))) == 2 and not list(tmp_path.rglob("record.json"))


@pytest.mark.slow
def test_a_typo_added_with_plus_is_refused_and_a_changed_config_names_its_keys(tmp_path):
    p = cli("+condition=E", f"results_root={tmp_path}", *ARGS, "+train.epoch=3", check=False)
    assert p.returncode == 2 and "unknown key(s) train.epoch (did you mean train.epochs?)" in p.stderr, p.stderr
    assert not list(tmp_path.rglob("record.json"))
    cli("+condition=E", f"results_root={tmp_path}", *ARGS, "hydra.sweep.dir=" + str(tmp_path / "s"),
        "hydra.run.dir=" + str(tmp_path / "s"))
    p = cli("+condition=E", f"results_root={tmp_path}", *[a for a in ARGS if a != "train.fc_warmup=1"],
            "train.fc_warmup=2",
            "hydra.sweep.dir=" + str(tmp_path / "s"), "hydra.run.dir=" + str(tmp_path / "s"), check=False)
    assert p.returncode == 2 and "train.fc_warmup: 1 there, 2 now" in p.stderr, p.stderr


@pytest.mark.slow
def test_an_empty_beta_list_is_one_line_and_a_rejected_override_leaves_no_folder(tmp_path):
    p = cli("+condition=E", f"results_root={tmp_path}", *ARGS, "dataset.betas=[]", "-m", check=False)
    assert p.returncode == 2 and p.stderr.strip() == ("python -m kanx.train: error: dataset.betas is empty: give at "
                                                      "least one beta, e.g. dataset.betas=[0.0,0.01]"), p.stderr
    for extra in (["-m"], []):  # a sweep (multirun.yaml) and a single run (.hydra/, train.log)
        p = cli("+condition=E", f"results_root={tmp_path}", *ARGS, "train.lr=abc", *extra, check=False)
        assert p.returncode == 2 and "train.lr='abc' must be a number" in p.stderr, p.stderr
        assert not list(tmp_path.iterdir()), list(tmp_path.rglob("*"))
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("not Hydra's")
    cli("+condition=E", f"results_root={tmp_path}", *ARGS, "train.lr=abc", f"hydra.run.dir={kept}", check=False)
    # refused before Hydra writes anything there; a folder holding anything else is left alone
    assert (kept / "notes.txt").exists() and not (kept / ".hydra").exists()


def _write_table(path: Path, change: float = 0.0) -> None:
    rows = [f"{i / 100:.2f},{(i / 100) ** 2 + (change if i == 7 else 0.0):.4f}" for i in range(200)]
    path.write_text("x,y\n" + "\n".join(rows) + "\n")


@pytest.mark.slow
def test_a_record_holds_its_data_hash_and_changed_data_stop_before_compute(tmp_path):
    """The same command on a CSV with one value changed is refused, naming the data hashes
    (the config hash is unchanged: the path is the same); overwrite=true replaces the run."""
    from kanx.data import data_hash, load_dataset

    table = tmp_path / "table.csv"
    _write_table(table)
    args = ["dataset=csv", f"dataset.path={table}", "dataset.target=y", "model.width=[1,2,1]", "+condition=E",
            f"results_root={tmp_path / 'r'}", *ARGS]
    cli(*args)
    (first,) = records(tmp_path / "r")
    assert first["data_hash"] == data_hash(load_dataset("table", loader="csv", data_seed=0, path=str(table),
                                                        target="y", n_train=128, n_test=64))
    _write_table(table, change=0.5)
    p = cli(*args, check=False)
    now = data_hash(load_dataset("table", loader="csv", data_seed=0, path=str(table), target="y", n_train=128,
                                 n_test=64))
    assert (p.returncode == 2
            and f"dataset data hash: {first['data_hash']} there, {now} now ({table})" in p.stderr), p.stderr
    assert "overwrite=true" in p.stderr and records(tmp_path / "r") == [first]  # nothing trained
    cli(*args, "overwrite=true")
    (second,) = records(tmp_path / "r")
    assert second["data_hash"] == now and second["config_hash"] == first["config_hash"]


def test_generated_data_are_identified_by_generator_version_and_parameters(monkeypatch):
    from kanx.data import data_hash, load_dataset, registry

    f1 = data_hash(load_dataset("nguyen_f1", data_seed=0))
    assert f1 == data_hash(load_dataset("nguyen_f1", data_seed=0)) and len(f1) == 16
    assert f1 != data_hash(load_dataset("nguyen_f2", data_seed=0)) != data_hash(load_dataset("nguyen_f2", data_seed=1))
    ikeda = {"data_seed": 0, "n_train": 50, "n_test": 20}
    assert data_hash(load_dataset("ikeda", **ikeda)) != data_hash(load_dataset("ikeda", **ikeda, transient=10))
    monkeypatch.setattr(registry, "GENERATOR_VERSION", "kanx.data generators v2")
    assert data_hash(load_dataset("nguyen_f1", data_seed=0)) != f1


@pytest.mark.committed
def test_a_record_from_before_data_hashes_is_checked_against_the_reference_copy(tmp_path):
    """Records written before data hashes (results/paper/concrete) stay valid while the data
    file is the reference copy, and are refused when it is another copy."""
    from kanx.data.tabular import CONCRETE
    from kanx.errors import ConfigError
    from kanx.jobs import prepare_jobs
    from kanx.plan import sweep_jobs
    from kanx.records import write_record

    shared = SHARED_DATA
    if not (shared / "concrete.csv").is_file():
        pytest.skip("no concrete.csv")
    own = tmp_path / "own"
    own.mkdir()
    lines = (shared / "concrete.csv").read_text().splitlines()
    first = lines[1].split(",")
    first[-1] = f"{float(first[-1]) + 0.5:g}"  # one strength value changed, still in range
    (own / "concrete.csv").write_text("\n".join([lines[0], ",".join(first), *lines[2:]]) + "\n")
    overrides = [f"results_root={tmp_path / 'r'}", "seed=0", "beta=0.1", f"dataset.data_dir={shared}"]
    (job,) = prepare_jobs(sweep_jobs("concrete", "E", overrides))
    write_record(job.run_dir, {"status": "ok", "config_hash": job.config_hash, "config": job.container})  # no data_hash
    (again,) = prepare_jobs(sweep_jobs("concrete", "E", overrides))
    assert again.state.status == "done" and again.data_hash == CONCRETE.normalized_sha256[:16]
    with pytest.raises(ConfigError,
                       match=r"dataset data hash: 517b14fb95e77210 there \(the reference copy; the record predates "
                             r"data hashes\), [0-9a-f]{16} now"):
        prepare_jobs(sweep_jobs("concrete", "E", [*overrides[:-1], f"dataset.data_dir={own}"]))


def test_done_checksums_find_a_changed_or_truncated_file_and_the_run_trains_again(finished, tmp_path):
    import json
    import shutil

    from kanx.records import read_state, sha256_of

    sums = json.loads((finished / "done").read_text())["sha256"]
    assert sums == {name: sha256_of(finished / name) for name in ("record.json", "model.pt", "metrics.csv.gz")}
    for name, damage in (("model.pt", lambda b: b[:-10]), ("model.pt", lambda b: b[:-1] + bytes([b[-1] ^ 1])),
                         ("record.json", lambda b: b.replace(b'"ok"', b'"OK"'))):
        run_dir = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}"
        shutil.copytree(finished, run_dir)
        (run_dir / name).write_bytes(damage((run_dir / name).read_bytes()))
        state = read_state(run_dir)
        assert (state.status == "new" and state.problem.startswith(f"{run_dir / name} is corrupt")
                and "\n" not in state.problem)
        with pytest.raises(ValueError, match=f"{name} is corrupt") as err:
            kanx.load_run(run_dir)
        assert err.value.__suppress_context__ or err.value.__context__ is None
    run_dir = tmp_path / "gone"
    shutil.copytree(finished, run_dir)
    (run_dir / "model.pt").unlink()  # listed by the marker, gone: weights are not kept in git
    assert read_state(run_dir).status == "done" and read_state(run_dir).problem is None
    with pytest.raises(FileNotFoundError, match="holds a finished record but no weights"):
        kanx.load_run(run_dir)
    (run_dir / "record.json").unlink()
    assert read_state(run_dir).status == "new"  # without its record a run is not finished
    # An empty (pre-checksum) marker vouches for nothing: tests/test_faults_runs.py


@pytest.mark.slow
def test_a_rerun_retrains_a_run_whose_model_was_damaged_and_draw_names_the_file(tmp_path):
    import subprocess
    import sys

    cli("+condition=E", f"results_root={tmp_path}", *ARGS)
    (model,) = tmp_path.rglob("model.pt")
    model.write_bytes(model.read_bytes()[:300])
    p = subprocess.run([sys.executable, "-m", "kanx.draw", str(model.parent), "--formats", "png"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.strip() == f"python -m kanx.draw: error: {model} is corrupt: its sha256 " \
        "differs from the one its done marker holds (changed or truncated since it was written); re-run the run to " \
        "replace it", p.stderr
    p = cli("+condition=E", f"results_root={tmp_path}", *ARGS)
    out = p.stdout + p.stderr
    assert f"{model} is corrupt" in out and ("[ok] " in out or "[collapsed] " in out), out[-2000:]
    assert kanx.load_run(model.parent).model is not None


@pytest.mark.slow
def test_a_pack_too_big_for_memory_is_refused_before_compute_naming_what_to_lower(tmp_path):
    import time

    start = time.monotonic()
    p = cli("+condition=E", "dataset=nguyen_f1", "model.width=[1,1000000,1]", f"results_root={tmp_path}", "-m",
            check=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and lines[-1].startswith(
        "python -m kanx.train: error: a pack of 40 run(s) of nguyen_f1 needs about"), p.stderr
    assert "lower train.pack_size (now 70; this pack has 40 runs) or model.width=[1, 1000000, 1]" in lines[-1]
    assert not list(tmp_path.iterdir()) and time.monotonic() - start < 60


def test_memory_bound_counts_members_and_skips_an_unknown_free_memory(monkeypatch):
    from kanx import checks
    from kanx.checks import check_memory, pack_bytes
    from kanx.errors import ConfigError
    from kanx.jobs import make_packs, prepare_jobs
    from kanx.plan import sweep_jobs

    jobs = prepare_jobs(sweep_jobs("sin_xy2", "E", ["results_root=/nonexistent", "seed=0,1"]))
    (pack,) = make_packs(jobs)
    one = pack_bytes([pack[0].run])
    assert pack_bytes([j.run for j in pack]) == len(pack) * one and 0 < one < 2**30
    check_memory([pack], available=len(pack) * one)  # fits exactly
    width = list(pack[0].run.model.width)
    with pytest.raises(ConfigError,
                       match=rf"lower train.pack_size \(now 70; this pack has {len(pack)} runs\) "
                             rf"or model.width=\{width}"):
        check_memory([pack], available=len(pack) * one - 1)
    with pytest.raises(ConfigError, match=rf"lower model.width=\{width} or train.batch_size"):
        check_memory([pack[:1]], available=one - 1)
    monkeypatch.setattr(checks, "available_bytes", lambda device: None)  # free memory unknown: no check
    check_memory([pack])
    monkeypatch.setattr(checks, "available_bytes", lambda device: one - 1)
    with pytest.raises(ConfigError):
        check_memory([pack])


@pytest.mark.slow
def test_an_unwritable_results_folder_is_refused_before_training(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    p = cli("+condition=E", f"results_root={blocker / 'results'}", *ARGS, "-m", check=False)
    assert p.returncode == 2 and p.stderr.strip().startswith(
        f"python -m kanx.train: error: {blocker} is not a folder, so the results in {blocker / 'results'}/"), p.stderr
    assert (p.stderr.strip().endswith("cannot be written: choose another results_root")
            and len(p.stderr.strip().splitlines()) == 1)
    import os

    from kanx.checks import check_writable
    from kanx.errors import ConfigError

    readonly = tmp_path / "ro"
    (readonly / "run").mkdir(parents=True)
    # root ignores chmod: stand in for it
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != readonly / "run")
    check_writable([readonly / "new"])  # its results folder is writable
    with pytest.raises(ConfigError, match=f"^{readonly / 'run'} is not writable by this user, so the results in "
                                          f"{readonly / 'run'} cannot be written"):
        check_writable([readonly / "run"])


def test_a_batch_larger_than_the_training_set_uses_the_effective_batch_in_mdl_batch():
    # mdl_batch scales beta by log(b)/b with b the batch size; a nominal batch of 512 on 128
    # training rows trains on batches of 128, so b must be 128, not 512.
    from helpers import toy_data

    from kanx.config import DataConfig, RunConfig, TrainConfig
    from kanx.kan.network import Condition, KANSpec
    from kanx.kan.objective import Costs, complexity_scale
    from kanx.trainer import Trainer

    t = TrainConfig(epochs=1, batch_size=512, compile=False)
    run = RunConfig(DataConfig("sin_xy2", 0), Condition.from_name("E"), KANSpec((2, 3, 1)), Costs(), "threshold", t,
                    0.1, 0)
    pack = Trainer([run], *toy_data(1, N=128), 128, torch.device("cpu"))
    assert pack.scale == complexity_scale("mdl_batch", 128, 128) != complexity_scale("mdl_batch", 128, 512)


@pytest.mark.committed
def test_committed_records_count_as_finished_without_their_weights():
    """A clone of main has the committed records but no model.pt (``*.pt`` is git-ignored):
    every committed run must still read as done, or make reproduce-tables would retrain it."""
    from kanx.records import read_state

    repo = Path(__file__).resolve().parents[1]
    markers = sorted((repo / "results").glob("**/done"))
    if not markers:
        pytest.skip("no committed records")
    states = {m.parent: read_state(m.parent) for m in markers}
    problems = [f"{run}: {s.problem or s.status}" for run, s in states.items() if s.status != "done"]
    assert not problems, problems[:3]


def test_a_killed_writers_temporaries_are_removed_once_the_lock_is_taken(tmp_path):
    # atomic_write_bytes leaves .<name>.<random>.tmp when its process is killed between write and
    # rename; the next process to take the run's lock removes them, and only then.
    import json
    from types import SimpleNamespace

    from kanx.records import LOCK, unlock
    from kanx.runner import _lock_pending

    def job(name):
        run_dir = tmp_path / name
        run_dir.mkdir()
        (run_dir / "checkpoint.pt").write_bytes(b"kept")
        for tmp in (".checkpoint.pt.k3j9.tmp", ".metrics.csv.x1y2.tmp"):
            (run_dir / tmp).write_bytes(b"half")
        return SimpleNamespace(run_dir=run_dir, label=name, config_hash="h", run=SimpleNamespace(overwrite=False))

    free, held = job("free"), job("held")
    (held.run_dir / LOCK).write_text(json.dumps({"host": "another-host", "pid": 1}))  # a live lock elsewhere
    assert _lock_pending([free, held]) == [free]
    assert not list(free.run_dir.glob("*.tmp")) and (free.run_dir / "checkpoint.pt").read_bytes() == b"kept"
    assert len(list(held.run_dir.glob(".*.tmp"))) == 2  # another process may still be writing them
    unlock(free.run_dir)


def test_a_packs_checkpoints_killed_while_written_stay_at_one_epoch(tmp_path, monkeypatch):
    # A pack resumes as one only if its members' checkpoints share an epoch: a writer that dies
    # after some of them are written must leave none of them at the new epoch.
    import kanx.atomic
    from kanx.checkpoint import Checkpoint, write_together

    runs = [tmp_path / f"seed={s}" for s in range(3)]
    write_together([(Checkpoint(epoch=10, config_hash="h"), run) for run in runs])
    staged = []

    def dies_on_the_third(path, data, real=kanx.atomic._stage):
        if len(staged) == 2:
            raise KeyboardInterrupt  # as a signal's exception would, mid-write
        staged.append(path)
        return real(path, data)

    monkeypatch.setattr(kanx.atomic, "_stage", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        write_together([(Checkpoint(epoch=20, config_hash="h"), run) for run in runs])
    assert [Checkpoint.read(run).epoch for run in runs] == [10, 10, 10]
    assert not list(tmp_path.rglob("*.tmp"))
