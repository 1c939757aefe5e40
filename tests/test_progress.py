"""Progress off a terminal (kanx.progress): where the tqdm bar is off (a log file, SLURM's output),
a line every train.progress_every_s seconds of wall time with the epoch, loss, members alive and
the time left; a line when scoring starts and one when it ends; none of them on a terminal."""

import io
import logging
import re
import subprocess
import sys

import pytest
from helpers import ROOT, TOY

import kanx.progress
from kanx.plan import run_plan, sweep_jobs

ARGS = ["seed=0", "beta=0.0,0.1", "train.epochs=12", "train.warmup=4", "train.fc_warmup=2", *TOY]
LINE = re.compile(r"sin_xy2 E x2: epoch (\d+)/12, mean loss [-+0-9.e]+, 2 alive, [0-9.]+ epochs/s, about .+ left")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def trained(tmp_path, monkeypatch, caplog, *overrides, stderr=None) -> list[str]:
    """The kanx log lines of training a pack of two, with a clock that moves 10 s at each look."""
    clock = iter(range(0, 10**6, 10))
    monkeypatch.setattr(kanx.progress, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(sys, "stderr", stderr if stderr is not None else io.StringIO())  # where tqdm looks
    caplog.set_level(logging.INFO, logger="kanx")
    assert run_plan(sweep_jobs("sin_xy2", "E", [f"results_root={tmp_path}", *ARGS, *overrides])) == 0
    return [r.getMessage() for r in caplog.records if r.name == "kanx"]


def test_off_a_terminal_a_progress_line_comes_every_interval_of_wall_time(tmp_path, monkeypatch, caplog):
    """train.progress_every_s=30 with the clock at +10 s an epoch: a line at epochs 3, 6, 9 and 12."""
    lines = trained(tmp_path, monkeypatch, caplog, "train.progress_every_s=30")
    progress = [m for m in lines if LINE.fullmatch(m)]
    assert [int(LINE.fullmatch(m)[1]) for m in progress] == [3, 6, 9, 12]


@pytest.mark.parametrize("case", ["off", "terminal"])
def test_no_progress_line_at_interval_0_nor_on_a_terminal(tmp_path, monkeypatch, caplog, case):
    """train.progress_every_s=0 writes none; on a terminal the tqdm bar shows progress instead."""
    interval, stderr = ("0", None) if case == "off" else ("30", Terminal())
    lines = trained(tmp_path, monkeypatch, caplog, f"train.progress_every_s={interval}", stderr=stderr)
    assert not [m for m in lines if LINE.fullmatch(m)]


def test_scoring_says_when_it_starts_and_ends(tmp_path, monkeypatch, caplog):
    """Scoring after training (about 17 s a run on Ikeda) is no silence: a line before, one after,
    the runs' result lines between them."""
    lines = trained(tmp_path, monkeypatch, caplog, "train.progress_every_s=0")
    start = lines.index("sin_xy2 E x2: trained; scoring 2 run(s) (each model.pt on its data)")
    (end,) = [i for i, m in enumerate(lines) if re.fullmatch(r"sin_xy2 E x2: scored 2 run\(s\) in [0-9.]+ s", m)]
    assert [i for i, m in enumerate(lines) if m.startswith("[ok] ")] == [start + 1, start + 2] and end == start + 3


def test_progress_every_s_names_no_run_and_is_refused_below_0(tmp_path):
    from kanx.config import config_hash, to_container
    from kanx.errors import ConfigError
    from kanx.runner import run_jobs

    plain = sweep_jobs("sin_xy2", "E", [f"results_root={tmp_path}", *ARGS])
    paced = sweep_jobs("sin_xy2", "E", [f"results_root={tmp_path}", *ARGS, "train.progress_every_s=5"])
    assert [d for _, d in paced] == [d for _, d in plain]
    assert config_hash(to_container(paced[0][0])) == config_hash(to_container(plain[0][0]))
    bad = sweep_jobs("sin_xy2", "E", [f"results_root={tmp_path}", *ARGS, "train.progress_every_s=-1"])
    with pytest.raises(ConfigError, match=r"^train.progress_every_s=-1.0 must be >= 0 \(0: no progress lines\)$"):
        run_jobs(bad)


@pytest.mark.slow
def test_a_runs_log_file_gets_a_progress_line_within_the_interval(tmp_path):
    """`kanx-train` with its output to a file (no terminal) and train.progress_every_s=0.05: the
    file holds progress lines of the pack in training, between the pack line and the results."""
    log = tmp_path / "train.log"
    args = [f"results_root={tmp_path / 'r'}", "+condition=E", "seed=0", "beta=0.1", "train.epochs=60", "train.warmup=4",
            "train.fc_warmup=2", "train.progress_every_s=0.05", *TOY]
    with open(log, "w") as out:
        done = subprocess.run([sys.executable, "-m", "kanx.train", *args], cwd=ROOT, stdout=out,
                              stderr=subprocess.STDOUT, timeout=600)
    text = log.read_text()
    assert done.returncode == 0, text[-3000:]
    lines = re.findall(r"sin_xy2 E x1: epoch (\d+)/60, mean loss \S+, 1 alive, \S+ epochs/s, about .+ left$", text,
                       re.MULTILINE)
    assert lines and all(1 <= int(e) <= 60 for e in lines), text[-3000:]
    assert text.index("training a pack of 1") < text.index("epoch ") < text.index("[ok] ")
    assert "sin_xy2 E x1: trained; scoring 1 run(s)" in text and re.search(r"scored 1 run\(s\) in [0-9.]+ s", text)
