"""Fixtures that several test modules share (plain helpers are in helpers.py), and the rule of
the fast tier, `make test`: no test there starts a Python process, except the one small real
sweep through the CLI. A test that must (the CLI, a script, a wheel, a signal to a process),
or that trains long or compiles, is marked ``slow`` and runs in `make test-full`, which CI runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The tests train tiny models, which one intra-op thread runs as fast as several on an idle
# machine, while several collapse on a busy one: OpenMP threads that wait on a core another
# process holds made a 200-epoch toy training 14x slower here (62 s against 4.4 s). Set before
# torch is imported; the processes the tests start inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
from helpers import TOY, train_run  # noqa: E402

# The tests allowed to start Python processes without the slow marker: the fast tier's one
# real sweep through the CLI, and the GPU check of the CLI (tests/test_cuda.py, skipped without
# CUDA; `make test-cuda` runs it).
STARTS_PYTHON = {
    "tests/test_cli.py::test_small_real_sweep_through_the_cli",
    "tests/test_cuda.py::test_a_cli_sweep_on_cuda_matches_the_cpu_sweep",
}
FULL_TIER = ("slow", "slurm", "offline_gpu")  # the markers `make test` deselects (pyproject.toml addopts)


def _starts_python(args) -> bool:
    if isinstance(args, str | bytes | os.PathLike):
        command = os.fsdecode(args)
        return (sys.executable in command
                or Path(command.split()[0] if command.split() else "").name.startswith("python"))
    program = os.fsdecode(list(args)[0]) if args else ""
    return program == sys.executable or Path(program).name.startswith("python")


def _started_by_torch() -> bool:
    """Whether torch itself starts the process (torch.compile's inductor loads and builds its
    kernels in helper processes): not the test's doing."""
    frame = sys._getframe(2)
    while frame is not None:
        if f"{os.sep}torch{os.sep}" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_python(request, monkeypatch):
    """A test of the fast tier that starts a Python process (the CLI, a script, pip) fails and
    says to mark it slow: each such process costs seconds of imports."""
    if request.node.nodeid.split("[")[0] in STARTS_PYTHON or any(request.node.get_closest_marker(m) for m in FULL_TIER):
        return
    popen_init = subprocess.Popen.__init__

    def refuse_python(self, args, *rest, **kw):
        if _starts_python(args) and not _started_by_torch():
            raise AssertionError(f"{request.node.nodeid} starts a Python process "
                                 f"({args!r}): mark it @pytest.mark.slow (make test-full)")
        popen_init(self, args, *rest, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse_python)


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """Real-data lookups that read neither the user's KANX_DATA_DIR nor their cache (a folder of
    tmp_path stands in), and never touch the network."""
    from urllib.error import URLError

    from kanx.data import tabular

    monkeypatch.delenv("KANX_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def no_network(url, timeout=None):
        raise URLError("network disabled in tests")

    monkeypatch.setattr(tabular, "urlopen", no_network)


@pytest.fixture(scope="session")
def finished_efx(tmp_path_factory) -> Path:
    """A finished toy EFX run's folder (sin_xy2, beta 0.1, seed 0, 2 epochs; record.json,
    model.pt, the curve and the sealed done marker), trained once per session through
    kanx.runner as the CLI trains it. Tests read it or copy it; none changes it."""
    root = tmp_path_factory.mktemp("finished_efx")
    return train_run(root / "sin_xy2" / "EFX" / "beta=0.1,seed=0", "+condition=EFX", "beta=0.1",
                     "seed=0", f"results_root={root}", "train.epochs=2", "train.warmup=1", "train.fc_warmup=1", *TOY)
