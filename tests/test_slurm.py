"""The SLURM launcher (`launcher=slurm`): config, the array task, and real sweeps on a local
single-node SLURM cluster (../shared/slurm/local-cluster.sh), preemption and time limit
included.

The tests marked `slurm` need that cluster: the session fixture brings it up (root, Debian
packages through apt) or skips with the reason; with KANX_REQUIRE_SLURM=1 (CI) it fails
instead of skipping. Run them with `python -m pytest -m slurm tests/test_slurm.py`.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, records
from helpers import cli as train_cli
from helpers import composed as compose_config

from hydra_plugins.kanx_launcher.slurm_launcher import JOB_MARKER, PackTask, TaskEnds, _reason, in_flight

CLUSTER = Path(os.environ.get("KANX_SLURM_SCRIPT", ROOT.parent / "shared" / "slurm" / "local-cluster.sh"))
SHORT = ["+condition=EFX", "dataset=sin_xy2", "train.warmup=1", "train.fc_warmup=1", "train.compile=false",
         "launcher=slurm", "hydra.launcher.poll_s=1"]


# ------------------------------------------------------------------ without a cluster


def composed(*overrides):
    return compose_config(*overrides, hydra=True)


def test_launcher_slurm_takes_the_command_line_and_a_local_config(tmp_path):
    cfg = composed("launcher=slurm", "hydra.launcher.partition=debug", "hydra.launcher.pack=false")
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("slurm_launcher.SlurmLauncher")
    assert (launcher.partition, launcher.pack, launcher.wait, launcher.timeout_min) == ("debug", False, True, 60)
    # conf/local/slurm.yaml (git-ignored) is merged when present; the command line still wins
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "slurm.yaml").write_text("hydra:\n  launcher:\n    partition: gpu\n    account: lab\n    "
                                                   "setup: [module load cuda]\n")
    cfg = composed("launcher=slurm", f"hydra.searchpath=[file://{tmp_path}]", "hydra.launcher.account=other")
    assert (cfg.hydra.launcher.partition, cfg.hydra.launcher.account,
            list(cfg.hydra.launcher.setup)) == ("gpu", "other", ["module load cuda"])


def test_a_signal_before_the_first_epoch_requeues_the_task_unchanged():
    task = PackTask([({"seed": 0}, "/nowhere")])
    delayed = task.checkpoint()
    assert delayed.function is task and not delayed.args


@pytest.mark.parametrize("restarts", ["", "2"])
def test_overwrite_drops_old_records_on_the_first_attempt_only(tmp_path, monkeypatch, restarts):
    import kanx.runner

    run = tmp_path / "run"
    run.mkdir()
    for name in ("record.json", "done", "checkpoint.pt"):
        (run / name).write_text("old")
    seen = []
    monkeypatch.setattr(kanx.runner, "run_jobs",
                        lambda runs, pack_size, group, checkpointer: seen.append((runs, pack_size, checkpointer))
                        or [None])
    monkeypatch.setenv("SLURM_RESTART_COUNT", restarts)
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        PackTask([({"overwrite": True}, str(run)), ({"overwrite": False}, str(tmp_path / "other"))])()
    finally:
        signal.signal(signal.SIGTERM, sigterm)
    first = restarts == ""
    assert (run / "done").exists() is not first and (run / "checkpoint.pt").exists() is not first
    assert [c["overwrite"] for c, _ in seen[0][0]] == [False, False] and seen[0][1] == 2
    assert isinstance(seen[0][2], kanx.runner.Checkpointer)  # the task's, which its signal handlers save


def test_a_failed_task_is_reported_by_its_exception_line():
    from submitit.core.utils import FailedJobError, UncompletedJobError

    trace = ("Traceback (most recent call last):\n  File \"x.py\", line "
             "1\nkanx.errors.DataError: concrete.csv not found in /data\n")
    failed = FailedJobError(f"Job (task=0) failed during processing with trace:\n{'-' * 22}\n{trace}\n{'-' * 22}\n"
                            "You can check full logs\n  - /a/err\n  - /a/out")
    assert _reason(failed) == "kanx.errors.DataError: concrete.csv not found in /data"
    killed = UncompletedJobError(f"Job 2_0 (task: 0) has not produced any output (state: CANCELLED by 0)\n"
                                 f"Error stream produced:\n{'-' * 40}\nsrun: error: vm: task 0: Killed\n")
    assert _reason(killed) == "srun: error: vm: task 0: Killed"


def test_runs_still_queued_are_not_submitted_twice(tmp_path):
    dirs = [tmp_path / f"r{i}" for i in range(3)]
    for d, task in zip(dirs, ["7_0", "7_1", None], strict=True):
        d.mkdir()
        if task:
            (d / JOB_MARKER).write_text(task + "\n")
    assert in_flight(dirs, {"7_1", "9"}) == {dirs[1]: "7_1"}
    assert in_flight(dirs, None) == {}


def test_a_task_being_requeued_has_not_ended(tmp_path):
    # submitit reads the CANCELLED that sacct shows for a moment during a requeue as final, and
    # squeue may not list the task then either; the launcher stopped waiting there and reported
    # the runs as failed (seen twice in CI).
    class Task:
        job_id = "5_0"

        class paths:  # noqa: N801
            result_pickle = tmp_path / "5_0_result.pkl"

        def done(self):
            return True

    ends = TaskEnds(settle_s=30)
    assert not ends.ended(Task(), {"5_0", "5_1"}, now=0)
    # out of the queue, not yet settled
    assert not ends.ended(Task(), {"5_1"}, now=1) and not ends.ended(Task(), None, now=20)
    assert not ends.ended(Task(), {"5_0"}, now=25)  # pending again: requeued
    assert not ends.ended(Task(), {"5_1"}, now=40) and ends.ended(Task(), {"5_1"}, now=70)  # out again, and for 30 s
    Task.paths.result_pickle.write_bytes(b"")
    assert TaskEnds(settle_s=30).ended(Task(), set(), now=0)  # a written result is final at once


def cli(*args, timeout=300, env=None):
    """The CLI with one thread per process (the tasks share this machine's cores); the caller checks the exit."""
    return train_cli(*args, timeout=timeout, check=False, env={"OMP_NUM_THREADS": "1"} | (env or {}))


@pytest.mark.parametrize(("arg", "message"), [
    ("hydra.launcher.timeout_min=0", "hydra.launcher.timeout_min=0 must be a whole number of minutes >= 1"),
    ("hydra.launcher.signal_delay_s=600",
     "hydra.launcher.signal_delay_s=600 must be an integer between 0 and the time limit (300 s)"),
    ("train.epochs=0", "train.epochs=0 must be >= 1"),
])
@pytest.mark.slow
def test_bad_input_stops_before_anything_is_submitted(tmp_path, arg, message):
    p = cli(*SHORT, f"results_root={tmp_path}", "hydra.launcher.timeout_min=5", "seed=0,1", arg, "-m")
    assert p.returncode == 2, p.stderr[-2000:]
    assert f"python -m kanx.train: error: {message}" in p.stderr
    assert not list(tmp_path.rglob(".submitit")) and not list(tmp_path.rglob(JOB_MARKER))


# ------------------------------------------------------------------ the local cluster


def _unavailable(reason: str):
    if os.environ.get("KANX_REQUIRE_SLURM") == "1":
        pytest.fail(f"KANX_REQUIRE_SLURM=1 but the local SLURM cluster cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def cluster():
    """The local cluster's partition: started here (and stopped after) unless already up."""
    if sys.platform != "linux":
        _unavailable("the local SLURM cluster needs Linux")
    if not CLUSTER.is_file():
        _unavailable(f"{CLUSTER} not found (it comes with ../shared/slurm)")
    script = ["bash", str(CLUSTER)]
    env_line = subprocess.run([*script, "env"], capture_output=True, text=True).stdout.strip()
    os.environ["SLURM_CONF"] = env_line.partition("SLURM_CONF=")[2]  # also for every CLI the tests start
    started = False
    if subprocess.run([*script, "status"], capture_output=True).returncode != 0:
        installed = all(subprocess.run(["bash", "-c", f"command -v {t}"], capture_output=True).returncode == 0
                        for t in ("slurmctld", "slurmd", "sbatch"))
        if os.geteuid() != 0:
            _unavailable("starting the local SLURM cluster needs root (its daemons run as root)")
        if not installed and subprocess.run(["bash", "-c", "command -v apt-get"], capture_output=True).returncode != 0:
            _unavailable("SLURM is not installed and apt-get is not available to install it (Debian packages)")
        up = subprocess.run(script + ["up"], capture_output=True, text=True, timeout=900)
        if up.returncode != 0:
            _unavailable(f"local-cluster.sh up failed (exit {up.returncode}):\n{up.stderr[-3000:]}")
        started = True
    partition = os.environ.get("KANX_SLURM_PARTITION", "debug")
    yield partition
    if started:
        subprocess.run(script + ["down"], capture_output=True, timeout=300)


def sacct(array_id: str, duplicates: bool = False, until=None) -> list[tuple[str, str]]:
    """(task id, state) of an array's tasks; -D also lists each requeued attempt. Polls until
    ``until(rows)`` (default: no task pending or running), as accounting lags a little."""
    until = until or (lambda rows: rows and not any(s in ("PENDING", "RUNNING", "REQUEUED") for _, s in rows))
    rows: list = []
    for _ in range(20):
        out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", array_id,
                              *(["-D"] if duplicates else [])],
                             capture_output=True, text=True).stdout
        rows = [tuple(line.split("|")[:2]) for line in out.splitlines() if line.strip()]
        if until(rows):
            break
        time.sleep(0.5)
    return rows


def queued(array_id: str) -> list[str]:
    return subprocess.run(["squeue", "-h", "-r", "-o", "%i", "-j", array_id], capture_output=True,
                          text=True).stdout.split()


def array_id_of(output: str) -> str:
    m = re.search(r"submitted SLURM array (\d+)", output)
    assert m, output[-3000:]
    return m.group(1)


@pytest.mark.slurm
def test_a_packed_sweep_is_one_array_task_per_pack(cluster, tmp_path):
    args = [*SHORT, f"hydra.launcher.partition={cluster}", f"results_root={tmp_path}", "train.epochs=2",
            "beta=0.1,0.2", "seed=0,1,2", "hydra.launcher.pack_size=2", "-m"]
    p = cli(*args)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout + p.stderr
    array = array_id_of(out)
    assert "3 task(s) (packs of up to 2 runs), 6 run(s)" in out and "6 of 6 runs have records" in out
    recs = records(tmp_path)
    assert sorted((r["beta"], r["seed"]) for r in recs) == [(b, s) for b in (0.1, 0.2) for s in (0, 1, 2)]
    assert all(r["status"] in ("ok", "collapsed") and r["timing"]["pack_size"] == 2 for r in recs)
    assert sorted(sacct(array)) == [(f"{array}_{i}", "COMPLETED") for i in range(3)]
    assert queued(array) == []
    # The same command again finds every record and submits nothing.
    p = cli(*args)
    assert p.returncode == 0 and "6 of 6 runs already have records" in p.stdout + p.stderr
    assert "submitted SLURM array" not in p.stdout + p.stderr


@pytest.mark.slurm
def test_reproduce_submits_one_array_of_packs_cut_across_sweeps(cluster, tmp_path):
    """make reproduce-tables LAUNCHER=slurm: 4 sweeps (2 datasets x 2 conditions) in one
    array, one task per pack, packs mixing the sweeps (group=all)."""
    script = [sys.executable, "-m", "kanx.reproduce", "--launcher", "slurm", "--scale", "smoke", "--datasets",
              "nguyen_f1", "nguyen_f2",
              "--conditions", "E", "X", "--group", "all", "--pack-size", "20", "--results", str(tmp_path),
              f"hydra.launcher.partition={cluster}", "hydra.launcher.poll_s=1"]
    env = os.environ | {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    p = subprocess.run(script, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout + p.stderr
    assert "32 to submit in 2 task(s) (group=all)" in out and "2 task(s) (packs of up to 20 runs), 32 run(s)" in out
    recs = records(tmp_path)
    assert len(recs) == 32 and {r["timing"]["pack_size"] for r in recs} == {20, 12}
    assert {(r["dataset"], r["condition"]) for r in recs} == {
        (d, c) for d in ("nguyen_f1", "nguyen_f2") for c in ("E", "X")}
    assert sorted(sacct(array_id_of(out))) == [(f"{array_id_of(out)}_{i}", "COMPLETED") for i in range(2)]
    assert (tmp_path / "report.md").exists()


@pytest.mark.slurm
def test_unpacked_without_waiting_then_slurm_wait(cluster, tmp_path):
    # Submitted held (sbatch --hold), so the tasks cannot finish before the second submission looks.
    args = [*SHORT, f"hydra.launcher.partition={cluster}", f"results_root={tmp_path}", "train.epochs=10", "seed=0,1",
            "hydra.launcher.pack=false", "hydra.launcher.wait=false", "hydra.launcher.array_parallelism=1",
            "+hydra.launcher.additional_parameters.hold=true", "-m"]
    p = cli(*args)
    assert p.returncode == 0, p.stderr[-3000:]
    array = array_id_of(p.stdout + p.stderr)
    assert "not waiting" in p.stdout and f"python -m kanx.analyze {tmp_path}" in p.stdout
    # Submitting again while the tasks are queued or running does not train the runs twice.
    again = cli(*args)
    assert again.returncode == 0 and "submitted SLURM array" not in again.stdout + again.stderr
    assert "are still queued or running from an earlier submission" in again.stdout + again.stderr
    subprocess.run(["scontrol", "release", array], check=True)
    w = subprocess.run([sys.executable, str(ROOT / "scripts" / "slurm_wait.py"), str(tmp_path), "--poll", "1"],
                       capture_output=True, text=True, timeout=300)
    assert w.returncode == 0, w.stdout + w.stderr
    assert "2 of 2 runs" in w.stdout
    recs = records(tmp_path)
    assert len(recs) == 2 and all(r["timing"]["pack_size"] == 1 for r in recs)
    assert sorted(sacct(array)) == [(f"{array}_0", "COMPLETED"), (f"{array}_1", "COMPLETED")]


@pytest.mark.slurm
def test_sbatch_refusing_the_array_is_one_error_and_nothing_runs(cluster, tmp_path):
    p = cli(*SHORT, "hydra.launcher.partition=no_such_partition", f"results_root={tmp_path}",
            "train.epochs=2", "seed=0", "-m")
    assert p.returncode == 2
    assert ("python -m kanx.train: error: sbatch refused the array of 1 task(s)" in p.stderr
            and "partition" in p.stderr.lower())
    assert not list(tmp_path.rglob(JOB_MARKER)) and not list(tmp_path.rglob("record.json"))


@pytest.mark.slurm
def test_a_cancelled_task_is_one_error_and_the_next_submission_resumes(cluster, tmp_path):
    # scancel sends SIGTERM, then SIGKILL after KillWait (5 s here): the task saves its pack on
    # SIGTERM and trains on meanwhile, so it must have more than 5 s of training left.
    args = [*SHORT, f"hydra.launcher.partition={cluster}", f"results_root={tmp_path}",
            "dataset.n_train=256", "train.epochs=800", "train.checkpoint_every=10", "seed=0,1", "-m"]
    proc = subprocess.Popen([sys.executable, "-m", "kanx.train", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=os.environ | {"PYTHONUNBUFFERED": "1"})
    deadline = time.time() + 180
    while time.time() < deadline and not list(tmp_path.rglob("checkpoint.pt")) and proc.poll() is None:
        time.sleep(0.1)
    task = list(tmp_path.rglob(JOB_MARKER))[0].read_text().strip()
    subprocess.run(["scancel", task.split("_")[0]], check=True)  # SIGTERM, then SIGKILL: no requeue
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 1, out[-3000:]
    assert ("python -m kanx.train: error: 2 of 2 runs have no record" in out
            and f"SLURM task {task} ended without a result (CANCELLED" in out)
    assert "SIGTERM: saved exact checkpoints of 2 run(s)" in _task_log(tmp_path, task)
    p = cli(*args)
    assert p.returncode == 0, p.stderr[-3000:]
    text = _task_log(tmp_path, f"{array_id_of(p.stdout + p.stderr)}_0")
    assert re.search(r"resuming 2 run\(s\) from epoch \d+", text), text
    assert len(records(tmp_path)) == 2 and not list(tmp_path.rglob("checkpoint.pt"))


def _release_when_requeued(task: str, deadline: float) -> bool:
    """Slurm holds a requeued job for 2-3 minutes (BeginTime); start it now instead, so the
    test stays short. Returns False if the task never came back to the queue as pending."""
    while time.time() < deadline:
        out = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T %r", "-j", task], capture_output=True,
                             text=True).stdout.split()
        if len(out) >= 2 and out[1] == "PENDING":
            subprocess.run(["scontrol", "update", f"JobId={task}", "StartTime=now"], capture_output=True)
            return True
        time.sleep(0.5)
    return False


def _reference(tmp_path: Path, args: list) -> subprocess.Popen:
    """The same runs trained without interruption, locally (packed launcher), meanwhile."""
    local = [a for a in args if not a.startswith(("launcher=", "hydra.launcher.", "results_root=", "-m"))]
    return subprocess.Popen([sys.executable, "-m", "kanx.train", *local, "launcher=packed",
                             f"results_root={tmp_path / 'reference'}", "-m"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=os.environ | {"OMP_NUM_THREADS": "1"})


def _same_numbers(root: Path, reference: Path) -> None:
    got, want = records(root), records(reference)
    assert len(got) == len(want) == 2
    for a, b in zip(sorted(got, key=lambda r: r["seed"]), sorted(want, key=lambda r: r["seed"]), strict=True):
        assert a["status"] == "ok" and a["config_hash"] == b["config_hash"]
        assert a["metrics"] == b["metrics"], "the resumed run must match an uninterrupted one exactly"


def _task_log(root: Path, task: str) -> str:
    logs = list(root.rglob(f"{task}_0_log.out"))
    assert len(logs) == 1, logs
    return logs[0].read_text()


@pytest.mark.slurm
def test_a_preempted_task_checkpoints_requeues_and_resumes_exactly(cluster, tmp_path):
    root = tmp_path / "slurm"
    args = [*SHORT, f"hydra.launcher.partition={cluster}", f"results_root={root}",
            "dataset.n_train=256", "train.epochs=300",
            "train.checkpoint_every=10", "seed=0,1", "hydra.launcher.timeout_min=10", "-m"]
    log = (tmp_path / "cli.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "kanx.train", *args], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env=os.environ | {"PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.time() + 180
        while time.time() < deadline and not list(root.rglob("checkpoint.pt")):  # mid-training: epoch 10 is behind it
            assert proc.poll() is None, (tmp_path / "cli.log").read_text()[-3000:]
            time.sleep(0.1)
        markers = list(root.rglob(JOB_MARKER))
        assert markers, "training never reached its first checkpoint"
        task = markers[0].read_text().strip()
        subprocess.run(["scancel", "--signal=USR2", task], check=True)  # what submitit treats as preemption
        reference = _reference(tmp_path, args)
        assert _release_when_requeued(task, time.time() + 60), "the task was not requeued"
        assert proc.wait(timeout=240) == 0, (tmp_path / "cli.log").read_text()[-3000:]
        assert reference.wait(timeout=240) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            subprocess.run(["scancel", task.split("_")[0]])
    out = (tmp_path / "cli.log").read_text()
    assert "2 of 2 runs have records" in out
    text = _task_log(root, task)
    assert "saved exact checkpoints of 2 run(s)" in text and f"Requeued job {task}" in text and "attempt 2" in text
    resumed = re.search(r"resuming 2 run\(s\) from epoch (\d+)", text)
    assert resumed and 10 <= int(resumed.group(1)) < 300, text
    assert not list(root.rglob("checkpoint.pt"))
    states = [s for _, s in sacct(task.split("_")[0], duplicates=True, until=lambda rows: rows
                                  and rows[-1][1] == "COMPLETED")]
    assert "REQUEUED" in states and states[-1] == "COMPLETED", states
    _same_numbers(root, tmp_path / "reference")


@pytest.mark.slurm
def test_a_task_at_its_time_limit_checkpoints_requeues_and_resumes(cluster, tmp_path):
    # --time=1 with --signal=USR2@5: slurmctld itself sends USR2 on its ~30 s event cycle,
    # 25-55 s into each attempt (measured), never before submitit's handler is in place. The
    # pack is far from done then (10000 epochs); once the requeued attempt has resumed from the
    # checkpoint, the test cancels the array (finishing is the preemption test's part).
    args = [*SHORT, f"hydra.launcher.partition={cluster}", f"results_root={tmp_path}", "train.epochs=10000", "seed=0,1",
            "hydra.launcher.timeout_min=1", "hydra.launcher.signal_delay_s=5", "-m"]
    proc = subprocess.Popen([sys.executable, "-m", "kanx.train", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    task, text, resumed = None, "", None
    try:
        deadline = time.time() + 150
        while time.time() < deadline and not resumed:
            assert proc.poll() is None, "the launcher ended early"
            markers = list(tmp_path.rglob(JOB_MARKER))
            if markers:
                task = markers[0].read_text().strip()
                _release_when_requeued(task, time.time() + 1)
                logs = list(tmp_path.rglob(f"{task}_0_log.out"))
                text = logs[0].read_text() if logs else ""
                resumed = re.search(r"resuming 2 run\(s\) from epoch (\d+)", text)
            time.sleep(0.5)
    finally:
        if task:
            subprocess.run(["scancel", task.split("_")[0]])
        proc.kill()
        proc.wait()
    assert resumed, text
    assert ("Job has timed out" in text and "saved exact checkpoints of 2 run(s)" in text
            and f"Requeued job {task}" in text), text
    assert 0 < int(resumed.group(1)) < 10000
    assert "REQUEUED" in [s for _, s in sacct(task.split("_")[0], duplicates=True,
                                              until=lambda rows: ("REQUEUED" in {s for _, s in rows}))]
    assert not list(tmp_path.rglob("record.json"))
