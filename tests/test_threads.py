"""The intra-op thread count kanx chooses (issue #53 item 1: train.threads, kanx.threads) and
whether a run compiles (item 3: train.compile=auto, inductor's cache folder; kanx.compiling).
The machine is faked: affinity, cgroup files, /proc/stat and the environment are the test's own,
so no test here depends on this host's cores or load, and none times anything."""

import json

import pytest
from helpers import TOY, composed

from kanx import compiling, threads
from kanx.config import TrainConfig, config_hash, run_config_from, to_container
from kanx.errors import ConfigError
from kanx.record import Record

BIG = 100 * threads.WORK_PER_THREAD  # a step that would keep 100 threads busy


# ---------------------------------------------------------------- where the count comes from


@pytest.mark.parametrize(("value", "count"), [("4", 4), ("2,1", 2), (" 3 ", 3), ("", None), ("0", None),
                                              ("abc", None), ("-2", None)])
def test_omp_num_threads_is_read_as_openmp_reads_it(value, count):
    assert threads.omp_setting({"OMP_NUM_THREADS": value}) == count
    assert threads.omp_setting({}) is None


def test_a_cgroup_v2_quota_is_read_from_the_process_own_cgroup(tmp_path):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "cpu.max").write_text("150000 100000\n")
    (tmp_path / "cpu.max").write_text("max 100000\n")  # the root's: no limit
    proc = tmp_path / "self_cgroup"
    proc.write_text("0::/job\n")
    assert threads.cgroup_cores(tmp_path, proc) == 1.5
    proc.write_text("0::/\n")
    assert threads.cgroup_cores(tmp_path, proc) is None


def test_a_cgroup_v1_cfs_quota_is_read_and_minus_one_is_no_quota(tmp_path):
    folder = tmp_path / "cpu,cpuacct" / "slurm" / "job"
    folder.mkdir(parents=True)
    (folder / "cpu.cfs_quota_us").write_text("200000\n")
    (folder / "cpu.cfs_period_us").write_text("100000\n")
    proc = tmp_path / "self_cgroup"
    proc.write_text("5:cpu,cpuacct:/slurm/job\n4:memory:/slurm/job\n")
    assert threads.cgroup_cores(tmp_path, proc) == 2.0
    (folder / "cpu.cfs_quota_us").write_text("-1\n")
    assert threads.cgroup_cores(tmp_path, proc) is None


def test_no_cgroup_files_is_no_quota(tmp_path):
    assert threads.cgroup_cores(tmp_path, tmp_path / "missing") is None


def test_the_usable_cores_are_the_fewest_of_affinity_quota_and_slurm():
    eight = list(range(8))
    assert threads.usable_cores(eight, None, None) == 8
    assert threads.usable_cores(eight, 1.5, None) == 2  # a fractional quota rounds up
    assert threads.usable_cores(eight, 6.0, 3) == 3
    assert threads.usable_cores([5], 4.0, 8) == 1
    assert threads.slurm_cores({"SLURM_CPUS_PER_TASK": "3"}) == 3
    assert threads.slurm_cores({"SLURM_CPUS_PER_TASK": "x"}) is None


STAT = """cpu  {a} 0 0 {b} 0 0 0 0 0 0
cpu0 {c0} 0 0 {i0} 0 0 0 0 0 0
cpu1 {c1} 0 0 {i1} 0 0 0 0 0 0
intr 12345
"""


# ---------------------------------------------------------------- the choice


def test_a_count_given_wins_over_omp_num_threads_and_the_machine():
    choice = threads.choose(3, 0.0, {"OMP_NUM_THREADS": "1"}, threads.Cores([0]))
    assert choice == threads.ThreadChoice(3, "train.threads=3")


def test_omp_num_threads_set_by_the_user_wins_over_auto():
    choice = threads.choose("auto", BIG, {"OMP_NUM_THREADS": "2"}, threads.Cores(list(range(8))))
    assert choice.count == 2 and choice.why == "OMP_NUM_THREADS=2"


def test_auto_gives_a_pack_the_threads_its_step_keeps_busy_within_the_usable_cores():
    assert threads.threads_for_work(threads.WORK_PER_THREAD - 1) == 1
    assert threads.threads_for_work(3 * threads.WORK_PER_THREAD) == 3
    assert threads.choose("auto", 1000.0, {}, threads.Cores(list(range(64)))).count == 1
    assert threads.choose("auto", 3 * threads.WORK_PER_THREAD, {}, threads.Cores(list(range(64)))).count == 3
    assert threads.choose("auto", BIG, {}, threads.Cores([0, 1])).count == 2


def test_auto_does_not_read_the_load_so_the_same_machine_gives_the_same_numbers(monkeypatch):
    """The count changes a run's last bits: auto must not move with what else runs now."""
    import os as os_module

    monkeypatch.setattr(os_module, "getloadavg", lambda: (50.0, 50.0, 50.0))
    assert threads.choose("auto", BIG, {}, threads.Cores([0, 1])).count == 2
    assert not hasattr(threads, "busy_cores")


def test_auto_keeps_to_the_quota_and_slurm_count():
    many = list(range(64))
    assert threads.choose("auto", BIG, {}, threads.Cores(many, quota=4.0)).count == 4
    assert threads.choose("auto", BIG, {"SLURM_CPUS_PER_TASK": "1"}, threads.Cores(many, slurm=1)).count == 1
    assert threads.Cores.of_this_process({"SLURM_CPUS_PER_TASK": "1"}).usable == 1


def test_openmp_threads_spin_briefly_unless_the_user_chose_or_torch_is_loaded():
    env: dict = {}
    assert threads.short_spins(env, loaded={}) and env == {"GOMP_SPINCOUNT": "10000"}
    for own in ({"OMP_WAIT_POLICY": "PASSIVE"}, {"GOMP_SPINCOUNT": "300000"}):
        mine = dict(own)
        assert not threads.short_spins(mine, loaded={}) and mine == own
    late: dict = {}
    assert not threads.short_spins(late, loaded={"torch": object()}) and late == {}


@pytest.mark.slow
def test_importing_kanx_sets_the_spin_count_before_torch_loads():
    import os as os_module
    import subprocess
    import sys

    env = {k: v for k, v in os_module.environ.items() if k not in threads.WAIT_SETTINGS}
    code = "import os, kanx, torch; print(os.environ.get('GOMP_SPINCOUNT'))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "10000", done.stderr[-2000:]


# ---------------------------------------------------------------- the config and the record


def test_train_threads_takes_auto_or_a_positive_count_and_refuses_anything_else():
    assert run_config_from(composed()).train.threads == "auto"
    assert run_config_from(composed("train.threads=3")).train.threads == 3
    for bad in ("0", "two", "true", "-1", "1.5"):
        with pytest.raises(ConfigError, match=r"^train\.threads=.* must be auto \(kanx chooses from the cores and "
                                              r"the pack\) or an integer >= 1$"):
            run_config_from(composed(f"train.threads={bad}"))


def test_train_compile_takes_true_false_or_auto_and_refuses_anything_else():
    assert run_config_from(composed()).train.compile == "auto"
    assert [run_config_from(composed(f"train.compile={v}")).train.compile for v in ("true", "false", "auto")] == [
        True, False, "auto"]
    for bad in ("no", "1", "maybe"):
        with pytest.raises(ConfigError, match=r"^train\.compile='?\w+'? must be true, false or auto"):
            run_config_from(composed(f"train.compile={bad}"))


def test_neither_threads_nor_compile_changes_a_run_identity():
    base = to_container(composed("+condition=EFX"))
    hashes = set()
    for threads_value, compile_value in (("auto", "auto"), (1, True), (8, False)):
        c = json.loads(json.dumps(base))
        c["train"].update(threads=threads_value, compile=compile_value)
        hashes.add(config_hash(c))
    assert len(hashes) == 1


def test_a_trained_record_notes_its_thread_count(finished_efx):
    # conftest.py sets OMP_NUM_THREADS=1 for the tests, and auto follows it
    timing = Record.read(finished_efx).fields["timing"]
    assert timing["threads"] == 1
    assert timing["compiled"] is False  # train.compile=false


def test_a_run_with_a_count_trains_on_it_and_a_short_run_under_compile_auto_trains_eagerly(tmp_path):
    import torch

    from kanx.runner import run_jobs

    before = torch.get_num_threads()
    try:
        (rec,) = run_jobs([(composed("+condition=E", "train.epochs=1", "train.warmup=0", "train.fc_warmup=0",
                                     "train.threads=2", "train.compile=auto", *TOY[:-1]), tmp_path / "run")])
        assert rec["timing"]["threads"] == 2 and torch.get_num_threads() == 2
        assert rec["timing"]["compiled"] is False  # 1 epoch of 4 steps does not earn a compile back
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------- compiling


def test_inductor_cache_goes_under_the_user_cache_unless_the_user_chose_one(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    assert compiling.keep_cache(env) == str(tmp_path / "kanx" / "inductor")
    assert env[compiling.CACHE_ENV] == str(tmp_path / "kanx" / "inductor")
    mine = {"XDG_CACHE_HOME": str(tmp_path), compiling.CACHE_ENV: "/somewhere/else"}
    assert compiling.keep_cache(mine) == "/somewhere/else" and mine[compiling.CACHE_ENV] == "/somewhere/else"
    assert str(compiling.cache_dir({})).endswith("/.cache/kanx/inductor")


def test_compile_auto_compiles_a_run_long_enough_to_earn_it_from_its_second_epoch_on_a_cpu():
    n = compiling.COMPILE_PAYS_AFTER_STEPS

    def first(epochs, rows, batch, setting="auto", device="cpu"):
        return compiling.compiled_from(TrainConfig(epochs=epochs, batch_size=batch, compile=setting), rows, device)

    assert first(3000, 1024, 64) == 1  # make run: sin_xy2, 3000 epochs of 16 steps; its first epoch eager
    assert first(5000, 824, 64) == 1  # a Concrete run
    assert first(5000, 824, 64, device="cuda") == 0  # a GPU captures its epoch graph around the compiled code
    assert first(20, 824, 64) is None  # a quick try's 20 epochs
    assert first(2, 128, 32) is None  # the tests' toy runs
    assert first(n, 10, 10) == 1 and first(n - 1, 10, 10) is None  # one step a epoch: the rule's edge
    assert first(2, 128, 32, True) == 0 and first(10**6, 128, 32, False) is None  # as given


# ---------------------------------------------------------------- the benchmark's parts, in process


def test_the_thread_benchmark_times_a_pack_and_tabulates_auto_against_the_best_fixed_count(capsys):
    import torch
    from helpers import load_script

    bench = load_script("benchmarks/bench_threads.py")
    before = torch.get_num_threads()
    try:
        bench.child("1", ["EFX M=1"], 13, compile=False)
    finally:
        torch.set_num_threads(before)
    (line,) = capsys.readouterr().out.splitlines()
    row = json.loads(line)
    assert row["pack"] == "EFX M=1" and row["threads"] == 1 and row["steps"] == 13 and row["seconds"] > 0
    rows = [{"scenario": "busy", "pack": "EFX M=70", "setting": s, "seconds": t, "threads": n}
            for s, t, n in (("1", 10.0, 1), ("2", 140.0, 2), ("auto", 10.5, 1))]
    lines = bench.table(rows, [1, 2], ["busy"], ["EFX M=70"])
    assert lines[2] == "| busy | EFX M=70 | 10.00 | 140.00 | 10.50 | 1 | 1 | 1.05 |"
    assert lines[-1] == ("\nauto chose the fastest fixed count in 1 of 1 cases; worst auto / best fixed: 1.05 "
                         "(within 10%: yes)")


def test_the_compile_benchmark_reads_when_the_first_epoch_ended_from_the_progress_lines():
    from datetime import datetime

    from helpers import load_script

    bench = load_script("benchmarks/bench_compile.py")
    launched = datetime(2026, 11, 29, 15, 15, 0).timestamp()
    log = "\n".join([
        "[2026-11-29 15:15:02,000][kanx][INFO] - [1/1] training a pack of 1 (sin_xy2: EFX), 3000 epochs",
        "[2026-11-29 15:15:04,250][kanx][INFO] - sin_xy2 EFX x1: epoch 1/3000, mean loss 0.9, 1 alive, 1 epochs/s",
        "[2026-11-29 15:15:20,000][kanx][INFO] - sin_xy2 EFX x1: epoch 2/3000, mean loss 0.8, 1 alive, 1 epochs/s",
    ])
    assert bench.first_epoch_at(log, launched) == pytest.approx(4.25)
    assert bench.first_epoch_at(log.splitlines()[0], launched) is None  # no epoch ended
