"""kanx as an installed package: the wheel carries conf/ as kanx.conf and its entry points
train from any folder, with no checkout in sight."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers import ROOT, TOY

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

# What the wheel is built from (pyproject.toml names them all): copied out of the checkout
# so that the build's build/ and *.egg-info stay out of it.
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "conf", "kanx", "hydra_plugins")
SWEEP = ["+condition=EFX", "beta=0.1", "seed=0,1", "train.epochs=2", "train.warmup=1", "train.fc_warmup=1", *TOY]


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_listed_packages_are_the_source_tree():
    """pyproject.toml lists its packages (kanx.conf maps to conf/, which `find` cannot do):
    a new subpackage or config group missing from the list would be missing from the wheel."""
    setup = pyproject()["tool"]["setuptools"]
    assert setup["package-dir"] == {"kanx.conf": "conf"}
    # Every folder with Python in or below it (hydra_plugins is a namespace package: no __init__.py).
    parts = {p.parent.relative_to(ROOT).parts for top in ("kanx", "hydra_plugins") for p in (ROOT / top).rglob("*.py")}
    code = {".".join(q[:i]) for q in parts for i in range(1, len(q) + 1)}
    # Every folder of YAML below conf/ (conf/hydra/help too), conf/local (site settings, git-ignored) apart.
    folders = {p.parent.relative_to(ROOT / "conf").parts for p in (ROOT / "conf").rglob("*.yaml")} - {()}
    groups = {"kanx.conf." + ".".join(parts) for parts in folders if parts[0] != "local"}
    assert set(setup["packages"]) == code | groups | {"kanx.conf"}
    assert all(setup["package-data"][g] == ["*.yaml"] for g in groups | {"kanx.conf"})


def test_console_scripts_include_kanx_train():
    assert pyproject()["project"]["scripts"]["kanx-train"] == "kanx.train:main"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv outside the checkout with the kanx wheel installed (no dependencies):
    torch, Hydra and the rest come from this interpreter's site-packages through a .pth
    file. (`venv --system-site-packages` would see the base interpreter's, not this venv's;
    and a .pth line only adds the folder, so an editable kanx there is not activated.)"""
    tmp = tmp_path_factory.mktemp("install")
    src = source_tree(tmp / "src")
    pip = [sys.executable, "-m", "pip"]
    assert importlib.util.find_spec("setuptools_scm"), "setuptools-scm (the test extra) is missing: run make install"
    # --no-build-isolation: the installed setuptools (the `test` extra pins it) builds offline.
    ok([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(tmp / "dist"), str(src)], tmp)
    wheel = next((tmp / "dist").glob("kanx-*.whl"))
    venv = tmp / "venv"
    ok([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp)
    python = venv / "bin" / "python"
    purelib = ok([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp).stdout.strip()
    Path(purelib, "kanx-test-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    ok([*pip, "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)], tmp)
    return venv


def source_tree(src: Path) -> Path:
    """The build inputs as this checkout has them, in a git repository of this checkout's HEAD
    (a sparse clone holding only them), so that setuptools-scm derives the version from git as
    in the checkout: uncommitted changes make it a .d<date> version, as they would here."""
    if (ROOT / ".git").exists():
        ok(["git", "clone", "-q", "--no-checkout", "--shared", str(ROOT), str(src)], ROOT)
        ok(["git", "sparse-checkout", "set", "--no-cone",
            *(f"/{name}" + "/" * (ROOT / name).is_dir() for name in BUILD_INPUTS)], src)
        ok(["git", "checkout", "-q"], src)
    src.mkdir(exist_ok=True)
    for name in BUILD_INPUTS:  # the working tree's copies, over the committed ones
        if (ROOT / name).is_dir():
            shutil.rmtree(src / name, ignore_errors=True)
            shutil.copytree(ROOT / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "local", "_version.py"))
        else:
            shutil.copy2(ROOT / name, src / name)
    return src


def ok(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run ``cmd`` in ``cwd`` outside this checkout's import path; it must exit 0."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | {"PYTHONUNBUFFERED": "1"}
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{cmd}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


@pytest.mark.slow
def test_wheel_carries_the_configs_and_uses_them(installed, tmp_path):
    """The installed kanx is the wheel's, and it composes from its own kanx/conf (a copy of
    every YAML of conf/), not from this checkout."""
    probe = "import kanx, kanx.confdir as c; print(kanx.__file__); print(c.conf_dir())"
    kanx_file, conf = ok([str(installed / "bin" / "python"), "-c", probe], tmp_path).stdout.split()
    assert Path(kanx_file).is_relative_to(installed) and Path(conf) == Path(kanx_file).parent / "conf"
    source = {p.relative_to(ROOT / "conf").as_posix() for p in (ROOT / "conf").rglob("*.yaml")
              if "local" not in p.parts}
    assert {p.relative_to(conf).as_posix() for p in Path(conf).rglob("*.yaml")} == source


@pytest.mark.parametrize("entry", ["kanx-train", "python -m kanx.train"])
@pytest.mark.slow
def test_installed_entry_points_run_a_sweep_outside_the_checkout(installed, tmp_path, entry):
    cmd = ([str(installed / "bin" / "kanx-train")] if entry == "kanx-train"
           else [str(installed / "bin" / "python"), "-m", "kanx.train"])
    p = ok([*cmd, *SWEEP, "results_root=res", "-m"], tmp_path)
    found = sorted(tmp_path.glob("res/sin_xy2/EFX/*/beta=0.1,seed=*/record.json"))
    assert [f.parent.name for f in found] == ["beta=0.1,seed=0", "beta=0.1,seed=1"], p.stdout + p.stderr
    assert all((f.parent / "done").exists() for f in found)
    assert "as packs" in p.stdout + p.stderr  # the wheel's hydra_plugins (the packing launcher) were found
    record = json.loads(found[0].read_text())
    version = ok([str(installed / "bin" / "python"), "-c", "import kanx; print(kanx.__version__)"],
                 tmp_path).stdout.strip()
    # the build
    assert (record["versions"]["kanx"] == version and record["git_commit"]
            and version.split("+g")[1].startswith(record["git_commit"][:7]))


@pytest.mark.slow
def test_the_installed_wheel_shows_its_license_and_a_version_from_git_and_has_every_console_script(installed, tmp_path):
    """`pip show kanx` of the wheel installed into a fresh venv outside the checkout: the license
    and a version that setuptools-scm derived from this checkout's commit, which records name
    (git_commit: no checkout to ask there); kanx-formula and kanx-status answer --help as themselves."""
    python = str(installed / "bin" / "python")
    # the venv has no pip of its own
    show = ok([sys.executable, "-m", "pip", "--python", python, "show", "--verbose", "kanx"], tmp_path).stdout
    fields = dict(line.split(": ", 1) for line in show.splitlines() if ": " in line)
    # pip < 24.1: License
    assert ((fields.get("License-Expression") or fields.get("License")) == "MIT"
            and "The kanx authors" in fields["Author"]), show
    assert "Programming Language :: Python :: 3" in show and "https://arxiv.org/abs/2512.12448" in show
    head = ok(["git", "rev-parse", "HEAD"], ROOT).stdout.strip()
    m = re.fullmatch(r"\d+(\.\d+)*(\.dev\d+)?\+g(?P<sha>[0-9a-f]{7,})(\.d\d{8})?", fields["Version"])
    assert m and head.startswith(m["sha"]), (fields["Version"], head)
    probe = "import kanx, kanx.records as r; print(kanx.__version__); print(r.git_commit())"
    version, commit = ok([python, "-c", probe], tmp_path).stdout.split()
    assert version == fields["Version"] and commit.removesuffix("-dirty") == m["sha"]
    assert (installed / "bin" / "kanx-formula").exists()
    for script in ("kanx-formula", "kanx-status"):
        usage = ok([str(installed / "bin" / script), "--help"], tmp_path).stdout
        assert usage.startswith(f"usage: {script} "), usage
    assert ok([str(installed / "bin" / "kanx-train"), "--help"], tmp_path).stdout.startswith("usage: kanx-train ")
