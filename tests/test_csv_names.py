"""Named CSV datasets: `dataset=csv dataset.name=NAME dataset.path=FILE dataset.target=COLUMN`.

The name (default: the file's stem) is the dataset's folder, its name in the records and its
row in the tables; the file's path never enters the folder tag.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT

from kanx.analyze import load_runs
from kanx.analyze.__main__ import main as analyze
from kanx.data import load_dataset
from kanx.errors import ConfigError


def write_table(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(40, 2))
    y = np.sin(x[:, 0]) + x[:, 1] ** 2
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("a,b,y\n" + "".join(f"{u:.6f},{v:.6f},{t:.6f}\n" for (u, v), t in zip(x, y, strict=True)))
    return path


def test_loader_builds_a_csv_table_under_its_own_name(tmp_path):
    path = write_table(tmp_path / "table.csv", 0)
    ds = load_dataset("mydata", data_seed=0, loader="csv", path=str(path), target="y")
    assert ds.name == "mydata" and ds.family == "mydata" and ds.n_inputs == 2
    for bad in ("a/b", "my data", "", "../x"):
        with pytest.raises(ConfigError, match="not a plain name"):
            load_dataset(bad, data_seed=0, loader="csv", path=str(path), target="y")
    with pytest.raises(ConfigError, match="'concrete' is a registered dataset"):
        load_dataset("concrete", data_seed=0, loader="csv", path=str(path), target="y")
    with pytest.raises(ConfigError, match="unknown dataset 'nope'"):
        load_dataset("mydata", data_seed=0, loader="nope")


@pytest.mark.slow
def test_two_csv_files_in_one_root_are_two_datasets(tmp_path):
    first = write_table(tmp_path / "data" / "first.csv", 0)  # named by its stem
    other = write_table(tmp_path / "elsewhere" / "other.csv", 1)
    out = tmp_path / "results"
    common = [f"results_root={out}", "dataset.target=y", "train.epochs=2", "train.warmup=1", "train.fc_warmup=1",
              "train.batch_size=16", "train.compile=false", "+condition=E", "beta=0.0,0.1", "seed=0"]
    for extra in ([f"dataset.path={first}"], ["dataset.name=second", f"dataset.path={other}"]):
        done = subprocess.run([sys.executable, "-m", "kanx.train", "dataset=csv", *extra, *common, "-m"],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    # Folders: <name>/<condition>/<tag> with no trace of the (absolute) file paths.
    sweeps = sorted(p.parent.parent.relative_to(out).as_posix() for p in out.rglob("record.json"))
    assert sweeps == (
        ["first/E/dataset.target=y,train.batch_size=16,train.epochs=2,train.fc_warmup=1,train.warmup=1"] * 2
        + ["second/E/dataset.target=y,train.batch_size=16,train.epochs=2,train.fc_warmup=1,train.warmup=1"] * 2)
    runs = load_runs(out)
    assert sorted(set(runs["dataset"])) == ["first", "second"]
    assert set(runs["family"]) == {"first", "second"}
    assert analyze([str(out), "--formats", "png"]) == 0
    report = (out / "report.md").read_text()
    assert "### first" in report and "### second" in report
    assert (out / "tables" / "absolute_first.md").is_file() and (out / "tables" / "absolute_second.md").is_file()
