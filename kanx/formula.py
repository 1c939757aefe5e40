"""From a pruned KAN to a formula: the command line of the symbolic export of a trained run.

    python -m kanx.formula RUN_DIR [--tolerance T] [--simplicity L] [--primitives x,x^2,sin,...]
    kanx.load_run(RUN_DIR).formula()        # the same, as a Formula object

How the formula is built: kanx.symbolic (the network's contributing edges composed in sympy,
the tolerance) and kanx.symbolic_fit (the primitive library, each edge's fit and its score).
This module reads the run (kanx.load) and writes the files.

Output: a per-edge table (primitive, R^2), the formula (expanded by sympy, and with
--sympy-simplify also through sympy.simplify, which takes seconds to minutes; printed with 4
significant digits, more where rounding would move it by over 1e-3 std(y_train) on the
training inputs), its test RMSE next to the network's, and, in the run folder, formula.json,
formula.tex and formula.png (each edge's learned curve with its fit overlaid).
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import sympy as sp

from kanx.cli import ArgumentParser, prog
from kanx.errors import ConfigError, report
from kanx.load import formula_of_run, load_finished_run
from kanx.symbolic import Formula, node_name, round_floats, symbol_names
from kanx.symbolic_fit import DEFAULT_PRIMITIVES, SIMPLICITY, check_options


def to_latex(f: Formula) -> str:
    lines = ["% kanx.formula: symbolic export (python -m kanx.formula RUN_DIR)", "\\begin{align}"]
    eqs = [f"{sp.latex(sp.Symbol(symbol_names([n])[0]))} &= {sp.latex(round_floats(e, f.digits))}"
           for n, e in zip(f.output_names, f.simplified, strict=True)]
    lines += [" \\\\\n".join(eqs), "\\end{align}", "", "\\begin{tabular}{llllr}",
              "edge & from & to & primitive & $R^2$ \\\\ \\hline"]
    for row in f.edge_table():
        r2 = "" if row["r2"] is None else f"{row['r2']:.6f}"
        lines.append(f"\\texttt{{{row['edge'].replace('_', chr(92) + '_')}}} & "
                     f"{row['src'].replace('_', chr(92) + '_')} & {row['dst'].replace('_', chr(92) + '_')} & "
                     f"{row['primitive'].replace('^', chr(92) + '^{}')} & {r2} \\\\")
    lines.append("\\end{tabular}")
    m = f.metrics
    if m.get("test_rmse_network") is not None:
        lines += ["", f"% test RMSE: formula {m['test_rmse_formula']:.6g}, network {m['test_rmse_network']:.6g}"]
    for row in f.edge_table():
        if "table" in row:
            lines += ["", f"% {row['edge']} kept numeric: spline table (x, z*phi(x))", "\\begin{tabular}{rr}",
                      "$x$ & $\\phi(x)$ \\\\ \\hline"]
            lines += [f"{a:.5g} & {b:.5g} \\\\" for a, b in zip(row["table"]["x"], row["table"]["y"], strict=True)]
            lines.append("\\end{tabular}")
    return "\n".join(lines) + "\n"


def figure(f: Formula, ncols: int = 4):
    """Each contributing edge's learned curve z*phi(x) with its fitted primitive overlaid."""
    from matplotlib.figure import Figure

    edges = f.edges
    ncols = max(1, min(ncols, len(edges)))
    nrows = max(1, -(-len(edges) // ncols))
    fig = Figure(figsize=(3.1 * ncols, 2.5 * nrows + 0.9))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.ravel()[len(edges):]:
        ax.set_axis_off()
    for ax, e in zip(axes.ravel(), edges, strict=False):
        src, dst = node_name(e.src, f.input_names), node_name(e.dst, f.output_names)
        color = "#e66100" if e.forward else "#1f5fbf" if e.dst[0] == "y" else "#2b2b2b"
        if e.constant:
            ax.axhline(e.ys[0], color=color)
            ax.set_title(f"{src} → {dst}\nconstant {e.ys[0]:+.4g} (bias)", fontsize=8)
            continue
        ax.plot(e.xs, e.ys, color=color, lw=2.2, label="learned z·φ")
        fit = e.fit
        label = "spline (numeric)" if e.numeric else f"{fit.primitive}"
        ax.plot(e.xs, fit.numpy(e.xs), color="black", ls="--", lw=1.1, label=f"fit: {fit.primitive}")
        r2 = f"R²={fit.r2:.5f}"
        ax.set_title(f"{src} → {dst}: {label}\n{r2}" + (" (kept numeric)" if e.numeric else ""), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, frameon=False)
    m = f.metrics
    head = f"exit {f.exit}: " + "; ".join(f"{n} = {p}" for n, p in zip(f.output_names, f.printed, strict=True))
    if len(head) > 150:
        head = head[:147] + "..."
    if m.get("test_rmse_network") is not None:
        head += f"\ntest RMSE formula {m['test_rmse_formula']:.3g} vs network {m['test_rmse_network']:.3g}"
    fig.suptitle(head, fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig


def write(f: Formula, out_dir: str | Path, figure_formats: Sequence[str] = ("png",)) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "formula.json", out_dir / "formula.tex"]
    paths[0].write_text(json.dumps(f.as_dict(), indent=1, default=float) + "\n")
    paths[1].write_text(to_latex(f))
    if figure_formats:
        fig = figure(f)
        for fmt in figure_formats:
            path = out_dir / f"formula.{fmt}"
            fig.savefig(path, dpi=150, format=fmt, facecolor="white")
            paths.append(path)
    return paths


PROG = "kanx.formula"


def main(argv: Sequence[str] | None = None) -> int:
    p = ArgumentParser(
        prog=prog("kanx.formula"),
        description="Symbolic export of a trained run: one formula from its contributing edges.")
    p.add_argument("run_dir", help="a finished run's directory (record.json, done, model.pt)")
    p.add_argument("--tolerance", type=float, default=None,
                   help="keep the formula within this RMSE of the network on the training inputs, in units of "
                        "std(y_train): edges are kept numeric (spline tables) until it is; a number >= 0 (default: "
                        "off, every edge symbolic)")
    p.add_argument("--simplicity", type=float, default=SIMPLICITY,
                   help=f"complexity penalty of the score, a number >= 0 (default {SIMPLICITY})")
    p.add_argument("--primitives", default=",".join(DEFAULT_PRIMITIVES), help="comma-separated library (default: all)")
    p.add_argument("--sympy-simplify", action="store_true",
                   help="also pass the expanded expression through sympy.simplify (slow)")
    p.add_argument("--out", help="folder for formula.json/.tex/.png (default: RUN_DIR)")
    p.add_argument("--no-figure", action="store_true", help="skip formula.png")
    args = p.parse_args(argv)
    primitives = [s.strip() for s in args.primitives.split(",") if s.strip()]
    try:
        check_options(primitives, args.simplicity, args.tolerance)
        run = load_finished_run(args.run_dir)  # as kanx.draw reads it
    except ConfigError as e:
        return report(PROG, e)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            f = formula_of_run(run, primitives=primitives, simplicity=args.simplicity, tolerance=args.tolerance,
                               full_simplify=args.sympy_simplify)
    except (ValueError, OSError) as e:  # data that cannot be rebuilt or do not match
        return report(PROG, e if isinstance(e, ConfigError) else f"{type(e).__name__}: {e}")
    print(f.report())
    for path in write(f, args.out or args.run_dir, () if args.no_figure else ("png",)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
