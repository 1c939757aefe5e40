"""Help texts (issue #37): `kanx-train --help` describes kanx and lists its config groups; every
usage line names the command as it was typed; help texts are whole and agree with the code."""

import importlib
import os
import subprocess
import sys

import pytest
from helpers import ROOT

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def train_help(argv0: str | None = None) -> str:
    """`python -m kanx.train --help`, or the same run as the console script ``argv0``."""
    code = "import sys; from kanx.train import main; sys.argv[0] = sys.argv[1]; del sys.argv[1]; main()"
    cmd = ([sys.executable, "-m", "kanx.train", "--help"] if argv0 is None
           else [sys.executable, "-c", code, argv0, "--help"])
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=os.environ | {"PYTHONUNBUFFERED": "1"})
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.slow
def test_train_help_describes_kanx_and_lists_the_config_groups():
    text = train_help()
    assert text.startswith("usage: python -m kanx.train [KEY=VALUE ...] [-m]")
    assert "Kolmogorov-Arnold" in text and "Bagrow & Bongard" in text and "is powered by Hydra" not in text
    groups = {line.split(":")[0] for line in text.split("== Config groups ==")[1].split("== Config ==")[0].splitlines()
              if ": " in line}
    assert groups == {"condition", "dataset", "debug", "hparams_search", "launcher", "logger"}
    condition_line = next(line for line in text.splitlines() if line.startswith("condition: "))
    options = set(condition_line.removeprefix("condition: ").split(", "))
    # the paper's eight and the factor sets of #38
    assert ({"baseline", "E", "F", "X", "EF", "EX", "FX", "EFX", "EFXI", "EN", "EFXNI"} <= options
            and "debug: quick" in text)
    assert 'eval "$(kanx-train -sc install=bash)"' in text  # the template's $$ came out as one $


@pytest.mark.slow
def test_train_help_names_the_console_script_when_run_as_one():
    text = train_help("/venv/bin/kanx-train")
    assert (text.startswith("usage: kanx-train [KEY=VALUE ...] [-m]")
            and "  kanx-train +condition=EFX +debug=quick -m" in text)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "scripts").rglob("*.py")))
def test_every_script_answers_help_run_from_the_checkout_root(script):
    """`python scripts/x.py --help` from the checkout's root: the script imports kanx as installed
    (`make install`), with nothing added to sys.path (tests/test_layout.py)."""
    p = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith("usage: "), p.stderr[-2000:]


@pytest.mark.parametrize("script", sorted(s for s in SCRIPTS if s != "kanx-train"))
def test_every_console_script_usage_line_names_the_command_as_typed(script, monkeypatch, capsys):
    module, func = SCRIPTS[script].split(":")
    main = getattr(importlib.import_module(module), func)
    for argv0, usage in ((f"/venv/bin/{script}", f"usage: {script} "),
                         (f"/src/{module.replace('.', '/')}.py", "usage: python -m kanx.")):
        monkeypatch.setattr(sys, "argv", [argv0, "--help"])
        with pytest.raises(SystemExit) as stop:
            main(["--help"])
        assert stop.value.code == 0
        assert capsys.readouterr().out.startswith(usage)


@pytest.mark.slow
def test_reproduce_help_names_one_default_for_group():
    p = subprocess.run([sys.executable, "-m", "kanx.reproduce", "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    text = " ".join(p.stdout.split())
    assert p.returncode == 0 and text.startswith("usage: python -m kanx.reproduce ")
    assert "`auto` (the default)" in text and "(default auto:" in text
    assert "(default)" not in text.replace("`auto` (the default)", "")  # no second default named for --group
