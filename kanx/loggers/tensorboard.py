"""`logger=tensorboard`: TensorBoard event files in each run folder's tensorboard/, written by kanx
itself (the curves as scalars, the config as HParams, the results as final/<key> scalars)."""

from __future__ import annotations

import math
import os
import socket
import struct
import time
from collections.abc import Sequence
from pathlib import Path

from kanx.loggers.base import FINAL, Logger, Pack, import_extra
from kanx.loggers.checksum import load_masked_crc32c

TENSORBOARD_DIR = "tensorboard"  # in each run folder


class TensorBoardLogger(Logger):
    """TensorBoard event files, one a run and process, written synchronously (no writer thread a
    member, no file held open: a pack has hundreds): each ``log`` appends one event a member
    holding all of a row's scalars, tagged by column, at step = epoch. The member's config goes in
    as HParams (the hparams plugin's session start) when the run opens, its results (final/<key>
    scalars at its last epoch, and the session's end: success unless it diverged) when it ends."""

    def __init__(self, pack: Pack):
        super().__init__(pack)
        import_extra("tensorboard", "tensorboard")
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._event, self._summary, self._crc = Event, Summary, load_masked_crc32c()
        name = f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{os.getpid()}.kanx"
        self.paths = [d / TENSORBOARD_DIR / name for d in pack.run_dirs]
        self.steps = [pack.resume_epoch] * len(self.paths)  # each member's last epoch logged: its results' step
        first = Event(wall_time=time.time(), file_version="brain.Event:2")
        # A resumed run: TensorBoard drops the earlier events from the checkpoint's next epoch on
        # (those a stopped process logged after its last checkpoint), as SummaryWriter(purge_step=).
        resume = pack.resume_epoch
        purge = Event(wall_time=time.time(), step=resume + 1, session_log=SessionLog(status=SessionLog.START))
        for m, path in enumerate(self.paths):
            path.parent.mkdir(parents=True, exist_ok=True)
            if not resume:  # a fresh start (overwrite=true, a lost checkpoint): the run's earlier events go
                for old in path.parent.glob("events.out.tfevents.*"):
                    old.unlink()
            self._write(path, [first, *([purge] if resume else []), self._hparams_event(pack.hparams(m))])

    def _hparams_event(self, hparams: dict):
        """The hparams plugin's session start: the member's config (what SummaryWriter.add_hparams writes)."""
        from tensorboard.plugins.hparams import metadata, plugin_data_pb2

        info = plugin_data_pb2.SessionStartInfo(start_time_secs=time.time())
        for key, value in hparams.items():
            if isinstance(value, bool):
                info.hparams[key].bool_value = value
            elif isinstance(value, int | float):
                info.hparams[key].number_value = value
            else:
                info.hparams[key].string_value = value
        return self._plugin_event(metadata.SESSION_START_INFO_TAG,
                                  plugin_data_pb2.HParamsPluginData(session_start_info=info), 0)

    def _plugin_event(self, tag: str, data, step: int):
        from tensorboard.plugins.hparams import metadata

        data.version = metadata.PLUGIN_DATA_VERSION
        value = self._summary.Value(tag=tag, metadata=metadata.create_summary_metadata(data))
        return self._event(wall_time=time.time(), step=step, summary=self._summary(value=[value]))

    def _write(self, path: Path, events: list) -> None:
        """Append ``events`` as TFRecords: length, its masked CRC-32C, data, the data's."""
        records = []
        for event in events:
            data = event.SerializeToString()
            header = struct.pack("<Q", len(data))
            records += [header, struct.pack("<I", self._crc(header)), data, struct.pack("<I", self._crc(data))]
        with open(path, "ab") as f:
            f.write(b"".join(records))

    def log(self, rows: Sequence[dict]) -> None:
        now = time.time()
        for m, (path, row) in enumerate(zip(self.paths, rows, strict=True)):
            values = [self._summary.Value(tag=k, simple_value=float(v)) for k, v in row.items() if k != "epoch"]
            self.steps[m] = int(row["epoch"])
            self._write(path, [self._event(wall_time=now, step=self.steps[m], summary=self._summary(value=values))])

    def log_results(self, m: int, results: dict) -> None:
        from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

        step = self.steps[m]
        values = [self._summary.Value(tag=f"{FINAL}{k}", simple_value=v) for k, v in results.items()
                  if isinstance(v, float) and math.isfinite(v)]
        status = api_pb2.STATUS_FAILURE if results.get("status") in ("diverged", "failed") else api_pb2.STATUS_SUCCESS
        end = plugin_data_pb2.SessionEndInfo(status=status, end_time_secs=time.time())
        self._write(self.paths[m], [self._event(wall_time=time.time(), step=step, summary=self._summary(value=values)),
                                    self._plugin_event(metadata.SESSION_END_INFO_TAG,
                                                       plugin_data_pb2.HParamsPluginData(session_end_info=end), step)])
