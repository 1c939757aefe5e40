"""The worked examples in docs/examples run as written (full tier: each trains real runs)."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow


def test_a_researchers_day_runs_end_to_end(tmp_path):
    """The notebook trains its sweep, loads it, compares conditions, draws a run and exports a
    formula: exit 0, its two figures written, and the records it compares are the sweep's nine
    (Baseline at beta 0, EFX at both betas, three seeds each)."""
    env = os.environ | {"KANX_EXAMPLE_ROOT": str(tmp_path), "MPLBACKEND": "Agg",
                        "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "a_researchers_day.py")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "conditions.png").stat().st_size > 0
    assert (tmp_path / "model_and_curve.png").stat().st_size > 0
    records = [json.loads(path.read_text()) for path in tmp_path.rglob("record.json")]
    cells = sorted((r["condition"], r["beta"]) for r in records)
    assert cells == [("Baseline", 0.0)] * 3 + [("EFX", 0.02)] * 3 + [("EFX", 0.2)] * 3
    assert "z = " in done.stdout  # the exported formula
