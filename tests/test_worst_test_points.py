"""scripts/studies/worst_test_points.py: a finished run's worst test samples, recomputed from its weights."""

import importlib.util
import re
from pathlib import Path

from helpers import TOY

from kanx.plan import run_plan, sweep_jobs

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "studies" / "worst_test_points.py"


def test_worst_test_points_recompute_the_records_test_error(tmp_path, capsys):
    configs = sweep_jobs("sin_xy2", "EX", [f"results_root={tmp_path}", "seed=0", "beta=0.1",
                                           "train.epochs=6", "train.warmup=2", *TOY])
    assert run_plan(configs) == 0
    spec = importlib.util.spec_from_file_location("worst_test_points", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    capsys.readouterr()  # the training's own output
    assert script.main([str(configs[0][1]), "--top", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    ours, recorded = map(float, re.search(r"test RMSE (\S+) .*\(record: (\S+)\)", out[0]).groups())
    assert abs(ours - recorded) <= 1e-3 * recorded
    shares = [int(re.search(r": (\d+)% of the squared error", line).group(1)) for line in out[1:]]
    assert len(shares) == 2 and shares[0] >= shares[1] and sum(shares) <= 100
    assert all(line.count(", ") >= 2 for line in out[1:])  # one range check per stage (3 stages)
