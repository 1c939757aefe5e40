"""scripts/offline_gpu/run.sh on this CPU at smoke scale: what the time-boxed job on an offline GPU
node runs, checked where no GPU is needed. The job has a short wall-clock budget, so the script must
refuse bad input before it trains, and a second run on the same node must not lose or redo the
first run's work (a copy step that syncs the tree removes record files the tree being copied lacks).

Marked `offline_gpu`, outside the default tier (each training test takes minutes on a CPU):
`pytest -m offline_gpu tests/test_offline_gpu.py`, or `make test-full`."""

import os
import subprocess
import sys
import tarfile

import pytest
from helpers import ROOT

pytestmark = pytest.mark.offline_gpu


def window(tmp_path, out: str, phases: str) -> subprocess.CompletedProcess:
    env = os.environ | {
        "PYTHON": sys.executable, "KANX_WINDOW_WHEELS": "0", "KANX_WINDOW_DEVICE": "cpu", "KANX_WINDOW_SCALE": "smoke",
        "KANX_WINDOW_TESTS": "0", "KANX_WINDOW_BENCH": "0", "KANX_WINDOW_JOBS": "1", "KANX_WINDOW_BENCH_MIN": "100000",
        "KANX_WINDOW_PHASES": phases,
        "KANX_WINDOW_RESULTS": str(tmp_path / "results"), "KANX_WINDOW_KEEP": str(tmp_path / "keep"),
        "OUT": str(tmp_path / out),
    }
    return subprocess.run(["bash", str(ROOT / "scripts" / "offline_gpu" / "run.sh"), "300"], env=env,
                          capture_output=True, text=True, timeout=600)


def members(archive, name: str) -> list[str]:
    with tarfile.open(archive) as tar:
        return [m for m in tar.getnames() if m.endswith("/" + name)]


def test_a_bad_phase_is_refused_before_anything_runs(tmp_path):
    p = window(tmp_path, "out", "nguyen_f1@0-9")
    assert p.returncode == 2
    assert "phase 'nguyen_f1@0-9' is not DATASETS@SEEDS" in p.stderr
    assert not (tmp_path / "results").exists()


def test_a_study_phase_trains_the_study_into_the_studies_root_and_packs_it(tmp_path):
    bad = window(tmp_path, "out0", "study:edges")
    assert (bad.returncode == 2 and "phase 'study:edges' is not DATASETS@SEEDS" in bad.stderr
            and "study:NAME (inputs, nodes, distractors)" in bad.stderr)
    p = window(tmp_path, "out", "study:inputs")
    assert p.returncode == 0, p.stdout + p.stderr
    # concrete and superconductor: 7 betas, 2 seeds
    assert "study:inputs: exit 0" in p.stdout and "28 runs finished in this job so far" in p.stdout
    assert len(list((tmp_path / "studies" / "input-gates").rglob("done"))) == 28 and not (tmp_path / "results").exists()
    packed = members(tmp_path / "out" / "records.tgz", "record.json")
    assert len(packed) == 28 and all("/studies/input-gates/" in m and "/EFXI/" in m for m in packed)


def test_a_second_call_keeps_the_first_calls_records_and_curves(tmp_path):
    first = window(tmp_path, "out1", "nguyen_f1@0")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "packed 26 records, 0 checkpoints and 26 training curves" in first.stdout
    assert len(members(tmp_path / "out1" / "records.tgz", "record.json")) == 26
    assert len(members(tmp_path / "out1" / "curves.tgz", "metrics.csv.gz")) == 26  # finished runs: gzipped curves
    assert not members(tmp_path / "out1" / "curves.tgz", "metrics.csv")

    # What a copy step that syncs the tree does before the next run: files git does not ignore are gone.
    for path in (tmp_path / "results").rglob("*"):
        if path.name in ("record.json", "done", "metrics.csv", "metrics.csv.gz"):
            path.unlink()
    second = window(tmp_path, "out2", "nguyen_f1@0")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "restored 26 finished runs" in second.stdout
    assert "nguyen_f1@0: exit 0" in second.stdout and "0 runs finished in this job so far" in second.stdout
    assert len(list((tmp_path / "results").rglob("metrics.csv.gz"))) == 26


def test_the_stash_leaves_only_what_a_window_reads_and_puts_everything_back(tmp_path):
    """scripts/offline_gpu/stash.sh: `out` sets aside every file under results/ the job does not read
    (other results roots, curves, analysis, logs) so the tree fits the copy step's 64 MiB, and
    refuses a second `out`; `back` restores them, splicing a curve written meanwhile onto the
    set-aside rows and leaving any other clash in .stash/ (exit 1), never deleting one. Curves
    of either form (a finished run's metrics.csv.gz) travel alike."""
    import gzip
    import shutil

    repo = tmp_path / "repo"
    (repo / "scripts" / "offline_gpu").mkdir(parents=True)
    for script in ("stash.sh", "curves.py"):
        shutil.copy(ROOT / "scripts" / "offline_gpu" / script, repo / "scripts" / "offline_gpu")
    run0, run1, run2 = (f"results/paper/d/E/default/beta=0.1,seed={s}" for s in range(3))
    files = {
        f"{run0}/record.json": "{}", f"{run0}/done": "x",
        f"{run1}/metrics.csv": "epoch,loss\n2,1.0\n4,0.5\n",  # an unfinished run's curve, checkpointed at epoch 4
        f"{run2}/metrics.csv": "epoch,loss\n2,1.0\n4,0.5\n",  # another one
        "results/paper/analysis/report.md": "r", "results/paper/logs/pack.log": "l",
        "results/paper/d/analysis/report.md": "r", "results/calibration/x/record.json": "{}", "kanx/__init__.py": "",
    }
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    (repo / run0 / "metrics.csv.gz").write_bytes(gzip.compress(b"epoch,loss\n2,1.0\n4,0.5\n"))  # a finished run's curve
    (repo / ".gitignore").write_text("/.stash/\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "t"], cwd=repo, check=True)
    env = os.environ | {"PYTHON": sys.executable}

    def stash(verb):
        return subprocess.run(["bash", "scripts/offline_gpu/stash.sh", verb], cwd=repo, capture_output=True, text=True,
                              env=env)

    out = stash("out")
    assert out.returncode == 0, out.stderr
    assert "set aside 7 files" in out.stdout and "MiB of 64" in out.stdout
    left = {p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts
            and ".stash" not in p.parts}
    assert left == {f"{run0}/record.json", f"{run0}/done", "kanx/__init__.py", "scripts/offline_gpu/stash.sh",
                    "scripts/offline_gpu/curves.py", ".gitignore"}
    again = stash("out")
    assert again.returncode == 1 and "run 'bash scripts/offline_gpu/stash.sh back' first" in again.stderr

    # Meanwhile run 1 resumed here from its epoch-4 checkpoint, without its curve, and a report was written again.
    (repo / run1 / "metrics.csv").write_text("epoch,loss\n6,0.25\n8,0.125\n")
    # ... and run 2 finished
    (repo / run2 / "metrics.csv.gz").write_bytes(gzip.compress(b"epoch,loss\n6,0.25\n8,0.125\n"))
    (repo / "results/paper/analysis/report.md").write_text("new")
    back = stash("back")
    assert (back.returncode == 1 and "restored 4 files" in back.stdout
            and "spliced 2 training curves" in back.stdout), back.stdout + back.stderr
    assert "1 set-aside files left in .stash/" in back.stderr and "results/paper/analysis/report.md" in back.stderr
    assert (repo / run1 / "metrics.csv").read_text() == "epoch,loss\n2,1.0\n4,0.5\n6,0.25\n8,0.125\n"
    assert (gzip.decompress((repo / run2 / "metrics.csv.gz").read_bytes())
            == b"epoch,loss\n2,1.0\n4,0.5\n6,0.25\n8,0.125\n")
    assert not (repo / run2 / "metrics.csv").exists()  # the finished run's form, the plain one gone
    assert (repo / ".stash/results/paper/analysis/report.md").read_text() == "r"  # kept, not deleted
    status = subprocess.run(["git", "status", "--short"], cwd=repo, capture_output=True, text=True).stdout.split("\n")
    assert sorted(s for s in status if s) == sorted(
        [f" M {run1}/metrics.csv", f" D {run2}/metrics.csv", f"?? {run2}/metrics.csv.gz",
         " M results/paper/analysis/report.md"])
