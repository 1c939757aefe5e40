"""metrics.csv: training curves written during a run, kept across a resume, read back by
kanx.load_run(...).history."""

import pandas as pd
from helpers import TOY, run_until_interrupted

import kanx
from kanx.plan import run_plan, sweep_jobs

ARGS = ["train.epochs=12", "train.warmup=4", "train.fc_warmup=2", "train.log_every=2", *TOY]


def run_dirs(root, condition, seeds="0", betas="0.0,0.1"):
    return sweep_jobs("sin_xy2", condition, [f"results_root={root}", f"seed={seeds}", f"beta={betas}", *ARGS])


def test_metrics_csv_has_the_curves_of_every_member(tmp_path):
    configs = run_dirs(tmp_path, "EFX") + run_dirs(tmp_path, "baseline", betas="0.0")
    assert run_plan(configs, group="all") == 0  # one mixed pack of EFX and Baseline members
    efx = kanx.load_run(configs[1][1]).history  # beta 0.1
    assert list(efx["epoch"]) == [2, 4, 6, 8, 10, 12]
    assert {"loss", "data_loss", "lc", "beta", "open_gates", "exit", "pi_0", "pi_1", "pi_2", "tau_x", "lr", "elapsed_s"} <= set(efx.columns)
    assert (efx["beta"] == [0.0, 0.0, 0.1, 0.1, 0.1, 0.1]).all()  # warmup: beta off for epochs 0-3
    assert ((efx["pi_0"] + efx["pi_1"] + efx["pi_2"]).round(5) == 1).all()
    assert (efx["loss"] >= efx["data_loss"] - 1e-7).all() and efx["tau_x"].is_monotonic_decreasing
    base = pd.read_csv(configs[2][1] / "metrics.csv")
    assert "pi_0" not in base.columns and (base["beta"] == 0).all() and (base["loss"] == base["data_loss"]).all()
    run = kanx.load_run(configs[2][1])
    assert base["open_gates"].iloc[-1] == run.model.n_edges  # every edge is open without E
    assert run.history is not None and run.record["status"] == "ok"


def test_a_resumed_run_keeps_its_earlier_rows(tmp_path, monkeypatch):
    from kanx.runner import run_jobs

    configs = run_dirs(tmp_path, "E", betas="0.1")
    run_until_interrupted(configs, 8, monkeypatch)
    run_dir = configs[0][1]
    assert list(pd.read_csv(run_dir / "metrics.csv")["epoch"]) == [2, 4, 6]  # flushed with the checkpoint
    run_jobs(configs)
    resumed = pd.read_csv(run_dir / "metrics.csv")
    assert list(resumed["epoch"]) == [2, 4, 6, 8, 10, 12]
    assert run_plan(run_dirs(tmp_path / "straight", "E", betas="0.1")) == 0
    straight = pd.read_csv(next((tmp_path / "straight").rglob("metrics.csv")))
    pd.testing.assert_frame_equal(resumed.drop(columns="elapsed_s"), straight.drop(columns="elapsed_s"))


def test_analyze_curves_draws_every_cell_and_run_and_lists_them(tmp_path):
    """`python -m kanx.analyze ROOT --curves` on a tiny sweep: a PNG per (dataset, condition,
    beta) cell with its seeds overlaid (`--curves all`: and one per run), each linked from
    report.md; the panels follow the columns each condition has (exit pi and tau_x only with X)."""
    import re

    from kanx.analyze.__main__ import main
    from kanx.analyze.collect import load_runs
    from kanx.analyze.curves import beta_onset, curve_figures, read_history

    configs = run_dirs(tmp_path, "EFX", seeds="0,1", betas="0.1") + run_dirs(tmp_path, "baseline", seeds="0,1", betas="0.0")
    assert run_plan(configs, group="all") == 0
    curves = tmp_path / "figures" / "curves" / "sin_xy2"
    assert main([str(tmp_path), "--curves", "--formats", "png"]) == 0
    assert {p.relative_to(curves).as_posix() for p in curves.rglob("*.png")} == {"EFX/beta=0.1.png", "Baseline/beta=0.png"}
    assert main([str(tmp_path), "--curves", "all", "--formats", "png"]) == 0
    expected = {f"{c}/beta={b}{s}.png" for c, b in (("EFX", "0.1"), ("Baseline", "0")) for s in ("", ",seed=0", ",seed=1")}
    assert {p.relative_to(curves).as_posix() for p in curves.rglob("*.png")} == expected
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000 for p in curves.rglob("*.png"))
    report = (tmp_path / "report.md").read_text()
    links = [link for link in re.findall(r"\]\(([^)]+)\)", report) if link.startswith("figures/curves/")]
    assert sorted(links) == sorted(f"figures/curves/sin_xy2/{e}" for e in expected)

    figures = curve_figures(load_runs(tmp_path), tmp_path, per_run=True)
    titles = {(c.condition, c.seed): [ax.get_title() for ax in c.figure.axes if ax.get_visible()] for c in figures}
    assert titles[("EFX", None)] == titles[("EFX", 0)] == ["training loss", "data loss", "$L_C$", "open gates (edges)", "exit gate $\\pi$", "exit temperature $\\tau_x$"]
    assert titles[("Baseline", 1)] == ["training loss", "data loss", "$L_C$", "open gates (edges)"]
    assert beta_onset(read_history(configs[0][1])) == 4  # the warmup (rows every 2 epochs)
    assert beta_onset(read_history(configs[-1][1])) is None  # Baseline: beta stays 0


def test_a_curve_resumed_elsewhere_splices_onto_the_earlier_rows(tmp_path, monkeypatch):
    """A GPU window resumes runs without their metrics.csv (scripts/gpu_stash.sh leaves the curves
    behind) and returns rows from its resume on; `python -m kanx.curves splice` puts them after
    the earlier rows here, giving the curve of an uninterrupted run."""
    import shutil

    from kanx.curves import main as curves_main
    from kanx.runner import run_jobs

    configs = run_dirs(tmp_path / "here", "E", betas="0.1")
    run_until_interrupted(configs, 8, monkeypatch)
    run_dir = configs[0][1]
    earlier = run_dir / "metrics.csv"
    kept = tmp_path / "kept.csv"
    shutil.move(earlier, kept)  # the window's tree has no curve for this run
    run_jobs(configs)
    window_rows = pd.read_csv(earlier)
    assert list(window_rows["epoch"]) == [8, 10, 12]  # only what the resumed process trained
    later_root = tmp_path / "returned"
    (later_root / run_dir.relative_to(tmp_path / "here")).mkdir(parents=True)
    shutil.move(earlier, later_root / run_dir.relative_to(tmp_path / "here") / "metrics.csv")
    shutil.move(kept, earlier)
    assert curves_main(["splice", str(later_root), str(tmp_path / "here")]) == 0
    spliced = pd.read_csv(earlier)
    assert run_plan(run_dirs(tmp_path / "straight", "E", betas="0.1")) == 0
    straight = pd.read_csv(next((tmp_path / "straight").rglob("metrics.csv")))
    pd.testing.assert_frame_equal(spliced.drop(columns="elapsed_s"), straight.drop(columns="elapsed_s"))
    # A curve that already goes past the returned one's last epoch (the run went on here) is kept.
    returned = later_root / run_dir.relative_to(tmp_path / "here") / "metrics.csv"
    returned.write_text("".join(returned.read_text().splitlines(keepends=True)[:3]))  # header, epochs 8 and 10
    assert curves_main(["splice", str(later_root), str(tmp_path / "here")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(earlier), spliced)
