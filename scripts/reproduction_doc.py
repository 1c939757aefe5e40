"""Regenerate docs/REPRODUCTION.md from the committed Concrete records and the published values.

    python scripts/reproduction_doc.py [--results results/paper-refit256/concrete]
                                       [--today results/paper/concrete]
                                       [--published ../shared/calibration/concrete_published.csv]

Runs the analysis (tables and figures under RESULTS/analysis), then writes
docs/REPRODUCTION.md: how many runs exist, the reproduced medians next to the published ones,
the hypervolume comparison, and, appended verbatim, the hand-written account in
docs/journal/reproduction-notes.md; then the same comparison for the factorial at today's defaults
(--today, with docs/journal/reproduction-notes-today.md) and the other families (--families, with
docs/journal/reproduction-notes-families.md). No number in the generated part is typed by hand.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from kanx.analyze import load_runs
from kanx.analyze.aggregate import ungated_structure_check
from kanx.analyze.labels import GATED, UNGATED, group_label
from kanx.analyze.readings import horizon_label, paper_readings
from kanx.confdir import conf_dir
from kanx.config import ADDED_LATER
from kanx.record import Record
from kanx.vocab import CONDITIONS, NGUYEN_PROBLEMS, PAPER_DATASETS, RECORD

ROOT = Path(__file__).resolve().parents[1]


def checks(table: pd.DataFrame) -> list[str]:
    """The issue's acceptance points, read off the reproduced-vs-published table."""
    have = table[table["n_used"] > 0]
    lines = []
    for c in UNGATED:
        r = have[have["condition"] == c]
        if r.empty:
            lines.append(f"- {c}: no runs yet.")
            continue
        r = r.iloc[0]
        same = r.edges_reproduced == r.edges_published and r.depth_reproduced == r.depth_published
        lines.append(f"- {c} contributing edges {r.edges_reproduced:g} (paper {r.edges_published:g}) and depth "
                     f"{r.depth_reproduced:g} (paper {r.depth_published:g}): {'match' if same else 'DIFFER'}.")
        if c == "Baseline":
            lines.append(f"- Baseline median test RMSE {r.rmse_reproduced:.2f} MPa inside the published "
                         f"[min, max]: {'yes' if r.rmse_in_range else 'NO'}.")
    gated = have[have["condition"].isin(GATED)]
    total = int(table["condition"].isin(GATED).sum())
    if len(gated):
        for m, name in (("edges", "contributing edges"), ("rmse", "test RMSE"), ("depth", "depth")):
            inside = int(gated[f"{m}_in_range"].astype(bool).sum())
            lines.append(f"- Gated cells whose median {name} lies in the "
                         f"published [min, max]: {inside} of {len(gated)}.")
    lines.append(f"- Gated (condition, beta) cells with runs: {len(gated)} of {total}.")
    return lines


def hv_caveat(table: pd.DataFrame) -> list[str]:
    """Normalized HVs share a reference point and a maximum over all gated conditions, so they
    are comparable with the paper's only once every gated cell has runs."""
    gated = table[table["condition"].isin(GATED)]
    missing = gated[gated["n_used"] == 0]
    if missing.empty:
        return []
    have = sorted(set(gated["condition"]) - set(missing["condition"]), key=list(gated["condition"]).index)
    return [f"Not comparable yet: {len(missing)} of {len(gated)} gated cells have no runs, and the reproduced "
            f"values are normalized over the conditions that have some ({', '.join(have) or 'none'}). "
            "The reference point and the normalizing maximum change as the rest arrive.", ""]


def read_records(results: Path) -> list[dict]:
    return [Record.read(path.parent).fields for path in results.rglob(RECORD)]


def refit_line(records: list[dict]) -> str:
    """How these records refit the grid after an update: the one protocol setting that differs
    from today's default in the committed Concrete factorial."""
    seen = set()
    for record in records:
        model = (record.get("config") or {}).get("model") or {}
        seen.add(model.get("grid_refit_points", ADDED_LATER["model.grid_refit_points"]))
    text = ", ".join("all samples (pykan)" if p is None else f"{p} order statistics per input"
                     for p in sorted(seen, key=str))
    return (f"Grid refit after a grid update in these records: {text}. Today's default (`model.grid_refit_points`) is "
            "all samples, as pykan (docs/CALIBRATION.md, 'Grid refit on all samples or on 256 order statistics').")


def trained_on(records: list[dict]) -> list[str]:
    """The devices the records were trained on (timing.device, without the card's name)."""
    return sorted({str(device).split(" (")[0] for r in records if (device := (r.get("timing") or {}).get("device"))})


def expected_runs(dataset: str, seeds: int = 10) -> dict[str, int]:
    """Runs per condition at full protocol: the dataset's betas (conf/dataset) x 10 seeds for the
    gated conditions, 10 seeds for Baseline and F."""
    betas = OmegaConf.load(conf_dir() / "dataset" / f"{dataset}.yaml").dataset.betas
    return {c: seeds * (1 if c in UNGATED else len(betas)) for c in CONDITIONS}


def progress_table(runs: pd.DataFrame, datasets) -> str:
    """Finished runs (any status) against the full protocol, per dataset and condition."""
    done = runs.groupby(["dataset", "condition"]).size() if not runs.empty else pd.Series(dtype=int)
    rows = []
    for d in datasets:
        want = expected_runs(d)
        have = {c: int(done.get((d, c), 0)) for c in CONDITIONS}
        rows.append({"dataset": d, **{c: f"{have[c]}/{want[c]}" for c in CONDITIONS},
                     "all": f"{sum(have.values())}/{sum(want.values())}"})
    return pd.DataFrame(rows).to_markdown(index=False)


def paper_reading_text() -> str:
    """The paper's reading of each dynamical system, from kanx/analyze/paper/readings.csv."""
    return "; ".join(f"{group_label(d)}: {horizon_label(h)}" for d, h in paper_readings().items())


def families_part(results: Path) -> list[str]:
    """The four families beyond Concrete (issue #17): what has run at full protocol under
    ``results``, and the analysis of it (tables and figures under RESULTS/analysis)."""
    analysis = results / "analysis"
    rc = subprocess.call([sys.executable, "-m", "kanx.analyze", str(results), "--out", str(analysis), "--formats",
                          "png"])
    if rc != 0:
        raise SystemExit(rc)
    runs = load_runs(results)
    others = [d for d in PAPER_DATASETS if d != "concrete"]
    report = analysis / "report.md"
    lines = ["# The other families: Nguyen F1-F10, Ikeda, Ecosystem, Superconductor", "",
             f"Generated by `python scripts/reproduction_doc.py` from the records under `{results}` "
             "(today's defaults, full protocol; `make reproduce-tables DATASETS=... "
             "RESULTS=results/paper` adds to them, skipping finished runs). The analysis sets the "
             "paper's published values beside kanx's for every dataset (report.md, 'Beside the "
             "paper'); the fidelity summary and the HV table beside the paper's are copied below.", "",
             "## Runs at full protocol so far", "",
             "Finished runs (any status) / runs of the full protocol (the "
             "dataset's betas x 10 seeds; Baseline and F: 10 seeds).", "",
             progress_table(runs, others), "",
             f"The whole analysis of these records: [{report}]({Path('..') / report}) (records, missing cells, the "
             "ungated-structure check, hypervolumes, log-ratio figures, absolute tables).", ""]
    if runs.empty:
        return lines
    check = ungated_structure_check(runs)
    if not check.empty:
        check = check.assign(check=["match" if n == 0 else f"{n} DIFFER"
                                    for n in check["n_differ"]]).drop(columns="n_differ")
        lines += ["## Ungated structure (Baseline: every trunk edge; F: every trunk and forward-connection edge)", "",
                  check.to_markdown(index=False), ""]
    hv = analysis / "tables" / "hypervolume.md"
    if hv.exists():
        gated = runs[runs["condition"].isin(GATED)].groupby("dataset")["condition"].nunique()
        partial = [d for d, n in gated.items() if n < len(GATED)]
        caveat = ([f"Not final: {', '.join(partial)} {'has' if len(partial) == 1 else 'have'} runs for fewer than the "
                   "six gated conditions, and a dataset's hypervolumes are normalized by its best condition among "
                   "those present, so they change as the rest arrive.", ""] if partial else [])
        seeds = runs.groupby("dataset")["seed"].nunique()
        few = [f"{d} ({n})" for d, n in seeds.items() if n < 10]
        if few:
            caveat += [f"Seeds per dataset below the protocol's 10, so medians over fewer: {', '.join(few)}.", ""]
        nguyen = [d for d in NGUYEN_PROBLEMS if d in seeds.index]
        if 0 < len(nguyen) < len(NGUYEN_PROBLEMS):
            caveat += [f"Nguyen: the column averages the problems with records, {len(nguyen)} of "
                       f"{len(NGUYEN_PROBLEMS)} ({', '.join(nguyen)}).", ""]
        lines += ["## Normalized hypervolume (the paper's layout)", "", *caveat, hv.read_text(), ""]
    for name, title in (("fidelity", "How close kanx comes: reproduced medians inside the published [min, max]"),
                        ("hypervolume_vs_paper",
                         "Normalized hypervolume beside the paper's (reproduced / published (Δ))")):
        table = analysis / "tables" / f"{name}.md"
        if table.exists():
            lines += [f"## {title}", "", f"All five families, from the records under `{results}`; the Ikeda "
                                         "and Ecosystem RMSE is the paper's reading "
                                         f"({paper_reading_text()}; settled on the Baseline and F rows: "
                                         "docs/CALIBRATION.md); records without that rung are left out.", "",
                      table.read_text(), ""]
    short = analysis / "tables" / "short" / "hypervolume.md"
    if short.exists():
        hidden = [line for line in report.read_text().splitlines() if "paper's reading hides" in line
                  or line.startswith("No cell loses")]
        lines += ["## kanx's reading of Ikeda and Ecosystem (the horizon each run was trained with: 10 and 50 steps)",
                  "",
                  "Long rollouts approach the saturation of a free run whatever the model; the short reading shows "
                  f"what a condition loses. From the same records ({report}, the section on kanx's reading).", "",
                  "Normalized hypervolume at both readings:", "", short.read_text(), "", *hidden, ""]
    for d in others:
        table = analysis / "tables" / f"absolute_{d}.md"
        if table.exists():
            lines += [f"## {d}: absolute results (median [min, max] over seeds)", "", table.read_text(), ""]
    return lines


def concrete_part(results: Path, published: str, title: str, intro: str) -> list[str]:
    """The published comparison for one results root of the Concrete factorial: checks, runs per
    condition, reproduced-vs-published medians and hypervolumes (tables under RESULTS/analysis)."""
    analysis = results / "analysis"
    rc = subprocess.call([sys.executable, "-m", "kanx.analyze", str(results), "--out", str(analysis),
                          "--published", published, "--published-dataset", "concrete"])
    if rc != 0:
        raise SystemExit(rc)
    runs = load_runs(results)
    counts = runs.groupby(["condition", "status"]).size().unstack(fill_value=0)
    commits = sorted({str(c) for c in runs["git_commit"].dropna()}) if "git_commit" in runs else []
    raw = read_records(results)
    devices = trained_on(raw)
    sub = "#" * (len(title) - len(title.lstrip("#")) + 1)  # one level below the title
    tables = analysis / "tables"
    comparison = pd.read_csv(tables / "published_concrete.csv")
    rel = lambda path: Path("..") / path if not Path(path).is_absolute() else path  # noqa: E731  (links from docs/)
    return [
        title,
        "",
        intro,
        f"Records: {len(runs)}; kanx commits: "
        f"{', '.join(commits) or 'n/a'}" + (f"; devices: {', '.join(devices)}." if devices else "."),
        refit_line(raw),
        "",
        f"{sub} Checks",
        "",
        *checks(comparison),
        "",
        f"{sub} Runs per condition and status",
        "",
        counts.to_markdown(),
        "",
        f"{sub} Reproduced vs published (median over seeds)",
        "",
        (tables / "published_concrete.md").read_text(),
        "",
        f"{sub} Normalized hypervolume",
        "",
        *hv_caveat(comparison),
        (tables / "published_hv_concrete.md").read_text(),
        "",
        f"Absolute table: [{tables / 'absolute_concrete.md'}]({rel(tables / 'absolute_concrete.md')}); "
        "log-ratio figure: "
        f"[{analysis / 'figures' / 'log_ratios.png'}]({rel(analysis / 'figures' / 'log_ratios.png')}).",
        "",
    ]


ON_ANOTHER_MACHINE = """\
**On another machine.** Training and scoring are bit for bit the same on the same machine. On
another CPU, `python -m kanx.evaluate results/paper` checks every record against its weights
(docs/RECORDS.md, "Rescoring on another machine"): counts (edges, depth, exit) are identical, errors
agree within 1% (Concrete's ill-conditioned models move by up to 0.2%, the other
families' by about 1e-8 of the targets' standard deviation), and the long rollouts of Ikeda
and Ecosystem, which the chaos of those systems turns into a statistic of the CPU's last bits,
agree within the spread of the same rollouts started one ulp apart. The tables below are read
from the records, not rescored, so they are the same everywhere; the seed-medians of the dynamical
RMSEs at the paper's reading would move by up to ±0.009 (Ikeda) and ±0.002 (Ecosystem) had the
runs been scored on another CPU, as printed under those tables (docs/CALIBRATION.md, "The reading's
spread across machines")."""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="results/paper-refit256/concrete")
    p.add_argument("--today", default="results/paper/concrete",
                   help="the Concrete factorial at today's defaults, compared the same way (skipped if absent)")
    p.add_argument("--published", default=str(ROOT.parent / "shared" / "calibration" / "concrete_published.csv"))
    p.add_argument("--families", default="results/paper",
                   help="records of the other four families (full protocol, today's defaults)")
    p.add_argument("--out", default="docs/REPRODUCTION.md")
    a = p.parse_args(argv)
    results = Path(a.results)
    text = concrete_part(results, a.published, "# Reproducing the paper on Concrete",
                         "Generated by `python scripts/reproduction_doc.py` from the records under "
                         f"`{results}` and the published values (`shared/calibration/concrete_published.csv`).\n\n"
                         + ON_ANOTHER_MACHINE)
    notes = ROOT / "docs" / "journal" / "reproduction-notes.md"
    if notes.exists():
        text += ["---", "", notes.read_text()]
    today = Path(a.today)
    if today.is_dir() and today.resolve() != results.resolve():
        text += ["---", "", *concrete_part(
            today, a.published, "## The same factorial at today's defaults",
            f"Generated from the records under `{today}`: the protocol `make reproduce-tables` runs now. Its "
            "configuration differs from the records above in the grid refit only (all samples, as pykan; see the "
            "refit line); these ran on a GPU (CUDA graphs), those on this CPU.")]
        today_notes = ROOT / "docs" / "journal" / "reproduction-notes-today.md"
        if today_notes.exists():
            text += [today_notes.read_text()]
    families = Path(a.families)
    if families.is_dir():
        text += ["---", "", *families_part(families)]
        family_notes = ROOT / "docs" / "journal" / "reproduction-notes-families.md"
        if family_notes.exists():
            text += [family_notes.read_text()]
    Path(a.out).write_text("\n".join(text))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
