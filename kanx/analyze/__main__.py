"""`python -m kanx.analyze RESULTS_ROOT`: tables, figures and report.md from run records.

    python -m kanx.analyze outputs/                                  # report at outputs/report.md
    python -m kanx.analyze outputs/ --out reports/ --formats png
    python -m kanx.analyze outputs/ --curves [all]                   # + training curves (metrics.csv): per cell
                                                                     # [and per run]
    python -m kanx.analyze outputs/ --rollout-horizon recorded       # Ikeda/Ecosystem RMSE as trained (kanx's reading),
                                                                     # not the paper's
    python -m kanx.analyze outputs/ --rollout-horizon whole          # Ikeda/Ecosystem RMSE over whole-segment rollouts
    python -m kanx.analyze outputs/ --no-paper                       # without the paper's published values beside
    python -m kanx.analyze outputs/ --published mine.csv --published-dataset mydata [--published-hv hv.csv]
        [--hv-tol 0.05]

This is the only place that writes files.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from kanx.atomic import atomic_write_bytes, cannot_write
from kanx.cli import ArgumentParser, prog
from kanx.errors import ConfigError, StorageError, report

from .collect import load_runs
from .curve_figures import CURVES_DIR, DRAWN_INDEX, curve_figures
from .labels import group_label
from .published import HV_TOLERANCE, PAPER_HV, read_published, read_published_hv
from .readings import paper_readings
from .report import Artifacts, build_artifacts, config_mix_line
from .select import draw_median_models
from .tables import format_beta

FIGURE_FORMATS = ("png", "pdf", "svg")


def write_artifacts(art: Artifacts, out: Path, formats) -> Path:
    """Write every text, every figure in each format and ``report.md`` below ``out``."""
    for rel, text in art.texts.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for stem, fig in art.figures.items():
        (out / stem).parent.mkdir(parents=True, exist_ok=True)
        for ext in formats:
            metadata = {"CreationDate": None} if ext == "pdf" else None
            fig.savefig(out / f"{stem}.{ext}", dpi=150, metadata=metadata)
    report = out / "report.md"
    report.write_text(art.report)
    return report


def _horizon(text: str) -> int | str:
    if text in ("whole", "paper", "recorded"):
        return text
    try:
        steps = int(text)
    except ValueError:
        steps = 0
    if steps < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rollout horizon: give paper, recorded, whole or a whole "
                                         "number of steps >= 1 (e.g. 10)")
    return steps


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a tolerance: give a number >= 0 (e.g. 0.05)")
    return value


def horizons_of(choice: int | str):
    """What `load_runs` takes for a --rollout-horizon choice: the paper's reading per dataset,
    None (as recorded), or one horizon for every dataset."""
    return {"paper": paper_readings(), "recorded": None}.get(choice, choice) if isinstance(choice, str) else choice


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(prog=prog("kanx.analyze"), description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path, metavar="RESULTS_ROOT", help="folder searched for */record.json")
    parser.add_argument("--out", type=Path, help="output folder (default: RESULTS_ROOT)")
    parser.add_argument("--formats", default="png,pdf", help="figure formats, comma-separated (default: png,pdf)")
    parser.add_argument("--rollout-horizon", type=_horizon, default="paper", metavar="paper|recorded|H|whole",
                        help="the reading of Ikeda's and Ecosystem's multi-step test RMSE in the tables: paper "
                             "(default) is the rung settled as the paper's (kanx/analyze/paper/readings.csv: 200 steps "
                             "on Ikeda, the whole test segment on Ecosystem), and the report adds kanx's reading (as "
                             "recorded) in a section of its own; recorded is the horizon each run was trained with (10 "
                             "on Ikeda, 50 on Ecosystem); H reads rollouts of H steps tiling the test segment (a rung "
                             "of the records' rollout curve: 1, 2, 5, 10, 20, 50, 100, 200, 500) and whole one rollout "
                             "over the segment. Records without that reading are skipped and listed")
    parser.add_argument("--paper", action=argparse.BooleanOptionalAction, default=True,
                        help="set the paper's published tables (shipped with kanx) "
                             "beside every dataset that has them (default: on)")
    parser.add_argument("--published", type=Path, metavar="CSV",
                        help="published absolute results of one dataset to compare with "
                        "(your own, or in place of the paper's for that dataset)")
    parser.add_argument(
        "--published-dataset",
        "--dataset",
        dest="published_dataset",
        metavar="NAME",
        help="dataset of --published (default: the only dataset in the records)",
    )
    parser.add_argument(
        "--published-hv",
        type=Path,
        metavar="CSV",
        help="published normalized HV of --published-dataset as 'condition,hv', compared per condition (default: the "
             "paper's, for a dataset that is a family of its own; the paper's HV table is set beside the reproduced "
             "one by family anyway)",
    )
    parser.add_argument(
        "--hv-tol",
        type=_tolerance,
        default=HV_TOLERANCE,
        help="tolerance on normalized HV (default: %(default)s)",
    )
    parser.add_argument(
        "--curves",
        nargs="?",
        const="cells",
        choices=("cells", "all"),
        help="also draw the training curves (metrics.csv) as PNGs in figures/curves/: per "
             "(dataset, condition, beta) cell with its seeds overlaid; `--curves all` "
             "also one per run (about 0.3 s a figure: thousands for the whole paper)",
    )
    parser.add_argument(
        "--draw",
        metavar="DATASET",
        help="also draw the median-seed model of each condition of DATASET into the report (needs the saved models)",
    )
    return parser.parse_args(argv)


def append_model_drawings(report: Path, root: Path, dataset: str) -> None:
    """Draw the median-seed model per condition (kanx.draw, which imports torch: only on
    request) and add them to the report."""
    files = draw_median_models(root, dataset, report.parent / "figures" / "models", formats=("png",), combined=True)
    lines = ["", f"## Median-seed models: {dataset}", ""]
    lines += [f"![{f.stem}]({f.relative_to(report.parent).as_posix()})" for f in files
              if f.stem.endswith("median_models")]
    lines += [f"- [{f.stem}]({f.relative_to(report.parent).as_posix()})" for f in files
              if not f.stem.endswith("median_models")]
    with report.open("a") as fh:
        fh.write("\n".join(lines) + "\n")


CURVES_TEXT = """\
From each run's metrics.csv (a row every `train.log_every` epochs): training loss, data loss, \
L_C, open gates and, with X, the exit gate's pi and temperature tau_x. Per (dataset, condition, \
beta) cell the seeds are overlaid (pi: each seed's probability of the exit it selects at the \
end); per run (`--curves all`) every exit's pi is drawn. The dotted line marks the end of the \
warmup (the last logged epoch before beta is in force)."""


def read_drawn(index: Path) -> dict[str, str]:
    """The curve figures drawn before (stem -> signature); empty where the index is missing or unreadable."""
    try:
        drawn = json.loads(index.read_text())
    except (OSError, ValueError):
        return {}
    return drawn if isinstance(drawn, dict) else {}


def append_curves(report: Path, runs, root: Path, out: Path, per_run: bool) -> tuple[int, int, list[tuple[str, str]]]:
    """Draw the training curves (kanx.analyze.curve_figures) as PNGs below ``out`` and list them in
    the report; saved one at a time, since the whole paper has thousands. A figure whose PNG is
    there and whose signature (title, curves, drawing code) is the one DRAWN_INDEX holds for it is
    not drawn again: a second analysis of the same records draws nothing. Returns the count, how
    many were drawn, and the damaged curves left out, (run folder, why), which the report lists too."""
    skipped: list[tuple[str, str]] = []
    lines, count, dataset_shown = ["", "## Training curves", "", CURVES_TEXT, ""], 0, None
    index = out / CURVES_DIR / DRAWN_INDEX
    before, now, redrawn = read_drawn(index), {}, 0
    for c in curve_figures(runs, root, per_run, skipped):
        path = out / f"{c.stem}.png"
        if before.get(c.stem) != c.signature or not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            c.draw().savefig(path, dpi=100)
            redrawn += 1
        now[c.stem] = c.signature
        count += 1
        link = path.relative_to(out).as_posix()
        if c.seed is None:
            if c.dataset != dataset_shown:
                lines += [*([""] if dataset_shown else []), f"**{group_label(c.dataset)}**", ""]
                dataset_shown = c.dataset
            lines.append(f"- {c.condition}, β = {format_beta(c.beta)}: [seeds overlaid]({link})")
            first_run = True
        else:  # the cell's runs follow it, on its line
            lines[-1] += f"{' · runs:' if first_run else ''} [seed {c.seed}]({link})"
            first_run = False
    if not count:
        lines.append("No run below the results root has a usable metrics.csv (runs from before kanx wrote training "
                     "curves, or damaged ones).")
    if skipped:
        lines += ["", f"Damaged training curves, not drawn ({len(skipped)}; the runs' records still count):", ""]
        lines += [f"- `{folder}`: {why}" for folder, why in skipped]
    with report.open("a") as fh:
        fh.write("\n".join(lines) + "\n")
    if now:
        atomic_write_bytes(index, json.dumps({**before, **now}, indent=0, sort_keys=True).encode())
    return count, redrawn, skipped


def print_config_mixes(mixes: list[dict], at_most: int = 10) -> None:
    """Say on the terminal, not only in the report, that some cells held records of more than
    one config: averaging two protocols silently is the mistake this guards against."""
    if not mixes:
        return
    records = len({p for m in mixes for p in m["left_out"]})
    cells = len({(m["dataset"], m["condition"], m["beta"]) for m in mixes})
    print(f"warning: {cells} cell{'s hold' if cells > 1 else ' holds'} records of more than one config; each keeps the "
          f"config that covers the most seeds, {records} record{'s' * (records > 1)} of other configs left out "
          "(report.md lists them all; differences read kept vs left out):")
    for m in mixes[:at_most]:
        print("  " + config_mix_line(m, at_most=2).replace("`", ""))
    if len(mixes) > at_most:
        print(f"  ... and {len(mixes) - at_most} more")


def short_reading_runs(root: Path, runs, horizons):
    """The dynamical systems' records at kanx's reading (as recorded), when the tables read them at
    the paper's (a per-dataset mapping); None otherwise."""
    if not isinstance(horizons, dict):
        return None
    dynamical = sorted(d for d in runs.loc[runs["test_rmse_one_step"].notna(), "dataset"].unique() if d in horizons)
    return load_runs(root, rollout_horizon=None, datasets=dynamical) if dynamical else None


def figure_formats(text: str) -> tuple[str, ...]:
    """--formats as a tuple of FIGURE_FORMATS; ConfigError for an unknown one or none."""
    formats = tuple(f.strip().lower() for f in text.split(",") if f.strip())
    bad = [f for f in formats if f not in FIGURE_FORMATS]
    if bad or not formats:
        what = "not " + ",".join(bad) if bad else "names no format"
        raise ConfigError(f"--formats {text!r}: {what}; choose from {','.join(FIGURE_FORMATS)}")
    return formats


def check_args(args: argparse.Namespace) -> None:
    """What can be told wrong with the options before any record is read. Raises ConfigError."""
    if args.published is None:
        options = {"--published-dataset": args.published_dataset, "--published-hv": args.published_hv}
        given = [name for name, value in options.items() if value is not None]
        if given:
            raise ConfigError(f"{given[0]} is for --published CSV, which is not given")
    if not args.root.is_dir():
        raise ConfigError(f"{args.root} is not a folder")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a file: give a folder (created if missing)")


def check_datasets(args: argparse.Namespace, datasets) -> str | None:
    """The dataset --published is of (None without --published), and --draw's, checked against
    the datasets of the records. Raises ConfigError."""
    names = ", ".join(datasets)
    for option, dataset in (("--published-dataset", args.published_dataset), ("--draw", args.draw)):
        if dataset is not None and dataset not in datasets:
            raise ConfigError(f"{option} {dataset}: no record of it below {args.root} (its datasets: {names})")
    if args.published is None or args.published_dataset is not None:
        return args.published_dataset
    if len(datasets) != 1:
        raise ConfigError(f"--published needs --published-dataset NAME: the records hold {names}")
    return datasets[0]


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        formats = figure_formats(args.formats)
        check_args(args)
        published = read_published(args.published) if args.published is not None else None
        published_hv = read_published_hv(args.published_hv) if args.published_hv is not None else None
    except ConfigError as e:
        return report("kanx.analyze", e)
    horizons = horizons_of(args.rollout_horizon)
    runs = load_runs(args.root, rollout_horizon=horizons)
    skipped = runs.attrs["skipped"]
    if runs.empty:
        why = f"; the first: {skipped[0][0]}: {skipped[0][1]}" if skipped else ""
        return report("kanx.analyze", f"no completed record.json below {args.root} counts "
                      f"({len(skipped)} skipped{why})", code=1)
    try:
        dataset = check_datasets(args, sorted(runs["dataset"].unique()))
    except ConfigError as e:
        return report("kanx.analyze", e)
    try:
        return write_report(args, runs, formats, horizons, published, published_hv, dataset)
    except ConfigError as e:  # --draw: a median run whose model cannot be loaded
        return report("kanx.analyze", e)
    except OSError as e:  # the output folder cannot be written (a full disk, a read-only file system)
        error = e if isinstance(e, StorageError) else cannot_write(Path(e.filename or args.out or args.root), e)
        return report("kanx.analyze", error, code=1)


def write_report(args: argparse.Namespace, runs, formats, horizons, published, published_hv, dataset) -> int:
    """Build the report of ``runs`` and write it with its tables and figures (main's work once
    every option is checked)."""
    skipped = runs.attrs["skipped"]
    print_config_mixes(runs.attrs.get("config_mixes", []))

    hv_source = ""
    if published is not None:
        if published_hv is not None:
            hv_source = f"`{args.published_hv.name}`"
        elif dataset in PAPER_HV:  # a one-dataset family of the paper: its HV column, checked per condition
            published_hv, hv_source = (PAPER_HV[dataset],
                                       "the paper's HV table (kanx/analyze/paper/hypervolume_published.csv)")

    art = build_artifacts(
        runs,
        formats=formats,
        published=published,
        published_dataset=dataset,
        published_source=f"`{args.published.name}`" if args.published else "",
        published_hv=published_hv,
        published_hv_source=hv_source,
        hv_tol=args.hv_tol,
        paper=args.paper,
        short_runs=short_reading_runs(args.root, runs, horizons),
    )
    report_path = write_artifacts(art, args.out or args.root, formats)
    bad: list = []
    if args.curves:
        shown, drawn, bad = append_curves(report_path, runs, args.root, args.out or args.root,
                                          per_run=args.curves == "all")
        print(f"{shown} training-curve figures in {(args.out or args.root) / CURVES_DIR}"
              + (f" ({shown - drawn} unchanged since they were drawn)" if drawn < shown else ""))
        if bad:
            print(f"warning: {len(bad)} damaged training curve{'s' * (len(bad) > 1)} not drawn (report.md lists them; "
                  "the runs' records still count):")
            print("\n".join(f"  {folder}: {why}" for folder, why in bad[:10])
                  + (f"\n  ... and {len(bad) - 10} more" if len(bad) > 10 else ""))
    if args.draw:
        append_model_drawings(report_path, args.root, args.draw)
    curves = (f"; {len(bad)} of their training curves not drawn (damaged or changed since the done marker: "
              "the records count)") if bad else ""
    print(f"{len(runs)} records read, {len(skipped)} skipped (no done marker, unreadable, without the reading "
          f"asked for, or record.json or model.pt changed since its done marker){curves}")
    print(f"report: {report_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
