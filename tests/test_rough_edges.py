"""Issue #51 item 5, rough edges of the command lines: `--version` on every kanx command, help
into a pipe closed early without a traceback (Hydra's help paths included), `kanx-reproduce`'s
lines that can be pasted, its help on every option and one `report:` line, and a `+debug=quick`
run's numbers marked as a quick try wherever they are printed."""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import sys

import pytest
from helpers import ROOT, TOY, composed, train_run
from omegaconf import OmegaConf

import kanx
from kanx import reproduce
from kanx.analyze import build_artifacts, load_runs
from kanx.cli import ArgumentParser, version_line
from kanx.confdir import QUICK_TRY, is_quick_try
from kanx.records import seal

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
# every console script by the module `python -m` runs it as (kanx.analyze's main lies in its __main__)
MODULES = sorted(target.split(":")[0].removesuffix(".__main__") for target in SCRIPTS.values())


def test_version_line_names_kanx_and_its_version():
    assert version_line() == f"kanx {kanx.__version__}"


def test_every_kanx_parser_prints_kanx_version(capsys):
    with pytest.raises(SystemExit) as stop:
        ArgumentParser(prog="kanx-x").parse_args(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"{version_line()}\n"


def test_kanx_train_prints_kanx_version_not_hydras(monkeypatch, capsys):
    from kanx import train

    monkeypatch.setattr(sys, "argv", ["kanx-train", "--version"])
    assert train.main() == 0
    assert capsys.readouterr().out == f"{version_line()}\n"


@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES)
def test_every_console_script_prints_kanx_version(module):
    p = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert (p.returncode, p.stdout, p.stderr) == (0, f"kanx {kanx.__version__}\n", "")


def first_line_then_close(args: list[str]) -> tuple[str, int, str]:
    """`python ARGS | head -1`: the first line read, the pipe closed, then the exit code and stderr."""
    p = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    line = p.stdout.readline().decode()
    p.stdout.close()
    err = p.stderr.read().decode()
    return line, p.wait(timeout=120), err


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--help", "--hydra-help"])
def test_kanx_train_help_into_a_pipe_closed_early_exits_0_without_a_traceback(flag):
    # Hydra prints its help and exits itself; before pipe_safe took those paths, 1 in 8 tries of
    # --help and 3 in 8 of --hydra-help ended in a BrokenPipeError traceback
    for _ in range(20):
        line, code, err = first_line_then_close(["-m", "kanx.train", flag])
        assert line and code == 0 and err == "", (flag, code, err)


@pytest.mark.slow
@pytest.mark.parametrize("module", [m for m in MODULES if m != "kanx.train"])
def test_every_other_console_scripts_help_into_a_pipe_closed_early_exits_0_without_a_traceback(module):
    for _ in range(5):
        line, code, err = first_line_then_close(["-m", module, "--help"])
        assert line and code == 0 and err == "", (module, code, err)


# --- kanx-reproduce ------------------------------------------------------------------------


def test_reproduce_dry_run_prints_lines_that_can_be_pasted(capsys):
    assert reproduce.main(["--dry-run", "--datasets", "nguyen_f1", "--conditions", "EFX", "--results", "out dir"]) == 0
    lines = capsys.readouterr().out.splitlines()
    train, analyze = (shlex.split(line) for line in lines)
    assert train[:3] == [sys.executable, "-m", "kanx.train"] and "results_root=out dir" in train
    assert analyze == [sys.executable, "-m", "kanx.analyze", "out dir", "--curves"]


def test_every_reproduce_option_has_help():
    bare = [a.dest for a in reproduce.parser()._actions if not a.help]
    assert bare == []


def test_reproduce_names_the_report_once(monkeypatch, capsys):
    monkeypatch.setattr(reproduce, "run_packed", lambda a, results: 0)

    def analysis(cmd):  # what kanx.analyze prints as it ends
        print(f"report: {cmd[3]}/report.md")
        return 0

    monkeypatch.setattr(reproduce.subprocess, "call", analysis)
    assert reproduce.main(["--datasets", "nguyen_f1", "--conditions", "E", "--results", "out"]) == 0
    assert capsys.readouterr().out.count("report: ") == 1


# --- quick tries ---------------------------------------------------------------------------


def config_of(*overrides) -> dict:
    return OmegaConf.to_container(composed(*overrides), resolve=True)


def test_a_quick_try_is_known_by_its_config():
    assert is_quick_try(config_of(QUICK_TRY))
    assert not is_quick_try(config_of())
    assert not is_quick_try(config_of(QUICK_TRY, "train.epochs=50"))  # the command line's protocol, not the preset


def test_a_quick_trys_result_line_says_it_is_one(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="kanx"):
        train_run(tmp_path / "run", "seed=0", f"results_root={tmp_path}", QUICK_TRY, *TOY)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[ok] ")]
    assert f"({QUICK_TRY}: a quick try, not a result): test_rmse=" in line


def write_record(root, rel: str, config: dict, beta: float) -> None:
    folder = root / rel
    folder.mkdir(parents=True)
    record = {"schema_version": 1, "dataset": "concrete", "family": "concrete", "condition": "E", "beta": beta,
              "seed": 0, "status": "ok", "metrics": {"test_rmse": 45.9, "contributing_edges": 50, "depth": 2},
              "git_commit": "abc", "config": config}
    (folder / "record.json").write_text(json.dumps(record))
    seal(folder)


def test_the_report_says_when_quick_tries_are_counted(tmp_path):
    quick = config_of(QUICK_TRY)
    write_record(tmp_path, "concrete/E/+debug=quick/beta=0.01,seed=0", quick, beta=0.01)
    write_record(tmp_path, "concrete/E/other/beta=0.1,seed=0", {"train": {**quick["train"], "epochs": 50}}, beta=0.1)
    report = build_artifacts(load_runs(tmp_path), formats=()).report
    (note,) = [line for line in report.splitlines() if "Quick tries" in line]
    assert note.startswith(f"**Quick tries, not results: 1 of the 2 runs counted are of `{QUICK_TRY}`")
    assert note.endswith("Their sweeps: `concrete/E/+debug=quick`.")
