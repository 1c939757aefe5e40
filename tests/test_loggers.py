"""The `logger=` trackers (kanx.loggers) as a researcher compares runs in them: each run's config
as hyperparameters and its results beside its curves, read back with the trackers' own readers;
several loggers at once; a logger of one's own built from its `_target_`; none changes a run."""

import json
import math

import pytest
from helpers import TOY, RecordingLogger, composed

from kanx.plan import run_plan, sweep_jobs

ARGS = ["train.epochs=12", "train.warmup=4", "train.fc_warmup=2", "train.log_every=2", *TOY]


def jobs(root, *overrides, betas="0.0,0.1"):
    return sweep_jobs("sin_xy2", "E", [f"results_root={root}", "seed=0", f"beta={betas}", *overrides, *ARGS])


def numbers(record: dict) -> dict:
    """The record's metrics that loggers get as results (kanx.loggers.final_results): its numbers."""
    return {k: v for k, v in record["metrics"].items() if isinstance(v, int | float) and not isinstance(v, bool)}


@pytest.fixture(autouse=True)
def _calls():
    RecordingLogger.calls.clear()
    yield
    RecordingLogger.calls.clear()


def test_tensorboard_holds_each_runs_hparams_and_final_metrics_for_tensorboards_reader(tmp_path):
    """A finished run's tensorboard/ read with TensorBoard's EventAccumulator and the hparams
    plugin's own parsers: the session start holds the resolved config, flattened (the HParams
    dashboard's columns), the final/<key> scalars the record's metrics at the last epoch, and the
    session ended in success."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import api_pb2, metadata

    configs = jobs(tmp_path, "logger=tensorboard")
    assert run_plan(configs) == 0
    for _, run_dir in configs:
        record = json.loads((run_dir / "record.json").read_text())
        events = EventAccumulator(str(run_dir / "tensorboard")).Reload()
        content = events.PluginTagToContent(metadata.PLUGIN_NAME)
        start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
        hparams = {k: getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items()}
        assert hparams["train.epochs"] == 12 and hparams["condition.name"] == "E" and hparams["beta"] == record["beta"]
        assert hparams["condition.edge_gates"] is True
        assert hparams["model.width"] == str(record["config"]["model"]["width"])
        assert hparams["config_hash"] == record["config_hash"] and not any(k.startswith("logger") for k in hparams)
        end = metadata.parse_session_end_info_plugin_data(content[metadata.SESSION_END_INFO_TAG])
        assert end.status == api_pb2.STATUS_SUCCESS
        finals = {tag.removeprefix("final/"): events.Scalars(tag) for tag in events.Tags()["scalars"]
                  if tag.startswith("final/")}
        expected = {k: v for k, v in numbers(record).items() if math.isfinite(v)}
        assert set(finals) == set(expected) and {"test_rmse", "contributing_edges", "depth", "exit"} <= set(finals)
        for key, value in expected.items():
            assert [(s.step, s.value) for s in finals[key]] == [(12, pytest.approx(value, rel=1e-6))], key


def test_mlflow_store_holds_final_metrics_the_flattened_config_and_artifacts_under_results_root(tmp_path, monkeypatch):
    """Launched from another folder: the MLflow runs (in <results_root>/mlflow.db) hold the
    record's metrics as final/<key>, the full resolved config as params with dotted keys, the
    record's status as a tag, and record.json as an artifact under <results_root>/mlartifacts;
    nothing lands in the launch folder (MLflow's ./mlruns)."""
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")

    launch = tmp_path / "launch"
    launch.mkdir()
    monkeypatch.chdir(launch)
    root = tmp_path / "results"
    configs = jobs(root, "logger=mlflow")
    assert run_plan(configs) == 0
    client = mlflow.tracking.MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("kanx")
    assert experiment.artifact_location == (root / "mlartifacts").resolve().as_uri()
    runs = {r.data.tags["kanx.run_dir"]: r for r in client.search_runs([experiment.experiment_id])}
    for _, run_dir in configs:
        run, record = runs[str(run_dir.resolve())], json.loads((run_dir / "record.json").read_text())
        assert run.info.status == "FINISHED" and run.data.tags["kanx.status"] == record["status"]
        finals = {k.removeprefix("final/"): v for k, v in run.data.metrics.items() if k.startswith("final/")}
        assert finals == pytest.approx({k: v for k, v in numbers(record).items() if math.isfinite(v)})
        params = run.data.params
        assert params["train.epochs"] == "12" and params["condition.name"] == "E"
        assert params["model.width"] == str(record["config"]["model"]["width"])
        assert params["dataset.n_train"] == "128" and params["config_hash"] == record["config_hash"]
        assert params["results_root"] == str(root) and not any(k.startswith("logger") for k in params)
        (artifact,) = client.list_artifacts(run.info.run_id)
        assert artifact.path == "record.json"
        stored = root.resolve() / "mlartifacts" / run.info.run_id / "artifacts" / "record.json"
        assert json.loads(stored.read_text()) == record
    assert list(launch.iterdir()) == []


def test_mlflow_params_longer_than_mlflows_limit_are_cut_to_it(tmp_path):
    """A config value longer than MLflow's longest param (6,000 characters: a dataset path, a
    long list) is cut to it with "...", instead of failing the pack; more than 100 keys go in
    several batches."""
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from kanx.loggers.base import Pack
    from kanx.loggers.mlflow import MLflowLogger

    config = {"dataset": {"path": "x" * 7000}, **{f"k{i}": i for i in range(150)}}
    logger = MLflowLogger(Pack((tmp_path / "run",), ({"seed": 0},), (config,), 0, tmp_path))
    logger.close()
    client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    params = client.get_run(logger.run_ids[0]).data.params
    assert len(params["dataset.path"]) == 6000 and params["dataset.path"].endswith("...")
    assert len(params) == 152 and params["k149"] == "149"


@pytest.mark.parametrize("choice", ["logger=[tensorboard,mlflow]", "logger=many"])
def test_several_loggers_at_once_compose_into_one_node_and_change_no_run(tmp_path, choice):
    """Hydra's list of a group's options and conf/logger/many.yaml give the same node, both
    loggers under their names; the runs keep their folders and identity, as with their keys set."""
    from kanx.config import config_hash, run_config_from, to_container

    node = to_container(composed(choice))["logger"]
    assert node == {"tensorboard": {"_target_": "kanx.loggers.TensorBoardLogger"},
                    "mlflow": {"_target_": "kanx.loggers.MLflowLogger", "tracking_uri": None, "experiment": "kanx",
                               "artifact_location": None}}
    assert list(run_config_from(composed(choice)).logger.nodes()) == ["tensorboard", "mlflow"]
    plain = jobs(tmp_path, betas="0.1")
    for overrides in ([choice], ["logger=mlflow", "logger.mlflow.experiment=mine", "logger.mlflow.tracking_uri=x"],
                      ["+logger.mine._target_=helpers.RecordingLogger", "+logger.mine.label=x"]):
        tracked = jobs(tmp_path, *overrides, betas="0.1")
        assert [d for _, d in tracked] == [d for _, d in plain], overrides  # the same folder: no tag of the logger
        assert config_hash(to_container(tracked[0][0])) == config_hash(to_container(plain[0][0]))


def test_a_logger_of_ones_own_gets_rows_results_and_a_close_beside_tensorboard(tmp_path):
    """`+logger.mine._target_=...` adds a logger kanx does not know, beside `logger=tensorboard`:
    built once for the pack with its keys (label), it gets every curve row, each member's results
    once its record is written (status and the record's numbers), then one close(finished=True)."""
    pytest.importorskip("tensorboard")
    configs = jobs(tmp_path, "logger=tensorboard", "+logger.mine._target_=helpers.RecordingLogger",
                   "+logger.mine.label=x")
    assert run_plan(configs) == 0
    calls = RecordingLogger.calls
    assert calls[0] == ("open", "x", [d.name for _, d in configs], 0)
    logged = [c[2] for c in calls if c[0] == "log"]
    assert [[r["epoch"] for r in rows] for rows in logged] == [[e, e] for e in range(2, 13, 2)]
    results = [c for c in calls if c[0] == "results"]
    assert [c[2] for c in results] == [0, 1] and calls[-1] == ("close", "x", True)
    for (_, _, _, got), (_, run_dir) in zip(results, configs, strict=True):
        record = json.loads((run_dir / "record.json").read_text())
        assert got == {"status": record["status"], **{k: float(v) for k, v in numbers(record).items()}}
    assert all((d / "tensorboard").is_dir() for _, d in configs)


def test_a_pack_that_fails_while_scoring_ends_its_loggers_runs_as_stopped(tmp_path, monkeypatch):
    """A pack that raises after training (here while scoring its second run) gets failed records
    for the runs left, and its loggers' runs end (close(finished=False)) instead of staying open."""
    import kanx.runner

    score, scored = kanx.runner.score, []

    def second_fails(*args, **kw):
        scored.append(1)
        if len(scored) == 2:
            raise RuntimeError("scoring broke")
        return score(*args, **kw)

    monkeypatch.setattr(kanx.runner, "score", second_fails)
    configs = jobs(tmp_path, "+logger.mine._target_=helpers.RecordingLogger")
    run_plan(configs)
    assert [c[0] for c in RecordingLogger.calls if c[0] in ("results", "close")] == ["results", "close"]
    assert RecordingLogger.calls[-1] == ("close", "mine", False)
    assert json.loads((configs[1][1] / "record.json").read_text())["status"] == "failed"


def test_a_logger_that_fails_to_open_closes_those_opened_before_it(tmp_path, monkeypatch):
    from kanx.loggers.base import Pack, logger_config, open_logger

    cfg = logger_config({"mine": {"_target_": "helpers.RecordingLogger"},
                         "broken": {"_target_": "helpers.RecordingLogger", "label": None, "nope": 1}})
    with pytest.raises(TypeError):
        open_logger(cfg, Pack((tmp_path / "a",)))
    assert RecordingLogger.calls[-1] == ("close", "mine", False)


def test_the_config_of_before_2026_12_still_reads():
    """Records written before loggers were built from `_target_` hold logger.name, tracking_uri and
    experiment: they read back as the node of conf/logger/ they meant."""
    from kanx.loggers.base import LoggerConfig, logger_config

    assert logger_config({"name": "none", "tracking_uri": None, "experiment": "kanx"}) == LoggerConfig()
    assert logger_config({"name": "tensorboard", "tracking_uri": None, "experiment": "kanx"}).nodes() == {
        "tensorboard": {"_target_": "kanx.loggers.TensorBoardLogger"}}
    assert logger_config({"name": "mlflow", "tracking_uri": "http://x", "experiment": "e"}).nodes() == {
        "mlflow": {"_target_": "kanx.loggers.MLflowLogger", "tracking_uri": "http://x", "experiment": "e"}}


def wandb_summary(path) -> dict:
    """The summary an offline W&B run holds (its run-<id>.wandb: a LevelDB-style log of the
    records wandb.proto defines: 7-byte header, 32 KiB blocks, each record's parts behind a
    7-byte header of checksum, length and type), as {key: value}, the last update winning."""
    import struct

    from wandb.proto import wandb_internal_pb2

    data, pos, part, summary = path.read_bytes(), 7, b"", {}
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos: pos + 7])
        part, pos = part + data[pos + 7: pos + 7 + length], pos + 7 + length
        if kind in (1, 4):  # a full record, or the last part of one
            record = wandb_internal_pb2.Record.FromString(part)
            part = b""
            if record.WhichOneof("record_type") == "summary":
                summary |= {item.key: json.loads(item.value_json) for item in record.summary.update}
        elif kind == 0:
            break
    return summary


def settled_wandb_summary(path, timeout: float = 60.0) -> dict:
    """wandb_summary once it holds the results: wandb (0.31) hands a finished run's last records to
    its service process, which may write them after finish() returns."""
    import time

    deadline = time.monotonic() + timeout
    while "status" not in (summary := wandb_summary(path)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return summary


@pytest.mark.slow
def test_wandb_example_logs_offline_into_each_run_folder(tmp_path, monkeypatch):
    """conf/logger/wandb.yaml with WANDB_MODE=offline: one offline W&B run per kanx run in its run
    folder's wandb/ (slow: W&B starts its service process), its summary the record's results."""
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    configs = jobs(tmp_path, "logger=wandb")
    assert run_plan(configs) == 0
    for _, run_dir in configs:
        record = json.loads((run_dir / "record.json").read_text())
        run_id = (run_dir / "wandb" / "kanx-run-id").read_text().strip()
        (offline,) = (run_dir / "wandb").glob(f"offline-run-*-{run_id}")
        summary = settled_wandb_summary(offline / f"run-{run_id}.wandb")
        assert summary["status"] == record["status"]
        assert summary["test_rmse"] == pytest.approx(record["metrics"]["test_rmse"])


def test_a_loggers_keys_leave_the_tag_and_values_with_commas_stay_whole():
    """Hydra's exclude_keys takes exact keys only: kanx drops every logger.* item from the tag
    itself (a logger of one's own too), keeping a list value's commas inside its item."""
    from kanx.vocab import folder_tag

    tag = "+logger.mine.tags=[a,b],model.width=[2,5,1],logger.mlflow.experiment=x,train.epochs=3"
    assert folder_tag(tag) == "model.width=[2,5,1],train.epochs=3"
    assert folder_tag("+logger.mine._target_=m.Logger") == "default"
    from kanx.vocab import folder_name

    untouched = "dataset.path=/a/logger.csv,train.epochs=3"  # "logger." inside a value is no key
    assert folder_tag(untouched) == folder_name(untouched)


def test_a_logger_that_fails_to_take_the_results_fails_no_run(tmp_path, caplog):
    """Results that do not reach a tracker (a server down) leave every run trained and recorded
    ok, with one warning a run naming its folder; the tracker's runs still end."""
    import logging

    caplog.set_level(logging.WARNING, logger="kanx")
    configs = jobs(tmp_path, "+logger.mine._target_=helpers.RecordingLogger", "+logger.mine.fail_results=true")
    assert run_plan(configs) == 0
    assert [json.loads((d / "record.json").read_text())["status"] for _, d in configs] == ["ok", "ok"]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [f"{d}: its results did not reach the logger (ConnectionError: tracking server unreachable); "
                      "its record.json holds them" for _, d in configs]
    assert RecordingLogger.calls[-1] == ("close", "mine", True)
