"""scripts/gpu_window.sh on this CPU at smoke scale: what a GPU window runs, checked where no GPU
is needed. A window is about 15 minutes of borrowed device time, so the script must refuse bad
input before it trains, and a second call on the same warm machine must not lose or redo the
first call's work (the device tool's sync removes record files the tree here lacks)."""

import os
import subprocess
import sys
import tarfile

from helpers import ROOT


def window(tmp_path, out: str, phases: str) -> subprocess.CompletedProcess:
    env = os.environ | {
        "PYTHON": sys.executable, "KANX_WINDOW_WHEELS": "0", "KANX_WINDOW_DEVICE": "cpu", "KANX_WINDOW_SCALE": "smoke",
        "KANX_WINDOW_TESTS": "0", "KANX_WINDOW_JOBS": "1", "KANX_WINDOW_BENCH_MIN": "100000", "KANX_WINDOW_PHASES": phases,
        "KANX_WINDOW_RESULTS": str(tmp_path / "results"), "KANX_WINDOW_KEEP": str(tmp_path / "keep"), "OUT": str(tmp_path / out),
    }
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu_window.sh"), "300"], env=env, capture_output=True, text=True, timeout=600)


def members(archive, name: str) -> list[str]:
    with tarfile.open(archive) as tar:
        return [m for m in tar.getnames() if m.endswith("/" + name)]


def test_a_bad_phase_is_refused_before_anything_runs(tmp_path):
    p = window(tmp_path, "out", "nguyen_f1@0-9")
    assert p.returncode == 2
    assert "phase 'nguyen_f1@0-9' is not DATASETS@SEEDS" in p.stderr
    assert not (tmp_path / "results").exists()


def test_a_second_call_keeps_the_first_calls_records_and_curves(tmp_path):
    first = window(tmp_path, "out1", "nguyen_f1@0")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "packed 26 records, 0 checkpoints and 26 training curves" in first.stdout
    assert len(members(tmp_path / "out1" / "records.tgz", "record.json")) == 26
    assert len(members(tmp_path / "out1" / "curves.tgz", "metrics.csv")) == 26

    # What the device tool's sync does before the next call: files git does not ignore are gone.
    for path in (tmp_path / "results").rglob("*"):
        if path.name in ("record.json", "done", "metrics.csv"):
            path.unlink()
    second = window(tmp_path, "out2", "nguyen_f1@0")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "restored 26 finished runs" in second.stdout
    assert "nguyen_f1@0: exit 0" in second.stdout and "0 runs finished in this window so far" in second.stdout
    assert len(list((tmp_path / "results").rglob("metrics.csv"))) == 26
