"""Settle the protocol choices the paper leaves open, on Concrete, by evidence.

    python scripts/studies/calibrate.py run screen [--seeds 0,1]   # 1,000 epochs, every combination
    python scripts/studies/calibrate.py run scale  [--seeds 0,1]   # 5,000 epochs, the complexity scale
    python scripts/studies/calibrate.py run combos [--seeds 0,1]   # 5,000 epochs, targets x inputs, E
    python scripts/studies/calibrate.py run split                  # 5,000 epochs, Baseline, fixed split
    python scripts/studies/calibrate.py run minmax                 # the factorial's protocol, min-max inputs
    python scripts/studies/calibrate.py run refit                  # EF at the factorial's protocol, grid refit
                                                                   # with rtol
    python scripts/studies/calibrate.py run refit-points           # Baseline: refit on 256 order statistics
                                                                   # or all samples
    python scripts/studies/calibrate.py run rollout                # Ikeda/Ecosystem: the multi-step RMSE's protocol
    python scripts/studies/calibrate.py run exit-gate              # X, FX (EX, EFX): readings of the exit gate
                                                                   # (issue #18)
    python scripts/studies/calibrate.py report [--results results/calibration] [--out docs/CALIBRATION.md]

The open choices (issue "Reproduce the paper on Concrete"):
  - the complexity scale (kanx.kan.objective.complexity_scale): `mdl` = MSE + beta (log n / n) L_C
    with n = n_train, `mdl_batch` with n = the batch size, or `plain` = MSE + beta L_C;
  - whether targets are standardized for training;
  - how inputs are scaled to the spline grid (min-max to [-1, 1], or standardized);
  - a fixed or a per-seed train/test split.
The complexity scale only multiplies beta: scale s at beta b is `mdl` at b * s / s_mdl. So one
`mdl` sweep over the screen's betas and their `mdl_batch` and `plain` equivalents covers all
three scales in the same packs. The split does not change how hard beta prunes; it is judged
from the Baseline RMSE over seeds (the per-seed split is the full factorial's Baseline).

`report` writes tables of seed-medians next to the published medians
(../shared/calibration/concrete_published.csv), generated from the records alone.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd

from kanx.kan.objective import COMPLEXITY_SCALES, complexity_scale
from kanx.reproduce import train_in_turn

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT.parent / "shared" / "calibration" / "concrete_published.csv"
# The Concrete factorial of docs/REPRODUCTION.md, run with the grid refit on 256 order statistics
# (the default then); the calibration stages ran with it too.
FACTORIAL = ROOT / "results" / "paper-refit256" / "concrete"
SCREEN_BETAS = [0.001, 0.01, 0.1]
N_TRAIN, BATCH = 824, 64
# relative to mdl
SCALES = {s: complexity_scale(s, N_TRAIN, BATCH) / complexity_scale("mdl", N_TRAIN, BATCH) for s in COMPLEXITY_SCALES}
COMBOS = {  # name -> dataset overrides
    "std-targets,minmax": ["dataset.standardize_targets=true", "dataset.input_scaling=minmax"],
    "raw-targets,minmax": ["dataset.standardize_targets=false", "dataset.input_scaling=minmax"],
    "std-targets,std-inputs": ["dataset.standardize_targets=true", "dataset.input_scaling=standardize"],
    "raw-targets,std-inputs": ["dataset.standardize_targets=false", "dataset.input_scaling=standardize"],
}
STAGES = ("screen", "scale", "combos", "split", "minmax", "refit", "refit-points", "rollout", "exit-gate")
# Readings of the exit gate without egates (issue #18), each a train.* option against today's
# default; the conditions each can change (warmup_for=egates leaves egated conditions as they are).
EXIT_READINGS = {"warmup_for=egates": "X,FX", "exit_pi=tempered": "X,FX,EX,EFX", "tau_x_epochs=500": "X,FX,EX,EFX"}
EXIT_BETAS, EXIT_SEEDS = (0.05, 0.1, 0.5), (0, 1, 2)
REFIT_RTOL = 1e-4  # model.grid_refit_rtol of the refit stage


# The screen's betas under every scale, written as `mdl` betas (within 0.1% of b x factor;
# spelled as they were first run, so re-running a stage skips the records it already has).
SCREEN_MDL_BETAS = [0.001, 0.01, 0.1, 0.00797, 0.0797, 0.797, 0.122726, 1.227255, 12.272551]
SCALE_MDL_BETAS = [0.001, 0.01, 0.1, 0.00797, 0.0797, 0.797, 0.1227, 1.227, 12.27]


def as_published_beta(beta: float, scale: str, run_scale: str = "mdl") -> float | None:
    """The screen beta that a `run_scale` run at `beta` stands for under `scale`, or None."""
    b = beta * SCALES[run_scale] / SCALES[scale]
    match = [p for p in SCREEN_BETAS if math.isclose(b, p, rel_tol=0.01)]
    return match[0] if match else None


def train(args: list[str], dataset: str = "concrete") -> None:
    if train_in_turn([[f"dataset={dataset}", *args]], "calibrate.py"):
        raise SystemExit(1)


def run(a) -> int:
    if a.stage == "screen":
        betas = "beta=" + ",".join(map(repr, SCREEN_MDL_BETAS))
        for combo, overrides in COMBOS.items():
            for condition in ("E", "EF"):
                train([f"+condition={condition}", f"results_root={a.results}/{combo.replace(',', '_')}",
                       "train.epochs=1000", betas, f"seed={a.seeds}", *overrides])
    elif a.stage == "scale":
        betas = "beta=" + ",".join(map(repr, SCALE_MDL_BETAS))
        for condition in ("E", "EF"):  # min-max inputs: the default when this stage settled the scale
            train([f"+condition={condition}", f"results_root={a.results}/full-epochs-scale", betas, f"seed={a.seeds}",
                   "dataset.input_scaling=minmax"])
    elif a.stage == "combos":  # std-targets,minmax is the scale stage's mdl_batch rows
        for combo, overrides in list(COMBOS.items())[1:]:
            train(["+condition=E", f"results_root={a.results}/full-epochs-combos/{combo.replace(',', '_')}",
                   "beta=" + ",".join(map(repr, SCREEN_BETAS)), f"seed={a.seeds}", *overrides])
    elif a.stage == "minmax":  # 10 seeds, every published beta: min-max against the chosen standardization
        for condition in ("baseline", "F", "E", "EF"):
            train([f"+condition={condition}", f"results_root={a.results}/minmax-10seeds",
                   "dataset.input_scaling=minmax"])
    elif a.stage == "refit":  # tied inputs: EF with the truncated grid refit, both input scalings
        for scaling in ("standardize", "minmax"):
            train(["+condition=EF", f"results_root={a.results}/grid-refit", f"model.grid_refit_rtol={REFIT_RTOL}",
                   f"dataset.input_scaling={scaling}"])
    elif a.stage == "refit-points":  # 256 order statistics (the old default) or all samples (pykan)
        root = f"results_root={a.results}/refit-points"
        for points, seeds in (("null", "0,1,2,3,4"), ("256", "0,1,2")):
            train(["+condition=baseline", root, f"model.grid_refit_points={points}", f"seed={seeds}"], "superconductor")
        train(["+condition=baseline", root, "model.grid_refit_points=null", "seed=0,1,2,3,4"])  # 256: the factorial's
    elif a.stage == "rollout":  # trained models for scripts/studies/rollout_probe.py, then its tables
        # The records' own test RMSE is one rollout over the whole test segment (the default
        # before this stage), pinned so the stage's records keep their identity.
        root, whole = f"results_root={a.results}/rollout", ["dataset.horizon=null", "dataset.n_rollouts=1"]
        train(["+condition=baseline", root, *whole, "seed=0,1,2"], "ikeda")
        train(["+condition=EX", root, *whole, "beta=0.01", "seed=0,1,2"], "ikeda")
        train(["+condition=baseline", root, *whole, "seed=0,1,2"], "ecosystem")
        cmd = [sys.executable, str(ROOT / "scripts" / "studies" / "rollout_probe.py"), f"{a.results}/rollout", "--out",
               f"{a.results}/rollout/probe"]
        print("+", " ".join(cmd[1:]), flush=True)
        subprocess.check_call(cmd)
    elif a.stage == "exit-gate":  # the factorial's protocol (refit on 256), so its records are today's reading
        for reading, conditions in EXIT_READINGS.items():
            train([f"+condition={conditions}", f"results_root={a.results}/exit-gate", f"train.{reading}",
                   "model.grid_refit_points=256",
                   "beta=" + ",".join(map(str, EXIT_BETAS)), "seed=" + ",".join(map(str, EXIT_SEEDS)),
                   "hydra.launcher.group=all"])
    else:
        train([f"results_root={a.results}/baseline_fixed-split", "dataset.data_seed=0"])
        # (the per-seed split is the factorial's Baseline; min-max inputs: results/calibration/minmax-10seeds)
    return 0


def current_defaults() -> dict[str, str]:
    """The settled choices as conf/ composes them for Concrete."""
    from omegaconf import OmegaConf

    from kanx.confdir import conf_dir
    from kanx.config import config_defaults

    conf = OmegaConf.merge(config_defaults(), OmegaConf.load(conf_dir() / "dataset" / "concrete.yaml"))
    data_seed = conf.dataset.data_seed
    return {"train.complexity_scale": conf.train.complexity_scale,
            "dataset.standardize_targets": str(conf.dataset.standardize_targets).lower(),
            "dataset.input_scaling": conf.dataset.input_scaling,
            "dataset.data_seed": "null (per-seed split)" if data_seed is None else str(data_seed)}


def runs_under(root: Path) -> pd.DataFrame:
    """Every finished run's record under root (none if root does not exist)."""
    from kanx.analyze import load_runs

    return load_runs(root) if root.exists() else pd.DataFrame()


def usable_runs(root: Path) -> pd.DataFrame:
    df = runs_under(root)
    return df[df["usable"]].copy() if not df.empty else df


def versus_published(df: pd.DataFrame, pub: pd.DataFrame, by: list[str], run_scale: str = "mdl",
                     scales=tuple(SCALES)) -> pd.DataFrame:
    """Seed-medians of `df` (runs at `run_scale`) per (by..., scale, condition, beta), read
    under each of `scales`, next to the published medians."""
    rows = []
    for keys, g in df.groupby([*by, "condition", "beta"]):
        keys = dict(zip([*by, "condition", "beta"], keys, strict=True))
        for scale in scales:
            b = as_published_beta(keys["beta"], scale, run_scale)
            if b is None:
                continue
            p = pub[(pub.condition == keys["condition"]) & (pub.beta.round(6) == b)].iloc[0]
            rows.append({**{k: keys[k] for k in by}, "scale": scale, "condition": keys["condition"], "beta": b,
                         "beta run": keys["beta"], "seeds": len(g),
                         "edges": g["contributing_edges"].median(), "edges (paper)": p.edges_median,
                         "depth": g["depth"].median(), "depth (paper)": p.depth_median,
                         "RMSE": g["test_rmse"].median(), "RMSE (paper)": p.rmse_median})
    table = pd.DataFrame(rows).sort_values([*by, "scale", "condition", "beta"])
    table["log edge ratio"] = (table["edges"].clip(lower=1) / table["edges (paper)"]).map(math.log)
    return table


def closeness(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean |log(edges / published)| and mean |RMSE - published| per choice: lower is closer."""
    g = table.assign(rmse_gap=(table["RMSE"] - table["RMSE (paper)"]).abs()).groupby(by)
    return pd.DataFrame({"mean abs log edge ratio": g["log edge ratio"].apply(lambda s: s.abs().mean()),
                         "mean abs RMSE gap (MPa)": g["rmse_gap"].mean()}).sort_values("mean abs log edge ratio")


def pruning_curve(df: pd.DataFrame) -> pd.DataFrame:
    """Seed-median edges, depth and RMSE per `mdl` beta, one column group per condition."""
    wide = df.groupby(["beta", "condition"])[["contributing_edges", "depth", "test_rmse"]].median().unstack("condition")
    wide.columns = [f"{c} {'edges' if m == 'contributing_edges' else 'RMSE' if m == 'test_rmse' else m}"
                    for m, c in wide.columns]
    return wide[sorted(wide.columns)].rename_axis("mdl beta")


def md(df: pd.DataFrame, **kw) -> str:
    return df.to_markdown(floatfmt=".3g", **kw)


def report(a) -> int:
    results, pub = Path(a.results), pd.read_csv(PUBLISHED)
    text = ["# Calibration on Concrete: the open protocol choices", "",
            f"Generated by `python scripts/studies/calibrate.py report` from the records under `{results}` "
            "(each section names the command that made them) and the published medians "
            "(`shared/calibration/concrete_published.csv`). Conditions E and EF; medians over seeds. "
            "In the screens, a scale's rows are the `mdl` runs at beta x (its factor / mdl's): "
            + ", ".join(f"`{s}` x{f:.4g}" for s, f in SCALES.items()) + ".", ""]
    text += ["Defaults in `conf/` now (Concrete): " + ", ".join(f"`{k}={v}`" for k, v in current_defaults().items())
             + ".", ""]
    full = usable_runs(results / "full-epochs-scale")
    if not full.empty:
        table = versus_published(full, pub, [])
        text += ["## Complexity scale at the full 5,000 epochs", "",
                 "`python scripts/studies/calibrate.py run scale --seeds 0,1` (standardized targets, min-max inputs).",
                 "", md(closeness(table, ["scale"])), "", md(table, index=False), "",
                 "Pruning against the `mdl` beta (all seeds pooled per point):", "",
                 md(pruning_curve(full)), ""]
    combos = [usable_runs(results / "full-epochs-combos" / c.replace(",", "_")).assign(combo=c)
              for c in list(COMBOS)[1:]]
    tables = [versus_published(c, pub, ["combo"], "mdl_batch", ["mdl_batch"]) for c in combos if not c.empty]
    if tables:
        if not full.empty:
            default = full[full["condition"] == "E"].assign(combo=next(iter(COMBOS)))
            tables.insert(0, versus_published(default, pub, ["combo"], "mdl", ["mdl_batch"]))
        table = pd.concat(tables, ignore_index=True)
        text += ["## Targets and inputs at the full 5,000 epochs (E, `mdl_batch`)", "",
                 "`python scripts/studies/calibrate.py run combos --seeds 0,1`; the std-targets,minmax rows are the "
                 "scale stage's `mdl_batch` rows.", "",
                 md(closeness(table, ["combo"])), "", md(table.drop(columns="scale"), index=False), ""]
    screens = [usable_runs(results / c.replace(",", "_")).assign(combo=c) for c in COMBOS]
    screen = (pd.concat([s for s in screens if not s.empty], ignore_index=True) if any(not s.empty for s in screens)
              else None)
    if screen is not None:
        table = versus_published(screen, pub, ["combo"])
        text += ["## Screen at 1,000 epochs", "",
                 "`python scripts/studies/calibrate.py run screen --seeds 0,1` (combinations with records: "
                 + ", ".join(sorted(screen["combo"].unique())) + ").", "",
                 md(closeness(table, ["combo", "scale"])), "", md(table, index=False), ""]
    text += inputs_section(results, pub)
    text += split_section(results, pub)
    text += refit_section(results, pub)
    text += refit_points_section(results)
    text += rollout_section(results)
    text += exit_gate_section(results, pub)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    notes = ROOT / "docs" / "journal" / "calibration-notes.md"
    if notes.exists():
        text += ["---", "", notes.read_text()]
    Path(a.out).write_text("\n".join(text))
    print(f"wrote {a.out}")
    return 0


def inputs_section(results: Path, pub: pd.DataFrame) -> list[str]:
    """Min-max vs standardized inputs at the factorial's protocol (10 seeds), next to the paper."""
    keys = ["condition", "beta"]
    metrics = {"contributing_edges": "edges", "depth": "depth", "test_rmse": "RMSE"}
    sides = {"min-max": usable_runs(results / "minmax-10seeds"), "standardized": usable_runs(FACTORIAL)}
    frames = []
    for name, df in sides.items():
        if not df.empty:
            g = df.groupby(keys)
            med = g[list(metrics)].median().rename(columns={m: f"{short} {name}" for m, short in metrics.items()})
            frames.append(med.assign(**{f"seeds {name}": g.size()}))
    if len(frames) < 2:
        return []
    both = pd.concat(frames, axis=1, join="inner").reset_index()
    paper = pub.assign(beta=pub["beta"].fillna(0.0)).rename(
        columns={"edges_median": "edges paper", "depth_median": "depth paper", "rmse_median": "RMSE paper"})
    both = both.merge(paper[[*keys, "edges paper", "depth paper", "RMSE paper"]], on=keys, how="left")
    cols = [*keys] + [f"{m} {s}" for m in ("edges", "depth", "RMSE") for s in ("min-max", "standardized", "paper")]
    gated = both[both["beta"] > 0]
    per_side = ", ".join(
        f"{s} {(gated[f'edges {s}'].clip(lower=1) / gated['edges paper']).map(math.log).abs().mean():.3f} "
        f"(depth off in {int((gated[f'depth {s}'] != gated['depth paper']).sum())})"
        for s in ("min-max", "standardized"))
    return ["## Input scaling at the factorial's protocol (10 seeds)", "",
            "`python scripts/studies/calibrate.py run minmax` against the factorial "
            "(`results/paper-refit256/concrete`); cells that both have.", "",
            md(both[cols + ["seeds min-max", "seeds standardized"]], index=False), "",
            f"Over the {len(gated)} cells with beta > 0, mean |log(edges / edges paper)| and the number of cells whose "
            f"median depth differs from the paper's: {per_side}.", ""]


def refit_section(results: Path, pub: pd.DataFrame) -> list[str]:
    """EF with pykan's plain least-squares grid refit against the truncated one, per input
    scaling: seed-medians, the worst run, and the runs worse than predicting the mean."""
    from kanx.data.tabular import CONCRETE, load_table, locate

    refit = results / "grid-refit" / "concrete" / "EF"
    rtol = f"model.grid_refit_rtol={REFIT_RTOL:g}"
    sides = {("standardized", "plain (pykan)"): runs_under(FACTORIAL / "EF"),
             ("standardized", rtol): runs_under(refit / f"dataset.input_scaling=standardize,{rtol}"),
             ("min-max", "plain (pykan)"): runs_under(results / "minmax-10seeds" / "concrete" / "EF"),
             ("min-max", rtol): runs_under(refit / f"dataset.input_scaling=minmax,{rtol}")}
    if sides[("standardized", rtol)].empty and sides[("min-max", rtol)].empty:
        return []
    values, _ = load_table(CONCRETE, *locate(CONCRETE, None))  # KANX_DATA_DIR, as training reads it
    target_sd = values[:, -1].std(ddof=1)
    paper = pub[pub.condition == "EF"].assign(beta=lambda p: p["beta"].fillna(0.0)).set_index("beta")
    rows = []
    for (inputs, fit), df in sides.items():
        for beta, g in (df.groupby("beta") if not df.empty else []):
            rows.append({"inputs": inputs, "refit": fit, "beta": beta, "seeds": len(g),
                         "edges": g["contributing_edges"].median(), "edges paper": paper.loc[beta, "edges_median"],
                         "RMSE": g["test_rmse"].median(), "RMSE paper": paper.loc[beta, "rmse_median"],
                         "worst RMSE": g["test_rmse"].max(),
                         "worse than the mean": int((g["test_rmse"] > target_sd).sum())})
    return ["## Grid refit on tied inputs (EF, 10 seeds, 5,000 epochs)", "",
            "`python scripts/studies/calibrate.py run refit` against the factorial's EF (standardized, plain refit) "
            "and the `run minmax` EF. Test RMSE in MPa; 'worse than the mean': runs whose test RMSE exceeds the "
            f"targets' standard deviation ({target_sd:.2f} MPa), i.e. worse than predicting a constant.", "",
            md(pd.DataFrame(rows), index=False), ""]


def refit_points_section(results: Path) -> list[str]:
    """Baseline test RMSE per seed with the grid refit on 256 order statistics or on all samples."""
    root = results / "refit-points"
    sides = [(d, "all samples (pykan)", usable_runs(root / d / "Baseline" / "model.grid_refit_points=null"))
             for d in ("superconductor", "concrete")]
    sides.insert(1, ("superconductor", "256 order statistics",
                     usable_runs(root / "superconductor" / "Baseline" / "model.grid_refit_points=256")))
    factorial = usable_runs(FACTORIAL / "Baseline")
    if not factorial.empty:  # the factorial ran before the option, at 256
        sides.append(("concrete", "256 order statistics (the factorial)", factorial[factorial["seed"] < 5]))
    rows = []
    for dataset, refit, df in sides:
        if df.empty:
            continue
        df = df.sort_values("seed")
        rows.append({"dataset": dataset, "refit": refit, "seeds": len(df),
                     "train RMSE median": df["train_rmse"].median(),
                     "test RMSE median": df["test_rmse"].median(), "test RMSE max": df["test_rmse"].max(),
                     "test RMSE per seed": " ".join(f"{v:.1f}" for v in df["test_rmse"]),
                     "edges": "/".join(str(int(v)) for v in sorted(df["contributing_edges"].unique()))})
    if not rows:
        return []
    return ["## Grid refit on all samples or on 256 order statistics (Baseline, full protocol)", "",
            "`python scripts/studies/calibrate.py run refit-points` (Superconductor seeds 0-4 on all samples, 0-2 on "
            "256; Concrete seeds 0-4 on all samples) against the factorial's Concrete Baseline seeds 0-4 (refit on "
            "256, the default when it ran). Test RMSE in the data's units (K, MPa).", "",
            md(pd.DataFrame(rows), index=False), ""]


def _run_label(df: pd.DataFrame) -> pd.Series:
    """'EX b=0.01 s2', 'Baseline s0': a column name per probed run."""
    return df["condition"] + df["beta"].map(lambda b: f" b={b:g}" if b else "") + " s" + df["seed"].astype(str)


def exit_gate_section(results: Path, pub: pd.DataFrame) -> list[str]:
    """The exit each seed chose, and the cell's medians, under each reading of the exit gate,
    next to today's reading (the factorial's seeds) and the published medians."""
    root = results / "exit-gate" / "concrete"
    readings = [("today: softmax pi, warmup for all", FACTORIAL, "default")]
    readings += [(f"train.{r}", root, f"model.grid_refit_points=256,train.{r}") for r in EXIT_READINGS]
    paper = pub.set_index(["condition", "beta"])
    rows = []
    for label, base, tag in readings:
        for condition in ("X", "FX", "EX", "EFX"):
            df = usable_runs(base / condition / tag)
            if df.empty:
                continue
            df = df[df["seed"].isin(EXIT_SEEDS) & df["beta"].isin(EXIT_BETAS)].sort_values("seed")
            for beta, g in df.groupby("beta"):
                published = paper.loc[(condition, beta)]
                rows.append({"reading": label, "condition": condition, "beta": beta, "seeds": len(g),
                             "exit per seed": " ".join(str(int(e)) for e in g["exit"]),
                             "edges": g["contributing_edges"].median(), "edges paper": published["edges_median"],
                             "depth": g["depth"].median(), "depth paper": published["depth_median"],
                             "RMSE": g["test_rmse"].median(), "RMSE paper": published["rmse_median"]})
    if not rows:
        return []
    return ["## The exit gate without egates: readings (X, FX; EX, EFX where a reading can change them)", "",
            "`python scripts/studies/calibrate.py run exit-gate`: Concrete at the factorial's protocol (grid refit on "
            "256 order statistics), beta "
            + ", ".join(map(str, EXIT_BETAS)) + ", seeds " + ", ".join(map(str, EXIT_SEEDS)) + ", 5,000 "
            "epochs, one reading changed at a time; today's rows are the same seeds of the factorial "
            f"(`{FACTORIAL.relative_to(ROOT)}`). `train.warmup_for=egates` leaves EX and EFX unchanged by construction "
            "(their warmup still applies), so only X and FX ran under it. Exit k uses trunk layers 0..k-1 (exit 0: one "
            "layer, 13 edges). Medians over seeds; RMSE in MPa.", "", md(pd.DataFrame(rows), index=False), ""]


def rollout_section(results: Path) -> list[str]:
    """The multi-step RMSE under each rollout protocol, from scripts/studies/rollout_probe.py's tables."""
    probe = results / "rollout" / "probe"
    if not (probe / "protocols.csv").exists():
        return []
    prot = pd.read_csv(probe / "protocols.csv")
    curve = pd.read_csv(probe / "curve.csv")
    prot["run"] = _run_label(prot)
    table = prot.pivot_table(index=["dataset", "protocol"], columns="run", values="rmse_raw", sort=False)
    sat = prot.groupby("dataset")[["saturation_raw", "saturation_std"]].median()
    one = prot.drop_duplicates("run").set_index("run")["one_step_rmse"]
    steps = curve[curve["h"].isin([1, 2, 5, 10, 20, 50])]
    steps = steps.assign(run=_run_label(steps))
    along = steps.pivot_table(index=["dataset", "h"], columns="run", values="rmse_std", sort=False)
    return ["## Multi-step test RMSE of the dynamical systems: the rollout protocol", "",
            "`python scripts/studies/calibrate.py run rollout` (Ikeda Baseline and EX at beta 0.01, Ecosystem "
            "Baseline, seeds 0-2, full protocol; the records' own test RMSE is one rollout over the whole test "
            "segment), then `scripts/studies/rollout_probe.py`, which free-runs each model from every test state. "
            f"Figure: [{probe}/curve.png](../{probe}/curve.png).", "",
            "One-step test RMSE (raw units): " + ", ".join(f"{r} {v:.2g}" for r, v in one.items()) + ".", "",
            "Saturation of a free rollout, sqrt(2 var) of the test segment: " + ", ".join(
                f"{d} {r.saturation_raw:.3g} raw ({r.saturation_std:.3g} standardized)"
                for d, r in sat.iterrows()) + ".", "",
            "RMSE after h steps (standardized units, mean over every start):", "", md(along), "",
            "The test RMSE each protocol records (raw units):", "", md(table), "",
            "The same as a share of saturation (standardized RMSE / standardized sqrt(2 var), in %):", "",
            (prot.assign(pct=100 * prot["rmse_std"] / prot["saturation_std"]).pivot_table(
                index=["dataset", "protocol"], columns="run", values="pct", sort=False).to_markdown(floatfmt=".0f")),
            ""]


def split_section(results: Path, pub: pd.DataFrame) -> list[str]:
    """Baseline test RMSE over seeds with a fixed and a per-seed split, next to the paper's."""
    base = pub[pub.condition == "Baseline"].iloc[0]
    rows = []
    for split, df in (("fixed split (data_seed=0), standardized inputs", usable_runs(results / "baseline_fixed-split")),
                      ("per-seed split, standardized inputs (the factorial)", usable_runs(FACTORIAL / "Baseline")),
                      ("per-seed split, min-max inputs",
                       usable_runs(results / "minmax-10seeds" / "concrete" / "Baseline"))):
        if not df.empty:
            r = df["test_rmse"]
            rows.append({"split": split, "seeds": len(r), "RMSE median": r.median(), "min": r.min(), "max": r.max()})
    if not rows:
        return []
    rows.append({"split": "paper", "seeds": 10, "RMSE median": base.rmse_median,
                 "min": base.rmse_min, "max": base.rmse_max})
    return ["## Fixed or per-seed split: Baseline test RMSE over seeds (5,000 epochs)", "",
            "`python scripts/studies/calibrate.py run split` and the factorial's Baseline.", "",
            md(pd.DataFrame(rows), index=False), ""]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run")
    r.add_argument("stage", choices=STAGES)
    r.add_argument("--seeds", default="0,1")
    r.add_argument("--results", default="results/calibration")
    rep = sub.add_parser("report")
    rep.add_argument("--results", default="results/calibration")
    rep.add_argument("--out", default="docs/CALIBRATION.md")
    a = p.parse_args(argv)
    return run(a) if a.action == "run" else report(a)


if __name__ == "__main__":
    sys.exit(main())
