"""Everything the command writes, built in memory: table texts, figures and ``report.md``.

`build_artifacts` is pure (no file is touched); `kanx.analyze.__main__` writes the result.
All links in the report are relative to the output folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import pandas as pd
from matplotlib.figure import Figure

from kanx.confdir import QUICK_TRY

from . import published as pub
from .aggregate import (
    log_ratio_summary,
    log_ratios,
    missing_cells,
    paired_panels,
    seed_medians,
    ungated_structure_check,
)
from .figures import PARETO_COLUMNS, log_ratio_figure, pareto_figure, pareto_runs
from .hypervolume import REF_SCALE, condition_hypervolumes, hv_problem_table, hv_table
from .inputs import selected_inputs_section
from .labels import (
    CONDITIONS,
    STATUSES,
    family_label,
    group_label,
    problem_label,
    sort_datasets,
    sort_families,
)
from .readings import horizon_label, short_reading_section, spread_note
from .tables import (
    CSV_FLOAT,
    absolute_caption,
    absolute_csv,
    absolute_latex,
    absolute_markdown,
    absolute_table,
    cell_counts_markdown,
    format_beta,
    has_others,
    hv_caption,
    hv_csv,
    hv_latex,
    hv_markdown,
    log_ratio_markdown,
    markdown_table,
)

STATUS_TEXT = """\
Treatment of run statuses: `ok` and `collapsed` runs are used in medians, log-ratios and \
hypervolumes (a collapsed model is a real, if constant, predictor with 0 contributing edges \
and depth 0). `diverged` and `failed` runs are left out of those statistics but counted: \
every cell shows n = usable/total runs. A usable run whose test RMSE is null (non-finite) \
counts as RMSE = inf. Only records with a `done` marker count; when two records share \
(dataset, condition, beta, seed), the one with the newest `done` marker is used."""

PARETO_TEXT = """\
Per dataset, the runs (every beta and seed) that no other run of the same condition beats in \
both test RMSE and contributing edges, joined as a staircase per condition; a marker's shape \
is the run's depth (an X: depth 0, a collapsed run). The legend gives each condition's \
normalized hypervolume from the table above, which is computed from the seed-medians in \
(RMSE, edges, depth), not from these points; Baseline and F have none (–). Usable runs with a \
finite RMSE only."""

LOG_RATIO_TEXT = """\
Points: mean over seeds of log10(baseline / condition), for test RMSE (A) and contributing \
edges (B); positive means lower RMSE or fewer edges than the baseline. Seed s of a condition \
is paired with seed s of the Baseline of the same dataset (Nguyen problem); a pair is dropped, \
and counted, when either run is missing or not usable, or when either value is 0 or not finite \
(e.g. the 0 edges of a collapsed run). Error bars: +-1 SEM (sample std, ddof=1, over the \
pairs / sqrt(pairs)); none with fewer than two pairs. Nguyen is pooled over all pairs of its \
problems. Cells read (pairs/runs)."""


OTHERS_GRID_TEXT = """ \
Other factor sets than the paper's eight (with N or I), listed after them in every table and figure: at \
the betas each was run or launched at in the family; they add no beta to the paper's eight."""


NO_PAIRS_TEXT = """\
No figure: no condition here has a Baseline run of the same dataset and seed to pair with (analyse \
the sweeps together with their Baseline, e.g. the whole results root)."""


CONFIG_MIX_TEXT = """\
A cell pools only runs of one config: the resolved config without beta, seed and the keys that \
do not change a run's numbers (`kanx.identity`). These cells hold records of more than one; each \
keeps the config that covers the most seeds (ties: the one with the newest `done` marker), and \
the records of the others are left out of every statistic. To see them, analyze their folders \
separately. Differences read kept vs left out."""


def config_mix_line(mix: dict, at_most: int | None = None) -> str:
    """One cell's left-out config: the cell, what differs, the sweep folders of the records kept
    and the left-out run folders (``at_most`` of them, for the terminal; all in the report)."""

    def folders(paths, up: int) -> list[str]:
        return sorted({"/".join(p.split("/")[:-up]) or "." for p in paths})

    left = folders(mix["left_out"], 1)
    shown = left if at_most is None else left[:at_most]
    more = f", +{len(left) - len(shown)} more" if len(left) > len(shown) else ""
    cell = f"{group_label(mix['dataset'])}, {mix['condition']}, β = {format_beta(mix['beta'])}"
    kept = ", ".join(f"`{f}/`" for f in folders(mix["kept"], 2))
    return (f"{cell}: {mix['differs']}; kept {len(mix['kept'])} (in {kept}), left out {len(left)}: "
            + ", ".join(f"`{f}`" for f in shown) + more)


@dataclass
class Artifacts:
    """Relative path -> text, relative stem -> figure (saved once per format), the report."""

    texts: dict[str, str] = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)
    report: str = ""


def _links(stem: str, exts: Sequence[str]) -> str:
    return " · ".join(f"[{ext}]({stem}.{ext})" for ext in exts)


def _figure_lines(stem: str, alt: str, formats: Sequence[str], numbers: str) -> list[str]:
    """The PNG shown inline (when written), links to every format, then to the numbers."""
    lines = [f"![{alt}]({stem}.png)", ""] if "png" in formats else []
    figure = f"Figure: {_links(stem, formats)} · " if formats else ""
    return [*lines, f"{figure}Numbers: {numbers}", ""]


def _reading_text(horizon) -> str:
    return horizon_label(horizon) + ("" if horizon == "whole" else " tiling the test segment")


def _rollout_note(horizon, datasets: Sequence[str]) -> list[str]:
    if horizon is None:
        return []
    if isinstance(horizon, Mapping):
        shown = [d for d in datasets if d in horizon]
        if not shown:
            return []
        each = "; ".join(f"{group_label(d)} at {_reading_text(horizon[d])}" for d in shown)
        return ["Multi-step test RMSE of the dynamical systems at the paper's reading (the default, "
                f"`--rollout-horizon paper`): {each}, from each record's rollout curve (settled on the Baseline and F "
                "rows, docs/CALIBRATION.md); a record without that reading is skipped. kanx's own reading, the "
                "horizon each run was trained with, has its own section at the end.", ""]
    return [f"Multi-step test RMSE of the dynamical systems read at {_reading_text(horizon)} "
            f"(`--rollout-horizon {horizon}`), "
            "from each record's rollout curve; a record without that reading is skipped.", ""]


def _spread_notes(horizon, datasets: Sequence[str]) -> dict[str, str]:
    """Dataset -> the sentence on its reading's spread across CPUs (kanx.analyze.readings.spread_note),
    for the dynamical datasets read at a rung whose spread was measured."""
    notes = {d: spread_note(d, horizon.get(d) if isinstance(horizon, Mapping) else horizon) for d in datasets}
    return {d: note for d, note in notes.items() if note}


def _run_summary(runs: pd.DataFrame) -> str:
    used = runs[~runs["superseded"]]
    rows = []
    for dataset in sort_datasets(used["dataset"]):
        mine = used[used["dataset"] == dataset]
        counts = [int((mine["status"] == s).sum()) for s in STATUSES]
        rows.append([group_label(dataset), *map(str, counts), str(len(mine))])
    counts = [int((used["status"] == s).sum()) for s in STATUSES]
    rows.append(["**all**", *map(str, counts), str(len(used))])
    return markdown_table(["Dataset", *STATUSES, "total"], rows, "l" + "r" * (len(STATUSES) + 1))


def _quick_try_note(runs: pd.DataFrame) -> list[str]:
    """A warning above everything when runs of `+debug=quick` are counted: 20 epochs are a try
    of the pipeline, and their numbers read like results unless the report says otherwise."""
    counted = set(runs.loc[~runs["superseded"], "path"])
    quick = [path for path in runs.attrs.get("quick_tries", ()) if path in counted]
    if not quick:
        return []
    sweeps = sorted({str(PurePosixPath(path).parent.parent) for path in quick})
    return [f"**Quick tries, not results: {len(quick)} of the {len(counted)} runs counted are of `{QUICK_TRY}` "
            f"(conf/debug/quick.yaml: a few epochs, short warmups), a try of the pipeline, not the paper's protocol; "
            f"their numbers say nothing of a condition's accuracy.** Their sweeps: "
            f"{', '.join(f'`{s}`' for s in sweeps)}.", ""]


def _commits(runs: pd.DataFrame) -> str:
    commits = runs.loc[~runs["superseded"], "git_commit"].fillna("(none recorded)")
    counts = commits.value_counts()
    order = sorted(counts.index, key=lambda c: (-counts[c], c))
    return "\n".join(f"- `{c}`: {counts[c]} runs" for c in order) + "\n"


PAPER_TEXT = """\
Reproduced seed-medians beside the paper's published values (its appendix tables of absolute \
results and its HV table, shipped with kanx: `kanx/analyze/paper/`). A reproduced median is \
'in range' when, rounded to the precision the paper prints, it lies within the published \
[min, max] over seeds; outside, it is bold. 'Ungated structure exact': Baseline and F cells \
whose median contributing edges and depth equal the published ones."""


def _paper_section(
    medians: pd.DataFrame,
    hv: pd.DataFrame,
    hv_detail: pd.DataFrame,
    published: Mapping[str, pd.DataFrame],
    sources: Mapping[str, str],
    paper_hv: pd.DataFrame | None,
    user_hv: Mapping[str, Mapping[str, float]],
    user_hv_source: str,
    hv_tol: float,
    art: Artifacts,
    notes: Mapping[str, str],
) -> list[str]:
    """Fidelity summary, the HV table beside the paper's, and a comparison table per dataset
    that has published values (under it the dataset's spread note, if any)."""
    datasets = [d for d in sort_datasets(medians["dataset"]) if d in published]
    if not datasets:
        return []
    comparisons = {d: pub.compare_published(medians, published[d], d) for d in datasets}
    families = {d: medians.loc[medians["dataset"] == d, "family"].iloc[0] for d in datasets}
    fidelity = pub.fidelity_table(comparisons, families)
    art.texts["tables/fidelity.csv"] = fidelity.to_csv(index=False, lineterminator="\n")
    art.texts["tables/fidelity.md"] = pub.fidelity_markdown(fidelity, group_label)
    lines = ["## Beside the paper", "", PAPER_TEXT, "",
             "Share of cells (condition, β with both a reproduced and a published median) whose reproduced "
             "median lies in the published range, per measure:", "",
             art.texts["tables/fidelity.md"], _links("tables/fidelity", ("md", "csv")), ""]
    departures = pub.departures_markdown(families.values(), family_label)
    if departures:
        lines += ["The departures that remain in kanx's committed reproduction (results/paper), and what explains "
                  "each or what was tried (kanx/analyze/paper/departures.csv):", "", departures, ""]
    if paper_hv is not None:
        side = pub.hv_side_by_side(hv, paper_hv)
        if side.attrs["families"]:
            art.texts["tables/hypervolume_vs_paper.csv"] = side.to_csv(
                index=False, float_format=CSV_FLOAT, lineterminator="\n")
            art.texts["tables/hypervolume_vs_paper.md"] = pub.hv_side_by_side_markdown(side, family_label)
            over = ("all five families: the published Mean as printed" if side.attrs["all_families"] else
                    "the families present here only (" + ", ".join(family_label(f) for f in side.attrs["families"]) +
                    "), on both sides, so the published Mean differs from the paper's")
            lines += ["Normalized hypervolume, reproduced / published (Δ = reproduced − "
                      f"published); Mean over {over}; each side ranks the conditions by "
                      "its Mean (1 = best). Bold: best reproduced value per column.", "",
                      art.texts["tables/hypervolume_vs_paper.md"], _links("tables/hypervolume_vs_paper", ("md", "csv")),
                      ""]
    for dataset in datasets:
        cmp = comparisons[dataset]
        stem = f"tables/published_{dataset}"
        art.texts[f"{stem}.md"] = pub.comparison_markdown(cmp, published[dataset])
        art.texts[f"{stem}.csv"] = pub.comparison_csv(cmp)
        lines += [f"### {group_label(dataset)} beside the paper", "",
                  f"Published values: {sources[dataset]}; Δ = reproduced − published.", "",
                  *([notes[dataset], ""] if dataset in notes else []),
                  art.texts[f"{stem}.md"], _links(stem, ("md", "csv")), ""]
        if dataset in user_hv:
            mine = hv_detail[hv_detail["dataset"] == dataset]
            reproduced = dict(zip(mine["condition"], mine["hv_norm"], strict=True))
            cmp_hv = pub.compare_hv(reproduced, user_hv[dataset], hv_tol, pub.hv_from_published(published[dataset]))
            stem = f"tables/published_hv_{dataset}"
            art.texts[f"{stem}.md"] = pub.hv_comparison_markdown(cmp_hv)
            art.texts[f"{stem}.csv"] = pub.hv_comparison_csv(cmp_hv)
            lines += [
                f"Normalized hypervolume (published values: {user_hv_source}), tolerance ±{hv_tol:g}. "
                "'from publ. medians' recomputes the HV from the published medians with the same rules, to show how "
                "closely the published table reproduces its HV.",
                "",
                art.texts[f"{stem}.md"],
                _links(stem, ("md", "csv")),
                "",
            ]
    return lines


def _ungated_section(runs: pd.DataFrame) -> list[str]:
    """Baseline and F against their architecture: with no gates, every edge contributes."""
    check = ungated_structure_check(runs)
    if check.empty:
        return []
    rows = [[group_label(r.dataset), r.condition, r.width, str(r.n_runs), str(r.edges_expected), str(r.depth_expected),
             "match" if r.n_differ == 0 else f"**{r.n_differ} DIFFER**"] for r in check.itertuples()]
    bad = int((check["n_differ"] > 0).sum())
    verdict = ("Every ungated run has the architecture's contributing edges and depth." if bad == 0 else
               f"**{bad} cell(s) have runs whose structure differs from the architecture**: see the run table.")
    return ["## Ungated structure", "",
            "Baseline and F have no gates, so every edge of the architecture contributes (F: trunk and "
            "forward-connection edges) and the depth is the number of layers.", "",
            markdown_table(["Dataset", "Cond.", "Width", "Runs", "Edges (architecture)", "Depth", "Check"], rows,
                           "lllrrrl"),
            verdict, ""]


def build_artifacts(
    runs: pd.DataFrame,
    formats: Sequence[str] = ("png", "pdf"),
    published: pd.DataFrame | None = None,
    published_dataset: str | None = None,
    published_source: str = "given in code",
    published_hv: Mapping[str, float] | None = None,
    published_hv_source: str = "given in code",
    hv_tol: float = pub.HV_TOLERANCE,
    ref_scale: float = REF_SCALE,
    paper: bool = True,
    short_runs: pd.DataFrame | None = None,
) -> Artifacts:
    """All tables, figures and the report for the run table ``runs`` (see `load_runs`).

    ``paper``: set the paper's published values (package data) beside every dataset that has
    them; ``published`` (a table of `read_published`) replaces or adds those of
    ``published_dataset``, and ``published_hv`` compares that dataset's HV with given values.
    ``short_runs``: the dynamical systems' records at kanx's reading (as recorded), when ``runs``
    reads them at another; they get a section of their own (`short_reading_section`)."""
    art = Artifacts()
    medians = seed_medians(runs)
    datasets = sort_datasets(medians["dataset"])
    families = sort_families(medians["family"])
    nguyen = [d for d in datasets if medians.loc[medians["dataset"] == d, "family"].iloc[0] == "nguyen"]
    skipped = runs.attrs.get("skipped", [])
    mixes = runs.attrs.get("config_mixes", [])
    other_config = {p for m in mixes for p in m["left_out"]}
    superseded = [p for p in runs.loc[runs["superseded"], "path"] if p not in other_config]
    counted = int((~runs["superseded"]).sum())
    others = not medians["condition"].isin(CONDITIONS).all()  # records of other factor sets than the paper's eight
    notes = _spread_notes(runs.attrs.get("rollout_horizon"), datasets)

    art.texts["tables/runs.csv"] = runs.to_csv(index=False, lineterminator="\n")
    art.texts["tables/seed_medians.csv"] = medians.to_csv(index=False, float_format=CSV_FLOAT, lineterminator="\n")

    lines = [
        "# kanx analysis report",
        "",
        f"{counted} runs counted ({int(runs.loc[~runs['superseded'], 'usable'].sum())} usable) "
        f"in {len(datasets)} datasets; skipped records: {len(skipped)}; superseded duplicates: {len(superseded)}"
        f"{f'; **records of another config than their cell, left out: {len(other_config)}**' if other_config else ''}. "
        "Full run table: [tables/runs.csv](tables/runs.csv); seed-medians of every cell: "
        "[tables/seed_medians.csv](tables/seed_medians.csv).",
        "",
        *_quick_try_note(runs),
        "## Records",
        "",
        *_rollout_note(runs.attrs.get("rollout_horizon"), datasets),
        _run_summary(runs),
        STATUS_TEXT,
        "",
        "Git commits of the records:",
        "",
        _commits(runs),
    ]
    if skipped:
        lines += ["Skipped records (not counted anywhere):", ""]
        lines += [f"- `{path}`: {reason}" for path, reason in skipped] + [""]
    if superseded:
        lines += [
            "Superseded duplicates (a newer record of the same dataset, condition, beta and seed is used; "
            "if these are a different experiment, e.g. other hyperparameters, analyze their folders separately):",
            "",
        ]
        lines += [f"- `{path}`" for path in superseded] + [""]
    if mixes:
        cells = len({(m["dataset"], m["condition"], m["beta"]) for m in mixes})
        lines += [f"**Records of another config** ({len(other_config)} record{'s' * (len(other_config) > 1)} in "
                  f"{cells} cell{'s' * (cells > 1)}, not counted anywhere):", "", CONFIG_MIX_TEXT, ""]
        lines += [f"- {config_mix_line(m)}" for m in mixes] + [""]

    # Missing cells ------------------------------------------------------------------------
    missing = missing_cells(medians)
    lines += ["## Missing cells", ""]
    lines.append(
        "Expected grid per dataset: Baseline and F at beta 0; every gated condition at the union "
        "of the gated conditions' betas seen in its family."
        + (OTHERS_GRID_TEXT if others else "")
    )
    lines.append("")
    if missing.empty:
        lines += ["None: every expected cell has at least one record.", ""]
    else:
        rows = [[group_label(r.dataset), r.condition, format_beta(r.beta), "**missing**"] for r in missing.itertuples()]
        lines += [markdown_table(["Dataset", "Cond.", "β", ""], rows, "llll")]

    lines += _ungated_section(runs)

    # Hypervolume --------------------------------------------------------------------------
    hv = hv_table(medians, ref_scale)
    hv_detail = condition_hypervolumes(medians, ref_scale)
    art.texts["tables/hypervolume.md"] = f"{hv_caption(others=has_others(hv))}\n\n{hv_markdown(hv)}"
    art.texts["tables/hypervolume.tex"] = hv_latex(hv)
    art.texts["tables/hypervolume.csv"] = hv_csv(hv)
    art.texts["tables/hypervolume_detail.csv"] = hv_detail.to_csv(index=False,
                                                                  float_format=CSV_FLOAT, lineterminator="\n")
    lines += [
        "## Normalized hypervolume",
        "",
        art.texts["tables/hypervolume.md"],
        _links("tables/hypervolume", ("md", "tex", "csv")) + " · raw HVs and reference points: "
                                                             "[csv](tables/hypervolume_detail.csv)",
        "",
    ]
    if nguyen:
        hvp = hv_problem_table(medians, "nguyen", ref_scale)
        art.texts["tables/hypervolume_nguyen.md"] = (f"{hv_caption(True, has_others(hvp))}\n\n"
                                                     f"{hv_markdown(hvp, problems=True)}")
        art.texts["tables/hypervolume_nguyen.tex"] = hv_latex(hvp, problems=True)
        art.texts["tables/hypervolume_nguyen.csv"] = hv_csv(hvp)
        lines += [
            "Per Nguyen problem (the Nguyen column above is the Mean column here):",
            "",
            hv_markdown(hvp, problems=True),
            _links("tables/hypervolume_nguyen", ("md", "tex", "csv")),
            "",
        ]

    # Pareto fronts ------------------------------------------------------------------------
    lines += ["## Pareto fronts", "", PARETO_TEXT, ""]
    for dataset in datasets:
        front = pareto_runs(runs, dataset)
        hv_norm = dict(zip(*hv_detail.loc[hv_detail["dataset"] == dataset, ["condition", "hv_norm"]].T.to_numpy(),
                           strict=True))
        units = runs.loc[runs["dataset"] == dataset, "target_unit"].dropna().unique()
        stem = f"figures/pareto_{dataset}"
        art.figures[stem] = pareto_figure(front, hv_norm, f"{group_label(dataset)}: non-dominated runs per condition",
                                          unit=units[0] if len(units) == 1 else None)
        art.texts[f"tables/pareto_{dataset}.csv"] = front[list(PARETO_COLUMNS)].to_csv(
            index=False, float_format=CSV_FLOAT, lineterminator="\n")
        lines += [f"**{group_label(dataset)}**", ""]
        lines += _figure_lines(stem, f"Pareto fronts of test RMSE and contributing edges, {group_label(dataset)}",
                               formats, f"[csv](tables/pareto_{dataset}.csv)")

    # Log-ratios ---------------------------------------------------------------------------
    ratios = pd.concat([log_ratios(runs, "test_rmse"), log_ratios(runs, "contributing_edges")], ignore_index=True)
    art.texts["tables/log_ratios_per_seed.csv"] = ratios.to_csv(index=False,
                                                                float_format=CSV_FLOAT, lineterminator="\n")
    split = {m: ratios[ratios["metric"] == m] for m in ("test_rmse", "contributing_edges")}
    pooled = {m: log_ratio_summary(r, by="family") for m, r in split.items()}
    art.texts["tables/log_ratios.csv"] = pd.concat(pooled.values(), ignore_index=True).to_csv(
        index=False, float_format=CSV_FLOAT, lineterminator="\n"
    )
    art.texts["tables/log_ratios.md"] = log_ratio_markdown(*pooled.values(), family_label)
    panels = paired_panels(pooled, families)
    lines += ["## Accuracy and size relative to the baseline", "", LOG_RATIO_TEXT, ""]
    if panels:
        art.figures["figures/log_ratios"] = log_ratio_figure(*pooled.values(), panels, family_label,
                                                             max_cols=max(len(panels), 1),
                                                             conditions=medians["condition"])
        lines += _figure_lines(
            "figures/log_ratios",
            "Log-ratios of test RMSE (A) and contributing edges (B) vs. baseline",
            formats,
            _links("tables/log_ratios", ("md", "csv")) + " · per seed: [csv](tables/log_ratios_per_seed.csv)",
        )
    else:
        lines += [NO_PAIRS_TEXT, "", "Numbers: " + _links("tables/log_ratios", ("md", "csv")), ""]
    if len(panels) < len(families):
        lines += ["Not drawn (no condition paired with a Baseline run of the same seed): "
                  + ", ".join(family_label(f) for f in families if f not in panels) + ".", ""]
    lines.append(art.texts["tables/log_ratios.md"])
    if nguyen and "nguyen" in panels:
        nguyen_split = {m: r[r["family"] == "nguyen"] for m, r in split.items()}
        per = {m: log_ratio_summary(r, by="dataset") for m, r in nguyen_split.items()}
        art.texts["tables/log_ratios_nguyen.csv"] = pd.concat(per.values(), ignore_index=True).to_csv(
            index=False, float_format=CSV_FLOAT, lineterminator="\n"
        )
        art.texts["tables/log_ratios_nguyen.md"] = log_ratio_markdown(*per.values(), problem_label)
        art.figures["figures/log_ratios_nguyen"] = log_ratio_figure(
            *per.values(), paired_panels(per, nguyen), lambda d: f"Nguyen {problem_label(d)}", max_cols=5,
            conditions=medians.loc[medians["family"] == "nguyen", "condition"],
        )
        lines += [
            "Nguyen, per problem:",
            "",
            *_figure_lines(
                "figures/log_ratios_nguyen",
                "Log-ratios per Nguyen problem",
                formats,
                _links("tables/log_ratios_nguyen", ("md", "csv")),
            ),
        ]

    # Absolute tables ----------------------------------------------------------------------
    lines += ["## Absolute results", ""]
    for dataset in datasets:
        table = absolute_table(medians, dataset)
        stem = f"tables/absolute_{dataset}"
        caption, markdown = absolute_caption(table, dataset), absolute_markdown(table)
        note = [notes[dataset], ""] if dataset in notes else []
        art.texts[f"{stem}.md"] = "\n\n".join([caption, *note[:1], markdown])
        art.texts[f"{stem}.tex"] = absolute_latex(table, dataset)
        art.texts[f"{stem}.csv"] = absolute_csv(table)
        lines += [
            f"### {group_label(dataset)}",
            "",
            caption,
            "",
            *note,
            "Runs per cell (usable/total):",
            "",
            cell_counts_markdown(medians, dataset),
            markdown,
            _links(stem, ("md", "tex", "csv")),
            "",
        ]

    lines += selected_inputs_section(runs, art.texts)

    # Published ----------------------------------------------------------------------------
    tables = {d: t for d in datasets if paper and (t := pub.paper_published(d)) is not None}
    sources = dict.fromkeys(tables, "the paper's table")
    if published is not None:
        if published_dataset is None:
            raise ValueError("published values need the dataset they belong to")
        if not paper:
            tables = {}
        tables[published_dataset], sources[published_dataset] = published, published_source
    lines += _paper_section(medians, hv, hv_detail, tables, sources, pub.paper_hv() if paper else None,
                            {published_dataset: published_hv} if published is not None
                            and published_hv is not None else {}, published_hv_source, hv_tol, art, notes)
    if short_runs is not None:
        lines += short_reading_section(runs[~runs["superseded"]], short_runs, formats, art.texts,
                                       art.figures, _figure_lines, _links)

    art.report = "\n".join(lines).rstrip("\n") + "\n"
    return art
