"""What several test modules share: the checkout's root, toy data, training a pack or a
run, running the CLI, reading records, composing configs. Plain functions, imported as
`from helpers import ...` (pytest puts tests/ on the path); the fixtures that several modules
use are in conftest.py, the others stay in the test module that uses them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from hydra import compose

from kanx.confdir import initialize_conf
from kanx.resolvers import register_resolvers
from kanx.runner import run_jobs
from kanx.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
# The real data (Concrete, Superconductor): KANX_DATA_DIR when set and not empty (the Makefile exports it
# empty without ../shared), else ../shared/data beside the checkout. Tests that need it skip without it.
SHARED_DATA = Path(os.environ.get("KANX_DATA_DIR") or ROOT.parent / "shared" / "data")
# Toy sizes for CLI sweeps: small data, small batches, the eager basis (no compile start-up).
TOY = ["dataset.n_train=128", "dataset.n_test=64", "train.batch_size=32", "train.compile=false"]


def toy_data(M, N=128, seed=0):
    """M members' copies of z = sin(2x + y^2) on N points of [-1, 1]^2."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(M, N, 2, generator=g) * 2 - 1
    return x, torch.sin(2 * x[..., :1] + x[..., 1:] ** 2)


def trained(runs, x, y, device=None, epochs=None) -> Trainer:
    """A Trainer of these runs trained to the end, or to ``epochs``."""
    pack = Trainer(runs, x, y, x.shape[1], device or torch.device("cpu"))
    if epochs is None:
        pack.train()
    else:
        while pack.epoch < epochs:
            pack.run_epoch()
    return pack


def graphed(runs):
    """These runs' configs with train.cuda_graph on."""
    from dataclasses import replace

    return [replace(r, train=replace(r.train, cuda_graph=True)) for r in runs]


def flat_edge(model, k, i, o) -> int:
    """The flat index of edge (layer k, input i, output o) in ``model``'s edge order."""
    return sum(a * b for a, b in model.edge_shapes[:k]) + i * model.edge_shapes[k][1] + o


def wait_for(root: Path, pattern: str, timeout: float = 120.0) -> Path:
    """The first file under root matching pattern, once it exists (e.g. a run's lock: its
    training has started)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(root.rglob(pattern))
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no {pattern} under {root} after {timeout} s")


def cli(*args, cwd=ROOT, timeout=300, check=True, env=None):
    """`python -m kanx.train ARGS` in a fresh process (``env``: variables to add)."""
    env = os.environ | {"PYTHONUNBUFFERED": "1"} | (env or {})
    p = subprocess.run([sys.executable, "-m", "kanx.train", *args], cwd=cwd, capture_output=True, text=True,
                       timeout=timeout, env=env)
    if check and p.returncode != 0:
        raise AssertionError(f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def load_script(path: str):
    """A script of scripts/ (``path`` below it, e.g. "offline_gpu/curves.py") imported in this
    process, to call its functions and main(argv) without starting Python."""
    import importlib.util

    file = ROOT / "scripts" / path
    spec = importlib.util.spec_from_file_location(f"script_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def records(root: Path) -> list[dict]:
    """Every finished record under root, in path order: each with its done marker, and no
    half-written file left behind."""
    files = sorted(root.rglob("record.json"))
    for f in files:
        assert (f.parent / "done").is_file(), f
    assert not list(root.rglob("*.tmp")), "a half-written file was left behind"
    return [json.loads(f.read_text()) for f in files]


def composed(*overrides, hydra=False):
    """The config `python -m kanx.train OVERRIDES` composes."""
    register_resolvers()
    with initialize_conf():
        return compose("config", overrides=list(overrides), return_hydra_config=hydra)


def train_run(run_dir: Path, *overrides) -> Path:
    """Train the run `python -m kanx.train OVERRIDES` composes into run_dir, in this process
    (through kanx.runner, as the CLI)."""
    run_jobs([(composed(*overrides), run_dir)])
    return run_dir


def run_until_interrupted(configs, epoch: int, monkeypatch, checkpoint_every: int = 6, **run_kw) -> None:
    """Train ``configs`` (kanx.runner.run_jobs) and stop them as a Ctrl-C would when a pack reaches
    ``epoch``, after the checkpoints every ``checkpoint_every`` epochs; a later run_jobs resumes."""
    import pytest

    for c, _ in configs:
        c.train.checkpoint_every = checkpoint_every
    run_epoch = Trainer.run_epoch

    def interrupted(self):
        if self.epoch == epoch:
            raise KeyboardInterrupt
        return run_epoch(self)

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "run_epoch", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run_jobs(configs, **run_kw)


class RecordingLogger:
    """A logger of one's own (`+logger.mine._target_=helpers.RecordingLogger`), not a subclass of
    kanx.loggers.Logger: it keeps every call in ``RecordingLogger.calls`` (cleared by the tests)."""

    calls: list = []

    def __init__(self, pack, label: str = "mine", fail_results: bool = False):
        self.pack, self.label, self.fail_results = pack, label, fail_results
        RecordingLogger.calls.append(("open", label, [d.name for d in pack.run_dirs], pack.resume_epoch))

    def log(self, rows):
        RecordingLogger.calls.append(("log", self.label, [dict(r) for r in rows]))

    def flush(self):
        RecordingLogger.calls.append(("flush", self.label))

    def log_results(self, m, results):
        RecordingLogger.calls.append(("results", self.label, m, dict(results)))
        if self.fail_results:
            raise ConnectionError("tracking server unreachable")

    def close(self, finished=True):
        RecordingLogger.calls.append(("close", self.label, finished))
