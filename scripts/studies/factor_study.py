"""The studies of input gates (I) and node gates (N) beyond the paper (issue #38), at the
paper's protocol, each read beside the paper's EFX runs of the same datasets:

  inputs  which of Concrete's 13 inputs (8 raw, 5 derived) and Superconductor's 5 survive with
          EFXI across beta, and at what test RMSE and size against EFX;
  nodes   EFX against EFXN on one dataset per family (Nguyen F10, whose 2 sin(x) cos(y) =
          sin(x + y) + sin(x - y) needs two hidden units; Ikeda; Ecosystem; Concrete;
          Superconductor): test RMSE, contributing edges, depth, hidden units kept, and HV.

    python scripts/studies/factor_study.py run   STUDY [--root DIR] [--jobs N] [--group G] [--pack-size N] [--seeds N]
                                                 [--scale smoke] [--retrain-compare] [--no-table] [OVERRIDE ...]
    python scripts/studies/factor_study.py table STUDY [--root DIR] [--paper results/paper]

`run` trains the study's condition on its datasets with their betas and protocol from conf/
(`python -m kanx.reproduce --datasets ... --conditions EFXI --results ROOT --no-analysis`, seeds
0-9 unless --seeds); finished runs are skipped, so `run` resumes. The comparison condition is
the paper's (results/paper) unless `--retrain-compare` trains it into the study's root too, where
it replaces the paper's in the tables: the paper's Concrete and Superconductor EFX records (and
Nguyen F10's seeds 0-4) kept no weights when the node-gates study ran (retrained with weights since,
issue #47), so their hidden units were unknown until then. `table`
prints the study's tables and writes them to ROOT/study.md: per dataset the cells of both
conditions (seed-medians of test RMSE, contributing edges and depth; with `nodes`, the hidden
units an input-to-output path runs through, read from each run's model.pt, a dash where a run
kept no weights), the inputs each EFXI cell keeps (`inputs`), and the normalized HV on the
paper's scale (kanx.analyze.studies). The distractor study (Nguyen F9 and F10 with distractor
inputs) is distractors.py.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from kanx.analyze.inputs import selected_inputs, selected_inputs_markdown
from kanx.analyze.studies import cells_markdown, hv_markdown, runs_beside_paper, write_study_table
from kanx.cli import ArgumentParser, at_least, prog
from kanx.errors import ConfigError, StorageError, report

SCRIPT = "scripts/studies/factor_study.py"


@dataclass(frozen=True)
class Study:
    datasets: tuple[str, ...]
    condition: str  # what the study trains
    compare: str  # the paper's condition it is read against
    root: str
    title: str


STUDIES = {
    "inputs": Study(("concrete", "superconductor"), "EFXI", "EFX", "results/studies/input-gates",
                    "Input gates on real data: EFXI against EFX"),
    "nodes": Study(("nguyen_f10", "ikeda", "ecosystem", "concrete", "superconductor"), "EFXN", "EFX",
                   "results/studies/node-gates", "Node gates: EFXN against EFX, one dataset per family"),
}


def run(study: Study, root: Path, a: argparse.Namespace) -> int:
    from kanx.reproduce import main as reproduce

    conditions = [study.condition, *([study.compare] if a.retrain_compare else [])]
    args = ["--datasets", *study.datasets, "--conditions", *conditions, "--results", str(root),
            "--no-analysis", "--jobs", str(a.jobs), "--scale", a.scale, *(["--group", a.group] if a.group else []),
            *(["--pack-size", str(a.pack_size)] if a.pack_size is not None else []),
            *([f"seed={','.join(map(str, range(a.seeds)))}"] if a.seeds is not None else []), *a.overrides]
    return reproduce(args) or 0


def hidden_units(paths) -> dict[str, float]:
    """Hidden units kept (kanx.kan.structure.hidden_units_kept) of every run whose folder holds
    model.pt, by record path."""
    from kanx.kan.structure import model_hidden_units_kept
    from kanx.load import load_run
    from kanx.vocab import MODEL

    units = {}
    for path in paths:
        folder = Path(path).parent
        if (folder / MODEL).exists():
            trained = load_run(folder)
            (units[path],) = model_hidden_units_kept(trained.model, trained.gate_estimator)
    return units


def table(name: str, study: Study, root: Path, paper: Path) -> str:
    runs = runs_beside_paper(root, paper, study.datasets)
    conditions = (study.compare, study.condition)
    mine = runs[runs["condition"].isin(conditions)]
    extra = {"hidden units": hidden_units(mine["path"])} if name == "nodes" else None
    lines = [f"# {study.title}", "", f"Study root {root}, beside the paper's records in {paper} (dynamical systems "
                                     "read at the paper's rollout horizon).", ""]
    for dataset in study.datasets:
        lines += [f"## {dataset}", "", cells_markdown(runs, dataset, conditions, extra)]
        if name == "inputs":
            kept = selected_inputs(runs[runs["dataset"] == dataset])
            if not kept.empty:
                lines += ["Runs keeping each input / usable runs:", "", selected_inputs_markdown(kept, dataset)]
    lines += ["## Normalized hypervolume (the paper's scale: above 1 beats every gated condition of the paper's eight)",
              "", hv_markdown(runs, conditions)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    head, rest = __doc__.split("\n\n", 1)
    p = ArgumentParser(prog=prog(SCRIPT), description=head, epilog=rest,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("run", "table"))
    p.add_argument("study", choices=tuple(STUDIES))
    p.add_argument("--root", type=Path, default=None,
                   help="the study's results root (default results/studies/<input-gates|node-gates>, "
                        "outputs/studies-smoke/... with --scale smoke)")
    p.add_argument("--paper", type=Path, default=Path("results/paper"),
                   help="the paper's records (default results/paper)")
    p.add_argument("--jobs", type=at_least(1), default=1, help="packs trained at once (run)")
    p.add_argument("--group", default=None,
                   help="how far packs mix sweeps (run; kanx.reproduce's --group, default auto)")
    p.add_argument("--pack-size", type=at_least(1), default=None,
                   help="most runs per pack (run; default train.pack_size)")
    p.add_argument("--retrain-compare", action="store_true",
                   help="run: train the comparison condition (EFX) into the study's root too, with weights")
    p.add_argument("--no-table", action="store_true", help="run: train only (e.g. in a time-boxed GPU job), no table")
    p.add_argument("--seeds", type=at_least(1), default=None, help="seeds 0..N-1 (default: conf/'s, 0-9)")
    p.add_argument("--scale", choices=("full", "smoke"), default="full",
                   help="smoke: kanx.reproduce's toy scale (2 epochs, 2 seeds)")
    p.add_argument("overrides", nargs="*", help="more Hydra overrides for every sweep")
    a = p.parse_intermixed_args(argv)
    study = STUDIES[a.study]
    # toy runs stay apart
    root = a.root or (Path(study.root) if a.scale == "full" else Path("outputs/studies-smoke") / Path(study.root).name)
    if a.command == "table" and a.overrides:
        return report(SCRIPT, f"table takes no overrides ({' '.join(a.overrides)}): they are for run")
    if a.command == "table" and not root.is_dir():
        return report(SCRIPT, f"--root {root} is not a folder: give the study's results root")
    if not (a.command == "run" and a.no_table) and not a.paper.is_dir():  # checked before training, not after it
        return report(SCRIPT, f"--paper {a.paper} is not a folder: give the paper's results root (default "
                      "results/paper)")
    if a.command == "run":
        rc = run(study, root, a)
        if rc or a.no_table:
            return rc
    try:
        text = table(a.study, study, root, a.paper)
        write_study_table(root, text)
    except ConfigError as e:
        return report(SCRIPT, e)
    except StorageError as e:
        return report(SCRIPT, e, code=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
