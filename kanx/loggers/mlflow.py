"""`logger=mlflow`: one MLflow run a kanx run, through MlflowClient (the local SQLite store under
results_root unless `logger.mlflow.tracking_uri` names one)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from kanx.loggers.base import FINAL, Logger, Pack, import_extra

MLFLOW_DB = "mlflow.db"  # the default MLflow store (SQLite), under results_root
MLFLOW_ARTIFACTS = "mlartifacts"  # the default store's artifacts, under results_root
RUN_DIR_TAG = "kanx.run_dir"  # an MLflow run's tag naming its kanx run folder (resolved)
STATUS_TAG = "kanx.status"  # an MLflow run's tag holding its record's status


class MLflowLogger(Logger):
    """One MLflow run a kanx run, through MlflowClient (no global active run: a pack logs to
    hundreds at once); metrics at step = epoch; the member's config as params (Pack.hparams,
    flattened); its results as final/<key> metrics, its status as the tag kanx.status and its
    record.json as an artifact."""

    def __init__(self, pack: Pack, tracking_uri: str | None = None, experiment: str = "kanx",
                 artifact_location: str | None = None):
        super().__init__(pack)
        mlflow = import_extra("mlflow", "mlflow")
        root = pack.results_root.resolve()
        if tracking_uri is None:  # the local store and its artifacts under results_root, not the launch folder
            tracking_uri = f"sqlite:///{root / MLFLOW_DB}"
            artifact_location = artifact_location or (root / MLFLOW_ARTIFACTS).as_uri()
        self.client = mlflow.tracking.MlflowClient(tracking_uri)
        self._metric, self._param = mlflow.entities.Metric, mlflow.entities.Param
        found = self.client.get_experiment_by_name(experiment)
        experiment_id = (found.experiment_id if found
                         else self.client.create_experiment(experiment, artifact_location=artifact_location))
        self.run_ids, self.ended, self.run_dirs = [], [False] * len(pack.run_dirs), pack.run_dirs
        self.steps = [pack.resume_epoch] * len(pack.run_dirs)  # each member's last epoch logged: its results' step
        for m, run_dir in enumerate(pack.run_dirs):
            key = str(run_dir.resolve())
            earlier = pack.resume_epoch and self.client.search_runs(
                [experiment_id], filter_string=f"tags.`{RUN_DIR_TAG}` = '{key}'",
                order_by=["attributes.start_time DESC"], max_results=1)
            if earlier:  # a resumed run continues its MLflow run (a fresh start makes a new one)
                run_id = earlier[0].info.run_id
                self.client.update_run(run_id, status="RUNNING")
            else:
                run = self.client.create_run(experiment_id, run_name=run_dir.name, tags={RUN_DIR_TAG: key})
                run_id = run.info.run_id
                self._log_params(run_id, pack.hparams(m))
            self.run_ids.append(run_id)

    def _log_params(self, run_id: str, hparams: dict) -> None:
        """The params in batches of MLflow's limits: 100 a call, values cut to its longest (6,000 characters)."""
        from mlflow.utils import validation

        longest = getattr(validation, "MAX_PARAM_VAL_LENGTH", 6000)
        batch = getattr(validation, "MAX_PARAMS_TAGS_PER_BATCH", 100)
        params = [self._param(k, str(v) if len(str(v)) <= longest else str(v)[: longest - 3] + "...")
                  for k, v in hparams.items()]
        for i in range(0, len(params), batch):
            self.client.log_batch(run_id, params=params[i: i + batch])

    def log(self, rows: Sequence[dict]) -> None:
        now = int(time.time() * 1000)
        for m, (run_id, row) in enumerate(zip(self.run_ids, rows, strict=True)):
            step = self.steps[m] = int(row["epoch"])
            self.client.log_batch(run_id, metrics=[self._metric(k, float(v), now, step)
                                                   for k, v in row.items() if k != "epoch"])

    def log_results(self, m: int, results: dict) -> None:
        run_id, now = self.run_ids[m], int(time.time() * 1000)
        numbers = {k: v for k, v in results.items() if isinstance(v, float) and math.isfinite(v)}
        self.client.log_batch(run_id, metrics=[self._metric(f"{FINAL}{k}", v, now, self.steps[m])
                                               for k, v in numbers.items()])
        self.client.set_tag(run_id, STATUS_TAG, str(results.get("status")))
        record = self.run_dirs[m] / "record.json"
        if record.is_file():
            self.client.log_artifact(run_id, str(record))
        self.client.set_terminated(run_id, status="FAILED" if results.get("status") == "failed" else "FINISHED")
        self.ended[m] = True

    def close(self, finished: bool = True) -> None:
        for run_id, ended in zip(self.run_ids, self.ended, strict=True):
            if not ended:
                self.client.set_terminated(run_id, status="FINISHED" if finished else "KILLED")
