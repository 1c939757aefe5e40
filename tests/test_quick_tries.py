"""Quick tries (issue #37): `+debug=quick` shortens epochs and both warmups together and turns
compile off; a pack says what it trains as it starts (and that its first epoch compiles); a
packed sweep keeps its console log beside multirun.yaml, in a single run's log format."""

import re
from types import SimpleNamespace

import pytest
from helpers import TOY, cli, composed

from kanx.confdir import conf_dir
from kanx.config import run_config_from
from kanx.jobs import starting

LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]\[kanx\]\[(INFO|WARNING|ERROR)\] - \S")
DATASETS = sorted(p.stem for p in (conf_dir() / "dataset").glob("*.yaml"))


@pytest.mark.parametrize("dataset", DATASETS)
def test_quick_preset_shortens_epochs_and_both_warmups_and_turns_compile_off_on_every_dataset(dataset):
    csv = ["dataset.path=table.csv", "dataset.target=y"] if dataset == "csv" else []
    full = run_config_from(composed(f"dataset={dataset}", "+condition=EFX", *csv)).train
    # known keys only
    quick = run_config_from(composed(f"dataset={dataset}", "+condition=EFX", "+debug=quick", *csv)).train
    assert quick.epochs < full.epochs and quick.compile is False and full.compile == "auto"
    assert 0 < quick.fc_warmup < quick.warmup < quick.epochs  # both warmups inside the run, in the paper's order


def test_the_command_line_wins_over_the_quick_preset():
    assert composed("+debug=quick", "train.epochs=50").train.epochs == 50


def pack(compile: bool | str, resume_epoch: int = 0) -> list:
    train = SimpleNamespace(epochs=3000, batch_size=64, compile=compile)
    run = SimpleNamespace(train=train, data=SimpleNamespace(name="sin_xy2"), condition=SimpleNamespace(name="EFX"),
                          device="cpu")
    return [SimpleNamespace(run=run, resume_epoch=resume_epoch, n_train=1024)] * 2


COMPILING = ("the B-spline basis (torch.compile: about a minute the first time, seconds once inductor's cache holds "
             "it; train.compile=false or +debug=quick skips it)")


def test_a_pack_announces_itself_and_says_which_epoch_compiles():
    assert starting(pack(True), "[1/3]") == ("[1/3] training a pack of 2 (sin_xy2: EFX), 3000 epochs; the first epoch "
                                             f"compiles {COMPILING}")
    # train.compile=auto on a CPU: the first epoch eager, then the compile (kanx.compiling.compiled_from)
    assert starting(pack("auto"), "[1/3]") == ("[1/3] training a pack of 2 (sin_xy2: EFX), 3000 epochs; epoch 2 "
                                               f"compiles {COMPILING}")
    assert starting(pack("auto", resume_epoch=500), "[2/3]") == ("[2/3] training a pack of 2 (sin_xy2: EFX), epochs "
                                                                 f"500-3000; the first epoch compiles {COMPILING}")
    assert starting(pack(False, resume_epoch=500),
                    "[2/3]") == "[2/3] training a pack of 2 (sin_xy2: EFX), epochs 500-3000"


@pytest.mark.slow
def test_a_packed_sweep_keeps_its_console_log_beside_multirun_yaml_in_a_single_runs_format(tmp_path):
    p = cli("+condition=E", f"results_root={tmp_path / 'sweep'}", "beta=0.0,0.1", "seed=0", "+debug=quick", *TOY, "-m")
    (multirun,) = (tmp_path / "sweep").rglob("multirun.yaml")
    log = (multirun.parent / "train.log").read_text().splitlines()
    assert log and all(LOG_LINE.match(line) for line in log), log
    # the quick preset's 20 epochs
    assert [line for line in log if "training a pack of 2 (sin_xy2: E), 20 epochs" in line], log
    assert sum(line.startswith("[ok] sin_xy2 E") or " - [ok] sin_xy2 E" in line for line in log) == 2
    # what the console showed
    assert ([line for line in p.stdout.splitlines() if " - [ok] " in line]
            == [line for line in log if " - [ok] " in line])

    single = cli(f"results_root={tmp_path / 'single'}", "+debug=quick", *TOY)
    (run_log,) = (tmp_path / "single").rglob("train.log")
    lines = run_log.read_text().splitlines()
    assert lines and all(LOG_LINE.match(line) for line in lines), lines
    assert ([line for line in single.stdout.splitlines() if " - [ok] " in line]
            == [line for line in lines if " - [ok] " in line])


@pytest.mark.slow
def test_a_sweep_over_conditions_refused_for_bad_input_leaves_no_log_behind(tmp_path):
    """Its log goes to the first job's sweep folder (the primary one, Baseline's, holds no run):
    bad input removes that folder again, as it removes Hydra's multirun.yaml."""
    p = cli("+condition=X,FX", f"results_root={tmp_path}", "train.lr=abc", "+debug=quick", *TOY, "-m", check=False)
    assert p.returncode == 2 and "train.lr='abc' must be a number" in p.stderr
    assert not list(tmp_path.iterdir()), list(tmp_path.rglob("*"))


@pytest.mark.slow  # two CLI sweeps
def test_a_packed_sweep_writes_each_runs_hydra_folder_as_the_basic_launcher_does(tmp_path):
    """Every run folder of a packed -m sweep holds .hydra/ (config.yaml, hydra.yaml, overrides.yaml),
    the files Hydra's basic launcher writes for the same run, alike but for what the two commands
    were told differently (results_root, launcher=basic)."""
    import yaml

    args = ["+condition=E", "beta=0.0,0.1", "seed=0", "+debug=quick", *TOY]
    cli(*args, f"results_root={tmp_path / 'packed'}", "-m")
    cli(*args, f"results_root={tmp_path / 'basic'}", "launcher=basic", "-m")
    runs = sorted(p.parent for p in (tmp_path / "packed").rglob("record.json"))
    assert len(runs) == 2
    for run in runs:
        twin = tmp_path / "basic" / run.relative_to(tmp_path / "packed")
        files = {d: {p.name: yaml.safe_load(p.read_text()) for p in (d / ".hydra").iterdir()} for d in (run, twin)}
        assert sorted(files[run]) == sorted(files[twin]) == ["config.yaml", "hydra.yaml", "overrides.yaml"]
        packed, basic = files[run], files[twin]
        assert {**packed["config.yaml"], "results_root": None} == {**basic["config.yaml"], "results_root": None}
        assert packed["config.yaml"]["results_root"] == str(tmp_path / "packed")
        assert ([o for o in basic["overrides.yaml"] if o != "launcher=basic"]
                == [o.replace("/packed", "/basic") for o in packed["overrides.yaml"]])
        assert packed["hydra.yaml"]["hydra"]["runtime"]["output_dir"] == str(run.absolute())
        assert (packed["hydra.yaml"]["hydra"]["job"]["override_dirname"]
                == basic["hydra.yaml"]["hydra"]["job"]["override_dirname"])
