"""No write outside the results root, ever (issue #48): every part of a run's path is built from
values a user gives (a dataset's name, a CSV column named as the target or a feature, a
condition's name, an override's value, beta and seed), and a hostile one (`..`, `/`, NUL, a
name longer than a file name may be, a character drawn as a slash, a newline) neither leaves
results_root nor breaks the file system. A value that is accepted trains into a folder below
the root; one that is refused writes nothing at all, on the path of a sweep as on the single
run's (where Hydra would make the folder before kanx saw the config). In-process: the paths are
composed as the command line composes them (kanx.plan.sweep_jobs, conf/config.yaml's
hydra.sweep), and the single run's check is the callback Hydra calls before it makes the folder."""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import TOY, composed

from hydra_plugins.kanx_launcher.sweeper import SingleRunCheck
from kanx.errors import ConfigError
from kanx.plan import sweep_jobs
from kanx.runner import run_jobs
from kanx.vocab import TAG_MAX_BYTES, folder_name, folder_tag, run_folder

HOSTILE = {
    "dotdot": "..",
    "dot": ".",
    "slash": "/",
    "up": "../../x",
    "far up": "../../../../../escaped_out",
    "nul": "a\0b",
    "long": "n" * 300,
    "division slash": "a\u2215b",
    "fraction slash": "a\u2044b",
    "newline": "a\nb",
}
VALUES = ("far up", "nul", "newline")  # the hostile values tried where a value is refused whatever it is
TINY = ["train.epochs=2", "train.warmup=1", "train.fc_warmup=1", "train.batch_size=16", "train.compile=false", "seed=0"]


def _quoted(value: str) -> str:
    """A value as a Hydra override spells a string that is not a plain word."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _tree(top: Path) -> set[Path]:
    return set(top.rglob("*"))


@pytest.fixture
def table(tmp_path) -> Path:
    """A CSV whose columns are x, y, z and one column per hostile name (each a number)."""
    rng = np.random.default_rng(0)
    names = ["x", "y", "z", *HOSTILE.values()]
    df = pd.DataFrame(rng.uniform(-1, 1, (60, len(names))), columns=names)
    df["z"] = np.sin(df["x"]) + df["y"] ** 2
    path = tmp_path / "table.csv"
    df.to_csv(path, index=False)
    return path


@pytest.fixture
def root(tmp_path) -> Path:
    """The results root, deep enough below tmp_path that `..` x 5 would still land inside tmp_path's parent."""
    return tmp_path / "a" / "b" / "c" / "d" / "e" / "f" / "results"


# ---------------------------------------------------------------- folder names


def test_plain_names_keep_their_folder_and_committed_results_stay_where_they_are():
    top = Path(__file__).resolve().parents[1] / "results"
    parts = {part for p in top.rglob("*") for part in p.relative_to(top).parts}
    assert len(parts) > 100 and all(folder_name(p) == p for p in parts)
    for plain in (
        "sin_xy2",
        "EFX",
        "default",
        "train.epochs=2,train.warmup=1",
        "beta=0.1,seed=0",
        "dataset.target='Concrete strength'",
        "é" * 60,
    ):
        assert folder_name(plain) == plain
    assert (
        run_folder(0.1, 3) == "beta=0.1,seed=3"
        and run_folder(1e-05, 0) == "beta=1e-05,seed=0"
        and folder_tag("") == "default"
    )


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_value_is_one_folder_that_names_it(name):
    value = HOSTILE[name]
    folder = folder_name(value)
    assert folder not in ("", ".", "..") and "/" not in folder and "\0" not in folder and "\n" not in folder
    assert not set(folder) & {"\u2215", "\u2044"} and len(folder.encode()) <= TAG_MAX_BYTES
    assert folder == folder_name(value) and folder != folder_name(value + "x")  # stable, and two values never share one
    assert (Path("/r") / folder).parent == Path("/r")


def test_hostile_values_never_share_a_folder():
    values = [*HOSTILE.values(), "a_b", "a%2Fb", "a b", "", " "]
    assert len({folder_name(v) for v in values}) == len(values)


# ---------------------------------------------------------------- accepted: trained below the root


def _accepted_overrides(table: Path, root: Path) -> dict[str, list[str]]:
    """For each hostile name, in each place a run takes it as it is: the target column, a feature
    column; and the one a dataset's name may be (a plain name, kanx.data.registry.check_name), a long one."""
    base = [f"dataset.path={table}", f"results_root={root}", *TINY]
    out = {
        "dataset.name long": [*base, f"dataset.name={HOSTILE['long']}", "dataset.target=z", "dataset.features=[x,y]"],
        "features": [*base, "dataset.target=z", f"dataset.features=[x,{','.join(map(_quoted, HOSTILE.values()))}]"],
    }
    for name, value in HOSTILE.items():
        out[f"target {name}"] = [*base, f"dataset.target={_quoted(value)}", "dataset.features=[x,y]"]
    return out


def test_hostile_names_that_are_accepted_train_below_the_root_and_nowhere_else(table, root, tmp_path):
    before = _tree(tmp_path.parent)
    configs = [
        job
        for overrides in _accepted_overrides(table, root).values()
        for job in sweep_jobs("csv", "baseline", overrides)
    ]
    assert len(configs) == len(HOSTILE) + 2 and len({d for _, d in configs}) == len(configs)
    for _, run_dir in configs:
        assert run_dir.resolve().parent.parent.parent.parent == root.resolve(), (
            run_dir
        )  # <dataset>/<condition>/<tag>/<run>
    recs = run_jobs(configs)
    assert all(r["status"] in ("ok", "collapsed") for r in recs)
    for (cfg, run_dir), rec in zip(configs, recs, strict=True):
        assert (run_dir / "record.json").is_file() and rec["dataset"] == cfg.dataset.name
    assert recs[1]["config"]["dataset"]["features"] == ["x", *HOSTILE.values()]
    written = _tree(tmp_path.parent) - before
    outside = sorted(
        p for p in written if not p.resolve().is_relative_to(root.resolve()) and p != root and p not in root.parents
    )
    assert not outside, outside
    assert {rec["config"]["dataset"]["target"] for rec in recs} >= {
        v for v in HOSTILE.values()
    }  # the records keep the real names
    from kanx.status import collect

    sweeps = collect(root)  # kanx.status of the root said "no sweeps" once a record had left it
    assert len(sweeps) == len(configs) and {run_dir.parent for _, run_dir in configs} == {root / s.path for s in sweeps}


@pytest.mark.parametrize("name", ["far up", "nul", "long", "division slash"])
def test_a_single_run_with_a_hostile_column_makes_its_folder_below_the_root(table, root, tmp_path, name):
    """The callback Hydra calls before it makes a single run's folder checks the run, then makes the folder."""
    before = _tree(tmp_path.parent)
    cfg = composed(
        "dataset=csv",
        f"dataset.path={table}",
        f"dataset.target={_quoted(HOSTILE[name])}",
        "dataset.features=[x,y]",
        f"results_root={root}",
        *TINY,
        hydra=True,
    )
    SingleRunCheck().on_run_start(cfg)
    run_dir = Path(str(cfg.hydra.run.dir))
    assert run_dir.is_dir() and run_dir.resolve().parent.parent.parent.parent == root.resolve()
    assert all(
        p.resolve().is_relative_to(root.resolve()) or p in (root, *root.parents)
        for p in _tree(tmp_path.parent) - before
    )


# ---------------------------------------------------------------- refused: nothing written


def _refused_overrides(table: Path, root: Path) -> dict[str, list[str]]:
    """Hostile values where a run reads a name or a number: refused, each one."""
    base = [f"results_root={root}", *TINY, *TOY[:2]]
    out = {}
    for name, value in HOSTILE.items():
        out[f"condition.name {name}"] = [*base, f"condition.name={_quoted(value)}"]
        if (
            name in VALUES
        ):  # a value the run reads as a number, or a key it does not read: refused alike, whatever the value
            out[f"beta {name}"] = [*base, "+condition=E", f"beta={_quoted(value)}"]
            out[f"train.lr {name}"] = [*base, f"train.lr={_quoted(value)}"]
            out[f"added key {name}"] = [*base, f"+model.extra={_quoted(value)}"]
        out[f"missing column {name}"] = [
            "dataset=csv",
            f"dataset.path={table}",
            f"dataset.target={_quoted(value + '?')}",
            *base,
        ]
        if name != "long":  # a dataset's name is a plain one (letters, digits, _ . + -)
            out[f"dataset.name {name}"] = [
                "dataset=csv",
                f"dataset.path={table}",
                "dataset.target=z",
                f"dataset.name={_quoted(value)}",
                *base,
            ]
    out["seed"] = [f"results_root={root}", *TINY, "seed='../../x'"]
    return out


REFUSED = list(_refused_overrides(Path("t.csv"), Path("r")))


@pytest.mark.parametrize("case", REFUSED)
def test_a_refused_hostile_value_writes_nothing_at_all(table, root, tmp_path, capsys, case):
    overrides = _refused_overrides(table, root)[case]
    before = _tree(tmp_path.parent)
    cfg = composed(*overrides, hydra=True)
    with pytest.raises(ConfigError) as e:  # the sweep's path: every job checked before anything is written
        run_jobs([(cfg, Path(str(cfg.hydra.run.dir)))])
    assert "\n" not in str(e.value) and "\0" not in str(e.value)  # one line, whatever the value held
    with pytest.raises(SystemExit) as stop:  # a single run's: before Hydra makes its folder
        SingleRunCheck().on_run_start(cfg)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err == f"kanx: error: {e.value}\n"
    assert _tree(tmp_path.parent) == before
    assert not Path(str(cfg.hydra.run.dir)).exists()


def test_an_empty_results_root_is_refused_in_one_line_before_anything(tmp_path, capsys, monkeypatch):
    """results_root= (what results_root=$UNSET_VAR gives) put the record at /sin_xy2/..."""
    import kanx.runner
    from kanx.config import check_results_root

    for bad in ("", " ", None, "a\0b"):
        with pytest.raises(ConfigError, match="must name a folder, e.g. results_root=outputs"):
            check_results_root(bad)
    assert check_results_root("outputs") == "outputs" and check_results_root(2024) == "2024"
    cfg = composed("results_root=", *TINY, *TOY[:2], hydra=True)
    assert str(cfg.hydra.run.dir).startswith("/sin_xy2/")  # where it went
    with pytest.raises(
        ConfigError, match="^results_root='' must name a folder"
    ):  # in a sweep, whatever folder its jobs name
        run_jobs([(cfg, tmp_path / "run")])
    made = []
    monkeypatch.setattr(kanx.runner, "make_folder", made.append)  # were the check to let it through: no folder at /
    with pytest.raises(SystemExit) as stop:
        SingleRunCheck().on_run_start(cfg)
    err = capsys.readouterr().err
    assert (
        stop.value.code == 2
        and err.startswith("kanx: error: results_root='' must name a folder")
        and err.count("\n") == 1
    )
    assert not made and not list(tmp_path.iterdir())


@pytest.mark.parametrize("where", ["/proc/x", "/sys/kernel"])
def test_a_results_root_that_cannot_be_made_is_one_line_and_exit_1(where, capsys, monkeypatch):
    if not Path(where).parent.is_dir():
        pytest.skip(f"no {Path(where).parent}")
    monkeypatch.setattr(
        os, "access", lambda path, mode: True
    )  # as root, who passes the permission check and only mkdir fails
    cfg = composed(f"results_root={where}", *TINY, *TOY[:2], hydra=True)
    with pytest.raises(SystemExit) as stop:
        SingleRunCheck().on_run_start(cfg)
    err = capsys.readouterr().err
    assert stop.value.code == 1 and err.startswith(f"kanx: error: cannot write {where}") and err.count("\n") == 1, err
    assert err.rstrip().endswith("cannot be written: choose another results_root")


# ---------------------------------------------------------------- the command line (slow: a process each)


@pytest.mark.slow
@pytest.mark.parametrize("sweep", [[], ["-m"]], ids=["single run", "sweep"])
def test_the_cli_keeps_a_hostile_column_below_the_root_and_a_refused_value_writes_nothing(table, root, tmp_path, sweep):
    from helpers import cli

    before = _tree(tmp_path.parent)
    cli(
        "dataset=csv",
        f"dataset.path={table}",
        f"dataset.target={HOSTILE['far up']}",
        "dataset.features=[x,y]",
        f"results_root={root}",
        *TINY,
        *sweep,
        cwd=tmp_path,
    )
    (record,) = root.rglob("record.json")
    assert len(record.relative_to(root).parts) == 5 and "dataset.target=.._.._.._.._.._escaped_out," in record.parts[-3]
    assert all(
        p.resolve().is_relative_to(root.resolve()) or p in (root, *root.parents)
        for p in _tree(tmp_path.parent) - before
    )
    before = _tree(tmp_path.parent)
    for refused, code in (
        (["condition.name=../../esc2"], 2),
        (["train=5"], 2),
        (["+launcher.foo=1"], 2),
        (["beta=../../x"], 2),
        (["results_root=/proc/x"], 1 if os.geteuid() == 0 else 2),
    ):  # another user's permission check says 2 first
        args = [f"results_root={root / 'new'}", *TINY, *TOY[:2], *refused, *sweep]
        p = cli(
            *[a for a in args if not (refused == ["train=5"] and a.startswith("train."))], cwd=tmp_path, check=False
        )
        assert (
            p.returncode == code and len(p.stderr.strip().splitlines()) == 1
            and p.stderr.startswith("python -m kanx.train: error: ")
        ), (refused, p.stderr[-2000:])
        assert _tree(tmp_path.parent) == before, refused


@pytest.mark.slow
def test_the_cli_refuses_an_empty_results_root_in_one_line_before_anything(tmp_path):
    """results_root= (an unset variable) wrote the record to /sin_xy2/...; here to /<name>/... were it let through."""
    import shutil

    from helpers import cli

    name = f"kanx_probe_{os.getpid()}"
    table = tmp_path / "t.csv"
    pd.DataFrame({"x": np.linspace(-1, 1, 60), "y": np.linspace(0, 1, 60)}).to_csv(table, index=False)
    assert not (Path("/") / name).exists()
    try:
        for sweep in ([], ["-m"]):
            p = cli(
                "results_root=",
                "dataset=csv",
                f"dataset.path={table}",
                f"dataset.name={name}",
                "dataset.target=y",
                *TINY,
                *sweep,
                cwd=tmp_path,
                check=False,
            )
            assert p.returncode == 2 and p.stderr.startswith(
                "python -m kanx.train: error: results_root='' must name a folder"), (
                p.stderr[-2000:]
            )
            assert len(p.stderr.strip().splitlines()) == 1 and not (Path("/") / name).exists()
    finally:
        shutil.rmtree(Path("/") / name, ignore_errors=True)
