"""Every shell command of README.md runs, at tiny scale, so the README cannot rot.

The ```bash / ```sh / ```console blocks are parsed (a `$ ` prompt is dropped, `# ...` comments
are stripped) and every command is either run or listed in SKIP with the reason; a command
that is neither fails `test_every_readme_command_is_run_or_skipped`, so a new block is a
conscious choice. The rules that make a command tiny:

- `python` is this interpreter; `kanx-NAME ARGS` is run as `python -m kanx.NAME ARGS` (the
  console scripts are those modules' mains; tests/test_install.py runs the installed ones).
- `python -m kanx.train ...`: TINY (toy data sizes, 2 epochs, warmups of 1, the eager basis)
  is set, replacing a value the command gives for the same key, and `results_root` is the
  temp results root R; `-m` moves after all overrides (Hydra takes it only there). The
  sweeps keep their betas and seeds.
- Paths: `outputs` and any results folder (`outputs/paper`, `RESULTS=...`) are R; a run folder
  `outputs/<dataset>/<condition>/<tag>/<beta,seed>` is the one below R whose tag the tiny
  overrides gave (TINY changes the tag, e.g. `default`).
- `make TARGET VARS`: the recipe `make -n -o install` prints (PY = this interpreter; the
  Makefile's `install` creates .venv, which the test does not) is run line by line under these
  same rules. `make reproduce-tables` runs at SCALE=smoke into RESULTS=R with the toy data
  sizes as OVERRIDES.

The commands run in README order and share R, so `kanx.analyze` and `kanx.status` read what
the training commands before them wrote. Quick commands run in the default suite
(`test_quick_readme_commands`, about a minute); the smoke pipeline of `make reproduce-tables`
(SLOW: minutes even for one dataset, and its analysis with them) in `test_slow_readme_commands`
(marked slow), in README order: the first trains every dataset, the others then find their
records and retrain nothing.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, SHARED_DATA, TOY

README = ROOT / "README.md"
SHELL_BLOCK = re.compile(r"^```(?:bash|sh|console)\n(.*?)^```", re.S | re.M)
TINY = [*TOY, "train.epochs=2", "train.warmup=1", "train.fc_warmup=1"]
# Commands not run, each with the reason (the text as in README.md, comment stripped).
SKIP = {
    "make test": "runs this test suite (it would run itself)",
    "make bench-paper": "a benchmark: times every sweep of the paper on this device; a timing has no tiny scale",
    "make docs-reproduction": "rewrites the committed docs/REPRODUCTION.md "
                              "from the paper-scale records of results/paper",
}
# Run only in the slow test: the smoke pipeline (minutes, also for one or two datasets).
SLOW = {
    "make reproduce-tables",
    "make reproduce-tables SCALE=smoke",
    "make reproduce-tables DATASETS=concrete RESULTS=results/paper JOBS=2",
    "make reproduce-tables 'DATASETS=nguyen_f1 nguyen_f2' GROUP=all",
}


def readme_commands(text: str | None = None) -> list[str]:
    """The commands of README.md's shell blocks, in order, comments stripped."""
    commands = []
    for block in SHELL_BLOCK.findall(text if text is not None else README.read_text()):
        for line in block.splitlines():
            line = line.removeprefix("$ ").strip()
            words = shlex.split(line, comments=True)
            if words:
                commands.append(shlex.join(words))
    return commands


def test_readme_blocks_are_parsed():
    """The parser finds the blocks (not only the first), drops comments and prompts."""
    text = "```bash\nmake run    # trains\n```\n\n```python\nx = 1\n```\n```console\n$ kanx-status out\n```\n"
    assert readme_commands(text) == ["make run", "kanx-status out"]
    assert {"make run", "python -m kanx.analyze outputs/paper"} <= set(readme_commands())


def test_every_readme_command_is_run_or_skipped():
    """Each command matches a rule (or SKIP); every SKIP and SLOW entry is still in the README."""
    commands = readme_commands()
    for command in commands:
        if command not in SKIP:
            for words in plan(command, Path("/R")):
                tiny(words, Path("/R"), dry=True)  # raises for a command no rule covers
    assert set(SKIP) | SLOW <= set(commands), "SKIP/SLOW name commands the README no longer has"


# --- rules ---------------------------------------------------------------------------------


def set_overrides(args: list[str], overrides: list[str]) -> list[str]:
    """``args`` with each override's key set to its value (replaced where given), -m last."""
    keys = {o.split("=", 1)[0] for o in overrides}
    kept = [a for a in args if a != "-m" and a.split("=", 1)[0] not in keys]
    return kept + overrides + (["-m"] if "-m" in args else [])


def results_path(arg: str, root: Path, dry: bool) -> str:
    """`outputs[/...]` or `results/...` below R: a run folder through its tiny-scale tag."""
    parts = Path(arg).parts
    if not parts or parts[0] not in ("outputs", "results"):
        return arg
    if len(parts) == 5 and parts[4].startswith("beta="):  # <root>/<dataset>/<condition>/<tag>/<beta,seed>
        if dry:
            return str(root.joinpath(*parts[1:]))
        found = sorted(root.glob(f"{parts[1]}/{parts[2]}/*/{parts[4]}"))
        assert len(found) == 1, f"{arg}: {len(found)} run folders below {root}"
        return str(found[0])
    return str(root)


def kanx_module(words: list[str], root: Path, dry: bool) -> list[str]:
    """`python -m kanx.NAME ...` at tiny scale."""
    module, args = words[2], words[3:]
    if module == "kanx.train":
        return [sys.executable, "-m", module, *set_overrides(args, [*TINY, f"results_root={root}"])]
    if module in ("kanx.analyze", "kanx.status", "kanx.formula", "kanx.draw"):
        return [sys.executable, "-m", module, *(results_path(a, root, dry) for a in args)]
    raise AssertionError(f"no rule for {module}")


def make_recipe(words: list[str], root: Path) -> list[list[str]]:
    """The recipe lines of `make TARGET VARS` (see the module docstring)."""
    target, variables = words[1], [w for w in words[2:] if "=" in w]
    if target == "reproduce-tables":
        variables = [v for v in variables if v.split("=", 1)[0] not in ("SCALE", "RESULTS", "OVERRIDES")]
        variables += ["SCALE=smoke", f"RESULTS={root}", f"OVERRIDES={' '.join(TOY)}"]
    elif target not in ("run", "formula") or variables:
        raise AssertionError(f"no rule for make {target} {variables}")
    # Under `make test` this runs in a sub-make, which would print "make[1]: Entering directory".
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    dry = subprocess.run(["make", "--no-print-directory", "-n", "-o", "install", target,
                          *variables, f"PY={sys.executable}"],
                         cwd=ROOT, capture_output=True, text=True, check=True, env=env)
    return [shlex.split(line) for line in dry.stdout.replace("\\\n", " ").splitlines() if line.strip()]


def plan(command: str, root: Path) -> list[list[str]]:
    """The processes a README command starts, as written (a make target: its recipe)."""
    words = shlex.split(command)
    if words[0].startswith("kanx-"):
        words = ["python", "-m", "kanx." + words[0].removeprefix("kanx-"), *words[1:]]
    if words[0] == "make":
        return make_recipe(words, root)
    return [words]


def tiny(words: list[str], root: Path, dry: bool = False) -> list[str]:
    """One process at tiny scale (``dry``: run folders are not looked up on disk, where the
    commands before would have made them)."""
    if words[0] == sys.executable and words[1:3] == ["-m", "kanx.reproduce"]:
        return words  # made tiny through the make variables (make reproduce-tables runs python -m kanx.reproduce)
    if Path(words[0]).name == "python" or words[0] == sys.executable:
        if words[1] == "-m" and words[2].startswith("kanx."):
            return kanx_module(words, root, dry)
    raise AssertionError(f"README command with no rule and not in SKIP: {shlex.join(words)}")


# --- checks --------------------------------------------------------------------------------


def records_of(root: Path, dataset: str, condition: str) -> list[Path]:
    return [p for p in root.glob(f"{dataset}/{condition}/*/*/record.json") if (p.parent / "done").exists()]


def check(command: str, root: Path) -> None:
    """What the command must have left in R, beyond exiting 0."""
    words = shlex.split(command)
    if "kanx.train" in words or words[:2] == ["make", "run"]:
        given = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("train."))
        condition = given.get("+condition", "EFX" if words[:2] == ["make", "run"] else "baseline")
        assert records_of(root, given.get("dataset", "sin_xy2"),
                          "Baseline" if condition == "baseline" else condition), command
    if "kanx.formula" in words:
        assert (Path(tiny(plan(command, root)[0], root)[3]) / "formula.json").is_file(), command
    if "kanx.analyze" in words or words[:2] == ["make", "reproduce-tables"]:
        assert (root / "report.md").is_file(), command
    if "--curves" in words:
        assert any((root / "figures" / "curves").rglob("*.png")), command


def run_commands(commands: list[str], root: Path) -> None:
    env = os.environ | {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    for command in commands:
        for words in plan(command, root):
            argv = tiny(words, root)
            p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
            assert p.returncode == 0, (f"README: {command}\nran: {shlex.join(argv)}\nexit "
                                       f"{p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        check(command, root)


def needs_data(command: str) -> bool:
    return "dataset=concrete" in command or "DATASETS=concrete" in command


def runnable(command: str) -> bool:
    if command in SKIP:
        return False
    if needs_data(command) and not (SHARED_DATA / "concrete.csv").is_file():
        return False  # no Concrete data here (kanx would download it)
    return True


@pytest.mark.slow
def test_quick_readme_commands(tmp_path):
    run_commands([c for c in readme_commands() if runnable(c) and c not in SLOW], tmp_path)


@pytest.mark.slow
@pytest.mark.pipeline  # minutes: make test-full runs it, CI (make test-ci) does not
def test_slow_readme_commands(tmp_path):
    run_commands([c for c in readme_commands() if runnable(c) and c in SLOW], tmp_path)
