"""Every command stops on bad input in one line (issue #48): `COMMAND: error: MESSAGE`, COMMAND
as typed (kanx.cli.prog), exit 2 for bad input and 1 for results that cannot be written, never a
traceback; and every argument a command cannot honour is refused, not dropped. Also the small
faults of that review: a lock naming an impossible pid, a manifest kanx cannot read, locks left
by a pack stopped on a full disk, a read-only file system named as such, a logger installed but
broken, a text file where a checkpoint belongs, and the analysis' count of what it skipped.

The commands are called in this process (main(argv)) except in the tests marked slow, which start
them as a user does, to see the command named as typed."""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
from helpers import ROOT, TOY
from test_faults_analysis import CURVE, damage, record, write_run

from kanx import records
from kanx.analyze.__main__ import main as analyze
from kanx.cli import prog
from kanx.errors import ConfigError, StorageError
from kanx.reproduce import main as reproduce
from kanx.status import main as status

ARGS = ["train.epochs=2", "train.warmup=1", "train.fc_warmup=1", *TOY]


def script(name: str):
    """A study script of scripts/studies, imported (its main(argv) called in this process)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "studies" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass of the script looks its module up there
    spec.loader.exec_module(module)
    return module


def one_line(err: str, command: str) -> str:
    """The one stderr line of a refused command, checked: the prefix, no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{command}: error: ") and "Traceback" not in err, err
    return lines[0]


def refused(call, capsys) -> tuple[int, str]:
    """(exit status, stderr) of ``call()``: a main that returns its status or exits (argparse)."""
    try:
        code = call()
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


@pytest.fixture
def root(tmp_path) -> Path:
    """A results root of one finished Concrete run (written by hand, no training)."""
    results = tmp_path / "results"
    write_run(results, "concrete/E/default/beta=0.01,seed=0", record(0), curve=CURVE)
    return results


# ---------------------------------------------------------------- kanx.analyze


ANALYZE = {
    "--published missing": (["--published", "{tmp}/nonexist.csv"], "nonexist.csv cannot be read"),
    "--published of wrong columns": (["--published", "{tmp}/wrong.csv"], "wrong.csv: missing columns"),
    "--published not a table": (["--published", "{tmp}/binary.csv"], "binary.csv is not a CSV table"),
    "--published-hv of wrong columns": (["--published", "{tmp}/published.csv", "--published-hv", "{tmp}/wrong.csv"],
                                        "expected the header 'condition,hv'"),
    "--out a file": (["--out", "{tmp}/wrong.csv"], "is a file: give a folder"),
    "--hv-tol -1": (["--hv-tol", "-1"], "'-1' is not a tolerance"),
    "--hv-tol nan": (["--hv-tol", "nan"], "'nan' is not a tolerance"),
    "--formats ''": (["--formats", ""], "names no format"),
    "--formats gif": (["--formats", "png,gif"], "not gif"),
    "--draw of no dataset": (["--draw", "nonexist"], "--draw nonexist: no record of it"),
    "--published-dataset alone": (["--published-dataset", "concrete"], "--published-dataset is for --published"),
    "--published-hv alone": (["--published-hv", "{tmp}/wrong.csv"], "--published-hv is for --published"),
    "--published-dataset of no dataset": (["--published", "{tmp}/published.csv", "--published-dataset", "ikeda"],
                                          "--published-dataset ikeda: no record of it"),
    "root not a folder": (["--out", "{tmp}/out"], "is not a folder"),
}


@pytest.mark.parametrize("case", list(ANALYZE))
def test_analyze_refuses_each_bad_option_in_one_line_before_writing(root, tmp_path, capsys, case):
    args, words = ANALYZE[case]
    (tmp_path / "wrong.csv").write_text("a,b\n1,2\n")
    (tmp_path / "binary.csv").write_bytes(b"\xff\xfe\x00\x01" * 50)
    from kanx.analyze.published import PAPER_DIR

    (tmp_path / "published.csv").write_text((PAPER_DIR / "concrete_published.csv").read_text())
    given = [a.format(tmp=tmp_path) for a in args]
    target = str(tmp_path / "nonexist") if case == "root not a folder" else str(root)
    code, err = refused(lambda: analyze([target, "--no-paper", *given]), capsys)
    assert code == 2 and words in one_line(err, "python -m kanx.analyze"), err
    assert not (root / "report.md").exists() and not (tmp_path / "out").exists()


def test_analyze_names_an_output_folder_it_cannot_write_in_one_line_with_exit_1(root, tmp_path, capsys, monkeypatch):
    def full(*_, **__):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "out" / "tables"))

    monkeypatch.setattr(Path, "mkdir", full)
    code, err = refused(lambda: analyze([str(root), "--no-paper", "--out", str(tmp_path / "out")]), capsys)
    line = one_line(err, "python -m kanx.analyze")
    assert code == 1 and f"cannot write {tmp_path / 'out' / 'tables'}: the disk is full" in line


def test_analyze_counts_the_damaged_curves_beside_the_skipped_records(root, tmp_path, capsys):
    damage(root / "concrete/E/default/beta=0.01,seed=0", "cut short")
    write_run(root, "concrete/E/default/beta=0.01,seed=1", record(1), curve=CURVE)
    assert analyze([str(root), "--no-paper", "--out", str(tmp_path / "out"), "--formats", "png", "--curves"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if "records read" in line]
    assert line.startswith("2 records read, 0 skipped") and line.endswith(
        "; 1 of their training curves not drawn (damaged or changed since the done marker: the records count)"), line


# ---------------------------------------------------------------- kanx.reproduce and the study scripts


REPRODUCE = {
    "--jobs 0 --launcher basic": (["--jobs", "0", "--launcher", "basic"], "--jobs: '0' is not a whole number >= 1"),
    "--jobs -1": (["--jobs", "-1"], "--jobs: '-1' is not a whole number >= 1"),
    "--pack-size -3": (["--pack-size", "-3"], "--pack-size: '-3' is not a whole number >= 1"),
    "--pack-size 0": (["--pack-size", "0"], "--pack-size: '0' is not a whole number >= 1"),
    "a key the config lacks": (["foo=1"], "Could not override 'foo'. To append to your config use +foo=1"),
}


@pytest.mark.parametrize("case", list(REPRODUCE))
def test_reproduce_refuses_bad_numbers_and_keys_in_one_line(tmp_path, capsys, case):
    args, words = REPRODUCE[case]
    common = ["--scale", "smoke", "--datasets", "sin_xy2", "--conditions", "E", "--no-analysis"]
    code, err = refused(lambda: reproduce([*common, "--results", str(tmp_path / "r"), *args]), capsys)
    assert code == 2 and words in one_line(err, "python -m kanx.reproduce"), err
    assert not list(tmp_path.rglob("record.json"))


DISTRACTORS = {
    "run --k -1": (["run", "--k", "-1"], "--k: '-1' is not a whole number >= 0"),
    "run --seeds 0": (["run", "--seeds", "0"], "--seeds: '0' is not a whole number >= 1"),
    "run foo=1": (["run", "foo=1"], "Could not override 'foo'"),
    "run +betta=1": (["run", "+betta=1"], "unknown key(s) betta (did you mean beta?)"),
    "table of no root": (["table", "--root", "{tmp}/nonexist"], "nonexist is not a folder"),
}


@pytest.mark.parametrize("case", list(DISTRACTORS))
def test_the_distractor_study_refuses_bad_input_in_one_line(tmp_path, capsys, case):
    args, words = DISTRACTORS[case]
    study = script("distractors")
    given = [a.format(tmp=tmp_path) for a in args]
    root = [] if "--root" in given else ["--root", str(tmp_path / "d")]
    code, err = refused(lambda: study.main([*given, *root, "--quick"]), capsys)
    assert code == 2 and words in one_line(err, "python scripts/studies/distractors.py"), err
    assert not list(tmp_path.rglob("record.json")) and "(no finished runs)" not in capsys.readouterr().out


FACTORS = {
    "run --seeds 0": (["run", "inputs", "--seeds", "0"], "--seeds: '0' is not a whole number >= 1"),
    "run --pack-size 0": (["run", "inputs", "--pack-size", "0"], "--pack-size: '0' is not a whole number >= 1"),
    "run --jobs 0": (["run", "inputs", "--jobs", "0"], "--jobs: '0' is not a whole number >= 1"),
    "run --jobs -1": (["run", "inputs", "--jobs", "-1"], "--jobs: '-1' is not a whole number >= 1"),
    "table of no root": (["table", "nodes", "--root", "{tmp}/nonexist"], "--root {tmp}/nonexist is not a folder"),
    "table of no paper": (["table", "nodes", "--root", "{tmp}", "--paper", "{tmp}/no"], "--paper {tmp}/no is not a"),
    "table with overrides": (["table", "nodes", "--root", "{tmp}", "seed=0"], "table takes no overrides (seed=0)"),
}


@pytest.mark.parametrize("case", list(FACTORS))
def test_the_factor_study_refuses_bad_input_in_one_line(tmp_path, capsys, monkeypatch, case):
    args, words = FACTORS[case]
    study = script("factor_study")
    monkeypatch.setattr("kanx.reproduce.main", lambda argv: pytest.fail(f"trained with {argv}"))
    code, err = refused(lambda: study.main([a.format(tmp=tmp_path) for a in args]), capsys)
    assert code == 2 and words.format(tmp=tmp_path) in one_line(err, "python scripts/studies/factor_study.py"), err


def test_the_factor_study_passes_one_seed_and_pack_size_one_on(tmp_path, monkeypatch):
    study = script("factor_study")
    given = []
    monkeypatch.setattr("kanx.reproduce.main", lambda argv: given.append(argv) or 0)
    assert study.main(["run", "inputs", "--root", str(tmp_path), "--seeds", "1", "--pack-size", "1", "--no-table"]) == 0
    (argv,) = given
    assert argv[argv.index("--pack-size") + 1] == "1" and "seed=0" in argv, argv  # 1 seed is seed 0


def test_a_study_trains_its_sweeps_in_turn_and_stops_at_the_first_that_fails(monkeypatch, capsys, tmp_path):
    from kanx.reproduce import train_in_turn

    calls = []
    monkeypatch.setattr("kanx.reproduce.subprocess.call", lambda cmd: calls.append(cmd[3:]) or len(calls) == 2)
    assert train_in_turn([["dataset=a", "seed=0"], ["dataset=b"], ["dataset=c"]], "study.py") == 1
    assert calls == [["dataset=a", "seed=0", "-m"], ["dataset=b", "-m"]]  # the third never starts
    out, err = capsys.readouterr()
    assert "+ -m kanx.train dataset=a seed=0 -m" in out
    assert one_line(err, "study.py") == "study.py: error: sweep failed: -m kanx.train dataset=b -m"
    calls.clear()
    monkeypatch.setattr("kanx.reproduce.subprocess.call", lambda cmd: calls.append(cmd) or 0)
    assert train_in_turn([["dataset=a"], ["dataset=b"]], "study.py") == 0 and len(calls) == 2
    study = script("exit_flip")  # the study scripts train through it
    assert study.train(tmp_path) == 0 and len(calls) == 2 + len(study.ARMS)
    assert all(f"results_root={tmp_path}" in cmd and cmd[-1] == "-m" for cmd in calls[2:])


SEARCH = {
    "run foo=1": (["run", "foo=1"], "Could not override 'foo'"),
    "run +betta=1": (["run", "+betta=1"], "unknown key(s) betta (did you mean beta?)"),
    "run of an empty paper": (["run", "--paper", "{tmp}"], "--paper {tmp} holds no EFX record of concrete, nguyen_f7"),
    "table of no root": (["table", "--root", "{tmp}/nonexist"], "--root {tmp}/nonexist is not a folder"),
    "table of no paper": (["table", "--root", "{tmp}", "--paper", "{tmp}/no"], "--paper {tmp}/no is not a"),
    "table with overrides": (["table", "--root", "{tmp}", "seed=0"], "table takes no overrides (seed=0)"),
}


@pytest.mark.parametrize("case", list(SEARCH))
def test_the_search_study_refuses_bad_input_in_one_line_before_any_search(tmp_path, capsys, monkeypatch, case):
    args, words = SEARCH[case]
    study = script("search_vs_grid")
    monkeypatch.setattr(study.subprocess, "call", lambda command: pytest.fail(f"searched with {command}"))
    given = [a.format(tmp=tmp_path) for a in args]
    root = [] if "--root" in given else ["--root", str(tmp_path / "s")]
    code, err = refused(lambda: study.main([*given, *root]), capsys)
    assert code == 2 and words.format(tmp=tmp_path) in one_line(err, "python scripts/studies/search_vs_grid.py"), err
    assert not (tmp_path / "s").exists()


# ---------------------------------------------------------------- the command as typed


def test_the_error_prefix_is_the_command_as_typed(monkeypatch):
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", ["/venv/bin/kanx-train", "x=1"])
    assert prog() == prog("kanx.train") == "kanx-train"  # a console script
    monkeypatch.setattr(sys, "argv", [str(ROOT / "kanx" / "train.py")])
    main.__spec__ = importlib.util.spec_from_loader("kanx.analyze.__main__", loader=None)
    assert prog() == "python -m kanx.analyze"  # deep below the command (a launcher): the module that runs
    assert prog("kanx.draw") == "python -m kanx.draw"
    main.__spec__, main.__file__ = None, str(ROOT / "scripts" / "studies" / "distractors.py")
    monkeypatch.setattr(sys, "argv", ["scripts/studies/distractors.py"])
    monkeypatch.chdir(ROOT)
    assert prog() == prog("kanx.reproduce") == "python scripts/studies/distractors.py"  # a script calling a kanx main
    main.__file__ = None
    monkeypatch.setattr(sys, "argv", ["-c"])
    assert prog() == "kanx" and prog("scripts/studies/distractors.py") == "python scripts/studies/distractors.py"


DISTRACTORS_PY, FACTORS_PY = "scripts/studies/distractors.py", "scripts/studies/factor_study.py"
TRAIN = ["-m", "kanx.train", "+condition=E", "results_root={root}", "seed=0", "beta=0.1", *ARGS, "-m"]
ANALYZE_ARGV, REPRODUCE_ARGV = ["-m", "kanx.analyze", "{root}"], ["-m", "kanx.reproduce"]
COMMANDS = {  # (argv after `python`, the command as typed, words of its line): as a user types them; each exits 2
    "analyze --published": ([*ANALYZE_ARGV, "--published", "/no.csv"], "python -m kanx.analyze", "cannot be read"),
    "analyze --hv-tol": ([*ANALYZE_ARGV, "--hv-tol", "nan"], "python -m kanx.analyze", "is not a tolerance"),
    "status": (["-m", "kanx.status", "{root}/nonexist"], "python -m kanx.status", "is not a folder"),
    "reproduce --jobs 0": ([*REPRODUCE_ARGV, "--jobs", "0", "--launcher", "basic"], "python -m kanx.reproduce",
                           "--jobs"),
    "reproduce --pack-size": ([*REPRODUCE_ARGV, "--pack-size", "-3"], "python -m kanx.reproduce", "--pack-size"),
    "distractors --k": ([DISTRACTORS_PY, "run", "--k", "-1"], f"python {DISTRACTORS_PY}", "--k"),
    "distractors foo=1": ([DISTRACTORS_PY, "run", "--root", "{root}/d", "foo=1"], f"python {DISTRACTORS_PY}", "foo"),
    "factor_study table": ([FACTORS_PY, "table", "nodes", "--root", "/no"], f"python {FACTORS_PY}", "is not a folder"),
    "train, a manifest not JSON": (TRAIN, "python -m kanx.train", "is not a manifest kanx wrote"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(COMMANDS))
def test_each_command_stops_on_bad_input_in_one_line_naming_itself_as_typed(root, case):
    argv, command, words = COMMANDS[case]
    if case.startswith("train"):
        from kanx.plan import sweep_jobs

        ((_, run_dir),) = sweep_jobs("sin_xy2", "E", [f"results_root={root}", "seed=0", "beta=0.1", *ARGS])
        run_dir.parent.mkdir(parents=True)
        (run_dir.parent / "manifest.json").write_text("not JSON")
    p = subprocess.run([sys.executable, *[a.format(root=root) for a in argv]], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert p.returncode == 2 and words in one_line(p.stderr, command), p.stderr[-3000:]


# ---------------------------------------------------------------- locks


@pytest.mark.parametrize("pid", [10**30, "1e400", -(10**30)])
def test_a_lock_naming_an_impossible_pid_is_not_live_and_is_taken_over(tmp_path, capsys, pid):
    run_dir = tmp_path / "concrete" / "E" / "default" / "beta=0.01,seed=0"
    run_dir.mkdir(parents=True)
    holder = json.dumps({"host": socket.gethostname(), "pid": pid, "start": 1})
    (run_dir / records.LOCK).write_text(holder.replace('"1e400"', "1e400"))  # read back as infinity
    assert records.lock_is_live(run_dir) is (pid == "1e400")  # no int: live for LOCK_REFRESH_S, as a garbled lock
    assert status([str(tmp_path), "--runs"]) in (0, 1) and "Traceback" not in capsys.readouterr().err
    os.utime(run_dir / records.LOCK, (0, 0))
    assert records.try_lock(run_dir)
    records.unlock(run_dir)
    assert not (run_dir / records.LOCK).exists()


def test_the_locks_a_process_still_holds_are_released_on_its_way_out(tmp_path):
    taken = [tmp_path / f"seed={s}" for s in range(3)]
    assert all(records.try_lock(d) for d in taken)
    records.unlock(taken[2])  # trained and unlocked; seeds 0 and 1 were locked when the disk filled
    other = tmp_path / "other"
    other.mkdir()
    (other / records.LOCK).write_text(json.dumps({"host": "another-host", "pid": 1}))
    records.release_held_locks()
    assert [d.name for d in taken if (d / records.LOCK).exists()] == [] and (other / records.LOCK).exists()


@pytest.mark.slow
def test_a_process_stopped_by_a_full_disk_leaves_none_of_its_locks(tmp_path):
    code = (f"import sys; from pathlib import Path; from kanx import records; from kanx.errors import StorageError\n"
            f"for s in (0, 1): records.try_lock(Path({str(tmp_path)!r}) / f'seed={{s}}')\n"
            f"raise StorageError(28, 'No space left on device', {str(tmp_path / 'seed=2' / 'lock')!r})")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert p.returncode == 1 and "the disk is full" in p.stderr, p.stderr
    assert sorted(d.name for d in tmp_path.iterdir()) == ["seed=0", "seed=1"] and not list(tmp_path.rglob(records.LOCK))


# ---------------------------------------------------------------- manifests


def _jobs(root: Path):
    from kanx.jobs import prepare_jobs
    from kanx.plan import sweep_jobs

    return prepare_jobs(sweep_jobs("sin_xy2", "E", [f"results_root={root}", "seed=0,1", "beta=0.1", *ARGS]))


@pytest.mark.parametrize(("text", "words"), [
    ('{"runs": {}, "launches": 5}', "its 'launches' is not a JSON list"),
    ('{"runs": [], "launches": []}', "its 'runs' is not a JSON object"),
    ("[1, 2]", "the file is not a JSON object"),
    ("not JSON {", "not JSON: "),
])
def test_a_manifest_kanx_cannot_read_is_refused_naming_it_and_left_as_it_is(tmp_path, capsys, text, words):
    from kanx.manifest import write_manifests
    from kanx.runner import run_command

    jobs = _jobs(tmp_path)
    manifest = jobs[0].run_dir.parent / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(text)
    with pytest.raises(ConfigError, match="is not a manifest kanx wrote") as e:
        write_manifests(jobs)
    assert str(manifest) in str(e.value) and words in str(e.value)
    with pytest.raises(SystemExit) as stop:  # what the command line says: one line, exit 2, nothing trained
        run_command([(j.container, j.run_dir) for j in jobs], tmp_path, tmp_path)
    assert stop.value.code == 2 and str(manifest) in one_line(capsys.readouterr().err, "kanx")
    assert manifest.read_text() == text and not list(tmp_path.rglob("record.json"))


def test_a_manifest_that_cannot_be_read_is_a_storage_error(tmp_path):
    from kanx.manifest import write_manifests

    jobs = _jobs(tmp_path)
    (jobs[0].run_dir.parent / "manifest.json").mkdir(parents=True)  # a folder where the file belongs
    with pytest.raises(StorageError, match="manifest.json"):
        write_manifests(jobs)


# ---------------------------------------------------------------- storage, loggers, checkpoints


def test_a_read_only_file_system_is_named_as_such_not_as_a_permission(tmp_path, monkeypatch):
    from kanx.atomic import cannot_write
    from kanx.checks import check_writable

    statvfs = os.statvfs
    monkeypatch.setattr(os, "statvfs", lambda p: types.SimpleNamespace(f_flag=statvfs(p).f_flag | os.ST_RDONLY))
    monkeypatch.setattr(os, "access", lambda *_: False)
    with pytest.raises(ConfigError, match="is on a read-only file system, so the results in .* cannot be written"):
        check_writable([tmp_path / "results" / "run"])
    denied = cannot_write(tmp_path / "record.json", PermissionError(errno.EACCES, "Permission denied"))
    read_only = os.strerror(errno.EROFS)
    assert str(denied) == f"cannot write {tmp_path / 'record.json'}: the file system is read-only ({read_only})"
    monkeypatch.undo()
    denied = cannot_write(tmp_path / "record.json", PermissionError(errno.EACCES, "Permission denied"))
    assert str(denied) == f"cannot write {tmp_path / 'record.json'}: permission denied (Permission denied)"


def test_a_logger_installed_but_broken_is_refused_before_compute(monkeypatch):
    from kanx.loggers.base import check_loggers, logger_config

    if importlib.util.find_spec("tensorboard") is None:
        pytest.skip("tensorboard is not installed")
    tensorboard = logger_config({"tensorboard": {"_target_": "kanx.loggers.TensorBoardLogger"}})
    check_loggers(tensorboard)
    monkeypatch.setitem(sys.modules, "tensorboard.compat.proto.event_pb2", None)  # a broken install: the import fails
    with pytest.raises(ConfigError, match=r"^logger=tensorboard: the installed tensorboard does not import "
                                          r"\(tensorboard.compat.proto.event_pb2: ModuleNotFoundError.*"
                                          r"pip install --force-reinstall 'kanx\[tensorboard\]'$"):
        check_loggers(tensorboard)


def test_status_calls_a_text_checkpoint_not_a_torch_file(tmp_path):
    from kanx.checkpoint import BadCheckpoint, Checkpoint

    for text in ("checkpoint\n", '{"epoch": 5}'):
        (tmp_path / "checkpoint.pt").write_text(text)
        with pytest.raises(BadCheckpoint) as e:
            Checkpoint.read(tmp_path)
        assert e.value.why.startswith("is not a torch file (it begins b") and "pickled" not in e.value.why
