"""Bad input stops with one line before any compute (issue #34): data tables and run folders.

A CSV header that names a column twice (pandas would rename the second to "a.1"); values the
float32 model cannot hold (1e300 trained and ended "diverged", or silently flattened a
column); a folder where a data file is expected (it read as "not in the folder", then as a
failed download); and `kanx.formula` on a run folder it cannot use (tracebacks where
`kanx.draw` printed one line) or with options out of range (--tolerance -1 or nan ran).
"""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import SHARED_DATA, TOY, cli, train_run

import kanx
from kanx import formula, symbolic, symbolic_fit
from kanx.data import load_dataset
from kanx.draw import command as draw_cli
from kanx.errors import ConfigError, DataError
from kanx.records import seal

TOY_TRAINING = ["train.epochs=2", "train.warmup=1", "train.fc_warmup=1", *TOY]
# No test reads the user's KANX_DATA_DIR or cache, or touches the network (conftest.py).
pytestmark = pytest.mark.usefixtures("offline")


def table(path: Path, header: str = "a,b,y", n: int = 40, cell: tuple[int, int, str] | None = None) -> Path:
    """A numeric CSV of n rows under `header`; `cell` (data row from 1, column, text) replaces one cell."""
    rng = np.random.default_rng(0)
    rows = [[f"{v:.6f}" for v in rng.uniform(-1, 1, header.count(",") + 1)] for _ in range(n)]
    if cell is not None:
        rows[cell[0] - 1][cell[1]] = cell[2]
    path.write_text(header + "\n" + "".join(",".join(r) + "\n" for r in rows))
    return path


def csv_error(path: Path, **options) -> str:
    with pytest.raises(DataError) as err:
        load_dataset("mine", data_seed=0, loader="csv", path=str(path), **{"target": "y", **options})
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    return message


# ------------------------------------------------------------------ 1. a repeated column name
@pytest.mark.parametrize("features", [None, ["b"]])
def test_a_header_naming_a_column_twice_is_refused_naming_it(tmp_path, features):
    path = table(tmp_path / "dup.csv", "a,b,a,y")
    message = csv_error(path, features=features)
    assert "'a'" in message and "more than once" in message and "a.1" not in message


def test_a_column_named_like_a_renamed_duplicate_is_its_own_column(tmp_path):
    ds = load_dataset("mine", data_seed=0, loader="csv", path=str(table(tmp_path / "t.csv", "a,a.1,y")), target="y")
    assert ds.input_names == ("a", "a.1")


@pytest.mark.skipif(not (SHARED_DATA / "concrete.csv").is_file(), reason="no shared concrete.csv")
def test_a_data_copy_with_a_repeated_column_is_refused(tmp_path):
    lines = (SHARED_DATA / "concrete.csv").read_text().splitlines()
    first = lines[1].split(",")[0]
    (tmp_path / "concrete.csv").write_text(
        "\n".join([lines[0] + ",cement", *(f"{line},{first}" for line in lines[1:])]) + "\n")
    with pytest.raises(DataError, match=r"concrete.csv: the header names the column 'cement' more than once"):
        load_dataset("concrete", data_seed=0, data_dir=str(tmp_path))


# ------------------------------------------------------------------ 2. values float32 cannot hold
@pytest.mark.parametrize("column, text, shown", [(0, "1e300", "1e+300"), (2, "-1e300", "-1e+300"),
                                                 (1, "3.5e38", "3.5e+38"), (2, "inf", "inf")])
def test_a_value_beyond_float32_is_a_data_error_naming_column_and_value(tmp_path, column, text, shown):
    message = csv_error(table(tmp_path / "big.csv", cell=(3, column, text)))
    assert f"column {'aby'[column]!r}" in message and f" {shown} in data row 3" in message and "float32" in message


def test_the_largest_float32_values_are_accepted(tmp_path):
    ds = load_dataset("mine", data_seed=0, loader="csv", path=str(table(tmp_path / "t.csv", cell=(3, 0, "-3.4e38"))),
                      target="y")
    assert ds.n_train + ds.n_test == 40


@pytest.mark.slow
def test_a_huge_value_stops_the_command_line_before_training(tmp_path):
    path = table(tmp_path / "huge.csv", n=200, cell=(3, 2, "1e300"))  # enough rows for TOY's 128 + 64
    root = tmp_path / "results"
    p = cli("dataset=csv", f"dataset.path={path}", "dataset.target=y", f"results_root={root}",
            "+condition=E", "beta=0.1", "seed=0", *TOY_TRAINING, check=False)
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m kanx.train: error: ") and "column 'y' has the value 1e+300 in data row 3" in last
    assert not list(root.rglob("record.json"))


# ------------------------------------------------------------------ 3. a folder where a file belongs
def test_a_folder_named_like_the_data_file_is_named_as_a_folder(tmp_path, monkeypatch):
    (tmp_path / "concrete.csv").mkdir()
    for options in ({"data_dir": str(tmp_path)}, {}):
        monkeypatch.setenv("KANX_DATA_DIR", str(tmp_path))
        with pytest.raises(DataError) as err:
            load_dataset("concrete", data_seed=0, **options)
        message = str(err.value)
        assert (message.startswith(f"{tmp_path / 'concrete.csv'}: is a directory, not a file")
                and "download" not in message)
        assert "\n" not in message


def test_a_data_folder_that_is_a_file_is_named_as_a_file(tmp_path):
    (tmp_path / "data").write_text("")
    with pytest.raises(DataError, match=r"data folder .*/data \(from the option data_dir=.*\) is a file, not a folder"):
        load_dataset("concrete", data_seed=0, data_dir=str(tmp_path / "data"))


def test_a_csv_path_that_is_a_folder_is_named_as_a_folder(tmp_path):
    (tmp_path / "t.csv").mkdir()
    assert "is a directory, not a file" in csv_error(tmp_path / "t.csv")


def test_a_data_file_that_is_not_a_regular_file_is_named(tmp_path):
    os.mkfifo(tmp_path / "concrete.csv")  # opening a pipe would wait for a writer
    with pytest.raises(DataError, match=r"concrete.csv: is not a regular file"):
        load_dataset("concrete", data_seed=0, data_dir=str(tmp_path))


def test_an_unreadable_data_file_is_named_as_unreadable(tmp_path):
    (tmp_path / "concrete.csv").write_text("cement\n1\n")
    (tmp_path / "concrete.csv").chmod(0)
    if os.access(tmp_path / "concrete.csv", os.R_OK):
        pytest.skip("this user reads any file (root: run under setpriv --bounding-set=-dac_override,-dac_read_search)")
    with pytest.raises(DataError, match=r"concrete.csv: cannot be opened \(Permission denied\)"):
        load_dataset("concrete", data_seed=0, data_dir=str(tmp_path))
    table(tmp_path / "t.csv").chmod(0)
    assert "cannot be opened (Permission denied)" in csv_error(tmp_path / "t.csv")


# ------------------------------------------------------------------ 4. kanx.formula and kanx.draw
@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("faults_data") / "nguyen_f1" / "E"
    return train_run(run_dir, "dataset=nguyen_f1", "+condition=E", "beta=0.1", "device=cpu", *TOY_TRAINING)


def _damaged(finished: Path, root: Path, kind: str) -> Path:
    run_dir = root / kind
    if kind == "missing":
        return run_dir
    if kind == "empty folder":
        run_dir.mkdir()
        return run_dir
    shutil.copytree(finished, run_dir)
    model = run_dir / "model.pt"
    if kind == "unfinished":  # a record but no done marker (killed while writing)
        (run_dir / "done").unlink()
    elif kind == "no weights":  # a clone of committed results: *.pt is not in git
        model.unlink()
    elif kind == "corrupt model.pt":  # its done marker's checksum no longer matches
        model.write_bytes(model.read_bytes()[:300])
    elif kind == "truncated model.pt, old done marker":  # torch's own message spans lines
        model.write_bytes(model.read_bytes()[:300])
        (run_dir / "done").write_bytes(b"")
    elif kind == "another network in model.pt":
        saved = torch.load(model, weights_only=True)
        saved["model"] = {k: torch.zeros(3, 3) for k in saved["model"]}
        torch.save(saved, model)
        seal(run_dir)
    elif kind == "not a model file":
        torch.save(torch.zeros(3), model)
        seal(run_dir)
    elif kind == "record not JSON":
        (run_dir / "record.json").write_text("{")
        seal(run_dir)
    return run_dir


KINDS = ["missing", "empty folder", "unfinished", "no weights", "corrupt model.pt",
         "truncated model.pt, old done marker", "another network in model.pt", "not a model file", "record not JSON"]
CLIS = {"kanx.formula": lambda d: formula.main([str(d), "--no-figure"]),
        "kanx.draw": lambda d: draw_cli.main([str(d), "--formats", "svg"])}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("prog", list(CLIS))
def test_an_unusable_run_folder_is_one_line_in_both_commands(finished, tmp_path, capsys, prog, kind):
    run_dir = _damaged(finished, tmp_path, kind)
    assert CLIS[prog](run_dir) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"python -m {prog}: error: {run_dir}"), captured.err
    assert not (run_dir / "formula.json").exists() and not captured.out


def test_both_commands_say_the_same_for_the_same_folder(finished, tmp_path, capsys):
    run_dir = _damaged(finished, tmp_path, "corrupt model.pt")
    said = []
    for prog, main in CLIS.items():
        assert main(run_dir) == 2
        said.append(capsys.readouterr().err.removeprefix(f"python -m {prog}: error: "))
    assert said[0] == said[1]


@pytest.mark.parametrize(
    "args, words",
    [
        (["--tolerance", "-1"], ["tolerance -1.0", "a finite number >= 0"]),
        (["--tolerance", "nan"], ["tolerance nan", "a finite number >= 0"]),
        (["--tolerance", "inf"], ["tolerance inf", "leave it out"]),
        (["--simplicity", "-0.5"], ["simplicity -0.5", "a finite number >= 0"]),
        (["--simplicity", "nan"], ["simplicity nan", "default 0.5"]),
        (["--primitives", ","], ["no primitives", "choose from"]),
        (["--primitives", "x,gamma"], ["unknown primitive", "'gamma'"]),
    ],
)
def test_formula_options_out_of_range_stop_before_the_run_is_read(finished, monkeypatch, capsys, args, words):
    def not_now(*_, **__):
        raise AssertionError("the run was read before its options were checked")

    monkeypatch.setattr("kanx.load.load_run", not_now)
    monkeypatch.setattr(formula, "formula_of_run", not_now)
    assert formula.main([str(finished), *args, "--no-figure"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("python -m kanx.formula: error: ")
    for word in words:
        assert word in line, line


def test_formula_api_checks_the_same_ranges_before_fitting(finished, monkeypatch):
    run = kanx.load_run(finished)
    monkeypatch.setattr(symbolic, "contributing_edges",
                        lambda *a, **k: pytest.fail("fitted before the options were checked"))
    for options in ({"tolerance": -1.0}, {"tolerance": float("nan")}, {"simplicity": -1.0}, {"primitives": []}):
        with pytest.raises(ConfigError, match="out of range|no primitives"):
            run.formula(**options)
    with pytest.raises(ConfigError, match="simplicity nan"):
        symbolic_fit.fit_curve(np.linspace(0, 1, 11), np.linspace(0, 1, 11) ** 2, simplicity=float("nan"))


def test_the_bounds_themselves_are_allowed(finished, tmp_path):
    symbolic_fit.check_options(["x"], 0.0, 0.0)  # 0 keeps every edge a spline: allowed, if slow on a big network
    assert formula.main([str(finished), "--simplicity", "0", "--primitives", "0,x", "--no-figure",
                         "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "formula.json").read_text())["settings"]["simplicity"] == 0


# ------------------------------------------------------------------ 5. a user's table is read by column name
def _shuffled_table(source: Path, path: Path, header: list[str], extra: bool = False) -> Path:
    """source's rows with its columns in the order `header`, and with `extra` a column c after them."""
    import pandas as pd

    frame = pd.read_csv(source)[header]
    if extra:
        frame["c"] = np.linspace(-1, 1, len(frame))
    frame.to_csv(path, index=False, float_format="%.6f")
    return path


@pytest.fixture(scope="module")
def csv_run(tmp_path_factory) -> Path:
    data = table(tmp_path_factory.mktemp("csv_run_data") / "t.csv", n=60)
    run_dir = tmp_path_factory.mktemp("csv_run") / "t" / "E"
    return train_run(run_dir, "dataset=csv", f"dataset.path={data}", "dataset.target=y", "model.width=[2,2,1]",
                     "+condition=E", "beta=0.1", "device=cpu", "dataset.n_train=40", "dataset.n_test=20",
                     "train.batch_size=20", "train.compile=false", *TOY_TRAINING[:3])


def test_a_rebuilt_csv_reads_the_model_inputs_by_name(csv_run, tmp_path):
    """A run on a CSV without a features list takes every numeric column in the file's order. Rebuilt
    (kanx.evaluate, kanx.formula, kanx.draw) from a file whose columns moved, or that gained one, the
    inputs are still the model's (a, b), by name; a file that lost one is refused naming it."""
    from kanx.load import load_run, rebuild_dataset

    run = load_run(csv_run)
    original = rebuild_dataset(run)
    assert original.input_names == ("a", "b")
    data = Path(run.config["dataset"]["path"])
    kept = shutil.copy(data, tmp_path / "kept.csv")
    try:
        for header, extra in ((["y", "b", "a"], False), (["b", "a", "y"], True)):
            _shuffled_table(kept, data, header, extra)
            again = rebuild_dataset(run)
            assert again.input_names == ("a", "b") and torch.equal(again.x_train, original.x_train), header
        _shuffled_table(kept, data, ["a", "y"])
        with pytest.raises(DataError, match=r"no column 'b'"):
            rebuild_dataset(run)
    finally:
        shutil.copy(kept, data)
