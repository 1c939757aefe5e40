"""Config faults that used to replace or misfile finished runs (issue #34): boolean keys read
with bool() (overwrite=no replaced records), unknown keys outside train/model accepted (+betta
trained at the default beta), folder tags longer than a file name, duplicate sweep values
trained twice, and a Baseline recorded at the dataset's beta. In-process where it can be."""

import hashlib
import json

import pytest
from helpers import TOY, composed

from kanx.config import run_config_from, to_container
from kanx.errors import ConfigError
from kanx.runner import run_jobs

TOY_RUN = [*TOY, "train.epochs=2", "train.warmup=1", "train.fc_warmup=1"]
# Every boolean key a run reads, as a dotted path into the resolved config.
BOOLEAN_KEYS = ("overwrite", "train.grid_updates", "train.cuda_graph", "dataset.standardize_targets",
                "condition.edge_gates", "condition.forward", "condition.exits")


def _set(container: dict, dotted: str, value) -> dict:
    *path, key = dotted.split(".")
    node = container
    for p in path:
        node = node[p]
    node[key] = value
    return container


def _digests(root) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("record.json"))}


# ---------------------------------------------------------------- booleans


def test_hydra_hands_no_and_off_over_as_strings():
    """Why bool() was wrong: only true/false (any case) reach the config as booleans."""
    assert [composed(f"overwrite={v}").overwrite for v in ("true", "False", "no", "off", "maybe")] == [
        True, False, "no", "off", "maybe"]


@pytest.mark.parametrize("key", BOOLEAN_KEYS)
def test_every_boolean_key_takes_true_or_false_and_refuses_anything_else(key):
    base = to_container(composed("+condition=EFX"))
    del base["condition"]["name"]  # named by its flags, so a flag may change
    for value in (True, False):
        run = run_config_from(_set(json.loads(json.dumps(base)), key, value))
        read = {"overwrite": run.overwrite, "train.grid_updates": run.train.grid_updates,
                "train.cuda_graph": run.train.cuda_graph, "dataset.standardize_targets": run.data.standardize_targets,
                **{f"condition.{k}": getattr(run.condition, k) for k in ("edge_gates", "forward", "exits")}}
        assert read[key] is value
    for bad in ("no", "off", "yes", "maybe", 0, 1, None):
        with pytest.raises(ConfigError) as e:
            run_config_from(_set(json.loads(json.dumps(base)), key, bad))
        assert str(e.value) == f"{key}={bad!r} must be true or false"


def test_overwrite_no_keeps_finished_records_byte_identical(tmp_path):
    """The issue's repro in process: a finished sweep, then the same with overwrite=no."""
    configs = [(composed("+condition=EFX", f"seed={s}", *TOY_RUN), tmp_path / f"seed={s}") for s in (0, 1)]
    run_jobs(configs)
    before = _digests(tmp_path)
    assert len(before) == 2
    with pytest.raises(ConfigError, match="overwrite='no' must be true or false"):
        run_jobs([(composed("+condition=EFX", f"seed={s}", "overwrite=no", *TOY_RUN), d)
                  for s, (_, d) in zip((0, 1), configs, strict=True)])
    assert _digests(tmp_path) == before


def test_grid_updates_off_and_standardize_no_are_refused_not_read_as_true():
    for override, key in (("train.grid_updates=off", "train.grid_updates"),
                          ("dataset.standardize_targets=no", "dataset.standardize_targets")):
        with pytest.raises(ConfigError, match=f"{key}='(off|no)' must be true or false"):
            run_config_from(composed(override))
    run = run_config_from(composed("train.grid_updates=false", "dataset.standardize_targets=FALSE"))
    assert run.train.grid_updates is False and run.data.standardize_targets is False


def test_the_beta_sweep_reads_condition_flags_as_booleans_too():
    from kanx.resolvers import beta_sweep

    assert beta_sweep(False, False, [0.1]) == "0.0" and beta_sweep(True, False, [0.1]) == "0.1"
    with pytest.raises(ConfigError, match="condition.edge_gates='no' must be true or false"):
        beta_sweep("no", False, [0.1])


def test_the_beta_resolvers_take_the_condition_node_and_still_the_flags_of_older_dataset_files():
    from kanx.resolvers import beta_sweep

    assert beta_sweep({"name": "EN", "edge_gates": True, "node_gates": True}, [0.1, 0.2]) == "0.1,0.2"
    assert beta_sweep({"name": "F", "forward": True}, [0.1]) == "0.0"
    with pytest.raises(ConfigError, match="condition.input_gates='yes' must be true or false"):
        beta_sweep({"edge_gates": False, "input_gates": "yes"}, [0.1])
    # a dataset YAML written before the node form (CHANGELOG): E and X, the beta, then N and I
    flags = "${condition.edge_gates},${condition.exits},0.3,${condition.node_gates},${condition.input_gates}"
    legacy = f"beta='${{kanx.beta_if_gated:{flags}}}'"
    assert composed("+condition=N", legacy).beta == 0.3 and composed("+condition=F", legacy).beta == 0.0
    assert composed("+condition=N").beta == 0.2 and composed("+condition=F").beta == 0.0  # sin_xy2's node form


# ---------------------------------------------------------------- unknown keys


def test_a_logger_that_is_not_installed_is_refused_before_compute(tmp_path, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else find_spec(name, *a))
    with pytest.raises(ConfigError) as e:
        run_jobs([(composed("logger=mlflow", *TOY_RUN), tmp_path / "run")])
    assert str(e.value) == "logger=mlflow needs the mlflow package: pip install 'kanx[mlflow]'"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("target", "package"), [
    ("kanx.loggers.tensorboard.TensorBoardLogger", "tensorboard"), ("kanx.loggers.mlflow.MLflowLogger", "mlflow"),
    ("kanx.loggers.wandb.WandbLogger", "wandb"), ("kanx.loggers.MLflowLogger", "mlflow")])
def test_a_logger_spelled_by_its_own_module_is_refused_before_compute_too(monkeypatch, target, package):
    """A tracker's class has two names since kanx.loggers became a package (kanx.loggers.X, as
    conf/logger/ spells it, and the module defining it): both are refused before compute when the
    package is missing, not only when the pack opens its logger."""
    import importlib.util

    from kanx.loggers.base import check_loggers, logger_config

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == package else find_spec(name, *a))
    with pytest.raises(ConfigError, match=rf"^logger=mine needs the {package} package: pip install "):
        check_loggers(logger_config({"mine": {"_target_": target}}))


@pytest.mark.parametrize(("override", "message"), [
    ("+betta=0.01", "unknown key(s) betta (did you mean beta?); the top level takes: beta, condition, "
                    "dataset, device, logger, model, optimized_metric, overwrite, results_root, seed, train"),
    ("+foo=1", "unknown key(s) foo; the top level takes:"),
    ("+condition.edge_gate=true", "unknown key(s) condition.edge_gate (did you mean condition.edge_gates?); "
                                  "condition.* takes: edge_gates, exits, forward, input_gates, name, node_gates"),
    ("+dataset.n_trian=64", "unknown key(s) dataset.n_trian (did you mean dataset.n_train?)"),
    # a null option was dropped before the loader saw it
    ("+dataset.horizon=null", "unknown key(s) dataset.horizon; dataset.* takes:"),
    ("+train.epoch=3", "unknown key(s) train.epoch (did you mean train.epochs?)"),
    ("logger=mlflow +logger.mlflow.experment=x",
     "unknown key(s) logger.mlflow.experment (did you mean logger.mlflow.experiment?); logger.mlflow.* takes: "
     "_target_, tracking_uri, experiment, artifact_location"),
    ("+logger.experment=x", "logger.experment='x' is not a logger's config: a node with _target_"),
    ("+logger.name=wandb", "logger.name='wandb' is not one of: none, tensorboard, mlflow"),  # the form before 2026-12
    ("+logger.mine._target_=kanx.nowhere.Logger", "logger.mine._target_='kanx.nowhere.Logger' is not a class kanx "
                                                 "can import ("),
    ("+logger.mine._target_=builtins.dict", "logger.mine._target_='builtins.dict' is no logger: it lacks log, flush, "
                                            "close (subclass kanx.loggers.Logger)"),
    # a group's option sets keys elsewhere: "unknown key(s) launcher" named no key the user typed
    ("+launcher.foo=1", "launcher.foo is no key of the run: launcher=packed|basic|slurm picks the launcher; its "
                        "settings are hydra.launcher.<key> (e.g. hydra.launcher.pack_size=10;"),
])
def test_a_key_the_run_does_not_read_is_refused_with_a_did_you_mean(tmp_path, override, message):
    with pytest.raises(ConfigError) as e:
        run_jobs([(composed(*override.split(), *TOY_RUN), tmp_path / "run")])
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    assert not (tmp_path / "run").exists()


# condition=5, logger=5: Hydra itself refuses a group's option that is no name
@pytest.mark.parametrize("section", ["train", "model"])
def test_a_section_set_to_a_value_is_one_line_and_a_single_run_writes_nothing(tmp_path, capsys, section):
    """train=5 was a TypeError (a traceback, exit 1), after Hydra had written the run's folder and train.log."""
    from pathlib import Path

    from hydra_plugins.kanx_launcher.sweeper import SingleRunCheck

    cfg = composed(f"{section}=5", f"results_root={tmp_path / 'r'}", hydra=True)
    with pytest.raises(ConfigError) as e:
        run_config_from(cfg)
    message = f"{section}=5 replaces the whole {section} section: set one of its keys instead, e.g. {section}."
    assert str(e.value).startswith(message)
    with pytest.raises(SystemExit) as stop:  # the check Hydra calls before it makes a single run's folder
        SingleRunCheck().on_run_start(cfg)
    assert stop.value.code == 2 and capsys.readouterr().err == f"kanx: error: {e.value}\n"
    assert not (tmp_path / "r").exists() and not Path(str(cfg.hydra.run.dir)).exists()


@pytest.mark.slow
def test_a_mistyped_key_is_refused_by_the_cli_in_one_line_with_exit_2(tmp_path):
    from helpers import cli

    p = cli(f"results_root={tmp_path}", "+betta=0.01", *TOY_RUN, check=False)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "python -m kanx.train: error: unknown key(s) betta (did you mean beta?); the top level takes: "
        "beta, condition, dataset, device, logger, model, optimized_metric, overwrite, results_root, seed, "
        "train"], p.stderr
    assert not list(tmp_path.rglob("*"))


def test_every_shipped_dataset_condition_and_launcher_composes_to_known_keys():
    """Nothing conf/ sets itself is refused: every dataset (csv given its file), every
    condition, every launcher, every debug preset, and Hydra's own keys on the command line."""
    from kanx.confdir import conf_dir

    conf = conf_dir()
    csv = ["dataset.path=table.csv", "dataset.target=y"]
    for dataset in sorted(p.stem for p in (conf / "dataset").glob("*.yaml")):
        run_config_from(composed(f"dataset={dataset}", "+condition=EFX", *(csv if dataset == "csv" else [])))
    for condition in sorted(p.stem for p in (conf / "condition").glob("*.yaml")):
        assert run_config_from(composed(f"+condition={condition}", "beta=0.0")).condition.name == (
            "Baseline" if condition == "baseline" else condition)
    for launcher in sorted(p.stem for p in (conf / "launcher").glob("*.yaml")):
        run_config_from(composed(f"launcher={launcher}", "hydra.job.chdir=false", "hydra.verbose=true", hydra=True))
    for preset in sorted(p.stem for p in (conf / "debug").glob("*.yaml")):  # +debug=quick
        run_config_from(composed(f"+debug={preset}", "+condition=EFX", hydra=True))


@pytest.mark.committed
def test_committed_records_pass_the_checks_and_keep_their_config_hash():
    """The stricter checks accept every config that trained a committed record (one record per
    sweep folder), and their hashes are what the records say."""
    from pathlib import Path

    from kanx.config import config_hash

    root = Path(__file__).resolve().parents[1] / "results"
    folders = sorted({p.parent.parent for p in root.glob("**/record.json")})
    if not folders:
        pytest.skip("no committed records")
    for folder in folders:
        record = json.loads(next(folder.glob("*/record.json")).read_text())
        run = run_config_from(record["config"])
        assert config_hash(record["config"]) == record["config_hash"], folder
        assert run.beta == record["beta"] and run.condition.name == record["condition"], folder


# ---------------------------------------------------------------- beta where it cannot act


def test_the_default_single_run_is_a_baseline_recorded_and_filed_at_beta_0(tmp_path):
    from hydra.core.hydra_config import HydraConfig

    full = composed(hydra=True)  # `python -m kanx.train`: sin_xy2, whose YAML gives gated runs beta 0.2
    HydraConfig.instance().set_config(full)
    assert full.condition.name == "Baseline" and str(full.hydra.sweep.subdir) == "beta=0.0,seed=0"
    assert [composed(f"+condition={c}").beta for c in ("F", "E", "X", "EFX")] == [0.0, 0.2, 0.2, 0.2]
    record = run_jobs([(composed(*TOY_RUN), tmp_path / "run")])[0]
    assert record["beta"] == record["config"]["beta"] == 0.0 and record["condition"] == "Baseline"


@pytest.mark.parametrize("condition", ["baseline", "F"])
def test_an_explicit_beta_on_a_condition_without_gates_is_refused_before_compute(tmp_path, condition):
    with pytest.raises(ConfigError) as e:
        run_jobs([(composed(f"+condition={condition}", "beta=0.3", *TOY_RUN), tmp_path / "run")])
    assert str(e.value).startswith("beta=0.3 has no effect on condition "
                                   f"{'Baseline' if condition == 'baseline' else 'F'}: beta acts only")
    assert not (tmp_path / "run").exists()


@pytest.mark.committed
def test_committed_baseline_and_f_records_are_what_their_default_commands_compose_now():
    """Baseline and F were swept at beta 0.0: composing their command without beta gives the
    committed config hash (one dataset each, alternating the condition)."""
    from pathlib import Path

    from kanx.config import config_hash

    found = sorted(Path(__file__).resolve().parents[1].glob("results/paper/*/*/default/beta=0.0,seed=0/record.json"))
    found = [f for f in found if f.parts[-4] in ("Baseline", "F")]
    if not found:
        pytest.skip("no committed records")
    for i, dataset in enumerate(sorted({f.parts[-5] for f in found})):
        condition = ("Baseline", "F")[i % 2]
        record = json.loads(next(f for f in found if f.parts[-5] == dataset and f.parts[-4] == condition).read_text())
        now = to_container(composed(f"dataset={dataset}",
                                    f"+condition={'baseline' if condition == 'Baseline' else condition}"))
        assert config_hash(now) == record["config_hash"], (dataset, condition)


# ---------------------------------------------------------------- folder tags

FEATURES = [f"feature_{i:02d}" for i in range(20)]


def _table(path, rows: int = 200):
    """A CSV with 20 named features and a target y."""
    import numpy as np

    x = np.random.default_rng(0).uniform(-1, 1, (rows, len(FEATURES)))
    y = np.sin(x[:, 0]) + x[:, 1] ** 2
    path.write_text(",".join([*FEATURES, "y"]) + "\n" + "\n".join(",".join(f"{v:.5f}" for v in (*r, t))
                                                                  for r, t in zip(x, y, strict=True)) + "\n")
    return path


@pytest.mark.committed
def test_tags_that_fit_a_file_name_are_unchanged_and_longer_ones_are_cut_with_a_hash():
    from pathlib import Path

    from kanx.vocab import TAG_MAX_BYTES, folder_tag

    assert folder_tag("") == folder_tag(None) == "default"
    committed = {p.parts[-3] for p in (Path(__file__).resolve().parents[1] / "results").glob("**/record.json")}
    assert committed and all(folder_tag(t) == t for t in committed)  # committed results stay where they are
    edge = "x" * TAG_MAX_BYTES
    assert folder_tag(edge) == edge
    long = ",".join(f"dataset.features=[{','.join(FEATURES)}]" for _ in range(2))
    short = folder_tag(long)
    assert len(short.encode()) <= TAG_MAX_BYTES and short.startswith(long[:100]) and short == folder_tag(long)
    assert folder_tag(long + "x") != short and folder_tag("é" * 200).startswith("é" * 64)  # cut on a whole character


def test_a_sweep_with_twenty_named_features_gets_a_folder_it_can_create(tmp_path):
    """kanx.plan composes as the command line does: every path component fits a file name."""
    from kanx.plan import sweep_jobs

    table = _table(tmp_path / "table.csv")
    jobs = sweep_jobs("csv", "E", [f"dataset.path={table}", "dataset.target=y",
                                   f"dataset.features=[{','.join(FEATURES)}]",
                                   f"results_root={tmp_path / 'r'}", "seed=0", "beta=0.1", *TOY_RUN])
    ((cfg, run_dir),) = jobs
    assert max(len(p.encode()) for p in run_dir.parts) <= 255, run_dir
    assert "dataset.features=[feature_00" in run_dir.parent.name
    run_dir.mkdir(parents=True)


@pytest.mark.slow
def test_the_cli_trains_a_long_tag_sweep_and_status_finds_its_folder(tmp_path):
    from helpers import cli, records

    from kanx.status import collect

    table = _table(tmp_path / "table.csv")
    cli("dataset=csv", f"dataset.path={table}", "dataset.target=y", f"dataset.features=[{','.join(FEATURES)}]",
        "+condition=E", f"results_root={tmp_path / 'r'}", "seed=0", "beta=0.1", *TOY_RUN, "-m")
    (record,) = records(tmp_path / "r")
    assert record["config"]["dataset"]["features"] == FEATURES  # the full overrides stay in the record
    (multirun,) = (tmp_path / "r").rglob("multirun.yaml")
    (run_dir,) = (p.parent for p in (tmp_path / "r").rglob("record.json"))
    assert multirun.parent == run_dir.parent
    (sweep,) = collect(tmp_path / "r")  # from the manifest beside them
    assert tmp_path / "r" / sweep.path == run_dir.parent and (sweep.expected_from, len(sweep.runs)) == ("manifest", 1)


# ---------------------------------------------------------------- duplicate sweep values


def test_a_value_swept_twice_is_one_job_trained_once(tmp_path):
    """seed=0,0 and beta=0.1,0.10 (Hydra reads both as 0.1, so one folder beta=0.1) are one run."""
    from kanx.jobs import prepare_jobs
    from kanx.plan import sweep_jobs

    configs = sweep_jobs("sin_xy2", "E", [f"results_root={tmp_path}", "seed=0,0", "beta=0.1,0.10", *TOY_RUN])
    assert len(configs) == 4 and len({d for _, d in configs}) == 1
    assert len(prepare_jobs(configs)) == 1
    recs = run_jobs(configs)
    assert len(recs) == 4 and all(r == recs[0] for r in recs)  # one record per job given, as the launchers expect
    assert recs[0]["timing"]["pack_size"] == 1 and len(list(tmp_path.rglob("record.json"))) == 1


def test_two_jobs_of_different_configs_in_one_folder_stop_before_compute(tmp_path):
    """Keys left out of the folder name (dataset.path, say) can give two runs one folder: the
    second would replace the first's record."""
    configs = [(composed("+condition=E", *TOY_RUN, f"train.lr={lr}"), tmp_path / "run") for lr in (0.001, 0.002)]
    with pytest.raises(ConfigError,
                       match=r"two jobs would write .*run with different configs \(train.lr: 0.001 there, 0.002 now\)"):
        run_jobs(configs)
    assert not (tmp_path / "run").exists()
