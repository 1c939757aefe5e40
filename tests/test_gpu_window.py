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


def test_the_stash_leaves_only_what_a_window_reads_and_puts_everything_back(tmp_path):
    """scripts/gpu_stash.sh: `out` sets aside every file under results/ a window does not read
    (other results roots, curves, analysis, logs) so the tree fits the device tool's 64 MiB;
    `back` restores them, keeping a curve the window returned meanwhile."""
    import shutil

    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "gpu_stash.sh", repo / "scripts")
    files = {
        "results/paper/d/E/default/beta=0.1,seed=0/record.json": "{}", "results/paper/d/E/default/beta=0.1,seed=0/done": "x",
        "results/paper/d/E/default/beta=0.1,seed=0/metrics.csv": "epoch\n1\n",
        "results/paper/d/E/default/beta=0.1,seed=1/metrics.csv": "epoch\n1\n",  # an unfinished run's curve
        "results/paper/analysis/report.md": "r", "results/paper/logs/pack.log": "l", "results/paper/d/analysis/report.md": "r",
        "results/calibration/x/record.json": "{}", "kanx/__init__.py": "",
    }
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    (repo / ".gitignore").write_text("/.stash/\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "t"], cwd=repo, check=True)

    out = subprocess.run(["bash", "scripts/gpu_stash.sh", "out"], cwd=repo, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "set aside 6 files" in out.stdout and "MiB of 64" in out.stdout
    left = {p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts and ".stash" not in p.parts}
    assert left == {"results/paper/d/E/default/beta=0.1,seed=0/record.json", "results/paper/d/E/default/beta=0.1,seed=0/done",
                    "kanx/__init__.py", "scripts/gpu_stash.sh", ".gitignore"}

    returned = repo / "results/paper/d/E/default/beta=0.1,seed=1/metrics.csv"
    returned.write_text("epoch\n1\n2\n")  # the window's curve, unpacked before `back`
    back = subprocess.run(["bash", "scripts/gpu_stash.sh", "back"], cwd=repo, capture_output=True, text=True)
    assert back.returncode == 0 and "restored 6 files" in back.stdout, back.stderr
    assert returned.read_text() == "epoch\n1\n2\n"
    status = subprocess.run(["git", "status", "--short"], cwd=repo, capture_output=True, text=True).stdout.split("\n")
    assert [s for s in status if s] == [" M results/paper/d/E/default/beta=0.1,seed=1/metrics.csv"]
    assert not (repo / ".stash").exists()
