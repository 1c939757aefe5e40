"""`logger=wandb`: an example of a logger kanx does not need, one W&B run a kanx run."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

from kanx.loggers.base import Logger, Pack, import_extra


class WandbLogger(Logger):
    """An example of a logger kanx does not need (conf/logger/wandb.yaml): one W&B run a kanx run,
    in ``project`` (``entity``, ``group``: W&B's), its config the member's (Pack.hparams), the
    curve rows at step = epoch, the results in its summary. ``mode``: W&B's (null: WANDB_MODE's,
    online by default; `offline` keeps each run in its run folder's wandb/, `wandb sync` sends it).
    A resumed kanx run continues its W&B run (its id kept in wandb/kanx-run-id). W&B starts a
    service process and a run object per member: for packs of a few runs, not hundreds."""

    ID_FILE = "kanx-run-id"

    def __init__(self, pack: Pack, project: str = "kanx", entity: str | None = None, group: str | None = None,
                 mode: str | None = None):
        super().__init__(pack)
        wandb = import_extra("wandb", "wandb")
        self.runs = []
        try:
            for m, run_dir in enumerate(pack.run_dirs):
                folder = run_dir / "wandb"
                folder.mkdir(parents=True, exist_ok=True)
                self.runs.append(wandb.init(project=project, entity=entity, group=group or run_dir.parent.name,
                                            name=run_dir.name, config=pack.hparams(m), dir=str(run_dir),
                                            id=self._run_id(folder, bool(pack.resume_epoch)), resume="allow",
                                            mode=mode, reinit="create_new"))
        except BaseException:
            self.close(finished=False)
            raise

    def _run_id(self, folder: Path, resume: bool) -> str:
        """The W&B run id of the kanx run: the one it had where it resumes, else a new one."""
        path = folder / self.ID_FILE
        if resume and path.is_file():
            return path.read_text().strip()
        run_id = hashlib.sha1(f"{folder.resolve()}:{time.time_ns()}".encode()).hexdigest()[:16]
        path.write_text(run_id + "\n")
        return run_id

    def log(self, rows: Sequence[dict]) -> None:
        for run, row in zip(self.runs, rows, strict=True):
            run.log({k: v for k, v in row.items() if k != "epoch"}, step=int(row["epoch"]))

    def log_results(self, m: int, results: dict) -> None:
        self.runs[m].summary.update(results)

    def close(self, finished: bool = True) -> None:
        for run in self.runs:
            run.finish(exit_code=0 if finished else 1)
        self.runs = []
