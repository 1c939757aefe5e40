"""Issue #52, pattern 3: why Concrete's X and FX take exit 0 (13 edges) at beta >= 0.1, where
the paper keeps exit 1 (182 and 195 edges) at every beta from 0.001 to 0.5.

    python scripts/studies/exit_flip.py flips [--results results/paper] [--dataset concrete]
    python scripts/studies/exit_flip.py trace [--results results/paper] [--run concrete/X/default/beta=0.5,seed=0]
    python scripts/studies/exit_flip.py run   [--results results/calibration/exit-flip]
    python scripts/studies/exit_flip.py arms  [--results results/calibration/exit-flip] [--paper results/paper]

`flips` reads the committed training curves (each run's metrics.csv.gz: the exit selected and
the exit probabilities pi_k at every logged epoch) and prints, per condition and beta, each
seed's final exit with the epoch of its last change, and how low pi_0 fell after the complexity
term came on (beta onset, the end of warmup), with the gradient that the complexity term then
puts on exit 0's logit:

    d(beta s L_C)/d(logit_0) = beta s pi_0 (DL(0) - E_pi[DL])       (Eq. reachability-mdl-compact,
                                                                    pi = softmax(logits))

s the complexity scale (train.complexity_scale, log n / n) and DL(k) the description length of
path k, read from the curve's own L_C at the epochs where one exit holds all the probability.
Set beside Adam's eps (1e-8): a gradient far below it moves a logit by far less than the
learning rate a step, one near it by a good share of it.

`trace` prints one run's pi_0 and exit over its epochs. `run` trains the study's arms on raw
targets (`dataset.standardize_targets=false`): Baseline and F at seeds 0-4 (the rows that may
choose a protocol), X and FX at beta 0.001 to 0.5, seeds 0-2 (the cells of the departure, to check
the mechanism only), and Nguyen F5 and F7 EF and EFX at beta 0.001 and 0.01, seeds 0-2 (the
pattern's Nguyen cells, checked for the bias-term edge that raw targets need). `arms` sets
their seed-medians beside the committed records of the same seeds and the published values.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from kanx.analyze.published import in_published_range, paper_published
from kanx.history import read_history
from kanx.kan.objective import complexity_scale
from kanx.record import Record
from kanx.reproduce import train_in_turn

ROOT = Path(__file__).resolve().parents[2]
ADAM_EPS = 1e-8  # kanx.optim.Adam's default, as torch.optim.Adam's
RAW = "dataset.standardize_targets=false"
# (datasets, conditions, betas or None for beta 0, seeds): Baseline and F choose; the rest only check.
ARMS = (("concrete", "X,FX", "0.1,0.5", "0,1,2"), ("concrete", "baseline,F", None, "0,1,2,3,4"),
        ("nguyen_f5,nguyen_f7", "EF,EFX", "0.001,0.01", "0,1,2"), ("concrete", "X,FX", "0.001,0.01", "0,1,2"))


# ------------------------------------------------------------------ the committed curves


def run_dirs(results: Path, dataset: str, condition: str) -> list[Path]:
    """The finished runs of a condition under ``results``, in every sweep folder (the paper's
    ``default``, or the raw arms' ``dataset.standardize_targets=False``)."""
    return sorted(p.parent for p in (results / dataset / condition).glob("*/*/record.json"))


def beta_seed(run_dir: Path) -> tuple[float, int]:
    """(beta, seed) from a run folder named ``beta=B,seed=S``."""
    keys = dict(part.split("=", 1) for part in run_dir.name.split(","))
    return float(keys["beta"]), int(keys["seed"])


def description_lengths(curve: pd.DataFrame, exits: int) -> dict[int, float]:
    """DL(k) + the exit gate's cost for each exit k that held (almost) all of pi at a logged
    epoch: L_C there, the curve's ``lc`` column."""
    dl = {}
    for k in range(exits):
        held = curve[curve[f"pi_{k}"] > 1 - 1e-6]
        if len(held):
            dl[k] = float(held["lc"].iloc[-1])
    return dl


def scale_of(run_dir: Path) -> float:
    """The factor s in front of beta L_C that the run trained with (its record's config)."""
    record = Record.read(run_dir)
    train = record.config["train"]
    return complexity_scale(train["complexity_scale"], record.fields["n_train"], train["batch_size"])


def flip_of(run_dir: Path) -> dict:
    """One run's exit story: its final exit, the epoch of its last change, and the lowest pi_0
    after beta onset (with pi and beta there, for ``gradient_at_low``)."""
    curve = read_history(run_dir)
    exits = sum(c.startswith("pi_") for c in curve.columns)
    changes = curve.index[curve["exit"].ne(curve["exit"].shift())][1:]
    after = curve[curve["beta"] > 0]
    low = after.loc[after["pi_0"].idxmin()] if len(after) else curve.iloc[-1] * math.nan  # beta 0: no onset
    beta, seed = beta_seed(run_dir)
    return {"beta": beta, "seed": seed, "exit": int(curve["exit"].iloc[-1]),
            "last_change": int(curve.loc[changes[-1], "epoch"]) if len(changes) else 0,
            # the objective (data + beta s L_C) at the lowest pi_0, exit 1 held, and at the end
            "loss_before": float(low["loss"]),
            "loss_end": float(curve["loss"].iloc[-1]),
            "pi0_min_epoch": low["epoch"], "scale": scale_of(run_dir),
            "onset": int(after["epoch"].iloc[0]) if len(after) else 0,
            **{f"pi_{k}": float(low[f"pi_{k}"]) for k in range(exits)}, "dl": description_lengths(curve, exits)}


def gradient_at_low(run: pd.Series, dl: dict[int, float]) -> float:
    """|d(beta s L_C)/d(logit_0)| = beta s pi_0 |DL(0) - E_pi[DL]| at the run's lowest pi_0, with
    E_pi[DL] read as DL of the exit that holds almost all of pi there (pi_k > 1 - 1e-6 at every
    such low point of the study's runs)."""
    pis = {int(c[3:]): run[c] for c in run.index if c.startswith("pi_") and not math.isnan(run[c])}
    if not pis:
        return math.nan
    held = max(pis, key=lambda k: pis[k])
    if 0 not in dl or held not in dl:
        return math.nan
    return run["beta"] * run["scale"] * pis[0] * abs(dl[0] - dl[held])


def pooled_lengths(runs: pd.DataFrame) -> dict[int, float]:
    """DL(k) of a condition without egates, the same in every run (every edge open): pooled over
    the runs that held each exit."""
    pooled: dict[int, float] = {}
    for dl in runs["dl"]:
        pooled.update(dl)
    return pooled


def flips(results: Path, dataset: str, conditions=("X", "FX", "EX", "EFX")) -> pd.DataFrame:
    """Per condition and beta > 0: every seed's exit@last-change, the median lowest pi_0 after
    onset, and (conditions without egates, whose DL(k) are fixed) the complexity gradient there."""
    rows = []
    for condition in conditions:
        runs = pd.DataFrame([flip_of(d) for d in run_dirs(results, dataset, condition)])
        if runs.empty:
            continue
        dl = {} if "E" in condition else pooled_lengths(runs)
        if "E" not in condition and 0 not in dl:  # no run here held exit 0: the paper's runs of the condition did
            paper = pd.DataFrame([flip_of(d) for d in run_dirs(ROOT / "results/paper", dataset, condition)])
            dl = pooled_lengths(paper) | dl
        runs["gradient"] = [gradient_at_low(run, dl) for _, run in runs.iterrows()]
        for beta, cell in runs[runs["beta"] > 0].groupby("beta"):
            cell = cell.sort_values("seed")
            gradient = cell["gradient"].median() / ADAM_EPS
            pull = "n/a (edges gated)" if "E" in condition else f"{gradient:.2g}"
            rows.append({"condition": condition, "beta": beta, "seeds": len(cell),
                         "exit@last change, per seed": " ".join(f"{e}@{c}" for e, c in
                                                                zip(cell["exit"], cell["last_change"], strict=True)),
                         "lowest pi_0 after onset": f"{cell['pi_0'].median():.1e}",
                         "at epoch": int(cell["pi0_min_epoch"].median()),  # beta > 0: every run has an onset
                         "gradient on logit_0 there / eps": pull,
                         "objective at lowest pi_0 -> at the end, flipped seeds": loss_change(cell)})
    return pd.DataFrame(rows)


def loss_change(cell: pd.DataFrame) -> str:
    """Median training objective at the lowest pi_0 (the exit held then) and at the end, over the
    seeds whose exit changed after beta onset (the late flips); "" where none did."""
    flipped = cell[cell["last_change"] > cell["onset"]]
    if flipped.empty:
        return ""
    return f"{flipped['loss_before'].median():.3g} -> {flipped['loss_end'].median():.3g} ({len(flipped)} seeds)"


def trace(run_dir: Path, every: int = 250) -> pd.DataFrame:
    curve = read_history(run_dir)
    keep = curve[(curve["epoch"] % every == 0) | (curve["exit"].ne(curve["exit"].shift()))]
    return keep[["epoch", "beta", "tau_x", *[c for c in curve.columns if c.startswith("pi_")], "exit", "lc",
                 "data_loss"]]


# ------------------------------------------------------------------ the raw-target arms


def train(results: Path) -> int:
    """Every arm, one training process after another (records resume if interrupted)."""
    return train_in_turn([[f"dataset={datasets}", f"+condition={conditions}", RAW,
                           *([f"beta={betas}"] if betas else []), f"seed={seeds}", f"results_root={results}",
                           "hydra.launcher.group=all"] for datasets, conditions, betas, seeds in ARMS], "exit_flip.py")


def arm_table(results: Path, paper: Path) -> pd.DataFrame:
    """Seed-medians of the raw-target arms beside the committed (standardized) records of the
    same cells and seeds, and the published cell, for every dataset the arms trained."""
    import kanx

    raw = kanx.load_runs(results)
    rows = []
    for dataset in sorted(raw["dataset"].unique()):
        ours = kanx.load_runs(paper / dataset)
        published = paper_published(dataset)
        for (condition, beta), cell in raw[raw["dataset"] == dataset].groupby(["condition", "beta"]):
            same = ours[(ours["condition"] == condition) & (ours["beta"] == beta)
                        & ours["seed"].isin(cell["seed"]) & ~ours["superseded"]]
            pub = published[(published["condition"] == condition) & (published["beta"] == beta)]
            rows += [arm_row(dataset, condition, beta, arm, runs, published)
                     for arm, runs in (("raw targets", cell), ("standardized (committed)", same))]
            if len(pub):
                p = pub.iloc[0]
                rows.append({"dataset": dataset, "condition": condition, "beta": beta, "arm": "paper", "seeds": 10,
                             "exit per seed": "", "RMSE": f"{p.rmse_median} [{p.rmse_min}, {p.rmse_max}]",
                             "edges": f"{p.edges_median:g} [{p.edges_min:g}, {p.edges_max:g}]",
                             "bias terms": "", "depth": f"{p.depth_median:g} [{p.depth_min:g}, {p.depth_max:g}]",
                             "in range (RMSE, edges, depth)": ""})
    return pd.DataFrame(rows)


def arm_row(dataset: str, condition: str, beta: float, arm: str, runs: pd.DataFrame, published: pd.DataFrame) -> dict:
    """One arm's seed-medians of a cell (RMSE at 3 significant digits: MPa or Nguyen's 1e-4s),
    and whether each lies in the published [min, max], read at the paper's printed precision as
    kanx's fidelity table reads it (kanx.analyze.published.in_published_range); blank where the
    paper has no such cell."""
    medians = {m: float(runs[c].median()) for m, c in (("rmse", "test_rmse"), ("edges", "contributing_edges"),
                                                          ("depth", "depth"))}
    inside = [in_published_range(published, condition, beta, m, v) for m, v in medians.items()]
    return {"dataset": dataset, "condition": condition, "beta": beta, "arm": arm, "seeds": len(runs),
            "exit per seed": " ".join(str(int(e)) for e in runs.sort_values("seed")["exit"]),
            "RMSE": f"{medians['rmse']:.3g}", "edges": medians["edges"],
            "bias terms": float(runs["bias_terms"].median()), "depth": medians["depth"],
            "in range (RMSE, edges, depth)": "" if inside[0] is None else
            ", ".join("yes" if ok else "no" for ok in inside)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="exit_flip.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("flips", help="each seed's exit and when it last changed, from the committed curves")
    p.add_argument("--results", type=Path, default=ROOT / "results/paper")
    p.add_argument("--dataset", default="concrete")
    p = sub.add_parser("trace", help="one run's exit probabilities over its epochs")
    p.add_argument("--results", type=Path, default=ROOT / "results/paper")
    p.add_argument("--run", default="concrete/X/default/beta=0.5,seed=0")
    p = sub.add_parser("run", help="train the raw-target arms")
    p.add_argument("--results", type=Path, default=ROOT / "results/calibration/exit-flip")
    p = sub.add_parser("arms", help="the arms' seed-medians beside the committed and published cells")
    p.add_argument("--results", type=Path, default=ROOT / "results/calibration/exit-flip")
    p.add_argument("--paper", type=Path, default=ROOT / "results/paper")
    args = parser.parse_args(argv)
    if args.command == "run":
        return train(args.results)
    table = {"flips": lambda: flips(args.results, args.dataset),
             "trace": lambda: trace(args.results / args.run),
             "arms": lambda: arm_table(args.results, args.paper)}[args.command]()
    with pd.option_context("display.float_format", "{:.3g}".format):
        print(table.to_markdown(index=False) if args.command != "trace" else table.to_string(index=False))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
