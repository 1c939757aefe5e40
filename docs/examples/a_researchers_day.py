# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # A researcher's day with kanx
#
# Train a small sweep, load every record into pandas, compare conditions, draw a trained model
# and export its formula. This file is a notebook in jupytext's percent format: run it as a
# script (`python docs/examples/a_researchers_day.py`), or open it as a notebook with jupytext
# (`jupytext --to ipynb docs/examples/a_researchers_day.py`). `tests/test_examples.py` runs it in
# the full test tier.
#
# The dataset is the embedded default, z = sin(x + y^2) (the paper's Fig. 1), so nothing is
# downloaded. The runs are short (400 epochs, eager basis) to finish in a minute or two on a
# laptop (`KANX_EXAMPLE_EPOCHS` sets their length; the dataset trains 3000 epochs by default),
# so their numbers are not the paper's: they are real runs otherwise, not `+debug=quick` tries.

# %%
import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))  # a notebook's inline backend also works
import matplotlib.pyplot as plt

import kanx

ROOT = Path(os.environ.get("KANX_EXAMPLE_ROOT", "outputs/example"))  # where the records go
EPOCHS = int(os.environ.get("KANX_EXAMPLE_EPOCHS", "400"))

# %% [markdown]
# ## 1. Train a sweep
# Two conditions, the plain KAN (Baseline) and the full EFX, over two betas and three seeds:
# 1 + 2 x 3 ... Baseline ignores beta, so kanx trains it once per seed. The same command in a
# shell is `python -m kanx.train +condition=baseline,EFX "dataset.betas=[0.02,0.2]" seed=0,1,2 -m ...`
# A sweep that is interrupted resumes where it stopped: run the cell again.

# %%
command = [sys.executable, "-m", "kanx.train", "+condition=baseline,EFX", "dataset.betas=[0.02,0.2]", "seed=0,1,2",
           f"train.epochs={EPOCHS}", "train.compile=false", f"results_root={ROOT}", "-m"]
subprocess.run(command, check=True)

# %% [markdown]
# ## 2. Every record in one DataFrame
# `kanx.load_runs` is the analysis' own loader: a row per record, with the dataset, condition,
# beta, seed, status, test error, contributing edges, depth, exit and timing. Records that do not
# count (damaged, unfinished) are listed in `runs.attrs["skipped"]`, not silently dropped.

# %%
runs = kanx.load_runs(ROOT)
print(runs[["condition", "beta", "seed", "status", "test_rmse", "contributing_edges", "depth"]].to_string())
print("skipped:", runs.attrs["skipped"])

# %% [markdown]
# ## 3. Compare conditions
# The paper compares seed-medians per (condition, beta) cell: here, test error against size.

# %%
cells = (runs[runs["usable"]].groupby(["condition", "beta"])[["test_rmse", "contributing_edges"]]
         .median().reset_index())
print(cells.to_string(index=False))

fig, ax = plt.subplots(figsize=(4.5, 3.2))
for condition, cell in cells.groupby("condition"):
    ax.scatter(cell["contributing_edges"], cell["test_rmse"], label=condition)
ax.set_xlabel("contributing edges (seed median)")
ax.set_ylabel("test RMSE (seed median)")
ax.set_yscale("log")
ax.legend()
fig.tight_layout()
fig.savefig(ROOT / "conditions.png", dpi=120)

# %% [markdown]
# ## 4. Draw one trained model
# `kanx.load_run` gives a run's record, config and model; `run.draw()` draws it as in the paper's
# Fig. 1 and returns the figure (a new one, or that of `ax=` of yours; `kanx.draw.draw_run` draws the
# same from a run folder). We take the EFX run with the median test error at beta 0.2.

# %%
efx = runs[(runs["condition"] == "EFX") & (runs["beta"] == 0.2) & runs["usable"]].sort_values("test_rmse")
median_path = efx.iloc[len(efx) // 2]["path"]
run = kanx.load_run(ROOT / Path(median_path).parent)
print(run.record["metrics"]["test_rmse"], run.record["metrics"]["contributing_edges"])

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), width_ratios=(1.4, 1))
run.draw(ax=left, title="EFX, beta 0.2 (median seed)")
curves = run.history  # the training curves, a DataFrame
right.plot(curves["epoch"], curves["loss"], label="training loss")
right.set_xlabel("epoch")
right.set_ylabel("training loss")
right.set_yscale("log")
# The held-out error at each row, in the data's units: test_rmse here, val_rmse for a run with
# dataset.val_fraction (then the curve shows no test error: tune on that split, not on the test set).
held_out = right.twinx()
held_out.plot(curves["epoch"], curves["test_rmse"], color="C1", label="test RMSE")
held_out.set_ylabel("test RMSE")
right.legend(handles=[*right.get_lines(), *held_out.get_lines()], loc="upper right", fontsize=8)
fig.tight_layout()
fig.savefig(ROOT / "model_and_curve.png", dpi=120)

# %% [markdown]
# ## 5. Export a formula
# Each contributing edge is fitted by a symbolic primitive, and the edges are composed into one
# expression per output (`kanx.formula` on the command line does the same).

# %%
formula = run.formula()
print(formula)
print(formula.metrics)
